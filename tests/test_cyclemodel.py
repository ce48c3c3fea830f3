"""The cycle model: the grant-to-grant engine against the register-level stepped reference.

Both are written from the RTL independently (one grant at a time, one cycle at
a time); they must agree exactly on every counter, for one core or sixteen,
one task or a sequence, with or without back-pressure and a binding aggregate
ceiling, under every rate mechanism. The fast engine's shortcuts (shadow
cores, jumped periods, the token bucket's closed form) are held to the
stepped reference on jobs small enough for it, and to the fast engine
without them (``skip=False``) on jobs of several laps, where they do jump.
The RTL itself is held to them by tb/.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE, lap_and_offset, line_data, line_words

CHIP = chips.load()
G = CHIP.geometry
RING = CHIP.ring_lines
HYPS = hyps.registry()
IDS = [h.name for h in HYPS]
RAMP = {"ramp_start_q16": 20000, "ramp_step_lines": 8000, "ramp_inc_q16": 14000}


def _random_settings(
    rng: random.Random, agg: int | None = None, mechanisms: bool = False
) -> cm.Settings:
    """Random settings for this file's jobs: the base inputs drawn here (small latencies and
    windows, so jobs small enough for the stepped reference still show their effects) and,
    when asked, every registered mechanism's inputs through the registry's own draw
    (:func:`ane_kdma.mechanisms.draw_settings`), so a new mechanism is fuzzed here with no
    edit to this file. A test that runs the stepped reference bounds its cost with
    :func:`_within_budget` once its job is drawn."""
    rate = rng.randrange(RATE_ONE // 10, RATE_ONE + 1)  # in the order these were always drawn
    latency, window = rng.randrange(1, 300), rng.randrange(1, 400)
    base = {
        "latency": latency,
        "window": window,
        "core_rate_q16": rate,
        "agg_rate_q16": agg or 20 * RATE_ONE,
    }
    return cm.Settings(**base, **(mechs.draw_settings(rng, base) if mechanisms else {}))


#: The governor's extra core-cycles a job may cost the stepped reference (see _within_budget).
GOVERNOR_BUDGET = 250_000


def _governor_extra(s: cm.Settings, job: list) -> float:
    """Core-cycles the governor adds over the core rate, as the stepped reference pays them:
    it steps every core every cycle, so the busiest core's extra cycles times the cores.
    Each task counted as a request from the governor's start (an upper bound: a task taken
    while the core is busy continues the ramp)."""
    if not s.ramp:
        return 0.0

    def extra(n: int) -> float:
        out, j, r = 0.0, 0, s.ramp_start_q16
        while j < n and r < s.core_rate_q16:  # a step of lines at each rate below the core's
            seg = min(s.ramp_step_lines, n - j)
            out += seg * (RATE_ONE / max(r, 1) - RATE_ONE / s.core_rate_q16)
            j, r = j + seg, r + s.ramp_inc_q16
        return out

    busiest = max(sum(extra(n) for _, n in seq) for seq in job if seq)
    return len(job) * busiest


def _within_budget(rng: random.Random, s: cm.Settings, job: list) -> cm.Settings:
    """`s`, or its mechanism inputs drawn again (the same base, the registry's ranges) until
    the governor adds at most GOVERNOR_BUDGET core-cycles to `job` on the stepped reference.

    Why: the reference steps every core every cycle in Python (about 6 us a core-cycle
    here), and the registry's governor draws (steps of up to 9000 lines from start rates of
    a few Q.16 units) put a few jobs at millions of extra core-cycles: one seed of
    test_mechanisms_and_shadows_equal_stepped took 308 s against 12 s. The bound is the
    largest extra this file's own generator gave on the seeds these tests use (207,474
    core-cycles; 98.5% of its draws over 200 seeds were under 250,000). A long slow ramp
    is one governor segment after another, the same code at any length; the fast engine's
    jumps over a long ramp (8000-line steps, 40,000 lines on 16 cores) are held to every
    grant stepped by test_skipping_equals_stepping_on_multi_lap_jobs.

    The tests that call this draw settings from a stream of their own, apart from the jobs'
    stream: a mechanism added to the registry (one more draw) changes the settings, not the
    jobs, so not which jobs the reference steps nor what they cost."""
    base = {k: getattr(s, k) for k in ("latency", "window", "core_rate_q16", "agg_rate_q16")}
    while _governor_extra(s, job) > GOVERNOR_BUDGET:
        s = cm.Settings(**base, **mechs.draw_settings(rng, base))
    return s


def _counters(r: cm.ModelResult) -> list:
    return [
        (r.cycles, r.cycles_o, r.accepts, r.fresh),
        *[
            None if c is None else (c.cycles, c.zero_credit_cycles, c.peak_inflight, c.issued)
            for c in r.cores
        ],
    ]


def _same(a: cm.ModelResult, b: cm.ModelResult) -> None:
    """Every counter equal; every line's grant and drain too, where both kept them."""
    assert _counters(a) == _counters(b)
    for x, y in zip(a.cores, b.cores, strict=True):
        if x is None or x.grants is None or y is None or y.grants is None:
            continue
        assert np.array_equal(x.grants, y.grants)
        assert np.array_equal(x.drains, y.drains)


