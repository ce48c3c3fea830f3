"""Driver, monitors, agent, scoreboard, coverage subscriber and env.

Failures are raised where they are seen, with a tag tools/mutants.py reads:
``[scoreboard:request]``, ``[scoreboard:line]``, ``[scoreboard:data]``,
``[scoreboard:cycles]``, ``[scoreboard:counters]``, ``[scoreboard:reset]``,
``[hdl-checker]``, ``[rtl-assertion]``, ``[timeout]``, ``[coverage:illegal]``,
``[coverage:missed]``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, Timer
from pyuvm import (
    ConfigDB,
    uvm_agent,
    uvm_analysis_export,
    uvm_analysis_port,
    uvm_driver,
    uvm_env,
    uvm_monitor,
    uvm_scoreboard,
    uvm_sequencer,
    uvm_subscriber,
)

from ane_kdma import cyclemodel as cm
from ane_kdma.hw import LINE_ADDR_MASK, LINE_SHIFT, CreditMode, line_words

from .covermodel import BP_EXT, BP_LFSR, BP_OFF, Coverage, RunSummary
from .items import (
    CheckerError,
    KdmaTaskItem,
    KmemLine,
    MemRequest,
    ResetEvent,
    RunEnd,
    TaskStart,
)

# A fresh task is taken at once from idle; the engine is idle soon after a run
# ends (the scoreboard's watchdog bounds the run itself).
TAKE_LIMIT_CYCLES = 100
IDLE_LIMIT_CYCLES = 50_000_000


def _now_ns() -> int:
    return int(get_sim_time(unit="ns"))


# =============================================================================
# Driver
# =============================================================================
class KdmaDriver(uvm_driver):
    """Turns task items into pin activity through the BFM.

    A fresh item waits for idle and for the token buckets to refill, applies
    its settings and raises start_i until the top takes it. A chained item
    (the second half of a split pair) is offered in the same time step the
    previous one was taken, so start_i stays high across the two: the
    handshake the cycle model's run_sequence assumes.
    """

    def build_phase(self) -> None:
        self.bfm = ConfigDB().get(self, "", "BFM")
        self.default_settings: cm.Settings = ConfigDB().get(self, "", "SETTINGS")
        self.fresh_runs = 0
        self._prev: KdmaTaskItem | None = None
        self._taken_ns: int | None = None

    async def run_phase(self) -> None:
        await self.bfm.start(self.default_settings)
        while True:
            item = await self.seq_item_port.get_next_item()
            await self.drive(item)
            self.seq_item_port.item_done()

    async def drive(self, item: KdmaTaskItem) -> None:
        bfm = self.bfm
        item.check_build(bfm.ncores, bfm.mode)
        self.logger.debug("drive %s", item)
        if item.chained:
            prev = self._prev
            if prev is None or prev.reset_at is not None or prev.lines == 0:
                raise AssertionError(f"chained {item} follows no running task")
            if (prev.backpressure, prev.ext_ready) != (item.backpressure, item.ext_ready):
                raise AssertionError("a chained task must keep the run's back-pressure")
            if self._taken_ns != _now_ns():
                raise AssertionError("chained task offered after the previous one was taken")
        else:
            await bfm.wait_idle(IDLE_LIMIT_CYCLES)
            settings = item.settings or self.default_settings
            bfm.apply_settings(settings)
            await bfm.idle_cycles(bfm.settle_cycles(settings))
            self.fresh_runs += 1
        bfm.drive_task(item)
        await bfm.take_task(None if item.chained else TAKE_LIMIT_CYCLES)
        self._taken_ns = _now_ns()
        self._prev = item
        bfm.drop_start()
        if item.ext_ready and not item.chained:
            cocotb.start_soon(bfm.drive_ext_ready(item.backpressure))
        if item.reset_at is not None:
            await bfm.after_cycles(item.reset_at)
            await bfm.pulse_reset()


# =============================================================================
# Monitors: each forwards one BFM queue to its analysis port
# =============================================================================
class _QueueMonitor(uvm_monitor):
    queue = ""

    def build_phase(self) -> None:
        self.ap = uvm_analysis_port("ap", self)
        self.bfm = ConfigDB().get(self, "", "BFM")

    async def run_phase(self) -> None:
        q = getattr(self.bfm, self.queue)
        while True:
            self.ap.write(await q.get())


class TaskMonitor(_QueueMonitor):
    """Tasks taken, runs ended, resets, HDL checker errors."""

    queue = "task_q"


class MemRequestMonitor(_QueueMonitor):
    """Read requests granted by the memory, per port (line-checked runs)."""

    queue = "req_q"


class KmemMonitor(_QueueMonitor):
    """Lines drained from KMem with their data, per core (line-checked runs)."""

    queue = "line_q"


class KdmaAgent(uvm_agent):
    def build_phase(self) -> None:
        self.seqr = uvm_sequencer("seqr", self)
        self.driver = KdmaDriver("driver", self)
        self.task_mon = TaskMonitor("task_mon", self)
        self.req_mon = MemRequestMonitor("req_mon", self)
        self.kmem_mon = KmemMonitor("kmem_mon", self)

    def connect_phase(self) -> None:
        self.driver.seq_item_port.connect(self.seqr.seq_item_export)


# =============================================================================
# Scoreboard
# =============================================================================
class _Imp(uvm_analysis_export):
    def __init__(self, name: str, parent, write_fn) -> None:
        super().__init__(name, parent)
        self.write_fn = write_fn

    def write(self, t) -> None:
        self.write_fn(t)


@dataclass
class _Stream:
    """Lines a core still owes, in order: (next line address, lines left) segments."""

    segments: deque = field(default_factory=deque)

    def add(self, base_line: int, lines: int) -> None:
        if lines:
            self.segments.append([base_line, lines])

    def pop(self) -> int | None:
        if not self.segments:
            return None
        seg = self.segments[0]
        addr = seg[0]
        seg[0] = (seg[0] + 1) & LINE_ADDR_MASK
        seg[1] -= 1
        if seg[1] == 0:
            self.segments.popleft()
        return addr

    def left(self) -> int:
        return sum(s[1] for s in self.segments)


@dataclass
class _Run:
    starts: list[TaskStart]
    requests: list[_Stream]
    lines: list[_Stream]
    expected: cm.TaskResult | None = None
    deadline_ns: int = 0


def _expected_data(addr: int) -> int:
    return int.from_bytes(line_words(addr)[0].astype("<u4").tobytes(), "little")


class KdmaScoreboard(uvm_scoreboard):
    """Checks every run against the line rules, the HDL checker's counts and the cycle model.

    Line-checked runs: every memory request and every KMem line, per core, in
    order: address base + i, data ane_kdma.hw.line_words(address); it fails at
    the first mismatch. Every run: drained and issued counts, sticky assertion
    bits, and cycles (and per core: busy cycles, zero-credit cycles and the
    in-flight peak) against ane_kdma.cyclemodel, which must match exactly. A
    watchdog fails a run that outlives the model's cycle count by far.
    """

    def build_phase(self) -> None:
        self.bfm = ConfigDB().get(self, "", "BFM")
        self.mode: CreditMode = self.bfm.mode
        self.ncores: int = self.bfm.ncores
        self.period_ns: int = self.bfm.period_ns
        self.task_export = _Imp("task_export", self, self._on_task)
        self.req_export = _Imp("req_export", self, self._on_request)
        self.line_export = _Imp("line_export", self, self._on_line)
        self.ap = uvm_analysis_port("ap", self)
        self.run: _Run | None = None
        self.runs_closed = 0
        self.lines_checked = 0
        self.runs_line_checked = 0
        self.model_cycles = 0
        self._quiet = Event()
        self._quiet.set()

    async def wait_quiet(self) -> None:
        """Until no run is open (the last one ended or was reset)."""
        await Timer(self.period_ns, unit="ns")
        while self.run is not None:
            await self._quiet.wait()

    # --------------------------------------------------------------- dispatch
    def _on_task(self, t) -> None:
        if isinstance(t, TaskStart):
            self._start(t)
        elif isinstance(t, RunEnd):
            self._end(t)
        elif isinstance(t, ResetEvent):
            self._reset(t)
        elif isinstance(t, CheckerError):
            what = "address" if t.word == 16 else f"word {t.word}"
            raise AssertionError(
                f"[hdl-checker] core {t.core} cycle {t.cycle}: {what} mismatch at line "
                f"{t.exp_addr:#x} (got line {t.act_addr:#x}; expected word {t.exp_word:#010x}, "
                f"got {t.act_word:#010x})"
            )

    def _model(self, run: _Run) -> cm.TaskResult:
        first = run.starts[0]
        if len(run.starts) == 1:
            return cm.run_task(self.mode, first.settings, first.core_tasks(), first.backpressure)
        tasks = [s.core_tasks()[0] for s in run.starts]
        return cm.run_sequence(self.mode, first.settings, tasks, first.backpressure)

    def _describe(self, run: _Run) -> str:
        first = run.starts[0]
        sizes = "+".join(str(s.core_tasks()[0].lines) for s in run.starts if s.core_en & 1)
        bp = first.backpressure
        how = "off" if bp is None else f"{'ext' if first.ext_ready else 'lfsr'}{bp}"
        return (
            f"run of {len(run.starts)} task(s), {sizes or '?'} lines on core 0, "
            f"cores {first.core_en:#x}, base {first.bases[0]:#x}, {first.settings}, bp {how}"
        )

    # --------------------------------------------------------------- runs
    def _start(self, t: TaskStart) -> None:
        if t.fresh:
            if self.run is not None:
                raise AssertionError("[scoreboard:counters] a task was taken from idle mid-run")
            self.run = _Run(
                [], [_Stream() for _ in range(self.ncores)], [_Stream() for _ in range(self.ncores)]
            )
            self._quiet.clear()
        elif self.run is None:
            raise AssertionError("[scoreboard:counters] a back-to-back task with no run open")
        run = self.run
        if run.starts:
            first = run.starts[0]
            same = (first.settings, first.backpressure, first.ext_ready)
            if same != (t.settings, t.backpressure, t.ext_ready) or t.core_en != 1:
                raise AssertionError("[scoreboard:counters] back-to-back task changed the run")
        run.starts.append(t)
        if t.line_check:
            for c, task in enumerate(t.core_tasks()):
                if task is not None:
                    run.requests[c].add(task.base_line, task.lines)
                    run.lines[c].add(task.base_line, task.lines)
        run.expected = self._model(run)
        slack = 1000 + run.expected.cycles // 4
        start_ns = run.starts[0].time_ns
        run.deadline_ns = start_ns + (run.expected.cycles + slack) * self.period_ns
        cocotb.start_soon(self._watchdog(run, run.deadline_ns))

    async def _watchdog(self, run: _Run, deadline_ns: int) -> None:
        await Timer(max(deadline_ns - _now_ns(), 1), unit="ns")
        if self.run is run and run.deadline_ns == deadline_ns:
            raise AssertionError(
                f"[timeout] {self._describe(run)}: not done {deadline_ns - run.starts[0].time_ns}"
                f" ns after its start (model: {run.expected.cycles} cycles)"
            )

    def _end(self, t: RunEnd) -> None:
        run = self.run
        if run is None:
            raise AssertionError("[scoreboard:counters] run ended with none open")
        what = self._describe(run)
        for c, core in enumerate(t.cores):
            if core.assert_bits:
                raise AssertionError(
                    f"[rtl-assertion] core {c}: assertion bits {core.assert_bits:#09b} set ({what})"
                )
        if run.starts[0].line_check:
            for c in range(self.ncores):
                for name, stream in (("requested", run.requests[c]), ("drained", run.lines[c])):
                    if stream.left():
                        raise AssertionError(
                            f"[scoreboard:line] core {c}: {stream.left()} lines never {name}, next "
                            f"{stream.segments[0][0]:#x} ({what})"
                        )
        last = run.starts[-1].core_tasks()
        for c, task in enumerate(run.starts[0].core_tasks()):
            if task is None:
                continue
            want = sum(s.core_tasks()[c].lines for s in run.starts)
            got = t.cores[c]
            if got.drained != want:
                raise AssertionError(
                    f"[scoreboard:counters] core {c}: HDL checker counted {got.drained} lines "
                    f"drained, the run has {want} ({what})"
                )
            if got.issued != last[c].lines:
                raise AssertionError(
                    f"[scoreboard:counters] core {c}: issued {got.issued} of "
                    f"{last[c].lines} ({what})"
                )
        exp = run.expected
        if t.cycles != exp.cycles:
            raise AssertionError(
                f"[scoreboard:cycles] {what}: RTL {t.cycles} cycles, model {exp.cycles}"
            )
        for c, want_core in enumerate(exp.cores):
            if want_core is None:
                continue
            got = t.cores[c]
            for name in ("cycles", "zero_credit_cycles", "peak_inflight"):
                g, w = getattr(got, name), getattr(want_core, name)
                if g != w:
                    raise AssertionError(f"[scoreboard:cycles] core {c} {name}: RTL {g}, model {w}")
        self.model_cycles += exp.cycles
        if run.starts[0].line_check:
            self.runs_line_checked += 1
        summary = self._summary(run, end=t)
        self._close()
        self.ap.write(summary)

    def _reset(self, t: ResetEvent) -> None:
        for c, bits in enumerate(t.assert_bits):
            if bits:
                raise AssertionError(f"[rtl-assertion] core {c}: bits {bits:#09b} before reset")
        if not t.idle:
            raise AssertionError("[scoreboard:reset] not idle after reset")
        for c, (issued, kmem, inflight, queued) in enumerate(t.leftovers):
            if issued or kmem or inflight or queued:
                raise AssertionError(
                    f"[scoreboard:reset] core {c} after reset: issued {issued}, KMem {kmem}, "
                    f"in flight {inflight}, memory queue {queued}"
                )
        run = self.run
        if run is None:
            return
        summary = self._summary(run, reset=True)
        self._close()
        self.ap.write(summary)

    def _summary(self, run: _Run, end: RunEnd | None = None, reset: bool = False) -> RunSummary:
        first = run.starts[0]
        active = [c for c in range(self.ncores) if first.core_en >> c & 1]
        tasks = []
        for s in run.starts:
            per_core = s.core_tasks()
            tasks.append(tuple((per_core[c].base_line, per_core[c].lines) for c in active))
        bp = first.backpressure
        return RunSummary(
            tasks=tuple(tasks),
            cores=len(active),
            bp=BP_OFF if bp is None else BP_EXT if first.ext_ready else BP_LFSR,
            zero_credit=end is not None and any(end.cores[c].zero_credit_cycles for c in active),
            reset=reset,
        )

    def _close(self) -> None:
        self.run = None
        self.runs_closed += 1
        self._quiet.set()
        if self.runs_closed % 250 == 0:
            self.logger.info("%d runs checked", self.runs_closed)

    # --------------------------------------------------------------- lines
    def _on_request(self, t: MemRequest) -> None:
        run = self.run
        if run is None or not run.starts[0].line_check:
            raise AssertionError(f"[scoreboard:request] core {t.core}: request {t} outside a run")
        want = run.requests[t.core].pop()
        if want is None:
            raise AssertionError(
                f"[scoreboard:request] core {t.core} cycle {t.cycle}: read of line {t.addr:#x} "
                f"beyond the end of the run ({self._describe(run)})"
            )
        if t.addr != want:
            raise AssertionError(
                f"[scoreboard:request] core {t.core} cycle {t.cycle}: read of line {t.addr:#x}, "
                f"expected {want:#x}"
            )

    def _on_line(self, t: KmemLine) -> None:
        run = self.run
        if run is None or not run.starts[0].line_check:
            raise AssertionError(f"[scoreboard:line] core {t.core}: line drained outside a run")
        want = run.lines[t.core].pop()
        if want is None:
            raise AssertionError(
                f"[scoreboard:line] core {t.core} cycle {t.cycle}: line {t.addr:#x} drained "
                f"beyond the end of the run"
            )
        if t.addr != want:
            raise AssertionError(
                f"[scoreboard:line] core {t.core} cycle {t.cycle}: drained line {t.addr:#x}, "
                f"expected {want:#x}"
            )
        data = _expected_data(want)
        if t.data != data:
            words = line_words(want)[0]
            for j in range(16):
                act = (t.data >> (32 * j)) & 0xFFFF_FFFF
                if act != int(words[j]):
                    raise AssertionError(
                        f"[scoreboard:data] core {t.core} cycle {t.cycle}: line {want:#x} "
                        f"(byte {want << LINE_SHIFT:#x}) word {j}: expected {int(words[j]):#010x}, "
                        f"got {act:#010x}"
                    )
        self.lines_checked += 1


# =============================================================================
# Coverage
# =============================================================================
class KdmaCoverage(uvm_subscriber):
    """Samples every checked run into covermodel bins; an illegal hit fails at once."""

    def build_phase(self) -> None:
        bfm = ConfigDB().get(self, "", "BFM")
        knobs = ConfigDB().get(self, "", "KNOBS")
        self.path: str | None = ConfigDB().get(self, "", "COVERAGE_JSON")
        self.cov = Coverage.for_build(bfm.mode, knobs.k_max, bfm.ncores)

    def write(self, run: RunSummary) -> None:
        bad = self.cov.sample(run)
        if bad:
            raise AssertionError(
                f"[coverage:illegal] {', '.join(bad)} in {self.cov.mode.name} mode "
                f"(run {run.tasks[0][0]} lines)"
            )

    def extract_phase(self) -> None:
        self.logger.info("\n%s", self.cov.report())
        if self.path:
            with open(self.path, "w") as fh:
                fh.write(self.cov.to_json())

    def check_phase(self) -> None:
        missed = self.cov.missed()
        if missed:
            raise AssertionError(f"[coverage:missed] {len(missed)} bins: {', '.join(missed)}")


# =============================================================================
# Env
# =============================================================================
class KdmaEnv(uvm_env):
    def build_phase(self) -> None:
        self.agent = KdmaAgent("agent", self)
        self.scoreboard = KdmaScoreboard("scoreboard", self)
        self.coverage = KdmaCoverage("coverage", self)

    def connect_phase(self) -> None:
        self.agent.task_mon.ap.connect(self.scoreboard.task_export)
        self.agent.req_mon.ap.connect(self.scoreboard.req_export)
        self.agent.kmem_mon.ap.connect(self.scoreboard.line_export)
        self.scoreboard.ap.connect(self.coverage.analysis_export)
