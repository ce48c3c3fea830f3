"""The issue-rate governor of kdma_core, written once for the reference and the recurrence."""

from __future__ import annotations

from ane_kdma.hw import RATE_ONE
from ane_kdma.profile import Settings

NEVER = 1 << 62  # a cycle (or a count of lines) past any transfer


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

    The stepped reference drives the registers cycle by cycle (:meth:`start`,
    :meth:`refill`, :meth:`granted`); the recurrence asks when the token
    bucket lets the next line go and what it holds after a grant
    (:meth:`earliest`, :meth:`grant`), and the shortcuts how long the rate
    holds still (:meth:`lines_at_rate`).
    """

    __slots__ = ("rmax", "on", "start_rate", "step", "inc", "rate", "count", "before")

    def __init__(self, s: Settings) -> None:
        self.rmax = s.core_rate_q16
        self.on = s.ramp
        self.start_rate = s.ramp_start_q16 if self.on else self.rmax
        self.step, self.inc = s.ramp_step_lines, s.ramp_inc_q16
        self.rate = self.rmax  # the reset value
        self.count = 0  # lines granted in this request
        self.before: list[tuple[int, int]] = []  # (refill, last cycle) of starts since a grant

    def copy(self) -> Governor:
        twin = Governor.__new__(Governor)
        for k in Governor.__slots__:
            setattr(twin, k, getattr(self, k))
        twin.before = list(self.before)
        return twin

    # ------------------------------------------------------------ the registers
    def start(self) -> None:
        """A request starts (a task taken while the core is idle)."""
        self.rate, self.count = self.start_rate, 0

    def refill(self, busy: bool) -> int:
        """This cycle's refill: the rate register while the core is busy, else the core rate."""
        return self.rate if busy else self.rmax

    def granted(self) -> None:
        """One more line granted in the request: every step of lines, the rate climbs."""
        self.count += 1
        if self.rate < self.rmax and self.count % self.step == 0:
            self.rate = min(self.rate + self.inc, self.rmax)

    def lines_at_rate(self) -> int:
        """Lines still granted at the current rate before it steps (NEVER at the core rate)."""
        if self.rate >= self.rmax:
            return NEVER
        return (self.count // self.step + 1) * self.step - 1 - self.count

    # ------------------------------------------------------------ the token bucket it refills
    def restart(self, e: int, last_busy: int) -> None:
        """A request starts in cycle e: the held rate until the core went idle, then the core's."""
        self.before += [(self.rate, last_busy), (self.rmax, e)]
        self.start()

    def _segments(self, c0: int) -> list[tuple[int, int]]:
        """(refill, last cycle) pieces from cycle c0 on."""
        return [p for p in self.before if p[1] >= c0] + [(self.rate, NEVER)]

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
                bank += (c - c0) * r
                if bank > RATE_ONE:
                    bank = RATE_ONE
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
        self.granted()
        return bank
