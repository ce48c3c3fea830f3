"""The search space: every way the planner may cut a weight into back-to-back tasks.

Why these families. A task's speed depends on its own line count (where it
sits against the ring) and little on its neighbours, so a plan is a list of
task sizes. Three axes give such lists:

* **cout**: output channels in whole groups of one channel per core (a part
  of g groups streams g x Cin x kernel x bits / 8 bytes on each core); the
  parts need not be equal, which is what finds a split where Cout / cores is
  prime. Concatenating the parts' outputs is bit-exact.
* **cin**: input channels as partial sums (the public Core ML pass's axis),
  every part but the last a whole number of lines; joining them by adds
  changes the summation order, so it ranks after cout.
* **shards**: for an LM head, more shards than it has (each shard its own
  weight, one task each); never fewer, since the shard count a model was
  built with bounds each shard's size for reasons of its own.

A plan cuts along one axis, the one asked for (Cin by default: see
DEFAULT_AXIS); an LM head may also be re-sharded. For each part count
2..MAX_PARTS the space is sampled, not enumerated: the near-equal cut, and
cuts of S - 1 equal parts plus a remainder, scanned over two ring lengths around the balance point
(vectorised: O(ring) integer work, no engine runs), keeping the most
balanced cut that clears the window, the one farthest from any multiple, and
the most balanced one with twice the clearance. A split is offered only if
every task clears the notch window (at least one prefetch clamp from a
non-zero multiple of the ring, where the measurements recover), so a plan
never relies on the model's knee inside the window; only when no such cut
exists anywhere are near-equal cuts offered as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.plan.weight import Weight, ceil_div, clearance, in_window, lines_of, window_lines

MAX_PARTS = 8  # tasks per weight (per shard); the Core ML pass takes 2..8 too
SHARD_REACH = 16  # an LM head may be re-sharded to N + 1 .. min(2N, N + this) shards
#: at equal task counts: no change, then bit-exact cuts, then partial sums
AXIS_RANK = {"none": 0, "cout": 1, "shards": 2, "cin": 3}
#: the axes a weight may be cut along (`patch --axis`, `plan --axis`, `llm --axis`)
AXES = ("cin", "cout")
#: partial reductions along Cin, as the article's patch and the public Core ML pass cut: two
#: tasks joined by adds stay two tasks, while a Cout cut joined by a concat is the shape a
#: compiler may merge back into one convolution (nothing here can run the ANE compiler)
DEFAULT_AXIS = "cin"


@dataclass(frozen=True)
class Candidate:
    """One plan: the tasks of one instance (a weight, or one shard), and how many instances."""

    axis: str  # a key of AXIS_RANK
    parts: tuple[int, ...]  # channels per task: output (cout, none, shards) or input (cin)
    chunk_bytes: tuple[int, ...]  # each task's bytes on one core
    count: int  # instances issued back to back (an LM head's shards), all alike

    @property
    def splits(self) -> int:
        """Tasks per instance; for a re-sharded head, the new shard count."""
        return self.count if self.axis == "shards" else len(self.parts)

    @property
    def tasks(self) -> int:
        return len(self.parts) * self.count

    @property
    def bit_exact(self) -> bool:
        return self.axis != "cin"

    def lines(self, chip: Chip) -> tuple[int, ...]:
        return tuple(lines_of(b, chip) for b in self.chunk_bytes)

    def clear(self, chip: Chip) -> bool:
        return not any(in_window(n, chip) for n in self.lines(chip))

    def clearance(self, chip: Chip) -> int:
        """Lines from the nearest task to a non-zero multiple of the ring (more is safer)."""
        return int(clearance(np.array(self.lines(chip)), chip.ring_lines).min())

    def describe(self, chip: Chip) -> str:
        lines = "+".join(str(n) for n in self.lines(chip))
        parts = "+".join(str(p) for p in self.parts)
        if self.axis == "none":
            return f"unsplit ({lines} lines)" + (
                f" x {self.count} shards" if self.count > 1 else ""
            )
        if self.axis == "shards":
            return f"{self.count} shards of {self.parts[0]} channels ({lines} lines each)"
        each = f" per shard x {self.count}" if self.count > 1 else ""
        what = "output" if self.axis == "cout" else "input"
        return (
            f"{self.axis.capitalize()} in {len(self.parts)} tasks{each} "
            f"({parts} {what} channels, {lines} lines)"
        )


def unsplit(w: Weight, chip: Chip) -> Candidate:
    return Candidate("none", (w.shard_cout,), (w.bytes_per_core(chip.cores),), w.shards)


def check_axis(axis: str) -> str:
    if axis not in AXES:
        raise InputError(f"unknown axis {axis[:20]!r} (one of: {', '.join(AXES)})")
    return axis


def candidates(w: Weight, chip: Chip, axis: str = DEFAULT_AXIS) -> tuple[list[Candidate], bool]:
    """The unsplit weight first, then every split offered along `axis` (and an LM head's
    re-shardings); True if the splits clear the window."""
    clear: list[Candidate] = []
    fallback: list[Candidate] = []
    axes = {"cout": (_cout, _cout_units), "cin": (_cin, _cin_units)}
    make, units_of = axes[check_axis(axis)]
    units, step, bits, per, fixed = units_of(w, chip)
    for parts in range(2, MAX_PARTS + 1):
        near, picks = _compositions(units, parts, step, bits, chip, per, fixed)
        if near is not None:
            fallback.append(make(w, chip, near))
            picks = [near, *picks]
        clear.extend(make(w, chip, p) for p in picks)
    clear.extend(_reshards(w, chip))
    splits = _unique([c for c in clear if c.clear(chip)])
    if splits:
        return [unsplit(w, chip), *splits], True
    return [unsplit(w, chip), *_unique(fallback)], False


# ---------------------------------------------------------------- the axes


def _cout_units(w: Weight, chip: Chip) -> tuple[int, int, int, int, int]:
    """Groups, a scan step of about one line, bits per group per core, 1, and the bits every
    part streams whole (a compressed weight's side tensors that do not vary along Cout)."""
    bits = w.group_bits()
    step = max(1, ceil_div(8 * chip.line_bytes, bits))
    block = w.cout_block // math.gcd(w.cout_block, chip.cores)  # groups per compressed block
    return w.groups(chip.cores), math.lcm(step, block), bits, 1, w.fixed_bits()


def _cin_units(w: Weight, chip: Chip) -> tuple[int, int, int, int, int]:
    """Input channels, the fewest that make whole lines, bits per channel per core, the
    divisor of those bits (Cin when a compressed weight's side bits are shared out over it),
    and the bits every part streams whole (Weight.cin_bits)."""
    bits, per, fixed = w.cin_bits(chip.cores)
    line_bits = 8 * chip.line_bytes * per
    step = line_bits // math.gcd(line_bits, bits)
    if step > w.cin // 2:  # side bits make whole lines rare: whole lines of the data alone
        data = w.channel_bits(chip.cores)
        step = 8 * chip.line_bytes // math.gcd(8 * chip.line_bytes, data)
    return w.cin, math.lcm(step, w.cin_block), bits, per, fixed


def _cout(w: Weight, chip: Chip, groups: Sequence[int]) -> Candidate:
    chans = [g * chip.cores for g in groups]
    chans[-1] = w.shard_cout - sum(chans[:-1])  # the last group may be partial
    gb, fixed = w.group_bits(), w.fixed_bits()
    sizes = tuple(ceil_div(g * gb + fixed, 8) for g in groups)
    return Candidate("cout", tuple(chans), sizes, w.shards)


def _cin(w: Weight, chip: Chip, chans: Sequence[int]) -> Candidate:
    cb, per, fixed = w.cin_bits(chip.cores)
    sizes = tuple(ceil_div(c * cb + fixed * per, 8 * per) for c in chans)
    return Candidate("cin", tuple(chans), sizes, w.shards)


def _reshards(w: Weight, chip: Chip) -> list[Candidate]:
    """Other shard counts for an LM head, each shard one task."""
    n = w.shards
    if n == 1:
        return []
    out = []
    for m in range(n + 1, min(2 * n, n + SHARD_REACH, w.cout) + 1):
        s = w.with_shards(m)
        try:
            s.check(chip)
        except InputError:
            continue
        out.append(Candidate("shards", (s.shard_cout,), (s.bytes_per_core(chip.cores),), m))
    return out


# ---------------------------------------------------------------- cutting units


def _compositions(
    units: int,
    parts: int,
    step: int,
    unit_bits: int,
    chip: Chip,
    per: int = 1,
    fixed: int = 0,
) -> tuple[tuple[int, ...] | None, list[tuple[int, ...]]]:
    """The near-equal cut of `units` into `parts`, and the cuts that clear the window.

    Every part but the last is a multiple of `step` units; a part of u units
    streams ceil((u x unit_bits / per + fixed) / line bits) lines (`fixed`: what
    every part reads whole, a compressed weight's LUT or scale).
    """
    line_bits = 8 * chip.line_bytes * per
    ring, win = chip.ring_lines, window_lines(chip)
    near = None
    q, rem = divmod(units, step)
    if q >= parts:
        base, extra = divmod(q, parts)
        sizes = [(base + 1) * step] * extra + [base * step] * (parts - extra)
        sizes[-1] += rem
        near = tuple(sizes)
    rest = parts - 1
    j_max = (units - 1) // (rest * step)  # the remainder keeps at least one unit
    if j_max < 1:
        return near, []
    centre = units // (parts * step)
    span = ring * line_bits // (step * unit_bits) * 2 + 2  # two rings of lines either side
    j = np.arange(max(1, centre - span), min(j_max, centre + span) + 1, dtype=np.int64)
    u = j * step
    r = units - rest * u

    def lines(n: np.ndarray) -> np.ndarray:
        return -(-(n * unit_bits + fixed * per) // line_bits)

    margin = np.minimum(clearance(lines(u), ring), clearance(lines(r), ring))
    skew = np.abs(u - r)
    picks: list[int] = []
    for need in (win, 2 * win):
        ok = np.flatnonzero(margin >= need)
        if ok.size:
            picks.append(int(ok[np.lexsort((-margin[ok], skew[ok]))[0]]))  # most balanced
            if need == win:
                picks.append(int(ok[np.lexsort((skew[ok], -margin[ok]))[0]]))  # farthest
    cuts = [(int(u[i]),) * rest + (int(r[i]),) for i in picks]
    return near, list(dict.fromkeys(cuts))


def _unique(cands: list[Candidate]) -> list[Candidate]:
    return list(dict.fromkeys(cands))
