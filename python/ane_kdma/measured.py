"""A chip's published measurements (data/chips/<chip>/measured/*.json), loaded into dataclasses.

Why a module: calibration and validation read the same figures from one place, with
units and provenance. Loading is strict (a figure without a unit, or malformed, is one
line naming file and key) and open: every file and fact is optional, and any source
will do as long as each figure names one. Analyses skip what a chip does not have.

Per-core sizes follow the chip: a matmul X[1,D] x W[D,N] gives each of the
chip's cores N / cores x D x 2 bytes (fp16, :meth:`ane_kdma.chip.Chip.bytes_per_core`).

Bounds. Every figure is read by the kind of quantity it is (one reader per kind
below), each with the range the physics allows: a throughput in (0, ceiling]; a
time above 0 and at least what the ceiling allows for its bytes; a per-core size
in the 32-bit size register, in whole lines; an offset within half a ring; a task
count 1 .. 65536, a split's tasks adding up to its size; R² in [0, 1]; a core count
up to the chip's; at most 64 values in a list (:data:`ane_kdma.schema.MAX_LIST`).

How each file was measured. Every file states its ``method``, one of
:data:`METHODS`: an ANE task time (the article's tables: the task alone, from
the engine's own clock) or a Core ML prediction timed from the host (a model
author's measurement: the framework's per-call overhead is in every figure).
The two are not the same quantity, so a file that does not say which it holds
is refused, in one line naming the file and the field; the method of each file
is kept in :attr:`Measurements.methods` for the analyses to account for it.

Timed convolutions (``timings.json``): one fp16 1x1 convolution a row, Cout x
Cin, whole or cut (each part's per-core bytes as the planner computes them), a
median time and, from ``ane-kdma probe run``, each round's median and the samples.

Adding a dataset: a reader of its file in ``DATASETS`` and a field in
:class:`Measurements`, its figures read by the same kind readers (so they carry
unit, qualifier and source, and the same bounds). Files are found by name, never
by listing the folder: a folder of any size is read in bounded time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ane_kdma import fileio
from ane_kdma.contract import MAX_TASKS
from ane_kdma.hw import ADDR_BITS, lap_and_offset
from ane_kdma.schema import MAX_LIST, Doc, Source, source

if TYPE_CHECKING:
    from ane_kdma.chip import Chip

__all__ = ["DATASETS", "METHODS", "Figure", "Measurements", "Source", "TimedRow", "Timings", "load"]

MAX_BYTES = (1 << ADDR_BITS) - 1  # the 32-bit size register
MAX_TIME_US = 1e9  # a quarter of an hour: far longer than any task the size register allows
MAX_SLOPE_US = 1e6  # µs per line per lap
MAX_SPAN_MIB = float(1 << 20)  # an address span in MiB: a TiB
MAX_SPEEDUP = 1e3  # a ratio of two throughputs, each at most the ceiling
MAX_ROUNDS = 64  # rounds of predictions behind one timed row
MAX_SAMPLES = 10_000  # predictions timed in one round
MAX_PARTS = 16  # convolutions one timed weight is cut into

#: how a file's figures were measured (its ``method`` field), and what that means for the model
METHODS: dict[str, str] = {
    "ane-task": "ANE task time: the task alone, as the engine runs it, no host overhead",
    "coreml-predict": "a Core ML prediction timed from the host, per-call overhead in it",
}


@dataclass(frozen=True)
class Figure:
    """One number with its unit; `qualifier` keeps the source's "about" or "towards"."""

    value: float
    unit: str
    qualifier: str = ""
    source: Source | None = None

    def __str__(self) -> str:
        q = f"{self.qualifier} " if self.qualifier else ""
        return f"{q}{self.value:g} {self.unit}"


@dataclass(frozen=True)
class Span:
    """A stated range, such as the 17-19 GB/s floor."""

    lo: float
    hi: float
    unit: str

    def __str__(self) -> str:
        unit = "" if self.unit == "1" else f" {self.unit}"
        return f"{self.lo:g}-{self.hi:g}{unit}"


