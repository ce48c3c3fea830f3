"""The batch RTL engine gives exactly the cycle model's counters, and the cocotb engine's.

Seeded random workloads (KDMA_SEED replays one): per-core sizes at k x 0x4000
lines and near misses, split into back-to-back tasks of unequal sizes, 1..16
enabled cores, partial and unaligned sizes, bases anywhere (the top of the
address space too), under random run-time settings with and without the
issue-rate governor's ramp and the demand path's warm-up (its length from
0 to longer than a request, its extra latency up to the port's top, with the
memory latency near its own top too), on every hypothesis the RTL builds.
Exact equality of every counter, never a tolerance.

The engine runs the counters-only RTL build (``Payload = 0``); the same seeded
set on the full build (the testbenches' datapath) must give the same counters.
"""

from __future__ import annotations

import os
import random
from dataclasses import replace

import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma import contract, knobs, runner
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.contract import Counters, Task, Workload
from ane_kdma.engines import verilator as vb
from ane_kdma.engines.model import counters_of
from ane_kdma.errors import InputError
from ane_kdma.hw import DWARM_EXTRA_BITS, DWARM_LINES_BITS, LINE_ADDR_BITS, LINE_BYTES, RATE_ONE
from ane_kdma.mechanisms import rtl_fields
from ane_kdma.profile import MAX_LATENCY_CYCLES
from ane_kdma.rtl_settings import settings_words, settle_cycles, unpack_settings

CHIP = chips.load()
RING = CHIP.ring_lines
LINE_SPACE = 1 << LINE_ADDR_BITS
SEED = int(knobs.get("KDMA_SEED", 20261130))  # type: ignore[call-overload]
#: per hypothesis, the builds it runs on (a 16-core build covers 1..16 enabled cores);
#: two builds each, the ones tb/ and the CLI build anyway (and a 3-core one): a cold
#: `make test` stays short
BUILDS = {"literal": (1, 16), "signed": (3, 16), "paged": (1, 16), "fixed": (1, 16)}
#: the full-payload builds the counters-only ones are held to: the chip's reading on the
#: builds bench times (every build of BUILDS under KDMA_FULL=1)
PAYLOAD_BUILDS = (
    [(h, c) for h in hyps.in_rtl() for c in BUILDS.get(h.name, (1, 16))]
    if knobs.full()
    else [(CHIP.hypothesis, c) for c in (1, 16)]
)


def _toolchain_or_skip() -> None:
    try:
        vb.toolchain()
    except vb.HarnessBuildError as exc:
        pytest.skip(str(exc))


#: the demand path's warm-up inputs' ranges (kdma_pkg's widths)
DWARM_LINES_TOP = (1 << DWARM_LINES_BITS) - 1
DWARM_EXTRA_TOP = (1 << DWARM_EXTRA_BITS) - 1


def _warm_edges(rng: random.Random, drawn: dict[str, int]) -> dict[str, int]:
    """The registry draws a warm-up of 1..20 000 lines; now and then it is moved to an edge
    the RTL's field must carry: a few starved lines, more than any request here has (so it
    never ends), or none with extra latency."""
    if "dwarm_lines" not in drawn or rng.random() < 0.6:
        return drawn
    lines = rng.choice((rng.randint(1, 64), rng.randint(3 * RING, DWARM_LINES_TOP), 0))
    return {**drawn, "dwarm_lines": lines}


