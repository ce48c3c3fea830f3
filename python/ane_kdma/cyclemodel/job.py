"""Jobs and results: what the cycle model takes and what it gives back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ane_kdma.contract import Task
from ane_kdma.errors import InputError
from ane_kdma.hw import LINE_ADDR_MASK, MAX_CORES
from ane_kdma.hypotheses import Geometry
from ane_kdma.profile import Settings

CoreTask = Task  # the TB's name for one core's task

#: per core, a list of (base line, lines) tasks; None for a disabled core
Job = Sequence[Sequence[tuple[int, int]] | None]


@dataclass(frozen=True)
class Backpressure:
    """KMem consumer readiness from the harness LFSR: ready when lfsr[7:0] >= threshold."""

    seed: int
    threshold: int  # 0 = always ready, 128 ~ half the cycles, 255 ~ 1/256

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 255:
            raise InputError(f"back-pressure threshold {self.threshold} outside 0..255")


@dataclass
class CoreResult:
    """One core's counters as kdma_core holds them after the job (since its last idle start)."""

    cycles: int
    zero_credit_cycles: int
    peak_inflight: int
    issued: int
    # every line's grant and drain cycle, all tasks: simulate always, run(keep_lines=True)
    grants: np.ndarray | None = field(default=None, repr=False)
    drains: np.ndarray | None = field(default=None, repr=False)


@dataclass
class ModelResult:
    cycles: int  # the top's span: first accept (cycle 0) to the last drain, plus one
    cores: list[CoreResult | None]
    engine: str  # "recurrence" or "stepped"
    accepts: list[int] = field(default_factory=list)  # accept cycle of each task
    fresh: int = 0  # accept cycle of the last task taken while idle (cycles_o restarts there)

    @property
    def cycles_o(self) -> int:
        """What kdma_top's cycles_o shows at the end (it restarts at an idle accept)."""
        return self.cycles - self.fresh


def job_of(
    workload_cores: Sequence[Sequence[Task] | None], line_bytes: int = 64
) -> list[list[tuple[int, int]] | None]:
    """A job from per-core task lists (contract tasks or the TB's CoreTask)."""
    return [
        None
        if seq is None
        else [(t.base_line_of(line_bytes) & LINE_ADDR_MASK, t.lines_of(line_bytes)) for t in seq]
        for seq in workload_cores
    ]


def check(job: Job, settings: Settings, g: Geometry) -> None:
    if not 1 <= len(job) <= MAX_CORES:
        raise InputError(f"{len(job)} cores: the ANE has 1..{MAX_CORES}")
    counts = {len(seq) for seq in job if seq is not None}
    if len(counts) > 1:
        raise InputError("every enabled core needs the same number of tasks")
    if counts == {0}:
        raise InputError("an empty task sequence")
    settings.check(g.kmem_lines)


def top_cycles(last_drains: Sequence[int], accepts: Sequence[int]) -> int:
    """The top's span: its last done, after the last drain or a trailing empty task's accept."""
    top = max([*last_drains, accepts[-1] if accepts else 0]) + 1
    if top >= 1 << 32:
        raise InputError(f"{top} cycles overflow the RTL's 32-bit cycle counters")
    return top
