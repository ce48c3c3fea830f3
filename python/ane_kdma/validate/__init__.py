"""Modeled against measured: declarative row specifications and one evaluator.

Each :class:`Spec` says which measured facts it needs (it is skipped when the
chip's data lacks them), which workloads it runs, on which hypothesis, and
how its rows are judged. :func:`validate` gathers every spec's workloads, runs
them in batches through the engine contract, and turns the results into rows.
Every row carries the modeled value, the measured figure, the error, the
tolerance (stated beside it) and pass/fail, and names the engine.

Rows have one of three scopes, and the exit status follows them:

* ``model``: judges the model as a whole (every Table A, B and C figure, the
  point facts, the lap times, the floor, nominal, k scaling, core count,
  scrambling, only-the-total, the split workaround and its control, the
  physical ceiling), on the best hypothesis.
* ``<hypothesis>``: judges one buggy hypothesis (the V: recovery at x = -256
  and +256 for every k, and its slope on each side of every lap). A hypothesis
  that fails one side of the V shows as failing on that row, which names the
  worst lap and side.
* ``info``: reported beside a figure from another workload (anemll-bench), never
  judged.

Every band is issue 16's, all at once with one profile; :func:`specs.tolerances`
says where each comes from and ``render`` prints that under the table.

Exit status 1 if any ``model`` row fails, or any row of the best hypothesis
fails; rows of the other hypotheses and ``info`` rows never set it. The best
hypothesis is the one with the smallest RMS relative error over the rows that
judge a hypothesis plus the two point facts. With the ranking (the chip's
fits.json, each fit on its own profile), the verdict names the head of the
ranking and says by how much it beats the runner-up: rows passed and points of
RMS (:func:`margin`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TypedDict

import numpy as np

from ane_kdma import contract, runner
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.chip import Chip
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.profile import Profile
from ane_kdma.validate.specs import (
    SPECS,
    Ctx,
    Row,
    Spec,
    Want,
    bands,
    points_of,
    tolerances,
    v_slope_want,
    v_slopes,
)

__all__ = [
    "RANK_RULE",
    "Margin",
    "Standing",
    "RULE",
    "SPECS",
    "Report",
    "Row",
    "judge",
    "margin",
    "margin_text",
    "rank",
    "rank_key",
    "ranking",
    "render",
    "standing",
    "to_json",
    "tolerances",
    "v_slope",
    "validate",
]

RULE = (
    "exit 1 if a [model] row fails or a row of the best hypothesis fails; rows of the "
    "other hypothesis and [info] rows are reported, not counted"
)


class Standing(TypedDict):
    """One fit judged on validate's counted rows, with its own profile (a ranking entry)."""

    hypothesis: str
    mechanism: str
    engine: str
    rows: int
    passed: int
    failed: list[str]
    rms_rel_err: float


class Margin(TypedDict):
    """By how much the head of a ranking beats the runner-up."""

    winner: str  # "hypothesis x mechanism"
    runner_up: str
    rows: int  # rows passed, winner minus runner-up
    rms_points: float  # RMS relative error, runner-up minus winner, in points (percent)
    tie: bool  # equal on the evidence (rows, RMS to 0.1 point): the registry's order decides


@dataclass
class Report:
    engine: str
    profile: str
    rows: list[Row]
    fit_error: dict[str, float]
    best: str
    verdict: str
    exit_status: int
    ranking: list[Standing] = field(default_factory=list)
    margin: Margin | None = None


FITS_FILE = "fits.json"
CLOSED_FORM = tuple(m.name for m in mechs.REGISTRY if m.closed_form)  # the analytic engine's


RANK_RULE = (
    "rows passed (validate's counted rows, each fit on its own profile), then the RMS "
    "relative error to 0.1%; ties in registry order (hypothesis, then mechanism)"
)


def standing(chip: Chip, profile: Profile) -> Standing:
    """One fit judged on every counted row, with its own profile: the ranking's evaluation.

    The fit runs on the analytic engine where it has the mechanism's closed form
    (within 1% of the cycle model), on the cycle model otherwise. ``calibrate``
    ranks its fits with this too, so one set of rows and tolerances judges both.
    """
    meas = chip.measured
    specs = [s for s in SPECS if meas.has(*s.needs) and s.scope in ("model", "hypothesis")]
    fitted = chip.with_profile(profile)
    h = hyps.get(profile.hypothesis)
    engine = "analytic" if profile.mechanism in CLOSED_FORM else "model"
    ctx = Ctx(fitted, meas, engine, hyps.get(hyps.FIXED), bands())
    # without the closed form, the rows the main report runs on the analytic engine
    # (the ceiling sweep) run on the cycle model too
    mine = specs if engine == "analytic" else [replace(sp, engine=None) for sp in specs]
    rows = [r for r in _evaluate(ctx, mine, h) if r.scope != "info"]  # counted rows only
    # RMS over the rows that compare with a measurement (a ceiling row's "error" is its
    # distance below the DRAM's peak, a bound, not a misfit)
    errs = [r.error for r in rows if r.error is not None and r.dataset != "platform"]
    return {
        "hypothesis": profile.hypothesis,
        "mechanism": profile.mechanism,
        "engine": engine,
        "rows": len(rows),
        "passed": sum(r.passed for r in rows),
        "failed": [r.name for r in rows if not r.passed],
        "rms_rel_err": float(np.sqrt(np.mean(np.square(errs)))) if errs else 0.0,
    }


