"""Prediction bands: each figure's lowest and highest value over a profile and its fits.

A profile fitted from few figures carries an uncertainty (:class:`ane_kdma.profile.Uncertainty`):
intervals of its free fields and other fits (members) that pass the same checks and
span those intervals. A command that prints a figure (``predict``, ``plan``,
``llm``, ``patch --dry-run``'s decode step) runs the same workloads, on the same
engine, under the profile and under each member, and prints the lowest and the
highest of those figures beside it: ``979.527 (951.5-1004)`` in text (four
significant figures),
``KEY_band: [lo, hi]`` beside ``KEY`` in JSON. The choices a command makes (which
split ``plan`` takes) are made once, on the profile; the band times that same
choice under every member. Because each member is run exactly, the band is the
model's exact range over that set of fits, not a box around the intervals nor a
statistical interval; it is as wide as the fits the calibration kept. A profile
without an uncertainty, or with no member, gets no band and no band keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from ane_kdma.chip import Chip

T = TypeVar("T")
TEXT_DIGITS = 4  # a text table shows a band to four significant figures (JSON: in full)

HELP = (
    "Where the chip's profile carries an uncertainty (fits that span its free parameters' "
    "intervals), each figure is followed by its band in parentheses: the lowest and the "
    "highest over the profile and those fits, each run on the same engine; --json gives "
    "KEY_band: [lo, hi] beside KEY."
)


def members(chip: Chip) -> tuple[Chip, ...]:
    """The chip under each other fit of its profile's uncertainty (empty: no band)."""
    return tuple(chip.with_profile(p) for p in chip.profile.members()[1:])


def header(chip: Chip) -> str:
    """The header's words for the band, or "" when there is none."""
    n = len(chip.profile.members())
    return f"(lo-hi): band over {n} fits" if n > 1 else ""


def over(chip: Chip, figures: Callable[[Chip], T]) -> tuple[T, list[T]]:
    """`figures` under the profile, then under each member (none: an empty list)."""
    return figures(chip), [figures(m) for m in members(chip)]


def spans(
    central: Mapping[str, float], others: Sequence[Mapping[str, float]], digits: int
) -> dict[str, list[float]]:
    """``KEY_band: [lo, hi]`` for each key of `central`, over it and `others` (none: {}).

    Rounded as the figure is, so the printed figure always lies within its band.
    """
    if not others:
        return {}
    out = {}
    for key, value in central.items():
        values = [value, *(o[key] for o in others)]
        out[f"{key}_band"] = [round(min(values), digits), round(max(values), digits)]
    return out


def merged(row: Mapping[str, object], band: Mapping[str, list[float]]) -> dict[str, object]:
    """`row` with each ``KEY_band`` placed right after its ``KEY`` (JSON order)."""
    out: dict[str, object] = {}
    for key, value in row.items():
        out[key] = value
        if f"{key}_band" in band:
            out[f"{key}_band"] = band[f"{key}_band"]
    return out


def text(row: Mapping[str, object], key: str) -> str:
    """``value (lo-hi)`` where the row has ``KEY_band``, else the value as it is."""
    band = row.get(f"{key}_band")
    if not isinstance(band, list):
        return str(row.get(key, ""))
    return f"{row[key]} ({short(band[0])}-{short(band[1])})"


def short(value: float) -> str:
    """Four significant figures in fixed point, whole numbers from 1000 up (never 1e+04)."""
    whole = len(str(int(abs(value))))
    return f"{value:.{max(0, TEXT_DIGITS - whole)}f}"


def texts(row: Mapping[str, object], keys: Sequence[str]) -> dict[str, object]:
    """The row for a text table: each of `keys` shown with its band (if any), no band keys."""
    out = {k: v for k, v in row.items() if not k.endswith("_band")}
    for key in keys:
        if key in row:
            out[key] = text(row, key)
    return out
