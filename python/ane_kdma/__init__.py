"""Executable model of the M3 ANE kernel-DMA 1 MiB prefetch erratum.

The model, parsers and planner import nothing from cocotb; the simulator
adaptors live in ``ane_kdma.sim`` and ``tb/``.
"""

from __future__ import annotations

__all__ = ["__version__"]
__version__ = "0.1.0"
