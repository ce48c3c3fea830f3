"""The aggregate bucket: its arbiter, and its closed form under the token form.

One job: what kdma_mem_model's shared token bucket and round-robin pointer
do, stepped (:class:`Arbiter`, the general loop's state) or in closed form over
a periodic pattern of grants (:func:`bucket_form`, :func:`pointer_after`: the
shortcuts' jumps read the bucket there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

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


def pointer_after(
    moves: np.ndarray, which: np.ndarray, rr: int, block: int = 32
) -> Callable[[int], int]:
    """The round-robin pointer after event i of a sequence of events (event i moves it by
    moves[which[i]]; the last row of moves is the identity), for a few queried i.

    The pointer has only as many states as ports, so the moves of each block of
    events compose into one map, all blocks at once; a query walks the blocks'
    maps, then the events of its own block.
    """
    n = moves.shape[1]
    blocks = -(-which.size // block)
    flat = np.full(blocks * block, moves.shape[0] - 1, dtype=np.int64)
    flat[: which.size] = which
    padded = flat.reshape(blocks, block)
    comp = np.tile(np.arange(n, dtype=np.int64), (blocks, 1))
    for j in range(block):
        comp = moves[padded[:, j][:, None], comp]
    maps, steps = comp.tolist(), moves.tolist()
    starts = [rr]  # the pointer before each block
    for m in maps:
        starts.append(m[starts[-1]])

    def after(i: int) -> int:
        b = i // block
        p = starts[b]
        for k in padded[b, : i - b * block + 1].tolist():
            p = steps[k][p]
        return p

    return after


@lru_cache(maxsize=8)
def bucket_form(
    tok0: int,
    r: int,
    groups: tuple[tuple[int, int, tuple[int, ...]], ...],
    n0s: tuple[int, ...],
    last: int,
    bank: int,
    rr: int,
    big_r: int,
    ncores: int,
    kmem: int,
    periods: int,
) -> Callable[[int], tuple[int, int]] | None:
    """The aggregate bucket under the token form, for `periods` of its periods from cycle 0.

    The leader's line x + n is granted in cycle -((tok0 - n * one) // r), each
    follower's delta later from its line x + n0 on; the bucket held `bank` at
    the start of cycle last + 1 (last <= 0) and its pointer stood at `rr`.
    None if it refuses a line; else its (bank, pointer) after the events up
    to any cycle c of those periods.
    """
    one = RATE_ONE
    unit = np.gcd(r, one)
    p_lines, end = r // unit, periods * (one // unit)
    times, ports, bits = [], [], []
    for k, (delta, size, _tab) in enumerate(groups):
        n0 = 1 if k == 0 else n0s[k - 1]
        n = np.arange(n0, n0 + periods * p_lines + kmem + 2, dtype=np.int64)
        t = -((tok0 - n * one) // r) + delta
        t = t[t <= end]
        times.append(t)
        ports.append(np.full(t.size, size, dtype=np.int64))
        bits.append(np.full(t.size, 1 << k, dtype=np.int64))
    t_all = np.concatenate(times)
    order = np.argsort(t_all, kind="stable")
    t_all = t_all[order]
    starts = np.flatnonzero(np.diff(t_all, prepend=t_all[0] - 1))
    ev_t = t_all[starts]
    ev_ports = np.add.reduceat(np.concatenate(ports)[order], starts)
    ev_bits = np.bitwise_or.reduceat(np.concatenate(bits)[order], starts)
    gap = np.diff(ev_t, prepend=last)
    step = gap * big_r - ev_ports * one
    top = np.minimum(one, one + big_r - ev_ports * one)
    run = np.cumsum(step)
    banks = run + np.minimum(bank, np.minimum.accumulate(top - run))
    before = np.concatenate(([bank], banks[:-1]))
    if np.any(ev_ports * one > np.minimum(before + (gap - 1) * big_r, one) + big_r):
        return None
    # the round-robin pointer: each event moves it by which groups ask (its kind)
    if len(groups) <= 4:
        kinds, which = np.arange(1 << len(groups)), ev_bits
    else:
        kinds, which = np.unique(ev_bits, return_inverse=True)
    moves = np.empty((kinds.size + 1, ncores), dtype=np.int64)
    for row, b in enumerate(kinds.tolist()):
        tabs = [groups[k][2] for k in range(len(groups)) if b >> k & 1] or [(-1,) * ncores]
        moves[row] = [(v + max(t[v] for t in tabs) + 1) % ncores for v in range(ncores)]
    moves[-1] = np.arange(ncores)  # (no event: the padding of the last block)
    pointer = pointer_after(moves, which, rr)

    def state(c: int) -> tuple[int, int]:
        i = int(np.searchsorted(ev_t, c, side="right")) - 1
        return (bank, rr) if i < 0 else (int(banks[i]), pointer(i))

    return state
