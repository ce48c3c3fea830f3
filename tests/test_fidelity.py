"""Issue 16: the article's Tables B and C as data, and what a row of them must carry.

Every figure of a Table B or C row names its unit, its qualifier (how it was
published) and, on the row, its source; a row without one is refused by the
loader every command shares, with one line naming the field.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import contract, validate
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.cli import main
from ane_kdma.hw import RATE_ONE

M3 = chips.chips_dir() / "m3"
URL = "https://eiln.github.io/posts/ane-dma.html"
MIB = 1 << 20


def test_table_b_as_published() -> None:
    tb = chips.load("m3").measured.table_b
    assert tb is not None and tb.n == 4096 and tb.chunk_bytes == 512 * 1024
    got = [
        (r.d, r.bytes_per_core, r.unsplit.value, r.chunked.value, r.speedup.value) for r in tb.rows
    ]
    assert got == [
        (2048, 1 * MIB, 17.3, 43.5, 2.51),
        (4096, 2 * MIB, 18.4, 52.1, 2.84),
        (8192, 4 * MIB, 18.8, 57.8, 3.07),
        (12288, 6 * MIB, 19.0, 59.8, 3.15),
        (16384, 8 * MIB, 19.1, 60.5, 3.16),
    ]
    for r in tb.rows:
        for fig in (r.unsplit, r.chunked, r.speedup):
            assert fig.qualifier and fig.source is not None and fig.source.where == URL
        assert (r.unsplit.unit, r.chunked.unit, r.speedup.unit) == ("GB/s", "GB/s", "x")


def test_table_c_as_published() -> None:
    tc = chips.load("m3").measured.table_c
    assert tc is not None and (tc.d, tc.n, tc.bytes_per_core) == (2048, 4096, MIB)
    got = [(r.tasks, r.lines_per_task, r.gbps.value) for r in tc.rows]
    assert got == [(1, 0x4000, 17.25), (2, 0x2000, 45.52), (4, 0x1000, 44.83)]
    assert [r.speedup.value if r.speedup else None for r in tc.rows] == [None, 2.66, 2.60]
    assert all(r.gbps.qualifier and r.source.where == URL for r in tc.rows)


def _edit(name: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        doc = json.loads((folder / name).read_text())
        change(doc)
        (folder / name).write_text(json.dumps(doc))

    return edit


def _row_b(i: int, *keys: str) -> Callable[[dict], dict]:
    def pick(doc: dict) -> dict:
        out = doc["rows"][i]
        for k in keys:
            out = out[k]
        return out

    return pick


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (
            _edit("measured/table_b.json", lambda d: _row_b(1, "unsplit")(d).pop("unit")),
            "table_b.json: rows[1].unsplit.unit: missing",
        ),
        (
            _edit("measured/table_b.json", lambda d: _row_b(3, "chunked")(d).pop("qualifier")),
            "table_b.json: rows[3].chunked.qualifier: missing",
        ),
        (
            _edit("measured/table_b.json", lambda d: _row_b(0, "speedup")(d).pop("qualifier")),
            "table_b.json: rows[0].speedup.qualifier: missing",
        ),
        (
            _edit("measured/table_b.json", lambda d: _row_b(4)(d).pop("source")),
            "table_b.json: rows[4].source: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(2, "throughput")(d).pop("unit")),
            "table_c.json: rows[2].throughput.unit: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(0, "throughput")(d).pop("qualifier")),
            "table_c.json: rows[0].throughput.qualifier: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(1)(d).pop("source")),
            "table_c.json: rows[1].source: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(1, "speedup")(d).pop("qualifier")),
            "table_c.json: rows[1].speedup.qualifier: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(1, "tasks")(d).update(value=3)),
            "3 x 8192 lines is not the 16384 lines per core",
        ),
        (
            _edit(
                "measured/table_b.json", lambda d: _row_b(2, "bytes_per_core")(d).update(value=1)
            ),
            "D x N = 8192 x 4096 is 4194304 B per core",
        ),
    ],
)
def test_a_row_without_its_field_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit, field: str
) -> None:
    folder = tmp_path / "m3"
    shutil.copytree(M3, folder)
    edit(folder)
    assert main(["predict", "--bytes-per-core", "64", "--chip", str(folder)]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert out.out == "" and len(err) == 1 and err[0].startswith("ane-kdma: "), err
    assert field in err[0], err


# ---------------------------------------------------------------- the demand window that grows


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


def test_the_analytic_engine_refuses_what_it_has_no_closed_form_for() -> None:
    """Not silently the plain window: one line naming the engine that has them."""
    from ane_kdma import analytic
    from ane_kdma.errors import InputError

    base = cm.Settings(latency=300, window=64, core_rate_q16=RATE_ONE // 2, agg_rate_q16=RATE_ONE)
    # the demand path's warm-up has one now (tests/test_analytic.py holds it to the model)
    for s in (replace(base, dwin_start_lines=48, dwin_step_lines=100),):
        with pytest.raises(InputError, match="use --engine model"):
            analytic.check_settings(s)
    analytic.check_settings(base)  # off: the closed form holds
    analytic.check_settings(replace(base, dwarm_lines=6400, dwarm_extra_cycles=40))


def test_sweep_writes_table_b_beside_the_model() -> None:
    """The Table B CSV and plot (sweep --out): every published figure beside the profile's model,
    the model the same numbers validate's Table B rows show."""
    from ane_kdma import sweep as sw_mod
    from ane_kdma.contract import Workload

    chip = chips.load("m3")
    meas = chip.measured
    sw = sw_mod.Sweep(
        np.array([2048]), 4096, np.array([16384]), np.array([MIB]), {}, {}, "analytic", 16384
    )
    files = sw_mod._table_b_files(sw, chip, meas)
    assert set(files) == {"table_b.csv", "table_b.png"} and files["table_b.png"][:4] == b"\x89PNG"
    rows = [line.split(",") for line in files["table_b.csv"].decode().splitlines()]
    assert rows[0][:4] == ["d", "mib_per_core", "model_unsplit_gbps", "unsplit_gbps"]
    assert [r[0] for r in rows[1:]] == ["2048", "4096", "8192", "12288", "16384"]
    assert [float(r[3]) for r in rows[1:]] == [17.3, 18.4, 18.8, 19.0, 19.1]
    h = hyps.get(chip.profile.hypothesis)
    want = contract.run("analytic", h, chip, Workload.from_size(2 * MIB, chip.cores)).gbps
    assert float(rows[2][2]) == pytest.approx(want, abs=5e-4)
    assert float(rows[2][6]) == pytest.approx(float(rows[2][4]) / float(rows[2][2]), abs=2e-3)


