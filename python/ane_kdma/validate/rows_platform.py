"""validate's rows of the platform facts: the split workaround, the control, only the total,
the core count, address scrambling and the DRAM ceiling."""

from __future__ import annotations

import random

import numpy as np

from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.contract import Task, Workload
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.profile import Profile
from ane_kdma.validate.base import (
    CEILING_SWEEP_D,
    CORE_COUNTS,
    EPS,
    GREEDY,
    ONE_MIB_PAIRS,
    SCRAMBLE_D,
    SCRAMBLE_SEED,
    Band,
    Ctx,
    Row,
    Want,
    spec_rel,
    spec_size,
)

# ---------------------------------------------------------------- split, control, only-total


def split_want(ctx: Ctx, h: Hypothesis) -> Want:
    s = ctx.split
    lb = ctx.chip.line_bytes
    out = [(ctx.fixed, ctx.lines(s.bytes_per_core // lb))]
    out += [(h, ctx.chunks([tb // lb] * n)) for n, tb in s.splits]
    return out


def split_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    s = ctx.split
    lb = ctx.chip.line_bytes
    nominal = ctx.gbps(ctx.fixed, ctx.lines(s.bytes_per_core // lb))
    rows = []
    for tasks, task_bytes in s.splits:
        g = ctx.gbps(h, ctx.chunks([task_bytes // lb] * tasks))
        err = spec_rel(g, nominal)
        rows.append(
            Row(
                "point_facts",
                f"split workaround: {spec_size(s.bytes_per_core)} as {tasks} x "
                f"{task_bytes // 1024} KiB",
                "model",
                g,
                "nominal throughput again",
                "GB/s",
                err,
                Band(f"within +-{100 * ctx.bands.split:g}% of nominal"),
                abs(err) <= ctx.bands.split + EPS,
                ctx.engine,
                f"nominal (fixed, unsplit) {nominal:.2f} GB/s; one overhead per request",
            )
        )
    return rows


def control_want(ctx: Ctx, h: Hypothesis) -> Want:
    n = ctx.control_bytes // ctx.chip.line_bytes
    return [(h, ctx.lines(n)), (h, ctx.lines(n, split=2))]


def control_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    b = ctx.control_bytes
    n = b // ctx.chip.line_bytes
    whole = ctx.gbps(h, ctx.lines(n))
    split = ctx.gbps(h, ctx.lines(n, split=2))
    gain = spec_rel(split, whole)
    v_notch = ctx.v_notch
    page = v_notch.page * ctx.chip.line_bytes if v_notch else 0
    label = f"1 MiB - {page // 1024} KiB" if page and b + page == 1 << 20 else spec_size(b)
    return [
        Row(
            "point_facts",
            f"control: {label} split in 2",
            "model",
            gain,
            "splitting gains nothing",
            "relative gain",
            gain,
            Band(f"|gain| <= {100 * ctx.bands.control:g}%"),
            abs(gain) <= ctx.bands.control + EPS,
            ctx.engine,
            f"{whole:.2f} -> {split:.2f} GB/s",
        )
    ]


def _pairs(ctx: Ctx) -> list[tuple[int, int, int]]:
    """D x N pairs that give the stated per-core total on this chip."""
    target = ctx.only_total.bytes_per_core
    geo = ctx.meas.geo
    return [
        (d, n, int(geo.lines_per_core(d, n)))
        for d, n in ONE_MIB_PAIRS
        if n % geo.cores == 0 and int(geo.bytes_per_core(d, n)) == target
    ] or [(0, 0, target // ctx.chip.line_bytes)]


def only_total_want(ctx: Ctx, h: Hypothesis) -> Want:
    return [(h, ctx.lines(n)) for _, _, n in _pairs(ctx)]


def only_total_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    sizes = _pairs(ctx)
    gbps = [ctx.gbps(h, ctx.lines(n)) for _, _, n in sizes]
    spread = max(gbps) / min(gbps) - 1
    return [
        Row(
            "point_facts",
            f"only the total matters: D x N pairs with {spec_size(ctx.only_total.bytes_per_core)} "
            "per core",
            "model",
            spread,
            f"all collapse to {ctx.only_total.gbps}",
            "GB/s spread",
            spread,
            Band(f"spread <= {100 * ctx.bands.only_total:g}%"),
            spread <= ctx.bands.only_total + EPS,
            ctx.engine,
            ", ".join(f"{d}x{n}: {g:.2f}" for (d, n, _), g in zip(sizes, gbps, strict=True)),
        )
    ]


# ---------------------------------------------------------------- cores, scrambling


def _core_count_workloads(ctx: Ctx) -> list[list[Workload]]:
    cc = ctx.core_count
    out = []
    for d in cc.d:
        size = int(ctx.meas.geo.bytes_per_core(d, cc.n))
        per = []
        for active in (a for a in CORE_COUNTS if a <= ctx.chip.cores):
            cores = tuple(
                (Task(c * size, size),) if c < active else None for c in range(ctx.chip.cores)
            )
            per.append(Workload(cores))
        out.append(per)
    return out


def core_count_want(ctx: Ctx, h: Hypothesis) -> Want:
    return [(h, w) for per in _core_count_workloads(ctx) for w in per]


def core_count_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    cc = ctx.core_count
    spreads, detail = [], []
    for d, per in zip(cc.d, _core_count_workloads(ctx), strict=True):
        lat = [ctx(h, w).cycles for w in per]
        spreads.append(max(lat) / min(lat) - 1)
        detail.append(f"D={d}: " + "/".join(str(v) for v in lat) + " cycles")
    spread = max(spreads)
    counts = [a for a in CORE_COUNTS if a <= ctx.chip.cores]
    return [
        Row(
            "point_facts",
            f"core count: {', '.join(map(str, counts))} active cores, D = "
            f"{' and '.join(map(str, cc.d))}",
            "model",
            spread,
            f"same task latency with {cc.cores.lo:g}..{cc.cores.hi:g} cores",
            "latency spread",
            spread,
            Band(f"<= {100 * ctx.bands.core_count:g}%"),
            spread <= ctx.bands.core_count + EPS,
            f"{ctx.engine} ({ctx.chip.cores} cores)",
            "; ".join(detail),
        )
    ]


def _scramble_workloads(ctx: Ctx) -> tuple[Workload, Workload]:
    sc = ctx.scrambling
    lb = ctx.chip.line_bytes
    n = ctx.meas.facts.core_count.n if ctx.meas.facts.core_count else ctx.table_a.n
    size = int(ctx.meas.geo.bytes_per_core(SCRAMBLE_D, n))
    span = int(sc.span.value * (1 << 20)) // lb * lb
    rng = random.Random(SCRAMBLE_SEED)
    cores = range(ctx.chip.cores)
    base = Workload(tuple((Task(c * size, size),) for c in cores))
    scram = Workload(
        tuple((Task(rng.randrange(0, (span - size) // lb) * lb, size),) for _ in cores)
    )
    return base, scram


def scramble_want(ctx: Ctx, h: Hypothesis) -> Want:
    return [(h, w) for w in _scramble_workloads(ctx)]


def scramble_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    sc = ctx.scrambling
    base, scram = _scramble_workloads(ctx)
    change = ctx.time(h, base) / ctx.time(h, scram) - 1
    meas_change = spec_rel(sc.scrambled.value, sc.baseline.value)
    n = ctx.meas.facts.core_count.n if ctx.meas.facts.core_count else ctx.table_a.n
    return [
        Row(
            "point_facts",
            f"scrambled core bases over {sc.span}",
            "model",
            change,
            f"{sc.baseline} -> {sc.scrambled} ({100 * meas_change:+.1f}%)",
            "throughput change",
            change,
            Band(f"|change| < {100 * ctx.bands.scramble:g}%"),
            abs(change) < ctx.bands.scramble,
            f"{ctx.engine} ({ctx.chip.cores} cores)",
            f"D = {SCRAMBLE_D}, N = {n}, seed {SCRAMBLE_SEED}; the model has no DRAM "
            "banks and its credit depends on the size alone",
        )
    ]


# ---------------------------------------------------------------- the ceiling


def _ceiling_sweep(ctx: Ctx) -> list[Workload]:
    lo, hi, step = CEILING_SWEEP_D
    n = ctx.meas.table_a.n if ctx.meas.table_a else 256 * ctx.chip.cores
    return [ctx.lines(int(x)) for x in ctx.meas.geo.lines_per_core(np.arange(lo, hi + 1, step), n)]


def ceiling_want(ctx: Ctx, h: Hypothesis) -> Want:
    return [(m, w) for m in hyps.registry() for w in _ceiling_sweep(ctx)]


def _greedy(ctx: Ctx) -> tuple[Chip, Workload]:
    p = ctx.chip.profile
    greedy = Profile(
        name=f"{p.name}-greedy",
        ns_per_cycle=p.ns_per_cycle,
        overhead_us=p.overhead_us,
        latency_cycles=GREEDY["latency_cycles"],
        window_lines=min(GREEDY["window_lines"], ctx.chip.geometry.kmem_lines),
        core_rate_q16=1 << 16,
        ceiling_gbps=p.ceiling_gbps,
        hypothesis=p.hypothesis,
    )
    return ctx.chip.with_profile(greedy), ctx.lines(1024)


def ceiling_rows(ctx: Ctx, h: Hypothesis) -> list[Row]:
    chip = ctx.chip
    ceiling = chip.ceiling_gbps
    worst_t = worst_s = 0.0
    for m in hyps.registry():
        for w in _ceiling_sweep(ctx):
            r = ctx(m, w)
            worst_t = max(worst_t, r.gbps)
            worst_s = max(worst_s, chip.stream_gbps(r.bytes_total, r.cycles))
    n = ctx.meas.table_a.n if ctx.meas.table_a else 256 * chip.cores
    lo, hi, _ = CEILING_SWEEP_D
    rows = [
        Row(
            "platform",
            f"ceiling: D = {lo}..{hi} sweep, N = {n}, all modes",
            "model",
            worst_t,
            f"physical ceiling {ceiling:g} GB/s",
            "GB/s",
            None,
            Band(f"<= {ceiling:g} GB/s"),
            worst_t <= ceiling and worst_s <= ceiling,
            "analytic",
            f"streaming rate without the overhead peaks at {worst_s:.1f} GB/s",
        )
    ]
    greedy, w = _greedy(ctx)
    res = contract.run("model", ctx.fixed, greedy, w)
    stream = greedy.stream_gbps(res.bytes_total, res.cycles)
    demand = chip.cores * chip.line_bytes / greedy.profile.ns_per_cycle
    rows.append(
        Row(
            "platform",
            f"ceiling: {chip.cores} cores each wanting 1 line/cycle",
            "model",
            stream,
            f"physical ceiling {ceiling:g} GB/s",
            "GB/s",
            None,
            Band(f"<= {ceiling:g} GB/s"),
            stream <= ceiling and res.gbps <= ceiling,
            f"model ({chip.cores} cores)",
            f"demand {demand:.1f} GB/s; with overhead {res.gbps:.1f} GB/s; "
            f"latency {greedy.profile.latency_cycles}, window {greedy.profile.window_lines}, "
            f"{w.bytes_total(chip.line_bytes) // chip.cores >> 10} KiB per core",
        )
    )
    if ctx.meas.platform is not None:
        p = chip.profile
        rate = p.core_rate_q16 / (1 << 16) * chip.line_bytes / p.ns_per_cycle
        asym = chip.cores * rate
        anemll = ctx.meas.platform.anemll
        err = spec_rel(asym, anemll.value)
        rows.append(
            Row(
                "platform",
                "anemll-bench lm_head streaming",
                "info",
                asym,
                f"{anemll} ({anemll.source.title if anemll.source else 'no source'})",
                "GB/s",
                err,
                Band(f"+-{100 * ctx.bands.towards:g}% (other workload)", ctx.bands.towards),
                abs(err) <= ctx.bands.towards,
                "analytic",
                f"model: {chip.cores} cores at the fitted per-core rate, large transfers off "
                "the notch",
            )
        )
    return rows
