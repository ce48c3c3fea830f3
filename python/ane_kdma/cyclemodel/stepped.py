"""The stepped reference: kdma_top, its cores and the memory, register by register."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ane_kdma.cyclemodel.dwindow import DemandWindow
from ane_kdma.cyclemodel.governor import Governor
from ane_kdma.cyclemodel.job import Backpressure, CoreResult, Job, ModelResult, check, top_cycles
from ane_kdma.cyclemodel.ready import Ready
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings


@dataclass
class _CoreRegs:
    """kdma_core's registers, the ring's issued count and the memory port, for one core."""

    queue: list[tuple[int, int]]  # tasks not yet accepted
    gov: Governor  # the issue-rate governor's registers
    dwin: DemandWindow  # the starved-line counter (the demand window that grows)
    base: int = 0
    lines: int = 0
    issued: int = 0
    consumed: int = 0
    tail: int = 0
    cur_busy: bool = False
    done_q: bool = False
    inflight: int = 0
    kmem: int = 0
    peak: int = 0
    cycles: int = 0
    zero: int = 0
    tok: int = RATE_ONE
    warm: int = 0  # lines granted since the request started (memory warm-up)
    gap: int = 0  # cycles the current task still holds its first request back
    spec_out: int = 0  # speculative lines requested and not drained
    classes: deque[bool] = field(
        default_factory=deque
    )  # spec bit of every line in the core, in order
    pops: deque[int] = field(default_factory=deque)
    grants: list[int] = field(default_factory=list)
    drains: list[int] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.cur_busy or self.tail != 0


def simulate(
    hyp: Hypothesis,
    geom: Geometry,
    settings: Settings,
    job: Job,
    backpressure: Backpressure | None = None,
    max_cycles: int = 50_000_000,
) -> ModelResult:
    """Step kdma_top, its cores and the memory register by register (start held high)."""
    check(job, settings, geom)
    s = settings
    one, big_r = RATE_ONE, s.agg_rate_q16
    lat = max(s.latency, 1)
    ncores = len(job)
    en = [seq is not None for seq in job]
    regs = [_CoreRegs(list(seq or []), Governor(s), DemandWindow(s)) for seq in job]
    split = hyp.paths == "split"
    ready = [Ready(backpressure, c) for c in range(ncores)]
    prev_q = [False] * ncores
    cur_q = [False] * ncores
    agg, rr = one, 0
    accepts: list[int] = []
    fresh = 0
    c = 0
    while True:
        # ---- combinational: cycle c
        done_o = [k.done_q for k in regs]
        prev_d = [prev_q[i] and not done_o[i] for i in range(ncores)]
        cur_d = [cur_q[i] and not (done_o[i] and not prev_q[i]) for i in range(ncores)]
        core_idle = [not k.busy for k in regs]
        idle = not any(prev_q) and not any(cur_q) and all(core_idle)
        pending = any(k.queue for k in regs)
        if not pending and idle and accepts:
            break
        if c > max_cycles:
            raise RuntimeError("simulation did not finish")
        core_ready = []
        for k in regs:
            nxt = k.queue[0][1] if k.queue else 0
            core_ready.append(not k.busy or (k.issued == k.lines and k.tail == 0 and nxt != 0))
        top_ready = idle or (
            not any(prev_d)
            and en == cur_q
            and all(core_ready[i] or not en[i] for i in range(ncores))
        )
        accept = pending and top_ready
        valid, cred, spec = [False] * ncores, [0] * ncores, [False] * ncores
        for i, k in enumerate(regs):
            cred[i] = hyp.credit(geom, k.base, k.lines, k.issued)
            out = k.inflight + k.kmem
            win = s.window if cred[i] else k.dwin.window()  # a starved line: its window
            cap = min(win + cred[i], geom.kmem_lines)
            spec[i] = split and cred[i] > 0
            if split and not spec[i]:  # the demand path: demand lines against the window
                room = out - k.spec_out < cap and out < geom.kmem_lines
            else:  # a speculative line (or one path): every line in the core counts
                room = out < cap
            valid[i] = k.cur_busy and k.issued != k.lines and room and k.gap == 0
        eligible = [
            valid[i]
            and regs[i].tok + regs[i].gov.rate >= one
            and len(regs[i].pops) < geom.kmem_lines
            for i in range(ncores)
        ]
        avail, spent, rr_d = agg + big_r, 0, rr
        grant = [False] * ncores
        for n in range(ncores):
            i = (rr + n) % ncores
            if eligible[i] and avail - spent >= one:
                grant[i] = True
                spent += one
                rr_d = (i + 1) % ncores
        # ---- registers: end of cycle c
        if accept:
            accepts.append(c)
            if idle:
                fresh = c
                for rd in ready:
                    rd.restart(c)
        for i, k in enumerate(regs):
            popped = bool(k.pops) and k.pops[0] <= c
            drained = k.kmem > 0 and ready[i].at(c)
            tail_drain = drained and k.tail != 0
            cur_drain = drained and k.tail == 0 and k.cur_busy
            cur_last = cur_drain and k.consumed + 1 == k.lines
            tail_last = tail_drain and k.tail == 1
            take = accept and en[i]
            nxt_lines = k.queue[0][1] if take else 0
            busy = k.busy
            # counters (they see this cycle's registers)
            if take and not busy:
                k.cycles, k.zero = 0, 0
            elif busy:
                k.cycles += 1
                if k.cur_busy and k.issued != k.lines and cred[i] == 0:
                    k.zero += 1
            k.done_q = tail_last or cur_last or (take and nxt_lines == 0)
            if k.inflight > k.peak:
                k.peak = k.inflight
            rate = k.gov.refill(busy)
            if grant[i]:
                k.tok = k.tok + rate - one
                lat_i = lat + (s.warm_extra_cycles if k.warm < s.warm_lines else 0)
                lat_i += k.dwin.extra() if cred[i] == 0 else 0  # the demand path's warm-up
                k.pops.append(c + lat_i)
                k.grants.append(c)
                k.warm += 1
                k.classes.append(spec[i])
                k.spec_out += int(spec[i])
            else:
                k.tok = min(k.tok + rate, one)
            if popped:
                k.pops.popleft()
            k.inflight += int(grant[i]) - int(popped)
            k.kmem += int(popped) - int(drained)
            if drained:
                k.drains.append(c)
                k.spec_out -= int(k.classes.popleft())
            if tail_drain:
                k.tail -= 1
            # the governor: a request starts at ramp_start, then climbs with every step of lines
            if take and not busy:
                k.gov.start()
                k.dwin.start()
                k.warm = 0
            elif grant[i]:
                k.gov.granted()
                if cred[i] == 0:
                    k.dwin.granted()
            if take:
                if k.cur_busy and not cur_last:
                    k.tail = k.lines - k.consumed - int(cur_drain)
                if not busy:
                    k.peak = 0
                k.base, k.lines = k.queue.pop(0)
                k.cur_busy = k.lines != 0
                k.consumed = 0
                k.issued = 0
                k.gap = s.task_gap_cycles
            else:
                if grant[i]:
                    k.issued += 1
                if cur_drain:
                    k.consumed += 1
                if cur_last:
                    k.cur_busy = False
                if k.gap:
                    k.gap -= 1
        agg = min(avail - spent, one)
        rr = 0 if accept else rr_d
        if accept:
            prev_q = cur_d
            cur_q = list(en)
        else:
            prev_q, cur_q = prev_d, cur_d
        c += 1
    results: list[CoreResult | None] = []
    for i, k in enumerate(regs):
        if not en[i]:
            results.append(None)
            continue
        results.append(
            CoreResult(
                cycles=k.cycles,
                zero_credit_cycles=k.zero,
                peak_inflight=k.peak,
                issued=len(k.grants),
                grants=np.asarray(k.grants, dtype=np.int64),
                drains=np.asarray(k.drains, dtype=np.int64),
            )
        )
    last = [k.drains[-1] for k in regs if k.drains]
    return ModelResult(top_cycles(last, accepts), results, "stepped", accepts, fresh)
