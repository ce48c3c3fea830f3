"""Fit a chip's profile to its measurements: every buggy hypothesis x every rate mechanism.

Why this shape. The clock (``ns_per_cycle``) is hand-set in chip.json: the
data fix only latency x ns and rate / ns. What is fitted, on the chip's
measured/ folder and nothing else:

* the per-request overhead, the memory latency and the demand window, the
  per-core rate, and the chosen rate mechanism's inputs (the governor's start
  rate and ramp length; the memory's warm-up; or the per-task cost);
* targets: every replica of Table A and the notch and shoulder point facts,
  as times, least squares on the relative error;
* constraints, each a stated fact when the data states it: the floor's range
  at each measured lap; nominal (full credit) at least its lower bound at
  x = +-page, k = 1, and inside its range at the largest stated size; full
  recovery at |x| = page, as (window + page) / (latency + 2) >= the rate.

Off the notch every hypothesis has full credit and at x = 0 none has any, so
the targets and constraints fix the rate, the mechanism, the overhead and
(latency + 2) / window alike for all of them. The window itself (with the
latency in that ratio) shapes the V, and is then chosen per hypothesis: the
one whose slope of time on |x| near the notch (|x| <= 128, every lap) is
nearest the measured slope per lap.

One judge. The V's slope is validate's own computation
(:func:`ane_kdma.validate.v_slope`), and the fits are ranked by validate's
rows, tolerances and order (:func:`ane_kdma.validate.rank`): the profile
written is the head of the ranking ``validate`` prints, and changing a
tolerance in ``ane_kdma.validate.specs`` moves both alike.

Search: Nelder-Mead from fixed starts on the analytic engine (the governor's
longest path, vectorised), then integer refinement; every fitted profile's
residuals and constraint checks are then taken from the cycle-model engine
with all of the chip's cores streaming, and the analytic formula is
confirmed on one core, to the cycle. The whole search is deterministic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ane_kdma import analytic, contract, progress, validate
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.chip import MEASURED_DIR, Chip, chips_dir
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE
from ane_kdma.measured import Measurements
from ane_kdma.profile import MAX_LATENCY_CYCLES, Profile
from ane_kdma.validate.specs import SLOPE_R2, SLOPE_X

FIT_WINDOWS = (8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 256)
PENALTY = 100.0  # weight of a violated constraint (relative units squared)
START_WINDOW = 64  # window the first pass assumes; the V then chooses it


@dataclass(frozen=True)
class Target:
    """A measured time the fit should reproduce."""

    name: str
    lines: int
    bytes_per_core: int
    measured_us: float
    provenance: str
    notch: bool  # at x = 0 (no credit), else full credit


@dataclass(frozen=True)
class Bound:
    """A stated fact as a bound on modeled time: lo_us <= time(lines) <= hi_us."""

    name: str
    lines: int
    bytes_per_core: int
    lo_us: float
    hi_us: float
    statement: str
    notch: bool


@dataclass(frozen=True)
class Problem:
    targets: tuple[Target, ...]
    bounds: tuple[Bound, ...]
    page: int | None  # the stated recovery offset (knee constraint), if any
    slope_per_lap: float | None
    laps: tuple[int, ...]


@dataclass(frozen=True)
class Residual:
    name: str
    lines: int
    measured_us: float
    model_us: float
    rel_err: float


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
    slope: float | None  # model, µs per line per lap near the notch (mean over laps)
    slope_r2: float | None
    slope_worst_miss: float | None  # the worst lap and side, relative to the measured slope
    slope_target: float | None
    knee_lines_per_cycle: float
    rate_lines_per_cycle: float
    confirmed: dict[str, object] = field(default_factory=dict)
    # validate's judgement of this fit on its own profile (validate.standing), once ranked
    standing: validate.Standing | None = None

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.bounds)


# ---------------------------------------------------------------- the problem


def problem(chip: Chip, meas: Measurements) -> Problem:
    """Targets and bounds from the chip's measurements (nothing else)."""
    ta, f, geo = meas.table_a, meas.facts, meas.geo
    ring, lb = chip.ring_lines, chip.line_bytes
    targets: list[Target] = []
    if ta is not None:
        src = ta.source.cite()
        for rep, times in ta.replicas.items():
            for d, n, b, t in zip(ta.d, ta.lines_per_core, ta.bytes_per_core, times, strict=True):
                n = int(n)
                targets.append(
                    Target(
                        f"Table A D={d} rep {rep}",
                        n,
                        int(b),
                        float(t),
                        f"replica {rep}, N={ta.n}, {src}",
                        n % ring == 0,
                    )
                )
    for p in (f.shoulder, f.notch):
        if p is None:
            continue
        src = p.gbps.source.cite() if p.gbps.source else ""
        targets.append(
            Target(
                f"D={p.d} point",
                p.lines,
                p.bytes_per_core,
                float(geo.time_for_gbps(p.bytes_per_core, p.gbps.value)),
                f"{p.gbps} at D={p.d}, N={p.n}, {src}",
                p.lines % ring == 0,
            )
        )
    if not targets:
        raise InputError(f"chip {chip.name}: no measured times to calibrate on")
    bounds: list[Bound] = []
    if f.floor is not None:
        for k in f.floor.laps:
            b = k * ring * lb
            bounds.append(
                Bound(
                    f"floor k={k}",
                    k * ring,
                    b,
                    float(geo.time_for_gbps(b, f.floor.gbps.hi)),
                    float(geo.time_for_gbps(b, f.floor.gbps.lo)),
                    f"floor {f.floor.gbps} at k = {f.floor.laps[0]}..{f.floor.laps[-1]}",
                    True,
                )
            )
    page = f.v_notch.page if f.v_notch is not None else None
    if f.nominal is not None:
        big = f.nominal.high_bytes
        bounds.append(
            Bound(
                f"nominal {big >> 20} MiB",
                big // lb,
                big,
                float(geo.time_for_gbps(big, f.nominal.gbps.hi)),
                float(geo.time_for_gbps(big, f.nominal.gbps.lo)),
                f"nominal within {f.nominal.gbps} at {big >> 20} MiB per core (full credit)",
                False,
            )
        )
    slope = f.k_scaling.slope_per_lap.value if f.k_scaling is not None else None
    laps = tuple(f.floor.laps) if f.floor is not None else (1,)
    return Problem(tuple(targets), tuple(bounds), page, slope, laps)


