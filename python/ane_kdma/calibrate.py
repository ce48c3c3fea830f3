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

import functools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from ane_kdma import analytic, contract, progress, runner, validate
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.chip import MEASURED_DIR, Chip, chips_dir
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE, RTL_SETTINGS
from ane_kdma.measured import Measurements
from ane_kdma.profile import (
    MAX_DWIN_STEP_LINES,
    MAX_LATENCY_CYCLES,
    MAX_WARM_LINES,
    Profile,
)
from ane_kdma.validate import specs as vspecs
from ane_kdma.validate.specs import SLOPE_R2, SLOPE_X

FIT_WINDOWS = (8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 256)
PENALTY = 100.0  # weight of a violated constraint (relative units squared)
START_WINDOW = 64  # window the first pass assumes; the V then chooses it
# The per-core rate is searched below half a line a cycle (4.0 GB/s a core at the hand-set
# 8 ns, 64 GB/s for 16 cores), above every measured per-core figure (60 GB/s / 16 = 3.75).
# Above half a core's token bucket lets two lines go in consecutive cycles, so identical cores
# meet at the aggregate bucket every few dozen lines and the cycle model, exact, costs time
# linear in the size (16 cores x 1 M lines of the fix: 1.0 s at 0.507, 0.011 s at 0.5); at
# exactly half its period search misses the 16 cores' joint period on a paged stream (a 16-core
# paged transfer at x = -1: 17 s per million lines, against 5.5 s at any size one step below).
# docs/speed.md has the measurements.
MAX_RATE_Q16 = RATE_ONE // 2 - 1
MAX_RATE = MAX_RATE_Q16 / RATE_ONE


DATASETS = ("table_a", "points", "table_b", "table_c")  # what a target comes from (--hold-out)


# ---------------------------------------------------------------- the exact engine

EXACT_ENGINE = "model"  # the default: the cycle model (the RTL's counters, exactly)
RTL_ENGINES = ("rtl", "cocotb")  # the RTL itself: only the mechanisms built in rtl/
_ENGINE: ContextVar[str] = ContextVar("ane_kdma_calibrate_engine", default=EXACT_ENGINE)


def exact_engine() -> str:
    """The engine the exact evaluations run on (set by :func:`engine_options`)."""
    return _ENGINE.get()


def check_engine(name: str) -> str:
    """An engine calibrate can evaluate on: any exact engine of the contract (one line if not)."""
    contract.check_engine(name)
    if not contract.get_engine(name).exact:
        exact = [e.name for e in contract.REGISTRY if contract.get_engine(e.name).exact]
        raise InputError(
            f"calibrate needs an exact engine and {name} is not: it is the closed form the "
            f"search itself runs on (within {ANALYTIC_TOL:.0%} of the cycle model on paged "
            "readings), which the residuals, constraint checks and correction check exactly; "
            f"use --engine {', '.join(exact[:-1])} or {exact[-1]}"
        )
    return name


def rtl_lacks(mechanism: str) -> list[str]:
    """The mechanism's run-time inputs the RTL has no input for (empty: rtl/ builds it)."""
    return [i for i in mechs.get(mechanism).inputs if i not in RTL_SETTINGS]


def check_mechanisms(engine: str, mechanisms: Sequence[str]) -> None:
    """Refuse, before any fit, a mechanism the engine cannot run (the RTL builds a few)."""
    if engine not in RTL_ENGINES:
        return
    lacking = [m for m in dict.fromkeys(mechanisms) if rtl_lacks(m)]
    if lacking:
        built = [m.name for m in mechs.REGISTRY if not rtl_lacks(m.name)]
        raise InputError(
            f"--engine {engine}: the RTL does not build the {', '.join(lacking)} "
            f"mechanism{'s' if len(lacking) > 1 else ''} (it builds {', '.join(built)}): "
            "name one of those with --hypothesis and --mechanism, or use --engine model"
        )


