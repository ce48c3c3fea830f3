"""pytest entry points: every cocotb test, per hypothesis the RTL has, on the simulator `SIM` names.

(The credit unit's test is per geometry: its one build holds every reading's unit.)

Each (simulator, parameter set) is built once (ane_kdma.sim caches builds by
content hash, under a lock shared by pytest-xdist workers); each pytest item
is one cocotb test on that build (several share a simulator start, below).
The parameter dict is the one the CLI's RTL engine builds
(ane_kdma.engines.cocotb), so the two share builds.

Icarus runs this design about 30x slower than Verilator (and 16 cores far
slower still), so on Icarus the random integrity sizes stop at one ring (plus
one forced 8-ring transfer), the random model-match transfers stay below two
rings and the 16-core tasks are short; `make regress` (KDMA_FULL=1) runs full
scale on both. The erratum regression's numbers (laps 1..8) come from the
batch RTL engine on any SIM, where they cost seconds; the cocotb regression
runs lap 1 (all eight under KDMA_FULL=1) and must give the same numbers.

The cocotb tests of one build share one simulator start (`SharedRuns`): the
first pytest item of a (test, hypothesis) group runs every selected case of
the group in one simulator process, and each item then passes or fails on its
own case's result. A start costs about 1.2-1.4 s of process, Python and cocotb
start-up on Verilator, more than most of these tests take to simulate. The
group is one xdist group, so one worker starts it once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ane_kdma import chip as chips
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses, knobs
from ane_kdma.contract import Task, Workload
from ane_kdma.engines.cocotb import build_params, job_document
from ane_kdma.engines.model import counters_of
from ane_kdma.fileio import locked
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.sim import BUILD_ROOT, RTL, TB, run

TOP = "kdma_tb_top"
CREDIT_TOP = "kdma_credit_tb"  # the credit unit alone, one instance per mode code
CREDIT_GEOMETRY = ("RingBits", "PrefetchMaxLines")  # kdma_credit_tb's parameters
CHIP = chips.load()
# A chip whose ring, clamp and KMem differ from the package's: the engine builds it with
# RingBits, PrefetchMaxLines and KmemLines, and the testbench must read them from the design.
OTHER_CHIP = replace(
    CHIP, geometry=replace(CHIP.geometry, ring_bits=12, prefetch_max_lines=128, kmem_lines=512)
)
MODES = list(hypotheses.in_rtl())
IDS = [h.name for h in MODES]
MULTI_CORES = 16
# The 16-core builds `make test` runs: the chip's committed reading and signed, the two the mutant
# set builds at 16 cores as well (tools/mutants.py; tests/test_mutants.py holds the two lists
# together), so CI compiles each 16-core model once. The readings differ only inside kdma_credit,
# one per core, which every reading runs at one core; the 16-core build adds the arbiter, the
# shared memory and the aggregate bucket, which no reading changes. A cold 16-core build costs
# about 55 CPU s, and its pyuvm run about 40 more (docs/testing.md). `make regress`
# (KDMA_FULL=1) runs every reading at 16 cores.
MULTI_MODES = [h for h in MODES if knobs.full() or h.name in (CHIP.hypothesis.name, "signed")]


def credit_sources() -> list[Path]:
    """What kdma_credit_tb compiles: the package, the credit unit, the top."""
    return [RTL / "kdma_pkg.sv", RTL / "kdma_credit.sv", TB / "hdl" / f"{CREDIT_TOP}.sv"]


def params(hyp: Hypothesis, cores: int = 1, chip: chips.Chip = CHIP) -> dict[str, int]:
    """kdma_tb_top's parameters for `hyp` on a chip (the m3 by default): the CLI engine's dict."""
    return build_params(hyp, chip, cores)


@dataclass(frozen=True)
class CaseResult:
    """One cocotb test's outcome in a shared simulator run (None: passed)."""

    failure: str | None
    log: Path


def _outcomes(tdir: Path) -> dict[str, CaseResult]:
    """Every cocotb test the run's JUnit file reports, by name (empty: no results file)."""
    out: dict[str, CaseResult] = {}
    for xml in tdir.glob("results-*.xml"):
        logs = sorted(tdir.glob("sim-*.log"))
        log = logs[0] if logs else tdir
        for case in ElementTree.parse(xml).getroot().iter("testcase"):
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            why = None if bad is None else (bad.get("message") or bad.text or "failed").strip()
            out[str(case.get("name"))] = CaseResult(why, log)
    return out


