"""The split planner and the LLM decode estimate."""

from __future__ import annotations

import json

import pytest

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma.cli import main
from ane_kdma.errors import InputError
from ane_kdma.llm import get_model, load_models
from ane_kdma.plan import Shape, plan_shape

CHIP = chips.load()
RING_LINES = CHIP.ring_lines
SIGNED = hyps.get("signed")


def test_shape_parse_and_share() -> None:
    s = Shape.parse("2048x8192", CHIP)
    assert (s.cin, s.cout) == (2048, 8192)
    assert s.bytes_per_core() == 2048 * 8192 * 2 // 16 == 2 * (1 << 20)
    assert s.bytes_per_core(4) == 512 * 1024
    for bad in ("2048", "0x4096", "2048x100", "axb"):
        with pytest.raises(InputError):
            Shape.parse(bad, CHIP)


def test_plan_skips_a_split_that_lands_in_the_notch_again() -> None:
    """2 MiB per core (k = 2): halves are 1 MiB, still a notch; quarters clear it."""
    row = plan_shape(Shape.parse("2048x8192", CHIP), CHIP, SIGNED)
    assert row.affected and (row.k, row.x) == (2, 0)
    assert row.splits == 4 and row.chunk_bytes_per_core == 512 * 1024
    assert row.time_us_after < row.time_us_before / 2
    assert row.time_us_after <= row.time_us_fixed * 1.05


def test_plan_leaves_clear_weights_alone() -> None:
    row = plan_shape(Shape.parse("2048x2048", CHIP), CHIP, SIGNED)
    assert not row.affected and row.splits == 1
    assert row.time_us_after == row.time_us_before


def test_plan_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--shape", "4096x4096", "--shape", "2016x4096", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = {
        "shape",
        "bytes_per_core",
        "affected",
        "splits",
        "chunk_bytes_per_core",
        "time_us_before",
        "time_us_after",
    }
    assert all(keys <= set(r) for r in rows)
    assert [r["affected"] for r in rows] == [True, False]  # D = 2016 is x = -256: recovered
    assert rows[1]["bytes_per_core"] // 64 == RING_LINES - 256


def test_llm_models_and_rates(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(load_models()) == {
        "llama-3.2-1b",
        "llama-3.2-3b",
        "llama-3.1-8b",
        "qwen3-8b",
        "gemma-3-4b",
    }
    assert main(["llm", "--model", "llama-3.2-1b", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {
        "model",
        "tok_s_unsplit",
        "tok_s_split",
        "gbps_unsplit",
        "gbps_split",
        "affected",
    }
    assert {a["shape"] for a in doc["affected"]} == {"2048x8192", "8192x2048"}  # the MLP
    assert doc["tok_s_split"] > 2 * doc["tok_s_unsplit"]
    assert doc["gbps_split"] < 102.4


def test_llm_weights_cover_the_model() -> None:
    m = get_model("llama-3.2-1b")
    total = sum(s.cin * s.cout * n for s, n in m.weights(CHIP.cores))
    per_layer = 2048 * (2048 + 512 + 512) + 2048 * 2048 + 3 * 2048 * 8192
    assert total == 16 * per_layer + 2048 * 16032 * 8


def test_llm_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "--model", "gpt-5"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["llm"]) == 2