def _exact(
    h: hyps.Hypothesis, s: cm.Settings, job: list, bp: cm.Backpressure | None = None
) -> cm.ModelResult:
    """run, with and without its shortcuts and its lines, against simulate."""
    ref = cm.simulate(h, G, s, job, bp)
    fast = cm.run(h, G, s, job, bp, keep_lines=True)
    _same(fast, ref)
    _same(cm.run(h, G, s, job, bp), ref)
    _same(cm.run(h, G, s, job, bp, keep_lines=True, skip=False), ref)
    return fast


@pytest.fixture
def shortcuts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """Counts the fast engine's shortcuts as they happen (a test may require some)."""
    seen: Counter = Counter()
    eng = cm.engine.Engine
    shadow, jump, token, unshadow = eng.shadow, eng.period_jump, eng.token_jump, eng.unshadow

    def spy_shadow(self: cm.engine.Engine, lead: cm.group.Group, fols: list, deltas: list) -> None:
        seen["followers" if fols else "solo"] += 1
        return shadow(self, lead, fols, deltas)

    def spy_jump(self: cm.engine.Engine, *a: object) -> bool:
        done = jump(self, *a)
        seen["period"] += done
        return done

    def spy_token(self: cm.engine.Engine, *a: object) -> bool:
        done = token(self, *a)
        seen["token"] += done
        return done

    def spy_unshadow(self: cm.engine.Engine, lead: cm.group.Group, fols: list, *rest: list) -> None:
        ys = rest[0]
        if fols and (lead.issuing or min(ys) < lead.x):
            seen["refused"] += 1  # the bucket refused a follower: back to the general loop
        return unshadow(self, lead, fols, *rest)

    monkeypatch.setattr(eng, "shadow", spy_shadow)
    monkeypatch.setattr(eng, "period_jump", spy_jump)
    monkeypatch.setattr(eng, "token_jump", spy_token)
    monkeypatch.setattr(eng, "unshadow", spy_unshadow)
    yield seen


def _job(rng: random.Random, cores: int, steps: int, same_sizes: bool, top: int = 700) -> list:
    sizes = [rng.choice([0, 1, rng.randrange(1, top)]) for _ in range(steps)]
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
        s = _random_settings(rng, agg)
        h = rng.choice(HYPS)
        job = _job(rng, rng.choice([1, 1, 2, 5, 16]), rng.randrange(1, 4), rng.random() < 0.5)
        bp = None
        if seed % 2:
            bp = cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 220))
        _exact(h, s, job, bp)


