"""The CLI contract of architecture.md: tables, --json documents, and one-line errors (status 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma.chip import data_dir, load
from ane_kdma.cli import main
from ane_kdma.contract import split_lines
from ane_kdma.errors import InputError
from ane_kdma.regdump import write_dump

DUMPS = data_dir() / "dumps"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out)


def test_predict_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, ["predict", "--bytes-per-core", str(1 << 20), "--json"])
    contract = {"bytes_per_core", "lines_per_core", "variant", "split", "time_us", "gbps"}
    figures = contract | {"time_us_fixed", "gbps_fixed"}  # added keys: the rest stay
    # m3's profile carries fits, so each figure has its band beside it (tests/test_bands.py)
    numeric = figures - {"bytes_per_core", "lines_per_core", "variant", "split"}
    assert set(doc) == figures | {f"{k}_band" for k in numeric}
    assert (
        doc["lines_per_core"] == 0x4000
        and doc["variant"] == load().hypothesis.name  # the reading the m3 profile names
        and doc["split"] == 1
    )
    fixed = _json(
        capsys, ["predict", "--bytes-per-core", str(1 << 20), "--variant", "fixed", "--json"]
    )
    split = _json(capsys, ["predict", "--bytes-per-core", str(1 << 20), "--split", "2", "--json"])
    assert fixed["gbps"] > 2 * doc["gbps"], "the notch: buggy at 1 MiB is far below fixed"
    assert (doc["time_us_fixed"], doc["gbps_fixed"]) == (fixed["time_us"], fixed["gbps"])
    assert (fixed["time_us_fixed"], fixed["gbps_fixed"]) == (fixed["time_us"], fixed["gbps"])
    assert split["gbps"] > 2 * doc["gbps"], "the split workaround recovers"
    assert doc["gbps"] == pytest.approx(
        16 * doc["bytes_per_core"] / (doc["time_us"] * 1e3), rel=1e-3
    )


def test_predict_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The header, then the row folded into sections of 100 columns, each led by the size."""
    assert main(["predict", "--bytes-per-core", "65536", "--variant", "literal"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("predict: model engine, chip m3, profile ")
    assert max(map(len, out)) <= 100, out
    at = [i for i, line in enumerate(out) if line.split()[:1] == ["bytes_per_core"]]
    assert at and all(out[i + 1].split()[0] == "65536" for i in at), out
    columns = [word for i in at for word in out[i].split()[1:]]
    assert columns == [
        "lines_per_core",
        "variant",
        "split",
        "time_us",
        "gbps",
        "time_us_fixed",
        "gbps_fixed",
    ]
    assert out[at[0] + 1].split()[:4] == ["65536", "1024", "literal", "1"]


def test_replay_real_dumps_json(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(DUMPS / f"m3_n4096_d{d}.txt") for d in (2044, 2048, 2052)]
    doc = _json(capsys, ["replay", *paths, "--json"])
    rows = {r["cin"]: r for r in doc["dumps"]}
    assert [rows[d]["x"] for d in (2044, 2048, 2052)] == [-32, 0, 32]
    assert all(r["k"] == 1 and r["cores"] == 16 for r in rows.values())
    # the literal sketch starves only x >= 0; the signed and paged readings starve both sides,
    # the paged one symmetrically and (its V being linear) still > 2x the fix at |x| = 32
    assert rows[2044]["literal_cycles"] < rows[2048]["literal_cycles"] / 2
    assert rows[2044]["signed_cycles"] > 1.5 * rows[2044]["fixed_cycles"]
    for d in (2044, 2052):
        assert rows[d]["paged_cycles"] > 2 * rows[d]["fixed_cycles"]
    assert rows[2044]["paged_cycles"] == pytest.approx(rows[2052]["paged_cycles"], rel=0.01)
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
        (["predict", "--bytes-per-core", "abc"], "not a size"),
        (["predict", "--bytes-per-core", "63"], "not a positive multiple of 64"),
        (["predict", "--bytes-per-core", str(1 << 32)], "32-bit"),
        (["predict", "--bytes-per-core", "64", "--engine", "spice"], "unknown engine"),
        (["predict", "--bytes-per-core", "64", "--variant", "foo"], "unknown variant"),
        (["predict", "--bytes-per-core", "64", "--split", "2"], "cannot split"),
        (["predict", "--bytes-per-core", "64", "--profile", "m9"], "profile missing"),
        (["predict", "--bytes-per-core", "64", "--chip", "m9"], "no such chip"),
        (["replay", "/nonexistent/dump.bin"], "no such file"),
        # calibrate's exact engine: before the chip is read or anything is fitted
        (
            ["calibrate", "--engine", "analytic", "--out", "/nonexistent/p.json"],
            "needs an exact engine and analytic is not",
        ),
        (["calibrate", "--engine", "rtl", "--out", "-"], "does not build"),
        (
            ["calibrate", "--engine", "rtl", "--out", "-", "--hypothesis", "paged"]
            + ["--mechanism", "warmup"],
            "the RTL does not build the warmup mechanism",
        ),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_status_2(argv: list[str], message: str) -> None:
    refuses(argv, message)


def test_bad_input_through_the_console_script(tmp_path: Path) -> None:
    """The real entry point: no traceback, status 2, and no output file left behind."""
    out = tmp_path / "td.bin"
    argv = ["dump", "--d", "0", "--n", "4096", "--format", "bin", "--out", str(out)]
    refuses(argv, child=True, watch=[tmp_path])
    assert not out.exists() and list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- hardening


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "--bytes-per-core", "1" * 5000], "not a size: '111111"),
        (["predict", "--bytes-per-core", "\u0661\u0660\u0662\u0664"], "not a size"),
        (["predict", "--bytes-per-core", "\uff16\uff14"], "not a size"),
        (["predict", "--bytes-per-core", "64", "--split", "1" * 41], "not an integer"),
        (["erratum", "--laps", "5000"], "--laps 5000: at most 4095 laps fit the 32-bit size"),
        (["erratum", "--laps", "300"], "--laps 300: at most 255"),
        (["sweep", "--d-max", "1099511627776"], "--d-max 1099511627776: at most 4294967295"),
        (["sweep", "--n", "1" + "0" * 39], "--n 1000000000000000000000000000000000000000: at most"),
        (["sweep", "--d-max", "4294967295"], "points is too many (at most 100000)"),
        (["dump", "--d", "2048", "--n", "4096", "--out", "/dev/null"], "a character device"),
        (["replay", "/dev/zero"], "/dev/zero: a character device, not a regular file"),
        (["replay", "no\nsuch"], "no such file: no\\x0asuch"),
        (["replay", "bad\udcffname"], "no such file: bad\\xffname"),
    ],
)
def test_bad_arguments_end_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [*argv, "--out", str(tmp_path / "o")] if argv[0] == "sweep" else argv
    assert message in refuses(argv)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["dump", "--d", "0x800", "--n", "4_096"],
        ["dump", "--d", "0o4000", "--n", "0b1000000000000"],
        ["predict", "--bytes-per-core", "0x10_0000", "--engine", "analytic"],
        ["predict", "--bytes-per-core", "1_048_576", "--engine", "analytic"],
        ["erratum", "--laps", "0x2", "--cores", "0b1", "--engine", "analytic"],
    ],
)
def test_integer_spellings_are_the_same_on_every_command(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANE_KDMA_PROGRESS", "0")  # no "still running" note on a loaded machine
    assert main(argv) == 0
    assert capsys.readouterr().err == ""


_PROFILE = json.loads((data_dir() / "chips" / "m3" / "profile.json").read_text())
_WIN = f'"window_lines": {_PROFILE["window_lines"]}'
_LAT = f'"latency_cycles": {_PROFILE["latency_cycles"]}'
_OVH = f'"overhead_us": {_PROFILE["overhead_us"]}'
PROFILE_EDITS = [
    (_WIN, _WIN + ".5", "window_lines: must be a whole number"),
    (_LAT, _LAT.replace(": ", ': "') + '"', "latency_cycles: must be a whole number"),
    (_OVH, '"overhead_us": NaN', "NaN is not a JSON number"),
    (_OVH, '"overhead_us": -1', "overhead_us: -1 is below 0.0"),
    (_OVH, '"overhead_us": 1e999', "overhead_us: must be finite"),
    (_WIN, '"window_lines": ' + "9" * 50, "has more than 40 digits"),
    (_WIN, _WIN + ', "window_lines": 108', "given twice"),
    (_WIN, '"window_lines": ' + "[" * 100_000 + "]" * 100_000, "nested too"),
]


@pytest.mark.parametrize(("old", "new", "message"), PROFILE_EDITS)
def test_bad_profiles_end_in_one_line(
    old: str, new: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (data_dir() / "chips" / "m3" / "profile.json").read_text()
    assert old in text
    bad = tmp_path / "p.json"
    bad.write_text(text.replace(old, new))
    argv = ["predict", "--bytes-per-core", "64", "--engine", "analytic", "--profile", str(bad)]
    assert message in refuses(argv)


def test_replay_warns_on_stderr_and_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A merely unusual dump (3 cores, no bases) is replayed, its warnings shown, no figure."""
    dump = tmp_path / "three.txt"
    dump.write_text("".join(f"TD+0x{0xB4 + 4 * i:03x} 0x00100000\n" for i in range(3)))
    doc = _json(capsys, ["replay", str(dump), "--engine", "analytic", "--json"])
    row = doc["dumps"][0]
    assert row["cores"] == 3 and row["measured_gbps"] is None
    assert row["warnings"][0].startswith("cores 3-15: no size, base or enable bit")
    assert main(["replay", str(dump), "--engine", "analytic"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.out
    assert captured.err.splitlines() == [f"ane-kdma: warning: {dump}: {w}" for w in row["warnings"]]


def test_replay_shows_the_measured_figure_only_for_its_geometry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = _json(
        capsys, ["replay", str(DUMPS / "m3_n4096_d2048.zin"), "--engine", "analytic", "--json"]
    )
    assert doc["dumps"][0]["measured_gbps"] == 16.93 and doc["dumps"][0]["cores"] == 16


def _cli(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """The real entry point in a subprocess, bounded in time."""
    return subprocess.run(
        [sys.executable, "-m", "ane_kdma.cli", *argv],
        capture_output=kw.pop("capture", True),
        text=True,
        timeout=120,
        **kw,  # type: ignore[arg-type]
    )


def test_a_full_disk_on_stdout_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        proc = _cli(
            "predict", "--bytes-per-core", "1048576", "--engine", "analytic",
            stdout=full, stderr=subprocess.PIPE, capture=False,
        )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == "ane-kdma: cannot write to standard output: No space left on device\n"


def test_a_closed_pipe_ends_quietly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ane_kdma.cli", "predict", "--bytes-per-core", "1048576"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the first write, as `| head -c 1` can
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == b""


def test_a_closed_stdout_is_one_line_and_the_file_is_whole(tmp_path: Path) -> None:
    out = tmp_path / "td.txt"
    proc = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "ane_kdma.cli"]
        + ["dump", "--d", "2048", "--n", "4096", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr == "ane-kdma: cannot write to standard output: it is closed\n"
    assert out.read_bytes() == write_dump(2048, 4096, "text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["td.txt"]


def test_reproducers_from_the_console_script(tmp_path: Path) -> None:
    """Reproducers of bad dumps, end to end: one line, status 2, no traceback, in bounded time."""
    (tmp_path / "a.zin").write_text("aneRegs.Common.Cin.Cin = " + "1" * 4301 + "\n")
    (tmp_path / "b.zin").write_text("aneRegs.Common.Cin.Cin = \u00b2\n")
    big = "".join(f"TD+0x{0xB4 + 4 * i:03x} 0xFFFFFFC0\n" for i in range(16))
    (tmp_path / "big.txt").write_text(big)
    (tmp_path / "dups.txt").write_text("TD+0x0b4 0x00100000\n" * 52_000)  # under the 1 MiB cap
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv, message in [
        (["replay", "a.zin"], "is wider than 32 bits"),
        (["replay", "b.zin"], "non-ASCII character"),
        (["replay", "fifo"], "a FIFO (named pipe), not a regular file"),
        (["replay", "/dev/urandom"], "a character device"),
    ]:
        refuses(argv, message, child=True, cwd=tmp_path, watch=[tmp_path])
    for argv, message in [
        (["replay", "big.txt", "--engine", "analytic"], ""),
        (["replay", "dups.txt", "--engine", "analytic", "--json"], "1 of 16 cores stream"),
    ]:
        proc = _cli(*argv, cwd=tmp_path)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr and message in proc.stderr, (argv, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.zin", "b.zin", "big.txt", "dups.txt", "fifo"
    ]  # fmt: skip


def test_refuses_holds_the_whole_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one check of the error contract can fail on each of its clauses."""
    import refusal

    assert refuses(["frobnicate"], "invalid choice").startswith("ane-kdma: ")
    with pytest.raises(AssertionError):  # exit 0
        refuses(["predict", "--bytes-per-core", "65536", "--engine", "analytic"])
    with pytest.raises(AssertionError):  # a word the line does not hold
        refuses(["frobnicate"], "no such words")

    def fake(lines: str, out: str = "", write: bool = False) -> Callable[[list[str]], int]:
        def main(argv: list[str]) -> int:
            if write:
                (tmp_path / "partial.json").write_text("{")
            sys.stdout.write(out)
            sys.stderr.write(lines)
            return 2

        return main

    for bad in (
        fake("ane-kdma: one\nane-kdma: two\n"),  # two lines
        fake("one line without the prefix\n"),
        fake("ane-kdma: x\n", out="half a table"),  # stdout not empty
        fake("Traceback (most recent call last):\n"),
        fake("ane-kdma: x\n", write=True),  # a file written
    ):
        monkeypatch.setattr(refusal, "main", bad)
        with pytest.raises(AssertionError):
            refuses(["anything"], watch=[tmp_path])
    monkeypatch.setattr(refusal, "main", fake("ane-kdma: fine\n"))
    assert refuses(["anything"], "fine", watch=[tmp_path]) == "ane-kdma: fine"
