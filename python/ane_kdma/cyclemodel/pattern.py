"""The credit pattern of a group's task: each line's credit, its period and horizon.

One job: what the credit arithmetic gives the lines of the current task, in
chunks or in closed form (how far its pattern repeats, how many starved lines a
stretch holds), and so how many lines the shortcuts may skip while the
arithmetic holds still (:meth:`CreditPattern.steady_lines`).
"""

from __future__ import annotations

import numpy as np

from ane_kdma.cyclemodel.governor import NEVER
from ane_kdma.cyclemodel.groupstate import CHUNK, GroupState


class CreditPattern(GroupState):
    """The credit side of a group (see :class:`.group.Group`)."""

    def start_pattern(self, base: int, n: int) -> None:
        """The credit pattern of a new task of `n` lines from `base`."""
        hyp, g = self.hyp, self.geom
        self.base = base
        self.cred_static = hyp.credit(g, base, n, 0) if hyp.static else None
        self.clo = self.chi = 0
        # how far the credit pattern repeats (the period search may not jump past it)
        page = g.prefetch_max_lines
        self.period, self.horizon = 1, 0
        if hyp.progress == "static":
            self.horizon = n
        elif hyp.progress == "paged":  # a pattern per page (constant when it covers none or all)
            page_credits = hyp.credit_array(g, n, np.arange(min(n, page)), base)
            self.horizon = n
            self.period = 1 if np.all(page_credits == page_credits[:1]) else page
        elif hyp.progress == "remaining" and n > page + 1:
            # at the clamp until the last lines; held to the credit arithmetic itself
            if hyp.credit(g, base, n, 0) == hyp.credit(g, base, n, n - page - 1):
                self.horizon = n - page
        self.zpat = np.empty(0, dtype=np.int64)
        self.reach = self.kmem
        if self.horizon > 0:  # (line q < horizon has the credit of q % period)
            pat = hyp.credit_array(g, n, np.arange(min(self.period, n), dtype=np.int64), base)
            self.reach = min(self.kmem, self.window + int(pat.max()))
            if self.dwin.until:
                self.zpat = np.flatnonzero(pat == 0).astype(np.int64)

    def credit(self, q: int) -> int:
        if self.cred_static is not None:
            return self.cred_static
        if not self.clo <= q < self.chi:
            self.clo, self.chi = q, min(self.n, q + CHUNK)
            issued = np.arange(self.clo, self.chi, dtype=np.int64)
            self.carr = self.hyp.credit_array(self.geom, self.n, issued, self.base).tolist()
        return self.carr[q - self.clo]

    def _zeros_before(self, q: int) -> int:
        """Lines 0..q-1 of this task with credit 0, for q <= horizon (the credit pattern)."""
        zpat, period = self.zpat, self.period
        return (q // period) * zpat.size + int(np.searchsorted(zpat, q % period))

    def starved_in(self, q0: int, q1: int) -> int:
        """Lines q0..q1-1 of this task that have credit 0 (the demand window counts them)."""
        if q1 <= q0 or self.dwin.grown():
            return 0
        if self.cred_static is not None:
            return q1 - q0 if self.cred_static == 0 else 0
        out = 0
        h = self.horizon
        if q0 < h:  # in the credit pattern: counted in closed form
            out = self._zeros_before(min(q1, h)) - self._zeros_before(q0)
            q0 = h
        if q1 > q0:  # past its horizon (at most a page)
            issued = np.arange(q0, q1, dtype=np.int64)
            credits = self.hyp.credit_array(self.geom, self.n, issued, self.base)
            out += int(np.count_nonzero(credits == 0))
        return out

    def advance_dwin(self, q0: int, q1: int) -> None:
        """The counter after lines q0..q1-1 of this task were granted in one go (a jump)."""
        if self.dwin_live:
            self.dwin.granted(self.starved_in(q0, q1))
            self.dwin_live = not self.dwin.grown()

    def dwin_steady(self) -> int:
        """Lines from q on that leave the demand window and its warm-up as they are: every
        line before the starved line whose grant changes them (NEVER in the pattern)."""
        if not self.dwin_live:
            return NEVER
        k = self.dwin.lines_at_window()  # the k-th starved line from q on changes them
        zpp = self.zpat.size
        if self.q >= self.horizon or not zpp:
            return NEVER
        i = self._zeros_before(self.q) + k - 1  # its index among the task's starved lines
        pos = (i // zpp) * self.period + int(self.zpat[i % zpp])
        return pos - self.q if pos < self.horizon else NEVER

    # ------------------------------------------------------------ what the shortcuts may skip
    # A rate mechanism that changes the per-line arithmetic after some line says so here:
    # the shortcuts jump only over lines where the arithmetic holds still.
    def steady_lines(self) -> int:
        """Lines after the last one whose arithmetic is the same: the credit pattern holds
        (its horizon), and so do the governor's rate and the starved-line counter's demand
        window and warm-up (the counter itself moves on: see :meth:`advance_dwin`)."""
        return min(self.horizon - self.q, self.gov.lines_at_rate(), self.dwin_steady())

    def slack_tail(self, steady: int, need: int, most: int) -> np.ndarray:
        """The credits of the lines after the `steady` ones when those reach the credit
        pattern's horizon: as many as follow with credit (none on the demand path) and a
        window + credit of at least `need` lines, and at most `most` (the token form's gates
        stay slack over them, whatever their credits)."""
        q0 = self.q + steady
        if most <= 0 or q0 < self.horizon or q0 >= self.n:
            return np.empty(0, dtype=np.int64)
        q1 = min(self.n, q0 + min(most, CHUNK))
        issued = np.arange(q0, q1, dtype=np.int64)
        cred = self.hyp.credit_array(self.geom, self.n, issued, self.base)
        ok = (cred > 0) & (np.minimum(self.window + cred, self.kmem) >= need)
        out: np.ndarray = cred[: ok.size if ok.all() else int(np.argmin(ok))]
        return out

    def settled(self, line: int) -> bool:
        """True if every line from `line` on is past the request's start-up (the memory's
        warm-up and the task's first-request hold-back). The starved-line counter is not a
        start-up: its stretches bound the jumps (:meth:`steady_lines`), and its demand window
        and warm-up are part of every state a jump compares (:meth:`dwin_key`)."""
        return line >= self.warm_end and line >= self.task_first

    def dwin_key(self) -> tuple[int, int] | None:
        """What the counter gives the next starved line: (demand window, extra latency)."""
        return (self.dwin.window(), self.dwin.extra()) if self.dwin_live else None
