"""The analytic engine: the closed form of :mod:`ane_kdma.analytic`, vectorised over workloads.

O(1) per point in the transfer size; exact for one static-credit task, within
1% of the cycle model otherwise, and within issue 16's 2% with the demand
path's warm-up (tests/test_analytic.py; the demand window it refuses). It
gives the top's cycles only: per-core zero-credit and in-flight counters are
left as None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ane_kdma import analytic
from ane_kdma.chip import Chip
from ane_kdma.contract import CoreCounters, Counters, Result, Workload
from ane_kdma.hypotheses import Hypothesis


class AnalyticEngine:
    name = "analytic"
    exact = False

    @staticmethod
    def governor_grid(chip: Chip, **grid: Any) -> np.ndarray:
        """One static task's cycles under the issue-rate governor, broadcast over a grid.

        Keywords as :func:`ane_kdma.analytic.governor_grid` takes them, the chip's
        KMem supplied here.
        """
        return analytic.governor_grid(**grid, kmem_lines=chip.geometry.kmem_lines)

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
        return self.run_many(hypothesis, chip, [workload])[0]

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]:
        analytic.check_form(hypothesis)
        lb = chip.line_bytes
        # a credit that ignores the start line makes the base irrelevant: cores that differ
        # only in their bases share one row (a 16-core sweep costs one core per point)
        ring = chip.ring_lines - 1 if hypothesis.depends_on_start else 0
        rows: dict[tuple, int] = {}  # one row per distinct core sequence
        keys: list[list[tuple | None]] = []
        for w in workloads:
            per_core: list[tuple | None] = []
            for seq in w.cores:
                if seq is None:
                    per_core.append(None)
                    continue
                key = tuple((t.lines_of(lb), t.base_line_of(lb) & ring) for t in seq)
                rows.setdefault(key, len(rows))
                per_core.append(key)
            keys.append(per_core)
        cycles: dict[tuple, int] = {}
        by_steps: dict[int, list[tuple]] = {}
        for key in rows:
            by_steps.setdefault(len(key), []).append(key)
        for group in by_steps.values():
            arr = np.array(group, dtype=np.int64)  # (rows, steps, 2)
            cyc = analytic.core_cycles(
                hypothesis, chip.geometry, chip.settings, arr[:, :, 0], arr[:, :, 1]
            )
            cycles.update({k: int(c) for k, c in zip(group, cyc.tolist(), strict=True)})
        out = []
        for w, per_core in zip(workloads, keys, strict=True):
            top = max(cycles[k] for k in per_core if k is not None)
            cores = tuple(None if k is None else CoreCounters(cycles[k] - 1) for k in per_core)
            out.append(Result.make(self.name, hypothesis, chip, w, Counters(top, cores), False))
        return out


ENGINE = AnalyticEngine()
