"""One testbench class for kdma_tb_top: clock, reset, settings, task driver, checker, model.

Test functions describe scenarios; this class owns everything signal-level.
The line checker and the back-pressure LFSR run in HDL, so a throughput run
costs Python one await per task, not one per cycle.

The build is read from the design: the hypothesis from its CreditMode
encoding (ane_kdma.hypotheses), the ring width and credit clamp from its
RingBits and PrefetchMaxLines; the rest of the geometry and the default
run-time settings come from the chip (ane_kdma.chip, m3).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, First, ReadOnly, RisingEdge, Timer
from cocotb.types import LogicArray

from ane_kdma import chip as chips
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses, knobs
from ane_kdma.contract import CoreCounters, Counters, Task
from ane_kdma.engines.model import counters_of
from ane_kdma.hw import LINE_BYTES, MAX_LATENCY_CYCLES
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.rtl_settings import check_rtl_settings, pack_settings, settle_cycles

#: per core, the tasks it is given back to back (None: the core sits out)
PerCoreTasks = Sequence[Sequence[Task] | None]

TAKE_LIMIT_CYCLES = 100  # a task offered to an idle engine is taken at once
#: kdma_tb_top's per-core outputs: the counters (CoreCounters' order) and the status
COUNTER_PORTS = ("core_cycles_o", "zero_credit_cycles_o", "peak_inflight_o")
STATUS_PORTS = ("issued_lines_o", "chk_count_o", "unaligned_o", "partial_o", "wrap_o")


@dataclass(frozen=True)
class CoreStatus:
    """A core's flags and line counts after a run (the counters are in Counters)."""

    issued: int  # lines its newest task requested
    drained: int  # lines the HDL checker saw drained since the last start from idle
    unaligned: bool
    partial: bool
    wrap: bool


def hypothesis_of(dut) -> Hypothesis:
    """The hypothesis a build implements: its CreditMode encoding, looked up in the registry."""
    return hypotheses.by_encoding(int(dut.CreditMode.value))


def _has(dut, name: str) -> bool:
    try:
        getattr(dut, name)
    except AttributeError:
        return False
    return True


def geometry_of(dut) -> Geometry:
    """The build's ring width, credit clamp and KMem; the chip fills in what the design does
    not say."""
    geometry = replace(
        chips.load().geometry,
        ring_bits=int(dut.RingBits.value),
        prefetch_max_lines=int(dut.PrefetchMaxLines.value),
    )
    if _has(dut, "KmemLines"):  # the credit unit's top (kdma_credit_tb) has no KMem
        geometry = replace(geometry, kmem_lines=int(dut.KmemLines.value))
    if geometry.line_bytes != LINE_BYTES:
        raise ValueError(f"the RTL moves {LINE_BYTES}-byte lines, the chip {geometry}")
    return geometry


@dataclass(frozen=True)
class Build:
    """What a kdma_tb_top build is, read from its parameters."""

    ncores: int
    hyp: Hypothesis
    geometry: Geometry
    max_latency: int
    period_ns: int

    @classmethod
    def of(cls, dut) -> Build:
        return cls(
            ncores=int(dut.NumCores.value),
            hyp=hypothesis_of(dut),
            geometry=geometry_of(dut),
            max_latency=MAX_LATENCY_CYCLES,  # kdma_pkg's: the settings' latency field
            period_ns=2 * int(dut.HalfPeriod.value),
        )


def now_ns() -> int:
    return int(get_sim_time(unit="ns"))


def seed_from_env() -> int:
    """The run's random seed: KDMA_SEED if given, else fresh; always printed."""
    given = knobs.get("KDMA_SEED")
    seed = int(given) if given is not None else random.SystemRandom().randrange(1 << 31)
    cocotb.log.info("KDMA_SEED=%d (set KDMA_SEED to replay)", seed)
    return seed


def lanes(handle, count: int) -> list[int]:
    """A packed port of equal lanes (per core, or per credit mode), one integer per lane
    (lane 0 in the low bits)."""
    value = handle.value
    if isinstance(value, LogicArray):
        raw, width = value.to_unsigned(), len(value) // count
    else:  # a one-bit port of a one-core build
        raw, width = int(value), 1
    mask = (1 << width) - 1
    return [(raw >> (width * c)) & mask for c in range(count)]


def per_core(dut, ncores: int, *ports: str) -> list[tuple[int, ...]]:
    """Per core, the values of the named per-core ports (one tuple per core, in port order)."""
    return list(zip(*(lanes(getattr(dut, p), ncores) for p in ports), strict=True))


