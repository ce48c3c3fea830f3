"""Register dumps (ANE task descriptors): read, check, describe and write them.

A dump is the evidence the rest of the model stands on, so this layer never
invents a word. A :class:`Dump` holds exactly the bits a file gives; a field
the file leaves out reads as ``None``. :func:`task_from_dump` then turns the
words into a :class:`DumpTask` (per-core base and size), and checks the dump
against itself on the way.

Three formats, told apart by content, never by file name:

* ``bin``: a raw TD, exactly 0x274 bytes of little-endian 32-bit words. A
  binary cannot say "unknown", so every word counts as given.
* ``text``: ``offset value`` lines, both in hex with a ``0x`` prefix, e.g.
  ``TD+0x0b4 0x00100000`` or ``0x0b4 = 0x00100000``. ``#`` and ``//``
  start comments. A bare ``2048`` is refused, not read as hex.
* ``zin``: Apple's ``ZinIrRegBitPrintOutDebug`` printout, ``name = decimal``
  lines after a ``// ZinIrRegBitPrintOutDebug_7u_`` header. A line such as
  ``CoeffDMAConfig[3].En = 1`` gives only bit 0 of its word. The other bits
  stay unknown.

Rules for building a task (documented here because replay depends on them):

* A core is enabled when its ``CoeffDMAConfig.En`` bit is 1. If that bit is
  unknown (the published dumps leave the config words out), the core is
  enabled when its size is known and non-zero, so a zero size there just
  means the core is off. In a binary, an all-zero
  config block (all 16 words) is read as "not captured" rather than "every
  core off". A TD that turns every core off has nothing to stream, so such a
  block only occurs where the capture left the config words out. For the
  same reason, a zero stream word at 0x028 in a binary raises no warning.
* Hard errors (:class:`InputError`): no core sizes; an enabled core with its
  size unknown or 0; every size 0; a size that is not whole 64-byte lines
  (the kernel DMA moves whole lines and the model replays whole lines, so a
  ragged size cannot be replayed exactly); enabled cores whose sizes
  disagree; and ``Cin x Cout x 2 / 16`` not equal to the core size when the
  caller passes Cout.
* Soft warnings (listed in ``DumpTask.warnings``): core bases that do not step
  by the core size; an L2 stride other than ``16 x Cin``; a stride mirror
  (0x1f4) that differs from the stride; a stream word at 0x028 other than
  0xF401F800. The transfers are still well defined in each of these cases.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ane_kdma.errors import InputError
from ane_kdma.fileio import write_atomic
from ane_kdma.hw import LINE_BYTES, NUM_CORES_MAX, RING_LINES, lap_and_offset

__all__ = [
    "DUMP_DIR",
    "FIELDS",
    "FORMATS",
    "TD_BYTES",
    "CoreTransfer",
    "Dump",
    "DumpTask",
    "FieldSpec",
    "add_dump_command",
    "describe",
    "detect_format",
    "dump_words",
    "load_task",
    "parse_dump",
    "read_dump",
    "render",
    "run_dump",
    "task_from_dump",
    "write_dump",
]

DUMP_DIR = Path(__file__).resolve().parents[2] / "data" / "dumps"

TD_BYTES = 0x274  # one task descriptor in this layout family (erratum.md section 5)
WORD_BITS = 32
WORD_MASK = (1 << WORD_BITS) - 1
STREAM_WORD = 0xF401F800  # stream header that opens the KernelDMASrc block
ZIN_HEADER = "// ZinIrRegBitPrintOutDebug_7u_"
FORMATS = ("bin", "text", "zin")
CORES = NUM_CORES_MAX  # the M3 ANE has 16 cores, one register slot each

OFF_EXE_CYCLES = 0x004
OFF_STREAM = 0x028
OFF_CONFIG = 0x034
OFF_BASE = 0x074
OFF_SIZE = 0x0B4
OFF_CIN = 0x134
OFF_STRIDE = 0x1F0
OFF_STRIDE_MIRROR = 0x1F4
OFF_RESULT_BASE = 0x214
STRIDE_PER_CIN = 16  # L2 source row stride = 16 x Cin in every published dump


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


def _build_fields() -> tuple[FieldSpec, ...]:
    """The field map of erratum.md section 5, in TD order."""
    kdma = "aneRegs.KernelDMASrc"
    specs = [
        FieldSpec("Header[1].ExeCycles", OFF_EXE_CYCLES, 0, 16, "aneTD.Header[1].ExeCycles"),
        FieldSpec("KernelDMASrc.StreamWord", OFF_STREAM),
    ]
    for i in range(CORES):
        off = OFF_CONFIG + 4 * i
        specs.append(
            FieldSpec(
                f"KernelDMASrc.CoeffDMAConfig[{i}].En", off, 0, 1, f"{kdma}.CoeffDMAConfig[{i}].En"
            )
        )
        specs.append(
            FieldSpec(
                f"KernelDMASrc.CoeffDMAConfig[{i}].PrefetchParticipateEn",
                off,
                28,
                1,
                f"{kdma}.CoeffDMAConfig[{i}].PrefetchParticipateEn",
            )
        )
    for i in range(CORES):
        specs.append(
            FieldSpec(
                f"KernelDMASrc.CoeffBaseAddr[{i}].Addr",
                OFF_BASE + 4 * i,
                zin=f"{kdma}.CoeffBaseAddr[{i}].Addr",
            )
        )
    for i in range(CORES):
        specs.append(
            FieldSpec(
                f"KernelDMASrc.CoeffBfrSize[{i}].MemBfrSize",
                OFF_SIZE + 4 * i,
                zin=f"{kdma}.CoeffBfrSize[{i}].MemBfrSize",
            )
        )
    specs += [
        FieldSpec("Common.Cin.Cin", OFF_CIN, zin="aneRegs.Common.Cin.Cin"),
        FieldSpec("L2.SourceRowStride.Stride", OFF_STRIDE, zin="aneRegs.L2.SourceRowStride.Stride"),
        FieldSpec("L2.SourceRowStride.Stride (mirror, unnamed)", OFF_STRIDE_MIRROR),
        FieldSpec("L2.ResultBase.Addr", OFF_RESULT_BASE, zin="aneRegs.L2.ResultBase.Addr"),
    ]
    return tuple(specs)


FIELDS: tuple[FieldSpec, ...] = _build_fields()


def _spec(name: str) -> FieldSpec:
    for spec in FIELDS:
        if spec.name == name:
            return spec
    raise KeyError(name)


def _fail(source: str, message: str) -> InputError:
    """One line, prefixed by where it came from: the CLI prints it as is."""
    text = f"{source}: {message}" if source else message
    return InputError(" ".join(text.split()))


def _show(text: str, limit: int = 60) -> str:
    """A quoted, single-line excerpt of user input for an error message."""
    cut = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(cut)


@dataclass(frozen=True)
class Dump:
    """What one file says, bit by bit, and nothing more."""

    fmt: str  # "bin", "text" or "zin"
    words: dict[int, int]  # byte offset -> word; only the bits in `known` mean anything
    known: dict[int, int]  # byte offset -> mask of the bits the file gives
    named_extras: dict[str, int] = field(default_factory=dict)  # Zin names not in FIELDS
    source: str = "<dump>"

    def read(self, spec: FieldSpec) -> int | None:
        """The field's value, or None unless the file gives every one of its bits."""
        mask = self.known.get(spec.offset, 0)
        if mask & spec.mask != spec.mask:
            return None
        return (self.words[spec.offset] & spec.mask) >> spec.lsb

    def get(self, name: str) -> int | None:
        return self.read(_spec(name))

    def fields(self) -> dict[str, int]:
        """Every named field the file gives, in TD order."""
        out: dict[str, int] = {}
        for spec in FIELDS:
            value = self.read(spec)
            if value is not None:
                out[spec.name] = value
        return out

    def unknown_fields(self) -> dict[str, int]:
        """What the file gives that the field map cannot name, kept so nothing is lost.

        A word at an unmapped offset shows as ``unknown@0x1a0``. Given bits of a
        mapped word that fall outside its named fields show as
        ``unknown@0x034 (other bits)``. Zin names this module does not know
        keep their own names.
        """
        mapped: dict[int, int] = {}
        for spec in FIELDS:
            mapped[spec.offset] = mapped.get(spec.offset, 0) | spec.mask
        out: dict[str, int] = {}
        for off in sorted(self.known):
            given = self.known[off]
            if off not in mapped:
                out[f"unknown@0x{off:03x}"] = self.words[off] & given
            elif given & ~mapped[off]:
                rest = self.words[off] & given & ~mapped[off]
                if rest:
                    out[f"unknown@0x{off:03x} (other bits)"] = rest
        out.update(self.named_extras)
        return out


