"""pytest entry points: every cocotb test, per credit mode, on the simulator `SIM` names.

Each (simulator, parameter set) is built once (ane_kdma.sim caches builds by
content hash, under a lock shared by pytest-xdist workers); each pytest item
then starts the simulator on that build for one cocotb test.

Icarus runs this design about 30x slower than Verilator (and 16 cores far
slower still), so on Icarus the erratum regression covers laps k = 1, 2, the
random integrity sizes stop at 1 MiB (plus one forced 8 MiB transfer), the
random model-match transfers stay below 2 MiB and the 16-core tasks are 256
lines; `make regress` (KDMA_FULL=1) runs full scale on both.
"""

from __future__ import annotations

import json
import os

import pytest

from ane_kdma.fileio import locked
from ane_kdma.hw import RING_LINES, CreditMode
from ane_kdma.sim import BUILD_ROOT, RTL, TB, run

TOP = "kdma_tb_top"
MODES = list(CreditMode)
IDS = [m.name.lower() for m in MODES]


def params(mode: CreditMode, cores: int = 1) -> dict[str, int]:
    return {"CreditMode": int(mode), "NumCores": cores}


def full_scale(sim: str) -> bool:
    return sim == "verilator" or os.environ.get("KDMA_FULL") == "1"


def scale_env(sim: str) -> dict[str, str]:
    """Sizes for the simulator: full on Verilator (or KDMA_FULL=1), reduced on Icarus."""
    return {} if full_scale(sim) else {"KDMA_SCALE": "small", "KDMA_MAX_LINES": str(RING_LINES)}


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_credit_unit(sim: str, mode: CreditMode) -> None:
    """The credit unit alone, through cocotb-test's run() (the rest uses cocotb_tools.runner)."""
    from cocotb_test.simulator import run as cocotb_test_run

    build = BUILD_ROOT / "cocotb-test" / sim / f"kdma_credit-CreditMode{int(mode)}"
    with locked(build.with_suffix(".lock")):
        cocotb_test_run(
            simulator=sim,
            toplevel="kdma_credit",
            module="cocotb_credit",
            toplevel_lang="verilog",
            verilog_sources=[str(RTL / "kdma_pkg.sv"), str(RTL / "kdma_credit.sv")],
            parameters={"CreditMode": f"2'd{int(mode)}"},  # sized: -G is 32-bit otherwise
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
@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_single_core(sim: str, mode: CreditMode, case: str) -> None:
    run(sim, TOP, params(mode), "cocotb_kdma", case, extra_env=scale_env(sim))


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_multicore(sim: str, mode: CreditMode) -> None:
    run(
        sim,
        TOP,
        params(mode, 16),
        "cocotb_kdma",
        "multicore_shared_memory",
        extra_env=scale_env(sim),
    )


@pytest.fixture(scope="module")
def regression(sim: str, tmp_path_factory: pytest.TempPathFactory) -> dict[CreditMode, dict]:
    """Run the erratum regression once per build; the tests below judge its numbers."""
    laps = "1,2,3,4,5,6,7,8" if full_scale(sim) else "1,2"
    tmp = tmp_path_factory.mktemp("regression")
    res = {}
    for mode in MODES:
        out = tmp / f"{mode.name}.json"
        env = {"KDMA_LAPS": laps, "KDMA_RESULTS": str(out)}
        run(sim, TOP, params(mode), "cocotb_kdma", "erratum_regression", extra_env=env)
        res[mode] = json.loads(out.read_text())
    return res


@pytest.mark.xdist_group("regression")  # share one fixture run between the two tests
def test_erratum_regression(regression: dict[CreditMode, dict]) -> None:
    """Buggy modes throttle at every k x 0x4000; the fix and the split workaround do not."""
    res = regression
    fixed = res[CreditMode.FIXED]
    for k_str, f in fixed["laps"].items():
        k = int(k_str)
        lines = k * RING_LINES
        per = {
            key: f[key] / (lines + dx) for key, dx in (("x0", 0), ("xm256", -256), ("xp256", 256))
        }
        for side in ("xm256", "xp256"):
            assert abs(per["x0"] / per[side] - 1) < 0.01, f"fixed k={k}: notch at {side}: {per}"
        for mode in (CreditMode.LITERAL, CreditMode.SIGNED):
            b = res[mode]["laps"][k_str]
            assert b["x0"] >= 2 * f["x0"], f"{mode.name} k={k}: {b['x0']} vs fixed {f['x0']}"
            for side, dx in (("xm256", -256), ("xp256", 256)):
                ratio = (b["x0"] / lines) / (b[side] / (lines + dx))
                assert ratio >= 2, f"{mode.name} k={k}: x=0 only {ratio:.2f}x slower than {side}"
            split_err = b["split"] / f["x0"] - 1
            assert abs(split_err) < 0.05, f"{mode.name} k={k}: split {split_err:+.2%} vs fixed"


@pytest.mark.xdist_group("regression")
def test_control_split_changes_nothing(regression: dict[CreditMode, dict]) -> None:
    """On buggy hardware, splitting a task that was never in the notch gains nothing (< 2%)."""
    for mode in (CreditMode.LITERAL, CreditMode.SIGNED):
        r = regression[mode]
        change = r["control_split"] / r["control_whole"] - 1
        assert abs(change) < 0.02, f"{mode.name}: control split changed cycles by {change:+.2%}"
