"""Analytic, vectorised kernel-DMA model: the cycle model's recurrence in closed form.

Why it exists: calibration and sweeps need thousands of transfer sizes, and the
line-by-line cycle model costs ~1.5 µs per line. This model gives the same
cycles within 1% (tests/test_analytic.py checks it over a grid) in a few
milliseconds for a whole D sweep.

How. One core's grant cycles G(i) obey a max-plus recurrence (see
:mod:`ane_kdma.cyclemodel`)::

    G(i) = max(G(i-1) + 1/r,  G(i - cap_i) + P,  accept + 1)      P = latency + 2

with r the per-core rate in lines/cycle and cap_i = min(window + credit_i, 1024).
The token bucket is taken as a fluid (1/r cycles per line); the exact bucket
differs by at most about one cycle per stall. Within a stretch of lines with a
constant cap c the longest path has a closed form::

    best(d) = max(d / r,  floor(d / c) * P + (d mod c) / r)

and every path into the stretch passes through the c lines before it, so a
stretch needs only those c values (prefix and suffix maxima make it O(c)).
The hypothesis registry says how each credit evolves (``progress``): a
``static`` credit is fixed per task, so a task is one stretch; a
``remaining`` credit (the fix) is at its clamp until the last clamp - 1
lines, which this model walks line by line (255 steps, vectorised over all
sizes at once). Any other form has no closed form here and is refused with
one line. Split tasks are pieces issued back to back; a piece is taken once
the previous one is fully issued and the one before that fully drained, as
kdma_core does.

The demand path's warm-up (issue 16: a request's first ``dwarm_lines``
starved lines pop ``dwarm_extra_cycles`` late) is a phase, as the governor's
rate is: a round trip from a warm line costs the extra. One static task takes
it in the longest path, tasks back to back as a stretch of their own, the
paged reading in its page pattern's simulation; within 2% of the cycle model
(tests/test_analytic.py). The demand window that grows is refused.

Cores are taken as independent: the aggregate DRAM ceiling is applied by the
chip (:meth:`ane_kdma.chip.Chip.time_us`), and the cycle model's start-up
contention of identical cores at the aggregate bucket (a cycle or two) is
not modeled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from functools import lru_cache
from typing import Any

import numpy as np

from ane_kdma import mechanisms
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings

FORMS = ("static", "remaining", "paged")  # the registry's progress forms modeled here
MAX_PHASES = 4096  # governor steps the closed form follows one by one (then merged)
SIM_PAGES = 64  # pages the paged form simulates to find its period
MAX_CUTS = 64  # governor steps a warm task is cut at (more: each stretch at its mean rate)


def check_settings(s: Settings) -> None:
    """The closed form follows the mechanisms the registry says it does; not the others."""
    lacking = mechanisms.no_closed_form(asdict(s))
    if lacking:
        raise InputError(
            f"the analytic engine has no closed form for the {lacking[0].name} mechanism "
            f"({lacking[0].summary.split(':')[0]}); use --engine model"
        )


def check_form(hyp: Hypothesis) -> None:
    if hyp.progress not in FORMS:
        raise InputError(
            f"hypothesis {hyp.name}: no closed form for credit that is {hyp.progress!r} "
            f"(the analytic engine has {', '.join(FORMS)}); use --engine model"
        )


def static_cycles(
    latency: np.ndarray | int,
    window: np.ndarray | int,
    core_rate_q16: np.ndarray | int,
    credit: np.ndarray | int,
    lines: np.ndarray | int,
    kmem_lines: int,
) -> np.ndarray:
    """Exact cycles of one task whose credit is static, broadcast over all arguments.

    With a constant cap c the grants are either token-paced, g_i = ceil(i / r),
    or stop-and-go bursts of c lines one round trip P apart, g_i = (i div c) * P
    + ceil((i mod c) / r); the later of the two is the cycle model's answer
    exactly (tests/test_analytic.py). Calibration searches over this formula.
    """
    lat = np.maximum(np.asarray(latency, dtype=np.int64), 1)
    period = lat + 2
    rate = np.asarray(core_rate_q16, dtype=np.int64)
    cap = np.minimum(np.asarray(window, dtype=np.int64) + credit, kmem_lines)
    last = np.asarray(lines, dtype=np.int64) - 1

    def token(i: np.ndarray) -> np.ndarray:
        return np.maximum(1, -(-(i * RATE_ONE) // rate))

    grant = np.maximum(token(last), (last // cap) * period + token(last % cap))
    return (grant + period).astype(float)


def phases(s: Settings) -> list[tuple[int, int]]:
    """The governor's rate steps: (first line of the request it applies to, rate Q.16)."""
    if not s.ramp:
        return [(0, s.core_rate_q16)]
    out: list[tuple[int, int]] = []
    r, i = s.ramp_start_q16, 0
    while r < s.core_rate_q16 and len(out) < MAX_PHASES:
        out.append((i, r))
        i += s.ramp_step_lines
        r = min(r + s.ramp_inc_q16, s.core_rate_q16)
    out.append((i, s.core_rate_q16))
    return out


