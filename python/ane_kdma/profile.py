"""Profiles: what turns cycles into time, and the run-time settings of the model.

A profile is fitted by ``ane-kdma calibrate`` and stored as JSON under
``data/profiles``; ``m3.json`` is the default. Everything a user sees (µs,
GB/s, tok/s) goes through one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ane_kdma.cyclemodel import Settings
from ane_kdma.errors import InputError
from ane_kdma.hw import LINE_BYTES, RATE_ONE

REPO = Path(__file__).resolve().parents[2]
PROFILE_DIR = REPO / "data" / "profiles"
DRAM_CEILING_GBPS = 102.4  # LPDDR5-6400 x 128 bit, erratum.md section 1


@dataclass(frozen=True)
class Profile:
    name: str
    ns_per_cycle: float  # hand-set: only latency*ns and rate/ns are identifiable
    overhead_us: float  # fixed cost per submitted request (not per task)
    latency_cycles: int
    window_lines: int
    core_rate_q16: int  # per-core line rate, Q.16 lines per cycle
    ceiling_gbps: float = DRAM_CEILING_GBPS
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def agg_rate_q16(self) -> int:
        """Aggregate DRAM ceiling in Q.16 lines/cycle, rounded down so it never exceeds it.

        lines/cycle = GB/s * 1e9 * ns_per_cycle * 1e-9 / 64 B.
        """
        return int(self.ceiling_gbps * self.ns_per_cycle / LINE_BYTES * RATE_ONE)

    @property
    def settings(self) -> Settings:
        return Settings(
            latency=self.latency_cycles,
            window=self.window_lines,
            core_rate_q16=self.core_rate_q16,
            agg_rate_q16=self.agg_rate_q16,
        )

    def us(self, cycles: float) -> float:
        return cycles * self.ns_per_cycle / 1000.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Profile:
        raw = json.loads(text)
        return cls(**raw)


def load(name_or_path: str | None = None) -> Profile:
    """The named profile from data/profiles, a JSON path, or m3 by default."""
    target = name_or_path or "m3"
    path = Path(target)
    if not path.suffix:
        path = PROFILE_DIR / f"{target}.json"
    if not path.is_file():
        raise InputError(f"no such profile: {target}")
    try:
        return Profile.from_json(path.read_text())
    except (ValueError, TypeError) as exc:
        raise InputError(f"profile {path} is malformed: {exc}") from None
