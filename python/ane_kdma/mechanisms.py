"""The rate-mechanism candidates for the rising nominal throughput, as data.

Measured throughput off the notch rises with the transfer (about 45 GB/s near
1 MiB per core towards 60 at 8 MiB; Table A bends). Something in the kernel
DMA or its memory makes a longer request faster per byte. Each candidate here
is hardware with run-time inputs (:class:`ane_kdma.profile.Settings`), built
in the cycle model; calibration fits every candidate and validation ranks
them, and the winner is built in the RTL.
"""

from __future__ import annotations

from dataclasses import dataclass

from ane_kdma.errors import InputError
from ane_kdma.hw import (
    AGG_RATE_BITS,
    DWARM_EXTRA_BITS,
    DWARM_LINES_BITS,
    LATENCY_BITS,
    RAMP_STEP_BITS,
    RATE_BITS,
    RTL_SETTINGS,
    WINDOW_BITS,
)


@dataclass(frozen=True)
class Mechanism:
    name: str
    summary: str
    silicon: str  # what it would mean in silicon
    in_rtl: bool  # built in rtl/ (the winner)
    steps: int = 0  # governor steps the fit uses (ramps only)
    closed_form: bool = True  # the analytic engine follows it (else: the cycle model only)
    inputs: tuple[str, ...] = ()  # its run-time inputs (ane_kdma.profile.Settings); the rest off


RAMP = ("ramp_start_q16", "ramp_step_lines", "ramp_inc_q16")
DWARM = ("dwarm_lines", "dwarm_extra_cycles")
DWIN = ("dwin_start_lines", "dwin_step_lines")
STARVED = ("demand-warmup", "demand-window")  # issue 16's starved-stream mechanisms (on RAMP)


REGISTRY: tuple[Mechanism, ...] = (
    Mechanism(
        "none",
        "one per-core rate; a fixed cost per request",
        "a DMA engine that streams at one rate from its first line; time is affine in the size",
        True,
    ),
    Mechanism(
        "ramp",
        "an issue-rate governor: each request starts at a lower rate and steps up to the full "
        "rate after a number of granted lines (one step)",
        "a clock-enable or duty governor in the kernel DMA that throttles the first part of each "
        "request (power or thermal management, or a prefetcher that trusts a stream only after "
        "it has seen enough of it) and then runs at full rate",
        True,
        steps=1,
        inputs=RAMP,
    ),
    Mechanism(
        "ramp-linear",
        "the same governor climbing in 16 equal steps (a near-linear ramp)",
        "a governor that raises the issue duty gradually over the first part of each request",
        True,
        steps=16,
        inputs=RAMP,
    ),
    Mechanism(
        "warmup",
        "a memory warm-up: the first lines of each request see extra latency",
        "DRAM or fabric state (row buffers, page-table walks, QoS credits) that each request "
        "must warm before the memory answers at full speed",
        False,
        closed_form=False,
        inputs=("warm_lines", "warm_extra_cycles"),
    ),
    Mechanism(
        "task-cost",
        "a fixed cost per task, the fitted intercept charged at every task instead of once "
        "per request",
        "per-descriptor set-up in the DMA (fetching and decoding each task descriptor) that "
        "stalls the stream at every task",
        False,
        closed_form=False,
        inputs=("task_gap_cycles",),
    ),
    Mechanism(
        "demand-warmup",
        "the governor (one step), and the demand path's warm-up: a request's first starved "
        "lines (credit 0) see extra memory latency",
        "the demand path's reads go out cold: no speculative read has opened the DRAM rows or "
        "walked the translation, so a request's first demand reads pay a row miss or a "
        "DART/TLB walk that the speculative path would have hidden (docs/fidelity.md)",
        True,
        steps=1,
        inputs=RAMP + DWARM,
    ),
    Mechanism(
        "demand-window",
        "the governor (one step), and a demand window that grows: a request's starved lines "
        "start with a narrow window that gains one line every few starved lines",
        "the demand path's outstanding-read budget is raised one tag at a time while a request "
        "keeps missing: an additive-increase stream detector on the non-speculative queue "
        "(or read credits the fabric hands back one by one to a port it has seen stream)",
        False,
        steps=1,
        closed_form=False,
        inputs=RAMP + DWIN,
    ),
)


def names() -> list[str]:
    return [m.name for m in REGISTRY]


def get(name: str) -> Mechanism:
    for m in REGISTRY:
        if m.name == name:
            return m
    raise InputError(f"unknown mechanism {name!r} (one of: {', '.join(names())})")


@dataclass(frozen=True)
class Field:
    """One run-time input as the RTL takes it: its Settings name and its width.

    The RTL's settings struct (kdma_pkg::settings_t) has one member per field
    with a width, named as here and declared in this order (the first at the
    most significant bits); Python packs the struct from this table alone.
    """

    name: str  # the Settings attribute, and the settings_t member
    rtl_bits: int  # the member's width in kdma_pkg::settings_t


#: the RTL's run-time inputs, in settings_t order (a seed: the design round moves each field
#: into the registry entry that owns it, with its range and off value)
_RTL_BITS = {
    "latency": LATENCY_BITS,
    "window": WINDOW_BITS,  # wide enough for the largest KMem a build may have (4096 lines)
    "core_rate_q16": RATE_BITS,
    "agg_rate_q16": AGG_RATE_BITS,
    "ramp_start_q16": RATE_BITS,
    "ramp_step_lines": RAMP_STEP_BITS,
    "ramp_inc_q16": RATE_BITS,
    "dwarm_lines": DWARM_LINES_BITS,
    "dwarm_extra_cycles": DWARM_EXTRA_BITS,
}


def rtl_fields() -> tuple[Field, ...]:
    """The fields of kdma_pkg::settings_t, in declaration order (MSB first)."""
    return tuple(Field(name, _RTL_BITS[name]) for name in RTL_SETTINGS)
