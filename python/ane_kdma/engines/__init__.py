"""The engines behind the contract (:mod:`ane_kdma.contract`), one module each.

Each module defines ``ENGINE``, an object with ``run(hypothesis, chip,
workload)`` and ``run_many(...)``; ``ane_kdma.contract.REGISTRY`` names the
module, so analyses never import one directly. ``analytic`` (closed form),
``model`` (the cycle model), ``rtl`` (:mod:`.verilator`: kdma_top in a C++
batch harness) and ``cocotb`` (the testbench, on Verilator or Icarus).
"""
