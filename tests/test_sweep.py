"""The sweep: files written atomically; from the CSV, a 2048 lap and no notch in the fix."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
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
        "overlay_engine": "analytic",
        "no_overlay": False,
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


# ---------------------------------------------------------------- a zoomed sweep

ZOOM = ["--d-min", "1900", "--d-max", "2200", "--d-step", "4"]


@pytest.fixture(scope="module")
def zoomed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], str]:
    from ane_kdma.cli import main

    d = tmp_path_factory.mktemp("zoom") / "out"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["sweep", *ZOOM, "--out", str(d), "--json"]) == 0
    return d, json.loads(out.getvalue()), err.getvalue()


def test_a_zoomed_sweep_does_not_call_a_visible_notch_flat(
    zoomed: tuple[Path, dict[str, object], str],
) -> None:
    _, doc, _ = zoomed
    verdict = doc["verdict"]
    assert isinstance(verdict, dict)
    for h in hyps.buggy():
        assert verdict[h.name].startswith("notch at D = 2048, "), verdict[h.name]
        assert "flat" not in verdict[h.name]
    assert verdict[hyps.FIXED] == "flat: no notch"


def test_a_zoomed_sweep_names_the_plot_it_leaves_out(
    zoomed: tuple[Path, dict[str, object], str],
) -> None:
    out, _, err = zoomed
    names = {p.name for p in out.iterdir()}
    assert "table_a.csv" not in names and "table_b.csv" in names
    lines = [line for line in err.splitlines() if not line.startswith("ane-kdma: running ")]
    assert lines == [
        "ane-kdma: table_a.* left out: the sweep (D = 1900..2200 step 4) misses Table A's "
        "D = 576, 768, ..."
    ]


def test_a_zoomed_plot_keeps_to_the_swept_range() -> None:
    sw = sweep.compute_sweep(CHIP, 1900, 2200, 4, 4096)
    fig = sweep.sweep_figure(sw, CHIP, CHIP.measured)
    (ax,) = fig.axes
    assert ax.get_xlim() == (1900, 2200)
    for line in ax.get_lines():
        x = np.asarray(line.get_xdata(), dtype=float)
        if line.get_label().startswith("measured"):
            assert x.size and np.all((x >= 1900) & (x <= 2200)), line.get_label()


def test_the_deepest_notch_of_a_full_sweep_is_at_a_lap(out: Path) -> None:
    sw = _sweep_from_csv(out)
    sp = sweep.spectrum(sw, CHIP)
    for h in hyps.buggy():
        notch = sp.notch[h.name]
        assert notch is not None and notch.d % 2048 == 0 and 0.4 < notch.depth < 0.8
        assert sp.verdict(h.name) == "dominant wavelength 2048 in D"
    assert sp.notch[hyps.FIXED] is None


def test_bands_are_validates_own_and_legends_sit_outside_the_axes(out: Path) -> None:
    from ane_kdma.validate import specs

    assert sweep.validate_band("a") == specs.TABLE_A_TOL
    assert sweep.validate_band("b") == specs.TABLE_B_TOL
    sw = _sweep_from_csv(out)
    ta = CHIP.measured.table_a
    assert ta is not None
    idx = [int(np.flatnonzero(sw.d == d)[0]) for d in ta.d]
    h = CHIP.profile.hypothesis
    fig = sweep.table_a_figure(sw, CHIP, CHIP.measured, sw.time_us[h][idx])
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert f"+-{100 * specs.TABLE_A_TOL:g}% (validate's band)" in labels
    for f in (fig, sweep.sweep_figure(sw, CHIP, CHIP.measured)):
        assert f.legends and all(ax.get_legend() is None for ax in f.axes)


def test_the_overlay_runs_on_its_own_engine_and_can_be_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sweep --engine model over 8 points pays 8 points per reading, not the overlay's 1,032."""
    from ane_kdma import runner
    from ane_kdma.cli import main

    runs: list[tuple[str, int]] = []
    real = runner.run_many

    def counted(engine: str, h: object, chip: object, loads: list[object], **kw: object) -> object:
        runs.append((engine, len(loads)))
        return real(engine, h, chip, loads, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "run_many", counted)
    narrow = ["--d-min", "2040", "--d-max", "2068", "--d-step", "4", "--engine", "model"]
    assert main(["sweep", *narrow, "--out", str(tmp_path / "a"), "--json"]) == 0
    model = sum(n for e, n in runs if e == "model")
    assert model == 8 * len(hyps.registry())
    assert sum(n for e, n in runs if e == "analytic") > 1000  # the overlay, on analytic
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"] == "model" and doc["overlay_engine"] == "analytic"

    runs.clear()
    assert main(["sweep", *narrow, "--out", str(tmp_path / "b"), "--no-overlay"]) == 0
    captured = capsys.readouterr()
    assert not any(p.name.startswith("notch_overlay") for p in (tmp_path / "b").iterdir())
    assert "notch_overlay.* left out: the overlay was not asked for" in captured.err
    assert sum(n for e, n in runs if e == "analytic") < 100  # Table B's few sizes only


@pytest.mark.parametrize(("d_max", "want"), [(4160, None), (5120, 2048.0)])
def test_no_wavelength_from_a_sweep_too_narrow_to_show_one(d_max: int, want: float | None) -> None:
    """At 2.03 laps the spectrum's best peak was 1024, a harmonic; from 2.5 laps it is the lap."""
    sw = sweep.compute_sweep(CHIP, 64, d_max, 64, 4096)
    sp = sweep.spectrum(sw, CHIP)
    for h in hyps.buggy():
        assert sp.dominant[h.name] == want
        notch = sp.notch[h.name]
        assert notch is not None and notch.d % 2048 == 0
        if want is None:
            assert sp.verdict(h.name).startswith(f"notch at D = {notch.d}, ")