def test_a_profile_writes_the_starved_inputs_only_when_on() -> None:
    """No registered mechanism takes them yet: the committed profile's JSON is unchanged, and a
    profile with them on says so."""
    p = chips.load("m3").profile
    assert json.loads(p.to_json()) == json.loads((M3 / "profile.json").read_text())
    on = json.loads(replace(p, dwarm_lines=16916, dwarm_extra_cycles=56).to_json())
    assert (on["dwarm_lines"], on["dwarm_extra_cycles"]) == (
        16916,
        56,
    ) and "dwin_step_lines" not in on


# ---------------------------------------------------------------- issue 16 point 3: counted rows
#
# Each row judged on a made-up engine (the spec's own workloads, answered by a formula), so a
# row's judgement is tested exactly and for free: the world passes the row, and a world that
# misses it by the figure at hand fails it, naming that figure. No engine runs here.

PAGED = hyps.get("paged")


def _spec_rows(
    key: str, world: Callable[[str, int, int], float], chip: chips.Chip | None = None
) -> list:
    """Spec `key`'s rows for paged, every wanted workload timed by world(hypothesis, lines per
    core, tasks per core) in µs."""
    from ane_kdma.contract import Counters, Result
    from ane_kdma.validate import specs

    chip = chip or M3_CHIP
    spec = next(s for s in specs.SPECS if s.key == key)
    ctx = specs.Ctx(chip, chip.measured, "fake", hyps.get(hyps.FIXED))
    lb = chip.line_bytes
    for h, w in spec.want(ctx, PAGED):
        t = world(h.name, w.lines_per_core(lb)[0], w.steps)
        b = w.bytes_total(lb)
        ctx.results[(h.name, w)] = Result(
            "fake", h.name, chip.name, Counters(0, ()), b, t, b / t / 1e3, False
        )
    return spec.rows(ctx, PAGED)


M3_CHIP = chips.load("m3")
RING = M3_CHIP.ring_lines


