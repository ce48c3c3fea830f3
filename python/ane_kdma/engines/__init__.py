"""The engines behind the contract (:mod:`ane_kdma.contract`), one module each.

Each module defines ``ENGINE``, an object with ``run(hypothesis, chip,
workload)`` and ``run_many(...)``; ``ane_kdma.contract.REGISTRY`` names the
module, so analyses never import one directly. ``analytic`` (closed form),
``model`` (the cycle model), ``rtl`` (:mod:`.verilator`: kdma_top in a C++
batch harness) and ``cocotb`` (the testbench, on Verilator or Icarus).

What an analysis may call on an engine is exactly :class:`ane_kdma.contract.Engine`:
``name``, ``exact``, ``run`` and ``run_many`` (through ``contract.run`` /
``runner.run_many``, which add the process pool and the cluster). An engine
may have more (the analytic one's ``governor_grid``), but an analysis that needs
such a method imports the module that owns it (``calibrate`` calls
:func:`ane_kdma.analytic.governor_grid` itself), never reaches it through the
registry.
"""
