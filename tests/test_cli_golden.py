"""Every figure the CLI prints for a fixed set of commands stays what tests/golden/cli.json says.

The commands and the recorder live in tools/golden.py; a change meant to move
figures regenerates the file there (``--update``) and says why in its commit.
"""

from __future__ import annotations

import importlib.util
import json
import math

import pytest

from ane_kdma.chip import data_dir

REPO = data_dir().parent

_spec = importlib.util.spec_from_file_location("golden", REPO / "tools" / "golden.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)
RECORDED = json.loads(golden.GOLDEN.read_text())
REL = 1e-9


def _same(a: object, b: object, where: str) -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), where
        assert math.isclose(a, b, rel_tol=REL, abs_tol=1e-12), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {set(a) ^ set(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: length"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, str) and isinstance(b, str):
        try:
            _same(float(a), float(b), where)  # CSV cells
        except ValueError:
            assert a == b, f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def test_recorded_set_is_current() -> None:
    assert sorted(RECORDED) == sorted(" ".join(c) for c in golden.commands())


SHARED = ("validate", "calibrate")  # their standings, fit and runs are shared (conftest.py)
#: the xdist group of a command's test: validate and calibrate beside test_validate's ranking
#: and test_calibration's fit (the same standings and fit); sweep beside tests/test_sweep.py,
#: whose module sweep is this one (the analytic engine's page patterns, cached per process)
GROUPS = {"validate": "ranking", "calibrate": "ranking", "sweep": "sweep"}


def _params() -> list[object]:
    return [
        pytest.param(c, marks=pytest.mark.xdist_group(GROUPS[c[0]])) if c[0] in GROUPS else c
        for c in golden.commands()
    ]


@pytest.mark.parametrize("argv", _params(), ids=lambda c: " ".join(c)[:60])
def test_cli_output_unchanged(argv: list[str], request: pytest.FixtureRequest) -> None:
    if argv[0] in SHARED:
        request.getfixturevalue("shared_standings")
        request.getfixturevalue("shared_fits")
        request.getfixturevalue("shared_runs")  # test_validate's rows, calibrate's confirm
    _same(RECORDED[" ".join(argv)], golden.run(argv), " ".join(argv))
