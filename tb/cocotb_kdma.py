"""cocotb tests of kdma_tb_top. The build's hypothesis, cores and geometry come from the design.

Knobs (environment, set by tb/test_kdma.py, parsed by ane_kdma.knobs): KDMA_SEED replays a run,
KDMA_SCALE=small picks the reduced sizes of slow simulators, KDMA_LAPS lists
the laps k of the erratum regression, KDMA_MAX_LINES caps the random
integrity sizes, KDMA_RESULTS names a JSON file for cross-build checks, and
KDMA_JOB the job of the CLI's RTL engine (batch_run).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from ane_kdma import cyclemodel as cm
from ane_kdma import knobs
from ane_kdma import mechanisms as mechs
from ane_kdma.contract import Task
from ane_kdma.hw import LINE_ADDR_BITS, LINE_BYTES, RATE_ONE
from kdma_tb import KdmaTB, drive_task, seed_from_env

LINE_SPACE = 1 << LINE_ADDR_BITS


def _small() -> bool:
    """KDMA_SCALE=small: the reduced sizes tb/test_kdma.py picks for slow simulators."""
    return knobs.get("KDMA_SCALE") == "small"


def _laps() -> list[int]:
    return list(knobs.get("KDMA_LAPS", list(range(1, 9))))  # type: ignore[call-overload]


def _one(tb: KdmaTB, task: Task) -> list[Task | None]:
    return [task] + [None] * (tb.ncores - 1)


def _lines_task(base_line: int, lines: int) -> Task:
    return Task((base_line % LINE_SPACE) * LINE_BYTES, lines * LINE_BYTES)


def _random_settings(rng: random.Random, agg_lines: int = 16) -> cm.Settings:
    """Any run-time settings: latency 1..399, window 1..299, rates down to 1/8 line a cycle
    drawn here; each mechanism the RTL builds (the issue-rate governor, the demand path's
    warm-up) drawn by the registry (mechanisms.draw_settings: one generator, so a mechanism
    built later is drawn here with no edit)."""
    base = {
        "latency": rng.randrange(1, 400),
        "window": rng.randrange(1, 300),
        "core_rate_q16": rng.randrange(RATE_ONE // 8, RATE_ONE + 1),
        "agg_rate_q16": rng.randrange(RATE_ONE, agg_lines * RATE_ONE),
    }
    return cm.Settings(**base, **mechs.draw_settings(rng, base, mechs.rtl_built()))


#: A random draw is redrawn when the model says its run would take longer than this: a
#: governor ramp drawn from near zero (ramp_start_q16 a few 65536ths of a line a cycle)
#: makes a run of a few hundred lines take millions of cycles (one did on Icarus: 2.2 M
#: cycles, 234 s, for 6 cores x 2 tasks of at most 48 lines) and adds nothing the
#: ordinary draws do not check. 32 cycles a line is four times the slowest steady rate a
#: draw sets (a core at 1/8 of a line a cycle; the aggregate at least a line a cycle);
#: the constant covers latency and settle.
AFFORDABLE_BASE_CYCLES = 20_000
AFFORDABLE_CYCLES_PER_LINE = 32


def _affordable(
    tb: KdmaTB,
    settings: cm.Settings,
    per_core: list[list[Task] | None],
    bp: cm.Backpressure | None,
) -> cm.ModelResult | None:
    """The model's result for this draw if its run stays within the budget above, else None
    (the caller hands the result to run_workload, which then does not run the model again)."""
    lines = sum(t.lines_of(LINE_BYTES) for seq in per_core if seq for t in seq)
    model = cm.run(tb.hyp, tb.geometry, settings, cm.job_of(per_core, LINE_BYTES), bp)
    budget = AFFORDABLE_BASE_CYCLES + AFFORDABLE_CYCLES_PER_LINE * lines
    return model if model.cycles <= budget else None


def _random_bp(rng: random.Random, top: int = 160) -> cm.Backpressure:
    return cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(1, top))


@cocotb.test()
async def integrity_random_sizes(dut) -> None:
    """Every line once, in order, right data: random sizes to 8 MiB, bases, back-pressure.

    At the small scale (Icarus) the fixed long run is two ring laps, not eight: it still
    wraps the ring, and the eight-lap run stays on Verilator and in `make regress`.
    """
    rng = random.Random(seed_from_env())
    tb = KdmaTB(dut)
    await tb.start()
    ring = tb.geometry.ring_lines
    max_lines = int(knobs.get("KDMA_MAX_LINES", ring if _small() else 8 * ring))  # type: ignore[call-overload]
    sizes = [(2 if _small() else 8) * ring, 1] + [rng.randrange(1, max_lines + 1) for _ in range(6)]
    for n, lines in enumerate(sizes):
        base = rng.randrange(0, LINE_SPACE - lines)
        bp = _random_bp(rng, 200) if n % 2 else None
        res = await tb.run_task(_one(tb, _lines_task(base, lines)), bp)
        dut._log.info("lines=%d base=%#x bp=%s: %d cycles", lines, base, bp, res.cycles)


@cocotb.test()
async def zero_length_task(dut) -> None:
    """A zero-byte task finishes at once and issues no read."""
    tb = KdmaTB(dut)
    await tb.start()
    res = await tb.run_task(_one(tb, Task(0x4000, 0)))
    assert res.cycles == 1, f"zero-length task took {res.cycles} cycles"
    core = tb.status()[0]
    assert core.issued == 0 and core.drained == 0, core


@cocotb.test()
async def reset_mid_transfer(dut) -> None:
    """Reset during a transfer leaves the engine idle; the next task is correct."""
    rng = random.Random(seed_from_env())
    tb = KdmaTB(dut)
    await tb.start()
    drive_task(dut, _one(tb, _lines_task(0x100, 5000)), None)
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
    await tb.run_task(_one(tb, _lines_task(LINE_SPACE - 100, 300)))
    assert tb.status()[0].wrap, "wrap flag not set for a transfer crossing the top"
    await tb.run_task(_one(tb, _lines_task(LINE_SPACE - 300, 300)))
    assert not tb.status()[0].wrap, "wrap flag set for a transfer that ends at the top"


@cocotb.test()
async def partial_size_rounds_up(dut) -> None:
    """A size that is not a multiple of 64 B is rounded up to whole lines and flagged."""
    tb = KdmaTB(dut)
    await tb.start()
    for size, lines in ((1, 1), (65, 2), (64 * 1000 + 63, 1001)):
        await tb.run_task(_one(tb, Task(0x40000, size)))
        core = tb.status()[0]
        assert core.issued == lines and core.partial, f"{size} B: {core}"
    await tb.run_task(_one(tb, Task(0x40000, 64 * 7)))
    assert not tb.status()[0].partial
    await tb.run_task(_one(tb, Task(0x40000 + 5, 64 * 7)))
    core = tb.status()[0]
    assert core.unaligned and core.issued == 7, core


@cocotb.test()
async def model_matches_rtl_random(dut) -> None:
    """50 random transfers under random run-time settings: every RTL counter == the model's
    (20 at the small scale, on Icarus: the 50 run on Verilator and in `make regress`).
    A draw the model says would run pathologically long is redrawn (_affordable)."""
    rng = random.Random(seed_from_env())
    tb = KdmaTB(dut)
    await tb.start()
    ring = tb.geometry.ring_lines
    for n in range(20 if _small() else 50):
        while True:  # redrawn while the model says the run would be pathologically long
            settings = _random_settings(rng)
            k = rng.randrange(0, 2 if _small() else 3)
            lines = max(1, k * ring + rng.randrange(-300, 301)) if n % 2 else rng.randrange(1, 6000)
            bp = (
                cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 160))
                if n % 3 == 0
                else None
            )
            task = _lines_task(rng.randrange(0, LINE_SPACE // 2), lines)
            per_core = [None if t is None else [t] for t in _one(tb, task)]
            model = _affordable(tb, settings, per_core, bp)
            if model is not None:
                break
        tb.apply(settings)
        await tb.run_workload(per_core, bp, model)


@cocotb.test()
async def erratum_regression(dut) -> None:
    """Cycles at k x ring lines, +/-256, split in half-ring tasks, and the control.

    Each run is checked against the model here; the cross-build ratios (buggy
    against fixed) are asserted by tb/test_kdma.py from the JSON this writes.
    """
    tb = KdmaTB(dut)
    await tb.start()
    ring = tb.geometry.ring_lines
    half = ring // 2
    one = lambda lines: _one(tb, _lines_task(0, lines))  # noqa: E731
    out: dict[str, object] = {"hypothesis": tb.hyp.name, "ring_lines": ring, "laps": {}}
    for k in _laps():
        row = {}
        for key, x in (("x0", 0), ("xm256", -256), ("xp256", 256)):
            row[key] = (await tb.run_task(one(k * ring + x))).cycles
        halves = [_lines_task(part * half, half) for part in range(2 * k)]
        row["split"] = (await tb.run_sequence(halves)).cycles
        out["laps"][str(k)] = row
        dut._log.info("k=%d %s", k, row)
    ctrl = ring - 256
    out["control_whole"] = (await tb.run_task(one(ctrl))).cycles
    first = ctrl // 2
    split = [_lines_task(0, first), _lines_task(first, ctrl - first)]
    out["control_split"] = (await tb.run_sequence(split)).cycles
    path = knobs.get("KDMA_RESULTS")
    if path:
        Path(path).write_text(json.dumps(out, indent=1))


@cocotb.test()
async def multicore_shared_memory(dut) -> None:
    """All cores at once: model match with the ceiling slack and binding, core-count invariance."""
    tb = KdmaTB(dut)
    if tb.ncores == 1:
        return  # single-core build: covered by the tests above
    rng = random.Random(seed_from_env())
    await tb.start()
    lines = 256 if _small() else 2 * tb.geometry.ring_lines // 16  # short: 16 cores stay cheap
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
    job = cm.job_of([[t] for t in tasks])
    free = cm.run(tb.hyp, tb.geometry, replace(tight, agg_rate_q16=16 * RATE_ONE), job)
    res = await tb.run_task(tasks)
    assert res.cycles > 1.5 * free.cycles, f"the ceiling does not bind: {res.cycles} cycles"
    total = sum(t.lines for t in tasks)
    assert total / res.cycles <= 3.3 + 1e-9, "aggregate above the ceiling"


def _sequences(rng: random.Random, ncores: int, top: int) -> list[list[Task] | None]:
    """2..4 tasks on 2..ncores random cores; each core short or long, so some finish early.

    A few tasks are empty, never the last: the model ends a run at its last
    drain, so it would miss the done pulse of a trailing empty task.
    """
    active = set(rng.sample(range(ncores), rng.randint(2, ncores)))
    steps = rng.randint(2, 4)
    per_core: list[list[Task] | None] = []
    for c in range(ncores):
        if c not in active:
            per_core.append(None)
            continue
        hi = top if rng.random() < 0.5 else max(1, top // 16)
        line = rng.randrange(LINE_SPACE)
        seq = []
        for j in range(steps):
            lines = rng.randint(1, hi)
            size = lines * LINE_BYTES - (rng.randrange(LINE_BYTES) if rng.random() < 0.3 else 0)
            if j < steps - 1 and rng.random() < 0.1:
                lines = size = 0
            if rng.random() < 0.3:  # a task elsewhere, not where the last one ended
                line = rng.randrange(LINE_SPACE)
            seq.append(Task((line % LINE_SPACE) * LINE_BYTES, size))
            line += lines
        per_core.append(seq)
    return per_core


@cocotb.test()
async def multicore_sequences(dut) -> None:
    """Random task sequences on many cores at once, every counter against the model.

    Each workload gives 2..4 tasks to each of 2..16 random cores, task j to
    all at once with start_i held high. Sizes differ from core to core, so
    cores with short tasks finish early and the top waits for idle before
    the next task, while equal long ones chain back to back. The first
    workload (equal long tasks on every core) runs at the chip's settings,
    under which such tasks always chain; at random settings they need not
    (seed 1221511280 drew latency 3, window 202 and a governor ramping up
    from 0.03 lines a cycle, none of its 24 runs chained, and
    the draw check failed). The others run at random run-time settings. A
    third of the workloads have back-pressure.
    """
    tb = KdmaTB(dut)
    if tb.ncores == 1:
        return  # the single-core build runs sequences in erratum_regression
    rng = random.Random(seed_from_env())
    await tb.start()
    runs, top = (4, 48) if _small() else (24, 1500)
    waited = chained = 0
    chip_settings = tb.settings  # the chip's (KdmaTB.start applied them)
    for n in range(runs):
        while True:  # redrawn while the model says the run would be pathologically long
            settings = chip_settings if n == 0 else _random_settings(rng)
            if n == 0:  # equal long tasks on every core: back to back throughout
                lines = rng.randint(top // 2, top)
                per_core = [
                    [_lines_task((3 * c + j) * lines, lines) for j in range(3)]
                    for c in range(tb.ncores)
                ]
            else:
                per_core = _sequences(rng, tb.ncores, top)
            bp = _random_bp(rng) if n % 3 == 2 else None
            model = None if n == 0 else _affordable(tb, settings, per_core, bp)
            if n == 0 or model is not None:
                break
        tb.apply(settings)
        res = await tb.run_workload(per_core, bp, model)
        model = tb.model
        waited += model.fresh > 0
        chained += model.fresh != model.accepts[-1]
        dut._log.info(
            "run %d: %d cores x %d tasks, bp %s: %d cycles, accepts %s (idle at %d)",
            n,
            sum(seq is not None for seq in per_core),
            len(model.accepts),
            bp,
            res.cycles,
            model.accepts,
            model.fresh,
        )
    assert waited and chained, f"{waited} runs waited for idle, {chained} chained: widen the draw"


@cocotb.test()
async def batch_run(dut) -> None:
    """The CLI's RTL engine: run the workloads of KDMA_JOB, write their counters to KDMA_RESULTS.

    KDMA_JOB: {"settings": {latency, window, core_rate_q16, agg_rate_q16},
    "workloads": [per workload: [per core: null or [[base_addr, size_bytes], ...]]]}.
    KDMA_RESULTS: {"counters": [per workload: {"cycles": span, "cores": [null or
    [cycles, zero_credit_cycles, peak_inflight]]}]} (ane_kdma.engines.cocotb).
    Every workload is checked against the cycle model, as everywhere else.
    """
    job = json.loads(Path(str(knobs.get("KDMA_JOB"))).read_text())
    tb = KdmaTB(dut, cm.Settings(**job["settings"]))
    await tb.start()
    out = []
    for workload in job["workloads"]:
        per_core = [
            None if seq is None else [Task(int(b), int(s)) for b, s in seq] for seq in workload
        ]
        got = await tb.run_workload(per_core)
        cores = [
            None if c is None else [c.cycles, c.zero_credit_cycles, c.peak_inflight]
            for c in got.cores
        ]
        out.append({"cycles": got.cycles, "cores": cores})
    Path(str(knobs.get("KDMA_RESULTS"))).write_text(json.dumps({"counters": out}))
