"""--jobs: the same results whatever the process count; bad counts refused in one line."""

from __future__ import annotations

import ast
import io
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import progress, runner
from ane_kdma.contract import Result, Workload
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
    one = runner.run_many(engine, h, CHIP, loads, jobs=1)
    two = runner.run_many(engine, h, CHIP, loads, jobs=2)
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
    rtl = runner.run_many("rtl", h, CHIP, loads, jobs=2)
    model = runner.run_many("model", h, CHIP, loads, jobs=1)
    assert [r.counters for r in rtl] == [r.counters for r in model]


def test_options_set_the_default_for_calls_inside() -> None:
    assert runner.current_options().jobs == 1
    with runner.options(3, quiet=True) as opts:
        assert opts.jobs == 3 and runner.current_options().quiet
    assert runner.current_options().jobs == 1

    @runner.takes_options
    def seen() -> int:
        return runner.current_options().jobs

    assert seen(jobs=5) == 5 and seen() == 1


@pytest.mark.parametrize("bad", [0, -1, 1025, True, 2.0])
def test_bad_job_counts_are_refused(bad: object) -> None:
    with pytest.raises(InputError):
        runner.check_jobs(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["sweep", "validate", "erratum", "calibrate"])
@pytest.mark.parametrize("value", ["0", "-2", "100000", "many"])
def test_bad_jobs_on_the_cli_exit_2_in_one_line(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refuses([command, "--jobs", value], "--jobs")


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


def test_the_exact_engine_is_a_run_option_like_jobs() -> None:
    """One ambient mechanism: the exact engine of a fit rides in the same options as --jobs."""
    assert runner.current_options().exact_engine == runner.EXACT_ENGINE == "model"
    with runner.options(exact_engine="rtl"):
        with runner.options(jobs=2) as inner:  # an inner block keeps what it does not set
            assert inner.exact_engine == "rtl" and inner.jobs == 2
    assert runner.current_options().exact_engine == "model"

    @runner.takes_options
    def seen() -> str:
        return runner.current_options().exact_engine

    assert seen(exact_engine="cocotb") == "cocotb" and seen() == "model"
    with pytest.raises(InputError, match="unknown engine"):
        seen(exact_engine="no-such-engine")


class _Remote:
    """A stand-in for a cluster: runs the chunks here, records them, and its closing."""

    address = "tcp://stand-in:1"

    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self.chunks: list[int] = []
        self.closed = False

    def run(
        self,
        engine: str,
        hypothesis: hyps.Hypothesis,
        chip: chips.Chip,
        workloads: Sequence[Workload],
        per_slot: int,
        done: Callable[[int], None] | None = None,
    ) -> list[Result]:
        cut = runner.chunks(len(workloads), (self.slots or 1) * per_slot)
        out: list[Result] = [None] * len(workloads)  # type: ignore[list-item]
        for c in cut:
            part = runner.run_chunk(engine, hypothesis, chip, [workloads[i] for i in c])
            for i, r in zip(c, part, strict=True):
                out[i] = r
            self.chunks.append(len(c))
        return out

    def close(self) -> None:
        self.closed = True


def test_a_remote_plugs_in_through_connect_and_is_closed_by_its_block() -> None:
    """The runner knows a remote only by the Remote protocol: a connect(slots) given to
    options is called once at entry with --jobs, gets every parallel run_many, and is
    closed when the block that made it ends (not by an inner block)."""
    made: list[_Remote] = []

    def connect(slots: int | None) -> _Remote:
        made.append(_Remote(slots))
        return made[-1]

    h = hyps.get("signed")
    loads = _loads()
    with runner.options(jobs=3, connect=connect) as opts:
        assert opts.cluster is made[0] and made[0].slots == 3
        with runner.options(jobs=1):
            there = runner.run_many("model", h, CHIP, loads)  # still the remote's
        assert not made[0].closed
    assert len(made) == 1 and made[0].closed
    assert sum(made[0].chunks) == len(set(loads))  # each distinct workload once
    assert len(made[0].chunks) == min(3 * runner.CHUNKS_PER_JOB, len(set(loads)))
    here = runner.run_many("model", h, CHIP, loads, jobs=1)
    assert [r.counters for r in there] == [r.counters for r in here]


@pytest.mark.parametrize(
    ("count", "n", "contiguous", "want"),
    [
        (7, 3, False, [[0, 3, 6], [1, 4], [2, 5]]),
        (7, 3, True, [[0, 1, 2], [3, 4, 5], [6]]),
        (2, 5, False, [[0], [1]]),
        (3, 0, True, [[0, 1, 2]]),
    ],
)
def test_chunks_cover_every_index_once(
    count: int, n: int, contiguous: bool, want: list[list[int]]
) -> None:
    assert runner.chunks(count, n, contiguous) == want


def _imports(path: Path) -> set[str]:
    """Every ane_kdma module a file imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("ane_kdma")}


def test_the_runner_sits_above_the_contract_and_the_cluster_above_the_runner() -> None:
    """No import circle, lazy or not: contract imports neither, runner not the cluster."""
    pkg = Path(runner.__file__).parent
    contract_imports = _imports(pkg / "contract.py")
    runner_imports = _imports(pkg / "runner.py")
    assert not contract_imports & {"ane_kdma.runner", "ane_kdma.cluster"}, contract_imports
    assert "ane_kdma.cluster" not in runner_imports, runner_imports
    assert "ane_kdma.contract" in runner_imports
    assert "ane_kdma.runner" in _imports(pkg / "cluster.py")


def test_no_module_uses_another_modules_private_name() -> None:
    """`mod._name` or `from mod import _name` across modules of the package: none."""
    pkg = Path(runner.__file__).parent
    found = []
    for path in sorted(pkg.rglob("*.py")):
        tree = ast.parse(path.read_text())
        mods = set()  # names bound to ane_kdma modules in this file
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ane_kdma"):
                mods |= {a.asname or a.name for a in node.names}
                found += [
                    f"{path.name}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
            elif isinstance(node, ast.Import):
                mods |= {a.asname or a.name for a in node.names if a.name.startswith("ane_kdma")}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in mods
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, found
