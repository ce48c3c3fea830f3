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
Buggy credit is static per task, so a buggy task is one stretch; the fix's
credit shrinks over the last 255 lines of each task, which this model walks
line by line (255 steps, vectorised over all sizes at once). Split tasks are
pieces issued back to back; a piece is taken once the previous one is fully
issued and the one before that fully drained, as kdma_core does.

The aggregate DRAM ceiling is a bound on top (``task_cycles``): with the
ceiling slack the cores are independent, as in the cycle model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ane_kdma.cyclemodel import Settings
from ane_kdma.errors import InputError
from ane_kdma.hw import (
    KMEM_LINES,
    LINE_BYTES,
    NUM_CORES_MAX,
    PREFETCH_MAX_LINES,
    RATE_ONE,
    CreditMode,
    credit_array,
)

TAIL_LINES = PREFETCH_MAX_LINES - 1  # the fix's credit is below the clamp on the last 255 lines


@dataclass(frozen=True)
class Timing:
    """Cycles to µs and GB/s the way a profile does it (one fixed cost per request)."""

    ns_per_cycle: float
    overhead_us: float

    def time_us(self, cycles: np.ndarray | float) -> np.ndarray:
        return self.overhead_us + np.asarray(cycles, dtype=float) * self.ns_per_cycle / 1000.0

    def gbps(
        self, bytes_per_core: np.ndarray | float, cycles: np.ndarray | float, cores: int = 16
    ) -> np.ndarray:
        return cores * np.asarray(bytes_per_core, dtype=float) / (self.time_us(cycles) * 1e3)


def split_pieces(lines: np.ndarray, split: int) -> tuple[np.ndarray, np.ndarray]:
    """Near-equal pieces as the CLI splits them: (base, extra); piece j is base + (j < extra)."""
    if split < 1:
        raise InputError(f"split {split} must be at least 1")
    if np.any(lines < split):
        raise InputError(f"cannot split fewer than {split} lines into {split} tasks")
    return np.divmod(lines, split)


def _as_lines(lines: np.ndarray | int) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(lines))
    if arr.dtype.kind not in "iu":
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise InputError("line counts must be whole numbers")
        arr = arr.astype(np.int64)
    arr = arr.astype(np.int64)
    if np.any(arr < 1):
        raise InputError("every transfer needs at least one line")
    if np.any(arr * LINE_BYTES >= 1 << 32):
        raise InputError("a transfer exceeds the 32-bit size register")
    return arr


def static_cycles(
    latency: np.ndarray | int,
    window: np.ndarray | int,
    core_rate_q16: np.ndarray | int,
    credit: np.ndarray | int,
    lines: np.ndarray | int,
) -> np.ndarray:
    """Exact cycles of one task whose credit is static (both buggy modes), broadcast over all.

    With a constant cap c the grants are either token-paced, g_i = ceil(i / r),
    or stop-and-go bursts of c lines one round trip P apart, g_i = (i div c) * P
    + ceil((i mod c) / r); the later of the two is the cycle model's answer
    exactly (tests/test_analytic.py). Calibration searches over this formula.
    """
    lat = np.maximum(np.asarray(latency, dtype=np.int64), 1)
    period = lat + 2
    rate = np.asarray(core_rate_q16, dtype=np.int64)
    cap = np.minimum(np.asarray(window, dtype=np.int64) + credit, KMEM_LINES)
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


