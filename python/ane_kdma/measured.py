"""A chip's published measurements (data/chips/<chip>/measured/*.json), loaded into dataclasses.

Why a module: calibration and validation must read the same figures from one
place, with their units and provenance, instead of literals scattered through
the code. Loading is strict (a figure without a unit or with a malformed
number is one line naming the file and key) and open: every file and every
fact is optional, so a new chip may bring just the figures it has, and any
source will do as long as each figure names one (a URL or a citation), on the
dataset or on the figure itself. Analyses skip what a chip does not have.

Per-core sizes follow the chip: a matmul X[1,D] x W[D,N] gives each of the
chip's cores N / cores x D x 2 bytes (fp16).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.schema import Doc

if TYPE_CHECKING:
    from ane_kdma.chip import Chip

FP16_BYTES = 2
FILES = ("table_a.json", "point_facts.json", "platform.json")


@dataclass(frozen=True)
class Geometry:
    """What the figures need of the chip: how a D x N matmul spreads over its cores."""

    cores: int
    line_bytes: int
    ring_lines: int

    def bytes_per_core(self, d: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
        """(N / cores) * D * 2: the kernels of X[1,D] x W[D,N] spread evenly over the cores."""
        n_arr = np.asarray(n, dtype=np.int64)
        if np.any(n_arr % self.cores):
            raise InputError(f"N must be a multiple of {self.cores} cores: {n}")
        return n_arr // self.cores * np.asarray(d, dtype=np.int64) * FP16_BYTES

    def lines_per_core(self, d: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
        size = self.bytes_per_core(d, n)
        if np.any(size % self.line_bytes):
            raise InputError(f"D x N = {d} x {n} does not give whole lines per core")
        return size // self.line_bytes

    def aggregate_gbps(self, bytes_each: float | np.ndarray, time_us: float | np.ndarray):
        """cores * bytes_per_core / time, the article's definition of throughput."""
        return self.cores * np.asarray(bytes_each, dtype=float) / (np.asarray(time_us) * 1e3)

    def time_for_gbps(self, bytes_each: float | np.ndarray, gbps: float | np.ndarray):
        """The task time (µs) a throughput figure implies for all cores."""
        return self.cores * np.asarray(bytes_each, dtype=float) / (np.asarray(gbps) * 1e3)


@dataclass(frozen=True)
class Source:
    title: str
    where: str  # URL or citation

    def cite(self) -> str:
        return f"{self.title}, {self.where}"


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
    geo: Geometry = field(repr=False)

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
class Measurements:
    geo: Geometry
    table_a: TableA | None
    facts: Facts
    platform: Platform | None
    files: tuple[Path, ...]

    def has(self, *names: str) -> bool:
        """True when every named fact (or "table_a", "platform") is present."""
        for name in names:
            if name in ("table_a", "platform"):
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


# ---------------------------------------------------------------- reading


def _source(doc: Doc, inherited: Source | None) -> Source:
    if not doc.has("source"):
        if inherited is None:
            raise doc.fail(doc.key("source"), "every figure needs a source (url or citation)")
        return inherited
    src = doc.obj("source")
    title = src.string("title", "") or src.string("name", "")
    where = src.string("url", "") or src.string("cited_in", "") or src.string("transcribed_in", "")
    if not title or not where:
        raise src.fail(src.where, "a source needs a title (or name) and a url (or cited_in)")
    return Source(title, where)


def _figure(doc: Doc, src: Source | None, unit: str | None = None) -> Figure:
    u = doc.string("unit")
    if unit is not None and u != unit:
        raise doc.fail(doc.key("unit"), f"expected {unit!r}, found {u!r}")
    q = doc.string("qualifier", "")
    return Figure(doc.number("value"), u, q, _source(doc, src))


def _int(doc: Doc, name: str, unit: str | None = None) -> int:
    fig = _figure(doc.obj(name), Source("-", "-"), unit)
    if fig.value != int(fig.value):
        raise doc.fail(doc.key(name), f"not a whole number: {fig.value}")
    return int(fig.value)


def _span(doc: Doc, unit: str | None = None) -> Span:
    u = doc.string("unit")
    if unit is not None and u != unit:
        raise doc.fail(doc.key("unit"), f"expected {unit!r}, found {u!r}")
    lo, hi = doc.number("min"), doc.number("max")
    if lo > hi:
        raise doc.fail(doc.where, f"min {lo} above max {hi}")
    return Span(lo, hi, u)


def _ints(doc: Doc, name: str) -> tuple[int, ...]:
    sub = doc.obj(name)
    sub.string("unit")
    return tuple(sub.integers("values"))