@dataclass(frozen=True)
class TableA:
    """D sweep at fixed N: one time per replica and D."""

    n: int
    d: tuple[int, ...]
    replicas: dict[str, tuple[float, ...]]
    source: Source
    geo: Chip = field(repr=False)

    @property
    def medians(self) -> np.ndarray:
        return np.median(np.array(list(self.replicas.values())), axis=0)

    @property
    def lines_per_core(self) -> np.ndarray:
        return self.geo.lines_per_core(np.array(self.d), self.n)

    @property
    def bytes_per_core(self) -> np.ndarray:
        return self.geo.bytes_per_core(np.array(self.d), self.n)


@dataclass(frozen=True)
class Point:
    """One measured throughput at a D x N matmul."""

    d: int
    n: int
    gbps: Figure
    bytes_per_core: int
    lines: int
    x: int | None = None


@dataclass(frozen=True)
class Floor:
    gbps: Span
    laps: tuple[int, ...]


@dataclass(frozen=True)
class Nominal:
    gbps: Span
    low: Figure
    low_bytes: int
    high: Figure
    high_bytes: int


@dataclass(frozen=True)
class OnlyTotal:
    bytes_per_core: int
    gbps: Figure


@dataclass(frozen=True)
class VNotch:
    recovery_offsets: tuple[int, ...]
    page: int


@dataclass(frozen=True)
class KScaling:
    slope_per_lap: Figure
    r_squared: Span


@dataclass(frozen=True)
class LapTimes:
    notch: Figure
    notch_gbps: Figure
    shoulder: Figure
    shoulder_offset: int


@dataclass(frozen=True)
class CoreCount:
    n: int
    d: tuple[int, ...]
    cores: Span


@dataclass(frozen=True)
class Scrambling:
    baseline: Figure
    scrambled: Figure
    span: Figure


@dataclass(frozen=True)
class SplitWorkaround:
    bytes_per_core: int
    splits: tuple[tuple[int, int], ...]  # (tasks, bytes per task)


@dataclass(frozen=True)
class Facts:
    """The point facts; each is None where the chip's data does not state it."""

    notch: Point | None = None
    shoulder: Point | None = None
    floor: Floor | None = None
    nominal: Nominal | None = None
    only_total: OnlyTotal | None = None
    v_notch: VNotch | None = None
    k_scaling: KScaling | None = None
    lap_times: LapTimes | None = None
    core_count: CoreCount | None = None
    scrambling: Scrambling | None = None
    split: SplitWorkaround | None = None
    control_bytes: int | None = None
    quotes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Platform:
    """An independent benchmark, with its own source."""

    anemll: Figure
    anemll_workload: str


@dataclass(frozen=True)
class TableBRow:
    """One size of Table B: the same weight unsplit and issued as chunk-sized tasks."""

    d: int
    bytes_per_core: int
    unsplit: Figure  # GB/s, one task per core
    chunked: Figure  # GB/s, chunk-sized tasks back to back
    speedup: Figure  # chunked over unsplit, as published
    source: Source


@dataclass(frozen=True)
class TableB:
    """The split workaround at larger sizes: unsplit against chunked, at fixed N."""

    n: int
    chunk_bytes: int
    rows: tuple[TableBRow, ...]
    source: Source


@dataclass(frozen=True)
class TableCRow:
    """One row of the split experiment: the size issued as `tasks` equal tasks."""

    tasks: int
    lines_per_task: int
    gbps: Figure
    speedup: Figure | None  # over the one-task row, where published
    source: Source


@dataclass(frozen=True)
class TableC:
    """The split experiment at one size: one task against 2 and 4."""

    d: int
    n: int
    bytes_per_core: int
    rows: tuple[TableCRow, ...]
    source: Source


