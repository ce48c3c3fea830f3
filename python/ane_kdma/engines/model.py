"""The cycle-model engine: kdma_top's counters to the cycle, in Python (no simulator)."""

from __future__ import annotations

from collections.abc import Sequence

from ane_kdma import cyclemodel as cm
from ane_kdma.chip import Chip
from ane_kdma.contract import CoreCounters, Counters, Result, Workload
from ane_kdma.hypotheses import Hypothesis


def counters_of(res: cm.ModelResult) -> Counters:
    """The model's result as the counters the RTL shows (the top's span, each core's)."""
    return Counters(
        res.cycles,
        tuple(
            None if r is None else CoreCounters(r.cycles, r.zero_credit_cycles, r.peak_inflight)
            for r in res.cores
        ),
    )


class ModelEngine:
    name = "model"
    exact = True

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
        job = cm.job_of(workload.cores, chip.line_bytes)
        res = cm.run(hypothesis, chip.geometry, chip.settings, job)
        return Result.make(self.name, hypothesis, chip, workload, counters_of(res), True)

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]:
        done: dict[Workload, Result] = {}
        out = []
        for w in workloads:
            if w not in done:
                done[w] = self.run(hypothesis, chip, w)
            out.append(done[w])
        return out


ENGINE = ModelEngine()
