"""cocotb test behind `make waves`: one transfer of one ring's worth of lines, for the wave dump.

The build's CreditMode decides whether the dump shows the erratum (LITERAL,
SIGNED) or the fix (FIXED). KdmaTB checks the transfer against the cycle model
and the HDL line checker as everywhere else, so a dump is only kept for a
transfer that ran correctly. KDMA_WAVE_LINES overrides the length (default
0x4000 lines, 1 MiB: the notch).
"""

from __future__ import annotations

import os

import cocotb

from ane_kdma import cyclemodel as cm
from ane_kdma.hw import LINE_BYTES, RING_LINES
from kdma_tb import KdmaTB


@cocotb.test()
async def one_transfer(dut) -> None:
    """Core 0 moves KDMA_WAVE_LINES lines from line 0; the other cores stay idle."""
    lines = int(os.environ.get("KDMA_WAVE_LINES", str(RING_LINES)), 0)
    tb = KdmaTB(dut)
    await tb.start()
    tasks = [cm.CoreTask(0, lines * LINE_BYTES)] + [None] * (tb.ncores - 1)
    res = await tb.run_task(tasks)
    dut._log.info(
        "%s: %d lines in %d cycles, %d with zero credit",
        tb.mode.name,
        lines,
        res.cycles,
        res.cores[0].zero_credit_cycles,
    )
