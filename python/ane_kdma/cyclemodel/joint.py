"""Periods of the general loop: every issuing group jumps at once.

One job: where the shadow does not apply (groups with different work, or a
bucket that parts them), the general loop's whole state may still repeat
(:meth:`JointPeriods.joint_key` proposes, :meth:`JointPeriods.joint_jump`
checks exactly and jumps whole periods), or every group may be paced by its
token bucket alone (:meth:`JointPeriods.joint_token`, the aggregate bucket
stepped over their grants in closed form).
"""

from __future__ import annotations

import heapq

import numpy as np

from ane_kdma.cyclemodel.bucket import Arbiter, pointer_after
from ane_kdma.cyclemodel.group import Group
from ane_kdma.cyclemodel.lines import COLUMNS, moved
from ane_kdma.cyclemodel.tokenform import token_land, token_plan
from ane_kdma.hw import RATE_ONE

JOINT_CYCLES = 1 << 18  # the general loop's token form looks this far at most ...
JOINT_FIRST = 1 << 12  # ... and first this far
SAMPLE = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89)  # the joint key's sampled lines back (< 90)
#: the general loop's state at a cycle, as the period search keeps it: the cycle, and per
#: issuing group (by index) its next line and its zero-credit count (the group's, and what
#: each merged member adds to it)
Joint = tuple[int, list[int], list[tuple[int, dict[int, int]]]]


