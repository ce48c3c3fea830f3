"""The analytic engine: the closed form of :mod:`ane_kdma.analytic`, vectorised over workloads.

O(1) per point in the transfer size; exact for one static-credit task, within
1% of the cycle model otherwise (tests/test_analytic.py). It gives the top's
cycles only: per-core zero-credit and in-flight counters are left as None.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ane_kdma import analytic
from ane_kdma.chip import Chip
from ane_kdma.contract import CoreCounters, Counters, Result, Workload
from ane_kdma.hypotheses import Hypothesis


class AnalyticEngine:
    name = "analytic"
    exact = False

    @staticmethod
    def static_cycles(
        hypothesis: Hypothesis,
        chip: Chip,
        latency: np.ndarray,
        window: np.ndarray,
        core_rate_q16: np.ndarray,
        lines: np.ndarray,
    ) -> np.ndarray:
        """One core's cycles for one task of each size, broadcast over candidate settings.

        What calibration searches over: exact for a static credit, and vectorised
        over the run-time inputs rather than over workloads.
        """
        if not hypothesis.static:
            analytic.check_form(hypothesis)
            raise ValueError(f"{hypothesis.name}: the settings grid needs a static credit")
        g = chip.geometry
        cred = hypothesis.credit_array(g, lines)
        return analytic.static_cycles(latency, window, core_rate_q16, cred, lines, g.kmem_lines)

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
        return self.run_many(hypothesis, chip, [workload])[0]

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]:
        analytic.check_form(hypothesis)
        lb, ring = chip.line_bytes, chip.ring_lines - 1
        rows: dict[tuple, int] = {}  # one row per distinct core sequence
        keys: list[list[tuple | None]] = []
        for w in workloads:
            per_core = []
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
