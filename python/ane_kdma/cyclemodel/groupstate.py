"""What a group of cores holds: its state declared once, and its ring of latest lines.

One job: the fields every part of a group reads (:mod:`.pattern`, the credit
pattern; :mod:`.meet`, groups that meet; :mod:`.group`, one line's arithmetic),
declared here once with their types, and the ring that keeps the latest lines.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from ane_kdma.cyclemodel.dwindow import DemandWindow
from ane_kdma.cyclemodel.governor import Governor
from ane_kdma.cyclemodel.lines import Ring
from ane_kdma.cyclemodel.ready import Ready
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings

#: the ring of a leader: a period of the state (the token bank's is at most 65536
#: lines) plus the KMem lines the gates look back over
RING_LONG = 1 << 17
CHUNK = 4096  # credits are computed this many lines at a time
#: what the timing of a group depends on: its tasks as the credit sees them, and its core
#: when back-pressure makes every core differ
Work = tuple[tuple[tuple[int, int], ...], int | None]


def ring_lines(kmem: int) -> int:
    """A group's usual ring: at least KMem lines and a follower's lag, a power of two."""
    return 1 << (2 * kmem + 2).bit_length()


class GroupState:
    """The fields of a group (set by :class:`.group.Group`), and its ring's bounds."""

    members: list[int]
    tasks: Sequence[tuple[int, int]]
    work: Work  # equal work (and no back-pressure): groups may shadow each other
    hyp: Hypothesis
    geom: Geometry
    s: Settings
    ready: Ready
    kmem: int
    window: int
    split: bool
    lat: int
    lat_warm: int  # a line of the memory's warm-up
    warm_end: int  # the first line past it
    always: bool
    gov: Governor
    dwin: DemandWindow
    dwin_live: bool  # the demand window or its warm-up can still change a starved line
    zpat: np.ndarray  # the credit-0 lines of one period of the credit pattern (phase 0)
    reach: int  # lines back the credit pattern's widest window reaches
    x: int  # lines granted, all tasks
    j: int  # task being issued
    q: int  # line within it
    n: int  # its lines
    task_first: int  # x at the task's start
    prev_done: int  # drain cycle of line task_first - 1
    g_prev: int
    tok_after: int  # bank at cycle g_prev + 1
    d_prev: int
    pop_prev: int
    last_grant_in_task: int
    floor: int
    zero: int
    peak: int
    inflight: int  # in flight just after the last grant
    epoch: int  # accept cycle of this core's last start from idle
    epoch_line: int
    refused: int  # the latest line the aggregate bucket held back
    dd: deque[int]  # drains of the latest demand-path lines
    pend: deque[int]  # pop cycles of the lines in flight
    cred_static: int | None
    carr: list[int]  # credits of lines clo..chi-1 of the task
    clo: int
    chi: int
    base: int
    period: int
    horizon: int
    keep: tuple[list[int], list[int]] | None
    lo: int  # the first line the ring holds (lines below it are stale)
    ring: Ring
    zoff: dict[int, int]  # merged members: what their zero-credit counts add
    pre: dict[int, tuple[list[int], list[int]]]  # ... and their lines before (keep_lines)

    # ------------------------------------------------------------ the ring of latest lines
    def resize(self, cap: int, lo: int) -> None:
        """A ring of `cap` lines holding what the current one holds of lines lo..x-1."""
        lo = max(lo, self.low, self.x - cap + 1)
        self.ring = self.ring.resized(cap, np.arange(lo, self.x, dtype=np.int64))
        self.lo = lo

    @property
    def low(self) -> int:
        """The first line the ring still holds."""
        return max(self.lo, self.x - self.ring.cap + 1)
