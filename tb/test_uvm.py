"""pytest entry points of the pyuvm environment (tb/uvm/), per hypothesis, on the simulator `SIM`.

Each hypothesis the RTL has runs two builds, the same parameter dicts as tb/test_kdma.py (so the
builds are shared): the single-core build runs ``uvm.tests.KdmaRegressionTest``
and the 16-core build ``uvm.tests.KdmaMultiCoreTest`` (in `make test`, the readings of
tb/test_kdma.py's MULTI_MODES; every reading under KDMA_FULL=1). Each run fails on the
coverage bins it owns; this test then merges the JSON coverage files of
the hypothesis and fails on any bin all its runs missed, or any illegal bin hit.

Knobs (see tb/uvm/knobs.py): KDMA_SEED, KDMA_UVM_TRANSFERS, KDMA_UVM_KMAX,
KDMA_UVM_LINE_CHECK, KDMA_FULL. They are resolved and checked here, before a
simulator starts, and the same resolved values go to every run of the hypothesis.
Replay a run with the seed it prints: ``KDMA_SEED=<n> pytest tb/test_uvm.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from test_kdma import MODES, MULTI_CORES, MULTI_MODES, TOP, grouped, params
from uvm.covermodel import Coverage
from uvm.items import KdmaTaskItem
from uvm.knobs import ENV_COVERAGE, Knobs

from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.sim import run

BUILDS = ((1, "KdmaRegressionTest"), (MULTI_CORES, "KdmaMultiCoreTest"))


def knobs_for(sim: str, environ: Mapping[str, str] = os.environ) -> Knobs:
    """The run's knobs; an impossible value stops here, before any simulator starts."""
    return Knobs.from_env(environ, sim)


# In the xdist group of the hypothesis's 16-core build (tb/test_kdma.py's multicore cases):
# one worker builds it, and the run's longest items start with the big groups, not last. A
# reading `make test` builds at one core only (tb/test_kdma.py's MULTI_MODES) runs the
# single-core build, in that build's group, and owns its bins only (`make regress`: both).
@pytest.mark.parametrize(
    "hyp",
    grouped(MULTI_MODES, MULTI_CORES) + grouped([h for h in MODES if h not in MULTI_MODES], 1),
)
def test_uvm(sim: str, hyp: Hypothesis, tmp_path: Path) -> None:
    knobs = knobs_for(sim)
    print(f"uvm {hyp.name}: {knobs.describe()}")
    parts = []
    for cores, case in BUILDS:
        if cores > 1 and hyp not in MULTI_MODES:
            continue
        out = tmp_path / f"coverage-{hyp.name}-{cores}.json"
        env = {**knobs.to_env(), ENV_COVERAGE: str(out)}
        run(sim, TOP, params(hyp, cores), "uvm.tests", case, extra_env=env, test_dir=tmp_path)
        parts.append(out)
    cov = Coverage.load_merged(parts)
    report = cov.report()
    (tmp_path / "coverage-merged.txt").write_text(report + "\n")
    print(report)
    assert not cov.illegal_hits(), f"illegal bins hit ({knobs.describe()}):\n{report}"
    assert not cov.missed(), f"bins missed by both builds ({knobs.describe()}):\n{report}"


# ---------------------------------------------------------------------------
# Bad input: rejected with one clear line, before a simulator starts
# ---------------------------------------------------------------------------
def _item(**kw) -> KdmaTaskItem:
    args = {"base_addr": 0x1000, "size_bytes": 640, "hyp": hypotheses.get("fixed"), **kw}
    return KdmaTaskItem("bad", **args)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"size_bytes": -64}, "negative"),
        ({"size_bytes": 1 << 32}, "does not fit 32 bits"),
        ({"base_addr": 0x1010}, "not aligned to 64 bytes"),
        ({"base_addr": -64}, "not a 32-bit byte address"),
        ({"cores": 17}, "17 active cores"),
        ({"cores": 0}, "0 active cores"),
        ({"reset_at": 0}, "reset at cycle 0"),
        ({"ext_ready": True}, "give a back-pressure"),
        ({"chained": True, "cores": 2}, "core 0 alone"),
        ({"chained": True, "size_bytes": 0}, "a line at least"),
        ({"hyp": 2}, "not a hypotheses.Hypothesis"),
    ],
)
def test_item_rejects_impossible_values(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        _item(**kw)
    assert isinstance(info.value, InputError)
    assert "\n" not in str(info.value)


def test_item_checks_the_build() -> None:
    with pytest.raises(InputError, match="16 active cores on a 1-core build"):
        _item(cores=16).check_build(1, hypotheses.get("fixed"))
    with pytest.raises(InputError, match="a fixed task on a literal build"):
        _item().check_build(1, hypotheses.get("literal"))


def test_item_core_layout() -> None:
    """Core c starts at base + c * size (rounded up to lines), wrapping at 2^32."""
    item = _item(base_addr=0xFFFF_FF80, size_bytes=100, cores=3)
    assert item.core_tasks(4) == [
        cm.CoreTask(0xFFFF_FF80, 100),
        cm.CoreTask(0x0000_0000, 100),
        cm.CoreTask(0x0000_0080, 100),
        None,
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KDMA_UVM_TRANSFERS": "10"}, "coverage needs at least 66 transfers"),
        ({"KDMA_UVM_TRANSFERS": "many"}, "KDMA_UVM_TRANSFERS: not an integer"),
        ({"KDMA_UVM_KMAX": "9"}, "KDMA_UVM_KMAX=9: must be 0..8"),
        ({"KDMA_UVM_KMAX": "1", "KDMA_UVM_TRANSFERS": "16"}, "at least 17 transfers"),
        ({"KDMA_SEED": "-1"}, "KDMA_SEED=-1: must be 0.."),
        ({"KDMA_UVM_LINE_CHECK": "-5"}, "KDMA_UVM_LINE_CHECK=-5: must be 0.."),
        ({"KDMA_FULL": "yes"}, "KDMA_FULL=yes: a flag is 1, 0, true or false"),
    ],
)
def test_knobs_reject_impossible_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        knobs_for("verilator", env)


def test_knobs_defaults_and_replay() -> None:
    full = knobs_for("icarus", {"KDMA_FULL": "1", "KDMA_SEED": "7"})
    assert full.transfers >= 2000 and full.k_max == 8 and full.seed == 7
    quick = knobs_for("icarus", {})
    assert quick.k_max == 1 and quick.transfers >= 17
    again = knobs_for("verilator", {"KDMA_SEED": "0x2a"})
    assert knobs_for("verilator", again.to_env()) == again
