"""Property-based fuzzing (Hypothesis) of every command line (`cli/`).

Generated command lines (huge and non-ASCII numbers, misspelt names, odd
paths and flags) must end in a result or one line on stderr with exit status
2 (the CLI contract, tests/refusal.py); never a traceback, never past the
deadline, never a file left behind. The commands run on the analytic engine;
`sweep` runs with its engine, spectrum and plots stubbed, so its argument
checks and its file writing are what is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from fuzzing import (
    FUZZ,
    INTS,
    check,
    fuzz,
    listing,
    run,
    scratch,
)
from hypothesis import given
from hypothesis import strategies as st
from refusal import refuses
from test_regdump_fuzz import _cut_or_flip, _mangled  # the dump strategies, for replay

from ane_kdma import sweep as sw_mod

FLAGS = st.lists(st.sampled_from(["--json", "--chip", "--profile"]), max_size=2, unique=True)
NAMES = st.one_of(st.sampled_from(["m3", "", "m9", "/", "/dev/null", "-"]), st.text(max_size=12))


def _common(flags: list[str], name: str) -> list[str]:
    out = []
    for f in flags:
        out += [f] if f == "--json" else [f, name]
    return out


@fuzz(40)
@given(
    INTS,
    st.one_of(st.none(), INTS),
    st.sampled_from(["signed", "fixed", "buggy", "bogus"]),
    FLAGS,
    NAMES,
)
def test_predict_arguments(
    size: str, split: str | None, variant: str, flags: list[str], name: str
) -> None:
    argv = ["predict", f"--bytes-per-core={size}", "--variant", variant, "--engine", "analytic"]
    argv += [f"--split={split}"] if split is not None else []
    argv += _common(flags, name)
    check(argv, *run(argv))


@fuzz(30)
@given(INTS, INTS, FLAGS, NAMES)
def test_erratum_arguments(laps: str, cores: str, flags: list[str], name: str) -> None:
    argv = ["erratum", f"--laps={laps}", f"--cores={cores}", "--engine", "analytic"]
    argv += _common(flags, name)
    check(argv, *run(argv))


OUT_NAMES = st.one_of(
    st.sampled_from(["td.txt", "a b", "new\nline", "caf\u00e9", "-", ".", "x" * 255, "x" * 300]),
    st.text(alphabet=st.characters(exclude_characters="/\x00"), min_size=1, max_size=20),
)


@fuzz(40)
@given(
    INTS,
    INTS,
    st.sampled_from(["text", "zin", "bin", "hex"]),
    st.one_of(st.none(), OUT_NAMES),
    st.booleans(),
)
def test_dump_arguments(d: str, n: str, fmt: str, out: str | None, as_json: bool) -> None:
    with scratch() as tmp:
        argv = ["dump", f"--d={d}", f"--n={n}", "--format", fmt]
        argv += ["--out", str(tmp / out)] if out is not None else []
        argv += ["--json"] if as_json else []
        status, stdout, err = run(argv)
        check(argv, status, stdout, err)
        written = [out] if status == 0 and out is not None else []
        assert listing(tmp) == sorted(written), argv  # the file, whole, or nothing at all


@fuzz(40)
@given(
    st.lists(st.one_of(_mangled(), _cut_or_flip().map(lambda c: c[1])), min_size=1, max_size=3),
    FLAGS,
    NAMES,
)
def test_replay_arguments(dumps: list[bytes], flags: list[str], name: str) -> None:
    with scratch() as tmp:
        paths = []
        for i, data in enumerate(dumps):
            (tmp / f"d{i}").write_bytes(data)
            paths.append(str(tmp / f"d{i}"))
        argv = ["replay", *paths, "--engine", "analytic", *_common(flags, name)]
        check(argv, *run(argv))
        assert listing(tmp) == [f"d{i}" for i in range(len(dumps))]


def _fake_run(engine: str, h: object, chip: object, lines: np.ndarray):
    return np.ones(len(lines)), np.ones(len(lines))


def _fake_spectrum(sw: sw_mod.Sweep, chip: object) -> sw_mod.Spectrum:
    return sw_mod.Spectrum(np.ones(2), {k: np.ones(2) for k in sw.gbps}, dict.fromkeys(sw.gbps))


def _fake_overlay(chip: object, engine: str = "analytic") -> sw_mod.Overlay:
    zero = np.zeros((1, 1))
    return sw_mod.Overlay(np.zeros(1), (1,), {"signed": zero}, {"signed": zero}, 256)


@fuzz(30)
@given(INTS, INTS, INTS, INTS, st.sampled_from(["new", "existing", "file"]))
def test_sweep_arguments(d_min: str, d_max: str, d_step: str, n: str, out: str) -> None:
    with (
        scratch() as tmp,
        mock.patch.multiple(
            sw_mod,
            _run=_fake_run,
            spectrum=_fake_spectrum,
            overlay=_fake_overlay,
            plot_sweep=lambda *a: b"png",
            plot_spectrum=lambda *a: b"png",
            plot_overlay=lambda *a: b"png",
        ),
    ):
        target = tmp / "out"
        if out == "existing":
            target.mkdir()
            (target / "keep.md").write_text("mine")
        elif out == "file":
            target.write_text("mine")
        before = listing(tmp)
        argv = ["sweep", f"--d-min={d_min}", f"--d-max={d_max}", f"--d-step={d_step}", f"--n={n}"]
        argv += ["--out", str(target), "--json"]
        status, stdout, err = run(argv)
        check(argv, status, stdout, err)
        if status == 2:
            assert listing(tmp) == before
        else:
            files = {str(Path(f).relative_to(tmp)) for f in json.loads(stdout)["files"]}
            assert len(files) == 6  # the whole set, and nothing else beside what was there
            assert listing(tmp) == sorted({*before, "out", *files})


@fuzz(8, deadline=timedelta(seconds=60))  # a valid call runs every row (~2 s)
@given(FLAGS, NAMES)
def test_validate_arguments(flags: list[str], name: str) -> None:
    argv = ["validate", "--engine", "analytic", "--no-ranking", *_common(flags, name)]
    status, out, err = run(argv)
    check(argv, 0 if status == 1 else status, out, err)  # 1: a row outside tolerance


@fuzz(12)
@given(st.sampled_from(["dir", "missing", "line\nbreak/x.json"]), FLAGS, NAMES)
def test_calibrate_arguments(out: str, flags: list[str], name: str) -> None:
    """Only outputs that fail before the fit (a real fit takes half a minute)."""
    with scratch() as tmp:
        target = {"dir": tmp, "missing": tmp / "no" / "p.json"}.get(out, tmp / out)
        argv = ["calibrate", "--out", str(target), *_common(flags, name)]
        refuses(argv, watch=[tmp])
        assert listing(tmp) == []


SHAPES = st.one_of(
    st.tuples(INTS, INTS).map(lambda t: f"{t[0]}x{t[1]}"),
    st.sampled_from(["2048x4096", "4096x2048", "2048x4096x1x1", "x", ""]),
    st.text(max_size=20),
)


@fuzz(25)
@given(st.lists(SHAPES, min_size=1, max_size=3), FLAGS, NAMES)
def test_plan_arguments(shapes: list[str], flags: list[str], name: str) -> None:
    argv = [
        "plan",
        *[f"--shape={s}" for s in shapes],
        "--engine",
        "analytic",
        *_common(flags, name),
    ]
    check(argv, *run(argv))


@fuzz(20)
@given(
    st.one_of(st.none(), st.sampled_from(["llama-3.2-1b", "bogus"]), st.text(max_size=12)),
    st.booleans(),
    FLAGS,
)
def test_llm_arguments(model: str | None, listing: bool, flags: list[str]) -> None:
    argv = ["llm", "--engine", "analytic", *(["--list"] if listing else [])]
    argv += [f"--model={model}"] if model is not None else []
    argv += ["--json"] if "--json" in flags else []
    check(argv, *run(argv))


WORDS = st.sampled_from(
    ["predict", "replay", "erratum", "plan", "llm", "validate", "sweep", "calibrate", "dump",
     "--json", "--chip", "--profile", "--engine", "--variant", "--split", "--laps", "--cores",
     "--d", "--n", "--format", "--out", "--shape", "--model", "--list", "--bytes-per-core",
     "-", "--", "-x", "--bogus", "analytic", "64", "0x40", "text", "m3", "/dev/null"]
)  # fmt: skip


@fuzz(60)
@given(st.lists(st.one_of(WORDS, INTS, st.text(max_size=8)), max_size=6))
def test_any_command_line(words: list[str]) -> None:
    """Any words at all: parsed, or one line. Slow commands are kept off by their options."""
    argv = [*words, "--engine", "analytic"]
    if any(w in ("calibrate", "sweep", "replay", "dump") for w in words):
        argv += ["--bogus-stop"]  # these write or read files: argument errors only here
    try:
        status, out, err = run(argv)
    except SystemExit as exc:  # --help and friends print and exit 0, as argparse does
        assert exc.code == 0, argv
        return
    if status == 1 and argv[0] == "validate":
        status = 0
    check(argv, status, out, err)


@fuzz(6, deadline=timedelta(seconds=60))
@given(st.sampled_from(["predict", "replay"]), INTS)
def test_the_console_script_never_shows_a_traceback(command: str, value: str) -> None:
    """The real entry point, in a subprocess with a timeout: no traceback, one line or a result."""
    with scratch() as tmp:
        if command == "predict":
            argv = ["predict", f"--bytes-per-core={value}", "--engine", "analytic"]
        else:
            (tmp / "d.zin").write_text(
                f"aneRegs.KernelDMASrc.CoeffBfrSize[0].MemBfrSize = {value}\n"
            )
            argv = ["replay", str(tmp / "d.zin"), "--engine", "analytic"]
        proc = subprocess.run(
            [sys.executable, "-m", "ane_kdma.cli", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        assert "Traceback" not in proc.stderr
        check(argv, proc.returncode, proc.stdout, proc.stderr)


def test_hypothesis_writes_nothing_into_the_tree() -> None:
    assert FUZZ.database is None and FUZZ.derandomize
    repo = Path(__file__).resolve().parents[1]
    assert not (repo / ".hypothesis").exists() and not (repo / "tests" / ".hypothesis").exists()


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
