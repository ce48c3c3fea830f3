"""The task sequence item and the transactions the monitors publish.

A ``KdmaTaskItem`` is one task as software would give it: a 64-byte-aligned
start address, the bytes each active core streams (core c starts at
``base + c * size`` rounded up to lines, as the TD's CoeffBaseAddr[i] do), how
many cores take part, the consumer back-pressure (the harness LFSR, or the
same pattern driven from Python through ext_ready_i), and optionally a reset
some cycles after the task was taken. Impossible values raise ``InputError``
(a ``ValueError``) in the constructor, before anything reaches a simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyuvm import uvm_sequence_item

from ane_kdma import cyclemodel as cm
from ane_kdma.contract import MAX_CORES
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, LINE_BYTES, lines_for_bytes
from ane_kdma.hypotheses import Hypothesis

ADDR_MASK = (1 << ADDR_BITS) - 1


class KdmaTaskItem(uvm_sequence_item):
    """One task for kdma_tb_top (see the module docstring)."""

    def __init__(
        self,
        name: str = "kdma_task",
        *,
        base_addr: int,
        size_bytes: int,
        hyp: Hypothesis,
        cores: int = 1,
        backpressure: cm.Backpressure | None = None,
        ext_ready: bool = False,
        reset_at: int | None = None,
        chained: bool = False,
        settings: cm.Settings | None = None,
        line_check: bool = True,
    ) -> None:
        super().__init__(name)
        if not isinstance(hyp, Hypothesis):
            raise InputError(f"hypothesis {hyp!r} is not a hypotheses.Hypothesis")
        if hyp.encoding is None:
            raise InputError(f"hypothesis {hyp.name} is not in the RTL")
        if size_bytes < 0:
            raise InputError(f"size {size_bytes} bytes per core is negative")
        if size_bytes > ADDR_MASK:
            raise InputError(f"size {size_bytes} bytes per core does not fit 32 bits")
        if not 0 <= base_addr <= ADDR_MASK:
            raise InputError(f"start address {base_addr:#x} is not a 32-bit byte address")
        if base_addr % LINE_BYTES:
            raise InputError(f"start address {base_addr:#x} is not aligned to 64 bytes")
        if not 1 <= cores <= MAX_CORES:
            raise InputError(f"{cores} active cores: the ANE has 1..{MAX_CORES}")
        if backpressure is not None and not isinstance(backpressure, cm.Backpressure):
            raise InputError(f"back-pressure {backpressure!r} is not a cyclemodel.Backpressure")
        if ext_ready and backpressure is None:
            raise InputError("external ready replays an LFSR pattern: give a back-pressure")
        if reset_at is not None and reset_at < 1:
            raise InputError(f"reset at cycle {reset_at}: the task is taken in cycle 0")
        if chained and (cores != 1 or reset_at is not None or settings is not None):
            raise InputError("a back-to-back task runs on core 0 alone, same settings, no reset")
        if chained and size_bytes == 0:
            raise InputError("a back-to-back task needs a line at least (an empty one waits)")
        self.base_addr = base_addr
        self.size_bytes = size_bytes
        self.hyp = hyp
        self.cores = cores
        self.backpressure = backpressure
        self.ext_ready = ext_ready
        self.reset_at = reset_at
        self.chained = chained
        self.settings = settings
        self.line_check = line_check

    @property
    def lines(self) -> int:
        """Lines per core (the size rounded up)."""
        return lines_for_bytes(self.size_bytes)

    def check_build(self, build_cores: int, build_hyp: Hypothesis) -> None:
        if self.cores > build_cores:
            raise InputError(f"{self.cores} active cores on a {build_cores}-core build")
        if self.hyp.name != build_hyp.name:
            raise InputError(f"a {self.hyp.name} task on a {build_hyp.name} build")

    def core_tasks(self, build_cores: int) -> list[cm.CoreTask | None]:
        """Per-core (base, size), None for cores sitting out; bases wrap at 2^32."""
        step = self.lines * LINE_BYTES
        tasks: list[cm.CoreTask | None] = []
        for c in range(build_cores):
            base = (self.base_addr + c * step) & ADDR_MASK
            tasks.append(cm.CoreTask(base, self.size_bytes) if c < self.cores else None)
        return tasks

    def __str__(self) -> str:
        bp = "off"
        if self.backpressure is not None:
            how = "ext" if self.ext_ready else "lfsr"
            bp = f"{how}(seed={self.backpressure.seed:#06x},thr={self.backpressure.threshold})"
        extra = " chained" if self.chained else ""
        extra += f" reset@{self.reset_at}" if self.reset_at is not None else ""
        return (
            f"{self.hyp.name} base={self.base_addr:#010x} size={self.size_bytes} "
            f"({self.lines} lines) x{self.cores} bp={bp}{extra}"
        )


# ---------------------------------------------------------------------------
# Monitor transactions (plain data: what the signals showed)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskStart:
    """The top took a task (accept was high at a clock edge)."""

    time_ns: int
    fresh: bool  # taken from idle (else back to back behind a draining task)
    core_en: int
    bases: tuple[int, ...]  # byte address per core (all build cores)
    sizes: tuple[int, ...]
    settings: cm.Settings
    backpressure: cm.Backpressure | None  # the LFSR pattern (threshold 0: none)
    ext_ready: bool  # ready came from ext_ready_i
    line_check: bool  # the BFM samples every line of this run

    def core_tasks(self) -> list[cm.CoreTask | None]:
        return [
            cm.CoreTask(b, s) if self.core_en >> c & 1 else None
            for c, (b, s) in enumerate(zip(self.bases, self.sizes, strict=True))
        ]


@dataclass(frozen=True)
class CoreState:
    cycles: int  # the core's busy cycles
    zero_credit_cycles: int
    peak_inflight: int
    issued: int  # lines requested by the core's newest task
    drained: int  # lines the HDL checker saw drained since the run started
    assert_bits: int  # the core's sticky assertion-failure bits


@dataclass(frozen=True)
class RunEnd:
    """The top went idle: every task of the run finished."""

    time_ns: int
    cycles: int  # cycles_o
    chk_err: bool
    cores: tuple[CoreState, ...]


@dataclass(frozen=True)
class ResetEvent:
    """rst_ni was pulsed; the state read one clock after its release."""

    time_ns: int
    run_open: bool
    idle: bool
    leftovers: tuple[tuple[int, int, int, int], ...]  # per core: issued, kmem, in flight, mem queue
    assert_bits: tuple[int, ...]  # per core, read just before the reset


@dataclass(frozen=True)
class CheckerError:
    """The HDL line checker flagged its first mismatch."""

    time_ns: int
    core: int
    cycle: int
    exp_addr: int
    act_addr: int
    word: int  # 16: the address differs
    exp_word: int
    act_word: int


@dataclass(frozen=True)
class MemRequest:
    core: int
    addr: int  # line address
    cycle: int


@dataclass(frozen=True)
class KmemLine:
    core: int
    addr: int
    data: int = field(repr=False)
    cycle: int = 0
