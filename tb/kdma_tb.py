"""One testbench class for kdma_tb_top: clock, reset, settings, task driver, checker, model.

Test functions describe scenarios; this class owns everything signal-level.
The line checker and the back-pressure LFSR run in HDL, so a throughput run
costs Python one await per task, not one per cycle.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass

import cocotb
from cocotb.triggers import ClockCycles, First, ReadOnly, RisingEdge, Timer

from ane_kdma import cyclemodel as cm
from ane_kdma.hw import RATE_ONE, CreditMode
from ane_kdma.profile import load


@dataclass
class RtlCoreResult:
    cycles: int
    zero_credit_cycles: int
    peak_inflight: int
    issued: int
    drained: int
    unaligned: bool
    partial: bool
    wrap: bool


@dataclass
class RtlResult:
    cycles: int
    cores: list[RtlCoreResult | None]


def seed_from_env() -> int:
    """The run's random seed: KDMA_SEED if given, else fresh; always printed."""
    raw = os.environ.get("KDMA_SEED")
    seed = int(raw, 0) if raw else random.SystemRandom().randrange(1 << 31)
    cocotb.log.info("KDMA_SEED=%d (set KDMA_SEED to replay)", seed)
    return seed


class KdmaTB:
    """Driver, checker and reference model for kdma_tb_top."""

    def __init__(self, dut, settings: cm.Settings | None = None) -> None:
        self.dut = dut
        self.ncores = int(dut.NumCores.value)
        self.mode = CreditMode(int(dut.CreditMode.value))
        self.max_latency = int(dut.MaxLatencyCycles.value)
        self.period_ns = 2 * int(dut.HalfPeriod.value)
        self.settings = settings or load().settings
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
        if s.latency > self.max_latency:
            raise ValueError(f"latency {s.latency} above the build's {self.max_latency}")
        self.settings = s
        self.dut.latency_i.value = s.latency
        self.dut.window_i.value = s.window
        self.dut.core_rate_i.value = s.core_rate_q16
        self.dut.agg_rate_i.value = s.agg_rate_q16

    async def reset(self, cycles: int = 2) -> None:
        self.dut.rst_ni.value = 0
        await ClockCycles(self.dut.clk_o, cycles)
        self.dut.rst_ni.value = 1
        await RisingEdge(self.dut.clk_o)

    def settle_cycles(self) -> int:
        """Idle cycles that refill every token bucket, as the model assumes at start."""
        s = self.settings
        return math.ceil(RATE_ONE / min(s.core_rate_q16, s.agg_rate_q16)) + 2

    # ---------------------------------------------------------------- tasks
    def _drive_task(self, tasks: Sequence[cm.CoreTask | None], bp: cm.Backpressure | None) -> None:
        if len(tasks) != self.ncores:
            raise ValueError(f"{len(tasks)} core tasks for a {self.ncores}-core build")
        en = bases = sizes = 0
        for c, t in enumerate(tasks):
            if t is None:
                continue
            en |= 1 << c
            bases |= t.base_addr << (32 * c)
            sizes |= t.size_bytes << (32 * c)
        self.dut.core_en_i.value = en
        self.dut.base_addr_i.value = bases
        self.dut.size_bytes_i.value = sizes
        self.dut.bp_seed_i.value = bp.seed & 0xFFFF if bp else 1
        self.dut.bp_threshold_i.value = bp.threshold if bp else 0

    async def run_task(
        self,
        tasks: Sequence[cm.CoreTask | None],
        bp: cm.Backpressure | None = None,
        check_model: bool = True,
        timeout_cycles: int | None = None,
    ) -> RtlResult:
        """Start one task, wait for done (failing at once on a checker error), read counters."""
        dut = self.dut
        await ClockCycles(dut.clk_o, self.settle_cycles())
        assert int(dut.idle_o.value) == 1, "engine not idle before start"
        self._drive_task(tasks, bp)
        dut.start_i.value = 1
        await RisingEdge(dut.clk_o)
        dut.start_i.value = 0
        expected = cm.run_task(self.mode, self.settings, tasks, bp) if check_model else None
        done = RisingEdge(dut.done_o)
        err = RisingEdge(dut.chk_err_o)
        limit = timeout_cycles or (expected.cycles + 10 if expected else 50_000_000)
        timeout = Timer(limit * self.period_ns, unit="ns")  # not ClockCycles: no per-cycle Python
        fired = await First(done, err, timeout)
        await ReadOnly()
        if fired is err or int(dut.chk_err_o.value):
            raise AssertionError(self.describe_error())
        assert fired is done, f"task did not finish within {limit} cycles"
        result = self._read(tasks)
        await RisingEdge(dut.clk_o)
        for c, t in enumerate(tasks):
            if t is not None:
                got = result.cores[c]
                assert got.drained == t.lines, f"core {c}: drained {got.drained} of {t.lines}"
                assert got.issued == t.lines, f"core {c}: issued {got.issued} of {t.lines}"
        if expected is not None:
            self.compare(result, expected)
        return result

    async def run_sequence(
        self,
        tasks: Sequence[cm.CoreTask],
        bp: cm.Backpressure | None = None,
    ) -> int:
        """Give core 0 `tasks` back to back (start held high); return the span in cycles.

        One await per task: Python waits for the top's accept, not for clock edges.
        """
        dut = self.dut
        await ClockCycles(dut.clk_o, self.settle_cycles())
        assert int(dut.idle_o.value) == 1, "engine not idle before start"
        expected = cm.run_sequence(self.mode, self.settings, tasks, bp)
        pad = [None] * (self.ncores - 1)
        accept = dut.u_top.accept
        for task in tasks:
            self._drive_task([task, *pad], bp)
            dut.start_i.value = 1
            await ReadOnly()
            if not int(accept.value):
                await RisingEdge(accept)
            await RisingEdge(dut.clk_o)
        dut.start_i.value = 0
        err = RisingEdge(dut.chk_err_o)
        timeout = Timer((expected.cycles + 10) * self.period_ns, unit="ns")
        fired = await First(RisingEdge(dut.idle_o), err, timeout)
        await ReadOnly()
        if fired is err or int(dut.chk_err_o.value):
            raise AssertionError(self.describe_error())
        assert int(dut.idle_o.value) == 1, "task sequence did not finish"
        span = int(dut.cycles_o.value)
        drained = int(dut.g_chk[0].count_q.value)
        core = self._read([tasks[-1], *pad]).cores[0]
        await RisingEdge(dut.clk_o)
        assert drained == sum(t.lines for t in tasks), f"drained {drained} lines"
        assert span == expected.cycles, f"sequence cycles: RTL {span}, model {expected.cycles}"
        want = expected.cores[0]
        for name in ("cycles", "zero_credit_cycles", "peak_inflight"):
            got_v, want_v = getattr(core, name), getattr(want, name)
            assert got_v == want_v, f"sequence {name}: RTL {got_v}, model {want_v}"
        return span

    def _read(self, tasks: Sequence[cm.CoreTask | None]) -> RtlResult:
        top = self.dut.u_top
        cores: list[RtlCoreResult | None] = []
        for c, t in enumerate(tasks):
            if t is None:
                cores.append(None)
                continue
            core = top.g_core[c].u_core
            cores.append(
                RtlCoreResult(
                    cycles=int(core.cycles_q.value),
                    zero_credit_cycles=int(core.zero_credit_q.value),
                    peak_inflight=int(core.peak_inflight_q.value),
                    issued=int(core.u_ring.issued_q.value),
                    drained=int(self.dut.g_chk[c].count_q.value),
                    unaligned=bool(int(core.unaligned_q.value)),
                    partial=bool(int(core.partial_q.value)),
                    wrap=bool(int(core.wrap_q.value)),
                )
            )
        return RtlResult(cycles=int(self.dut.cycles_o.value), cores=cores)

    def compare(self, got: RtlResult, want: cm.TaskResult) -> None:
        assert got.cycles == want.cycles, f"cycles: RTL {got.cycles}, model {want.cycles}"
        for c, (g, w) in enumerate(zip(got.cores, want.cores, strict=True)):
            if g is None or w is None:
                continue
            for name in ("cycles", "zero_credit_cycles", "peak_inflight"):
                gv, wv = getattr(g, name), getattr(w, name)
                assert gv == wv, f"core {c} {name}: RTL {gv}, model {wv}"

    def describe_error(self) -> str:
        d = self.dut
        word = int(d.chk_word_o.value)
        what = "address" if word == 16 else f"word {word}"
        return (
            f"checker: core {int(d.chk_err_core_o.value)} cycle {int(d.chk_err_cycle_o.value)}: "
            f"{what} mismatch at line {int(d.chk_exp_addr_o.value):#x} "
            f"(got line {int(d.chk_act_addr_o.value):#x}, expected word "
            f"{int(d.chk_exp_word_o.value):#010x}, got {int(d.chk_act_word_o.value):#010x})"
        )
