"""pytest glue for the host tests: the KDMA_* knobs are checked before anything runs, and
the libraries' scratch folders (Hypothesis' home, Dask's temporary directory) are the run's
own, removed at its end, so a run leaves nothing in the system temp dir."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ane_kdma import knobs
from ane_kdma.errors import InputError


def pytest_configure(config: pytest.Config) -> None:
    """A bad or misspelled KDMA_* knob stops the run with one line (ane_kdma.knobs); so does
    a pytest that would spread an xdist group over both workers (below)."""
    try:
        knobs.read()
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    _check_groups_hold(config)
    _scratch_of_our_own(config)


def _scratch_of_our_own(config: pytest.Config) -> None:
    """Hypothesis' home (its caches) and Dask's temporary directory (workers' scratch space,
    a child scheduler's too: the variable reaches child processes) in one folder of this
    process, made before collection (Hypothesis writes its caches as it imports the tests)
    and removed at the end: a run leaves nothing in the system temp dir, nor in the tree."""
    import os
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="ane-kdma-tests-")
    before = os.environ.get("DASK_TEMPORARY_DIRECTORY")
    os.environ["DASK_TEMPORARY_DIRECTORY"] = os.path.join(root, "dask")
    try:
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:  # (the dev extra brings it; a bare install runs without the fuzzers)
        pass
    else:
        set_hypothesis_home_dir(os.path.join(root, "hypothesis"))

    def remove() -> None:
        if before is None:
            os.environ.pop("DASK_TEMPORARY_DIRECTORY", None)
        else:
            os.environ["DASK_TEMPORARY_DIRECTORY"] = before
        shutil.rmtree(root, ignore_errors=True)

    config.add_cleanup(remove)


def _check_groups_hold(config: pytest.Config) -> None:
    """pytest 9.2 with pytest-xdist <= 3.8 ignores every `xdist_group` under --dist loadgroup
    (pytest-dev/pytest-xdist#1386; the dev extra pins pytest below 9.2). The groups are not
    only a saving: formal/run.sh (tests/test_formal.py) runs once per worker in formal/, and
    two workers running it at once race on its sby status files. So a venv that drifted
    past the pin stops here, in one line, instead of failing or slowing down obscurely."""
    if getattr(config.option, "dist", "no") != "loadgroup" or not getattr(
        config.option, "numprocesses", None
    ):
        return
    from importlib.metadata import version

    def release(name: str) -> tuple[int, ...]:
        return tuple(int(p) for p in version(name).split(".")[:2] if p.isdigit())

    if release("pytest") >= (9, 2) and release("pytest-xdist") <= (3, 8):
        raise pytest.UsageError(
            f"pytest {version('pytest')} with pytest-xdist {version('pytest-xdist')} ignores "
            "xdist_group (pytest-xdist#1386): pip install 'pytest<9.2' (the dev extra's pin)"
        )


# ------------------------------------------------- shared expensive results
#
# validate's ranking judges every fit of fits.json on every counted row (the cycle model
# for the mechanisms without a closed form): the costliest call of the suite. Several
# tests need the same standings (test_validate's ranking, test_calibration's committed
# ranking, the golden `validate` and `calibrate` figures, the synthetic chip's calibrate
# then validate). `shared_standings` lets them judge each (chip, profile, tolerances)
# once per worker, and its engine runs go through `_runs_shared` (below), so a test that
# changes a tolerance judges the same runs anew instead of running them again: the memo is
# session-wide, the patch only lasts the test that asks for
# it (a test that changes a tolerance without asking gets the real function). The tests
# that share it sit in the xdist group RANKING, so one worker computes it once.

RANKING = "ranking"  # xdist_group of the tests that share validate's standings
_STANDINGS: dict[str, object] = {}


def _standing_key(chip: object, profile: object) -> str:
    """Everything validate.standing reads: the chip but its own profile and fits (it judges
    `profile` on chip.with_profile(profile) and the measurements of chip.path), the
    profile, and validate's tolerances (specs.*_TOL)."""
    import dataclasses

    from ane_kdma.validate import specs

    base = dataclasses.replace(chip, fitted=None, fits=())  # type: ignore[type-var]
    tols = sorted((k, v) for k, v in vars(specs).items() if k.endswith("_TOL"))
    return f"{base!r}\n{profile.to_json()}\n{tols!r}"  # type: ignore[attr-defined]


@pytest.fixture
def shared_standings(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """validate.standing memoised for the session (calibrate.rank and validate.rank call it)."""
    import copy

    from ane_kdma import validate

    real = validate.standing

    def standing(chip: object, profile: object) -> object:
        key = _standing_key(chip, profile)
        if key not in _STANDINGS:
            # the workloads a standing runs do not depend on the tolerances, only its rows'
            # verdicts do: a fit judged again under changed tolerances reuses every run
            with _runs_shared():
                _STANDINGS[key] = real(chip, profile)  # type: ignore[arg-type]
        return copy.deepcopy(_STANDINGS[key])

    monkeypatch.setattr(validate, "standing", standing)
    return _STANDINGS


_FITS: dict[str, object] = {}


def _fit_once(real: Callable[..., object], chip: object, hypothesis: str, mechanism: str) -> object:
    """real(chip, hypothesis, mechanism) (calibrate.fit), computed once per worker; a copy each
    call, since calibrate.rank writes the standing into it."""
    import copy

    key = f"{chip!r}\n{hypothesis}\n{mechanism}"
    if key not in _FITS:
        _FITS[key] = real(chip, hypothesis, mechanism)
    return copy.deepcopy(_FITS[key])


@pytest.fixture(scope="session")
def fit_once() -> Callable[[object, str, str], object]:
    """calibrate.fit shared by the worker's tests (test_calibration's fit, the golden
    `calibrate`); test_calibration's test_fit_is_deterministic still fits a second time."""
    from ane_kdma import calibrate

    real = calibrate.fit
    return lambda chip, h, m: _fit_once(real, chip, h, m)


@pytest.fixture
def shared_fits(
    monkeypatch: pytest.MonkeyPatch, fit_once: Callable[[object, str, str], object]
) -> dict[str, object]:
    """calibrate.fit through :func:`fit_once` for this test (calibrate.fit_all calls it)."""
    from ane_kdma import calibrate

    def fit(chip: object, h: str, m: str, **kw: object) -> object:
        # only how the runs spread may differ from the shared fit's call: a held-out dataset
        # or another exact engine is another fit, which this must not hand out
        other = {k: v for k, v in kw.items() if k not in ("jobs", "quiet", "connect")}
        if other not in ({}, {"engine": None}, {"engine": "model"}):
            raise AssertionError(f"shared_fits serves the plain fit only, not {other}")
        return fit_once(chip, h, m)

    monkeypatch.setattr(calibrate, "fit", fit)
    return _FITS


_RUNS: dict[tuple[str, str, str, tuple[object, ...]], list[object]] = {}


@contextlib.contextmanager
def _runs_shared() -> Iterator[None]:
    """runner.run_many memoised on (engine, hypothesis, chip, workloads) while the block
    runs: the engines are deterministic (their exactness is tested on its own), so the
    same workloads on the same chip give the same results. Not on a Dask cluster (there
    the point is the cluster)."""
    from ane_kdma import runner

    real = runner.run_many

    def run_many(
        engine: str, hypothesis: object, chip: object, workloads: Any, jobs: int | None = None
    ) -> list[object]:
        if runner.current_options().cluster is not None:
            return real(engine, hypothesis, chip, workloads, jobs)  # type: ignore[arg-type]
        key = (engine, repr(hypothesis), repr(chip), tuple(workloads))
        if key not in _RUNS:
            _RUNS[key] = real(engine, hypothesis, chip, workloads, jobs)  # type: ignore[arg-type]
        return list(_RUNS[key])  # Result is frozen: a new list is enough

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "run_many", run_many)
        yield


@pytest.fixture(scope="session")
def runs_shared() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """A block whose run_many calls share results with every other such block of the
    worker (test_validate's report and the golden `validate`: the same rows)."""
    return _runs_shared


@pytest.fixture
def shared_runs(
    runs_shared: Callable[[], contextlib.AbstractContextManager[None]],
) -> Iterator[None]:
    """:func:`_runs_shared` around the whole test."""
    with runs_shared():
        yield
