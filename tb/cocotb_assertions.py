"""cocotb tests that prove kdma_core's immediate assertions fire (run by tb/test_assertions.py).

Each test upsets one register of core 0 into a state the design can never
reach (a cocotb deposit: the register holds the written value until its next
update, which then starts from it) and checks that the matching bit of the
core's sticky ``assert_fail_q`` is set within two clocks; tb/test_assertions.py
also finds the $error message in the simulator log. Deposit rather than
cocotb's Force: Verilator ignores Force on signals not marked forceable.

Assertions 0 (credit above the clamp) and 1 (issue at the cap) cannot be
reached by an upset: the credit is clamped and req_valid includes the cap test
combinationally, so the assertions guard those lines of RTL against edits.

On Verilator the run needs +verilator+error+limit+N, or the first $error stops
the simulation (which tb/test_assertions.py checks too).
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from ane_kdma import cyclemodel as cm
from ane_kdma.contract import Task
from ane_kdma.hw import LINE_BYTES, RATE_ONE
from kdma_tb import KdmaTB, drive_task

# Bit of assert_fail_q per assertion, in the order of rtl/kdma_core.sv.
CREDIT_CLAMP, ISSUE_AT_CAP, KMEM_OVERFLOW, ISSUED_ABOVE, READ_BEYOND, DONE_EARLY, STRAY_TAIL = (
    range(7)
)
# Bits 7 (more speculative lines than lines, paged builds only) and 8 (governed
# rate above the core rate) guard combinational lines, like bits 0 and 1: no
# register upset reaches them; tools/mutants.py plants the edits they catch.
NAMES = (
    "credit above clamp",
    "issue at cap",
    "outstanding above KMem",
    "issued above lines",
    "read beyond the end",
    "done early",
    "stray tail",
    "more speculative lines than lines",
    "governed rate above the core rate",
)
# Slow enough that KMem fills while the test looks: 40-cycle latency, wide window.
SETTINGS = cm.Settings(latency=40, window=200, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
LINES = 800


def _bits(tb: KdmaTB) -> int:
    return int(tb.dut.u_top.g_core[0].u_core.assert_fail_q.value)


def _names(bits: int) -> str:
    return ", ".join(NAMES[i] for i in range(len(NAMES)) if bits >> i & 1) or "none"


async def _started(dut) -> tuple[KdmaTB, object]:
    """A running 800-line task on core 0, 60 cycles in: lines in flight and in KMem."""
    tb = KdmaTB(dut, SETTINGS)
    await tb.start()
    assert _bits(tb) == 0, "assertion bits set right after reset"
    drive_task(dut, [Task(0x10000, LINES * LINE_BYTES)] + [None] * (tb.ncores - 1), None)
    dut.start_i.value = 1
    await RisingEdge(dut.clk_o)
    dut.start_i.value = 0
    await ClockCycles(dut.clk_o, 60)
    core = dut.u_top.g_core[0].u_core
    assert int(core.cur_busy_q.value) == 1 and int(core.kmem_count_q.value) > 0
    return tb, core


async def _expect(tb: KdmaTB, want: int) -> None:
    await ClockCycles(tb.dut.clk_o, 2)
    await ReadOnly()
    got = _bits(tb)
    tb.dut._log.info(f"assert_fail_q = {got:#09b} ({_names(got)})")
    assert got == want, f"assertion bits {got:#09b} ({_names(got)}), expected {_names(want)}"
    await RisingEdge(tb.dut.clk_o)
    await tb.reset()
    assert _bits(tb) == 0, "reset did not clear the assertion bits"


@cocotb.test()
async def quiet_on_legal_traffic(dut) -> None:
    """Control: legal transfers (back-pressure, a split pair) leave every bit clear."""
    tb = KdmaTB(dut, SETTINGS)
    await tb.start()
    one = [None] * (tb.ncores - 1)
    await tb.run_task([Task(0, 3000 * LINE_BYTES), *one], cm.Backpressure(0x1234, 150))
    await tb.run_sequence([Task(0, 500 * LINE_BYTES), Task(500 * 64, 700 * 64)])
    await ReadOnly()
    assert _bits(tb) == 0, f"assertions fired on legal traffic: {_names(_bits(tb))}"


@cocotb.test()
async def kmem_overflow_fires(dut) -> None:
    """outstanding <= KMem: 1025 lines waiting in a 1024-line KMem."""
    tb, core = await _started(dut)
    core.kmem_count_q.value = tb.geometry.kmem_lines + 1
    await _expect(tb, 1 << KMEM_OVERFLOW)


@cocotb.test()
async def issued_beyond_lines_fires(dut) -> None:
    """issued <= lines, and no read beyond the end: issued jumps past the task's length."""
    tb, core = await _started(dut)
    core.u_ring.issued_q.value = LINES + 3
    await _expect(tb, 1 << ISSUED_ABOVE | 1 << READ_BEYOND)


@cocotb.test()
async def done_early_fires(dut) -> None:
    """done only when every line is issued and drained: consumed jumps to the last line."""
    tb, core = await _started(dut)
    assert int(core.u_ring.issued_q.value) < LINES
    core.consumed_q.value = LINES - 1
    await _expect(tb, 1 << DONE_EARLY)


@cocotb.test()
async def stray_tail_fires(dut) -> None:
    """A tail line drains only behind a current task: an idle core given a tail and a line."""
    tb = KdmaTB(dut, SETTINGS)
    await tb.start()
    core = dut.u_top.g_core[0].u_core
    await RisingEdge(dut.clk_o)
    core.tail_q.value = 2
    core.kmem_count_q.value = 1
    await _expect(tb, 1 << STRAY_TAIL)
