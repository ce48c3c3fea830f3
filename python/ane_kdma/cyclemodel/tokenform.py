"""The token form: a group's next lines while its token bucket alone paces them.

One job: after a grant at g0 leaving the bank tok0 under the rate r, the
bucket alone would grant line x + n in cycle g0 + ceil((n * one - tok0) / r);
:func:`token_plan` says whether no gate can bind on those lines (so the form
holds) and :func:`token_land` puts a group on any of them in closed form,
counters and ring included. The jumps that use it, and what the aggregate
bucket sees meanwhile, live in :mod:`.jumps` and :mod:`.joint`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ane_kdma.cyclemodel.group import Group
from ane_kdma.cyclemodel.lines import COLUMNS
from ane_kdma.hw import RATE_ONE

MIN_JUMP = 64  # the token form's shortest jump (a jump costs about what 30 stepped lines do)


class Token:
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


def token_plan(lead: Group, ys: list[int], kmem: int) -> Token | None:
    """The token form of the leader's next lines, if the token bucket alone paces them
    (see :meth:`ane_kdma.cyclemodel.jumps.Jumps.token_jump`); `ys`: the followers' next
    lines (they lag behind)."""
    one = RATE_ONE
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

    tf = Token(g0, tok0, r)
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


def token_land(lead: Group, tf: Token, lines: int, kmem: int) -> None:
    """Land the leader on its line x + lines (1 <= lines <= tf.lines) of the token form."""
    one, gov = RATE_ONE, lead.gov
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
        own = own_peak(tok0, r, lat, kmem)
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


@lru_cache(maxsize=16)
def own_peak(tok0: int, r: int, lat: int, kmem: int) -> np.ndarray:
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
