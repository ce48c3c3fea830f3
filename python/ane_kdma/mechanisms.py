"""The rate-mechanism candidates for the rising nominal throughput, as data.

Measured throughput off the notch rises with the transfer (about 45 GB/s near
1 MiB per core towards 60 at 8 MiB; Table A bends). Something in the kernel
DMA or its memory makes a longer request faster per byte. Each candidate here
is hardware with run-time inputs (:class:`ane_kdma.profile.Settings`), built
in the cycle model; calibration fits every candidate and validation ranks
them, and the winner is built in the RTL.

One entry per mechanism, and everything else derives from it (docs/adding.md):

* its **field table** (:class:`Input`: name, range, off value, RTL width or
  none), which ``Settings`` and ``Profile`` are checked against
  (tests/test_mechanisms.py), from which the profile schema, the RTL settings
  struct (:func:`rtl_fields`), "is it in the RTL" and "does the analytic
  engine follow it" are derived;
* its **fit space** (:class:`Param`: the search variables with their starting
  points, scales and bounds) and the map from the search's knobs to its
  inputs (``to_inputs``);
* its **quick estimate** (``estimate``): the search's closed-form extra cycles
  of a starved request, where the analytic grid lacks the mechanism;
* a **draw** (:func:`draw_settings`) for fuzzing.

A mechanism may build on another (``extends``): it takes the other's inputs
and fit variables, then its own. No module outside this one names a
mechanism.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.hw import (
    AGG_RATE_BITS,
    AGG_RATE_MAX_Q16,
    DWARM_EXTRA_BITS,
    DWARM_LINES_BITS,
    LATENCY_BITS,
    MAX_LATENCY_CYCLES,
    RAMP_STEP_BITS,
    RATE_BITS,
    RATE_ONE,
    WINDOW_BITS,
)

MAX_RAMP_STEP_LINES = (1 << RAMP_STEP_BITS) - 1  # the governor's step counter
MAX_WARM_LINES = (1 << 20) - 1
MAX_TASK_GAP_CYCLES = (1 << 16) - 1
MAX_DWIN_STEP_LINES = (1 << 20) - 1  # the demand window's step counter is 20 bits
MAX_WINDOW_LINES = 1 << 20  # a profile's window (a chip's KMem bounds it further)
# The per-core rate is searched below half a line a cycle (docs/speed.md: above it identical
# cores meet at the aggregate bucket every few dozen lines and the exact model slows down).
MAX_RATE_Q16 = RATE_ONE // 2 - 1
MAX_RATE = MAX_RATE_Q16 / RATE_ONE


@dataclass(frozen=True)
class Input:
    """One run-time input: a ``Settings`` (and ``Profile``) attribute of the same name."""

    name: str
    lo: int
    hi: int
    off: int  # the value at which the mechanism does nothing (the dataclasses' default)
    rtl_bits: int | None  # its width in kdma_pkg::settings_t; None: not built in the RTL
    what: str  # for messages: what it is and its unit
    #: written in every profile, even off and another mechanism's: the schema before the
    #: starved-stream mechanisms wrote them all, and every fitted file stays byte for byte
    always_written: bool = False

    def check(self, value: int) -> None:
        if not self.lo <= value <= self.hi:
            raise InputError(f"{self.what} {value} outside {self.lo}..{self.hi}")


@dataclass(frozen=True)
class Field:
    """One run-time input as the RTL takes it: its Settings name and its width.

    The RTL's settings struct (kdma_pkg::settings_t) has one member per field
    with a width, named as here and declared in this order (the first at the
    most significant bits); Python packs the struct from this table alone.
    """

    name: str  # the Settings attribute, and the settings_t member
    rtl_bits: int  # the member's width in kdma_pkg::settings_t


@dataclass(frozen=True)
class Param:
    """One variable of the search (continuous; a mechanism maps it to integer inputs)."""

    name: str
    starts: tuple[float, ...]  # starting points (crossed with the other variables' starts)
    scale: float  # Nelder-Mead's first step, in the searched units
    lo: float
    hi: float
    log: bool = False  # searched as its logarithm
    off: float = 0.0  # its value for a fit that does not take it
    per_window: bool = False  # at least one line of the window: lo is max(lo, 1 / window)


@dataclass(frozen=True)
class Knobs:
    """The search's point: the base (rate, (latency + 2) / window, window) and the
    mechanism's own variables by name (:class:`Param`)."""

    rate: float  # lines per cycle
    period_per_line: float  # (latency + 2) / window
    window: int
    params: Mapping[str, float] = field(default_factory=dict)

    def period(self) -> int:
        return max(3, min(MAX_LATENCY_CYCLES + 2, round(self.period_per_line * self.window)))

    def get(self, name: str, default: float = 0.0) -> float:
        return float(self.params.get(name, default))

    def __hash__(self) -> int:  # the params mapping is a dict: hash its items
        return hash((self.rate, self.period_per_line, self.window, tuple(self.params.items())))