@dataclass(frozen=True)
class CoreTransfer:
    """One enabled core's weight stream: byte offset and byte count, as the TD holds them."""

    core: int
    base: int | None  # None when the dump leaves this core's base out
    size: int
    enabled_by: str  # "En" (config bit 1) or "size" (config unknown, size non-zero)


@dataclass(frozen=True)
class DumpTask:
    """The transfers a dump describes, plus whatever it says about Cin and Cout."""

    cores: tuple[CoreTransfer, ...]
    cin: int | None = None
    cout: int | None = None
    warnings: tuple[str, ...] = ()
    source: str = field(default="", compare=False)

    @property
    def bytes_per_core(self) -> int:
        return self.cores[0].size

    @property
    def lines_per_core(self) -> int:
        return self.bytes_per_core // LINE_BYTES

    @property
    def k(self) -> int:
        """The lap: the nearest multiple of 0x4000 lines (round half up)."""
        return lap_and_offset(self.lines_per_core)[0]

    @property
    def x(self) -> int:
        """Signed offset in lines from the nearest lap, x = lines - k * 0x4000."""
        return lap_and_offset(self.lines_per_core)[1]

    @property
    def enabled_cores(self) -> tuple[int, ...]:
        return tuple(c.core for c in self.cores)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view, for ``--json`` outputs."""
        return {
            "source": self.source,
            "cores": [
                {"core": c.core, "base": c.base, "size": c.size, "enabled_by": c.enabled_by}
                for c in self.cores
            ],
            "cin": self.cin,
            "cout": self.cout,
            "bytes_per_core": self.bytes_per_core,
            "lines_per_core": self.lines_per_core,
            "k": self.k,
            "x": self.x,
            "ring_lines": RING_LINES,
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------- parsing


class _Words:
    """Accumulates given bits and refuses a second, different value for the same bits."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.words: dict[int, int] = {}
        self.known: dict[int, int] = {}
        self.origin: dict[int, list[tuple[int, int, int]]] = {}  # off -> (mask, value, line)
        self.extras: dict[str, tuple[int, int]] = {}  # name -> (value, line)

    def put(
        self, off: int, mask: int, value: int, line: int, what: str, decimal: bool = False
    ) -> None:
        for prev_mask, prev_value, prev_line in self.origin.get(off, []):
            both = prev_mask & mask
            if (prev_value ^ value) & both:
                shift = (both & -both).bit_length() - 1
                old, new = (prev_value & both) >> shift, (value & both) >> shift
                show = str if decimal else (lambda v: f"0x{v:08x}")
                raise _fail(
                    self.source,
                    f"line {line}: {what} given twice with different values "
                    f"({show(old)} on line {prev_line}, {show(new)} on line {line})",
                )
        self.origin.setdefault(off, []).append((mask, value & mask, line))
        self.words[off] = (self.words.get(off, 0) & ~mask) | (value & mask)
        self.known[off] = self.known.get(off, 0) | mask

    def put_extra(self, name: str, value: int, line: int) -> None:
        if name in self.extras and self.extras[name][0] != value:
            prev_value, prev_line = self.extras[name]
            raise _fail(
                self.source,
                f"line {line}: {name} given twice with different values "
                f"({prev_value} on line {prev_line}, {value} on line {line})",
            )
        self.extras[name] = (value, line)

    def dump(self, fmt: str) -> Dump:
        if not self.known and not self.extras:
            raise _fail(self.source, "no register words in the text (only comments or blanks)")
        extras = {name: value for name, (value, _) in self.extras.items()}
        return Dump(fmt, dict(self.words), dict(self.known), extras, self.source)


