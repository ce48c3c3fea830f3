"""The published measurements (data/measured/*.json), loaded into dataclasses.

Why a module: calibration and validation must read the same figures from one
place, with their units and provenance, instead of literals scattered through
the code. Loading is strict: a figure without a unit, a malformed number or a
missing source is an InputError with one line naming the file and the key, so
a bad edit to the data can never slip silently into a fit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.hw import LINE_BYTES, NUM_CORES_MAX

MEASURED_DIR = Path(__file__).resolve().parents[2] / "data" / "measured"
SOURCE_URL = "https://eiln.github.io/posts/ane-dma.html"
FP16_BYTES = 2


def bytes_per_core(d: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """(N / 16) * D * 2: the kernels of X[1,D] x W[D,N] spread evenly over 16 cores."""
    n_arr = np.asarray(n, dtype=np.int64)
    if np.any(n_arr % NUM_CORES_MAX):
        raise InputError(f"N must be a multiple of {NUM_CORES_MAX}: {n}")
    return n_arr // NUM_CORES_MAX * np.asarray(d, dtype=np.int64) * FP16_BYTES


def lines_per_core(d: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
    size = bytes_per_core(d, n)
    if np.any(size % LINE_BYTES):
        raise InputError(f"D x N = {d} x {n} does not give whole 64-byte lines per core")
    return size // LINE_BYTES


def aggregate_gbps(bytes_each: float | np.ndarray, time_us: float | np.ndarray) -> np.ndarray:
    """16 * bytes_per_core / time, the article's definition of throughput."""
    return NUM_CORES_MAX * np.asarray(bytes_each, dtype=float) / (np.asarray(time_us) * 1e3)


def time_for_gbps(bytes_each: float | np.ndarray, gbps: float | np.ndarray) -> np.ndarray:
    """The task time (µs) a throughput figure implies for 16 cores."""
    return NUM_CORES_MAX * np.asarray(bytes_each, dtype=float) / (np.asarray(gbps) * 1e3)


@dataclass(frozen=True)
class Source:
    """Where a dataset's figures come from."""

    title: str
    url: str = ""
    author: str = ""
    date: str = ""
    cited_in: str = ""

    def cite(self) -> str:
        who = f"{self.author}, " if self.author else ""
        when = f" ({self.date})" if self.date else ""
        where = f", {self.url}" if self.url else ""
        if not where and self.cited_in:
            where = f", cited in {self.cited_in}"
        return f'{who}"{self.title}"{when}{where}'


@dataclass(frozen=True)
class Figure:
    """One number with its unit; `qualifier` keeps the source's "about" or "towards"."""

    value: float
    unit: str
    qualifier: str = ""

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
    unit: str
    source: Source

    @property
    def medians(self) -> np.ndarray:
        return np.median(np.array(list(self.replicas.values())), axis=0)

    @property
    def lines_per_core(self) -> np.ndarray:
        return lines_per_core(np.array(self.d), self.n)

    @property
    def bytes_per_core(self) -> np.ndarray:
        return bytes_per_core(np.array(self.d), self.n)


@dataclass(frozen=True)
class PointFacts:
    """The point facts of erratum.md section 3, each figure with its unit."""

    source: Source
    notch_d: int
    notch_n: int
    notch_gbps: Figure
    shoulder_d: int
    shoulder_n: int
    shoulder_x: int
    shoulder_gbps: Figure
    floor: Span
    floor_laps: tuple[int, ...]
    nominal: Span
    nominal_low: Figure
    nominal_low_bytes: int
    nominal_high: Figure
    nominal_high_bytes: int
    only_total_bytes: int
    only_total_gbps: Figure
    recovery_offsets: tuple[int, ...]
    page_lines: int
    slope_per_lap: Figure
    r_squared: Span
    lap_notch: Figure
    lap_notch_gbps: Figure
    lap_shoulder: Figure
    lap_shoulder_offset: int
    core_count_n: int
    core_count_d: tuple[int, ...]
    cores: Span
    scramble_baseline: Figure
    scramble_scrambled: Figure
    scramble_span: Figure
    split_bytes_per_core: int
    split_tasks: tuple[tuple[int, int], ...]  # (tasks, bytes per task)
    control_bytes_per_core: int
    quotes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Platform:
    """The physical ceiling and an independent benchmark, with their own sources."""

    ceiling: Figure
    ceiling_source: Source
    anemll: Figure
    anemll_source: Source
    anemll_workload: str


@dataclass(frozen=True)
class Measurements:
    table_a: TableA
    facts: PointFacts
    platform: Platform
    files: tuple[Path, ...]


