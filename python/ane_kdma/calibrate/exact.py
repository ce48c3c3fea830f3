"""Exact evaluation and the per-mechanism, per-hypothesis fit (the V chooses the window)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import numpy as np

from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma import runner, validate
from ane_kdma.calibrate.engine import EXACT_ENGINE, exact_engine, takes_engine
from ane_kdma.calibrate.problem import Bound, Problem, Target
from ane_kdma.calibrate.search import (
    CORRECTIONS,
    STARVED_WINDOWS,
    Fix,
    agreement_penalty,
    cycles,
    objective,
    penalty,
    profile,
    rising_penalty,
    search,
)
from ane_kdma.chip import Chip
from ane_kdma.contract import Workload
from ane_kdma.hw import RATE_ONE
from ane_kdma.mechanisms import Knobs
from ane_kdma.profile import Profile
from ane_kdma.validate import specs as vspecs
from ane_kdma.validate.specs import Bands

FIT_WINDOWS = (8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 256)
START_WINDOW = 64  # window the first pass assumes; the V then chooses it


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
    engine: str = EXACT_ENGINE  # the exact engine its residuals and checks ran on

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.bounds)


def _searched_as(mech: mechs.Mechanism) -> mechs.Mechanism:
    return mechs.get(mech.search_as) if mech.search_as else mech


def _shape(profile: Profile) -> Profile:
    """The profile without the inputs of a mechanism searched as another (a memory warm-up,
    a per-task cost): they add the same time at every x (one request, one task), so the V's
    slope is the other's too, and the closed form has it. (A starved-stream mechanism
    stays: how many lines starve depends on x.)"""
    off = {i.name: i.off for m in mechs.REGISTRY if m.search_as for i in m.inputs_own}
    return replace(profile, **off)  # type: ignore[arg-type]


def _v_engine(profile: Profile) -> str:
    """The engine the V is read on: the closed form where it follows the mechanism, else
    the exact engine."""
    return "analytic" if mechs.get(profile.mechanism).closed_form else exact_engine()


def _one_core(chip: Chip) -> Chip:
    """The chip with one core (the same figures): the V of a starved stream is one core's
    (17 GB/s of 16 cores is far below the DRAM ceiling), at a sixteenth of the cost."""
    one = replace(chip, cores=1)
    one.__dict__["measured"] = chip.measured
    return one


def _v(
    chip: Chip, profile: Profile, hyp: hyps.Hypothesis, laps: Sequence[int]
) -> tuple[list[float], list[float]]:
    engine = _v_engine(profile)
    fitted = chip.with_profile(_shape(profile))
    return validate.v_slope(
        fitted if engine == "analytic" else _one_core(fitted), hyp, laps, engine
    )


Item = tuple[int, bool, tuple[int, ...]]  # (lines, at the notch, the tasks of a split workload)


def _items(rows: Sequence[Target] | Sequence[Bound]) -> list[Item]:
    return [(r.lines, r.notch, r.parts) for r in rows]


def _chip_cycles(
    chip: Chip, hyp: hyps.Hypothesis, items: Sequence[Item], cores: int | None = None
) -> np.ndarray:
    """Cycles of every core streaming each workload, on the exact engine (:func:`exact_engine`),
    through the engine contract (``run_many``: --jobs and --scheduler spread them).

    Every workload runs on the hypothesis, as ``validate`` runs it: a size at
    the notch has credit 0 in every reading; off it (Table A, the D = 2016 point,
    nominal) and split into whole tasks (Table B's chunks, Table C's tasks) the
    reading's own credit (the search takes it as full, and its correction
    brings it to the reading).
    """
    lb = chip.line_bytes
    n_cores = cores or chip.cores
    loads: list[Workload] = []
    for n, _, parts in items:
        if parts:
            loads.append(Workload.from_chunks([p * lb for p in parts], n_cores, lb))
        else:
            loads.append(Workload.from_size(int(n) * lb, n_cores, 1, lb))
    runs = runner.run_many(exact_engine(), hyp, chip, loads)
    return np.array([r.cycles for r in runs], dtype=float)


def exact_cycles(chip: Chip, prob: Problem, profile: Profile, cores: int | None = None) -> Fix:
    """(target cycles, bound cycles) of a profile on the exact engine."""
    fitted = chip.with_profile(profile)
    hyp = hyps.get(profile.hypothesis)
    items = _items(prob.targets) + _items(prob.bounds)
    cyc = _chip_cycles(fitted, hyp, items, cores)
    return cyc[: len(prob.targets)], cyc[len(prob.targets) :]


def _correction(
    chip: Chip, prob: Problem, k: Knobs, mech: mechs.Mechanism, profile: Profile
) -> Fix:
    """The exact engine's cycles on one core less the search's closed form, at these knobs."""
    exact_t, exact_b = exact_cycles(chip, prob, profile, cores=1)
    t = cycles(
        chip,
        k,
        mech,
        np.array([x.lines for x in prob.targets]),
        np.array([x.notch for x in prob.targets]),
    )
    b = (
        cycles(
            chip,
            k,
            mech,
            np.array([x.lines for x in prob.bounds]),
            np.array([x.notch for x in prob.bounds]),
        )
        if prob.bounds
        else np.zeros(0)
    )
    return exact_t - t, exact_b - b


@takes_engine
def evaluate(
    chip: Chip, prob: Problem, profile: Profile, slope: bool = True, cycles: Fix | None = None
) -> Calibration:
    """A profile's residuals and constraint checks, exactly, on every core of the chip
    (`cycles`: the exact engine's, already run)."""
    fitted = chip.with_profile(profile)
    hyp = hyps.get(profile.hypothesis)
    ns = profile.ns_per_cycle / 1000.0
    cyc, b_cyc = cycles if cycles is not None else exact_cycles(chip, prob, profile)
    model = profile.overhead_us + cyc * ns
    residuals = [
        Residual(
            t.name, t.lines, t.measured_us, float(m), float((m - t.measured_us) / t.measured_us)
        )
        for t, m in zip(prob.targets, model, strict=True)
    ]
    checks = []
    b_times = profile.overhead_us + b_cyc * ns
    rises = {i for group in prob.rising for i in group[1:]}
    for i, (b, u) in enumerate(zip(prob.bounds, b_times, strict=True)):
        ok = bool(b.lo_us * (1 - 1e-12) <= u <= b.hi_us * (1 + 1e-12))
        if i in rises:  # a rising figure: above the one before it
            ok = ok and bool(
                b.bytes_per_core / u > prob.bounds[i - 1].bytes_per_core / b_times[i - 1]
            )
        checks.append(
            BoundCheck(
                b.name,
                b.lines,
                float(u),
                float(fitted.gbps(b.bytes_per_core * chip.cores, u)),
                b.lo_us,
                b.hi_us,
                ok,
                b.statement,
            )
        )
    rel = np.array([r.rel_err for r in residuals])
    s_mean = s_r2 = s_worst = None
    if slope and prob.slope_per_lap is not None:
        closed = mechs.get(profile.mechanism).closed_form
        laps = prob.laps if closed else (prob.laps[0], prob.laps[-1])
        per_k, r2s = _v(chip, profile, hyp, laps)
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
        engine=exact_engine(),
    )


