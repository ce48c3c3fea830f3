"""Run knobs of the pyuvm environment, from the environment, checked before a simulator starts.

Knobs (environment variables):

* ``KDMA_SEED``           the random seed (decimal or 0x...); fresh and printed when unset. The
  same seed, knobs and simulator replay the same run.
* ``KDMA_UVM_TRANSFERS``  transfers in the single-core run of each mode (the 16-core run does
  ``max(3, transfers // 25)`` multi-core tasks). Default 150 on Verilator, 30 on Icarus,
  2000 with ``KDMA_FULL=1`` (``make regress``).
* ``KDMA_UVM_KMAX``       the largest lap k the notch bins cover (0..8). Default 8 on Verilator
  and with ``KDMA_FULL=1``; 1 on Icarus, which runs this design about 30x slower. Icarus
  also skips the random big draws (the sweep and one directed draw up to 8 MiB remain).
* ``KDMA_UVM_LINE_CHECK`` runs of at most this many lines (all cores, all tasks) are checked
  line by line in Python; longer runs rely on the HDL checker, the counters and the cycle
  model. Default 4096: per-cycle Python slows Verilator ~20x and Icarus ~1.5x.

The bad-input rule of the project holds here too: an impossible value raises
``InputError`` (a ``ValueError``) with one line saying what is wrong.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from ane_kdma import knobs
from ane_kdma.errors import InputError

ENV_SEED = "KDMA_SEED"
ENV_TRANSFERS = "KDMA_UVM_TRANSFERS"
ENV_KMAX = "KDMA_UVM_KMAX"
ENV_LINE_CHECK = "KDMA_UVM_LINE_CHECK"
ENV_FULL = "KDMA_FULL"
ENV_SIM = "KDMA_UVM_SIM"
ENV_COVERAGE = "KDMA_UVM_COVERAGE"

K_LIMIT = 8  # laps k = 0..8: transfers up to 8 MiB per core
FULL_TRANSFERS = 2000
# Directed transfers that close the non-notch bins: one LFSR back-pressure, one
# external ready, one ring-wrap crossing, one reset mid-task, one split pair (2).
DIRECTED_TRANSFERS = 6


@dataclass(frozen=True)
class _Scale:
    transfers: int
    k_max: int
    line_check: int
    multi_max_lines: int  # lines per core of a multi-core task
    heavy: bool  # random draws of big transfers (up to 8 MiB, laps k > 1) beyond the sweep


_SCALE = {
    "verilator": _Scale(150, k_max=K_LIMIT, line_check=4096, multi_max_lines=256, heavy=True),
    "icarus": _Scale(30, k_max=1, line_check=4096, multi_max_lines=24, heavy=False),
}


def notch_bin_count(k_max: int) -> int:
    """Notch bins for laps 0..k_max: 4 classes at k = 0 (x >= 0 only), 7 at every k >= 1."""
    return 4 + 7 * k_max


def min_transfers(k_max: int) -> int:
    return notch_bin_count(k_max) + DIRECTED_TRANSFERS


def _int(environ: Mapping[str, str], name: str) -> int | None:
    """The project's one knob parser (ane_kdma.knobs): strict values, bounds, one line."""
    value = knobs.get(name, None, environ)
    return None if value is None else int(value)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Knobs:
    sim: str
    seed: int
    transfers: int
    k_max: int
    line_check_lines: int
    full: bool = False

    def __post_init__(self) -> None:
        if self.sim not in _SCALE:
            raise InputError(f"simulator {self.sim!r}: one of {', '.join(_SCALE)}")
        if not 0 <= self.seed < 1 << 64:
            raise InputError(f"{ENV_SEED}={self.seed}: a seed is a non-negative 64-bit integer")
        if not 0 <= self.k_max <= K_LIMIT:
            raise InputError(f"{ENV_KMAX}={self.k_max}: laps k run 0..{K_LIMIT}")
        need = min_transfers(self.k_max)
        if self.transfers < need:
            raise InputError(
                f"{ENV_TRANSFERS}={self.transfers}: coverage needs at least {need} transfers "
                f"({notch_bin_count(self.k_max)} notch bins for k = 0..{self.k_max}, "
                f"{DIRECTED_TRANSFERS} directed)"
            )
        if self.line_check_lines < 0:
            raise InputError(f"{ENV_LINE_CHECK}={self.line_check_lines}: a line count is >= 0")

    @property
    def multi_transfers(self) -> int:
        """Tasks of the 16-core run: at least one with 1, 2..15 and 16 active cores."""
        return max(3, self.transfers // 25)

    @property
    def multi_max_lines(self) -> int:
        return _SCALE[self.sim].multi_max_lines

    @property
    def heavy(self) -> bool:
        """Beyond the sweep and the one directed 8 MiB draw, draw big transfers (Verilator)."""
        return _SCALE[self.sim].heavy

    @classmethod
    def from_env(cls, environ: Mapping[str, str], sim: str) -> Knobs:
        """Resolve every knob (a fresh seed if none is given); raises InputError on bad values."""
        sim = sim.lower()
        if sim not in _SCALE:
            raise InputError(f"simulator {sim!r}: one of {', '.join(_SCALE)}")
        scale = _SCALE[sim]
        full = knobs.full(environ)
        seed = _int(environ, ENV_SEED)
        if seed is None:
            seed = random.SystemRandom().randrange(1 << 31)
        k_max = _int(environ, ENV_KMAX)
        if k_max is None:
            k_max = K_LIMIT if full else scale.k_max
        transfers = _int(environ, ENV_TRANSFERS)
        if transfers is None:
            transfers = max(FULL_TRANSFERS if full else scale.transfers, min_transfers(k_max))
        line_check = _int(environ, ENV_LINE_CHECK)
        if line_check is None:
            line_check = scale.line_check
        return cls(sim, seed, transfers, k_max, line_check, full)

    def to_env(self) -> dict[str, str]:
        """The resolved knobs, for the simulator process (so it cannot resolve them differently)."""
        return {
            ENV_SIM: self.sim,
            ENV_SEED: str(self.seed),
            ENV_TRANSFERS: str(self.transfers),
            ENV_KMAX: str(self.k_max),
            ENV_LINE_CHECK: str(self.line_check_lines),
            ENV_FULL: "1" if self.full else "0",
        }

    def describe(self) -> str:
        return (
            f"{ENV_SEED}={self.seed} {ENV_TRANSFERS}={self.transfers} {ENV_KMAX}={self.k_max} "
            f"{ENV_LINE_CHECK}={self.line_check_lines} (sim {self.sim}; set {ENV_SEED} to replay)"
        )
