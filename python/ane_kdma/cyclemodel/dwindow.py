"""The starved-line counter (issue 16), written once for the reference and the recurrence.

A starved line (credit 0: the demand path of the paged reading, or a line of
a task with no credit in the one-path readings) may go only while fewer than
the demand window of such lines are outstanding. kdma_core counts the starved
lines granted since the request started (a task taken while the core is
idle). The window starts each request at ``dwin_start_lines`` and gains one
line every ``dwin_step_lines`` starved lines, up to the demand window
``window``; off (``dwin_start_lines`` 0, or at or above the window), it is the
window from the first line. Lines with credit keep ``window + credit``: the
speculative path, and so the nominal stream, never sees it.

The same counter drives the demand path's warm-up, the other of the
ranking's top two (docs/fidelity.md): a request's first ``dwarm_lines``
starved lines pop ``dwarm_extra_cycles`` later than the memory's latency.

Why (docs/fidelity.md): the starved stream's cost is affine in the size with
a larger fixed part than the nominal stream's. A demand path that widens its
outstanding-read budget one tag at a time gives exactly that: the first
starved lines of a request pay for the narrow window once, then the stream
runs at the full window.
"""

from __future__ import annotations

from ane_kdma.cyclemodel.governor import NEVER
from ane_kdma.profile import Settings


class DemandWindow:
    """The starved-line counter of one core and the demand window it gives."""

    __slots__ = (
        "on",
        "full",
        "start_lines",
        "step",
        "grow",
        "warm",
        "extra_cycles",
        "until",
        "starved",
    )

    def __init__(self, s: Settings) -> None:
        self.on = s.dwin
        self.full = s.window
        self.start_lines = s.dwin_start_lines
        self.step = s.dwin_step_lines
        self.grow = s.dwin_lines()  # starved lines before the window is full (0: off)
        self.warm = s.dwarm_lines if s.dwarm else 0  # starved lines with the extra latency
        self.extra_cycles = s.dwarm_extra_cycles
        self.until = max(self.grow, self.warm)  # starved lines that can still change a line
        self.starved = 0  # starved lines granted in this request (held at `until`)

    def copy(self) -> DemandWindow:
        twin = DemandWindow.__new__(DemandWindow)
        for k in DemandWindow.__slots__:
            setattr(twin, k, getattr(self, k))
        return twin

    def start(self) -> None:
        """A request starts (a task taken while the core is idle): the counter clears."""
        self.starved = 0

    def window(self) -> int:
        """The window a starved line sees now."""
        if self.starved >= self.grow:
            return self.full
        return self.start_lines + self.starved // self.step

    def extra(self) -> int:
        """Extra memory latency of the starved line about to be granted (the warm-up)."""
        return self.extra_cycles if self.starved < self.warm else 0

    def granted(self, lines: int = 1) -> None:
        """`lines` more starved lines granted in this request (the counter saturates)."""
        if self.starved < self.until:
            self.starved = min(self.starved + lines, self.until)

    def take(self) -> int:
        """One starved line granted: its extra latency (:meth:`extra`), then :meth:`granted`
        (the recurrence's hot path, in one call)."""
        n = self.starved
        if n < self.until:
            self.starved = n + 1
            return self.extra_cycles if n < self.warm else 0
        return 0

    def grown(self) -> bool:
        """True once the window is full and the warm-up over for the rest of the request."""
        return self.starved >= self.until

    def lines_at_window(self) -> int:
        """Starved lines still granted alike before the window or the latency changes."""
        if self.grown():
            return NEVER
        to_warm = self.warm - self.starved if self.starved < self.warm else NEVER
        to_grow = self.step - self.starved % self.step if self.starved < self.grow else NEVER
        return min(to_warm, to_grow)
