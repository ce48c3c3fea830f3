"""The recurrence's shortcuts, one module each, gathered for the engine.

* :mod:`.shadow`: shadow cores (followers that are shifted copies of a leader);
* :mod:`.jumps`: the leader's exact jumps (a period of its state, the token form);
* :mod:`.tokenform`: the token form itself (the token bucket alone paces the lines);
* :mod:`.joint`: periods and the token form of the general loop (every group at once);
* :mod:`.bucket`: the aggregate bucket, stepped and in closed form.

Each is exact: tests/test_cyclemodel.py holds every one to the stepped loop
and the register-stepped reference.
"""

from __future__ import annotations

from ane_kdma.cyclemodel.joint import JointPeriods
from ane_kdma.cyclemodel.shadow import Shadows


class Shortcuts(Shadows, JointPeriods):
    """The engine's exact shortcuts (see :class:`~ane_kdma.cyclemodel.engine.Engine`)."""
