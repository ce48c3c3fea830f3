"""Fit a chip's profile to its measurements (data/chips/<chip>/measured), on the model.

Why this shape. Only four numbers are free: the per-request overhead (µs),
the memory latency (cycles), the demand window (lines) and the per-core rate
(Q.16 lines/cycle). The clock (``ns_per_cycle``) is hand-set in chip.json:
the data fix only latency x ns and rate / ns, so any clock would fit as well.

* Targets, from whatever the chip's data has: the Table A medians and the
  notch and shoulder point facts, as times in µs; least squares on the
  relative error, equal weights.
* Constraints, each a stated fact when the data states it (recorded in the
  profile's notes): the floor's range at its laps; nominal at least its lower
  bound at x = +-page, k = 1; full recovery at |x| = page means one page of
  credit reaches the rate limit, (window + page) / (latency + 2) >= rate.
* The targets fix only (latency + 2) / window: a family of windows fits them
  equally well. Inside that family (objective within TIE_BAND of the best),
  the window whose x >= 0 arm has the linear-fit slope nearest the measured
  slope per lap is taken (the smallest window when the data states no slope).
* Every calibration size must sit at a notch or at full credit, where the
  buggy readings give the same credit, so the fit favours none of them;
  validate judges them afterwards.

Search: for every window, a relaxed problem (the stop-and-go and token-paced
branches are linear in (overhead, latency + 2, cycles per line)) is solved
exactly by enumerating active constraint sets; the integers around its
optimum are then scored with the analytic engine's exact static-credit
formula. The chosen profile's overhead interval, residuals and constraint
checks are then taken from the cycle-model engine on every core of the chip
(identical cores meet at the aggregate bucket in their first cycle, which can
cost one), and the analytic formula is confirmed on one core, to the cycle.
The whole search is deterministic.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE
from ane_kdma.measured import Measurements
from ane_kdma.profile import MAX_LATENCY_CYCLES, Profile
from ane_kdma.stats import fit_line

TIE_BAND = 0.005  # relative objective band inside which the targets cannot tell windows apart
SLOPE_STEP = 32  # lines: a D step of 4 at N = 4096, as between the published dumps
REFINE = 3  # integer neighbourhood scored exactly around each relaxed optimum
MAX_LATENCY = MAX_LATENCY_CYCLES


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
    page: int | None  # the stated recovery offset (knee constraint), if any
    slope_per_lap: float | None  # measured, µs per line at k = 1, if stated
    slope_x: tuple[int, ...]


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
    slope_target: float | None
    family: list[int]  # windows inside the tie band
    knee_lines_per_cycle: float  # (window + page) / (latency + 2)
    rate_lines_per_cycle: float
    confirmed: dict[str, object] = field(default_factory=dict)


def fit_hypothesis() -> hyps.Hypothesis:
    """The static reading the fit runs on (every calibration size has one credit for all)."""
    return hyps.get(hyps.DEFAULT_BUGGY)


def problem(chip: Chip, meas: Measurements) -> Problem:
    """Targets and bounds from the chip's measurements (nothing else)."""
    ta, f, geo = meas.table_a, meas.facts, meas.geo
    ring = chip.ring_lines
    targets = []
    if ta is not None:
        src = ta.source.cite()
        targets += [
            Target(
                f"Table A D={d}",
                int(n),
                int(b),
                float(t),
                f"median of replicas {'/'.join(ta.replicas)}, N={ta.n}, {src}",
            )
            for d, n, b, t in zip(
                ta.d, ta.lines_per_core, ta.bytes_per_core, ta.medians, strict=True
            )
        ]
    for label, p in (("D={d} point", f.shoulder), ("D={d} point", f.notch)):
        if p is None:
            continue
        src = p.gbps.source.cite() if p.gbps.source else ""
        targets.append(
            Target(
                label.format(d=p.d),
                p.lines,
                p.bytes_per_core,
                float(geo.time_for_gbps(p.bytes_per_core, p.gbps.value)),
                f"{p.gbps} at D={p.d}, N={p.n}, {src}",
            )
        )
    if not targets:
        raise InputError(f"chip {chip.name}: no measured times to calibrate on")
    bounds = []
    if f.floor is not None:
        for k in f.floor.laps:
            b = k * ring * chip.line_bytes
            bounds.append(
                Bound(
                    f"floor k={k}",
                    k * ring,
                    b,
                    float(geo.time_for_gbps(b, f.floor.gbps.hi)),
                    float(geo.time_for_gbps(b, f.floor.gbps.lo)),
                    f"floor {f.floor.gbps} at k = {f.floor.laps[0]}..{f.floor.laps[-1]} "
                    "(stated fact)",
                )
            )
    page = f.v_notch.page if f.v_notch is not None else None
    if f.nominal is not None and page is not None:
        for x in (-page, page):
            n = ring + x
            b = n * chip.line_bytes
            bounds.append(
                Bound(
                    f"nominal x={x:+d}",
                    n,
                    b,
                    0.0,
                    float(geo.time_for_gbps(b, f.nominal.gbps.lo)),
                    f"nominal >= {f.nominal.gbps.lo:g} GB/s at |x| = {page}, k = 1 (stated fact)",
                )
            )
    slope = f.k_scaling.slope_per_lap.value if f.k_scaling is not None else None
    return Problem(
        targets=tuple(targets),
        bounds=tuple(bounds),
        page=page,
        slope_per_lap=slope,
        slope_x=tuple(range(0, (page or chip.geometry.prefetch_max_lines) + 1, SLOPE_STEP)),
    )