@pytest.mark.parametrize("seed", range(8))
def test_mechanisms_and_shadows_equal_stepped(seed: int, shortcuts: Counter) -> None:
    """The rate mechanisms, the page-granular reading near the notch, identical cores.

    Identical cores (same sizes, any bases) run as a leader and shifted
    followers; sizes of a few thousand lines let periods be found and jumped.
    """
    rng = random.Random(100 + seed)
    own = random.Random(-100 - seed)  # the settings' own stream (_within_budget says why)
    for _ in range(12):
        agg = rng.choice([838860, 20 * RATE_ONE, 13 * RATE_ONE, int(2.5 * RATE_ONE)])
        s = _random_settings(own, agg, mechanisms=True)
        h = rng.choice(HYPS)
        cores = rng.choice([1, 2, 16, 16])
        steps = rng.choice([1, 1, 2, 3])
        if h.name == "paged" and rng.random() < 0.6:  # near the notch: partial page credits
            sizes = [max(1, rng.choice([4096, 16384]) + rng.randrange(-300, 301))] * steps
        else:
            sizes = [rng.choice([0, 1, 257, rng.randrange(300, 3000)]) for _ in range(steps)]
        if not any(sizes):
            sizes[0] = 100
        job = []
        for _c in range(cores):
            base, seq = rng.randrange(0, 1 << 20), []
            for n in sizes:
                seq.append((base, n))
                base += n
            job.append(seq)
        if cores > 2 and rng.random() < 0.2:  # one core with other work
            job[rng.randrange(cores)] = [(b, max(0, n + rng.randrange(-40, 40))) for b, n in seq]
        bp = None
        if rng.random() < 0.15:
            bp = cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(0, 150))
        _exact(h, _within_budget(own, s, job), job, bp)
    assert shortcuts["followers"] + shortcuts["solo"]


def test_shadows_fall_back_when_the_bucket_refuses(shortcuts: Counter) -> None:
    """Sixteen cores near the aggregate ceiling: now and then the bucket refuses a follower."""
    s = cm.Settings(latency=61, window=187, core_rate_q16=29313, agg_rate_q16=516425)
    job = [[(c * 100_003, 812)] for c in range(16)]
    _exact(hyps.get("literal"), s, job)
    s = cm.Settings(latency=43, window=55, core_rate_q16=30656, agg_rate_q16=497630)
    job = [[(c * 77_777, 1005)] * 2 for c in range(16)]
    _exact(hyps.get("signed"), s, job)
    assert shortcuts["refused"] >= 2


