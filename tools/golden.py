"""Record, or check, every figure the CLI prints for a fixed set of commands.

Why: a refactor must not move a number a user sees. ``tests/golden/cli.json``
holds the JSON output of each command below; ``tests/test_cli_golden.py`` re-runs
them and compares (exact for integers and strings, 1e-9 relative for floats,
which only absorbs summation-order noise below the printed precision).

A change that is meant to move figures (a new fit, a new mechanism) rewrites
the file with ``python tools/golden.py --update`` and says why in its commit.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "cli.json"
DUMPS = [f"data/dumps/m3_n4096_d{d}.txt" for d in (2044, 2048, 2052)]
SHAPES = [
    "2048x4096",
    "4096x2048",
    "2016x4096",
    "2048x8192",
    "8192x2048",
    "4096x4096",
    "4096x14336",
    "14336x4096",
    "512x16384",
    "3072x8192",
    "128x65584",
    "512x16336",
    "2022x4096",
]
LLAMA_CONFIG = "data/models/hf/llama-3.2-1b/config.json"
# read as data, not through ane_kdma: the recorded set is known before the package loads
PROFILE = json.loads((REPO / "data" / "chips" / "m3" / "profile.json").read_text())


def commands() -> list[list[str]]:
    """The argument lists whose outputs are recorded (model engines only: no simulator)."""
    cmds: list[list[str]] = []
    for b in (65536, 1032192, 1048576, 1064960, 2097152, 8388608):
        for v in ("literal", "signed", "fixed"):
            cmds.append(["predict", "--bytes-per-core", str(b), "--variant", v])
    for s in (2, 4):
        cmds.append(["predict", "--bytes-per-core", "1048576", "--split", str(s)])
    cmds.append(["replay", *DUMPS])
    cmds.append(["erratum"])
    cmds.append(["plan", *[a for s in SHAPES for a in ("--shape", s)]])
    for m in ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "qwen3-8b", "gemma-3-4b"):
        cmds.append(["llm", "--model", m])
    cmds.append(["llm", "--config", LLAMA_CONFIG, "--scope", "mlp", "--dtype", "int8"])
    cmds.append(["validate"])
    cmds.append(["sweep"])  # --out is added per run; its CSVs are recorded too
    # the committed profile's pair (fitting all 21 takes half an hour;
    # tests/test_calibration.py holds the ranking in fits.json to its rule); --out is added
    # per run; the profile is recorded
    cmds.append(
        ["calibrate", "--hypothesis", PROFILE["hypothesis"], "--mechanism", PROFILE["mechanism"]]
    )
    return cmds


def run(argv: list[str]) -> dict[str, object]:
    """One command's JSON document (and, for sweep and calibrate, the files it wrote)."""
    from ane_kdma.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        extra: list[str] = []
        if argv[0] == "sweep":
            extra = ["--out", tmp]
        elif argv[0] == "calibrate":
            extra = ["--out", str(Path(tmp) / "profile.json")]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            status = main([*argv, *extra, "--json"])
        doc: dict[str, object] = {"status": status, "json": json.loads(buf.getvalue())}
        if argv[0] == "sweep":
            doc["json"].pop("out")
            doc["json"].pop("files")
            doc["csv"] = {
                name: [row.split(",") for row in (Path(tmp) / name).read_text().splitlines()]
                for name in ("sweep.csv", "spectrum.csv", "notch_overlay.csv")
            }
        if argv[0] == "calibrate":
            doc["profile"] = json.loads((Path(tmp) / "profile.json").read_text())
    return doc


def record() -> dict[str, object]:
    return {" ".join(c): run(c) for c in commands()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--update", action="store_true", help=f"rewrite {GOLDEN.relative_to(REPO)}")
    args = p.parse_args()
    data = record()
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.update:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN.relative_to(REPO)} ({len(data)} commands)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
