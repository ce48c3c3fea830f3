"""The driver: turns task items into pin activity through the BFM."""

from __future__ import annotations

import cocotb
from pyuvm import ConfigDB, uvm_driver

from ane_kdma import cyclemodel as cm
from kdma_tb import TAKE_LIMIT_CYCLES, now_ns

from .items import KdmaTaskItem

# The engine is idle soon after a run ends (the scoreboard's watchdog bounds the run itself).
IDLE_LIMIT_CYCLES = 50_000_000


class KdmaDriver(uvm_driver):
    """Turns task items into pin activity through the BFM.

    A fresh item waits for idle and for the token buckets to refill, applies
    its settings and raises start_i until the top takes it. A chained item
    (the second half of a split pair) is offered in the same time step the
    previous one was taken, so start_i stays high across the two: the
    handshake the cycle model assumes for a task sequence.
    """

    def build_phase(self) -> None:
        self.bfm = ConfigDB().get(self, "", "BFM")
        self.default_settings: cm.Settings = ConfigDB().get(self, "", "SETTINGS")
        self.fresh_runs = 0
        self._prev: KdmaTaskItem | None = None
        self._taken_ns: int | None = None

    async def run_phase(self) -> None:
        await self.bfm.start(self.default_settings)
        while True:
            item = await self.seq_item_port.get_next_item()
            await self.drive(item)
            self.seq_item_port.item_done()

    async def drive(self, item: KdmaTaskItem) -> None:
        bfm = self.bfm
        item.check_build(bfm.ncores, bfm.hyp)
        self.logger.debug("drive %s", item)
        if item.chained:
            prev = self._prev
            if prev is None or prev.reset_at is not None or prev.lines == 0:
                raise AssertionError(f"chained {item} follows no running task")
            if (prev.backpressure, prev.ext_ready) != (item.backpressure, item.ext_ready):
                raise AssertionError("a chained task must keep the run's back-pressure")
            if self._taken_ns != now_ns():
                raise AssertionError("chained task offered after the previous one was taken")
        else:
            await bfm.wait_idle(IDLE_LIMIT_CYCLES)
            settings = item.settings or self.default_settings
            bfm.apply_settings(settings)
            await bfm.idle_cycles(bfm.settle_cycles(settings))
            self.fresh_runs += 1
        bfm.drive_task(item)
        await bfm.take_task(None if item.chained else TAKE_LIMIT_CYCLES)
        self._taken_ns = now_ns()
        self._prev = item
        bfm.drop_start()
        if item.ext_ready and not item.chained:
            cocotb.start_soon(bfm.drive_ext_ready(item.backpressure))
        if item.reset_at is not None:
            await bfm.after_cycles(item.reset_at)
            await bfm.pulse_reset()
