"""One contract, every engine: the RTL (cocotb and batch) and the cycle model give identical
counters on the real dumps.

Each published M3 dump runs as the workload it describes (all 16 cores, each
with its own base and size), whole and split in two back-to-back tasks. On
Icarus, which runs a 16-core build at a few hundred cycles a second, the
D = 2048 dump's first and last cores run as one-core workloads (their own
bases and sizes) unless KDMA_FULL=1.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import knobs, regdump, runner
from ane_kdma.contract import Task, Workload
from ane_kdma.engines.cocotb import CocotbEngine, build_params

CHIP = chips.load()
DUMPS = sorted((chips.data_dir() / "dumps").glob("m3_n4096_d*.txt"))


def _split(w: Workload) -> Workload:
    cores = []
    for seq in w.cores:
        if seq is None:
            cores.append(None)
            continue
        (t,) = seq
        half = t.lines // 2 * CHIP.line_bytes
        cores.append((Task(t.base_addr, half), Task(t.base_addr + half, t.size_bytes - half)))
    return Workload(tuple(cores))


@pytest.mark.parametrize("h", hyps.in_rtl(), ids=lambda h: h.name)
def test_rtl_and_model_agree_on_the_real_dumps(sim: str, h: hyps.Hypothesis) -> None:
    assert len(DUMPS) == 3
    small = sim == "icarus" and not knobs.full()
    loads = []
    for path in DUMPS:
        if small and not path.name.endswith("_d2048.txt"):
            continue
        whole = regdump.load_task(path, chip=CHIP).to_workload(CHIP)
        assert len(whole.enabled) == 16
        if small:  # one-core workloads: a 16-core build is what makes Icarus slow
            loads += [Workload((whole.cores[i],)) for i in (0, len(whole.cores) - 1)]
        else:
            loads += [whole, _split(whole)]
    rtl = CocotbEngine(sim).run_many(h, CHIP, loads)
    batch = runner.run_many("rtl", h, CHIP, loads, jobs=1)
    model = runner.run_many("model", h, CHIP, loads)
    for w, r, b, m in zip(loads, rtl, batch, model, strict=True):
        assert r.counters.mismatches(m.counters) == [], w.label
        assert b.counters == r.counters, w.label


#: a chip with an eighth of the m3's KMem (128 lines) and a clamp to fit it, and the same chip
#: with the m3's KMem: the counters of the two differ by what the smaller KMem holds back
SMALL_KMEM = replace(CHIP, geometry=replace(CHIP.geometry, kmem_lines=128, prefetch_max_lines=128))
SAME_CLAMP = replace(CHIP, geometry=replace(CHIP.geometry, prefetch_max_lines=128))


def test_both_rtl_engines_take_a_chip_of_another_kmem(sim: str) -> None:
    """KmemLines is a build parameter: the cocotb engine and the batch engine build the chip's
    KMem and give the cycle model's counters on it; the KMem binds (peak in flight 128, where
    the same chip with 1024 lines reaches more, and takes fewer cycles)."""
    h = CHIP.hypothesis
    assert build_params(h, SMALL_KMEM, 1)["KmemLines"] == 128
    loads = [
        Workload.from_size(CHIP.ring_lines // 2 * CHIP.line_bytes, 1),
        Workload.from_size((CHIP.ring_lines + 40) * CHIP.line_bytes, 1, split=2),
    ]
    rtl = CocotbEngine(sim).run_many(h, SMALL_KMEM, loads)
    batch = runner.run_many("rtl", h, SMALL_KMEM, loads, jobs=1)
    model = runner.run_many("model", h, SMALL_KMEM, loads)
    big = runner.run_many("model", h, SAME_CLAMP, loads)
    for w, r, b, m, ref in zip(loads, rtl, batch, model, big, strict=True):
        assert r.counters.mismatches(m.counters) == [], w.label
        assert b.counters == r.counters, w.label
        small_core, big_core = r.counters.cores[0], ref.counters.cores[0]
        assert small_core is not None and big_core is not None
        assert small_core.peak_inflight == 128 < big_core.peak_inflight, w.label
        assert r.counters.cycles > ref.counters.cycles, w.label


#: the m3 with 128-byte lines: every transfer the same bytes in half the lines
LONG_LINES = replace(CHIP, geometry=replace(CHIP.geometry, line_bytes=128))


def test_both_rtl_engines_take_a_chip_of_another_line_size(sim: str) -> None:
    """The RTL moves 64-byte lines; a chip of other lines runs on it one line for one (each
    task's first line and line count), so both RTL engines give the cycle model's counters on
    that chip, not the counters of the same bytes in 64-byte lines (a whole ring of 128-byte
    lines, 2 MiB, in the notch; half a ring and 40 lines more, in two tasks)."""
    h = CHIP.hypothesis
    lb = LONG_LINES.line_bytes
    loads = [
        Workload.from_size(CHIP.ring_lines * lb, 1, line_bytes=lb),
        Workload.from_size((CHIP.ring_lines // 2 + 40) * lb, 1, split=2, line_bytes=lb),
    ]
    rtl = CocotbEngine(sim).run_many(h, LONG_LINES, loads)
    batch = runner.run_many("rtl", h, LONG_LINES, loads, jobs=1)
    model = runner.run_many("model", h, LONG_LINES, loads)
    short = runner.run_many("model", h, CHIP, loads)
    for w, r, b, m, ref in zip(loads, rtl, batch, model, short, strict=True):
        assert r.counters.mismatches(m.counters) == [], w.label
        assert b.counters == r.counters, w.label
        assert r.counters != ref.counters, w.label  # the line size is not ignored
    core = rtl[0].counters.cores[0]
    assert core is not None and core.zero_credit_cycles > 0  # one whole ring: the notch
