"""pyuvm environment for kdma_tb_top: constrained-random transfers, per-line scoreboard, coverage.

Layout (signal code only in ``bfm`` and ``driver``; the harness helpers they
share with the cocotb tests live in tb/kdma_tb.py):

* ``knobs``      run knobs (seed, transfer count, laps) from the environment, validated
  before any simulator starts; pure Python.
* ``covermodel`` the coverage bins, their merge across builds and the report; pure Python.
* ``items``      the task sequence item and the monitor transactions.
* ``bfm``        every signal the environment touches.
* ``driver``     the driver: task items to pin activity through the BFM.
* ``monitors``   the task, memory-request and KMem monitors (one BFM queue each).
* ``scoreboard`` the per-line, counter and cycle-model checks (Counters.mismatches).
* ``coverage``   the coverage subscriber (a missed bin fails the test).
* ``env``        the agent and the env that wires them.
* ``sequences``  notch-focused, random-size, split-pair, reset, multi-core sequences.
* ``tests``      the pyuvm tests (the cocotb test module ``uvm.tests``).

Checking depth is a cost choice. Python that wakes every clock runs at about
50k cycles/s on Verilator, against about 1M for the design alone, so only
runs of at most ``KDMA_UVM_LINE_CHECK`` lines (default 4096) are checked line
by line in Python (every read request and every KMem line, address and data,
in order). Longer runs, up to 8 MiB per core, are left to the HDL line checker
in the harness, the drained and issued counters, the sticky assertion bits and
the exact cycle comparison with ane_kdma.cyclemodel, so Python wakes a few
times per run, not once per cycle. Every run, short or long, is compared with
the cycle model.

Run: ``pytest tb/test_uvm.py`` (``SIM=icarus`` for Icarus; ``KDMA_SEED=<n>``
replays a run; ``KDMA_UVM_TRANSFERS=<n>`` sets its length; ``KDMA_FULL=1``
runs 2000 transfers per mode).
"""
