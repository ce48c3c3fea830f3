"""ane_kdma.sweep: the measured tables written beside the model (sweep --out)."""

from __future__ import annotations

import numpy as np
import pytest

from ane_kdma import chip as chips
from ane_kdma import contract
from ane_kdma import hypotheses as hyps

M3 = chips.chips_dir() / "m3"
URL = "https://eiln.github.io/posts/ane-dma.html"
MIB = 1 << 20


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
