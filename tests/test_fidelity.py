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
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import contract
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps
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
    """Random settings with the demand window growing or the demand path warming up, or both
    (and, half the time, the governor)."""
    rate = rng.randrange(RATE_ONE // 10, RATE_ONE + 1)
    window = rng.randrange(2, 200)
    kw: dict[str, int] = {}
    if rng.random() < 0.5:
        kw.update(
            ramp_start_q16=rng.randrange(1, rate + 1),
            ramp_step_lines=rng.randrange(1, 300),
            ramp_inc_q16=rng.randrange(1, 8000),
        )
    if rng.random() < 0.7:  # the demand window that grows
        kw.update(dwin_start_lines=rng.randrange(1, window), dwin_step_lines=rng.randrange(1, 60))
    if "dwin_start_lines" not in kw or rng.random() < 0.4:  # the demand path's warm-up
        kw.update(dwarm_lines=rng.randrange(1, 3000), dwarm_extra_cycles=rng.randrange(1, 200))
    return cm.Settings(
        latency=rng.randrange(1, 300),
        window=window,
        core_rate_q16=rate,
        agg_rate_q16=agg,
        **kw,
    )


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