class _Reader:
    """Typed access to one JSON file, with errors that name the file and key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(f"measured data missing: {path}") from None
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(self.doc, dict):
            raise InputError(f"{path}: top level must be an object")

    def fail(self, key: str, why: str) -> InputError:
        return InputError(f"{self.path.name}: {key}: {why}")

    def get(self, obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.fail(f"{where}.{key}".lstrip("."), "missing")
        return obj[key]

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"not a number: {value!r}")
        return float(value)

    def unit(self, obj: Any, where: str) -> str:
        u = self.get(obj, "unit", where)
        if not isinstance(u, str) or not u.strip():
            raise self.fail(f"{where}.unit", "every figure needs a unit")
        return u

    def figure(self, obj: Any, where: str, unit: str | None = None) -> Figure:
        value = self.number(self.get(obj, "value", where), f"{where}.value")
        u = self.unit(obj, where)
        if unit is not None and u != unit:
            raise self.fail(f"{where}.unit", f"expected {unit!r}, found {u!r}")
        q = obj.get("qualifier", "")
        return Figure(value, u, q if isinstance(q, str) else "")

    def integer(self, obj: Any, where: str, unit: str | None = None) -> int:
        fig = self.figure(obj, where, unit)
        if fig.value != int(fig.value):
            raise self.fail(where, f"not a whole number: {fig.value}")
        return int(fig.value)

    def span(self, obj: Any, where: str, unit: str | None = None) -> Span:
        lo = self.number(self.get(obj, "min", where), f"{where}.min")
        hi = self.number(self.get(obj, "max", where), f"{where}.max")
        u = self.unit(obj, where)
        if unit is not None and u != unit:
            raise self.fail(f"{where}.unit", f"expected {unit!r}, found {u!r}")
        if lo > hi:
            raise self.fail(where, f"min {lo} above max {hi}")
        return Span(lo, hi, u)

    def values(self, obj: Any, where: str) -> tuple[float, ...]:
        self.unit(obj, where)
        vals = self.get(obj, "values", where)
        if not isinstance(vals, list) or not vals:
            raise self.fail(f"{where}.values", "must be a non-empty list")
        return tuple(self.number(v, f"{where}.values[{i}]") for i, v in enumerate(vals))

    def ints(self, obj: Any, where: str) -> tuple[int, ...]:
        vals = self.values(obj, where)
        if any(v != int(v) for v in vals):
            raise self.fail(f"{where}.values", "must be whole numbers")
        return tuple(int(v) for v in vals)

    def source(self, obj: Any, where: str, need_url: bool) -> Source:
        src = self.get(obj, "source", where)
        if not isinstance(src, dict):
            raise self.fail(f"{where}.source", "must be an object")
        title = src.get("title") or src.get("name")
        if not isinstance(title, str) or not title:
            raise self.fail(f"{where}.source", "needs a title or name")
        url = src.get("url", "")
        if need_url and url != SOURCE_URL:
            raise self.fail(f"{where}.source.url", f"expected {SOURCE_URL}")
        return Source(
            title=title,
            url=url,
            author=src.get("author", ""),
            date=src.get("date", ""),
            cited_in=src.get("cited_in", src.get("transcribed_in", "")),
        )


def _table_a(r: _Reader) -> TableA:
    doc = r.doc
    n = r.integer(r.get(r.get(doc, "conditions", ""), "n", "conditions"), "conditions.n")
    d = r.ints(r.get(doc, "d", ""), "d")
    reps_obj = r.get(doc, "replicas", "")
    if not isinstance(reps_obj, dict) or not reps_obj:
        raise r.fail("replicas", "must be a non-empty object")
    replicas: dict[str, tuple[float, ...]] = {}
    units = set()
    for name, rep in sorted(reps_obj.items()):
        vals = r.values(rep, f"replicas.{name}")
        units.add(r.unit(rep, f"replicas.{name}"))
        if len(vals) != len(d):
            raise r.fail(f"replicas.{name}", f"{len(vals)} values for {len(d)} D values")
        if any(v <= 0 for v in vals):
            raise r.fail(f"replicas.{name}", "times must be positive")
        replicas[name] = vals
    if units != {"us"}:
        raise r.fail("replicas", f"times must be in us, found {sorted(units)}")
    return TableA(n, d, replicas, "us", r.source(doc, "", need_url=True))


def _facts(r: _Reader) -> PointFacts:
    f = r.get(r.doc, "facts", "")

    def fact(name: str) -> dict:
        return r.get(f, name, "facts")

    notch, shoulder = fact("notch_point"), fact("shoulder_point")
    nominal, lap = fact("nominal"), fact("lap_times")
    scr, split = fact("scrambling"), fact("split_workaround")
    splits_obj = r.get(split, "splits", "facts.split_workaround")
    if not isinstance(splits_obj, list) or not splits_obj:
        raise r.fail("facts.split_workaround.splits", "must be a non-empty list")
    splits = tuple(
        (
            r.integer(r.get(s, "tasks", "splits"), f"splits[{i}].tasks", "tasks"),
            r.integer(r.get(s, "task_bytes", "splits"), f"splits[{i}].task_bytes", "B"),
        )
        for i, s in enumerate(splits_obj)
    )
    gb = "GB/s"
    return PointFacts(
        source=r.source(r.doc, "", need_url=True),
        notch_d=r.integer(r.get(notch, "d", "notch_point"), "notch_point.d"),
        notch_n=r.integer(r.get(notch, "n", "notch_point"), "notch_point.n"),
        notch_gbps=r.figure(r.get(notch, "throughput", "notch_point"), "notch_point", gb),
        shoulder_d=r.integer(r.get(shoulder, "d", "shoulder_point"), "shoulder_point.d"),
        shoulder_n=r.integer(r.get(shoulder, "n", "shoulder_point"), "shoulder_point.n"),
        shoulder_x=r.integer(r.get(shoulder, "x", "shoulder_point"), "shoulder_point.x", "lines"),
        shoulder_gbps=r.figure(r.get(shoulder, "throughput", "shoulder_point"), "shoulder", gb),
        floor=r.span(r.get(fact("floor"), "throughput", "floor"), "floor.throughput", gb),
        floor_laps=r.ints(r.get(fact("floor"), "laps", "floor"), "floor.laps"),
        nominal=r.span(r.get(nominal, "throughput", "nominal"), "nominal.throughput", gb),
        nominal_low=r.figure(r.get(nominal, "low", "nominal"), "nominal.low", gb),
        nominal_low_bytes=r.integer(
            r.get(nominal["low"], "bytes_per_core", "nominal.low"), "nominal.low.bytes", "B"
        ),
        nominal_high=r.figure(r.get(nominal, "high", "nominal"), "nominal.high", gb),
        nominal_high_bytes=r.integer(
            r.get(nominal["high"], "bytes_per_core", "nominal.high"), "nominal.high.bytes", "B"
        ),
        only_total_bytes=r.integer(
            r.get(fact("only_total"), "bytes_per_core", "only_total"), "only_total.bytes", "B"
        ),
        only_total_gbps=r.figure(
            r.get(fact("only_total"), "throughput", "only_total"), "only_total", gb
        ),
        recovery_offsets=r.ints(
            r.get(fact("v_notch"), "recovery_offsets", "v_notch"), "v_notch.recovery_offsets"
        ),
        page_lines=r.integer(r.get(fact("v_notch"), "page", "v_notch"), "v_notch.page", "lines"),
        slope_per_lap=r.figure(
            r.get(fact("k_scaling"), "slope_per_lap", "k_scaling"), "k_scaling.slope_per_lap"
        ),
        r_squared=r.span(r.get(fact("k_scaling"), "r_squared", "k_scaling"), "k_scaling.r2"),
        lap_notch=r.figure(r.get(lap, "notch", "lap_times"), "lap_times.notch"),
        lap_notch_gbps=r.figure(r.get(lap, "notch_throughput", "lap_times"), "lap_times", gb),
        lap_shoulder=r.figure(r.get(lap, "shoulder", "lap_times"), "lap_times.shoulder"),
        lap_shoulder_offset=r.integer(
            r.get(lap["shoulder"], "offset", "lap_times.shoulder"), "lap_times.offset", "lines"
        ),
        core_count_n=r.integer(r.get(fact("core_count"), "n", "core_count"), "core_count.n"),
        core_count_d=r.ints(r.get(fact("core_count"), "d", "core_count"), "core_count.d"),
        cores=r.span(r.get(fact("core_count"), "cores", "core_count"), "core_count.cores"),
        scramble_baseline=r.figure(r.get(scr, "baseline", "scrambling"), "scrambling", gb),
        scramble_scrambled=r.figure(r.get(scr, "scrambled", "scrambling"), "scrambling", gb),
        scramble_span=r.figure(r.get(scr, "span", "scrambling"), "scrambling.span", "MiB"),
        split_bytes_per_core=r.integer(
            r.get(split, "bytes_per_core", "split_workaround"), "split.bytes", "B"
        ),
        split_tasks=splits,
        control_bytes_per_core=r.integer(
            r.get(fact("control"), "bytes_per_core", "control"), "control.bytes", "B"
        ),
        quotes={k: v.get("quote", "") for k, v in f.items() if isinstance(v, dict)},
    )


def _platform(r: _Reader) -> Platform:
    f = r.get(r.doc, "facts", "")
    ceiling, anemll = r.get(f, "dram_ceiling", "facts"), r.get(f, "anemll_bench", "facts")
    return Platform(
        ceiling=r.figure(r.get(ceiling, "throughput", "dram_ceiling"), "dram_ceiling", "GB/s"),
        ceiling_source=r.source(ceiling, "dram_ceiling", need_url=False),
        anemll=r.figure(r.get(anemll, "throughput", "anemll_bench"), "anemll_bench", "GB/s"),
        anemll_source=r.source(anemll, "anemll_bench", need_url=False),
        anemll_workload=str(anemll.get("workload", "")),
    )


def load(directory: str | Path | None = None) -> Measurements:
    """All bundled datasets from `directory` (data/measured by default)."""
    base = Path(directory) if directory is not None else MEASURED_DIR
    paths = (base / "table_a.json", base / "point_facts.json", base / "platform.json")
    readers = [_Reader(p) for p in paths]
    return Measurements(
        table_a=_table_a(readers[0]),
        facts=_facts(readers[1]),
        platform=_platform(readers[2]),
        files=paths,
    )
