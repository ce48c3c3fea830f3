"""The hypothesis registry: every credit mode the RTL can be built with, in one list.

Why one list: a hypothesis is a reading of how the kernel DMA turns a task into
look-ahead credit. Everything mode-specific (the cycle model, the analytic
model, sweeps, validation, the testbenches' coverage and the plots) iterates
over ``REGISTRY`` and reads what it needs from the entry, so adding a
hypothesis is: its case in ``rtl/kdma_credit.sv`` and ``rtl/kdma_pkg.sv``, one
entry here, and (to be proven) a formal job. ``tests/test_hypotheses.py``
checks every entry against the RTL package.

Each credit function takes the chip's :class:`Geometry` and
``(start_line, transfer_lines, issued_lines)``, exactly the inputs of
kdma_credit.sv, and returns the credit in lines. ``credit`` is the scalar form
the cycle-stepped reference calls; ``credit_array`` is the same arithmetic on
numpy arrays, for the fast models. A test holds them equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.hw import COUNT_MASK

#: how a hypothesis's credit evolves over one task (read by the analytic model)
PROGRESS_FORMS = {
    "static": "fixed at task start: a function of the start line and the size only",
    "remaining": "a function of the lines left, at the clamp until the last clamp - 1 lines",
    "paged": "a static credit c that covers the first c lines of every page of the task",
}


@dataclass(frozen=True)
class Geometry:
    """What of the chip the credit arithmetic sees (data/chips/<name>/chip.json)."""

    line_bytes: int
    ring_bits: int
    prefetch_max_lines: int
    kmem_lines: int

    @property
    def ring_lines(self) -> int:
        return 1 << self.ring_bits


Scalar = Callable[[Geometry, int, int, int], int]
Vector = Callable[[Geometry, Any, Any, Any], np.ndarray]


@dataclass(frozen=True)
class Hypothesis:
    """One credit mode: its RTL encoding, its arithmetic, and how to show it."""

    name: str  # lower case, as the CLI and the plots say it
    rtl_name: str | None  # enum member in kdma_pkg::credit_mode_e; None: Python only
    encoding: int | None  # its value in the RTL
    buggy: bool
    progress: str  # a key of PROGRESS_FORMS
    depends_on_start: bool  # False: cores with equal sizes get equal credit anywhere
    scalar: Scalar = field(repr=False)
    vector: Vector = field(repr=False)
    style: dict[str, object] = field(default_factory=dict, repr=False, compare=False)  # matplotlib
    description: str = ""
    # "one": every line waits for (lines outstanding) < window + credit. "split": a line
    # with credit > 0 is speculative (its own budget: spec lines outstanding < credit), a
    # line with credit 0 goes through the demand path (demand lines outstanding < window).
    paths: str = "one"

    def __post_init__(self) -> None:
        if self.progress not in PROGRESS_FORMS:
            raise ValueError(f"hypothesis {self.name}: unknown progress form {self.progress!r}")
        if self.paths not in ("one", "split"):
            raise ValueError(f"hypothesis {self.name}: paths must be 'one' or 'split'")

    @property
    def static(self) -> bool:
        """True when the credit is fixed at task start (it never depends on progress)."""
        return self.progress == "static"

    def credit(self, g: Geometry, start_line: int, transfer_lines: int, issued: int) -> int:
        """Look-ahead credit, exactly as kdma_credit.sv computes it."""
        return int(self.scalar(g, start_line, transfer_lines, issued))

    def credit_array(
        self, g: Geometry, transfer_lines: Any, issued: Any = 0, start_line: Any = 0
    ) -> np.ndarray:
        """The same credit for many (start, size, issued) at once (broadcast), as int64."""
        t = np.asarray(transfer_lines, dtype=np.int64)
        i = np.asarray(issued, dtype=np.int64)
        s = np.asarray(start_line, dtype=np.int64)
        return np.asarray(self.vector(g, s, t, i), dtype=np.int64)

    def static_credit(self, g: Geometry, start_line: int, transfer_lines: int) -> int | None:
        """The credit of a static hypothesis for this task; None if it depends on progress."""
        return self.credit(g, start_line, transfer_lines, 0) if self.static else None


# ----------------------------------------------------------------- the arithmetic


def ring_distance(g: Geometry, start: Any, lines: Any, ring_bits: int | None = None) -> Any:
    """(start + lines)[RB-1:0] - start[RB-1:0], modulo 2^RB: the article's 14-bit distance."""
    mask = (1 << (ring_bits or g.ring_bits)) - 1
    return (((start + lines) & mask) - (start & mask)) & mask


def _literal(g: Geometry, start: int, lines: int, issued: int) -> int:
    return min(ring_distance(g, start, lines), g.prefetch_max_lines)


def _literal_v(g: Geometry, start: Any, lines: Any, issued: Any) -> np.ndarray:
    d = ring_distance(g, start, lines) + 0 * issued
    return np.minimum(d, g.prefetch_max_lines)