def _random_settings(rng: random.Random) -> cm.Settings:
    """Random settings for this file's jobs: the base drawn here, every mechanism the RTL
    builds drawn by the registry (mechanisms.draw_settings, one generator for all), its
    warm-up moved to a field's edge now and then."""
    if rng.random() < 0.15:
        return CHIP.settings  # the fitted profile: a stepped ramp
    base = {
        "latency": rng.randrange(1, 600),
        "window": rng.randrange(1, 300),
        "core_rate_q16": rng.randrange(RATE_ONE // 8, RATE_ONE + 1),
        "agg_rate_q16": rng.randrange(RATE_ONE // 2, 16 * RATE_ONE),
    }
    drawn = _warm_edges(rng, mechs.draw_settings(rng, base, mechs.rtl_built(), p=0.5))
    if rng.random() < 0.08:  # both latencies near their tops: a due time 2^13 cycles ahead
        base["latency"] = rng.randint(MAX_LATENCY_CYCLES - 300, MAX_LATENCY_CYCLES)
        base["window"] = rng.randint(200, 300)
        drawn["dwarm_lines"] = rng.randint(1, DWARM_LINES_TOP)
        drawn["dwarm_extra_cycles"] = rng.randint(DWARM_EXTRA_TOP - 300, DWARM_EXTRA_TOP)
    return cm.Settings(**base, **drawn)


def _lines(rng: random.Random, big: bool, starve: bool = False) -> int:
    if big:
        k = rng.randint(1, 2)
        x = rng.choice((0, 0, -1, 1, -32, 32, rng.randint(-300, 300)))
        if starve and rng.random() < 0.5:
            x = 0  # every line starved in the one-path readings
        return k * RING + x
    return rng.randint(1, 3000)


def _parts(rng: random.Random, lines: int, steps: int) -> list[int]:
    if rng.random() < 0.5:
        return contract.split_lines(lines, steps)
    cuts = sorted(rng.sample(range(1, lines), steps - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, lines], strict=True)]


def _workload(rng: random.Random, cores: int, starve: bool = False) -> Workload:
    """starve: sizes near the notch more often (the warm-up acts on starved lines only)."""
    enabled = set(rng.sample(range(cores), rng.randint(1, cores)))
    steps = 1 if starve and rng.random() < 0.6 else rng.randint(1, 4)
    big = rng.random() < (0.4 + 0.5 * starve) and cores <= 5 or rng.random() < 0.15
    seqs: list[tuple[Task, ...] | None] = []
    for c in range(cores):
        if c not in enabled:
            seqs.append(None)
            continue
        lines = max(steps, _lines(rng, big, starve))
        line = rng.choice((rng.randrange(LINE_SPACE), LINE_SPACE - rng.randint(1, 500), 0))
        seq = []
        for n in _parts(rng, lines, steps):
            size = n * LINE_BYTES - (rng.randrange(LINE_BYTES) if rng.random() < 0.2 else 0)
            off = rng.randrange(LINE_BYTES) if rng.random() < 0.1 else 0
            seq.append(Task((line % LINE_SPACE) * LINE_BYTES + off, size))
            line += n if rng.random() < 0.7 else rng.randrange(LINE_SPACE)
        seqs.append(tuple(seq))
    return Workload(tuple(seqs))


def _jobs(h: hyps.Hypothesis, cores: int, count: int) -> list[tuple[cm.Settings, Workload]]:
    rng = random.Random(f"{SEED}-{h.name}-{cores}")
    jobs = []
    for _ in range(count):
        s = _random_settings(rng)
        jobs.append((s, _workload(rng, cores, s.dwarm)))
    return jobs


#: a latency-bound starved stream whose first 5000 lines pay 66 cycles more: the job where
#: the warm-up must show in every reading that starves at the notch (all but the fix)
WARM = cm.Settings(
    latency=300,
    window=40,
    core_rate_q16=RATE_ONE,
    agg_rate_q16=16 * RATE_ONE,
    dwarm_lines=5000,
    dwarm_extra_cycles=66,
)


def _warm_job(cores: int) -> tuple[cm.Settings, Workload]:
    """One lap at x = 0 on the first and last core (the same core in a one-core build)."""
    lap = Task(0, RING * LINE_BYTES)
    seqs = [(lap,) if c in (0, cores - 1) else None for c in range(cores)]
    return WARM, Workload(tuple(seqs))


def _seeded_set(h: hyps.Hypothesis, cores: int) -> list[tuple[cm.Settings, Workload]]:
    return [*_jobs(h, cores, 12 if cores <= 5 else 8), _warm_job(cores)]


def _model(h: hyps.Hypothesis, s: cm.Settings, w: Workload) -> Counters:
    return counters_of(cm.run(h, CHIP.geometry, s, cm.job_of(w.cores, LINE_BYTES)))


@pytest.mark.parametrize(
    ("h", "cores"),
    [(h, c) for h in hyps.in_rtl() for c in BUILDS.get(h.name, (1, 16))],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_batch_rtl_equals_the_cycle_model(h: hyps.Hypothesis, cores: int) -> None:
    _toolchain_or_skip()
    assert not vb.ENGINE.payload  # the engine times the counters-only build
    jobs = _seeded_set(h, cores)
    got = vb.ENGINE.counters(h, CHIP, jobs)
    for (s, w), g in zip(jobs, got, strict=True):
        bad = g.mismatches(_model(h, s, w), "batch RTL", "model")
        assert not bad, f"seed {SEED}, {h.name}, {s}, {w}: " + "; ".join(bad)
    # the warm-up job: its counters are not those of the same job with the warm-up off,
    # except on the fix, which never starves a line
    s, w = jobs[-1]
    off = _model(h, replace(s, dwarm_lines=0, dwarm_extra_cycles=0), w)
    assert (got[-1] == off) == (h.name == "fixed"), (h.name, got[-1], off)


@pytest.mark.parametrize(("h", "cores"), PAYLOAD_BUILDS, ids=lambda v: getattr(v, "name", str(v)))
def test_the_counters_only_build_equals_the_full_rtl(h: hyps.Hypothesis, cores: int) -> None:
    """Payload = 0 leaves out data, never timing: the full build's counters, and the model's."""
    _toolchain_or_skip()
    fast, full = vb.VerilatorEngine(payload=False), vb.VerilatorEngine(payload=True)
    assert vb.build(h, CHIP, cores, False) != vb.build(h, CHIP, cores, True)
    jobs = _seeded_set(h, cores)
    got_fast, got_full = fast.counters(h, CHIP, jobs), full.counters(h, CHIP, jobs)
    for (s, w), f, p in zip(jobs, got_fast, got_full, strict=True):
        where = f"seed {SEED}, {h.name}, {s}, {w}: "
        assert f == p, where + "; ".join(f.mismatches(p, "counters-only", "full RTL"))
        bad = p.mismatches(_model(h, s, w), "full RTL", "model")
        assert not bad, where + "; ".join(bad)


def test_batch_rtl_equals_cocotb() -> None:
    """A small subset through the testbench's engine too: the same counters, exactly."""
    _toolchain_or_skip()
    from ane_kdma.engines.cocotb import CocotbEngine
    from ane_kdma.sim import check_simulator

    sim = os.environ.get("SIM", "verilator")
    try:
        check_simulator(sim)
    except InputError as exc:
        pytest.skip(str(exc))
    h = CHIP.hypothesis  # the fitted reading, under the fitted ramp
    rng = random.Random(f"{SEED}-cocotb")
    loads = [
        Workload.from_size(RING * LINE_BYTES, 16, split=2),
        Workload.from_size((RING - 32) * LINE_BYTES, 16),
        _workload(rng, 16),
    ]
    batch = runner.run_many("rtl", h, CHIP, loads, jobs=1)
    coco = CocotbEngine(sim).run_many(h, CHIP, loads)
    for w, b, c in zip(loads, batch, coco, strict=True):
        assert b.counters == c.counters, f"{w}: batch {b.counters}, cocotb {c.counters}"


def test_the_rtl_engine_is_the_batch_harness() -> None:
    assert type(contract.get_engine("rtl")).__name__ == "VerilatorEngine"
    assert type(contract.get_engine("cocotb")).__name__ == "CocotbEngine"


def test_a_mechanism_without_rtl_inputs_is_refused() -> None:
    s = replace(CHIP.settings, task_gap_cycles=5)
    with pytest.raises(InputError, match="no input for task_gap_cycles"):
        vb.check_settings(s, CHIP)


def test_the_warm_up_is_driven_and_the_demand_window_refused() -> None:
    """dwarm_* reach the harness in the packed settings struct (its words, least significant
    first, then the settle cycles, steps and mask); dwin_* have no RTL input."""
    s = replace(CHIP.settings, dwarm_lines=DWARM_LINES_TOP, dwarm_extra_cycles=DWARM_EXTRA_TOP)
    vb.check_settings(s, CHIP)
    head = [int(v) for v in vb.job_line(s, Workload.from_size(RING * LINE_BYTES, 1)).split()]
    n = settings_words()
    packed = sum(v << (32 * i) for i, v in enumerate(head[:n]))
    assert all(0 <= v < 1 << 32 for v in head[:n]), head
    assert unpack_settings(packed) == {f.name: getattr(s, f.name) for f in rtl_fields()}
    assert unpack_settings(packed)["dwarm_lines"] == DWARM_LINES_TOP
    assert unpack_settings(packed)["dwarm_extra_cycles"] == DWARM_EXTRA_TOP
    assert head[n : n + 3] == [settle_cycles(s), 1, 1], head
    with pytest.raises(InputError, match="no input for dwin_start_lines"):
        vb.check_settings(replace(CHIP.settings, dwin_start_lines=8), CHIP)


def test_a_missing_compiler_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-cxx-compiler")
    with pytest.raises(vb.HarnessBuildError) as exc:
        vb.toolchain()
    msg = str(exc.value)
    assert "no-such-cxx-compiler" in msg and "compiler" in msg and "\n" not in msg


def test_a_missing_ccache_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBJCACHE", "no-such-ccache")
    with pytest.raises(vb.HarnessBuildError, match="no-such-ccache"):
        vb.toolchain()


def test_the_cli_maps_a_failed_build_to_exit_2(tmp_path) -> None:
    env = dict(os.environ, CXX="no-such-cxx-compiler")
    refuses(["erratum", "--engine", "rtl", "--laps", "1"], "compiler", env=env)
