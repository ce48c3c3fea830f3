"""Calibration: the committed profile is what `calibrate` produces, and the RTL agrees with it.

The RTL check is the one test here that needs a simulator; it is skipped, with
the reason, only when Verilator is not available.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ane_kdma import calibrate, engines, measured
from ane_kdma.errors import InputError
from ane_kdma.hw import RING_LINES, CreditMode
from ane_kdma.profile import load


@pytest.fixture(scope="module")
def cal() -> calibrate.Calibration:
    return calibrate.fit()


def test_committed_profile_is_the_fit(cal: calibrate.Calibration) -> None:
    committed, fitted = load("m3"), cal.profile
    assert committed.name == fitted.name == "m3"
    assert committed.latency_cycles == fitted.latency_cycles
    assert committed.window_lines == fitted.window_lines
    assert committed.core_rate_q16 == fitted.core_rate_q16
    assert committed.overhead_us == pytest.approx(fitted.overhead_us, abs=1e-3)
    assert committed.ns_per_cycle == fitted.ns_per_cycle == calibrate.NS_PER_CYCLE
    assert committed.ceiling_gbps == fitted.ceiling_gbps
    assert committed.notes == fitted.notes


def test_fit_is_deterministic(cal: calibrate.Calibration) -> None:
    again = calibrate.fit()
    assert again.profile == cal.profile


def test_fit_respects_the_stated_facts(cal: calibrate.Calibration) -> None:
    p = cal.profile
    assert 1 <= p.latency_cycles <= 4095 and 1 <= p.window_lines <= 1024
    assert all(b.ok for b in cal.bounds), [b for b in cal.bounds if not b.ok]
    assert cal.knee_lines_per_cycle >= cal.rate_lines_per_cycle
    assert all(abs(r.rel_err) <= 0.10 for r in cal.residuals), cal.residuals
    assert p.window_lines in cal.family
    for key in ("hand_set", "constraint_floor", "constraint_nominal", "constraint_knee"):
        assert key in p.notes
    assert "hand-set" in p.notes["hand_set"] and "ns_per_cycle" in p.notes["hand_set"]


def test_confirmed_on_the_cycle_model(cal: calibrate.Calibration) -> None:
    assert calibrate.confirm(cal)["max_cycle_diff"] == 0


def test_cli_writes_atomically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m3.json"
    args = argparse.Namespace(out=out, measured=None, json=True)
    assert calibrate.run_calibrate(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"]["latency_cycles"] == load(str(out)).latency_cycles
    assert doc["confirmed_on_cycle_model"]["max_cycle_diff"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["m3.json"]  # no temp file left
    assert out.read_text() == load("m3").to_json()


def test_human_report_prints_residuals(cal: calibrate.Calibration) -> None:
    text = calibrate.render(cal, Path("m3.json"))
    assert "fit residuals" in text and "Table A D=576" in text and "D=2048 point" in text
    assert "hand-set" in text and "tie-break" in text


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        calibrate.run_calibrate(
            argparse.Namespace(out=tmp_path / "nodir" / "p.json", measured=None, json=False)
        )
    with pytest.raises(InputError):
        calibrate.run_calibrate(argparse.Namespace(out=tmp_path, measured=None, json=False))
    with pytest.raises(InputError):
        measured.load(tmp_path)  # no datasets there
    assert list(tmp_path.iterdir()) == []


def test_bad_measured_file_is_one_line_error(tmp_path: Path) -> None:
    src = measured.MEASURED_DIR
    for name in ("table_a.json", "point_facts.json", "platform.json"):
        (tmp_path / name).write_text((src / name).read_text())
    doc = json.loads((tmp_path / "table_a.json").read_text())
    del doc["replicas"]["b"]["unit"]
    (tmp_path / "table_a.json").write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        measured.load(tmp_path)
    assert "unit" in str(err.value) and "\n" not in str(err.value)


def _verilator() -> str | None:
    from ane_kdma.sim import check_simulator

    try:
        check_simulator("verilator")
    except InputError as exc:
        return str(exc)
    return None


def test_rtl_equals_model_at_fitted_settings() -> None:
    """1 MiB per core in each mode, D = 2016, and one split pair: RTL cycles == model cycles."""
    missing = _verilator()
    if missing:
        pytest.skip(f"Verilator unavailable: {missing}")
    settings = load("m3").settings
    d2016 = int(measured.lines_per_core(2016, 4096))
    for mode in CreditMode:
        seqs = [[RING_LINES]]
        if mode is CreditMode.SIGNED:
            seqs += [[d2016], [RING_LINES // 2, RING_LINES // 2]]
        rtl = engines.cycles("rtl", mode, settings, seqs)
        model = engines.cycles("model", mode, settings, seqs)
        assert rtl == model, f"{mode.name}: RTL {rtl} != model {model} for {seqs}"
