"""The measured schema says how each figure was measured, and the M4's three figures load exactly.

An ANE task time (the article's tables) and a Core ML prediction timed from
the host (the M4's published figures, the probe kit's output) are different
quantities: the second has the framework's per-call overhead in it. So every
measured file names its method, and a file that does not is refused in one
line naming the file and the field, exit status 2, by every command.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ane_kdma import chip as chips
from ane_kdma import measured
from ane_kdma.cli import main

M3 = chips.chips_dir() / "m3"
M4 = chips.chips_dir() / "m4"
BUNDLED = sorted(chips.chips_dir().glob("*/measured/*.json"))


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_bundled_measured_file_names_its_method(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert doc["method"] in measured.METHODS
    # the article's tables and facts are task times; only platform figures and M4 are predicts
    article = path.parent.parent.name == "m3" and path.name != "platform.json"
    assert doc["method"] == ("ane-task" if article else "coreml-predict")


def test_the_loader_keeps_each_files_method() -> None:
    m3 = chips.load("m3").measured
    assert m3.methods == {
        "table_a.json": "ane-task",
        "point_facts.json": "ane-task",
        "platform.json": "coreml-predict",
        "table_b.json": "ane-task",
        "table_c.json": "ane-task",
    }
    assert chips.load("m4").measured.methods == {"timings.json": "coreml-predict"}


def test_m4_holds_exactly_the_three_published_figures() -> None:
    chip = chips.load("m4")
    assert chip.cores == 16 and chip.ceiling_gbps == 120.0
    assert sorted(p.name for p in (M4 / "measured").iterdir()) == ["README.md", "timings.json"]
    t = chip.measured.timings
    assert t is not None and t.method == "coreml-predict"
    got = [(r.cout, r.cin, r.dtype, r.bytes_per_core, r.task_bytes, r.time.value) for r in t.rows]
    assert got == [
        (2016, 4096, "fp16", 1_032_192, (1_032_192,), 426.0),
        (2048, 4096, "fp16", 1_048_576, (1_048_576,), 840.0),
        (4096, 4096, "fp16", 2_097_152, (2_097_152,), 1142.0),
    ]
    for r in t.rows:
        assert (r.time.unit, r.time.qualifier) == ("us", "median")
        assert "stablehlo-coreml" in r.time.source.title  # type: ignore[union-attr]
        assert r.time.source.where.endswith("stablehlo-coreml/pull/110")  # type: ignore[union-attr]
        assert r.rounds == () and r.samples == ()  # the source gives medians only
    assert t.conditions["machine"] == "Mac mini M4"
    assert t.conditions["statistic"] == "median of 3 rounds x 200 Core ML predictions"
    # none of the article's datasets: the M4 has only what the issue gives
    m = chip.measured
    assert not m.has("table_a") and not m.has("table_b") and not m.has("platform")


def test_m4_bytes_per_core_are_the_planners() -> None:
    """The published per-core sizes are what plan computes for Cin x Cout on 16 cores."""
    from ane_kdma.plan import Weight

    chip = chips.load("m4")
    for r in chip.measured.timings.rows:  # type: ignore[union-attr]
        assert Weight(r.cin, r.cout).bytes_per_core(chip.cores) == r.bytes_per_core


# ---------------------------------------------------------------- refusals


def _copy(tmp_path: Path, src: Path, file: str, edit: Callable[[dict[str, Any]], object]) -> Path:
    folder = tmp_path / src.name
    shutil.copytree(src, folder)
    (folder / "profile.json").unlink(missing_ok=True)  # profile-free: only the data is judged
    path = folder / "measured" / file
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return folder


def _refused(capsys: pytest.CaptureFixture[str], folder: Path, *parts: str) -> str:
    assert main(["predict", "--bytes-per-core", "65536", "--chip", str(folder)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.splitlines()
    assert len(lines) == 1, cap.err
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("file", ["table_a.json", "point_facts.json", "platform.json"])
def test_a_file_without_a_method_is_one_line_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    folder = _copy(tmp_path, M3, file, lambda d: d.pop("method"))
    line = _refused(capsys, folder, file, "method", "missing")
    assert "ane-task" in line and "coreml-predict" in line  # says what it may be


@pytest.mark.parametrize("value", ["guessed", 3, None, ""])
def test_an_unknown_method_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    folder = _copy(tmp_path, M4, "timings.json", lambda d: d.update(method=value))
    _refused(capsys, folder, "timings.json", "method", "is not one of")


def _row(i: int, edit: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
    return lambda d: edit(d["rows"][i])


BAD_ROWS = [
    (  # the per-core size disagrees with Cout x Cin on the chip's cores
        _row(1, lambda r: r["bytes_per_core"].update(value=1_032_192)),
        "rows[1].bytes_per_core.value",
        "2048 x 4096 fp16 is 1048576 B per core",
    ),
    (  # parts that do not add up to the weight
        _row(0, lambda r: r["task_bytes_per_core"].update(values=[516_096, 1024])),
        "rows[0].task_bytes_per_core.values",
        "add up to",
    ),
    (  # a part that is not whole lines
        _row(0, lambda r: r["task_bytes_per_core"].update(values=[516_000, 516_192])),
        "rows[0].task_bytes_per_core.values[0]",
        "whole 64-B lines",
    ),
    (_row(2, lambda r: r["time"].update(value="1142")), "rows[2].time.value", "must be a number"),
    (_row(2, lambda r: r["time"].pop("value")), "rows[2].time.value", "missing"),
    (_row(2, lambda r: r["time"].update(unit="ms")), "rows[2].time.unit", "expected 'us'"),
    (  # faster than 120 GB/s allows for 16 x 2 MiB
        _row(2, lambda r: r["time"].update(value=100)),
        "rows[2].time.value",
        "outside",
    ),
    (_row(0, lambda r: r.update(dtype="fp8")), "rows[0].dtype", "is not one of"),
    (_row(1, lambda r: r.update(name="2016x4096")), "rows[1].name", "given twice"),
    (  # raw samples must be numbers, round by round
        _row(0, lambda r: r.update(samples={"unit": "us", "rounds": [[426.0, "x"]]})),
        "rows[0].samples.rounds[0][1]",
        "must be a number",
    ),
    (
        _row(0, lambda r: r.update(samples={"unit": "us", "rounds": [426.0]})),
        "rows[0].samples.rounds[0]",
        "must be a non-empty list",
    ),
    (
        _row(0, lambda r: r.update(rounds={"unit": "us", "values": [420.0, None]})),
        "rows[0].rounds.values[1]",
        "must be a number",
    ),
    (lambda d: d.update(rows=[]), "rows", "non-empty list"),
    (_row(1, lambda r: r.update(k=2)), "rows[1].k", "is k, x = (1, 0)"),
    (_row(0, lambda r: r.update(x=0)), "rows[0].x", "is k, x = (1, -256)"),
    (  # a split whose parts' payloads are not what Cout x Cin_part gives
        _row(
            1,
            lambda r: r.update(
                cin_parts=[2048, 2048],
                task_bytes_per_core={"unit": "B", "values": [520192, 528384]},
            ),
        ),
        "rows[1].task_bytes_per_core.values[0]",
        "2048 x 2048 fp16 is 524288 B per core",
    ),
    (
        _row(1, lambda r: r.update(cin_parts=[2048, 2047])),
        "rows[1].cin_parts",
        "one per task (1), each positive, adding up to Cin = 4096",
    ),
]


@pytest.mark.parametrize(("edit", "field", "why"), BAD_ROWS)
def test_a_bad_timing_row_is_one_line_naming_file_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], object],
    field: str,
    why: str,
) -> None:
    folder = _copy(tmp_path, M4, "timings.json", edit)
    _refused(capsys, folder, f"timings.json: {field}:", why)


def test_raw_samples_and_round_medians_load(tmp_path: Path) -> None:
    rounds = [[430.0, 426.0, 425.5], [426.0, 427.0, 424.0]]

    def edit(d: dict[str, Any]) -> None:
        d["rows"][0]["samples"] = {"unit": "us", "rounds": rounds}
        d["rows"][0]["rounds"] = {"unit": "us", "values": [426.0, 426.0]}
        d["rows"][0].update(k=1, x=-256, cin_parts=[4096])  # as probe run writes them
        d["rows"][1].update(
            cin_parts=[2048, 2048],
            task_bytes_per_core={"unit": "B", "values": [524288, 524288]},
        )

    folder = _copy(tmp_path, M4, "timings.json", edit)
    row = chips.load(str(folder)).measured.timings.rows[0]  # type: ignore[union-attr]
    assert row.samples == tuple(tuple(r) for r in rounds)
    assert row.rounds == (426.0, 426.0)
    split = chips.load(str(folder)).measured.timings.rows[1]  # type: ignore[union-attr]
    assert split.task_bytes == (524288, 524288) and split.bytes_per_core == 1048576


# the result commands on m4 (its profile is the prior fit): tests/test_calibration_prior.py