def _us(gbps: float, lines: int) -> float:
    """The time of `lines` per core on every core at `gbps`."""
    return lines * M3_CHIP.line_bytes * M3_CHIP.cores / gbps / 1e3


def _lap_world(notch: float, shoulder: float, k8: float | None = None) -> Callable:
    def world(h: str, n: int, tasks: int) -> float:
        k, x = divmod(n + RING // 2, RING)
        x -= RING // 2
        if x == 0:
            return (k8 if k == 8 and k8 is not None else notch) * k
        assert (k, x) == (1, -256), (k, x)
        return shoulder

    return world


@pytest.mark.parametrize(
    ("notch", "shoulder", "passed"),
    [
        (900 * 1.049, 380 * 0.951, [True, True]),
        (900 * 1.051, 380, [False, True]),
        (900, 380 * 1.051, [True, False]),
        (962, 377, [False, True]),
    ],
)
def test_lap_rows_are_counted_within_5_percent(notch: float, shoulder: float, passed: list) -> None:
    """The lap times as the article reads them, counted: the median over k = 1..8 of
    time / k at x = 0 within 5% of 900 µs, the one-lap time at x = -256 within 5% of 380 µs
    (962 µs: the committed paged x ramp, +6.9%)."""
    rows = _spec_rows("laps", _lap_world(notch, shoulder))
    assert [r.name for r in rows] == [
        "lap time at x = 0: median over k = 1..8 of time / k",
        "lap time at x = -256: one lap (k = 1)",
    ]
    assert all(r.scope == "model" and r.tolerance == "+-5%" for r in rows)
    assert [r.passed for r in rows] == passed
    assert rows[0].modeled == pytest.approx(notch) and rows[1].modeled == pytest.approx(shoulder)
    assert rows[0].error == pytest.approx(notch / 900 - 1)
    assert rows[1].error == pytest.approx(shoulder / 380 - 1)
    assert (rows[0].measured, rows[1].measured) == ("about 900 us per lap", "about 380 us per lap")
    assert validate.judge(rows, "paged") == (0 if all(passed) else 1)


def test_the_notch_lap_is_the_median_over_k() -> None:
    """One lap far off (k = 8 at twice the time per lap) moves a mean, not the median."""
    rows = _spec_rows("laps", _lap_world(900.0, 380.0, k8=1800.0))
    assert rows[0].passed and rows[0].modeled == pytest.approx(900.0)
    assert rows[0].values["per_k"][-1] == pytest.approx(1800.0)


def test_a_lap_row_reads_its_figure_from_the_data(tmp_path: Path) -> None:
    """The figure is the measured folder's: the same world judged against 850 µs fails."""
    folder = tmp_path / "m3"
    shutil.copytree(M3, folder)
    _edit(
        "measured/point_facts.json",
        lambda d: d["facts"]["lap_times"]["notch"].update(value=850),
    )(folder)
    rows = _spec_rows("laps", _lap_world(900.0, 380.0), chips.load(str(folder)))
    assert rows[0].measured == "about 850 us per lap" and not rows[0].passed
    assert rows[0].error == pytest.approx(900 / 850 - 1) and rows[1].passed


def _nominal_us(n: int) -> float:
    """The fixed design: 28 µs of overhead and 50 GB/s."""
    return 28.0 + _us(50.0, n)


def _v_world(
    slope: dict[tuple[int, int], float] | None = None,
    zigzag: tuple[int, int] | None = None,
    recovery: dict[tuple[int, int], float] | None = None,
) -> Callable:
    """The V as measured: 3.18 k µs per line on each side of every notch, recovered at
    |x| = 256; slope[(k, side)] scales one arm, zigzag=(k, side) bends it, recovery[(k, x)]
    leaves x = +-256 that much slower than the fix."""

    def world(h: str, n: int, tasks: int) -> float:
        k, x = divmod(n + RING // 2, RING)
        x -= RING // 2
        fixed = _nominal_us(n)
        if h == hyps.FIXED:
            return fixed
        if abs(x) == 256:
            return fixed * (1 + (recovery or {}).get((k, x), 0.0))
        assert abs(x) <= 128, x
        side = (x > 0) - (x < 0)
        s = 3.18 * k * (1 + (slope or {}).get((k, side), 0.0))
        bend = 3.18 * k * 24 if zigzag == (k, side) and (abs(x) // 16) % 2 else 0.0
        return fixed + 3.18 * k * 256 - s * abs(x) + bend

    return world


def _v(rows: list) -> tuple:
    rec = {r.name.split(",")[0]: r for r in rows if r.name.startswith("V recovery")}
    slope = next(r for r in rows if r.name.startswith("V slope"))
    return rec, slope


def test_the_measured_v_passes_every_v_row() -> None:
    rec, slope = _v(_spec_rows("v", _v_world()))
    assert len(rec) == 2 and all(r.passed and r.scope == "paged" for r in rec.values())
    assert slope.name == "V slope near the notch (|x| <= 128), each side, k = 1..8"
    assert slope.passed and slope.scope == "paged"
    assert slope.tolerance == "every k and side within +-10% of 3.18 k, R^2 >= 0.98"
    assert len(slope.values["slope_per_k"]) == len(slope.values["r2"]) == 16  # 8 laps x 2 sides
    assert max(abs(v / 3.18 - 1) for v in slope.values["slope_per_k"]) < 0.01


@pytest.mark.parametrize("k", [1, 5, 8])
@pytest.mark.parametrize("side", [-1, 1])
def test_the_v_slope_row_judges_each_lap_and_side(k: int, side: int) -> None:
    """One arm of one lap 11% steep fails the row, which names that lap and side; 9% passes."""
    name = f"k = {k}, {'x < 0' if side < 0 else 'x > 0'}"
    _, slope = _v(_spec_rows("v", _v_world(slope={(k, side): 0.11})))
    assert not slope.passed and slope.values["worst_slope"] == name
    assert slope.error == pytest.approx(0.11, abs=0.01)
    assert f"worst slope {name}:" in slope.note and f"failing: {name}" in slope.note
    _, slope = _v(_spec_rows("v", _v_world(slope={(k, side): -0.09})))
    assert slope.passed and slope.values["worst_slope"] == name


def test_the_v_slope_row_needs_each_arm_straight() -> None:
    """A bent arm (its slope on the mark) fails on its own R^2, the row naming where."""
    _, slope = _v(_spec_rows("v", _v_world(zigzag=(3, -1))))
    where = slope.values["where"].index("k = 3, x < 0")
    assert (
        slope.values["r2"][where]
        < 0.98
        <= min(r for i, r in enumerate(slope.values["r2"]) if i != where)
    )
    assert abs(slope.values["slope_per_k"][where] / 3.18 - 1) <= 0.10
    assert not slope.passed and slope.values["worst_r2"] == "k = 3, x < 0"
    assert "failing: k = 3, x < 0" in slope.note


def test_recovery_is_judged_at_every_lap() -> None:
    """x = +256 at k = 7 only, 2.5% slower than the fix: that row fails and names k = 7."""
    rec, _ = _v(_spec_rows("v", _v_world(recovery={(7, 256): 0.025})))
    bad, good = rec["V recovery at x = +256"], rec["V recovery at x = -256"]
    assert not bad.passed and good.passed
    assert bad.error == pytest.approx(1 / 1.025 - 1) and bad.note.startswith("worst k = 7;")
    rec, _ = _v(_spec_rows("v", _v_world(recovery={(7, 256): 0.019})))
    assert rec["V recovery at x = +256"].passed


def _floor_world(gbps: list[float]) -> Callable:
    def world(h: str, n: int, tasks: int) -> float:
        k = n // RING
        return _nominal_us(n) if h == hyps.FIXED else _us(gbps[k - 1], n)

    return world


@pytest.mark.parametrize(
    ("floor", "passed", "says"),
    [
        ([17.3, 17.9, 18.4, 18.8, 18.9, 19.0, 19.05, 19.1], True, ""),
        ([17.3, 17.9, 18.4, 18.8, 18.7, 19.0, 19.05, 19.1], False, "NOT rising (k = 4 -> 5"),
        ([17.3, 17.9, 18.4, 18.8, 18.8, 19.0, 19.05, 19.1], False, "NOT rising (k = 4 -> 5"),
        ([16.9, 17.9, 18.4, 18.8, 18.9, 19.0, 19.05, 19.1], False, "k = 1: 16.90 GB/s outside"),
        ([17.3, 17.9, 18.4, 18.8, 18.9, 19.0, 19.1, 19.6], False, "k = 8: 19.60 GB/s outside"),
        ([17.02, 17.29, 17.37, 17.42, 17.45, 17.47, 17.48, 17.49], True, ""),  # paged x ramp
    ],
)
def test_the_floor_is_inside_17_to_19_5_and_rising(floor: list, passed: bool, says: str) -> None:
    (row,) = _spec_rows("floor", _floor_world(floor))
    assert row.scope == "model" and row.name == "floor at x = 0, k = 1..8, rising"
    assert row.tolerance == "every k in 17-19.5 GB/s, rising with k"
    assert row.passed is passed and says in row.note
    assert row.modeled == pytest.approx(min(floor))


@pytest.mark.parametrize(
    ("step", "passed"), [(1.5, True), (0.0, False), (-0.5, False), (3.0, False)]
)
def test_nominal_rises_inside_45_to_60(step: float, passed: bool) -> None:
    """k x 1 MiB + one page, k = 1..8, from 45 GB/s: rising by `step` per MiB (0: flat; 3:
    to 66 GB/s, over the 61.8 allowed)."""

    def world(h: str, n: int, tasks: int) -> float:
        return _us(45.0 + step * (n // RING - 1), n)

    (row,) = _spec_rows("nominal", world)
    assert row.scope == "model" and row.passed is passed
    assert row.tolerance.startswith("rising, every size in 43.65-61.80 GB/s")


def _table_b_world(unsplit: dict[int, float], chunked: dict[int, float]) -> Callable:
    """Table B as published, the unsplit or chunked figure at `MiB per core` off by a fraction."""
    tb = M3_CHIP.measured.table_b
    assert tb is not None
    by = {r.bytes_per_core // MIB: r for r in tb.rows}

    def world(h: str, n: int, tasks: int) -> float:
        mib = n // RING
        r = by[mib]
        if tasks == 1:
            return _us(r.unsplit.value * (1 + unsplit.get(mib, 0.0)), n)
        return _us(r.chunked.value * (1 + chunked.get(mib, 0.0)), n)

    return world


def test_every_table_b_figure_is_a_counted_row() -> None:
    rows = _spec_rows("table_b", _table_b_world({}, {}))
    assert len(rows) == 15 and all(r.scope == "model" and r.tolerance == "+-3%" for r in rows)
    # the published speedups are rounded: the figures themselves give it within 0.5%
    assert all(r.passed and abs(r.error) < 0.005 for r in rows), [(r.name, r.error) for r in rows]


@pytest.mark.parametrize(
    ("unsplit", "chunked", "failing"),
    [
        (
            {4: -0.031},
            {},
            ["D = 8192 (4 MiB per core): unsplit", "D = 8192 (4 MiB per core): speedup"],
        ),
        ({4: 0.029}, {}, []),  # its speedup 2.7% low: the published 3.07 is rounded
        (
            {},
            {6: 0.031},
            ["D = 12288 (6 MiB per core): 512 KiB chunks", "D = 12288 (6 MiB per core): speedup"],
        ),
        # unsplit 2% high and chunked 2% low: each inside, their ratio 3.9% low
        ({2: 0.02}, {2: -0.02}, ["D = 4096 (2 MiB per core): speedup"]),
    ],
)
def test_a_table_b_figure_outside_3_percent_fails(
    unsplit: dict, chunked: dict, failing: list
) -> None:
    rows = _spec_rows("table_b", _table_b_world(unsplit, chunked))
    assert [r.name.removeprefix("Table B ") for r in rows if not r.passed] == failing
    assert validate.judge(rows, "paged") == (1 if failing else 0)


@pytest.mark.parametrize("off", [-0.031, 0.031, 0.029])
@pytest.mark.parametrize("tasks", [1, 2, 4])
def test_every_table_c_row_is_counted_within_3_percent(tasks: int, off: float) -> None:
    tc = M3_CHIP.measured.table_c
    assert tc is not None
    by = {r.tasks: r.gbps.value for r in tc.rows}

    def world(h: str, n: int, t: int) -> float:
        return _us(by[t] * (1 + (off if t == tasks else 0.0)), n)

    rows = _spec_rows("table_c", world)
    assert len(rows) == 3 and all(r.scope == "model" and r.tolerance == "+-3%" for r in rows)
    row = rows[[r.tasks for r in tc.rows].index(tasks)]
    assert row.error == pytest.approx(off) and row.passed is (abs(off) <= 0.03)
    assert all(r.passed for r in rows if r is not row)
