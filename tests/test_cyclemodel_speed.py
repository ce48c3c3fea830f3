"""The cycle model at full sizes: bounded memory, consistent counters, times (as a script).

Run as a script for the table of times and peak memory (it prints, it never
asserts a time):

    .venv/bin/python tests/test_cyclemodel_speed.py

Under pytest the same big jobs run for what they check besides time: no
per-line arrays, every line issued, and sixteen identical cores that agree
with one core (one cycle more for the aggregate bucket's first refusal).
"""

from __future__ import annotations

import resource
import sys
import time
import tracemalloc
from dataclasses import replace

import pytest

from ane_kdma import chip as chips
from ane_kdma import cyclemodel as cm
from ane_kdma import hypotheses as hyps

CHIP = chips.load()
G, S = CHIP.geometry, CHIP.settings
RAMP = replace(S, ramp_start_q16=20000, ramp_step_lines=8000, ramp_inc_q16=14000)
MAX_LINES = (1 << 32) // 64 - 1  # the 32-bit size register, in lines
MB = 1 << 20


def job(lines: int, cores: int = 16, split: int = 1) -> list:
    """`lines` per core as `split` near-equal tasks; core c's data from c x lines on."""
    parts = [lines // split + (i < lines % split) for i in range(split)]
    out = []
    for c in range(cores):
        base, seq = c * lines, []
        for n in parts:
            seq.append((base & ((1 << 26) - 1), n))
            base += n
        out.append(seq)
    return out


def measure(
    h: hyps.Hypothesis, s: cm.Settings, j: list, trace: bool = True
) -> tuple[cm.ModelResult, float, float]:
    """The result, its time in s (untraced), and the peak of traced allocations in MB.

    Tracing slows Python's allocations down many times over: the script does
    not trace again a run over a second (nan; the process's peak RSS bounds it).
    """
    t = time.perf_counter()
    res = cm.run(h, G, s, j)
    seconds = time.perf_counter() - t
    if not trace:
        return res, seconds, float("nan")
    tracemalloc.start()
    cm.run(h, G, s, j)
    peak = tracemalloc.get_traced_memory()[1] / MB
    tracemalloc.stop()
    return res, seconds, peak


@pytest.mark.parametrize("name", ["literal", "signed", "fixed"])
@pytest.mark.parametrize("settings", [S, RAMP], ids=["chip", "ramp"])
def test_largest_size_on_every_core(name: str, settings: cm.Settings) -> None:
    h = hyps.get(name)
    one = cm.run(h, G, settings, job(MAX_LINES, cores=1))
    many, seconds, peak = measure(h, settings, job(MAX_LINES))
    print(f"{name}: 16 x {MAX_LINES} lines in {seconds * 1e3:.0f} ms, {peak:.1f} MB traced")
    assert peak < 200
    assert many.cycles in (one.cycles, one.cycles + 1)
    for core in many.cores:
        assert core is not None and core.grants is None and core.issued == MAX_LINES
        assert core.cycles in (one.cores[0].cycles, one.cores[0].cycles + 1)
        assert core.peak_inflight == one.cores[0].peak_inflight


def main() -> None:
    rows = [
        ("16 x 67108863 lines", S, job(MAX_LINES)),
        ("16 x 67108863 lines, ramp", RAMP, job(MAX_LINES)),
        ("16 x 8 MiB (131072 lines)", S, job(131072)),
        ("16 x 8 MiB, ramp", RAMP, job(131072)),
        ("16 x 1 MiB in 2 tasks", S, job(16384, split=2)),
        ("16 x 1 MiB in 2 tasks, ramp", RAMP, job(16384, split=2)),
    ]
    only = sys.argv[1:]
    print(f"{'job':30s} {'variant':8s} {'time':>10s} {'traced peak':>12s}  cycles")
    for label, s, j in rows:
        for h in hyps.registry():
            if only and h.name not in only:
                continue
            res, seconds, peak = measure(h, s, j, trace=False)
            if seconds < 1:
                res, seconds, peak = measure(h, s, j)
            print(f"{label:30s} {h.name:8s} {seconds * 1e3:8.1f}ms {peak:9.1f} MB  {res.cycles}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the whole process (Python, numpy and every run above): {rss:.0f} MB")


if __name__ == "__main__":
    main()
