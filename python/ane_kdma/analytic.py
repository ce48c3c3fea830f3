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

Cores are taken as independent: the aggregate DRAM ceiling is applied by the
chip (:meth:`ane_kdma.chip.Chip.time_us`), and the cycle model's start-up
contention of identical cores at the aggregate bucket (a cycle or two) is
not modeled.
"""

from __future__ import annotations

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings

FORMS = ("static", "remaining")  # the registry's progress forms with a closed form here


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


def _stretch(
    buf: np.ndarray | None,
    entry: np.ndarray,
    cap: np.ndarray,
    t: np.ndarray,
    inv_r: float,
    period: int,
) -> np.ndarray:
    """G at offsets t (>= 0) of a constant-cap stretch, from the lines before it.

    buf[:, -1] is the line just before the stretch (None: nothing before it);
    entry is the earliest the first line may go by the token path or the task
    floor.
    """
    c = cap[:, None]
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
    return np.maximum(g, period + hop)


def _pieces(
    hyp: Hypothesis, g: Geometry, s: Settings, pieces: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """Cycles (the top's count for one core) of each row's tasks issued back to back.

    pieces[r, j] is the line count of row r's task j; starts[r, j] its start line.
    """
    k, split = pieces.shape
    inv_r = RATE_ONE / s.core_rate_q16
    period = max(s.latency, 1) + 2
    clamp = g.prefetch_max_lines
    tail_lines = clamp - 1  # a "remaining" credit is below its clamp on the last clamp-1 lines
    remaining = hyp.progress == "remaining"
    body_cap = min(s.window + int(hyp.credit_array(g, clamp, 0)), g.kmem_lines)
    hist = min(s.window + clamp, g.kmem_lines)  # the largest cap: every path passes here
    buf: np.ndarray | None = None  # G of the last `hist` lines before the piece
    accept = np.zeros(k)
    ends: list[np.ndarray] = []
    for j in range(split):
        nj = pieces[:, j]
        if j:
            ready = np.floor(ends[-1] + 1e-9) + 1  # grants fall on whole cycles
            if j >= 2:
                ready = np.maximum(ready, np.floor(ends[-2] + 1e-9) + period)  # j-2 drained
            accept = np.maximum(accept + 1, ready)
        floor = accept + 1
        entry = floor if buf is None else np.maximum(buf[:, -1] + inv_r, floor)
        if remaining:
            cap = np.full(k, body_cap)
            tail = np.minimum(nj, tail_lines)
        else:
            cred = hyp.credit_array(g, nj, 0, starts[:, j])
            cap = np.minimum(s.window + cred, g.kmem_lines)
            tail = np.zeros(k, dtype=np.int64)
        last = j == split - 1
        width = hist + tail_lines if remaining else (1 if last else hist)
        t = nj[:, None] - width + np.arange(width)[None, :]  # column -> line offset in piece
        if buf is None:
            a = np.full(t.shape, -np.inf)
        else:
            a = np.take_along_axis(buf, np.clip(hist + t, 0, hist - 1), axis=1)
            a = np.where(t < -hist, -np.inf, a)
        in_body = (t >= 0) & (t < (nj - tail)[:, None])
        if in_body.any():
            gg = _stretch(buf, entry, cap, np.maximum(t, 0), inv_r, period)
            a = np.where(in_body, gg, a)
        if remaining:
            tail_cred = hyp.credit_array(g, np.arange(tail_lines + 1), 0)
            for m in range(int(tail.max(initial=0)), 0, -1):
                col = width - m
                c_m = min(s.window + int(tail_cred[m]), g.kmem_lines)
                gm = np.maximum(np.maximum(a[:, col - 1] + inv_r, a[:, col - c_m] + period), floor)
                a[:, col] = np.where(m <= tail, gm, a[:, col])
        if not last:
            buf = a[:, -hist:]
        ends.append(a[:, -1].copy())
    return np.floor(ends[-1] + 1e-9) + period


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
    p = np.atleast_2d(np.asarray(pieces, dtype=np.int64))
    if p.size == 0 or np.any(p < 1):
        raise InputError("every task needs at least one line")
    st = np.zeros_like(p) if starts is None else np.broadcast_to(starts, p.shape).astype(np.int64)
    if hyp.static and p.shape[1] == 1:  # one stretch: the exact formula
        cred = hyp.credit_array(g, p[:, 0], 0, st[:, 0])
        return static_cycles(s.latency, s.window, s.core_rate_q16, cred, p[:, 0], g.kmem_lines)
    return _pieces(hyp, g, s, p, st)
