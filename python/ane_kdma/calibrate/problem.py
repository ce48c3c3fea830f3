"""The fit's problem: targets, bounds and agreements from the chip's measurements.

Nothing here reads a measured fact: the figures come as validate's checks
(:func:`ane_kdma.validate.base.measured_checks`: targets and agreements) and the rule-type
facts as validate's rules (:func:`ane_kdma.validate.base.measured_rules`: the floor and
nominal bounds, the V's page, slope and laps), so validate and the fit hold the same sizes
to the same bands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.measured import Measurements
from ane_kdma.validate import base as vbase
from ane_kdma.validate import specs as vspecs
from ane_kdma.validate.specs import Bands, Check

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
    geo, ring, lb = meas.geo, chip.ring_lines, chip.line_bytes
    use = {d for d in DATASETS if d not in hold_out}
    checks = [c for c in vbase.measured_checks(chip, meas, band) if c.dataset in use]
    targets = _targets(checks, geo, ring)
    twice: dict[tuple[int, ...], list[tuple[str, float]]] = {}  # one workload, two figures
    for c in checks:
        if c.dataset in ("table_b", "table_c") and c.unit == "GB/s":
            twice.setdefault(c.parts, []).append((c.key, c.value))
    if not targets:
        if meas.timings is not None:
            raise InputError(
                f"chip {chip.name}: measured/timings.json holds timed convolutions, not the "
                f"tables a full fit needs: calibrate --chip {chip.path.name} --prior CHIP"
            )
        raise InputError(f"chip {chip.name}: no measured times to calibrate on")
    bounds: list[Bound] = []
    rising: list[tuple[int, ...]] = []
    rules = vbase.measured_rules(chip, meas, band)
    for rule in (rules.floor, rules.nominal):  # each size a bound, the sizes rising
        if rule is None:
            continue
        first = len(bounds)
        for key, n in zip(rule.keys, rule.sizes, strict=True):
            size = n * lb
            bounds.append(
                Bound(
                    key,
                    n,
                    size,
                    float(geo.time_for_gbps(size, rule.hi_gbps)),
                    float(geo.time_for_gbps(size, rule.lo_gbps)),
                    rule.statement,
                    rule.notch,
                )
            )
        if len(rule.sizes) > 1:
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
    return Problem(
        tuple(targets),
        tuple(bounds),
        rules.v.page,
        rules.v.slope_per_lap,
        rules.v.laps,
        tuple(rising),
        tuple(hold_out),
        _agreements(targets, checks),
        band,
    )


def _targets(checks: Sequence[Check], geo: Chip, ring: int) -> list[Target]:
    """The fit's times, one per measured figure (each Table A replica its own), in the
    checks' order with Table A's replicas outermost; a speedup is an agreement, not a time."""
    out: list[Target] = []
    reps = [name for c in checks if c.samples for name, _ in c.samples]
    for rep in dict.fromkeys(reps):  # Table A, replica by replica
        for c in checks:
            for name, t in c.samples:
                if name == rep:
                    out.append(_target(c, f"{c.key} rep {rep}", t, f"replica {rep}, ", ring))
    for c in checks:
        if c.samples or c.unit == "x":
            continue
        t = c.value if c.unit == "us" else float(geo.time_for_gbps(c.bytes_per_core, c.value))
        out.append(_target(c, c.key, t, "", ring))
    return out


def _target(c: Check, name: str, t: float, said: str, ring: int) -> Target:
    parts = c.parts if len(c.parts) > 1 else ()
    notch = not parts and c.lines % ring == 0
    return Target(
        name, c.lines, c.bytes_per_core, float(t), said + c.provenance, notch, parts, c.dataset
    )


def _agreements(targets: list[Target], checks: Sequence[Check]) -> tuple[Agreement, ...]:
    """validate's checks over the targets, each within its own band: a time (Table A's
    median), a throughput (the inverse of a time) or a speedup (a ratio of two targets of
    its table)."""
    out: list[Agreement] = []
    first: dict[str, int] = {}
    for i, t in enumerate(targets):
        first.setdefault(t.name.split(" rep ")[0], i)
    by_work: dict[tuple[str, tuple[int, ...]], int] = {}
    for i, t in enumerate(targets):
        by_work.setdefault((t.dataset, t.parts or (t.lines,)), i)
    for c in checks:
        if c.unit == "x" or c.key not in first:
            continue
        i = first[c.key]
        tol = _rel(c)
        if c.unit == "us":
            out.append(Agreement(c.key, i, -1, c.value, tol, False))
        else:
            out.append(Agreement(c.key, i, -1, 1.0 / targets[i].measured_us, tol, True))
    for c in checks:
        if c.unit != "x":
            continue
        u, k = by_work.get((c.dataset, c.over)), by_work.get((c.dataset, c.parts))
        if u is not None and k is not None:
            out.append(Agreement(c.key, u, k, c.value, _rel(c), False))
    return tuple(out)


def _rel(c: Check) -> float:
    if c.band.rel is None:
        raise ValueError(f"{c.key}: band {c.band} is not relative")
    return c.band.rel
