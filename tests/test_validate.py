"""validate on the model engine: every model-level row passes, and the V judges the hypotheses.

The ranking of every fitted hypothesis x mechanism is tested once on its own.

One validate run (module fixture) serves every assertion; every workload runs
on all 16 cores of the chip.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma import validate
from ane_kdma.cli import validate as validate_cmd
from ane_kdma.errors import InputError

CHIP = chips.load()
# one worker with test_calibration and the golden validate: the ranking's standings and
# the rows' runs are computed once there (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("ranking")


@pytest.fixture(scope="module")
def report(runs_shared: Callable[[], AbstractContextManager[None]]) -> validate.Report:
    with runs_shared():  # the golden `validate` runs the same rows
        return validate.validate("model", CHIP, rank=False)


def test_every_model_row_passes(report: validate.Report) -> None:
    failing = [r for r in report.rows if r.scope == "model" and not r.passed]
    assert not failing, [(r.name, r.modeled, r.tolerance) for r in failing]
    assert report.exit_status == 0


def test_rows_cover_every_dataset(report: validate.Report) -> None:
    names = " | ".join(r.name for r in report.rows)
    for needle in (
        "Table A D = 576",
        "Table A worst",
        "D = 2016",
        "D = 2048",
        "floor",
        "nominal rising",
        "k scaling",
        "V slope near the notch (|x| <= 128)",
        "V recovery at x = -256",
        "V recovery at x = +256",
        "core count",
        "scrambled",
        "only the total matters",
        "ceiling: D = 64..16384",
        "ceiling: 16 cores each wanting",
        "split workaround",
        "control",
        "anemll-bench",
    ):
        assert needle in names, needle
    datasets = {"table_a", "table_b", "table_c", "point_facts", "platform"}
    assert {r.dataset for r in report.rows} == datasets
    for r in report.rows:
        assert r.measured and r.tolerance and r.engine


def test_tolerances_are_the_stated_ones(report: validate.Report) -> None:
    tol = {r.name: r.tolerance for r in report.rows}
    assert all("5%" in t for n, t in tol.items() if n.startswith("Table A D ="))
    assert (
        "3%" in tol["D = 2016 (x = -256), N = 4096"] and "3%" in tol["D = 2048 (x = 0), N = 4096"]
    )
    slope = next(t for n, t in tol.items() if n.startswith("V slope"))
    assert "15%" in slope and "R^2 >= 0.95" in slope
    assert "2%" in next(t for n, t in tol.items() if n.startswith("V recovery"))


def _v_rows(report: validate.Report, scope: str) -> dict[str, validate.Row]:
    return {
        r.name.split(",")[0]: r for r in report.rows if r.scope == scope and r.name.startswith("V ")
    }


def test_paged_passes_the_linear_v(report: validate.Report) -> None:
    rows = _v_rows(report, "paged")
    assert len(rows) == 3 and all(r.passed and r.counts for r in rows.values())


@pytest.mark.parametrize("scope", ["literal", "signed"])
def test_static_readings_recover_but_miss_the_slope(report: validate.Report, scope: str) -> None:
    """Their V is convex (time ~ 1 / (window + |x|)): recovery holds, the linear slope does not."""
    rows = _v_rows(report, scope)
    assert len(rows) == 3
    slope = rows["V slope near the notch (|x| <= 128)"]
    assert not slope.passed and not slope.counts  # not the best reading: reported, not counted
    assert all(r.passed for n, r in rows.items() if n.startswith("V recovery"))


def test_verdict_names_paged(report: validate.Report) -> None:
    assert report.best == "paged" == CHIP.profile.hypothesis
    assert report.fit_error["paged"] < min(report.fit_error["literal"], report.fit_error["signed"])
    assert report.verdict.startswith("verdict: PAGED") and "SIGNED" in report.verdict


def test_ranking_every_fit_on_its_own_profile(shared_standings: object) -> None:
    """The committed fits, each judged on the counted rows: the profile's pair passes them all."""
    ranked = validate.ranking(CHIP)
    assert len(ranked) == len(hyps.buggy()) * len(mechs.names())
    top = ranked[0]
    assert (top["hypothesis"], top["mechanism"]) == (
        CHIP.profile.hypothesis,
        CHIP.profile.mechanism,
    )
    assert top["passed"] == top["rows"] and top["failed"] == []
    keys = [(-int(e["passed"]), round(float(e["rms_rel_err"]), 3)) for e in ranked]
    assert keys == sorted(keys)
    assert all(e["failed"] for e in ranked[1:])  # the data single out one pair


def test_exit_rule() -> None:
    def row(scope: str, passed: bool) -> validate.Row:
        return validate.Row("d", "r", scope, 0.0, "m", "u", 0.0, "t", passed, "model")

    assert validate.judge([row("model", True), row("literal", False)], "signed") == 0
    assert validate.judge([row("signed", False)], "signed") == 1
    assert validate.judge([row("model", False)], "signed") == 1
    assert validate.judge([row("info", False)], "signed") == 0


def test_render_and_json(report: validate.Report) -> None:
    text = validate.render(report, CHIP)
    assert "rule:" in text and report.verdict in text and "fail*" in text
    doc = json.loads(json.dumps(validate.to_json(report)))
    assert doc["exit_status"] == 0 and doc["best_hypothesis"] == "paged"
    for r in doc["rows"]:
        assert {"modeled", "measured", "error", "tolerance", "passed", "engine"} <= set(r)


def test_bad_engine() -> None:
    with pytest.raises(InputError, match="unknown engine"):
        validate.validate("spice", CHIP)


def test_bad_profile_and_chip() -> None:
    for chip, profile in ((None, "no-such"), ("no-such", None)):
        args = argparse.Namespace(engine="model", chip=chip, profile=profile, json=False, jobs=1)
        with pytest.raises(InputError):
            validate_cmd.run(args)


def test_rank_ties_keep_registry_order() -> None:
    """Equal rows passed and RMS (to 0.1%): the registries' order decides, never a name."""
    entries = [
        {"hypothesis": h.name, "mechanism": m, "passed": 20, "rms_rel_err": 0.0312}
        for h in reversed(hyps.buggy())
        for m in reversed(mechs.names())
    ]
    ranked = sorted(entries, key=validate.rank_key)
    assert [(e["hypothesis"], e["mechanism"]) for e in ranked] == [
        (h.name, m) for h in hyps.buggy() for m in mechs.names()
    ]
    better = {**entries[0], "rms_rel_err": 0.0299}  # the registry's last, on evidence first
    assert sorted([*entries, better], key=validate.rank_key)[0] is better