# ---------------------------------------------------------------- relaxed search


def _rows(chip: Chip, window: np.ndarray, lines: np.ndarray, kappa: float) -> np.ndarray:
    """Relaxed time coefficients on (overhead, P = latency + 2, cycles per line), per window.

    Full credit runs token-paced, P + (n - 1) x; zero credit runs stop-and-go,
    P (1 + (n - 1) div w) + ((n - 1) mod w) x.
    """
    w = window[:, None]
    clamp = chip.geometry.prefetch_max_lines
    cred = fit_hypothesis().credit_array(chip.geometry, lines)[None, :]
    if np.any((cred != 0) & (cred != clamp)):
        raise InputError("calibration sizes must sit at a notch or at full credit")
    last = lines[None, :] - 1
    q, rem = last // w, last % w
    notch = cred == 0
    a_p = np.where(notch, 1 + q, 1)
    a_x = np.where(notch, rem, last)
    ones = np.ones_like(a_p, dtype=float)
    return np.stack([ones, kappa * a_p, kappa * a_x], axis=-1)


SCALE = np.array([100.0, 1000.0, 1.0])  # variable scaling for a well-conditioned KKT system


def _relaxed(
    chip: Chip, prob: Problem, windows: np.ndarray, kappa: float
) -> tuple[np.ndarray, np.ndarray]:
    """Best (overhead, P, x) per window of the relaxed problem, by active-set enumeration."""
    t_lines = np.array([t.lines for t in prob.targets])
    meas_us = np.array([t.measured_us for t in prob.targets])
    nw = windows.size
    a = _rows(chip, windows, t_lines, kappa) * SCALE / meas_us[None, :, None]  # (nw, nt, 3)
    hess = 2 * np.einsum("wti,wtj->wij", a, a)
    grad = 2 * a.sum(axis=1)  # target is 1 for every row
    cons_g: list[np.ndarray] = []
    cons_h: list[np.ndarray] = []
    enum: list[int] = []  # constraints that may be active (all are checked)
    if prob.bounds:
        b_lines = np.array([b.lines for b in prob.bounds])
        rb = _rows(chip, windows, b_lines, kappa) * SCALE  # (nw, nb, 3)
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
    z, o = np.zeros(nw), np.ones(nw)
    extra = [
        (np.stack([z, -SCALE[1] * o, windows * SCALE[2]], 1), z),  # stop-and-go at the notch
        (np.stack([-SCALE[0] * o, z, z], 1), z),  # overhead >= 0
        (np.stack([z, -SCALE[1] * o, z], 1), -3.0 * o),  # latency >= 1
        (np.stack([z, SCALE[1] * o, z], 1), (MAX_LATENCY + 2) * o),  # latency <= max
        (np.stack([z, z, -SCALE[2] * o], 1), -o),  # rate <= 1 line/cycle
    ]
    if prob.page is not None:
        c_full = np.minimum(windows + prob.page, chip.geometry.kmem_lines).astype(float)
        extra.insert(0, (np.stack([z, SCALE[1] * o, -c_full * SCALE[2]], 1), z))  # knee
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
    chip: Chip, lat: np.ndarray, win: np.ndarray, rate: np.ndarray, lines: np.ndarray
) -> np.ndarray:
    """Cycles (static-credit formula, exact) for every candidate and size; shape (..., sizes)."""
    engine = contract.get_engine("analytic")
    return engine.static_cycles(
        fit_hypothesis(), chip, lat[..., None], win[..., None], rate[..., None], lines
    )


