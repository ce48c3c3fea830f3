"""One contract, two engines: RTL and cycle model give identical cycles on the real dumps."""

from __future__ import annotations

import pytest

from ane_kdma import regdump
from ane_kdma.cli import split_lines
from ane_kdma.engines import cycles
from ane_kdma.hw import CreditMode
from ane_kdma.profile import REPO, load

DUMPS = sorted((REPO / "data" / "dumps").glob("m3_n4096_d*.txt"))


@pytest.mark.parametrize("mode", list(CreditMode), ids=lambda m: m.name.lower())
def test_rtl_and_model_agree_on_the_real_dumps(sim: str, mode: CreditMode) -> None:
    assert len(DUMPS) == 3
    settings = load().settings
    seqs = []
    for path in DUMPS:
        lines = regdump.load_task(path).lines_per_core
        seqs += [[lines], split_lines(lines, 2)]
    rtl = cycles("rtl", mode, settings, seqs, sim=sim)
    model = cycles("model", mode, settings, seqs)
    assert rtl == model
