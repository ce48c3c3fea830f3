"""The TD field map: named register fields at the offsets a chip's data gives.

Why a function of the layout and not a table: the offsets and the core count
are chip data (``data/chips/<name>/chip.json``), so the map is built from a
:class:`~ane_kdma.chip.TdLayout` and a core count, once per layout. Field
names follow Apple's ``ZinIrRegBitPrintOutDebug`` printout on every chip.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from ane_kdma import chip as chips
from ane_kdma.chip import Chip, TdLayout
from ane_kdma.errors import InputError
from ane_kdma.fileio import one_line

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


# ---------------------------------------------------------------- names that are almost known

_INDEX = re.compile(r"\[(\d{1,6})\]")
_NOT_LETTER = re.compile(r"[^a-z]")


def _template(name: str) -> tuple[str, tuple[int, ...]]:
    """A Zin name with its indices taken out: ('aneRegs.X.Size[].Size', (3,))."""
    return _INDEX.sub("[]", name), tuple(int(i) for i in _INDEX.findall(name))


@dataclass(frozen=True)
class _Templates:
    """The layout's Zin names by shape, for telling a misspelt field from another field."""

    exact: Mapping[str, str]  # template -> itself
    one_cut: Mapping[str, str]  # a template's letters (lower case), whole or less one letter
    longest: int  # the longest squeezed template
    by_part: Mapping[tuple[int, int, tuple[str, ...]], tuple[str, ...]]  # one part left out


@lru_cache(maxsize=16)
def _templates(td: TdLayout, cores: int) -> _Templates:
    exact: dict[str, str] = {}
    for spec in fields(td, cores):
        if spec.zin:
            exact.setdefault(_template(spec.zin)[0], _template(spec.zin)[0])
    squeezed = {_NOT_LETTER.sub("", t.lower()): t for t in exact}
    one_cut = {sq[:i] + sq[i + 1 :]: t for sq, t in squeezed.items() for i in range(len(sq))}
    by_part: dict[tuple[int, int, tuple[str, ...]], tuple[str, ...]] = {}
    for t in exact:
        parts = t.lower().split(".")
        for j in range(len(parts)):
            key = (len(parts), j, tuple(parts[:j] + parts[j + 1 :]))
            by_part[key] = (*by_part.get(key, ()), t)
    return _Templates(exact, {**one_cut, **squeezed}, max(map(len, squeezed)), by_part)


def _close(a: str, b: str) -> bool:
    """Within a typing slip of each other: 0 edits for 1-2 letters, 1 up to 5, else 2.

    Optimal-string-alignment distance (a swap of neighbours is one edit),
    computed only inside the band the bound allows, so it stays cheap.
    """
    bound = 0 if len(b) <= 2 else 1 if len(b) <= 5 else 2
    if abs(len(a) - len(b)) > bound:
        return False
    if bound == 0:
        return a == b
    inf = bound + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [inf] * len(b)
        for j in range(max(1, i - bound), min(len(b), i + bound) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            best = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, prev2[j - 2] + 1)
            cur[j] = min(best, inf)
        if min(cur) > bound:
            return False
        prev2, prev = prev, cur
    return prev[len(b)] <= bound


def near_miss(name: str, chip: Chip) -> str | None:
    """Why a Zin name the layout does not know is taken for a slip, or None for another field.

    A name is refused when it is a known field with a core the chip lacks, or
    a known field but for case, punctuation and digits, or one edit (a character
    added, dropped, changed or swapped with its neighbour) from one, or one
    dot-separated part within a typing slip of a known one: read as an
    unknown extra, such a line would silently drop a core or a size. The
    one-edit test looks the name up with each character cut out (symmetric
    deletion), so it costs a few dictionary look-ups per name.
    """
    t = _templates(chip.td, chip.cores)
    shape, indices = _template(name)

    def meant(template: str) -> str:
        filled = template
        for i in indices[: template.count("[]")]:
            filled = filled.replace("[]", f"[{i}]", 1)
        return filled.replace("[]", "[i]")

    if shape in t.exact:
        if "KernelDMASrc.Coeff" in shape and indices:
            last = chip.cores - 1
            return f"{name} names core {indices[0]}, but chip {chip.name} has cores 0-{last}"
        return f"{name} is not a field of this layout"
    sq = _NOT_LETTER.sub("", shape.lower())
    cuts = range(len(sq)) if len(sq) <= t.longest + 1 else range(0)  # longer: not one edit
    for cut in (sq, *(sq[:i] + sq[i + 1 :] for i in cuts)):
        known = t.one_cut.get(cut)  # both cut (or neither) by one character: one edit apart
        if known is not None:
            return f"unknown field {name}: did you mean {meant(known)}?"
    parts = shape.lower().split(".")
    for j, part in enumerate(parts):
        for template in t.by_part.get((len(parts), j, tuple(parts[:j] + parts[j + 1 :])), ()):
            if _close(part, template.lower().split(".")[j]):
                return f"unknown field {name}: did you mean {meant(template)}?"
    return None


def fail(source: str, message: str) -> InputError:
    """One line, prefixed by where it came from: the CLI prints it as is."""
    text = f"{source}: {message}" if source else message
    return InputError(one_line(text))


def show(text: str, limit: int = 60) -> str:
    """A quoted, single-line excerpt of user input for an error message."""
    cut = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(cut)


def chip_or_default(chip: Chip | None) -> Chip:
    """The caller's chip; the default chip (m3) only where the caller gives none."""
    return chips.load() if chip is None else chip