def drive_task(dut, tasks: Sequence[Task | None], bp: cm.Backpressure | None) -> None:
    """Put one step's per-core tasks and the back-pressure on the harness inputs."""
    en = bases = sizes = 0
    for c, t in enumerate(tasks):
        if t is None:
            continue
        en |= 1 << c
        bases |= t.base_addr << (32 * c)
        sizes |= t.size_bytes << (32 * c)
    dut.core_en_i.value = en
    dut.base_addr_i.value = bases
    dut.size_bytes_i.value = sizes
    dut.bp_seed_i.value = bp.seed & 0xFFFF if bp else 1
    dut.bp_threshold_i.value = bp.threshold if bp else 0


def apply_settings(dut, build: Build, s: cm.Settings) -> None:
    """Drive the settings struct; refuse a setting it has no field for (left at default)."""
    check_rtl_settings(s, build.geometry.kmem_lines)
    dut.settings_i.value = pack_settings(s)


def checker_error(dut) -> str:
    """The HDL line checker's first mismatch, in words."""
    word = int(dut.chk_word_o.value)
    what = "address" if word == 16 else f"word {word}"
    return (
        f"checker: core {int(dut.chk_err_core_o.value)} cycle {int(dut.chk_err_cycle_o.value)}: "
        f"{what} mismatch at line {int(dut.chk_exp_addr_o.value):#x} "
        f"(got line {int(dut.chk_act_addr_o.value):#x}, expected word "
        f"{int(dut.chk_exp_word_o.value):#010x}, got {int(dut.chk_act_word_o.value):#010x})"
    )


