"""The probe kit: its design, `probe make`'s packages, `probe run` with the timing injected.

Core ML runs only on macOS, so `probe run` is exercised here with a timer
whose predictions come from the project's own model of a chip with hidden
parameters (ane_kdma.probe.synthetic) plus a hidden per-prediction host
overhead; everything else (the set, its manifest and packages, warm-up,
rounds, medians, the compute plan's verdict, the file and its schema) is the
code a Mac runs. The packages are built for a small chip folder (4 cores, a
2048-line ring), so a whole set is a few MiB; the m3 and m4 sets are checked
by design, without writing a gigabyte of weights.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ane_kdma import chip as chips
from ane_kdma.cli import main
from ane_kdma.cli import probe as probe_cli
from ane_kdma.errors import InputError
from ane_kdma.hw import lap_and_offset
from ane_kdma.plan import Weight, in_window
from ane_kdma.probe import build, design, manifest, runner, synthetic

M3 = chips.chips_dir() / "m3"
HIDDEN = synthetic.Hidden()


def _small_chip(folder: Path) -> Path:
    """4 cores, a 2048-line ring (128 KiB per core), a 64-line clamp: a set of a few MiB."""
    (folder / "measured").mkdir(parents=True)
    doc = json.loads((M3 / "chip.json").read_text())
    doc.update(
        name=folder.name,
        label="small test chip for the probe kit",
        cores=4,
        ring_bits=11,
        prefetch_max_lines=64,
        kmem_lines=128,
    )
    (folder / "chip.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _small_chip(tmp_path_factory.mktemp("chips") / "small")


@pytest.fixture(scope="module")
def probe_set(small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`probe make --laps 1` for the small chip, through the CLI (built once per module)."""
    pytest.importorskip("coremltools")
    out = tmp_path_factory.mktemp("sets") / "set"
    assert main(["probe", "make", "--out", str(out), "--chip", str(small), "--laps", "1"]) == 0
    return out


