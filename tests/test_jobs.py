"""--jobs: the same results whatever the process count; bad counts refused in one line."""

from __future__ import annotations

import io

import pytest

from ane_kdma import chip as chips
from ane_kdma import contract, progress
from ane_kdma import hypotheses as hyps
from ane_kdma.cli import main
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError

CHIP = chips.load()


def _loads() -> list[Workload]:
    lb = CHIP.line_bytes
    sizes = [CHIP.ring_lines + x for x in (-64, -1, 0, 1, 64)] + [300, 5000]
    loads = [Workload.from_size(n * lb, cores, split) for n in sizes for cores, split in ((1, 1),)]
    loads += [Workload.from_size(2 * CHIP.ring_lines * lb, 3, 2)]
    return loads + loads[:2]  # repeats come back in place


@pytest.mark.parametrize("engine", ["model", "analytic"])
def test_jobs_do_not_change_results(engine: str) -> None:
    h = hyps.get("signed")
    loads = _loads()
    one = contract.run_many(engine, h, CHIP, loads, jobs=1)
    two = contract.run_many(engine, h, CHIP, loads, jobs=2)
    assert [r.counters for r in one] == [r.counters for r in two]
    assert len(one) == len(loads)


def test_jobs_on_the_rtl_engine() -> None:
    from ane_kdma.engines import verilator as vb

    try:
        vb.toolchain()
    except vb.HarnessBuildError as exc:
        pytest.skip(str(exc))
    h = hyps.get("fixed")
    loads = _loads()[:6]
    rtl = contract.run_many("rtl", h, CHIP, loads, jobs=2)
    model = contract.run_many("model", h, CHIP, loads, jobs=1)
    assert [r.counters for r in rtl] == [r.counters for r in model]


def test_options_set_the_default_for_calls_inside() -> None:
    assert contract.current_options().jobs == 1
    with contract.options(3, quiet=True) as opts:
        assert opts.jobs == 3 and contract.current_options().quiet
    assert contract.current_options().jobs == 1

    @contract.takes_jobs
    def seen() -> int:
        return contract.current_options().jobs

    assert seen(jobs=5) == 5 and seen() == 1


@pytest.mark.parametrize("bad", [0, -1, 1025, True, 2.0])
def test_bad_job_counts_are_refused(bad: object) -> None:
    with pytest.raises(InputError):
        contract.check_jobs(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["sweep", "validate", "erratum", "calibrate"])
@pytest.mark.parametrize("value", ["0", "-2", "100000", "many"])
def test_bad_jobs_on_the_cli_exit_2_in_one_line(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--jobs", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs" in err


def test_progress_is_quiet_when_piped_or_asked() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not progress.wanted(stream=io.StringIO())
    assert progress.wanted(stream=Tty())
    assert not progress.wanted(quiet=True, stream=Tty())
    with progress.bar(10, "x") as b:  # pytest's stderr is not a terminal
        assert not b.shown
        b.update(3)
