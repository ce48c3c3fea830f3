"""The test and testbench knobs (``KDMA_*`` environment variables): one parser, strict values.

Every place that reads a knob asks :func:`get`; pytest's ``conftest.py`` (tb/
and tests/) calls :func:`read` once at start-up, so an impossible value, or a
misspelled ``KDMA_`` name, stops the run with one line before any simulator
starts. Values:

* integers as the CLI takes them (ASCII digits, ``0x``/``0o``/``0b``, ``_``),
  each with an upper bound;
* flags are ``1``/``0``/``true``/``false`` (any case), nothing else;
* an empty value means unset.

The ``internal`` knobs carry paths between pytest and the simulator process
(set by the test, not by a user); they are checked to be one line.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ane_kdma.errors import InputError

PREFIX = "KDMA_"
K_LIMIT = 8  # laps k = 1..8: transfers up to 8 MiB per core
LINES_LIMIT = K_LIMIT << 14  # 8 MiB per core in 64-byte lines on the m3's 14-bit ring


@dataclass(frozen=True)
class Knob:
    kind: str  # "int", "flag", "choice", "laps", "internal"
    help: str
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()


KNOBS: dict[str, Knob] = {
    "KDMA_SEED": Knob("int", "random seed of a run (printed; set it to replay)", 0, (1 << 64) - 1),
    "KDMA_FULL": Knob("flag", "full scale on any simulator (make regress)"),
    "KDMA_SCALE": Knob("choice", "sizes of the cocotb tests", choices=("small", "full")),
    "KDMA_LAPS": Knob("laps", f"laps k of the erratum regression, e.g. 1,2,8 (1..{K_LIMIT})"),
    "KDMA_MAX_LINES": Knob("int", "largest random integrity size, lines", 1, LINES_LIMIT),
    "KDMA_WAVE_LINES": Knob("int", "lines of the wave-dump transfer", 1, LINES_LIMIT),
    "KDMA_UVM_TRANSFERS": Knob("int", "transfers of the pyuvm run per mode", 0, 100_000),
    "KDMA_UVM_KMAX": Knob("int", "largest lap k the pyuvm notch bins cover", 0, K_LIMIT),
    "KDMA_UVM_LINE_CHECK": Knob("int", "runs checked line by line in Python, lines", 0, 1 << 20),
    "KDMA_UVM_SIM": Knob("internal", "the simulator, passed to the pyuvm process"),
    "KDMA_UVM_COVERAGE": Knob("internal", "the pyuvm coverage file"),
    "KDMA_RESULTS": Knob("internal", "a JSON file for cross-build checks"),
    "KDMA_JOB": Knob("internal", "the job of the cocotb engine"),
}

_FLAGS = {"1": True, "true": True, "0": False, "false": False}
_MAX_TEXT = 4096


def _int(name: str, raw: str, knob: Knob) -> int:
    from ane_kdma.cli.common import parse_int  # the CLI's integers: one rule everywhere

    try:
        value = parse_int(raw)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None
    if not knob.lo <= value <= knob.hi:
        raise InputError(f"{name}={value}: must be {knob.lo}..{knob.hi} ({knob.help})")
    return value


def parse(name: str, raw: str) -> object:
    """One knob's value (None when empty); InputError, one line, when it is not a legal value."""
    knob = KNOBS.get(name)
    if knob is None:
        near = difflib.get_close_matches(name, KNOBS, n=1)
        hint = f"; did you mean {near[0]}?" if near else f" (known: {', '.join(KNOBS)})"
        raise InputError(f"{name}: unknown knob{hint}")
    text = raw.strip()
    shown = text if len(text) <= 24 and text.isprintable() else repr(text[:21]) + "..."
    if not text:
        return None
    if knob.kind == "int":
        return _int(name, text, knob)
    if knob.kind == "flag":
        if text.lower() not in _FLAGS:
            raise InputError(f"{name}={shown}: a flag is 1, 0, true or false")
        return _FLAGS[text.lower()]
    if knob.kind == "choice":
        if text not in knob.choices:
            raise InputError(f"{name}={shown}: one of {', '.join(knob.choices)}")
        return text
    if knob.kind == "laps":
        parts = text.split(",")
        if len(parts) > K_LIMIT:
            raise InputError(f"{name}={shown}: at most {K_LIMIT} laps")
        laps = [_int(name, p, Knob("int", knob.help, 1, K_LIMIT)) for p in parts]
        if len(set(laps)) != len(laps):
            raise InputError(f"{name}={shown}: a lap is listed twice")
        return laps
    if len(text) > _MAX_TEXT or not text.isprintable():
        raise InputError(f"{name}: must be one printable line of at most {_MAX_TEXT} characters")
    return text


def read(environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """Every ``KDMA_*`` variable set, parsed; the first bad one raises InputError (one line)."""
    env = os.environ if environ is None else environ
    return {n: parse(n, v) for n, v in sorted(env.items()) if n.startswith(PREFIX)}


def get(name: str, default: object = None, environ: Mapping[str, str] | None = None) -> object:
    """One knob's parsed value, or `default` when it is unset or empty."""
    if name not in KNOBS:
        raise KeyError(name)  # a typo in the code, not in the user's environment
    env = os.environ if environ is None else environ
    value = parse(name, env.get(name, ""))
    return default if value is None else value


def full(environ: Mapping[str, str] | None = None) -> bool:
    """KDMA_FULL: full scale on any simulator."""
    return bool(get("KDMA_FULL", False, environ))
