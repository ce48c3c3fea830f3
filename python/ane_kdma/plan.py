"""The split planner: which fp16 weights land in the notch, and how to split them.

A weight W[Cin, Cout] (as in X[1,Cin] x W[Cin,Cout]) spreads its Cout output
channels evenly over the chip's cores; each core streams Cin x Cout/cores x 2
bytes.
A split along Cout into S parts gives S tasks of Cout/S channels each, issued
back to back (the workaround the article measured). Cout/S must stay a
multiple of the core count so every core keeps an equal share.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import lap_and_offset
from ane_kdma.hypotheses import Hypothesis

FP16_BYTES = 2
MAX_SPLIT = 64
# A weight counts as affected when the buggy core takes this much longer than
# the fixed one would; below it the notch is lost in the noise of Table A.
AFFECTED_EXCESS = 0.05


@dataclass(frozen=True)
class Shape:
    cin: int
    cout: int
    cores: int = 16

    @classmethod
    def parse(cls, text: str, chip: Chip) -> Shape:
        m = re.fullmatch(r"\s*([0-9]{1,9})\s*[xX*]\s*([0-9]{1,9})\s*", text)
        if not m:
            raise InputError(f"shape {text[:40]!r} is not CINxCOUT (e.g. 2048x4096)")
        cin, cout = int(m.group(1)), int(m.group(2))
        if cin <= 0 or cout <= 0:
            raise InputError(f"shape {text!r} has a zero dimension")
        if cout % chip.cores:
            raise InputError(f"shape {text!r}: Cout must be a multiple of {chip.cores} cores")
        if (cin * cout * FP16_BYTES // chip.cores) % chip.line_bytes:
            raise InputError(f"shape {text!r}: a core's share is not whole lines")
        if cin * cout * FP16_BYTES // chip.cores >= 1 << 32:
            raise InputError(f"shape {text!r}: a core's share exceeds the 32-bit size register")
        return cls(cin, cout, chip.cores)

    def bytes_per_core(self, parts: int = 1) -> int:
        return self.cin * (self.cout // parts) * FP16_BYTES // self.cores

    def __str__(self) -> str:
        return f"{self.cin}x{self.cout}"


@dataclass(frozen=True)
class PlanRow:
    shape: str
    bytes_per_core: int
    lines_per_core: int
    k: int
    x: int
    affected: bool
    splits: int
    chunk_bytes_per_core: int
    time_us_before: float
    time_us_after: float
    time_us_fixed: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _time(chip: Chip, h: Hypothesis, seq: list[int], engine: str) -> float:
    load = Workload.from_chunks([n * chip.line_bytes for n in seq], chip.cores, chip.line_bytes)
    return contract.run(engine, h, chip, load).time_us


def plan_shape(shape: Shape, chip: Chip, h: Hypothesis, engine: str = "model") -> PlanRow:
    """Smallest even split along Cout whose chunks all stream at fixed-hardware speed."""
    lb = chip.line_bytes
    lines = shape.bytes_per_core() // lb
    k, x = lap_and_offset(lines, chip.ring_lines)
    before = _time(chip, h, [lines], engine)
    fixed = _time(chip, hyps.get(hyps.FIXED), [lines], engine)
    affected = before > fixed * (1 + AFFECTED_EXCESS)
    splits, after = 1, before
    if affected:
        for parts in range(2, MAX_SPLIT + 1):
            if shape.cout % (parts * chip.cores):
                continue
            chunk = shape.bytes_per_core(parts) // lb
            t = _time(chip, h, [chunk] * parts, engine)
            if t <= fixed * (1 + AFFECTED_EXCESS):
                splits, after = parts, t
                break
        else:
            splits, after = 0, before  # no even split clears the notch
    return PlanRow(
        shape=str(shape),
        bytes_per_core=shape.bytes_per_core(),
        lines_per_core=lines,
        k=k,
        x=x,
        affected=affected,
        splits=splits,
        chunk_bytes_per_core=shape.bytes_per_core(splits) if splits else 0,
        time_us_before=round(before, 3),
        time_us_after=round(after, 3),
        time_us_fixed=round(fixed, 3),
    )
