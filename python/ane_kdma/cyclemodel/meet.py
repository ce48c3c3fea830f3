"""Groups that meet: twins merge, followers take a leader's state, a jump lands.

One job: compare two groups' states exactly (:meth:`Meeting.twin`,
:meth:`Meeting.same_state`, :meth:`Meeting.drained`), and move a group onto a
state read from a ring (:meth:`Meeting.follow`, :meth:`Meeting.land`), which
the shortcuts (:mod:`.shortcuts`) rely on.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ane_kdma.cyclemodel.lines import OWN, moved
from ane_kdma.cyclemodel.pattern import CreditPattern


class Meeting(CreditPattern):
    """The meeting side of a group (see :class:`.group.Group`)."""

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

    def twin(self, other: Meeting) -> bool:
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
        if self.twin_key() != other.twin_key() or self.pend != other.pend:
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

    def twin_key(self) -> tuple[object, ...]:
        """The scalars :meth:`twin` compares: the line, the task, the last grant's cycles,
        the bank, the task's floor and start, the request's start and warm-up, the peak, the
        governor and the starved-line counter, a pending refusal, and whether lines are kept."""
        return (
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

    def merge(self, other: Meeting) -> None:
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
    def same_state(self, lead: Meeting, delta: int) -> bool:
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

    def follow(self, lead: Meeting, y: int, delta: int, zbase: int) -> None:
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