# ---------------------------------------------------------------- the fast search


@dataclass(frozen=True)
class Knobs:
    """Continuous fit variables (the search's space), and their integer profile."""

    rate: float  # lines per cycle
    start: float  # governor start, as a fraction of the rate (1: no ramp)
    ramp_lines: float
    period_per_line: float  # (latency + 2) / window
    window: int

    def period(self) -> int:
        return max(3, min(MAX_LATENCY_CYCLES + 2, round(self.period_per_line * self.window)))


def _cycles(
    chip: Chip, k: Knobs, mech: mechs.Mechanism, lines: np.ndarray, notch: np.ndarray
) -> np.ndarray:
    """One core's cycles for each size, at the notch (no credit) or at full credit.

    The closed form itself (:func:`ane_kdma.analytic.governor_grid`), not an engine: the
    search needs it over a grid of knobs, which no engine of the contract offers."""
    clamp = chip.geometry.prefetch_max_lines
    rate = min(k.rate, 1.0) * RATE_ONE
    steps = max(mech.steps, 1)
    return analytic.governor_grid(
        latency=np.array(k.period() - 2),
        window=np.array(k.window),
        rate=np.array(rate),
        ramp_start=np.array(rate * (min(k.start, 1.0) if mech.steps else 1.0)),
        ramp_lines=np.array(max(k.ramp_lines, 1.0)),
        steps=steps,
        credit=np.where(notch, 0, clamp),
        lines=lines,
        kmem_lines=chip.geometry.kmem_lines,
    )