@dataclass(frozen=True)
class TimedRow:
    """One timed weight: Cout x Cin (fp16, 1x1), as one convolution or cut into several."""

    name: str
    cout: int
    cin: int
    dtype: str
    bytes_per_core: int  # the whole weight's payload on each core
    task_bytes: tuple[int, ...]  # each convolution's payload on each core, in issue order
    time: Figure  # µs, the statistic the file's conditions name (a median)
    rounds: tuple[float, ...] = ()  # each round's median, µs, where the file has them
    samples: tuple[tuple[float, ...], ...] = ()  # every timed prediction, µs, round by round
    purpose: str = ""

    @property
    def shape(self) -> str:
        """Cout x Cin, as the source tables write it (``plan --shape`` takes Cin x Cout)."""
        return f"{self.cout}x{self.cin}"


@dataclass(frozen=True)
class Timings:
    """Timed convolutions (``timings.json``): how they were timed, where, and the rows."""

    method: str
    rows: tuple[TimedRow, ...]
    conditions: dict[str, str]
    source: Source

    def row(self, name: str) -> TimedRow | None:
        return next((r for r in self.rows if r.name == name), None)


@dataclass(frozen=True)
class Measurements:
    geo: Chip  # the chip whose cores and lines the figures spread over
    table_a: TableA | None
    facts: Facts
    platform: Platform | None
    files: tuple[Path, ...]
    table_b: TableB | None = None
    table_c: TableC | None = None
    timings: Timings | None = None
    methods: dict[str, str] = field(default_factory=dict)  # file name -> METHODS key

    def has(self, *names: str) -> bool:
        """True when every named fact (or a dataset: "table_a", "table_b", "table_c",
        "platform", "timings") is present."""
        for name in names:
            if name in ("table_a", "table_b", "table_c", "platform", "timings"):
                if getattr(self, name) is None:
                    return False
            elif getattr(self.facts, name) is None:
                return False
        return True

    def known_gbps(self, bytes_per_core: int) -> float | None:
        """A measured aggregate GB/s at this per-core size, if the data has one."""
        known: dict[int, float] = {}
        for p in (self.facts.notch, self.facts.shoulder):
            if p is not None:
                known[p.bytes_per_core] = p.gbps.value
        t = self.table_a
        if t is not None:
            for b, us in zip(t.bytes_per_core.tolist(), t.medians.tolist(), strict=True):
                known.setdefault(int(b), float(self.geo.aggregate_gbps(b, us)))
        return known.get(bytes_per_core)

    def known_gbps_for(self, bytes_per_core: int, cores: int) -> float | None:
        """The measured GB/s of a task with this geometry: this per-core size on this many cores.

        Every figure here was measured with all of the chip's cores streaming,
        so a task on fewer cores has no measurement to stand beside, whatever
        its per-core size.
        """
        return self.known_gbps(bytes_per_core) if cores == self.geo.cores else None


# ---------------------------------------------------------------- reading, one kind at a time


def _unit(doc: Doc, unit: str | None) -> str:
    u = doc.string("unit")
    if unit is not None and u != unit:
        raise doc.fail(doc.key("unit"), f"expected {unit!r}, found {u[:40]!r}")
    return u


def _figure(doc: Doc, src: Source | None, unit: str | None = None, hi: float = 0.0) -> Figure:
    """A value above 0 (at most `hi`, if given) with its unit, qualifier and source."""
    u = _unit(doc, unit)
    q = doc.string("qualifier", "")
    value = doc.number("value", hi=hi or None, positive=True)
    return Figure(value, u, q, source(doc, src))


def _int(doc: Doc, name: str, unit: str | None, lo: int, hi: int) -> int:
    """A whole number in lo..hi, given as a figure (value and unit)."""
    sub = doc.obj(name)
    _unit(sub, unit)
    value = sub.raw("value")
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2.0**53:
        value = int(value)  # 1048576.0 is a whole number; 1e308 is refused by its range
    return sub._check_int(value, sub.key("value"), lo, hi)


def _ints(doc: Doc, name: str, lo: int, hi: int) -> tuple[int, ...]:
    sub = doc.obj(name)
    sub.string("unit")
    values = sub.integers("values")
    for i, v in enumerate(values):
        sub._check_int(v, f"{sub.key('values')}[{i}]", lo, hi)
    return tuple(values)


