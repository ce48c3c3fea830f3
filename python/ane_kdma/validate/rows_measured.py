"""validate's rows of the measured tables: Table A, the point facts, Tables B and C.

Each measured figure is translated once, by :func:`ane_kdma.validate.base.measured_checks`,
into a check (its workload, value and band): the rows here render those checks, and
calibrate's problem consumes the same checks as its targets and agreements, so the two
cannot read a measurement differently.
"""

from __future__ import annotations

import numpy as np

from ane_kdma.contract import Workload
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.measured import (
    Point,
    TableA,
)
from ane_kdma.validate.base import (
    Check,
    Ctx,
    Row,
    Want,
    spec_rel,
    spec_tol,
)


def _load(ctx: Ctx, c: Check, parts: tuple[int, ...]) -> Workload:
    """A check's workload as validate runs it: one task by size, several as chunks (Table C
    always as chunks, as it states its tasks)."""
    if len(parts) == 1 and c.dataset != "table_c":
        return ctx.lines(parts[0])
    return ctx.chunks(parts)


def _of(ctx: Ctx, dataset: str) -> list[Check]:
    return [c for c in ctx.checks if c.dataset == dataset]


def checks_want(ctx: Ctx, h: Hypothesis, dataset: str) -> Want:
    out: Want = []
    for c in _of(ctx, dataset):
        if c.unit != "x":  # a speedup runs its two figures' workloads
            out.append((h, _load(ctx, c, c.parts)))
    return out


def check_row(ctx: Ctx, h: Hypothesis, c: Check, row_dataset: str) -> Row:
    """One check, rendered: the model's figure against the measured one, within its band."""
    if c.unit == "us":
        model = ctx.time(h, _load(ctx, c, c.parts))
    elif c.unit == "x":
        model = ctx.gbps(h, _load(ctx, c, c.parts)) / ctx.gbps(h, _load(ctx, c, c.over))
    else:
        model = ctx.gbps(h, _load(ctx, c, c.parts))
    if c.per_call:  # a Core ML predict time: the host's per-call cost is in the figure
        model += ctx.chip.profile.predict_overhead_us
    err = spec_rel(model, c.value)
    return Row(
        row_dataset,
        c.label,
        "model",
        model,
        c.measured,
        c.unit,
        err,
        c.band,
        c.band.holds(err),
        ctx.engine,
    )


# ---------------------------------------------------------------- Table A and the points


def table_a_want(ctx: Ctx, h: Hypothesis) -> Want:
    return checks_want(ctx, h, "table_a")


def table_a_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    ta = ctx.table_a
    rows = [check_row(ctx, h, c, "table_a") for c in _of(ctx, "table_a")]
    errs = [float(r.error or 0.0) for r in rows]
    worst = max(errs, key=abs)
    band = spec_tol(ctx.bands.table_a)
    rows.append(
        Row(
            "table_a",
            "Table A worst of all D",
            "model",
            worst,
            "-",
            "relative",
            worst,
            band,
            band.holds(worst),
            ctx.engine,
            f"D = {ta.d[int(np.argmax(np.abs(errs)))]}; the replicas' own spread "
            f"{100 * replica_spread(ta):.1f}% (RMS of each replica against its D's median)",
        )
    )
    return rows


def replica_spread(ta: TableA) -> float:
    """The replicas' own spread: the RMS relative deviation of every replica from its D's
    median (2.3% for m3's Table A: issue 16's "about 2.3%", the basis of the 3% band)."""
    reps = np.array(list(ta.replicas.values()), dtype=float)
    return float(np.sqrt(np.mean(np.square(reps / ta.medians - 1))))


def points_of(ctx: Ctx) -> list[tuple[str, Point]]:
    f = ctx.meas.facts
    out: list[tuple[str, Point]] = []
    if f.shoulder is not None:
        out.append((f"D = {f.shoulder.d} (x = {f.shoulder.x:+d})", f.shoulder))
    if f.notch is not None:
        out.append((f"D = {f.notch.d} (x = 0)", f.notch))
    return out


def point_want(ctx: Ctx, h: Hypothesis) -> Want:
    return checks_want(ctx, h, "points")


def point_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    return [check_row(ctx, h, c, "point_facts") for c in _of(ctx, "points")]


# ---------------------------------------------------------------- Tables B and C (issue 16)


def table_b_want(ctx: Ctx, h: Hypothesis) -> Want:
    return checks_want(ctx, h, "table_b")


def table_b_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    return [check_row(ctx, h, c, "table_b") for c in _of(ctx, "table_b")]


def table_c_want(ctx: Ctx, h: Hypothesis) -> Want:
    return checks_want(ctx, h, "table_c")


def table_c_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    return [check_row(ctx, h, c, "table_c") for c in _of(ctx, "table_c")]


# ---------------------------------------------------------------- timed convolutions


def timings_want(ctx: Ctx, h: Hypothesis) -> Want:
    return checks_want(ctx, h, "timings")


def timings_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    """Each timed convolution, modeled with the profile's per-prediction overhead where the
    file's method says the time includes one (a Core ML predict time)."""
    return [check_row(ctx, h, c, "timings") for c in _of(ctx, "timings")]
