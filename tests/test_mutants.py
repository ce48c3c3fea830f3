"""The mutation check cannot rot: every mutant applies to today's RTL, and a cheap run catches some.

`make mutants` (tools/mutants.py) builds and runs every mutant on Verilator, for
minutes; this is the part that fits in `make test`: each mutant finds its one
statement in rtl/ (by signal names and operators, not by a verbatim line), the
mutated design still compiles, and a small subset is built and caught on
Icarus. The next RTL edit that moves a mutant's construct fails here, in CI,
instead of breaking `make mutants` unseen.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ane_kdma import hypotheses as hyps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import mutants  # noqa: E402

RTL = REPO / "rtl"
NAMES = [m.name for m in mutants.MUTANTS]
STATIC = {h.name for h in hyps.REGISTRY if h.static}


def _norm(text: str) -> str:
    """SystemVerilog text without comments, whitespace collapsed: what the compiler sees."""
    return " ".join(mutants._mask_comments(text).split())


def test_make_test_builds_every_16_core_model_the_mutant_set_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI runs make test, then the mutant set: the 16-core readings of the one are those of the
    other (tb/test_kdma.py's MULTI_MODES), so each 16-core model is compiled once; a mutant
    moved to another reading at 16 cores must move the tb's list with it."""
    monkeypatch.syspath_prepend(str(REPO / "tb"))
    monkeypatch.delenv("KDMA_FULL", raising=False)
    import importlib

    import test_kdma

    tb = importlib.reload(test_kdma)  # MULTI_MODES as make test computes it (no KDMA_FULL)
    wanted = {mode for m in mutants.MUTANTS if m.cores > 1 for mode in m.modes}
    assert {h.name for h in tb.MULTI_MODES} == wanted
    assert wanted and len(wanted) < len(tb.MODES)  # the list is a real subset, not every mode


def test_every_mutant_applies_once_to_todays_rtl() -> None:
    assert mutants.stale() == []
    for m in mutants.MUTANTS:
        before = (RTL / m.file).read_text()
        after = mutants.mutated_text(m)
        assert _norm(after) != _norm(before), m.name
        # one statement changed: the text before and after it is the file's own
        head = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
        assert before.count(";", 0, head) == after.count(";", 0, head)


def test_the_shared_logic_is_mutated_on_the_paged_and_a_static_reading() -> None:
    """Paged and static builds differ in the issue path: a shared mutant must meet both."""
    for m in mutants.MUTANTS:
        assert set(m.modes) <= set(hyps.names()), m.name
        own = len(m.modes) == 1 or "paged" not in m.modes  # one reading's own arithmetic
        assert own or STATIC & set(m.modes), m.name
    modes = [x for m in mutants.MUTANTS for x in m.modes]
    assert modes.count("paged") >= 15 and sum(modes.count(s) for s in STATIC) >= 13
    assert {"governor_never_ramps", "governor_step_ignored"} <= set(NAMES)
    assert sum("PAGED" in m.what for m in mutants.MUTANTS) >= 3  # the page path's own mutants


def _reformat(text: str) -> str:
    """The same design as another hand would write it: other spacing, line breaks, comments."""
    text = re.sub(r"[ \t]+", "  ", text)
    text = re.sub(r"(\S) (&&|\|\||\?|==|<=) ", r"\1\n      /* why */ \2 ", text)
    return re.sub(r";\n", "; // a trailing note\n", text)


@pytest.mark.parametrize("name", NAMES)
def test_a_reformatted_rtl_takes_the_same_mutant(name: str) -> None:
    m = next(x for x in mutants.MUTANTS if x.name == name)
    text = (RTL / m.file).read_text()
    assert _norm(m.apply(_reformat(text))) == _norm(m.apply(text))


def test_a_changed_construct_is_refused_as_stale_not_skipped() -> None:
    m = next(x for x in mutants.MUTANTS if x.name == "inflight_cap_ignored")
    text = (RTL / m.file).read_text()
    with pytest.raises(mutants.Stale, match="inflight_cap_ignored: 0 statements"):
        m.apply(text.replace("assign room", "assign gate").replace("& room", "& gate"))
    with pytest.raises(mutants.Stale, match="'@ < cap_o' is not in the statement"):
        m.apply(text.replace("< cap_o", "<= cap_o"))
    site = re.search(r"assign\s+room\b[^;]*;", text)
    assert site is not None
    twice = text.replace(site.group(), site.group() + "\n  " + site.group())
    with pytest.raises(mutants.Stale, match="2 statements"):
        m.apply(twice)
    assert mutants.stale(rtl=REPO / "no-such-rtl") == [
        f"{x.name}: rtl/{x.file} is gone" for x in mutants.MUTANTS
    ]


needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="no iverilog")


@needs_icarus
@pytest.mark.parametrize("name", NAMES)
def test_every_mutant_compiles(name: str, tmp_path: Path) -> None:
    """A mutant that does not compile would be 'caught' by the build, which proves nothing."""
    m = next(x for x in mutants.MUTANTS if x.name == name)
    sources = mutants.mutate(m, tmp_path)
    params = mutants._params(m.modes[0], m.cores)
    defines = [f"-P{mutants.TOP}.{k}={v}" for k, v in params.items()]
    proc = subprocess.run(
        ["iverilog", "-g2012", "-o", str(tmp_path / "sim.vvp"), "-s", mutants.TOP, *defines]
        + [str(s) for s in sources],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# The cheap detection: two runs on Icarus with the shortest plan coverage allows (about
# 10 s each alone). One of the page path, one of the governor on a static build; the
# full set, on both simulators, is `make mutants` (docs/mutants.md).
CHEAP = ("page_spec_lines_never_retire@paged", "governor_step_ignored@signed")


@needs_icarus
@pytest.mark.parametrize("key", CHEAP)
def test_a_cheap_run_catches_the_mutant(key: str, tmp_path: Path) -> None:
    pytest.importorskip("cocotb_tools")
    name, mode = key.split("@")
    m = next(x for x in mutants.MUTANTS if x.name == name)
    args = argparse.Namespace(sim="icarus", seed=1, transfers=17, kmax=1, multi_tasks=12)
    outcome = mutants.run_one(mutants.Run(m, mode), args, tmp_path)
    assert outcome.caught, (outcome.check, outcome.detail)
    assert outcome.check in ("rtl-assertion", "scoreboard:cycles"), outcome.detail


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_the_docs_table_lists_every_current_mutant_and_build(sim: str) -> None:
    """docs/mutants.md's generated table is of today's mutants: one row per mutant and build."""
    text = (REPO / "docs" / "mutants.md").read_text()
    begin, end = mutants.doc_markers(sim)
    assert text.count(begin) == 1 and text.count(end) == 1, f"no {sim} table section"
    section = text[text.index(begin) : text.index(end)]
    rows = re.findall(r"^\| (\w+) \| (\w+)( x\d+)? \| (yes|NO) \|", section, re.M)
    listed = sorted(f"{name}@{build}" for name, build, _, _ in rows)
    current = sorted(r.key for m in mutants.MUTANTS for r in m.runs())
    assert listed == current, "regenerate: make mutants MUTANTS_ARGS='--doc docs/mutants.md'"
    assert "kill rate" in section