def _span(doc: Doc, unit: str | None, lo: float, hi: float) -> Span:
    u = _unit(doc, unit)
    a, b = doc.number("min", lo, hi), doc.number("max", lo, hi)
    if a > b:
        raise doc.fail(doc.where, f"min {a} above max {b}")
    return Span(a, b, u)


def _gbps(doc: Doc, src: Source | None, chip: Chip) -> Figure:
    """A throughput: above 0, at most the DRAM ceiling."""
    return _figure(doc, src, "GB/s", hi=chip.ceiling_gbps)


def _gbps_span(doc: Doc, chip: Chip) -> Span:
    span = _span(doc, "GB/s", 0.0, chip.ceiling_gbps)
    if span.lo <= 0:
        raise doc.fail(doc.key("min"), f"{span.lo} must be above 0")
    return span


def _time_us(doc: Doc, key: str, value: float, chip: Chip, bytes_each: float) -> float:
    """A time for all cores to move `bytes_each` each: no less than the DRAM ceiling allows."""
    least = chip.cores * bytes_each / (chip.ceiling_gbps * 1e3)
    if not least <= value <= MAX_TIME_US:
        raise doc.fail(
            key,
            f"{value:g} us outside {least:.4g}..{MAX_TIME_US:g} "
            f"({chip.cores} x {bytes_each:g} B at the {chip.ceiling_gbps:g} GB/s ceiling)",
        )
    return value


def _size(doc: Doc, name: str) -> int:
    """A per-core size in bytes: what the 32-bit size register holds."""
    return _int(doc, name, "B", 1, MAX_BYTES)


def _offset(doc: Doc, name: str, chip: Chip) -> int:
    half = chip.ring_lines // 2
    return _int(doc, name, "lines", -half, half)


def _matmul(doc: Doc, chip: Chip, d: tuple[int, ...], n: int, key: str) -> list[int]:
    """The per-core sizes of D x N matmuls: whole lines that the size register holds."""
    if n % chip.cores:
        raise doc.fail(key, f"N = {n} is not a multiple of the chip's {chip.cores} cores")
    sizes = []
    for value in d:  # Python integers: nothing overflows before the check
        size = n // chip.cores * value * 2
        if size > MAX_BYTES:
            raise doc.fail(key, f"D x N = {value} x {n} is {size} B per core, above 2^32 - 1")
        if size % chip.line_bytes:
            raise doc.fail(key, f"D x N = {value} x {n} does not give whole lines per core")
        sizes.append(size)
    return sizes


def _point(doc: Doc, src: Source, chip: Chip) -> Point:
    d, n = _int(doc, "d", None, 1, MAX_BYTES), _int(doc, "n", None, 1, MAX_BYTES)
    size = _matmul(doc, chip, (d,), n, doc.key("d"))[0]
    lines = size // chip.line_bytes
    x = _offset(doc, "x", chip) if doc.has("x") else None
    if x is not None and x != lap_and_offset(lines, chip.ring_lines)[1]:
        raise doc.fail(doc.key("x"), f"x = {x} lines, but D x N = {d} x {n} is {lines} lines")
    return Point(d, n, _gbps(doc.obj("throughput"), src, chip), size, lines, x)


def _table_a(doc: Doc, chip: Chip) -> TableA:
    src = source(doc)
    n = _int(doc.obj("conditions"), "n", None, 1, MAX_BYTES)
    d = _ints(doc, "d", 1, MAX_BYTES)
    sizes = _matmul(doc, chip, d, n, doc.key("d"))
    reps = doc.obj("replicas")
    if not reps.data:
        raise reps.fail(reps.where, "must be a non-empty object")
    replicas: dict[str, tuple[float, ...]] = {}
    for name, rep in sorted(reps.items()):
        if rep.string("unit") != "us":
            raise rep.fail(rep.key("unit"), "times must be in us")
        vals = tuple(rep.numbers("values"))
        if len(vals) != len(d):
            raise rep.fail(rep.where, f"{len(vals)} values for {len(d)} D values")
        for i, (v, size) in enumerate(zip(vals, sizes, strict=True)):
            _time_us(rep, f"{rep.key('values')}[{i}]", v, chip, size)
        replicas[name] = vals
    return TableA(n, d, replicas, src, chip)


