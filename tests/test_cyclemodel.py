"""The cycle model: the fast recurrence against the register-level stepped references.

Both engines are written from the RTL independently (one line at a time, one
cycle at a time); they must agree exactly on every counter. The RTL itself is
held to them by tb/.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ane_kdma import cyclemodel as cm
from ane_kdma.errors import InputError
from ane_kdma.hw import (
    PREFETCH_MAX_LINES,
    RATE_ONE,
    RING_LINES,
    CreditMode,
    credit,
    credit_array,
    lap_and_offset,
    line_data,
    line_words,
)
from ane_kdma.profile import load

MODES = list(CreditMode)


def _random_settings(rng: random.Random, agg: int | None = None) -> cm.Settings:
    return cm.Settings(
        latency=rng.randrange(1, 300),
        window=rng.randrange(1, 400),
        core_rate_q16=rng.randrange(RATE_ONE // 10, RATE_ONE + 1),
        agg_rate_q16=agg or 20 * RATE_ONE,
    )


def _same(a: cm.TaskResult, b: cm.TaskResult) -> None:
    assert a.cycles == b.cycles
    for x, y in zip(a.cores, b.cores, strict=True):
        if x is None:
            assert y is None
            continue
        assert (x.cycles, x.zero_credit_cycles, x.peak_inflight, x.issued) == (
            y.cycles,
            y.zero_credit_cycles,
            y.peak_inflight,
            y.issued,
        )
        assert np.array_equal(x.grants, y.grants)
        assert np.array_equal(x.drains, y.drains)


@pytest.mark.parametrize("seed", range(6))
def test_recurrence_equals_stepped_single_core(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        s = _random_settings(rng)
        mode = rng.choice(MODES)
        lines = rng.choice([0, 1, 2, rng.randrange(1, 2500), RING_LINES // 16])
        bp = cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 220)) if seed % 2 else None
        task = [cm.CoreTask(rng.randrange(0, 1 << 26) * 64, lines * 64)]
        _same(cm.run_task(mode, s, task, bp), cm.simulate(mode, s, task, bp))


@pytest.mark.parametrize("seed", range(4))
def test_recurrence_equals_stepped_sequences(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(40):
        s = _random_settings(rng)
        mode = rng.choice(MODES)
        tasks = [
            cm.CoreTask(
                rng.randrange(0, 1 << 20) * 64, rng.choice([0, 1, rng.randrange(1, 900)]) * 64
            )
            for _ in range(rng.randrange(1, 5))
        ]
        bp = cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 200)) if seed % 2 else None
        _same(cm.run_sequence(mode, s, tasks, bp), cm.simulate_sequence(mode, s, tasks, bp))


def test_multicore_recurrence_and_fallback_equal_stepped() -> None:
    rng = random.Random(7)
    for agg in (20 * RATE_ONE, int(2.5 * RATE_ONE), RATE_ONE // 2):
        for _ in range(6):
            s = _random_settings(rng, agg)
            mode = rng.choice(MODES)
            tasks = [
                cm.CoreTask(rng.randrange(0, 1 << 24) * 64, rng.randrange(0, 400) * 64)
                if rng.random() < 0.8
                else None
                for _ in range(rng.choice([2, 5, 16]))
            ]
            _same(cm.run_task(mode, s, tasks), cm.simulate(mode, s, tasks))


def test_tight_ceiling_takes_the_stepped_engine_and_never_exceeds_it() -> None:
    s = cm.Settings(latency=40, window=64, core_rate_q16=RATE_ONE, agg_rate_q16=3 * RATE_ONE)
    tasks = [cm.CoreTask(c * 0x100000, 500 * 64) for c in range(16)]
    res = cm.run_task(CreditMode.FIXED, s, tasks)
    assert res.engine == "stepped"
    grants = np.concatenate([c.grants for c in res.cores if c is not None])
    per_cycle = np.bincount(grants)
    assert per_cycle.max() <= 4  # floor(bank <= 1 line + refill 3 lines)
    assert grants.size / (grants.max() - grants.min() + 1) <= 3.0 + 1e-9


def test_zero_length_and_single_line_exact_timeline() -> None:
    s = cm.Settings(latency=10, window=4, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    assert cm.single(CreditMode.FIXED, s, 0).cycles == 1  # the top's done follows at once
    one = cm.single(CreditMode.FIXED, s, 1)
    # granted in cycle 1, popped in 11, in KMem from 12, drained in 12; top done counted +1
    assert one.cores[0].grants.tolist() == [1]
    assert one.cores[0].drains.tolist() == [12]
    assert one.cycles == 13


def test_zero_credit_starves_to_the_demand_window() -> None:
    """Credit 0: throughput is window / (latency + 2) lines per cycle, exactly in steady state."""
    s = cm.Settings(latency=98, window=10, core_rate_q16=RATE_ONE, agg_rate_q16=20 * RATE_ONE)
    res = cm.single(CreditMode.SIGNED, s, RING_LINES)
    g = res.cores[0].grants
    assert g[5000 + 10] - g[5000] == 100  # one window per round trip of latency + 2
    assert res.cores[0].zero_credit_cycles == g[-1]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name.lower())
def test_credit_formula_matches_vector_form(mode: CreditMode) -> None:
    lines = np.arange(0, 9 * RING_LINES, 37)
    want = [credit(mode, 0, int(n), 0) for n in lines]
    assert credit_array(mode, lines).tolist() == want


def test_credit_hypotheses_shape() -> None:
    k = 3
    for x in range(-300, 301):
        n = k * RING_LINES + x
        lit = credit(CreditMode.LITERAL, 0x3F00, n, 0)
        sig = credit(CreditMode.SIGNED, 0x3F00, n, 0)
        assert sig == min(abs(x), PREFETCH_MAX_LINES)  # the V
        assert lit == (min(x, PREFETCH_MAX_LINES) if x >= 0 else PREFETCH_MAX_LINES)  # one side
        assert credit(CreditMode.FIXED, 0x3F00, n, n - 1) == 1


def test_lap_and_offset() -> None:
    assert lap_and_offset(RING_LINES * 2 - 32) == (2, -32)
    assert lap_and_offset(RING_LINES + 32) == (1, 32)
    assert lap_and_offset(8064) == (0, 8064)


def test_line_data_is_a_pure_function_of_address() -> None:
    w = line_words(np.array([0, 1, 0x3FFFFFF]))
    assert w.shape == (3, 16)
    assert len({int(v) for v in w.ravel()}) == 48
    assert line_data(5) & 0xFFFFFFFF == int(line_words(5)[0, 0])
    assert line_words(1 << 26).tolist() == line_words(0).tolist()  # 26-bit line address


def test_bad_settings_and_tasks_are_input_errors() -> None:
    with pytest.raises(InputError, match="window"):
        cm.Settings(latency=10, window=0, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    with pytest.raises(InputError, match="latency"):
        cm.Settings(latency=5000, window=1, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    with pytest.raises(InputError, match="size"):
        cm.CoreTask(0, 1 << 32)
    with pytest.raises(InputError, match="cores"):
        cm.run_task(CreditMode.FIXED, load().settings, [None] * 17)
    with pytest.raises(InputError, match="transfer"):
        cm.single(CreditMode.FIXED, load().settings, -1)


def test_default_profile_loads() -> None:
    p = load()
    assert p.name == "m3"
    assert p.agg_rate_q16 == int(102.4 * p.ns_per_cycle / 64 * RATE_ONE)
    with pytest.raises(InputError, match="no such profile"):
        load("nonexistent")
