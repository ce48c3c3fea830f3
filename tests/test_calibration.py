"""Calibration: the committed profile is what `calibrate` produces, and the RTL agrees with it.

The RTL check is the one test here that needs a simulator; it is skipped, with
the reason, only when Verilator is not available.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ane_kdma import calibrate, contract
from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma.cli import calibrate as calibrate_cmd
from ane_kdma.errors import InputError
from ane_kdma.profile import load_profile

CHIP = chips.load()


@pytest.fixture(scope="module")
def cal() -> calibrate.Calibration:
    return calibrate.fit(CHIP)


def test_committed_profile_is_the_fit(cal: calibrate.Calibration) -> None:
    committed, fitted = CHIP.profile, cal.profile
    assert committed.name == fitted.name == "m3"
    assert committed.latency_cycles == fitted.latency_cycles
    assert committed.window_lines == fitted.window_lines
    assert committed.core_rate_q16 == fitted.core_rate_q16
    assert committed.overhead_us == pytest.approx(fitted.overhead_us, abs=1e-3)
    assert committed.ns_per_cycle == fitted.ns_per_cycle == CHIP.ns_per_cycle_hand_set
    assert committed.ceiling_gbps == fitted.ceiling_gbps == CHIP.ceiling_gbps
    assert committed.notes == fitted.notes


def test_fit_is_deterministic(cal: calibrate.Calibration) -> None:
    again = calibrate.fit(CHIP)
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
    assert calibrate.confirm(CHIP, cal)["max_cycle_diff"] == 0


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"chip": None, "profile": None, "json": False, "out": None, **kw})


def test_cli_writes_atomically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m3.json"
    assert calibrate_cmd.run(_args(out=out, json=True)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"]["latency_cycles"] == load_profile(out).latency_cycles
    assert doc["confirmed_on_cycle_model"]["max_cycle_diff"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["m3.json"]  # no temp file left
    assert out.read_text() == CHIP.profile.to_json()


def test_human_report_prints_residuals(cal: calibrate.Calibration) -> None:
    text = calibrate.render(cal, "m3.json")
    assert "fit residuals" in text and "Table A D=576" in text and "D=2048 point" in text
    assert "hand-set" in text and "tie-break" in text


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        calibrate_cmd.run(_args(out=tmp_path / "nodir" / "p.json"))
    with pytest.raises(InputError):
        calibrate_cmd.run(_args(out=tmp_path))
    assert list(tmp_path.iterdir()) == []


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
    lb, ring = CHIP.line_bytes, CHIP.ring_lines
    for h in hyps.in_rtl():
        loads = [contract.Workload.from_size(ring * lb, 1)]
        if h.name == hyps.DEFAULT_BUGGY:
            loads += [
                contract.Workload.from_size(16128 * lb, 1),
                contract.Workload.from_size(ring * lb, 1, 2),
            ]
        rtl = [r.counters for r in contract.run_many("rtl", h, CHIP, loads)]
        model = [r.counters for r in contract.run_many("model", h, CHIP, loads)]
        assert rtl == model, f"{h.name}: RTL {rtl} != model {model}"
