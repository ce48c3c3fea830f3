"""The engines behind one contract: cycles of single-core transfers, by model or by RTL."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from ane_kdma import cyclemodel as cm
from ane_kdma.errors import InputError
from ane_kdma.hw import LINE_BYTES, CreditMode

ENGINES = ("model", "rtl")


def check_engine(name: str) -> str:
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r} (one of: {', '.join(ENGINES)})")
    return name


def _tasks(lines: list[int]) -> list[cm.CoreTask]:
    """Back-to-back tasks over consecutive addresses, from line 0."""
    tasks, base = [], 0
    for n in lines:
        tasks.append(cm.CoreTask(base * LINE_BYTES, n * LINE_BYTES))
        base += n
    return tasks


def cycles(
    engine: str,
    mode: CreditMode,
    settings: cm.Settings,
    sequences: list[list[int]],
    sim: str = "verilator",
) -> list[int]:
    """Cycles of each one-core task sequence (a list of line counts issued back to back).

    A one-element sequence is a single task; [n/2, n/2] is the split workaround.
    """
    check_engine(engine)
    for seq in sequences:
        if not seq or any(n < 0 for n in seq):
            raise InputError(f"not a task sequence: {seq}")
    if engine == "model":
        return [cm.run_sequence(mode, settings, _tasks(seq)).cycles for seq in sequences]
    from ane_kdma.sim import run  # only the RTL engine needs a simulator

    with tempfile.TemporaryDirectory(prefix="ane-kdma-") as tmp:
        job = Path(tmp) / "job.json"
        out = Path(tmp) / "out.json"
        job.write_text(json.dumps({"settings": asdict(settings), "sequences": sequences}))
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
