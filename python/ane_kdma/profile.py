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
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE
from ane_kdma.schema import Doc

MAX_LATENCY_CYCLES = 4095  # kdma_pkg::MAX_LATENCY_CYCLES (tests/test_pkg_parity.py)
AGG_RATE_MAX_Q16 = (1 << 22) - 1 - RATE_ONE  # kdma_mem_model adds it to a one-line bank in 22 bits
MAX_RAMP_STEP_LINES = (1 << 20) - 1  # the governor's step counter is 20 bits
MAX_WARM_LINES = (1 << 20) - 1
MAX_TASK_GAP_CYCLES = (1 << 16) - 1
MAX_DWIN_STEP_LINES = (1 << 20) - 1  # the demand window's step counter is 20 bits
#: issue 16's starved-stream inputs (docs/fidelity.md) and their off values
STARVED_OFF = {
    "dwin_start_lines": 0,
    "dwin_step_lines": 1,
    "dwarm_lines": 0,
    "dwarm_extra_cycles": 0,
}


@dataclass(frozen=True)
class Settings:
    """Run-time inputs of kdma_top (cycles, lines, or Q.16 lines per cycle).

    The last ten are the rate mechanisms (all off by default). The issue-rate
    governor starts each request at ``ramp_start_q16`` lines per cycle and adds
    ``ramp_inc_q16`` every ``ramp_step_lines`` cycles up to the core rate (0:
    no ramp). The memory warm-up gives the first ``warm_lines`` lines of a
    request ``warm_extra_cycles`` more latency. The per-task cost holds each
    task's first request back ``task_gap_cycles`` cycles. The demand window
    that grows (docs/fidelity.md) gives a request's starved lines (credit 0) a
    window of ``dwin_start_lines`` that gains one line every
    ``dwin_step_lines`` starved lines, up to ``window`` (0: off). The demand
    path's warm-up gives a request's first ``dwarm_lines`` starved lines
    ``dwarm_extra_cycles`` more latency.
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
    dwin_start_lines: int = 0
    dwin_step_lines: int = 1
    dwarm_lines: int = 0
    dwarm_extra_cycles: int = 0

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
        if not 1 <= self.latency <= MAX_LATENCY_CYCLES:
            raise InputError(f"latency {self.latency} cycles outside 1..{MAX_LATENCY_CYCLES}")
        if self.window < 1:
            raise InputError(f"demand window {self.window} lines must be at least 1")
        if not 1 <= self.core_rate_q16 <= RATE_ONE:
            raise InputError(f"core rate {self.core_rate_q16}/65536 outside (0, 1] lines/cycle")
        if not 1 <= self.agg_rate_q16 <= AGG_RATE_MAX_Q16:
            raise InputError(f"aggregate rate {self.agg_rate_q16}/65536 out of range")
        if not 0 <= self.ramp_start_q16 <= RATE_ONE:
            raise InputError(f"ramp start {self.ramp_start_q16}/65536 outside [0, 1] lines/cycle")
        if not 1 <= self.ramp_step_lines <= MAX_RAMP_STEP_LINES:
            raise InputError(
                f"ramp step {self.ramp_step_lines} cycles outside 1..{MAX_RAMP_STEP_LINES}"
            )
        if not 0 <= self.ramp_inc_q16 <= RATE_ONE:
            raise InputError(f"ramp increment {self.ramp_inc_q16}/65536 outside [0, 1] lines/cycle")
        if self.ramp and self.ramp_inc_q16 == 0:
            raise InputError("a ramp that starts below the core rate needs an increment above 0")
        if not 0 <= self.warm_lines <= MAX_WARM_LINES:
            raise InputError(f"warm-up of {self.warm_lines} lines outside 0..{MAX_WARM_LINES}")
        if not 0 <= self.warm_extra_cycles <= MAX_LATENCY_CYCLES:
            raise InputError(
                f"warm-up latency {self.warm_extra_cycles} outside 0..{MAX_LATENCY_CYCLES}"
            )
        if not 0 <= self.task_gap_cycles <= MAX_TASK_GAP_CYCLES:
            raise InputError(
                f"task gap {self.task_gap_cycles} cycles outside 0..{MAX_TASK_GAP_CYCLES}"
            )
        if not 0 <= self.dwin_start_lines <= self.window:
            raise InputError(
                f"demand window start {self.dwin_start_lines} lines outside 0..{self.window} "
                "(the window)"
            )
        if not 1 <= self.dwin_step_lines <= MAX_DWIN_STEP_LINES:
            raise InputError(
                f"demand window step {self.dwin_step_lines} lines outside 1..{MAX_DWIN_STEP_LINES}"
            )
        if not 0 <= self.dwarm_lines <= MAX_WARM_LINES:
            raise InputError(
                f"demand warm-up of {self.dwarm_lines} lines outside 0..{MAX_WARM_LINES}"
            )
        if not 0 <= self.dwarm_extra_cycles <= MAX_LATENCY_CYCLES:
            raise InputError(
                f"demand warm-up latency {self.dwarm_extra_cycles} outside 0..{MAX_LATENCY_CYCLES}"
            )

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
    dwin_start_lines: int = 0  # the demand window that grows (0: off)
    dwin_step_lines: int = 1
    dwarm_lines: int = 0  # the demand path's warm-up (0: off)
    dwarm_extra_cycles: int = 0

    def mechanism_inputs(self) -> dict[str, int]:
        """The run-time inputs of the rate mechanisms, as Settings takes them."""
        return {
            "ramp_start_q16": self.ramp_start_q16,
            "ramp_step_lines": self.ramp_step_lines,
            "ramp_inc_q16": self.ramp_inc_q16,
            "warm_lines": self.warm_lines,
            "warm_extra_cycles": self.warm_extra_cycles,
            "task_gap_cycles": self.task_gap_cycles,
            "dwin_start_lines": self.dwin_start_lines,
            "dwin_step_lines": self.dwin_step_lines,
            "dwarm_lines": self.dwarm_lines,
            "dwarm_extra_cycles": self.dwarm_extra_cycles,
        }

    def us(self, cycles: float) -> float:
        return cycles * self.ns_per_cycle / 1000.0

    def to_json(self) -> str:
        doc = asdict(self)
        for name, off in STARVED_OFF.items():  # no registered mechanism takes them yet:
            if doc[name] == off:  # written only when on, so every fitted file stays as it was
                del doc[name]
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_doc(cls, doc: Doc) -> Profile:
        """Schema-checked: types, finite values, ranges the RTL can take, registered names."""
        notes = doc.strings("notes") if doc.has("notes") else {}
        prof = cls(
            name=doc.string("name"),
            ns_per_cycle=doc.number("ns_per_cycle", positive=True, hi=1e6),
            overhead_us=doc.number("overhead_us", lo=0.0, hi=1e9),
            latency_cycles=doc.integer("latency_cycles", 1, MAX_LATENCY_CYCLES),
            window_lines=doc.integer("window_lines", 1, 1 << 20),
            core_rate_q16=doc.integer("core_rate_q16", 1, RATE_ONE),
            ceiling_gbps=doc.number("ceiling_gbps", positive=True, hi=1e6),
            notes=notes,
            hypothesis=_reading(doc),
            mechanism=_mechanism(doc).name,
            ramp_start_q16=_opt_int(doc, "ramp_start_q16", 0, 0, RATE_ONE),
            ramp_step_lines=_opt_int(doc, "ramp_step_lines", 1, 1, MAX_RAMP_STEP_LINES),
            ramp_inc_q16=_opt_int(doc, "ramp_inc_q16", 0, 0, RATE_ONE),
            warm_lines=_opt_int(doc, "warm_lines", 0, 0, MAX_WARM_LINES),
            warm_extra_cycles=_opt_int(doc, "warm_extra_cycles", 0, 0, MAX_LATENCY_CYCLES),
            task_gap_cycles=_opt_int(doc, "task_gap_cycles", 0, 0, MAX_TASK_GAP_CYCLES),
            dwin_start_lines=_opt_int(doc, "dwin_start_lines", 0, 0, 1 << 20),
            dwin_step_lines=_opt_int(doc, "dwin_step_lines", 1, 1, MAX_DWIN_STEP_LINES),
            dwarm_lines=_opt_int(doc, "dwarm_lines", 0, 0, MAX_WARM_LINES),
            dwarm_extra_cycles=_opt_int(doc, "dwarm_extra_cycles", 0, 0, MAX_LATENCY_CYCLES),
        )
        off = {f.name: f.default for f in fields(cls)}  # every mechanism's inputs: off
        own = mechs.get(prof.mechanism).inputs
        for name, value in prof.mechanism_inputs().items():
            if name not in own and value != off[name]:
                raise doc.fail(
                    doc.key(name),
                    f"{value} belongs to another rate mechanism than {prof.mechanism!r} "
                    f"(which takes {', '.join(own) or 'no inputs'})",
                )
        try:
            prof.settings_check()
        except InputError as exc:
            raise doc.fail(doc.where, str(exc)) from None
        return prof

    def settings_check(self) -> None:
        """The inputs as kdma_top takes them, the ceiling aside (a ramp needs an increment)."""
        Settings(
            self.latency_cycles, self.window_lines, self.core_rate_q16, 1, **self.mechanism_inputs()
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
