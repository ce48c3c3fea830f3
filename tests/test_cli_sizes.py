"""Sizes on the command line: binary units, hex, plain integers; an exponent refused with a hint."""

from __future__ import annotations

import json

import pytest

from ane_kdma.cli import main
from ane_kdma.cli.common import parse_size
from ane_kdma.errors import InputError

SIZES = [
    ("1048576", 1 << 20),
    ("0x100000", 1 << 20),
    ("1_048_576", 1 << 20),
    ("1MiB", 1 << 20),
    ("1 MiB", 1 << 20),
    ("1mib", 1 << 20),
    ("512KiB", 512 << 10),
    ("0x200KiB", 512 << 10),
    ("1.5MiB", 3 << 19),
    ("4GiB", 1 << 32),
    ("64B", 64),
    ("64", 64),
]


@pytest.mark.parametrize(("text", "value"), SIZES)
def test_size_spellings(text: str, value: int) -> None:
    assert parse_size(text) == value


REFUSED = [
    ("1e6", "no exponents"),
    ("1E6", "no exponents"),
    ("2.5e3", "no exponents"),
    ("1MB", "ambiguous"),
    ("1M", "ambiguous"),
    ("512kb", "ambiguous"),
    ("1.3KiB", "not a whole number of bytes"),
    ("1TiB", "not a size"),
    ("abc", "not a size"),
    ("", "not a size"),
    ("9" * 50, "not a size"),
]


@pytest.mark.parametrize(("text", "why"), REFUSED)
def test_refused_sizes_say_why(text: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        parse_size(text)


@pytest.mark.parametrize(
    "spelling", ["1048576", "0x100000", "1MiB", "1024KiB", "0x10_0000", "1 MiB"]
)
def test_predict_takes_every_spelling_alike(
    spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", "--bytes-per-core", spelling, "--engine", "analytic", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bytes_per_core"] == 1 << 20 and doc["lines_per_core"] == 0x4000


def test_predict_refuses_an_exponent_in_one_line_with_a_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["predict", "--bytes-per-core", "1e6"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1
    assert "--bytes-per-core" in lines[0] and "1MiB" in lines[0] and "exponent" in lines[0]


def test_every_size_option_takes_units() -> None:
    """Each option whose value is a byte count goes through the size parser, not parse_int."""
    from ane_kdma.cli import build_parser, common

    sizes = []
    parser = build_parser()
    for sub in parser._subparsers._group_actions[0].choices.values():
        for action in sub._actions:
            if "bytes" in " ".join(action.option_strings):
                sizes.append((sub.prog, action.option_strings, action.type))
    assert sizes, "no option takes a byte count: this test has lost its subject"
    for prog, opts, kind in sizes:
        assert kind is common.size, f"{prog} {opts} does not take 1MiB"