def _bound_arrays(prob: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not prob.bounds:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    return (
        np.array([b.lines for b in prob.bounds]),
        np.array([b.lo_us for b in prob.bounds]),
        np.array([b.hi_us for b in prob.bounds]),
    )


def _score(
    chip: Chip, prob: Problem, lat: np.ndarray, win: np.ndarray, rate: np.ndarray, kappa: float
) -> tuple[np.ndarray, np.ndarray]:
    """(objective, overhead) per candidate; inf where no overhead satisfies every bound."""
    t_lines = np.array([t.lines for t in prob.targets])
    meas_us = np.array([t.measured_us for t in prob.targets])
    cyc = _times_exact(chip, lat, win, rate, t_lines) * kappa
    wts = 1.0 / meas_us**2
    ovh = ((meas_us - cyc) * wts).sum(-1) / wts.sum()
    b_lines, b_lo, b_hi = _bound_arrays(prob)
    if b_lines.size:
        bc = _times_exact(chip, lat, win, rate, b_lines) * kappa
        lo = np.maximum(0.0, (b_lo - bc).max(-1))
        hi = (b_hi - bc).min(-1)
    else:
        lo, hi = np.zeros(ovh.shape), np.full(ovh.shape, np.inf)
    ovh = np.clip(ovh, lo, hi)
    ok = lo <= hi
    if prob.page is not None:
        ok &= np.minimum(win + prob.page, chip.geometry.kmem_lines) * RATE_ONE >= rate * (lat + 2)
    rel = (ovh[..., None] + cyc - meas_us) / meas_us
    return np.where(ok, (rel**2).sum(-1), np.inf), ovh


def _slope(
    chip: Chip, prob: Problem, cand: tuple[int, int, int, float], kappa: float
) -> tuple[float, float]:
    """Linear fit of time against x on the x >= 0 arm at k = 1: (µs per line, R²)."""
    lat, win, rate, ovh = cand
    xs = np.array(prob.slope_x)
    lines = chip.ring_lines + xs
    t = ovh + kappa * _times_exact(chip, np.array(lat), np.array(win), np.array(rate), lines)
    return fit_line(xs.astype(float), t)


def _round_overhead(ovh: float, lo: float, hi: float) -> float:
    """Round to ns resolution without leaving the feasible interval."""
    r = round(ovh, 3)
    if r > hi:
        r = math.floor(hi * 1000) / 1000
    if r < lo:
        r = math.ceil(lo * 1000) / 1000
    return r


def fit(chip: Chip) -> Calibration:
    """The deterministic calibration on the analytic engine (no cycle-model run)."""
    meas = chip.measured
    prob = problem(chip, meas)
    ns = chip.ns_per_cycle_hand_set
    kappa = ns / 1000.0
    windows = np.arange(1, chip.geometry.kmem_lines + 1)
    theta = np.concatenate(
        [_relaxed(chip, prob, windows[i : i + 128], kappa)[0] for i in range(0, windows.size, 128)]
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
    obj, ovh = _score(chip, prob, lat, win, rate, kappa)
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
        slope, _ = _slope(chip, prob, cand, kappa)
        miss = abs(slope - prob.slope_per_lap) if prob.slope_per_lap is not None else 0.0
        choice.append((miss, float(best_obj[i]), cand[1], cand))
    choice.sort()
    lat_b, win_b, rate_b, ovh_b = choice[0][3]
    # the feasible overhead interval at the chosen integers, on every core of the chip (the
    # cycle model, exactly: the cores' start-up at the aggregate bucket can cost a cycle)
    trial = _candidate(chip, lat_b, win_b, rate_b, ovh_b)
    b_lines, b_lo, b_hi = _bound_arrays(prob)
    lo, hi = 0.0, math.inf
    if b_lines.size:
        bc = kappa * _chip_cycles(trial, b_lines)
        lo = max(0.0, float((b_lo - bc).max()))
        hi = float((b_hi - bc).min())
        if lo > hi:
            raise InputError("calibration: on every core the stated constraints cannot all hold")
    ovh_r = _round_overhead(min(max(ovh_b, lo), hi), lo, hi)
    cal = _evaluate(chip, prob, lat_b, win_b, rate_b, ovh_r, kappa)
    cal.family = [int(win_c[i]) for i in family]
    cal.profile = _with_notes(chip, cal, prob, meas)
    return cal


def _candidate(chip: Chip, lat: int, win: int, rate: int, ovh: float) -> Chip:
    return chip.with_profile(
        Profile(
            name=chip.name,
            ns_per_cycle=chip.ns_per_cycle_hand_set,
            overhead_us=ovh,
            latency_cycles=lat,
            window_lines=win,
            core_rate_q16=rate,
            ceiling_gbps=chip.ceiling_gbps,
        )
    )


def _chip_cycles(chip: Chip, lines: np.ndarray) -> np.ndarray:
    """Cycles of every core of the chip streaming each size, on the cycle model (exact)."""
    lb = chip.line_bytes
    loads = [contract.Workload.from_size(int(n) * lb, chip.cores, 1, lb) for n in lines]
    return np.array([r.cycles for r in contract.run_many("model", fit_hypothesis(), chip, loads)])


def _evaluate(
    chip: Chip, prob: Problem, lat: int, win: int, rate: int, ovh: float, kappa: float
) -> Calibration:
    """Residuals and constraint checks of the chosen profile, on every core, exactly."""
    fitted = _candidate(chip, lat, win, rate, ovh)
    profile = fitted.profile
    geo = chip.measured.geo
    t_lines = np.array([t.lines for t in prob.targets])
    model_us = ovh + kappa * _chip_cycles(fitted, t_lines)
    residuals = [
        Residual(
            t.name,
            t.lines,
            t.measured_us,
            float(m_us),
            float((m_us - t.measured_us) / t.measured_us),
            float(geo.aggregate_gbps(t.bytes_per_core, t.measured_us)),
            float(geo.aggregate_gbps(t.bytes_per_core, m_us)),
        )
        for t, m_us in zip(prob.targets, model_us, strict=True)
    ]
    checks = []
    b_lines, _, _ = _bound_arrays(prob)
    if b_lines.size:
        b_us = ovh + kappa * _chip_cycles(fitted, b_lines)
        checks = [
            BoundCheck(
                b.name,
                b.lines,
                float(u),
                float(geo.aggregate_gbps(b.bytes_per_core, u)),
                b.lo_us,
                b.hi_us,
                bool(b.lo_us <= u <= b.hi_us),
                b.statement,
            )
            for b, u in zip(prob.bounds, b_us, strict=True)
        ]
    rel = np.array([r.rel_err for r in residuals])
    slope, _ = _slope(chip, prob, (lat, win, rate, ovh), kappa)
    page = prob.page or chip.geometry.prefetch_max_lines
    return Calibration(
        profile=profile,
        residuals=residuals,
        bounds=checks,
        objective=float((rel**2).sum()),
        rms_rel_err=float(np.sqrt((rel**2).mean())),
        slope=slope,
        slope_target=prob.slope_per_lap,
        family=[],
        knee_lines_per_cycle=min(win + page, chip.geometry.kmem_lines) / (lat + 2),
        rate_lines_per_cycle=rate / RATE_ONE,
    )


def _with_notes(chip: Chip, cal: Calibration, prob: Problem, meas: Measurements) -> Profile:
    """The profile with notes written from the chip's own data (nothing chip-specific here)."""
    p = cal.profile
    resid = ", ".join(f"{r.name} {100 * r.rel_err:+.1f}%" for r in cal.residuals)
    fam = cal.family
    f, ta = meas.facts, meas.table_a
    cited = [ta.source] if ta is not None else []
    cited += [p.gbps.source for p in (f.shoulder, f.notch) if p is not None and p.gbps.source]
    sources = sorted({src.cite() for src in cited})
    parts = []
    if ta is not None:
        parts.append(
            f"Table A medians (µs) at N = {ta.n}, D = {', '.join(map(str, ta.d))} "
            f"(replicas {'/'.join(ta.replicas)})"
        )
    points = [f"D = {p.d} ({p.gbps.value:g} GB/s)" for p in (f.shoulder, f.notch) if p]
    if points:
        parts.append(f"the {' and '.join(points)} point facts as times")
    notes = {
        "status": "fitted by `ane-kdma calibrate` (deterministic); regenerate, do not hand-edit",
        "source": f"measurements: data/chips/{chip.path.name}/measured ({'; '.join(sources)})",
        "hand_set": (
            f"ns_per_cycle = {chip.ns_per_cycle_hand_set} is hand-set in chip.json, not fitted: "
            f"the data fix only latency x ns and rate / ns. ceiling_gbps = "
            f"{chip.ceiling_gbps:g} is the chip's DRAM ceiling ({chip.ceiling.citation}). "
            "No other parameter is hand-set."
        ),
        "free_parameters": "overhead_us, latency_cycles, window_lines, core_rate_q16",
        "targets": "; ".join(parts) + "; least squares on relative error, equal weights",
        "exactness": (
            "the overhead's feasible interval, the residuals and the constraint checks are "
            f"from the cycle model with all {chip.cores} cores streaming"
        ),
    }
    f = meas.facts
    if f.floor is not None:
        notes["constraint_floor"] = (
            f"stated fact: floor {f.floor.gbps} at k = {f.floor.laps[0]}..{f.floor.laps[-1]}, "
            f"imposed as {f.floor.gbps.lo:g} <= GB/s <= {f.floor.gbps.hi:g} at k x "
            f"{chip.ring_lines:#x} lines"
        )
    if any(b.name.startswith("nominal") for b in prob.bounds):
        notes["constraint_nominal"] = (
            f"stated fact: nominal >= {f.nominal.gbps.lo:g} GB/s, imposed at x = -{prob.page} "
            f"and +{prob.page} lines, k = 1"
        )
    if prob.page is not None:
        notes["constraint_knee"] = (
            f"stated fact: full recovery at |x| = {prob.page}, imposed as (window + {prob.page}) "
            "/ (latency + 2) >= rate (one page of credit reaches the rate limit)"
        )
    if prob.slope_per_lap is not None:
        notes["tie_break"] = (
            "the targets fix only (latency + 2) / window; among windows whose objective is "
            f"within {100 * TIE_BAND:g}% of the best ({len(fam)} windows in {fam[0]}..{fam[-1]}), "
            f"the one whose x >= 0 arm slope (linear fit of time on x = 0..{prob.slope_x[-1]} "
            f"step {SLOPE_STEP}, k = 1) is nearest the measured {prob.slope_per_lap:g} us/line "
            f"was taken: {cal.slope:.3f} us/line"
        )
    else:
        notes["tie_break"] = (
            f"the data state no slope: among {len(fam)} windows within {100 * TIE_BAND:g}% of "
            "the best objective, the best objective (then the smallest window) was taken"
        )
    names = " and ".join(h.name.upper() for h in hyps.buggy())
    notes["hypothesis"] = (
        f"fitted with the {fit_hypothesis().name.upper()} credit; every size used has the same "
        f"credit under {names}, so the fit favours none of them"
    )
    notes["residuals"] = resid
    notes["rms_rel_err"] = f"{cal.rms_rel_err:.4f}"
    return Profile(**{**asdict(p), "notes": notes})


def confirm(chip: Chip, cal: Calibration) -> dict[str, object]:
    """Re-run every calibration size on the cycle-model engine; cycles must be identical."""
    prob = problem(chip, chip.measured)
    fitted = chip.with_profile(cal.profile)
    lines = sorted(
        {t.lines for t in prob.targets}
        | {b.lines for b in prob.bounds}
        | {chip.ring_lines + x for x in prob.slope_x}
    )
    lb = chip.line_bytes
    worst = 0
    static = [h for h in hyps.buggy() if h.static]
    for h in static:
        loads = [contract.Workload.from_size(n * lb, 1, 1, lb) for n in lines]
        exact = [r.cycles for r in contract.run_many("model", h, fitted, loads)]
        fast = [r.cycles for r in contract.run_many("analytic", h, fitted, loads)]
        worst = max(worst, max(abs(a - b) for a, b in zip(exact, fast, strict=True)))
    return {"sizes": len(lines), "modes": [h.name for h in static], "max_cycle_diff": worst}


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


def render(cal: Calibration, out: str) -> str:
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
    if cal.bounds:
        add("constraints (stated facts):")
    for b in cal.bounds:
        add(f"  {b.name:<16}{b.model_gbps:>8.2f} GB/s  {'ok' if b.ok else 'VIOLATED'}")
    add(
        f"  knee (window+page)/(latency+2) = {cal.knee_lines_per_cycle:.4f} vs rate "
        f"{cal.rate_lines_per_cycle:.4f} lines/cycle"
    )
    target = (
        f"(measured {cal.slope_target:g})" if cal.slope_target is not None else "(no slope stated)"
    )
    add(
        f"tie-break: {len(cal.family)} windows in {cal.family[0]}..{cal.family[-1]} fit within "
        f"{100 * TIE_BAND:g}% of the best; the x >= 0 arm slope {cal.slope:.3f} us/line "
        f"{target} picks window {p.window_lines}"
    )
    c = cal.confirmed
    if c:
        add(
            f"cycle model: {c['sizes']} sizes x {len(c['modes'])} modes, max |cycle "
            f"difference| from the analytic model = {c['max_cycle_diff']}"
        )
    return "\n".join(lines)