def _point(doc: Doc, src: Source, geo: Geometry) -> Point:
    d, n = _int(doc, "d"), _int(doc, "n")
    size = int(geo.bytes_per_core(d, n))
    x = _int(doc, "x", "lines") if doc.has("x") else None
    return Point(d, n, _figure(doc.obj("throughput"), src, "GB/s"), size, size // geo.line_bytes, x)


def _table_a(doc: Doc, geo: Geometry) -> TableA:
    src = _source(doc, None)
    n = _int(doc.obj("conditions"), "n")
    d = _ints(doc, "d")
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
        if any(v <= 0 for v in vals):
            raise rep.fail(rep.where, "times must be positive")
        replicas[name] = vals
    return TableA(n, d, replicas, src, geo)


def _facts(doc: Doc, geo: Geometry) -> Facts:
    src = _source(doc, None)
    f = doc.obj("facts")
    get = f.optional
    out: dict[str, object] = {}
    if (p := get("notch_point")) is not None:
        out["notch"] = _point(p, src, geo)
    if (p := get("shoulder_point")) is not None:
        out["shoulder"] = _point(p, src, geo)
    if (p := get("floor")) is not None:
        out["floor"] = Floor(_span(p.obj("throughput"), "GB/s"), _ints(p, "laps"))
    if (p := get("nominal")) is not None:
        low, high = p.obj("low"), p.obj("high")
        out["nominal"] = Nominal(
            _span(p.obj("throughput"), "GB/s"),
            _figure(low, src, "GB/s"),
            _int(low, "bytes_per_core", "B"),
            _figure(high, src, "GB/s"),
            _int(high, "bytes_per_core", "B"),
        )
    if (p := get("only_total")) is not None:
        out["only_total"] = OnlyTotal(
            _int(p, "bytes_per_core", "B"), _figure(p.obj("throughput"), src, "GB/s")
        )
    if (p := get("v_notch")) is not None:
        out["v_notch"] = VNotch(_ints(p, "recovery_offsets"), _int(p, "page", "lines"))
    if (p := get("k_scaling")) is not None:
        out["k_scaling"] = KScaling(_figure(p.obj("slope_per_lap"), src), _span(p.obj("r_squared")))
    if (p := get("lap_times")) is not None:
        shoulder = p.obj("shoulder")
        out["lap_times"] = LapTimes(
            _figure(p.obj("notch"), src),
            _figure(p.obj("notch_throughput"), src, "GB/s"),
            _figure(shoulder, src),
            _int(shoulder, "offset", "lines"),
        )
    if (p := get("core_count")) is not None:
        out["core_count"] = CoreCount(_int(p, "n"), _ints(p, "d"), _span(p.obj("cores")))
    if (p := get("scrambling")) is not None:
        out["scrambling"] = Scrambling(
            _figure(p.obj("baseline"), src, "GB/s"),
            _figure(p.obj("scrambled"), src, "GB/s"),
            _figure(p.obj("span"), src, "MiB"),
        )
    if (p := get("split_workaround")) is not None:
        raw = p.raw("splits")
        if not isinstance(raw, list) or not raw:
            raise p.fail(p.key("splits"), "must be a non-empty list")
        splits = []
        for i, item in enumerate(raw):
            s = Doc(item, p.key(f"splits[{i}]"), p.path)
            splits.append((_int(s, "tasks", "tasks"), _int(s, "task_bytes", "B")))
        out["split"] = SplitWorkaround(_int(p, "bytes_per_core", "B"), tuple(splits))
    if (p := get("control")) is not None:
        out["control_bytes"] = _int(p, "bytes_per_core", "B")
    quotes = {k: v.data.get("quote", "") for k, v in f.items()}
    return Facts(**out, quotes={k: q for k, q in quotes.items() if isinstance(q, str)})


def _platform(doc: Doc) -> Platform | None:
    f = doc.obj("facts")
    a = f.optional("anemll_bench")
    if a is None:
        return None
    src = _source(a, None)
    return Platform(_figure(a.obj("throughput"), src, "GB/s"), a.string("workload", ""))


def load(directory: str | Path, chip: Chip) -> Measurements:
    """Every dataset present in `directory` (a chip's measured/ folder); each file optional."""
    base = Path(directory)
    geo = Geometry(chip.cores, chip.line_bytes, chip.ring_lines)
    paths = tuple(base / name for name in FILES)
    docs = [Doc.load(p, "measured data") if p.is_file() else None for p in paths]
    return Measurements(
        geo=geo,
        table_a=_table_a(docs[0], geo) if docs[0] else None,
        facts=_facts(docs[1], geo) if docs[1] else Facts(),
        platform=_platform(docs[2]) if docs[2] else None,
        files=tuple(p for p, d in zip(paths, docs, strict=True) if d is not None),
    )