def check_chip(engine: str, chip: Chip) -> None:
    """Refuse, before any fit, a chip the engine cannot build (the RTL's line size and KMem)."""
    if engine in RTL_ENGINES:
        from ane_kdma.engines.cocotb import check_chip as rtl_check_chip

        rtl_check_chip(chip)


@contextmanager
def engine_options(engine: str | None = None) -> Iterator[str]:
    """Within the block, the exact evaluations run on `engine` (None: as they were).

    Why a context, as runner.options is for --jobs: the exact runs sit deep
    in the fit (the correction, the V, the residuals), and the caller decides.
    """
    if engine is None:
        yield exact_engine()
        return
    token = _ENGINE.set(check_engine(engine))
    try:
        yield engine
    finally:
        _ENGINE.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def takes_engine(fn: F) -> F:
    """Give `fn` an `engine=` keyword that sets :func:`engine_options` around it."""

    @functools.wraps(fn)
    def wrapped(*args: Any, engine: str | None = None, **kw: Any) -> Any:
        with engine_options(engine):
            return fn(*args, **kw)

    return wrapped  # type: ignore[return-value]


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


# ---------------------------------------------------------------- the problem


def problem(chip: Chip, meas: Measurements, hold_out: Sequence[str] = ()) -> Problem:
    """Targets and bounds from the chip's measurements (nothing else).

    `hold_out` names datasets (of :data:`DATASETS`) to leave out: their figures are
    neither targets nor part of a constraint, so the fit can predict them.
    """
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
        lo, hi = f.floor.gbps.lo, f.floor.gbps.hi + vspecs.FLOOR_SLACK_GBPS
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
        lo, hi = nom.gbps.lo * (1 - vspecs.NOMINAL_TOL), nom.gbps.hi * (1 + vspecs.NOMINAL_TOL)
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
                    f"{vspecs.NOMINAL_TOL:.0%}) up to {nom.high_bytes >> 20} MiB per core "
                    "(full credit), rising",
                    False,
                )
            )
        if len(sizes) > 1:
            rising.append(tuple(range(first, len(bounds))))
    for parts, figs in twice.items():  # one workload measured twice: within 3% of both
        if len(figs) < 2 or len(parts) < 2:
            continue
        tol = vspecs.POINT_TOL
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
        _agreements(targets, meas),
    )


def _agreements(targets: list[Target], meas: Measurements) -> tuple[Agreement, ...]:
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
            out.append(Agreement(key, i, -1, med, vspecs.TABLE_A_TOL, False))
        else:
            tol = {"points": vspecs.POINT_TOL, "table_b": vspecs.TABLE_B_TOL}.get(
                t.dataset, vspecs.TABLE_C_TOL
            )
            out.append(Agreement(key, i, -1, 1.0 / t.measured_us, tol, True))
    tb = meas.table_b
    if tb is not None:
        for r in tb.rows:
            u, c = first.get(f"Table B D={r.d} unsplit"), first.get(f"Table B D={r.d} chunked")
            if u is not None and c is not None:
                name = f"Table B D={r.d} speedup"
                out.append(Agreement(name, u, c, r.speedup.value, vspecs.TABLE_B_TOL, False))
    return tuple(out)


def _span(laps: Sequence[int]) -> str:
    return f"{laps[0]}..{laps[-1]}"


# ---------------------------------------------------------------- the fast search


@dataclass(frozen=True)
class Knobs:
    """Continuous fit variables (the search's space), and their integer profile."""

    rate: float  # lines per cycle
    start: float  # governor start, as a fraction of the rate (1: no ramp)
    ramp_lines: float
    period_per_line: float  # (latency + 2) / window
    window: int
    warm_per_line: float = 0.0  # demand-warmup: the extra latency / window
    warm_lines: float = 0.0  # demand-warmup: the starved lines that pay it
    dwin_frac: float = 1.0  # demand-window: its start / window
    dwin_step: float = 1.0  # demand-window: starved lines per line it gains

    def period(self) -> int:
        return max(3, min(MAX_LATENCY_CYCLES + 2, round(self.period_per_line * self.window)))

    def extra(self) -> int:
        """The demand warm-up's extra cycles (latency + extra stays in the latency range)."""
        room = MAX_LATENCY_CYCLES - (self.period() - 2)
        return max(0, min(room, round(self.warm_per_line * self.window)))

    def dwin_start(self) -> int:
        return max(1, min(self.window - 1, round(self.dwin_frac * self.window)))


