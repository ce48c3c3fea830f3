"""The analytic model against the cycle model: within 1% over the issue's grid, and fast.

Grid: sizes from 64 B to 8 MiB per core, the notch at k = 1..8 and offsets
around it, every credit mode, unsplit and split (the workaround). The buggy
modes' unsplit formula is exact, so it is held to exact equality.
"""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from ane_kdma import analytic, engines
from ane_kdma import cyclemodel as cm
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE, RING_LINES, CreditMode, credit_array
from ane_kdma.profile import load

MODES = list(CreditMode)
TOL = 0.01
SMALL = [1, 2, 3, 16, 100, 254, 255, 256, 257, 300, 1000, 4096, 8192, 12288]
NOTCH = [k * RING_LINES for k in range(1, 9)]  # 1 MiB .. 8 MiB per core
OFFSETS = [k * RING_LINES + x for k in (1, 8) for x in (-256, -128, -1, 1, 128, 256)]
SPLIT_SIZES = [RING_LINES + x for x in (-128, 0, 128)] + [2 * RING_LINES]


def _split(lines: int, parts: int) -> list[int]:
    base, extra = divmod(lines, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _check(mode: CreditMode, s: cm.Settings, sizes: list[int], split: int) -> None:
    exact = np.array(engines.cycles("model", mode, s, [_split(n, split) for n in sizes]))
    fast = analytic.core_cycles(mode, s, np.array(sizes), split)
    err = np.abs(fast - exact) / exact
    worst = int(np.argmax(err))
    assert err[worst] <= TOL, (
        f"{mode.name} split {split}: {sizes[worst]} lines, cycle model {exact[worst]}, "
        f"analytic {fast[worst]}"
    )
    if mode.buggy and split == 1:
        assert np.array_equal(fast, exact), "the static-credit formula must be exact"


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name.lower())
def test_grid_unsplit(mode: CreditMode) -> None:
    _check(mode, load().settings, SMALL + NOTCH + OFFSETS, 1)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name.lower())
@pytest.mark.parametrize("split", [2, 4])
def test_grid_split(mode: CreditMode, split: int) -> None:
    _check(mode, load().settings, [n for n in SMALL if n >= split] + SPLIT_SIZES, split)


def test_other_settings() -> None:
    """Not only the fitted profile: random latencies, windows and rates."""
    rng = random.Random(7)
    for _ in range(6):
        s = cm.Settings(
            latency=rng.randrange(100, 1500),
            window=rng.randrange(1, 1025),
            core_rate_q16=rng.randrange(RATE_ONE // 8, RATE_ONE + 1),
            agg_rate_q16=1 << 21,
        )
        for mode in MODES:
            for split in (1, 3):
                _check(mode, s, [3, 255, 300, 2000, RING_LINES - 64, RING_LINES + 64], split)


def test_static_formula_matches_credit() -> None:
    s = load().settings
    n = np.array([RING_LINES - 100, RING_LINES, RING_LINES + 100])
    for mode in (CreditMode.LITERAL, CreditMode.SIGNED):
        want = analytic.core_cycles(mode, s, n)
        got = analytic.static_cycles(s.latency, s.window, s.core_rate_q16, credit_array(mode, n), n)
        assert np.array_equal(want, got)


def test_sweep_is_fast() -> None:
    """A whole D = 64..16384 sweep (N = 4096), every mode, unsplit and split, under a second."""
    s = load().settings
    lines = 8 * np.arange(64, 16385, 64)
    t0 = time.perf_counter()
    for mode in MODES:
        analytic.task_cycles(mode, s, lines)
        analytic.task_cycles(mode, s, lines, 2)
    assert time.perf_counter() - t0 < 1.0


def test_broadcast_modes_and_splits() -> None:
    s = load().settings
    lines = np.array([RING_LINES, RING_LINES, RING_LINES])
    modes = np.array([int(m) for m in MODES])
    together = analytic.core_cycles(modes, s, lines, np.array([1, 2, 1]))
    one_by_one = [
        analytic.core_cycles(CreditMode.LITERAL, s, RING_LINES)[0],
        analytic.core_cycles(CreditMode.SIGNED, s, RING_LINES, 2)[0],
        analytic.core_cycles(CreditMode.FIXED, s, RING_LINES)[0],
    ]
    assert together.tolist() == one_by_one


def test_ceiling_bound() -> None:
    """16 greedy cores cannot beat the aggregate ceiling, and the bound is what limits them."""
    s = cm.Settings(latency=64, window=1024, core_rate_q16=RATE_ONE, agg_rate_q16=int(3.3 * 65536))
    lines = np.array([1000, 5000])
    cyc = analytic.task_cycles(CreditMode.FIXED, s, lines)
    assert np.all(16 * lines / cyc <= 3.3)
    tasks = [cm.CoreTask(c * 1000 * 64, 1000 * 64) for c in range(16)]
    stepped = cm.run_task(CreditMode.FIXED, s, tasks).cycles
    assert abs(cyc[0] - stepped) / stepped < 0.02


@pytest.mark.parametrize(
    ("lines", "split"),
    [(0, 1), (-5, 1), (3, 4), (1 << 26, 1), (1.5, 1), (10, 0)],
)
def test_bad_input(lines: object, split: int) -> None:
    with pytest.raises(InputError):
        analytic.core_cycles(CreditMode.FIXED, load().settings, lines, split)


def test_bad_mode() -> None:
    with pytest.raises(InputError):
        analytic.core_cycles(7, load().settings, 100)
