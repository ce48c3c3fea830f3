"""The split planner (`plan`), and the axis it shares with `llm` and `patch`.

Exact values are asserted only where they follow from the plan's own
arithmetic (payloads, chunk sums, the window, the affected rule); which plan
wins is asserted as a property of the rule, so a new hypothesis or rate
mechanism that moves the times does not break these tests unless it breaks
the rule.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma import runner
from ane_kdma.cli import main
from ane_kdma.hw import lap_and_offset
from ane_kdma.plan import (
    AXIS_RANK,
    DEFAULT_AXIS,
    GAIN,
    TIE,
    Weight,
    candidates,
    in_window,
    lines_of,
    plan_weight,
    search,
    window_lines,
    workload,
)

CHIP = chips.load()
#: the bundled chip's own reading (what --variant buggy means for it)
BUGGY = CHIP.variant("buggy")
FAST = "analytic"  # the properties hold on any engine; the closed form keeps the file quick
RING = CHIP.ring_lines
LINE = CHIP.line_bytes

#: the planner's hard shapes, the article's, both sides of the window, a 3x3 conv, other dtypes
SHAPES = [
    ("128x65584", 16, 1),  # Cout / 16 = 4099 is prime
    ("512x16336", 16, 1),  # Cout / 16 = 1021 is prime
    ("2048x4096", 16, 1),  # exactly one lap
    ("2048x8192", 16, 1),  # two laps: halves land in the notch again
    ("2016x4096", 16, 1),  # x = -256: recovered
    ("2022x4096", 16, 1),  # x = -208
    ("2076x4096", 16, 1),  # x = +224
    ("4096x14336", 16, 1),
    ("128x7280x3x3", 16, 1),  # x = -4 with a 3x3 kernel
    ("4096x4096", 8, 1),  # int8: one lap
    ("2048x8192", 4, 1),  # int4: half a lap
    ("2560x262208", 16, 16),  # Gemma 3's LM head in 16 shards
    ("2048x128256", 16, 8),  # Llama's LM head in 8 shards: clear
]


def _row(text: str, bits: int = 16, shards: int = 1, engine: str = FAST, axis: str = "cin"):
    return plan_weight(Weight.parse(text, bits, shards), CHIP, BUGGY, engine, axis)


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- payload arithmetic


def test_payload_counts_whole_groups_of_one_channel_per_core() -> None:
    assert Weight(2048, 4096).bytes_per_core(16) == 2048 * 4096 * 2 // 16
    assert Weight(128, 65584).bytes_per_core(16) == 4099 * 128 * 2
    assert Weight(100, 17).bytes_per_core(16) == 2 * 100 * 2  # Cout need not divide
    assert Weight(64, 32, 3, 3).bytes_per_core(16) == 2 * 64 * 9 * 2
    assert Weight(2048, 8192, bits=8).bytes_per_core(16) == 512 * 2048
    assert Weight(2048, 8192, bits=4).bytes_per_core(16) == 512 * 2048 // 2
    head = Weight(2560, 262208, shards=16)
    assert head.shard_cout == 16388 and head.bytes_per_core(16) == 1025 * 2560 * 2


def test_window_is_the_clamp_either_side_of_a_nonzero_lap() -> None:
    w = window_lines(CHIP)
    assert w == CHIP.geometry.prefetch_max_lines
    assert (
        in_window(RING, CHIP)
        and in_window(RING - w + 1, CHIP)
        and in_window(3 * RING + w - 1, CHIP)
    )
    assert not in_window(RING - w, CHIP) and not in_window(RING + w, CHIP)
    assert not in_window(w // 2, CHIP)  # lap 0 is not the notch


# ---------------------------------------------------------------- the rule, on every shape


def _near_laps(n: int, seed: int = 7) -> list[tuple[str, int, int]]:
    """Shapes whose payload lands within a few hundred lines of laps 1..8, any Cout, any dtype."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        bits = int(rng.choice([16, 8, 4]))
        cin = int(rng.choice([64, 128, 1000, 2048, 3072, 5120]))
        target = int(rng.integers(1, 9)) * RING + int(rng.integers(-300, 301))
        groups = max(1, target * LINE * 8 // (cin * bits))
        cout = groups * CHIP.cores - int(rng.integers(0, CHIP.cores))  # often not a multiple
        out.append((f"{cin}x{cout}", bits, 1))
    return out


@pytest.mark.parametrize("axis", ["cin", "cout"])
@pytest.mark.parametrize("text,bits,shards", SHAPES + _near_laps(24), ids=lambda v: str(v))
def test_plan_invariants(text: str, bits: int, shards: int, axis: str) -> None:
    w = Weight.parse(text, bits, shards)
    r = plan_weight(w, CHIP, BUGGY, FAST, axis)
    assert r.search_axis == axis and r.axis in ("none", "shards", axis)
    lines = lines_of(r.bytes_per_core, CHIP)
    assert r.bytes_per_core == w.bytes_per_core(CHIP.cores) and r.lines_per_core == lines
    assert (r.k, r.x) == lap_and_offset(lines, RING)
    assert r.in_window == (r.k >= 1 and abs(r.x) < window_lines(CHIP))
    assert r.affected == (r.time_us_after < (1 - GAIN) * r.time_us_before)
    assert len(r.alternatives) <= 2 and all("rejected" in a for a in r.alternatives)
    if not r.affected:
        assert (r.axis, r.splits, r.tasks) == ("none", 1, shards)
        assert r.chunk_bytes_per_core == [r.bytes_per_core]
        assert r.time_us_after == r.time_us_before
        return
    chunk_lines = [lines_of(b, CHIP) for b in r.chunk_bytes_per_core]
    assert not any(in_window(n, CHIP) for n in chunk_lines)  # every task clears the notch
    if r.axis == "shards":  # more shards, one task each
        assert r.splits > shards and r.tasks == r.splits and len(chunk_lines) == 1
        assert r.chunk_bytes_per_core == [w.with_shards(r.splits).bytes_per_core(CHIP.cores)]
    else:
        assert sum(r.chunk_bytes_per_core) == r.bytes_per_core  # the chunks are the payload
        assert r.splits == len(r.chunk_bytes_per_core) and r.tasks == r.splits * shards
    if r.axis == "cin":  # whole-line chunks, all but the last
        assert all(b % LINE == 0 for b in r.chunk_bytes_per_core[:-1])


@pytest.mark.parametrize("text,bits,shards", SHAPES[:8], ids=lambda v: str(v))
def test_choice_is_the_simplest_of_the_fastest(text: str, bits: int, shards: int) -> None:
    s = search(Weight.parse(text, bits, shards), CHIP, BUGGY, FAST)
    best = min(t for _, t in s.ranked)
    assert s.best_us == best
    tied = [(c, t) for c, t in s.ranked if t <= best * (1 + TIE)]
    assert s.proposed in [c for c, _ in tied]
    fewest = min(c.tasks for c, _ in tied)
    assert s.proposed.tasks == fewest
    rank = min(AXIS_RANK[c.axis] for c, _ in tied if c.tasks == fewest)
    assert AXIS_RANK[s.proposed.axis] == rank
    peers = [c for c, _ in tied if c.tasks == fewest and AXIS_RANK[c.axis] == rank]
    assert s.proposed.clearance(CHIP) == max(c.clearance(CHIP) for c in peers)


def test_prime_group_counts_split_along_cout_in_two_or_three() -> None:
    """Cout / 16 prime: unequal whole-group parts do what equal ones cannot (--axis cout; the
    default axis is Cin, so this asks for Cout)."""
    for text in ("128x65584", "512x16336"):
        r = _row(text, axis="cout")
        assert r.in_window and r.affected, text
        assert r.axis == "cout" and r.splits <= 3, (text, r.axis, r.splits)
        w = Weight.parse(text)
        per_group = w.group_bits() // 8
        assert all(c % per_group == 0 for c in r.chunk_bytes_per_core)  # whole groups
        assert sum(c // per_group for c in r.chunk_bytes_per_core) == w.groups(CHIP.cores)


def test_gemma_lm_head_needs_few_tasks() -> None:
    """The old planner needed 25 tasks per shard; a shard count or a 2-3 way cut does."""
    r = _row("2560x262208", shards=16)
    assert r.in_window and r.affected
    assert r.tasks <= 3 * 16
    assert r.axis == "shards" or r.splits <= 3


def test_the_axis_is_cin_unless_asked() -> None:
    """2048x8192 cuts either way into two clear tasks. The default searches Cin only (partial
    sums, as the article and the public Core ML pass cut); --axis cout searches Cout
    only."""
    for axis in ("cin", "cout"):
        cands, clears = candidates(Weight(2048, 8192), CHIP, axis)
        assert clears and {c.axis for c in cands if c.tasks == 2} == {axis}
        assert {c.axis for c in cands} == {"none", axis}
        r = _row("2048x8192", axis=axis)
        assert r.affected and r.axis == axis
    assert _row("2048x8192").axis == DEFAULT_AXIS == "cin"


def test_cin_when_cout_cannot_split() -> None:
    """Sixteen output channels are one group: only partial sums can cut it."""
    r = _row("524288x16")
    assert (r.k, r.x) == (1, 0) and r.affected and r.axis == "cin"
    r = _row("524288x16", axis="cout")  # asked for Cout, one group cannot be cut
    assert r.in_window and not r.affected and (r.axis, r.splits) == ("none", 1)


def test_in_window_but_nothing_to_cut_is_said_so() -> None:
    """One group, one input channel: no split exists in the space, so none is offered."""
    r = _row("1x16x1024x512")
    assert r.in_window and not r.affected and (r.axis, r.splits) == ("none", 1)
    assert r.alternatives == []


@pytest.mark.parametrize("text", ["2022x4096", "2076x4096", "2048x4096", "4096x4096"])
def test_never_no_split_where_a_simple_split_helps(text: str) -> None:
    """Independent of the search: if halving along Cout gains more than 1%, a Cout plan is made."""
    w = Weight.parse(text)
    total = w.bytes_per_core(CHIP.cores)
    groups = w.groups(CHIP.cores)
    half = groups // 2 * w.group_bits() // 8
    one, two = (workload(c, CHIP) for c in ([total], [half, total - half]))
    t1, t2 = (r.time_us for r in runner.run_many(FAST, BUGGY, CHIP, [one, two]))
    r = plan_weight(w, CHIP, BUGGY, FAST, "cout")
    if t2 < (1 - GAIN) * t1:
        assert r.affected and r.time_us_after <= t2 * (1 + TIE)


def test_model_engine_reports_what_the_search_chose() -> None:
    r = _row("2048x4096", engine="model")
    assert r.engine == "model" and r.search_engine == "analytic"
    assert r.affected and r.time_us_after < r.time_us_before
    assert r.time_us_fixed < r.time_us_before


# ---------------------------------------------------------------- the command


def test_plan_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(
        capsys,
        ["plan", "--shape", "4096x4096", "--shape", "2016x4096", "--engine", FAST, "--json"],
    )
    keys = set(
        "shape bytes_per_core lines_per_core k x in_window affected axis splits "
        "chunk_bytes_per_core time_us_before time_us_after time_us_fixed alternatives".split()
    )
    assert all(keys <= set(r) for r in rows) and "explanation" not in rows[0]
    assert [r["affected"] for r in rows] == [True, False]  # D = 2016 is x = -256: recovered
    assert rows[1]["lines_per_core"] == RING - window_lines(CHIP) and not rows[1]["in_window"]
    assert all(isinstance(r["chunk_bytes_per_core"], list) for r in rows)
    for a in rows[0]["alternatives"]:
        assert {"axis", "splits", "chunk_bytes_per_core", "time_us", "rejected"} <= set(a)


def test_plan_explain_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["plan", "--shape", "128x65584", "--shape", "2016x4096", "--engine", FAST, "--explain"]
        )
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())  # the words, whatever lines they wrap to
    assert "inside the +/-256-line window" in out and "outside the +/-256-line window" in out
    assert "chosen: Cin" in out and "left whole" in out and "rejected:" in out  # Cin: the default
    rows = _json(capsys, ["plan", "--shape", "2048x4096", "--engine", FAST, "--explain", "--json"])
    assert rows[0]["explanation"][0].startswith(
        "2048x4096 (fp16): 1048576 B per core = 16384 lines"
    )