# A correction per target and per bound (cycles): the exact model's cycles on one core less
# the search's closed form, at the last fit (:func:`_correction`). Zero: none yet.
Fix = tuple[np.ndarray, np.ndarray]
CORRECTIONS = 2  # search, correct, search again: twice (the second moves the fit < 0.1%)
STARVED_WINDOWS = (64, 72, 80, 88, 96, 104, 112)  # the windows the V chooses from (starved fits)


def _starved_extra(k: Knobs, mech: mechs.Mechanism, lines: np.ndarray) -> np.ndarray:
    """Cycles a starved-stream mechanism adds to a request of `lines` starved lines (credit
    0), as a fluid: the demand window carries `window` lines per round trip.

    demand-warmup: each of the first warm_lines lines holds its slot `extra` cycles longer.
    demand-window: the window grows from its start by one line every dwin_step lines.
    The search's estimate only: :func:`_correction` brings it to the cycle model.
    """
    n = np.asarray(lines, dtype=float)
    if mech.name == "demand-warmup":
        return np.minimum(n, k.warm_lines) * k.warm_per_line
    if mech.name == "demand-window":
        w = float(k.window)
        w0 = float(np.clip(k.dwin_frac, 1.0 / w, 1.0)) * w
        m = max(k.dwin_step, 1.0)
        grown = np.minimum(n, (w - w0) * m)
        return k.period() * (m * np.log((w0 + grown / m) / w0) - grown / w)
    return np.zeros(n.shape)


