"""A throw-away mechanism, added to a scratch copy of the package, reaches calibrate, validate
and predict (the registry's claim: one entry, docs/adding.md).

The entry is a governor that climbs in four steps (it builds on `ramp`, as `ramp-linear`
does): one file of the scratch copy changes, the registry. The commands run in a
subprocess on the scratch copy, so the real package is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ane_kdma import chip as chips
from ane_kdma import mechanisms

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "python" / "ane_kdma"
ENTRY = """
REGISTRY = (
    *REGISTRY,
    Mechanism(
        "ramp-4",
        "throw-away: the governor climbing in four equal steps",
        "a governor that raises the issue duty in four steps",
        extends="ramp",
        steps=4,
        rate_starts=(0.45, 0.55),
    ),
)
"""
#: the files of the package the new entry may touch (docs/adding.md: at most three)
MOST_FILES = 3


def _scratch(tmp: Path) -> Path:
    """A copy of the package (and a link to the bundled data) with the entry added."""
    root = tmp / "scratch"
    shutil.copytree(PKG, root / "python" / "ane_kdma", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "data").symlink_to(ROOT / "data")
    reg = root / "python" / "ane_kdma" / "mechanisms.py"
    text = reg.read_text()
    marker = "\n\ndef names() -> list[str]:"
    assert marker in text
    reg.write_text(text.replace(marker, "\n" + ENTRY + marker, 1))
    return root


def _changed(root: Path) -> list[str]:
    new = root / "python" / "ane_kdma"
    out = []
    for f in sorted(new.rglob("*.py")):
        rel = f.relative_to(new)
        if not (PKG / rel).is_file() or (PKG / rel).read_bytes() != f.read_bytes():
            out.append(str(rel))
    return out


def _cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    code = (
        "import sys, ane_kdma; assert ane_kdma.__file__.startswith(sys.argv[1]), ane_kdma.__file__;"
        "from ane_kdma.cli import main; sys.argv = ['ane-kdma', *sys.argv[2:]]; sys.exit(main())"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(root), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        check=False,
    )


def test_a_new_mechanism_reaches_calibrate_validate_and_predict(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    assert _changed(root) == ["mechanisms.py"] and len(_changed(root)) <= MOST_FILES
    chip = tmp_path / "m3-ramp4"
    shutil.copytree(chips.load().path, chip)

    fit = _cli(root, "calibrate", "--chip", str(chip), "--hypothesis", "signed",
               "--mechanism", "ramp-4", "--jobs", "1", "--json")  # fmt: skip
    assert fit.returncode == 0, fit.stderr
    prof = json.loads((chip / "profile.json").read_text())
    assert prof["mechanism"] == "ramp-4" and prof["hypothesis"] == "signed"
    assert 0 < prof["ramp_start_q16"] < prof["core_rate_q16"]  # a ramp was fitted
    # four steps: the increment reaches the rate from the start in four (ceil)
    assert -(-(prof["core_rate_q16"] - prof["ramp_start_q16"]) // 4) == prof["ramp_inc_q16"]
    assert json.loads(fit.stdout)["confirmed_on_cycle_model"]["ok"] is True

    val = _cli(root, "validate", "--chip", str(chip), "--no-ranking", "--engine", "analytic",
               "--jobs", "1", "--json")  # fmt: skip
    assert val.returncode in (0, 1), val.stderr  # 1: a row outside its band (a judgement)
    doc = json.loads(val.stdout)
    assert doc["rows"], "validate judged nothing"

    pred = _cli(root, "predict", "--chip", str(chip), "--bytes-per-core", str(1 << 20), "--json")
    assert pred.returncode == 0, pred.stderr
    out = json.loads(pred.stdout)
    assert out["time_us"] > 0 and out["lines_per_core"] == 0x4000
    assert "ramp-4" not in mechanisms.names()  # the real package does not know it
