"""The issue-rate governor of kdma_core."""

from __future__ import annotations

from ane_kdma.hw import RATE_ONE
from ane_kdma.profile import Settings


class Governor:
    """A port's token refill per cycle, as the core's issue-rate governor drives it.

    kdma_core's governor counts the lines granted since the request started
    (a task taken while the core is idle). At that start its rate register
    loads ``ramp_start``; every ``ramp_step_lines`` granted lines it adds
    ``ramp_inc``, up to the core rate. So while a core waits for its line j of
    a request, the refill is min(rate, start + inc * floor(j / step)) per cycle.
    The governor throttles only a busy core: while the core is idle (from the
    cycle after its last drain, through the start cycle of the next request)
    the refill is the core rate. Off (no ramp): the core rate, always.
    """

    def __init__(self, s: Settings) -> None:
        self.rmax = s.core_rate_q16
        self.on = s.ramp
        self.start = s.ramp_start_q16 if self.on else self.rmax
        self.step, self.inc = s.ramp_step_lines, s.ramp_inc_q16
        self.rate = self.rmax  # the reset value
        self.count = 0  # lines granted in this request
        self.before: list[tuple[int, int]] = []  # (refill, last cycle) of starts since a grant

    def restart(self, e: int, last_busy: int) -> None:
        """A request starts in cycle e: the held rate until the core went idle, then the core's."""
        self.before += [(self.rate, last_busy), (self.rmax, e)]
        self.rate, self.count = self.start, 0

    def _segments(self, c0: int) -> list[tuple[int, int]]:
        """(refill, last cycle) pieces from cycle c0 on."""
        return [p for p in self.before if p[1] >= c0] + [(self.rate, 1 << 62)]

    def earliest(self, c0: int, bank: int) -> int:
        """First cycle c >= c0 with (bank grown by the refills since c0, capped) + refill >= one."""
        if not self.before:  # one refill from c0 on (every line but a request's first)
            need = RATE_ONE - self.rate - bank
            return c0 if need <= 0 else c0 - (-need // self.rate)
        c = c0
        for r, end in self._segments(c0):
            need = RATE_ONE - r - bank
            k = 0 if need <= 0 else -(-need // r)
            if c + k <= end:
                return c + k
            bank = min(bank + (end - c + 1) * r, RATE_ONE)
            c = end + 1
        raise AssertionError("unreachable")

    def grant(self, c0: int, bank: int, c: int) -> int:
        """A grant in cycle c: the bank after it, from `bank` in cycle c0 and none in between."""
        if not self.before:
            r = self.rate
            if c > c0:
                bank = min(bank + (c - c0) * r, RATE_ONE)
            bank += r - RATE_ONE
        else:
            for r, end in self._segments(c0):
                last = min(end, c - 1)
                if last >= c0:
                    bank = min(bank + (last - c0 + 1) * r, RATE_ONE)
                    c0 = last + 1
                if c <= end:
                    bank += r - RATE_ONE
                    break
            self.before = []
        self.count += 1
        if self.rate < self.rmax and self.count % self.step == 0:
            self.rate = min(self.rate + self.inc, self.rmax)
        return bank
