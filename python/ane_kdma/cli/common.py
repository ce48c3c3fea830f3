"""What every sub-command shares: the parser that fails in one line, common options, tables."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import Any

from ane_kdma import chip as chips
from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma.errors import InputError

MAX_DIGITS = 40  # no size or count this tool takes needs more (2^128 has 39 digits)
_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|[0-9][0-9_]*)")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, status 2
        raise InputError(message)


def arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser so argparse shows our message, not 'invalid value'."""

    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


def parse_int(text: str) -> int:
    """An integer as Python writes it (0x, 0o, 0b, _), ASCII digits only, bounded length."""
    t = text.strip()
    if len(t) > MAX_DIGITS or not _INT.fullmatch(t):
        shown = t if len(t) <= 24 else t[:21] + "..."
        raise InputError(f"not an integer: {shown!r}")
    try:
        return int(t, 0)
    except ValueError:
        raise InputError(f"not an integer: {t!r}") from None


def positive_int(text: str) -> int:
    value = parse_int(text)
    if value <= 0:
        raise InputError(f"must be positive: {text.strip()}")
    return value


positive = arg(positive_int)
integer = arg(parse_int)
variant = arg(hyps.get)
engine = arg(contract.check_engine)


def add_common(sp: argparse.ArgumentParser, engine_default: str | None = "model") -> None:
    """--json, --chip and --profile on every command; --engine where it runs workloads."""
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout")
    sp.add_argument(
        "--chip", default=None, help=f"chip name or folder (default {chips.DEFAULT_CHIP})"
    )
    sp.add_argument(
        "--profile", default=None, help="another profile JSON (or chip name) for this chip"
    )
    if engine_default is not None:
        sp.add_argument(
            "--engine",
            default=engine_default,
            type=engine,
            help=f"one of {', '.join(contract.engine_names())} ({engine_default})",
        )


def load_chip(args: argparse.Namespace) -> chips.Chip:
    return chips.load(getattr(args, "chip", None), getattr(args, "profile", None))


def print_table(rows: Sequence[dict[str, object]], keys: Sequence[str]) -> None:
    widths = [max(len(k), *(len(str(r.get(k, ""))) for r in rows)) for k in keys]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r.get(k, "")).rjust(w) for k, w in zip(keys, widths, strict=True)))
