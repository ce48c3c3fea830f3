"""The TD field map: named register fields at the offsets a chip's data gives.

Why a function of the layout and not a table: the offsets and the core count
are chip data (``data/chips/<name>/chip.json``), so the map is built from a
:class:`~ane_kdma.chip.TdLayout` and a core count, once per layout. Field
names follow Apple's ``ZinIrRegBitPrintOutDebug`` printout on every chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from ane_kdma import chip as chips
from ane_kdma.chip import Chip, TdLayout
from ane_kdma.errors import InputError

WORD_BITS = 32
WORD_MASK = (1 << WORD_BITS) - 1
FORMATS = ("bin", "text", "zin")

# Field names (per-core ones take the core index); the Zin name adds Apple's prefix.
EXE_CYCLES = "Header[1].ExeCycles"
STREAM = "KernelDMASrc.StreamWord"
EN = "KernelDMASrc.CoeffDMAConfig[{}].En"
PREFETCH = "KernelDMASrc.CoeffDMAConfig[{}].PrefetchParticipateEn"
BASE = "KernelDMASrc.CoeffBaseAddr[{}].Addr"
SIZE = "KernelDMASrc.CoeffBfrSize[{}].MemBfrSize"
CIN = "Common.Cin.Cin"
STRIDE = "L2.SourceRowStride.Stride"
MIRROR = "L2.SourceRowStride.Stride (mirror, unnamed)"
RESULT_BASE = "L2.ResultBase.Addr"


@dataclass(frozen=True)
class FieldSpec:
    """One named register field: its place in the TD and Apple's name for it."""

    name: str
    offset: int
    lsb: int = 0
    width: int = WORD_BITS
    zin: str | None = None  # full ZinIrRegBitPrintOutDebug name; None if Apple prints none

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb


def _regs(name: str, offset: int, lsb: int = 0, width: int = WORD_BITS) -> FieldSpec:
    """A field Apple prints as ``aneRegs.<name>``."""
    return FieldSpec(name, offset, lsb, width, f"aneRegs.{name}")


@lru_cache(maxsize=16)
def fields(td: TdLayout, cores: int) -> tuple[FieldSpec, ...]:
    """The field map of erratum.md section 5 for this layout, in TD order."""
    specs = [
        FieldSpec(EXE_CYCLES, td.exe_cycles, 0, 16, f"aneTD.{EXE_CYCLES}"),
        FieldSpec(STREAM, td.stream),
    ]
    for i in range(cores):
        off = td.coeff_dma_config + 4 * i
        specs += [_regs(EN.format(i), off, 0, 1), _regs(PREFETCH.format(i), off, 28, 1)]
    specs += [_regs(BASE.format(i), td.coeff_base + 4 * i) for i in range(cores)]
    specs += [_regs(SIZE.format(i), td.coeff_size + 4 * i) for i in range(cores)]
    specs += [
        _regs(CIN, td.cin),
        _regs(STRIDE, td.stride),
        FieldSpec(MIRROR, td.stride_mirror),
        _regs(RESULT_BASE, td.result_base),
    ]
    return tuple(sorted(specs, key=lambda s: s.offset))  # stable: same-word fields keep order


@lru_cache(maxsize=16)
def by_name(td: TdLayout, cores: int) -> Mapping[str, FieldSpec]:
    return MappingProxyType({spec.name: spec for spec in fields(td, cores)})


@lru_cache(maxsize=16)
def by_zin(td: TdLayout, cores: int) -> Mapping[str, FieldSpec]:
    return MappingProxyType({spec.zin: spec for spec in fields(td, cores) if spec.zin})


@lru_cache(maxsize=16)
def mapped_bits(td: TdLayout, cores: int) -> Mapping[int, int]:
    """Byte offset -> mask of the bits some named field covers."""
    out: dict[int, int] = {}
    for spec in fields(td, cores):
        out[spec.offset] = out.get(spec.offset, 0) | spec.mask
    return MappingProxyType(out)


def fail(source: str, message: str) -> InputError:
    """One line, prefixed by where it came from: the CLI prints it as is."""
    text = f"{source}: {message}" if source else message
    return InputError(" ".join(text.split()))


def show(text: str, limit: int = 60) -> str:
    """A quoted, single-line excerpt of user input for an error message."""
    cut = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(cut)


def chip_or_default(chip: Chip | None) -> Chip:
    """The caller's chip; the default chip (m3) only where the caller gives none."""
    return chips.load() if chip is None else chip
