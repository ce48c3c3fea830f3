"""Reading dumps: format detection and the three parsers, against a chip's TD layout.

A :class:`Dump` holds exactly the bits a file gives; a field the file leaves
out reads as ``None``, because the dump is the evidence the model stands on
and this layer must never invent a word. The format comes from the content,
never the file name (see the package docstring for the three formats).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from ane_kdma import chip as chips
from ane_kdma.chip import Chip
from ane_kdma.fileio import STDIN, read_input
from ane_kdma.regdump import layout
from ane_kdma.regdump.layout import WORD_BITS, WORD_MASK, FieldSpec, fail, show

DUMP_DIR = chips.data_dir() / "dumps"  # the three published M3 dumps, in every format


@dataclass(frozen=True)
class Dump:
    """What one file says, bit by bit, and nothing more."""

    fmt: str  # "bin", "text" or "zin"
    words: dict[int, int]  # byte offset -> word; only the bits in `known` mean anything
    known: dict[int, int]  # byte offset -> mask of the bits the file gives
    named_extras: dict[str, int] = field(default_factory=dict)  # Zin names not in the map
    source: str = "<dump>"
    chip: Chip = field(kw_only=True, compare=False, repr=False)  # whose TD layout it was read as

    @property
    def specs(self) -> tuple[FieldSpec, ...]:
        return layout.fields(self.chip.td, self.chip.cores)

    def read(self, spec: FieldSpec) -> int | None:
        """The field's value, or None unless the file gives every one of its bits."""
        mask = self.known.get(spec.offset, 0)
        if mask & spec.mask != spec.mask:
            return None
        return (self.words[spec.offset] & spec.mask) >> spec.lsb

    def get(self, name: str) -> int | None:
        return self.read(layout.by_name(self.chip.td, self.chip.cores)[name])

    def fields(self) -> dict[str, int]:
        """Every named field the file gives, in TD order."""
        out: dict[str, int] = {}
        for spec in self.specs:
            value = self.read(spec)
            if value is not None:
                out[spec.name] = value
        return out

    def unknown_fields(self) -> dict[str, int]:
        """What the file gives that the field map cannot name, kept so nothing is lost.

        A word at an unmapped offset shows as ``unknown@0x1a0``. Given bits of a
        mapped word that fall outside its named fields show as
        ``unknown@0x034 (other bits)``. Zin names the map does not know keep
        their own names.
        """
        mapped = layout.mapped_bits(self.chip.td, self.chip.cores)
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


class _Words:
    """Accumulates given bits and refuses a second, different value for the same bits.

    Linear in the number of lines: a line that only repeats known bits is one
    comparison with the word so far, and each offset remembers at most one
    origin per bit (so at most 32) to name the line a conflict is with.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.words: dict[int, int] = {}
        self.known: dict[int, int] = {}
        self.origin: dict[int, list[tuple[int, int]]] = {}  # off -> (bits first given, line)
        self.extras: dict[str, tuple[int, int]] = {}  # name -> (value, line)

    def put(
        self, off: int, mask: int, value: int, line: int, what: str, decimal: bool = False
    ) -> None:
        value &= mask
        known = self.known.get(off, 0)
        clash = (self.words.get(off, 0) ^ value) & known & mask
        if clash:
            prev_mask, prev_line = next(o for o in self.origin[off] if o[0] & clash)
            both = prev_mask & mask
            shift = (both & -both).bit_length() - 1
            old, new = (self.words[off] & both) >> shift, (value & both) >> shift
            show_value = str if decimal else (lambda v: f"0x{v:08x}")
            raise fail(
                self.source,
                f"line {line}: {what} given twice with different values "
                f"({show_value(old)} on line {prev_line}, {show_value(new)} on line {line})",
            )
        if mask & ~known:
            self.origin.setdefault(off, []).append((mask & ~known, line))
            self.words[off] = (self.words.get(off, 0) & ~mask) | value
            self.known[off] = known | mask

    def put_extra(self, name: str, value: int, line: int) -> None:
        if name in self.extras and self.extras[name][0] != value:
            prev_value, prev_line = self.extras[name]
            raise fail(
                self.source,
                f"line {line}: {name} given twice with different values "
                f"({prev_value} on line {prev_line}, {value} on line {line})",
            )
        self.extras.setdefault(name, (value, line))

    def dump(self, fmt: str, chip: Chip) -> Dump:
        if not self.known and not self.extras:
            raise fail(self.source, "no register words in the text (only comments or blanks)")
        extras = {name: value for name, (value, _) in self.extras.items()}
        return Dump(fmt, dict(self.words), dict(self.known), extras, self.source, chip=chip)


MAX_DUMP_BYTES = 1 << 20  # a full Zin printout of every TD field is tens of kB
MAX_HEX_DIGITS = 16  # after the 0x and leading zeros; anything longer is far too wide anyway
MAX_DEC_DIGITS = 20  # the same bound for decimal (2^64 has 20 digits)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as editors count lines (not str.splitlines)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # colour and other CSI sequences
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")  # not tab, line ends, \v, \f
_NOT_ASCII = re.compile("[^\t\x0b\x0c\x20-\x7e]")
_COMMENT = re.compile(r"#|//")
_HEX = re.compile(r"0[xX]([0-9a-fA-F]+)")
_DEC = re.compile(r"[0-9]+")
_BARE_HEX = re.compile(r"[0-9a-fA-F]+")
_TD_PREFIX = re.compile(r"TD\s*\+\s*", re.IGNORECASE)
_OFFSET_START = re.compile(r"(TD\s*\+\s*)?0[xX]", re.IGNORECASE)
_ZIN_LINE = re.compile(r"(?P<name>[A-Za-z_][\w.\[\]]*)\s*=\s*(?P<value>\S*)", re.ASCII)
_ZIN_START = re.compile(r"ane\w*\.", re.ASCII)


@dataclass(frozen=True)
class _Text:
    """A dump's bytes read as text, and how they were read (named in messages)."""

    text: str
    encoding: str  # "UTF-8", "UTF-16" or "Latin-1" (bytes that are not UTF-8)


