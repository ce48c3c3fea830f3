"""Monitors: each forwards one BFM queue to its analysis port."""

from __future__ import annotations

from pyuvm import ConfigDB, uvm_analysis_port, uvm_monitor


class _QueueMonitor(uvm_monitor):
    queue = ""

    def build_phase(self) -> None:
        self.ap = uvm_analysis_port("ap", self)
        self.bfm = ConfigDB().get(self, "", "BFM")

    async def run_phase(self) -> None:
        q = getattr(self.bfm, self.queue)
        while True:
            self.ap.write(await q.get())


class TaskMonitor(_QueueMonitor):
    """Tasks taken, runs ended, resets, HDL checker errors."""

    queue = "task_q"


class MemRequestMonitor(_QueueMonitor):
    """Read requests granted by the memory, per port (line-checked runs)."""

    queue = "req_q"


class KmemMonitor(_QueueMonitor):
    """Lines drained from KMem with their data, per core (line-checked runs)."""

    queue = "line_q"