def test_periods_and_the_token_form_equal_stepped(shortcuts: Counter) -> None:
    """A small chip (1024-line ring, 256-line KMem): steady state comes early enough for simulate.

    Near the notch the credit is small: demand-gated bursts, short periods,
    jumped; far from it the token bucket alone paces: the closed form.
    """
    g = hyps.Geometry(line_bytes=64, ring_bits=10, prefetch_max_lines=64, kmem_lines=256)
    base = cm.Settings(latency=30, window=6, core_rate_q16=RATE_ONE // 3, agg_rate_q16=838860)
    cases = [
        (base, 1024 + 5),
        (base, 2 * 1024 - 3),
        (replace(base, core_rate_q16=21000, window=20), 1500),
        (replace(base, **{**RAMP, "ramp_step_lines": 300}), 1024 + 40),
        (replace(base, window=40, task_gap_cycles=7, warm_lines=100, warm_extra_cycles=9), 1030),
    ]
    for h in HYPS:
        for s, n in cases:
            job = [[(c * n, n)] for c in range(16)]
            ref = cm.simulate(h, g, s, job)
            _same(cm.run(h, g, s, job, keep_lines=True), ref)
            _same(cm.run(h, g, s, job), ref)
    assert shortcuts["period"] and shortcuts["token"] and shortcuts["followers"]


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """Counts every kind of jump made while the starved-line counter still counts starved
    lines of the task (a demand window still growing, or a warm-up not over)."""
    seen: Counter = Counter()
    eng = cm.engine.Engine

    def live(grp: cm.group.Group) -> bool:
        return grp.dwin_live and grp.zpat.size > 0

    def spy(name: str, which: Callable[..., list[cm.group.Group]]) -> None:
        orig = getattr(eng, name)

        def counted(self: cm.engine.Engine, *a: Any) -> Any:
            counting = any(live(grp) for grp in which(self, *a))
            done = orig(self, *a)
            if done is not None and done is not False:
                seen[name, counting] += 1
            return done

        monkeypatch.setattr(eng, name, counted)

    spy("period_jump", lambda self, lead, *a: [lead])
    spy("token_jump", lambda self, lead, *a: [lead])
    spy("joint_jump", lambda self, heap, *a: [self.groups[k] for _, k in heap])
    spy("joint_token", lambda self, heap, *a: [self.groups[k] for _, k in heap])
    yield seen


def test_jumps_inside_the_starved_line_counter_equal_stepped(counting: Counter) -> None:
    """The shortcuts jump inside the counter's stretches (the demand window at one width, the
    warm-up's latency on): periods (a leader and its shadows; groups the bucket parted), the
    token form, each landing with the counter advanced by the starved lines it skipped.
    A small chip (256-line KMem, 64-line pages) keeps simulate affordable."""
    g = hyps.Geometry(line_bytes=64, ring_bits=10, prefetch_max_lines=64, kmem_lines=256)
    paged, fixed = hyps.get("paged"), hyps.get("fixed")
    small = cm.Settings(latency=30, window=6, core_rate_q16=RATE_ONE // 3, agg_rate_q16=838860)
    grow = {"dwin_start_lines": 6, "dwin_step_lines": 300}
    warm = {"dwarm_lines": 3000, "dwarm_extra_cycles": 9}
    wide = cm.Settings(latency=30, window=40, core_rate_q16=20000, agg_rate_q16=20 * RATE_ONE)
    cases = [
        # demand-gated bursts near the notch: periods, by a leader and its shadows
        (paged, replace(small, window=12, **grow), 2 * 1024 - 3, 2 * 1024 - 3),
        (paged, replace(small, **warm), 1024 + 5, 1024 + 5),
        # at the notch, every line starved: the token form at the stretch's window and latency
        (paged, replace(wide, dwin_start_lines=30, dwin_step_lines=600), 2 * 1024 + 3, 3 * 1024),
        # 16 cores over a tight ceiling: groups the bucket parted, their joint period
        (
            paged,
            replace(
                wide, latency=200, core_rate_q16=40000, agg_rate_q16=int(2.5 * RATE_ONE), **warm
            ),
            2 * 1024 + 3,
            3 * 1024,
        ),
        # ... and their joint token form (full credit: the counter has nothing to count)
        (fixed, replace(wide, core_rate_q16=36000, agg_rate_q16=838860, **warm), 2045, 5000),
    ]
    for h, s, n, stride in cases:
        job = [[(c * stride, n)] for c in range(16)]
        ref = cm.simulate(h, g, s, job)
        _same(cm.run(h, g, s, job, keep_lines=True), ref)
        _same(cm.run(h, g, s, job), ref)
    for kind in ("period_jump", "token_jump", "joint_jump"):
        assert counting[kind, True], (kind, counting)
    assert counting["joint_token", False] + counting["joint_token", True], counting


def test_groups_the_bucket_parted_merge_again_and_equal_stepped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refit's worst sweep points: paged, 16 cores, 64 or 192 lines of credit per page
    (near the notch), the governor's step and the demand path's warm-up. After the step the
    aggregate bucket parts the cores into groups a cycle apart; the parts meet again in one
    state (Group.twin) and go on as one group (Engine.merge), and a joint period jumps over
    a merge (a member whose own lines end inside the period repeats them). Both are
    required to happen; every counter and every line equals simulate, skip=False and one
    group per core. The chip's profile with the step and the warm-up 4x sooner, and the rate
    at exactly half a line a cycle (calibrate keeps the fitted rate one step below it, where
    the parts do not drift apart; a profile may still set it): ~3 s."""
    h = hyps.get("paged")
    s = replace(CHIP.settings, core_rate_q16=RATE_ONE // 2, ramp_step_lines=2000, dwarm_lines=2000)
    n = RING + 192  # a page's credit: 192 lines
    seen: Counter = Counter()
    merge, joint = cm.group.Group.merge, cm.engine.Engine.joint_jump

    def spy_merge(self: cm.group.Group, other: cm.group.Group) -> None:
        seen["merge"] += 1
        merge(self, other)

    def spy_joint(self: cm.engine.Engine, heap: list, c: int, hit: Any) -> Any:
        keys = sorted(k for _, k in heap)
        across = any(
            len(before[0]) > x0
            for k, x0 in zip(keys, hit[1], strict=True)
            for before in self.groups[k].pre.values()
        )
        done = joint(self, heap, c, hit)
        seen["joint across a merge"] += done is not None and across
        return done

    monkeypatch.setattr(cm.group.Group, "merge", spy_merge)
    monkeypatch.setattr(cm.engine.Engine, "joint_jump", spy_joint)
    job = [[(c * n, n)] for c in range(16)]
    ref = cm.simulate(h, G, s, job)
    fast = cm.run(h, G, s, job, keep_lines=True)
    assert seen["merge"] and seen["joint across a merge"], seen
    _same(fast, ref)
    merges = seen["merge"]
    _same(cm.run(h, G, s, job), ref)
    assert seen["merge"] == 2 * merges  # (the same merges without the lines)
    _same(cm.run(h, G, s, job, keep_lines=True, skip=False), fast)
    _same(cm.run(h, G, s, job, keep_lines=True, share=False), fast)
    assert seen["merge"] == 2 * merges  # (no shortcuts: no merges; one group per core: none)


@pytest.mark.parametrize("seed", range(4))
def test_cores_that_differ_only_in_bases_share_one_group(seed: int) -> None:
    """The registry says the credit ignores the start line: cores that differ only in their
    bases run as one group (one schedule until the aggregate bucket parts them). Held to
    one group per core (no sharing, no shortcuts) and, where small enough, to simulate."""
    rng = random.Random(300 + seed)
    own = random.Random(-300 - seed)  # the settings' own stream (_within_budget says why)
    for _ in range(10):
        h = rng.choice(HYPS)
        s = _random_settings(own, rng.choice([838860, 13 * RATE_ONE, int(2.5 * RATE_ONE)]), True)
        cores = rng.choice([2, 5, 16, 16])
        sizes = [rng.choice([1, 257, rng.randrange(300, 2500)]) for _ in range(rng.choice([1, 2]))]
        job = []
        for _c in range(cores):
            base, seq = rng.randrange(0, 1 << 26), []
            for n in sizes:
                seq.append((base, n))
                base = (base + n) & ((1 << 26) - 1)
            job.append(seq)
        s = _within_budget(own, s, job)
        groups = cm.group.groups_of(h, G, s, job, None, False)
        assert len(groups) == (cores if h.depends_on_start else 1)
        shared = cm.run(h, G, s, job, keep_lines=True)
        _same(shared, cm.run(h, G, s, job, keep_lines=True, share=False))
        if sum(sizes) * cores <= 6000:
            _same(shared, cm.simulate(h, G, s, job))


def test_the_bucket_analysis_is_shared_across_sizes() -> None:
    """Sweep points that differ only in their size meet the same aggregate-bucket pattern
    in the token form: its analysis is computed once and reused, exactly."""
    h, s = hyps.get("fixed"), CHIP.settings
    before = cm.bucket.bucket_form.cache_info()
    for lines in (12_288, 20_000, 24_576, 31_000):
        job = [[(c * lines, lines)] for c in range(16)]
        _same(cm.run(h, G, s, job), cm.run(h, G, s, job, skip=False))
    after = cm.bucket.bucket_form.cache_info()
    assert after.hits > before.hits


@pytest.mark.parametrize("h", HYPS, ids=IDS)
def test_skipping_equals_stepping_on_multi_lap_jobs(h: hyps.Hypothesis, shortcuts: Counter) -> None:
    """The chip's own settings, jobs of three laps or so: jumps against every grant stepped."""
    s = CHIP.settings
    cases = [
        (s, [[(c * 3 * RING, 3 * RING)] for c in range(16)]),  # the notch
        (s, [[(0, 3 * RING - 40)]]),
        (s, [[(c * 40_000, 40_000)] for c in range(16)]),
        (replace(s, **RAMP), [[(c * 40_000, 40_000)] for c in range(16)]),
        (s, [[(c * 40_000, 20_000), (c * 40_000 + 20_000, 20_000)] for c in range(16)]),
        (replace(s, warm_lines=3000, warm_extra_cycles=300, task_gap_cycles=50), [[(0, 50_000)]]),
    ]
    for settings, job in cases:
        _same(cm.run(h, G, settings, job), cm.run(h, G, settings, job, skip=False))
    assert shortcuts["period"] + shortcuts["token"] >= len(cases) - 1


def test_lines_are_kept_only_when_asked() -> None:
    """O(1) memory by default: no per-line arrays; keep_lines gives them, jumps included."""
    h, s = hyps.get("fixed"), CHIP.settings
    job = [[(c * 50_000, 50_000)] for c in range(16)]
    lean = cm.run(h, G, s, job)
    assert all(c.grants is None and c.drains is None for c in lean.cores)
    full = cm.run(h, G, s, job, keep_lines=True)
    _same(full, cm.run(h, G, s, job, keep_lines=True, skip=False))
    assert full.cores[5].grants.size == 50_000 and _counters(full) == _counters(lean)


def test_sixteen_identical_cores_meet_at_the_aggregate_bucket() -> None:
    """Full banks at the start: 16 cores ask in cycle 1, the bucket grants 13; one cycle lost."""
    s = CHIP.settings
    h = hyps.get("signed")
    one = cm.run(h, G, s, [[(0, RING)]])
    many = cm.run(h, G, s, [[(c * RING, RING)] for c in range(16)], keep_lines=True)
    assert many.cycles == one.cycles + 1
    assert many.cores[0].cycles == one.cores[0].cycles
    first = sorted(int(c.grants[0]) for c in many.cores)
    assert first == [1] * 13 + [2] * 3  # floor(bank of one line + refill 12.8 lines)
    _same(many, cm.simulate(h, G, s, [[(c * RING, RING)] for c in range(16)]))
    _same(many, cm.run(h, G, s, [[(c * RING, RING)] for c in range(16)], skip=False))


def test_unequal_cores_make_the_top_wait_for_idle() -> None:
    """A core that drains its task before the others are ready: the next task waits for idle."""
    s = cm.Settings(latency=20, window=8, core_rate_q16=RATE_ONE, agg_rate_q16=20 * RATE_ONE)
    job = [[(0, 4), (0, 4)], [(0, 400), (0, 4)]]
    res = cm.run(hyps.get("fixed"), G, s, job, keep_lines=True)
    done0 = int(res.cores[0].drains[3])
    done1 = int(res.cores[1].drains[399])
    assert done0 + 2 <= int(res.cores[1].grants[399])  # core 0 finished long before
    assert res.accepts == [0, done1 + 2] and res.fresh == done1 + 2
    assert res.cycles_o == res.cycles - res.fresh
    _same(res, cm.simulate(hyps.get("fixed"), G, s, job))


def test_tight_ceiling_is_never_exceeded() -> None:
    s = cm.Settings(latency=40, window=64, core_rate_q16=RATE_ONE, agg_rate_q16=3 * RATE_ONE)
    job = [[(c * 0x4000, 500)] for c in range(16)]
    res = cm.run(hyps.get("fixed"), G, s, job, keep_lines=True)
    grants = np.concatenate([c.grants for c in res.cores])
    assert np.bincount(grants).max() <= 4  # floor(bank <= 1 line + refill 3 lines)
    assert grants.size / (grants.max() - grants.min() + 1) <= 3.0 + 1e-9


def test_zero_length_and_single_line_exact_timeline() -> None:
    s = cm.Settings(latency=10, window=4, core_rate_q16=RATE_ONE, agg_rate_q16=RATE_ONE)
    assert cm.run(hyps.get("fixed"), G, s, [[(0, 0)]]).cycles == 1  # done follows at once
    one = cm.run(hyps.get("fixed"), G, s, [[(0, 1)]], keep_lines=True)
    # granted in cycle 1, popped in 11, in KMem from 12, drained in 12; top done counted +1
    assert one.cores[0].grants.tolist() == [1]
    assert one.cores[0].drains.tolist() == [12]
    assert one.cycles == 13


def test_zero_credit_starves_to_the_demand_window() -> None:
    """Credit 0: throughput is window / (latency + 2) lines per cycle, exactly in steady state."""
    s = cm.Settings(latency=98, window=10, core_rate_q16=RATE_ONE, agg_rate_q16=20 * RATE_ONE)
    res = cm.run(hyps.get("signed"), G, s, [[(0, RING)]], keep_lines=True)
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


@pytest.fixture
def token_kinds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """Counts the token form's jumps by where they start: within a request's first KMem
    lines, right after the governor's step (the lines before paced at a slower rate), on
    the lines past the credit pattern's horizon, or a short one (under the landing window)."""
    seen: Counter = Counter()
    eng = cm.engine.Engine
    token = eng.token_jump

    def spy(
        self: cm.engine.Engine,
        lead: cm.group.Group,
        ys: list[int],
        nxt: list[int],
        deltas: list[int],
        groups: list[tuple[int, int, list[int]]],
    ) -> bool:
        x0, rate, steady = lead.x, lead.gov.rate, max(lead.steady_lines(), 0)
        stepped = lead.ring.rate[(x0 - 1 - self.kmem) & lead.ring.mask] != rate
        done = token(self, lead, ys, nxt, deltas, groups)
        if done:
            seen["start"] += x0 - lead.epoch_line < self.kmem
            seen["step"] += x0 > self.kmem and bool(stepped)
            seen["tail"] += lead.x - x0 > steady
            seen["short"] += lead.x - x0 < self.kmem
        return done

    monkeypatch.setattr(eng, "token_jump", spy)
    yield seen


@pytest.mark.parametrize("seed", range(2))
def test_the_token_form_from_a_start_a_step_and_a_tail_equals_stepped(
    seed: int, token_kinds: Counter
) -> None:
    """The token form where the lines before it did not follow it: a request's first lines
    (no line before them), right after the governor's step (a slower rate paced them), the
    fix's last page past its horizon (credits that fall line by line while the gates stay
    slack), and short stretches. A small chip (256-line KMem) keeps simulate affordable."""
    g = hyps.Geometry(line_bytes=64, ring_bits=10, prefetch_max_lines=64, kmem_lines=256)
    rng = random.Random(500 + seed)
    for _ in range(10):
        rate = rng.randrange(RATE_ONE // 8, RATE_ONE * 3 // 4)
        kw: dict[str, int] = {}
        if rng.random() < 0.7:
            kw.update(
                ramp_start_q16=rng.randrange(rate // 3, rate),
                ramp_step_lines=rng.randrange(100, 900),
                ramp_inc_q16=rng.randrange(1000, 20000),
            )
        s = cm.Settings(
            latency=rng.randrange(1, 60),
            window=rng.randrange(1, 40),
            core_rate_q16=rate,
            agg_rate_q16=rng.choice([838860, 3 * RATE_ONE, 20 * RATE_ONE]),
            **kw,
        )
        h = rng.choice(HYPS)
        cores = rng.choice([1, 16])
        sizes = [rng.randrange(100, 1500) for _ in range(rng.choice([1, 1, 2]))]
        job = []
        for c in range(cores):
            base, seq = c * 5000 + rng.randrange(0, 1 << 10), []
            for n in sizes:
                seq.append((base, n))
                base += n
            job.append(seq)
        ref = cm.simulate(h, g, s, job)
        _same(cm.run(h, g, s, job, keep_lines=True), ref)
        _same(cm.run(h, g, s, job), ref)
    assert all(token_kinds[k] for k in ("start", "step", "tail", "short"))
