"""`make waves` end to end on the simulator `SIM` names: fresh dumps against tb/waves/kdma.gtkw.

The dumps are written once per test session by the same command `make waves`
runs (python -m ane_kdma.waves), into a directory pytest-xdist workers share
under a lock, so the two workers never simulate the same transfer twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ane_kdma import chip, waves
from ane_kdma.hypotheses import Hypothesis

MODES = list(waves.DEFAULT_MODES)
IDS = [h.name for h in MODES]
CORE = "kdma_tb_top.u_top.g_core[0].u_core"
MARKER_PS = 100_000_000  # the save file's marker, mid-transfer in both dumps
GEOMETRY = chip.load().geometry


@pytest.fixture(scope="session")
def dumps(sim: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run `python -m ane_kdma.waves` once for every worker; later callers reuse the dumps."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's directory, common to all workers
    out = shared / f"waves-{sim}"
    done = out / "done.json"
    out.mkdir(parents=True, exist_ok=True)
    with open(shared / f"waves-{sim}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            cmd = [sys.executable, "-m", "ane_kdma.waves", "--sim", sim, "--out", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
            for hyp in MODES:
                assert f"gtkwave {waves.find_dump(out, hyp)} " in proc.stdout, proc.stdout
            done.write_text(json.dumps(proc.stdout))
    return {hyp.name: waves.find_dump(out, hyp) for hyp in MODES}


def test_save_file_groups() -> None:
    """The save file shows the ring in three groups, with the signals the README promises."""
    sigs = waves.save_file_signals()
    groups = {s.group for s in sigs}
    assert groups == {"task", "ring", "progress"}, groups
    leaf = {s.group + ":" + s.name.rsplit(".", 1)[1] for s in sigs}
    for want in (
        "task:start_i",
        "task:base_line_q",
        "task:lines_q",
        "ring:rd_ptr",
        "ring:end_ptr",
        "ring:distance",
        "ring:magnitude",
        "ring:credit_o",
        "ring:cap_o",
        "progress:issued_q",
        "progress:inflight_q",
        "progress:kmem_count_q",
        "progress:consumed_q",
        "progress:done_o",
    ):
        assert want in leaf, f"{want} not in {waves.SAVE_FILE.name}"


@pytest.mark.parametrize("hyp", MODES, ids=IDS)
def test_dump_has_every_saved_signal(dumps: dict[str, Path], hyp: Hypothesis) -> None:
    missing = waves.missing_signals(dumps[hyp.name])
    name = dumps[hyp.name].name
    assert not missing, f"{name} lacks what {waves.SAVE_FILE.name} names: {missing}"


@pytest.mark.parametrize("hyp", MODES, ids=IDS)
def test_dump_holds_the_whole_transfer(dumps: dict[str, Path], hyp: Hypothesis) -> None:
    """Every line issued and consumed within the dump; the credit is the hypothesis's."""
    import pywellen

    wave = pywellen.Waveform(str(dumps[hyp.name]))
    sig = {v.full_name: v.signal for v in wave.all_vars() if v.full_name.startswith(CORE)}
    g = GEOMETRY  # waves.params builds the m3 chip's geometry
    ring = g.ring_lines
    end = 1 << 62
    assert sig[f"{CORE}.u_ring.issued_q"].value_at(end) == ring
    assert sig[f"{CORE}.consumed_q"].value_at(end) == ring
    assert sig[f"{CORE}.cur_busy_q"].value_at(end) == 0
    issued = sig[f"{CORE}.u_ring.issued_q"].value_at(MARKER_PS)
    credit = sig[f"{CORE}.u_ring.u_credit.credit_o"].value_at(MARKER_PS)
    want = hyp.credit(g, 0, ring, issued)
    assert credit == want, f"{hyp.name}: credit {credit} at {issued} lines issued, formula {want}"
    assert (credit == 0) == hyp.buggy, f"{hyp.name}: credit {credit} mid-notch"


@pytest.mark.parametrize("hyp", MODES, ids=IDS)
def test_gtkwave_shows_the_save_file(
    dumps: dict[str, Path], hyp: Hypothesis, tmp_path: Path
) -> None:
    """GTKWave, headless, loads the dump with the save file and shows every signal in it."""
    reason = waves.gtkwave_available()
    if reason:
        pytest.skip(f"headless GTKWave unavailable: {reason}")
    png = tmp_path / "view.png"
    shown = waves.gtkwave_snapshot(dumps[hyp.name], png)
    assert shown == [s.spelled for s in waves.save_file_signals()]
    assert png.stat().st_size > 10_000, "screenshot looks empty"