def _strip_comment(line: str) -> str:
    match = _COMMENT.search(line)
    return (line[: match.start()] if match else line).strip()


def _data_lines(doc: _Text, source: str) -> Iterable[tuple[int, str]]:
    """(line number, text) of every line that is not blank or a comment; ASCII only."""
    for number, raw in enumerate(_LINE_BREAK.split(doc.text), start=1):
        body = _strip_comment(raw)
        if not body:
            continue
        odd = _NOT_ASCII.search(body)
        if odd:
            ch = odd.group()
            what = "control character" if _CONTROL.match(ch) else "non-ASCII character"
            note = "; the file is not UTF-8 (read as Latin-1)" if doc.encoding == "Latin-1" else ""
            raise fail(
                source,
                f"line {number}: {what} {ch!r} (U+{ord(ch):04X}) outside a comment: "
                f"register lines are ASCII{note}",
            )
        yield number, body


def _utf16(data: bytes) -> str | None:
    """The text of UTF-16 bytes (with a byte-order mark, or plain ASCII in either order)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        codec = "utf-16"
    elif len(data) >= 4 and len(data) % 2 == 0 and not data[1::2].strip(b"\x00"):
        codec = "utf-16-le" if b"\x00" not in data[0::2] else ""
    elif len(data) >= 4 and len(data) % 2 == 0 and not data[0::2].strip(b"\x00"):
        codec = "utf-16-be" if b"\x00" not in data[1::2] else ""
    else:
        codec = ""
    if not codec:
        return None
    try:
        return data.decode(codec).lstrip("\ufeff")
    except UnicodeDecodeError:
        return None


def _as_text(data: bytes) -> _Text | None:
    """The bytes as text, or None when they are binary.

    UTF-8 (with or without a byte-order mark) is the format; UTF-16 (what a
    Windows shell writes) is read too; other bytes that are not UTF-8 are read
    as Latin-1, so a comment in a legacy encoding does not turn the file into
    "binary data" (a register line must be ASCII anyway). ANSI colour codes are
    dropped. More than a few control characters, over 5% of the text, is binary.
    """
    text, encoding = _utf16(data), "UTF-16"
    if text is None:
        try:
            text, encoding = data.decode("utf-8-sig"), "UTF-8"
        except UnicodeDecodeError:
            text, encoding = data.decode("latin-1"), "Latin-1"
    text = _ANSI.sub("", text)
    controls = len(_CONTROL.findall(text))
    if controls > 4 and controls * 20 > len(text):
        return None
    return _Text(text, encoding)


def _sniff(data: bytes, source: str, chip: Chip) -> tuple[str, _Text | None]:
    """The format from the bytes alone, with the text for the text formats."""
    if not data:
        raise fail(source, "empty dump file (0 bytes)")
    td = chip.td
    doc = _as_text(data)
    if doc is None:
        if len(data) == td.bytes:
            return "bin", None
        if len(data) < td.bytes:
            raise fail(
                source,
                f"truncated TD binary: {len(data)} bytes (0x{len(data):x}), "
                f"a raw TD is exactly {td.bytes} bytes (0x{td.bytes:x})",
            )
        raise fail(
            source,
            f"unknown format: {len(data)} bytes of binary data; a raw TD is exactly "
            f"{td.bytes} bytes (0x{td.bytes:x}) and text dumps are UTF-8",
        )
    for line in _LINE_BREAK.split(doc.text):
        if line.strip():
            if line.strip().startswith(td.zin_header):
                return "zin", doc
            break
    first = next(iter(_data_lines(doc, source)), None)
    if first is None:
        raise fail(source, "no register words in the text (only comments or blanks)")
    if _OFFSET_START.match(first[1]):
        return "text", doc
    if _ZIN_START.match(first[1]):
        return "zin", doc
    raise fail(
        source,
        f"unknown format: text matches neither `offset value` hex words nor a "
        f"ZinIrRegBitPrintOutDebug printout (line {first[0]}: {show(first[1])})",
    )


def detect_format(data: bytes, source: str = "<dump>", chip: Chip | None = None) -> str:
    """The format ("bin", "text" or "zin") from the bytes alone; InputError if none fits."""
    return _sniff(data, source, layout.chip_or_default(chip))[0]


def _parse_bin(data: bytes, source: str, chip: Chip) -> Dump:
    values = struct.unpack(f"<{len(data) // 4}I", data)
    words = {4 * i: v for i, v in enumerate(values)}
    return Dump("bin", words, dict.fromkeys(words, WORD_MASK), {}, source, chip=chip)


def _number(token: str, what: str, line: int, source: str, *, decimal: bool = False) -> int:
    """An ASCII number of bounded length: hex with 0x, or (Zin only) decimal.

    The bound keeps int() linear and far from Python's digit limit; a longer
    number is refused as wider than any register.
    """
    match = _HEX.fullmatch(token)
    if match:
        digits, base, bound = match.group(1).lstrip("0"), 16, MAX_HEX_DIGITS
    elif decimal and _DEC.fullmatch(token):
        digits, base, bound = token.lstrip("0"), 10, MAX_DEC_DIGITS
    elif decimal:
        raise fail(source, f"line {line}: {what} {show(token)} is not a decimal number")
    elif _BARE_HEX.fullmatch(token):
        raise fail(source, f"line {line}: {what} {show(token)} must be hex with a 0x prefix")
    else:
        raise fail(source, f"line {line}: {what} {show(token)} is not a hex number")
    if len(digits) > bound:
        raise fail(source, f"line {line}: {what} {show(token)} is wider than 32 bits")
    return int(digits or "0", base)


def _parse_text(doc: _Text, source: str, chip: Chip) -> Dump:
    acc = _Words(source)
    td_bytes = chip.td.bytes
    for line, body in _data_lines(doc, source):
        rest = _TD_PREFIX.sub("", body, count=1) if _TD_PREFIX.match(body) else body
        tokens = [t for t in re.split(r"\s*[=:]\s*|\s+", rest) if t]
        if len(tokens) != 2:
            raise fail(
                source,
                f"line {line}: expected `offset value` (e.g. TD+0x0b4 0x00100000), "
                f"got {show(body)}",
            )
        off = _number(tokens[0], "offset", line, source)
        value = _number(tokens[1], "value", line, source)
        if off % 4:
            raise fail(source, f"line {line}: offset 0x{off:03x} is not word-aligned")
        if off >= td_bytes:
            raise fail(
                source, f"line {line}: offset 0x{off:03x} is outside the 0x{td_bytes:x}-byte TD"
            )
        if value > WORD_MASK:
            raise fail(
                source,
                f"line {line}: value {show(tokens[1])[1:-1]} at 0x{off:03x} is wider than 32 bits",
            )
        acc.put(off, WORD_MASK, value, line, f"offset 0x{off:03x}")
    return acc.dump("text", chip)


def _parse_zin(doc: _Text, source: str, chip: Chip) -> Dump:
    acc = _Words(source)
    named = layout.by_zin(chip.td, chip.cores)
    checked: set[str] = set()  # unknown names already found not to be slips
    for line, body in _data_lines(doc, source):
        match = _ZIN_LINE.fullmatch(body)
        if not match or not match["value"]:
            raise fail(
                source,
                f"line {line}: expected `name = value` "
                f"(e.g. aneRegs.Common.Cin.Cin = 2048), got {show(body)}",
            )
        name, token = match["name"], match["value"]
        value = _number(token, "value", line, source, decimal=True)
        spec = named.get(name)
        if spec is None and name not in checked:
            why = layout.near_miss(name, chip)
            if why is not None:
                raise fail(source, f"line {line}: {why}")
            checked.add(name)
        width = spec.width if spec else WORD_BITS
        if value >> width:
            raise fail(
                source,
                f"line {line}: {name} = {value} is wider than its {width}-bit field",
            )
        if spec is None:
            acc.put_extra(name, value, line)
        else:
            acc.put(spec.offset, spec.mask, value << spec.lsb, line, name, decimal=True)
    return acc.dump("zin", chip)


def parse_dump(data: bytes, source: str = "<dump>", chip: Chip | None = None) -> Dump:
    """Parse a dump in any of the three formats, read with `chip`'s TD layout (m3 if None)."""
    chip = layout.chip_or_default(chip)
    fmt, doc = _sniff(data, source, chip)
    if doc is None:
        return _parse_bin(data, source, chip)
    return _parse_text(doc, source, chip) if fmt == "text" else _parse_zin(doc, source, chip)


def read_dump(path: str | os.PathLike[str], chip: Chip | None = None) -> Dump:
    """Read and parse one dump file (``-``: standard input); every failure is an InputError.

    Only a regular file of at most MAX_DUMP_BYTES is read, so a device, a FIFO
    or a runaway file is refused before reading, and parsing stays linear.
    """
    name = os.fspath(path)
    data = read_input(name, MAX_DUMP_BYTES, "dump file")
    return parse_dump(data, "<stdin>" if name == STDIN else name, chip)
