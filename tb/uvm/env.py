"""The agent (sequencer, driver, monitors) and the env (agent, scoreboard, coverage)."""

from __future__ import annotations

from pyuvm import uvm_agent, uvm_env, uvm_sequencer

from .coverage import KdmaCoverage
from .driver import KdmaDriver
from .monitors import KmemMonitor, MemRequestMonitor, TaskMonitor
from .scoreboard import KdmaScoreboard


class KdmaAgent(uvm_agent):
    def build_phase(self) -> None:
        self.seqr = uvm_sequencer("seqr", self)
        self.driver = KdmaDriver("driver", self)
        self.task_mon = TaskMonitor("task_mon", self)
        self.req_mon = MemRequestMonitor("req_mon", self)
        self.kmem_mon = KmemMonitor("kmem_mon", self)

    def connect_phase(self) -> None:
        self.driver.seq_item_port.connect(self.seqr.seq_item_export)


class KdmaEnv(uvm_env):
    def build_phase(self) -> None:
        self.agent = KdmaAgent("agent", self)
        self.scoreboard = KdmaScoreboard("scoreboard", self)
        self.coverage = KdmaCoverage("coverage", self)

    def connect_phase(self) -> None:
        self.agent.task_mon.ap.connect(self.scoreboard.task_export)
        self.agent.req_mon.ap.connect(self.scoreboard.req_export)
        self.agent.kmem_mon.ap.connect(self.scoreboard.line_export)
        self.scoreboard.ap.connect(self.coverage.analysis_export)
