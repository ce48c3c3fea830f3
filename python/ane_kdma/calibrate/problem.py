"""The fit's problem: targets, bounds and agreements from the chip's measurements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.measured import Measurements
from ane_kdma.validate import specs as vspecs
from ane_kdma.validate.specs import Bands

DATASETS = ("table_a", "points", "table_b", "table_c")  # what a target comes from (--hold-out)


@dataclass(frozen=True)
class Target:
    """A measured time the fit should reproduce."""

    name: str
    lines: int
    bytes_per_core: int
    measured_us: float
    provenance: str
    notch: bool  # at x = 0 (no credit), else full credit
    parts: tuple[int, ...] = ()  # a multi-task workload: each task's lines (); one task
    dataset: str = "table_a"


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
    parts: tuple[int, ...] = ()  # a multi-task workload, as Target.parts


@dataclass(frozen=True)
class Agreement:
    """One of validate's figure rows, held in the fit as a penalty on its excess: the model's
    figure (t[a], or t[a] / t[b]; inverted for a throughput) within `tol` of `value`."""

    name: str
    a: int  # target index
    b: int  # target index of the denominator (a speedup), or -1
    value: float
    tol: float
    invert: bool  # a throughput: the figure is 1 / time


@dataclass(frozen=True)
class Problem:
    targets: tuple[Target, ...]
    bounds: tuple[Bound, ...]
    page: int | None  # the stated recovery offset (knee constraint), if any
    slope_per_lap: float | None
    laps: tuple[int, ...]
    rising: tuple[tuple[int, ...], ...] = ()  # bounds (indices) whose throughput must rise
    held_out: tuple[str, ...] = ()  # datasets left out of the fit (to predict them)
    agreements: tuple[Agreement, ...] = ()  # validate's figure rows, each within its band
    bands: Bands | None = None  # validate's bands the problem was built with


def problem(
    chip: Chip, meas: Measurements, hold_out: Sequence[str] = (), bands: Bands | None = None
) -> Problem:
    """Targets and bounds from the chip's measurements (nothing else).

    `hold_out` names datasets (of :data:`DATASETS`) to leave out: their figures are
    neither targets nor part of a constraint, so the fit can predict them. `bands` are
    validate's (:func:`ane_kdma.validate.specs.bands`, read now, by default): every band of
    the problem comes from that one value.
    """
    band = bands if bands is not None else vspecs.bands()
    for name in hold_out:
        if name not in DATASETS:
            raise InputError(
                f"unknown dataset {name!r} to hold out (one of: {', '.join(DATASETS)})"
            )
    ta, tb, tc, f, geo = meas.table_a, meas.table_b, meas.table_c, meas.facts, meas.geo
    ring, lb = chip.ring_lines, chip.line_bytes
    use = {d for d in DATASETS if d not in hold_out}
    targets: list[Target] = []
    if ta is not None and "table_a" in use:
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
    for p in (f.shoulder, f.notch) if "points" in use else ():
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
                dataset="points",
            )
        )
    twice: dict[tuple[int, ...], list[tuple[str, float]]] = {}  # one workload, two figures
    if tb is not None and "table_b" in use:
        src = tb.source.cite()
        chunk = tb.chunk_bytes // lb
        for r in tb.rows:
            n, size = r.bytes_per_core // lb, r.bytes_per_core
            parts = (chunk,) * (n // chunk)
            for what, fig, tasks in (("unsplit", r.unsplit, ()), ("chunked", r.chunked, parts)):
                t = float(geo.time_for_gbps(size, fig.value))
                targets.append(
                    Target(
                        f"Table B D={r.d} {what}",
                        n,
                        size,
                        t,
                        f"{fig} at D={r.d}, {src}",
                        not tasks and n % ring == 0,
                        tasks,
                        "table_b",
                    )
                )
                twice.setdefault(tasks or (n,), []).append((f"Table B D={r.d} {what}", fig.value))
    if tc is not None and "table_c" in use:
        src = tc.source.cite()
        for rc in tc.rows:
            n, size = rc.tasks * rc.lines_per_task, tc.bytes_per_core
            parts = (rc.lines_per_task,) * rc.tasks if rc.tasks > 1 else ()
            targets.append(
                Target(
                    f"Table C {rc.tasks} tasks",
                    n,
                    size,
                    float(geo.time_for_gbps(size, rc.gbps.value)),
                    f"{rc.gbps} as {rc.tasks} x {rc.lines_per_task} lines, {src}",
                    not parts and n % ring == 0,
                    parts,
                    "table_c",
                )
            )
            twice.setdefault(parts or (n,), []).append((f"Table C {rc.tasks} tasks", rc.gbps.value))
    if not targets:
        raise InputError(f"chip {chip.name}: no measured times to calibrate on")
    bounds: list[Bound] = []
    rising: list[tuple[int, ...]] = []
    if f.floor is not None:
        lo, hi = f.floor.gbps.lo, f.floor.gbps.hi + band.floor_slack_gbps
        first = len(bounds)
        for k in f.floor.laps:
            b = k * ring * lb
            bounds.append(
                Bound(
                    f"floor k={k}",
                    k * ring,
                    b,
                    float(geo.time_for_gbps(b, hi)),
                    float(geo.time_for_gbps(b, lo)),
                    f"floor {lo:g}-{hi:g} GB/s at k = {_span(f.floor.laps)}, rising",
                    True,
                )
            )
        rising.append(tuple(range(first, len(bounds))))
    page = f.v_notch.page if f.v_notch is not None else None
    if f.nominal is not None:
        nom = f.nominal
        lo, hi = nom.gbps.lo * (1 - band.nominal), nom.gbps.hi * (1 + band.nominal)
        top = max(1, nom.high_bytes // (ring * lb))
        # validate's nominal sizes (one page past each lap) where the chip states the page;
        # else the largest stated size alone
        sizes = [k * ring + page for k in range(1, top + 1)] if page else [nom.high_bytes // lb]
        first = len(bounds)
        for n in sizes:
            big = n * lb
            bounds.append(
                Bound(
                    f"nominal {n} lines",
                    n,
                    big,
                    float(geo.time_for_gbps(big, hi)),
                    float(geo.time_for_gbps(big, lo)),
                    f"nominal within {lo:.4g}-{hi:.4g} GB/s ({nom.gbps} with validate's "
                    f"{band.nominal:.0%}) up to {nom.high_bytes >> 20} MiB per core "
                    "(full credit), rising",
                    False,
                )
            )
        if len(sizes) > 1:
            rising.append(tuple(range(first, len(bounds))))
    for parts, figs in twice.items():  # one workload measured twice: within 3% of both
        if len(figs) < 2 or len(parts) < 2:
            continue
        tol = band.point
        g_lo = max(g for _, g in figs) * (1 - tol)
        g_hi = min(g for _, g in figs) * (1 + tol)
        n = sum(parts)
        size = n * lb
        bounds.append(
            Bound(
                " = ".join(name for name, _ in figs),
                n,
                size,
                float(geo.time_for_gbps(size, g_hi)),
                float(geo.time_for_gbps(size, g_lo)),
                "one workload measured twice ("
                + ", ".join(f"{name} {g:g} GB/s" for name, g in figs)
                + f"): within {tol:.0%} of both",
                False,
                parts,
            )
        )
    slope = f.k_scaling.slope_per_lap.value if f.k_scaling is not None else None
    laps = tuple(f.floor.laps) if f.floor is not None else (1,)
    return Problem(
        tuple(targets),
        tuple(bounds),
        page,
        slope,
        laps,
        tuple(rising),
        tuple(hold_out),
        _agreements(targets, meas, band),
        band,
    )


def _agreements(targets: list[Target], meas: Measurements, band: Bands) -> tuple[Agreement, ...]:
    """validate's figure rows over the targets, with its bands (issue 16's 3%): each Table A
    median, each point, each Table B figure (the speedup as a ratio of two targets), each
    Table C row."""
    out: list[Agreement] = []
    first: dict[str, int] = {}
    for i, t in enumerate(targets):
        key = t.name.split(" rep ")[0]
        if key in first:
            continue
        first[key] = i
        if t.dataset == "table_a" and meas.table_a is not None:
            ta = meas.table_a
            med = float(ta.medians[list(ta.lines_per_core).index(t.lines)])
            out.append(Agreement(key, i, -1, med, band.table_a, False))
        else:
            tol = {"points": band.point, "table_b": band.table_b}.get(t.dataset, band.table_c)
            out.append(Agreement(key, i, -1, 1.0 / t.measured_us, tol, True))
    tb = meas.table_b
    if tb is not None:
        for r in tb.rows:
            u, c = first.get(f"Table B D={r.d} unsplit"), first.get(f"Table B D={r.d} chunked")
            if u is not None and c is not None:
                name = f"Table B D={r.d} speedup"
                out.append(Agreement(name, u, c, r.speedup.value, band.table_b, False))
    return tuple(out)


def _span(laps: Sequence[int]) -> str:
    return f"{laps[0]}..{laps[-1]}"
