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

# Harness scope in the trace, one ring turn (2^14 lines = 1 MiB) and one page of
# the paged reading (the clamp, 256 lines); tests/test_formal.py holds both to kdma_pkg.
TOP = "kdma_formal_ring"
RING_LINES = 0x4000
PAGE_LINES = 256


@dataclass(frozen=True)
class Witness:
    """Task and state at the cover step of a solver trace."""

    transfer_lines: int
    base_line: int
    window: int
    credit: int
    issued: int
    req_valid: int  # at the cover step
    req_spec: int  # at the cover step
    outstanding: int  # at the cover step
    spec_lines: int  # speculative lines accepted before the cover step
    demand_lines: int  # demand-path lines accepted before the cover step
    spec_steps: int  # steps out of reset with req_spec up (accepted or not)

    @property
    def ring_turns(self) -> int:
        """Nearest multiple of 2^14 lines, in ring turns."""
        return (self.transfer_lines + RING_LINES // 2) // RING_LINES

    @property
    def notch_x(self) -> int:
        """Signed distance from the nearest multiple of 2^14 lines."""
        return self.transfer_lines - self.ring_turns * RING_LINES

    @property
    def page_line(self) -> int:
        """The next line's place in its page of the task (the paged reading's pages)."""
        return self.issued % PAGE_LINES

    def describe(self) -> str:
        x = self.notch_x
        return (
            f"transfer_lines=0x{self.transfer_lines:08x} "
            f"(= {self.ring_turns} * 0x4000 {'-' if x < 0 else '+'} {abs(x)}), "
            f"base_line=0x{self.base_line:07x}, window={self.window}, credit={self.credit}, "
            f"issued={self.issued}, lines spec/demand={self.spec_lines}/{self.demand_lines}"
        )


def trace_of(task_dir: Path) -> Path:
    """The cover trace sby wrote for a task (one cover per task: trace0.vcd)."""
    traces = sorted((Path(task_dir) / "engine_0").glob("trace*.vcd"))
    if not traces:
        raise FileNotFoundError(f"no trace*.vcd in {task_dir}/engine_0")
    return traces[0]


def _changes(wave: pywellen.Waveform, name: str) -> list[tuple[int, int]]:
    changes = list(wave[f"{TOP}.{name}"].tv)
    for _, value in changes:
        if not isinstance(value, int):
            raise ValueError(f"{name} is not a plain number in the trace: {value!r}")
    return changes


def _last_value(wave: pywellen.Waveform, name: str) -> int:
    return _changes(wave, name)[-1][1]


def _per_step(wave: pywellen.Waveform, name: str, times: list[int]) -> list[int]:
    """A signal's value at each step time (its last change at or before it)."""
    changes = _changes(wave, name)
    values = []
    for t in times:
        values.append([v for when, v in changes if when <= t][-1])
    return values


def read_witness(task_dir: Path) -> Witness:
    """Values at the last step of the trace, where the cover is reached, and the lines
    accepted on each path before it.

    sby writes step k at time 10 k; the clock's last rising edge is one past the
    cover step. Step 0 is the reset step (rst_nq low), where nothing is counted.
    """
    wave = pywellen.Waveform(str(trace_of(task_dir)))
    times = [t for t, v in _changes(wave, "clk_i") if v == 1][:-1]
    live = _per_step(wave, "rst_nq", times)
    accepted = _per_step(wave, "accepted", times)
    spec = _per_step(wave, "req_spec", times)
    before_cover = range(len(times) - 1)
    return Witness(
        transfer_lines=_last_value(wave, "transfer_lines"),
        base_line=_last_value(wave, "base_line"),
        window=_last_value(wave, "window"),
        credit=_last_value(wave, "credit"),
        issued=_last_value(wave, "issued"),
        req_valid=_last_value(wave, "req_valid"),
        req_spec=_last_value(wave, "req_spec"),
        outstanding=_last_value(wave, "outstanding_q"),
        spec_lines=sum(live[k] and accepted[k] and spec[k] for k in before_cover),
        demand_lines=sum(live[k] and accepted[k] and not spec[k] for k in before_cover),
        spec_steps=sum(live[k] and spec[k] for k in range(len(times))),
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
    reached: bool  # the trace's goal (witness_o, or witness_gov_o for the paged cover) was raised
    steps: int  # trace length
    spec_grants: int  # lines granted on the speculative path (paged builds)
    rate_rises: int  # cycles in which the governor raised a busy core's rate
    rates: tuple[int, ...]  # rate_o over the busy steps, Q.16

    def describe(self) -> str:
        tasks = ", ".join(str(n) for n in self.task_lines)
        return (
            f"tasks of [{tasks}] lines, next taken with {self.tail_at_overlap} line(s) of the "
            f"older one still to drain, {self.dones} done pulses, {self.spec_grants} speculative "
            f"line(s), {self.rate_rises} rate rise(s), {self.steps} steps"
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


def read_core_witness(task_dir: Path, goal: str = "witness_o") -> CoreWitness:
    """The tasks, overlap and done pulses of a kdma_core cover trace whose goal is the
    harness output `goal`."""
    steps = _core_steps(Path(task_dir) / CORE_TRACE)
    # the goal reads registered counts: what happens in its own step is not part of it.
    hit = next((i for i, s in enumerate(steps) if s[goal]), len(steps))
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
        spec_grants=sum(s["spec_grant"] for s in live),
        rate_rises=sum(s["rate_rise"] for s in live),
        rates=tuple(s["rate"] for s in live if not s["idle"]),
    )


def core_goal(task_dir: Path) -> str:
    """The harness output a kdma_core cover job asks for (its .ys names it after -prove)."""
    script = Path(task_dir).parent / f"{Path(task_dir).name}.ys"
    words = script.read_text().split() if script.is_file() else []
    return words[words.index("-prove") + 1] if "-prove" in words else "witness_o"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: witness.py <task directory>", file=sys.stderr)
        return 2
    task_dir = Path(argv[1])
    if (task_dir / CORE_TRACE).is_file():
        print(read_core_witness(task_dir, core_goal(task_dir)).describe())
    else:
        print(read_witness(task_dir).describe())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
