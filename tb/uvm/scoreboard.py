"""The scoreboard: every run against the line rules, the HDL checker's counts and the cycle model.

Failures are raised where they are seen, with a tag tools/mutants.py reads:
``[scoreboard:request]``, ``[scoreboard:line]``, ``[scoreboard:data]``,
``[scoreboard:cycles]``, ``[scoreboard:counters]``, ``[scoreboard:reset]``,
``[hdl-checker]``, ``[rtl-assertion]``, ``[timeout]`` (the coverage
subscriber adds ``[coverage:illegal]`` and ``[coverage:missed]``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.triggers import Event, Timer
from pyuvm import ConfigDB, uvm_analysis_export, uvm_analysis_port, uvm_scoreboard

from ane_kdma import cyclemodel as cm
from ane_kdma.contract import CoreCounters, Counters
from ane_kdma.engines.model import counters_of
from ane_kdma.hw import LINE_ADDR_MASK, LINE_BYTES, LINE_SHIFT, line_words
from kdma_tb import now_ns

from .covermodel import BP_EXT, BP_LFSR, BP_OFF, RunSummary
from .items import CheckerError, KmemLine, MemRequest, ResetEvent, RunEnd, TaskStart


class _Imp(uvm_analysis_export):
    def __init__(self, name: str, parent, write_fn) -> None:
        super().__init__(name, parent)
        self.write_fn = write_fn

    def write(self, t) -> None:
        self.write_fn(t)


@dataclass
class _Stream:
    """Lines a core still owes, in order: [next line address, lines left, payload, offset]
    segments. A stream that keeps the payload (`data`) holds each line's expected 64 bytes,
    computed for the whole segment at once when it is added (one numpy call per task, not
    one per line); the others hold b"".
    """

    data: bool = False
    segments: deque = field(default_factory=deque)

    def add(self, base_line: int, lines: int) -> None:
        if lines:
            blob = _expected_block(base_line, lines) if self.data else b""
            self.segments.append([base_line, lines, blob, 0])

    def pop(self) -> tuple[int, bytes] | None:
        """The next line owed and its expected payload (b"" if the stream keeps none)."""
        if not self.segments:
            return None
        seg = self.segments[0]
        addr = seg[0]
        at = seg[3]
        payload = seg[2][at : at + LINE_BYTES]
        seg[0] = (seg[0] + 1) & LINE_ADDR_MASK
        seg[1] -= 1
        seg[3] = at + LINE_BYTES
        if seg[1] == 0:
            self.segments.popleft()
        return addr, payload

    def left(self) -> int:
        return sum(s[1] for s in self.segments)


@dataclass
class _Run:
    starts: list[TaskStart]
    requests: list[_Stream]
    lines: list[_Stream]
    expected: cm.ModelResult | None = None
    deadline_ns: int = 0


def _expected_block(base_line: int, lines: int) -> bytes:
    """Lines base_line, base_line + 1, ... (wrapping at 2^26) as line_data lays them out:
    64 bytes each, word 0 first, little-endian (the integer a KMem line reads as)."""
    addrs = np.arange(base_line, base_line + lines, dtype=np.uint64)
    return line_words(addrs).astype("<u4").tobytes()


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
        self.hyp = self.bfm.hyp
        self.geometry = self.bfm.geometry
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

    def _model(self, run: _Run) -> cm.ModelResult:
        """The run's tasks so far, as the cycle model steps them (task j on every core at once)."""
        first = run.starts[0]
        per_core = [
            None if first.core_en >> c & 1 == 0 else [s.core_tasks()[c] for s in run.starts]
            for c in range(self.ncores)
        ]
        job = cm.job_of(per_core, LINE_BYTES)
        return cm.run(self.hyp, self.geometry, first.settings, job, first.backpressure)

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
                [],
                [_Stream() for _ in range(self.ncores)],
                [_Stream(data=True) for _ in range(self.ncores)],
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
        await Timer(max(deadline_ns - now_ns(), 1), unit="ns")
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
        if exp.fresh:
            raise AssertionError(
                f"[scoreboard:cycles] {what}: the model goes idle and restarts in cycle "
                f"{exp.fresh}, the RTL ran through"
            )
        # A run starts from idle once, at its first task (a start from idle opens a new
        # run), so cycles_o has counted from the first accept: it is the run's span.
        rtl = Counters(
            t.cycles,
            tuple(
                None if w is None else CoreCounters(g.cycles, g.zero_credit_cycles, g.peak_inflight)
                for g, w in zip(t.cores, exp.cores, strict=True)
            ),
        )
        bad = rtl.mismatches(counters_of(exp))
        if bad:
            raise AssertionError(f"[scoreboard:cycles] {what}: " + "; ".join(bad))
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
            governed=first.settings.ramp,
            warmed=first.settings.dwarm,
        )

    def _close(self) -> None:
        self.run = None
        self.runs_closed += 1
        self._quiet.set()
        if self.runs_closed % 250 == 0:
            self.logger.info("%d runs checked", self.runs_closed)

    # --------------------------------------------------------------- lines
    def _next(self, t: MemRequest | KmemLine, tag: str, what: str) -> tuple[int, bytes]:
        """The line core t.core owes next and its expected payload (tag "request": reads,
        b""; "line": drains); check t's address."""
        run = self.run
        if run is None or not run.starts[0].line_check:
            raise AssertionError(f"[scoreboard:{tag}] core {t.core}: {what} {t} outside a run")
        streams = run.requests if tag == "request" else run.lines
        owed = streams[t.core].pop()
        if owed is None:
            raise AssertionError(
                f"[scoreboard:{tag}] core {t.core} cycle {t.cycle}: {what} of line {t.addr:#x} "
                f"beyond the end of the run ({self._describe(run)})"
            )
        want = owed[0]
        if t.addr != want:
            raise AssertionError(
                f"[scoreboard:{tag}] core {t.core} cycle {t.cycle}: {what} of line {t.addr:#x}, "
                f"expected {want:#x}"
            )
        return owed

    def _on_request(self, t: MemRequest) -> None:
        self._next(t, "request", "read")

    def _on_line(self, t: KmemLine) -> None:
        want, payload = self._next(t, "line", "drain")
        if t.data != int.from_bytes(payload, "little"):
            words = np.frombuffer(payload, dtype="<u4")
            where = f"core {t.core} cycle {t.cycle}: line {want:#x} (byte {want << LINE_SHIFT:#x})"
            for j in range(16):
                act = (t.data >> (32 * j)) & 0xFFFF_FFFF
                if act != int(words[j]):
                    raise AssertionError(
                        f"[scoreboard:data] {where} word {j}: expected {int(words[j]):#010x}, "
                        f"got {act:#010x}"
                    )
            raise AssertionError(f"[scoreboard:data] {where}: {t.data.bit_length()}-bit data")
        self.lines_checked += 1
