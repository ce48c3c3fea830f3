"""cocotb test behind `make waves`: one transfer of one ring's worth of lines, for the wave dump.

The build's hypothesis (its CreditMode encoding) decides whether the dump
shows the erratum (a buggy one: literal, signed) or the fix. KdmaTB checks
the transfer against the cycle model and the HDL line checker as everywhere
else, so a dump is only kept for a transfer that ran correctly.
KDMA_WAVE_LINES overrides the length (default one ring, 0x4000 lines on the
m3: 1 MiB, the notch).
"""

from __future__ import annotations

import cocotb

from ane_kdma import knobs
from ane_kdma.contract import Task
from ane_kdma.hw import LINE_BYTES
from kdma_tb import KdmaTB


@cocotb.test()
async def one_transfer(dut) -> None:
    """Core 0 moves KDMA_WAVE_LINES lines from line 0; the other cores stay idle."""
    tb = KdmaTB(dut)
    lines = int(knobs.get("KDMA_WAVE_LINES", tb.geometry.ring_lines))  # type: ignore[call-overload]
    await tb.start()
    tasks = [Task(0, lines * LINE_BYTES)] + [None] * (tb.ncores - 1)
    res = await tb.run_task(tasks)
    dut._log.info(
        "%s: %d lines in %d cycles, %d with zero credit",
        tb.hyp.name,
        lines,
        res.cycles,
        res.cores[0].zero_credit_cycles,
    )
