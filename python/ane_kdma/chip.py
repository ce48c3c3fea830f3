"""A chip is data: data/chips/<name>/ holds its micro-architecture, measurements and profile.

Why: nothing about the M3 is written into the code. ``chip.json`` gives the
cores, line size, ring width, prefetch clamp, KMem size, the DRAM ceiling (with
its source) and the task-descriptor register layout; ``measured/`` holds the
published figures, each with unit, qualifier and source; ``profile.json`` is
the fitted profile ``calibrate --chip`` writes. Every command takes
``--chip NAME|DIR`` (m3 by default).

Units live here and nowhere else: :meth:`Chip.time_us` turns cycles into µs
with the per-request overhead and the DRAM ceiling applied, and
:meth:`Chip.gbps` turns bytes and µs into GB/s. No engine or command does
either on its own, so nothing can report above the ceiling.

A chip folder is checked whole by :func:`load` before any command uses it:
chip.json, the profile, fits.json and every file in ``measured/``, each
refusal one line naming the file and the key. Besides types and finiteness,
chip.json is held to what the RTL and the physics allow (each bound below is
refused beyond it, with this reason):

* ``cores`` 1..16: kdma_top's ``NumCores`` (:data:`ane_kdma.hw.MAX_CORES`).
* ``line_bytes`` a power of two; ``kmem_lines`` a power of two up to 4096
  (four times the M3's 1024-line KMem: a core-private SRAM; the planner's
  search and the analytic model grow with it).
* ``prefetch_max_lines`` a power of two (the RTL's page is the low
  $clog2(clamp) bits of the issued count), at most the KMem (the RTL caps
  window + credit at the KMem, so a larger clamp never binds) and at most half
  the ring (the signed reading's magnitude never exceeds half a ring).
* ``clock.ns_per_cycle`` 0.1..100 ns (a 10 GHz to 10 MHz clock).
* ``dram_ceiling`` at least one line per cycle (line_bytes / ns_per_cycle GB/s:
  a memory that cannot feed one kernel-DMA core at its full rate) and at most
  what kdma_top's 22-bit aggregate-rate input holds.
* ``td`` offsets word-aligned, inside the descriptor, and no two registers
  overlapping (a coefficient register spans one word per core).

The profile and every fit must be for this chip (its ceiling and clock),
name a registered buggy reading and mechanism, and fit the RTL's inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike

from ane_kdma import fileio
from ane_kdma import hypotheses as hyps
from ane_kdma import measured as measured_data
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, MAX_CORES, RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import AGG_RATE_MAX_Q16, Profile, Settings, load_fits, load_profile
from ane_kdma.schema import Doc, Source, source

DEFAULT_CHIP = "m3"
CHIP_FILE = "chip.json"
PROFILE_FILE = "profile.json"
FITS_FILE = "fits.json"
MEASURED_DIR = "measured"
FP16_BYTES = 2
MAX_KMEM_LINES = 4096  # four times the M3's KMem (module doc)
CLOCK_NS = (0.1, 100.0)  # a 10 GHz to 10 MHz clock


def data_dir() -> Path:
    """The bundled data: the checkout's data/ (editable install) or the wheel's copy."""
    here = Path(__file__).resolve().parent
    checkout = here.parents[1] / "data"
    return checkout if (checkout / "chips").is_dir() else here / "data"


def chips_dir() -> Path:
    return data_dir() / "chips"


@dataclass(frozen=True)
class TdLayout:
    """Where the kernel-DMA registers sit in a task descriptor (byte offsets)."""

    bytes: int
    stream_word: int
    zin_header: str
    stride_per_cin: int
    exe_cycles: int
    stream: int
    coeff_dma_config: int
    coeff_base: int
    coeff_size: int
    cin: int
    stride: int
    stride_mirror: int
    result_base: int

    OFFSETS = (
        "exe_cycles",
        "stream",
        "coeff_dma_config",
        "coeff_base",
        "coeff_size",
        "cin",
        "stride",
        "stride_mirror",
        "result_base",
    )

    @classmethod
    def from_doc(cls, doc: Doc, cores: int) -> TdLayout:
        size = doc.hexint("bytes", 4, 1 << 16)
        if size % 4:
            raise doc.fail(doc.key("bytes"), f"{size} is not a whole number of 32-bit words")
        offs = doc.obj("offsets")
        values = {name: offs.hexint(name, 0, size - 4) for name in cls.OFFSETS}
        for name, off in values.items():
            span = 4 * cores if name.startswith("coeff_") else 4
            if off % 4:
                raise offs.fail(offs.key(name), f"0x{off:x} is not word-aligned")
            if off + span > size:
                raise offs.fail(offs.key(name), f"0x{off:x} + {span} bytes runs past the TD")
        spans = sorted((off, name) for name, off in values.items())
        for (off, name), (nxt, other) in zip(spans, spans[1:], strict=False):
            end = off + (4 * cores if name.startswith("coeff_") else 4)
            if nxt < end:
                raise offs.fail(
                    offs.key(other),
                    f"0x{nxt:x} overlaps {name} (0x{off:x}..0x{end - 1:x}): one register each",
                )
        return cls(
            bytes=size,
            stream_word=doc.hexint("stream_word"),
            zin_header=doc.string("zin_header"),
            stride_per_cin=doc.integer("stride_per_cin", 1, 1 << 16),
            **values,
        )


@dataclass(frozen=True)
class Ceiling:
    value_gbps: float
    source: Source

    @property
    def citation(self) -> str:
        return self.source.cite()


@dataclass(frozen=True)
class Chip:
    name: str
    label: str
    path: Path
    cores: int
    geometry: Geometry
    ceiling: Ceiling
    td: TdLayout
    fitted: Profile | None  # profile.json; None until `calibrate --chip` has written one
    ns_per_cycle_hand_set: float  # the clock calibrate assumes (chip.json clock)
    fits: tuple[Profile, ...] = ()  # fits.json: every pair calibrate fitted, each checked

    @property
    def profile(self) -> Profile:
        if self.fitted is None:
            raise InputError(
                f"chip {self.name} has no {PROFILE_FILE} yet: run `ane-kdma calibrate "
                f"--chip {self.path}` first (with `--prior m3` for a handful of timed figures)"
            )
        return self.fitted

    # ------------------------------------------------------------ derived
    @property
    def line_bytes(self) -> int:
        return self.geometry.line_bytes

    @property
    def ring_lines(self) -> int:
        return self.geometry.ring_lines

    @property
    def ceiling_gbps(self) -> float:
        return self.ceiling.value_gbps

    @property
    def agg_rate_q16(self) -> int:
        """The DRAM ceiling in Q.16 lines per cycle, rounded down so it never exceeds it.

        lines/cycle = GB/s x ns_per_cycle / line bytes.
        """
        return int(self.ceiling_gbps * self.profile.ns_per_cycle / self.line_bytes * RATE_ONE)

    @property
    def settings(self) -> Settings:
        """The profile as run-time inputs of kdma_top."""
        p = self.profile
        return Settings(
            latency=p.latency_cycles,
            window=p.window_lines,
            core_rate_q16=p.core_rate_q16,
            agg_rate_q16=self.agg_rate_q16,
            **p.mechanism_inputs(),
        ).check(self.geometry.kmem_lines)

    @property
    def hypothesis(self) -> Hypothesis:
        """The reading this chip's profile names: what "buggy" means here, and only here."""
        return hyps.get(self.profile.hypothesis)

    def variant(self, name: str) -> Hypothesis:
        """A ``--variant`` on this chip: a reading by name, or "buggy" for the profile's reading.

        The one place "buggy" is resolved: the CLI, the library and the analyses
        all come here, so two chips may mean different readings by it.
        """
        return self.hypothesis if hyps.is_buggy_alias(name) else hyps.get(name)

    def with_profile(self, profile: Profile) -> Chip:
        _check_profile(self, profile, f"profile {profile.name}: ")
        chip = replace(self, fitted=profile)
        if "measured" in self.__dict__:  # the same figures: read once per folder
            chip.__dict__["measured"] = self.__dict__["measured"]
        return chip

    @cached_property
    def measured(self) -> measured_data.Measurements:
        """The figures of measured/ (read and checked once, by :func:`load`)."""
        return measured_data.load(self.path / MEASURED_DIR, self)

    # ------------------------------------------------------------ a D x N matmul on the cores
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

    def aggregate_gbps(self, bytes_each: ArrayLike, time_us: ArrayLike) -> Any:
        """cores * bytes_per_core / time, the article's definition of throughput."""
        return self.cores * np.asarray(bytes_each, dtype=float) / (np.asarray(time_us) * 1e3)

    def time_for_gbps(self, bytes_each: ArrayLike, gbps: ArrayLike) -> Any:
        """The task time (µs) a throughput figure implies for all cores."""
        return self.cores * np.asarray(bytes_each, dtype=float) / (np.asarray(gbps) * 1e3)

    # ------------------------------------------------------------ units, in one place
    def _stream_ns(self, cycles: ArrayLike, bytes_total: ArrayLike) -> np.ndarray:
        """Streaming time: the cycles at the clock, never below what the ceiling allows.

        GB/s is bytes per ns, so the ceiling's least stream time is bytes / GB/s ns.
        """
        return np.maximum(
            np.asarray(cycles, dtype=float) * self.profile.ns_per_cycle,
            np.asarray(bytes_total, dtype=float) / self.ceiling_gbps,
        )

    @overload
    def time_us(self, cycles: float, bytes_total: float = 0) -> float: ...

    @overload
    def time_us(self, cycles: np.ndarray, bytes_total: ArrayLike = 0) -> np.ndarray: ...

    @overload
    def time_us(self, cycles: ArrayLike, bytes_total: ArrayLike = 0) -> Any: ...

    def time_us(self, cycles: ArrayLike, bytes_total: ArrayLike = 0) -> Any:
        """A request's time: per-request overhead plus streaming time (scalar or array)."""
        t = self.profile.overhead_us + self._stream_ns(cycles, bytes_total) / 1000.0
        return float(t) if np.ndim(t) == 0 else t

    @overload
    def stream_gbps(self, bytes_total: float, cycles: float) -> float: ...

    @overload
    def stream_gbps(self, bytes_total: np.ndarray, cycles: ArrayLike) -> np.ndarray: ...

    @overload
    def stream_gbps(self, bytes_total: ArrayLike, cycles: ArrayLike) -> Any: ...

    def stream_gbps(self, bytes_total: ArrayLike, cycles: ArrayLike) -> Any:
        """Throughput while streaming, without the per-request overhead (ceiling applied)."""
        g = np.asarray(bytes_total, dtype=float) / self._stream_ns(cycles, bytes_total)
        return float(g) if np.ndim(g) == 0 else g

    @overload
    def gbps(self, bytes_total: float, time_us: float) -> float: ...

    @overload
    def gbps(self, bytes_total: np.ndarray, time_us: ArrayLike) -> np.ndarray: ...

    @overload
    def gbps(self, bytes_total: ArrayLike, time_us: ArrayLike) -> Any: ...

    def gbps(self, bytes_total: ArrayLike, time_us: ArrayLike) -> Any:
        """Aggregate throughput: bytes over the request's time (the article's definition)."""
        g = np.asarray(bytes_total, dtype=float) / (np.asarray(time_us, dtype=float) * 1e3)
        return float(g) if np.ndim(g) == 0 else g

    def bytes_fit(self, size: int) -> bool:
        """A per-core size the 32-bit size register can hold, in whole lines."""
        return 0 < size < (1 << ADDR_BITS) and size % self.line_bytes == 0


