"""The split planner: which weights stream in the notch, and the simplest cut that gets them out.

* :mod:`.weight`: a weight's per-core payload (any Cout, kernel, dtype; LM-head
  shards) and the notch window;
* :mod:`.search`: the candidates (Cout in whole groups, Cin in whole lines,
  LM-head shard counts), generated without running an engine;
* :mod:`.planner`: predicted on the analytic engine, the simplest of the
  fastest taken, checked and reported on the user's engine, explained.

Analyses import this package and the contract, never an engine module.
"""

from __future__ import annotations

from ane_kdma.plan.planner import (
    GAIN,
    TIE,
    Decision,
    PlanRow,
    Timing,
    decide,
    plan_weight,
    retime,
    search,
    timings,
    workload,
)
from ane_kdma.plan.search import (
    AXES,
    AXIS_RANK,
    DEFAULT_AXIS,
    MAX_PARTS,
    Candidate,
    candidates,
    check_axis,
    unsplit,
)
from ane_kdma.plan.weight import (
    DTYPE_BITS,
    Weight,
    clearance,
    dtype_bits,
    dtype_name,
    in_window,
    lines_of,
    window_lines,
)

__all__ = [
    "AXES",
    "AXIS_RANK",
    "DEFAULT_AXIS",
    "DTYPE_BITS",
    "GAIN",
    "MAX_PARTS",
    "TIE",
    "Candidate",
    "Decision",
    "PlanRow",
    "Timing",
    "Weight",
    "candidates",
    "check_axis",
    "clearance",
    "decide",
    "dtype_bits",
    "dtype_name",
    "in_window",
    "lines_of",
    "plan_weight",
    "retime",
    "search",
    "timings",
    "unsplit",
    "window_lines",
    "workload",
]