class KdmaTB:
    """Driver, checker and reference model for kdma_tb_top."""

    def __init__(self, dut, settings: cm.Settings | None = None) -> None:
        self.dut = dut
        self.build = Build.of(dut)
        self.ncores = self.build.ncores
        self.hyp = self.build.hyp
        self.geometry = self.build.geometry
        self.period_ns = self.build.period_ns
        self.settings = settings or chips.load().settings
        self.model: cm.ModelResult | None = None  # the model's view of the last workload
        self.log = dut._log

    # ---------------------------------------------------------------- set-up
    async def start(self) -> None:
        self.apply(self.settings)
        self.dut.start_i.value = 0
        self.dut.core_en_i.value = 0
        self.dut.bp_seed_i.value = 1
        self.dut.bp_threshold_i.value = 0
        self.dut.ext_ready_en_i.value = 0
        self.dut.ext_ready_i.value = 0
        await self.reset()

    def apply(self, s: cm.Settings) -> None:
        apply_settings(self.dut, self.build, s)
        self.settings = s

    async def reset(self, cycles: int = 2) -> None:
        self.dut.rst_ni.value = 0
        await ClockCycles(self.dut.clk_o, cycles)
        self.dut.rst_ni.value = 1
        await RisingEdge(self.dut.clk_o)

    def _cycle(self, t0: int) -> int:
        """Cycles since the edge that took the first task (that edge ends cycle 0)."""
        q, r = divmod(now_ns() - t0, self.period_ns)
        assert r == 0, f"not on a clock edge: {now_ns()} ns"
        return q

    def _until(self, t0: int, cycle: int) -> Timer:
        """A timer half a cycle past the edge that ends `cycle` (cycle 0 ends at t0)."""
        return Timer(
            max(t0 + cycle * self.period_ns + self.period_ns // 2 - now_ns(), 1), unit="ns"
        )

    # ---------------------------------------------------------------- workloads
    async def run_workload(
        self,
        per_core: PerCoreTasks,
        bp: cm.Backpressure | None = None,
        model: cm.ModelResult | None = None,
    ) -> Counters:
        """Give every enabled core its tasks, task j to all at once, back to back; check all.

        start_i stays high from the first task to the last, so each task is
        taken as soon as the top is ready (or, once a core has finished early,
        when the top has gone idle). Python awaits each accept, not the clock.
        Every accept is checked against the cycle the model takes it in, the
        run's end against the model's span (failing at that cycle if the RTL
        runs longer), then the line counts, cycles_o, and every counter
        through Counters.mismatches. Returns the RTL's counters, ``cycles``
        being the span from the first accept (cycle 0) to the last drain + 1.
        ``model``: the cycle model's result for exactly this workload, back-pressure
        and the applied settings, when the caller has it already (else computed here).
        """
        dut = self.dut
        if len(per_core) != self.ncores:
            raise ValueError(f"{len(per_core)} cores' tasks for a {self.ncores}-core build")
        steps = {len(seq) for seq in per_core if seq is not None}
        if len(steps) != 1 or 0 in steps:
            raise ValueError(f"every enabled core needs the same number of tasks, not {steps}")
        job = cm.job_of(per_core, LINE_BYTES)
        if model is None:
            model = cm.run(self.hyp, self.geometry, self.settings, job, bp)
        want = self.model = model
        what = f"{self.hyp.name} {self.settings} bp {bp}: {job}"
        if len(what) > 600:
            what = what[:597] + "..."
        await ClockCycles(dut.clk_o, settle_cycles(self.settings))
        assert int(dut.idle_o.value) == 1, "engine not idle before start"
        t0 = fresh = 0
        drained_from = 0  # the HDL checker counts lines from the last start from idle
        for j in range(len(want.accepts)):
            drive_task(dut, [None if seq is None else seq[j] for seq in per_core], bp)
            dut.start_i.value = 1
            idle = await self._wait_accept(j, t0, want)
            await RisingEdge(dut.clk_o)
            if j == 0:
                t0 = now_ns()
            cycle = self._cycle(t0)
            assert cycle == want.accepts[j], (
                f"task {j} taken in cycle {cycle}, model {want.accepts[j]} ({what})"
            )
            if idle:
                fresh, drained_from = cycle, j
        dut.start_i.value = 0
        await self._wait_end(t0, want, what)
        span = self._cycle(t0)
        got = self._counters(span, per_core)
        cycles_o = int(dut.cycles_o.value)
        status = self.status()
        await RisingEdge(dut.clk_o)
        for c, seq in enumerate(per_core):
            if seq is None:
                continue
            lines = [t.lines_of(LINE_BYTES) for t in seq]
            drained = sum(lines[drained_from:])
            assert status[c].drained == drained, (
                f"core {c}: drained {status[c].drained} of {drained} lines since cycle {fresh}"
            )
            assert status[c].issued == lines[-1], f"core {c}: issued {status[c].issued}"
        bad = got.mismatches(counters_of(want))
        if cycles_o != want.cycles_o:  # restarted at the last start from idle: not the span
            bad.append(f"cycles_o: RTL {cycles_o}, model {want.cycles_o}")
        assert not bad, f"RTL and model differ ({what}): " + "; ".join(bad)
        return got

    async def _wait_accept(self, j: int, t0: int, want: cm.ModelResult) -> bool:
        """Until the top takes task j (start_i is high); return whether it was idle then."""
        dut = self.dut
        await ReadOnly()
        while not int(dut.accept.value):
            if j == 0:
                limit = Timer(TAKE_LIMIT_CYCLES * self.period_ns, unit="ns")
            else:  # fail half a cycle after the edge the model takes it at
                limit = self._until(t0, want.accepts[j])
            err = RisingEdge(dut.chk_err_o)
            fired = await First(RisingEdge(dut.accept), err, limit)
            await ReadOnly()
            if fired is err or int(dut.chk_err_o.value):
                raise AssertionError(checker_error(dut))
            assert fired is not limit, (
                f"task {j}: the model takes it in cycle {want.accepts[j]}, the RTL has not"
            )
        if int(dut.chk_err_o.value):
            raise AssertionError(checker_error(dut))
        return bool(int(dut.idle_o.value))

    async def _wait_end(self, t0: int, want: cm.ModelResult, what: str) -> None:
        """Until idle_o rises after the last task; fail at the model's end if it has not."""
        dut = self.dut
        err = RisingEdge(dut.chk_err_o)
        limit = self._until(t0, want.cycles)
        fired = await First(RisingEdge(dut.idle_o), err, limit)
        await ReadOnly()
        if fired is err or int(dut.chk_err_o.value):
            raise AssertionError(checker_error(dut))
        assert fired is not limit, f"not idle in cycle {want.cycles + 1}, as the model is ({what})"
        assert int(dut.idle_o.value) == 1, "idle_o rose and fell in one step"

    def _counters(self, span: int, tasks: PerCoreTasks) -> Counters:
        ports = per_core(self.dut, self.ncores, *COUNTER_PORTS)
        return Counters(
            span,
            tuple(
                None if seq is None else CoreCounters(*p)
                for seq, p in zip(tasks, ports, strict=True)
            ),
        )

    def status(self) -> list[CoreStatus]:
        """Every core's flags and line counts as they stand (they hold until the next task)."""
        ports = per_core(self.dut, self.ncores, *STATUS_PORTS)
        return [CoreStatus(i, d, bool(u), bool(p), bool(w)) for i, d, u, p, w in ports]

    async def run_task(
        self, tasks: Sequence[Task | None], bp: cm.Backpressure | None = None
    ) -> Counters:
        """One task per enabled core, started from idle (a workload of one step)."""
        return await self.run_workload([None if t is None else [t] for t in tasks], bp)

    async def run_sequence(
        self, tasks: Sequence[Task], bp: cm.Backpressure | None = None
    ) -> Counters:
        """Core 0 alone takes `tasks` back to back."""
        return await self.run_workload([list(tasks)] + [None] * (self.ncores - 1), bp)

    def describe_error(self) -> str:
        return checker_error(self.dut)