Values = Mapping[str, int]  # a Settings' or Profile's inputs, by name
Out = tuple[dict[str, int], float]  # (inputs, the overhead left in µs)
ToInputs = Callable[["Mechanism", Knobs, int, float, float], Out]
Estimate = Callable[[Knobs, np.ndarray], np.ndarray]
Draw = Callable[[random.Random, Values], dict[str, int]]


@dataclass(frozen=True)
class Mechanism:
    name: str
    summary: str
    silicon: str  # what it would mean in silicon
    inputs_own: tuple[Input, ...] = ()  # its field table (beyond what it extends)
    extends: str | None = None  # the mechanism it builds on (its inputs and variables first)
    steps: int = 0  # governor steps (the search's closed form follows a stepped governor)
    closed_form: bool = True  # the analytic engine follows it (else: the cycle model only)
    params_own: tuple[Param, ...] = ()  # its search variables (beyond what it extends)
    rate_starts: tuple[float, ...] = (0.45,)  # the search's starting rates (lines per cycle)
    #: the knobs to its inputs (and the overhead, which a per-task cost takes over)
    to_inputs_own: ToInputs | None = None
    #: the search's estimate of the extra cycles of a starved request (credit 0)
    estimate: Estimate | None = None
    #: searched as this other mechanism (its inputs add the same time at every x, so the V and
    #: the closed-form search are the other's); its own inputs are then fitted on a grid
    search_as: str | None = None
    #: the grid its own inputs are fitted on, on the exact engine (with search_as)
    grid: tuple[tuple[int, ...], ...] = ()
    #: the fitted intercept is charged per task (the overhead moves into its input)
    intercept_per_task: bool = False
    #: on, for these values (default: any own input off its off value)
    active_when: Callable[[Values], bool] | None = None
    draw_own: Draw | None = None  # random inputs for fuzzing (default: none drawn)

    # ------------------------------------------------------------ derived

    @property
    def parent(self) -> Mechanism | None:
        return get(self.extends) if self.extends else None

    @property
    def table(self) -> tuple[Input, ...]:
        """Every input it takes: the extended mechanism's, then its own."""
        up = self.parent.table if self.parent else ()
        return up + self.inputs_own

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.table)

    @property
    def params(self) -> tuple[Param, ...]:
        up = self.parent.params if self.parent else ()
        return up + self.params_own

    @property
    def in_rtl(self) -> bool:
        """Built in rtl/: every input it takes has a member in kdma_pkg::settings_t."""
        return all(i.rtl_bits is not None for i in self.table)

    @property
    def starved(self) -> bool:
        """It changes a starved stream (the search estimates it; the V depends on it)."""
        return self.estimate is not None or bool(self.parent and self.parent.starved)

    def active(self, values: Values) -> bool:
        """Its own inputs do something at these values."""
        if self.active_when is not None:
            return self.active_when(values)
        return any(values[i.name] != i.off for i in self.inputs_own)

    def chain(self) -> tuple[Mechanism, ...]:
        """The mechanisms it builds on, the root first, then itself."""
        return (*(self.parent.chain() if self.parent else ()), self)

    def to_inputs(self, k: Knobs, rate_q16: int, ovh: float, ns: float) -> Out:
        """(its inputs from the search's knobs, the overhead left in µs). Each link of the
        chain maps its own inputs, seeing this mechanism (its steps, say)."""
        out: dict[str, int] = {}
        for m in self.chain():
            if m.to_inputs_own is not None:
                own, ovh = m.to_inputs_own(self, k, rate_q16, ovh, ns)
                out.update(own)
        return out, ovh

    def extra_cycles(self, k: Knobs, lines: np.ndarray) -> np.ndarray:
        """The search's estimate of the cycles it adds to a starved request."""
        n = np.asarray(lines, dtype=float)
        out = self.parent.extra_cycles(k, n) if self.parent else np.zeros(n.shape)
        return out + self.estimate(k, n) if self.estimate is not None else out

    def draw(self, rng: random.Random, base: Values) -> dict[str, int]:
        """Random inputs of this mechanism for `base` (latency, window, rates), for fuzzing."""
        out = self.parent.draw(rng, base) if self.parent else {}
        if self.draw_own is not None:
            out.update(self.draw_own(rng, base))
        return out


