"""Coverage bins of the pyuvm environment, their merge across builds, and the report (pure Python).

Bins, per hypothesis of the registry (ane_kdma.hypotheses; the hypothesis is
fixed per build, so every bin is crossed with the build's and each hypothesis
has its own JSON file). R is the build's ring, 0x4000 lines on the m3:

* ``notch k=K x=C``: a completed task of ``lines = K * R + x`` lines
  (K = round(lines / R), erratum.md section 2) with x in class C, one of
  0, +1..31, -1..-31, +32..255, -32..-255, +256..300, -256..-300; K = 0..k_max
  (k = 0 has no negative x).
* ``credit: zero with lines left``: a core counted a cycle with zero credit and
  lines still to issue. Required for a buggy hypothesis; ILLEGAL for one that
  is not (``buggy == False``: the fix), where a hit fails the run at once.
* ``ring: wrap crossed`` / ``ring: no wrap``: start_line mod R + lines > R.
* ``bp: off`` / ``bp: lfsr`` / ``bp: external``: consumer back-pressure.
* ``reset: mid-task``: reset while a run was in flight.
* ``split: back-to-back``: a task taken while the previous one drained.
* ``cores: 1`` / ``cores: 2..15`` / ``cores: 16``: active cores of a task.
* ``governor: ...``: the issue-rate governor ramped a request from below the rate.
* ``demand warm-up: ...``: a run with zero credit under the demand path's
  warm-up; owned where zero credit is required (a buggy hypothesis, k_max >= 1).

Each build run owns the bins it can reach: the single-core build every bin but
``cores: 2..15`` and ``cores: 16``; the 16-core build the three ``cores`` bins.
A run fails on a missed bin it owns; tb/test_uvm.py merges the two JSON files
of a hypothesis (hit counts add) and fails on any bin missed by both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ane_kdma import hypotheses
from ane_kdma.hw import lap_and_offset
from ane_kdma.hypotheses import Hypothesis

X_CLASSES: tuple[tuple[str, int, int], ...] = (
    ("0", 0, 0),
    ("+1..31", 1, 31),
    ("-1..-31", -31, -1),
    ("+32..255", 32, 255),
    ("-32..-255", -255, -32),
    ("+256..300", 256, 300),
    ("-256..-300", -300, -256),
)

ZERO_CREDIT = "credit: zero with lines left"
RING_WRAP = "ring: wrap crossed"
RING_NO_WRAP = "ring: no wrap"
BP_OFF, BP_LFSR, BP_EXT = "bp: off", "bp: lfsr", "bp: external"
RESET_MID = "reset: mid-task"
SPLIT = "split: back-to-back"
GOVERNOR = "governor: request starts below the core rate"
DWARM = "demand warm-up: starved lines under it"
CORES_1, CORES_MID, CORES_16 = "cores: 1", "cores: 2..15", "cores: 16"
MULTI_BINS = (CORES_1, CORES_MID, CORES_16)


def x_class(x: int) -> str | None:
    for name, lo, hi in X_CLASSES:
        if lo <= x <= hi:
            return name
    return None


def notch_classes(k: int) -> list[str]:
    """The x classes that exist at lap k (no negative transfer at k = 0)."""
    return [name for name, lo, _ in X_CLASSES if k > 0 or lo >= 0]


def notch_bin(k: int, cls: str) -> str:
    return f"notch k={k} x={cls}"


def notch_of(lines: int, ring_lines: int) -> str | None:
    """The notch bin of a task of `lines` lines, if it has one."""
    k, x = lap_and_offset(lines, ring_lines)
    cls = x_class(x)
    return None if cls is None or k > 8 else notch_bin(k, cls)


def wraps_ring(base_line: int, lines: int, ring_lines: int) -> bool:
    return base_line % ring_lines + lines > ring_lines


def all_bins(k_max: int) -> list[str]:
    """Every bin; the same for every hypothesis (which of them are illegal is not)."""
    bins = [notch_bin(k, c) for k in range(k_max + 1) for c in notch_classes(k)]
    return bins + [
        ZERO_CREDIT,
        RING_WRAP,
        RING_NO_WRAP,
        BP_OFF,
        BP_LFSR,
        BP_EXT,
        RESET_MID,
        SPLIT,
        GOVERNOR,
        DWARM,
    ]


def illegal_bins(hyp: Hypothesis) -> list[str]:
    """A hypothesis that is not buggy (the fix) never starves the prefetcher while lines remain."""
    return [] if hyp.buggy else [ZERO_CREDIT, DWARM]


def owned_bins(hyp: Hypothesis, k_max: int, build_cores: int) -> list[str]:
    """Bins the run of a `build_cores`-core build must hit on its own."""
    if build_cores > 1:
        return list(MULTI_BINS)
    illegal = illegal_bins(hyp)
    return [b for b in all_bins(k_max) if b not in illegal] + [CORES_1]


@dataclass(frozen=True)
class RunSummary:
    """One checked run (one task, or back-to-back tasks on core 0), as coverage samples it."""

    tasks: tuple[tuple[tuple[int, int], ...], ...]  # per task: (base_line, lines) per active core
    cores: int  # active cores
    bp: str  # BP_OFF, BP_LFSR or BP_EXT
    zero_credit: bool  # any core saw zero credit with lines left
    reset: bool = False  # the run was cut short by a reset
    governed: bool = False  # the issue-rate governor ramped from below the core rate
    warmed: bool = False  # the demand path's warm-up was on


@dataclass
class Coverage:
    hyp: Hypothesis
    k_max: int
    ring_lines: int
    owned: list[str]
    hits: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)  # which build runs were merged in

    @classmethod
    def for_build(cls, hyp: Hypothesis, k_max: int, build_cores: int, ring_lines: int) -> Coverage:
        bins = all_bins(k_max) + list(MULTI_BINS)
        return cls(
            hyp,
            k_max,
            ring_lines,
            owned_bins(hyp, k_max, build_cores),
            {b: 0 for b in bins},
            [f"NumCores={build_cores}"],
        )

    @property
    def illegal(self) -> list[str]:
        return illegal_bins(self.hyp)

    def sample(self, run: RunSummary) -> list[str]:
        """Count `run`'s bins; return the illegal ones it hit."""
        hit: list[str] = []
        if run.reset:
            hit.append(RESET_MID)
        else:
            for task in run.tasks:
                lines = task[0][1]
                notch = notch_of(lines, self.ring_lines)
                if notch is not None and notch in self.hits:
                    hit.append(notch)
                wrap = any(wraps_ring(base, n, self.ring_lines) for base, n in task)
                hit.append(RING_WRAP if wrap else RING_NO_WRAP)
            hit.append(run.bp)
            hit.append(CORES_1 if run.cores == 1 else CORES_16 if run.cores == 16 else CORES_MID)
            if len(run.tasks) > 1:
                hit.append(SPLIT)
            if run.governed:
                hit.append(GOVERNOR)
        if run.zero_credit:
            hit.append(ZERO_CREDIT)
            if run.warmed and not run.reset:
                hit.append(DWARM)
        for b in hit:
            self.hits[b] = self.hits.get(b, 0) + 1
        return [b for b in hit if b in self.illegal]

    def missed(self) -> list[str]:
        return [b for b in self.owned if self.hits.get(b, 0) == 0]

    def illegal_hits(self) -> list[str]:
        return [b for b in self.illegal if self.hits.get(b, 0)]

    # ------------------------------------------------------------------ files
    def to_json(self) -> str:
        return json.dumps(
            {
                "hypothesis": self.hyp.name,
                "k_max": self.k_max,
                "ring_lines": self.ring_lines,
                "owned": self.owned,
                "hits": self.hits,
                "runs": self.runs,
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> Coverage:
        raw = json.loads(text)
        return cls(
            hypotheses.get(raw["hypothesis"]),
            raw["k_max"],
            raw["ring_lines"],
            raw["owned"],
            raw["hits"],
            raw["runs"],
        )

    @classmethod
    def merge(cls, parts: Sequence[Coverage]) -> Coverage:
        """Hit counts add; a bin is owned by the merge if any part owns it."""
        if not parts:
            raise ValueError("nothing to merge")
        builds = {(p.hyp.name, p.ring_lines) for p in parts}
        if len(builds) != 1:
            raise ValueError(f"coverage of different builds (hypothesis, ring): {sorted(builds)}")
        first = parts[0]
        out = cls(first.hyp, max(p.k_max for p in parts), first.ring_lines, [], {}, [])
        for p in parts:
            out.owned += [b for b in p.owned if b not in out.owned]
            for b, n in p.hits.items():
                out.hits[b] = out.hits.get(b, 0) + n
            out.runs += p.runs
        return out

    @classmethod
    def load_merged(cls, paths: Iterable[Path]) -> Coverage:
        return cls.merge([cls.from_json(Path(p).read_text()) for p in paths])

    # ------------------------------------------------------------------ report
    def report(self) -> str:
        owned_hit = sum(1 for b in self.owned if self.hits.get(b, 0))
        lines = [
            f"coverage {self.hyp.name} ({' + '.join(self.runs)}): "
            f"{owned_hit}/{len(self.owned)} required bins hit",
            "  notch bins, transfers per lap k and offset class x:",
            "    " + "".join(f"{name:>11}" for name, _, _ in X_CLASSES),
        ]
        for k in range(self.k_max + 1):
            row = []
            for name, _, _ in X_CLASSES:
                cell = self.hits.get(notch_bin(k, name), 0) if name in notch_classes(k) else "-"
                row.append(f"{cell:>11}")
            lines.append(f"  k={k}" + "".join(row))
        lines.append("  other bins:")
        for b in self.hits:
            if b.startswith("notch"):
                continue
            tag = "ILLEGAL" if b in self.illegal else "required" if b in self.owned else ""
            lines.append(f"    {b:<32}{self.hits[b]:>8}  {tag}")
        missed = self.missed()
        lines.append(f"  missed: {', '.join(missed) if missed else 'none'}")
        bad = self.illegal_hits()
        if self.illegal:
            lines.append(f"  illegal bins hit: {', '.join(bad) if bad else 'none'}")
        return "\n".join(lines)