class SharedRuns:
    """The cocotb tests of one build and module run in one simulator start.

    `outcome` starts the simulator once per (sim, params, module, env) with every
    case the session selected for the asking test and hypothesis (other items of
    the same test function with the same parameters but the case), and returns
    the asking case's result. Each case is the same cocotb test as on its own,
    with its own seed and its own reset (every test starts the testbench).
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self._runs: dict[tuple[object, ...], tuple[dict[str, CaseResult], str, Path]] = {}

    @staticmethod
    def cases(request: pytest.FixtureRequest) -> list[str]:
        """The `case` of every selected item of this test with this item's other parameters."""
        node = request.node
        mine = {k: v for k, v in node.callspec.params.items() if k != "case"}
        out = []
        for item in request.session.items:
            spec = getattr(item, "callspec", None)
            if getattr(item, "function", None) is not node.function or spec is None:
                continue
            if {k: v for k, v in spec.params.items() if k != "case"} == mine:
                out.append(spec.params["case"])
        return out

    def outcome(
        self,
        request: pytest.FixtureRequest,
        sim: str,
        build: Mapping[str, int],
        module: str,
        env: Mapping[str, str],
    ) -> CaseResult:
        case = request.node.callspec.params["case"]
        names = self.cases(request)
        key = (sim, tuple(sorted(build.items())), module, tuple(sorted(env.items())), *names)
        if key not in self._runs:
            tdir = self.base / f"{module}-{len(self._runs)}"
            tdir.mkdir(parents=True)
            stopped = ""
            try:
                run(sim, TOP, build, module, names, extra_env=dict(env), test_dir=tdir)
            except (AssertionError, RuntimeError, SystemExit) as exc:
                # (cocotb's runner exits under pytest when a test failed): the items
                # report their own case from the results file
                stopped = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self._runs[key] = (_outcomes(tdir), stopped, tdir)
        results, stopped, tdir = self._runs[key]
        if case not in results:
            pytest.fail(
                f"{case}: no result; the simulator stopped before it ({stopped or 'no results'})"
                f", see {tdir}",
                pytrace=False,
            )
        return results[case]


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> SharedRuns:
    return SharedRuns(tmp_path_factory.mktemp("shared-runs"))


def check_shared(
    request: pytest.FixtureRequest,
    shared: SharedRuns,
    sim: str,
    build: Mapping[str, int],
    module: str,
    env: Mapping[str, str],
) -> None:
    """Fail this item if its cocotb test failed in the shared run (its message and log)."""
    res = shared.outcome(request, sim, build, module, env)
    case = request.node.callspec.params["case"]
    if res.failure is not None:
        pytest.fail(f"{sim} {module}.{case}: {res.failure}\n(log: {res.log})", pytrace=False)


def grouped(hyps: list[Hypothesis], cores: int) -> list[object]:
    """The hypotheses as parameters in one xdist group per build: one worker starts it."""
    return [
        pytest.param(h, id=h.name, marks=pytest.mark.xdist_group(f"sim-{h.name}-{cores}"))
        for h in hyps
    ]


def full_scale(sim: str) -> bool:
    return sim == "verilator" or knobs.full()


def scale_env(sim: str) -> dict[str, str]:
    """Sizes for the simulator: full on Verilator (or KDMA_FULL=1), reduced on Icarus."""
    return {} if full_scale(sim) else {"KDMA_SCALE": "small"}


@pytest.mark.parametrize("chip", [CHIP, OTHER_CHIP], ids=["m3", "other-geometry"])
def test_credit_unit(sim: str, chip: chips.Chip) -> None:
    """The credit unit alone, every reading in one build (kdma_credit_tb: one kdma_credit per
    mode code, side by side), through cocotb-test's run() (the rest uses cocotb_tools.runner)."""
    from cocotb_test.simulator import run as cocotb_test_run

    # the ring width and clamp only where the chip differs from the package, as the cores'
    # builds (build_params): the m3's build runs the top's defaults
    geometry = {k: v for k, v in params(MODES[0], 1, chip).items() if k in CREDIT_GEOMETRY}
    name = "-".join(f"{k}{v}" for k, v in geometry.items()) or "package"
    build = BUILD_ROOT / "cocotb-test" / sim / f"{CREDIT_TOP}-{name}"
    with locked(build.with_suffix(".lock")):
        cocotb_test_run(
            simulator=sim,
            toplevel=CREDIT_TOP,
            module="cocotb_credit",
            toplevel_lang="verilog",
            verilog_sources=[str(p) for p in credit_sources()],
            parameters=geometry,
            python_search=[str(TB)],
            sim_build=str(build),
            timescale="1ns/1ps",
            compile_args=["-g2012"] if sim == "icarus" else [],
        )


