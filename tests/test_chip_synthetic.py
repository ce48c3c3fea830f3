"""A chip is data: a second, synthetic chip runs end to end, and bad chip data is one line.

The synthetic chip lives in a temporary folder: 8 cores, a 68.3 GB/s ceiling,
and just two measured points of its own (a notch and a shoulder), so every
command must cope with a chip that has little data. Its figures are test
inputs for the machinery, not measurements of anything.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma import calibrate
from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.cli import main

M3 = chips.chips_dir() / "m3"
SOURCE = {"title": "synthetic test chip", "cited_in": "tests/test_chip_synthetic.py"}


def _point(d: int, n: int, x: int | None, gbps: float) -> dict:
    doc = {
        "d": {"value": d, "unit": "input channels (D)"},
        "n": {"value": n, "unit": "output channels (N)"},
        "throughput": {"value": gbps, "unit": "GB/s"},
    }
    if x is not None:
        doc["x"] = {"value": x, "unit": "lines"}
    return doc


@pytest.fixture(scope="module")
def chip8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 cores, 68.3 GB/s, two points: D = 1024 (1 MiB per core, x = 0) and D = 1008 (x = -256)."""
    folder = tmp_path_factory.mktemp("chips") / "c8"
    (folder / "measured").mkdir(parents=True)
    doc = json.loads((M3 / "chip.json").read_text())
    doc.update({"name": "c8", "label": "synthetic 8-core test chip", "cores": 8})
    doc["dram_ceiling"].update({"value": 68.3, "source": SOURCE})
    (folder / "chip.json").write_text(json.dumps(doc))
    facts = {
        "dataset": "point_facts",
        "method": "ane-task",
        "source": SOURCE,
        "facts": {
            "notch_point": _point(1024, 4096, None, 9.5),
            "shoulder_point": _point(1008, 4096, -256, 24.0),
        },
    }
    (folder / "measured" / "point_facts.json").write_text(json.dumps(facts))
    return folder


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], status: int = 0) -> object:
    assert main(argv) == status, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_chip_without_a_profile_asks_for_calibrate(
    chip8: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if (chip8 / "profile.json").exists():
        pytest.skip("calibrated already (test order)")
    refuses(["predict", "--bytes-per-core", "65536", "--chip", str(chip8)], "calibrate")


# The pairs the synthetic chip's `calibrate` fits and ranks: every reading with every mechanism
# the analytic engine follows. The point is the chip (every command on data that is not the
# m3's), not the cross product: a fit without the closed form is judged by validate on the
# cycle model (a ceiling sweep of 256 sizes x 4 readings per fit, two thirds of this test's CPU
# when all 15 pairs ran), and the m3's committed ranking (tests/test_calibration.py) judges
# those already. Their fits on this chip run below (test_every_mechanism_fits_the_second_chip),
# so no mechanism goes unfitted on a chip with two points.
CLOSED_FORM_PAIRS = [
    (h.name, m.name) for h in hyps.buggy() for m in mechs.REGISTRY if m.closed_form
]


def test_second_chip_end_to_end(
    chip8: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    shared_standings: object,  # calibrate ranks its fits, validate ranks them again: once
) -> None:
    real_fit_all = calibrate.fit_all
    monkeypatch.setattr(
        calibrate, "fit_all", lambda chip, **kw: real_fit_all(chip, CLOSED_FORM_PAIRS, **kw)
    )
    cal = _json(capsys, ["calibrate", "--chip", str(chip8), "--json"])
    ranked = {(f["hypothesis"], f["mechanism"]) for f in cal["ranking"]}
    assert ranked == set(CLOSED_FORM_PAIRS) and len(cal["ranking"]) == len(CLOSED_FORM_PAIRS)
    fits = json.loads((chip8 / "fits.json").read_text())["fits"]
    assert [(f["hypothesis"], f["mechanism"]) for f in fits] == [
        (f["hypothesis"], f["mechanism"]) for f in cal["ranking"]
    ]
    prof = json.loads((chip8 / "profile.json").read_text())
    assert prof == cal["profile"] and prof["name"] == "c8" and prof["ceiling_gbps"] == 68.3
    assert "8 cores" in prof["notes"]["exactness"] and "synthetic" in prof["notes"]["source"]
    assert "constraint_floor" not in prof["notes"]  # the chip states no floor
    assert all(abs(r["rel_err"]) < 0.02 for r in cal["residuals"])  # two points, four knobs

    row = _json(
        capsys, ["predict", "--bytes-per-core", str(1 << 20), "--chip", str(chip8), "--json"]
    )
    fixed = _json(
        capsys,
        [
            "predict",
            "--bytes-per-core",
            str(1 << 20),
            "--variant",
            "fixed",
            "--chip",
            str(chip8),
            "--json",
        ],
    )
    assert row["gbps"] == pytest.approx(9.5, rel=0.02)  # its own notch point
    assert row["gbps"] < fixed["gbps"] < 68.3

    plan = _json(capsys, ["plan", "--shape", "1024x8192", "--chip", str(chip8), "--json"])
    assert plan[0]["bytes_per_core"] == 1024 * 8192 * 2 // 8 and plan[0]["affected"]

    report = _json(capsys, ["validate", "--chip", str(chip8), "--json"])
    names = {r["name"] for r in report["rows"]}
    assert "D = 1024 (x = 0), N = 4096" in names and "D = 1008 (x = -256), N = 4096" in names
    assert not any(r["dataset"] == "table_a" for r in report["rows"])  # the chip has none
    assert "cannot tell" in report["verdict"]  # two points cannot rank literal against signed
    assert report["exit_status"] == 0


@pytest.mark.parametrize(
    "mechanism", [m.name for m in mechs.REGISTRY if not m.closed_form], ids=str
)
def test_every_mechanism_fits_the_second_chip(chip8: Path, mechanism: str) -> None:
    """The mechanisms the end-to-end test leaves out of its ranking, fitted on the same two
    points (one reading each: off the notch the readings agree, and at x = 0 none has credit)."""
    chip = chips.load(str(chip8))
    cal = calibrate.fit(chip, hyps.buggy()[0].name, mechanism, jobs=1)
    assert cal.profile.mechanism == mechanism and cal.profile.name == "c8"
    assert cal.ok, [b for b in cal.bounds if not b.ok]
    assert len(cal.residuals) == 2  # the notch and the shoulder
    assert all(abs(r.rel_err) < 0.02 for r in cal.residuals), cal.residuals  # two points


def _broken(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "bad"
    shutil.copytree(M3, folder)
    edit(folder)
    return folder


def _json_edit(name: str, change):
    def edit(folder: Path) -> None:
        doc = json.loads((folder / name).read_text())
        change(doc)
        (folder / name).write_text(json.dumps(doc))

    return edit


def _text_edit(name: str, old: str, new: str):
    def edit(folder: Path) -> None:
        text = (folder / name).read_text()
        assert old in text
        (folder / name).write_text(text.replace(old, new))

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: (f / "chip.json").unlink(), "chip file missing"),
        (lambda f: (f / "chip.json").write_text("{nope"), "not valid JSON"),
        (lambda f: (f / "chip.json").write_text('{"cores": NaN}'), "not valid JSON"),
        (_json_edit("chip.json", lambda d: d.update(cores="16")), "cores: must be a whole"),
        (_json_edit("chip.json", lambda d: d.update(cores=0)), "cores: 0 is below 1"),
        (_text_edit("chip.json", '"ring_bits": 14', '"ring_bits": 1e400'), "ring_bits"),
        (_text_edit("chip.json", '"value": 102.4', '"value": 1e400'), "must be finite"),
        (_json_edit("chip.json", lambda d: d["dram_ceiling"].update(value=-1)), "positive"),
        (
            _json_edit("chip.json", lambda d: d["td"]["offsets"].update(coeff_size="0x270")),
            "past the TD",
        ),
        (_json_edit("chip.json", lambda d: d["dram_ceiling"].pop("source")), "source: missing"),
        (_json_edit("profile.json", lambda d: d.update(latency_cycles=-5)), "latency_cycles"),
        (_json_edit("profile.json", lambda d: d.update(window_lines=107.5)), "window_lines"),
        (_json_edit("profile.json", lambda d: d.update(overhead_us="73")), "overhead_us"),
        (_json_edit("profile.json", lambda d: d.update(ceiling_gbps=50.0)), "recalibrate"),
        (
            _json_edit("measured/table_a.json", lambda d: d["replicas"]["b"].pop("unit")),
            "unit: missing",
        ),
    ],
)
def test_bad_chip_data_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit, message: str
) -> None:
    folder = _broken(tmp_path, edit)
    refuses(["validate", "--engine", "analytic", "--chip", str(folder)], message, watch=[folder])