def _facts(doc: Doc, chip: Chip) -> Facts:
    src = source(doc)
    f = doc.obj("facts")
    get = f.optional
    ring, lb = chip.ring_lines, chip.line_bytes
    out: dict[str, Any] = {}
    if (p := get("notch_point")) is not None:
        out["notch"] = _point(p, src, chip)
    if (p := get("shoulder_point")) is not None:
        out["shoulder"] = _point(p, src, chip)
    if (p := get("floor")) is not None:
        laps = _ints(p, "laps", 1, MAX_BYTES // (ring * lb))
        out["floor"] = Floor(_gbps_span(p.obj("throughput"), chip), laps)
    if (p := get("nominal")) is not None:
        low, high = p.obj("low"), p.obj("high")
        out["nominal"] = Nominal(
            _gbps_span(p.obj("throughput"), chip),
            _gbps(low, src, chip),
            _size(low, "bytes_per_core"),
            _gbps(high, src, chip),
            _size(high, "bytes_per_core"),
        )
    if (p := get("only_total")) is not None:
        out["only_total"] = OnlyTotal(
            _size(p, "bytes_per_core"), _gbps(p.obj("throughput"), src, chip)
        )
    if (p := get("v_notch")) is not None:
        half = ring // 2
        out["v_notch"] = VNotch(
            _ints(p, "recovery_offsets", -half, half), _int(p, "page", "lines", 1, ring)
        )
    if (p := get("k_scaling")) is not None:
        out["k_scaling"] = KScaling(
            _figure(p.obj("slope_per_lap"), src, hi=MAX_SLOPE_US),
            _span(p.obj("r_squared"), None, 0.0, 1.0),
        )
    if (p := get("lap_times")) is not None:
        shoulder = p.obj("shoulder")
        notch, shoulder_t = _figure(p.obj("notch"), src), _figure(shoulder, src)
        for key, fig in (("notch", notch), ("shoulder", shoulder_t)):  # a lap: a ring per core
            _time_us(p, p.key(f"{key}.value"), fig.value, chip, ring * lb)
        out["lap_times"] = LapTimes(
            notch,
            _gbps(p.obj("notch_throughput"), src, chip),
            shoulder_t,
            _offset(shoulder, "offset", chip),
        )
    if (p := get("core_count")) is not None:
        n = _int(p, "n", None, 1, MAX_BYTES)
        d = _ints(p, "d", 1, MAX_BYTES)
        _matmul(p, chip, d, n, p.key("d"))
        out["core_count"] = CoreCount(n, d, _span(p.obj("cores"), None, 1, chip.cores))
    if (p := get("scrambling")) is not None:
        out["scrambling"] = Scrambling(
            _gbps(p.obj("baseline"), src, chip),
            _gbps(p.obj("scrambled"), src, chip),
            _figure(p.obj("span"), src, "MiB", hi=MAX_SPAN_MIB),
        )
    if (p := get("split_workaround")) is not None:
        total = _size(p, "bytes_per_core")
        splits = []
        for s in p.objects("splits", 16):
            tasks, each = _int(s, "tasks", "tasks", 1, MAX_TASKS), _size(s, "task_bytes")
            if tasks * each != total:
                raise s.fail(s.where, f"{tasks} x {each} B is not the {total} B it splits")
            splits.append((tasks, each))
        out["split"] = SplitWorkaround(total, tuple(splits))
    if (p := get("control")) is not None:
        out["control_bytes"] = _size(p, "bytes_per_core")
    quotes = {k: v.data.get("quote", "") for k, v in f.items()}
    return Facts(**out, quotes={k: q for k, q in quotes.items() if isinstance(q, str)})


def _platform(doc: Doc, chip: Chip) -> Platform | None:
    f = doc.obj("facts")
    a = f.optional("anemll_bench")
    if a is None:
        return None
    return Platform(_gbps(a.obj("throughput"), source(a), chip), a.string("workload", ""))


def _row_figure(row: Doc, name: str, unit: str, hi: float = 0.0) -> Figure:
    """A figure of a table row: its unit and qualifier stated on it, the row's own source."""
    fig = row.obj(name)
    _unit(fig, unit)
    fig.string("qualifier")  # required here: the row says how the figure was published
    return _figure(fig, source(row), unit, hi)


def _table_b(doc: Doc, chip: Chip) -> TableB:
    """Table B: per row D, its per-core size, unsplit and chunked GB/s and the speedup."""
    src = source(doc)
    cond = doc.obj("conditions")
    n = _int(cond, "n", None, 1, MAX_BYTES)
    chunk = _size(cond, "chunk_bytes")
    if chunk % chip.line_bytes:
        raise cond.fail(
            cond.key("chunk_bytes"), f"{chunk} B is not whole {chip.line_bytes}-B lines"
        )
    rows = []
    for row in doc.objects("rows"):
        source(row)  # every row names its own source
        d = _int(row, "d", None, 1, MAX_BYTES)
        size = _matmul(row, chip, (d,), n, row.key("d"))[0]
        if _size(row, "bytes_per_core") != size:
            raise row.fail(row.key("bytes_per_core"), f"D x N = {d} x {n} is {size} B per core")
        if size % chunk:
            raise row.fail(row.key("d"), f"{size} B per core is not whole {chunk}-B chunks")
        if size // chunk > MAX_TASKS:
            raise row.fail(row.key("d"), f"{size // chunk} chunks, at most {MAX_TASKS} tasks")
        unsplit = _row_figure(row, "unsplit", "GB/s", chip.ceiling_gbps)
        chunked = _row_figure(row, "chunked", "GB/s", chip.ceiling_gbps)
        for key, fig in (("unsplit", unsplit), ("chunked", chunked)):
            _time_us(
                row, row.key(f"{key}.value"), float(chip.time_for_gbps(size, fig.value)), chip, size
            )
        speedup = _row_figure(row, "speedup", "x", MAX_SPEEDUP)
        rows.append(TableBRow(d, size, unsplit, chunked, speedup, source(row)))
    return TableB(n, chunk, tuple(rows), src)


def _table_c(doc: Doc, chip: Chip) -> TableC:
    """Table C: one size per core issued as 1, 2, 4 ... equal tasks."""
    src = source(doc)
    cond = doc.obj("conditions")
    n, d = _int(cond, "n", None, 1, MAX_BYTES), _int(cond, "d", None, 1, MAX_BYTES)
    size = _matmul(cond, chip, (d,), n, cond.key("d"))[0]
    if _size(cond, "bytes_per_core") != size:
        raise cond.fail(cond.key("bytes_per_core"), f"D x N = {d} x {n} is {size} B per core")
    lines = size // chip.line_bytes
    rows = []
    for row in doc.objects("rows"):
        source(row)
        tasks = _int(row, "tasks", "tasks", 1, MAX_TASKS)
        each = _int(row, "lines_per_task", "lines", 1, MAX_BYTES // chip.line_bytes)
        if tasks * each != lines:
            raise row.fail(row.where, f"{tasks} x {each} lines is not the {lines} lines per core")
        gbps = _row_figure(row, "throughput", "GB/s", chip.ceiling_gbps)
        _time_us(
            row,
            row.key("throughput.value"),
            float(chip.time_for_gbps(size, gbps.value)),
            chip,
            size,
        )
        speedup = _row_figure(row, "speedup", "x", MAX_SPEEDUP) if row.has("speedup") else None
        rows.append(TableCRow(tasks, each, gbps, speedup, source(row)))
    return TableC(d, n, size, tuple(rows), src)


def _conditions(doc: Doc) -> dict[str, str]:
    """Free-text conditions (machine, OS, statistic); numbers are kept as their text."""
    cond = doc.optional("conditions")
    if cond is None:
        return {}
    if len(cond.data) > MAX_LIST:
        raise cond.fail(cond.where, f"{len(cond.data)} entries, at most {MAX_LIST}")
    out = {}
    for key, value in cond.data.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise cond.fail(cond.key(key), "must be a string or a number")
        out[key] = str(value)
    return out


def _samples(row: Doc, chip: Chip, least_us: float) -> tuple[tuple[float, ...], ...]:
    """Raw samples, round by round: each a time no faster than the ceiling allows."""
    sub = row.obj("samples")
    if sub.string("unit") != "us":
        raise sub.fail(sub.key("unit"), "samples must be in us")
    value = sub.raw("rounds")
    if not isinstance(value, list) or not value:
        raise sub.fail(sub.key("rounds"), "must be a non-empty list of lists")
    if len(value) > MAX_ROUNDS:
        raise sub.fail(sub.key("rounds"), f"{len(value)} rounds, at most {MAX_ROUNDS}")
    rounds = []
    for i, r in enumerate(value):
        key = sub.key(f"rounds[{i}]")
        if not isinstance(r, list) or not r:
            raise sub.fail(key, "must be a non-empty list of times")
        if len(r) > MAX_SAMPLES:
            raise sub.fail(key, f"{len(r)} samples, at most {MAX_SAMPLES}")
        vals = []
        for j, v in enumerate(r):
            t = sub._check_number(v, f"{key}[{j}]", None, None, False)
            if not least_us <= t <= MAX_TIME_US:
                raise sub.fail(f"{key}[{j}]", f"{t:g} us outside {least_us:.4g}..{MAX_TIME_US:g}")
            vals.append(t)
        rounds.append(tuple(vals))
    return tuple(rounds)


def _timings(doc: Doc, chip: Chip) -> Timings:
    """Timed convolutions: shapes, per-core bytes (checked against the planner), times."""
    from ane_kdma.plan.weight import DTYPE_BITS, Weight  # the planner imports this module's chip

    src = source(doc)
    names: set[str] = set()
    rows = []
    for row in doc.objects("rows"):
        name = row.string("name")
        if len(name) > 80 or not name.isprintable():
            raise row.fail(row.key("name"), "at most 80 printable characters")
        if name in names:
            raise row.fail(row.key("name"), f"{name!r} given twice")
        names.add(name)
        shape = row.obj("shape")
        cout = shape.integer("cout", 1, MAX_BYTES)
        cin = shape.integer("cin", 1, MAX_BYTES)
        dtype = row.string("dtype")
        if dtype not in DTYPE_BITS:
            raise row.fail(
                row.key("dtype"), f"{dtype[:20]!r} is not one of {', '.join(DTYPE_BITS)}"
            )
        weight = Weight(cin, cout, bits=DTYPE_BITS[dtype])
        size = _size(row, "bytes_per_core")
        want = weight.bytes_per_core(chip.cores)
        if size != want:
            raise row.fail(
                row.key("bytes_per_core.value"),
                f"{size} B, but {cout} x {cin} {dtype} is {want} B per core on {chip.cores} cores",
            )
        tasks = row.obj("task_bytes_per_core")
        _unit(tasks, "B")
        parts = tasks.integers("values", MAX_PARTS)
        for i, b in enumerate(parts):
            if not 1 <= b <= MAX_BYTES or b % chip.line_bytes:
                raise tasks.fail(
                    f"{tasks.key('values')}[{i}]",
                    f"{b} B is not whole {chip.line_bytes}-B lines within the size register",
                )
        if sum(parts) != size:
            raise tasks.fail(tasks.key("values"), f"parts add up to {sum(parts)} B, not {size} B")
        if row.has("cin_parts"):  # a split along Cin (probe run writes it): each part's payload
            cins = row.integers("cin_parts", MAX_PARTS)
            if len(cins) != len(parts) or sum(cins) != cin or min(cins) < 1:
                raise row.fail(
                    row.key("cin_parts"),
                    f"one per task ({len(parts)}), each positive, adding up to Cin = {cin}",
                )
            for i, (c, b) in enumerate(zip(cins, parts, strict=True)):
                want_b = Weight(c, cout, bits=DTYPE_BITS[dtype]).bytes_per_core(chip.cores)
                if b != want_b:
                    raise tasks.fail(
                        f"{tasks.key('values')}[{i}]",
                        f"{b} B, but {cout} x {c} {dtype} is {want_b} B per core",
                    )
        lap = lap_and_offset(size // chip.line_bytes, chip.ring_lines)
        for key, value in zip(("k", "x"), lap, strict=True):
            if row.has(key) and row.integer(key) != value:
                raise row.fail(
                    row.key(key), f"{row.raw(key)}, but {size} B per core is k, x = {lap}"
                )
        least = chip.cores * size / (chip.ceiling_gbps * 1e3)
        time = _figure(row.obj("time"), source(row, src), "us")
        _time_us(row, row.key("time.value"), time.value, chip, size)
        rounds: tuple[float, ...] = ()
        if (r := row.optional("rounds")) is not None:
            if r.string("unit") != "us":
                raise r.fail(r.key("unit"), "round medians must be in us")
            rounds = tuple(r.numbers("values", MAX_ROUNDS))
            for i, v in enumerate(rounds):
                _time_us(r, f"{r.key('values')}[{i}]", v, chip, size)
        samples = _samples(row, chip, least) if row.has("samples") else ()
        if rounds and samples and len(rounds) != len(samples):
            raise row.fail(
                row.key("samples.rounds"), f"{len(samples)} rounds, {len(rounds)} medians"
            )
        rows.append(
            TimedRow(
                name,
                cout,
                cin,
                dtype,
                size,
                tuple(parts),
                time,
                rounds,
                samples,
                row.string("purpose", ""),
            )
        )
    return Timings(doc.string("method"), tuple(rows), _conditions(doc), src)


#: every dataset a chip may bring: its file in measured/ and its reader
DATASETS: dict[str, Callable[[Doc, Chip], Any]] = {
    "table_a.json": _table_a,
    "point_facts.json": _facts,
    "platform.json": _platform,
    "table_b.json": _table_b,
    "table_c.json": _table_c,
    "timings.json": _timings,
}
FILES = tuple(DATASETS)


def load(directory: str | Path, chip: Chip) -> Measurements:
    """Every dataset present in `directory` (a chip's measured/ folder); each file optional."""
    base = Path(directory)
    read: dict[str, Any] = {}
    methods: dict[str, str] = {}
    for name, reader in DATASETS.items():
        path = base / name
        if fileio.probe(path, "measured data file") is not None:  # a folder or a FIFO: refused
            doc = Doc.load(path, "measured data file")
            methods[name] = method(doc)
            read[name] = reader(doc, chip)
    return Measurements(
        geo=chip,
        table_a=read.get("table_a.json"),
        facts=read.get("point_facts.json") or Facts(),
        platform=read.get("platform.json"),
        table_b=read.get("table_b.json"),
        table_c=read.get("table_c.json"),
        timings=read.get("timings.json"),
        files=tuple(base / name for name in DATASETS if name in read),
        methods=methods,
    )


def method(doc: Doc) -> str:
    """A file's ``method``: required, one of :data:`METHODS` (the figures mean different things)."""
    if not doc.has("method"):
        raise doc.fail("method", f"missing (how the figures were measured: {', '.join(METHODS)})")
    value = doc.raw("method")
    if not isinstance(value, str) or value not in METHODS:
        shown = value[:40] if isinstance(value, str) else type(value).__name__
        raise doc.fail("method", f"{shown!r} is not one of {', '.join(METHODS)}")
    return value
