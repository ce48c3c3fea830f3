"""One group of cores in the recurrence: the grant-to-grant arithmetic of kdma_core."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from ane_kdma.cyclemodel.dwindow import DemandWindow
from ane_kdma.cyclemodel.governor import Governor
from ane_kdma.cyclemodel.groupstate import Work, ring_lines
from ane_kdma.cyclemodel.job import Backpressure, CoreResult, Job
from ane_kdma.cyclemodel.lines import Ring
from ane_kdma.cyclemodel.meet import Meeting
from ane_kdma.cyclemodel.ready import Ready
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings


class Group(Meeting):
    """Cores with the same work in the same state: one grant schedule serves them all.

    The state is O(1) in the transfer: the gates look back at most KMem lines
    (a ring of the latest lines), the demand path its latest KMem demand lines,
    the in-flight count the pops still pending. Counters are kept as they go.
    """

    def __init__(
        self,
        members: list[int],
        tasks: Sequence[tuple[int, int]],
        work: Work,
        hyp: Hypothesis,
        g: Geometry,
        s: Settings,
        ready: Ready,
        keep: bool,
    ) -> None:
        self.members = members
        self.tasks = tasks
        self.work = work  # equal work (and no back-pressure): groups may shadow each other
        self.hyp, self.geom, self.s = hyp, g, s
        self.ready = ready
        self.kmem, self.window = g.kmem_lines, s.window
        self.split = hyp.paths == "split"
        self.lat = max(s.latency, 1)
        self.lat_warm = self.lat + s.warm_extra_cycles  # a line of the memory's warm-up
        self.warm_end = s.warm_lines  # the first line past it
        self.always = ready.always
        self.gov = Governor(s)
        self.dwin = DemandWindow(s)
        # the demand window or its warm-up can still change a starved line of this request
        # (never when both are off: the hot path then skips the hook)
        self.dwin_live = not self.dwin.grown()
        # the credit-0 lines of one period of the credit pattern (phase 0), while the
        # counter counts: how many starved lines a stretch of the task holds
        self.zpat = np.empty(0, dtype=np.int64)
        self.reach = self.kmem  # lines back the credit pattern's widest window reaches
        self.x = 0  # lines granted, all tasks
        self.j = -1  # task being issued
        self.q = 0  # line within it
        self.n = 0  # its lines
        self.task_first = 0  # x at the task's start
        self.prev_done = 0  # drain cycle of line task_first - 1
        self.g_prev = 0
        self.tok_after = RATE_ONE  # bank at cycle g_prev + 1: full at the start
        self.d_prev = 0
        self.pop_prev = 0
        self.last_grant_in_task = 0
        self.floor = 1
        self.zero = 0
        self.peak = 0
        self.inflight = 0  # in flight just after the last grant
        self.epoch = 0  # accept cycle of this core's last start from idle
        self.epoch_line = 0
        self.refused = -1  # the latest line the aggregate bucket held back
        self.dd: deque[int] = deque(maxlen=self.kmem)  # drains of the latest demand-path lines
        self.pend: deque[int] = deque()  # pop cycles of the lines in flight
        self.cred_static: int | None = None
        self.carr: list[int] = []  # credits of lines clo..chi-1 of the task
        self.clo = self.chi = 0
        self.base = 0
        self.period, self.horizon = 1, 0
        self.keep: tuple[list[int], list[int]] | None = ([], []) if keep else None
        self.lo = 0  # the first line the ring holds (lines below it are stale)
        self.ring = Ring(ring_lines(self.kmem))
        # members merged in from a group that met this one in the same state (see
        # :meth:`twin`): what their counters add to the group's, and their lines before
        self.zoff: dict[int, int] = {}  # zero-credit cycles
        self.pre: dict[int, tuple[list[int], list[int]]] = {}  # keep_lines: grants, drains

    def copy(self, members: list[int]) -> Group:
        twin = Group.__new__(Group)
        twin.__dict__.update(self.__dict__)
        twin.members = members
        twin.ring = self.ring.copy()
        twin.dd = deque(self.dd, maxlen=self.kmem)
        twin.pend = deque(self.pend)
        twin.gov = self.gov.copy()
        twin.dwin = self.dwin.copy()
        if self.keep is not None:
            twin.keep = (list(self.keep[0]), list(self.keep[1]))
        twin.ready = self.ready  # only shared when there is no back-pressure
        twin.zoff = {p: v for p, v in self.zoff.items() if p in members}
        twin.pre = {p: v for p, v in self.pre.items() if p in members}  # (never mutated)
        return twin

    # ------------------------------------------------------------ task boundaries
    def finish(self) -> int:
        """Cycle of the last drain of everything issued so far (0 if nothing)."""
        return self.d_prev if self.x else 0

    def start_task(self, j: int, accept: int, busy: bool) -> None:
        base, n = self.tasks[j]
        self.j, self.q, self.n = j, 0, n
        self.task_first, self.prev_done = self.x, self.d_prev
        self.floor = accept + 1 + self.s.task_gap_cycles
        self.last_grant_in_task = accept
        if not busy:  # kdma_core clears its counters when it takes a task while idle
            self.epoch, self.epoch_line, self.zero, self.peak = accept, self.x, 0, 0
            self.zoff = {}  # (every member's count starts again from 0)
            self.warm_end = self.x + self.s.warm_lines
            self.gov.restart(accept, self.finish())  # a request starts: the governor too
            self.dwin.start()  # ... and the demand window
            self.dwin_live = not self.dwin.grown()
        self.start_pattern(base, n)

    @property
    def issuing(self) -> bool:
        return self.q < self.n

    # ------------------------------------------------------------ one line
    def earliest(self) -> int:
        """The first cycle the next line may be granted, from this core's own constraints."""
        cred = self.cred_static
        if cred is None:  # (the credit's chunk, looked up here: the hot path)
            q, lo = self.q, self.clo
            cred = self.carr[q - lo] if lo <= q < self.chi else self.credit(q)
        kmem = self.kmem
        g = self.gov.earliest(self.g_prev + 1, self.tok_after)  # the token bucket
        if g < self.floor:  # the task's accept (and its per-task cost)
            g = self.floor
        # a starved line: its demand window (the window itself once that is full)
        cap = self.window + cred if cred or not self.dwin_live else self.dwin.window()
        if cap > kmem:
            cap = kmem
        if cred == 0 and self.split:
            # the demand path counts only demand lines against its window ...
            dd = self.dd
            if len(dd) >= cap:
                v = dd[-cap] + 1
                if v > g:
                    g = v
            cap = kmem  # ... and every line in the core must still fit KMem
        i = self.x - cap
        if i >= 0:
            ring = self.ring
            v = ring.drain[i & ring.mask] + 1
            if v > g:
                g = v
        return g

    def grant(self, c: int) -> None:
        q, x = self.q, self.x
        cred = self.cred_static
        if cred is None:
            lo = self.clo
            cred = self.carr[q - lo] if lo <= q < self.chi else self.credit(q)
        gov = self.gov
        tok = self.tok_after = gov.grant(self.g_prev + 1, self.tok_after, c)
        extra = 0
        if cred == 0:  # counted while lines remain: since the last grant (or the accept)
            self.zero += c - self.last_grant_in_task
            if self.dwin_live:
                dwin = self.dwin
                extra = dwin.take()  # the demand path's warm-up; the counter moves on
                if dwin.starved >= dwin.until:  # (grown)
                    self.dwin_live = False
        self.last_grant_in_task = c
        pop = c + (self.lat if x >= self.warm_end else self.lat_warm) + extra  # warm-ups
        if pop <= self.pop_prev:  # the port's queue pops in order
            pop = self.pop_prev + 1
        d = pop + 1
        if d <= self.d_prev:
            d = self.d_prev + 1
        if not self.always:
            d = self.ready.next(d)
        pend = self.pend
        pend.append(pop)
        while pend[0] <= c:  # in flight in cycle c + 1: granted and not popped by cycle c
            pend.popleft()
        n = self.inflight = len(pend)
        if n > self.peak:
            self.peak = n
        demand = cred == 0 and self.split
        if demand:
            self.dd.append(d)
        ring = self.ring
        i = x & ring.mask
        ring.grant[i], ring.drain[i], ring.pop[i], ring.demand[i] = c, d, pop, demand
        ring.bank[i], ring.rate[i], ring.count[i], ring.zero[i] = (
            tok,
            gov.rate,
            gov.count,
            self.zero,
        )
        if self.keep is not None:
            self.keep[0].append(c)
            self.keep[1].append(d)
        self.g_prev, self.d_prev, self.pop_prev = c, d, pop
        self.x, self.q = x + 1, q + 1

    def result(self, member: int) -> CoreResult:
        """The counters of one member core (a merged one adds what it had before)."""
        keep = self.keep
        grants = drains = None
        if keep is not None:
            lines: tuple[list[int], list[int]] = keep
            if member in self.pre:
                before = self.pre[member]
                cut = len(before[0])
                lines = (before[0] + keep[0][cut:], before[1] + keep[1][cut:])
            grants = np.asarray(lines[0], dtype=np.int64)
            drains = np.asarray(lines[1], dtype=np.int64)
        return CoreResult(
            cycles=self.d_prev - self.epoch if self.x > self.epoch_line else 0,
            zero_credit_cycles=self.zero + self.zoff.get(member, 0),
            peak_inflight=self.peak,
            issued=self.x,
            grants=grants,
            drains=drains,
        )


