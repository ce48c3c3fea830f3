"""Shadow cores: groups that are shifted copies of one leader step as one.

One job: while every issuing group repeats the leader's grants some cycles
later, step the leader alone and pass each follower's lines through the
aggregate bucket from the leader's ring; search the leader's state for a
period or a token form to jump (:class:`.jumps.Jumps`); and hand the
followers back to the general loop when the bucket refuses one.
"""

from __future__ import annotations

from math import gcd

from ane_kdma.cyclemodel.governor import NEVER
from ane_kdma.cyclemodel.group import Group
from ane_kdma.cyclemodel.groupstate import RING_LONG
from ane_kdma.cyclemodel.jumps import HASH_B, HASH_M, Jumps, window_hash
from ane_kdma.hw import RATE_ONE

RECORD_EVERY = 8  # the shadow's period search keeps a state every this many lines at most


class Shadows(Jumps):
    """The leader-and-followers shortcut (see :class:`~ane_kdma.cyclemodel.engine.Engine`)."""

    def try_shadow(self) -> bool | None:
        """Step one leader for every issuing group, if they are shifted copies of it.

        None: not comparable yet (a group has no line of this task yet, waits
        on the bucket, or stands at another line); False: they differ; True:
        the shadow ran (the task is issued, or the bucket refused a follower).
        """
        issuing = [grp for grp in self.groups if grp.issuing]
        if not issuing:
            return None
        lead = max(issuing, key=lambda grp: (grp.x, -grp.g_prev))
        fols = [grp for grp in issuing if grp is not lead]
        if any(f.work != lead.work for f in fols):
            return False
        if lead.q < 1 or lead.refused >= lead.x:
            return None
        deltas = []
        if fols:
            x = fols[0].x
            if lead.refused >= x or any(f.x != x or f.q < 1 or f.refused >= f.x for f in fols):
                return None
            base = lead.ring.grant[(x - 1) & lead.ring.mask]
            deltas = [f.g_prev - base for f in fols]
            if lead.x - x >= self.kmem or min(deltas) < 0:
                return False
            if x < lead.x and lead.ring.grant[x & lead.ring.mask] + min(deltas) <= self.last:
                return False  # (cannot happen: a follower's next line is not in the past)
            if not all(f.same_state(lead, d) for f, d in zip(fols, deltas, strict=True)):
                return False
        self.shadow(lead, fols, deltas)
        return True

    def shadow(self, lead: Group, fols: list[Group], deltas: list[int]) -> None:
        """Step the leader; followers' grants are its own, delta later (see the class doc)."""
        kmem = self.kmem
        sync = fols[0].x - 1 if fols else lead.x - 1  # the line the followers last granted
        nf = len(fols)
        ys = [f.x for f in fols]  # each follower's next line
        zbase = [f.zero - lead.ring.zero[sync & lead.ring.mask] for f in fols]
        sizes = [len(f.members) for f in fols]
        tabs = [self.table(f.members) for f in fols]
        m_lead, tab_lead = len(lead.members), self.table(lead.members)
        # the leader's in-flight peak since the followers' line
        lead.lo = lead.low  # (its ring grows when the period search needs it)
        lo, entry = lead.lo, lead.x
        ring = lead.ring
        G, D, PO, CL, PK, SG = ring.grant, ring.drain, ring.pop, ring.demand, ring.peak, ring.sig
        AB, RR = ring.agg, ring.rr
        mask = ring.mask
        PK[sync & mask] = 0
        for z in range(sync + 1, lead.x):
            gz = G[z & mask]
            first = max(z - kmem + 1, lead.epoch_line, lo)
            infl = sum(1 for w in range(first, z + 1) if PO[w & mask] > gz)
            PK[z & mask] = max(PK[(z - 1) & mask], infl)
        # the hash of the KMem lines the state can see, rolled line by line from where the
        # period search first needs it (None: not yet, or not since the last jump)
        # (only lines its gates can still see: the credit pattern's widest window, KMem at
        # most; older lines drained, which the jump checks)
        hwin = lead.reach
        h: int | None = None
        hash_b, hash_m = HASH_B, HASH_M
        b_top = pow(hash_b, hwin, hash_m)
        seen: dict[tuple[object, ...], tuple[int, int]] = {}
        one, big_r, ncores = RATE_ONE, self.big_r, self.ncores
        nxt = [G[y & mask] + dl if y < lead.x else NEVER for y, dl in zip(ys, deltas, strict=True)]
        bank, last, rr = self.bank, self.last, self.rr
        groups = [(0, m_lead, tab_lead)] + list(zip(deltas, sizes, tabs, strict=True))
        token_try = 0
        first, horizon, period = lead.task_first, lead.horizon, lead.period
        n_end = first + lead.n  # the line after the task's last
        # the period search keeps a state every `rec` lines of the task (rec divides the
        # credit pattern's period, hence every period the search can find: a repeat is
        # seen at most rec - 1 lines after it could be)
        rmask = gcd(period, RECORD_EVERY) - 1
        # one follower (the usual split of 16 cores: 13 and 3) runs on scalars
        one_f = nf == 1
        y0, nx0, dl0 = (ys[0], nxt[0], deltas[0]) if one_f else (0, NEVER, 0)
        ports0 = sizes[0] * one if one_f else 0
        tab0 = tabs[0] if one_f else tab_lead
        ports_lead = m_lead * one
        earliest, grant = lead.earliest, lead.grant
        while True:
            xl = lead.x
            e = earliest() if xl < n_end else NEVER
            if one_f:  # the follower's grants before cycle e, through the bucket
                while nx0 < e:
                    if nx0 > last + 1:
                        bank += (nx0 - last - 1) * big_r
                        if bank > one:
                            bank = one
                    avail = bank + big_r
                    if ports0 > avail:  # the bucket refuses one: back to the general loop
                        ys[0], nxt[0] = y0, nx0
                        self.bank, self.last, self.rr = bank, last, rr
                        return self.unshadow(lead, fols, ys, deltas, zbase)
                    bank, last, rr = avail - ports0, nx0, (rr + tab0[rr] + 1) % ncores
                    if bank > one:
                        bank = one
                    y0 += 1
                    nx0 = G[y0 & mask] + dl0 if y0 < xl else NEVER
            elif nf:  # the followers' grants before cycle e, in time order, through the bucket
                t = min(nxt)
                while t < e:
                    ports, key = 0, -1
                    for k in range(nf):
                        if nxt[k] == t:
                            ports += sizes[k]
                            key = max(key, tabs[k][rr])
                    if t > last + 1:
                        bank = min(bank + (t - last - 1) * big_r, one)
                    avail = bank + big_r
                    if ports * one > avail:  # the bucket refuses one: back to the general loop
                        self.bank, self.last, self.rr = bank, last, rr
                        return self.unshadow(lead, fols, ys, deltas, zbase)
                    bank, last, rr = min(avail - ports * one, one), t, (rr + key + 1) % ncores
                    for k in range(nf):
                        if nxt[k] == t:
                            y = ys[k] = ys[k] + 1
                            nxt[k] = G[y & mask] + deltas[k] if y < xl else NEVER
                    t = min(nxt)
            if e == NEVER:
                break
            # cycle e: the leader and any follower due then (or in step with it)
            if one_f:
                with0 = nx0 == e or (y0 == xl and dl0 == 0)
                if with0:
                    ports, key = ports_lead + ports0, max(tab_lead[rr], tab0[rr])
                else:
                    ports, key = ports_lead, tab_lead[rr]
            else:
                ports, key = ports_lead, tab_lead[rr]
                for k in range(nf):
                    if nxt[k] == e or (ys[k] == xl and deltas[k] == 0):
                        ports += sizes[k] * one
                        key = max(key, tabs[k][rr])
            if e > last + 1:
                bank += (e - last - 1) * big_r
                if bank > one:
                    bank = one
            avail = bank + big_r
            if ports > avail:
                if one_f:
                    ys[0], nxt[0] = y0, nx0
                self.bank, self.last, self.rr = bank, last, rr
                return self.unshadow(lead, fols, ys, deltas, zbase)
            bank, last, rr = avail - ports, e, (rr + key + 1) % ncores
            if bank > one:
                bank = one
            grant(e)
            if one_f:
                if with0:  # granted with the leader
                    y0 += 1
                nx0 = G[y0 & mask] + dl0 if y0 <= xl else NEVER
            else:
                for k in range(nf):
                    y = ys[k]
                    if nxt[k] == e or (y == xl and deltas[k] == 0):  # granted with the leader
                        ys[k] = y = y + 1
                    nxt[k] = G[y & mask] + deltas[k] if y <= xl else NEVER
            # the leader's line xl: its peak, the aggregate after it, its hash
            i = xl & mask
            inflight, pk = lead.inflight, PK[(xl - 1) & mask]
            PK[i] = inflight if inflight > pk else pk
            AB[i], RR[i] = bank, rr
            old = xl - hwin
            if h is not None:
                sg = hash((e - G[(xl - 1) & mask], D[i] - e, PO[i] - e, CL[i]))
                SG[i] = sg
                h = (h * hash_b + sg - SG[old & mask] * b_top) % hash_m
            if xl >= token_try:
                if one_f:
                    ys[0], nxt[0] = y0, nx0
                self.bank, self.last, self.rr = bank, last, rr
                if self.token_jump(lead, ys, nxt, deltas, groups):
                    seen.clear()
                    bank, last, rr = self.bank, self.last, self.rr
                    lo, entry = lead.lo, lead.x
                    h = None
                    if one_f:
                        y0, nx0 = ys[0], nxt[0]
                    continue
                token_try = xl + kmem
            q = xl - first  # this line's index in the task
            if h is not None and q & rmask:
                continue  # (the hash rolls on every line)
            if one_f:
                lag = xl - y0
            else:
                lag = xl - min(ys) if nf else 0
            if old <= lo or q >= horizon or not lead.settled(xl) or lag >= kmem:
                continue
            if ring.cap < RING_LONG and xl - entry > ring.cap // 2:
                # no period within half the ring: hold a longer one (the dict's lines stay),
                # eight times as long, up to the longest (a long ring costs its allocation)
                lead.resize(min(ring.cap * 8, RING_LONG), lo)
                ring = lead.ring
                G, D, PO, CL = ring.grant, ring.drain, ring.pop, ring.demand
                PK, SG, AB, RR = ring.peak, ring.sig, ring.agg, ring.rr
                mask, lo = ring.mask, lead.lo
            if h is None:
                h = window_hash(lead, xl, hwin)
            if q & rmask:
                continue
            lags = lag if one_f else tuple(xl - y for y in ys) if nf else 0
            dw = (lead.dwin.window(), lead.dwin.extra()) if lead.dwin_live else None
            state = (h, lead.tok_after, lead.gov.rate, q % period, bank, rr, lags, dw)
            hit = seen.get(state)
            if hit is not None:
                if one_f:
                    ys[0], nxt[0] = y0, nx0
                self.bank, self.last, self.rr = bank, last, rr
                if self.period_jump(lead, hit, ys, nxt, deltas, lag):
                    seen.clear()
                    bank, last, rr = self.bank, self.last, self.rr
                    lo, entry = lead.lo, lead.x
                    h = None
                    if one_f:
                        y0, nx0 = ys[0], nxt[0]
                    continue
            elif len(seen) >= RING_LONG - 4 * kmem:
                seen.clear()  # a period longer than the ring holds: not searched
            seen[state] = (xl, lead.zero)
        if one_f:
            ys[0], nxt[0] = y0, nx0
        self.bank, self.last, self.rr = bank, last, rr
        self.unshadow(lead, fols, ys, deltas, zbase)
