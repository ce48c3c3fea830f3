// Compile order for the kernel-DMA model (package first).
kdma_pkg.sv
kdma_credit.sv
kdma_prefetch_ring.sv
kdma_governor.sv
kdma_dwarm.sv
kdma_mem_model.sv
kdma_core.sv
kdma_top.sv