def rank_key(e: Standing) -> tuple[int, float, int, int]:
    """Rows passed, then the RMS error to 0.1% (finer differences are not evidence); a tie
    keeps the registries' order, so no reading is preferred by name."""
    hs, ms = hyps.names(), mechs.names()
    h, m = e["hypothesis"], e["mechanism"]
    return (
        -e["passed"],
        round(e["rms_rel_err"], 3),
        hs.index(h) if h in hs else len(hs),
        ms.index(m) if m in ms else len(ms),
    )


def _rank_level(e: Standing) -> tuple[int, float]:
    """The part of the key that is evidence (a tie on it is a tie in the verdict)."""
    return rank_key(e)[:2]


def _pair(e: Standing) -> str:
    return f"{e['hypothesis']} x {e['mechanism']}"


def margin(ranked: Sequence[Standing]) -> Margin | None:
    """The head of a ranking (best first) against the runner-up; None with fewer than two."""
    if len(ranked) < 2:
        return None
    top, nxt = ranked[0], ranked[1]
    return {
        "winner": _pair(top),
        "runner_up": _pair(nxt),
        "rows": int(top["passed"]) - int(nxt["passed"]),
        "rms_points": round(100 * (float(nxt["rms_rel_err"]) - float(top["rms_rel_err"])), 2),
        "tie": _rank_level(top) == _rank_level(nxt),
    }


def margin_text(m: Margin) -> str:
    """'by 0 rows and 0.46 points of RMS over paged x demand-window' (and a tie said so)."""
    rows = f"{m['rows']} row{'' if abs(m['rows']) == 1 else 's'}"
    text = f"by {rows} and {m['rms_points']:.2f} points of RMS over {m['runner_up']}"
    if m["tie"]:
        text += " (level on the evidence: the same rows and RMS to 0.1 point; registry order)"
    return text


def rank(chip: Chip, profiles: Sequence[Profile]) -> list[Standing]:
    """These fits' standings, best first (:data:`RANK_RULE`)."""
    return sorted((standing(chip, p) for p in profiles), key=rank_key)


def ranking(chip: Chip) -> list[Standing]:
    """Every fitted hypothesis x mechanism (the chip's fits.json) on every counted row."""
    return rank(chip, chip.fits)  # read and checked with the chip, by ane_kdma.chip.load


def v_slope(
    chip: Chip, h: Hypothesis, laps: Sequence[int], engine: str = "analytic"
) -> tuple[list[float], list[float]]:
    """The V's slope per lap and side, and its R², for `h` on this chip (the V row's own
    computation, :func:`ane_kdma.validate.specs.v_slopes`), on the laps given."""
    ctx = Ctx(chip, chip.measured, engine, hyps.get(hyps.FIXED), bands())
    _run(ctx, v_slope_want(ctx, h, laps), engine)
    return v_slopes(ctx, h, laps)


def _run(ctx: Ctx, want: Want, engine: str) -> None:
    """Run every wanted workload once, batched per hypothesis."""
    by_h: dict[str, tuple[Hypothesis, list[Workload]]] = {}
    for h, w in want:
        if (h.name, w) in ctx.results:
            continue
        entry = by_h.setdefault(h.name, (h, []))
        if w not in entry[1]:
            entry[1].append(w)
    for h, ws in by_h.values():
        for w, r in zip(ws, runner.run_many(engine, h, ctx.chip, ws), strict=True):
            ctx.results[(h.name, w)] = r


def _evaluate(ctx: Ctx, specs: Sequence[Spec], h: Hypothesis) -> list[Row]:
    rows: list[Row] = []
    for spec in specs:
        sub = Ctx(ctx.chip, ctx.meas, spec.engine or ctx.engine, ctx.fixed, ctx.bands)
        sub.results = ctx.results if spec.engine is None else {}
        _run(sub, spec.want(sub, h), sub.engine)
        rows += spec.rows(sub, h)
    return rows


