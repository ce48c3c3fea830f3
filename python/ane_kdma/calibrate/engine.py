"""The exact engine every exact evaluation of a fit runs on, and the checks of that choice.

The choice itself is one of the runner's run options (``runner.options(exact_engine=...)``,
the one ambient-options mechanism): the exact runs sit deep in the fit (the correction, the
V, the residuals) and the caller decides, as it does for --jobs. This module keeps
calibrate's names for it and what calibrate alone checks (an exact engine, the mechanisms
and the chip the RTL can build).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ane_kdma import contract, runner
from ane_kdma import mechanisms as mechs
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError

ANALYTIC_TOL = 0.02  # the analytic engine's stated accuracy on progress-dependent readings

EXACT_ENGINE = runner.EXACT_ENGINE  # the default: the cycle model (the RTL's counters, exactly)
RTL_ENGINES = ("rtl", "cocotb")  # the RTL itself: only the mechanisms built in rtl/


def exact_engine() -> str:
    """The engine the exact evaluations run on (the runner's option; :func:`engine_options`)."""
    return runner.current_options().exact_engine


def check_engine(name: str) -> str:
    """An engine calibrate can evaluate on: any exact engine of the contract (one line if not)."""
    contract.check_engine(name)
    if not contract.get_engine(name).exact:
        exact = [e.name for e in contract.REGISTRY if contract.get_engine(e.name).exact]
        raise InputError(
            f"calibrate needs an exact engine and {name} is not: it is the closed form the "
            f"search itself runs on (within {ANALYTIC_TOL:.0%} of the cycle model on paged "
            "readings), which the residuals, constraint checks and correction check exactly; "
            f"use --engine {', '.join(exact[:-1])} or {exact[-1]}"
        )
    return name


def rtl_lacks(mechanism: str) -> list[str]:
    """The mechanism's run-time inputs the RTL has no input for (empty: rtl/ builds it)."""
    return [i.name for i in mechs.get(mechanism).table if i.rtl_bits is None]


def check_mechanisms(engine: str, mechanisms: Sequence[str]) -> None:
    """Refuse, before any fit, a mechanism the engine cannot run (the RTL builds a few)."""
    if engine not in RTL_ENGINES:
        return
    lacking = [m for m in dict.fromkeys(mechanisms) if rtl_lacks(m)]
    if lacking:
        built = [m.name for m in mechs.REGISTRY if not rtl_lacks(m.name)]
        raise InputError(
            f"--engine {engine}: the RTL does not build the {', '.join(lacking)} "
            f"mechanism{'s' if len(lacking) > 1 else ''} (it builds {', '.join(built)}): "
            "name one of those with --hypothesis and --mechanism, or use --engine model"
        )


def check_chip(engine: str, chip: Chip) -> None:
    """Refuse, before any fit, a chip the engine cannot build (the RTL's line size and KMem)."""
    if engine in RTL_ENGINES:
        from ane_kdma.engines.cocotb import check_chip as rtl_check_chip

        rtl_check_chip(chip)


@contextmanager
def engine_options(engine: str | None = None) -> Iterator[str]:
    """Within the block, the exact evaluations run on `engine` (None: as they were): the
    runner's option, checked first as calibrate needs it (an exact engine)."""
    if engine is None:
        yield exact_engine()
        return
    with runner.options(exact_engine=check_engine(engine)):
        yield engine


F = TypeVar("F", bound=Callable[..., Any])


def takes_engine(fn: F) -> F:
    """Give `fn` an `engine=` keyword that sets :func:`engine_options` around it."""

    @functools.wraps(fn)
    def wrapped(*args: Any, engine: str | None = None, **kw: Any) -> Any:
        with engine_options(engine):
            return fn(*args, **kw)

    return wrapped  # type: ignore[return-value]
