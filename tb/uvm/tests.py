"""pyuvm tests of kdma_tb_top: the cocotb test module ``uvm.tests`` (run by tb/test_uvm.py).

``KdmaRegressionTest`` runs on a single-core build: the notch sweep, directed
transfers and the random mix (sequences.RegressionSeq). ``KdmaMultiCoreTest``
runs on the 16-core build: tasks on 1, 2..15 and 16 cores. Both print the
knobs (seed first) and the coverage, and write the coverage JSON named by
KDMA_UVM_COVERAGE for tb/test_uvm.py to merge.
"""

from __future__ import annotations

import os
import random
import time

import cocotb
import pyuvm
from pyuvm import ConfigDB, uvm_test

from ane_kdma import chip
from ane_kdma.errors import InputError

from .bfm import KdmaBfm
from .env import KdmaEnv
from .knobs import ENV_COVERAGE, ENV_SIM, Knobs
from .sequences import KdmaSeq, MultiCoreSeq, RegressionSeq, SeqContext, random_settings


def _sim_name() -> str:
    name = os.environ.get(ENV_SIM)
    if name:
        return name
    return "icarus" if "icarus" in cocotb.SIM_NAME.lower() else "verilator"


class _KdmaTest(uvm_test):
    """Knobs, BFM, settings and env; subclasses pick the build and the sequence."""

    multi = False

    def build_phase(self) -> None:
        knobs = Knobs.from_env(os.environ, _sim_name())
        bfm = KdmaBfm(cocotb.top)
        if (bfm.ncores > 1) != self.multi:
            raise InputError(f"{type(self).__name__} does not run on a {bfm.ncores}-core build")
        self.logger.info("%s on %s, %d core(s)", knobs.describe(), bfm.hyp.name, bfm.ncores)
        rng = random.Random(f"{knobs.seed}:{bfm.ncores}")  # every hypothesis: the same transfers
        settings = random_settings(rng, bfm.geometry.kmem_lines, multi=self.multi)
        self.logger.info("default settings: %s", settings)
        ConfigDB().set(None, "*", "BFM", bfm)
        ConfigDB().set(None, "*", "KNOBS", knobs)
        ConfigDB().set(None, "*", "SETTINGS", settings)
        ConfigDB().set(None, "*", "COVERAGE_JSON", os.environ.get(ENV_COVERAGE) or None)
        self.knobs = knobs
        self.ctx = SeqContext(rng, bfm.hyp, bfm.geometry, bfm.ncores, knobs, chip.load().settings)
        self.env = KdmaEnv("env", self)
        self.wall = time.time()

    def sequence(self) -> KdmaSeq:
        raise NotImplementedError

    async def run_phase(self) -> None:
        self.raise_objection()
        await self.sequence().start(self.env.agent.seqr)
        await self.env.scoreboard.wait_quiet()
        self.drop_objection()

    def check_phase(self) -> None:
        sent = self.env.agent.driver.fresh_runs
        seen = self.env.scoreboard.runs_closed
        if sent != seen:
            raise AssertionError(f"[scoreboard:counters] {sent} runs started, {seen} checked")

    def report_phase(self) -> None:
        sb = self.env.scoreboard
        self.logger.info(
            "%d runs checked (%d line by line, %d lines), %d model cycles matched, %.1f s; %s",
            sb.runs_closed,
            sb.runs_line_checked,
            sb.lines_checked,
            sb.model_cycles,
            time.time() - self.wall,
            self.knobs.describe(),
        )


@pyuvm.test()
class KdmaRegressionTest(_KdmaTest):
    """Single-core build: notch sweep + directed + random mix, KDMA_UVM_TRANSFERS transfers."""

    def sequence(self) -> KdmaSeq:
        return RegressionSeq("regression", self.ctx, count=self.knobs.transfers)


@pyuvm.test()
class KdmaMultiCoreTest(_KdmaTest):
    """16-core build: multi-core tasks, max(3, KDMA_UVM_TRANSFERS // 25) of them."""

    multi = True

    def sequence(self) -> KdmaSeq:
        return MultiCoreSeq("multicore", self.ctx, count=self.knobs.multi_transfers)
