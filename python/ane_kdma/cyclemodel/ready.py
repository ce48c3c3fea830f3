"""Consumer readiness: the harness's per-core LFSR, as a table of waits."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ane_kdma.cyclemodel.job import Backpressure
from ane_kdma.errors import InputError

LFSR_TAPS = 0xB400  # 16-bit Galois LFSR, maximal length (period 65535)


@lru_cache(maxsize=1)
def _lfsr_cycle() -> tuple[np.ndarray, np.ndarray]:
    """The whole LFSR period from state 1, and each state's index in it."""
    seq = np.empty(65535, dtype=np.int64)
    s = 1
    for i in range(65535):
        seq[i] = s
        s = (s >> 1) ^ (LFSR_TAPS if s & 1 else 0)
    index = np.empty(65536, dtype=np.int64)
    index[seq] = np.arange(65535)
    return seq, index


@lru_cache(maxsize=256)
def _ready_table(threshold: int) -> np.ndarray:
    """For each LFSR position, cycles to the next position whose state lets the consumer drain."""
    seq, _ = _lfsr_cycle()
    ready = (seq & 0xFF) >= threshold
    if not ready.any():
        raise InputError("back-pressure threshold leaves the consumer never ready")
    n = len(seq)
    idx = np.flatnonzero(np.concatenate([ready, ready]))
    pos = np.arange(n)
    nxt = idx[np.searchsorted(idx, pos)]
    return nxt - pos


def lfsr_seed(seed: int, core: int) -> int:
    """Per-core LFSR seed, as tb/hdl/kdma_tb_top.sv derives it."""
    s = (seed ^ (core * 0x9E37)) & 0xFFFF
    return s if s else 1


class Ready:
    """Answers 'first cycle >= c in which a core may drain' (reseeded at each idle start)."""

    def __init__(self, bp: Backpressure | None, core: int) -> None:
        self.always = True
        if bp is None or bp.threshold == 0:
            return
        self.always = False
        _, index = _lfsr_cycle()
        self.dist = _ready_table(bp.threshold)
        self.n = len(self.dist)
        self.offset = int(index[lfsr_seed(bp.seed, core)])  # the seed's state: cycle fresh + 1
        self.fresh = 0

    def restart(self, fresh: int) -> None:
        self.fresh = fresh

    def next(self, c: int) -> int:
        if self.always:
            return c
        return c + int(self.dist[(self.offset + c - self.fresh - 1) % self.n])

    def at(self, c: int) -> bool:
        return self.always or self.next(c) == c
