"""cocotb tests of kdma_tb_top. The build's CreditMode and NumCores come from the design.

Knobs (environment, set by tb/test_kdma.py): KDMA_SEED replays a run,
KDMA_LAPS lists the laps k of the erratum regression, KDMA_MAX_LINES caps the
random integrity sizes, KDMA_RESULTS names a JSON file for cross-build checks.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from ane_kdma import cyclemodel as cm
from ane_kdma.hw import LINE_BYTES, RATE_ONE, RING_LINES
from kdma_tb import KdmaTB, seed_from_env

MIB_LINES = RING_LINES  # 1 MiB per core


def _small() -> bool:
    """KDMA_SCALE=small: the reduced sizes tb/test_kdma.py picks for slow simulators."""
    return os.environ.get("KDMA_SCALE") == "small"


def _laps() -> list[int]:
    return [int(k) for k in os.environ.get("KDMA_LAPS", "1,2,3,4,5,6,7,8").split(",")]


def _one(tb: KdmaTB, task: cm.CoreTask) -> list[cm.CoreTask | None]:
    return [task] + [None] * (tb.ncores - 1)


def _lines_task(base_line: int, lines: int) -> cm.CoreTask:
    return cm.CoreTask(base_line * LINE_BYTES, lines * LINE_BYTES)


@cocotb.test()
async def integrity_random_sizes(dut) -> None:
    """Every line once, in order, right data: random sizes to 8 MiB, bases, back-pressure."""
    rng = random.Random(seed_from_env())
    tb = KdmaTB(dut)
    await tb.start()
    max_lines = int(os.environ.get("KDMA_MAX_LINES", str(8 * MIB_LINES)))
    sizes = [8 * MIB_LINES, 1] + [rng.randrange(1, max_lines + 1) for _ in range(6)]
    for n, lines in enumerate(sizes):
        base = rng.randrange(0, (1 << 26) - lines)
        bp = None
        if n % 2:
            bp = cm.Backpressure(seed=rng.randrange(1, 1 << 16), threshold=rng.randrange(1, 200))
        res = await tb.run_task(_one(tb, _lines_task(base, lines)), bp)
        dut._log.info("lines=%d base=%#x bp=%s: %d cycles", lines, base, bp, res.cycles)


@cocotb.test()
async def zero_length_task(dut) -> None:
    """A zero-byte task finishes at once and issues no read."""
    tb = KdmaTB(dut)
    await tb.start()
    res = await tb.run_task(_one(tb, cm.CoreTask(0x4000, 0)))
    assert res.cycles == 1, f"zero-length task took {res.cycles} cycles"
    assert res.cores[0].issued == 0 and res.cores[0].drained == 0


@cocotb.test()
async def reset_mid_transfer(dut) -> None:
    """Reset during a transfer leaves the engine idle; the next task is correct."""
    rng = random.Random(seed_from_env())
    tb = KdmaTB(dut)
    await tb.start()
    tb._drive_task(_one(tb, _lines_task(0x100, 5000)), None)
    dut.start_i.value = 1
    await RisingEdge(dut.clk_o)
    dut.start_i.value = 0
    await ClockCycles(dut.clk_o, rng.randrange(10, 3000))
    await tb.reset()
    await ReadOnly()
    core = dut.u_top.g_core[0].u_core
    assert int(dut.idle_o.value) == 1, "not idle after reset"
    assert int(core.u_ring.issued_q.value) == 0 and int(core.kmem_count_q.value) == 0
    assert int(dut.u_top.u_mem.g_port[0].count_q.value) == 0, "reads still queued in memory"
    await RisingEdge(dut.clk_o)
    await tb.run_task(_one(tb, _lines_task(0x2345, 3000)))


@cocotb.test()
async def top_of_address_space_wraps(dut) -> None:
    """Crossing 2^32 wraps to line 0 and raises wrap; ending exactly at the top does not."""
    tb = KdmaTB(dut)
    await tb.start()
    top_line = 1 << 26
    res = await tb.run_task(_one(tb, _lines_task(top_line - 100, 300)))
    assert res.cores[0].wrap, "wrap flag not set for a transfer crossing the top"
    res = await tb.run_task(_one(tb, _lines_task(top_line - 300, 300)))
    assert not res.cores[0].wrap, "wrap flag set for a transfer that ends at the top"


@cocotb.test()
async def partial_size_rounds_up(dut) -> None:
    """A size that is not a multiple of 64 B is rounded up to whole lines and flagged."""
    tb = KdmaTB(dut)
    await tb.start()
    for size, lines in ((1, 1), (65, 2), (64 * 1000 + 63, 1001)):
        res = await tb.run_task(_one(tb, cm.CoreTask(0x40000, size)))
        assert res.cores[0].issued == lines, f"{size} B: issued {res.cores[0].issued}"
        assert res.cores[0].partial
    res = await tb.run_task(_one(tb, cm.CoreTask(0x40000, 64 * 7)))
    assert not res.cores[0].partial
    res = await tb.run_task(_one(tb, cm.CoreTask(0x40000 + 5, 64 * 7)))
    assert res.cores[0].unaligned and res.cores[0].issued == 7


@cocotb.test()
async def model_matches_rtl_random(dut) -> None:
    """50 random transfers under random run-time settings: RTL cycles == model cycles."""
    rng = random.Random(seed_from_env())
    tb = KdmaTB(dut)
    await tb.start()
    for n in range(50):
        settings = cm.Settings(
            latency=rng.randrange(1, 400),
            window=rng.randrange(1, 300),
            core_rate_q16=rng.randrange(RATE_ONE // 8, RATE_ONE + 1),
            agg_rate_q16=rng.randrange(RATE_ONE, 16 * RATE_ONE),
        )
        tb.apply(settings)
        k = rng.randrange(0, 2 if _small() else 3)
        lines = (
            max(1, k * MIB_LINES + rng.randrange(-300, 301)) if n % 2 else rng.randrange(1, 6000)
        )
        bp = (
            cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 160))
            if n % 3 == 0
            else None
        )
        await tb.run_task(_one(tb, _lines_task(rng.randrange(0, 1 << 25), lines)), bp)


@cocotb.test()
async def erratum_regression(dut) -> None:
    """Cycles at k x 0x4000 lines, +/-256, split in 0x2000-line tasks, and the control.

    Each run is checked against the model here; the cross-build ratios (buggy
    against fixed) are asserted by tb/test_kdma.py from the JSON this writes.
    """
    tb = KdmaTB(dut)
    await tb.start()
    one = lambda lines: _one(tb, _lines_task(0, lines))  # noqa: E731
    out: dict[str, object] = {"mode": tb.mode.name, "laps": {}}
    for k in _laps():
        row = {}
        for key, x in (("x0", 0), ("xm256", -256), ("xp256", 256)):
            row[key] = (await tb.run_task(one(k * MIB_LINES + x))).cycles
        halves = [_lines_task(part * 0x2000, 0x2000) for part in range(2 * k)]
        row["split"] = await tb.run_sequence(halves)
        out["laps"][str(k)] = row
        dut._log.info("k=%d %s", k, row)
    ctrl = MIB_LINES - 256
    out["control_whole"] = (await tb.run_task(one(ctrl))).cycles
    half = ctrl // 2
    out["control_split"] = await tb.run_sequence(
        [_lines_task(0, half), _lines_task(half, ctrl - half)]
    )
    path = os.environ.get("KDMA_RESULTS")
    if path:
        with open(path, "w") as fh:
            json.dump(out, fh, indent=1)


@cocotb.test()
async def multicore_shared_memory(dut) -> None:
    """All cores at once: model match with the ceiling slack and binding, core-count invariance."""
    tb = KdmaTB(dut)
    if tb.ncores == 1:
        return  # single-core build: covered by the tests above
    rng = random.Random(seed_from_env())
    await tb.start()
    lines = 256 if _small() else 2 * MIB_LINES // 16  # a short task keeps 16 cores cheap
    latencies = {}
    for active in (1, 2, 4, 8, 16):
        tasks = [_lines_task(c * lines, lines) if c < active else None for c in range(tb.ncores)]
        latencies[active] = (await tb.run_task(tasks)).cycles
    spread = max(latencies.values()) / min(latencies.values()) - 1
    assert spread < 0.02, f"latency depends on core count: {latencies}"
    # a ceiling that binds: 16 cores wanting 1 line/cycle each against 3.3 lines/cycle
    tight = cm.Settings(
        latency=60, window=64, core_rate_q16=RATE_ONE, agg_rate_q16=int(3.3 * RATE_ONE)
    )
    tb.apply(tight)
    tasks = [_lines_task(rng.randrange(0, 1 << 24), rng.randrange(50, 600)) for _ in range(16)]
    want = cm.run_task(tb.mode, tight, tasks)
    assert want.engine == "stepped", "the ceiling was expected to bind"
    res = await tb.run_task(tasks)
    total = sum(t.lines for t in tasks)
    assert total / res.cycles <= 3.3 + 1e-9, "aggregate above the ceiling"


@cocotb.test()
async def batch_run(dut) -> None:
    """Run a job from KDMA_JOB (JSON) and write RTL cycles to KDMA_RESULTS: the CLI's RTL engine.

    Job: {"settings": {...Settings fields...}, "sequences": [[lines, ...], ...]}; each
    sequence is issued back to back on core 0 from line 0, as ane_kdma.engines does.
    Every run is also checked against the cycle model, as everywhere else.
    """
    job = json.loads(open(os.environ["KDMA_JOB"]).read())
    tb = KdmaTB(dut, cm.Settings(**job["settings"]))
    await tb.start()
    cycles = []
    for seq in job["sequences"]:
        tasks, base = [], 0
        for n in seq:
            tasks.append(_lines_task(base, n))
            base += n
        cycles.append(await tb.run_sequence(tasks))
    with open(os.environ["KDMA_RESULTS"], "w") as fh:
        json.dump({"mode": tb.mode.name, "cycles": cycles}, fh)
