"""The cycle model: the grant-to-grant engine against the register-level stepped reference.

Both are written from the RTL independently (one grant at a time, one cycle at
a time); they must agree exactly on every counter, for one core or sixteen,
one task or a sequence, with or without back-pressure and a binding aggregate
ceiling. The RTL itself is held to them by tb/.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE, lap_and_offset, line_data, line_words

CHIP = chips.load()
G = CHIP.geometry
RING = CHIP.ring_lines
HYPS = hyps.registry()


def _settings(rng: random.Random, agg: int | None = None) -> cm.Settings:
    return cm.Settings(
        latency=rng.randrange(1, 300),
        window=rng.randrange(1, 400),
        core_rate_q16=rng.randrange(RATE_ONE // 10, RATE_ONE + 1),
        agg_rate_q16=agg or 20 * RATE_ONE,
    )


def _same(a: cm.ModelResult, b: cm.ModelResult) -> None:
    assert (a.cycles, a.accepts, a.fresh) == (b.cycles, b.accepts, b.fresh)
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


def _job(rng: random.Random, cores: int, steps: int, same_sizes: bool) -> list:
    sizes = [rng.choice([0, 1, rng.randrange(1, 700)]) for _ in range(steps)]
    job = []
    for _ in range(cores):
        if cores > 1 and rng.random() < 0.2:
            job.append(None)
            continue
        job.append(
            [
                (rng.randrange(0, 1 << 20), sizes[j] if same_sizes else rng.randrange(0, 500))
                for j in range(steps)
            ]
        )
    if all(seq is None for seq in job):
        job[0] = [(0, 10)] * steps
    return job


@pytest.mark.parametrize("seed", range(8))
def test_fast_equals_stepped(seed: int) -> None:
    """Random jobs: 1, 2, 5 or 16 cores, 1-3 tasks, equal or unequal sizes, zero-length tasks."""
    rng = random.Random(seed)
    for _ in range(40):
        agg = rng.choice([20 * RATE_ONE, 13 * RATE_ONE, int(2.5 * RATE_ONE), RATE_ONE // 2])
        s = _settings(rng, agg)
        h = rng.choice(HYPS)
        job = _job(rng, rng.choice([1, 1, 2, 5, 16]), rng.randrange(1, 4), rng.random() < 0.5)
        bp = None
        if seed % 2:
            bp = cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 220))
        _same(cm.run(h, G, s, job, bp), cm.simulate(h, G, s, job, bp))


def test_sixteen_identical_cores_meet_at_the_aggregate_bucket() -> None:
    """Full banks at the start: 16 cores ask in cycle 1, the bucket grants 13; one cycle lost."""
    s = CHIP.settings
    h = hyps.get("signed")
    one = cm.run(h, G, s, [[(0, RING)]])
    many = cm.run(h, G, s, [[(c * RING, RING)] for c in range(16)])
    assert many.cycles == one.cycles + 1
    assert many.cores[0].cycles == one.cores[0].cycles
    first = sorted(int(c.grants[0]) for c in many.cores)
    assert first == [1] * 13 + [2] * 3  # floor(bank of one line + refill 12.8 lines)
    _same(many, cm.simulate(h, G, s, [[(c * RING, RING)] for c in range(16)]))


def test_unequal_cores_make_the_top_wait_for_idle() -> None:
    """A core that drains its task before the others are ready: the next task waits for idle."""
    s = cm.Settings(latency=20, window=8, core_rate_q16=RATE_ONE, agg_rate_q16=20 * RATE_ONE)
    job = [[(0, 4), (0, 4)], [(0, 400), (0, 4)]]
    res = cm.run(hyps.get("fixed"), G, s, job)
    done0 = int(res.cores[0].drains[3])
    done1 = int(res.cores[1].drains[399])
    assert done0 + 2 <= int(res.cores[1].grants[399])  # core 0 finished long before
    assert res.accepts == [0, done1 + 2] and res.fresh == done1 + 2
    assert res.cycles_o == res.cycles - res.fresh
    _same(res, cm.simulate(hyps.get("fixed"), G, s, job))


def test_tight_ceiling_is_never_exceeded() -> None:
    s = cm.Settings(latency=40, window=64, core_rate_q16=RATE_ONE, agg_rate_q16=3 * RATE_ONE)
    job = [[(c * 0x4000, 500)] for c in range(16)]
    res = cm.run(hyps.get("fixed"), G, s, job)
    grants = np.concatenate([c.grants for c in res.cores])
    assert np.bincount(grants).max() <= 4  # floor(bank <= 1 line + refill 3 lines)
    assert grants.size / (grants.max() - grants.min() + 1) <= 3.0 + 1e-9


def test_zero_length_and_single_line_exact_timeline() -> None:
    s = cm.Settings(latency=10, window=4, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    assert cm.run(hyps.get("fixed"), G, s, [[(0, 0)]]).cycles == 1  # done follows at once
    one = cm.run(hyps.get("fixed"), G, s, [[(0, 1)]])
    # granted in cycle 1, popped in 11, in KMem from 12, drained in 12; top done counted +1
    assert one.cores[0].grants.tolist() == [1]
    assert one.cores[0].drains.tolist() == [12]
    assert one.cycles == 13


def test_zero_credit_starves_to_the_demand_window() -> None:
    """Credit 0: throughput is window / (latency + 2) lines per cycle, exactly in steady state."""
    s = cm.Settings(latency=98, window=10, core_rate_q16=RATE_ONE, agg_rate_q16=20 * RATE_ONE)
    res = cm.run(hyps.get("signed"), G, s, [[(0, RING)]])
    g = res.cores[0].grants
    assert g[5000 + 10] - g[5000] == 100  # one window per round trip of latency + 2
    assert res.cores[0].zero_credit_cycles == g[-1]


def test_lap_and_offset() -> None:
    assert lap_and_offset(RING * 2 - 32, RING) == (2, -32)
    assert lap_and_offset(RING + 32, RING) == (1, 32)
    assert lap_and_offset(8064, RING) == (0, 8064)
    assert lap_and_offset(RING // 2, RING) == (1, -RING // 2)  # half rounds up


def test_line_data_is_a_pure_function_of_address() -> None:
    w = line_words(np.array([0, 1, 0x3FFFFFF]))
    assert w.shape == (3, 16)
    assert len({int(v) for v in w.ravel()}) == 48
    assert line_data(5) & 0xFFFFFFFF == int(line_words(5)[0, 0])
    assert line_words(1 << 26).tolist() == line_words(0).tolist()  # 26-bit line address


def test_bad_settings_and_jobs_are_input_errors() -> None:
    with pytest.raises(InputError, match="window"):
        cm.Settings(latency=10, window=0, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    with pytest.raises(InputError, match="latency"):
        cm.Settings(latency=5000, window=1, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    with pytest.raises(InputError, match="window"):
        cm.run(
            hyps.get("fixed"), G, CHIP.settings.__class__(1, 2000, RATE_ONE, RATE_ONE), [[(0, 1)]]
        )
    with pytest.raises(InputError, match="size"):
        cm.CoreTask(0, 1 << 32)
    with pytest.raises(InputError, match="cores"):
        cm.run(hyps.get("fixed"), G, CHIP.settings, [None] * 17)
    with pytest.raises(InputError, match="same number"):
        cm.run(hyps.get("fixed"), G, CHIP.settings, [[(0, 1)], [(0, 1), (0, 1)]])
