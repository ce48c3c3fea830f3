"""The sweep: files written atomically; from the CSV, a 2048 lap and no notch in the fix."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import sweep
from ane_kdma.cli import sweep as sweep_cmd
from ane_kdma.errors import InputError

CHIP = chips.load()
# one worker: the golden `sweep` (tests/test_cli_golden.py) is this module's sweep, and the analytic
# engine's page patterns it computes are cached per process
pytestmark = pytest.mark.xdist_group("sweep")

FILES = {
    "sweep.csv",
    "spectrum.csv",
    "notch_overlay.csv",
    "sweep_gbps.png",
    "sweep_fft.png",
    "notch_overlay.png",
    "table_a.csv",
    "table_a.png",
    "table_b.csv",
    "table_b.png",
}


def _args(out: Path, **kw: object) -> argparse.Namespace:
    base = {
        "out": out,
        "engine": "analytic",
        "d_min": 64,
        "d_max": 16384,
        "d_step": 64,
        "n": 4096,
        "chip": None,
        "profile": None,
        "json": True,
        "jobs": 1,
    }
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sweep") / "out"
    assert sweep_cmd.run(_args(d)) == 0
    return d


def _read(path: Path) -> dict[str, np.ndarray]:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def test_files_written(out: Path) -> None:
    assert {p.name for p in out.iterdir()} == FILES  # and no temp files
    for name in FILES:
        data = (out / name).read_bytes()
        assert data
        if name.endswith(".png"):
            assert data[:8] == b"\x89PNG\r\n\x1a\n"


def _sweep_from_csv(out: Path) -> sweep.Sweep:
    t = _read(out / "sweep.csv")
    names = hyps.names()
    return sweep.Sweep(
        d=t["d"].astype(np.int64),
        n=int(t["n"][0]),
        lines=t["lines_per_core"].astype(np.int64),
        bytes_per_core=t["bytes_per_core"].astype(np.int64),
        time_us={m: t[f"{m}_time_us"] for m in names},
        gbps={m: t[f"{m}_gbps"] for m in names},
        engine="csv",
        ring_lines=CHIP.ring_lines,
    )


def test_dominant_wavelength_is_one_lap(out: Path) -> None:
    """From the data, not the image: the buggy sweep repeats every 2048 in D at N = 4096."""
    sw = _sweep_from_csv(out)
    assert sw.d[0] == 64 and sw.d[-1] == 16384 and sw.n == 4096
    spec = sweep.spectrum(sw, CHIP)
    assert spec.dominant["signed"] == pytest.approx(2048)
    assert spec.dominant["literal"] == pytest.approx(2048)


def test_fixed_has_no_notch(out: Path) -> None:
    sw = _sweep_from_csv(out)
    fixed, signed = sw.gbps["fixed"], sw.gbps["signed"]
    assert np.all(np.diff(fixed) >= -1e-3)  # rises with size, never dips
    step = int(sw.d[1] - sw.d[0])
    assert np.allclose(sweep.notch_signal(fixed, step, sw.n, 256, 64, 16), 0.0, atol=1e-3)
    assert sweep.spectrum(sw, CHIP).dominant["fixed"] is None
    laps = sw.d % 2048 == 0
    assert np.all(signed[laps] < 19.5) and np.all(fixed[laps] > 40)


def test_overlay_laps_lie_on_one_another(out: Path) -> None:
    """Re-centred on its notch, each lap's V has the same slope per lap (erratum.md section 2).

    Within validate's band for the slope (15%): the fix's governor ramp makes the
    first lap's shoulders slower, so the laps agree on the V's slope, not to the µs.
    """
    t = _read(out / "notch_overlay.csv")
    k = t["k"].astype(int)
    x = t["x_lines"][k == 1]
    near = np.abs(x) <= 128
    for name in [h.name for h in hyps.buggy()]:  # excess: buggy time minus the fix's
        assert np.allclose(
            t[f"{name}_excess_us"], t[f"{name}_time_us"] - t["fixed_time_us"], atol=2e-3
        ), name
    h = CHIP.hypothesis.name
    slopes = []
    for lap in range(1, 9):
        time = t[f"{h}_time_us"][k == lap]
        slopes.append(np.polyfit(np.abs(x[near]), time[near], 1)[0] / lap)
    assert max(slopes) < 0 and np.ptp(slopes) <= 0.15 * np.max(np.abs(slopes)), slopes
    lit = t["literal_excess_us"][k == 1]
    assert np.all(np.abs(lit[(x < 0)]) < 10)  # literal: nothing lost left of the notch


def test_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_cmd.run(_args(tmp_path / "o", d_min=128, d_max=8192, d_step=128))
    doc = json.loads(capsys.readouterr().out)
    assert doc["dominant_wavelength_d"]["signed"] == pytest.approx(2048)
    assert doc["dominant_wavelength_d"]["fixed"] is None


@pytest.mark.parametrize(
    "kw",
    [
        {"d_min": 0},
        {"d_max": 10},
        {"d_step": 0},
        {"n": 100},
        {"d_min": 64, "d_max": 128},
        {"engine": "spice"},
        {"d_max": 1 << 24},
    ],
)
def test_bad_input(tmp_path: Path, kw: dict[str, int]) -> None:
    with pytest.raises(InputError):
        sweep_cmd.run(_args(tmp_path / "o", **kw))
    assert not (tmp_path / "o").exists()


def test_out_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(InputError):
        sweep_cmd.run(_args(target, d_max=4096))
    assert target.read_text() == "x"


def test_compute_sweep_profile() -> None:
    sw = sweep.compute_sweep(CHIP, 1024, 4096, 32, 4096)
    assert sw.lines[0] == 8 * 1024 and set(sw.gbps) == set(hyps.names())
