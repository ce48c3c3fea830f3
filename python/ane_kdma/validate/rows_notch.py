"""validate's rows of the notch: the floor, nominal, k scaling, the lap times and the V."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.stats import fit_line
from ane_kdma.validate.base import (
    EPS,
    SLOPE_STEP,
    Band,
    Ctx,
    Row,
    Rule,
    Want,
    spec_laps,
    spec_rel,
    spec_rising,
    spec_some,
)

# ---------------------------------------------------------------- floor, nominal, k scaling


def _rule(ctx: Ctx, name: str) -> Rule:
    """The floor or nominal rule (:func:`ane_kdma.validate.base.measured_rules`), the one
    calibrate's bounds are made of; present whenever the spec that reads it runs."""
    rule: Rule | None = getattr(ctx.rules, name)
    if rule is None:
        raise InputError(f"validate: a row reads the {name} rule, which the data does not state")
    return rule


def floor_want(ctx: Ctx, h: Hypothesis) -> Want:
    return [(m, ctx.lines(n)) for n in _rule(ctx, "floor").sizes for m in (h, ctx.fixed)]


def floor_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    rule = _rule(ctx, "floor")
    floor = [ctx.gbps(h, ctx.lines(n)) for n in rule.sizes]
    outside = rule.outside(floor)
    rising = spec_rising(floor)
    miss = [f"{rule.at[i]}: {floor[i]:.2f} GB/s outside" for i in outside]
    if not rising:
        laps = [n // ctx.ring for n in rule.sizes]  # the floor's sizes are whole laps
        falls = [
            f"k = {laps[i]} -> {laps[i + 1]}: {floor[i]:.2f} -> {floor[i + 1]:.2f}"
            for i in range(len(floor) - 1)
            if floor[i + 1] <= floor[i]
        ]
        miss.append("NOT rising (" + ", ".join(falls) + ")")
    return [
        Row(
            "point_facts",
            rule.label,
            "model",
            min(floor),
            rule.measured,
            "GB/s",
            None,
            rule.band,
            not outside and rising,
            ctx.engine,
            " / ".join(f"{g:.2f}" for g in floor) + " GB/s" + "".join(f"; {m}" for m in miss),
            {"per_k": floor},
        )
    ]


def nominal_want(ctx: Ctx, h: Hypothesis) -> Want:
    return [(h, ctx.lines(n)) for n in _rule(ctx, "nominal").sizes]


def nominal_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    rule = _rule(ctx, "nominal")
    g = [ctx.gbps(h, ctx.lines(n)) for n in rule.sizes]
    rising = spec_rising(g)
    return [
        Row(
            "point_facts",
            rule.label,
            "model",
            g[-1],
            rule.measured,
            "GB/s",
            None,
            rule.band,
            rising and not rule.outside(g),
            ctx.engine,
            " / ".join(f"{x:.2f}" for x in g) + " GB/s" + ("" if rising else "; NOT rising"),
            {"gbps": g},
        )
    ]


def k_scaling_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    laps = np.array(ctx.floor.laps, dtype=float)
    excess = np.array(
        [
            ctx.time(h, ctx.lines(k * ctx.ring)) - ctx.time(ctx.fixed, ctx.lines(k * ctx.ring))
            for k in ctx.floor.laps
        ]
    )
    beta = float((laps * excess).sum() / (laps**2).sum())
    ss_res = float(((excess - beta * laps) ** 2).sum())
    ss_tot = float(((excess - excess.mean()) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return [
        Row(
            "point_facts",
            "k scaling: excess time over fixed at x = 0 proportional to k",
            "model",
            r2,
            f"extra time scales with k (per-k fits R^2 {ctx.k_scaling.r_squared})",
            "R^2",
            None,
            Band(f"R^2 >= {ctx.bands.k_scaling_r2:g}"),
            r2 >= ctx.bands.k_scaling_r2,
            ctx.engine,
            f"{beta:.1f} us lost per lap",
            {"excess_us": excess.tolist()},
        )
    ]


# ---------------------------------------------------------------- lap times


def lap_want(ctx: Ctx, h: Hypothesis) -> Want:
    x = -ctx.lap_times.shoulder_offset
    return [(h, ctx.lines(k * ctx.ring)) for k in ctx.floor.laps] + [(h, ctx.lines(ctx.ring + x))]


def lap_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    """The lap times as the article reads them (issue 16): at x = 0 the median over the
    measured laps of time / k; at the shoulder the one-lap task, x = -offset."""
    lt, laps = ctx.lap_times, ctx.floor.laps
    per = [ctx.time(h, ctx.lines(k * ctx.ring)) / k for k in laps]
    notch = float(np.median(per))
    x = -lt.shoulder_offset
    shoulder = ctx.time(h, ctx.lines(ctx.ring + x))
    tol = Band.relative(ctx.bands.lap)
    rows = []
    per_k: dict[str, object] = {"per_k": per}
    for name, model, fig, note, values in (
        (
            f"lap time at x = 0: median over k = {spec_laps(laps)} of time / k",
            notch,
            lt.notch,
            "time / k: " + " / ".join(f"{t:.0f}" for t in per) + " us",
            per_k,
        ),
        (
            f"lap time at x = {x:+d}: one lap (k = 1)",
            shoulder,
            lt.shoulder,
            f"the article's shoulder at |x| = {lt.shoulder_offset}, read on the one-lap task",
            {},
        ),
    ):
        err = spec_rel(model, fig.value)
        rows.append(
            Row(
                "point_facts",
                name,
                "model",
                model,
                str(fig),
                "us",
                err,
                tol,
                abs(err) <= ctx.bands.lap + EPS,
                ctx.engine,
                note,
                values,
            )
        )
    return rows


# ---------------------------------------------------------------- the V, per hypothesis


def v_want(ctx: Ctx, h: Hypothesis) -> Want:
    out, v = [], ctx.rules.v
    for k in v.laps:
        for x in v.recovery:
            out += [(h, ctx.lines(k * ctx.ring + x)), (ctx.fixed, ctx.lines(k * ctx.ring + x))]
    return out + v_slope_want(ctx, h)


def v_slope_want(ctx: Ctx, h: Hypothesis, laps: Sequence[int] | None = None) -> Want:
    """The sizes the V's slope is fitted on: every lap (the measured ones unless told), and
    |x| <= ctx.bands.slope_x in steps of SLOPE_STEP on both sides."""
    laps = ctx.rules.v.laps if laps is None else laps
    xs = range(-ctx.bands.slope_x, ctx.bands.slope_x + 1, SLOPE_STEP)
    return [(h, ctx.lines(k * ctx.ring + x)) for k in laps for x in xs]


def _arm(ctx: Ctx, h: Hypothesis, k: int, xs: np.ndarray) -> tuple[float, float]:
    """Slope (µs per line, time falling away from the notch) and R² of time against |x|."""
    t = np.array([ctx.time(h, ctx.lines(k * ctx.ring + int(v))) for v in xs])
    return fit_line(np.abs(xs).astype(float), t)


def v_slopes(
    ctx: Ctx, h: Hypothesis, laps: Sequence[int] | None = None
) -> tuple[list[float], list[float]]:
    """Per lap and side: the slope of time on |x| over |x| <= slope_x, divided by k, and R².

    The one computation of the V's slope: the V row judges it, and calibrate chooses each
    reading's window with it (on fewer laps, for speed)."""
    per_k, r2s = [], []
    for k in ctx.rules.v.laps if laps is None else laps:
        for side in (-1, 1):
            xs = side * np.arange(0, ctx.bands.slope_x + 1, SLOPE_STEP)
            slope, r2 = _arm(ctx, h, k, xs)
            per_k.append(slope / k)
            r2s.append(r2)
    return per_k, r2s


def v_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    rows, v = [], ctx.rules.v
    for x in sorted(v.recovery):
        errs = []
        for k in v.laps:
            w = ctx.lines(k * ctx.ring + x)
            errs.append(ctx.gbps(h, w) / ctx.gbps(ctx.fixed, w) - 1)
        worst = max(errs, key=abs)
        k_worst = v.laps[errs.index(worst)]
        rows.append(
            Row(
                "point_facts",
                f"V recovery at x = {x:+d}, k = {spec_laps(v.laps)}",
                h.name,
                worst,
                "recovers fully (0% from nominal)",
                "relative to fixed",
                worst,
                Band(f"within +-{100 * ctx.bands.recovery:g}% of the fixed hardware, every k"),
                abs(worst) <= ctx.bands.recovery + EPS,
                ctx.engine,
                f"worst k = {k_worst}; nominal = the fixed design at the same size",
                {"per_k": [round(e, 5) for e in errs]},
            )
        )
    rows.append(_v_slope_row(ctx, h))
    return rows


SIDES = ("x < 0", "x > 0")  # v_slopes' order within a lap: the left arm, then the right


def _v_slope_row(ctx: Ctx, h: Hypothesis) -> Row:
    """One row for the V's slope: every lap and each side judged on its own fit, the row
    naming the worst (k, side) for the slope and for R^2."""
    v = ctx.rules.v
    laps, slope_meas = v.laps, v.slope_per_lap
    if slope_meas is None:
        raise InputError("validate: the V's slope row reads k_scaling, which the data lacks")
    per_k, r2s = v_slopes(ctx, h)
    where = [(k, side) for k in laps for side in SIDES]
    errs = [spec_rel(v, slope_meas) for v in per_k]
    i = max(range(len(errs)), key=lambda j: abs(errs[j]))
    j = min(range(len(r2s)), key=lambda n: r2s[n])
    bad = [
        f"k = {k}, {side}"
        for (k, side), e, r2 in zip(where, errs, r2s, strict=True)
        if abs(e) > ctx.bands.slope + EPS or r2 < ctx.bands.slope_r2
    ]

    def at(n: int) -> str:
        return f"k = {where[n][0]}, {where[n][1]}"

    return Row(
        "point_facts",
        f"V slope near the notch (|x| <= {ctx.bands.slope_x}), each side, k = {spec_laps(laps)}",
        h.name,
        per_k[i],
        v.slope_measured,
        "us/line/lap",
        errs[i],
        Band(
            f"every k and side within +-{100 * ctx.bands.slope:g}% of {slope_meas:g} k, "
            f"R^2 >= {ctx.bands.slope_r2:g}"
        ),
        not bad,
        ctx.engine,
        f"worst slope {at(i)}: {per_k[i]:.3f} us/line per lap ({100 * errs[i]:+.1f}%); "
        f"worst R^2 {at(j)}: {r2s[j]:.3f}; slope/k {min(per_k):.3f}..{max(per_k):.3f}; "
        f"|x| step {SLOPE_STEP}" + (f"; failing: {spec_some(bad)}" if bad else ""),
        {
            "slope_per_k": per_k,
            "r2": r2s,
            "where": [f"k = {k}, {side}" for k, side in where],
            "worst_slope": at(i),
            "worst_r2": at(j),
        },
    )