def judge(rows: list[Row], best: str) -> int:
    """Mark the rows that count (model rows and the best hypothesis's) and give the exit status."""
    for r in rows:
        r.counts = r.scope == "model" or r.scope == best
    return 1 if any(r.counts and not r.passed for r in rows) else 0


@runner.takes_options  # jobs=N, quiet=: how its run_many calls spread (ane_kdma.runner)
def validate(engine: str, chip: Chip, rank: bool = True) -> Report:
    """Every row the chip's data supports, the verdict and the exit status (module doc)."""
    contract.check_engine(engine)
    meas = chip.measured
    ctx = Ctx(chip, meas, engine, hyps.get(hyps.FIXED), bands())
    specs = [s for s in SPECS if meas.has(*s.needs)]
    if chip.profile.mechanism not in CLOSED_FORM:  # rows meant for the closed form: exact model
        specs = [replace(s, engine=None) if s.engine == "analytic" else s for s in specs]
    if not specs or not any(s.scope != "info" for s in specs):
        raise InputError(f"chip {chip.name}: no measurements to validate against")
    fit_error: dict[str, float] = {}
    candidates = hyps.buggy()
    judged: dict[tuple[str, str], list[Row]] = {}  # (spec, hypothesis) -> rows
    points = [s for s in specs if s.key == "points"]
    for h in candidates:
        errs = []
        for spec in specs:
            if spec.scope == "hypothesis":
                judged[(spec.key, h.name)] = _evaluate(ctx, [spec], h)
                errs += [r.error for r in judged[(spec.key, h.name)] if r.error is not None]
        errs += [r.error for r in _evaluate(ctx, points, h) if r.error is not None]
        fit_error[h.name] = float(np.sqrt(np.mean(np.square(errs)))) if errs else 0.0
    low = min(fit_error.values())
    tied = [k for k, v in fit_error.items() if v <= low + 1e-12]
    fitted = chip.profile.hypothesis
    best = fitted if fitted in fit_error else tied[0]  # a tie: the registry's order
    best_h = hyps.get(best)
    rows: list[Row] = []
    for spec in specs:  # the rows come out in the order of SPECS
        if spec.scope == "hypothesis":
            rows += [r for h in candidates for r in judged[(spec.key, h.name)]]
        else:
            rows += _evaluate(ctx, [spec], best_h)
    status = judge(rows, best)
    others = ", ".join(
        f"{k.upper()} {100 * v:.1f}%" for k, v in sorted(fit_error.items()) if k != best
    )
    n_fig = sum(
        1 for (_, h), rs in judged.items() if h == best for r in rs if r.error is not None
    ) + len(points_of(ctx))
    figures = (
        f"{n_fig} figures (the V rows and the "
        f"{' and '.join(f'D = {p.d}' for _, p in sorted(points_of(ctx), key=lambda t: t[1].d))} "
        "points)"
    )
    ranked = ranking(chip) if rank else []
    level = [e for e in ranked if _rank_level(e) == _rank_level(ranked[0])] if ranked else []
    if len({e["hypothesis"] for e in level}) > 1:
        names = " and ".join(sorted({str(e["hypothesis"]).upper() for e in level}))
        verdict = (
            f"verdict: the data cannot tell {names} apart: {level[0]['passed']}/"
            f"{level[0]['rows']} rows and the same RMS relative error "
            f"{100 * float(level[0]['rms_rel_err']):.1f}% each; the profile is "
            f"{chip.profile.hypothesis} x {chip.profile.mechanism}"
        )
    elif ranked:
        top = ranked[0]
        rest = "; ".join(f"{_pair(e)} {e['passed']}/{e['rows']}" for e in ranked[1:4])
        m = margin(ranked)
        by = f", {margin_text(m)}" if m is not None else ""
        verdict = (
            f"verdict: {str(top['hypothesis']).upper()} x {top['mechanism']} fits the measurements "
            f"best: {top['passed']}/{top['rows']} rows pass, RMS relative error "
            f"{100 * float(top['rms_rel_err']):.2f}%{by} (next: {rest}); the profile is "
            f"{chip.profile.hypothesis} x {chip.profile.mechanism}"
        )
    elif not rank:  # the profile alone, in the ranking's measure (its counted rows, RMS)
        own = standing(chip, chip.profile)
        verdict = (
            f"verdict: {str(own['hypothesis']).upper()} x {own['mechanism']} (the profile): "
            f"{own['passed']}/{own['rows']} rows pass, RMS relative error "
            f"{100 * float(own['rms_rel_err']):.2f}% (not ranked against the other fits: "
            f"--no-ranking); on {figures} alone, {best.upper()} {100 * fit_error[best]:.1f}% "
            f"against {others or 'nothing else'}"
        )
    elif n_fig == 0:  # no row tells the readings apart (a handful of timed figures)
        counted = [r for r in rows if r.scope != "info"]
        ok = sum(r.passed for r in counted)
        verdict = (
            f"verdict: {ok}/{len(counted)} rows pass; no measured figure here tells the readings "
            f"apart, so the profile's {best.upper()} x {chip.profile.mechanism} stands unjudged "
            "against the others"
        )
    elif len(tied) > 1:
        verdict = (
            f"verdict: the data cannot tell {' and '.join(t.upper() for t in tied)} apart: the "
            f"same RMS relative error {100 * low:.1f}% over {figures}; {best.upper()} is used"
        )
    else:
        verdict = (
            f"verdict: {best.upper()} fits the measurements best: RMS relative error "
            f"{100 * fit_error[best]:.1f}% over {figures}, against {others or 'nothing else'}"
        )
    return Report(
        engine, chip.profile.name, rows, fit_error, best, verdict, status, ranked, margin(ranked)
    )


