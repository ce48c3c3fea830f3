"""The cocotb engine: kdma_tb_top under cocotb (SIM: Verilator by default, or Icarus), one
simulator run per batch. ``--engine cocotb``; ``--engine rtl`` is the faster batch harness
(:mod:`ane_kdma.engines.verilator`), which gives the same counters.

The job crosses the simulator boundary as a JSON file (KDMA_JOB) and the
counters come back as another (KDMA_RESULTS): the one side channel the
contract keeps, because cocotb runs the tests in the simulator's process.
Every RTL run is also checked against the cycle model inside the testbench.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from ane_kdma import progress
from ane_kdma.chip import Chip
from ane_kdma.contract import CoreCounters, Counters, Result, Task, Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, LINE_ADDR_BITS, LINE_BYTES
from ane_kdma.hypotheses import Hypothesis


def check_chip(chip: Chip) -> None:
    """The geometry is a build parameter, and the line size is mapped (:func:`rtl_workload`);
    the one geometry the chip loader takes and the RTL cannot be is a one-line prefetch clamp
    (kdma_credit's page index would be 0 bits wide: Icarus refuses the part-select)."""
    if chip.geometry.prefetch_max_lines < 2:
        raise InputError(
            f"chip {chip.name}: the RTL is built for a prefetch clamp of at least 2 lines "
            f"(chip has {chip.geometry.prefetch_max_lines}); use --engine model"
        )


def rtl_workload(chip: Chip, workload: Workload) -> Workload:
    """`workload` in the RTL's 64-byte lines, one line for one: each task's first line and
    line count in the chip's lines become the same first line (mod the RTL's 2^26-line space)
    and count of 64-byte lines. The counters count lines and cycles, so they are the chip's;
    only the address-derived flags and the test data differ, and the engines read neither."""
    lb = chip.geometry.line_bytes
    if lb == LINE_BYTES:
        return workload

    def task(t: Task) -> Task:
        lines = t.lines_of(lb)
        if lines * LINE_BYTES >= 1 << ADDR_BITS:
            raise InputError(
                f"a task of {lines} {lb}-byte lines is more than the RTL's 32-bit byte count "
                f"holds in {LINE_BYTES}-byte lines; use --engine model"
            )
        return Task((t.base_line_of(lb) % (1 << LINE_ADDR_BITS)) * LINE_BYTES, lines * LINE_BYTES)

    return Workload(
        tuple(None if seq is None else tuple(task(t) for t in seq) for seq in workload.cores),
        workload.label,
    )


def job_document(chip: Chip, workloads: Sequence[Workload]) -> dict[str, object]:
    return {
        "settings": asdict(chip.settings),
        "workloads": [
            [None if seq is None else [[t.base_addr, t.size_bytes] for t in seq] for seq in w.cores]
            for w in workloads
        ],
    }


PKG_RING_BITS = 14  # kdma_pkg::RING_BITS, PREFETCH_MAX_LINES and KMEM_LINES: the builds' defaults
PKG_PREFETCH_MAX_LINES = 256
PKG_KMEM_LINES = 1024


def build_params(hypothesis: Hypothesis, chip: Chip, cores: int) -> dict[str, int]:
    """Build parameters; the ring width, clamp and KMem only where the chip differs from the
    package (the m3's builds run the top's defaults)."""
    if hypothesis.encoding is None:
        raise InputError(f"hypothesis {hypothesis.name} has no RTL encoding")
    params = {"CreditMode": hypothesis.encoding, "NumCores": cores}
    if chip.geometry.ring_bits != PKG_RING_BITS:
        params["RingBits"] = chip.geometry.ring_bits
    if chip.geometry.prefetch_max_lines != PKG_PREFETCH_MAX_LINES:
        params["PrefetchMaxLines"] = chip.geometry.prefetch_max_lines
    if chip.geometry.kmem_lines != PKG_KMEM_LINES:
        params["KmemLines"] = chip.geometry.kmem_lines
    return params


BUILD_ESTIMATE = "about 60 s on 2 CPUs, once"  # the first --engine cocotb build, measured


class CocotbEngine:
    name = "cocotb"
    exact = True

    def __init__(self, sim: str | None = None) -> None:
        self.sim = sim

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
        return self.run_many(hypothesis, chip, [workload])[0]

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]:
        if hypothesis.encoding is None:
            raise InputError(f"hypothesis {hypothesis.name} has no RTL encoding")
        check_chip(chip)
        from ane_kdma.sim import check_simulator, run  # only this engine needs a simulator

        sim = self.sim or os.environ.get("SIM", "verilator")
        check_simulator(sim)
        out: dict[int, Result] = {}
        by_cores: dict[int, list[int]] = {}
        for i, w in enumerate(workloads):
            by_cores.setdefault(len(w.cores), []).append(i)
        for cores, idx in by_cores.items():
            batch = [workloads[i] for i in idx]
            progress.note(
                f"running {len(batch)} workload{'s' * (len(batch) != 1)} of {cores} cores "
                "on the RTL under cocotb "
                f"({sim}, {hypothesis.name}); a first run builds the testbench ({BUILD_ESTIMATE})"
            )
            with tempfile.TemporaryDirectory(prefix="ane-kdma-") as tmp:
                job, res = Path(tmp) / "job.json", Path(tmp) / "out.json"
                job.write_text(
                    json.dumps(job_document(chip, [rtl_workload(chip, w) for w in batch]))
                )
                run(
                    sim,
                    "kdma_tb_top",
                    build_params(hypothesis, chip, cores),
                    "cocotb_kdma",
                    "batch_run",
                    extra_env={"KDMA_JOB": str(job), "KDMA_RESULTS": str(res)},
                    test_dir=Path(tmp),
                )
                got = json.loads(res.read_text())["counters"]
            for i, w, doc in zip(idx, batch, got, strict=True):
                counters = Counters(
                    int(doc["cycles"]),
                    tuple(None if c is None else CoreCounters(*map(int, c)) for c in doc["cores"]),
                )
                out[i] = Result.make(self.name, hypothesis, chip, w, counters, True)
        return [out[i] for i in range(len(workloads))]


ENGINE = CocotbEngine()
