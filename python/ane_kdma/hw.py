"""Constants of the RTL itself (rtl/kdma_pkg.sv) and the test-data function.

What is fixed by the RTL lives here: the 64-byte line and 32-bit address and
count widths, the Q.16 rates, and the line-data function the checkers
recompute. What describes a chip (cores, ring width, prefetch clamp, KMem,
DRAM ceiling, register layout) is data: :mod:`ane_kdma.chip` reads it from
data/chips/<name>/. The credit modes are :mod:`ane_kdma.hypotheses`.
"""

from __future__ import annotations

import numpy as np

LINE_BYTES = 64
LINE_SHIFT = 6
ADDR_BITS = 32
LINE_ADDR_BITS = ADDR_BITS - LINE_SHIFT
LINE_ADDR_MASK = (1 << LINE_ADDR_BITS) - 1
COUNT_BITS = 32
COUNT_MASK = (1 << COUNT_BITS) - 1
#: the cycle counters (busy, zero-credit) are this wide
CYCLE_BITS = 32
RATE_FRAC_BITS = 16
RATE_ONE = 1 << RATE_FRAC_BITS
#: a per-core rate (and the governor's start and increment), up to one line a cycle
RATE_BITS = RATE_FRAC_BITS + 1
#: the aggregate ceiling, and its largest value (kdma_mem_model adds it to a one-line bank)
AGG_RATE_BITS = RATE_FRAC_BITS + 6
AGG_RATE_MAX_Q16 = (1 << AGG_RATE_BITS) - 1 - RATE_ONE
#: the latency setting
LATENCY_BITS = 12
MAX_LATENCY_CYCLES = (1 << LATENCY_BITS) - 1
#: a build's KMem (kdma_top's KmemLines) is a power of two up to this many lines, and the
#: demand window setting holds 0..MAX_KMEM_LINES
KMEM_MAX_BITS = 12
MAX_KMEM_LINES = 1 << KMEM_MAX_BITS
WINDOW_BITS = KMEM_MAX_BITS + 1
#: the governor's step counter
RAMP_STEP_BITS = 20
MAX_CORES = 16  # kdma_top takes 1..16 cores (NumCores); a chip may have fewer, never more
#: kdma_pkg::credit_mode_e is coded in this many bits (room for eight readings)
CREDIT_MODE_BITS = 3
#: the demand path's warm-up (kdma_pkg): kdma_core counts a request's starved lines in this
#: many bits, and a warm-up line's extra latency is this many bits wide
DWARM_LINES_BITS = 20
DWARM_EXTRA_BITS = 12


#: the test data's multipliers (kdma_pkg): word j of line a is a * LINE_ADDR_MUL + j * LINE_WORD_MUL
LINE_ADDR_MUL = 0x9E3779B1
LINE_WORD_MUL = 0x7F4A7C15


def line_words(line_addr: np.ndarray | int) -> np.ndarray:
    """The 16 data words of a line, as kdma_pkg::line_data computes them."""
    a = np.atleast_1d(np.asarray(line_addr, dtype=np.uint64)) & np.uint64(LINE_ADDR_MASK)
    j = np.arange(16, dtype=np.uint64)
    w = (a[:, None] * np.uint64(LINE_ADDR_MUL) + j[None, :] * np.uint64(LINE_WORD_MUL)) & np.uint64(
        0xFFFFFFFF
    )
    return (w ^ (w >> np.uint64(15))).astype(np.uint32)


def line_data(line_addr: int) -> int:
    """One line's 512-bit payload as an integer (word 0 in the low bits)."""
    value = 0
    for j, word in enumerate(line_words(line_addr)[0]):
        value |= int(word) << (32 * j)
    return value


def credit_mode_literal(encoding: int) -> str:
    """A CreditMode parameter value sized to the enum (a bare -G/-P value is 32 bits wide)."""
    if not 0 <= encoding < 1 << CREDIT_MODE_BITS:
        raise ValueError(f"credit mode {encoding} does not fit in {CREDIT_MODE_BITS} bits")
    return f"{CREDIT_MODE_BITS}'d{encoding}"


def lines_for_bytes(size_bytes: int, line_bytes: int = LINE_BYTES) -> int:
    """The core rounds a byte size up to whole lines."""
    return -(-size_bytes // line_bytes)


def lap_and_offset(lines: int, ring_lines: int) -> tuple[int, int]:
    """k = round(lines / ring) (half up) and x = lines - k * ring (erratum.md, section 2)."""
    k = (2 * lines + ring_lines) // (2 * ring_lines)
    return k, lines - k * ring_lines