# ---------------------------------------------------------------- output


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit in ("us",):
        return f"{v:.1f} us"
    if unit == "GB/s":
        return f"{v:.2f} GB/s"
    if unit in ("R^2",):
        return f"{v:.4f}"
    if "us/line" in unit:
        return f"{v:.3f} {unit}"
    if unit == "x":  # a ratio of two throughputs (Table B's speedup)
        return f"{v:.2f}x"
    return f"{100 * v:+.2f}%"


WIDTH = 100  # columns of the text report (the table wraps its text into them)


def render(report: Report, chip: Chip) -> str:
    """The table in WIDTH columns: per row, its status, scope, modeled figure, error and name
    on one line, then what was measured, its band and (when not the report's) its engine,
    wrapped under the name. No column is padded at the end of a line."""
    head = ("status", "scope", "modeled", "error")
    table = []
    for r in report.rows:
        if r.scope == "info":
            status = "info"
        elif r.passed:
            status = "PASS"
        else:
            status = "FAIL" if r.counts else "fail*"
        cells = (
            status,
            r.scope,
            _fmt(r.modeled, r.unit),
            "-" if r.error is None else f"{100 * r.error:+.1f}%",
        )
        said = f"measured {r.measured}; band {r.tolerance}"
        if r.engine != report.engine:
            said += f"; on {r.engine}"
        table.append((cells, r.name, said))
    widths = [max(len(h), *(len(c[i]) for c, _, _ in table)) for i, h in enumerate(head)]
    indent = sum(widths) + 2 * len(widths)
    text_width = max(WIDTH - indent, 30)
    lines = [
        f"validate: engine {report.engine}, profile {report.profile}; {chip.path.name}/measured",
        *textwrap.wrap(f"rule: {RULE} (fail* = a failing row that does not count)", WIDTH),
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + "  row",
    ]
    for cells, name, said in table:
        first = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  "
        named = textwrap.wrap(name, text_width)
        lines.append(first + named[0])
        lines += [" " * indent + t for t in named[1:]]
        lines += [" " * (indent + 2) + t for t in textwrap.wrap(said, text_width - 2)]
    lines.append("notes:")
    for r in report.rows:
        if r.note:
            lines += textwrap.wrap(
                f"{r.name} [{r.scope}]: {r.note}",
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    lines.append("tolerances: each band, and where it comes from")
    for band, why in tolerances(chip.measured):
        lines += textwrap.wrap(
            f"{band}: {why}", WIDTH, initial_indent="  ", subsequent_indent="    "
        )
    if report.ranking:
        lines.append("ranking: every fitted hypothesis x mechanism, its own profile, counted rows")
        for e in report.ranking:
            failed = ", ".join(str(f) for f in e["failed"][:3]) or "-"
            lines += textwrap.wrap(
                f"{e['hypothesis']:<8} x {e['mechanism']:<13} {e['passed']:>3}/{e['rows']:<3} "
                f"RMS {100 * float(e['rms_rel_err']):5.1f}%  ({e['engine']}) failed: {failed}",
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    lines += textwrap.wrap(report.verdict, WIDTH, subsequent_indent="  ")
    lines.append(f"exit status {report.exit_status}")
    return "\n".join(lines)


def to_json(report: Report, chip: Chip) -> dict[str, object]:
    return {
        "engine": report.engine,
        "profile": report.profile,
        "rule": RULE,
        "rows": [{**asdict(r), "tolerance": str(r.tolerance)} for r in report.rows],
        "fit_error": report.fit_error,
        "best_hypothesis": report.best,
        "verdict": report.verdict,
        "ranking": report.ranking,
        "margin": report.margin,
        "tolerances": [{"band": b, "source": w} for b, w in tolerances(chip.measured)],
        "exit_status": report.exit_status,
    }