Shared = tuple[Knobs, dict[str, int], Fix | None]
_SHARED: ContextVar[dict[tuple[int, Problem, str, str], Shared] | None] = ContextVar(
    "ane_kdma_calibrate_shared", default=None
)  # fit_all's, while it runs


@contextmanager
def shared_searches() -> Iterator[None]:
    """Within the block each mechanism's search runs once for every hypothesis (fit_all)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


@takes_engine
def fit_mechanism(chip: Chip, prob: Problem, mech: mechs.Mechanism) -> Shared:
    """The mechanism's knobs, the inputs it fits on a grid (Mechanism.grid; {}: none) and
    the search's correction to the cycle model: the same for every hypothesis (at x = 0
    every reading has no credit; split workloads of whole tasks have the full credit in
    every reading), so :func:`fit_all` computes it once per mechanism."""
    key = (id(chip), prob, mech.name, exact_engine())
    shared = _SHARED.get()
    if shared is not None and key in shared:
        return shared[key]
    base = _searched_as(mech)
    k = search(chip, prob, base, START_WINDOW)
    any_buggy = hyps.buggy()[0].name  # the registry's first: the choice changes nothing
    fix: Fix | None = None
    for _ in range(CORRECTIONS):
        _, ovh, _, _ = objective(chip, prob, k, base, fix)
        fix = _correction(chip, prob, k, base, profile(chip, k, base, ovh, any_buggy))
        k = search(chip, prob, base, k.window, fix, near=k)
    grid: dict[str, int] = {}
    if mech.grid:
        _, ovh, _, _ = objective(chip, prob, k, base, fix)
        prof = _fit_grid(chip, prob, mech, profile(chip, k, mech, ovh, any_buggy))
        grid = {i.name: getattr(prof, i.name) for i in mech.inputs_own}
    if shared is not None:
        shared[key] = (k, grid, fix)
    return k, grid, fix


@takes_engine
def fit_hypothesis(
    chip: Chip,
    prob: Problem,
    hyp: hyps.Hypothesis,
    mech: mechs.Mechanism,
    k: Knobs,
    grid: dict[str, int],
    fix: Fix | None = None,
) -> Profile:
    """The window for this hypothesis (the V's slope), then the overhead again.

    The search's knobs hold per line at every window; the window is the one whose V
    (validate's slope, each lap and side) is nearest the measured slope per lap, and
    straight. A starved-stream mechanism changes the V itself, so each of
    :data:`STARVED_WINDOWS` is first polished (corrected to the cycle model for this
    reading, searched again) and its V read on its own engine, every lap where the
    analytic engine has the mechanism. The chosen fit is then polished for this reading."""
    base = _searched_as(mech)
    starved = mech.starved
    laps: tuple[int, ...] = (1, prob.laps[-1])
    if starved and mech.closed_form:
        laps = tuple(prob.laps)
    choices = []
    for w in STARVED_WINDOWS if starved else FIT_WINDOWS:
        kw, wfix = replace(k, window=w), fix
        if starved:
            kw, wfix = _polish(chip, prob, hyp, base, kw, fix)
        obj, ovh, _, _ = objective(chip, prob, kw, base, wfix)
        prof = replace(profile(chip, kw, mech, ovh, hyp.name), **grid)  # type: ignore[arg-type]
        miss = 0.0
        if prob.slope_per_lap is not None:
            per_k, r2s = _v(chip, prof, hyp, laps)
            # the worst lap and side: a one-sided V (one flat arm) must not average out
            miss = max(abs(v - prob.slope_per_lap) for v in per_k) / prob.slope_per_lap
            miss += 0.5 if min(r2s) < _bands(prob).slope_r2 else 0.0  # not validate's straight V
        choices.append((miss + obj, w, kw, prof))
    choices.sort(key=lambda c: (c[0], c[1]))
    _, w, kw, prof = choices[0]
    if base is mech and not starved:  # polished at the chosen window, for this reading
        kw, fix = _polish(chip, prob, hyp, base, kw, fix)
        _, ovh, _, _ = objective(chip, prob, kw, base, fix)
        prof = profile(chip, kw, mech, ovh, hyp.name)
    return prof


def _polish(
    chip: Chip,
    prob: Problem,
    hyp: hyps.Hypothesis,
    mech: mechs.Mechanism,
    k: Knobs,
    fix: Fix | None,
) -> tuple[Knobs, Fix]:
    """The knobs at their window, corrected to the exact engine for this reading and searched
    again from where they are."""
    _, ovh, _, _ = objective(chip, prob, k, mech, fix)
    fix = _correction(chip, prob, k, mech, profile(chip, k, mech, ovh, hyp.name))
    return search(chip, prob, mech, k.window, fix, near=k), fix


def _fit_grid(chip: Chip, prob: Problem, mech: mechs.Mechanism, prof: Profile) -> Profile:
    """A mechanism's own inputs on its grid (Mechanism.grid), scored on one core of the
    exact engine.

    The closed form lacks the mechanism, so the grid runs the exact engine (one core,
    the targets and the constraints); the overhead is refitted for each point. A point
    that does not beat the mechanism off stays off.
    """
    names = [i.name for i in mech.inputs_own]
    best = (_model_objective(chip, prob, prof), prof)
    for point in itertools.product(*mech.grid):
        cand = replace(prof, **dict(zip(names, point, strict=True)))  # type: ignore[arg-type]
        score = _model_objective(chip, prob, cand)
        if score[0] < best[0][0]:
            best = (score, cand)
    (_, ovh), chosen = best
    return replace(chosen, overhead_us=round(ovh, 3))


def _model_objective(chip: Chip, prob: Problem, prof: Profile) -> tuple[float, float]:
    """(objective, overhead) of a profile on one core of the exact engine (targets, bounds)."""
    ns = prof.ns_per_cycle / 1000.0
    t_cyc, b_cyc = exact_cycles(chip, prob, prof, cores=1)
    cyc = t_cyc * ns
    meas = np.array([x.measured_us for x in prob.targets])
    w = 1.0 / meas**2
    ovh = max(0.0, float(((meas - cyc) * w).sum() / w.sum()))
    obj = float((((ovh + cyc - meas) / meas) ** 2).mean()) + agreement_penalty(prob, ovh + cyc)
    if prob.bounds:
        bt = ovh + b_cyc * ns
        for bound, u in zip(prob.bounds, bt, strict=True):
            obj += penalty(float(u), bound.lo_us, bound.hi_us)
        obj += rising_penalty(prob, bt)
    return obj, ovh


def exact_overhead(chip: Chip, prob: Problem, profile: Profile, cycles: Fix) -> Profile:
    """The overhead refitted on the exact cycles, clipped into what the constraints allow."""
    ns = profile.ns_per_cycle / 1000.0
    cyc, bc = cycles
    meas = np.array([t.measured_us for t in prob.targets])
    w = 1.0 / meas**2
    ovh = float(((meas - cyc * ns) * w).sum() / w.sum())
    if mechs.get(profile.mechanism).intercept_per_task:
        return profile  # the intercept lives in the per-task cost
    lo, hi = 0.0, math.inf
    if prob.bounds:
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


def _bands(prob: Problem) -> Bands:
    """The bands the problem was built with (validate's, as they stood)."""
    return prob.bands if prob.bands is not None else vspecs.bands()