def _one_mode(mode: CreditMode, s: Settings, lines: np.ndarray, split: int) -> np.ndarray:
    """Cycles (run_sequence's count) of `lines` split into `split` near-equal back-to-back tasks."""
    k = lines.size
    inv_r = RATE_ONE / s.core_rate_q16
    period = max(s.latency, 1) + 2
    hist = min(s.window + PREFETCH_MAX_LINES, KMEM_LINES)  # the largest cap: paths pass here
    base, extra = split_pieces(lines, split)
    fixed = mode is CreditMode.FIXED
    buf: np.ndarray | None = None  # G of the last `hist` lines before the piece
    accept = np.zeros(k)
    ends: list[np.ndarray] = []
    for j in range(split):
        nj = base + (j < extra)
        if j:
            ready = np.floor(ends[-1] + 1e-9) + 1  # grants fall on whole cycles
            if j >= 2:
                ready = np.maximum(ready, np.floor(ends[-2] + 1e-9) + period)  # j-2 drained
            accept = np.maximum(accept + 1, ready)
        floor = accept + 1
        entry = floor if buf is None else np.maximum(buf[:, -1] + inv_r, floor)
        if fixed:
            cap = np.full(k, hist)
            tail = np.minimum(nj, TAIL_LINES)
        else:
            cap = np.minimum(s.window + credit_array(mode, nj), KMEM_LINES)
            tail = np.zeros(k, dtype=np.int64)
        last = j == split - 1
        width = hist + TAIL_LINES if fixed else (1 if last else hist)
        t = nj[:, None] - width + np.arange(width)[None, :]  # column -> line offset in piece
        if buf is None:
            a = np.full(t.shape, -np.inf)
        else:
            a = np.take_along_axis(buf, np.clip(hist + t, 0, hist - 1), axis=1)
            a = np.where(t < -hist, -np.inf, a)
        in_body = (t >= 0) & (t < (nj - tail)[:, None])
        if in_body.any():
            g = _stretch(buf, entry, cap, np.maximum(t, 0), inv_r, period)
            a = np.where(in_body, g, a)
        for m in range(int(tail.max(initial=0)), 0, -1):
            col = width - m
            c_m = min(s.window + m, KMEM_LINES)
            g = np.maximum(np.maximum(a[:, col - 1] + inv_r, a[:, col - c_m] + period), floor)
            a[:, col] = np.where(m <= tail, g, a[:, col])
        if not last:
            buf = a[:, -hist:]
        ends.append(a[:, -1].copy())
    return np.floor(ends[-1] + 1e-9) + period


def core_cycles(
    mode: CreditMode | np.ndarray | int,
    settings: Settings,
    lines: np.ndarray | int,
    split: np.ndarray | int = 1,
) -> np.ndarray:
    """Cycles of one core streaming each line count, optionally as `split` back-to-back tasks.

    Broadcasts `mode` (CreditMode values), `lines` and `split` against each
    other; the result matches engines.cycles("model", ...) on the same
    sequences within 1%.
    """
    lines_a = _as_lines(lines)
    mode_a = np.atleast_1d(np.asarray(mode, dtype=np.int64))
    split_a = np.atleast_1d(np.asarray(split, dtype=np.int64))
    try:
        lines_b, mode_b, split_b = np.broadcast_arrays(lines_a, mode_a, split_a)
    except ValueError:
        raise InputError("lines, modes and splits do not broadcast together") from None
    valid = {int(m) for m in CreditMode}
    if not set(np.unique(mode_b).tolist()) <= valid:
        raise InputError(f"credit modes must be among {sorted(valid)}")
    out = np.empty(lines_b.shape, dtype=float)
    flat_l, flat_m, flat_s = lines_b.ravel(), mode_b.ravel(), split_b.ravel()
    flat_out = out.ravel()
    for m in np.unique(flat_m):
        mode_m = CreditMode(int(m))
        for sp in np.unique(flat_s[flat_m == m]):
            sel = (flat_m == m) & (flat_s == sp)
            if mode_m.buggy and sp == 1:  # one stretch: the exact formula
                n = flat_l[sel]
                flat_out[sel] = static_cycles(
                    settings.latency,
                    settings.window,
                    settings.core_rate_q16,
                    credit_array(mode_m, n),
                    n,
                )
            else:
                flat_out[sel] = _one_mode(mode_m, settings, flat_l[sel], int(sp))
    return flat_out.reshape(lines_b.shape)


def task_cycles(
    mode: CreditMode | np.ndarray | int,
    settings: Settings,
    lines: np.ndarray | int,
    split: np.ndarray | int = 1,
    cores: int = NUM_CORES_MAX,
) -> np.ndarray:
    """Cycles of `cores` identical cores sharing one DRAM: the per-core time or the ceiling's."""
    if not 1 <= cores <= NUM_CORES_MAX:
        raise InputError(f"{cores} cores: the ANE has 1..{NUM_CORES_MAX}")
    per_core = core_cycles(mode, settings, lines, split)
    return np.maximum(per_core, ceiling_cycles(settings, lines, cores))


def ceiling_cycles(
    settings: Settings, lines: np.ndarray | int, cores: int = NUM_CORES_MAX
) -> np.ndarray:
    """The fewest cycles in which `cores` x `lines` lines fit through the aggregate ceiling."""
    total = cores * _as_lines(lines)
    return (total - 1) * RATE_ONE / settings.agg_rate_q16 + max(settings.latency, 1) + 3
