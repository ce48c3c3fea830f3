"""pytest glue for the host tests: the KDMA_* knobs are checked before anything runs."""

from __future__ import annotations

import pytest

from ane_kdma import knobs
from ane_kdma.errors import InputError


def pytest_configure(config: pytest.Config) -> None:
    """A bad or misspelled KDMA_* knob stops the run with one line (ane_kdma.knobs)."""
    try:
        knobs.read()
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
