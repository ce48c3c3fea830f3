"""Profiles and settings: the fitted numbers of a chip, and the run-time inputs of the RTL.

A profile is fitted by ``ane-kdma calibrate --chip C`` and stored as
``data/chips/<chip>/profile.json``. It holds what turns cycles into time (the
hand-set clock and the fitted per-request overhead) and the fitted run-time
inputs of kdma_top (latency, demand window, per-core rate). The chip
(:mod:`ane_kdma.chip`) combines it with the DRAM ceiling; nothing else turns
cycles into µs or GB/s.

A profile names the reading it was fitted with (``hypothesis``, required: it
is what ``--variant buggy`` means on its chip) and its rate mechanism
(``mechanism``, required). Both names are checked against their registries
here, the one loader every command reads a profile or a fits file through, and
a profile carries only the run-time inputs of its own mechanism.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.errors import InputError
from ane_kdma.mechanisms import (  # re-exported: the ranges live in the registry's field table
    AGG_RATE_MAX_Q16,
    MAX_DWIN_STEP_LINES,
    MAX_LATENCY_CYCLES,
    MAX_RAMP_STEP_LINES,
    MAX_TASK_GAP_CYCLES,
    MAX_WARM_LINES,
)
from ane_kdma.schema import Doc

__all__ = [
    "AGG_RATE_MAX_Q16",
    "MAX_DWIN_STEP_LINES",
    "MAX_LATENCY_CYCLES",
    "MAX_RAMP_STEP_LINES",
    "MAX_TASK_GAP_CYCLES",
    "MAX_WARM_LINES",
    "Profile",
    "Settings",
    "Uncertainty",
    "load_fits",
    "load_profile",
]

MAX_MEMBERS = 32  # fits kept to span the intervals: each prediction's band runs every one
_NOT_FITTABLE = ("name", "hypothesis", "mechanism", "notes", "uncertainty")


@dataclass(frozen=True)
class Uncertainty:
    """How sure a fit is: its free parameters' intervals and fits that span them.

    ``members`` are other fits that pass the same checks as the profile itself,
    each given as the fields where it differs from the profile; together they
    span ``intervals`` (each interval holds the profile's own value and every
    member's). A prediction's band is the lowest and highest figure over the
    profile and its members (:meth:`Profile.members`), so a band follows the
    parameters' correlations rather than a box around them. ``free`` and
    ``kept`` say, per field, why the data pins it or why it came from a prior.
    """

    method: str
    intervals: dict[str, tuple[float, float]]
    members: tuple[dict[str, Any], ...]
    free: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """Run-time inputs of kdma_top (cycles, lines, or Q.16 lines per cycle).

    The fields are the registry's field table (:mod:`ane_kdma.mechanisms`: the
    base inputs, then each mechanism's own, at their off values), declared here
    for the type checker and held to the table by tests/test_mechanisms.py;
    their ranges are checked from the table. What each input does is in its
    mechanism's entry and docs/adding.md.
    """

    latency: int
    window: int
    core_rate_q16: int
    agg_rate_q16: int
    ramp_start_q16: int = 0
    ramp_step_lines: int = 1
    ramp_inc_q16: int = 0
    warm_lines: int = 0
    warm_extra_cycles: int = 0
    task_gap_cycles: int = 0
    dwarm_lines: int = 0
    dwarm_extra_cycles: int = 0
    dwin_start_lines: int = 0
    dwin_step_lines: int = 1

    @property
    def ramp(self) -> bool:
        return 0 < self.ramp_start_q16 < self.core_rate_q16

    @property
    def dwin(self) -> bool:
        """The demand window grows (issue 16): a starved request starts below the window."""
        return 0 < self.dwin_start_lines < self.window

    def demand_window(self, starved: int) -> int:
        """The window a line with credit 0 sees after `starved` such lines of its request.

        It starts at ``dwin_start_lines`` and gains one line every
        ``dwin_step_lines`` starved lines, up to ``window`` (off: ``window``).
        """
        if not self.dwin:
            return self.window
        return min(self.window, self.dwin_start_lines + starved // self.dwin_step_lines)

    @property
    def dwarm(self) -> bool:
        """The demand path warms up (issue 16): a request's first starved lines are slower."""
        return self.dwarm_lines > 0 and self.dwarm_extra_cycles > 0

    def dwin_lines(self) -> int:
        """Starved lines of a request before its demand window is the full window (0: off)."""
        if not self.dwin:
            return 0
        return (self.window - self.dwin_start_lines) * self.dwin_step_lines

    def __post_init__(self) -> None:
        mechs.check_values(asdict(self))

    def check(self, kmem_lines: int) -> Settings:
        """The window must fit the chip's KMem (the RTL's window port is that wide)."""
        if self.window > kmem_lines:
            raise InputError(f"demand window {self.window} lines outside 1..{kmem_lines}")
        return self


@dataclass(frozen=True)
class Profile:
    name: str
    ns_per_cycle: float  # hand-set: only latency*ns and rate/ns are identifiable
    overhead_us: float  # fixed cost per submitted request (not per task)
    latency_cycles: int
    window_lines: int
    core_rate_q16: int  # per-core line rate, Q.16 lines per cycle
    ceiling_gbps: float  # the chip's DRAM ceiling the profile was fitted with
    hypothesis: str  # the credit reading fitted: what --variant buggy means on its chip
    notes: dict[str, str] = field(default_factory=dict)
    mechanism: str = "none"  # the rate mechanism fitted (ane_kdma.mechanisms); none: no inputs
    ramp_start_q16: int = 0  # the issue-rate governor (0: off)
    ramp_step_lines: int = 1
    ramp_inc_q16: int = 0
    warm_lines: int = 0  # the memory warm-up
    warm_extra_cycles: int = 0
    task_gap_cycles: int = 0  # the per-task cost
    dwarm_lines: int = 0  # the demand path's warm-up (0: off)
    dwarm_extra_cycles: int = 0
    dwin_start_lines: int = 0  # the demand window that grows (0: off)
    dwin_step_lines: int = 1
    # the host's per-prediction cost (a Core ML predict call) that predict-timed figures
    # include and ANE task times do not: added only where a figure's method says so (0: none)
    predict_overhead_us: float = 0.0
    uncertainty: Uncertainty | None = None  # intervals and spanning fits, if calibrate wrote them

    def members(self) -> tuple[Profile, ...]:
        """This profile, then each fit of its uncertainty (none: this profile alone)."""
        if self.uncertainty is None:
            return (self,)
        base = replace(self, uncertainty=None)
        return (base, *(replace(base, **m) for m in self.uncertainty.members))

    def mechanism_inputs(self) -> dict[str, int]:
        """The run-time inputs of the rate mechanisms, as Settings takes them."""
        return {i.name: getattr(self, i.name) for i in mechs.inputs()}

    def us(self, cycles: float) -> float:
        return cycles * self.ns_per_cycle / 1000.0

    def to_json(self) -> str:
        doc = asdict(self)
        if self.predict_overhead_us == 0.0:  # a profile fitted to task times has none
            del doc["predict_overhead_us"]
        if self.uncertainty is None:
            del doc["uncertainty"]
        else:
            doc["uncertainty"]["intervals"] = {
                k: list(v) for k, v in self.uncertainty.intervals.items()
            }
            doc["uncertainty"]["members"] = list(self.uncertainty.members)
        own = mechs.get(self.mechanism).inputs
        for i in mechs.inputs():  # another mechanism's inputs, off: left out (most of them)
            if i.name not in own and doc[i.name] == i.off and not i.always_written:
                del doc[i.name]
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_doc(cls, doc: Doc) -> Profile:
        """Schema-checked: types, finite values, ranges the RTL can take, registered names."""
        notes = doc.strings("notes") if doc.has("notes") else {}
        inputs: dict[str, Any] = {
            i.name: _opt_int(doc, i.name, i.off, i.lo, i.hi) for i in mechs.inputs()
        }
        prof = cls(
            name=doc.string("name"),
            ns_per_cycle=doc.number("ns_per_cycle", positive=True, hi=1e6),
            overhead_us=doc.number("overhead_us", lo=0.0, hi=1e9),
            latency_cycles=doc.integer("latency_cycles", 1, MAX_LATENCY_CYCLES),
            window_lines=doc.integer("window_lines", 1, 1 << 20),
            core_rate_q16=doc.integer("core_rate_q16", 1, mechs.RATE_ONE),
            ceiling_gbps=doc.number("ceiling_gbps", positive=True, hi=1e6),
            predict_overhead_us=(
                doc.number("predict_overhead_us", lo=0.0, hi=1e9)
                if doc.has("predict_overhead_us")
                else 0.0
            ),
            notes=notes,
            hypothesis=_reading(doc),
            mechanism=_mechanism(doc).name,
            **inputs,
        )
        own = mechs.get(prof.mechanism).inputs
        for i in mechs.inputs():
            value = getattr(prof, i.name)
            if i.name not in own and value != i.off:
                raise doc.fail(
                    doc.key(i.name),
                    f"{value} belongs to another rate mechanism than {prof.mechanism!r} "
                    f"(which takes {', '.join(own) or 'no inputs'})",
                )
        try:
            prof.settings_check()
        except InputError as exc:
            raise doc.fail(doc.where, str(exc)) from None
        if doc.has("uncertainty"):
            prof = replace(prof, uncertainty=_uncertainty(doc, prof))
        return prof

    def settings_check(self) -> None:
        """The inputs as kdma_top takes them, the ceiling aside (a ramp needs an increment)."""
        Settings(
            self.latency_cycles, self.window_lines, self.core_rate_q16, 1, **self.mechanism_inputs()
        )


def _fittable(prof: Profile) -> dict[str, float]:
    """The numeric fields a member may move or an interval may bound."""
    return {
        f.name: getattr(prof, f.name)
        for f in fields(prof)
        if f.name not in _NOT_FITTABLE and isinstance(getattr(prof, f.name), int | float)
    }


def _uncertainty(doc: Doc, prof: Profile) -> Uncertainty:
    """Schema-checked: known numeric fields; every member a valid profile inside the intervals."""
    u = doc.obj("uncertainty")
    values = _fittable(prof)
    intervals: dict[str, tuple[float, float]] = {}
    iv = u.obj("intervals") if u.has("intervals") else Doc({}, u.key("intervals"), doc.path)
    for name in iv.data:
        if name not in values:
            raise doc.fail(iv.key(name), f"not a fitted field (one of {', '.join(values)})")
        pair = iv.numbers(name, 2)
        if len(pair) != 2 or not pair[0] <= values[name] <= pair[1]:
            raise doc.fail(iv.key(name), f"must be [lo, hi] around the profile's {values[name]}")
        intervals[name] = (pair[0], pair[1])
    members: list[dict[str, Any]] = []
    base = {k: v for k, v in doc.data.items() if k != "uncertainty"}
    for m in u.objects("members", MAX_MEMBERS) if u.has("members") else []:
        for name in m.data:
            if name not in values:
                raise doc.fail(m.key(name), "not a fitted field of a profile")
            if name in intervals:
                lo, hi = intervals[name]
                v = m.number(name)
                if not lo <= v <= hi:
                    raise doc.fail(m.key(name), f"{v} outside its interval [{lo}, {hi}]")
        Profile.from_doc(Doc({**base, **m.data}, m.where, doc.path))  # each member a valid profile
        members.append(dict(m.data))
    return Uncertainty(
        method=u.string("method"),
        intervals=intervals,
        members=tuple(members),
        free=u.strings("free") if u.has("free") else {},
        kept=u.strings("kept") if u.has("kept") else {},
    )


def _opt_int(doc: Doc, name: str, default: int, lo: int, hi: int) -> int:
    return doc.integer(name, lo, hi) if doc.has(name) else default


def _reading(doc: Doc) -> str:
    """The buggy reading a profile was fitted with: a registered hypothesis, never the fix."""
    name = doc.string("hypothesis")
    try:
        h = hyps.get(name)
    except InputError as exc:
        raise doc.fail(doc.key("hypothesis"), str(exc)) from None
    if not h.buggy:
        raise doc.fail(
            doc.key("hypothesis"), f"{h.name!r} is the fix; a profile names a buggy reading"
        )
    return h.name


def _mechanism(doc: Doc) -> mechs.Mechanism:
    try:
        return mechs.get(doc.string("mechanism"))
    except InputError as exc:
        raise doc.fail(doc.key("mechanism"), str(exc)) from None


def load_profile(path: Path) -> Profile:
    """A profile JSON file, schema-checked."""
    return Profile.from_doc(Doc.load(path, "profile"))


def load_fits(path: Path) -> tuple[Profile, ...]:
    """A fits file (``calibrate`` writes one per chip): every fitted pair, each a profile.

    At most one fit per (buggy reading, mechanism), so the ranking that runs
    each one is bounded by the registries, whatever the file holds.
    """
    doc = Doc.load(path, "fits file")
    most = len(hyps.buggy()) * len(mechs.REGISTRY)
    out: list[Profile] = []
    seen: set[tuple[str, str]] = set()
    for item in doc.objects("fits", most):
        prof = Profile.from_doc(item.obj("profile"))
        for key in ("hypothesis", "mechanism"):
            if item.has(key) and item.raw(key) != getattr(prof, key):
                said = repr(item.raw(key))[:40]
                raise item.fail(item.key(key), f"{said} but its profile has {getattr(prof, key)!r}")
        pair = (prof.hypothesis, prof.mechanism)
        if pair in seen:
            raise item.fail(item.where, f"{pair[0]} x {pair[1]} fitted twice")
        seen.add(pair)
        out.append(prof)
    return tuple(out)