def test_unknown_chip_name(capsys: pytest.CaptureFixture[str]) -> None:
    refuses(["predict", "--bytes-per-core", "64", "--chip", "m9"], "no such chip: m9", "m3")


def test_a_fast_profile_never_reports_above_the_ceiling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-core rate of a line a cycle, short latency: 16 cores would want 128 GB/s of 102.4."""
    folder = _broken(
        tmp_path,
        _json_edit(
            "profile.json",
            # another profile: the bundled one's uncertainty (its fits) is not this one's
            lambda d: (
                d.pop("uncertainty", None),
                d.update(core_rate_q16=65536, latency_cycles=40, window_lines=512),
            ),
        ),
    )
    chip = ["--chip", str(folder)]
    ceiling = chips.load(folder).ceiling_gbps
    seen = []
    for b in (1 << 16, 1 << 20, (1 << 20) + (1 << 14), 1 << 23):
        for v in ("fixed", "signed"):
            for e in ("analytic", "model"):
                argv = ["predict", "--bytes-per-core", str(b), "--variant", v, "--engine", e]
                seen.append(_json(capsys, [*argv, *chip, "--json"])["gbps"])
    dumps = sorted(str(p) for p in (chips.data_dir() / "dumps").glob("*.txt"))
    for row in _json(capsys, ["replay", *dumps, *chip, "--json"])["dumps"]:
        seen += [v for k, v in row.items() if k.endswith("_gbps") and k != "measured_gbps"]
    doc = _json(capsys, ["sweep", "--out", str(tmp_path / "sw"), *chip, "--json"])
    seen += list(doc["max_gbps"].values())
    llm = _json(capsys, ["llm", "--model", "llama-3.2-1b", "--engine", "analytic", *chip, "--json"])
    seen += [llm["gbps_unsplit"], llm["gbps_split"]]
    assert max(seen) <= ceiling and max(seen) > 0.9 * ceiling  # the ceiling binds, and holds
