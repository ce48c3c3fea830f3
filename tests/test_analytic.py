"""The analytic engine against the cycle-model engine: within 1% over a grid, exact where it claims.

Grid: sizes from 64 B to 8 MiB per core, the notch at k = 1..8 and offsets
around it, every hypothesis, unsplit and split (the workaround). One static
task has an exact formula, so it is held to exact equality. With the demand
path's warm-up (the starved stream's mechanism) the engine is held to its
stated 2% on the notch, the V, Tables B and C and a random set, and
calibrate's closed form (governor_grid) to the cycle.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import contract, runner
from ane_kdma import hypotheses as hyps
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE

CHIP = chips.load()
RING = CHIP.ring_lines
TOL = 0.01
RAMP_TOL = 0.02  # a random governor on the paged reading: its phases are joined approximately
SMALL = [1, 2, 3, 16, 100, 254, 255, 256, 257, 300, 1000, 4096, 8192, 12288]
NOTCH = [k * RING for k in range(1, 9)]  # 1 MiB .. 8 MiB per core
OFFSETS = [k * RING + x for k in (1, 8) for x in (-256, -128, -1, 1, 128, 256)]
SPLIT_SIZES = [RING + x for x in (-128, 0, 128)] + [2 * RING]
IDS = [h.name for h in hyps.registry()]


def _chip(latency: int, window: int, rate: int, ramp: bool = False) -> chips.Chip:
    """The m3 chip with other run-time inputs; its governor off unless asked."""
    p = CHIP.profile
    gov = {} if ramp else {"ramp_start_q16": 0, "ramp_inc_q16": 0}
    return CHIP.with_profile(
        replace(p, latency_cycles=latency, window_lines=window, core_rate_q16=rate, **gov)
    )


FLAT = _chip(CHIP.profile.latency_cycles, CHIP.profile.window_lines, CHIP.profile.core_rate_q16)


def _check(
    h: hyps.Hypothesis, chip: chips.Chip, sizes: list[int], split: int, tol: float = TOL
) -> None:
    lb = chip.line_bytes
    loads = [Workload.from_size(n * lb, 1, split, lb) for n in sizes]
    exact = np.array([r.cycles for r in runner.run_many("model", h, chip, loads)])
    fast = np.array([r.cycles for r in runner.run_many("analytic", h, chip, loads)])
    err = np.abs(fast - exact) / exact
    worst = int(np.argmax(err))
    assert err[worst] <= tol, (
        f"{h.name} split {split}: {sizes[worst]} lines, cycle model {exact[worst]}, "
        f"analytic {fast[worst]}"
    )
    if h.static and split == 1 and not chip.settings.ramp:
        assert np.array_equal(fast, exact), "the static-credit formula must be exact"


@pytest.mark.parametrize("h", hyps.registry(), ids=IDS)
@pytest.mark.parametrize("chip", [CHIP, FLAT], ids=["fitted", "no-governor"])
def test_grid_unsplit(h: hyps.Hypothesis, chip: chips.Chip) -> None:
    _check(h, chip, SMALL + NOTCH + OFFSETS, 1)


@pytest.mark.parametrize("h", hyps.registry(), ids=IDS)
@pytest.mark.parametrize("split", [2, 4])
def test_grid_split(h: hyps.Hypothesis, split: int) -> None:
    _check(h, CHIP, [n for n in SMALL if n >= split] + SPLIT_SIZES, split)


def test_other_settings() -> None:
    """Not only the fitted profile: random latencies, windows and rates."""
    rng = random.Random(7)
    for _ in range(6):
        chip = _chip(
            rng.randrange(100, 1500),
            rng.randrange(1, 1025),
            rng.randrange(RATE_ONE // 8, RATE_ONE),
            ramp=rng.random() < 0.5,
        )
        for h in hyps.registry():
            for split in (1, 3):
                tol = RAMP_TOL if h.progress == "paged" and chip.settings.ramp else TOL
                _check(h, chip, [3, 255, 300, 2000, RING - 64, RING + 64], split, tol)


def test_multicore_workloads_take_the_slowest_core() -> None:
    """Unlike cores: the workload's cycles are its slowest core's (the ceiling is the chip's)."""
    lb = CHIP.line_bytes
    h = hyps.get("signed")
    cores = tuple((contract.Task(c * RING * lb, (RING + 64 * c) * lb),) for c in range(4))
    res = contract.run("analytic", h, CHIP, Workload(cores))
    alone = [
        contract.run("analytic", h, CHIP, Workload.from_size((RING + 64 * c) * lb, 1)).cycles
        for c in range(4)
    ]
    assert res.cycles == max(alone)
    assert [c.cycles + 1 for c in res.cores] == alone


def test_settings_grid_is_the_engines_formula() -> None:
    """What calibration searches over (the governor grid) equals the engine for a static task,
    the profile's demand warm-up included (at RING and its multiples every line starves)."""
    assert CHIP.settings.ramp  # the fitted profile's governor: one step
    assert CHIP.settings.dwarm  # and its demand warm-up
    n = np.array([100, 4096, RING - 300, RING - 100, RING, RING + 100, 3 * RING, 5 * RING + 7])
    for h in (h for h in hyps.buggy() if h.static):
        want = [r.cycles for r in runner.run_many("analytic", h, CHIP, [_one(x) for x in n])]
        got = _grid(CHIP, h.credit_array(CHIP.geometry, n), n)
        assert got.tolist() == want


def _one(lines: int) -> Workload:
    return Workload.from_size(int(lines) * CHIP.line_bytes, 1)


def test_a_hypothesis_without_a_closed_form_is_refused() -> None:
    odd = replace(hyps.get("fixed"), name="paged-test", progress="static")
    object.__setattr__(odd, "progress", "spiral")  # a form the analytic engine does not have
    with pytest.raises(InputError, match="no closed form"):
        contract.run("analytic", odd, CHIP, _one(100))


# ---------------------------------------------------------------- the demand path's warm-up
# The analytic engine follows the winner within 2% of the cycle model (its stated accuracy),
# as the governor was built. The fit of docs/fidelity_fits.json and two other (lines, extra) pairs:
# a short, steep warm-up, and one longer than a 2 MiB request (every line of k <= 2 warm).
WARM_FIT = {
    "latency_cycles": 576,
    "window_lines": 88,
    "core_rate_q16": 33292,
    "ramp_start_q16": 20376,
    "ramp_step_lines": 8771,
    "ramp_inc_q16": 12916,
}
WARM_PAIRS = [(16916, 56), (2000, 300), (40000, 40)]
WARM_IDS = [f"{n}x{e}" for n, e in WARM_PAIRS]


def _warm_chip(lines: int, extra: int) -> chips.Chip:
    """The demand-warmup fit's knobs (docs/fidelity_fits.json) with the given warm-up."""
    return CHIP.with_profile(
        replace(CHIP.profile, **WARM_FIT, dwarm_lines=lines, dwarm_extra_cycles=extra)
    )


def _grid(chip: chips.Chip, credit: np.ndarray, n: np.ndarray, warm: bool = True) -> np.ndarray:
    s = chip.settings
    return contract.get_engine("analytic").governor_grid(
        chip,
        latency=np.array(s.latency),
        window=np.array(s.window),
        rate=np.array(s.core_rate_q16),
        ramp_start=np.array(s.ramp_start_q16),
        ramp_lines=np.array(s.ramp_step_lines),
        steps=1,
        credit=credit,
        lines=n,
        **({"dwarm_lines": s.dwarm_lines, "dwarm_extra": s.dwarm_extra_cycles} if warm else {}),
    )


@pytest.mark.parametrize(("lines", "extra"), WARM_PAIRS, ids=WARM_IDS)
def test_governor_grid_follows_the_demand_warmup(lines: int, extra: int) -> None:
    """Calibrate's closed form at the notch (credit 0, every line starved) for k = 1..8 laps.

    Exact up to the fluid token path's rounding (a cycle per rate step); the issue asks 2%.
    At full credit no line is starved: the warm-up changes nothing, to the cycle.
    """
    chip = _warm_chip(lines, extra)
    h = hyps.get("signed")
    notch = np.array(NOTCH)
    credit = h.credit_array(CHIP.geometry, notch)
    assert np.all(credit == 0)
    want = np.array([r.cycles for r in runner.run_many("model", h, chip, [_one(x) for x in notch])])
    got = _grid(chip, credit, notch)
    assert np.abs(got - want).max() <= 2, (want.tolist(), got.tolist())
    # what calibration searches over is the engine's formula, with the warm-up too
    assert got.tolist() == _cycles("analytic", h, chip, [_one(x) for x in notch]).tolist()
    off = _grid(chip, credit, notch, warm=False)
    assert np.all(got > off)  # the warm-up is in the figure (every lap pays some of it)
    full = np.array([RING - 256, RING + 256, 4 * RING + 256, 8 * RING - 256])
    cf = h.credit_array(CHIP.geometry, full)
    assert np.all(cf > 0)
    assert _grid(chip, cf, full).tolist() == _grid(chip, cf, full, warm=False).tolist()
    want_full = [r.cycles for r in runner.run_many("model", h, chip, [_one(x) for x in full])]
    assert _grid(chip, cf, full).tolist() == want_full


# The engine with the warm-up, against the cycle model ("model" engine, one core). The
# tolerance is the engine's stated accuracy: within 2% of the cycle model, as the governor
# was built. The worst seen by these tests: notch and Table C 0.41% (the fix,
# the same with the warm-up off), the V 0.44% (signed, likewise; the paged reading 0.17% under
# the fit, 0.54% at 17 points under 2000 x 300),
# Table B 0.06%, the random set 0.53% (paged, 2 tasks).
WARM_TOL = 0.02
V_FULL = list(range(-256, 257, 32))  # 17 points of the V around each notch
V_FEW = list(range(-256, 257, 64))  # 9: the other pairs, to keep the suite's budget


def _groups(vx: list[int], tables: bool) -> dict[str, list[Workload]]:
    """The notch, the V at k = 1, 2, 8, and (tables) Table B's chunks and Table C, one core."""
    lb = CHIP.line_bytes
    half = RING // 2  # Table B's 512 KiB tasks
    out = {
        "notch": [_one(k * RING) for k in range(1, 9)],
        **{f"V k={k}": [_one(k * RING + x) for x in vx] for k in (1, 2, 8)},
    }
    if tables:
        out["Table B chunked"] = [
            Workload.from_chunks([half * lb] * (2 * m), 1, lb) for m in range(1, 9)
        ]
        out["Table C"] = [
            Workload.from_chunks([n * lb] * (0x4000 // n), 1, lb) for n in (0x4000, 0x2000, 0x1000)
        ]
    return out


def _cycles(engine: str, h: hyps.Hypothesis, chip: chips.Chip, loads: list[Workload]) -> np.ndarray:
    return np.array([r.cycles for r in runner.run_many(engine, h, chip, loads)])


@pytest.mark.parametrize(
    ("lines", "extra", "vx"),
    [(16916, 56, V_FULL), (2000, 300, V_FEW), (20000, 40, V_FEW)],
    ids=["fit-16916x56", "2000x300", "20000x40"],
)
def test_the_engine_follows_the_demand_warmup(lines: int, extra: int, vx: list[int]) -> None:
    """Every reading: the notch k = 1..8, the V at k = 1, 2, 8; under the fit, Tables B and C.

    The fit's warm-up (docs/fidelity_fits.json), a short and steep one, and one longer than
    a 1 MiB request. Table B's chunks and Table C's splits have credit on every line (the
    warm-up changes nothing there, next test), so they run under the fit only, as the V's
    17 points do: the model engine's V at k = 8 is most of this file's cost.
    """
    chip = _warm_chip(lines, extra)
    off = _warm_chip(0, 0)
    for h in hyps.registry():
        for name, loads in _groups(vx, vx is V_FULL).items():
            exact = _cycles("model", h, chip, loads)
            err = (_cycles("analytic", h, chip, loads) - exact) / exact
            worst = int(np.argmax(np.abs(err)))
            assert abs(err[worst]) <= WARM_TOL, (h.name, name, loads[worst].label, err[worst])
            if name == "notch" and h.static:  # every line starved: the warm-up is in the figure
                assert np.all(exact > _cycles("model", h, off, loads)), h.name


def test_the_engine_follows_the_demand_warmup_on_random_work() -> None:
    """A seeded random set of warm-ups (some longer than the request) and of tasks near the
    notch, one to three back to back: within 2% on the fit's knobs; with the latency and
    window drawn too, the warm-up makes the engine's error at most 0.5 points worse.

    Why two bounds: off the fit, the engine's own joins (the governor at each task's mean
    rate over back-to-back tasks) already miss some such workloads by up to 7% with the
    warm-up off; that is not the warm-up's error, so there the test bounds what it adds.
    """
    rng = random.Random(16)
    moved = total = 0
    for draw in range(4):
        p = replace(
            CHIP.profile,
            **WARM_FIT,
            dwarm_lines=rng.choice([rng.randrange(1, 4096), rng.randrange(4096, 3 * RING)]),
            dwarm_extra_cycles=rng.randrange(1, 800),
        )
        if draw % 2:
            p = replace(
                p, latency_cycles=rng.randrange(300, 900), window_lines=rng.randrange(48, 129)
            )
        on, off = CHIP.with_profile(p), CHIP.with_profile(replace(p, dwarm_lines=0))
        for h in hyps.registry():
            loads = []
            for _ in range(3):
                split = rng.randrange(1, 4)
                n = rng.randrange(1, 3) * RING + rng.choice([0, 0, rng.randrange(-256, 257, 16)])
                loads.append(Workload.from_size(split * n * CHIP.line_bytes, 1, split))
            model = [_cycles("model", h, c, loads) for c in (on, off)]
            fast = [_cycles("analytic", h, c, loads) for c in (on, off)]
            err_on, err_off = (fast[0] - model[0]) / model[0], (fast[1] - model[1]) / model[1]
            where = (h.name, p.latency_cycles, p.window_lines, p.dwarm_lines, p.dwarm_extra_cycles)
            if draw % 2:
                assert np.all(np.abs(err_on) <= np.abs(err_off) + 0.005), (where, err_on, err_off)
            else:
                assert np.abs(err_on).max() <= WARM_TOL, (where, [w.label for w in loads], err_on)
            moved += int(np.count_nonzero(model[0] != model[1]))
            total += len(loads)
    assert moved >= total // 3, (moved, total)  # the warm-up is in a good share of them


def test_the_demand_warmup_changes_nothing_at_full_credit() -> None:
    """Every reading: with credit on every line no line is starved, so the warm-up gives the
    very cycles it gives off (the nominal stream keeps the governor's fit): on the analytic
    engine for Table B's chunks, Table C's splits and off the notch; on the cycle model for
    Table C's splits (tests/test_fidelity.py holds its chunks)."""
    on, off = _warm_chip(16916, 56), _warm_chip(0, 0)
    tables = _groups([], True)
    loads = tables["Table B chunked"] + tables["Table C"][1:]
    loads += [_one(k * RING + 256) for k in (1, 4)]
    for h in hyps.registry():
        assert _cycles("analytic", h, on, loads).tolist() == (
            _cycles("analytic", h, off, loads).tolist()
        ), h.name
        split = tables["Table C"][1:]
        assert _cycles("model", h, on, split).tolist() == (
            _cycles("model", h, off, split).tolist()
        ), h.name
    notch = [_one(RING)]  # and where lines are starved, it does change them
    paged = hyps.get("paged")
    assert _cycles("analytic", paged, on, notch)[0] > _cycles("analytic", paged, off, notch)[0]


def test_the_analytic_engine_refuses_a_starved_mechanism_it_has_no_closed_form_for() -> None:
    """Not silently the plain window: one line naming the engine that has them."""
    from ane_kdma import analytic
    from ane_kdma.errors import InputError
    from ane_kdma.profile import Settings

    base = Settings(latency=300, window=64, core_rate_q16=RATE_ONE // 2, agg_rate_q16=RATE_ONE)
    # the demand path's warm-up has one now (this file holds it to the model)
    for s in (replace(base, dwin_start_lines=48, dwin_step_lines=100),):
        with pytest.raises(InputError, match="use --engine model"):
            analytic.check_settings(s)
    analytic.check_settings(base)  # off: the closed form holds
    analytic.check_settings(replace(base, dwarm_lines=6400, dwarm_extra_cycles=40))