_COMMENT = re.compile(r"#|//")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_BARE_HEX = re.compile(r"[0-9a-fA-F]+")
_TD_PREFIX = re.compile(r"TD\s*\+\s*", re.IGNORECASE)
_OFFSET_START = re.compile(r"(TD\s*\+\s*)?0[xX]", re.IGNORECASE)
_ZIN_LINE = re.compile(r"(?P<name>[A-Za-z_][\w.\[\]]*)\s*=\s*(?P<value>\S*)")
_ZIN_START = re.compile(r"ane\w*\.")
_ZIN_BY_NAME = {spec.zin: spec for spec in FIELDS if spec.zin}


def _strip_comment(line: str) -> str:
    match = _COMMENT.search(line)
    return (line[: match.start()] if match else line).strip()


def _data_lines(text: str) -> Iterable[tuple[int, str]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        body = _strip_comment(raw)
        if body:
            yield number, body


def _is_text(data: bytes) -> str | None:
    """The decoded text, or None when the bytes are binary (NULs, bad UTF-8, controls)."""
    if b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    if any(ch < " " and ch not in "\t\n\r\f\v" for ch in text):
        return None
    return text


def detect_format(data: bytes, source: str = "<dump>") -> str:
    """The format ("bin", "text" or "zin") from the bytes alone; InputError if none fits."""
    if not data:
        raise _fail(source, "empty dump file (0 bytes)")
    text = _is_text(data)
    if text is None:
        if len(data) == TD_BYTES:
            return "bin"
        if len(data) < TD_BYTES:
            raise _fail(
                source,
                f"truncated TD binary: {len(data)} bytes (0x{len(data):x}), "
                f"a raw TD is exactly {TD_BYTES} bytes (0x{TD_BYTES:x})",
            )
        raise _fail(
            source,
            f"unknown format: {len(data)} bytes of binary data; a raw TD is exactly "
            f"{TD_BYTES} bytes (0x{TD_BYTES:x}) and text dumps are UTF-8",
        )
    first_line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if first_line.startswith(ZIN_HEADER):
        return "zin"
    first = next(iter(_data_lines(text)), None)
    if first is None:
        raise _fail(source, "no register words in the text (only comments or blanks)")
    if _OFFSET_START.match(first[1]):
        return "text"
    if _ZIN_START.match(first[1]):
        return "zin"
    raise _fail(
        source,
        f"unknown format: text matches neither `offset value` hex words nor a "
        f"ZinIrRegBitPrintOutDebug printout (line {first[0]}: {_show(first[1])})",
    )


def _parse_bin(data: bytes, source: str) -> Dump:
    values = struct.unpack(f"<{TD_BYTES // 4}I", data)
    words = {4 * i: v for i, v in enumerate(values)}
    return Dump("bin", words, dict.fromkeys(words, WORD_MASK), {}, source)


def _hex(token: str, what: str, line: int, source: str) -> int:
    if _HEX.fullmatch(token):
        return int(token, 16)
    if _BARE_HEX.fullmatch(token):
        raise _fail(source, f"line {line}: {what} {_show(token)} must be hex with a 0x prefix")
    raise _fail(source, f"line {line}: {what} {_show(token)} is not a hex number")


def _parse_text(text: str, source: str) -> Dump:
    acc = _Words(source)
    for line, body in _data_lines(text):
        rest = _TD_PREFIX.sub("", body, count=1) if _TD_PREFIX.match(body) else body
        tokens = [t for t in re.split(r"\s*[=:]\s*|\s+", rest) if t]
        if len(tokens) != 2:
            raise _fail(
                source,
                f"line {line}: expected `offset value` (e.g. TD+0x0b4 0x00100000), "
                f"got {_show(body)}",
            )
        off = _hex(tokens[0], "offset", line, source)
        value = _hex(tokens[1], "value", line, source)
        if off % 4:
            raise _fail(source, f"line {line}: offset 0x{off:03x} is not word-aligned")
        if off >= TD_BYTES:
            raise _fail(
                source, f"line {line}: offset 0x{off:03x} is outside the 0x{TD_BYTES:x}-byte TD"
            )
        if value > WORD_MASK:
            raise _fail(
                source, f"line {line}: value {tokens[1]} at 0x{off:03x} is wider than 32 bits"
            )
        acc.put(off, WORD_MASK, value, line, f"offset 0x{off:03x}")
    return acc.dump("text")


def _parse_zin(text: str, source: str) -> Dump:
    acc = _Words(source)
    for line, body in _data_lines(text):
        match = _ZIN_LINE.fullmatch(body)
        if not match or not match["value"]:
            raise _fail(
                source,
                f"line {line}: expected `name = value` "
                f"(e.g. aneRegs.Common.Cin.Cin = 2048), got {_show(body)}",
            )
        name, token = match["name"], match["value"]
        if token.isdigit():
            value = int(token)
        elif _HEX.fullmatch(token):
            value = int(token, 16)
        else:
            raise _fail(source, f"line {line}: value {_show(token)} is not a decimal number")
        spec = _ZIN_BY_NAME.get(name)
        width = spec.width if spec else WORD_BITS
        if value >> width:
            raise _fail(
                source,
                f"line {line}: {name} = {value} is wider than its {width}-bit field",
            )
        if spec is None:
            acc.put_extra(name, value, line)
        else:
            acc.put(spec.offset, spec.mask, value << spec.lsb, line, name, decimal=True)
    return acc.dump("zin")


def parse_dump(data: bytes, source: str = "<dump>") -> Dump:
    """Parse a dump in any of the three formats; the format comes from the content."""
    fmt = detect_format(data, source)
    if fmt == "bin":
        return _parse_bin(data, source)
    text = _is_text(data) or ""
    return _parse_text(text, source) if fmt == "text" else _parse_zin(text, source)


def read_dump(path: str | os.PathLike[str]) -> Dump:
    """Read and parse one dump file; every failure is an InputError."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such file: {p}") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, not a dump file") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    return parse_dump(data, str(p))


# --------------------------------------------------------------------------- tasks


def _core_list(cores: Iterable[int]) -> str:
    """'0-6, 8-15' style list of core numbers."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cores):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _sixteenths(value: int) -> str:
    """value / 16 printed exactly (it has at most four binary places)."""
    return str(value // 16) if value % 16 == 0 else str(value / 16)


def _check_cout(cout: int | None) -> None:
    if cout is None:
        return
    if isinstance(cout, bool) or not isinstance(cout, int) or cout <= 0:
        raise InputError(f"Cout must be a positive integer, got {cout!r}")


def task_from_dump(dump: Dump, cout: int | None = None) -> DumpTask:
    """The per-core transfers a dump describes, after checking it against itself."""
    _check_cout(cout)
    src = dump.source
    sizes = [dump.get(f"KernelDMASrc.CoeffBfrSize[{i}].MemBfrSize") for i in range(CORES)]
    bases = [dump.get(f"KernelDMASrc.CoeffBaseAddr[{i}].Addr") for i in range(CORES)]
    en = [dump.get(f"KernelDMASrc.CoeffDMAConfig[{i}].En") for i in range(CORES)]
    if dump.fmt == "bin" and all(dump.words.get(OFF_CONFIG + 4 * i, 0) == 0 for i in range(CORES)):
        en = [None] * CORES  # all-zero config block in a binary: not captured (module doc)

    if all(s is None for s in sizes):
        raise _fail(src, "no core sizes: none of CoeffBfrSize[0..15] (0x0b4-0x0f0) is in the dump")

    enabled: list[tuple[int, str]] = []
    for i in range(CORES):
        size_at = f"CoeffBfrSize[{i}] at 0x{OFF_SIZE + 4 * i:03x}"
        if en[i] == 1:
            if sizes[i] is None:
                raise _fail(
                    src,
                    f"core {i} is enabled (CoeffDMAConfig[{i}].En = 1) but its size "
                    f"({size_at}) is not in the dump",
                )
            if sizes[i] == 0:
                raise _fail(
                    src,
                    f"zero size: core {i} is enabled (CoeffDMAConfig[{i}].En = 1) "
                    f"but its size ({size_at}) is 0",
                )
            enabled.append((i, "En"))
        elif en[i] is None and sizes[i]:
            enabled.append((i, "size"))
    if not enabled:
        if all(s in (None, 0) for s in sizes):
            raise _fail(src, "zero size: every core size in the dump is 0, nothing to stream")
        raise _fail(
            src, "no enabled core: every core with a non-zero size has CoeffDMAConfig En = 0"
        )

    enabled_size = {i: sizes[i] or 0 for i, _ in enabled}  # all known and non-zero by now
    for i, size in enabled_size.items():
        if size % LINE_BYTES:
            raise _fail(
                src,
                f"core {i} size 0x{size:08x} ({size} bytes) is not a multiple of "
                f"{LINE_BYTES}: the kernel DMA moves whole {LINE_BYTES}-byte lines and "
                f"the model replays whole lines only",
            )
    by_size: dict[int, list[int]] = {}
    for i, size in enabled_size.items():
        by_size.setdefault(size, []).append(i)
    if len(by_size) > 1:
        parts = "; ".join(
            f"0x{s:08x} on core{'s' if len(cs) > 1 else ''} {_core_list(cs)}"
            for s, cs in sorted(by_size.items(), key=lambda kv: kv[1][0])
        )
        raise _fail(src, f"core sizes disagree: {parts}")
    size = next(iter(by_size))

    cin = dump.get("Common.Cin.Cin")
    warnings: list[str] = []
    if cout is not None:
        if cin is None:
            warnings.append(f"Cout {cout} given but Cin is not in the dump: size not checked")
        elif cin * cout * 2 != 16 * size:
            raise _fail(
                src,
                f"Cin {cin} x Cout {cout} x 2 / 16 = {_sixteenths(cin * cout * 2)} bytes, "
                f"but the core size is 0x{size:08x} ({size}) bytes",
            )

    known_bases = [(i, bases[i]) for i, _ in enabled if bases[i] is not None]
    if known_bases:
        ref, ref_base = known_bases[0]
        for i, base in known_bases[1:]:
            want = ref_base + (i - ref) * size
            if base != want:
                warnings.append(
                    f"core {i} base 0x{base:08x} is not core {ref} base + {i - ref} x size "
                    f"(0x{want & WORD_MASK:08x})"
                )
    stride = dump.get("L2.SourceRowStride.Stride")
    mirror = dump.get("L2.SourceRowStride.Stride (mirror, unnamed)")
    if stride is not None and cin is not None and stride != STRIDE_PER_CIN * cin:
        warnings.append(f"L2 stride 0x{stride:08x} is not 16 x Cin (0x{STRIDE_PER_CIN * cin:08x})")
    if stride is not None and mirror is not None and mirror != stride:
        warnings.append(f"stride mirror 0x{mirror:08x} at 0x1f4 differs from stride 0x{stride:08x}")
    stream = dump.get("KernelDMASrc.StreamWord")
    if stream is not None and stream != STREAM_WORD and not (dump.fmt == "bin" and stream == 0):
        warnings.append(
            f"word 0x{stream:08x} at 0x028 is not the KernelDMASrc stream word "
            f"0x{STREAM_WORD:08x}: this may be another TD layout"
        )

    cores = tuple(CoreTransfer(i, bases[i], size, how) for i, how in enabled)
    return DumpTask(cores, cin, cout, tuple(warnings), src)


def load_task(path: str | os.PathLike[str], cout: int | None = None) -> DumpTask:
    """The one entry point replay uses: file in, checked task out, InputError otherwise."""
    return task_from_dump(read_dump(path), cout)


def describe(dump: Dump, cout: int | None = None) -> str:
    """A human summary: known fields, kept unknown fields, and the task (or why there is none)."""
    out = [f"{dump.source}: {dump.fmt} dump"]
    if dump.fmt == "bin":
        out.append(
            "  (a binary cannot say 'unknown': words the capture lacked read as 0, and an "
            "all-zero CoeffDMAConfig block counts as not captured)"
        )
    named = {spec.name: spec for spec in FIELDS}
    fields = dump.fields()
    out.append(f"known fields ({len(fields)}):")
    for name, value in fields.items():
        spec = named[name]
        out.append(f"  0x{spec.offset:03x} {name:<52} = 0x{value:08x} ({value})")
    extras = dump.unknown_fields()
    zeros = [name for name, value in extras.items() if value == 0]
    shown = {name: value for name, value in extras.items() if value != 0}
    note = f", {len(zeros)} of them zero, not listed" if dump.fmt == "bin" and zeros else ""
    out.append(f"unknown fields kept ({len(extras)}{note}):")
    for name, value in extras.items():
        if name in shown or dump.fmt != "bin":
            out.append(f"  {name:<57} = 0x{value:08x} ({value})")
    try:
        task = task_from_dump(dump, cout)
    except InputError as exc:
        out.append(f"task: none ({exc})")
        return "\n".join(out)
    by = sorted({c.enabled_by for c in task.cores})
    rule = " and ".join("En bit" if b == "En" else "non-zero size (config unknown)" for b in by)
    out.append(
        f"task: {len(task.cores)} core(s) enabled by {rule}: {_core_list(task.enabled_cores)}"
    )
    out.append(
        f"  bytes_per_core 0x{task.bytes_per_core:x} ({task.bytes_per_core}), "
        f"lines_per_core 0x{task.lines_per_core:x} ({task.lines_per_core}), "
        f"k {task.k}, x {task.x:+d}"
    )
    bases = ", ".join("?" if c.base is None else f"0x{c.base:x}" for c in task.cores)
    out.append(f"  bases: {bases}")
    out.append(
        f"  Cin {task.cin if task.cin is not None else 'unknown'}, "
        f"Cout {task.cout if task.cout is not None else 'unknown'}"
    )
    for warning in task.warnings:
        out.append(f"  warning: {warning}")
    return "\n".join(out)


# --------------------------------------------------------------------------- writing


def dump_words(d: int, n: int) -> dict[int, int]:
    """The TD words that follow from D and N alone, as the published dumps set them.

    ExeCycles and ResultBase do not follow from D and N, so they are left out.
    """
    for name, value in (("D", d), ("N", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    if n % CORES:
        raise InputError(f"N must be a multiple of {CORES} (one share per core), got {n}")
    size = n // CORES * d * 2
    if size % LINE_BYTES:
        raise InputError(
            f"D={d}, N={n} gives {size} bytes per core, not a whole number of "
            f"{LINE_BYTES}-byte lines"
        )
    if (CORES - 1) * size > WORD_MASK or STRIDE_PER_CIN * d > WORD_MASK:
        raise InputError(
            f"D={d}, N={n} is too large: core {CORES - 1} base 0x{(CORES - 1) * size:x} "
            f"does not fit a 32-bit register"
        )
    words = {OFF_BASE + 4 * i: i * size for i in range(CORES)}
    words.update({OFF_SIZE + 4 * i: size for i in range(CORES)})
    words[OFF_CIN] = d
    words[OFF_STRIDE] = STRIDE_PER_CIN * d
    words[OFF_STRIDE_MIRROR] = STRIDE_PER_CIN * d
    return dict(sorted(words.items()))


def _names_at(off: int) -> str:
    return ", ".join(spec.name for spec in FIELDS if spec.offset == off) or f"unknown@0x{off:03x}"


def render(dump: Dump, fmt: str, header: Iterable[str] = ()) -> bytes:
    """Write a dump in one format; header lines become comments in the text forms.

    The binary writes unknown bits as 0 because it cannot say "unknown". The
    text form writes only whole words that are fully given. Zin writes only
    fields with an Apple name; anything else becomes a comment.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown dump format {fmt!r} (one of: {', '.join(FORMATS)})")
    if fmt == "bin":
        buf = bytearray(TD_BYTES)
        for off, value in dump.words.items():
            struct.pack_into("<I", buf, off, value & dump.known.get(off, 0))
        return bytes(buf)
    lines: list[str] = []
    if fmt == "zin":
        lines.append(ZIN_HEADER)
        lines += [f"// {h}" for h in header]
        for spec in FIELDS:
            value = dump.read(spec)
            if value is None:
                continue
            if spec.zin:
                lines.append(f"{spec.zin} = {value}")
            else:
                lines.append(
                    f"// 0x{spec.offset:03x} = 0x{value:08x} ({spec.name}: "
                    "no Apple name, not expressible in this form)"
                )
        for name, value in dump.named_extras.items():
            lines.append(f"{name} = {value}")
        return ("\n".join(lines) + "\n").encode()
    lines += [f"# {h}" for h in header]
    for off in sorted(dump.known):
        mask = dump.known[off]
        if mask == WORD_MASK:
            lines.append(f"TD+0x{off:03x} 0x{dump.words[off]:08x}  # {_names_at(off)}")
        else:
            lines.append(
                f"# 0x{off:03x}: only bits 0x{mask:08x} known "
                f"(0x{dump.words[off] & mask:08x}); not a whole word"
            )
    for name, value in dump.named_extras.items():
        lines.append(f"# {name} = {value} (no known offset)")
    return ("\n".join(lines) + "\n").encode()


def write_dump(d: int, n: int, fmt: str = "text") -> bytes:
    """A TD for the decode matmul X[1,D] x W[D,N], holding only what follows from D and N."""
    if fmt not in FORMATS:
        raise InputError(f"unknown dump format {fmt!r} (one of: {', '.join(FORMATS)})")
    words = dump_words(d, n)
    dump = Dump(fmt, words, dict.fromkeys(words, WORD_MASK), {}, f"write_dump(d={d}, n={n})")
    header = [
        f"ANE task descriptor for X[1,{d}] x W[{d},{n}] (fp16, 16 cores), ane-kdma dump",
        "Only the words that follow from D and N are given; every other word is unknown.",
    ]
    return render(dump, fmt, header)


def add_dump_command(subparsers: argparse._SubParsersAction) -> None:
    """Register ``ane-kdma dump`` on the CLI's sub-command parsers."""
    p = subparsers.add_parser(
        "dump",
        help="write a task descriptor for X[1,D] x W[D,N]",
        description=(
            "Write the TD words that follow from D and N (core sizes N/16*D*2 bytes, bases "
            "i*size, Cin=D, L2 stride 16*D and its mirror). Text forms go to stdout unless "
            "--out is given; the binary needs --out."
        ),
    )
    p.add_argument("--d", type=int, required=True, help="contracting dimension D (Cin)")
    p.add_argument("--n", type=int, required=True, help="output channels N (Cout), multiple of 16")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (text)")
    p.add_argument("--out", type=Path, default=None, help="write here (atomically)")
    p.add_argument("--json", action="store_true", help="with --out: one JSON summary on stdout")
    p.set_defaults(func=run_dump)


def run_dump(args: argparse.Namespace) -> int:
    """The ``dump`` sub-command; InputError propagates to the CLI's one-line handler."""
    fmt = args.format
    out: Path | None = args.out
    as_json = bool(getattr(args, "json", False))
    data = write_dump(args.d, args.n, fmt)
    if out is None:
        if fmt == "bin":
            raise InputError("the binary format needs --out PATH (it is not written to a terminal)")
        if as_json:
            raise InputError("--json needs --out PATH: without it the dump itself goes to stdout")
        sys.stdout.write(data.decode())
        return 0
    write_atomic(out, data)
    size = args.n // CORES * args.d * 2
    k, x = lap_and_offset(size // LINE_BYTES)
    if as_json:
        summary = {
            "path": str(out),
            "format": fmt,
            "d": args.d,
            "n": args.n,
            "bytes_per_core": size,
            "lines_per_core": size // LINE_BYTES,
            "k": k,
            "x": x,
        }
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(
            f"wrote {out} ({fmt}, D={args.d}, N={args.n}, "
            f"0x{size:x} bytes per core, k {k}, x {x:+d})\n"
        )
    return 0
