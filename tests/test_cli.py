"""The CLI contract of architecture.md: tables, --json documents, and one-line errors (status 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ane_kdma.chip import data_dir
from ane_kdma.cli import main
from ane_kdma.contract import split_lines
from ane_kdma.errors import InputError

DUMPS = data_dir() / "dumps"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out)


def test_predict_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, ["predict", "--bytes-per-core", str(1 << 20), "--json"])
    assert set(doc) == {"bytes_per_core", "lines_per_core", "variant", "split", "time_us", "gbps"}
    assert doc["lines_per_core"] == 0x4000 and doc["variant"] == "signed" and doc["split"] == 1
    fixed = _json(
        capsys, ["predict", "--bytes-per-core", str(1 << 20), "--variant", "fixed", "--json"]
    )
    split = _json(capsys, ["predict", "--bytes-per-core", str(1 << 20), "--split", "2", "--json"])
    assert fixed["gbps"] > 2 * doc["gbps"], "the notch: buggy at 1 MiB is far below fixed"
    assert split["gbps"] > 2 * doc["gbps"], "the split workaround recovers"
    assert doc["gbps"] == pytest.approx(
        16 * doc["bytes_per_core"] / (doc["time_us"] * 1e3), rel=1e-3
    )


def test_predict_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "--bytes-per-core", "65536", "--variant", "literal"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "bytes_per_core",
        "lines_per_core",
        "variant",
        "split",
        "time_us",
        "gbps",
    ]
    assert out[1].split()[:4] == ["65536", "1024", "literal", "1"]


def test_replay_real_dumps_json(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(DUMPS / f"m3_n4096_d{d}.txt") for d in (2044, 2048, 2052)]
    doc = _json(capsys, ["replay", *paths, "--json"])
    rows = {r["cin"]: r for r in doc["dumps"]}
    assert [rows[d]["x"] for d in (2044, 2048, 2052)] == [-32, 0, 32]
    assert all(r["k"] == 1 and r["cores"] == 16 for r in rows.values())
    # the literal sketch starves only x >= 0; the signed reading starves both sides
    assert rows[2044]["literal_cycles"] < rows[2048]["literal_cycles"] / 2
    assert rows[2044]["signed_cycles"] > 2 * rows[2044]["fixed_cycles"]
    assert rows[2048]["fixed_cycles"] < rows[2048]["signed_cycles"] / 2


def test_erratum_json(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, ["erratum", "--laps", "2", "--json"])
    assert [r["k"] for r in doc["rows"]] == [1, 2]
    assert all(r["signed/fixed"] >= 2 for r in doc["rows"])


def test_split_lines() -> None:
    assert split_lines(10, 3) == [4, 3, 3]
    with pytest.raises(InputError):
        split_lines(2, 3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "--bytes-per-core", "0"], "must be positive"),
        (["predict", "--bytes-per-core", "-64"], "must be positive"),
        (["predict", "--bytes-per-core", "abc"], "not an integer"),
        (["predict", "--bytes-per-core", "63"], "not a positive multiple of 64"),
        (["predict", "--bytes-per-core", str(1 << 32)], "32-bit"),
        (["predict", "--bytes-per-core", "64", "--engine", "spice"], "unknown engine"),
        (["predict", "--bytes-per-core", "64", "--variant", "foo"], "unknown variant"),
        (["predict", "--bytes-per-core", "64", "--split", "2"], "cannot split"),
        (["predict", "--bytes-per-core", "64", "--profile", "m9"], "profile missing"),
        (["predict", "--bytes-per-core", "64", "--chip", "m9"], "no such chip"),
        (["replay", "/nonexistent/dump.bin"], "no such file"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_status_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ane-kdma: ") and message in lines[0]
    assert captured.out == ""


def test_bad_input_through_the_console_script(tmp_path: Path) -> None:
    """The real entry point: no traceback, status 2, and no output file left behind."""
    out = tmp_path / "td.bin"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ane_kdma.cli",
            "dump",
            "--d",
            "0",
            "--n",
            "4096",
            "--format",
            "bin",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []
