"""validate on the model engine: every model-level row passes, and the V judges the hypotheses.

One validate run (module fixture) serves every assertion; every workload runs
on all 16 cores of the chip.
"""

from __future__ import annotations

import argparse
import json

import pytest

from ane_kdma import chip as chips
from ane_kdma import validate
from ane_kdma.cli import validate as validate_cmd
from ane_kdma.errors import InputError

CHIP = chips.load()


@pytest.fixture(scope="module")
def report() -> validate.Report:
    return validate.validate("model", CHIP)


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
        "nominal at |x| = 256",
        "k scaling",
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
    assert {r.dataset for r in report.rows} == {"table_a", "point_facts", "platform"}
    for r in report.rows:
        assert r.measured and r.tolerance and r.engine


def _v_rows(report: validate.Report, scope: str) -> list[validate.Row]:
    return [r for r in report.rows if r.scope == scope and r.name.startswith("V ")]


def test_signed_passes_both_sides(report: validate.Report) -> None:
    rows = _v_rows(report, "signed")
    assert len(rows) == 4 and all(r.passed for r in rows)


def test_literal_fails_exactly_one_side(report: validate.Report) -> None:
    rows = _v_rows(report, "literal")
    failed = [r for r in rows if not r.passed]
    assert len(rows) == 4 and len(failed) == 1
    # the literal sketch keeps full credit for x < 0: that arm never collapses
    assert failed[0].name.startswith("V arm x < 0")
    assert not failed[0].counts  # LITERAL is not the best hypothesis: reported, not counted


def test_verdict_names_signed(report: validate.Report) -> None:
    assert report.best == "signed"
    assert report.fit_error["signed"] < report.fit_error["literal"]
    assert report.verdict.startswith("verdict: SIGNED") and "LITERAL" in report.verdict


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
    assert doc["exit_status"] == 0 and doc["best_hypothesis"] == "signed"
    for r in doc["rows"]:
        assert {"modeled", "measured", "error", "tolerance", "passed", "engine"} <= set(r)


def test_bad_engine() -> None:
    with pytest.raises(InputError, match="unknown engine"):
        validate.validate("spice", CHIP)


def test_bad_profile_and_chip() -> None:
    for chip, profile in ((None, "no-such"), ("no-such", None)):
        args = argparse.Namespace(engine="model", chip=chip, profile=profile, json=False)
        with pytest.raises(InputError):
            validate_cmd.run(args)
