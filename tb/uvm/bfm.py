"""Bus-functional model of kdma_tb_top: the only place (with the driver) that touches signals.

Driving: settings, task fields, the start/accept handshake, resets, and the
external-ready pattern. Observing: three queues the monitors drain.

* ``task_q``: TaskStart, RunEnd, ResetEvent and CheckerError. Watched on edges
  of accept, idle_o, rst_ni and chk_err_o only, so a run costs Python a few
  awaits however long it is.
* ``req_q`` and ``line_q``: every memory read request (u_top.u_mem
  req_valid/req_ready/req_addr, per port) and every KMem line drained
  (kmem_valid/kmem_ready/kmem_addr/kmem_data, per core). Sampled once per
  clock, at the falling edge, and only in runs the driver asked to be checked
  line by line: per-cycle Python runs at ~50k cycles/s on Verilator against
  ~1M without it, so long runs are left to the HDL checker and the counters.
"""

from __future__ import annotations

import cocotb
from cocotb.queue import Queue
from cocotb.triggers import (
    ClockCycles,
    Event,
    FallingEdge,
    First,
    ReadOnly,
    RisingEdge,
    Timer,
)

from ane_kdma import cyclemodel as cm
from ane_kdma.hw import LINE_ADDR_BITS, LINE_ADDR_MASK
from ane_kdma.rtl_settings import unpack_settings
from kdma_tb import (
    COUNTER_PORTS,
    Build,
    apply_settings,
    drive_task,
    now_ns,
    per_core,
    settle_cycles,
)

from .items import (
    CheckerError,
    CoreState,
    KdmaTaskItem,
    KmemLine,
    MemRequest,
    ResetEvent,
    RunEnd,
    TaskStart,
)


def _u(handle) -> int:
    return int(handle.value)


def _split(value: int, width: int, count: int) -> tuple[int, ...]:
    mask = (1 << width) - 1
    return tuple((value >> (width * c)) & mask for c in range(count))


def _bits(value: int):
    c = 0
    while value:
        if value & 1:
            yield c
        value >>= 1
        c += 1


class LfsrReady:
    """Python mirror of the harness's per-core ready LFSR (cyclemodel's seed derivation)."""

    def __init__(self, bp: cm.Backpressure, ncores: int) -> None:
        self.threshold = bp.threshold
        self.states = [cm.lfsr_seed(bp.seed, c) for c in range(ncores)]

    def ready(self) -> int:
        if self.threshold == 0:
            return (1 << len(self.states)) - 1
        return sum(1 << c for c, s in enumerate(self.states) if (s & 0xFF) >= self.threshold)

    def step(self) -> None:
        self.states = [(s >> 1) ^ (cm.LFSR_TAPS if s & 1 else 0) for s in self.states]


