"""The hypothesis registry: checked against the RTL package, and open to one more entry.

Adding a hypothesis is the RTL case, one registry entry and (to prove it) a
formal job. These tests hold the Python side to rtl/kdma_credit.sv (the
package's constants and enum: tests/test_pkg_parity.py), and show that an
entry added to the registry alone is picked up by sweep, validate and erratum.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import sweep, validate
from ane_kdma.cli import main

REPO = chips.data_dir().parent
CREDIT = (REPO / "rtl" / "kdma_credit.sv").read_text()
CHIP = chips.load()
G = CHIP.geometry


def test_every_entry_has_its_case_in_the_credit_unit() -> None:
    for h in hyps.in_rtl():
        assert re.search(rf"^\s*{h.rtl_name}\s*:", CREDIT, re.M), h.rtl_name


@pytest.mark.parametrize("h", hyps.registry(), ids=lambda h: h.name)
def test_scalar_and_vector_credit_agree(h: hyps.Hypothesis) -> None:
    rng = random.Random(3)
    starts = [rng.randrange(0, 1 << 26) for _ in range(400)]
    sizes = [rng.choice([rng.randrange(1, 9 * G.ring_lines), 5 * G.ring_lines]) for _ in starts]
    issued = [rng.randrange(0, n + 1) for n in sizes]
    want = [h.credit(G, s, n, i) for s, n, i in zip(starts, sizes, issued, strict=True)]
    assert h.credit_array(G, sizes, issued, starts).tolist() == want
    assert all(0 <= c <= G.prefetch_max_lines for c in want)


@pytest.mark.parametrize("h", hyps.registry(), ids=lambda h: h.name)
def test_declared_start_dependence_holds(h: hyps.Hypothesis) -> None:
    """depends_on_start=False lets the models treat cores with equal sizes alike: check it."""
    if h.depends_on_start:
        pytest.skip(f"{h.name} declares that its credit depends on the start line")
    sizes = np.arange(1, 9 * G.ring_lines, 97)
    a = h.credit_array(G, sizes, 0, 0)
    for start in (1, 0x3F00, 0x3FFF, 12345678):
        assert np.array_equal(a, h.credit_array(G, sizes, 0, start))


def test_the_readings_shapes() -> None:
    lit, sig, pag, fix = (hyps.get(n) for n in ("literal", "signed", "paged", "fixed"))
    for x in range(-300, 301):
        n = 3 * G.ring_lines + x
        c = min(abs(x), 256)
        assert sig.credit(G, 0x3F00, n, 0) == c  # the V
        assert lit.credit(G, 0x3F00, n, 0) == (min(x, 256) if x >= 0 else 256)  # one side
        assert fix.credit(G, 0x3F00, n, n - 1) == 1
        # paged: the signed credit over the first c lines of every 256-line page, then 0
        for issued in (0, 255, 256, 256 + c - 1, 256 + c, 5 * 256 + 17):
            want = c if issued % 256 < c else 0
            assert pag.credit(G, 0x3F00, n, issued) == want, (x, issued)
    assert CHIP.variant("buggy") is pag  # the reading the bundled m3 profile names
    assert not fix.buggy and fix.progress == "remaining" and pag.progress == "paged"


# ---------------------------------------------------------------- a throw-away entry


def _ring13(g: hyps.Geometry, start, lines, issued):
    return hyps.get("signed").scalar(replace(g, ring_bits=13), start, lines, issued)


def _ring13_v(g: hyps.Geometry, start, lines, issued):
    return hyps.get("signed").vector(replace(g, ring_bits=13), start, lines, issued)


RING13 = hyps.Hypothesis(
    name="ring13",
    rtl_name=None,
    encoding=None,
    buggy=True,
    progress="static",
    depends_on_start=False,
    scalar=_ring13,
    vector=_ring13_v,
    style={"color": "tab:green", "ls": ":", "lw": 1.2},
    description="throw-away: the signed reading of a 13-bit ring (notch every 0x2000 lines)",
)


@pytest.fixture()
def with_ring13(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hyps, "REGISTRY", (*hyps.REGISTRY, RING13))


@pytest.mark.usefixtures("with_ring13")
def test_a_new_entry_reaches_sweep_validate_and_erratum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sw = sweep.compute_sweep(CHIP, 8, 8192, 8, 4096, "analytic")
    assert "ring13" in sw.gbps
    sp = sweep.spectrum(sw, CHIP)
    assert sp.dominant["ring13"] == pytest.approx(1024, rel=0.02)  # half a 14-bit lap in D
    assert sp.dominant["signed"] == pytest.approx(2048, rel=0.02)
    assert "ring13" in sweep.overlay(CHIP, "analytic").excess_us

    report = validate.validate("analytic", CHIP, rank=False)  # the rows; the ranking is fits.json's
    assert "ring13" in report.fit_error
    assert any(r.scope == "ring13" for r in report.rows)

    assert main(["erratum", "--laps", "2", "--engine", "analytic", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    # a 13-bit ring aliases at every 0x4000 lines too, so it starves at k x 0x4000 as well
    assert all(r["ring13/fixed"] > 2 for r in rows)


def test_an_entry_outside_the_rtl_is_refused_by_the_rtl_engine() -> None:
    from ane_kdma import contract
    from ane_kdma.errors import InputError

    with pytest.raises(InputError, match="no RTL encoding"):
        contract.run("rtl", RING13, CHIP, contract.Workload.from_size(64, 1))
