"""One group of cores in the recurrence: the grant-to-grant arithmetic of kdma_core."""

from __future__ import annotations

import copy
from array import array
from collections import deque
from collections.abc import Sequence

import numpy as np

from ane_kdma.cyclemodel.governor import Governor
from ane_kdma.cyclemodel.job import Backpressure, CoreResult, Job
from ane_kdma.cyclemodel.ready import Ready
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings

#: Per line, a group keeps only a ring of its latest lines: grant, drain and pop
#: cycles, the line's path (1: demand), and after the grant the token bank, the
#: governor's rate and count and the zero-credit count; a leader (see Engine)
#: adds its running in-flight peak, a hash of the line, and the aggregate
#: bucket's bank and round-robin pointer after it, for the period search.
_FIELDS = ("G", "D", "PO", "CL", "TK", "RT", "CN", "ZR", "PK", "SG", "AB", "RR")
#: the ring of a leader: a period of the state (the token bank's is at most 65536
#: lines) plus the KMem lines the gates look back over
_RING_LONG = 1 << 17
_CHUNK = 4096  # credits are computed this many lines at a time
_HASH_M = (1 << 61) - 1  # the period search's rolling hash (a hit is then checked exactly)
_HASH_B = 1_000_003
_NEVER = 1 << 62


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
        work: tuple,
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
        self.cap, self.mask, self.lo = 1, 0, 0
        self._ring(ring_lines(self.kmem), 0)

    # ------------------------------------------------------------ the ring of latest lines
    def _ring(self, cap: int, lo: int) -> None:
        """A ring of `cap` lines holding what the current one holds of lines lo..x-1."""
        lo = max(lo, self.low, self.x - cap + 1)
        keep = np.arange(lo, self.x, dtype=np.int64)
        for f in _FIELDS:
            new = array("q", [0]) * cap
            old = getattr(self, f, None)
            if old is not None and keep.size:
                view = np.frombuffer(new, np.int64)
                view[keep & (cap - 1)] = np.frombuffer(old, np.int64)[keep & self.mask]
            setattr(self, f, new)
        self.cap, self.mask, self.lo = cap, cap - 1, lo

    @property
    def low(self) -> int:
        """The first line the ring still holds."""
        return max(self.lo, self.x - self.cap + 1)

    def view(self, f: str) -> np.ndarray:
        return np.frombuffer(getattr(self, f), np.int64)

    def copy(self, members: list[int]) -> Group:
        twin = Group.__new__(Group)
        twin.__dict__.update(self.__dict__)
        twin.members = members
        for f in _FIELDS:
            setattr(twin, f, array("q", getattr(self, f)))
        twin.dd = deque(self.dd, maxlen=self.kmem)
        twin.pend = deque(self.pend)
        twin.gov = copy.copy(self.gov)
        twin.gov.before = list(self.gov.before)
        if self.keep is not None:
            twin.keep = (list(self.keep[0]), list(self.keep[1]))
        twin.ready = self.ready  # only shared when there is no back-pressure
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
            self.warm_end = self.x + self.s.warm_lines
            self.gov.restart(accept, self.finish())  # a request starts: the governor too
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

    @property
    def issuing(self) -> bool:
        return self.q < self.n

    def credit(self, q: int) -> int:
        if self.cred_static is not None:
            return self.cred_static
        if not self.clo <= q < self.chi:
            self.clo, self.chi = q, min(self.n, q + _CHUNK)
            issued = np.arange(self.clo, self.chi, dtype=np.int64)
            self.carr = self.hyp.credit_array(self.geom, self.n, issued, self.base).tolist()
        return self.carr[q - self.clo]

    # ------------------------------------------------------------ one line
    def earliest(self) -> int:
        """The first cycle the next line may be granted, from this core's own constraints."""
        cred = self.cred_static
        if cred is None:
            cred = self.credit(self.q)
        kmem = self.kmem
        gov = self.gov
        if gov.before:
            g = gov.earliest(self.g_prev + 1, self.tok_after)
        else:  # Governor.earliest's closed form, inline (the hot path)
            g = self.g_prev + 1
            need = RATE_ONE - gov.rate - self.tok_after
            if need > 0:
                g -= -need // gov.rate
        if g < self.floor:
            g = self.floor
        cap = self.window + cred
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
            v = self.D[i & self.mask] + 1
            if v > g:
                g = v
        return g

    def grant(self, c: int) -> None:
        q, x = self.q, self.x
        cred = self.cred_static
        if cred is None:
            cred = self.credit(q)
        gov = self.gov
        if gov.before:
            tok = gov.grant(self.g_prev + 1, self.tok_after, c)
        else:  # Governor.grant's one-rate case, inline (the hot path)
            r = gov.rate
            tok = self.tok_after
            if c > self.g_prev + 1:
                tok += (c - self.g_prev - 1) * r
                if tok > RATE_ONE:
                    tok = RATE_ONE
            tok += r - RATE_ONE
            gov.count += 1
            if r < gov.rmax and gov.count % gov.step == 0:
                gov.rate = min(r + gov.inc, gov.rmax)
        self.tok_after = tok
        if cred == 0:  # counted while lines remain: since the last grant (or the accept)
            self.zero += c - self.last_grant_in_task
        self.last_grant_in_task = c
        pop = c + (self.lat if x >= self.warm_end else self.lat_warm)  # the memory's warm-up
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
        i = x & self.mask
        self.G[i], self.D[i], self.PO[i], self.CL[i] = c, d, pop, demand
        self.TK[i], self.RT[i], self.CN[i], self.ZR[i] = tok, gov.rate, gov.count, self.zero
        if self.keep is not None:
            self.keep[0].append(c)
            self.keep[1].append(d)
        self.g_prev, self.d_prev, self.pop_prev = c, d, pop
        self.x, self.q = x + 1, q + 1

    def result(self) -> CoreResult:
        keep = self.keep
        return CoreResult(
            cycles=self.d_prev - self.epoch if self.x > self.epoch_line else 0,
            zero_credit_cycles=self.zero,
            peak_inflight=self.peak,
            issued=self.x,
            grants=None if keep is None else np.asarray(keep[0], dtype=np.int64),
            drains=None if keep is None else np.asarray(keep[1], dtype=np.int64),
        )

    # ------------------------------------------------------------ shadows
    def same_state(self, lead: Group, delta: int) -> bool:
        """True if this group, after its line x - 1, is `lead` after that line, delta later.

        What decides the future of a group after a grant: its token bank and
        governor, its request's start line (the warm-up), and the grant, drain,
        pop cycles and paths of the lines the gates and the in-flight count
        can still see (the last KMem), relative to the grant.
        """
        y = self.x - 1
        lo = max(y - self.kmem + 1, 0)
        if lo < lead.low or lo < self.low or y >= lead.x:
            return False
        i = y & lead.mask
        if (self.tok_after, self.gov.rate, self.gov.count, self.epoch_line, self.task_first) != (
            lead.TK[i],
            lead.RT[i],
            lead.CN[i],
            lead.epoch_line,
            lead.task_first,
        ) or self.gov.before:
            return False
        z = np.arange(lo, y + 1, dtype=np.int64)
        a, b = z & self.mask, z & lead.mask
        return all(
            np.array_equal(self.view(f)[a], lead.view(f)[b] + (delta if f != "CL" else 0))
            for f in ("G", "D", "PO", "CL")
        )

    def follow(self, lead: Group, y: int, delta: int, zbase: int) -> None:
        """Become `lead` as it was after its line y - 1, `delta` cycles later."""
        if self.keep is not None and lead.keep is not None:
            for mine, theirs in zip(self.keep, lead.keep, strict=True):
                mine.extend(v + delta for v in theirs[self.x : y])
        lo = max(y - self.kmem - 1, lead.low, 0)
        z = np.arange(lo, y, dtype=np.int64)
        a, b = z & self.mask, z & lead.mask
        for f in ("G", "D", "PO", "CL", "TK", "RT", "CN", "ZR"):
            v = lead.view(f)[b]
            if f in ("G", "D", "PO"):
                v = v + delta
            elif f == "ZR":
                v = v + zbase
            self.view(f)[a] = v
        self.lo = lo
        i = (y - 1) & lead.mask
        self.x, self.q = y, y - self.task_first
        self.g_prev, self.d_prev = lead.G[i] + delta, lead.D[i] + delta
        self.pop_prev = lead.PO[i] + delta
        self.last_grant_in_task = self.g_prev
        self.tok_after = lead.TK[i]
        self.gov.rate, self.gov.count, self.gov.before = lead.RT[i], lead.CN[i], []
        self.zero = zbase + lead.ZR[i]
        self.peak = max(self.peak, lead.PK[i])
        d, po, cl = lead.view("D")[b] + delta, lead.view("PO")[b] + delta, lead.view("CL")[b]
        self.dd = deque(d[cl == 1].tolist(), maxlen=self.kmem)
        self.pend = deque(po[po > self.g_prev].tolist())
        self.inflight = len(self.pend)


def groups_of(
    hyp: Hypothesis, g: Geometry, s: Settings, job: Job, bp: Backpressure | None, keep: bool
) -> list[Group]:
    """Cores whose timing cannot differ share a group (the credit may depend on the base)."""
    keys: dict[tuple, list[int]] = {}
    for c, seq in enumerate(job):
        if seq is None:
            continue
        ring = g.ring_lines - 1
        work = tuple((b & ring if hyp.depends_on_start else 0, n) for b, n in seq)
        key = (work, c if bp is not None and bp.threshold else None)
        keys.setdefault(key, []).append(c)
    out = []
    for key, members in keys.items():
        seq = job[members[0]]
        out.append(Group(members, seq, key, hyp, g, s, Ready(bp, members[0]), keep))
    return out
