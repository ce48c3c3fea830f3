"""The engines behind the contract (:mod:`ane_kdma.contract`), one module each.

Each module defines ``ENGINE``, an object with ``run(hypothesis, chip,
workload)`` and ``run_many(...)``; ``ane_kdma.contract.REGISTRY`` names the
module, so analyses never import one directly.
"""