@pytest.mark.parametrize(
    "case",
    [
        "zero_length_task",
        "reset_mid_transfer",
        "top_of_address_space_wraps",
        "partial_size_rounds_up",
        "model_matches_rtl_random",
        "integrity_random_sizes",
    ],
)
@pytest.mark.parametrize("hyp", grouped(MODES, 1))
def test_single_core(
    request: pytest.FixtureRequest, shared_runs: SharedRuns, sim: str, hyp: Hypothesis, case: str
) -> None:
    check_shared(request, shared_runs, sim, params(hyp), "cocotb_kdma", scale_env(sim))


def test_other_geometry(sim: str) -> None:
    """A build for another chip's ring, clamp and KMem: the testbench and model follow the
    design."""
    hyp = CHIP.hypothesis
    p = params(hyp, 1, OTHER_CHIP)
    assert p["RingBits"] == 12 and p["KmemLines"] == 512, p
    run(sim, TOP, p, "cocotb_kdma", "model_matches_rtl_random", extra_env=scale_env(sim))


@pytest.mark.parametrize("case", ["multicore_shared_memory", "multicore_sequences"])
@pytest.mark.parametrize("hyp", grouped(MULTI_MODES, MULTI_CORES))
def test_multicore(
    request: pytest.FixtureRequest, shared_runs: SharedRuns, sim: str, hyp: Hypothesis, case: str
) -> None:
    build = params(hyp, MULTI_CORES)
    check_shared(request, shared_runs, sim, build, "cocotb_kdma", scale_env(sim))


def test_batch_run(sim: str, tmp_path: Path) -> None:
    """The CLI engine's path: a job document in, the counters out, equal to the model's."""
    hyp = CHIP.hypothesis
    line = CHIP.line_bytes
    uneven = [None] * MULTI_CORES
    uneven[3] = (Task(0, 40 * line), Task(40 * line, 7 * line + 5))
    uneven[9] = (Task(1 << 20, 3 * line), Task(1 << 21, 30 * line))
    workloads = [Workload.from_size(24 * line, MULTI_CORES, split=2), Workload(tuple(uneven))]
    job, out = tmp_path / "job.json", tmp_path / "out.json"
    job.write_text(json.dumps(job_document(CHIP, workloads)))
    env = {"KDMA_JOB": str(job), "KDMA_RESULTS": str(out)}
    run(sim, TOP, params(hyp, MULTI_CORES), "cocotb_kdma", "batch_run", env, test_dir=tmp_path)
    got = json.loads(out.read_text())["counters"]
    assert len(got) == len(workloads)
    for w, doc in zip(workloads, got, strict=True):
        res = cm.run(hyp, CHIP.geometry, CHIP.settings, cm.job_of(w.cores, line))
        want = counters_of(res)
        assert doc["cycles"] == want.cycles
        cores = [
            None if c is None else [c.cycles, c.zero_credit_cycles, c.peak_inflight]
            for c in want.cores
        ]
        assert doc["cores"] == cores


def _regression_loads(ring: int, laps: list[int]) -> dict[str, Workload]:
    """erratum_regression's workloads (tb/cocotb_kdma.py), one core, by the keys it writes."""
    line = CHIP.line_bytes
    half = ring // 2
    one = lambda lines: Workload(((Task(0, lines * line),),))  # noqa: E731
    loads = {}
    for k in laps:
        for key, x in (("x0", 0), ("xm256", -256), ("xp256", 256)):
            loads[f"{k}/{key}"] = one(k * ring + x)
        halves = tuple(Task(part * half * line, half * line) for part in range(2 * k))
        loads[f"{k}/split"] = Workload((halves,))
    ctrl = ring - 256
    first = ctrl // 2
    loads["control_whole"] = one(ctrl)
    loads["control_split"] = Workload(
        ((Task(0, first * line), Task(first * line, (ctrl - first) * line)),)
    )
    return loads