def token_time(s: Settings, i: np.ndarray) -> np.ndarray:
    """Fluid cycles the token path needs for lines 1..i of a request (line 0 goes at once).

    While a core waits for line j the refill is the governor's rate after j
    lines, so line j costs one / rate(j) cycles.
    """
    i = np.asarray(i, dtype=float)
    out = np.zeros_like(i)
    ph = phases(s)
    for k, (first, r) in enumerate(ph):
        nxt = ph[k + 1][0] if k + 1 < len(ph) else np.inf
        lines = np.clip(np.minimum(i, nxt - 1) - max(first, 1) + 1, 0, None)
        out += lines * RATE_ONE / r
    return out


def static_ramp_cycles(s: Settings, cap: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """One static task with the governor's ramp: the longest path of the max-plus recurrence.

    A path takes token steps over lines 0..m and round trips (P per cap lines)
    from m to the last line; slow early lines make token steps worth more early,
    so the best m is at an end or at a rate step. Exact without a ramp up to the
    bucket's rounding; the fluid token costs are within a cycle per rate step.
    """
    period = max(s.latency, 1) + 2
    last = np.asarray(lines, dtype=np.int64) - 1
    cap = np.asarray(cap, dtype=np.int64)
    cands = [last % cap, last]
    for first, _ in phases(s)[1:]:
        for b in (first - 1, first):
            m = np.clip(b - ((b - last) % cap), last % cap, last)  # <= b, same class as last
            cands.append(m)
    best = np.full(last.shape, -np.inf)
    for m in cands:
        best = np.maximum(best, token_time(s, m) + ((last - m) // cap) * period)
    return np.ceil(np.maximum(best, 1) - 1e-9) + period


def static_warm_cycles(s: Settings, cap: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """One static task with credit 0 under the demand path's warm-up (and the governor).

    Every line is starved, so the first ``dwarm_lines`` round trips cost
    ``dwarm_extra_cycles`` more: the longest path of :func:`_warm_longest`
    with the governor's fluid token path (within a cycle per rate step).
    """
    last = np.asarray(lines, dtype=np.int64) - 1
    cap = np.asarray(cap, dtype=np.int64)

    def tok(i: np.ndarray) -> np.ndarray:
        return token_time(s, i)

    shape = np.broadcast(last, cap).shape
    full = [np.full(shape, first, dtype=np.int64) for first, _ in phases(s)[1:]]
    period = np.full(shape, max(s.latency, 1) + 2, dtype=np.int64)
    wl = np.full(shape, s.dwarm_lines, dtype=np.int64)
    ex = np.full(shape, s.dwarm_extra_cycles, dtype=np.int64)
    last, cap = np.broadcast_to(last, shape), np.broadcast_to(cap, shape)
    return _warm_end(tok, full, last, cap, period, wl, ex, np.ones(shape, dtype=bool))


def _stretch(
    buf: np.ndarray | None,
    entry: np.ndarray,
    cap: np.ndarray,
    t: np.ndarray,
    inv_r_rows: np.ndarray,
    period: int | np.ndarray,
    period_in: int | None = None,
) -> np.ndarray:
    """G at offsets t (>= 0) of a constant-cap stretch, from the lines before it.

    buf[:, -1] is the line just before the stretch (None: nothing before it);
    entry is the earliest the first line may go by the token path or the task
    floor; inv_r_rows is each row's cycles per line on the token path.
    period is the round trip from a line of the stretch (an int, or one per
    row: the demand path's warm-up); period_in (default: period) the round
    trip from a line of buf, whose values then carry any extra of their own.
    """
    if period_in is None:
        assert isinstance(period, int)
        period_in = period
    if not isinstance(period, int):
        period = np.asarray(period)[:, None]
    c = cap[:, None]
    inv_r = inv_r_rows[:, None]
    h, u = t // c, t % c
    g = entry[:, None] + np.maximum(t * inv_r, h * period + u * inv_r)
    if buf is None:
        return g
    k, hist = buf.shape
    v = np.arange(hist)[None, :]
    idx = np.broadcast_to(np.clip(hist - c + v, 0, hist - 1), (k, hist))
    b = np.where(v < c, np.take_along_axis(buf, idx, axis=1) - v * inv_r, -np.inf)
    pre = np.maximum.accumulate(b, axis=1)
    suf = np.maximum.accumulate(b[:, ::-1], axis=1)[:, ::-1]
    suf_next = np.concatenate([suf[:, 1:], np.full((k, 1), -np.inf)], axis=1)
    uu = np.clip(u, 0, hist - 1)
    pre_t = np.take_along_axis(pre, np.clip(np.minimum(t, c - 1), 0, hist - 1), axis=1)
    hop = np.maximum(
        t * inv_r + pre_t, h * period + u * inv_r + np.take_along_axis(pre, uu, axis=1)
    )
    wrap = (h - 1) * period + (c + u) * inv_r + np.take_along_axis(suf_next, uu, axis=1)
    hop = np.maximum(hop, np.where(h >= 1, wrap, -np.inf))
    return np.maximum(g, period_in + hop)


def _pieces(
    hyp: Hypothesis, g: Geometry, s: Settings, pieces: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """Cycles (the top's count for one core) of each row's tasks issued back to back.

    pieces[r, j] is the line count of row r's task j; starts[r, j] its start line.
    The demand path's warm-up (issue 16) is a phase: a starved task's lines
    until the request's ``dwarm_lines``-th starved line form a stretch of their
    own whose round trip costs ``dwarm_extra_cycles`` more, and every line
    keeps its extra (xbuf) for the round trips that start from it later. With
    it on, a task is also cut at the governor's steps, each stretch at its own
    rate (:func:`_staged_body`); off, a task runs at its lines' mean rate, as
    it always has.
    """
    k, split = pieces.shape
    period = max(s.latency, 1) + 2
    first = np.concatenate([np.zeros((k, 1), np.int64), np.cumsum(pieces, axis=1)], axis=1)
    tok = token_time(s, first)  # the governor's pace: each task at its lines' mean rate
    inv_rates = (tok[:, 1:] - tok[:, :-1]) / pieces
    clamp = g.prefetch_max_lines
    tail_lines = clamp - 1  # a "remaining" credit is below its clamp on the last clamp-1 lines
    remaining = hyp.progress == "remaining"
    body_cap = min(s.window + int(hyp.credit_array(g, clamp, 0)), g.kmem_lines)
    hist = min(s.window + clamp, g.kmem_lines)  # the largest cap: every path passes here
    warm_lines = s.dwarm_lines if s.dwarm else 0
    extra = s.dwarm_extra_cycles if s.dwarm else 0
    tail_cred = hyp.credit_array(g, np.arange(tail_lines + 1), 0) if remaining else None
    steps = [f for f, _ in phases(s)[1:]]  # the governor's steps (the warm-up's stretches)
    buf: np.ndarray | None = None  # G of the last `hist` lines before the piece
    xbuf = np.zeros((k, hist))  # their extra latency (the warm-up), for round trips from them
    starved = np.zeros(k, dtype=np.int64)  # starved lines granted so far in the request
    accept = np.zeros(k)
    ends: list[np.ndarray] = []
    end_x: list[np.ndarray] = []
    for j in range(split):
        nj = pieces[:, j]
        inv_r = inv_rates[:, j]
        if j:
            ready = np.floor(ends[-1] + 1e-9) + 1  # grants fall on whole cycles
            if j >= 2:  # j-2 drained
                ready = np.maximum(ready, np.floor(ends[-2] + 1e-9) + period + end_x[-2])
            accept = np.maximum(accept + 1, ready)
        floor = accept + 1
        entry = floor if buf is None else np.maximum(buf[:, -1] + inv_r, floor)
        if remaining:
            cap = np.full(k, body_cap)
            tail = np.minimum(nj, tail_lines)
            hungry = np.zeros(k, dtype=bool)  # the body has credit
        else:
            cred = hyp.credit_array(g, nj, 0, starts[:, j])
            cap = np.minimum(s.window + cred, g.kmem_lines)
            tail = np.zeros(k, dtype=np.int64)
            hungry = cred == 0
        body = nj - tail
        late = np.full(k, -np.inf)  # a drain in order after an earlier, warm line's
        # body lines below w are warm (starved, and before the request's warm_lines-th)
        w = np.where(hungry, np.clip(warm_lines - starved, 0, body), 0)
        last = j == split - 1
        width = hist + tail_lines if remaining else (1 if last else hist)
        t = nj[:, None] - width + np.arange(width)[None, :]  # column -> line offset in piece
        old = np.clip(hist + t, 0, hist - 1)
        if buf is None:
            a = np.full(t.shape, -np.inf)
        else:
            a = np.take_along_axis(buf, old, axis=1)
            a = np.where(t < -hist, -np.inf, a)
        ax = np.where(t < 0, np.take_along_axis(xbuf, old, axis=1), 0.0)
        ax = np.where((t >= 0) & (t < w[:, None]), float(extra), ax)
        in_body = (t >= 0) & (t < body[:, None])
        warm_now = bool(np.any(w > 0)) or bool(np.any(xbuf))
        if in_body.any() and not warm_now:
            gg = _stretch(buf, entry, cap, np.maximum(t, 0), inv_r, period)
            a = np.where(in_body, gg, a)
        elif in_body.any():
            # stretches cut at the warm-up's end and at the governor's steps, each at its own
            # rate: the warm-up sits where the governor is slowest, and a token path at the
            # task's mean rate would make it look dearer
            cuts = [np.zeros(k, dtype=np.int64), w, body]
            if len(steps) <= MAX_CUTS:
                cuts += [np.clip(f - first[:, j], 0, body) for f in steps]
            cut = np.sort(np.stack(cuts, axis=1), axis=1)
            tt = token_time(s, first[:, j][:, None] + cut)
            inv = np.diff(tt, axis=1) / np.maximum(np.diff(cut, axis=1), 1)
            gg = _staged_body(buf, xbuf, floor, cap, t, cut, inv, w, period, extra)
            a = np.where(in_body, gg, a)
            split_warm = (w > 0) & (w < body)  # the port pops in order: the last warm line
            if split_warm.any():  # drains before the cool lines after it
                tw = np.maximum(w - 1, 0)[:, None]
                gw = _staged_body(buf, xbuf, floor, cap, tw, cut, inv, w, period, extra)[:, 0]
                late = np.where(split_warm, gw + extra + (nj - w), -np.inf)
        if tail_cred is not None:
            tail_starved = 0  # starved tail lines so far in this piece
            for m in range(int(tail.max(initial=0)), 0, -1):
                col = width - m
                c_m = min(s.window + int(tail_cred[m]), g.kmem_lines)
                src = a[:, col - c_m] + period + ax[:, col - c_m]
                gm = np.maximum(np.maximum(a[:, col - 1] + inv_r, src), floor)
                a[:, col] = np.where(m <= tail, gm, a[:, col])
                if tail_cred[m] == 0:
                    cold = starved + tail_starved >= warm_lines
                    ax[:, col] = np.where((m <= tail) & ~cold, float(extra), 0.0)
                    tail_starved = tail_starved + (m <= tail)
            starved = starved + tail_starved
        else:
            starved = starved + np.where(hungry, nj, 0)
        if not last:
            buf = a[:, -hist:]
            xbuf = ax[:, -hist:]
        ends.append(a[:, -1].copy())
        end_x.append(np.maximum(ax[:, -1], late - a[:, -1]))
    return np.floor(ends[-1] + 1e-9) + period + end_x[-1]


def _staged_body(
    buf: np.ndarray | None,
    xbuf: np.ndarray,
    floor: np.ndarray,
    cap: np.ndarray,
    t: np.ndarray,
    cut: np.ndarray,
    inv: np.ndarray,
    w: np.ndarray,
    period: int,
    extra: int,
) -> np.ndarray:
    """G at offsets t of a task's body in stretches: lines cut[:, i]..cut[:, i + 1] - 1 at
    inv[:, i] cycles per line, warm (their round trips cost period + extra) below w.

    Each stretch starts from the hist lines before it (the previous task's, or the
    previous stretch's) and their extras; an empty stretch passes them on.
    """
    k, hist = xbuf.shape
    cur = np.full((k, hist), -np.inf) if buf is None else buf
    cur_x = xbuf
    out = np.full(t.shape, -np.inf)
    span = np.arange(hist)[None, :]
    for i in range(cut.shape[1] - 1):
        lo, hi, r = cut[:, i], cut[:, i + 1], inv[:, i]
        warm = lo < w
        per = np.where(warm, period + extra, period)
        entry = np.maximum(cur[:, -1] + r, floor)
        src = cur + cur_x  # a round trip from a line before: period + its own extra
        rel = t - lo[:, None]
        here = (rel >= 0) & (t < hi[:, None])
        if here.any():
            g = _stretch(src, entry, cap, np.maximum(rel, 0), r, per, period)
            out = np.where(here, g, out)
        if i == cut.shape[1] - 2:
            break
        back = hi[:, None] - hist + span - lo[:, None]  # the hist lines before hi, from lo
        idx = np.clip(hist + back, 0, hist - 1)
        before = np.where(back < -hist, -np.inf, np.take_along_axis(cur, idx, axis=1))
        x_before = np.take_along_axis(cur_x, idx, axis=1)
        at = _stretch(src, entry, cap, np.maximum(back, 0), r, per, period)
        cur = np.where(back >= 0, at, before)
        cur_x = np.where(back >= 0, np.where(warm, float(extra), 0.0)[:, None], x_before)
    return out


def core_cycles(
    hyp: Hypothesis,
    g: Geometry,
    s: Settings,
    pieces: np.ndarray,
    starts: np.ndarray | None = None,
) -> np.ndarray:
    """Cycles of one core per row, row r streaming the tasks pieces[r, :] back to back.

    The top's count for that core alone (last drain + 1). Exact for one
    static task; within 1% otherwise (tests/test_analytic.py).
    """
    check_form(hyp)
    check_settings(s)
    p = np.atleast_2d(np.asarray(pieces, dtype=np.int64))
    if p.size == 0 or np.any(p < 1):
        raise InputError("every task needs at least one line")
    st = np.zeros_like(p) if starts is None else np.broadcast_to(starts, p.shape).astype(np.int64)
    if hyp.progress == "paged":
        one = _one_path(hyp, g, p, st)
        out = np.empty(p.shape[0])
        if one.any():
            out[one] = _pieces(hyp, g, s, p[one], st[one])
        if (~one).any():
            out[~one] = _paged(hyp, g, s, p[~one], st[~one])
    elif hyp.static and p.shape[1] == 1:  # one stretch: the longest path in closed form
        cred = hyp.credit_array(g, p[:, 0], 0, st[:, 0])
        cap = np.minimum(s.window + cred, g.kmem_lines)
        if s.ramp:
            out = static_ramp_cycles(s, cap, p[:, 0])
        else:
            out = static_cycles(s.latency, s.window, s.core_rate_q16, cred, p[:, 0], g.kmem_lines)
        if s.dwarm and np.any(cred == 0):  # a starved task: the demand path's warm-up
            z = cred == 0
            out[z] = static_warm_cycles(s, cap[z], p[z, 0])
    else:
        out = _pieces(hyp, g, s, p, st)
    return out


def _one_path(hyp: Hypothesis, g: Geometry, p: np.ndarray, st: np.ndarray) -> np.ndarray:
    """Rows whose tasks each sit on one path: credit 0 (all demand) or all speculative.

    Then each task is one stretch with cap window + credit, as for a static
    credit. One task alone takes the page pattern, which is exact.
    """
    c = hyp.credit_array(g, p, 0, st)
    one = np.all((c == 0) | (c >= np.minimum(p, g.prefetch_max_lines)), axis=1)
    return one & (p.shape[1] > 1)


@lru_cache(maxsize=4096)
def _page_pattern(g: Geometry, s: Settings, credit: int) -> tuple[tuple[int, ...], int, int]:
    """Grants of a split-path task with a fixed credit at a constant rate, and their period.

    A bounded micro-simulation on the cycle model (SIM_PAGES pages). After a
    start-up the grants repeat every q pages, shifted by a fixed number of
    cycles; returns (grants, q x page lines, cycles per period), so a longer
    task is that pattern continued. O(1) in the task's size.
    """
    from ane_kdma import cyclemodel as cm  # the reference dynamics, for one bounded task
    from ane_kdma.hypotheses import Hypothesis

    page = g.prefetch_max_lines

    def vec(g_: Geometry, start: Any, lines: Any, issued: Any) -> np.ndarray:
        return np.where((np.asarray(issued) % page) < credit, credit, 0) + 0 * np.asarray(lines)

    def scalar(g_: Geometry, start: int, lines: int, issued: int) -> int:
        return credit if issued % page < credit else 0

    fixed_c = Hypothesis("page-sim", None, None, True, "paged", False, scalar, vec, paths="split")
    n = SIM_PAGES * page
    core = cm.run(fixed_c, g, s, [[(0, n)]], keep_lines=True).cores[0]
    assert core is not None and core.grants is not None  # one active core, lines kept
    grants = core.grants
    half = n // 2
    for q in range(1, SIM_PAGES // 4 + 1):
        lag = q * page
        d = grants[half + lag :] - grants[half : n - lag]
        if d.size and np.all(d == d[0]):
            return tuple(int(x) for x in grants), lag, int(d[0])
    lag = (SIM_PAGES // 4) * page  # no exact period: the mean over the second half
    return tuple(int(x) for x in grants), lag, round(float(grants[-1] - grants[-1 - lag]))


def _grant_at(pattern: tuple[tuple[int, ...], int, int], i: int) -> float:
    """Grant cycle of line i of the pattern's task, the period continued past the simulation."""
    grants, lag, cycles = pattern
    n = len(grants)
    if i < n:
        return float(grants[i])
    periods = -(-(i - (n - 1)) // lag)
    return float(grants[i - periods * lag] + periods * cycles)


def _starved_lines(c: int, page: int, q: int) -> int:
    """Starved lines among a paged task's first q lines (the first c of each page have credit)."""
    c = min(max(c, 0), page)
    return (q // page) * (page - c) + max(0, q % page - c)


def _warm_until(c: int, page: int, left: int) -> int:
    """The first line of a paged task past its `left` more warm starved lines."""
    c = min(max(c, 0), page)
    per = page - c
    if left <= 0:
        return 0
    if per == 0:
        return 0  # never starved: no line of it is warm
    pages, rem = divmod(left, per)
    return pages * page + (c + rem if rem else 0)


def _paged(hyp: Hypothesis, g: Geometry, s: Settings, p: np.ndarray, st: np.ndarray) -> np.ndarray:
    """Split-path credit (the paged reading): each task its credit's periodic page pattern.

    Each task follows the grants of a bounded simulation at its credit, the
    period continued (exact for one task at a constant rate). The governor's
    rate steps are followed phase by phase, and tasks follow each other back to
    back; both of these are approximations within about 1%. The demand path's
    warm-up (issue 16) is in the simulation itself (:func:`_warm_grant`).
    """
    period = max(s.latency, 1) + 2
    flat = replace(
        s,
        ramp_start_q16=0,
        ramp_inc_q16=0,
        warm_lines=0,
        warm_extra_cycles=0,
        task_gap_cycles=0,
        dwarm_lines=0,
        dwarm_extra_cycles=0,
    )
    page = g.prefetch_max_lines
    warm_lines = s.dwarm_lines if s.dwarm else 0
    steps = phases(s)
    out = np.empty(p.shape[0])
    for row in range(p.shape[0]):
        t, done, starved = 0.0, 0, 0  # grant time so far, lines (starved lines) issued so far
        tail = 0.0
        for j in range(p.shape[1]):
            n = int(p[row, j])
            c = int(hyp.credit_array(g, n, 0, st[row, j]))
            left = max(warm_lines - starved, 0)  # starved lines of the warm-up still to come
            pos, first = 0, True
            while pos < n:  # one governor phase at a time
                k = max(i for i, (f, _) in enumerate(steps) if f <= done + pos)
                end = steps[k + 1][0] - done if k + 1 < len(steps) else n
                end = min(max(end, pos + 1), n)
                rate = replace(flat, core_rate_q16=steps[k][1])
                a = _warm_grant(g, rate, c, left, s.dwarm_extra_cycles, pos - 1) if pos else 0.0
                b = _warm_grant(g, rate, c, left, s.dwarm_extra_cycles, end - 1)
                t += b - a + (1 if (first and j) else 0)
                pos, first = end, False
            ex = s.dwarm_extra_cycles
            cool = _warm_until(c, page, left) if ex else 0
            tail = 0.0  # past the last grant: its drain, or (in order) a warm line's before it
            if cool > 0:
                q = n - 1  # the task's last starved line (the first c of each page have credit)
                if q % page < min(c, page):
                    q -= q % page + 1
                if 0 <= q < cool:  # warm: it pops `ex` late, and the lines after it in order
                    lag = _warm_grant(g, rate, c, left, ex, n - 1) - _warm_grant(
                        g, rate, c, left, ex, q
                    )
                    tail = max(ex + (n - 1 - q) - lag, 0.0)
            done += n
            starved += _starved_lines(c, page, n)
        out[row] = np.floor(t + 1e-9) + period + np.ceil(tail - 1e-9)
    return out


def _warm_grant(g: Geometry, flat: Settings, credit: int, left: int, extra: int, i: int) -> float:
    """Grant cycle of line i of a paged task at a constant rate, `left` warm starved lines first.

    With no warm-up this is the flat page pattern. Otherwise the pattern is
    simulated with the warm-up in it, so the change from warm to cool round
    trips is the cycle model's own; a warm-up that ends late in the task is
    moved earlier in that simulation by whole periods of the all-warm pattern
    (the same grants, shifted), and line i before its end reads that pattern.
    """
    page = g.prefetch_max_lines
    cool = _warm_until(credit, page, left) if extra else 0
    if cool <= 0:
        return _grant_at(_page_pattern(g, flat, credit), i)
    hot_s = replace(flat, dwarm_lines=SIM_PAGES * page, dwarm_extra_cycles=extra)
    if cool <= SIM_PAGES * page // 4:  # the change settles inside the simulation
        real = replace(flat, dwarm_lines=left, dwarm_extra_cycles=extra)
        return _grant_at(_page_pattern(g, real, credit), i)
    hot = _page_pattern(g, hot_s, credit)
    if i < cool:
        return _grant_at(hot, i)
    lag = hot[1]
    shift = -(-(cool - SIM_PAGES * page // 4) // lag) * lag  # whole hot periods
    early = cool - shift
    moved = replace(flat, dwarm_lines=_starved_lines(credit, page, early), dwarm_extra_cycles=extra)
    pat = _page_pattern(g, moved, credit)
    return _grant_at(hot, cool - 1) + _grant_at(pat, i - shift) - _grant_at(pat, early - 1)


def governor_grid(
    latency: np.ndarray,
    window: np.ndarray,
    rate: np.ndarray,
    ramp_start: np.ndarray,
    ramp_lines: np.ndarray,
    steps: int,
    credit: np.ndarray,
    lines: np.ndarray,
    kmem_lines: int,
    dwarm_lines: np.ndarray | int = 0,
    dwarm_extra: np.ndarray | int = 0,
) -> np.ndarray:
    """One static task's cycles under a governor of `steps` equal steps, broadcast over a grid.

    The rate starts at ramp_start and climbs in `steps` equal steps over the
    first ramp_lines lines to `rate` (ramp_start >= rate: no ramp). What a
    calibration searches over: the longest path of :func:`static_ramp_cycles`,
    vectorised over every argument.

    The demand path's warm-up (issue 16): with credit 0 every line is starved,
    and the first `dwarm_lines` of them pop `dwarm_extra` cycles late, so a
    round trip from one of them costs period + extra (:func:`_warm_longest`).
    With credit, or with either input 0, the warm-up is off and the answer is
    the one without it, to the cycle.
    """
    lat = np.maximum(np.asarray(latency, dtype=np.int64), 1)
    period = lat + 2
    r1 = np.asarray(rate, dtype=float)
    r0 = np.minimum(np.asarray(ramp_start, dtype=float), r1)
    step = np.maximum(np.asarray(ramp_lines, dtype=float) / steps, 1.0)
    cap = np.minimum(np.asarray(window, dtype=np.int64) + credit, kmem_lines)
    last = np.asarray(lines, dtype=np.int64) - 1
    starved = np.asarray(credit) == 0
    wl = np.where(starved, np.asarray(dwarm_lines, dtype=np.int64), 0)
    ex = np.where(starved, np.asarray(dwarm_extra, dtype=np.int64), 0)
    warm = (wl > 0) & (ex > 0)
    wl, ex = np.where(warm, wl, 0), np.where(warm, ex, 0)

    # each step's rate and line range, once per grid (tok runs for every candidate line),
    # stacked on a leading axis so that tok sums the steps in one reduction
    kshape = np.broadcast(r1, r0, step).shape
    ks = np.arange(steps + 1).reshape((steps + 1,) + (1,) * len(kshape))  # k = 0..steps
    last_k = ks == steps
    rks = np.broadcast_to(
        np.where(last_k, r1, np.minimum(r0 + (r1 - r0) * ks / steps, r1)), ks.shape[:1] + kshape
    )
    los = np.broadcast_to(np.maximum(ks * step, 1.0), rks.shape)
    his = np.broadcast_to(np.where(last_k, np.inf, (ks + 1) * step - 1), rks.shape)

    def tok(i: np.ndarray) -> np.ndarray:
        """Token time of lines 1..i, line j at the rate of its step: per step, the lines of
        1..i in it times 1/rate, summed over the steps in order (a cumulative sum adds them
        one after another, as a loop over the steps does; np.sum may pair them up)."""
        i = np.asarray(i, dtype=float)
        nd = max(i.ndim, len(kshape))
        lead = (steps + 1,) + (1,) * (nd - len(kshape)) + kshape
        n = np.minimum(i, his.reshape(lead)) - los.reshape(lead) + 1
        np.maximum(n, 0, out=n)
        terms = n * RATE_ONE / rks.reshape(lead)
        out: np.ndarray = np.cumsum(terms, axis=0)[-1] + 0.0
        return out

    bounds = [np.floor(k * step).astype(np.int64) for k in range(1, steps + 1)]
    if not np.any(warm):  # the governor alone: one switch from tokens to round trips
        cands = [last % cap, last]
        for b in bounds:
            for bb in (b - 1, b):
                cands.append(np.clip(bb - ((bb - last) % cap), last % cap, last))
        best = np.full(np.broadcast(last, cap, r1, r0, step).shape, -np.inf)
        for m in cands:
            best = np.maximum(best, tok(m) + ((last - m) // cap) * period)
        return np.ceil(np.maximum(best, 1) - 1e-9) + period
    shape = np.broadcast(last, cap, r1, r0, step, period, wl, ex).shape
    last, cap, period, wl, ex, warm = (
        np.broadcast_to(a, shape) for a in (last, cap, period, wl, ex, warm)
    )
    return _warm_end(tok, bounds, last, cap, period, wl, ex, warm)


def _warm_end(
    tok: Callable[[np.ndarray], np.ndarray],
    bounds: list[np.ndarray],
    last: np.ndarray,
    cap: np.ndarray,
    period: np.ndarray,
    wl: np.ndarray,
    ex: np.ndarray,
    warm: np.ndarray,
) -> np.ndarray:
    """Cycles of one starved task with the demand path's warm-up (every argument one shape).

    The longest path to the last line, its own round trip (plus the extra if it
    is warm), and the port's in-order pop: a line just past the warm-up drains
    after the last warm one.
    """
    best = _warm_longest(tok, bounds, last, cap, period, wl, ex)
    end = np.ceil(np.maximum(best, 1) - 1e-9) + period + np.where(last < wl, ex, 0)
    prior = np.maximum(np.minimum(wl, last + 1) - 1, 0)
    g_prior = np.ceil(np.maximum(_warm_longest(tok, bounds, prior, cap, period, wl, ex), 1) - 1e-9)
    pops = g_prior + period + ex + (last - prior)
    return np.maximum(end, np.where(warm & (last >= wl), pops, end))


def _warm_longest(
    tok: Callable[[np.ndarray], np.ndarray],
    bounds: list[np.ndarray],
    last: np.ndarray,
    cap: np.ndarray,
    period: np.ndarray,
    wl: np.ndarray,
    ex: np.ndarray,
) -> np.ndarray:
    """The longest path to line `last` when round trips from lines below wl cost period + ex.

    A path is token steps (line j costs the governor's 1 / rate(j)) and round
    trips (line j to j + cap). Seen as the token path plus a set of round
    trips, each round trip from j gains period + ex[j < wl] - tok(j..j + cap),
    which never falls as j grows except at wl. So the best path is at most
    tokens, a chain of warm round trips packed as late as it can (ending by
    wl - 1 + cap), tokens, and a chain of round trips ending at `last`; each
    chain starts where its gains turn positive (near a rate step) or at its
    lowest line. Every candidate is a path, so the maximum over them is exact
    up to the token bucket's rounding.
    """
    lo3 = last % cap

    def down(x: np.ndarray, ref: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The largest line <= x in ref's class mod cap, within lo..hi."""
        return np.clip(x - ((x - ref) % cap), lo, hi)

    def up(x: np.ndarray, ref: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return np.clip(x + ((ref - x) % cap), lo, hi)

    def chain(m: np.ndarray, n: np.ndarray) -> np.ndarray:
        """Cost of round trips from m to n (n - m a multiple of cap)."""
        hops = (n - m) // cap
        w = np.clip(-(-(wl - m) // cap), 0, hops)  # hop starts below wl
        return hops * period + w * ex

    def near_steps(ref: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """Lines in ref's class mod cap around each rate step (where a chain's gains turn)."""
        out = [lo, hi]
        for b in bounds:
            for bb in (b - 1, b, b + 1):
                d = down(bb, ref, lo, hi)
                out += [d, np.minimum(d + cap, hi)]
        return out

    # the chain ending at `last`, from m3: alone (it may reach below wl), or after the warm chain
    m3s = near_steps(last, lo3, last) + [up(wl, last, lo3, last), up(wl - 1 + cap, last, lo3, last)]
    ends = [tok(m3) + chain(m3, last) for m3 in m3s]
    best = np.maximum.reduce(ends)
    a = np.maximum(wl - 1 + cap, 0)  # the latest the warm chain can end (its last hop from wl - 1)
    lo1 = a % cap
    warm_chain = np.maximum.reduce([tok(m1) + chain(m1, a) for m1 in near_steps(a, lo1, a)])
    for m3, e in zip(m3s, ends, strict=True):
        best = np.maximum(best, np.where(m3 >= a, warm_chain - tok(a) + e, -np.inf))
    return best
