"""The RTL's run-time settings as one packed word: kdma_pkg::settings_t, from one field table.

Every RTL top (kdma_top, the testbench top, the batch harness's top, formal)
takes the settings as one struct port. Its members are the fields of
:func:`ane_kdma.mechanisms.rtl_fields`, in that order (the first at the most
significant bits) with those widths, and tests/test_pkg_parity.py holds the
struct to that table; so this module is the one place Python packs it, and the
cocotb testbench, the batch engine and the C++ harness (which writes the word
once, 32 bits at a time, least significant first) all go through it.
"""

from __future__ import annotations

import math
from dataclasses import fields

from ane_kdma.errors import InputError
from ane_kdma.hw import MAX_LATENCY_CYCLES, RATE_ONE
from ane_kdma.mechanisms import rtl_fields
from ane_kdma.profile import Settings


def settings_bits() -> int:
    """$bits(kdma_pkg::settings_t)."""
    return sum(f.rtl_bits for f in rtl_fields())


def settings_words() -> int:
    """32-bit words the C++ harness reads for the struct."""
    return -(-settings_bits() // 32)


def check_rtl_settings(s: Settings, kmem_lines: int) -> Settings:
    """The RTL has inputs for the rtl_fields() only: refuse a mechanism it does not build,
    and a value its field cannot hold (one line, InputError)."""
    driven = {f.name for f in rtl_fields()}
    for f in fields(s):
        if f.name not in driven and getattr(s, f.name) != f.default:
            raise InputError(
                f"the RTL has no input for {f.name}={getattr(s, f.name)}: use --engine model"
            )
    if s.latency > MAX_LATENCY_CYCLES:
        raise InputError(f"latency {s.latency} above the RTL's {MAX_LATENCY_CYCLES}")
    for field in rtl_fields():
        value = getattr(s, field.name)
        if not 0 <= value < 1 << field.rtl_bits:
            raise InputError(
                f"{field.name}={value} does not fit the RTL's {field.rtl_bits}-bit field"
            )
    return s.check(kmem_lines)


def pack_settings(s: Settings) -> int:
    """The settings_t value: each field in its width, the first field most significant."""
    word = 0
    for f in rtl_fields():
        value = getattr(s, f.name)
        if not 0 <= value < 1 << f.rtl_bits:
            raise InputError(f"{f.name}={value} does not fit the RTL's {f.rtl_bits}-bit field")
        word = (word << f.rtl_bits) | value
    return word


def unpack_settings(word: int) -> dict[str, int]:
    """The fields of a settings_t value (a check of pack_settings, and for waves)."""
    out: dict[str, int] = {}
    for f in reversed(rtl_fields()):
        out[f.name] = word & ((1 << f.rtl_bits) - 1)
        word >>= f.rtl_bits
    return dict(reversed(out.items()))


def settle_cycles(s: Settings) -> int:
    """Idle cycles that refill every token bucket, as the model assumes at a start."""
    return math.ceil(RATE_ONE / min(s.core_rate_q16, s.agg_rate_q16)) + 2
