"""The recurrence's shortcuts: shadow cores, the token bucket's closed form, jumped periods."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from functools import lru_cache
from math import gcd

import numpy as np

from ane_kdma.cyclemodel.bucket import Arbiter
from ane_kdma.cyclemodel.governor import NEVER
from ane_kdma.cyclemodel.group import RING_LONG, Group, ring_lines
from ane_kdma.cyclemodel.lines import COLUMNS, moved
from ane_kdma.hw import RATE_ONE

HASH_M = (1 << 61) - 1  # the period search's rolling hash (a hit is then checked exactly)
HASH_B = 1_000_003
JOINT_FIRST = 1 << 12  # ... and first this far
JOINT_CYCLES = 1 << 18  # the general loop's token form looks this far at most
SAMPLE = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89)  # the joint key's sampled lines back (< 90)
RECORD_EVERY = 8  # the shadow's period search keeps a state every this many lines at most
MIN_JUMP = 64  # the token form's shortest jump (a jump costs about what 30 stepped lines do)
#: the general loop's state at a cycle, as the period search keeps it: the cycle, and per
#: issuing group (by index) its next line and its zero-credit count (the group's, and what
#: each merged member adds to it)
Joint = tuple[int, list[int], list[tuple[int, dict[int, int]]]]


class _Token:
    """The token form of one group's next lines: line x + n granted in cycle at(n)."""

    __slots__ = (
        "g0",
        "tok0",
        "r",
        "lat",
        "x",
        "first",
        "keep",
        "q_from",
        "steady",
        "lines",
        "period",
        "zero_lines",
        "demand",
        "pops",
    )
    g0: int  # the last grant's cycle, and the bank it left
    tok0: int
    r: int  # the refill (the governor's rate)
    lat: int  # the round trip of these lines (the memory's latency, a warm-up's extra)
    x: int  # the last line granted
    first: int  # the first line the gates can still see
    keep: int  # the lines a landing carries
    q_from: int  # the next line's index in the task
    steady: int  # lines in the credit pattern
    lines: int  # lines the form may cover (steady and a slack tail)
    period: int  # the credit pattern's period
    zero_lines: np.ndarray  # credit 0, by phase of the pattern
    demand: np.ndarray  # sent down the demand path, by phase
    pops: np.ndarray  # the pops of lines first..x

    def __init__(self, g0: int, tok0: int, r: int) -> None:
        self.g0, self.tok0, self.r = g0, tok0, r

    def at(self, n: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.g0 - ((self.tok0 - n * RATE_ONE) // self.r)
        return out

    def at1(self, n: int) -> int:
        return int(self.g0 - ((self.tok0 - n * RATE_ONE) // self.r))

    def upto(self, c: int) -> int:
        """How many of the lines have been granted by cycle c."""
        return int((self.tok0 + (c - self.g0) * self.r) // RATE_ONE)


class Shortcuts(Arbiter):
    """The engine's exact shortcuts (see :class:`~ane_kdma.cyclemodel.engine.Engine`)."""

    kmem: int
    groups: list[Group]

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
                        return self._unshadow(lead, fols, ys, deltas, zbase)
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
                        return self._unshadow(lead, fols, ys, deltas, zbase)
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
                return self._unshadow(lead, fols, ys, deltas, zbase)
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
                if self._token_jump(lead, ys, nxt, deltas, groups):
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
                h = self._hash(lead, xl, hwin)
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
                if self._jump(lead, hit, ys, nxt, deltas, lag):
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
        tf = self._token_plan(lead, ys)
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
        rel = _bucket(*key, periods=1)
        if rel is None:
            return False
        if rel(p_cycles) != start:
            base = 1
            rel = _bucket(*key, periods=2)
            if rel is None or rel(2 * p_cycles) != rel(p_cycles):
                return False

        def state(c: int) -> tuple[int, int]:  # the bucket after the events up to cycle c
            assert rel is not None
            return rel(c - g0)

        t_land = at1(tf.lines)
        if t_land > g0 + (base + 1) * p_cycles:
            t_land = g0 + base * p_cycles + (t_land - g0 - base * p_cycles) % p_cycles
        bank, rr = state(t_land)
        self._token_land(lead, tf, tf.lines)
        self.bank, self.rr, self.last = bank, rr, lead.g_prev
        _due(lead, lead.lo, ys, nxt, deltas)
        return True

    def _token_plan(self, lead: Group, ys: list[int]) -> _Token | None:
        """The token form of the leader's next lines, if the token bucket alone paces them
        (see :meth:`_token_jump`); `ys`: the followers' next lines (they lag behind)."""
        kmem, one = self.kmem, RATE_ONE
        gov, lat = lead.gov, lead.lat
        r = gov.rate
        x = lead.x - 1  # the leader's last line
        q_from = lead.q
        lag = x + 1 - min(ys) if ys else 0
        keep = kmem + 2 + lag
        first = max(x - kmem + 1, 0)  # (no line before line 0: no gate looks back past it)
        if lag >= kmem or not lead.settled(first) or first < lead.low:
            return None
        # while the starved-line counter counts, its stretch (steady_lines) holds the starved
        # lines' demand window and warm-up still; the warm-up's extra latency is one round
        # trip for every line only if every line of the pattern is starved (and no tail)
        wz = lead.dwin.window() if lead.dwin_live else lead.window
        ext = lead.dwin.extra() if lead.dwin_live and lead.zpat.size else 0
        if ext:
            if lead.zpat.size < min(lead.period, lead.n) or lead.q >= lead.horizon:
                return None
            lat += ext
        need = -(-(lat + 2) * r // one)  # the least look-back (lines) no gate of t binds at
        # lines x + 1 .. x + lines: `steady` of them in the credit pattern (lines x + 1 ..
        # x + steady keep the arithmetic), then any past its horizon with credit whose gates
        # stay slack at the same rate (the fix's last page, down to a credit of about
        # need - window)
        steady = max(lead.steady_lines(), 0)
        tail = lead.slack_tail(steady, need, gov.lines_at_rate() - steady if not ext else 0)
        lines = steady + tail.size
        if lines < MIN_JUMP:
            return None
        g0, tok0 = lead.g_prev, lead.tok_after

        tf = _Token(g0, tok0, r)
        at, at1 = tf.at, tf.at1

        # no gate can bind: the nearest line each one looks back to, in lines
        period = lead.period
        reach = kmem
        if tail.size:
            reach = min(lead.window + int(tail.min()), kmem)
        if steady:
            pat = lead.hyp.credit_array(
                lead.geom, lead.n, np.arange(lead.q, lead.q + period, dtype=np.int64), lead.base
            )
            demand = (pat == 0) if lead.split else np.zeros(period, dtype=bool)
            zero_lines = pat == 0
            caps = np.minimum(np.where(zero_lines, wz, lead.window + pat), kmem)
            caps = np.where(demand, kmem, caps)
            reach = min(reach, int(caps.min()))
            if demand.any():  # the demand path: back to the wz-th demand line before
                tiled = np.flatnonzero(np.tile(demand, wz // int(demand.sum()) + 2))
                reach = min(reach, int((tiled[wz:] - tiled[:-wz]).min()))
        else:
            demand = zero_lines = np.zeros(period, dtype=bool)
        if reach < need:  # (t's own lines: t(n) - t(n - reach) >= lat + 2)
            return None
        # the lines the gates can still see: each one drained before the first line of t
        # that can look back to it (so whatever paced them: the bucket alone, a slower rate
        # before the governor's step, the first line's full bank; and no line before line
        # 0), the last one popped and drained before t's first line is; the lines the
        # followers have still to grant follow t exactly
        zs = np.arange(first, x + 1, dtype=np.int64)
        seen = lead.ring.get(zs, ("grant", "pop", "drain"))
        grants, pops = seen["grant"], seen["pop"]
        t1 = at1(1)
        lagging = max(min(ys), first) - first if ys else zs.size
        if not (
            np.all(seen["drain"] < at(np.maximum(zs - x + reach, 1)))
            and pops[-1] < t1 + lat
            and seen["drain"][-1] <= t1 + lat
            and np.array_equal(grants[lagging:], at(zs[lagging:] - x))
        ):
            return None
        tf.lat, tf.x, tf.first, tf.keep, tf.q_from = lat, x, first, keep, q_from
        tf.steady, tf.lines, tf.period = steady, lines, period
        tf.zero_lines, tf.demand, tf.pops = zero_lines, demand, pops
        return tf

    def _token_land(self, lead: Group, tf: _Token, lines: int) -> None:
        """Land the leader on its line x + lines (1 <= lines <= tf.lines) of the token form."""
        kmem, one, gov = self.kmem, RATE_ONE, lead.gov
        at, at1 = tf.at, tf.at1
        g0, tok0, r, lat, x, first, keep = tf.g0, tf.tok0, tf.r, tf.lat, tf.x, tf.first, tf.keep
        period, zero_lines, demand, pops = tf.period, tf.zero_lines, tf.demand, tf.pops
        steady = min(tf.steady, lines)
        q_from = tf.q_from
        # counters: zero-credit cycles (runs of demand lines of the pattern; the tail has
        # none), the in-flight peak
        dz = 0
        if zero_lines.all():
            dz = at1(steady) - g0
        elif zero_lines.any():
            reps = np.arange(0, steady // period + 1, dtype=np.int64) * period
            j = 0
            while j < period:  # each run [j, k) of credit-0 positions of the pattern
                if not zero_lines[j]:
                    j += 1
                    continue
                k = j
                while k < period and zero_lines[k]:
                    k += 1
                lo_n = np.maximum(reps + j + 1, 1)
                hi_n = np.minimum(reps + k, steady)
                ok = lo_n <= hi_n
                dz += int((at(hi_n[ok]) - at(lo_n[ok] - 1)).sum())
                j = k
        # lines 1 .. KMem see the window's pops; past them, t's own lines alone
        n = np.arange(1, min(lines, kmem) + 1, dtype=np.int64)
        fut = at(n)
        popped = np.concatenate((pops, fut + lat))  # (ascending: the port pops in order)
        inflight = n + pops.size - np.searchsorted(popped, fut, side="right")
        peak = max(int(inflight.max()), int(lead.ring.peak[x & lead.ring.mask]))
        if lines > kmem:
            own = _own_peak(tok0, r, lat, kmem)
            peak = max(peak, int(own[min(lines - kmem, own.size) - 1]))
        # land on line x + lines: its window (lines after x from the closed form)
        t_n = np.arange(max(lines - keep + 1, 1), lines + 1, dtype=np.int64)
        tg = at(t_n)
        last = x + lines
        in_pat = t_n <= steady
        phase = (t_n - 1) % period
        cls = np.asarray(demand[phase] & in_pat, dtype=np.int64)
        inc = np.where(zero_lines[phase] & in_pat, tg - at(t_n - 1), 0)
        zr = lead.zero + dz - (inc.sum() - np.cumsum(inc))
        cols = {
            "grant": tg,
            "drain": tg + lat + 1,
            "pop": tg + lat,
            "demand": cls,
            "bank": tok0 + r * (tg - g0) - t_n * one,
            "rate": np.full(t_n.size, r),
            "count": gov.count + t_n,
            "zero": zr,
            "peak": np.full(t_n.size, peak),
            "sig": np.zeros(t_n.size, dtype=np.int64),  # (set when the period search hashes)
            "agg": np.zeros(t_n.size, dtype=np.int64),  # (the leader's latest only: not read)
            "rr": np.zeros(t_n.size, dtype=np.int64),
        }
        assert set(cols) == set(COLUMNS), "the closed form gives every column of the ring"
        lead.ring.put(t_n + x, cols)
        if lead.keep is not None:
            every = at(np.arange(1, lines + 1, dtype=np.int64))
            lead.keep[0].extend(every.tolist())
            lead.keep[1].extend((every + lat + 1).tolist())
        lead.lo = max(last - keep + 1, first)
        lead.x = last + 1
        lead.land()
        lead.advance_dwin(q_from, lead.q)
        lead.peak = max(lead.peak, peak)

    def _hash(self, lead: Group, x: int, hwin: int) -> int:
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

    def _unshadow(
        self, lead: Group, fols: list[Group], ys: list[int], deltas: list[int], zbase: list[int]
    ) -> None:
        """Rebuild the followers at their next lines; the leader goes back to a short ring."""
        for f, y, delta, zb in zip(fols, ys, deltas, zbase, strict=True):
            f.follow(lead, y, delta, zb)
        short = ring_lines(self.kmem)
        if lead.ring.cap > short:
            lead.resize(short, lead.lo)

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
        _due(lead, lead.lo, ys, nxt, deltas)
        return True

    # ------------------------------------------------------------ periods of the general loop
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
                        grp.pre[p] = (_repeat(own[0], x0, m, span), _repeat(own[1], x0, m, span))
                for lst in grp.keep:
                    lst[:] = _repeat(lst, x0, m, span)
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
        (:meth:`_token_plan`) grants its line x + n in cycle at(n). The
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
            tf = self._token_plan(grp, [])
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
        rr = _pointer(moves, which.reshape(-1), self.rr)(n_ev - 1)
        out = []
        for (e, k), tf in zip(heap, plans, strict=True):
            grp = self.groups[k]
            n = tf.upto(cut)
            if n >= 1:
                self._token_land(grp, tf, n)
            if grp.issuing:
                out.append((grp.earliest() if n >= 1 else e, k))
        self.bank, self.rr, self.last = int(banks[n_ev - 1]), rr, cut
        heapq.heapify(out)
        return out


@lru_cache(maxsize=16)
def _own_peak(tok0: int, r: int, lat: int, kmem: int) -> np.ndarray:
    """The token form's in-flight peak over its lines KMem + 1 .. KMem + m, for m = 1 ..
    one period of lines (element m - 1).

    Line n of t (t(n) = -((tok0 - n * one) // r), from its grant at 0) has in
    flight the lines k <= n with t(k) + lat > t(n): from line KMem + 1 on,
    only t's own lines (every older line was drained before it, its gates
    being slack). The count depends on n only through its phase in the
    period, so one period past line KMem gives every value it takes.
    """
    one = RATE_ONE
    p_lines = r // int(np.gcd(r, one))
    n = np.arange(1, kmem + p_lines + 1, dtype=np.int64)
    t = -((tok0 - n * one) // r)
    inflight = n - np.searchsorted(t, t - lat, side="right")
    out: np.ndarray = np.maximum.accumulate(inflight[kmem:])
    return out


def _repeat(lines: list[int], x0: int, m: int, span: int) -> list[int]:
    """Lines (cycles) with their part from x0 on repeated m times more, span cycles apart."""
    seg = lines[x0:]
    out = list(lines)
    for r in range(1, m + 1):
        out.extend(v + r * span for v in seg)
    return out


def _due(lead: Group, lo: int, ys: list[int], nxt: list[int], deltas: list[int]) -> None:
    """After the leader jumped to line x - 1: each follower's first line not yet due, and when."""
    t, ring = lead.x - 1, lead.ring
    G, mask = ring.grant, ring.mask
    for k, dl in enumerate(deltas):
        y = t + 1
        while y - 1 > lo and G[(y - 1) & mask] + dl > lead.g_prev:
            y -= 1
        ys[k] = y
        nxt[k] = G[y & mask] + dl if y <= t else NEVER


def _pointer(
    moves: np.ndarray, which: np.ndarray, rr: int, block: int = 32
) -> Callable[[int], int]:
    """The round-robin pointer after event i of a sequence of events (event i moves it by
    moves[which[i]]; the last row of moves is the identity), for a few queried i.

    The pointer has only as many states as ports, so the moves of each block of
    events compose into one map, all blocks at once; a query walks the blocks'
    maps, then the events of its own block.
    """
    n = moves.shape[1]
    blocks = -(-which.size // block)
    flat = np.full(blocks * block, moves.shape[0] - 1, dtype=np.int64)
    flat[: which.size] = which
    padded = flat.reshape(blocks, block)
    comp = np.tile(np.arange(n, dtype=np.int64), (blocks, 1))
    for j in range(block):
        comp = moves[padded[:, j][:, None], comp]
    maps, steps = comp.tolist(), moves.tolist()
    starts = [rr]  # the pointer before each block
    for m in maps:
        starts.append(m[starts[-1]])

    def after(i: int) -> int:
        b = i // block
        p = starts[b]
        for k in padded[b, : i - b * block + 1].tolist():
            p = steps[k][p]
        return p

    return after


@lru_cache(maxsize=8)
def _bucket(
    tok0: int,
    r: int,
    groups: tuple[tuple[int, int, tuple[int, ...]], ...],
    n0s: tuple[int, ...],
    last: int,
    bank: int,
    rr: int,
    big_r: int,
    ncores: int,
    kmem: int,
    periods: int,
) -> Callable[[int], tuple[int, int]] | None:
    """The aggregate bucket under the token form, for `periods` of its periods from cycle 0.

    The leader's line x + n is granted in cycle -((tok0 - n * one) // r), each
    follower's delta later from its line x + n0 on; the bucket held `bank` at
    the start of cycle last + 1 (last <= 0) and its pointer stood at `rr`.
    None if it refuses a line; else its (bank, pointer) after the events up
    to any cycle c of those periods.
    """
    one = RATE_ONE
    unit = np.gcd(r, one)
    p_lines, end = r // unit, periods * (one // unit)
    times, ports, bits = [], [], []
    for k, (delta, size, _tab) in enumerate(groups):
        n0 = 1 if k == 0 else n0s[k - 1]
        n = np.arange(n0, n0 + periods * p_lines + kmem + 2, dtype=np.int64)
        t = -((tok0 - n * one) // r) + delta
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
    gap = np.diff(ev_t, prepend=last)
    step = gap * big_r - ev_ports * one
    top = np.minimum(one, one + big_r - ev_ports * one)
    run = np.cumsum(step)
    banks = run + np.minimum(bank, np.minimum.accumulate(top - run))
    before = np.concatenate(([bank], banks[:-1]))
    if np.any(ev_ports * one > np.minimum(before + (gap - 1) * big_r, one) + big_r):
        return None
    # the round-robin pointer: each event moves it by which groups ask (its kind)
    if len(groups) <= 4:
        kinds, which = np.arange(1 << len(groups)), ev_bits
    else:
        kinds, which = np.unique(ev_bits, return_inverse=True)
    moves = np.empty((kinds.size + 1, ncores), dtype=np.int64)
    for row, b in enumerate(kinds.tolist()):
        tabs = [groups[k][2] for k in range(len(groups)) if b >> k & 1] or [(-1,) * ncores]
        moves[row] = [(v + max(t[v] for t in tabs) + 1) % ncores for v in range(ncores)]
    moves[-1] = np.arange(ncores)  # (no event: the padding of the last block)
    pointer = _pointer(moves, which, rr)

    def state(c: int) -> tuple[int, int]:
        i = int(np.searchsorted(ev_t, c, side="right")) - 1
        return (bank, rr) if i < 0 else (int(banks[i]), pointer(i))

    return state
