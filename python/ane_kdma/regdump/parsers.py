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
from pathlib import Path

from ane_kdma import chip as chips
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
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
                show_value = str if decimal else (lambda v: f"0x{v:08x}")
                raise fail(
                    self.source,
                    f"line {line}: {what} given twice with different values "
                    f"({show_value(old)} on line {prev_line}, {show_value(new)} on line {line})",
                )
        self.origin.setdefault(off, []).append((mask, value & mask, line))
        self.words[off] = (self.words.get(off, 0) & ~mask) | (value & mask)
        self.known[off] = self.known.get(off, 0) | mask

    def put_extra(self, name: str, value: int, line: int) -> None:
        if name in self.extras and self.extras[name][0] != value:
            prev_value, prev_line = self.extras[name]
            raise fail(
                self.source,
                f"line {line}: {name} given twice with different values "
                f"({prev_value} on line {prev_line}, {value} on line {line})",
            )
        self.extras[name] = (value, line)

    def dump(self, fmt: str, chip: Chip) -> Dump:
        if not self.known and not self.extras:
            raise fail(self.source, "no register words in the text (only comments or blanks)")
        extras = {name: value for name, (value, _) in self.extras.items()}
        return Dump(fmt, dict(self.words), dict(self.known), extras, self.source, chip=chip)


_COMMENT = re.compile(r"#|//")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_BARE_HEX = re.compile(r"[0-9a-fA-F]+")
_TD_PREFIX = re.compile(r"TD\s*\+\s*", re.IGNORECASE)
_OFFSET_START = re.compile(r"(TD\s*\+\s*)?0[xX]", re.IGNORECASE)
_ZIN_LINE = re.compile(r"(?P<name>[A-Za-z_][\w.\[\]]*)\s*=\s*(?P<value>\S*)")
_ZIN_START = re.compile(r"ane\w*\.")


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


def detect_format(data: bytes, source: str = "<dump>", chip: Chip | None = None) -> str:
    """The format ("bin", "text" or "zin") from the bytes alone; InputError if none fits."""
    if not data:
        raise fail(source, "empty dump file (0 bytes)")
    td = layout.chip_or_default(chip).td
    text = _is_text(data)
    if text is None:
        if len(data) == td.bytes:
            return "bin"
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
    first_line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if first_line.startswith(td.zin_header):
        return "zin"
    first = next(iter(_data_lines(text)), None)
    if first is None:
        raise fail(source, "no register words in the text (only comments or blanks)")
    if _OFFSET_START.match(first[1]):
        return "text"
    if _ZIN_START.match(first[1]):
        return "zin"
    raise fail(
        source,
        f"unknown format: text matches neither `offset value` hex words nor a "
        f"ZinIrRegBitPrintOutDebug printout (line {first[0]}: {show(first[1])})",
    )


def _parse_bin(data: bytes, source: str, chip: Chip) -> Dump:
    values = struct.unpack(f"<{len(data) // 4}I", data)
    words = {4 * i: v for i, v in enumerate(values)}
    return Dump("bin", words, dict.fromkeys(words, WORD_MASK), {}, source, chip=chip)


def _hex(token: str, what: str, line: int, source: str) -> int:
    if _HEX.fullmatch(token):
        return int(token, 16)
    if _BARE_HEX.fullmatch(token):
        raise fail(source, f"line {line}: {what} {show(token)} must be hex with a 0x prefix")
    raise fail(source, f"line {line}: {what} {show(token)} is not a hex number")


def _parse_text(text: str, source: str, chip: Chip) -> Dump:
    acc = _Words(source)
    td_bytes = chip.td.bytes
    for line, body in _data_lines(text):
        rest = _TD_PREFIX.sub("", body, count=1) if _TD_PREFIX.match(body) else body
        tokens = [t for t in re.split(r"\s*[=:]\s*|\s+", rest) if t]
        if len(tokens) != 2:
            raise fail(
                source,
                f"line {line}: expected `offset value` (e.g. TD+0x0b4 0x00100000), "
                f"got {show(body)}",
            )
        off = _hex(tokens[0], "offset", line, source)
        value = _hex(tokens[1], "value", line, source)
        if off % 4:
            raise fail(source, f"line {line}: offset 0x{off:03x} is not word-aligned")
        if off >= td_bytes:
            raise fail(
                source, f"line {line}: offset 0x{off:03x} is outside the 0x{td_bytes:x}-byte TD"
            )
        if value > WORD_MASK:
            raise fail(
                source, f"line {line}: value {tokens[1]} at 0x{off:03x} is wider than 32 bits"
            )
        acc.put(off, WORD_MASK, value, line, f"offset 0x{off:03x}")
    return acc.dump("text", chip)


def _parse_zin(text: str, source: str, chip: Chip) -> Dump:
    acc = _Words(source)
    named = layout.by_zin(chip.td, chip.cores)
    for line, body in _data_lines(text):
        match = _ZIN_LINE.fullmatch(body)
        if not match or not match["value"]:
            raise fail(
                source,
                f"line {line}: expected `name = value` "
                f"(e.g. aneRegs.Common.Cin.Cin = 2048), got {show(body)}",
            )
        name, token = match["name"], match["value"]
        if token.isdigit():
            value = int(token)
        elif _HEX.fullmatch(token):
            value = int(token, 16)
        else:
            raise fail(source, f"line {line}: value {show(token)} is not a decimal number")
        spec = named.get(name)
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
    fmt = detect_format(data, source, chip)
    if fmt == "bin":
        return _parse_bin(data, source, chip)
    text = _is_text(data) or ""
    return _parse_text(text, source, chip) if fmt == "text" else _parse_zin(text, source, chip)


def read_dump(path: str | os.PathLike[str], chip: Chip | None = None) -> Dump:
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
    return parse_dump(data, str(p), chip)
