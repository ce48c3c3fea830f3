"""The engine contract: tasks, workloads, results, and the one registry of engines.

Why one module: every analysis (validate, calibrate, sweep, plan, llm, replay)
speaks only these types and asks the registry for an engine by name, so an
engine can be swapped (closed form, cycle model, RTL) without the analysis
knowing. This module imports no engine; the registry names each engine's
module and imports it on first use. How many workloads run where (processes,
a cluster) is the runner's business (:mod:`ane_kdma.runner`), which sits
above this module: nothing here imports it.

* :class:`Task`: one core's share of a task descriptor, a byte address and a
  byte size, as the TD holds them.
* :class:`Workload`: for each core, a sequence of tasks issued back to back.
  The hardware issues task j to every enabled core at once (one descriptor
  per step), so every enabled core has the same number of tasks.
* :class:`Result`: the top's cycles (first accept to last line drained),
  per-core counters, and time and GB/s with the chip's overhead and DRAM
  ceiling applied by :meth:`ane_kdma.chip.Chip.time_us`, nowhere else.
* :class:`Engine`: ``run(hypothesis, chip, workload) -> Result``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, LINE_BYTES, MAX_CORES

if TYPE_CHECKING:
    from ane_kdma.chip import Chip
    from ane_kdma.hypotheses import Hypothesis

MAX_TASKS = 1 << 16  # tasks per core in one workload


@dataclass(frozen=True)
class Task:
    """One core's transfer: byte address and byte size (rounded up to whole lines)."""

    base_addr: int
    size_bytes: int

    def __post_init__(self) -> None:
        for name, v in (("base address", self.base_addr), ("size", self.size_bytes)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(f"task {name} {v!r} is not an integer")
        if not 0 <= self.base_addr < (1 << ADDR_BITS):
            raise InputError(f"base address {self.base_addr:#x} is not a 32-bit byte address")
        if not 0 <= self.size_bytes < (1 << ADDR_BITS):
            raise InputError(f"size {self.size_bytes} bytes is not a 32-bit byte count")

    def lines_of(self, line_bytes: int = LINE_BYTES) -> int:
        return -(-self.size_bytes // line_bytes)

    def base_line_of(self, line_bytes: int = LINE_BYTES) -> int:
        return self.base_addr // line_bytes

    @property
    def lines(self) -> int:  # the RTL's 64-byte lines
        return self.lines_of()

    @property
    def base_line(self) -> int:
        return self.base_line_of()


def split_lines(lines: int, parts: int) -> list[int]:
    """`parts` near-equal tasks, each a whole number of lines (the larger ones first)."""
    if parts < 1 or parts > lines:
        raise InputError(f"cannot split {lines} lines into {parts} tasks")
    base, extra = divmod(lines, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


@dataclass(frozen=True)
class Workload:
    """Per core, the tasks it is given back to back; None for a core that sits out."""

    cores: tuple[tuple[Task, ...] | None, ...]
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not 1 <= len(self.cores) <= MAX_CORES:
            raise InputError(f"{len(self.cores)} cores: a workload has 1..{MAX_CORES}")
        counts = {len(seq) for seq in self.cores if seq is not None}
        if not counts:
            raise InputError("a workload needs at least one enabled core")
        if len(counts) > 1:
            raise InputError(
                "every enabled core needs the same number of tasks (one descriptor per step)"
            )
        n = counts.pop()
        if not 1 <= n <= MAX_TASKS:
            raise InputError(f"{n} tasks per core (1..{MAX_TASKS})")
        for seq in self.cores:
            for t in seq or ():
                if not isinstance(t, Task):
                    raise InputError(f"not a task: {t!r}")
                if t.size_bytes == 0:
                    raise InputError("a workload task must move at least one byte")

    # ------------------------------------------------------------ views
    @property
    def enabled(self) -> list[int]:
        return [c for c, seq in enumerate(self.cores) if seq is not None]

    @property
    def steps(self) -> int:
        return len(next(seq for seq in self.cores if seq is not None))

    def bytes_total(self, line_bytes: int = LINE_BYTES) -> int:
        """Bytes the DMA moves: whole lines, as the hardware reads them."""
        return sum(t.lines_of(line_bytes) * line_bytes for seq in self.cores for t in seq or ())

    def lines_per_core(self, line_bytes: int = LINE_BYTES) -> list[int]:
        return [sum(t.lines_of(line_bytes) for t in seq) for seq in self.cores if seq is not None]

    # ------------------------------------------------------------ builders
    @classmethod
    def from_chunks(
        cls,
        chunk_bytes: Sequence[int],
        cores: int,
        line_bytes: int = LINE_BYTES,
        label: str = "",
    ) -> Workload:
        """Every one of `cores` cores streams the same chunks back to back (a plan's tasks).

        Core c's weights start at c x (its total), the layout of the published
        dumps (core i base = i x size); the chunks follow each other in memory.
        """
        if any(b <= 0 or b % line_bytes for b in chunk_bytes):
            raise InputError(f"task sizes must be positive whole {line_bytes}-byte lines")
        total = sum(chunk_bytes)
        if total >= 1 << ADDR_BITS:
            raise InputError(f"{total} bytes per core exceeds the 32-bit size register")
        if not 1 <= cores <= MAX_CORES:
            raise InputError(f"{cores} cores: a workload has 1..{MAX_CORES}")
        seqs = []
        for c in range(cores):
            base = (c * total) % (1 << ADDR_BITS)
            seq = []
            for b in chunk_bytes:
                seq.append(Task(base, b))
                base = (base + b) % (1 << ADDR_BITS)
            seqs.append(tuple(seq))
        return cls(tuple(seqs), label)

    @classmethod
    def from_size(
        cls, bytes_per_core: int, cores: int, split: int = 1, line_bytes: int = LINE_BYTES
    ) -> Workload:
        """`bytes_per_core` on each of `cores` cores, as `split` near-equal back-to-back tasks."""
        if bytes_per_core <= 0 or bytes_per_core % line_bytes:
            raise InputError(
                f"{bytes_per_core} bytes per core is not a positive multiple of "
                f"{line_bytes}-byte lines"
            )
        if bytes_per_core >= 1 << ADDR_BITS:
            raise InputError(f"{bytes_per_core} bytes per core exceeds the 32-bit size register")
        parts = split_lines(bytes_per_core // line_bytes, split)
        label = f"{bytes_per_core} B/core" + (f" in {split} tasks" if split > 1 else "")
        return cls.from_chunks([p * line_bytes for p in parts], cores, line_bytes, label)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class CoreCounters:
    """kdma_core's performance counters for one core (None: the engine does not model it)."""

    cycles: int
    zero_credit_cycles: int | None = None
    peak_inflight: int | None = None


@dataclass(frozen=True)
class Counters:
    """What the RTL's counters say after a workload: the top's span and each core's."""

    cycles: int
    cores: tuple[CoreCounters | None, ...]

    def mismatches(self, want: Counters, what: str = "RTL", ref: str = "model") -> list[str]:
        """Every counter that differs from `want`, as 'name: RTL x, model y' lines.

        The one comparison the TB class, the sequence runner and the pyuvm
        scoreboard share; a counter either side leaves as None is not compared.
        """
        out = []
        if self.cycles != want.cycles:
            out.append(f"cycles: {what} {self.cycles}, {ref} {want.cycles}")
        if len(self.cores) != len(want.cores):
            out.append(f"cores: {what} {len(self.cores)}, {ref} {len(want.cores)}")
            return out
        for c, (g, w) in enumerate(zip(self.cores, want.cores, strict=True)):
            if g is None or w is None:
                if (g is None) != (w is None):
                    out.append(f"core {c}: enabled in one, not the other")
                continue
            for name in ("cycles", "zero_credit_cycles", "peak_inflight"):
                gv, wv = getattr(g, name), getattr(w, name)
                if gv is not None and wv is not None and gv != wv:
                    out.append(f"core {c} {name}: {what} {gv}, {ref} {wv}")
        return out


@dataclass(frozen=True)
class Result:
    """One workload on one engine: counters, and time and throughput as the chip reports them."""

    engine: str
    hypothesis: str
    chip: str
    counters: Counters
    bytes_total: int
    time_us: float
    gbps: float
    exact: bool  # the RTL's counters to the cycle (False: the closed form)

    @property
    def cycles(self) -> int:
        return self.counters.cycles

    @property
    def cores(self) -> tuple[CoreCounters | None, ...]:
        return self.counters.cores

    @classmethod
    def make(
        cls,
        engine: str,
        hypothesis: Hypothesis,
        chip: Chip,
        workload: Workload,
        counters: Counters,
        exact: bool,
    ) -> Result:
        """The only constructor: time and GB/s come from the chip, ceiling and overhead included."""
        total = workload.bytes_total(chip.line_bytes)
        t = chip.time_us(counters.cycles, total)
        return cls(
            engine=engine,
            hypothesis=hypothesis.name,
            chip=chip.name,
            counters=counters,
            bytes_total=total,
            time_us=t,
            gbps=chip.gbps(total, t),
            exact=exact,
        )


# ---------------------------------------------------------------- engines


class Engine(Protocol):
    name: str
    exact: bool

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result: ...

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]: ...


@dataclass(frozen=True)
class EngineInfo:
    name: str
    module: str  # imported on first use; it defines ENGINE
    summary: str
    parallel: bool = True  # worth spreading over processes (False: vectorised already)
    cheap_calls: bool = True  # False: each run_many call starts a simulator (few, big chunks)


REGISTRY: tuple[EngineInfo, ...] = (
    EngineInfo(
        "analytic",
        "ane_kdma.engines.analytic",
        "closed form, vectorised: sweeps, fits",
        parallel=False,
    ),
    EngineInfo("model", "ane_kdma.engines.model", "the cycle model: the RTL's counters exactly"),
    EngineInfo(
        "rtl", "ane_kdma.engines.verilator", "the RTL itself, a Verilator C++ batch harness"
    ),
    EngineInfo(
        "cocotb",
        "ane_kdma.engines.cocotb",
        "the RTL under the cocotb testbench (SIM=icarus too)",
        cheap_calls=False,
    ),
)


def engine_names() -> list[str]:
    return [e.name for e in REGISTRY]


def check_engine(name: str) -> str:
    if name not in engine_names():
        raise InputError(f"unknown engine {name!r} (one of: {', '.join(engine_names())})")
    return name


def engine_info(name: str) -> EngineInfo:
    """The registry's entry for `name` (unknown: one line)."""
    check_engine(name)
    return next(e for e in REGISTRY if e.name == name)


def get_engine(name: str) -> Engine:
    """The engine registered under `name` (its module is imported now, not before)."""
    return importlib.import_module(engine_info(name).module).ENGINE


def run(engine: str, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
    """One workload on the engine registered under `engine` (many: ane_kdma.runner.run_many)."""
    return get_engine(engine).run(hypothesis, chip, workload)