def groups_of(
    hyp: Hypothesis,
    g: Geometry,
    s: Settings,
    job: Job,
    bp: Backpressure | None,
    keep: bool,
    share: bool = True,
) -> list[Group]:
    """Cores whose timing cannot differ share a group: one grant schedule for them all.

    A core's timing depends on its base only through the credit, and the
    credit sees the base only through the ring's bits; when the registry says
    the credit ignores the start line (``depends_on_start`` False, held to the
    arithmetic by tests/test_hypotheses.py), cores that differ only in their
    bases share one group (a 16-core sweep point costs one core until the
    aggregate bucket parts them). Back-pressure gives every core its own
    readiness, hence its own group. share=False: one group per core (the
    ungrouped path the tests hold the sharing to).
    """
    keys: dict[Work, list[int]] = {}
    ring = g.ring_lines - 1 if hyp.depends_on_start else 0
    for c, seq in enumerate(job):
        if seq is None:
            continue
        work = tuple((b & ring, n) for b, n in seq)
        alone = not share or (bp is not None and bp.threshold)
        key = (work, c if alone else None)
        keys.setdefault(key, []).append(c)
    out = []
    for key, members in keys.items():
        seq = job[members[0]]
        assert seq is not None
        out.append(Group(members, seq, key, hyp, g, s, Ready(bp, members[0]), keep))
    return out
