"""The fast search: Nelder-Mead on the closed form over a mechanism's fit space.

The space (variables, starts, scales, bounds) and the map from knobs to a profile's inputs
are the mechanism's registry entry (:mod:`ane_kdma.mechanisms`); nothing here names one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ane_kdma import analytic
from ane_kdma import mechanisms as mechs
from ane_kdma.calibrate.problem import Problem
from ane_kdma.chip import Chip
from ane_kdma.hw import RATE_ONE
from ane_kdma.mechanisms import MAX_RATE, MAX_RATE_Q16, Knobs
from ane_kdma.profile import Profile

PENALTY = 100.0  # weight of a violated constraint (relative units squared)

# A correction per target and per bound (cycles): the exact model's cycles on one core less
# the search's closed form, at the last fit (:func:`_correction`). Zero: none yet.
Fix = tuple[np.ndarray, np.ndarray]
CORRECTIONS = 2  # search, correct, search again: twice (the second moves the fit < 0.1%)
STARVED_WINDOWS = (64, 72, 80, 88, 96, 104, 112)  # the windows the V chooses from (starved fits)


def cycles(
    chip: Chip, k: Knobs, mech: mechs.Mechanism, lines: np.ndarray, notch: np.ndarray
) -> np.ndarray:
    """One core's cycles for each size, at the notch (no credit) or at full credit.

    The closed form itself (:func:`ane_kdma.analytic.governor_grid`), not an engine: the
    search needs it over a grid of knobs, which no engine of the contract offers. A
    starved-stream mechanism adds its fluid estimate at the notch."""
    clamp = chip.geometry.prefetch_max_lines
    rate = min(k.rate, MAX_RATE) * RATE_ONE
    steps = max(mech.steps, 1)
    out = analytic.governor_grid(
        latency=np.array(k.period() - 2),
        window=np.array(k.window),
        rate=np.array(rate),
        ramp_start=np.array(rate * (min(k.get("start", 1.0), 1.0) if mech.steps else 1.0)),
        ramp_lines=np.array(max(k.get("ramp_lines", 1.0), 1.0)),
        steps=steps,
        credit=np.where(notch, 0, clamp),
        lines=lines,
        kmem_lines=chip.geometry.kmem_lines,
    )
    if mech.starved:  # the mechanism's own quick estimate, at the notch
        out = out + np.where(notch, mech.extra_cycles(k, lines), 0.0)
    return out


def penalty(t: float, lo: float, hi: float) -> float:
    if t > hi:
        return PENALTY * ((t - hi) / hi) ** 2
    if t < lo:
        return PENALTY * ((lo - t) / lo) ** 2
    return 0.0


RISE = 1e-3  # a rising figure rises by at least 0.1% a step (a flat step is not a rise)
INSIDE = 0.002  # an agreement is held this far inside its band (the search is not the engine)


def agreement_penalty(prob: Problem, times: np.ndarray) -> float:
    out = 0.0
    for g in prob.agreements:
        fig = times[g.a] / (times[g.b] if g.b >= 0 else 1.0)
        if g.invert:
            fig = 1.0 / fig
        excess = abs(fig / g.value - 1) - (g.tol - INSIDE)
        if excess > 0:
            out += PENALTY * excess**2
    return out


def rising_penalty(prob: Problem, b_times: np.ndarray) -> float:
    out = 0.0
    for group in prob.rising:
        g = [prob.bounds[i].bytes_per_core / b_times[i] for i in group]
        for lo, hi in zip(g, g[1:], strict=False):
            rise = (hi - lo) / lo
            if rise < RISE:
                out += PENALTY * (RISE - rise) ** 2
    return out


def objective(
    chip: Chip, prob: Problem, k: Knobs, mech: mechs.Mechanism, fix: Fix | None = None
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(objective, overhead, target times, bound times): overhead by weighted least squares."""
    ns = chip.ns_per_cycle_hand_set / 1000.0
    t_lines = np.array([t.lines for t in prob.targets])
    t_notch = np.array([t.notch for t in prob.targets])
    meas = np.array([t.measured_us for t in prob.targets])
    cyc = cycles(chip, k, mech, t_lines, t_notch)
    if fix is not None:
        cyc = cyc + fix[0]
    cyc = cyc * ns
    w = 1.0 / meas**2
    ovh = max(0.0, float(((meas - cyc) * w).sum() / w.sum()))
    model = ovh + cyc
    obj = float((((model - meas) / meas) ** 2).mean()) + agreement_penalty(prob, model)
    b_times = np.zeros(0)
    if prob.bounds:
        b_lines = np.array([b.lines for b in prob.bounds])
        b_notch = np.array([b.notch for b in prob.bounds])
        b_cyc = cycles(chip, k, mech, b_lines, b_notch)
        if fix is not None:
            b_cyc = b_cyc + fix[1]
        b_times = ovh + b_cyc * ns
        for b, t in zip(prob.bounds, b_times, strict=True):
            obj += penalty(float(t), b.lo_us, b.hi_us)
        obj += rising_penalty(prob, b_times)
    if prob.page is not None:  # full recovery at |x| = page: one page of credit reaches the rate
        knee = min(k.window + prob.page, chip.geometry.kmem_lines) / k.period()
        if knee < k.rate:
            obj += PENALTY * ((k.rate - knee) / k.rate) ** 2
    return obj, ovh, model, b_times