def _cycles(
    chip: Chip, k: Knobs, mech: mechs.Mechanism, lines: np.ndarray, notch: np.ndarray
) -> np.ndarray:
    """One core's cycles for each size, at the notch (no credit) or at full credit.

    The closed form itself (:func:`ane_kdma.analytic.governor_grid`), not an engine: the
    search needs it over a grid of knobs, which no engine of the contract offers. A
    starved-stream mechanism adds its fluid estimate at the notch."""
    clamp = chip.geometry.prefetch_max_lines
    rate = min(k.rate, MAX_RATE) * RATE_ONE
    steps = max(mech.steps, 1)
    out = analytic.governor_grid(
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
    if mech.name in mechs.STARVED:
        out = out + np.where(notch, _starved_extra(k, mech, lines), 0.0)
    return out


def _penalty(t: float, lo: float, hi: float) -> float:
    if t > hi:
        return PENALTY * ((t - hi) / hi) ** 2
    if t < lo:
        return PENALTY * ((lo - t) / lo) ** 2
    return 0.0


RISE = 1e-3  # a rising figure rises by at least 0.1% a step (a flat step is not a rise)
INSIDE = 0.002  # an agreement is held this far inside its band (the search is not the engine)


def _agreement_penalty(prob: Problem, times: np.ndarray) -> float:
    out = 0.0
    for g in prob.agreements:
        fig = times[g.a] / (times[g.b] if g.b >= 0 else 1.0)
        if g.invert:
            fig = 1.0 / fig
        excess = abs(fig / g.value - 1) - (g.tol - INSIDE)
        if excess > 0:
            out += PENALTY * excess**2
    return out


def _rising_penalty(prob: Problem, b_times: np.ndarray) -> float:
    out = 0.0
    for group in prob.rising:
        g = [prob.bounds[i].bytes_per_core / b_times[i] for i in group]
        for lo, hi in zip(g, g[1:], strict=False):
            rise = (hi - lo) / lo
            if rise < RISE:
                out += PENALTY * (RISE - rise) ** 2
    return out


def _objective(
    chip: Chip, prob: Problem, k: Knobs, mech: mechs.Mechanism, fix: Fix | None = None
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(objective, overhead, target times, bound times): overhead by weighted least squares."""
    ns = chip.ns_per_cycle_hand_set / 1000.0
    t_lines = np.array([t.lines for t in prob.targets])
    t_notch = np.array([t.notch for t in prob.targets])
    meas = np.array([t.measured_us for t in prob.targets])
    cyc = _cycles(chip, k, mech, t_lines, t_notch)
    if fix is not None:
        cyc = cyc + fix[0]
    cyc = cyc * ns
    w = 1.0 / meas**2
    ovh = max(0.0, float(((meas - cyc) * w).sum() / w.sum()))
    model = ovh + cyc
    obj = float((((model - meas) / meas) ** 2).mean()) + _agreement_penalty(prob, model)
    b_times = np.zeros(0)
    if prob.bounds:
        b_lines = np.array([b.lines for b in prob.bounds])
        b_notch = np.array([b.notch for b in prob.bounds])
        b_cyc = _cycles(chip, k, mech, b_lines, b_notch)
        if fix is not None:
            b_cyc = b_cyc + fix[1]
        b_times = ovh + b_cyc * ns
        for b, t in zip(prob.bounds, b_times, strict=True):
            obj += _penalty(float(t), b.lo_us, b.hi_us)
        obj += _rising_penalty(prob, b_times)
    if prob.page is not None:  # full recovery at |x| = page: one page of credit reaches the rate
        knee = min(k.window + prob.page, chip.geometry.kmem_lines) / k.period()
        if knee < k.rate:
            obj += PENALTY * ((k.rate - knee) / k.rate) ** 2
    return obj, ovh, model, b_times


def _nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, scale: np.ndarray, iters: int = 400
) -> np.ndarray:
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


def _to_x(k: Knobs, mech: mechs.Mechanism) -> np.ndarray:
    x = [k.rate, k.period_per_line]
    if mech.steps:
        x += [k.start, float(np.log(max(k.ramp_lines, 1.0)))]
    if mech.name == "demand-warmup":
        x += [k.warm_per_line, float(np.log(max(k.warm_lines, 1.0)))]
    elif mech.name == "demand-window":
        x += [k.dwin_frac, float(np.log(max(k.dwin_step, 1.0)))]
    return np.array(x, dtype=float)


def _knobs(x: np.ndarray, mech: mechs.Mechanism, window: int) -> Knobs:
    k = Knobs(
        rate=float(np.clip(x[0], 0.02, MAX_RATE)),
        start=float(np.clip(x[2], 0.05, 1.0)) if mech.steps else 1.0,
        ramp_lines=float(np.clip(np.exp(x[3]), 1.0, 1 << 20)) if mech.steps else 1.0,
        period_per_line=float(np.clip(x[1], 0.5, 64.0)),
        window=window,
    )
    if mech.name == "demand-warmup":
        k = replace(
            k,
            warm_per_line=float(np.clip(x[4], 0.0, 16.0)),
            warm_lines=float(np.clip(np.exp(x[5]), 1.0, MAX_WARM_LINES)),
        )
    elif mech.name == "demand-window":
        k = replace(
            k,
            dwin_frac=float(np.clip(x[4], 1.0 / window, 1.0)),
            dwin_step=float(np.clip(np.exp(x[5]), 1.0, MAX_DWIN_STEP_LINES)),
        )
    return k


SCALES = np.array([0.05, 0.5, 0.1, 0.5, 0.1, 0.5])  # NM's first step, per variable of _to_x


def _search(
    chip: Chip,
    prob: Problem,
    mech: mechs.Mechanism,
    window: int,
    fix: Fix | None = None,
    near: Knobs | None = None,
) -> Knobs:
    """The continuous fit of rate, governor, (latency + 2) / window and a starved-stream
    mechanism's inputs at a given window: from fixed starts, or from `near` alone."""

    def f(x: np.ndarray) -> float:
        return _objective(chip, prob, _knobs(x, mech, window), mech, fix)[0]

    if near is not None:
        starts = [_to_x(replace(near, window=window), mech)]
    elif mech.name in mechs.STARVED:  # from the governor's own fit, at a few starved starts
        ramp = _to_x(_search(chip, prob, mechs.get("ramp"), window, fix), mechs.get("ramp"))
        grid = (
            [(a, np.log(n)) for a in (0.3, 1.0) for n in (8e3, 2e4)]
            if mech.name == "demand-warmup"
            else [(a, np.log(n)) for a in (0.6, 0.85) for n in (200.0, 600.0)]
        )
        starts = [np.concatenate([ramp, np.array(g)]) for g in grid]
    elif mech.steps:
        starts = [
            np.array((r, 7.0, s, np.log(n)))
            for r in (0.45, 0.55)
            for s in (0.5, 0.8)
            for n in (4e3, 1.2e4)
        ]
    else:
        starts = [np.array((0.45, 7.0))]
    best, best_val = None, math.inf
    for x0 in starts:
        scale = SCALES[: x0.size] / (4 if near is not None else 1)
        x = _nelder_mead(f, x0, scale)
        x = _nelder_mead(f, x, scale / 4)
        val = f(x)
        if val < best_val:
            best, best_val = x, val
    assert best is not None  # every start gives a finite objective
    return _knobs(best, mech, window)


# ---------------------------------------------------------------- per hypothesis: the V


def _profile(chip: Chip, k: Knobs, mech: mechs.Mechanism, ovh: float, hyp: str) -> Profile:
    rate = max(1, min(MAX_RATE_Q16, round(k.rate * RATE_ONE)))
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
    dwarm_lines, dwarm_extra, dwin_start, dwin_step = 0, 0, 0, 1  # off
    if mech.name == "demand-warmup" and k.extra() > 0:
        dwarm_lines = max(1, min(MAX_WARM_LINES, round(k.warm_lines)))
        dwarm_extra = k.extra()
    elif mech.name == "demand-window":
        dwin_start = k.dwin_start()
        dwin_step = max(1, min(MAX_DWIN_STEP_LINES, round(k.dwin_step)))
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
        dwin_start_lines=dwin_start,
        dwin_step_lines=dwin_step,
        dwarm_lines=dwarm_lines,
        dwarm_extra_cycles=dwarm_extra,
    )


def _shape(profile: Profile) -> Profile:
    """The profile without a warm-up or per-task cost: both add the same time at every x
    (one request, one task), so the V's slope is theirs too, and the closed form has it.
    (A starved-stream mechanism stays: how many lines starve depends on x.)"""
    return replace(profile, warm_lines=0, warm_extra_cycles=0, task_gap_cycles=0)


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


# ---------------------------------------------------------------- exact evaluation

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


def _exact(chip: Chip, prob: Problem, profile: Profile, cores: int | None = None) -> Fix:
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
    exact_t, exact_b = _exact(chip, prob, profile, cores=1)
    t = _cycles(
        chip,
        k,
        mech,
        np.array([x.lines for x in prob.targets]),
        np.array([x.notch for x in prob.targets]),
    )
    b = (
        _cycles(
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
    cyc, b_cyc = cycles if cycles is not None else _exact(chip, prob, profile)
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


# ---------------------------------------------------------------- the fit


Shared = tuple[Knobs, tuple[int, int], Fix | None]
_SHARED: dict[tuple[int, Problem, str, str], Shared] | None = None  # fit_all's, while it runs


@takes_engine
def fit_mechanism(chip: Chip, prob: Problem, mech: mechs.Mechanism) -> Shared:
    """The mechanism's knobs, the memory warm-up's (lines, extra cycles) ((0, 0): none) and
    the search's correction to the cycle model: the same for every hypothesis (at x = 0
    every reading has no credit; split workloads of whole tasks have the full credit in
    every reading), so :func:`fit_all` computes it once per mechanism."""
    key = (id(chip), prob, mech.name, exact_engine())
    if _SHARED is not None and key in _SHARED:
        return _SHARED[key]
    base = mechs.get("none") if mech.name in ("warmup", "task-cost") else mech
    k = _search(chip, prob, base, START_WINDOW)
    any_buggy = hyps.buggy()[0].name  # the registry's first: the choice changes nothing
    fix: Fix | None = None
    for _ in range(CORRECTIONS):
        _, ovh, _, _ = _objective(chip, prob, k, base, fix)
        fix = _correction(chip, prob, k, base, _profile(chip, k, base, ovh, any_buggy))
        k = _search(chip, prob, base, k.window, fix, near=k)
    warm = (0, 0)
    if mech.name == "warmup":
        _, ovh, _, _ = _objective(chip, prob, k, base, fix)
        prof = _fit_warmup(chip, prob, _profile(chip, k, mech, ovh, any_buggy))
        warm = (prof.warm_lines, prof.warm_extra_cycles)
    if _SHARED is not None:
        _SHARED[key] = (k, warm, fix)
    return k, warm, fix


@takes_engine
def fit_hypothesis(
    chip: Chip,
    prob: Problem,
    hyp: hyps.Hypothesis,
    mech: mechs.Mechanism,
    k: Knobs,
    warm: tuple[int, int],
    fix: Fix | None = None,
) -> Profile:
    """The window for this hypothesis (the V's slope), then the overhead again.

    The search's knobs hold per line at every window; the window is the one whose V
    (validate's slope, each lap and side) is nearest the measured slope per lap, and
    straight. A starved-stream mechanism changes the V itself, so each of
    :data:`STARVED_WINDOWS` is first polished (corrected to the cycle model for this
    reading, searched again) and its V read on its own engine, every lap where the
    analytic engine has the mechanism. The chosen fit is then polished for this reading."""
    base = mechs.get("none") if mech.name in ("warmup", "task-cost") else mech
    starved = mech.name in mechs.STARVED
    laps: tuple[int, ...] = (1, prob.laps[-1])
    if starved and mech.closed_form:
        laps = tuple(prob.laps)
    choices = []
    for w in STARVED_WINDOWS if starved else FIT_WINDOWS:
        kw, wfix = replace(k, window=w), fix
        if starved:
            kw, wfix = _polish(chip, prob, hyp, base, kw, fix)
        obj, ovh, _, _ = _objective(chip, prob, kw, base, wfix)
        prof = replace(
            _profile(chip, kw, mech, ovh, hyp.name), warm_lines=warm[0], warm_extra_cycles=warm[1]
        )
        miss = 0.0
        if prob.slope_per_lap is not None:
            per_k, r2s = _v(chip, prof, hyp, laps)
            # the worst lap and side: a one-sided V (one flat arm) must not average out
            miss = max(abs(v - prob.slope_per_lap) for v in per_k) / prob.slope_per_lap
            miss += 0.5 if min(r2s) < SLOPE_R2 else 0.0  # not validate's straight V
        choices.append((miss + obj, w, kw, prof))
    choices.sort(key=lambda c: (c[0], c[1]))
    _, w, kw, prof = choices[0]
    if base is mech and not starved:  # polished at the chosen window, for this reading
        kw, fix = _polish(chip, prob, hyp, base, kw, fix)
        _, ovh, _, _ = _objective(chip, prob, kw, base, fix)
        prof = _profile(chip, kw, mech, ovh, hyp.name)
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
    _, ovh, _, _ = _objective(chip, prob, k, mech, fix)
    fix = _correction(chip, prob, k, mech, _profile(chip, k, mech, ovh, hyp.name))
    return _search(chip, prob, mech, k.window, fix, near=k), fix


WARM_LINES = (1024, 4096, 8192, 16384)
WARM_EXTRA = (32, 128, 512, 2048)


def _fit_warmup(chip: Chip, prob: Problem, prof: Profile) -> Profile:
    """The memory warm-up's two inputs on a grid, scored on one core of the exact engine.

    The closed form has no warm-up, so the grid runs the exact engine (one core,
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
    """(objective, overhead) of a profile on one core of the exact engine (targets, bounds)."""
    ns = prof.ns_per_cycle / 1000.0
    t_cyc, b_cyc = _exact(chip, prob, prof, cores=1)
    cyc = t_cyc * ns
    meas = np.array([x.measured_us for x in prob.targets])
    w = 1.0 / meas**2
    ovh = max(0.0, float(((meas - cyc) * w).sum() / w.sum()))
    obj = float((((ovh + cyc - meas) / meas) ** 2).mean()) + _agreement_penalty(prob, ovh + cyc)
    if prob.bounds:
        bt = ovh + b_cyc * ns
        for bound, u in zip(prob.bounds, bt, strict=True):
            obj += _penalty(float(u), bound.lo_us, bound.hi_us)
        obj += _rising_penalty(prob, bt)
    return obj, ovh


def _exact_overhead(chip: Chip, prob: Problem, profile: Profile, cycles: Fix) -> Profile:
    """The overhead refitted on the exact cycles, clipped into what the constraints allow."""
    ns = profile.ns_per_cycle / 1000.0
    cyc, bc = cycles
    meas = np.array([t.measured_us for t in prob.targets])
    w = 1.0 / meas**2
    ovh = float(((meas - cyc * ns) * w).sum() / w.sum())
    if profile.mechanism == "task-cost":
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
    k, warm, fix = fit_mechanism(chip, prob, mech)
    prof = fit_hypothesis(chip, prob, hyp, mech, k, warm, fix)
    cycles = _exact(chip, prob, prof)  # the overhead adds to every time: one run serves both
    prof = _exact_overhead(chip, prob, prof, cycles)
    cal = evaluate(chip, prob, prof, cycles=cycles)
    cal.profile = _with_notes(chip, cal, prob, meas)
    return cal


ANALYTIC_TOL = 0.02  # the analytic engine's stated accuracy on progress-dependent readings
# the demand warm-up's closed form on a static reading: within 2 cycles of the cycle model
# (its fluid token's rounding; analytic.governor_grid, tests/test_analytic.py)
WARM_CYCLES = 2


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
    global _SHARED
    quiet = runner.current_options().quiet
    _SHARED = {}  # each mechanism's search, once for every hypothesis
    try:
        cals = [fit(chip, h, m) for h, m in progress.iterate(list(pairs), "fit", quiet)]
    finally:
        _SHARED = None
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


@dataclass
class HoldOut:
    """A fit without some datasets, and its prediction of them (issue 16: honest fitting)."""

    held_out: tuple[str, ...]
    fit: Calibration  # fitted without them
    predictions: list[Residual]  # each held-out figure, predicted (as a time)
    gbps: list[tuple[float, float]]  # (model, measured) throughput of each prediction

    def errors(self) -> list[float]:
        """Each prediction's relative error in throughput, as the figures are published."""
        return [m / g - 1 for m, g in self.gbps]


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


def render_hold_out(h: HoldOut) -> str:
    p = h.fit.profile
    lines = [
        f"fitted without {', '.join(h.held_out)}: {p.hypothesis} x {p.mechanism}, RMS "
        f"{100 * h.fit.rms_rel_err:.2f}% on its own {len(h.fit.residuals)} targets; "
        f"constraints {'met' if h.fit.ok else 'NOT met'}",
        "predicted (model against measured, throughput):",
    ]
    for r, (m, g), e in zip(h.predictions, h.gbps, h.errors(), strict=True):
        lines.append(f"  {r.name:<24}{m:>8.2f} GB/s{g:>8.2f} GB/s{100 * e:>+8.1f}%")
    worst = max(h.errors(), key=abs)
    lines.append(f"  worst {100 * worst:+.1f}%")
    return "\n".join(lines)


def hold_out_report(h: HoldOut) -> dict[str, object]:
    return {
        "held_out": list(h.held_out),
        "fit": report(h.fit),
        "predictions": [
            {**asdict(r), "model_gbps": m, "measured_gbps": g, "gbps_rel_err": e}
            for r, (m, g), e in zip(h.predictions, h.gbps, h.errors(), strict=True)
        ],
    }


def _measured_dir(chip: Chip) -> str:
    """Where the figures came from: data/chips/<name>/measured for a bundled chip, else the
    folder itself (a chip given as --chip DIR)."""
    if chip.path.resolve().parent == chips_dir().resolve():
        return f"data/chips/{chip.path.name}/{MEASURED_DIR}"
    return str(chip.path / MEASURED_DIR)


_DATASET_NAMES = {
    "table_a": "every Table A replica",
    "points": "the point facts",
    "table_b": "Table B's unsplit and chunked columns",
    "table_c": "Table C's rows",
}


def _targets_note(prob: Problem) -> str:
    have = [d for d in DATASETS if any(t.dataset == d for t in prob.targets)]
    return (
        f"{len(prob.targets)} measured times ("
        + ", ".join(_DATASET_NAMES[d] for d in have)
        + ", throughputs read as times); least squares on relative error, equal weights"
    )


def _with_notes(chip: Chip, cal: Calibration, prob: Problem, meas: Measurements) -> Profile:
    """The profile with notes written from the chip's own data (nothing chip-specific here)."""
    p = cal.profile
    f, ta = meas.facts, meas.table_a
    cited = [t.source for t in (ta, meas.table_b, meas.table_c) if t is not None]
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
        "targets": _targets_note(prob),
        "constraints": "; ".join(dict.fromkeys(b.statement for b in prob.bounds))
        + (f"; full recovery at |x| = {prob.page}" if prob.page else ""),
        "judged": "not fitted, judged by validate (the ranking): every other row of validate, "
        "among them the speedups, the lap times and the V"
        + (" (the V also chooses the window)" if prob.slope_per_lap is not None else ""),
        "exactness": (
            "residuals and constraint checks are from the cycle model with all "
            f"{chip.cores} cores streaming"
        ),
        "residuals": ", ".join(f"{r.name} {100 * r.rel_err:+.1f}%" for r in cal.residuals),
        "rms_rel_err": f"{cal.rms_rel_err:.4f}",
    }
    if prob.held_out:
        notes["held_out"] = ", ".join(prob.held_out) + ": left out of this fit, to predict"
    if cal.slope is not None:
        notes["v_slope"] = (
            f"{cal.slope:.3f} us/line per lap near the notch (|x| <= {SLOPE_X}), worst R^2 "
            f"{cal.slope_r2:.3f}; measured {cal.slope_target:g}; the window was chosen for it"
        )
    return replace(p, notes=notes)


@runner.takes_options
@takes_engine
def confirm(chip: Chip, cal: Calibration) -> dict[str, object]:
    """The fitted sizes on one core in every mode: the analytic engine beside the exact one.

    Static readings must agree to the cycle (within WARM_CYCLES with the demand
    warm-up on); the paged reading's closed form is an approximation within
    ANALYTIC_TOL. ``ok`` says whether both held.
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
        exact = [r.cycles for r in runner.run_many(exact_engine(), h, fitted, loads)]
        fast = [r.cycles for r in runner.run_many("analytic", h, fitted, loads)]
        diff = max(abs(a - b) / a for a, b in zip(exact, fast, strict=True))
        per_mode[h.name] = diff
        if h.static:  # to the cycle; with the demand warm-up, within its closed form's cycles
            slack = WARM_CYCLES if cal.profile.dwarm_lines else 0
            ok = ok and all(abs(a - b) <= slack for a, b in zip(exact, fast, strict=True))
        else:
            ok = ok and diff <= ANALYTIC_TOL
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


ENGINE_WORDS = {"model": "cycle model", "rtl": "RTL (Verilator)", "cocotb": "RTL (cocotb)"}


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
    said = ENGINE_WORDS.get(cal.engine, f"the {cal.engine} engine")
    if c.get("skipped"):
        lines.append(f"{said} only: {c['skipped']}")
    elif c:
        modes = c["modes"]
        assert isinstance(modes, dict)
        lines.append(
            f"{said}: {c['sizes']} sizes on one core; the analytic engine's largest "
            "relative difference: " + ", ".join(f"{m} {d:.1e}" for m, d in modes.items())
        )
    return "\n".join(lines)