# ---------------------------------------------------------------- the base and the fields

#: the always-on inputs (not a mechanism: every profile has them), in settings_t order
BASE: tuple[Input, ...] = (
    Input("latency", 1, MAX_LATENCY_CYCLES, 1, LATENCY_BITS, "latency (cycles)"),
    # wide enough for the largest KMem a build may have (hw.MAX_KMEM_LINES)
    Input("window", 1, MAX_WINDOW_LINES, 1, WINDOW_BITS, "demand window (lines)"),
    Input("core_rate_q16", 1, RATE_ONE, RATE_ONE, RATE_BITS, "core rate (Q.16 lines/cycle)"),
    Input("agg_rate_q16", 1, AGG_RATE_MAX_Q16, 1, AGG_RATE_BITS, "aggregate rate (Q.16)"),
)

_RAMP = (
    Input("ramp_start_q16", 0, RATE_ONE, 0, RATE_BITS, "ramp start (Q.16 lines/cycle)", True),
    Input("ramp_step_lines", 1, MAX_RAMP_STEP_LINES, 1, RAMP_STEP_BITS, "ramp step (lines)", True),
    Input(
        "ramp_inc_q16",
        0,
        RATE_ONE,
        0,
        RATE_BITS,
        "ramp increment (Q.16 lines/cycle)",
        True,
    ),
)
_RAMP_PARAMS = (
    Param("start", (0.5, 0.8), 0.1, 0.05, 1.0, off=1.0),  # the governor's start / the rate
    Param("ramp_lines", (4e3, 1.2e4), 0.5, 1.0, float(1 << 20), log=True, off=1.0),
)


