"""The types every row builder of `validate` shares: a row, the evaluator's context, a spec.

The bands are not read from here: a row builder reads ``ctx.bands`` (:class:`Bands`), the one
typed value the evaluator passes in (:func:`ane_kdma.validate.specs.bands`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ane_kdma.chip import Chip
from ane_kdma.contract import Result, Workload
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.measured import (
    CoreCount,
    Floor,
    KScaling,
    LapTimes,
    Measurements,
    Nominal,
    OnlyTotal,
    Scrambling,
    SplitWorkaround,
    TableA,
    VNotch,
)

SLOPE_STEP = 16  # |x| grid of the slope fits, lines (a D step of 2 at N = 4096)
SCRAMBLE_SEED = 20260810
SCRAMBLE_D = 576  # the size whose Table A replica a gives the 31.37 GB/s baseline
CORE_COUNTS = (1, 2, 4, 8, 16)
ONE_MIB_PAIRS = ((2048, 4096), (4096, 2048), (1024, 8192), (8192, 1024), (512, 16384))
CEILING_SWEEP_D = (64, 16384, 64)
GREEDY = {"latency_cycles": 64, "window_lines": 1024}  # every core wants a line a cycle
EPS = 1e-9


@dataclass(frozen=True)
class Bands:
    """Validate's bands as one typed value (:func:`ane_kdma.validate.specs.bands` reads them
    as the specs module states them): every row builder reads its band from ``ctx.bands``,
    and calibrate's problem takes the same value, so a moved band moves every judge."""

    table_a: float  # relative, each Table A median
    table_b: float  # relative, each Table B figure and speedup
    table_c: float  # relative, each Table C row
    point: float  # relative, the D = 2016 and D = 2048 points
    lap: float  # relative, the lap times
    floor_slack_gbps: float  # absolute, above the stated floor's top
    recovery: float  # relative to the fix, at |x| = page
    slope: float  # relative, the V's slope per lap, each lap and side
    slope_r2: float  # each arm straight, at least this R^2
    slope_x: int  # near the notch: |x| <= this many lines
    nominal: float  # relative, widening the stated nominal range at both ends
    k_scaling_r2: float
    core_count: float
    scramble: float
    only_total: float
    split: float
    control: float
    towards: float  # "towards" figures, info only


@dataclass(frozen=True)
class Band:
    """A row's band, typed: how validate prints it, and the relative tolerance when the row
    compares two numbers (None for a band that is a rule: a range, a rise, an R^2)."""

    text: str
    rel: float | None = None

    def __str__(self) -> str:
        return self.text

    @classmethod
    def relative(cls, tol: float) -> Band:
        return cls(f"+-{100 * tol:g}%", tol)

    def holds(self, err: float) -> bool:
        """A relative error inside a relative band (its edge included)."""
        if self.rel is None:
            raise ValueError(f"band {self.text!r} is not a relative tolerance")
        return abs(err) <= self.rel + EPS


@dataclass(frozen=True)
class Check:
    """One measured figure, translated once: the workload it was measured on, its value, and
    the band it is held to. validate renders it as a row; calibrate's objective consumes it
    (a time target, or an agreement within ``band``).

    ``parts`` are the lines of each task on every core (one entry: one task); a speedup is
    the time of ``over`` (the same bytes in other tasks) over the time of ``parts``. A
    throughput (``unit`` GB/s) is read as a time through the chip's geometry.
    """

    dataset: str  # calibrate's dataset (table_a, points, table_b, table_c)
    key: str  # calibrate's name for it
    label: str  # validate's row name
    parts: tuple[int, ...]
    value: float  # the measured figure, in ``unit``
    unit: str  # us, GB/s or x
    measured: str  # how validate prints the measured figure
    band: Band
    provenance: str = ""
    samples: tuple[tuple[str, float], ...] = ()  # Table A: each replica's time, by name
    over: tuple[int, ...] = ()  # a speedup's denominator workload
    bytes_per_core: int = 0  # the figure's bytes on each core (a throughput's size)
    per_call: bool = False  # timed per Core ML prediction: the profile's predict overhead adds

    @property
    def lines(self) -> int:
        return sum(self.parts)


