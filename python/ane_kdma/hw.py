"""Micro-architectural constants and the credit formulas, mirrored from rtl/kdma_pkg.sv.

One place in Python holds what the RTL package holds, so the cycle model, the
analytic model and the testbenches agree by construction; `tests/` and `tb/`
check the RTL against these numbers.
"""

from __future__ import annotations

import enum

import numpy as np

LINE_BYTES = 64
LINE_SHIFT = 6
ADDR_BITS = 32
LINE_ADDR_BITS = ADDR_BITS - LINE_SHIFT
LINE_ADDR_MASK = (1 << LINE_ADDR_BITS) - 1
COUNT_BITS = 32
COUNT_MASK = (1 << COUNT_BITS) - 1
RING_BITS = 14
RING_LINES = 1 << RING_BITS  # 0x4000 lines = 1 MiB per core
PREFETCH_MAX_LINES = 256  # one 16 KiB page
KMEM_LINES = 1024  # 64 KiB
RATE_FRAC_BITS = 16
RATE_ONE = 1 << RATE_FRAC_BITS
NUM_CORES_MAX = 16


class CreditMode(enum.IntEnum):
    """The credit-mode enumeration of kdma_pkg (values are the RTL encodings)."""

    LITERAL = 0  # the article's 14-bit sketch, literally: one-sided notch
    SIGNED = 1  # 14-bit distance read as a signed ring offset: a V
    FIXED = 2  # full-width lines remaining: the fix

    @property
    def buggy(self) -> bool:
        return self is not CreditMode.FIXED

    @classmethod
    def parse(cls, name: str) -> CreditMode:
        from ane_kdma.errors import InputError

        key = name.strip().upper()
        if key == "BUGGY":
            key = "SIGNED"
        try:
            return cls[key]
        except KeyError:
            names = ", ".join(m.name.lower() for m in cls)
            raise InputError(f"unknown variant {name!r} (one of: {names}, buggy)") from None


BUGGY_MODES = (CreditMode.LITERAL, CreditMode.SIGNED)


def credit(mode: CreditMode, start_line: int, transfer_lines: int, issued: int) -> int:
    """Look-ahead credit, exactly as kdma_credit.sv computes it."""
    ring = RING_LINES - 1
    distance = ((start_line + transfer_lines) & ring) - (start_line & ring)
    distance &= ring
    if mode is CreditMode.LITERAL:
        avail = distance
    elif mode is CreditMode.SIGNED:
        avail = (RING_LINES - distance) & ring if distance & (RING_LINES >> 1) else distance
    else:
        avail = (transfer_lines - issued) & COUNT_MASK
    return min(avail, PREFETCH_MAX_LINES)


def credit_array(mode: CreditMode, transfer_lines: np.ndarray) -> np.ndarray:
    """Static credit at task start for many transfer sizes (start line 0)."""
    t = np.asarray(transfer_lines, dtype=np.int64)
    distance = t & (RING_LINES - 1)
    if mode is CreditMode.LITERAL:
        avail = distance
    elif mode is CreditMode.SIGNED:
        avail = np.where(distance >= RING_LINES // 2, RING_LINES - distance, distance)
    else:
        avail = t
    return np.minimum(avail, PREFETCH_MAX_LINES)


def line_words(line_addr: np.ndarray | int) -> np.ndarray:
    """The 16 data words of a line, as kdma_pkg::line_data computes them."""
    a = np.atleast_1d(np.asarray(line_addr, dtype=np.uint64)) & np.uint64(LINE_ADDR_MASK)
    j = np.arange(16, dtype=np.uint64)
    w = (a[:, None] * np.uint64(0x9E3779B1) + j[None, :] * np.uint64(0x7F4A7C15)) & np.uint64(
        0xFFFFFFFF
    )
    return (w ^ (w >> np.uint64(15))).astype(np.uint32)


def line_data(line_addr: int) -> int:
    """One line's 512-bit payload as an integer (word 0 in the low bits)."""
    value = 0
    for j, word in enumerate(line_words(line_addr)[0]):
        value |= int(word) << (32 * j)
    return value


def lines_for_bytes(size_bytes: int) -> int:
    """The core rounds a byte size up to whole lines."""
    return (size_bytes + LINE_BYTES - 1) >> LINE_SHIFT


def lap_and_offset(lines: int) -> tuple[int, int]:
    """k = round(lines / 0x4000) and x = lines - k * 0x4000 (erratum.md, section 2)."""
    k = int(np.floor(lines / RING_LINES + 0.5))
    return k, lines - k * RING_LINES