def _objective(
    chip: Chip, prob: Problem, k: Knobs, mech: mechs.Mechanism
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(objective, overhead, target times, bound times): overhead by weighted least squares."""
    ns = chip.ns_per_cycle_hand_set / 1000.0
    t_lines = np.array([t.lines for t in prob.targets])
    t_notch = np.array([t.notch for t in prob.targets])
    meas = np.array([t.measured_us for t in prob.targets])
    cyc = _cycles(chip, k, mech, t_lines, t_notch) * ns
    w = 1.0 / meas**2
    ovh = max(0.0, float(((meas - cyc) * w).sum() / w.sum()))
    model = ovh + cyc
    obj = float((((model - meas) / meas) ** 2).mean())
    b_times = np.zeros(0)
    if prob.bounds:
        b_lines = np.array([b.lines for b in prob.bounds])
        b_notch = np.array([b.notch for b in prob.bounds])
        b_times = ovh + _cycles(chip, k, mech, b_lines, b_notch) * ns
        for b, t in zip(prob.bounds, b_times, strict=True):
            if t > b.hi_us:
                obj += PENALTY * ((t - b.hi_us) / b.hi_us) ** 2
            if t < b.lo_us:
                obj += PENALTY * ((b.lo_us - t) / b.lo_us) ** 2
    if prob.page is not None:  # full recovery at |x| = page: one page of credit reaches the rate
        knee = min(k.window + prob.page, chip.geometry.kmem_lines) / k.period()
        if knee < k.rate:
            obj += PENALTY * ((k.rate - knee) / k.rate) ** 2
    return obj, ovh, model, b_times


def _nelder_mead(f, x0: np.ndarray, scale: np.ndarray, iters: int = 400) -> np.ndarray:
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


def _search(chip: Chip, prob: Problem, mech: mechs.Mechanism, window: int) -> Knobs:
    """The continuous fit of rate, governor and (latency + 2) / window at a given window."""

    def knobs(x: np.ndarray) -> Knobs:
        return Knobs(
            rate=float(np.clip(x[0], 0.02, 1.0)),
            start=float(np.clip(x[2], 0.05, 1.0)) if mech.steps else 1.0,
            ramp_lines=float(np.clip(np.exp(x[3]), 1.0, 1 << 20)) if mech.steps else 1.0,
            period_per_line=float(np.clip(x[1], 0.5, 64.0)),
            window=window,
        )

    def f(x: np.ndarray) -> float:
        return _objective(chip, prob, knobs(x), mech)[0]

    best, best_val = None, math.inf
    starts = [(0.45, 7.0, 1.0, 8.0)]
    if mech.steps:
        starts = [
            (r, 7.0, s, np.log(n)) for r in (0.45, 0.55) for s in (0.5, 0.8) for n in (4e3, 1.2e4)
        ]
    for s0 in starts:
        x0 = np.array(s0[: 4 if mech.steps else 2], dtype=float)
        scale = np.array([0.05, 0.5, 0.1, 0.5][: x0.size])
        x = _nelder_mead(f, x0, scale)
        x = _nelder_mead(f, x, scale / 4)
        val = f(x)
        if val < best_val:
            best, best_val = x, val
    assert best is not None  # every start gives a finite objective
    return knobs(best)


# ---------------------------------------------------------------- per hypothesis: the V


def _profile(chip: Chip, k: Knobs, mech: mechs.Mechanism, ovh: float, hyp: str) -> Profile:
    rate = max(1, min(RATE_ONE, round(k.rate * RATE_ONE)))
    ramp_start, ramp_step, ramp_inc, task_gap = 0, 1, 0, 0  # Profile's "off" values
    if mech.steps and k.start < 1.0:
        start = max(1, round(rate * k.start))
        if start < rate:
            steps = mech.steps
            ramp_start = start
            ramp_step = max(1, round(k.ramp_lines / steps))
            ramp_inc = max(1, -(-(rate - start) // steps))
    if mech.name == "task-cost":
        gap = round(ovh * 1000.0 / chip.ns_per_cycle_hand_set)
        ramp_start, ramp_step, ramp_inc = 0, 1, 0
        task_gap = min(gap, (1 << 16) - 1)
        ovh = 0.0
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
        ramp_start_q16=ramp_start,
        ramp_step_lines=ramp_step,
        ramp_inc_q16=ramp_inc,
        task_gap_cycles=task_gap,
    )


def _shape(profile: Profile) -> Profile:
    """The profile without a warm-up or per-task cost: both add the same time at every x
    (one request, one task), so the V's slope is theirs too, and the closed form has it."""
    return replace(profile, warm_lines=0, warm_extra_cycles=0, task_gap_cycles=0)


# ---------------------------------------------------------------- exact evaluation


def _chip_cycles(
    chip: Chip, hyp: hyps.Hypothesis, lines: list[int], notch: list[bool], cores: int | None = None
):
    """Cycles of every core streaming each size, on the cycle model (exact), at the stated credit.

    Full-credit sizes run on the fixed design (full credit for every size);
    notch sizes on the hypothesis, whose credit there is 0 by construction.
    """
    lb = chip.line_bytes
    fixed = hyps.get(hyps.FIXED)
    out = []
    for n, at_notch in zip(lines, notch, strict=True):
        load = Workload.from_size(int(n) * lb, cores or chip.cores, 1, lb)
        out.append(contract.run("model", hyp if at_notch else fixed, chip, load).cycles)
    return np.array(out, dtype=float)


def evaluate(chip: Chip, prob: Problem, profile: Profile, slope: bool = True) -> Calibration:
    """A profile's residuals and constraint checks, exactly, on every core of the chip."""
    fitted = chip.with_profile(profile)
    hyp = hyps.get(profile.hypothesis)
    ns = profile.ns_per_cycle / 1000.0
    cyc = _chip_cycles(
        fitted, hyp, [t.lines for t in prob.targets], [t.notch for t in prob.targets]
    )
    model = profile.overhead_us + cyc * ns
    residuals = [
        Residual(
            t.name, t.lines, t.measured_us, float(m), float((m - t.measured_us) / t.measured_us)
        )
        for t, m in zip(prob.targets, model, strict=True)
    ]
    checks = []
    if prob.bounds:
        b_cyc = _chip_cycles(
            fitted, hyp, [b.lines for b in prob.bounds], [b.notch for b in prob.bounds]
        )
        for b, c in zip(prob.bounds, b_cyc, strict=True):
            u = profile.overhead_us + c * ns
            checks.append(
                BoundCheck(
                    b.name,
                    b.lines,
                    float(u),
                    float(fitted.gbps(b.bytes_per_core * chip.cores, u)),
                    b.lo_us,
                    b.hi_us,
                    bool(b.lo_us * (1 - 1e-12) <= u <= b.hi_us * (1 + 1e-12)),
                    b.statement,
                )
            )
    rel = np.array([r.rel_err for r in residuals])
    s_mean = s_r2 = s_worst = None
    if slope and prob.slope_per_lap is not None:
        per_k, r2s = validate.v_slope(chip.with_profile(_shape(profile)), hyp, prob.laps)
        s_mean, s_r2 = float(np.mean(per_k)), float(min(r2s))
        s_worst = max(abs(v - prob.slope_per_lap) for v in per_k) / prob.slope_per_lap
    page = prob.page or chip.geometry.prefetch_max_lines
    return Calibration(
        profile=profile,
        residuals=residuals,
        bounds=checks,
        objective=float((rel**2).mean()),
        rms_rel_err=float(np.sqrt((rel**2).mean())),
        slope=s_mean,
        slope_r2=s_r2,
        slope_worst_miss=s_worst,
        slope_target=prob.slope_per_lap,
        knee_lines_per_cycle=min(profile.window_lines + page, chip.geometry.kmem_lines)
        / (profile.latency_cycles + 2),
        rate_lines_per_cycle=profile.core_rate_q16 / RATE_ONE,
    )


# ---------------------------------------------------------------- the fit


def fit_mechanism(
    chip: Chip, prob: Problem, mech: mechs.Mechanism
) -> tuple[Knobs, tuple[int, int]]:
    """The mechanism's knobs and the warm-up's (lines, extra cycles), the same for every
    hypothesis ((0, 0): no warm-up)."""
    base = mechs.get("none") if mech.name in ("warmup", "task-cost") else mech
    k = _search(chip, prob, base, START_WINDOW)
    warm = (0, 0)
    if mech.name == "warmup":  # at x = 0 every reading has no credit: any one will do
        _, ovh, _, _ = _objective(chip, prob, k, base)
        any_buggy = hyps.buggy()[0].name  # the registry's first: the choice changes nothing
        prof = _fit_warmup(chip, prob, _profile(chip, k, mech, ovh, any_buggy))
        warm = (prof.warm_lines, prof.warm_extra_cycles)
    return k, warm


def fit_hypothesis(
    chip: Chip,
    prob: Problem,
    hyp: hyps.Hypothesis,
    mech: mechs.Mechanism,
    k: Knobs,
    warm: tuple[int, int],
) -> Profile:
    """The window for this hypothesis (the V's slope), then the overhead again."""
    base = mechs.get("none") if mech.name in ("warmup", "task-cost") else mech
    choices = []
    for w in FIT_WINDOWS:
        kw = replace(k, window=w)
        obj, ovh, _, _ = _objective(chip, prob, kw, base)
        prof = replace(
            _profile(chip, kw, mech, ovh, hyp.name), warm_lines=warm[0], warm_extra_cycles=warm[1]
        )
        miss = 0.0
        if prob.slope_per_lap is not None:
            shaped = chip.with_profile(_shape(prof))
            per_k, r2s = validate.v_slope(shaped, hyp, (1, prob.laps[-1]))
            # the worst lap and side: a one-sided V (one flat arm) must not average out
            miss = max(abs(v - prob.slope_per_lap) for v in per_k) / prob.slope_per_lap
            miss += 0.5 if min(r2s) < SLOPE_R2 else 0.0  # not validate's straight V
        choices.append((miss + obj, w, prof))
    choices.sort(key=lambda c: (c[0], c[1]))
    return choices[0][2]


WARM_LINES = (1024, 4096, 8192, 16384)
WARM_EXTRA = (32, 128, 512, 2048)


def _fit_warmup(chip: Chip, prob: Problem, prof: Profile) -> Profile:
    """The memory warm-up's two inputs on a grid, scored on one core of the cycle model.

    The closed form has no warm-up, so the grid runs the exact model (one core,
    the targets and the constraints); the overhead is refitted for each point.
    A warm-up that does not beat none at all stays at zero.
    """
    best = (_model_objective(chip, prob, prof), prof)
    for n in WARM_LINES:
        for x in WARM_EXTRA:
            cand = replace(prof, warm_lines=n, warm_extra_cycles=x)
            score = _model_objective(chip, prob, cand)
            if score[0] < best[0][0]:
                best = (score, cand)
    (_, ovh), chosen = best
    return replace(chosen, overhead_us=round(ovh, 3))


def _model_objective(chip: Chip, prob: Problem, prof: Profile) -> tuple[float, float]:
    """(objective, overhead) of a profile on one core of the cycle model (targets, bounds)."""
    fitted = chip.with_profile(prof)
    hyp = hyps.get(prof.hypothesis)
    ns = prof.ns_per_cycle / 1000.0
    t = [(x.lines, x.notch) for x in prob.targets]
    cyc = _chip_cycles(fitted, hyp, [a for a, _ in t], [b for _, b in t], cores=1) * ns
    meas = np.array([x.measured_us for x in prob.targets])
    w = 1.0 / meas**2
    ovh = max(0.0, float(((meas - cyc) * w).sum() / w.sum()))
    obj = float((((ovh + cyc - meas) / meas) ** 2).mean())
    if prob.bounds:
        b = [(x.lines, x.notch) for x in prob.bounds]
        bt = ovh + _chip_cycles(fitted, hyp, [a for a, _ in b], [c for _, c in b], cores=1) * ns
        for bound, u in zip(prob.bounds, bt, strict=True):
            if u > bound.hi_us:
                obj += PENALTY * ((u - bound.hi_us) / bound.hi_us) ** 2
            if u < bound.lo_us:
                obj += PENALTY * ((bound.lo_us - u) / bound.lo_us) ** 2
    return obj, ovh


def _exact_overhead(chip: Chip, prob: Problem, profile: Profile) -> Profile:
    """The overhead refitted on the exact cycles, clipped into what the constraints allow."""
    fitted = chip.with_profile(profile)
    hyp = hyps.get(profile.hypothesis)
    ns = profile.ns_per_cycle / 1000.0
    cyc = _chip_cycles(
        fitted, hyp, [t.lines for t in prob.targets], [t.notch for t in prob.targets]
    )
    meas = np.array([t.measured_us for t in prob.targets])
    w = 1.0 / meas**2
    ovh = float(((meas - cyc * ns) * w).sum() / w.sum())
    if profile.mechanism == "task-cost":
        return profile  # the intercept lives in the per-task cost
    lo, hi = 0.0, math.inf
    if prob.bounds:
        bc = _chip_cycles(
            fitted, hyp, [b.lines for b in prob.bounds], [b.notch for b in prob.bounds]
        )
        lo = max(0.0, float((np.array([b.lo_us for b in prob.bounds]) - bc * ns).max()))
        hi = float((np.array([b.hi_us for b in prob.bounds]) - bc * ns).min())
    if lo <= hi:
        ovh = min(max(ovh, lo), hi)
        r = round(ovh, 3)
        ovh = (
            math.floor(hi * 1000) / 1000
            if r > hi
            else (math.ceil(lo * 1000) / 1000 if r < lo else r)
        )
    return replace(profile, overhead_us=max(ovh, 0.0))


@contract.takes_jobs  # jobs=N, quiet=: how its run_many calls spread (ane_kdma.contract)
def fit(chip: Chip, hypothesis: str, mechanism: str) -> Calibration:
    """One hypothesis x mechanism, fitted and evaluated exactly (deterministic)."""
    meas = chip.measured
    prob = problem(chip, meas)
    mech = mechs.get(mechanism)
    hyp = hyps.get(hypothesis)
    k, warm = fit_mechanism(chip, prob, mech)
    prof = fit_hypothesis(chip, prob, hyp, mech, k, warm)
    prof = _exact_overhead(chip, prob, prof)
    cal = evaluate(chip, prob, prof)
    cal.profile = _with_notes(chip, cal, prob, meas)
    return cal


ANALYTIC_TOL = 0.02  # the analytic engine's stated accuracy on progress-dependent readings


@contract.takes_jobs
def rank(chip: Chip, cals: list[Calibration]) -> list[Calibration]:
    """The fits in validate's order (:func:`ane_kdma.validate.rank_key`: its counted rows on
    each fit's own profile, then the RMS error; a tie keeps the registries' order), best
    first; each gets its standing."""
    for c in cals:
        c.standing = validate.standing(chip, c.profile)
    return sorted(cals, key=lambda c: validate.rank_key(_standing(c)))


def _standing(cal: Calibration) -> validate.Standing:
    if cal.standing is None:
        raise ValueError(f"{cal.profile.hypothesis} x {cal.profile.mechanism}: not ranked")
    return cal.standing


def shortfalls(cal: Calibration) -> list[str]:
    """The rows of validate this fit fails on its own profile (a ranked fit only)."""
    return list(_standing(cal)["failed"])


@contract.takes_jobs
def fit_all(chip: Chip, pairs: Sequence[tuple[str, str]] | None = None) -> list[Calibration]:
    """Every buggy hypothesis x every mechanism (or these pairs), in validate's ranking,
    best first."""
    if pairs is None:
        pairs = [(h.name, m.name) for h in hyps.buggy() for m in mechs.REGISTRY]
    quiet = contract.current_options().quiet
    cals = [fit(chip, h, m) for h, m in progress.iterate(list(pairs), "fit", quiet)]
    return rank(chip, cals)


def _measured_dir(chip: Chip) -> str:
    """Where the figures came from: data/chips/<name>/measured for a bundled chip, else the
    folder itself (a chip given as --chip DIR)."""
    if chip.path.resolve().parent == chips_dir().resolve():
        return f"data/chips/{chip.path.name}/{MEASURED_DIR}"
    return str(chip.path / MEASURED_DIR)


def _with_notes(chip: Chip, cal: Calibration, prob: Problem, meas: Measurements) -> Profile:
    """The profile with notes written from the chip's own data (nothing chip-specific here)."""
    p = cal.profile
    f, ta = meas.facts, meas.table_a
    cited = [ta.source] if ta is not None else []
    cited += [q.gbps.source for q in (f.shoulder, f.notch) if q is not None and q.gbps.source]
    mech = mechs.get(p.mechanism)
    notes = {
        "status": "fitted by `ane-kdma calibrate` (deterministic); regenerate, do not hand-edit",
        "source": f"measurements: {_measured_dir(chip)} ("
        + "; ".join(sorted({s.cite() for s in cited}))
        + ")",
        "hand_set": (
            f"ns_per_cycle = {chip.ns_per_cycle_hand_set} is hand-set in chip.json, not fitted: "
            f"the data fix only latency x ns and rate / ns. ceiling_gbps = "
            f"{chip.ceiling_gbps:g} is the chip's DRAM ceiling ({chip.ceiling.citation}). "
            "No other parameter is hand-set."
        ),
        "hypothesis": f"{p.hypothesis}: {hyps.get(p.hypothesis).description}",
        "mechanism": f"{mech.name}: {mech.summary}",
        "targets": f"{len(prob.targets)} measured times (every Table A replica and the point "
        "facts); least squares on relative error, equal weights",
        "constraints": "; ".join(b.statement for b in prob.bounds[:1] + prob.bounds[-1:])
        + (f"; full recovery at |x| = {prob.page}" if prob.page else ""),
        "exactness": (
            "residuals and constraint checks are from the cycle model with all "
            f"{chip.cores} cores streaming"
        ),
        "residuals": ", ".join(f"{r.name} {100 * r.rel_err:+.1f}%" for r in cal.residuals),
        "rms_rel_err": f"{cal.rms_rel_err:.4f}",
    }
    if cal.slope is not None:
        notes["v_slope"] = (
            f"{cal.slope:.3f} us/line per lap near the notch (|x| <= {SLOPE_X}), worst R^2 "
            f"{cal.slope_r2:.3f}; measured {cal.slope_target:g}; the window was chosen for it"
        )
    return replace(p, notes=notes)


def confirm(chip: Chip, cal: Calibration) -> dict[str, object]:
    """The fitted sizes on one core in every mode: the analytic engine beside the cycle model.

    Static readings must agree exactly; the paged reading's closed form is an
    approximation within ANALYTIC_TOL. ``ok`` says whether both held.
    """
    prob = problem(chip, chip.measured)
    fitted = chip.with_profile(cal.profile)
    lb = chip.line_bytes
    lines = sorted({t.lines for t in prob.targets} | {b.lines for b in prob.bounds})
    loads = [Workload.from_size(n * lb, 1, 1, lb) for n in lines]
    per_mode: dict[str, float] = {}
    ok = True
    if not mechs.get(cal.profile.mechanism).closed_form:
        return {
            "sizes": len(lines),
            "modes": {},
            "max_rel_diff": None,
            "ok": True,
            "skipped": f"the analytic engine has no closed form for {cal.profile.mechanism}",
        }
    for h in hyps.registry():
        exact = [r.cycles for r in contract.run_many("model", h, fitted, loads)]
        fast = [r.cycles for r in contract.run_many("analytic", h, fitted, loads)]
        diff = max(abs(a - b) / a for a, b in zip(exact, fast, strict=True))
        per_mode[h.name] = diff
        ok = ok and diff <= (0.0 if h.static else ANALYTIC_TOL)
    return {
        "sizes": len(lines),
        "modes": per_mode,
        "max_rel_diff": max(per_mode.values()),
        "ok": ok,
    }


# ---------------------------------------------------------------- output


def report(cal: Calibration) -> dict[str, object]:
    return {
        "profile": json.loads(cal.profile.to_json()),
        "residuals": [asdict(r) for r in cal.residuals],
        "constraints": [asdict(b) for b in cal.bounds],
        "objective": cal.objective,
        "rms_rel_err": cal.rms_rel_err,
        "v_slope_us_per_line_per_lap": cal.slope,
        "v_slope_worst_r2": cal.slope_r2,
        "v_slope_measured": cal.slope_target,
        "knee_lines_per_cycle": cal.knee_lines_per_cycle,
        "rate_lines_per_cycle": cal.rate_lines_per_cycle,
        "constraints_met": cal.ok,
        "confirmed_on_cycle_model": cal.confirmed,
    }


def render(cal: Calibration, out: str) -> str:
    """The human report: parameters, residuals, constraints, the V."""
    p = cal.profile
    lines = [
        f"calibrated profile {p.name} ({p.hypothesis} x {p.mechanism}) -> {out}",
        f"  overhead_us {p.overhead_us}  latency_cycles {p.latency_cycles}  window_lines "
        f"{p.window_lines}  core_rate_q16 {p.core_rate_q16} ({p.core_rate_q16 / RATE_ONE:.4f} "
        f"lines/cycle)  ns_per_cycle {p.ns_per_cycle} (hand-set)",
    ]
    if p.ramp_start_q16:
        lines.append(
            f"  governor: starts at {p.ramp_start_q16 / RATE_ONE:.4f} lines/cycle, +"
            f"{p.ramp_inc_q16 / RATE_ONE:.4f} every {p.ramp_step_lines} lines"
        )
    if p.task_gap_cycles:
        lines.append(f"  per-task cost: {p.task_gap_cycles} cycles")
    lines.append("fit residuals (model - measured) / measured:")
    for r in cal.residuals:
        lines.append(
            f"  {r.name:<22}{r.lines:>8}{r.measured_us:>10.1f}{r.model_us:>10.1f}"
            f"{100 * r.rel_err:>+8.1f}%"
        )
    lines.append(f"  RMS relative error {100 * cal.rms_rel_err:.2f}%")
    for b in cal.bounds:
        lines.append(f"  {b.name:<22}{b.model_gbps:>8.2f} GB/s  {'ok' if b.ok else 'VIOLATED'}")
    lines.append(
        f"  knee (window+page)/(latency+2) = {cal.knee_lines_per_cycle:.4f} vs rate "
        f"{cal.rate_lines_per_cycle:.4f} lines/cycle"
    )
    if cal.slope is not None:
        lines.append(
            f"V slope near the notch {cal.slope:.3f} us/line per lap (worst R^2 "
            f"{cal.slope_r2:.3f}), measured {cal.slope_target:g}"
        )
    c = cal.confirmed
    if c.get("skipped"):
        lines.append(f"cycle model only: {c['skipped']}")
    elif c:
        modes = c["modes"]
        assert isinstance(modes, dict)
        lines.append(
            f"cycle model: {c['sizes']} sizes on one core; the analytic engine's largest "
            "relative difference: " + ", ".join(f"{m} {d:.1e}" for m, d in modes.items())
        )
    return "\n".join(lines)