# ---------------------------------------------------------------- loading


def resolve(name_or_dir: str | Path | None) -> Path:
    """`--chip NAME|DIR`: a folder path, or the name of a folder under data/chips."""
    target = DEFAULT_CHIP if name_or_dir is None else str(name_or_dir)
    if not target.strip():
        raise InputError("--chip needs a chip name or a folder")
    path = Path(target)
    if fileio.is_dir(path, "--chip"):  # a name too long or a folder without permission: one line
        return path
    if len(path.parts) == 1 and fileio.is_dir(chips_dir() / target, "--chip"):
        return chips_dir() / target
    known = sorted(p.name for p in chips_dir().iterdir() if (p / CHIP_FILE).is_file())
    raise InputError(f"no such chip: {target} (known: {', '.join(known)}; or a chip folder)")


def load(name_or_dir: str | Path | None = None, profile: str | Path | None = None) -> Chip:
    """A chip folder, checked whole (module doc); `profile` overrides its profile.json."""
    folder = resolve(name_or_dir)
    doc = Doc.load(folder / CHIP_FILE, "chip file")
    cores = doc.integer("cores", 1, MAX_CORES)
    line_bytes = _power_of_two(doc, "line_bytes", 4, 4096)
    ring_bits = doc.integer("ring_bits", 2, 31)
    kmem_lines = _power_of_two(doc, "kmem_lines", 2, MAX_KMEM_LINES)
    clamp_hi = min(kmem_lines, (1 << ring_bits) // 2)
    geometry = Geometry(
        line_bytes=line_bytes,
        ring_bits=ring_bits,
        prefetch_max_lines=_power_of_two(doc, "prefetch_max_lines", 1, clamp_hi),
        kmem_lines=kmem_lines,
    )
    ns = doc.obj("clock").number("ns_per_cycle", *CLOCK_NS)
    cdoc = doc.obj("dram_ceiling")
    unit = cdoc.string("unit")
    if unit != "GB/s":
        raise cdoc.fail(cdoc.key("unit"), f"expected 'GB/s', found {unit[:40]!r}")
    one_line = line_bytes / ns  # GB/s is bytes per ns
    top = AGG_RATE_MAX_Q16 / RATE_ONE * one_line
    value = cdoc.number("value", positive=True)
    if not one_line <= value <= top:
        why = (
            f"below {one_line:g} GB/s, one {line_bytes}-B line per {ns:g}-ns cycle"
            if value < one_line
            else f"above {top:g} GB/s, what kdma_top's 22-bit aggregate-rate input holds"
        )
        raise cdoc.fail(cdoc.key("value"), f"{value:g} GB/s is {why}")
    ceiling = Ceiling(value, source(cdoc))
    name = doc.string("name")
    if name != folder.name and folder.parent.resolve() == chips_dir().resolve():
        raise doc.fail("name", f"{name[:40]!r} does not match its folder {folder.name!r}")
    prof_path = Path(profile) if profile is not None else folder / PROFILE_FILE
    if profile is not None and not prof_path.suffix:
        prof_path = chips_dir() / str(profile) / PROFILE_FILE  # --profile NAME: that chip's fit
    absent = profile is None and fileio.probe(prof_path, "profile") is None
    prof = None if absent else load_profile(prof_path)  # anything there but a file: refused
    fits_path = folder / FITS_FILE
    chip = Chip(
        name=name,
        label=doc.string("label", name),
        path=folder,
        cores=cores,
        geometry=geometry,
        ceiling=ceiling,
        td=TdLayout.from_doc(doc.obj("td"), cores),
        fitted=prof,
        ns_per_cycle_hand_set=ns,
        fits=() if fileio.probe(fits_path, "fits file") is None else load_fits(fits_path),
    )
    if prof is not None:
        _check_profile(chip, prof, f"{prof_path.name}: ")
    for i, fit in enumerate(chip.fits):
        _check_profile(chip, fit, f"{FITS_FILE}: fits[{i}].profile.")
    chip.measured  # noqa: B018 (read and checked now, before any command uses the chip)
    return chip


def _power_of_two(doc: Doc, name: str, lo: int, hi: int) -> int:
    value = doc.integer(name, lo, hi)
    if value & (value - 1):
        raise doc.fail(name, f"{value} is not a power of two")
    return value


def _check_profile(chip: Chip, profile: Profile, where: str) -> None:
    """A profile fitted for this chip: its ceiling and clock, and inputs the RTL can take.

    `where` names the file and the profile's place in it ("profile.json: ",
    "fits.json: fits[3].profile."), so each refusal names the file and field.
    """
    if not math.isclose(profile.ceiling_gbps, chip.ceiling_gbps, rel_tol=1e-12):
        raise InputError(
            f"{where}ceiling_gbps: profile fitted for a {profile.ceiling_gbps:g} GB/s ceiling, "
            f"chip {chip.name} has {chip.ceiling_gbps:g} GB/s (recalibrate)"
        )
    if not math.isclose(profile.ns_per_cycle, chip.ns_per_cycle_hand_set, rel_tol=1e-12):
        raise InputError(
            f"{where}ns_per_cycle: profile fitted at {profile.ns_per_cycle:g} ns per cycle, "
            f"chip {chip.name}'s clock is {chip.ns_per_cycle_hand_set:g} ns (recalibrate)"
        )
    if profile.window_lines > chip.geometry.kmem_lines:
        raise InputError(
            f"{where}window_lines: {profile.window_lines} exceeds the chip's "
            f"{chip.geometry.kmem_lines}-line KMem"
        )
    try:
        replace(chip, fitted=profile).settings.check(chip.geometry.kmem_lines)
    except InputError as exc:
        raise InputError(f"{where.rstrip(': .')}: {exc}") from None