class KdmaBfm:
    def __init__(self, dut) -> None:
        self.dut = dut
        self.top = dut.u_top
        self.clk = dut.clk_o
        self.build = Build.of(dut)  # hypothesis, cores and geometry, from the design
        self.ncores = self.build.ncores
        self.hyp = self.build.hyp
        self.geometry = self.build.geometry
        self.period_ns = self.build.period_ns
        self.cores = [self.top.g_core[c].u_core for c in range(self.ncores)]
        self.has_assert_bits = all(hasattr(core, "assert_fail_q") for core in self.cores)
        self.task_q: Queue = Queue()
        self.req_q: Queue = Queue()
        self.line_q: Queue = Queue()
        self._line_check_next = False
        self._sampling = False
        self._sample_go = Event()
        self._run_open = False
        self._pre_reset_bits: tuple[int, ...] = (0,) * self.ncores

    # ================================================================= driving
    async def start(self, settings: cm.Settings) -> None:
        """Settings and quiet inputs, reset, then start watching.

        The settings go on before reset: Icarus would otherwise clock X rates
        into the memory's token buckets, where they stay.
        """
        d = self.dut
        self.apply_settings(settings)
        d.start_i.value = 0
        d.core_en_i.value = 0
        d.base_addr_i.value = 0
        d.size_bytes_i.value = 0
        d.bp_seed_i.value = 1
        d.bp_threshold_i.value = 0
        d.ext_ready_en_i.value = 0
        d.ext_ready_i.value = 0
        d.rst_ni.value = 0
        await ClockCycles(self.clk, 2)
        d.rst_ni.value = 1
        await RisingEdge(self.clk)
        cocotb.start_soon(self._watch_tasks())
        cocotb.start_soon(self._sample_lines())

    def apply_settings(self, s: cm.Settings) -> None:
        apply_settings(self.dut, self.build, s)

    settle_cycles = staticmethod(settle_cycles)

    async def idle_cycles(self, n: int) -> None:
        """Let n clock edges pass (n >= 1); return just after the last one.

        A Timer, not n edge awaits, keeps Python off the per-cycle path; it
        lands mid-cycle and the final edge await makes the return point exact
        (a Timer that lands on an edge races with it).
        """
        await Timer(n * self.period_ns - self.period_ns // 2, unit="ns")
        await RisingEdge(self.clk)

    async def after_cycles(self, n: int) -> None:
        """Return 1 ns after the n-th clock edge from now (now: just after an edge)."""
        await Timer(n * self.period_ns + 1, unit="ns")

    def is_idle(self) -> bool:
        return bool(_u(self.dut.idle_o))

    async def wait_idle(self, limit_cycles: int) -> None:
        """Until idle_o is high, then the next clock edge; fail after `limit_cycles`."""
        await ReadOnly()  # Icarus shows pre-edge values to an edge callback
        deadline = now_ns() + limit_cycles * self.period_ns
        while not self.is_idle():
            left = deadline - now_ns()
            if left <= 0:
                raise AssertionError(f"[timeout] engine not idle after {limit_cycles} cycles")
            await First(RisingEdge(self.dut.idle_o), Timer(left, unit="ns"))
            await ReadOnly()
        await RisingEdge(self.clk)

    def drive_task(self, item: KdmaTaskItem) -> None:
        drive_task(self.dut, item.core_tasks(self.ncores), item.backpressure)
        self.dut.ext_ready_en_i.value = int(item.ext_ready)
        if not item.chained:
            self._line_check_next = item.line_check

    async def take_task(self, limit_cycles: int | None) -> None:
        """Raise start_i and return at the clock edge that takes the task (cycle 1 begins).

        A fresh task must be taken within `limit_cycles`; a back-to-back one
        waits as long as the run does (the scoreboard's watchdog bounds that).
        """
        d = self.dut
        d.start_i.value = 1
        await ReadOnly()
        if not _u(d.accept):
            if limit_cycles is None:
                await RisingEdge(d.accept)
            else:
                limit = Timer(limit_cycles * self.period_ns, unit="ns")
                if await First(RisingEdge(d.accept), limit) is limit:
                    raise AssertionError(f"[timeout] task not taken in {limit_cycles} cycles")
        await RisingEdge(self.clk)

    def drop_start(self) -> None:
        self.dut.start_i.value = 0

    async def pulse_reset(self, cycles: int = 2) -> None:
        self._pre_reset_bits = self._assert_bits()
        self.dut.rst_ni.value = 0
        await ClockCycles(self.clk, cycles)
        self.dut.rst_ni.value = 1
        await RisingEdge(self.clk)

    async def drive_ext_ready(self, bp: cm.Backpressure) -> None:
        """From cycle 1 of a run until it ends, drive ext_ready_i with the LFSR pattern.

        The harness LFSR produces the same pattern in HDL (and is ignored while
        ext_ready_en_i is high), so the cycle model's Backpressure predicts this
        run exactly: a broken external path shows up as a cycle mismatch.
        """
        lfsr = LfsrReady(bp, self.ncores)
        edge = RisingEdge(self.clk)
        while True:
            self.dut.ext_ready_i.value = lfsr.ready()
            await edge
            if not self._run_open:
                return
            lfsr.step()

    # ================================================================= watching
    def _assert_bits(self) -> tuple[int, ...]:
        if not self.has_assert_bits:
            return (0,) * self.ncores
        return tuple(_u(core.assert_fail_q) for core in self.cores)

    async def _watch_tasks(self) -> None:
        d = self.dut
        while True:
            await First(
                RisingEdge(d.accept),
                RisingEdge(d.idle_o),
                FallingEdge(d.rst_ni),
                RisingEdge(d.chk_err_o),
            )
            await ReadOnly()
            if not _u(d.rst_ni):
                await self._on_reset()
                continue
            if _u(d.chk_err_o):
                self.task_q.put_nowait(self._checker_error())
            if _u(d.accept):
                self.task_q.put_nowait(self._task_start())
            elif _u(d.idle_o) and self._run_open:
                self._run_open = False
                self._sampling = False
                self.task_q.put_nowait(self._run_end())

    def _task_start(self) -> TaskStart:
        d = self.dut
        fresh = bool(_u(d.idle_o))
        thr = _u(d.bp_threshold_i)
        bp = cm.Backpressure(_u(d.bp_seed_i), thr) if thr else None
        driven = unpack_settings(_u(d.settings_i))  # the struct's fields, by name
        driven["ramp_step_lines"] = max(1, driven["ramp_step_lines"])  # 0 acts as 1
        settings = cm.Settings(**driven)
        if fresh:
            self._run_open = True
            self._sampling = self._line_check_next
            if self._sampling:
                self._sample_go.set()
        return TaskStart(
            time_ns=now_ns(),
            fresh=fresh,
            core_en=_u(d.core_en_i),
            bases=_split(d.base_addr_i.value.to_unsigned(), 32, self.ncores),
            sizes=_split(d.size_bytes_i.value.to_unsigned(), 32, self.ncores),
            settings=settings,
            backpressure=bp,
            ext_ready=bool(_u(d.ext_ready_en_i)),
            line_check=self._sampling,
        )

    def _run_end(self) -> RunEnd:
        d = self.dut
        ports = per_core(d, self.ncores, *COUNTER_PORTS, "issued_lines_o", "chk_count_o")
        cores = tuple(CoreState(*p, b) for p, b in zip(ports, self._assert_bits(), strict=True))
        return RunEnd(now_ns(), _u(d.cycles_o), bool(_u(d.chk_err_o)), cores)

    def _checker_error(self) -> CheckerError:
        d = self.dut
        return CheckerError(
            time_ns=now_ns(),
            core=_u(d.chk_err_core_o),
            cycle=_u(d.chk_err_cycle_o),
            exp_addr=_u(d.chk_exp_addr_o),
            act_addr=_u(d.chk_act_addr_o),
            word=_u(d.chk_word_o),
            exp_word=_u(d.chk_exp_word_o),
            act_word=_u(d.chk_act_word_o),
        )

    async def _on_reset(self) -> None:
        was_open = self._run_open
        self._run_open = False
        self._sampling = False
        bits = self._pre_reset_bits
        self._pre_reset_bits = (0,) * self.ncores
        if not _u(self.dut.rst_ni):
            await RisingEdge(self.dut.rst_ni)
        await RisingEdge(self.clk)
        await ReadOnly()
        ports = self.top.u_mem.g_port
        leftovers = tuple(
            (
                _u(core.u_ring.issued_q),
                _u(core.kmem_count_q),
                _u(core.inflight_q),
                _u(ports[c].count_q),
            )
            for c, core in enumerate(self.cores)
        )
        self.task_q.put_nowait(ResetEvent(now_ns(), was_open, self.is_idle(), leftovers, bits))

    async def _sample_lines(self) -> None:
        d = self.dut
        mem = self.top.u_mem
        edge = FallingEdge(self.clk)
        while True:
            await self._sample_go.wait()
            self._sample_go.clear()
            while True:
                await edge
                if not self._sampling:
                    break
                # a ready is read only where its valid is up (a read costs Python ~5 us)
                hs = _u(d.kmem_valid)
                if hs:
                    hs &= _u(d.kmem_ready)
                grant = _u(mem.req_valid_i)
                if grant:
                    grant &= _u(mem.req_ready_o)
                if not (hs or grant):
                    continue
                cyc = _u(d.cyc_q)
                if grant:
                    addrs = mem.req_addr_i.value.to_unsigned()
                    for c in _bits(grant):
                        addr = (addrs >> (LINE_ADDR_BITS * c)) & LINE_ADDR_MASK
                        self.req_q.put_nowait(MemRequest(c, addr, cyc))
                for c in _bits(hs):
                    core = self.cores[c]
                    data = core.kmem_data_o.value.to_unsigned()
                    self.line_q.put_nowait(KmemLine(c, _u(core.kmem_addr_o), data, cyc))
