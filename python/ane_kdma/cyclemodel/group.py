"""One group of cores in the recurrence: the grant-to-grant arithmetic of kdma_core."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from ane_kdma.cyclemodel.dwindow import DemandWindow
from ane_kdma.cyclemodel.governor import NEVER, Governor
from ane_kdma.cyclemodel.job import Backpressure, CoreResult, Job
from ane_kdma.cyclemodel.lines import OWN, Ring, moved
from ane_kdma.cyclemodel.ready import Ready
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings

#: the ring of a leader: a period of the state (the token bank's is at most 65536
#: lines) plus the KMem lines the gates look back over
RING_LONG = 1 << 17
CHUNK = 4096  # credits are computed this many lines at a time
#: what the timing of a group depends on: its tasks as the credit sees them, and its core
#: when back-pressure makes every core differ
Work = tuple[tuple[tuple[int, int], ...], int | None]


def ring_lines(kmem: int) -> int:
    """A group's usual ring: at least KMem lines and a follower's lag, a power of two."""
    return 1 << (2 * kmem + 2).bit_length()


class Group:
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

    # ------------------------------------------------------------ the ring of latest lines
    def resize(self, cap: int, lo: int) -> None:
        """A ring of `cap` lines holding what the current one holds of lines lo..x-1."""
        lo = max(lo, self.low, self.x - cap + 1)
        self.ring = self.ring.resized(cap, np.arange(lo, self.x, dtype=np.int64))
        self.lo = lo

    @property
    def low(self) -> int:
        """The first line the ring still holds."""
        return max(self.lo, self.x - self.ring.cap + 1)

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
        hyp, g = self.hyp, self.geom
        self.base = base
        self.cred_static = hyp.credit(g, base, n, 0) if hyp.static else None
        self.clo = self.chi = 0
        # how far the credit pattern repeats (the period search may not jump past it)
        page = g.prefetch_max_lines
        self.period, self.horizon = 1, 0
        if hyp.progress == "static":
            self.horizon = n
        elif hyp.progress == "paged":  # a pattern per page (constant when it covers none or all)
            page_credits = hyp.credit_array(g, n, np.arange(min(n, page)), base)
            self.horizon = n
            self.period = 1 if np.all(page_credits == page_credits[:1]) else page
        elif hyp.progress == "remaining" and n > page + 1:
            # at the clamp until the last lines; held to the credit arithmetic itself
            if hyp.credit(g, base, n, 0) == hyp.credit(g, base, n, n - page - 1):
                self.horizon = n - page
        self.zpat = np.empty(0, dtype=np.int64)
        self.reach = self.kmem
        if self.horizon > 0:  # (line q < horizon has the credit of q % period)
            pat = hyp.credit_array(g, n, np.arange(min(self.period, n), dtype=np.int64), base)
            self.reach = min(self.kmem, self.window + int(pat.max()))
            if self.dwin.until:
                self.zpat = np.flatnonzero(pat == 0).astype(np.int64)

    @property
    def issuing(self) -> bool:
        return self.q < self.n

    def credit(self, q: int) -> int:
        if self.cred_static is not None:
            return self.cred_static
        if not self.clo <= q < self.chi:
            self.clo, self.chi = q, min(self.n, q + CHUNK)
            issued = np.arange(self.clo, self.chi, dtype=np.int64)
            self.carr = self.hyp.credit_array(self.geom, self.n, issued, self.base).tolist()
        return self.carr[q - self.clo]

    def _zeros_before(self, q: int) -> int:
        """Lines 0..q-1 of this task with credit 0, for q <= horizon (the credit pattern)."""
        zpat, period = self.zpat, self.period
        return (q // period) * zpat.size + int(np.searchsorted(zpat, q % period))

    def starved_in(self, q0: int, q1: int) -> int:
        """Lines q0..q1-1 of this task that have credit 0 (the demand window counts them)."""
        if q1 <= q0 or self.dwin.grown():
            return 0
        if self.cred_static is not None:
            return q1 - q0 if self.cred_static == 0 else 0
        out = 0
        h = self.horizon
        if q0 < h:  # in the credit pattern: counted in closed form
            out = self._zeros_before(min(q1, h)) - self._zeros_before(q0)
            q0 = h
        if q1 > q0:  # past its horizon (at most a page)
            issued = np.arange(q0, q1, dtype=np.int64)
            credits = self.hyp.credit_array(self.geom, self.n, issued, self.base)
            out += int(np.count_nonzero(credits == 0))
        return out

    def advance_dwin(self, q0: int, q1: int) -> None:
        """The counter after lines q0..q1-1 of this task were granted in one go (a jump)."""
        if self.dwin_live:
            self.dwin.granted(self.starved_in(q0, q1))
            self.dwin_live = not self.dwin.grown()

    def dwin_steady(self) -> int:
        """Lines from q on that leave the demand window and its warm-up as they are: every
        line before the starved line whose grant changes them (NEVER in the pattern)."""
        if not self.dwin_live:
            return NEVER
        k = self.dwin.lines_at_window()  # the k-th starved line from q on changes them
        zpp = self.zpat.size
        if self.q >= self.horizon or not zpp:
            return NEVER
        i = self._zeros_before(self.q) + k - 1  # its index among the task's starved lines
        pos = (i // zpp) * self.period + int(self.zpat[i % zpp])
        return pos - self.q if pos < self.horizon else NEVER

    # ------------------------------------------------------------ what the shortcuts may skip
    # A rate mechanism that changes the per-line arithmetic after some line says so here:
    # the shortcuts jump only over lines where the arithmetic holds still.
    def steady_lines(self) -> int:
        """Lines after the last one whose arithmetic is the same: the credit pattern holds
        (its horizon), and so do the governor's rate and the starved-line counter's demand
        window and warm-up (the counter itself moves on: see :meth:`advance_dwin`)."""
        return min(self.horizon - self.q, self.gov.lines_at_rate(), self.dwin_steady())

    def slack_tail(self, steady: int, need: int, most: int) -> np.ndarray:
        """The credits of the lines after the `steady` ones when those reach the credit
        pattern's horizon: as many as follow with credit (none on the demand path) and a
        window + credit of at least `need` lines, and at most `most` (the token form's gates
        stay slack over them, whatever their credits)."""
        q0 = self.q + steady
        if most <= 0 or q0 < self.horizon or q0 >= self.n:
            return np.empty(0, dtype=np.int64)
        q1 = min(self.n, q0 + min(most, CHUNK))
        issued = np.arange(q0, q1, dtype=np.int64)
        cred = self.hyp.credit_array(self.geom, self.n, issued, self.base)
        ok = (cred > 0) & (np.minimum(self.window + cred, self.kmem) >= need)
        out: np.ndarray = cred[: ok.size if ok.all() else int(np.argmin(ok))]
        return out

    def settled(self, line: int) -> bool:
        """True if every line from `line` on is past the request's start-up (the memory's
        warm-up and the task's first-request hold-back). The starved-line counter is not a
        start-up: its stretches bound the jumps (:meth:`steady_lines`), and its demand window
        and warm-up are part of every state a jump compares (:meth:`dwin_key`)."""
        return line >= self.warm_end and line >= self.task_first

    def dwin_key(self) -> tuple[int, int] | None:
        """What the counter gives the next starved line: (demand window, extra latency)."""
        return (self.dwin.window(), self.dwin.extra()) if self.dwin_live else None

    def drained(self, z: int, keep: int, lag: int = 0) -> bool:
        """True if every line before the `keep` lines up to line z was drained by the grant
        of line z - lag: no gate and no in-flight count after it can see them, so the state
        after line z (or z - lag) is the window of those lines and the scalars. (Always true
        for keep > KMem: every line's gates hold it behind the line KMem lines before.)"""
        y = z - keep
        if y < 0 or keep > self.kmem:
            return True
        if y < self.low:
            return False
        ring = self.ring
        return bool(ring.drain[y & ring.mask] <= ring.grant[(z - lag) & ring.mask])

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

    # ------------------------------------------------------------ groups that meet
    def twin(self, other: Group) -> bool:
        """True if `other` stands in this group's state after the same line in the same cycle
        (its next try too, which the caller compares): the general loop would then grant both
        alike from here on, so one group can serve both (the bucket parts them again if it
        must). Compared is everything the arithmetic of a line reads (:meth:`earliest`,
        :meth:`grant`, the task loop): the scalars, the lines in flight, the demand lines
        the demand window can still see, and the drains the gates can still see (a line
        drained by the latest grant cannot bind a later one: drains only grow). The counters
        may differ: the zero-credit count by what :meth:`merge` records; the in-flight peak
        must be equal (it is a maximum: a merged member could not keep its own)."""
        if self.work != other.work or not (self.always and other.always):
            return False
        mine = (
            self.x,
            self.j,
            self.g_prev,
            self.d_prev,
            self.pop_prev,
            self.tok_after,
            self.last_grant_in_task,
            self.floor,
            self.prev_done,
            self.task_first,
            self.epoch,
            self.epoch_line,
            self.warm_end,
            self.peak,
            self.gov.rate,
            self.gov.count,
            self.gov.before,
            self.dwin.starved,
            self.dwin_live,
            self.refused >= self.x,
            self.keep is None,
        )
        theirs = (
            other.x,
            other.j,
            other.g_prev,
            other.d_prev,
            other.pop_prev,
            other.tok_after,
            other.last_grant_in_task,
            other.floor,
            other.prev_done,
            other.task_first,
            other.epoch,
            other.epoch_line,
            other.warm_end,
            other.peak,
            other.gov.rate,
            other.gov.count,
            other.gov.before,
            other.dwin.starved,
            other.dwin_live,
            other.refused >= other.x,
            other.keep is None,
        )
        if mine != theirs or self.pend != other.pend:
            return False
        # the demand window looks back at most `window` demand lines (a starved line's cap)
        w = self.window
        if min(len(self.dd), w) != min(len(other.dd), w):
            return False
        if any(self.dd[-i] != other.dd[-i] for i in range(1, min(len(self.dd), w) + 1)):
            return False
        # the gates look back at most KMem lines; those drained by the last grant cannot bind
        x, g = self.x, self.g_prev
        lo = max(x - self.kmem, 0)
        start = max(lo, self.low, other.low)
        if start >= x:
            return start == x
        a, b = self.ring, other.ring
        if start > lo and (a.drain[start & a.mask] > g or b.drain[start & b.mask] > g):
            return False  # (a line the gates may still see is no longer held)
        z = np.arange(start, x, dtype=np.int64)
        da = np.maximum(a.view("drain")[z & a.mask], g)
        db = np.maximum(b.view("drain")[z & b.mask], g)
        return bool(np.array_equal(da, db))

    def merge(self, other: Group) -> None:
        """Take in the members of `other`, a :meth:`twin` of this group."""
        for p in other.members:
            self.zoff[p] = other.zero - self.zero + other.zoff.get(p, 0)
            if self.keep is not None and other.keep is not None:
                if p in other.pre:  # its lines before it joined `other`, then other's own
                    before = other.pre[p]
                    cut = len(before[0])
                    self.pre[p] = (before[0] + other.keep[0][cut:], before[1] + other.keep[1][cut:])
                else:
                    self.pre[p] = (list(other.keep[0]), list(other.keep[1]))
        self.members = sorted(self.members + other.members)

    # ------------------------------------------------------------ shadows and jumps
    def same_state(self, lead: Group, delta: int) -> bool:
        """True if this group, after its line x - 1, is `lead` after that line, delta later.

        What decides the future of a group after a grant: its token bank and
        governor, its request's start line (the warm-up), and what the gates
        and the in-flight count can still see of the last KMem lines, relative
        to the grant (the ring's seen columns).
        """
        y = self.x - 1
        keep = max(self.reach, lead.reach) + 2  # (every older line drained in both: checked)
        lo = max(y - keep + 1, 0)
        if lo < lead.low or lo < self.low or y >= lead.x:
            return False
        if not (self.drained(y, keep) and lead.drained(y, keep)):
            return False
        r, i = lead.ring, y & lead.ring.mask
        if (self.tok_after, self.gov.rate, self.gov.count, self.epoch_line, self.task_first) != (
            r.bank[i],
            r.rate[i],
            r.count[i],
            lead.epoch_line,
            lead.task_first,
        ) or self.gov.before:
            return False
        z = np.arange(lo, y + 1, dtype=np.int64)
        return lead.ring.matches(z, self.ring, z, delta)

    def follow(self, lead: Group, y: int, delta: int, zbase: int) -> None:
        """Become `lead` as it was after its line y - 1, `delta` cycles later."""
        if self.keep is not None and lead.keep is not None:
            for mine, theirs in zip(self.keep, lead.keep, strict=True):
                mine.extend(v + delta for v in theirs[self.x : y])
        self.lo = max(y - self.kmem - 1, lead.low, 0)
        z = np.arange(self.lo, y, dtype=np.int64)
        self.ring.put(z, moved(lead.ring.get(z, OWN), dt=delta, dz=zbase))
        self.advance_dwin(self.q, y - self.task_first)
        self.x = y
        self.land()
        self.peak = max(self.peak, lead.ring.peak[(y - 1) & lead.ring.mask])

    def land(self) -> None:
        """Take up the state after line x - 1 from the ring (after a follow or a jump)."""
        t, ring, kmem = self.x - 1, self.ring, self.kmem
        i = t & ring.mask
        self.q = self.x - self.task_first
        self.g_prev, self.d_prev, self.pop_prev = ring.grant[i], ring.drain[i], ring.pop[i]
        self.last_grant_in_task = self.g_prev
        self.tok_after = ring.bank[i]
        self.gov.rate, self.gov.count, self.gov.before = ring.rate[i], ring.count[i], []
        self.zero = ring.zero[i]
        # the lines still in flight, and the latest demand lines: among the last KMem
        # (every line before them was drained before line t's grant)
        w = ring.get(
            np.arange(max(t - kmem + 1, self.lo), t + 1, dtype=np.int64), ("pop", "drain", "demand")
        )
        po, d = w["pop"], w["drain"]
        self.pend = deque(po[po > self.g_prev].tolist())
        self.inflight = len(self.pend)
        self.dd = deque(d[w["demand"] == 1].tolist(), maxlen=kmem)


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
