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
  identical work share one state until the aggregate bucket tells them apart,
  and again once the parts meet in one state (checked exactly).
  Its cost is bounded for any legal size: it keeps O(1) state per core (the
  gates see at most KMem lines back), steps one leader for cores that are
  time-shifted copies of one another, and jumps steady state: in closed form
  while the token bucket alone paces, by whole periods otherwise. It is exact
  (tests/test_cyclemodel.py holds it to :func:`simulate`, and to itself
  without the shortcuts; tests/test_engines_verilator.py and tb/ hold the RTL to it).

The modules, in the order a reader wants them:

* ``job``: the job (per core, its tasks) and the results (the RTL's counters).
* ``stepped``: :func:`simulate`, the reference, register by register.
* ``governor``: the issue-rate governor, written once: the reference drives
  its registers, the recurrence asks it about the token bucket it refills,
  the shortcuts how long its rate holds.
* ``ready``: the consumer's readiness under back-pressure (the harness LFSR).
* ``lines``: the per-line state a group keeps, declared once (:class:`Ring`,
  one column per value, each with its kind); copy, compare, follow and jump
  iterate over that declaration.
* ``group``: one group of cores in the recurrence, in layers with one job each:
  ``groupstate`` declares its fields once (and its ring of latest lines);
  ``pattern`` gives the credit pattern of its task and how far the arithmetic
  holds still (:meth:`Group.steady_lines`, :meth:`Group.settled`); ``meet``
  compares and moves states (:meth:`Group.twin`, :meth:`Group.same_state`,
  :meth:`Group.follow`, :meth:`Group.land`); ``group`` itself a line's earliest
  cycle and its grant (:meth:`Group.earliest`, :meth:`Group.grant`).
* ``bucket``: the aggregate bucket: its arbiter (round-robin over the ports),
  and its closed form under the token form.
* ``engine``: :func:`run`: the task loop and the general grant-to-grant loop.
* ``shortcuts``: the engine's exact shortcuts (see :class:`Engine`), one module
  each: ``shadow`` (followers that are shifted copies of a leader), ``jumps``
  (the leader's jumps: a period, the token form), ``tokenform`` (the token
  bucket alone pacing a group's lines), ``joint`` (periods and the token form
  of the general loop).

Adding a rate or floor mechanism (a new input of :class:`Settings`):

1. ``stepped.py``: its registers, as the RTL has them (the reference).
2. ``group.py``: its effect on one line: a floor on the grant cycle in
   :meth:`Group.earliest` (as the per-task cost sets ``floor``), a latency in
   :meth:`Group.grant` (as the memory's warm-up does), or a refill in
   ``governor.py`` (as the ramp does). State it keeps per request goes in
   :meth:`Group.start_task`; state that differs line by line and that the
   future depends on is a column of ``lines.Ring`` (give its kind; the
   shortcuts then carry it), and a scalar compared in :meth:`Group.same_state`
   and :meth:`Group.twin_key` (what a merge of two groups compares), both in
   ``meet.py``; a new field is declared in ``groupstate.py``.
3. ``pattern.py``: say when the arithmetic changes, so no shortcut jumps across
   it: :meth:`Group.steady_lines` (lines it holds still, e.g. until the
   governor's next step) and :meth:`Group.settled` (a start-up the shortcuts
   wait out, e.g. the warm-up). Nothing in the shortcut modules changes.
4. tests/test_cyclemodel.py: draw it in ``_settings`` (random mechanisms) and
   in a case of the period and token-form tests; the stepped reference and
   ``skip=False`` decide.
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
