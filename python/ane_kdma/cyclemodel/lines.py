"""The per-line state of a group, declared once: a ring of its latest lines.

Every column of :class:`Ring` is declared here, with its *kind*: how the value
moves when a schedule is shifted in time (a follower is its leader, delta
cycles later) or jumped ahead by whole periods. Copy, compare, follow, jump and
the token bucket's closed form all iterate over :data:`COLUMNS`, so a new
per-line value is one line here (and its value in ``Group.grant``).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

#: kinds: how a column moves under a shift of dt cycles / a jump of (dt cycles, dn lines, dz
#: zero-credit cycles)
CYCLE = "cycle"  # a cycle number: + dt
ZERO = "zero"  # the zero-credit count: + dz
COUNT = "count"  # a count of the request's lines: + dn
PEAK = "peak"  # a running maximum: holds at the latest value (a jump repeats the past)
SAME = "same"  # anything else: unchanged

Values = dict[str, np.ndarray]


def _column(kind: str, *, seen: bool = False, leader: bool = False) -> Any:
    """A ring column. seen: what the gates look back at (compared by shadows and periods);
    leader: kept only by a shadow's leader, for the period search (a follower leaves it)."""
    return field(init=False, repr=False, metadata={"kind": kind, "seen": seen, "leader": leader})


@dataclass(eq=False)
class Ring:
    """The latest `cap` lines of a group (cap a power of two), line x at index x & mask."""

    cap: int
    # ---- per line (one int64 each)
    grant: array[int] = _column(CYCLE, seen=True)  # the grant cycle
    drain: array[int] = _column(CYCLE, seen=True)  # the drain cycle
    pop: array[int] = _column(CYCLE, seen=True)  # the cycle the memory pops it
    demand: array[int] = _column(SAME, seen=True)  # 1: sent down the demand path
    bank: array[int] = _column(SAME)  # the port's token bank after the grant
    rate: array[int] = _column(SAME)  # the governor's refill after it
    count: array[int] = _column(COUNT)  # the governor's lines granted in the request
    zero: array[int] = _column(ZERO)  # the zero-credit count after it
    peak: array[int] = _column(PEAK, leader=True)  # the in-flight peak so far
    sig: array[int] = _column(SAME, leader=True)  # a hash of the line, relative to its grant
    agg: array[int] = _column(SAME, leader=True)  # the aggregate bucket's bank after it
    rr: array[int] = _column(SAME, leader=True)  # the round-robin pointer after it

    def __post_init__(self) -> None:
        self.mask = self.cap - 1
        for c in COLUMNS:
            setattr(self, c, array("q", [0]) * self.cap)

    def col(self, name: str) -> array[int]:
        out: array[int] = getattr(self, name)
        return out

    def view(self, name: str) -> np.ndarray:
        """A column as an int64 numpy view (writes go through)."""
        return np.frombuffer(self.col(name), np.int64)

    def copy(self) -> Ring:
        twin = Ring(1)
        twin.cap, twin.mask = self.cap, self.mask
        for c in COLUMNS:
            setattr(twin, c, array("q", self.col(c)))
        return twin

    def resized(self, cap: int, lines: np.ndarray) -> Ring:
        """A ring of `cap` lines holding these lines of this one."""
        new = Ring(cap)
        for c in COLUMNS:
            new.view(c)[lines & new.mask] = self.view(c)[lines & self.mask]
        return new

    def get(self, lines: np.ndarray, names: tuple[str, ...]) -> Values:
        """These columns at these lines (copies)."""
        idx = lines & self.mask
        return {c: self.view(c)[idx] for c in names}

    def put(self, lines: np.ndarray, values: Values) -> None:
        idx = lines & self.mask
        for c, v in values.items():
            self.view(c)[idx] = v

    def matches(self, lines: np.ndarray, other: Ring, other_lines: np.ndarray, dt: int) -> bool:
        """True if what the gates see of these lines is the other's, dt cycles later."""
        a, b = lines & self.mask, other_lines & other.mask
        return all(
            np.array_equal(other.view(c)[b], self.view(c)[a] + (dt if KIND[c] == CYCLE else 0))
            for c in SEEN
        )


def moved(values: Values, dt: int = 0, dn: int = 0, dz: int = 0, peak: int | None = None) -> Values:
    """Columns shifted dt cycles, dn lines of the request and dz zero-credit cycles on."""
    by = {CYCLE: dt, COUNT: dn, ZERO: dz}
    out = {}
    for c, v in values.items():
        if KIND[c] == PEAK and peak is not None:
            out[c] = np.full_like(v, peak)
        else:
            out[c] = v + by.get(KIND[c], 0)
    return out


_DECL = [f for f in fields(Ring) if "kind" in f.metadata]
COLUMNS: tuple[str, ...] = tuple(f.name for f in _DECL)
KIND: dict[str, str] = {f.name: f.metadata["kind"] for f in _DECL}
SEEN: tuple[str, ...] = tuple(f.name for f in _DECL if f.metadata["seen"])
#: what a follower keeps (a leader keeps every column)
OWN: tuple[str, ...] = tuple(f.name for f in _DECL if not f.metadata["leader"])
