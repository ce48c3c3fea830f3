"""cocotb tests of kdma_credit alone: the RTL credit against the hypothesis registry's arithmetic.

The hypothesis comes from the build's CreditMode encoding, the ring width and
clamp from its RingBits and PrefetchMaxLines, the rest of the geometry from the chip.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import Timer

from ane_kdma.hw import COUNT_MASK
from ane_kdma.hypotheses import Geometry
from kdma_tb import geometry_of, hypothesis_of, seed_from_env

NOTCH_LAPS = range(0, 9)
NOTCH_X = range(-300, 301)


async def _credit(dut, g: Geometry, start: int, lines: int, issued: int) -> int:
    dut.start_ptr_i.value = start & (g.ring_lines - 1)
    dut.transfer_lines_i.value = lines & COUNT_MASK
    dut.issued_lines_i.value = issued & COUNT_MASK
    await Timer(1, unit="ns")
    return int(dut.credit_o.value)


@cocotb.test()
async def credit_matches_formula_near_notches(dut) -> None:
    """Every k = 0..8, x = -300..300, with random and boundary-straddling start lines."""
    hyp, g = hypothesis_of(dut), geometry_of(dut)
    ring = g.ring_lines
    rng = random.Random(seed_from_env())
    checked = 0
    for k in NOTCH_LAPS:
        for x in NOTCH_X:
            lines = k * ring + x
            if lines < 0:
                continue
            # a start that makes the transfer straddle a 14-bit boundary, and a random one
            # (the buggy distance is (start + T) - start mod 2^14, so the start cancels:
            # these vectors check the RTL's wrap arithmetic, not a start dependence)
            straddle = ring - 1 - rng.randrange(0, 300)
            for start in (straddle, rng.randrange(0, 1 << 26)):
                issued = rng.randrange(0, lines + 1)
                got = await _credit(dut, g, start, lines, issued)
                want = hyp.credit(g, start, lines, issued)
                assert got == want, (
                    f"{hyp.name} k={k} x={x} start={start:#x} issued={issued}: "
                    f"RTL credit {got}, formula {want}"
                )
                checked += 1
    dut._log.info("%s: %d credit vectors match", hyp.name, checked)


@cocotb.test()
async def fixed_credit_never_zero_while_lines_remain(dut) -> None:
    """A correct hypothesis: credit > 0 whenever issued < transfer, up to 2^32 - 1 lines."""
    hyp, g = hypothesis_of(dut), geometry_of(dut)
    ring = g.ring_lines
    if hyp.buggy:
        return  # the buggy hypotheses are expected to starve; see the test above
    rng = random.Random(seed_from_env())
    cases = [(COUNT_MASK, 0), (COUNT_MASK, COUNT_MASK - 1), (1, 0), (ring, 0)]
    cases += [(k * ring, rng.randrange(k * ring)) for k in range(1, 9)]
    for _ in range(3000):
        lines = rng.randrange(1, 1 << 32)
        cases.append((lines, rng.randrange(lines)))
    for lines, issued in cases:
        start = rng.randrange(0, 1 << 26)
        got = await _credit(dut, g, start, lines, issued)
        want = hyp.credit(g, start, lines, issued)
        assert got == want, f"lines={lines} issued={issued}: RTL credit {got}, formula {want}"
        assert got > 0, f"{hyp.name}: zero credit with {lines - issued} lines left"
