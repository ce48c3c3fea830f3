"""Calibration: the committed profile is what `calibrate` produces, and the RTL agrees with it.

One judge: calibrate ranks its fits with validate's rows and tolerances, so a
tolerance changed in ane_kdma.validate.specs moves validate's ranking and
calibrate's choice alike (test_one_judge_*).

The RTL check is the one test here that needs a simulator; it is skipped, with
the reason, only when Verilator is not available.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ane_kdma import analytic, calibrate, contract, runner, validate
from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.calibrate import exact as cal_exact
from ane_kdma.calibrate import search as cal_search
from ane_kdma.cli import calibrate as calibrate_cmd
from ane_kdma.errors import InputError
from ane_kdma.profile import Profile, load_profile
from ane_kdma.schema import Doc
from ane_kdma.validate import specs

CHIP = chips.load()
# one worker: the fit and validate's standings are shared with test_validate's ranking and
# the golden validate and calibrate figures (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("ranking")


PROFILE = CHIP.profile
#: what `calibrate` fits: the committed profile without what `calibrate --intervals` added
FITTED = replace(
    PROFILE,
    uncertainty=None,
    notes={k: v for k, v in PROFILE.notes.items() if k != "intervals"},
)


@pytest.fixture(scope="module")
def cal(fit_once: Callable[..., calibrate.Calibration]) -> calibrate.Calibration:
    """The committed profile's own hypothesis x mechanism, refitted (once per worker: the
    golden `calibrate` figures share it, tests/conftest.py)."""
    return fit_once(CHIP, PROFILE.hypothesis, PROFILE.mechanism)


def test_committed_profile_is_the_fit(cal: calibrate.Calibration) -> None:
    committed, fitted = FITTED, cal.profile
    assert committed.name == fitted.name == "m3"
    assert committed == fitted  # every parameter and every note, exactly
    assert committed.ns_per_cycle == CHIP.ns_per_cycle_hand_set
    assert committed.ceiling_gbps == CHIP.ceiling_gbps


def test_fit_is_deterministic(cal: calibrate.Calibration) -> None:
    again = calibrate.fit(CHIP, PROFILE.hypothesis, PROFILE.mechanism)
    assert again.profile == cal.profile


def test_fit_meets_validates_judgement(cal: calibrate.Calibration) -> None:
    p = cal.profile
    assert 1 <= p.latency_cycles <= 4095 and 1 <= p.window_lines <= 1024
    assert all(b.ok for b in cal.bounds), [b for b in cal.bounds if not b.ok]
    assert calibrate.shortfalls(calibrate.rank(CHIP, [cal])[0]) == []  # validate's rows
    by_target: dict[str, list[calibrate.Residual]] = {}
    for r in cal.residuals:
        by_target.setdefault(r.name.split(" rep ")[0], []).append(r)
    for name, rs in by_target.items():  # Table A within 5%, the points within 3%, of the median
        tol = specs.TABLE_A_TOL if name.startswith("Table A") else specs.POINT_TOL
        median = float(np.median([r.measured_us for r in rs]))
        for r in rs:  # each replica: the tolerance plus that replica's own distance from it
            spread = abs(r.measured_us - median) / median
            assert abs(r.model_us - r.measured_us) / r.measured_us <= tol + spread + 1e-9, r
    assert cal.slope_worst_miss is not None and cal.slope_worst_miss <= specs.SLOPE_TOL
    assert cal.slope_r2 is not None and cal.slope_r2 >= specs.SLOPE_R2
    for key in ("hand_set", "constraints", "hypothesis", "mechanism", "v_slope", "source"):
        assert key in p.notes
    assert "hand-set" in p.notes["hand_set"] and "ns_per_cycle" in p.notes["hand_set"]


def test_problem_fits_every_dataset_and_holds_the_issue_ranges() -> None:
    """Targets: every Table A replica, the two points, Table B's two columns and Table C's
    rows, as times; constraints: the floor (to 19.5 GB/s, rising), nominal (rising, inside
    45-60 with validate's 3%), the workload measured twice within 3% of both figures."""
    meas = CHIP.measured
    prob = calibrate.problem(CHIP, meas)
    by = {d: [t for t in prob.targets if t.dataset == d] for d in calibrate.DATASETS}
    assert meas.table_a is not None and meas.table_b is not None and meas.table_c is not None
    assert len(by["table_a"]) == len(meas.table_a.replicas) * len(meas.table_a.d)
    assert [t.name for t in by["points"]] == ["D=2016 point", "D=2048 point"]
    assert len(by["table_b"]) == 2 * len(meas.table_b.rows)
    assert len(by["table_c"]) == len(meas.table_c.rows)
    chunked = [t for t in by["table_b"] if t.name.endswith("chunked")]
    assert all(t.parts and sum(t.parts) == t.lines and not t.notch for t in chunked)
    assert all(t.notch and not t.parts for t in by["table_b"] if t.name.endswith("unsplit"))
    one = by["table_c"][0]  # one task of 0x4000 lines: the notch itself
    assert one.notch and not one.parts and one.lines == CHIP.ring_lines
    # a throughput read as a time: 16 cores x 1 MiB at 17.25 GB/s
    assert one.measured_us == pytest.approx(16 * (1 << 20) / 17.25e3)
    floor = [b for b in prob.bounds if b.name.startswith("floor")]
    assert [b.lines // CHIP.ring_lines for b in floor] == list(range(1, 9))
    g = [16 * b.bytes_per_core / (b.lo_us * 1e3) for b in floor]  # the fastest allowed
    assert g == pytest.approx([19.0 + specs.FLOOR_SLACK_GBPS] * 8)
    nominal = [b for b in prob.bounds if b.name.startswith("nominal")]
    assert len(nominal) == 8 and not any(b.notch for b in nominal)
    assert [tuple(prob.bounds[i].name for i in grp) for grp in prob.rising] == [
        tuple(b.name for b in floor),
        tuple(b.name for b in nominal),
    ]
    (twice,) = [b for b in prob.bounds if b.parts]
    assert "Table B D=2048 chunked" in twice.name and "Table C 2 tasks" in twice.name
    lo_g, hi_g = (16 * twice.bytes_per_core / (u * 1e3) for u in (twice.hi_us, twice.lo_us))
    assert lo_g == pytest.approx(45.52 * 0.97) and hi_g == pytest.approx(43.5 * 1.03)

    held = calibrate.problem(CHIP, meas, ("table_c",))
    assert held.held_out == ("table_c",)
    assert [t for t in held.targets if t.dataset == "table_c"] == []
    assert len(held.targets) == len(prob.targets) - len(by["table_c"])
    assert not any(b.parts for b in held.bounds)  # the twice-measured bound reads Table C
    with pytest.raises(InputError, match="unknown dataset"):
        calibrate.problem(CHIP, meas, ("table_d",))


def test_starved_mechanisms_are_registered_with_their_inputs() -> None:
    warm, win = mechs.get("demand-warmup"), mechs.get("demand-window")
    ramp = mechs.get("ramp").inputs
    assert warm.inputs == ramp + ("dwarm_lines", "dwarm_extra_cycles") and warm.steps == 1
    assert win.inputs == ramp + ("dwin_start_lines", "dwin_step_lines") and win.steps == 1
    assert warm.starved and win.starved and not mechs.get("ramp").starved
    assert warm.in_rtl and not win.in_rtl
    assert warm.closed_form and not win.closed_form  # the analytic engine refuses the window
    assert warm.silicon and win.silicon and warm.summary and win.summary


def test_the_search_estimates_the_starved_mechanisms_closely() -> None:
    """The search's fluid estimate of a starved mechanism at the notch, against the exact
    forms: the demand warm-up against governor_grid's closed form (within 2 cycles of the
    cycle model), the growing window against the cycle model itself. The correction carries
    the rest, so the search converges where the exact fit is."""
    lines = np.array([k * CHIP.ring_lines for k in range(1, 9)])
    notch = np.ones(lines.size, dtype=bool)
    rate, start, ramp = 32822, 20092, 8490  # inputs of this test (near the fit, not the fit)
    gov = {"start": start / rate, "ramp_lines": float(ramp)}
    knobs = mechs.Knobs(
        rate=rate / 65536,
        period_per_line=630 / 96,
        window=96,
        params={**gov, "warm_per_line": 109 / 96, "warm_lines": 10831.0},
    )
    fluid = cal_search.cycles(CHIP, knobs, mechs.get("demand-warmup"), lines, notch)
    exact = analytic.governor_grid(
        latency=np.array(628),
        window=np.array(96),
        rate=np.array(float(rate)),
        ramp_start=np.array(float(start)),
        ramp_lines=np.array(float(ramp)),
        steps=1,
        credit=np.zeros(lines.size, dtype=np.int64),
        lines=lines,
        kmem_lines=CHIP.geometry.kmem_lines,
        dwarm_lines=10831,
        dwarm_extra=109,
    )
    assert np.abs(fluid / exact - 1).max() < 5e-4

    win = replace(knobs, params={**gov, "dwin_frac": 73 / 96, "dwin_step": 438.0})
    fluid = cal_search.cycles(CHIP, win, mechs.get("demand-window"), lines[:2], notch[:2])
    prof = replace(
        PROFILE,
        mechanism="demand-window",
        latency_cycles=628,
        window_lines=96,
        core_rate_q16=rate,
        ramp_start_q16=start,
        ramp_step_lines=ramp,
        ramp_inc_q16=rate - start,
        dwarm_lines=0,
        dwarm_extra_cycles=0,
        dwin_start_lines=73,
        dwin_step_lines=438,
    )
    one = [(int(n), True, ()) for n in lines[:2]]
    exact = cal_exact._chip_cycles(CHIP.with_profile(prof), hyps.get("paged"), one, cores=1)
    assert np.abs(fluid / exact - 1).max() < 0.01  # one request: the window's steps, as a fluid


METHOD_DOC = Path(__file__).resolve().parents[1] / "docs" / "method.md"  # the hold-out sentence


def test_hold_out_predicts_table_c_as_the_method_doc_says() -> None:
    """Fitted without Table C, the committed pair predicts it; docs/method.md reports those
    errors (issue 16 point 4), and this is the fit that gives them."""
    held = calibrate.hold_out(CHIP, PROFILE.hypothesis, PROFILE.mechanism, ("table_c",))
    assert held.held_out == ("table_c",)
    assert "table_c" in held.fit.profile.notes["held_out"]
    assert not any(r.name.startswith("Table C") for r in held.fit.residuals)
    assert [r.name for r in held.predictions] == [
        "Table C 1 tasks",
        "Table C 2 tasks",
        "Table C 4 tasks",
    ]
    assert held.fit.profile != PROFILE  # a fit of its own, not the committed one
    text = " ".join(METHOD_DOC.read_text().split())
    m = re.search(
        r"Fitted without Table C, `([a-z]+) x ([a-z-]+)` predicts it at "
        r"([-+]\d+\.\d) / ([-+]\d+\.\d) / ([-+]\d+\.\d)%",
        text,
    )
    assert m, "docs/method.md's hold-out sentence"
    assert (m[1], m[2]) == (PROFILE.hypothesis, PROFILE.mechanism)
    assert [float(m[i]) for i in (3, 4, 5)] == [round(100 * e, 1) for e in held.errors()]


def _fits() -> list[dict[str, object]]:
    return json.loads((CHIP.path / calibrate_cmd.FITS_FILE).read_text())["fits"]


def _cal(profile: Profile) -> calibrate.Calibration:
    """A fit as calibrate holds it, for ranking only (the ranking reads the profile alone)."""
    return calibrate.Calibration(profile, [], [], 0.0, 0.0, None, None, None, None, 0.0, 0.0)


def test_committed_ranking_is_validates_and_headed_by_the_profile(
    shared_standings: object,
) -> None:
    fits = _fits()
    pairs = [(f["hypothesis"], f["mechanism"]) for f in fits]
    assert set(pairs) == {(h.name, m) for h in hyps.buggy() for m in mechs.names()}
    ranked = validate.ranking(CHIP)  # validate's order of the same profiles
    assert pairs == [(e["hypothesis"], e["mechanism"]) for e in ranked]
    assert [f["shortfalls"] for f in fits] == [e["failed"] for e in ranked]
    assert fits[0]["profile"] == json.loads(FITTED.to_json())
    assert fits[0]["shortfalls"] == []


def _pairs(items: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(e["hypothesis"], e["mechanism"]) for e in items]


def test_one_judge_a_tolerance_moves_both(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    shared_standings: object,  # keyed on the tolerances too: the changed one is judged anew
) -> None:
    """One tolerance changed in validate's rules: the ranking validate gives and the profile
    calibrate writes both move to the same new winner.

    The committed fits of the profile's reading under both starved-stream mechanisms stand in
    for calibrate's search (ranking all 21 costs minutes), so the test judges the ranking
    alone.
    """
    hyp = PROFILE.hypothesis
    pairs = [(hyp, m.name) for m in mechs.REGISTRY if m.estimate is not None]  # registry order
    assert (hyp, PROFILE.mechanism) == pairs[0]
    by_pair = {
        (str(f["hypothesis"]), str(f["mechanism"])): Profile.from_doc(
            Doc(f["profile"], "profile", "fits.json")
        )
        for f in _fits()
        if (f["hypothesis"], f["mechanism"]) in pairs
    }
    monkeypatch.setattr(calibrate, "fit", lambda chip, h, m: _cal(by_pair[(h, m)]))
    profiles = [by_pair[p] for p in pairs]

    before = calibrate.fit_all(CHIP, pairs)  # validate's rules as they are
    assert before[0].profile == FITTED and calibrate.shortfalls(before[0]) == []
    assert [c.standing for c in before] == validate.rank(CHIP, profiles)
    assert before[1].standing is not None and before[1].standing["failed"] == []  # on RMS

    # Table B to within 2.8% instead of 3%: the warm-up's speedup at 1 MiB per core is +2.95%
    # (the demand window's +2.54%, and no other Table B figure of either is past 2.8%), so the
    # committed pair drops to 42 of 43 and the demand window heads the ranking.
    prob = calibrate.problem(CHIP, CHIP.measured)
    cyc, _ = cal_exact.exact_cycles(CHIP, prob, PROFILE)
    times = PROFILE.overhead_us + cyc * PROFILE.ns_per_cycle / 1000.0
    held = cal_search.agreement_penalty(prob, times)
    monkeypatch.setattr(specs, "TABLE_B_TOL", 0.028)
    moved = calibrate.problem(CHIP, CHIP.measured)  # the objective's bands follow
    assert moved.bands is not None and moved.bands.table_b == 0.028
    assert {g.tol for g in moved.agreements if g.name.startswith("Table B")} == {0.028}
    assert cal_search.agreement_penalty(moved, times) > held  # the 2.95% speedup: further out
    after = validate.rank(CHIP, profiles)
    assert _pairs(after) == pairs[::-1]
    assert after[0]["failed"] == []
    assert after[1]["failed"] == ["Table B D = 2048 (1 MiB per core): speedup"]
    # calibrate's command writes the head of its ranking: the new one
    real_fit_all = calibrate.fit_all
    monkeypatch.setattr(calibrate, "fit_all", lambda chip, **kw: real_fit_all(chip, pairs, **kw))
    skipped = {"sizes": 0, "modes": {}, "max_rel_diff": None, "ok": True, "skipped": "a test"}
    monkeypatch.setattr(calibrate, "confirm", lambda chip, cal: skipped)
    out = tmp_path / "profile.json"
    assert calibrate_cmd.run(_args(out=out)) == 0
    assert "ranking (best first)" in capsys.readouterr().out
    written = load_profile(out)
    assert (written.hypothesis, written.mechanism) == _pairs(after)[0]
    fits = json.loads((tmp_path / calibrate_cmd.FITS_FILE).read_text())["fits"]
    assert _pairs(fits) == _pairs(after)
    assert [f["shortfalls"] for f in fits] == [e["failed"] for e in after]


def test_confirmed_against_the_cycle_model(
    cal: calibrate.Calibration,
    shared_runs: None,  # the golden calibrate confirms the same fit on the same workloads
) -> None:
    c = calibrate.confirm(CHIP, cal)
    assert c["ok"] and set(c["modes"]) == set(hyps.names())
    for h in hyps.registry():
        if h.static and cal.profile.dwarm_lines:  # c["ok"]: within WARM_CYCLES cycles
            continue
        assert c["modes"][h.name] <= (0.0 if h.static else calibrate.ANALYTIC_TOL), h.name


#: what `calibrate --hypothesis paged --mechanism ramp` fits on the bundled m3 (a one-step
#: governor): the analytic engine is 1 cycle off the cycle model at two of its sizes on the
#: static readings (x = +256 at k = 1 and 6), within its stated cycle per governor step
PAGED_RAMP = {
    "hypothesis": "paged",
    "mechanism": "ramp",
    "overhead_us": 44.271,
    "latency_cycles": 220,
    "window_lines": 32,
    "core_rate_q16": 32131,
    "ramp_start_q16": 22055,
    "ramp_step_lines": 8933,
    "ramp_inc_q16": 10076,
    "dwarm_lines": 0,
    "dwarm_extra_cycles": 0,
}


def test_paged_x_ramp_is_confirmed_within_the_stated_accuracy() -> None:
    """Issue 29 point 6: the README's pair was refused, the static readings being held to
    the cycle where the closed form states a cycle per governor step."""
    prof = replace(PROFILE, **PAGED_RAMP)  # type: ignore[arg-type]
    cal = calibrate.Calibration(prof, [], [], 0.0, 0.0, None, None, None, None, 0.0, 0.0)
    c = calibrate.confirm(CHIP, cal)
    assert c["static_slack_cycles"] == 1  # one governor step
    assert c["ok"], c["misses"]
    modes = c["modes"]
    assert isinstance(modes, dict)
    assert modes["literal"] > 0 and modes["signed"] > 0  # the slack is used: not exact here
    assert calibrate.static_slack(CHIP.with_profile(replace(prof, ramp_start_q16=0)).settings) == 0


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(
        **{
            "chip": None,
            "profile": None,
            "json": False,
            "out": None,
            "hypothesis": None,
            "mechanism": None,
            "jobs": 1,
            **kw,
        }
    )


def test_cli_writes_atomically(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    shared_fits: object,  # the fit is `cal`'s (test_fit_is_deterministic fits again)
    shared_standings: object,  # its standing is the ranking's
    shared_runs: None,  # the confirmation's runs, the golden `calibrate`'s
) -> None:
    """The command's own path: the fit it makes is `cal` (shared, tests/conftest.py), and
    what is tested here is what the command does with it: the report and one file, whole."""
    out = tmp_path / "m3.json"
    one = {"hypothesis": PROFILE.hypothesis, "mechanism": PROFILE.mechanism}
    assert calibrate_cmd.run(_args(out=out, json=True, **one)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"]["latency_cycles"] == load_profile(out).latency_cycles
    assert doc["confirmed_on_cycle_model"]["ok"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["m3.json"]  # no temp file, no fits.json
    assert out.read_text() == FITTED.to_json()


def test_human_report_prints_residuals(cal: calibrate.Calibration) -> None:
    text = calibrate.render(cal, "m3.json")
    assert "fit residuals" in text and "Table A D=576" in text and "D=2048 point" in text
    assert "hand-set" in text and "governor" in text and "V slope" in text


def test_a_chip_the_rtl_cannot_build_is_refused_before_any_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """calibrate --engine rtl on a chip the RTL cannot be built for (a one-line prefetch
    clamp; its KMem and line size are a parameter and a mapping now): one line, before the
    search (which would take seconds to minutes before the first exact run refused it)."""
    import shutil

    folder = tmp_path / "one-line-clamp"
    shutil.copytree(CHIP.path, folder)
    doc = json.loads((folder / "chip.json").read_text())
    (folder / "chip.json").write_text(json.dumps({**doc, "prefetch_max_lines": 1}))
    chip = chips.load(str(folder))

    def searched(*args: object, **kw: object) -> None:
        raise AssertionError("the search ran")

    monkeypatch.setattr(cal_exact, "search", searched)
    for run in (
        lambda: calibrate.fit(chip, "signed", "none", engine="rtl"),
        lambda: calibrate.fit_all(chip, [("signed", "none")], engine="rtl"),
    ):
        with pytest.raises(InputError, match="the RTL is built for a prefetch clamp of at least 2"):
            run()


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        calibrate_cmd.run(_args(out=tmp_path / "nodir" / "p.json"))
    with pytest.raises(InputError):
        calibrate_cmd.run(_args(out=tmp_path))
    with pytest.raises(InputError, match="unknown dataset 'table_d'"):
        calibrate_cmd.run(_args(hold_out="table_d"))
    with pytest.raises(InputError, match="writes no profile"):
        calibrate_cmd.run(_args(hold_out="table_c", out=tmp_path / "p.json"))
    with pytest.raises(InputError, match="name both"):
        calibrate_cmd.run(_args(hold_out="table_c", hypothesis="paged"))
    assert list(tmp_path.iterdir()) == []


def _verilator() -> str | None:
    from ane_kdma.sim import check_simulator

    try:
        check_simulator("verilator")
    except InputError as exc:
        return str(exc)
    return None


def test_rtl_equals_model_at_fitted_settings() -> None:
    """1 MiB per core in each mode, D = 2016, and one split pair: RTL cycles == model cycles."""
    missing = _verilator()
    if missing:
        pytest.skip(f"Verilator unavailable: {missing}")
    lb, ring = CHIP.line_bytes, CHIP.ring_lines
    for h in hyps.in_rtl():
        loads = [contract.Workload.from_size(ring * lb, 1)]
        if h.name == CHIP.hypothesis.name:
            loads += [
                contract.Workload.from_size(16128 * lb, 1),
                contract.Workload.from_size(ring * lb, 1, 2),
            ]
        rtl = [r.counters for r in runner.run_many("rtl", h, CHIP, loads)]
        model = [r.counters for r in runner.run_many("model", h, CHIP, loads)]
        assert rtl == model, f"{h.name}: RTL {rtl} != model {model}"


def test_committed_intervals_hold_the_fit_and_their_members_pass() -> None:
    """`calibrate --intervals` left the fitted values as they were; every fitted field has an
    interval around its value, and a member (the widest move of the per-core rate) still
    passes every counted row of validate."""
    from ane_kdma.calibrate import intervals as iv

    u = PROFILE.uncertainty
    assert u is not None and "calibrate --intervals" in PROFILE.notes["intervals"]
    assert set(u.intervals) == set(u.free) == set(iv.fields(FITTED))
    for name, (lo, hi) in u.intervals.items():
        assert lo <= getattr(PROFILE, name) <= hi, name
    members = PROFILE.members()
    assert replace(members[0], notes=FITTED.notes) == FITTED and len(members) == 1 + len(u.members)
    widest = max(
        (m for m in members[1:] if m.core_rate_q16 != PROFILE.core_rate_q16),
        key=lambda m: abs(m.core_rate_q16 - PROFILE.core_rate_q16),
    )
    assert validate.standing(CHIP, widest)["failed"] == []