def test_plan_dtype_and_shards_options(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--shape", "4096x4096", "--dtype", "int8", "--engine", FAST, "--json"]
    (row,) = _json(capsys, argv)
    assert row["dtype"] == "int8" and row["bytes_per_core"] == 4096 * 4096 // 16
    argv = ["plan", "--shape", "2560x262208", "--lm-head-shards", "16", "--engine", FAST, "--json"]
    (row,) = _json(capsys, argv)
    assert row["shards"] == 16 and row["bytes_per_core"] == 1025 * 2560 * 2


def test_largest_shapes_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """A 512-lap weight plans on the closed form (no timing asserted, only that it answers)."""
    (row,) = _json(capsys, ["plan", "--shape", "65536x65536", "--engine", FAST, "--json"])
    assert (row["k"], row["x"]) == (512, 0) and row["affected"]


@pytest.mark.parametrize(
    "shape,words",
    [
        ("0x4096", "zero dimension"),
        ("-5x4096", "not CINxCOUT"),
        ("2048", "not CINxCOUT"),
        ("axb", "not CINxCOUT"),
        ("2048x4096x3", "not CINxCOUT"),
        ("\uff12\uff10\uff14\uff18x4096", "not CINxCOUT"),  # full-width digits
        ("\u0662\u0660x4096", "not CINxCOUT"),  # Arabic-Indic digits
        ("1234567890x16", "not CINxCOUT"),
        ("9" * 5000 + "x16", "not CINxCOUT"),
        ("999999999x999999999", "size register"),
    ],
)
def test_plan_bad_shapes_are_one_line(
    capsys: pytest.CaptureFixture[str], shape: str, words: str
) -> None:
    refuses(["plan", f"--shape={shape}", "--engine", FAST], words)


def test_plan_bad_options_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    refuses(["plan", "--shape", "2048x4096", "--dtype", "fp8"], "unknown dtype")
    refuses(["plan", "--shape", "2048x4096", "--lm-head-shards", "0"], "positive")
    refuses(["plan", "--shape", "16x4096", "--lm-head-shards", "5000"], "shards")
    refuses(["plan", "--shape", "2048x4096", "--variant", "nope"], "unknown variant")


def test_plan_and_llm_report_the_axis_patch_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """Cin partial sums unless --axis cout, said in the header and the JSON."""
    rows = _json(capsys, ["plan", "--shape", "2048x8192", "--engine", FAST, "--json"])
    assert rows[0]["search_axis"] == "cin" and rows[0]["axis"] == "cin"
    argv = ["plan", "--shape", "2048x8192", "--engine", FAST, "--axis", "cout", "--json"]
    rows = _json(capsys, argv)
    assert rows[0]["search_axis"] == "cout" and rows[0]["axis"] == "cout"
    doc = _json(capsys, ["llm", "--model", "llama-3.2-1b", "--engine", FAST, "--json"])
    assert doc["axis"] == "cin" and {a["axis"] for a in doc["affected"]} == {"cin"}
    assert main(["llm", "--model", "llama-3.2-1b", "--engine", FAST, "--scope", "mlp"]) == 0
    assert "the patch splits mlp along cin" in capsys.readouterr().out
    assert main(["plan", "--shape", "2048x8192", "--engine", FAST]) == 0
    assert "cut along cin" in capsys.readouterr().out
