# SPDX-License-Identifier: Apache-2.0
"""Read the solver's choices out of an sby cover trace, so nobody has to open a VCD by hand.

Used by formal/run.sh (summary lines) and tests/test_formal.py (checks on the
transfer size the solver found). Usage: python witness.py <task-directory>.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pywellen

# Harness scope in the trace and one ring turn (2^14 lines = 1 MiB).
TOP = "kdma_formal_ring"
RING_LINES = 0x4000


@dataclass(frozen=True)
class Witness:
    """Task and state at the cover step of a solver trace."""

    transfer_lines: int
    base_line: int
    window: int
    credit: int
    issued: int

    @property
    def ring_turns(self) -> int:
        """Nearest multiple of 2^14 lines, in ring turns."""
        return (self.transfer_lines + RING_LINES // 2) // RING_LINES

    @property
    def notch_x(self) -> int:
        """Signed distance from the nearest multiple of 2^14 lines."""
        return self.transfer_lines - self.ring_turns * RING_LINES

    def describe(self) -> str:
        x = self.notch_x
        return (
            f"transfer_lines=0x{self.transfer_lines:08x} "
            f"(= {self.ring_turns} * 0x4000 {'-' if x < 0 else '+'} {abs(x)}), "
            f"base_line=0x{self.base_line:07x}, window={self.window}, credit={self.credit}"
        )


def trace_of(task_dir: Path) -> Path:
    """The cover trace sby wrote for a task (one cover per task: trace0.vcd)."""
    traces = sorted((Path(task_dir) / "engine_0").glob("trace*.vcd"))
    if not traces:
        raise FileNotFoundError(f"no trace*.vcd in {task_dir}/engine_0")
    return traces[0]


def _last_value(wave: pywellen.Waveform, name: str) -> int:
    changes = list(wave[f"{TOP}.{name}"].tv)
    value = changes[-1][1]
    if not isinstance(value, int):
        raise ValueError(f"{name} is not a plain number in the trace: {value!r}")
    return value


def read_witness(task_dir: Path) -> Witness:
    """Values at the last step of the trace, where the cover is reached."""
    wave = pywellen.Waveform(str(trace_of(task_dir)))
    return Witness(
        transfer_lines=_last_value(wave, "transfer_lines"),
        base_line=_last_value(wave, "base_line"),
        window=_last_value(wave, "window"),
        credit=_last_value(wave, "credit"),
        issued=_last_value(wave, "issued"),
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: witness.py <sby task directory>", file=sys.stderr)
        return 2
    print(read_witness(Path(argv[1])).describe())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
