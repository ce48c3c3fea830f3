"""Intervals for a profile fitted to a chip's full tables: the fits that still pass validate.

``calibrate --intervals`` reads the chip's profile and, one fitted field at a time
(the others at the profile's values), finds the widest move either way that keeps
every counted row of validate passing on the profile's own standing (validate's
judge, :func:`ane_kdma.validate.standing`). Each edge is a fit that passes; they are
the profile's members, and the intervals span them. The fitted values are not
touched: the profile is rewritten with its uncertainty added.

One field at a time gives a conditional interval, narrower than a joint one would be
where fields trade against each other; the profile's ``uncertainty.method`` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ane_kdma import mechanisms as mechs
from ane_kdma import progress, validate
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.profile import Profile, Uncertainty

BASE_FIELDS = ("overhead_us", "latency_cycles", "window_lines", "core_rate_q16")
OVERHEAD_UNIT = 0.01  # us: the overhead's step (it is a float)
MAX_DOUBLINGS = 20


def fields(prof: Profile) -> tuple[str, ...]:
    """The fields calibrate fits for this profile: the base ones and its mechanism's inputs."""
    return BASE_FIELDS + tuple(mechs.get(prof.mechanism).inputs)


def _passes(chip: Chip, prof: Profile) -> bool:
    try:
        prof.settings_check()
        prof_chip = chip.with_profile(prof)
        prof_chip.settings.check(chip.geometry.kmem_lines)
    except (InputError, ValueError):
        return False
    return not validate.standing(chip, prof)["failed"]


def _moved(prof: Profile, name: str, steps: int) -> Profile:
    if name == "overhead_us":
        return replace(prof, overhead_us=round(prof.overhead_us + steps * OVERHEAD_UNIT, 3))
    change: dict[str, Any] = {name: getattr(prof, name) + steps}
    return replace(prof, **change)


def edge(ok: Callable[[int], bool]) -> int:
    """The largest n >= 0 with ok(n) (ok(0) holds): doubling, then bisection."""
    good, step = 0, 1
    for _ in range(MAX_DOUBLINGS):
        if not ok(step):
            bad = step
            break
        good, step = step, step * 2
    else:
        return good
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


def uncertainty(chip: Chip, prof: Profile, quiet: bool = True) -> Uncertainty:
    """The profile's intervals and members (module doc); refused if it does not pass."""
    base = replace(prof, uncertainty=None)
    if not _passes(chip, base):
        raise InputError(
            f"chip {chip.name}: its profile fails validate's counted rows, so no fit passes "
            "around it (recalibrate first)"
        )
    intervals: dict[str, tuple[float, float]] = {}
    members: list[dict[str, Any]] = []
    free: dict[str, str] = {}
    names = fields(base)
    for name in progress.iterate(list(names), "interval", quiet):
        ends = []
        for sign in (-1, 1):

            def ok(k: int, s: int = sign, f: str = name) -> bool:
                return _passes(chip, _moved(base, f, s * k))

            n = edge(ok)
            ends.append(getattr(_moved(base, name, sign * n), name))
            if n:
                members.append({name: ends[-1]})
        intervals[name] = (float(ends[0]), float(ends[1]))
        free[name] = (
            f"fitted by calibrate to {chip.path.name}/measured; the interval is the widest "
            "move of this field alone that keeps every counted row of validate passing"
        )
    kept = {
        "ns_per_cycle": "hand-set in chip.json: the data fix only latency x ns and rate / ns",
        "ceiling_gbps": "the chip's DRAM ceiling, from chip.json",
        "hypothesis": f"{base.hypothesis}, chosen by validate's ranking of every fit",
        "mechanism": f"{base.mechanism}, chosen by validate's ranking of every fit",
    }
    return Uncertainty(
        method="one fitted field at a time, the others at the profile's values: the widest move "
        "either way that keeps every counted row of validate passing (validate's standing of "
        "the profile); each edge is a member. Conditional intervals: narrower than joint ones "
        "where fields trade against each other",
        intervals=intervals,
        members=tuple(members),
        free=free,
        kept=kept,
    )


def with_intervals(chip: Chip, prof: Profile, quiet: bool = True) -> Profile:
    """The profile, its fitted values unchanged, with its uncertainty and a note saying how."""
    unc = uncertainty(chip, prof, quiet)
    notes = {
        **prof.notes,
        "intervals": "by `ane-kdma calibrate --intervals` (after the fit; regenerate both)",
    }
    return replace(prof, notes=notes, uncertainty=unc)
