"""The engines behind one contract: cycles of single-core transfers, by model or by RTL."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from ane_kdma import cyclemodel as cm
from ane_kdma.errors import InputError
from ane_kdma.hw import CreditMode

ENGINES = ("model", "rtl")


def check_engine(name: str) -> str:
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r} (one of: {', '.join(ENGINES)})")
    return name


def cycles(
    engine: str,
    mode: CreditMode,
    settings: cm.Settings,
    lines: list[int],
    sim: str = "verilator",
) -> list[int]:
    """Cycles of each one-core transfer of `lines[i]` lines, on the chosen engine."""
    check_engine(engine)
    if engine == "model":
        return [cm.single(mode, settings, n).cycles for n in lines]
    from ane_kdma.sim import run  # only the RTL engine needs a simulator

    with tempfile.TemporaryDirectory(prefix="ane-kdma-") as tmp:
        job = Path(tmp) / "job.json"
        out = Path(tmp) / "out.json"
        job.write_text(json.dumps({"settings": asdict(settings), "lines": list(lines)}))
        env = {"KDMA_JOB": str(job), "KDMA_RESULTS": str(out)}
        params = {"CreditMode": int(mode), "NumCores": 1}
        run(
            sim,
            "kdma_tb_top",
            params,
            "cocotb_kdma",
            "batch_run",
            extra_env=env,
            test_dir=Path(tmp),
        )
        return list(json.loads(out.read_text())["cycles"])
