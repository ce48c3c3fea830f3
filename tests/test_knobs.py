"""The KDMA_* knobs: one parser, strict values and bounds, and one line before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ane_kdma import knobs
from ane_kdma.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("name", "raw", "want"),
    [
        ("KDMA_SEED", "42", 42),
        ("KDMA_SEED", " 0x2a ", 42),
        ("KDMA_SEED", "1_000", 1000),
        ("KDMA_SEED", str((1 << 64) - 1), (1 << 64) - 1),
        ("KDMA_FULL", "1", True),
        ("KDMA_FULL", "TRUE", True),
        ("KDMA_FULL", "0", False),
        ("KDMA_FULL", "false", False),
        ("KDMA_FULL", "", None),
        ("KDMA_SCALE", "small", "small"),
        ("KDMA_LAPS", "1,2,8", [1, 2, 8]),
        ("KDMA_UVM_KMAX", "0", 0),
        ("KDMA_MAX_LINES", "0x20000", 0x20000),
        ("KDMA_JOB", "/tmp/job.json", "/tmp/job.json"),
    ],
)
def test_legal_values(name: str, raw: str, want: object) -> None:
    assert knobs.parse(name, raw) == want


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("KDMA_SEED", "-1", "must be 0.."),
        ("KDMA_SEED", str(1 << 64), "must be 0.."),
        ("KDMA_SEED", "abc", "not an integer"),
        ("KDMA_SEED", "\u0661\u0662", "not an integer"),  # Arabic-Indic digits
        ("KDMA_SEED", "\uff11", "not an integer"),  # a full-width 1
        ("KDMA_SEED", "9" * 5000, "not an integer"),  # no digit-limit traceback
        ("KDMA_FULL", "yes", "a flag is 1, 0, true or false"),
        ("KDMA_FULL", "2", "a flag is 1, 0, true or false"),
        ("KDMA_SCALE", "tiny", "one of small, full"),
        ("KDMA_LAPS", "0", "must be 1..8"),
        ("KDMA_LAPS", "1,9", "must be 1..8"),
        ("KDMA_LAPS", "1,1", "listed twice"),
        ("KDMA_LAPS", ",".join(["1"] * 9), "at most 8 laps"),
        ("KDMA_UVM_KMAX", "9", "must be 0..8"),
        ("KDMA_UVM_TRANSFERS", "1000000", "must be 0..100000"),
        ("KDMA_MAX_LINES", "0", "must be 1.."),
        ("KDMA_WAVE_LINES", str(1 << 40), "must be 1.."),
        ("KDMA_JOB", "a\nb", "one printable line"),
        ("KDMA_SEDD", "1", "unknown knob; did you mean KDMA_SEED?"),
    ],
)
def test_bad_values_are_one_line(name: str, raw: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        knobs.parse(name, raw)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(name), text
    assert len(text) < 300


def test_read_sees_every_kdma_variable_and_nothing_else() -> None:
    env = {"KDMA_SEED": "7", "KDMA_FULL": "1", "HOME": "/x", "SIM": "icarus"}
    assert knobs.read(env) == {"KDMA_FULL": True, "KDMA_SEED": 7}
    assert knobs.full(env) is True and knobs.full({}) is False
    assert knobs.get("KDMA_SEED", 3, {}) == 3
    with pytest.raises(KeyError):
        knobs.get("KDMA_NOPE")  # a typo in the code is a bug, not an input error


@pytest.mark.parametrize("suite", ["tests/test_knobs.py", "tb/test_lint.py"])
def test_pytest_stops_in_one_line_before_running(suite: str) -> None:
    env = {**os.environ, "KDMA_FULL": "maybe"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite, "-k", "nothing"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert lines == ["ERROR: KDMA_FULL=maybe: a flag is 1, 0, true or false"], lines
