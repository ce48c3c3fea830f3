"""Which convolutions a probe set measures, and why each one: chosen to pin the model.

Every probe is one fp16 1x1 convolution Cout x Cin, single token, or the same
weight cut along Cin into several convolutions whose outputs are added (a
split variant: the public Core ML pass's axis, the planner's default). What
each probe pins:

* ``tiny``: a weight of a few lines per core. Its prediction time is almost all
  the framework's per-call overhead, the one figure a host-timed measurement
  carries that an ANE task time does not.
* ``ramp``: 1/8, 1/4 and 1/2 of a ring per core, far from the notch: the
  nominal rate and how it rises with size.
* ``v``: points across the V at laps k = 1..4 and a few offsets x from the
  notch (finer at k = 1, where the V's slope and its floor are read), each lap
  with its controls at x = -/+ one prefetch clamp, where the M3 recovers fully.
* ``split``: the notch weights of every lap cut into two convolutions (and the
  first lap into four) by the planner's own search, each part clear of the
  notch, and a control cut of a weight that was never in the notch (which
  should gain nothing): the speedup a split buys on this chip.

Shapes. Laps are reached by Cout in whole groups of one output channel per
core (128 k groups at lap k, Cout = 2048 k on 16 cores) and offsets by Cin,
so every probe of one lap has the same Cout and the offsets step in whole
input channels (4 k lines at 64-byte lines; a control is rounded outwards so
it stays a clamp away). The per-core payload of every probe is computed by
:class:`ane_kdma.plan.weight.Weight`, the planner's arithmetic, for the chip
the set is made for, and the set is sized by that chip's ring: about 1 GiB of
fp16 weights for a 16-core chip with the M3's 1 MiB ring (``--laps`` trims it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hw import lap_and_offset
from ane_kdma.plan.search import candidates
from ane_kdma.plan.weight import Weight, lines_of

MAX_LAPS = 4
GROUPS_PER_LAP = 128  # output-channel groups per core per lap: Cout = cores x 128 k
#: offsets across the V at the first lap, in prefetch clamps (x = f x clamp); the controls at -/+1
V_FIRST = (-1.0, -0.5, -0.25, -0.125, 0.0, 0.125, 0.25, 0.5, 1.0)
#: and at the later laps
V_LATER = (-1.0, -0.5, 0.0, 0.5, 1.0)
RAMP = (8, 4, 2)  # ring fractions (1/8, 1/4, 1/2 of a ring per core)
TINY_CIN_LINES = 2  # the tiny probe's lines per core
PURPOSES = ("overhead", "rise", "v", "control", "split")


@dataclass(frozen=True)
class Probe:
    """One package of the set: the weight, how it is cut, what it pins."""

    name: str
    cout: int
    cin_parts: tuple[int, ...]  # input channels of each convolution (one: unsplit)
    bytes_per_core: int  # the whole weight on each core (the planner's arithmetic)
    task_bytes: tuple[int, ...]  # each convolution's payload on each core
    k: int  # lap of the whole weight, and its offset x in lines (lap_and_offset)
    x: int
    purpose: str  # one of PURPOSES
    why: str  # one line: what this probe pins

    @property
    def cin(self) -> int:
        return sum(self.cin_parts)

    @property
    def file(self) -> str:
        return f"{self.name}.mlpackage"

    @property
    def dtype(self) -> str:
        return "fp16"


def _weight_probe(chip: Chip, name: str, cout: int, cin: int, purpose: str, why: str) -> Probe:
    size = Weight(cin, cout).bytes_per_core(chip.cores)
    if size % chip.line_bytes:
        raise InputError(f"probe {name}: {cout} x {cin} is not whole lines per core")
    k, x = lap_and_offset(size // chip.line_bytes, chip.ring_lines)
    return Probe(name, cout, (cin,), size, (size,), k, x, purpose, why)


def _lines_per_cin(chip: Chip, lap: int) -> int:
    """Lines per core one input channel adds at Cout = cores x 128 x lap (whole lines)."""
    bits = GROUPS_PER_LAP * lap * 16
    if bits % (8 * chip.line_bytes):
        raise InputError(f"chip {chip.name}: {chip.line_bytes}-byte lines are too long to probe")
    return bits // (8 * chip.line_bytes)


def _lap_shape(chip: Chip, lines: int, lap: int) -> tuple[int, int]:
    """Cout x Cin giving `lines` per core with Cout = cores x 128 x lap (lap >= 1)."""
    groups = GROUPS_PER_LAP * lap
    per_cin_bits = groups * 16  # one input channel of every group on a core, fp16
    line_bits = 8 * chip.line_bytes
    if (lines * line_bits) % per_cin_bits:
        raise InputError(
            f"chip {chip.name}: {lines} lines per core is not a whole number of input channels "
            f"at Cout = {chip.cores * groups} (probe sets need 64-byte lines or a larger ring)"
        )
    return chip.cores * groups, lines * line_bits // per_cin_bits


def _sign(x: int) -> str:
    return f"+{x}" if x >= 0 else str(x)


def design(chip: Chip, laps: int = MAX_LAPS) -> list[Probe]:
    """The probe set for `chip`: names unique, every payload the planner's (module doc)."""
    if not 1 <= laps <= MAX_LAPS:
        raise InputError(f"--laps {laps}: 1..{MAX_LAPS}")
    ring, clamp = chip.ring_lines, chip.geometry.prefetch_max_lines
    probes: list[Probe] = []
    tiny_cin = TINY_CIN_LINES * 8 * chip.line_bytes // 16
    probes.append(
        _weight_probe(
            chip,
            "tiny",
            chip.cores,
            tiny_cin,
            "overhead",
            f"{TINY_CIN_LINES} lines per core: the per-prediction overhead",
        )
    )
    for frac in RAMP:
        cout, cin = _lap_shape(chip, ring // frac, 1)
        probes.append(
            _weight_probe(
                chip, f"rise_1of{frac}", cout, cin, "rise", f"1/{frac} ring: the nominal rate"
            )
        )
    for k in range(1, laps + 1):
        step = _lines_per_cin(chip, k)
        for f in V_FIRST if k == 1 else V_LATER:
            control = abs(f) >= 1.0
            # offsets in whole input channels; a control stays at least one clamp out
            n = f * clamp / step
            x = step * (math.copysign(math.ceil(abs(n)), n) if control else round(n))
            x = int(x)
            cout, cin = _lap_shape(chip, k * ring + x, k)
            why = (
                f"lap {k}, x = {x}: the V's {'shoulder (recovery)' if control else 'depth'}"
                if x
                else f"lap {k}, x = 0: the notch floor"
            )
            probes.append(
                _weight_probe(
                    chip, f"k{k}_x{_sign(x)}", cout, cin, "control" if control else "v", why
                )
            )
    by_name = {p.name: p for p in probes}
    cuts = [(f"k{k}_x+0", 2) for k in range(1, laps + 1)] + [
        ("k1_x+0", 4),
        (f"k1_x{_sign(-clamp)}", 2),
    ]
    for base_name, parts in cuts:
        probes.append(_split(chip, by_name[base_name], parts))
    names = [p.name for p in probes]
    if len(set(names)) != len(names):  # a geometry whose offsets round together
        raise InputError(f"chip {chip.name}: its clamp of {clamp} lines is too small to probe")
    return probes


def _split(chip: Chip, base: Probe, parts: int) -> Probe:
    """`base` cut along Cin into `parts` convolutions by the planner's search."""
    w = Weight(base.cin, base.cout)
    cands, _ = candidates(w, chip, "cin")
    pick = next((c for c in cands if c.axis == "cin" and len(c.parts) == parts), None)
    if pick is None:
        raise InputError(f"probe {base.name}: the planner offers no {parts}-part Cin cut")
    if sum(pick.chunk_bytes) != base.bytes_per_core:
        raise InputError(f"probe {base.name}: the cut's parts do not add up to the weight")
    lines = "+".join(str(lines_of(b, chip)) for b in pick.chunk_bytes)
    return Probe(
        f"{base.name}_split{parts}",
        base.cout,
        tuple(pick.parts),
        base.bytes_per_core,
        tuple(pick.chunk_bytes),
        base.k,
        base.x,
        "split",
        f"{base.name} as {parts} convolutions ({lines} lines per core): what a split buys",
    )
