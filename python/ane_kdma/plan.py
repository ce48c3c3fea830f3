"""The split planner: which fp16 weights land in the notch, and how to split them.

A weight W[Cin, Cout] (as in X[1,Cin] x W[Cin,Cout]) spreads its Cout output
channels evenly over the 16 cores; each core streams Cin x Cout/16 x 2 bytes.
A split along Cout into S parts gives S tasks of Cout/S channels each, issued
back to back (the workaround the article measured). Cout/S must stay a
multiple of 16 so every core keeps an equal share.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ane_kdma.engines import cycles
from ane_kdma.errors import InputError
from ane_kdma.hw import LINE_BYTES, NUM_CORES_MAX, CreditMode, lap_and_offset
from ane_kdma.profile import Profile

FP16_BYTES = 2
MAX_SPLIT = 64
# A weight counts as affected when the buggy core takes this much longer than
# the fixed one would; below it the notch is lost in the noise of Table A.
AFFECTED_EXCESS = 0.05


@dataclass(frozen=True)
class Shape:
    cin: int
    cout: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", text)
        if not m:
            raise InputError(f"shape {text!r} is not CINxCOUT (e.g. 2048x4096)")
        cin, cout = int(m.group(1)), int(m.group(2))
        if cin <= 0 or cout <= 0:
            raise InputError(f"shape {text!r} has a zero dimension")
        if cout % NUM_CORES_MAX:
            raise InputError(f"shape {text!r}: Cout must be a multiple of {NUM_CORES_MAX} cores")
        if (cin * cout * FP16_BYTES // NUM_CORES_MAX) % LINE_BYTES:
            raise InputError(f"shape {text!r}: a core's share is not whole 64-byte lines")
        return cls(cin, cout)

    def bytes_per_core(self, parts: int = 1) -> int:
        return self.cin * (self.cout // parts) * FP16_BYTES // NUM_CORES_MAX

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


def _time(profile: Profile, mode: CreditMode, seq: list[int], engine: str) -> float:
    return profile.overhead_us + profile.us(cycles(engine, mode, profile.settings, [seq])[0])


def plan_shape(
    shape: Shape, profile: Profile, mode: CreditMode = CreditMode.SIGNED, engine: str = "model"
) -> PlanRow:
    """Smallest even split along Cout whose chunks all stream at fixed-hardware speed."""
    lines = shape.bytes_per_core() // LINE_BYTES
    k, x = lap_and_offset(lines)
    before = _time(profile, mode, [lines], engine)
    fixed = _time(profile, CreditMode.FIXED, [lines], engine)
    affected = before > fixed * (1 + AFFECTED_EXCESS)
    splits, after = 1, before
    if affected:
        for parts in range(2, MAX_SPLIT + 1):
            if shape.cout % (parts * NUM_CORES_MAX):
                continue
            chunk = shape.bytes_per_core(parts) // LINE_BYTES
            t = _time(profile, mode, [chunk] * parts, engine)
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
