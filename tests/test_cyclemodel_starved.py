"""ane_kdma.cyclemodel: the starved-stream mechanisms (the demand window that grows, the demand
path's warm-up) against the register-stepped reference, and what each costs a request."""

from __future__ import annotations

import random
from dataclasses import asdict, replace

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.hw import RATE_ONE

M3 = chips.chips_dir() / "m3"
URL = "https://eiln.github.io/posts/ane-dma.html"
MIB = 1 << 20


def _dwin_settings(rng: random.Random, agg: int) -> cm.Settings:
    """Random settings with a starved-stream mechanism on (the demand window growing, the
    demand path warming up, or both), drawn from the registry (mechanisms.draw_settings)."""
    base = {
        "latency": rng.randrange(1, 300),
        "window": rng.randrange(2, 200),
        "core_rate_q16": rng.randrange(RATE_ONE // 10, RATE_ONE + 1),
        "agg_rate_q16": agg,
    }
    starved = tuple(m.name for m in mechs.REGISTRY if m.starved)
    while True:
        s = cm.Settings(**base, **mechs.draw_settings(rng, base, starved, p=0.6))
        if any(mechs.get(n).active(asdict(s)) for n in starved):
            return s


def _counters(r: cm.ModelResult) -> list:
    return [
        (r.cycles, r.cycles_o, r.accepts, r.fresh),
        *[
            None if c is None else (c.cycles, c.zero_credit_cycles, c.peak_inflight, c.issued)
            for c in r.cores
        ],
    ]


GEOM = chips.load("m3").geometry


@pytest.mark.parametrize("seed", range(10))
def test_starved_mechanisms_recurrence_is_the_reference(seed: int) -> None:
    """The recurrence (with and without its shortcuts) against the register-stepped reference:
    every counter and every line's grant and drain, on random jobs with the demand window
    growing and the demand path warming up."""
    rng = random.Random(20261601 + seed)
    hyp = rng.choice(list(hyps.registry()))
    cores = rng.randrange(1, 4)
    s = _dwin_settings(rng, rng.choice([RATE_ONE, 2 * RATE_ONE, 20 * RATE_ONE]))
    tasks = rng.randrange(1, 3)
    ring = GEOM.ring_lines
    sizes = [
        rng.choice([ring, ring - rng.randrange(1, 300), ring + rng.randrange(1, 300), 700])
        for _ in range(tasks)
    ]
    job = [[(rng.randrange(0, 1 << 20), n) for n in sizes] for _ in range(cores)]
    ref = cm.simulate(hyp, GEOM, s, job)
    for skip in (True, False):
        got = cm.run(hyp, GEOM, s, job, keep_lines=True, skip=skip)
        assert _counters(got) == _counters(ref), (hyp.name, s, sizes, skip)
        for a, b in zip(got.cores, ref.cores, strict=True):
            assert a is not None and b is not None
            assert np.array_equal(a.grants, b.grants) and np.array_equal(a.drains, b.drains)


def test_demand_window_off_changes_nothing() -> None:
    """At or above the window, or 0, the mechanism is off: the cycles are the plain window's."""
    hyp = hyps.get("paged")
    base = cm.Settings(latency=200, window=40, core_rate_q16=RATE_ONE // 2, agg_rate_q16=RATE_ONE)
    job = [[(0, GEOM.ring_lines + 32)], [(0, GEOM.ring_lines + 32)]]
    want = _counters(cm.run(hyp, GEOM, base, job))
    for start in (0, 40):
        s = replace(base, dwin_start_lines=start, dwin_step_lines=7)
        assert not s.dwin and _counters(cm.run(hyp, GEOM, s, job)) == want


def test_demand_window_is_paid_once_per_request() -> None:
    """At the notch every line is starved: the growth costs the same fixed time at every lap
    (the affine shape of Table B), and nothing at full credit (the chunked column)."""
    hyp = hyps.get("paged")
    base = cm.Settings(latency=300, window=64, core_rate_q16=RATE_ONE // 2, agg_rate_q16=RATE_ONE)
    grow = replace(base, dwin_start_lines=48, dwin_step_lines=100)
    ring = GEOM.ring_lines
    extra = []
    for k in (1, 2, 4):
        plain = cm.run(hyp, GEOM, base, [[(0, k * ring)]]).cycles
        extra.append(cm.run(hyp, GEOM, grow, [[(0, k * ring)]]).cycles - plain)
    # 16 window steps of 100 starved lines at 48..63 lines per round trip of 302 cycles
    fluid = sum(100 * 302 * (1 / w - 1 / 64) for w in range(48, 64))
    assert extra[0] == extra[1] == extra[2] and abs(extra[0] - fluid) <= 302, (extra, fluid)
    chunked = [[(0, ring // 2), (ring // 2, ring // 2)]]  # full credit on every line
    assert cm.run(hyp, GEOM, grow, chunked).cycles == cm.run(hyp, GEOM, base, chunked).cycles


def test_demand_warmup_is_paid_once_per_request() -> None:
    """The warm-up's first starved lines pop later: at the notch the same fixed time at every
    lap (n lines at e cycles more per round trip of `window` lines), nothing at full credit."""
    hyp = hyps.get("paged")
    base = cm.Settings(latency=300, window=64, core_rate_q16=RATE_ONE // 2, agg_rate_q16=RATE_ONE)
    warm = replace(base, dwarm_lines=6400, dwarm_extra_cycles=40)
    ring = GEOM.ring_lines
    extra = []
    for k in (1, 2, 4):
        plain = cm.run(hyp, GEOM, base, [[(0, k * ring)]]).cycles
        extra.append(cm.run(hyp, GEOM, warm, [[(0, k * ring)]]).cycles - plain)
    assert extra[0] == extra[1] == extra[2] and abs(extra[0] - 6400 // 64 * 40) <= 40, extra
    chunked = [[(0, ring // 2), (ring // 2, ring // 2)]]
    assert cm.run(hyp, GEOM, warm, chunked).cycles == cm.run(hyp, GEOM, base, chunked).cycles
