"""The shadow's jumps: the leader jumps ahead, its followers stay in step.

One job: from the state the shadow (:mod:`.shadow`) reached, land the leader
further on exactly, by the token form (:meth:`Jumps.token_jump`) or by a
period of its state (:meth:`Jumps.period_jump`), with the aggregate bucket and
each follower's next line where the stepped loop would have them; and give
the followers back to the general loop (:meth:`Jumps.unshadow`).
"""

from __future__ import annotations

import numpy as np

from ane_kdma.cyclemodel.bucket import Arbiter, bucket_form
from ane_kdma.cyclemodel.governor import NEVER
from ane_kdma.cyclemodel.group import Group
from ane_kdma.cyclemodel.groupstate import ring_lines
from ane_kdma.cyclemodel.lines import COLUMNS, moved
from ane_kdma.cyclemodel.tokenform import token_land, token_plan
from ane_kdma.hw import RATE_ONE

HASH_M = (1 << 61) - 1  # the period search's rolling hash (a hit is then checked exactly)
HASH_B = 1_000_003


class Jumps(Arbiter):
    """The leader's exact jumps, and the followers' return (see :class:`.shadow.Shadows`)."""

    kmem: int
    groups: list[Group]

    def token_jump(
        self,
        lead: Group,
        ys: list[int],
        nxt: list[int],
        deltas: list[int],
        groups: list[tuple[int, int, list[int]]],
    ) -> bool:
        """While the token bucket alone paces the leader, jump in closed form to its end.

        After a grant at g0 leaving the bank tok0 < rate r (none of it capped),
        the bucket alone would grant the leader's line x + n in cycle
        t(n) = g0 + ceil((n * one - tok0) / r), for every n (the past ones too,
        if it paced them), and t(n + P) = t(n) + T with P / T = r / one in
        lowest terms. No gate can bind on t's own lines when every gate looks
        back k lines with floor(k * one / r) >= the round trip latency + 2;
        the lines before x + 1 need not follow t, only be drained before the
        first line of t that can look back to them (so the form holds from a
        request's first lines, and right after the governor's step, where a
        slower rate paced the lines before). Then the leader follows t until
        the credit pattern or the governor's rate changes. The aggregate
        bucket and the followers see a pattern periodic in T: it is checked
        over at most two periods, exactly, and read at the landing cycle's
        phase (the followers' lines still due follow t exactly).

        `groups`: (delta, ports, round-robin table) of the leader and each follower.
        """
        tf = token_plan(lead, ys, self.kmem)
        if tf is None:
            return False
        kmem, one, x, g0, tok0, r = self.kmem, RATE_ONE, tf.x, tf.g0, tf.tok0, tf.r
        at1 = tf.at1
        # the aggregate bucket over the pattern's period (two if the first differs): refusals
        p_cycles = one // int(np.gcd(r, one))
        start = (self.bank, self.rr)
        # what the bucket sees, relative to cycle g0 (sweep points that differ only in their
        # size meet the same few patterns: the analysis is memoised on this key)
        key = (
            tok0,
            r,
            tuple((dl, size, tuple(tab)) for dl, size, tab in groups),
            tuple(y - x for y in ys),
            self.last - g0,
            self.bank,
            self.rr,
            self.big_r,
            self.ncores,
            kmem,
        )
        base = 0  # the bucket's state is periodic from the first period on, or the second
        rel = bucket_form(*key, periods=1)
        if rel is None:
            return False
        if rel(p_cycles) != start:
            base = 1
            rel = bucket_form(*key, periods=2)
            if rel is None or rel(2 * p_cycles) != rel(p_cycles):
                return False

        def state(c: int) -> tuple[int, int]:  # the bucket after the events up to cycle c
            assert rel is not None
            return rel(c - g0)

        t_land = at1(tf.lines)
        if t_land > g0 + (base + 1) * p_cycles:
            t_land = g0 + base * p_cycles + (t_land - g0 - base * p_cycles) % p_cycles
        bank, rr = state(t_land)
        token_land(lead, tf, tf.lines, self.kmem)
        self.bank, self.rr, self.last = bank, rr, lead.g_prev
        due(lead, lead.lo, ys, nxt, deltas)
        return True

    def period_jump(
        self,
        lead: Group,
        hit: tuple[int, int],
        ys: list[int],
        nxt: list[int],
        deltas: list[int],
        lag: int,
    ) -> bool:
        """The state after the leader's line x1 repeats that after line x0: jump ahead.

        The hash only proposes; the ring windows are compared exactly here.
        Periodic from x0 on, the state after line x1 + m * period + r is the
        state after line x0 + r, (m + 1) periods later: so the jump lands on
        any line, the last one before the credit pattern changes or the
        governor steps. Only the lines a state can see are carried over.
        """
        x0, zero0 = hit
        x1 = lead.x - 1
        ring = lead.ring
        period, mask = x1 - x0, ring.mask
        # lines of the ring a state needs: the window its gates can see, the lags (every
        # line before them drained: checked at x0, x1 and the source of the landing)
        keep = lead.reach + 2 + lag
        if x0 - keep < lead.low or period + keep + 1 >= ring.cap:
            return False
        z = np.arange(x0 - keep + 1, x0 + 1, dtype=np.int64)
        span = ring.grant[x1 & mask] - ring.grant[x0 & mask]
        if not ring.matches(z, ring, z + period, span):
            return False
        more = lead.steady_lines()  # how many more lines: while the arithmetic holds
        if more < keep:
            return False
        m, r = divmod(more, period)
        s = x0 + r  # the line whose state, m + 1 periods on, is the target's
        if not all(lead.drained(v, keep, lag) for v in (x0, x1, s)):
            return False
        gain, dt, dz = (m + 1) * period, (m + 1) * span, (m + 1) * (lead.zero - zero0)
        src = np.arange(s - keep + 1, s + 1, dtype=np.int64)
        # the in-flight values repeat: no new peak
        ring.put(src + gain, moved(ring.get(src, COLUMNS), dt, gain, dz, ring.peak[x1 & mask]))
        if lead.keep is not None:
            for lst in lead.keep:
                seg = lst[x0 + 1 : x1 + 1]
                for k in range(1, m + 1):
                    lst.extend(v + k * span for v in seg)
                lst.extend(v + (m + 1) * span for v in seg[:r])
        t = s + gain
        q_from = lead.q
        lead.lo = t - keep + 1
        lead.x = t + 1
        lead.land()
        lead.advance_dwin(q_from, lead.q)
        i = t & mask
        self.bank, self.rr, self.last = ring.agg[i], ring.rr[i], lead.g_prev
        due(lead, lead.lo, ys, nxt, deltas)
        return True

    def unshadow(
        self, lead: Group, fols: list[Group], ys: list[int], deltas: list[int], zbase: list[int]
    ) -> None:
        """Rebuild the followers at their next lines; the leader goes back to a short ring."""
        for f, y, delta, zb in zip(fols, ys, deltas, zbase, strict=True):
            f.follow(lead, y, delta, zb)
        short = ring_lines(self.kmem)
        if lead.ring.cap > short:
            lead.resize(short, lead.lo)


def window_hash(lead: Group, x: int, hwin: int) -> int:
    """The rolling hash of the leader's lines x - hwin + 1..x, each line's signature (its
    timing relative to its grant and to the line before, which the ring holds) set anew."""
    h, ring = 0, lead.ring
    G, D, PO, CL, SG, mask = ring.grant, ring.drain, ring.pop, ring.demand, ring.sig, ring.mask
    for z in range(x - hwin + 1, x + 1):
        i = z & mask
        g = G[i]
        sg = SG[i] = hash((g - G[(z - 1) & mask], D[i] - g, PO[i] - g, CL[i]))
        h = (h * HASH_B + sg) % HASH_M
    return h


def due(lead: Group, lo: int, ys: list[int], nxt: list[int], deltas: list[int]) -> None:
    """After the leader jumped to line x - 1: each follower's first line not yet due, and when."""
    t, ring = lead.x - 1, lead.ring
    G, mask = ring.grant, ring.mask
    for k, dl in enumerate(deltas):
        y = t + 1
        while y - 1 > lo and G[(y - 1) & mask] + dl > lead.g_prev:
            y -= 1
        ys[k] = y
        nxt[k] = G[y & mask] + dl if y <= t else NEVER
