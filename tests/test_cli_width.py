"""`make demo`'s output fits 100 columns (validate's own width is checked with validate)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from ane_kdma.cli import main

REPO = Path(__file__).resolve().parents[1]
WIDTH = 100


def demo_commands() -> list[list[str]]:
    """The demo recipe's ane-kdma lines, as the Makefile has them (validate left to its owner)."""
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe is not None, "the Makefile has no demo target"
    cmds = []
    for line in recipe.group(1).splitlines():
        words = shlex.split(line.strip(), comments=True)
        if words[:1] == ["$(CLI)"] and words[1] != "validate":
            # the shell expands a pattern (the replay's dumps), from the checkout
            globbed = [sorted(str(p) for p in REPO.glob(w)) if "*" in w else [w] for w in words]
            cmds.append([w for ws in globbed[1:] for w in ws])
    return cmds


def test_the_demo_recipe_echoes_within_100_columns() -> None:
    """make prints each recipe line before running it: that is demo output too."""
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe is not None
    cli = ".venv/bin/ane-kdma"  # what $(CLI) echoes as in a checkout
    echoed = [line.strip().replace("$(CLI)", cli) for line in recipe.group(1).splitlines()]
    assert all(len(line) <= WIDTH for line in echoed), echoed


def test_the_demo_recipe_is_read() -> None:
    assert [c[0] for c in demo_commands()] == ["replay", "erratum", "sweep"]


@pytest.mark.parametrize("argv", demo_commands(), ids=lambda c: c[0])
def test_demo_output_fits_100_columns(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run on the analytic engine: the layout is the engine's but for its name in the header,
    and "analytic" is the longest name, so this is the strictest reading (and needs no build)."""
    monkeypatch.chdir(tmp_path if argv[0] == "sweep" else REPO)  # sweep writes out/ here
    argv = ["analytic" if a == "rtl" else a for a in argv]
    if "--engine" not in argv:
        argv += ["--engine", "analytic"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(argv) == 0
    lines = (out.getvalue() + err.getvalue()).splitlines()
    assert lines
    wide = [(len(line), line) for line in lines if len(line) > WIDTH]
    assert not wide, wide


# ---------------------------------------------------------------- the layout helpers


def test_a_long_header_wraps_at_clauses_and_keeps_every_word() -> None:
    from ane_kdma.cli import common

    text = (
        "plan: model engine, chip m3, profile m3 (paged x demand-warmup); searched on analytic; "
        "paged hardware, fp16, cut along cin; chunks in bytes per core; (lo-hi): band over 16 fits"
    )
    lines = common.wrapped(text)
    assert len(lines) == 2 and all(len(line) <= WIDTH for line in lines), lines
    assert lines[0].endswith("searched on analytic;") and lines[1].startswith("  paged hardware")
    assert " ".join(" ".join(lines).split()) == text  # nothing lost, nothing added
    assert common.wrapped("short; enough") == ["short; enough"]
    # a clause longer than a line wraps at spaces, continuation lines indented
    long = "x; " + " ".join(["word"] * 60)
    got = common.wrapped(long)
    assert len(got) > 1 and all(len(line) <= WIDTH for line in got), got
    assert all(line.startswith("  ") for line in got[1:])
    assert " ".join(" ".join(got).split()) == long


def test_a_wide_table_folds_into_sections_led_by_the_row_name() -> None:
    from ane_kdma.cli import common

    keys = ["name", *(f"column_{i}" for i in range(12))]
    rows = [{"name": n, **{k: f"{n}-{k}-value" for k in keys[1:]}} for n in ("a", "bb")]
    lines = common.table_lines(rows, keys)
    assert all(len(line) <= WIDTH for line in lines), lines
    sections = "\n".join(lines).split("\n\n")
    assert len(sections) > 1
    shown = []
    for section in sections:
        head, *body = section.splitlines()
        assert head.split()[0] == "name" and [r.split()[0] for r in body] == ["a", "bb"]
        shown += head.split()[1:]
        for r in body:  # each cell sits under its column
            for word in r.split()[1:]:
                assert word.split("-")[1] == head.split()[r.split().index(word)]
    assert shown == keys[1:]  # every column once, in order
    narrow = common.table_lines(rows[:1], keys[:3])
    assert len(narrow) == 2 and "" not in narrow  # a table that fits is not folded
