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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from ane_kdma import fileio
from ane_kdma.contract import MAX_CORES
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, RATE_ONE
from ane_kdma.hypotheses import Geometry
from ane_kdma.profile import Profile, Settings, load_profile
from ane_kdma.schema import Doc

DEFAULT_CHIP = "m3"
CHIP_FILE = "chip.json"
PROFILE_FILE = "profile.json"
MEASURED_DIR = "measured"


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
    citation: str


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

    @property
    def profile(self) -> Profile:
        if self.fitted is None:
            raise InputError(
                f"chip {self.name} has no {PROFILE_FILE} yet: run `ane-kdma calibrate "
                f"--chip {self.path}` first"
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
    def hypothesis(self):  # -> Hypothesis: the reading the profile was fitted with
        from ane_kdma import hypotheses

        return hypotheses.get(self.profile.hypothesis)

    def with_profile(self, profile: Profile) -> Chip:
        _check_profile(self, profile, profile.name)
        return replace(self, fitted=profile)

    @cached_property
    def measured(self):  # -> measured.Measurements (imported lazily: measured imports chip)
        from ane_kdma import measured

        return measured.load(self.path / MEASURED_DIR, self)

    # ------------------------------------------------------------ units, in one place
    def _stream_ns(self, cycles, bytes_total):
        """Streaming time: the cycles at the clock, never below what the ceiling allows.

        GB/s is bytes per ns, so the ceiling's least stream time is bytes / GB/s ns.
        """
        return np.maximum(
            np.asarray(cycles, dtype=float) * self.profile.ns_per_cycle,
            np.asarray(bytes_total, dtype=float) / self.ceiling_gbps,
        )

    def time_us(self, cycles, bytes_total=0):
        """A request's time: per-request overhead plus streaming time (scalar or array)."""
        t = self.profile.overhead_us + self._stream_ns(cycles, bytes_total) / 1000.0
        return float(t) if np.ndim(t) == 0 else t

    def stream_gbps(self, bytes_total, cycles):
        """Throughput while streaming, without the per-request overhead (ceiling applied)."""
        g = np.asarray(bytes_total, dtype=float) / self._stream_ns(cycles, bytes_total)
        return float(g) if np.ndim(g) == 0 else g

    def gbps(self, bytes_total, time_us):
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
    """A chip folder, schema-checked; `profile` overrides its profile.json with another file."""
    folder = resolve(name_or_dir)
    doc = Doc.load(folder / CHIP_FILE, "chip file")
    cores = doc.integer("cores", 1, MAX_CORES)
    line_bytes = doc.integer("line_bytes", 4, 4096)
    if line_bytes & (line_bytes - 1):
        raise doc.fail("line_bytes", f"{line_bytes} is not a power of two")
    geometry = Geometry(
        line_bytes=line_bytes,
        ring_bits=doc.integer("ring_bits", 2, 31),
        prefetch_max_lines=doc.integer("prefetch_max_lines", 1, 1 << 16),
        kmem_lines=doc.integer("kmem_lines", 2, 1 << 16),
    )
    if geometry.kmem_lines & (geometry.kmem_lines - 1):
        raise doc.fail("kmem_lines", f"{geometry.kmem_lines} is not a power of two")
    cdoc = doc.obj("dram_ceiling")
    unit = cdoc.string("unit")
    if unit != "GB/s":
        raise cdoc.fail(cdoc.key("unit"), f"expected 'GB/s', found {unit!r}")
    ceiling = Ceiling(cdoc.number("value", positive=True, hi=1e6), _citation(cdoc))
    name = doc.string("name")
    if name != folder.name and folder.parent.resolve() == chips_dir().resolve():
        raise doc.fail("name", f"{name!r} does not match its folder {folder.name!r}")
    prof_path = Path(profile) if profile is not None else folder / PROFILE_FILE
    if profile is not None and not prof_path.suffix:
        prof_path = chips_dir() / str(profile) / PROFILE_FILE  # --profile NAME: that chip's fit
    prof = None if profile is None and not prof_path.exists() else load_profile(prof_path)
    chip = Chip(
        name=name,
        label=doc.string("label", name),
        path=folder,
        cores=cores,
        geometry=geometry,
        ceiling=ceiling,
        td=TdLayout.from_doc(doc.obj("td"), cores),
        fitted=prof,
        ns_per_cycle_hand_set=doc.obj("clock").number("ns_per_cycle", positive=True, hi=1e6),
    )
    if prof is not None:
        _check_profile(chip, prof, str(prof_path))
    return chip


def _check_profile(chip: Chip, profile: Profile, where: str) -> None:
    if not math.isclose(profile.ceiling_gbps, chip.ceiling_gbps, rel_tol=1e-12):
        raise InputError(
            f"{where}: profile fitted for a {profile.ceiling_gbps:g} GB/s ceiling, "
            f"chip {chip.name} has {chip.ceiling_gbps:g} GB/s (recalibrate)"
        )
    if profile.window_lines > chip.geometry.kmem_lines:
        raise InputError(
            f"{where}: window_lines {profile.window_lines} exceeds the chip's "
            f"{chip.geometry.kmem_lines}-line KMem"
        )


def _citation(doc: Doc) -> str:
    """A figure's source: a URL or a citation; every figure must name one."""
    src = doc.obj("source")
    title = src.string("title", "") or src.string("name", "")
    where = src.string("url", "") or src.string("cited_in", "") or src.string("transcribed_in", "")
    if not title or not where:
        raise src.fail(src.where, "a source needs a title (or name) and a url (or cited_in)")
    return f"{title}, {where}"