def _signed(g: Geometry, start: int, lines: int, issued: int) -> int:
    d = ring_distance(g, start, lines)
    mag = (g.ring_lines - d) & (g.ring_lines - 1) if d & (g.ring_lines >> 1) else d
    return min(mag, g.prefetch_max_lines)


def _signed_v(g: Geometry, start: Any, lines: Any, issued: Any) -> np.ndarray:
    d = ring_distance(g, start, lines) + 0 * issued
    mag = np.where(d & (g.ring_lines >> 1), (g.ring_lines - d) & (g.ring_lines - 1), d)
    return np.minimum(mag, g.prefetch_max_lines)


def _paged(g: Geometry, start: int, lines: int, issued: int) -> int:
    c = _signed(g, start, lines, 0)
    return c if issued % g.prefetch_max_lines < c else 0


def _paged_v(g: Geometry, start: Any, lines: Any, issued: Any) -> np.ndarray:
    c = _signed_v(g, start, lines, 0 * issued)
    return np.where(issued % g.prefetch_max_lines < c, c, 0)


def _fixed(g: Geometry, start: int, lines: int, issued: int) -> int:
    return min((lines - issued) & COUNT_MASK, g.prefetch_max_lines)


def _fixed_v(g: Geometry, start: Any, lines: Any, issued: Any) -> np.ndarray:
    left = (lines - issued + 0 * start) & COUNT_MASK
    return np.minimum(left, g.prefetch_max_lines)


REGISTRY: tuple[Hypothesis, ...] = (
    Hypothesis(
        name="literal",
        rtl_name="CreditLiteral",
        encoding=0,
        buggy=True,
        progress="static",
        depends_on_start=False,
        scalar=_literal,
        vector=_literal_v,
        style={"color": "tab:orange", "ls": "-", "lw": 1.4},
        description="the article's sketch as written: min(14-bit end - start, 256); "
        "starves only x in [0, 256)",
    ),
    Hypothesis(
        name="signed",
        rtl_name="CreditSigned",
        encoding=1,
        buggy=True,
        progress="static",
        depends_on_start=False,
        scalar=_signed,
        vector=_signed_v,
        style={"color": "tab:red", "ls": "--", "lw": 1.4},
        description="the same 14-bit distance read as a signed ring offset, min(|d|, 256): "
        "a V that starves |x| < 256 on both sides",
    ),
    Hypothesis(
        name="paged",
        rtl_name="CreditPaged",
        encoding=3,
        buggy=True,
        progress="paged",
        depends_on_start=False,
        scalar=_paged,
        vector=_paged_v,
        style={"color": "tab:purple", "ls": "-.", "lw": 1.6},
        description="the signed 14-bit credit c, page by page: the first c lines of each "
        "256-line page go speculatively (window + c ahead), the rest through the demand "
        "window; a V linear in |x|",
        paths="split",
    ),
    Hypothesis(
        name="fixed",
        rtl_name="CreditFixed",
        encoding=2,
        buggy=False,
        progress="remaining",
        depends_on_start=False,
        scalar=_fixed,
        vector=_fixed_v,
        style={"color": "tab:blue", "ls": "-", "lw": 1.8},
        description="the fix: min(transfer - issued, 256) in 32 bits, no notch",
    ),
)

#: ``--variant buggy``: not a reading of its own but the one a chip's profile names, resolved
#: by :meth:`ane_kdma.chip.Chip.variant` (a second chip may name another)
BUGGY = "buggy"
FIXED = "fixed"


def registry() -> tuple[Hypothesis, ...]:
    """The registry, read at call time (a test may add a throw-away entry with monkeypatch)."""
    return REGISTRY


def names() -> list[str]:
    return [h.name for h in registry()]


def get(name: str) -> Hypothesis:
    """The hypothesis called `name`; "buggy" is a chip's reading (:meth:`Chip.variant`)."""
    key = name.strip().lower()
    for h in registry():
        if h.name == key:
            return h
    if key == BUGGY:
        raise InputError(
            "'buggy' means the reading a chip's profile names: resolve it through the chip "
            "(Chip.variant), or name a reading: " + ", ".join(names())
        )
    raise InputError(f"unknown variant {name[:40]!r} (one of: {', '.join(names())}, buggy)")


def variant(name: str, buggy: Hypothesis) -> Hypothesis:
    """A ``--variant``: a hypothesis by name, or "buggy" for `buggy` (the chip's reading)."""
    return buggy if is_buggy_alias(name) else get(name)


def is_buggy_alias(name: str) -> bool:
    return name.strip().lower() == BUGGY


def by_encoding(value: int) -> Hypothesis:
    """The hypothesis an RTL build's CreditMode parameter selects."""
    for h in registry():
        if h.encoding == value:
            return h
    raise InputError(f"no hypothesis has RTL encoding {value}")


def buggy() -> tuple[Hypothesis, ...]:
    return tuple(h for h in registry() if h.buggy)


def in_rtl() -> tuple[Hypothesis, ...]:
    """The hypotheses the RTL can be built with."""
    return tuple(h for h in registry() if h.encoding is not None)
