"""Fit the profile's free parameters to the published measurements, on the model.

Why this shape. Only four numbers are free: the per-request overhead (µs),
the memory latency (cycles), the demand window (lines) and the per-core rate
(Q.16 lines/cycle). ``ns_per_cycle`` is hand-set: the data fix only
latency x ns and rate / ns, so any clock would fit as well.

* Targets: the Table A medians and the D = 2016 and D = 2048 point facts,
  as times in µs, least squares on the relative error, equal weights.
* Constraints, each a stated fact (recorded in the profile's notes):
  the floor lies in 17-19 GB/s at k = 1..8; nominal is >= 45 GB/s at
  x = +-256, k = 1; full recovery at |x| = 256 means one page of credit
  reaches the rate limit, (window + 256) / (latency + 2) >= rate.
* The targets fix only (latency + 2) / window: a family of windows fits them
  equally well. Inside that family (objective within TIE_BAND of the best),
  the window whose x >= 0 arm has the linear-fit slope nearest the measured
  3.18 µs/line is taken.
* Every calibration figure has the same credit under LITERAL and SIGNED (the
  x < 0 arm, which tells them apart, is not used), so the fit favours
  neither hypothesis; validate judges them afterwards.

Search: for every window 1..1024, a relaxed problem (the stop-and-go and
token-paced branches are linear in (overhead, latency + 2, cycles per line))
is solved exactly by enumerating active constraint sets; the integers around
its optimum are then scored with the exact static-credit formula
(``analytic.static_cycles``), and the result is confirmed line by line with
the cycle model. The whole search is deterministic.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ane_kdma import analytic, measured
from ane_kdma import cyclemodel as cm
from ane_kdma.errors import InputError
from ane_kdma.fileio import write_atomic
from ane_kdma.hw import (
    KMEM_LINES,
    LINE_BYTES,
    PREFETCH_MAX_LINES,
    RATE_ONE,
    RING_LINES,
    CreditMode,
    credit_array,
)
from ane_kdma.profile import PROFILE_DIR, Profile

NS_PER_CYCLE = 8.0  # hand-set, not fitted (see module docstring)
FIT_MODE = CreditMode.SIGNED  # equal to LITERAL at every size the fit uses
TIE_BAND = 0.005  # relative objective band inside which the targets cannot tell windows apart
SLOPE_STEP = 32  # lines: a D step of 4 at N = 4096, as between the published dumps
REFINE = 3  # integer neighbourhood scored exactly around each relaxed optimum
MAX_LATENCY = cm.MAX_LATENCY_CYCLES
PROFILE_NAME = "m3"
DEFAULT_OUT = PROFILE_DIR / f"{PROFILE_NAME}.json"


@dataclass(frozen=True)
class Target:
    """A measured time the fit should reproduce."""

    name: str
    lines: int
    bytes_per_core: int
    measured_us: float
    provenance: str


@dataclass(frozen=True)
class Bound:
    """A stated fact as a bound on modeled time: lo_us <= time(lines) <= hi_us."""

    name: str
    lines: int
    bytes_per_core: int
    lo_us: float
    hi_us: float
    statement: str


@dataclass(frozen=True)
class Problem:
    targets: tuple[Target, ...]
    bounds: tuple[Bound, ...]
    page: int
    slope_per_lap: float  # measured, µs per line at k = 1
    slope_x: tuple[int, ...]
    ceiling_gbps: float


@dataclass(frozen=True)
class Residual:
    name: str
    lines: int
    measured_us: float
    model_us: float
    rel_err: float
    measured_gbps: float
    model_gbps: float


@dataclass(frozen=True)
class BoundCheck:
    name: str
    lines: int
    model_us: float
    model_gbps: float
    lo_us: float
    hi_us: float
    ok: bool
    statement: str


@dataclass
class Calibration:
    profile: Profile
    residuals: list[Residual]
    bounds: list[BoundCheck]
    objective: float
    rms_rel_err: float
    slope: float  # model, µs per line on the x >= 0 arm at k = 1
    slope_target: float
    family: list[int]  # windows inside the tie band
    knee_lines_per_cycle: float  # (window + 256) / (latency + 2)
    rate_lines_per_cycle: float
    confirmed: dict[str, object] = field(default_factory=dict)


def problem(meas: measured.Measurements) -> Problem:
    """Targets and bounds from the bundled measurements (nothing else)."""
    ta, f = meas.table_a, meas.facts
    src = ta.source.url
    targets = [
        Target(
            f"Table A D={d}",
            int(n),
            int(b),
            float(t),
            f"median of replicas {'/'.join(ta.replicas)}, N={ta.n}, {src}",
        )
        for d, n, b, t in zip(ta.d, ta.lines_per_core, ta.bytes_per_core, ta.medians, strict=True)
    ]
    for label, d, n, gbps in (
        ("D=2016 point", f.shoulder_d, f.shoulder_n, f.shoulder_gbps),
        ("D=2048 point", f.notch_d, f.notch_n, f.notch_gbps),
    ):
        b = int(measured.bytes_per_core(d, n))
        targets.append(
            Target(
                label,
                b // LINE_BYTES,
                b,
                float(measured.time_for_gbps(b, gbps.value)),
                f"{gbps} at D={d}, N={n}, {src}",
            )
        )
    bounds = []
    for k in f.floor_laps:
        b = k * RING_LINES * LINE_BYTES
        bounds.append(
            Bound(
                f"floor k={k}",
                k * RING_LINES,
                b,
                float(measured.time_for_gbps(b, f.floor.hi)),
                float(measured.time_for_gbps(b, f.floor.lo)),
                f"floor {f.floor} at k = 1..8 (stated fact)",
            )
        )
    for x in (-f.page_lines, f.page_lines):
        n = RING_LINES + x
        b = n * LINE_BYTES
        bounds.append(
            Bound(
                f"nominal x={x:+d}",
                n,
                b,
                0.0,
                float(measured.time_for_gbps(b, f.nominal.lo)),
                f"nominal >= {f.nominal.lo:g} GB/s at |x| = {f.page_lines}, k = 1 (stated fact)",
            )
        )
    return Problem(
        targets=tuple(targets),
        bounds=tuple(bounds),
        page=f.page_lines,
        slope_per_lap=f.slope_per_lap.value,
        slope_x=tuple(range(0, f.page_lines + 1, SLOPE_STEP)),
        ceiling_gbps=meas.platform.ceiling.value,
    )


# ---------------------------------------------------------------- relaxed search


def _rows(window: np.ndarray, lines: np.ndarray, kappa: float) -> np.ndarray:
    """Relaxed time coefficients on (overhead, P = latency + 2, cycles per line), per window.

    Full credit runs token-paced, P + (n - 1) x; zero credit runs stop-and-go,
    P (1 + (n - 1) div w) + ((n - 1) mod w) x.
    """
    w = window[:, None]
    cred = credit_array(FIT_MODE, lines)[None, :]
    if np.any((cred != 0) & (cred != PREFETCH_MAX_LINES)):
        raise InputError("calibration sizes must sit at the notch or at full credit")
    last = lines[None, :] - 1
    q, rem = last // w, last % w
    notch = cred == 0
    a_p = np.where(notch, 1 + q, 1)
    a_x = np.where(notch, rem, last)
    ones = np.ones_like(a_p, dtype=float)
    return np.stack([ones, kappa * a_p, kappa * a_x], axis=-1)


SCALE = np.array([100.0, 1000.0, 1.0])  # variable scaling for a well-conditioned KKT system


def _relaxed(prob: Problem, windows: np.ndarray, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """Best (overhead, P, x) per window of the relaxed problem, by active-set enumeration."""
    t_lines = np.array([t.lines for t in prob.targets])
    meas_us = np.array([t.measured_us for t in prob.targets])
    b_lines = np.array([b.lines for b in prob.bounds])
    nw = windows.size
    a = _rows(windows, t_lines, kappa) * SCALE / meas_us[None, :, None]  # (nw, nt, 3)
    hess = 2 * np.einsum("wti,wtj->wij", a, a)
    grad = 2 * a.sum(axis=1)  # target is 1 for every row
    rb = _rows(windows, b_lines, kappa) * SCALE  # (nw, nb, 3)
    cons_g: list[np.ndarray] = []
    cons_h: list[np.ndarray] = []
    enum: list[int] = []  # constraints that may be active (all are checked)
    floors = [i for i, b in enumerate(prob.bounds) if b.name.startswith("floor")]
    for i, bnd in enumerate(prob.bounds):
        # the floor binds at its first and last lap (GB/s rises with k); the rest is checked
        may_bind = i not in floors or i in (floors[0], floors[-1])
        for sign, bound in ((1.0, bnd.hi_us), (-1.0, -bnd.lo_us)):
            if sign < 0 and bnd.lo_us <= 0:
                continue
            if may_bind:
                enum.append(len(cons_g))
            cons_g.append(sign * rb[:, i])
            cons_h.append(np.full(nw, bound))
    c_full = np.minimum(windows + prob.page, KMEM_LINES).astype(float)
    z, o = np.zeros(nw), np.ones(nw)
    extra = [
        (np.stack([z, SCALE[1] * o, -c_full * SCALE[2]], 1), z),  # knee: P <= c_full x
        (np.stack([z, -SCALE[1] * o, windows * SCALE[2]], 1), z),  # stop-and-go at the notch
        (np.stack([-SCALE[0] * o, z, z], 1), z),  # overhead >= 0
        (np.stack([z, -SCALE[1] * o, z], 1), -3.0 * o),  # latency >= 1
        (np.stack([z, SCALE[1] * o, z], 1), (MAX_LATENCY + 2) * o),  # latency <= 4095
        (np.stack([z, z, -SCALE[2] * o], 1), -o),  # rate <= 1 line/cycle
    ]
    for g, h in extra:
        enum.append(len(cons_g))
        cons_g.append(g)
        cons_h.append(h)
    big_g = np.stack(cons_g, axis=1)  # (nw, nc, 3)
    big_h = np.stack(cons_h, axis=1)  # (nw, nc)
    subsets = [s for r in range(4) for s in itertools.combinations(enum, r)]
    ns = len(subsets)
    idx = np.full((ns, 3), -1)
    for i, s in enumerate(subsets):
        idx[i, : len(s)] = s
    used = idx >= 0
    gs = np.where(used[None, :, :, None], big_g[:, np.maximum(idx, 0)], 0.0)  # (nw, ns, 3, 3)
    hs = np.where(used[None], big_h[:, np.maximum(idx, 0)], 0.0)  # (nw, ns, 3)
    kkt = np.zeros((nw, ns, 6, 6))
    kkt[:, :, :3, :3] = hess[:, None]
    kkt[:, :, :3, 3:] = np.swapaxes(gs, 2, 3)
    kkt[:, :, 3:, :3] = gs
    kkt[:, :, 3:, 3:] = np.where(used[None, :, :, None] | used[None, :, None, :], 0.0, np.eye(3))
    rhs = np.concatenate([np.broadcast_to(grad[:, None], (nw, ns, 3)), hs], axis=2)
    det = np.linalg.det(kkt)
    norms = np.prod(np.linalg.norm(kkt, axis=3), axis=2)
    ok = np.abs(det) > 1e-12 * norms
    kkt = np.where(ok[..., None, None], kkt, np.eye(6))
    sol = np.linalg.solve(kkt, rhs[..., None])[..., 0][..., :3]  # (nw, ns, 3)
    slack = np.einsum("wci,wsi->wsc", big_g, sol) - big_h[:, None, :]
    feasible = ok & np.all(slack <= 1e-7 * (1 + np.abs(big_h[:, None, :])), axis=2)
    resid = np.einsum("wti,wsi->wst", a, sol) - 1.0
    obj = np.where(feasible, (resid**2).sum(axis=2), np.inf)
    best = np.argmin(obj, axis=1)
    theta = sol[np.arange(nw), best] * SCALE
    return theta, obj[np.arange(nw), best]


# ---------------------------------------------------------------- exact scoring


def _times_exact(
    lat: np.ndarray, win: np.ndarray, rate: np.ndarray, lines: np.ndarray
) -> np.ndarray:
    """Cycles (static-credit formula, exact) for every candidate and size; shape (..., sizes)."""
    cred = credit_array(FIT_MODE, lines)
    return analytic.static_cycles(lat[..., None], win[..., None], rate[..., None], cred, lines)


def _score(
    prob: Problem, lat: np.ndarray, win: np.ndarray, rate: np.ndarray, kappa: float
) -> tuple[np.ndarray, np.ndarray]:
    """(objective, overhead) per candidate; inf where no overhead satisfies every bound."""
    t_lines = np.array([t.lines for t in prob.targets])
    meas_us = np.array([t.measured_us for t in prob.targets])
    cyc = _times_exact(lat, win, rate, t_lines) * kappa
    wts = 1.0 / meas_us**2
    ovh = ((meas_us - cyc) * wts).sum(-1) / wts.sum()
    b_lines = np.array([b.lines for b in prob.bounds])
    bc = _times_exact(lat, win, rate, b_lines) * kappa
    lo = np.maximum(0.0, (np.array([b.lo_us for b in prob.bounds]) - bc).max(-1))
    hi = (np.array([b.hi_us for b in prob.bounds]) - bc).min(-1)
    ovh = np.clip(ovh, lo, hi)
    knee = np.minimum(win + prob.page, KMEM_LINES) * RATE_ONE >= rate * (lat + 2)
    ok = (lo <= hi) & knee
    rel = (ovh[..., None] + cyc - meas_us) / meas_us
    return np.where(ok, (rel**2).sum(-1), np.inf), ovh


def _slope(
    prob: Problem, profile_like: tuple[int, int, int, float], kappa: float
) -> tuple[float, float]:
    """Linear fit of time against x on the x >= 0 arm at k = 1: (µs per line, R²)."""
    lat, win, rate, ovh = profile_like
    xs = np.array(prob.slope_x)
    t = ovh + kappa * analytic.static_cycles(
        lat, win, rate, credit_array(FIT_MODE, RING_LINES + xs), RING_LINES + xs
    )
    return fit_line(xs.astype(float), t)


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x (negated: time falls away from the notch) and R²."""
    p = np.polyfit(x, y, 1)
    pred = np.polyval(p, x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return -float(p[0]), r2


def _round_overhead(ovh: float, lo: float, hi: float) -> float:
    """Round to ns resolution without leaving the feasible interval."""
    r = round(ovh, 3)
    if r > hi:
        r = math.floor(hi * 1000) / 1000
    if r < lo:
        r = math.ceil(lo * 1000) / 1000
    return r


def fit(meas: measured.Measurements | None = None, name: str = PROFILE_NAME) -> Calibration:
    """The deterministic calibration on the analytic model (no cycle-model run)."""
    meas = meas or measured.load()
    prob = problem(meas)
    kappa = NS_PER_CYCLE / 1000.0
    windows = np.arange(1, KMEM_LINES + 1)
    theta = np.concatenate(
        [_relaxed(prob, windows[i : i + 128], kappa)[0] for i in range(0, windows.size, 128)]
    )
    good = np.all(np.isfinite(theta), axis=1)
    if not good.any():
        raise InputError("calibration: no parameters satisfy the stated constraints")
    win_c = windows[good]
    p0 = np.rint(theta[good, 1]).astype(np.int64)
    r0 = np.rint(RATE_ONE / np.maximum(theta[good, 2], 1.0)).astype(np.int64)
    d = np.arange(-REFINE, REFINE + 1)
    lat = np.clip(p0[:, None, None] - 2 + d[None, :, None], 1, MAX_LATENCY)
    rate = np.clip(r0[:, None, None] + d[None, None, :], 1, RATE_ONE)
    lat, rate, win = np.broadcast_arrays(lat, rate, win_c[:, None, None])
    obj, ovh = _score(prob, lat, win, rate, kappa)
    flat = obj.reshape(win_c.size, -1)
    pick = np.argmin(flat, axis=1)
    best_obj = flat[np.arange(win_c.size), pick]
    if not np.isfinite(best_obj).any():
        raise InputError("calibration: no integer parameters satisfy the stated constraints")
    j_min = float(best_obj.min())
    family = np.flatnonzero(best_obj <= j_min * (1 + TIE_BAND))
    choice = []
    for i in family:
        li, ri = np.unravel_index(pick[i], lat.shape[1:])
        cand = (int(lat[i, li, ri]), int(win_c[i]), int(rate[i, li, ri]), float(ovh[i, li, ri]))
        slope, _ = _slope(prob, cand, kappa)
        choice.append((abs(slope - prob.slope_per_lap), float(best_obj[i]), cand[1], cand))
    choice.sort()
    lat_b, win_b, rate_b, ovh_b = choice[0][3]
    # the feasible overhead interval at the chosen integers, for safe rounding
    b_lines = np.array([b.lines for b in prob.bounds])
    bc = kappa * _times_exact(np.array(lat_b), np.array(win_b), np.array(rate_b), b_lines)
    lo = max(0.0, float((np.array([b.lo_us for b in prob.bounds]) - bc).max()))
    hi = float((np.array([b.hi_us for b in prob.bounds]) - bc).min())
    ovh_r = _round_overhead(ovh_b, lo, hi)
    cal = _evaluate(prob, meas, name, lat_b, win_b, rate_b, ovh_r, kappa)
    cal.family = [int(win_c[i]) for i in family]
    cal.profile = _with_notes(cal, prob, meas)
    return cal


def _evaluate(
    prob: Problem,
    meas: measured.Measurements,
    name: str,
    lat: int,
    win: int,
    rate: int,
    ovh: float,
    kappa: float,
) -> Calibration:
    profile = Profile(
        name=name,
        ns_per_cycle=NS_PER_CYCLE,
        overhead_us=ovh,
        latency_cycles=lat,
        window_lines=win,
        core_rate_q16=rate,
        ceiling_gbps=prob.ceiling_gbps,
    )
    t_lines = np.array([t.lines for t in prob.targets])
    cyc = _times_exact(np.array(lat), np.array(win), np.array(rate), t_lines)
    model_us = ovh + kappa * cyc
    residuals = []
    for t, m_us in zip(prob.targets, model_us, strict=True):
        residuals.append(
            Residual(
                t.name,
                t.lines,
                t.measured_us,
                float(m_us),
                float((m_us - t.measured_us) / t.measured_us),
                float(measured.aggregate_gbps(t.bytes_per_core, t.measured_us)),
                float(measured.aggregate_gbps(t.bytes_per_core, m_us)),
            )
        )
    b_lines = np.array([b.lines for b in prob.bounds])
    b_us = ovh + kappa * _times_exact(np.array(lat), np.array(win), np.array(rate), b_lines)
    checks = [
        BoundCheck(
            b.name,
            b.lines,
            float(u),
            float(measured.aggregate_gbps(b.bytes_per_core, u)),
            b.lo_us,
            b.hi_us,
            bool(b.lo_us <= u <= b.hi_us),
            b.statement,
        )
        for b, u in zip(prob.bounds, b_us, strict=True)
    ]
    rel = np.array([r.rel_err for r in residuals])
    slope, _ = _slope(prob, (lat, win, rate, ovh), kappa)
    return Calibration(
        profile=profile,
        residuals=residuals,
        bounds=checks,
        objective=float((rel**2).sum()),
        rms_rel_err=float(np.sqrt((rel**2).mean())),
        slope=slope,
        slope_target=prob.slope_per_lap,
        family=[],
        knee_lines_per_cycle=min(win + prob.page, KMEM_LINES) / (lat + 2),
        rate_lines_per_cycle=rate / RATE_ONE,
    )


def _with_notes(cal: Calibration, prob: Problem, meas: measured.Measurements) -> Profile:
    p = cal.profile
    resid = ", ".join(f"{r.name} {100 * r.rel_err:+.1f}%" for r in cal.residuals)
    fam = cal.family
    notes = {
        "status": "fitted by `ane-kdma calibrate` (deterministic); regenerate, do not hand-edit",
        "source": f"measurements: data/measured (Eileen Yoon, {meas.table_a.source.url})",
        "hand_set": (
            f"ns_per_cycle = {NS_PER_CYCLE} is hand-set, not fitted: the data fix only "
            "latency x ns and rate / ns. ceiling_gbps = "
            f"{prob.ceiling_gbps:g} is set from the LPDDR5-6400 x 128-bit figure "
            "(data/measured/platform.json). No other parameter is hand-set."
        ),
        "free_parameters": "overhead_us, latency_cycles, window_lines, core_rate_q16",
        "targets": (
            "Table A medians (µs) at N = 4096, the D = 2016 (44.51 GB/s) and D = 2048 "
            "(16.93 GB/s) point facts as times; least squares on relative error, equal weights"
        ),
        "constraint_floor": (
            "stated fact: floor 17-19 GB/s at k = 1..8, imposed as 17 <= GB/s <= 19 at "
            "k x 0x4000 lines"
        ),
        "constraint_nominal": (
            "stated fact: nominal >= 45 GB/s, imposed at x = -256 and +256 lines, k = 1"
        ),
        "constraint_knee": (
            "stated fact: full recovery at |x| = 256, imposed as (window + 256) / "
            "(latency + 2) >= rate (one page of credit reaches the rate limit)"
        ),
        "tie_break": (
            "the targets fix only (latency + 2) / window; among windows whose objective is "
            f"within {100 * TIE_BAND:g}% of the best ({len(fam)} windows in {fam[0]}..{fam[-1]}), "
            "the one whose "
            f"x >= 0 arm slope (linear fit of time on x = 0..{prob.page} step {SLOPE_STEP}, "
            f"k = 1) is nearest the measured {prob.slope_per_lap:g} us/line was taken: "
            f"{cal.slope:.3f} us/line"
        ),
        "hypothesis": (
            "fitted with the SIGNED credit; every size used has the same credit under "
            "LITERAL, so the fit favours neither hypothesis"
        ),
        "residuals": resid,
        "rms_rel_err": f"{cal.rms_rel_err:.4f}",
    }
    return Profile(
        name=p.name,
        ns_per_cycle=p.ns_per_cycle,
        overhead_us=p.overhead_us,
        latency_cycles=p.latency_cycles,
        window_lines=p.window_lines,
        core_rate_q16=p.core_rate_q16,
        ceiling_gbps=p.ceiling_gbps,
        notes=notes,
    )


def confirm(cal: Calibration) -> dict[str, object]:
    """Re-run every calibration size on the exact cycle model; cycles must be identical."""
    prob = problem(measured.load())
    s = cal.profile.settings
    lines = sorted(
        {t.lines for t in prob.targets}
        | {b.lines for b in prob.bounds}
        | {RING_LINES + x for x in prob.slope_x}
    )
    worst = 0
    for mode in (CreditMode.SIGNED, CreditMode.LITERAL):
        exact = [cm.single(mode, s, n).cycles for n in lines]
        fast = analytic.core_cycles(mode, s, np.array(lines))
        worst = max(worst, int(np.max(np.abs(np.array(exact) - fast))))
    return {"sizes": len(lines), "modes": ["literal", "signed"], "max_cycle_diff": worst}


# ---------------------------------------------------------------- output and CLI


def report(cal: Calibration) -> dict[str, object]:
    p = cal.profile
    return {
        "profile": json.loads(p.to_json()),
        "residuals": [asdict(r) for r in cal.residuals],
        "constraints": [asdict(b) for b in cal.bounds],
        "objective": cal.objective,
        "rms_rel_err": cal.rms_rel_err,
        "slope_us_per_line": cal.slope,
        "slope_measured_us_per_line": cal.slope_target,
        "window_family": [cal.family[0], cal.family[-1]] if cal.family else [],
        "knee_lines_per_cycle": cal.knee_lines_per_cycle,
        "rate_lines_per_cycle": cal.rate_lines_per_cycle,
        "confirmed_on_cycle_model": cal.confirmed,
    }


def render(cal: Calibration, out: Path) -> str:
    """The human report: parameters, fit residuals, constraint checks, tie-break."""
    p = cal.profile
    lines: list[str] = []
    add = lines.append
    add(f"calibrated profile {p.name} -> {out}")
    add(
        f"  overhead_us {p.overhead_us}  latency_cycles {p.latency_cycles}  window_lines "
        f"{p.window_lines}  core_rate_q16 {p.core_rate_q16} ({p.core_rate_q16 / RATE_ONE:.4f} "
        f"lines/cycle)  ns_per_cycle {p.ns_per_cycle} (hand-set)"
    )
    add("fit residuals (model - measured) / measured:")
    add(
        f"  {'target':<16}{'lines':>8}{'meas us':>10}{'model us':>10}{'error':>9}"
        f"{'meas GB/s':>11}{'model GB/s':>12}"
    )
    for r in cal.residuals:
        add(
            f"  {r.name:<16}{r.lines:>8}{r.measured_us:>10.1f}{r.model_us:>10.1f}"
            f"{100 * r.rel_err:>+8.1f}%{r.measured_gbps:>11.2f}{r.model_gbps:>12.2f}"
        )
    add(f"  RMS relative error {100 * cal.rms_rel_err:.2f}%")
    add("constraints (stated facts):")
    for b in cal.bounds:
        add(f"  {b.name:<16}{b.model_gbps:>8.2f} GB/s  {'ok' if b.ok else 'VIOLATED'}")
    add(
        f"  knee (window+256)/(latency+2) = {cal.knee_lines_per_cycle:.4f} >= rate "
        f"{cal.rate_lines_per_cycle:.4f} lines/cycle"
    )
    add(
        f"tie-break: {len(cal.family)} windows in {cal.family[0]}..{cal.family[-1]} fit within "
        f"{100 * TIE_BAND:g}% of the best; the x >= 0 arm slope {cal.slope:.3f} us/line "
        f"(measured {cal.slope_target:g}) picks window {p.window_lines}"
    )
    c = cal.confirmed
    if c:
        add(
            f"cycle model: {c['sizes']} sizes x {len(c['modes'])} modes, max |cycle "
            f"difference| from the analytic model = {c['max_cycle_diff']}"
        )
    return "\n".join(lines)


def add_calibrate_command(subparsers: argparse._SubParsersAction) -> None:
    """Register ``ane-kdma calibrate`` on the CLI's sub-command parsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit the profile to the measurements in data/measured and write it",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"profile JSON ({DEFAULT_OUT})")
    p.add_argument("--measured", type=Path, default=None, help="measured-data directory")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_calibrate)


def _check_out(out: Path) -> None:
    if out.is_dir():
        raise InputError(f"cannot write {out}: is a directory")
    if not out.parent.is_dir():
        raise InputError(f"cannot write {out}: no such directory: {out.parent}")


def run_calibrate(args: argparse.Namespace) -> int:
    out = Path(args.out)
    _check_out(out)  # fail before the fit, not after
    meas = measured.load(args.measured)
    cal = fit(meas)
    cal.confirmed = confirm(cal)
    if cal.confirmed["max_cycle_diff"] != 0:
        raise InputError("calibration: the cycle model disagrees with the analytic fit")
    write_atomic(out, cal.profile.to_json().encode())
    if getattr(args, "json", False):
        print(json.dumps(report(cal)))
    else:
        print(render(cal, out))
    return 0
