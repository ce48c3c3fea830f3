# SPDX-License-Identifier: Apache-2.0
"""Read the solver's choices out of an sby cover trace, so nobody has to open a VCD by hand.

Used by formal/run.sh (summary lines) and tests/test_formal.py (checks on the
transfer size the solver found). Usage: python witness.py <task-directory>.

Two kinds of trace: sby cover traces of the issue-engine harness
(`<task>/engine_0/trace0.vcd`, top `kdma_formal_ring`), and the yosys `sat`
trace of the kdma_core harness (`core_proof_cover/trace.vcd`, top
`kdma_formal_core`, where every name keeps yosys' leading backslash).
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


# ---------------------------------------------------------------------------
# kdma_core harness (formal/kdma_formal_core.sv), trace written by `sat -dump_vcd`
# ---------------------------------------------------------------------------
CORE_TRACE = "trace.vcd"


@dataclass(frozen=True)
class CoreWitness:
    """What happened in the kdma_core non-vacuity trace."""

    task_lines: tuple[int, ...]  # lines of each task taken, in order
    tail_at_overlap: int  # older task's lines left to drain when a task overlapped it
    dones: int  # done_o pulses
    reached: bool  # witness_o was raised
    steps: int  # trace length

    def describe(self) -> str:
        tasks = ", ".join(str(n) for n in self.task_lines)
        return (
            f"tasks of [{tasks}] lines, next taken with {self.tail_at_overlap} line(s) of the "
            f"older one still to drain, {self.dones} done pulses, {self.steps} steps"
        )


def _core_steps(path: Path) -> list[dict[str, int]]:
    """Signal values per time step of a `sat -dump_vcd` trace.

    yosys writes every signal at every step (no change compression) and, after
    the last step, only the registers' next state; that tail is dropped here.
    Names lose yosys' leading backslash.
    """
    names: dict[str, str] = {}
    steps: list[dict[str, int]] = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "$var":
            names[parts[3]] = parts[4].lstrip("\\")
        elif line.startswith("#"):
            steps.append({})
        elif steps and line[0] in "01" and line[1:] in names:
            steps[-1][names[line[1:]]] = int(line[0])
        elif steps and line[0] == "b" and len(parts) == 2 and parts[1] in names:
            steps[-1][names[parts[1]]] = int(parts[0][1:], 2)
    return [step for step in steps if "witness_o" in step]


def read_core_witness(task_dir: Path) -> CoreWitness:
    """The tasks, overlap and done pulses of the kdma_core cover trace."""
    steps = _core_steps(Path(task_dir) / CORE_TRACE)
    # witness_o reads registered counts: what happens in its own step is not part of it.
    hit = next((i for i, s in enumerate(steps) if s["witness_o"]), len(steps))
    live = [s for s in steps[:hit] if s["rst_nq"]]
    taken = [i for i, s in enumerate(live) if s["accept"]]
    overlap = [
        live[i + 1]["h_tail_left"]
        for i in taken
        if i + 1 < len(live) and live[i + 1]["h_tail_left"] != 0
    ]
    return CoreWitness(
        task_lines=tuple(live[i]["new_lines"] for i in taken),
        tail_at_overlap=overlap[0] if overlap else 0,
        dones=sum(s["done"] for s in live),
        reached=hit < len(steps),
        steps=hit + 1 if hit < len(steps) else len(steps),
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: witness.py <task directory>", file=sys.stderr)
        return 2
    task_dir = Path(argv[1])
    if (task_dir / CORE_TRACE).is_file():
        print(read_core_witness(task_dir).describe())
    else:
        print(read_witness(task_dir).describe())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
