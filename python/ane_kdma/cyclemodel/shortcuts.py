"""The recurrence's shortcuts: shadow cores, the token bucket's closed form, jumped periods."""

from __future__ import annotations

from collections import deque

import numpy as np

from ane_kdma.cyclemodel.group import (
    _FIELDS,
    _HASH_B,
    _HASH_M,
    _NEVER,
    _RING_LONG,
    Group,
    ring_lines,
)
from ane_kdma.hw import RATE_ONE


class Shortcuts:
    """The engine's exact shortcuts (mixed into :class:`~ane_kdma.cyclemodel.engine.Engine`)."""

    kmem: int
    ncores: int
    big_r: int
    bank: int
    last: int
    rr: int
    groups: list[Group]

    def table(self, members: list[int]) -> list[int]:
        raise NotImplementedError

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
            base = lead.G[(x - 1) & lead.mask]
            deltas = [f.g_prev - base for f in fols]
            if lead.x - x >= self.kmem or min(deltas) < 0:
                return False
            if x < lead.x and lead.G[x & lead.mask] + min(deltas) <= self.last:
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
        zbase = [f.zero - lead.ZR[sync & lead.mask] for f in fols]
        sizes = [len(f.members) for f in fols]
        tabs = [self.table(f.members) for f in fols]
        m_lead, tab_lead = len(lead.members), self.table(lead.members)
        # the leader's in-flight peak since the followers' line, and its line hashes
        lead.lo = lead.low  # (its ring grows when the period search needs it)
        lo, entry = lead.lo, lead.x
        G, D, PO, CL, PK, SG = lead.G, lead.D, lead.PO, lead.CL, lead.PK, lead.SG
        AB, RR = lead.AB, lead.RR
        mask = lead.mask
        PK[sync & mask] = 0
        for z in range(sync + 1, lead.x):
            gz = G[z & mask]
            first = max(z - kmem + 1, lead.epoch_line, lo)
            infl = sum(1 for w in range(first, z + 1) if PO[w & mask] > gz)
            PK[z & mask] = max(PK[(z - 1) & mask], infl)
        SG[lo & mask] = 0
        for z in range(max(lo + 1, lead.x - kmem - 1), lead.x):
            i = z & mask
            SG[i] = hash((G[i] - G[(z - 1) & mask], D[i] - G[i], PO[i] - G[i], CL[i]))
        hwin = kmem  # the hash covers the KMem lines the state can see
        h = self._hash(lead, lead.x - 1)
        b_top = pow(_HASH_B, hwin, _HASH_M)
        seen: dict[tuple, tuple[int, int]] = {}
        warm = lead.warm_end
        one, big_r, ncores = RATE_ONE, self.big_r, self.ncores
        nxt = [G[y & mask] + dl if y < lead.x else _NEVER for y, dl in zip(ys, deltas, strict=True)]
        bank, last, rr = self.bank, self.last, self.rr
        groups = [(0, m_lead, tab_lead)] + list(zip(deltas, sizes, tabs, strict=True))
        token_try = 0
        first, horizon, period = lead.task_first, lead.horizon, lead.period
        n_end = first + lead.n  # the line after the task's last
        while True:
            xl = lead.x
            e = lead.earliest() if xl < n_end else _NEVER
            if nf:  # the followers' grants before cycle e, in time order, through the bucket
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
                        return self._unshadow(lead, fols, ys, deltas, zbase)
                    bank, last, rr = min(avail - ports * one, one), t, (rr + key + 1) % ncores
                    for k in range(nf):
                        if nxt[k] == t:
                            y = ys[k] = ys[k] + 1
                            nxt[k] = G[y & mask] + deltas[k] if y < xl else _NEVER
                    t = min(nxt)
            if e == _NEVER:
                break
            # cycle e: the leader and any follower due then (or in step with it)
            ports, key = m_lead, tab_lead[rr]
            for k in range(nf):
                if nxt[k] == e or (ys[k] == xl and deltas[k] == 0):
                    ports += sizes[k]
                    key = max(key, tabs[k][rr])
            if e > last + 1:
                bank += (e - last - 1) * big_r
                if bank > one:
                    bank = one
            avail = bank + big_r
            if ports * one > avail:
                self.bank, self.last, self.rr = bank, last, rr
                return self._unshadow(lead, fols, ys, deltas, zbase)
            bank, last, rr = avail - ports * one, e, (rr + key + 1) % ncores
            if bank > one:
                bank = one
            lead.grant(e)
            for k in range(nf):
                y = ys[k]
                if nxt[k] == e or (y == xl and deltas[k] == 0):  # granted with the leader
                    ys[k] = y = y + 1
                nxt[k] = G[y & mask] + deltas[k] if y <= xl else _NEVER
            # the leader's line xl: its peak, the aggregate after it, its hash
            i = xl & mask
            inflight, pk = lead.inflight, PK[(xl - 1) & mask]
            PK[i] = inflight if inflight > pk else pk
            AB[i], RR[i] = bank, rr
            sg = hash((e - G[(xl - 1) & mask], D[i] - e, PO[i] - e, CL[i]))
            SG[i] = sg
            old = xl - hwin
            h = (h * _HASH_B + sg - (SG[old & mask] if old >= lo else 0) * b_top) % _HASH_M
            if xl >= token_try:
                self.bank, self.last, self.rr = bank, last, rr
                if self._token_jump(lead, ys, nxt, deltas, groups):
                    seen.clear()
                    bank, last, rr = self.bank, self.last, self.rr
                    lo, entry = lead.lo, lead.x
                    h = self._hash(lead, lead.x - 1)
                    continue
                token_try = xl + kmem
            q = xl - first  # this line's index in the task
            lag = xl - min(ys) if nf else 0
            if old <= lo or q >= horizon or xl < warm or lag >= kmem:
                continue
            if lead.cap < _RING_LONG and xl - entry > lead.cap // 2:
                # no period within half the ring: hold a long one (the dict's lines stay)
                lead._ring(_RING_LONG, lo)
                G, D, PO, CL, PK, SG = lead.G, lead.D, lead.PO, lead.CL, lead.PK, lead.SG
                AB, RR = lead.AB, lead.RR
                mask, lo = lead.mask, lead.lo
            lags = (xl - ys[0]) if nf == 1 else tuple(xl - y for y in ys) if nf else 0
            state = (h, lead.tok_after, lead.gov.rate, q % period, bank, rr, lags)
            hit = seen.get(state)
            if hit is not None:
                self.bank, self.last, self.rr = bank, last, rr
                if self._jump(lead, hit, ys, nxt, deltas, lag):
                    seen.clear()
                    bank, last, rr = self.bank, self.last, self.rr
                    lo, entry = lead.lo, lead.x
                    h = self._hash(lead, lead.x - 1)
                    continue
            elif len(seen) >= _RING_LONG - 4 * kmem:
                seen.clear()  # a period longer than the ring holds: not searched
            seen[state] = (xl, lead.zero)
        self.bank, self.last, self.rr = bank, last, rr
        self._unshadow(lead, fols, ys, deltas, zbase)

    def _token_jump(
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
        lowest terms. So when the last KMem lines follow t and no gate can
        bind (every gate looks back k lines with floor(k * one / r) >= the
        round trip latency + 2), the leader follows t until the credit
        pattern or the governor's rate changes. The aggregate bucket and the
        followers see a pattern periodic in T: it is checked over at most two
        periods, exactly, and read at the landing cycle's phase.

        `groups`: (delta, ports, round-robin table) of the leader and each follower.
        """
        kmem, one = self.kmem, RATE_ONE
        gov, lat = lead.gov, lead.lat
        r = gov.rate
        x = lead.x - 1  # the leader's last line
        lines = lead.horizon - lead.q  # lines x + 1 .. x + lines keep the credit pattern
        if r < gov.rmax:
            lines = min(lines, (gov.count // gov.step + 1) * gov.step - 1 - gov.count)
        lag = x + 1 - min(ys) if ys else 0
        keep = kmem + 2 + lag
        first = x - kmem + 1
        if lines <= keep or lag >= kmem or first < max(lead.task_first, lead.warm_end, lead.low):
            return False
        g0, tok0 = lead.g_prev, lead.tok_after

        def at(n: np.ndarray) -> np.ndarray:
            return g0 - ((tok0 - n * one) // r)

        # the window the gates can see was paced by the bucket alone
        z = np.arange(first, x + 1, dtype=np.int64)
        w = z & lead.mask
        grants = lead.view("G")[w]
        if not (
            np.array_equal(grants, at(z - x))
            and np.array_equal(lead.view("PO")[w], grants + lat)
            and np.array_equal(lead.view("D")[w], grants + lat + 1)
        ):
            return False
        # no gate can bind: the nearest line each one looks back to, in lines
        period = lead.period
        pat = lead.hyp.credit_array(
            lead.geom, lead.n, np.arange(lead.q, lead.q + period, dtype=np.int64), lead.base
        )
        demand = (pat == 0) if lead.split else np.zeros(period, dtype=bool)
        reach = int(np.where(demand, kmem, np.minimum(lead.window + pat, kmem)).min())
        if demand.any():  # the demand path: back to the window-th demand line before
            tiled = np.flatnonzero(np.tile(demand, lead.window // int(demand.sum()) + 2))
            reach = min(reach, int((tiled[lead.window :] - tiled[: -lead.window]).min()))
        if reach * one // r < lat + 2:
            return False
        # the aggregate bucket over two periods of the pattern: refusals, and its period
        unit = np.gcd(r, one)
        p_lines, p_cycles = r // unit, one // unit
        end = g0 + 2 * p_cycles
        times, ports, bits = [], [], []
        for k, (delta, size, _tab) in enumerate(groups):
            n0 = 1 if k == 0 else ys[k - 1] - x
            n = np.arange(n0, n0 + 2 * p_lines + kmem + 2, dtype=np.int64)
            t = at(n) + delta
            t = t[t <= end]
            times.append(t)
            ports.append(np.full(t.size, size, dtype=np.int64))
            bits.append(np.full(t.size, 1 << k, dtype=np.int64))
        t_all = np.concatenate(times)
        order = np.argsort(t_all, kind="stable")
        t_all = t_all[order]
        starts = np.flatnonzero(np.diff(t_all, prepend=t_all[0] - 1))
        ev_t = t_all[starts]
        ev_ports = np.add.reduceat(np.concatenate(ports)[order], starts)
        ev_bits = np.bitwise_or.reduceat(np.concatenate(bits)[order], starts)
        big_r = self.big_r
        gap = np.diff(ev_t, prepend=self.last)
        step = gap * big_r - ev_ports * one
        top = np.minimum(one, one + big_r - ev_ports * one)
        run = np.cumsum(step)
        banks = run + np.minimum(self.bank, np.minimum.accumulate(top - run))
        before = np.concatenate(([self.bank], banks[:-1]))
        if np.any(ev_ports * one > np.minimum(before + (gap - 1) * big_r, one) + big_r):
            return False
        # the round-robin pointer, event by event (one period, or two if the first differs)
        kinds, which = np.unique(ev_bits, return_inverse=True)
        ncores = self.ncores
        moves = []
        for b in kinds.tolist():
            tabs = [groups[k][2] for k in range(len(groups)) if b >> k & 1]
            moves.append([(v + max(t[v] for t in tabs) + 1) % ncores for v in range(ncores)])
        ends = np.searchsorted(ev_t, [g0 + p_cycles, end], side="right")
        rrs: list[int] = []
        rr = self.rr
        for k in which[: ends[0]].tolist():
            rr = moves[k][rr]
            rrs.append(rr)

        def state(c: int) -> tuple[int, int]:  # the bucket after every event up to cycle c
            i = int(np.searchsorted(ev_t, c, side="right")) - 1
            return (self.bank, self.rr) if i < 0 else (int(banks[i]), rrs[i])

        base = 0
        if state(g0 + p_cycles) != (self.bank, self.rr):
            for k in which[ends[0] : ends[1]].tolist():
                rr = moves[k][rr]
                rrs.append(rr)
            base = 1
            if state(end) != state(g0 + p_cycles):
                return False
        t_land = int(at(np.int64(lines)))
        if t_land > g0 + (base + 1) * p_cycles:
            t_land = g0 + base * p_cycles + (t_land - g0 - base * p_cycles) % p_cycles
        bank, rr = state(t_land)
        # counters: zero-credit cycles (runs of demand lines), the in-flight peak
        zero_lines = pat == 0
        dz = 0
        if zero_lines.all():
            dz = int(at(np.int64(lines)) - g0)
        elif zero_lines.any():
            reps = np.arange(0, lines // period + 1, dtype=np.int64) * period
            j = 0
            while j < period:  # each run [j, k) of credit-0 positions of the pattern
                if not zero_lines[j]:
                    j += 1
                    continue
                k = j
                while k < period and zero_lines[k]:
                    k += 1
                lo_n = np.maximum(reps + j + 1, 1)
                hi_n = np.minimum(reps + k, lines)
                ok = lo_n <= hi_n
                dz += int((at(hi_n[ok]) - at(lo_n[ok] - 1)).sum())
                j = k
        span = min(lines, p_lines + 2)
        n = np.arange(1, span + 1, dtype=np.int64)
        past = at(np.arange(1 - kmem, span + 1, dtype=np.int64))
        inflight = n + kmem - np.searchsorted(past, at(n) - lat, side="right")
        peak = max(int(inflight.max()), int(lead.PK[x & lead.mask]))
        # land on line x + lines: its window, from the closed form
        t_n = np.arange(lines - keep + 1, lines + 1, dtype=np.int64)
        tg = at(t_n)
        last = x + lines
        w = (t_n + x) & lead.mask
        cls = np.asarray(demand[(t_n - 1) % period], dtype=np.int64)
        inc = np.where(zero_lines[(t_n - 1) % period], tg - at(t_n - 1), 0)
        zr = lead.zero + dz - (inc.sum() - np.cumsum(inc))
        cols = {
            "G": tg,
            "D": tg + lat + 1,
            "PO": tg + lat,
            "CL": cls,
            "TK": tok0 + r * (tg - g0) - t_n * one,
            "RT": np.full(t_n.size, r),
            "CN": gov.count + t_n,
            "ZR": zr,
            "PK": np.full(t_n.size, peak),
            "SG": np.zeros(t_n.size, dtype=np.int64),
            "AB": np.zeros(t_n.size, dtype=np.int64),
            "RR": np.zeros(t_n.size, dtype=np.int64),
        }
        for f, v in cols.items():
            lead.view(f)[w] = v
        if lead.keep is not None:
            every = at(np.arange(1, lines + 1, dtype=np.int64))
            lead.keep[0].extend(every.tolist())
            lead.keep[1].extend((every + lat + 1).tolist())
        lead.lo = last - keep + 1
        for z in range(lead.lo + 1, last + 1):
            i, h = z & lead.mask, (z - 1) & lead.mask
            lead.SG[i] = hash((lead.G[i] - lead.G[h], lat + 1, lat, lead.CL[i]))
        i = last & lead.mask
        lead.x, lead.q = last + 1, lead.q + lines
        lead.g_prev, lead.d_prev, lead.pop_prev = lead.G[i], lead.D[i], lead.PO[i]
        lead.last_grant_in_task = lead.g_prev
        lead.tok_after, gov.count = lead.TK[i], lead.CN[i]
        lead.zero, lead.peak = lead.ZR[i], max(lead.peak, peak)
        pops, dr = cols["PO"], cols["D"]
        lead.pend = deque(pops[pops > lead.g_prev].tolist())
        lead.inflight = len(lead.pend)
        lead.dd = deque(dr[cls == 1].tolist(), maxlen=kmem)
        self.bank, self.rr, self.last = bank, rr, lead.g_prev
        for k, dl in enumerate(deltas):  # each follower: its first line not yet due
            y = last + 1
            while y - 1 > lead.lo and lead.G[(y - 1) & lead.mask] + dl > lead.g_prev:
                y -= 1
            ys[k] = y
            nxt[k] = lead.G[y & lead.mask] + dl if y <= last else _NEVER
        return True

    def _hash(self, lead: Group, x: int) -> int:
        """The rolling hash of the leader's lines x - KMem + 1..x (lines below its ring: 0)."""
        h = 0
        for z in range(x - self.kmem + 1, x + 1):
            h = (h * _HASH_B + (lead.SG[z & lead.mask] if z >= lead.lo else 0)) % _HASH_M
        return h

    def _unshadow(
        self, lead: Group, fols: list[Group], ys: list[int], deltas: list[int], zbase: list[int]
    ) -> None:
        """Rebuild the followers at their next lines; the leader goes back to a short ring."""
        for f, y, delta, zb in zip(fols, ys, deltas, zbase, strict=True):
            f.follow(lead, y, delta, zb)
        short = ring_lines(self.kmem)
        if lead.cap > short:
            lead._ring(short, lead.lo)

    def _jump(
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
        period, mask = x1 - x0, lead.mask
        keep = self.kmem + 2 + lag  # lines of the ring a state needs: the window, the lags
        if x0 - keep < lead.low or period + keep + 1 >= lead.cap:
            return False
        z = np.arange(x0 - keep + 1, x0 + 1, dtype=np.int64)
        a, b = z & mask, (z + period) & mask
        span = lead.G[x1 & mask] - lead.G[x0 & mask]
        for f in ("G", "D", "PO", "CL"):
            v = lead.view(f)
            if not np.array_equal(v[b] - v[a], np.full(z.size, span if f != "CL" else 0)):
                return False
        # how many more lines: while the credit pattern and the governor's rate hold
        more = lead.horizon - 1 - (x1 - lead.task_first)
        gov = lead.gov
        if gov.rate < gov.rmax:
            more = min(more, (gov.count // gov.step + 1) * gov.step - 1 - gov.count)
        if more < keep:
            return False
        m, r = divmod(more, period)
        s = x0 + r  # the line whose state, m + 1 periods on, is the target's
        gain, dt, dz = (m + 1) * period, (m + 1) * span, (m + 1) * (lead.zero - zero0)
        src = np.arange(s - keep + 1, s + 1, dtype=np.int64)
        si, di = src & mask, (src + gain) & mask
        moved = {f: lead.view(f)[si] for f in _FIELDS}  # (copies, before any is overwritten)
        for f in ("G", "D", "PO"):
            moved[f] += dt
        moved["ZR"] += dz
        moved["CN"] += gain
        moved["PK"][:] = lead.PK[x1 & mask]  # the in-flight values repeat: no new peak
        for f in _FIELDS:
            lead.view(f)[di] = moved[f]
        if lead.keep is not None:
            for lst in lead.keep:
                seg = lst[x0 + 1 : x1 + 1]
                for k in range(1, m + 1):
                    lst.extend(v + k * span for v in seg)
                lst.extend(v + (m + 1) * span for v in seg[:r])
        t = s + gain
        i = t & mask
        lead.lo = t - keep + 1
        lead.x = t + 1
        lead.q = lead.x - lead.task_first
        lead.g_prev, lead.d_prev, lead.pop_prev = lead.G[i], lead.D[i], lead.PO[i]
        lead.last_grant_in_task = lead.g_prev
        lead.tok_after = lead.TK[i]
        gov.rate, gov.count = lead.RT[i], lead.CN[i]
        lead.zero = lead.ZR[i]
        w = np.arange(t - self.kmem + 1, t + 1, dtype=np.int64) & mask
        po, d, cl = lead.view("PO")[w], lead.view("D")[w], lead.view("CL")[w]
        lead.pend = deque(po[po > lead.g_prev].tolist())
        lead.inflight = len(lead.pend)
        lead.dd = deque(d[cl == 1].tolist(), maxlen=lead.kmem)
        self.bank, self.rr, self.last = lead.AB[i], lead.RR[i], lead.g_prev
        for k, dl in enumerate(deltas):  # each follower: its first line not yet due
            y = t + 1
            while y - 1 > t - keep + 1 and lead.G[(y - 1) & mask] + dl > lead.g_prev:
                y -= 1
            ys[k] = y
            nxt[k] = lead.G[y & mask] + dl if y <= t else _NEVER
        return True