@dataclass(frozen=True)
class Rule:
    """A stated fact over several sizes, judged whole: each size's throughput inside
    ``lo_gbps``..``hi_gbps``, and rising from each size to the next.

    Not a :class:`Check`, for one reason: the source states no figure at any one size (a
    floor of 17-19 GB/s "at every k", nominal "from about 45 towards 60"), so a rule has no
    value to reproduce and no relative error; a fit cannot aim at it, only stay inside it.
    It has one owner all the same, :func:`measured_rules`: validate renders it as one row,
    calibrate holds each size as a bound and the sizes as a rising group, both reading the
    sizes, the range and the rise from here."""

    dataset: str  # "floor" or "nominal"
    label: str  # validate's row name
    sizes: tuple[int, ...]  # lines on each core, one task each
    keys: tuple[str, ...]  # calibrate's name for each size's bound
    at: tuple[str, ...]  # how validate names each size ("k = 1")
    notch: bool  # whole laps (x = 0, no prefetch credit); else full credit
    lo_gbps: float
    hi_gbps: float
    measured: str  # how validate prints the stated fact
    band: Band  # validate's band, as it prints it
    statement: str  # calibrate's constraint, as the profile's notes say it

    def outside(self, gbps: Sequence[float]) -> list[int]:
        """The sizes (indices) whose throughput is outside the range (its edges inside)."""
        return [i for i, g in enumerate(gbps) if not self.lo_gbps - EPS <= g <= self.hi_gbps + EPS]


@dataclass(frozen=True)
class VRule:
    """The V the source states around each lap: throughput recovers fully at the
    ``recovery`` offsets (calibrate's knee: one ``page`` of credit reaches the rate), and
    near the notch time falls on |x| at ``slope_per_lap`` x k per line, straight. Judged per
    hypothesis by validate's V rows; calibrate reads the page, the slope and the laps from
    here (its knee constraint and its choice of window). None where the data lacks it."""

    laps: tuple[int, ...]  # the measured laps (the floor's), or (1,)
    page: int | None
    recovery: tuple[int, ...]  # the offsets of full recovery, as stated
    slope_per_lap: float | None  # us per line per lap
    slope_measured: str  # how validate prints the stated slope


@dataclass(frozen=True)
class Rules:
    """The chip's rule-type facts, translated once (:func:`measured_rules`)."""

    floor: Rule | None
    nominal: Rule | None
    v: VRule


@dataclass
class Row:
    dataset: str
    name: str
    scope: str  # "model", a hypothesis name, or "info"
    modeled: float | None
    measured: str
    unit: str
    error: float | None  # relative, where the row compares two numbers
    tolerance: Band
    passed: bool
    engine: str
    note: str = ""
    values: dict[str, object] = field(default_factory=dict)
    counts: bool = False  # set once the best hypothesis is known


# ---------------------------------------------------------------- the evaluator's context


