"""The RTL's immediate assertions are live on both simulators and fire (tb/cocotb_assertions.py).

The cocotb tests upset registers into illegal states and read the sticky
assert_fail_q bits; here each run's log must also hold the $error message of
every assertion the tests made fire. Verilator stops at the first $error
unless +verilator+error+limit is raised, so the runner is called directly
(ane_kdma.sim.run passes no plusargs) on the fixed single-core build that
tb/test_kdma.py also uses; a second Verilator run without the plusarg checks
that an assertion failure does end the simulation there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cocotb_tools.check_results import get_results
from cocotb_tools.runner import get_runner
from test_kdma import TOP, params

from ane_kdma import hypotheses
from ane_kdma.sim import TIMESCALE, build

TESTS = "cocotb_assertions"
# The $error text of each assertion the cocotb tests make fire (rtl/kdma_core.sv).
MESSAGES = {
    "kmem_overflow_fires": ["lines outstanding, KMem holds 1024"],
    "issued_beyond_lines_fires": ["kdma: issued 803 of 800 lines", "read beyond the end"],
    "done_early_fires": ["kdma: done with"],
    "stray_tail_fires": ["tail line drained with no current task"],
}
ERROR_LIMIT = "+verilator+error+limit+100000"


def _run(sim: str, testcase: str | None, tdir: Path, plusargs: list[str]) -> tuple[int, int]:
    build_dir = build(sim, TOP, params(hypotheses.get(hypotheses.FIXED)))
    tdir.mkdir(parents=True, exist_ok=True)
    name = testcase or "all"
    results = tdir / f"results-{name}-{os.getpid()}.xml"
    try:
        get_runner(sim).test(
            test_module=TESTS,
            testcase=testcase,
            hdl_toplevel=TOP,
            hdl_toplevel_lang="verilog",
            build_dir=str(build_dir),
            test_dir=str(tdir),
            results_xml=str(results),
            plusargs=plusargs,
            timescale=TIMESCALE,
            log_file=str(tdir / f"sim-{name}.log"),
        )
    except RuntimeError:
        # Verilator exits with status 1 once any $error was printed; the
        # results file still tells which cocotb tests passed.
        if not results.is_file():
            raise
    return get_results(results)


def test_assertions_fire(sim: str, tmp_path: Path) -> None:
    plusargs = [ERROR_LIMIT] if sim == "verilator" else []
    total, failed = _run(sim, None, tmp_path, plusargs)
    log = (tmp_path / "sim-all.log").read_text()
    assert total == 1 + len(MESSAGES) and failed == 0, f"{failed} of {total} failed; see {tmp_path}"
    for case, needles in MESSAGES.items():
        for needle in needles:
            assert needle in log, f"{case}: no '{needle}' $error in the {sim} log ({tmp_path})"
    if sim == "verilator":
        assert "Assertion failed in kdma_tb_top.u_top.g_core[0].u_core" in log


def test_verilator_stops_at_first_assertion(sim: str, tmp_path: Path) -> None:
    if sim != "verilator":
        pytest.skip("Icarus reports $error and carries on; the sticky bits catch it there")
    total, failed = _run(sim, "kmem_overflow_fires", tmp_path, [])
    log = (tmp_path / "sim-kmem_overflow_fires.log").read_text()
    assert failed == total == 1, "the simulation went on past a failed assertion"
    assert "lines outstanding, KMem holds 1024" in log and "$stop" in log