def _ramp_inputs(
    m: Mechanism, k: Knobs, rate: int, ovh: float, ns: float
) -> tuple[dict[str, int], float]:
    start_frac = k.get("start", 1.0)
    if start_frac >= 1.0:
        return {}, ovh
    start = max(1, round(rate * start_frac))
    if start >= rate:
        return {}, ovh
    return {
        "ramp_start_q16": start,
        "ramp_step_lines": max(1, round(k.get("ramp_lines", 1.0) / m.steps)),
        "ramp_inc_q16": max(1, -(-(rate - start) // m.steps)),
    }, ovh


def _ramp_draw(rng: random.Random, base: Values) -> dict[str, int]:
    rate = base["core_rate_q16"]
    if rate < 2:
        return {}
    return {
        "ramp_start_q16": rng.randrange(1, rate),
        "ramp_step_lines": rng.choice([rng.randrange(1, 300), rng.randrange(300, 9000)]),
        "ramp_inc_q16": rng.randrange(1, RATE_ONE // 4),
    }


def _warm_inputs(
    m: Mechanism, k: Knobs, rate: int, ovh: float, ns: float
) -> tuple[dict[str, int], float]:
    return {}, ovh  # fitted on its grid (Mechanism.grid), not by the search


def _warm_draw(rng: random.Random, base: Values) -> dict[str, int]:
    return {"warm_lines": rng.randrange(0, 400), "warm_extra_cycles": rng.randrange(0, 200)}


def _task_inputs(
    m: Mechanism, k: Knobs, rate: int, ovh: float, ns: float
) -> tuple[dict[str, int], float]:
    gap = round(ovh * 1000.0 / ns)
    return {"task_gap_cycles": min(gap, MAX_TASK_GAP_CYCLES)}, 0.0


def _task_draw(rng: random.Random, base: Values) -> dict[str, int]:
    return {"task_gap_cycles": rng.randrange(0, 100)}


def _dwarm_extra(k: Knobs) -> int:
    """The demand warm-up's extra cycles (latency + extra stays in the latency range)."""
    room = MAX_LATENCY_CYCLES - (k.period() - 2)
    return max(0, min(room, round(k.get("warm_per_line") * k.window)))


def _dwarm_inputs(
    m: Mechanism, k: Knobs, rate: int, ovh: float, ns: float
) -> tuple[dict[str, int], float]:
    extra = _dwarm_extra(k)
    if extra <= 0:
        return {}, ovh
    lines = max(1, min(MAX_WARM_LINES, round(k.get("warm_lines", 1.0))))
    return {"dwarm_lines": lines, "dwarm_extra_cycles": extra}, ovh


def _dwarm_estimate(k: Knobs, n: np.ndarray) -> np.ndarray:
    """Each of the first warm_lines starved lines holds its slot `extra` cycles longer."""
    return np.minimum(n, k.get("warm_lines", 1.0)) * k.get("warm_per_line")


def _dwarm_draw(rng: random.Random, base: Values) -> dict[str, int]:
    lines = rng.choice([rng.randrange(1, 300), rng.randrange(300, 20000)])
    return {"dwarm_lines": lines, "dwarm_extra_cycles": rng.randrange(1, 200)}


def _dwin_start(k: Knobs) -> int:
    return max(1, min(k.window - 1, round(k.get("dwin_frac", 1.0) * k.window)))


def _dwin_inputs(
    m: Mechanism, k: Knobs, rate: int, ovh: float, ns: float
) -> tuple[dict[str, int], float]:
    step = max(1, min(MAX_DWIN_STEP_LINES, round(k.get("dwin_step", 1.0))))
    return {"dwin_start_lines": _dwin_start(k), "dwin_step_lines": step}, ovh


def _dwin_estimate(k: Knobs, n: np.ndarray) -> np.ndarray:
    """The window grows from its start by one line every dwin_step starved lines, as a fluid
    (the demand window carries `window` lines per round trip)."""
    w = float(k.window)
    w0 = float(np.clip(k.get("dwin_frac", 1.0), 1.0 / w, 1.0)) * w
    m = max(k.get("dwin_step", 1.0), 1.0)
    grown = np.minimum(n, (w - w0) * m)
    return k.period() * (m * np.log((w0 + grown / m) / w0) - grown / w)


def _dwin_draw(rng: random.Random, base: Values) -> dict[str, int]:
    window = base["window"]
    if window < 2:
        return {}
    step = rng.choice([rng.randrange(1, 40), rng.randrange(40, 3000)])
    return {"dwin_start_lines": rng.randrange(1, window), "dwin_step_lines": step}


def _dwin_active(v: Values) -> bool:
    return 0 < v["dwin_start_lines"] < v["window"]


def _warm_active(v: Values) -> bool:
    return bool(v["warm_lines"] and v["warm_extra_cycles"])


REGISTRY: tuple[Mechanism, ...] = (
    Mechanism(
        "none",
        "one per-core rate; a fixed cost per request",
        "a DMA engine that streams at one rate from its first line; time is affine in the size",
    ),
    Mechanism(
        "ramp",
        "an issue-rate governor: each request starts at a lower rate and steps up to the full "
        "rate after a number of granted lines (one step)",
        "a clock-enable or duty governor in the kernel DMA that throttles the first part of each "
        "request (power or thermal management, or a prefetcher that trusts a stream only after "
        "it has seen enough of it) and then runs at full rate",
        inputs_own=_RAMP,
        steps=1,
        params_own=_RAMP_PARAMS,
        rate_starts=(0.45, 0.55),
        to_inputs_own=_ramp_inputs,
        draw_own=_ramp_draw,
    ),
    Mechanism(
        "ramp-linear",
        "the same governor climbing in 16 equal steps (a near-linear ramp)",
        "a governor that raises the issue duty gradually over the first part of each request",
        extends="ramp",
        steps=16,
        rate_starts=(0.45, 0.55),
    ),
    Mechanism(
        "warmup",
        "a memory warm-up: the first lines of each request see extra latency",
        "DRAM or fabric state (row buffers, page-table walks, QoS credits) that each request "
        "must warm before the memory answers at full speed",
        inputs_own=(
            Input("warm_lines", 0, MAX_WARM_LINES, 0, None, "warm-up (lines)", True),
            Input(
                "warm_extra_cycles",
                0,
                MAX_LATENCY_CYCLES,
                0,
                None,
                "warm-up latency (cycles)",
                True,
            ),
        ),
        closed_form=False,
        to_inputs_own=_warm_inputs,
        search_as="none",
        grid=((1024, 4096, 8192, 16384), (32, 128, 512, 2048)),
        active_when=_warm_active,
        draw_own=_warm_draw,
    ),
    Mechanism(
        "task-cost",
        "a fixed cost per task, the fitted intercept charged at every task instead of once "
        "per request",
        "per-descriptor set-up in the DMA (fetching and decoding each task descriptor) that "
        "stalls the stream at every task",
        inputs_own=(
            Input("task_gap_cycles", 0, MAX_TASK_GAP_CYCLES, 0, None, "task gap (cycles)", True),
        ),
        closed_form=False,
        to_inputs_own=_task_inputs,
        search_as="none",
        intercept_per_task=True,
        draw_own=_task_draw,
    ),
    Mechanism(
        "demand-warmup",
        "the governor (one step), and the demand path's warm-up: a request's first starved "
        "lines (credit 0) see extra memory latency",
        "the demand path's reads go out cold: no speculative read has opened the DRAM rows or "
        "walked the translation, so a request's first demand reads pay a row miss or a "
        "DART/TLB walk that the speculative path would have hidden (docs/fidelity.md)",
        inputs_own=(
            Input("dwarm_lines", 0, MAX_WARM_LINES, 0, DWARM_LINES_BITS, "demand warm-up (lines)"),
            Input(
                "dwarm_extra_cycles",
                0,
                MAX_LATENCY_CYCLES,
                0,
                DWARM_EXTRA_BITS,
                "demand warm-up latency (cycles)",
            ),
        ),
        extends="ramp",
        steps=1,
        params_own=(
            Param("warm_per_line", (0.3, 1.0), 0.1, 0.0, 16.0),  # the extra latency / window
            Param("warm_lines", (8e3, 2e4), 0.5, 1.0, float(MAX_WARM_LINES), log=True, off=1.0),
        ),
        rate_starts=(0.45, 0.55),
        to_inputs_own=_dwarm_inputs,
        estimate=_dwarm_estimate,
        active_when=lambda v: v["dwarm_lines"] > 0 and v["dwarm_extra_cycles"] > 0,
        draw_own=_dwarm_draw,
    ),
    Mechanism(
        "demand-window",
        "the governor (one step), and a demand window that grows: a request's starved lines "
        "start with a narrow window that gains one line every few starved lines",
        "the demand path's outstanding-read budget is raised one tag at a time while a request "
        "keeps missing: an additive-increase stream detector on the non-speculative queue "
        "(or read credits the fabric hands back one by one to a port it has seen stream)",
        inputs_own=(
            Input("dwin_start_lines", 0, MAX_WINDOW_LINES, 0, None, "demand window start (lines)"),
            Input("dwin_step_lines", 1, MAX_DWIN_STEP_LINES, 1, None, "demand window step (lines)"),
        ),
        extends="ramp",
        steps=1,
        closed_form=False,
        params_own=(
            Param(
                "dwin_frac", (0.6, 0.85), 0.1, 0.0, 1.0, off=1.0, per_window=True
            ),  # its start / window
            Param(
                "dwin_step", (200.0, 600.0), 0.5, 1.0, float(MAX_DWIN_STEP_LINES), log=True, off=1.0
            ),
        ),
        rate_starts=(0.45, 0.55),
        to_inputs_own=_dwin_inputs,
        estimate=_dwin_estimate,
        active_when=_dwin_active,
        draw_own=_dwin_draw,
    ),
)


def names() -> list[str]:
    return [m.name for m in REGISTRY]


def get(name: str) -> Mechanism:
    for m in REGISTRY:
        if m.name == name:
            return m
    raise InputError(f"unknown mechanism {name!r} (one of: {', '.join(names())})")


def default() -> Mechanism:
    """A profile's mechanism when none is named: the registry's first (no inputs)."""
    return REGISTRY[0]


# ---------------------------------------------------------------- derived tables


def inputs() -> tuple[Input, ...]:
    """Every mechanism's own inputs, once each, in registry order (each owned by one entry)."""
    seen: dict[str, Input] = {}
    for m in REGISTRY:
        for i in m.inputs_own:
            if i.name in seen:
                raise ValueError(f"input {i.name} owned twice")
            seen[i.name] = i
    return tuple(seen.values())


def fields_all() -> tuple[Input, ...]:
    """The base inputs, then every mechanism's: the fields of ``Settings``, in order."""
    return BASE + inputs()


def owner(name: str) -> Mechanism:
    """The mechanism that owns an input."""
    for m in REGISTRY:
        if any(i.name == name for i in m.inputs_own):
            return m
    raise KeyError(name)


def off_values() -> dict[str, int]:
    """Every mechanism input at its off value."""
    return {i.name: i.off for i in inputs()}


def rtl_built() -> tuple[str, ...]:
    """The mechanisms built in rtl/ (each input a settings_t member), in registry order: the
    ones a testbench may draw (:func:`draw_settings`) for the RTL."""
    return tuple(m.name for m in REGISTRY if m.in_rtl)


def rtl_fields() -> tuple[Field, ...]:
    """The fields of kdma_pkg::settings_t, in declaration order (MSB first)."""
    return tuple(Field(i.name, i.rtl_bits) for i in fields_all() if i.rtl_bits is not None)


def rtl_names() -> tuple[str, ...]:
    """The run-time settings kdma_top has input ports for, in settings_t order."""
    return tuple(f.name for f in rtl_fields())


def check_values(values: Values) -> None:
    """Every input in its range (InputError, one line), and the cross-field rules."""
    for i in fields_all():
        i.check(values[i.name])
    if not values["dwin_start_lines"] <= values["window"]:
        raise InputError(
            f"demand window start {values['dwin_start_lines']} lines outside 0..{values['window']} "
            "(the window)"
        )
    ramp = 0 < values["ramp_start_q16"] < values["core_rate_q16"]
    if ramp and values["ramp_inc_q16"] == 0:
        raise InputError("a ramp that starts below the core rate needs an increment above 0")


def no_closed_form(values: Values) -> list[Mechanism]:
    """The mechanisms on at these values that the analytic engine does not follow."""
    return [m for m in REGISTRY if not m.closed_form and m.active(values)]


def draw_settings(
    rng: random.Random,
    base: Values,
    mechanisms: tuple[str, ...] | None = None,
    p: float = 0.3,
) -> dict[str, int]:
    """Random inputs for fuzzing: each mechanism (every registered one, or these) is drawn
    with probability `p` through its own ``draw``; the result goes to ``Settings(**base, **out)``.

    Why one helper: a new mechanism is fuzzed wherever settings are drawn, with no
    generator to edit.
    """
    chosen = REGISTRY if mechanisms is None else tuple(get(n) for n in mechanisms)
    out: dict[str, int] = {}
    for m in chosen:
        if rng.random() < p:
            out.update(m.draw(rng, {**base, **off_values(), **out}))
    return out