@pytest.fixture(scope="session")  # not module: xdist may run other modules between the two
def regression() -> dict[str, dict]:
    """The erratum regression's numbers, laps 1..8, from the batch RTL engine (kdma_top in C++).

    The point of these two tests is the numbers, so they run on the batch harness
    (tests/test_engines_verilator.py holds it to the cocotb engine and the model); the
    cocotb path of the same regression is test_erratum_regression_testbench.
    """
    from ane_kdma import runner
    from ane_kdma.engines import verilator as vb

    try:
        vb.toolchain()
    except vb.HarnessBuildError as exc:
        pytest.skip(str(exc))
    ring = CHIP.ring_lines
    loads = _regression_loads(ring, list(range(1, 9)))
    res = {}
    for hyp in MODES:
        got = dict(zip(loads, runner.run_many("rtl", hyp, CHIP, list(loads.values())), strict=True))
        laps: dict[str, dict[str, int]] = {}
        for key, r in got.items():
            if "/" in key:
                k, what = key.split("/")
                laps.setdefault(k, {})[what] = r.cycles
        res[hyp.name] = {
            "hypothesis": hyp.name,
            "ring_lines": ring,
            "laps": laps,
            "control_whole": got["control_whole"].cycles,
            "control_split": got["control_split"].cycles,
        }
    return res


# In the xdist group of its one-core build (the single-core cases), not in "regression":
# that group would run all four on one worker, about 100 s on Icarus, while the other
# worker idles at the end. A worker that runs one computes `regression` (seconds) itself.
@pytest.mark.parametrize("hyp", grouped(MODES, 1))
def test_erratum_regression_testbench(
    sim: str, hyp: Hypothesis, tmp_path: Path, regression: dict[str, dict]
) -> None:
    """The cocotb erratum regression (every run checked against the model inside) writes
    the numbers the batch engine gives: lap 1, or laps 1..8 under KDMA_FULL=1."""
    out = tmp_path / f"{hyp.name}.json"
    laps = "1,2,3,4,5,6,7,8" if knobs.full() else "1"
    env = {"KDMA_LAPS": laps, "KDMA_RESULTS": str(out)}
    run(sim, TOP, params(hyp), "cocotb_kdma", "erratum_regression", extra_env=env)
    got = json.loads(out.read_text())
    want = regression[hyp.name]
    for k in laps.split(","):
        assert got["laps"][k] == want["laps"][k], f"k={k}"
    assert got["control_whole"] == want["control_whole"]
    assert got["control_split"] == want["control_split"]


@pytest.mark.xdist_group("regression")  # one fixture run for the two tests
def test_erratum_regression(regression: dict[str, dict]) -> None:
    """Buggy hypotheses throttle at every k x ring; the fix and the split workaround do not."""
    fixed = regression[hypotheses.FIXED]
    ring = fixed["ring_lines"]
    for k_str, f in fixed["laps"].items():
        k = int(k_str)
        lines = k * ring
        for hyp in MODES:
            r = regression[hyp.name]["laps"][k_str]
            per = {
                key: r[key] / (lines + dx)
                for key, dx in (("x0", 0), ("xm256", -256), ("xp256", 256))
            }
            if not hyp.buggy:
                for side in ("xm256", "xp256"):
                    assert abs(per["x0"] / per[side] - 1) < 0.01, f"{hyp.name} k={k}: notch: {per}"
                continue
            assert r["x0"] >= 2 * f["x0"], f"{hyp.name} k={k}: {r['x0']} vs fixed {f['x0']}"
            for side in ("xm256", "xp256"):
                ratio = per["x0"] / per[side]
                assert ratio >= 2, f"{hyp.name} k={k}: x=0 only {ratio:.2f}x slower than {side}"
            split_err = r["split"] / f["x0"] - 1
            assert abs(split_err) < 0.05, f"{hyp.name} k={k}: split {split_err:+.2%} vs fixed"


@pytest.mark.xdist_group("regression")
def test_control_split_changes_nothing(regression: dict[str, dict]) -> None:
    """On buggy hardware, splitting a task that was never in the notch gains nothing (< 2%)."""
    for hyp in hypotheses.buggy():
        if hyp.encoding is None:
            continue
        r = regression[hyp.name]
        change = r["control_split"] / r["control_whole"] - 1
        assert abs(change) < 0.02, f"{hyp.name}: control split changed cycles by {change:+.2%}"