def _copy_set(probe_set: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "set"
    shutil.copytree(probe_set, dst)
    return dst


def _one_line(capsys: pytest.CaptureFixture[str], *parts: str) -> str:
    cap = capsys.readouterr()
    lines = cap.err.splitlines()
    assert len(lines) == 1, cap.err
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- the design


@pytest.mark.parametrize("name", ["m3", "m4"])
def test_every_probe_is_the_planners_payload_and_pins_what_it_says(name: str) -> None:
    chip = chips.load(name)
    probes = design.design(chip)
    assert len({p.name for p in probes}) == len(probes)
    assert {p.purpose for p in probes} == set(design.PURPOSES)
    ring, clamp = chip.ring_lines, chip.geometry.prefetch_max_lines
    for p in probes:
        assert p.bytes_per_core == Weight(p.cin, p.cout).bytes_per_core(chip.cores)
        assert sum(p.task_bytes) == p.bytes_per_core and len(p.task_bytes) == len(p.cin_parts)
        assert all(b % chip.line_bytes == 0 for b in p.task_bytes)
        assert (p.k, p.x) == lap_and_offset(p.bytes_per_core // chip.line_bytes, ring)
        lines = [b // chip.line_bytes for b in p.task_bytes]
        if p.purpose == "split":  # each part clear of the notch: that is what a split is for
            assert len(lines) > 1 and not any(in_window(n, chip) for n in lines)
        elif p.purpose == "control":
            assert p.k >= 1 and abs(p.x) >= clamp and not in_window(lines[0], chip)
        elif p.purpose == "v":
            assert p.k >= 1 and abs(p.x) < clamp and in_window(lines[0], chip)
    tiny = next(p for p in probes if p.purpose == "overhead")
    assert tiny.bytes_per_core == 2 * chip.line_bytes
    # the V at every lap, its floor and both shoulders; the first lap finer
    for k in range(1, design.MAX_LAPS + 1):
        xs = sorted(p.x for p in probes if p.k == k and p.purpose in ("v", "control"))
        assert 0 in xs and xs[0] <= -clamp and xs[-1] >= clamp
        assert len(xs) == (len(design.V_FIRST) if k == 1 else len(design.V_LATER))
    notch_splits = {(p.k, len(p.cin_parts)) for p in probes if p.purpose == "split" and p.x == 0}
    assert notch_splits == {(1, 2), (2, 2), (3, 2), (4, 2), (1, 4)}
    assert any(p.purpose == "split" and p.x == -clamp for p in probes)  # the control's cut


def test_the_m4_set_holds_the_published_notch_and_its_second_lap() -> None:
    """The published M4 payloads (1 MiB and 2 MiB per core; 1 MiB - 16 KiB) are all probed."""
    sizes = {p.bytes_per_core for p in design.design(chips.load("m4"))}
    assert {1_048_576, 2_097_152, 1_032_192} <= sizes


def test_laps_trims_the_set_and_is_bounded() -> None:
    chip = chips.load("m4")
    assert max(p.k for p in design.design(chip, 2)) == 2
    for bad in (0, design.MAX_LAPS + 1):
        with pytest.raises(InputError, match="--laps"):
            design.design(chip, bad)


# ---------------------------------------------------------------- probe make


def test_make_writes_the_packages_its_manifest_lists(probe_set: Path, small: Path) -> None:
    chip = chips.load(small)
    m = manifest.read(probe_set)
    assert list(m.probes) == design.design(chip, 1)
    assert (m.chip, m.cores, m.line_bytes, m.ring_lines) == ("small", 4, 64, 2048)
    files = sorted(e.name for e in probe_set.iterdir())
    assert files == sorted([manifest.MANIFEST, *(p.file for p in m.probes)])
    manifest.check_packages(probe_set, m)  # every package's convolutions are the listed ones
    doc = json.loads((probe_set / manifest.MANIFEST).read_text())
    first = doc["probes"][0]
    assert first["file"] == "tiny.mlpackage" and first["purpose"] == "overhead"
    assert first["shape"] == {"cout": 4, "cin": 64} and first["bytes_per_core"] == 128


def test_make_refuses_a_non_empty_out_and_leaves_it_alone(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["probe", "make", "--out", str(out), "--chip", str(small)]) == 2
    _one_line(capsys, "is not empty")
    assert [e.name for e in out.iterdir()] == ["keep.txt"]
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["probe", "make", "--out", str(target), "--chip", str(small)]) == 2
    _one_line(capsys, "not a folder")
    assert main(["probe", "make", "--out", str(tmp_path / "no" / "set"), "--chip", str(small)]) == 2
    _one_line(capsys, "no such folder")
    assert main(["probe", "make", "--out", str(tmp_path / "s"), "--laps", "9"]) == 2
    _one_line(capsys, "--laps 9")
    monkeypatch.chdir(tmp_path)
    assert main(["probe", "make", "--out", "-", "--chip", str(small)]) == 2
    _one_line(capsys, "--out -: probe make writes a folder")
    assert sorted(e.name for e in tmp_path.iterdir()) == ["file", "out"]


def test_make_leaves_nothing_behind_when_a_package_fails(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = build.save_package
    calls: list[str] = []

    def failing(ct: Any, probe: design.Probe, path: Path, rng: Any) -> None:
        calls.append(probe.name)
        if len(calls) == 3:
            raise InputError(f"{probe.name}: disk full (simulated)")
        real(ct, probe, path, rng)

    monkeypatch.setattr(build, "save_package", failing)
    out = tmp_path / "out"
    out.mkdir()  # an empty OUT is taken, and must still be there, empty, after a failure
    assert main(["probe", "make", "--out", str(out), "--chip", str(small), "--laps", "1"]) == 2
    _one_line(capsys, "disk full (simulated)")
    assert len(calls) == 3
    assert [e.name for e in tmp_path.iterdir()] == ["out"] and not any(out.iterdir())


# ---------------------------------------------------------------- the manifest against the set


def _edit_manifest(folder: Path, edit: Any) -> None:
    path = folder / manifest.MANIFEST
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _as_rise_1of4(d: dict[str, Any]) -> None:
    """rise_1of8's entry made self-consistent for 512 x 128: its package still holds 512 x 64."""
    p = d["probes"][1]
    p["shape"]["cin"], p["cin_parts"] = 128, [128]
    p["bytes_per_core"], p["task_bytes_per_core"], p["x"] = 32768, [32768], 512


BAD_SETS = [
    (
        lambda f: _edit_manifest(f, _as_rise_1of4),
        "probes[1].file",
        "holds convolutions 512x64 (Cout x Cin), the manifest lists 512x128",
    ),
    (lambda f: shutil.rmtree(f / "k1_x+0.mlpackage"), "probes[8].file", "not in the folder"),
    (
        lambda f: shutil.copytree(f / "tiny.mlpackage", f / "other.mlpackage"),
        "probes",
        "other.mlpackage is in the folder but not listed",
    ),
    (
        lambda f: _edit_manifest(f, lambda d: d["probes"][0].pop("purpose")),
        "probes[0].purpose",
        "missing",
    ),
    (
        lambda f: _edit_manifest(f, lambda d: d["probes"][2].update(bytes_per_core="x")),
        "probes[2].bytes_per_core",
        "must be a whole number",
    ),
    (
        lambda f: _edit_manifest(f, lambda d: d["probes"][13]["cin_parts"].append(1)),
        "probes[13].cin_parts",
        "add up to Cin",
    ),
    (lambda f: (f / manifest.MANIFEST).unlink(), "manifest", "missing"),
    (
        lambda f: _edit_manifest(
            f,
            lambda d: d["probes"][14].update(task_bytes_per_core=[65536, 32768, 16384, 16384]),
        ),
        "probes[14].task_bytes_per_core[0]",
        "512 x 128 fp16 is 32768 B per core on 4 cores",
    ),
    (
        lambda f: _edit_manifest(f, lambda d: d["probes"][8].update(x=8)),
        "probes[8].x",
        "k, x = 1, 8",
    ),
]


@pytest.mark.parametrize(("break_it", "field", "why"), BAD_SETS)
@pytest.mark.parametrize("command", ["run", "show"])
def test_a_set_that_does_not_match_its_manifest_is_one_line(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    break_it: Any,
    field: str,
    why: str,
) -> None:
    folder = _copy_set(probe_set, tmp_path)
    break_it(folder)
    _inject(monkeypatch, small)
    assert main(["probe", command, str(folder), "--chip", str(small)]) == 2
    _one_line(capsys, field, why)
    assert not (folder / "measured").exists()


# ---------------------------------------------------------------- probe run, timer injected


def _hidden(small: Path) -> chips.Chip:
    base = chips.load(small, profile="m3")  # the m3's fit, on the small chip's geometry
    return synthetic.hidden_chip(base, HIDDEN)


def _inject(monkeypatch: pytest.MonkeyPatch, small: Path, **kw: Any) -> synthetic.ModelTimer:
    timer = synthetic.ModelTimer(_hidden(small), HIDDEN, **kw)
    monkeypatch.setattr(probe_cli, "timer_for", lambda: timer)
    return timer


def test_run_refuses_off_macos_in_one_line_and_writes_nothing(
    probe_set: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_cli.sys, "platform", "linux")
    assert main(["probe", "run", str(probe_set)]) == 2
    _one_line(capsys, "only macOS", "linux")
    assert not (probe_set / "measured").exists()


RUN = ["--rounds", "3", "--per-round", "20", "--warmup", "2"]


def test_run_writes_timings_the_loader_reads_with_the_hidden_chips_times(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = _copy_set(probe_set, tmp_path)
    timer = _inject(monkeypatch, small, seed=7)
    assert main(["probe", "run", str(folder), "--chip", str(small), *RUN]) == 0
    capsys.readouterr()
    # the run folder's measured/ in a chip folder: the loader every command uses accepts it
    chip_dir = tmp_path / "mine"
    shutil.copytree(small, chip_dir)
    shutil.copy(folder / "measured" / "timings.json", chip_dir / "measured")
    loaded = chips.load(chip_dir)
    t = loaded.measured.timings
    assert t is not None and loaded.measured.methods == {"timings.json": "coreml-predict"}
    m = manifest.read(folder)
    assert [r.name for r in t.rows] == [p.name for p in m.probes] == timer.loaded
    assert t.conditions["os"].startswith("synthetic") and t.conditions["chip"].startswith("synth")
    assert t.conditions["rounds"] == "3" and t.conditions["predictions_per_round"] == "20"
    assert t.conditions["compute_plan"] == "checked"
    for p, r in zip(m.probes, t.rows, strict=True):
        assert (r.cout, r.cin, r.task_bytes, r.bytes_per_core) == (
            p.cout,
            p.cin,
            p.task_bytes,
            p.bytes_per_core,
        )
        assert len(r.samples) == 3 and all(len(s) == 20 for s in r.samples)
        assert r.rounds == tuple(sorted(s)[9:11][0] / 2 + sorted(s)[9:11][1] / 2 for s in r.samples)
        assert sorted(r.rounds)[1] == r.time.value  # the median of the round medians
        # the hidden truth: model time plus host overhead; 1% noise, a median of 20 (3 sigma)
        truth = timer.task_us(p) + HIDDEN.host_us
        assert r.time.value == pytest.approx(truth, rel=3 * HIDDEN.noise * 1.2533 / 20**0.5)


def test_without_noise_the_kit_reports_the_hidden_times_exactly(
    probe_set: Path, small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measuring half of the closed loop: hidden chip in, its exact times out, notch and all."""
    folder = _copy_set(probe_set, tmp_path)
    hidden = replace(HIDDEN, noise=0.0)
    chip = synthetic.hidden_chip(chips.load(small, profile="m3"), hidden)
    timer = synthetic.ModelTimer(chip, hidden, engine="model")
    m = manifest.read(folder)
    out = runner.run(folder, m, chip, timer, runner.Plan(2, 3, 1))
    got = {r["name"]: r["time"]["value"] for r in out.doc["rows"]}
    for p in m.probes:
        assert got[p.name] == timer.task_us(p) + hidden.host_us
    # what the set is for: the notch is there, and the split takes it out
    task = {name: t - hidden.host_us for name, t in got.items()}
    assert task["k1_x+0"] > 1.5 * task["k1_x-64"]
    assert task["k1_x+0_split2"] < 0.75 * task["k1_x+0"]
    assert task["tiny"] < task["rise_1of8"] < task["rise_1of4"]


def test_a_probe_off_the_neural_engine_is_refused(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = _copy_set(probe_set, tmp_path)
    _inject(monkeypatch, small, off_ne=frozenset({"k1_x+8"}))
    assert main(["probe", "run", str(folder), "--chip", str(small), *RUN, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["refused"] == {"k1_x+8": "conv_0 on MLCPUComputeDevice"}
    doc = json.loads((folder / "measured" / "timings.json").read_text())
    assert "k1_x+8" not in [r["name"] for r in doc["rows"]]
    assert doc["conditions"]["refused"] == "k1_x+8 (conv_0 on MLCPUComputeDevice)"
    assert main(["probe", "show", str(folder), "--chip", str(small), "--json"]) == 0
    shown = {r["name"]: r for r in json.loads(capsys.readouterr().out)["probes"]}
    assert "time_us" not in shown["k1_x+8"] and "time_us" in shown["k1_x+0"]


def test_without_a_compute_plan_the_run_says_devices_were_not_checked(
    probe_set: Path, small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _copy_set(probe_set, tmp_path)
    _inject(monkeypatch, small, no_plan=True)
    assert main(["probe", "run", str(folder), "--chip", str(small), *RUN, "--json"]) == 0
    doc = json.loads((folder / "measured" / "timings.json").read_text())
    assert doc["conditions"]["compute_plan"] == "not available: devices not checked"
    assert all("devices" not in r for r in doc["rows"])


def test_run_never_overwrites_a_measurement(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = _copy_set(probe_set, tmp_path)
    (folder / "measured").mkdir()
    (folder / "measured" / "timings.json").write_text("{}")
    timer = _inject(monkeypatch, small)
    assert main(["probe", "run", str(folder), "--chip", str(small), *RUN]) == 2
    _one_line(capsys, "exists", "does not overwrite")
    assert timer.loaded == [] and (folder / "measured" / "timings.json").read_text() == "{}"


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--rounds", "0"], "must be positive"),
        (["--per-round", "20000"], "--per-round 20000"),
        (["--warmup", "-1"], "--warmup -1"),
        (["--rounds", "64", "--per-round", "200"], "would not fit a data file"),
    ],
)
def test_run_counts_are_bounded(
    probe_set: Path,
    small: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    why: str,
) -> None:
    _inject(monkeypatch, small)
    assert main(["probe", "run", str(probe_set), "--chip", str(small), *argv]) == 2
    _one_line(capsys, why)
    assert not (probe_set / "measured").exists()


def test_a_timer_that_gives_no_time_is_one_line(
    probe_set: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = _copy_set(probe_set, tmp_path)
    timer = _inject(monkeypatch, small)
    monkeypatch.setattr(synthetic._ModelSession, "predict_us", lambda self: float("nan"))
    assert main(["probe", "run", str(folder), "--chip", str(small), *RUN]) == 2
    _one_line(capsys, "tiny: the timer gave nan")
    assert timer.loaded == ["tiny"] and not (folder / "measured").exists()


# ---------------------------------------------------------------- a run folder read back


@pytest.fixture(scope="module")
def run_folder(probe_set: Path, small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = _copy_set(probe_set, tmp_path_factory.mktemp("run"))
    chip = _hidden(small)
    timer = synthetic.ModelTimer(chip, HIDDEN)
    m = manifest.read(folder)
    runner.write(folder, runner.run(folder, m, chip, timer, runner.Plan(2, 5, 0)))
    return folder


def _edit_timings(folder: Path, edit: Any) -> None:
    path = folder / "measured" / "timings.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


BAD_RUNS = [
    (lambda d: d["rows"][3]["time"].update(value="fast"), "rows[3].time.value", "must be a number"),
    (lambda d: d["rows"][3]["time"].pop("value"), "rows[3].time.value", "missing"),
    (
        lambda d: d["rows"][0]["samples"]["rounds"][1].__setitem__(2, None),
        "rows[0].samples.rounds[1][2]",
        "must be a number",
    ),
    (lambda d: d.pop("method"), "method", "missing"),
    (lambda d: d["rows"].pop(5), "rows", "no timing for probe k1_x-32"),
    (lambda d: d["rows"][2].update(name="rise_1of3"), "rows[2].name", "not a probe"),
    (
        lambda d: d["rows"][13]["task_bytes_per_core"].update(values=[131072]),
        "rows[13].cin_parts",
        "one per task (1), each positive, adding up to Cin = 512",
    ),
    (  # self-consistent, but not the probe the manifest lists: the unsplit weight
        lambda d: (
            d["rows"][13].pop("cin_parts"),
            d["rows"][13]["task_bytes_per_core"].update(values=[131072]),
        ),
        "rows[13].shape",
        "in 1 parts",
    ),
]


@pytest.mark.parametrize(("edit", "field", "why"), BAD_RUNS)
def test_a_bad_run_folder_is_one_line_naming_file_and_field(
    run_folder: Path,
    small: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Any,
    field: str,
    why: str,
) -> None:
    folder = _copy_set(run_folder, tmp_path)
    _edit_timings(folder, edit)
    before = sorted(os.listdir(folder / "measured"))
    assert main(["probe", "show", str(folder), "--chip", str(small)]) == 2
    _one_line(capsys, "timings.json", field, why)
    assert capsys.readouterr().out == ""
    assert sorted(os.listdir(folder / "measured")) == before


def test_show_prints_each_probe_with_its_time_and_rate(
    run_folder: Path, small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", "show", str(run_folder), "--chip", str(small), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["probes"]
    doc = json.loads((run_folder / "measured" / "timings.json").read_text())
    times = {r["name"]: r["time"]["value"] for r in doc["rows"]}
    for r in rows:
        assert r["time_us"] == times[r["name"]]
        assert r["gbps"] == round(4 * r["bytes_per_core"] / (r["time_us"] * 1e3), 2)
    assert main(["probe", "show", str(run_folder), "--chip", str(small)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == [
        "name",
        "cout_x_cin",
        "parts",
        "bytes_per_core",
        "k",
        "x",
        "purpose",
        "time_us",
        "gbps",
    ]
    assert len(text) == 1 + len(rows)


# ---------------------------------------------------------------- the Core ML timer, faked


class MLNeuralEngineComputeDevice:
    """Named as coremltools' device classes are: the runner reads the class name."""


class MLCPUComputeDevice:
    pass


class _FakeModel:
    """Core ML's MLModel as the runner uses it: loaded with compute units, predict, compiled."""

    def __init__(self, path: str, compute_units: Any) -> None:
        if Path(path).name == "k1_x+8.mlpackage":
            raise RuntimeError("Error compiling model: (simulated)\nsecond line")
        self.path, self.compute_units, self.calls = path, compute_units, 0

    def predict(self, data: dict[str, Any]) -> dict[str, Any]:
        assert list(data) == ["x"] and data["x"].dtype.name == "float16"
        self.calls += 1
        return {}

    def get_compiled_model_path(self) -> str:
        return self.path + "c"


def _fake_ct(tmp: Path) -> Any:
    from types import SimpleNamespace

    ct = build.coremltools()
    return SimpleNamespace(
        models=SimpleNamespace(MLModel=_FakeModel), ComputeUnit=ct.ComputeUnit, __version__="x"
    )


def _fake_plan(device: type) -> Any:
    from types import SimpleNamespace

    def op(kind: str, name: str) -> Any:
        return SimpleNamespace(operator_name=kind, outputs=[SimpleNamespace(name=name)])

    ops = [op("slice_by_size", "in_0"), op("conv", "probe_conv_0"), op("add", "sum_1")]
    program = SimpleNamespace(
        functions={"main": SimpleNamespace(block=SimpleNamespace(operations=ops))}
    )

    class Plan:
        model_structure = SimpleNamespace(program=program)
        loaded: list[tuple[str, Any]] = []

        @classmethod
        def load_from_path(cls, path: str, compute_units: Any) -> Any:
            cls.loaded.append((path, compute_units))
            return cls()

        def get_compute_device_usage_for_mlprogram_operation(self, o: Any) -> Any:
            return SimpleNamespace(preferred_compute_device=device())

    return Plan


@pytest.mark.parametrize("device", [MLNeuralEngineComputeDevice, MLCPUComputeDevice])
def test_the_coreml_timer_loads_with_the_neural_engine_and_reads_the_compute_plan(
    probe_set: Path, small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: type
) -> None:
    from coremltools.models import compute_plan

    plan = _fake_plan(device)
    monkeypatch.setattr(compute_plan, "MLComputePlan", plan)
    ct = _fake_ct(tmp_path)
    timer = runner.CoreMLTimer(ct)
    p = manifest.read(probe_set).probes[0]
    session = timer.load(probe_set / p.file, p)
    assert session.model.compute_units == ct.ComputeUnit.CPU_AND_NE  # type: ignore[attr-defined]
    assert session.predict_us() > 0 and session.model.calls == 1  # type: ignore[attr-defined]
    assert session.devices() == {"probe_conv_0": device.__name__}  # the conv only
    assert plan.loaded == [(str(probe_set / p.file) + "c", ct.ComputeUnit.CPU_AND_NE)]
    assert runner._off_ne(session.devices()) == (
        None if device is MLNeuralEngineComputeDevice else "probe_conv_0 on MLCPUComputeDevice"
    )
    about = timer.describe()
    assert set(about) == {"os", "chip", "machine", "coremltools"} and about["coremltools"] == "x"


def test_a_package_core_ml_cannot_load_is_one_line(
    probe_set: Path,
    small: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from coremltools.models import compute_plan

    monkeypatch.setattr(compute_plan, "MLComputePlan", _fake_plan(MLNeuralEngineComputeDevice))
    monkeypatch.setattr(probe_cli, "timer_for", lambda: runner.CoreMLTimer(_fake_ct(tmp_path)))
    folder = _copy_set(probe_set, tmp_path)
    assert main(["probe", "run", str(folder), "--chip", str(small), *RUN]) == 2
    _one_line(capsys, "k1_x+8.mlpackage: Core ML cannot load it", "RuntimeError", "(simulated)")
    assert not (folder / "measured").exists()


def test_patch_on_m4_names_its_chip(probe_set: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`patch --chip m4` (a probe package as its input) plans on the M4 profile and says so."""
    assert (
        main(
            [
                "patch",
                str(probe_set / "k1_x+0.mlpackage"),
                "--dry-run",
                "--chip",
                "m4",
                "--engine",
                "analytic",
            ]
        )
        == 0
    )
    assert "chip m4" in capsys.readouterr().out


def test_the_hidden_chip_measured_through_the_kit_is_a_chip_folder_awaiting_its_fit(
    probe_set: Path, small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The closed loop's measuring half: what the calibrate-from-a-prior fit will start from."""
    base = chips.load(small, profile="m3")
    out = tmp_path / "syn"
    synthetic.measure(probe_set, base, HIDDEN, out, runner.Plan(2, 5, 0), seed=3)
    chip = chips.load(out)
    assert chip.name == "syn" and chip.fitted is None
    assert (chip.cores, chip.ring_lines, chip.ceiling_gbps) == (4, 2048, base.ceiling_gbps)
    t = chip.measured.timings
    assert t is not None and [r.name for r in t.rows] == [p.name for p in design.design(base, 1)]
    truth = synthetic.ModelTimer(synthetic.hidden_chip(base, HIDDEN), HIDDEN)
    for p, r in zip(design.design(base, 1), t.rows, strict=True):
        expect = truth.task_us(p) + HIDDEN.host_us  # 1% noise, a median of 5 (4 sigma)
        assert r.time.value == pytest.approx(expect, rel=4 * HIDDEN.noise * 1.2533 / 5**0.5)
    assert main(["predict", "--bytes-per-core", "65536", "--chip", str(out)]) == 2
    _one_line(capsys, "chip syn has no profile.json yet")
    with pytest.raises(InputError, match="not empty"):
        synthetic.measure(probe_set, base, HIDDEN, out)


def test_the_largest_run_allowed_still_fits_a_data_file(
    probe_set: Path, small: Path, tmp_path: Path
) -> None:
    """The sample budget (runner.SAMPLE_BYTES) keeps timings.json under the loader's size cap."""
    from ane_kdma.measured import DATASETS
    from ane_kdma.schema import MAX_DATA_BYTES, Doc

    folder = _copy_set(probe_set, tmp_path)
    m = manifest.read(folder)
    per_probe = MAX_DATA_BYTES // runner.SAMPLE_BYTES // len(m.probes)
    plan = runner.Plan(2, per_probe // 2, 0)
    chip = _hidden(small)
    path = runner.write(
        folder, runner.run(folder, m, chip, synthetic.ModelTimer(chip, HIDDEN), plan)
    )
    assert 0.5 * MAX_DATA_BYTES < path.stat().st_size <= MAX_DATA_BYTES
    t = DATASETS["timings.json"](Doc.load(path, "timings file"), chip)
    assert all(len(r.samples) == 2 and len(r.samples[1]) == per_probe // 2 for r in t.rows)
    with pytest.raises(InputError, match="would not fit a data file"):
        runner.run(folder, m, chip, synthetic.ModelTimer(chip, HIDDEN), replace(plan, rounds=3))


def test_closed_loop_the_kit_s_output_calibrated_predicts_the_hidden_chip(
    probe_set: Path, small: Path, tmp_path: Path
) -> None:
    """The closed loop's fitting half: a hidden chip measured through the kit (one lap), then
    `calibrate --prior m3` on the kit's output alone, predicts the hidden chip within 3% at
    sizes the kit did not measure (the second and third laps, offsets between its points).

    The hidden chip differs from the prior where --prior fits (the demand window, the host's
    per-call cost); its latency and rate are the prior's, which --prior keeps (docs/chips.md)."""
    from ane_kdma import contract
    from ane_kdma.contract import Workload

    base = chips.load(small, profile="m3")
    p = base.profile
    hidden = synthetic.Hidden(
        overhead_us=p.overhead_us,
        latency_cycles=p.latency_cycles,
        window_lines=60,
        core_rate_q16=p.core_rate_q16,
        host_us=95.0,
    )
    out = tmp_path / "syn"
    synthetic.measure(probe_set, base, hidden, out, runner.Plan(2, 5, 0), seed=3)
    assert main(["calibrate", "--chip", str(out), "--prior", "m3"]) == 0
    fitted = chips.load(out)
    prof = fitted.profile
    assert prof.uncertainty is not None
    lo, hi = prof.uncertainty.intervals["window_lines"]
    assert lo <= hidden.window_lines <= hi
    truth = synthetic.hidden_chip(base, hidden)
    ring, lb = base.ring_lines, base.line_bytes
    measured = {r.bytes_per_core // lb for r in fitted.measured.timings.rows}  # type: ignore[union-attr]
    sizes = [ring - 48, ring - 24, ring + 24, ring + 48, 3 * ring // 4]
    sizes += [2 * ring + x for x in (-64, -16, 0, 16, 64)] + [3 * ring, 3 * ring + 32]
    assert not measured & set(sizes)
    for lines in sizes:
        w = Workload.from_size(lines * lb, base.cores, 1, lb)
        want = contract.run("analytic", truth.hypothesis, truth, w).time_us + hidden.host_us
        got = contract.run("analytic", fitted.hypothesis, fitted, w).time_us
        got += prof.predict_overhead_us
        assert got == pytest.approx(want, rel=0.03), lines