class JointPeriods(Arbiter):
    """The general loop's jumps (see :class:`~ane_kdma.cyclemodel.engine.Engine`)."""

    kmem: int
    groups: list[Group]

    def joint_key(self, heap: list[tuple[int, int]], c: int) -> tuple[object, ...] | None:
        """What the general loop's state after cycle c looks like, relative to cycle c.

        Every issuing group (each in the heap once): its members, its line
        relative to the first one's, its next try, its scalars (token bank, governor rate,
        credit phase, the counter's demand window and warm-up, a refusal), and
        its latest lines relative to c; then the aggregate bank and pointer.
        Equal keys only propose a period: :meth:`joint_jump` compares exactly.
        None: not searched (a group in its start-up).
        """
        parts = []
        x_ref = -1
        for e, k in sorted(heap, key=lambda t: t[1]):
            grp = self.groups[k]
            x = grp.x
            if x_ref < 0:
                x_ref = x
            if x - grp.task_first < 2 or not grp.settled(x - 1) or grp.gov.before:
                return None
            ring = grp.ring
            G, mask = ring.grant, ring.mask
            i = (x - 1) & mask
            parts.append(
                (
                    k,
                    tuple(grp.members),  # (groups merge and part: the same index, other cores)
                    e - c,
                    x - x_ref,
                    ring.drain[i] - c,
                    ring.pop[i] - c,
                    grp.tok_after,
                    grp.gov.rate,
                    grp.q % grp.period,
                    grp.dwin_key(),
                    grp.refused >= x,
                    len(grp.pend),
                    # a sample of the latest grants (what the exact comparison sees most)
                    tuple([G[(x - d) & mask] - c for d in SAMPLE]) if x - 90 >= grp.low else None,
                )
            )
        return (tuple(parts), self.bank, self.rr)

    def joint_jump(
        self, heap: list[tuple[int, int]], c: int, hit: Joint
    ) -> list[tuple[int, int]] | None:
        """The general loop's state after cycle c repeats that after an earlier cycle c0
        (every issuing group P lines on, T cycles later): jump whole periods.

        Exact: every group's window of the lines its gates and its in-flight
        count can see is compared, shifted T cycles; with the scalars of the
        key equal, the state after c is the state after c0 moved T cycles on,
        so the loop repeats it every T cycles while every group's arithmetic
        holds still (its credit pattern, governor rate and starved-line
        counter: :meth:`Group.steady_lines`). Each group lands m periods on;
        the bucket's bank and pointer repeat; the counters move by their
        gain per period. Groups may have merged and parted within the period
        (the key names every group's members, so they stand as they did): each
        member's count and lines then repeat its own, not the group's. Returns
        the new heap, or None (no jump).
        """
        c0, xs0, zeros0 = hit
        keys = sorted(k for _, k in heap)
        grps = [self.groups[k] for k in keys]
        period = grps[0].x - xs0[0]
        span = c - c0
        if period <= 0 or span <= 0:
            return None
        for grp, x0 in zip(grps, xs0, strict=True):
            t0, keep = x0 - 1, grp.reach + 2  # (older lines drained: checked)
            if t0 - keep < max(grp.low, 0) or period + keep + 1 >= grp.ring.cap:
                return None
            if not (grp.drained(t0, keep) and grp.drained(grp.x - 1, keep)):
                return None
            z = np.arange(t0 - keep + 1, t0 + 1, dtype=np.int64)
            if not grp.ring.matches(z, grp.ring, z + period, span):
                return None
        # (every group keeps a line to issue: the loop's heap holds issuing groups only)
        m = min(min(grp.steady_lines(), grp.n - grp.q - 1) for grp in grps) // period
        if m < 1:
            return None
        gain, dt = m * period, m * span
        for grp, x0, z0 in zip(grps, xs0, zeros0, strict=True):
            t, keep = grp.x - 1, grp.reach + 2
            ring = grp.ring
            src = np.arange(t - keep + 1, t + 1, dtype=np.int64)
            zero0, zoff0 = z0
            dz = m * (grp.zero - zero0)
            ring.put(src + gain, moved(ring.get(src, COLUMNS), dt, gain, dz))
            for p in grp.members:  # a member's own gain per period, where it differs
                more = grp.zoff.get(p, 0) - zoff0.get(p, 0)
                if more:
                    grp.zoff[p] = grp.zoff.get(p, 0) + m * more
            if grp.keep is not None:
                for p, before in list(grp.pre.items()):  # a member with lines of its own
                    cut = len(before[0])
                    if cut > x0:  # ... in the period: it repeats them
                        own = (before[0] + grp.keep[0][cut:], before[1] + grp.keep[1][cut:])
                        grp.pre[p] = (repeat(own[0], x0, m, span), repeat(own[1], x0, m, span))
                for lst in grp.keep:
                    lst[:] = repeat(lst, x0, m, span)
            q_from, refused = grp.q, grp.refused >= grp.x
            grp.lo = t + gain - keep + 1
            grp.x = t + gain + 1
            grp.land()
            grp.advance_dwin(q_from, grp.q)
            if refused:
                grp.refused = grp.x
        self.last = c + dt
        out = [(e + dt, k) for e, k in heap]
        heapq.heapify(out)
        return out

    def joint_token(self, heap: list[tuple[int, int]], c: int) -> list[tuple[int, int]] | None:
        """Every issuing group paced by its token bucket alone: jump them all in closed form.

        After cycle c of the general loop, each group whose gates are slack
        (:func:`.tokenform.token_plan`) grants its line x + n in cycle at(n). The
        aggregate bucket sees every group's grants, in time order: it is
        stepped over them in closed form (vectorised) up to the first cycle it
        would refuse one, or the first group's end of its closed form (its
        credit pattern, governor or starved-line counter changes), at most
        JOINT_CYCLES on. Each group lands on its last line granted by then;
        the bucket's bank and pointer are read there. Returns the new heap,
        or None (no jump).
        """
        plans = []
        for e, k in heap:
            grp = self.groups[k]
            if grp.refused >= grp.x or grp.q < 1 or grp.gov.before:
                return None
            grp.ring.peak[(grp.x - 1) & grp.ring.mask] = grp.peak  # (carried by the landing)
            tf = token_plan(grp, [], self.kmem)
            if tf is None or tf.at1(1) != e:
                return None
            plans.append(tf)
        limit = min(min(tf.at1(tf.lines) for tf in plans), c + JOINT_CYCLES)
        span = JOINT_FIRST  # (widened while the bucket grants every event: cost ~ the jump)
        while True:
            end = min(limit, c + span)
            times, ports, bits = [], [], []
            for b, ((_, k), tf) in enumerate(zip(heap, plans, strict=True)):
                t = tf.at(np.arange(1, tf.upto(end) + 1, dtype=np.int64))
                times.append(t)
                ports.append(np.full(t.size, len(self.groups[k].members), dtype=np.int64))
                bits.append(np.full(t.size, 1 << b, dtype=np.int64))
            t_all = np.concatenate(times)
            if t_all.size == 0:
                return None
            order = np.argsort(t_all, kind="stable")
            t_all = t_all[order]
            starts = np.flatnonzero(np.diff(t_all, prepend=t_all[0] - 1))
            ev_t = t_all[starts]
            ev_ports = np.add.reduceat(np.concatenate(ports)[order], starts)
            one, big_r, bank = RATE_ONE, self.big_r, self.bank
            gap = np.diff(ev_t, prepend=self.last)
            step = gap * big_r - ev_ports * one
            top = np.minimum(one, one + big_r - ev_ports * one)
            run = np.cumsum(step)
            banks = run + np.minimum(bank, np.minimum.accumulate(top - run))
            before = np.concatenate(([bank], banks[:-1]))
            refused = ev_ports * one > np.minimum(before + (gap - 1) * big_r, one) + big_r
            bad = np.flatnonzero(refused)
            if bad.size or end >= limit:
                break
            span *= 4
        n_ev = int(bad[0]) if bad.size else ev_t.size  # the events before the first refusal
        if n_ev == 0:
            return None
        cut = int(ev_t[n_ev - 1])  # the landing cycle: the last event the bucket grants
        # the round-robin pointer after those events: each moves it past the farthest
        # member of the groups that ask (as the general loop's arbitration does)
        tabs = [self.table(self.groups[k].members) for _, k in heap]
        ev_bits = np.bitwise_or.reduceat(np.concatenate(bits)[order], starts)[:n_ev]
        kinds, which = np.unique(ev_bits, return_inverse=True)
        ncores = self.ncores
        moves = np.empty((kinds.size + 1, ncores), dtype=np.int64)
        for row, m in enumerate(kinds.tolist()):
            asking = [tabs[b] for b in range(len(tabs)) if m >> b & 1]
            moves[row] = [(v + max(t[v] for t in asking) + 1) % ncores for v in range(ncores)]
        moves[-1] = np.arange(ncores)  # (no event: the padding of the last block)
        rr = pointer_after(moves, which.reshape(-1), self.rr)(n_ev - 1)
        out = []
        for (e, k), tf in zip(heap, plans, strict=True):
            grp = self.groups[k]
            n = tf.upto(cut)
            if n >= 1:
                token_land(grp, tf, n, self.kmem)
            if grp.issuing:
                out.append((grp.earliest() if n >= 1 else e, k))
        self.bank, self.rr, self.last = int(banks[n_ev - 1]), rr, cut
        heapq.heapify(out)
        return out


def repeat(lines: list[int], x0: int, m: int, span: int) -> list[int]:
    """Lines (cycles) with their part from x0 on repeated m times more, span cycles apart."""
    seg = lines[x0:]
    out = list(lines)
    for r in range(1, m + 1):
        out.extend(v + r * span for v in seg)
    return out
