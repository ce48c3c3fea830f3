"""The aggregate bucket's arbiter: the round-robin over the ports that ask in one cycle."""

from __future__ import annotations

from ane_kdma.hw import RATE_ONE


class Arbiter:
    """kdma_mem_model's aggregate token bucket and round-robin pointer, shared by every port.

    The bank holds at most one line; each cycle it gains ``big_r`` (Q.16 lines)
    and grants the asking ports in round-robin order from ``rr`` while a whole
    line is left. The recurrence keeps the bank as of the start of cycle
    ``last + 1``.
    """

    def __init__(self, ncores: int, big_r: int) -> None:
        self.ncores, self.big_r = ncores, big_r
        self.bank, self.last, self.rr = RATE_ONE, 0, 0  # bank at the start of cycle last + 1
        self._tables: dict[tuple[int, ...], list[int]] = {}

    def table(self, members: list[int]) -> list[int]:
        """For each round-robin pointer, the farthest of these ports from it (mod cores)."""
        key = tuple(members)
        if key not in self._tables:
            n = self.ncores
            self._tables[key] = [max((p - rr) % n for p in members) for rr in range(n)]
        return self._tables[key]
