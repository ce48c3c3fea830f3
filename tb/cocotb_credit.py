"""cocotb tests of the credit unit alone: the RTL credit against the registry's arithmetic.

The top, kdma_credit_tb, holds one kdma_credit per credit-mode code, all on the same
inputs; each vector is driven once and every reading the registry has in the RTL is
checked on its own lane (its encoding). The ring width and clamp come from the build's
RingBits and PrefetchMaxLines, the rest of the geometry from the chip.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import Timer

from ane_kdma import hypotheses
from ane_kdma.hw import COUNT_MASK
from ane_kdma.hypotheses import Geometry, Hypothesis
from kdma_tb import geometry_of, lanes, seed_from_env

NOTCH_LAPS = range(0, 9)
NOTCH_X = range(-300, 301)


class CreditLanes:
    """The build's lanes: one kdma_credit per code, read after one drive of the inputs."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.g: Geometry = geometry_of(dut)
        self.codes = len(dut.spec_o.value)
        self.hyps: list[Hypothesis] = list(hypotheses.in_rtl())
        for h in self.hyps:
            assert h.encoding is not None and h.encoding < self.codes, (
                f"{h.name}: encoding {h.encoding} has no lane in a build of {self.codes}"
            )
        used = {h.encoding for h in self.hyps}
        self.unused = [m for m in range(self.codes) if m not in used]  # give credit 0

    async def drive(self, start: int, lines: int, issued: int) -> tuple[list[int], list[int]]:
        """Every lane's (credit, speculative) for one task state."""
        dut = self.dut
        dut.start_ptr_i.value = start & (self.g.ring_lines - 1)
        dut.transfer_lines_i.value = lines & COUNT_MASK
        dut.issued_lines_i.value = issued & COUNT_MASK
        await Timer(1, unit="ns")
        return lanes(dut.credit_o, self.codes), lanes(dut.spec_o, self.codes)

    async def check(self, hyps: list[Hypothesis], start: int, lines: int, issued: int) -> list[int]:
        """Each hypothesis's lane equals its formula; its speculative flag is its page path with
        credit; a code no reading uses gives nothing. Returns every lane's credit."""
        credit, spec = await self.drive(start, lines, issued)
        where = f"start={start:#x} lines={lines} issued={issued}"
        for h in hyps:
            got, want = credit[h.encoding], h.credit(self.g, start, lines, issued)
            assert got == want, f"{h.name} {where}: RTL credit {got}, formula {want}"
            flag = h.paths == "split" and want != 0
            assert spec[h.encoding] == flag, f"{h.name} {where}: RTL spec {spec[h.encoding]}"
        idle = [(m, credit[m], spec[m]) for m in self.unused]
        assert all(c == 0 and s == 0 for _, c, s in idle), f"{where}: unused codes {idle}"
        return credit


@cocotb.test()
async def credit_matches_formula_near_notches(dut) -> None:
    """Every k = 0..8, x = -300..300, with random and boundary-straddling start lines."""
    unit = CreditLanes(dut)
    ring = unit.g.ring_lines
    rng = random.Random(seed_from_env())
    checked = 0
    for k in NOTCH_LAPS:
        for x in NOTCH_X:
            lines = k * ring + x
            if lines < 0:
                continue
            # a start that makes the transfer straddle a ring boundary, and a random one
            # (the buggy distance is (start + T) - start mod 2^RingBits, so the start cancels:
            # these vectors check the RTL's wrap arithmetic, not a start dependence)
            straddle = ring - 1 - rng.randrange(0, 300)
            for start in (straddle, rng.randrange(0, 1 << 26)):
                await unit.check(unit.hyps, start, lines, rng.randrange(0, lines + 1))
                checked += 1
    names = ", ".join(h.name for h in unit.hyps)
    dut._log.info("%d credit vectors match on every reading (%s)", checked, names)


@cocotb.test()
async def fixed_credit_never_zero_while_lines_remain(dut) -> None:
    """A correct hypothesis: credit > 0 whenever issued < transfer, up to 2^32 - 1 lines (every
    reading's lane is held to its formula on the same vectors: laps far past 8)."""
    unit = CreditLanes(dut)
    ring = unit.g.ring_lines
    correct = [h for h in unit.hyps if not h.buggy]
    assert correct, "the registry has no correct reading in the RTL"
    rng = random.Random(seed_from_env())
    cases = [(COUNT_MASK, 0), (COUNT_MASK, COUNT_MASK - 1), (1, 0), (ring, 0)]
    cases += [(k * ring, rng.randrange(k * ring)) for k in range(1, 9)]
    for _ in range(3000):
        lines = rng.randrange(1, 1 << 32)
        cases.append((lines, rng.randrange(lines)))
    for lines, issued in cases:
        credit = await unit.check(unit.hyps, rng.randrange(0, 1 << 26), lines, issued)
        for h in correct:
            assert credit[h.encoding] > 0, (
                f"{h.name}: zero credit with {lines - issued} lines left ({lines} lines)"
            )
