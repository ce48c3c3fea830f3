"""Cycle-exact Python model of rtl/kdma_top.sv (no simulator imports).

Timeline, as the RTL defines it. Cycle 0 is the cycle in which the first task
is accepted. For a line granted by the memory in cycle g:

* the memory pops it in cycle g + L (L = max(latency, 1)) and KMem holds it
  from cycle g + L + 1;
* it is drained in the first cycle d >= max(g + L + 1, previous drain + 1) in
  which the consumer is ready.

Line i of a core may be requested in cycle c when (lines requested and not yet
drained) < min(window + credit, KMem lines), with the credit the hypothesis
gives for the current task and progress. A hypothesis with split paths sends a
line with credit 0 down the demand path instead, where only demand lines count
against the window. The memory grants a line when the core's token bucket (its
refill set by the core's issue-rate governor) and the aggregate bucket allow
(round-robin over the ports). The rate mechanisms of :class:`Settings` (the
governor's ramp, the memory's warm-up, a per-task cost) are all modeled here,
whether or not the RTL builds them.

A job is, per core, a list of tasks issued back to back: task j goes to every
enabled core at once, and the top takes it once every core has issued all of
task j-1 and drained all of task j-2 (kdma_top's ready). If a core has
drained all of task j-1 before the others are ready, the top waits for idle.

Two engines compute this:

* :func:`simulate` steps every register of kdma_top, kdma_core and
  kdma_mem_model cycle by cycle: the slow, obviously faithful reference.
* :func:`run` advances only at grants: each core's next grant is the latest of
  its token, task and occupancy constraints (a max-plus recurrence), and the
  aggregate bucket arbitrates the cores that ask in the same cycle. Cores with
  identical work share one state until the aggregate bucket tells them apart.
  Its cost is bounded for any legal size: it keeps O(1) state per core (the
  gates see at most KMem lines back), steps one leader for cores that are
  time-shifted copies of one another, and jumps steady state: in closed form
  while the token bucket alone paces, by whole periods otherwise (see
  :class:`_Engine`). It is exact (tests/test_cyclemodel.py holds it to
  :func:`simulate`, and to itself without the shortcuts).
"""

from ane_kdma.cyclemodel.engine import run
from ane_kdma.cyclemodel.job import Backpressure, CoreResult, CoreTask, Job, ModelResult, job_of
from ane_kdma.cyclemodel.ready import LFSR_TAPS, lfsr_seed
from ane_kdma.cyclemodel.stepped import simulate
from ane_kdma.profile import MAX_LATENCY_CYCLES, Settings

__all__ = [
    "LFSR_TAPS",
    "MAX_LATENCY_CYCLES",
    "Backpressure",
    "CoreResult",
    "CoreTask",
    "Job",
    "ModelResult",
    "Settings",
    "job_of",
    "lfsr_seed",
    "run",
    "simulate",
]
