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
residuals and constraint checks are then taken from an exact engine with all
of the chip's cores streaming, and the analytic formula is confirmed on one
core, to the cycle. The whole search is deterministic.

The exact engine. Every exact evaluation (the search's correction, the
residuals, the constraint checks, the V where the closed form lacks the
mechanism, the confirmation) runs on one engine of the contract: the cycle
model by default, or the RTL itself (``fit(..., engine="rtl")``,
``calibrate --engine rtl``). The exact engines agree to the cycle, so the
profile and the ranking are the same whichever ran. The analytic engine is
refused: it is the search's own closed form, which the exact engine checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma import progress, runner, validate
from ane_kdma.calibrate.engine import (
    ANALYTIC_TOL,
    EXACT_ENGINE,
    RTL_ENGINES,
    check_chip,
    check_engine,
    check_mechanisms,
    engine_options,
    exact_engine,
    rtl_lacks,
    takes_engine,
)
from ane_kdma.calibrate.exact import (
    BoundCheck,
    Calibration,
    Residual,
    evaluate,
    exact_cycles,
    exact_overhead,
    fit_hypothesis,
    fit_mechanism,
    shared_searches,
)
from ane_kdma.calibrate.problem import DATASETS, Agreement, Bound, Problem, Target, problem
from ane_kdma.calibrate.report import (
    ENGINE_WORDS,
    WARM_CYCLES,
    HoldOut,
    confirm,
    hold_out_report,
    render,
    render_hold_out,
    report,
    static_slack,
    with_notes,
)
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError

__all__ = [
    "ANALYTIC_TOL",
    "DATASETS",
    "ENGINE_WORDS",
    "EXACT_ENGINE",
    "RTL_ENGINES",
    "WARM_CYCLES",
    "Agreement",
    "Bound",
    "BoundCheck",
    "Calibration",
    "HoldOut",
    "Problem",
    "Residual",
    "Target",
    "check_chip",
    "check_engine",
    "check_mechanisms",
    "confirm",
    "engine_options",
    "evaluate",
    "exact_engine",
    "fit",
    "fit_all",
    "fit_hypothesis",
    "fit_mechanism",
    "hold_out",
    "hold_out_report",
    "margin",
    "problem",
    "rank",
    "render",
    "render_hold_out",
    "report",
    "rtl_lacks",
    "shortfalls",
    "static_slack",
    "takes_engine",
]


@runner.takes_options  # jobs=N, quiet=: how its run_many calls spread (ane_kdma.runner)
@takes_engine  # engine=: the exact engine (the cycle model by default)
def fit(chip: Chip, hypothesis: str, mechanism: str, hold_out: Sequence[str] = ()) -> Calibration:
    """One hypothesis x mechanism, fitted and evaluated exactly (deterministic); `hold_out`
    leaves datasets out of the fit (:func:`problem`)."""
    check_mechanisms(exact_engine(), [mechanism])
    check_chip(exact_engine(), chip)
    meas = chip.measured
    prob = problem(chip, meas, hold_out)
    mech = mechs.get(mechanism)
    hyp = hyps.get(hypothesis)
    k, grid, fix = fit_mechanism(chip, prob, mech)
    prof = fit_hypothesis(chip, prob, hyp, mech, k, grid, fix)
    cycles = exact_cycles(chip, prob, prof)  # the overhead adds to every time: one run serves both
    prof = exact_overhead(chip, prob, prof, cycles)
    cal = evaluate(chip, prob, prof, cycles=cycles)
    cal.profile = with_notes(chip, cal, prob, meas)
    return cal


@runner.takes_options
def rank(chip: Chip, cals: list[Calibration]) -> list[Calibration]:
    """The fits in validate's order (:func:`ane_kdma.validate.rank_key`: its counted rows on
    each fit's own profile, then the RMS error; a tie keeps the registries' order), best
    first; each gets its standing.

    No engine to choose: the ranking is validate's judge, run as ``validate`` runs it (the
    analytic engine where it has the mechanism's closed form, else the cycle model), so the
    head is the head of validate's ranking. The RTL builds only mechanisms with a closed
    form (:func:`check_mechanisms`), so on the RTL the ranking runs no cycle model."""
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


@runner.takes_options
@takes_engine
def fit_all(chip: Chip, pairs: Sequence[tuple[str, str]] | None = None) -> list[Calibration]:
    """Every buggy hypothesis x every mechanism (or these pairs), in validate's ranking,
    best first."""
    if pairs is None:
        pairs = [(h.name, m.name) for h in hyps.buggy() for m in mechs.REGISTRY]
    check_mechanisms(exact_engine(), [m for _, m in pairs])  # before the first fit
    check_chip(exact_engine(), chip)
    quiet = runner.current_options().quiet
    with shared_searches():  # each mechanism's search, once for every hypothesis
        cals = [fit(chip, h, m) for h, m in progress.iterate(list(pairs), "fit", quiet)]
    return rank(chip, cals)


def margin(cals: Sequence[Calibration]) -> dict[str, object] | None:
    """By how much the head of a ranking beats the runner-up: validate's counted rows, then
    the RMS relative error (the ranking's own key), or None with fewer than two fits."""
    if len(cals) < 2:
        return None
    top, nxt = _standing(cals[0]), _standing(cals[1])
    rows = top["passed"] - nxt["passed"]
    rms = nxt["rms_rel_err"] - top["rms_rel_err"]
    by = f"{rows} more rows passed" if rows else f"{100 * rms:.2f} points of RMS"
    return {
        "winner": f"{top['hypothesis']} x {top['mechanism']}",
        "runner_up": f"{nxt['hypothesis']} x {nxt['mechanism']}",
        "rows": [top["passed"], nxt["passed"], top["rows"]],
        "rms_rel_err": [top["rms_rel_err"], nxt["rms_rel_err"]],
        "text": (
            f"{top['hypothesis']} x {top['mechanism']} beats {nxt['hypothesis']} x "
            f"{nxt['mechanism']} by {by}: {top['passed']}/{top['rows']} rows against "
            f"{nxt['passed']}/{nxt['rows']}, RMS {100 * top['rms_rel_err']:.2f}% against "
            f"{100 * nxt['rms_rel_err']:.2f}%"
        ),
    }


@runner.takes_options
@takes_engine
def hold_out(chip: Chip, hypothesis: str, mechanism: str, datasets: Sequence[str]) -> HoldOut:
    """Fit without `datasets`, then predict every figure of theirs on the exact engine."""
    held = tuple(datasets)
    cal = fit(chip, hypothesis, mechanism, hold_out=held)
    full = problem(chip, chip.measured)
    targets = tuple(t for t in full.targets if t.dataset in held)
    if not targets:
        raise InputError(f"chip {chip.name}: no {', '.join(held)} figures to hold out")
    only = Problem(targets, (), full.page, full.slope_per_lap, full.laps)
    preds = evaluate(chip, only, cal.profile, slope=False).residuals
    fitted = chip.with_profile(cal.profile)
    gbps = [
        (
            float(fitted.gbps(t.bytes_per_core * chip.cores, r.model_us)),
            float(fitted.gbps(t.bytes_per_core * chip.cores, r.measured_us)),
        )
        for t, r in zip(targets, preds, strict=True)
    ]
    return HoldOut(held, cal, preds, gbps)