@dataclass
class Ctx:
    chip: Chip
    meas: Measurements
    engine: str
    fixed: Hypothesis
    bands: Bands
    results: dict[tuple[str, Workload], Result] = field(default_factory=dict)
    measured_checks: tuple[Check, ...] | None = None  # the chip's measured figures, once
    measured_rules: Rules | None = None  # and its rule-type facts, once

    @property
    def checks(self) -> tuple[Check, ...]:
        """The measured tables' checks (:func:`measured_checks`),
        translated once per context with its bands."""
        if self.measured_checks is None:
            self.measured_checks = measured_checks(self.chip, self.meas, self.bands)
        return self.measured_checks

    @property
    def rules(self) -> Rules:
        """The rule-type facts (:func:`measured_rules`), translated once per context."""
        if self.measured_rules is None:
            self.measured_rules = measured_rules(self.chip, self.meas, self.bands)
        return self.measured_rules

    @property
    def ring(self) -> int:
        return self.chip.ring_lines

    # The facts a spec names in `needs`: validate runs a spec only when the data has them,
    # so a spec reads them here, typed and present, never as optional attributes by name.
    @property
    def table_a(self) -> TableA:
        return _need(self.meas.table_a, "table_a")

    @property
    def floor(self) -> Floor:
        return _need(self.meas.facts.floor, "floor")

    @property
    def nominal(self) -> Nominal:
        return _need(self.meas.facts.nominal, "nominal")

    @property
    def v_notch(self) -> VNotch:
        return _need(self.meas.facts.v_notch, "v_notch")

    @property
    def k_scaling(self) -> KScaling:
        return _need(self.meas.facts.k_scaling, "k_scaling")

    @property
    def lap_times(self) -> LapTimes:
        return _need(self.meas.facts.lap_times, "lap_times")

    @property
    def only_total(self) -> OnlyTotal:
        return _need(self.meas.facts.only_total, "only_total")

    @property
    def split(self) -> SplitWorkaround:
        return _need(self.meas.facts.split, "split")

    @property
    def core_count(self) -> CoreCount:
        return _need(self.meas.facts.core_count, "core_count")

    @property
    def scrambling(self) -> Scrambling:
        return _need(self.meas.facts.scrambling, "scrambling")

    @property
    def control_bytes(self) -> int:
        return _need(self.meas.facts.control_bytes, "control_bytes")

    def lines(self, n: int, split: int = 1, cores: int | None = None) -> Workload:
        """n lines on each core (every core of the chip unless told), as `split` tasks."""
        lb = self.chip.line_bytes
        return Workload.from_size(n * lb, cores or self.chip.cores, split, lb)

    def chunks(self, parts: Sequence[int]) -> Workload:
        lb = self.chip.line_bytes
        return Workload.from_chunks([p * lb for p in parts], self.chip.cores, lb)

    def __call__(self, h: Hypothesis, w: Workload) -> Result:
        return self.results[(h.name, w)]

    def time(self, h: Hypothesis, w: Workload) -> float:
        return self(h, w).time_us

    def gbps(self, h: Hypothesis, w: Workload) -> float:
        return self(h, w).gbps


# ---------------------------------------------------------------- the measured figures, once

MEASURED = ("table_a", "points", "table_b", "table_c")  # the datasets a check comes from