def _nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, scale: np.ndarray, iters: int = 400
) -> np.ndarray:
    """Plain Nelder-Mead (deterministic): the fit has a handful of smooth-ish variables."""
    n = x0.size
    pts = [x0] + [x0 + scale * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts = [pts[i] for i in order]
        vals = [vals[i] for i in order]
        centroid = np.mean(pts[:-1], axis=0)
        xr = centroid + (centroid - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = centroid + 2 * (centroid - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (pts[-1] - centroid)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0] + 0.5 * (p - pts[0]) for p in pts]
                vals = [f(p) for p in pts]
        if max(vals) - min(vals) < 1e-12:
            break
    return pts[int(np.argmin(vals))]


def _to_x(k: Knobs, mech: mechs.Mechanism) -> np.ndarray:
    """The search's vector: the rate, (latency + 2) / window, then the mechanism's
    variables (a log-searched one as its logarithm)."""
    x = [k.rate, k.period_per_line]
    for p in mech.params:
        v = k.get(p.name, p.off)
        x.append(float(np.log(max(v, 1.0))) if p.log else v)
    return np.array(x, dtype=float)


def _knobs(x: np.ndarray, mech: mechs.Mechanism, window: int) -> Knobs:
    params: dict[str, float] = {}
    for i, p in enumerate(mech.params, start=2):
        lo = max(p.lo, 1.0 / window) if p.per_window else p.lo
        params[p.name] = float(np.clip(np.exp(x[i]) if p.log else x[i], lo, p.hi))
    return Knobs(
        rate=float(np.clip(x[0], 0.02, MAX_RATE)),
        period_per_line=float(np.clip(x[1], 0.5, 64.0)),
        window=window,
        params=params,
    )


BASE_SCALES = (0.05, 0.5)  # NM's first step for the rate and (latency + 2) / window
BASE_PERIOD_START = 7.0  # (latency + 2) / window where every search starts


def _scales(mech: mechs.Mechanism) -> np.ndarray:
    return np.array(BASE_SCALES + tuple(p.scale for p in mech.params))


def _starts(
    chip: Chip, prob: Problem, mech: mechs.Mechanism, window: int, fix: Fix | None
) -> list[np.ndarray]:
    """The search's fixed starts: a mechanism that extends another (and changes a starved
    stream) starts from the other's own fit, crossed with its own variables' starts; else
    every start of the rate and of each variable, crossed."""
    parent = mech.parent
    if parent is not None and mech.params_own and mech.starved:
        up = _to_x(search(chip, prob, parent, window, fix), parent)
        own = [[_log(p, v) for v in p.starts] for p in mech.params_own]
        return [np.concatenate([up, np.array(g)]) for g in itertools.product(*own)]
    each = [[_log(p, v) for v in p.starts] for p in mech.params]
    return [
        np.array((r, BASE_PERIOD_START, *g)) for r, *g in itertools.product(mech.rate_starts, *each)
    ]


def _log(p: mechs.Param, v: float) -> float:
    return float(np.log(v)) if p.log else v


def search(
    chip: Chip,
    prob: Problem,
    mech: mechs.Mechanism,
    window: int,
    fix: Fix | None = None,
    near: Knobs | None = None,
) -> Knobs:
    """The continuous fit of rate, governor, (latency + 2) / window and a starved-stream
    mechanism's inputs at a given window: from fixed starts, or from `near` alone."""

    def f(x: np.ndarray) -> float:
        return objective(chip, prob, _knobs(x, mech, window), mech, fix)[0]

    if near is not None:
        starts = [_to_x(replace(near, window=window), mech)]
    else:
        starts = _starts(chip, prob, mech, window, fix)
    best, best_val = None, math.inf
    for x0 in starts:
        scale = _scales(mech) / (4 if near is not None else 1)
        x = _nelder_mead(f, x0, scale)
        x = _nelder_mead(f, x, scale / 4)
        val = f(x)
        if val < best_val:
            best, best_val = x, val
    assert best is not None  # every start gives a finite objective
    return _knobs(best, mech, window)


def profile(chip: Chip, k: Knobs, mech: mechs.Mechanism, ovh: float, hyp: str) -> Profile:
    rate = max(1, min(MAX_RATE_Q16, round(k.rate * RATE_ONE)))
    inputs, ovh = mech.to_inputs(k, rate, ovh, chip.ns_per_cycle_hand_set)
    return Profile(
        name=chip.name,
        ns_per_cycle=chip.ns_per_cycle_hand_set,
        overhead_us=round(ovh, 3),
        latency_cycles=k.period() - 2,
        window_lines=k.window,
        core_rate_q16=rate,
        ceiling_gbps=chip.ceiling_gbps,
        hypothesis=hyp,
        mechanism=mech.name,
        **inputs,  # type: ignore[arg-type]
    )
