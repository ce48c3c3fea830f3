"""The erratum's properties, written once and run on every engine of the contract.

Each test states a fact of erratum.md section 3 as a property of workloads and
asks the engine fixture's engine for the numbers: the closed form (analytic),
the cycle model (model) and the RTL itself (rtl: the batch Verilator harness;
skipped, with the reason, when Verilator is missing). With KDMA_FULL=1 (make
regress) the cocotb engine runs them too, on $SIM.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from ane_kdma import chip as chips
from ane_kdma import contract, knobs, runner
from ane_kdma import hypotheses as hyps
from ane_kdma.contract import Task, Workload
from ane_kdma.errors import InputError

CHIP = chips.load()
LB, RING = CHIP.line_bytes, CHIP.ring_lines
PAGE = CHIP.geometry.prefetch_max_lines
FIXED = hyps.get(hyps.FIXED)
BUGGY = [h for h in hyps.buggy() if h.encoding is not None]


LAPS = list(range(1, 9))


def _engines() -> list[str]:
    """Every engine; the cocotb path only at full scale (tb/test_kdma.py runs it as a testbench
    and holds its counters to the batch engine's)."""
    return [e for e in contract.engine_names() if e != "cocotb" or knobs.full()]


@pytest.fixture(scope="module", params=_engines())
def engine(request: pytest.FixtureRequest) -> str:
    name = request.param
    if name in ("rtl", "cocotb"):
        from ane_kdma.sim import check_simulator

        sim = "verilator" if name == "rtl" else os.environ.get("SIM", "verilator")
        try:
            check_simulator(sim)
        except InputError as exc:
            pytest.skip(f"no simulator for the {name} engine: {exc}")
    return name


def _one(lines: int, split: int = 1, cores: int = 1) -> Workload:
    return Workload.from_size(lines * LB, cores, split, LB)


@pytest.fixture(scope="module")
def laps(engine: str) -> dict[str, dict[int, dict[str, int]]]:
    """Cycles per core at k x 0x4000 + x (x = 0, -256, +256) and split in 0x2000-line tasks."""
    ks = LAPS
    cases = {"x0": 0, "xm": -PAGE, "xp": PAGE}
    out: dict[str, dict[int, dict[str, int]]] = {}
    for h in [FIXED, *BUGGY]:
        loads = [_one(k * RING + x) for k in ks for x in cases.values()]
        loads += [Workload.from_chunks([RING // 2 * LB] * (2 * k), 1, LB) for k in ks]
        res = [r.cycles for r in runner.run_many(engine, h, CHIP, loads)]
        n = len(cases)
        out[h.name] = {
            k: {
                **dict(zip(cases, res[i * n : (i + 1) * n], strict=True)),
                "split": res[-len(ks) + i],
            }
            for i, k in enumerate(ks)
        }
    return out


def test_buggy_collapses_at_every_lap(laps: dict, engine: str) -> None:
    """At k x 0x4000 lines a buggy core is >= 2x slower than the fix and its +-256 shoulders."""
    for k, f in laps[FIXED.name].items():
        lines = k * RING
        for h in BUGGY:
            b = laps[h.name][k]
            assert b["x0"] >= 2 * f["x0"], f"{engine} {h.name} k={k}: {b['x0']} vs fixed {f['x0']}"
            for side, dx in (("xm", -PAGE), ("xp", PAGE)):
                ratio = (b["x0"] / lines) / (b[side] / (lines + dx))
                assert ratio >= 2, f"{engine} {h.name} k={k}: only {ratio:.2f}x slower than {side}"


def test_the_fix_has_no_notch(laps: dict) -> None:
    for k, f in laps[FIXED.name].items():
        per = {
            key: f[key] / (k * RING + dx) for key, dx in (("x0", 0), ("xm", -PAGE), ("xp", PAGE))
        }
        for side in ("xm", "xp"):
            assert abs(per["x0"] / per[side] - 1) < 0.01, f"fixed k={k}: notch at {side}: {per}"


def test_every_lap_costs_the_same_at_the_notch(laps: dict) -> None:
    """A buggy core pays the same for every lap at x = 0 (the floor is flat in k).

    The difference from the fix is not k-proportional: the fix's first lap
    carries the governor's start-up ramp, its later laps run at full rate.
    """
    for h in BUGGY:
        b = laps[h.name]
        per_lap = b[2]["x0"] - b[1]["x0"]
        for k in b:
            if k > 1:
                assert b[k]["x0"] - b[1]["x0"] == pytest.approx((k - 1) * per_lap, rel=0.01), (
                    f"{h.name} k={k}"
                )
        f = laps[FIXED.name]
        if 2 in f:
            assert f[2]["x0"] - f[1]["x0"] < f[1]["x0"], "the fix's later laps run faster"


def test_split_workaround_runs_at_fixed_speed(laps: dict) -> None:
    """1 MiB per lap issued as 512 KiB tasks back to back: within 5% of the fixed design."""
    for h in BUGGY:
        for k, b in laps[h.name].items():
            err = b["split"] / laps[FIXED.name][k]["x0"] - 1
            assert abs(err) < 0.05, f"{h.name} k={k}: split {err:+.2%} vs fixed"


def test_control_split_changes_nothing(engine: str) -> None:
    """Splitting a task that was never in the notch (1 MiB - 16 KiB) gains nothing (< 2%)."""
    n = RING - PAGE
    for h in BUGGY:
        whole, split = (r.cycles for r in runner.run_many(engine, h, CHIP, [_one(n), _one(n, 2)]))
        assert abs(split / whole - 1) < 0.02, f"{h.name}: {whole} -> {split}"


def test_core_count_does_not_matter(engine: str) -> None:
    """Task latency is the same with 1, 2, 4, 8 and 16 active cores, at x = -256 and x = 0."""
    for lines in (RING - PAGE, RING):
        size = lines * LB
        loads = [
            Workload(tuple((Task(c * size, size),) if c < a else None for c in range(CHIP.cores)))
            for a in (1, 2, 4, 8, 16)
        ]
        for h in BUGGY:
            cyc = [r.cycles for r in runner.run_many(engine, h, CHIP, loads)]
            assert max(cyc) / min(cyc) - 1 < 0.02, f"{h.name} at {lines} lines: {cyc}"


def test_only_the_total_matters(engine: str) -> None:
    """Every D x N pair that gives 1 MiB per core is the same workload, so the same time."""
    geo = CHIP.measured.geo
    pairs = ((2048, 4096), (4096, 2048), (1024, 8192), (8192, 1024), (512, 16384))
    loads = {Workload.from_size(int(geo.bytes_per_core(d, n)), 1) for d, n in pairs}
    assert len(loads) == 1
    h = CHIP.hypothesis
    assert contract.run(engine, h, CHIP, loads.pop()).gbps < 20 * CHIP.cores / 16


def test_never_above_the_ceiling(engine: str) -> None:
    """Greedy cores (a line a cycle each, short latency): every result stays under the ceiling."""
    greedy = CHIP.with_profile(
        replace(CHIP.profile, latency_cycles=64, window_lines=1024, core_rate_q16=1 << 16)
    )
    assert greedy.cores * LB / greedy.profile.ns_per_cycle > greedy.ceiling_gbps  # demand above it
    loads = [_one(n, 1, CHIP.cores) for n in (512, 2048, RING + PAGE)]
    for h in hyps.in_rtl():
        for r in runner.run_many(engine, h, greedy, loads):
            assert r.gbps <= greedy.ceiling_gbps
            assert greedy.stream_gbps(r.bytes_total, r.cycles) <= greedy.ceiling_gbps + 1e-9
