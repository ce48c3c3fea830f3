"""Strict reading of the project's JSON data files: types, finiteness and ranges.

Why: chip files, profiles and measurements feed every number the tool prints;
a string latency or a NaN overhead must stop at load time with one line that
names the file and the key, not surface later as a traceback or a wrong
figure. Every loader reads through a :class:`Doc`, and every figure's source
through :func:`source`.

What a Doc bounds for every file: its size (``MAX_DATA_BYTES``), each number's
length (``MAX_DIGITS``, ``MAX_NUMBER_CHARS``), the nesting depth (the JSON
parser's recursion limit) and each list's length (``MAX_LIST``, unless a
getter is given a smaller one), so a chip folder is read in bounded time and
memory whatever it holds. Ranges that follow from the physics or the RTL live
with the field that has them (:mod:`ane_kdma.chip`, :mod:`ane_kdma.profile`,
:mod:`ane_kdma.measured`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ane_kdma.errors import InputError
from ane_kdma.fileio import read_input

MAX_DATA_BYTES = 4 << 20  # a data file is a few kB; anything this large is not one
MAX_DIGITS = 40  # as the CLI's integers: 2^128 has 39 digits
MAX_NUMBER_CHARS = 64  # a float with more characters than this is not a measured figure
MAX_LIST = 64  # a list in a data file (D values, laps, replicas, fits): a table, not a sweep
_HEX = re.compile(r"0x[0-9a-fA-F]{1,16}")


class Doc:
    """One JSON object read from a file, with typed getters whose errors name file and key."""

    def __init__(self, data: Any, where: str, path: str = "") -> None:
        self.data = data
        self.where = where  # key path inside the file, "" at top level
        self.path = path

    @classmethod
    def load(cls, path: Path, what: str = "data file") -> Doc:
        raw = read_input(path, MAX_DATA_BYTES, what, missing=f"{what} missing: {path}")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        try:
            data = json.loads(
                text,
                parse_constant=_no_constant,
                parse_int=_bounded_int,
                parse_float=_bounded_float,
                object_pairs_hook=_unique_keys,
            )
        except RecursionError:
            raise InputError(f"{path}: not valid JSON (nested too deeply)") from None
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON ({str(exc).splitlines()[0]})") from None
        doc = cls(data, "", str(path))
        if not isinstance(data, dict):
            raise doc.fail("", "the top level must be an object")
        return doc

    # ------------------------------------------------------------ navigation
    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, key: str, why: str) -> InputError:
        where = f"{Path(self.path).name}: " if self.path else ""
        return InputError(f"{where}{key or '(top level)'}: {why}")

    def has(self, name: str) -> bool:
        return isinstance(self.data, dict) and name in self.data

    def raw(self, name: str) -> Any:
        if not isinstance(self.data, dict):
            raise self.fail(self.where, "must be an object")
        if name not in self.data:
            raise self.fail(self.key(name), "missing")
        return self.data[name]

    def obj(self, name: str) -> Doc:
        value = self.raw(name)
        if not isinstance(value, dict):
            raise self.fail(self.key(name), "must be an object")
        return Doc(value, self.key(name), self.path)

    def optional(self, name: str) -> Doc | None:
        return self.obj(name) if self.has(name) else None

    def items(self, limit: int = MAX_LIST) -> list[tuple[str, Doc]]:
        if len(self.data) > limit:
            raise self.fail(self.where, f"{len(self.data)} entries, at most {limit}")
        return [(k, self.obj(k)) for k in self.data]

    def objects(self, name: str, limit: int = MAX_LIST) -> list[Doc]:
        """A non-empty list of objects, each as a Doc (key path ``name[i]``)."""
        value = self.raw(name)
        if not isinstance(value, list) or not value:
            raise self.fail(self.key(name), "must be a non-empty list")
        if len(value) > limit:
            raise self.fail(self.key(name), f"{len(value)} entries, at most {limit}")
        out = []
        for i, item in enumerate(value):
            key = f"{self.key(name)}[{i}]"
            if not isinstance(item, dict):
                raise self.fail(key, "must be an object")
            out.append(Doc(item, key, self.path))
        return out

    # ------------------------------------------------------------ values
    def string(self, name: str, default: str | None = None) -> str:
        if default is not None and not self.has(name):
            return default
        value = self.raw(name)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(self.key(name), "must be a non-empty string")
        return value

    def number(
        self, name: str, lo: float | None = None, hi: float | None = None, *, positive: bool = False
    ) -> float:
        value = self.raw(name)
        return self._check_number(value, self.key(name), lo, hi, positive)

    def _check_number(
        self, value: Any, key: str, lo: float | None, hi: float | None, positive: bool
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"must be a number, not {_kind(value)}")
        if not math.isfinite(value):
            raise self.fail(key, "must be finite")
        if positive and value <= 0:
            raise self.fail(key, f"must be positive, got {value}")
        if lo is not None and value < lo:
            raise self.fail(key, f"{value} is below {lo}")
        if hi is not None and value > hi:
            raise self.fail(key, f"{value} is above {hi}")
        return float(value)

    def integer(self, name: str, lo: int | None = None, hi: int | None = None) -> int:
        value = self.raw(name)
        return self._check_int(value, self.key(name), lo, hi)

    def _check_int(self, value: Any, key: str, lo: int | None, hi: int | None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be a whole number, not {_kind(value)}")
        if lo is not None and value < lo:
            raise self.fail(key, f"{value} is below {lo}")
        if hi is not None and value > hi:
            raise self.fail(key, f"{value} is above {hi}")
        return value

    def hexint(self, name: str, lo: int = 0, hi: int = (1 << 32) - 1) -> int:
        """An integer written as a "0x..." string (register offsets and words) or a plain int."""
        value = self.raw(name)
        if isinstance(value, str):
            if not _HEX.fullmatch(value):
                raise self.fail(self.key(name), f"{value[:40]!r} is not a 0x hex number")
            value = int(value, 16)
        return self._check_int(value, self.key(name), lo, hi)

    def _list(self, name: str, limit: int) -> list[Any]:
        value = self.raw(name)
        if not isinstance(value, list) or not value:
            raise self.fail(self.key(name), "must be a non-empty list")
        if len(value) > limit:
            raise self.fail(self.key(name), f"{len(value)} values, at most {limit}")
        return value

    def numbers(self, name: str, limit: int = MAX_LIST) -> list[float]:
        value = self._list(name, limit)
        return [
            self._check_number(v, f"{self.key(name)}[{i}]", None, None, False)
            for i, v in enumerate(value)
        ]

    def integers(self, name: str, limit: int = MAX_LIST) -> list[int]:
        value = self._list(name, limit)
        return [
            self._check_int(v, f"{self.key(name)}[{i}]", None, None) for i, v in enumerate(value)
        ]

    def strings(self, name: str) -> dict[str, str]:
        """An object of string values (notes)."""
        value = self.raw(name)
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.fail(self.key(name), "must be an object of strings")
        return dict(value)


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: a title (or name) and a URL (or citation)."""

    title: str
    where: str

    def cite(self) -> str:
        return f"{self.title}, {self.where}"


def source(doc: Doc, inherited: Source | None = None) -> Source:
    """The ``source`` object of `doc`, or the one it inherits: every figure names one."""
    if not doc.has("source"):
        if inherited is None:
            raise doc.fail(doc.key("source"), "missing (every figure names a url or a citation)")
        return inherited
    src = doc.obj("source")
    title = src.string("title", "") or src.string("name", "")
    where = src.string("url", "") or src.string("cited_in", "") or src.string("transcribed_in", "")
    if not title or not where:
        raise src.fail(src.where, "a source needs a title (or name) and a url (or cited_in)")
    return Source(title, where)


def _kind(value: Any) -> str:
    return {str: "a string", list: "a list", dict: "an object", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    """JSON integers of a sane length: no figure or setting needs more than MAX_DIGITS."""
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"the number {text[:12]}... has more than {MAX_DIGITS} digits")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"the number {text[:12]}... is longer than {MAX_NUMBER_CHARS} characters")
    return float(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: a repeated key would silently drop a value."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key[:40]!r} given twice in one object")
        out[key] = value
    return out