def measured_checks(chip: Chip, meas: Measurements, bands: Bands) -> tuple[Check, ...]:
    """Every measured figure of the chip's tables, as a check with its band: Table A's
    medians (each replica kept as a sample), the shoulder and notch points, Table B's
    unsplit, chunked and speedup figures, Table C's rows. The order is the tables' own."""
    lb, out = chip.line_bytes, []
    ta = meas.table_a
    if ta is not None:
        src = ta.source.cite()
        for j, (d, n, b, med) in enumerate(
            zip(ta.d, ta.lines_per_core, ta.bytes_per_core, ta.medians, strict=True)
        ):
            out.append(
                Check(
                    "table_a",
                    f"Table A D={d}",
                    f"Table A D = {d} (N = {ta.n})",
                    (int(n),),
                    float(med),
                    "us",
                    f"{med:g} us (median of {len(ta.replicas)} replicas)",
                    Band.relative(bands.table_a),
                    f"N={ta.n}, {src}",
                    tuple((str(rep), float(times[j])) for rep, times in ta.replicas.items()),
                    bytes_per_core=int(b),
                )
            )
    f = meas.facts
    for p in (f.shoulder, f.notch):
        if p is None:
            continue
        src = p.gbps.source.cite() if p.gbps.source else ""
        label = f"D = {p.d} (x = {p.x:+d})" if p is f.shoulder else f"D = {p.d} (x = 0)"
        out.append(
            Check(
                "points",
                f"D={p.d} point",
                f"{label}, N = {p.n}",
                (p.lines,),
                p.gbps.value,
                "GB/s",
                str(p.gbps),
                Band.relative(bands.point),
                f"{p.gbps} at D={p.d}, N={p.n}, {src}",
                bytes_per_core=p.bytes_per_core,
            )
        )
    tb = meas.table_b
    if tb is not None:
        src, chunk, band = tb.source.cite(), tb.chunk_bytes // lb, Band.relative(bands.table_b)
        for r in tb.rows:
            n, size = r.bytes_per_core // lb, f"D = {r.d} ({spec_size(r.bytes_per_core)} per core)"
            whole, parts = (n,), (chunk,) * (n // chunk)
            for what, key, fig, work, over in (
                ("unsplit", "unsplit", r.unsplit, whole, ()),
                (f"{spec_size(tb.chunk_bytes)} chunks", "chunked", r.chunked, parts, ()),
                ("speedup", "speedup", r.speedup, parts, whole),
            ):
                out.append(
                    Check(
                        "table_b",
                        f"Table B D={r.d} {key}",
                        f"Table B {size}: {what}",
                        work,
                        fig.value,
                        "x" if over else "GB/s",
                        f"{fig.value:g} {fig.unit} ({fig.qualifier})",
                        band,
                        f"{fig} at D={r.d}, {src}",
                        over=over,
                        bytes_per_core=r.bytes_per_core,
                    )
                )
    tc = meas.table_c
    if tc is not None:
        src = tc.source.cite()
        for rc in tc.rows:
            out.append(
                Check(
                    "table_c",
                    f"Table C {rc.tasks} tasks",
                    f"Table C {spec_size(tc.bytes_per_core)} as {rc.tasks} x "
                    f"{rc.lines_per_task:#x} lines",
                    (rc.lines_per_task,) * rc.tasks,
                    rc.gbps.value,
                    "GB/s",
                    f"{rc.gbps.value:g} GB/s ({rc.gbps.qualifier})",
                    Band.relative(bands.table_c),
                    f"{rc.gbps} as {rc.tasks} x {rc.lines_per_task} lines, {src}",
                    bytes_per_core=tc.bytes_per_core,
                )
            )
    tm = meas.timings
    if tm is not None:
        per_call = tm.method == "coreml-predict"
        how = f"{tm.method}, {tm.source.cite()}"
        for tr in tm.rows:
            out.append(
                Check(
                    "timings",
                    tr.name,
                    f"{tr.name if tr.name == tr.shape else f'{tr.name}, {tr.shape}'} "
                    f"({spec_size_of(tr.bytes_per_core)} per core), {tm.method}",
                    tuple(b // lb for b in tr.task_bytes),
                    tr.time.value,
                    "us",
                    f"{tr.time.value:g} us ({tr.time.qualifier})",
                    Band.relative(bands.point),
                    f"{tr.shape}: {tr.time} ({how})",
                    bytes_per_core=tr.bytes_per_core,
                    per_call=per_call,
                )
            )
    return tuple(out)


def measured_rules(chip: Chip, meas: Measurements, bands: Bands) -> Rules:
    """The floor, nominal and the V as the chip's data states them, with validate's bands:
    the one translation of them (:class:`Rule`, :class:`VRule`) that validate's rows and
    calibrate's problem both read.

    The floor: every measured lap at x = 0, inside the stated range to ``floor_slack_gbps``
    above its top, rising. Nominal: inside the stated range widened by ``bands.nominal`` at
    both ends, rising, at one page past each lap from 1 MiB per core to the largest stated
    size where the data states the page, else at the largest stated size alone."""
    f, ring, lb = meas.facts, chip.ring_lines, chip.line_bytes
    page = f.v_notch.page if f.v_notch is not None else None
    floor = nominal = None
    if f.floor is not None:
        laps = tuple(f.floor.laps)
        lo, hi = f.floor.gbps.lo, f.floor.gbps.hi + bands.floor_slack_gbps
        floor = Rule(
            "floor",
            f"floor at x = 0, k = {spec_laps(laps)}, rising",
            tuple(k * ring for k in laps),
            tuple(f"floor k={k}" for k in laps),
            tuple(f"k = {k}" for k in laps),
            True,
            lo,
            hi,
            str(f.floor.gbps),
            Band(f"every k in {lo:g}-{hi:g} GB/s, rising with k"),
            f"floor {lo:g}-{hi:g} GB/s at k = {laps[0]}..{laps[-1]}, rising",
        )
    if f.nominal is not None:
        nom = f.nominal
        lo, hi = nom.gbps.lo * (1 - bands.nominal), nom.gbps.hi * (1 + bands.nominal)
        top = max(1, nom.high_bytes // (ring * lb))
        if page:
            sizes = tuple(k * ring + page for k in range(1, top + 1))
            label = (
                f"nominal rising, k x {spec_size(ring * lb)} + one page per core, "
                f"k = 1..{len(sizes)}"
            )
        else:
            sizes = (nom.high_bytes // lb,)
            label = f"nominal at {spec_size(nom.high_bytes)} per core (no page stated)"
        rise = "rising, " if len(sizes) > 1 else ""  # one size: nothing to rise
        nominal = Rule(
            "nominal",
            label,
            sizes,
            tuple(f"nominal {n} lines" for n in sizes),
            tuple(f"{n} lines" for n in sizes),
            False,
            lo,
            hi,
            f"{nom.gbps} ({nom.low} near 1 MiB, {nom.high} at {spec_size(nom.high_bytes)})",
            Band(
                f"{rise}every size in {lo:.2f}-{hi:.2f} GB/s "
                f"({nom.gbps} +-{100 * bands.nominal:g}%: 'about', 'towards')"
            ),
            f"nominal within {lo:.4g}-{hi:.4g} GB/s ({nom.gbps} with validate's "
            f"{bands.nominal:.0%}) up to {nom.high_bytes >> 20} MiB per core (full credit)"
            + (", rising" if rise else ""),
        )
    ks = f.k_scaling
    v = VRule(
        tuple(f.floor.laps) if f.floor is not None else (1,),
        page,
        tuple(f.v_notch.recovery_offsets) if f.v_notch is not None else (),
        ks.slope_per_lap.value if ks is not None else None,
        f"{ks.slope_per_lap} x k (R^2 {ks.r_squared})" if ks is not None else "",
    )
    return Rules(floor, nominal, v)


def spec_size_of(b: int) -> str:
    """A size as the timing tables state it: MiB to two places unless whole."""
    return f"{b >> 20} MiB" if b % (1 << 20) == 0 else f"{b / (1 << 20):.2f} MiB"


Want = list[tuple[Hypothesis, Workload]]
T = TypeVar("T")


def _need(value: T | None, name: str) -> T:
    """A fact a spec declared in `needs`; absent only if a spec reads one it did not declare."""
    if value is None:
        raise InputError(f"validate: a row reads {name!r}, which it does not list in its needs")
    return value


@dataclass(frozen=True)
class Spec:
    """A group of rows: what it needs, what it runs, how it is judged."""

    key: str
    scope: str  # "model" (best hypothesis), "hypothesis" (each buggy one), "info" (best)
    needs: tuple[str, ...]
    want: Callable[[Ctx, Hypothesis], Want]
    rows: Callable[[Ctx, Hypothesis], list[Row]]
    engine: str | None = None  # a fixed engine (None: the one validate runs on)


def spec_rel(model: float, meas: float) -> float:
    return (model - meas) / meas


def spec_tol(t: float) -> Band:
    return Band.relative(t)


def spec_rising(values: Sequence[float]) -> bool:
    """Strictly rising: a flat step is not the rise the data shows."""
    return all(b > a for a, b in zip(values, values[1:], strict=False))


def spec_laps(laps: Sequence[int]) -> str:
    return (
        f"{laps[0]}..{laps[-1]}"
        if list(laps) == list(range(laps[0], laps[-1] + 1))
        else str(list(laps))
    )


def spec_size(b: int) -> str:
    return f"{b >> 20} MiB" if b % (1 << 20) == 0 else f"{b >> 10} KiB"


def spec_some(items: Sequence[str], most: int = 4) -> str:
    """The first few of a list, and how many more."""
    more = len(items) - most
    return "; ".join(items[:most]) + (f" and {more} more" if more > 0 else "")
