// SPDX-License-Identifier: Apache-2.0
// 1..16 kernel-DMA cores sharing one behavioural DRAM; one task starts every enabled core.

`default_nettype none

module kdma_top
  import kdma_pkg::*;  // in the header: the settings port's type (Icarus 11 cannot take kdma_pkg::settings_t)
#(
  // Number of cores (the M3 ANE has 16).
  parameter int NumCores = 1,
  // Credit arithmetic of every core: a buggy hypothesis or the fix.
  parameter logic [CREDIT_MODE_BITS-1:0] CreditMode = CreditFixed,
  // Width of the prefetch ring pointers, in lines.
  parameter int RingBits = RING_BITS,
  // Clamp on the look-ahead credit, in lines (a power of two).
  parameter int PrefetchMaxLines = PREFETCH_MAX_LINES,
  // KMem of every core, in lines (a power of two, 2..MAX_KMEM_LINES).
  parameter int KmemLines = KMEM_LINES,
  // 1: the line payload (addresses and test data through memory and KMem),
  // as the testbenches check it. 0: counters only, for timing runs (the batch
  // engine); every counter and the occupancy as with 1; kmem_addr_o and
  // kmem_data_o read 0.
  parameter bit Payload = 1'b1
) (
  input  logic clk_i,
  input  logic rst_ni,

  // ---- Run-time settings (from the profile; hold steady during a task) ----
  // The aggregate ceiling agg_rate_q16 is 102.4 GB/s (LPDDR5-6400 x128) at the
  // profile's ns_per_cycle: ane_kdma.profile.Profile.agg_rate_q16 computes it.
  input  settings_t                               settings_i,

  // ---- Task: one (base, size) per core; disabled cores sit out ----
  // A task may be taken while the previous one drains (same cores enabled,
  // each core fully issued): split tasks then stream back to back.
  input  logic                                    start_i,
  input  logic [NumCores-1:0]                     core_en_i,
  input  logic [NumCores-1:0][ADDR_BITS-1:0]      base_addr_i,
  input  logic [NumCores-1:0][ADDR_BITS-1:0]      size_bytes_i,
  output logic                                    ready_o,      // start_i would be taken now
  output logic                                    idle_o,       // no task in flight
  output logic                                    done_o,       // pulse per task, in order
  output logic [CYCLE_BITS-1:0]                   cycles_o,     // cycles busy since leaving idle

  // ---- KMem drain ports ----
  output logic [NumCores-1:0]                     kmem_valid_o,
  input  logic [NumCores-1:0]                     kmem_ready_i,
  output logic [NumCores-1:0][LINE_ADDR_BITS-1:0] kmem_addr_o,
  output logic [NumCores-1:0][LINE_BITS-1:0]      kmem_data_o,

  // ---- Per-core status and counters ----
  output logic [NumCores-1:0]                     core_done_o,
  output logic [NumCores-1:0]                     unaligned_o,
  output logic [NumCores-1:0]                     partial_o,
  output logic [NumCores-1:0]                     wrap_o,
  output logic [NumCores-1:0][CYCLE_BITS-1:0]     core_cycles_o,
  output logic [NumCores-1:0][CYCLE_BITS-1:0]     zero_credit_cycles_o,
  output logic [NumCores-1:0][$clog2(KmemLines+1)-1:0] peak_inflight_o,
  output logic [NumCores-1:0][COUNT_BITS-1:0]     issued_lines_o,
  output logic [NumCores-1:0][COUNT_BITS-1:0]     consumed_lines_o
);

  // The package's widths agree with its limits (checked once, here, at elaboration;
  // Icarus 11: an instance of a module that does not exist, as in kdma_credit).
  if (($clog2(MAX_LATENCY_CYCLES + 1) != LATENCY_BITS) || ($clog2(MAX_KMEM_LINES + 1) != WINDOW_BITS)
      || (DWARM_EXTRA_BITS > LATENCY_BITS) || ((1 << LINE_SHIFT) != LINE_BYTES)
      || (AGG_RATE_MAX_Q16 + RATE_ONE >= (1 << AGG_RATE_BITS))  // a full bank + the ceiling fits
      || (NumCores < 1)) begin : g_bad_widths
`ifdef __ICARUS__
    kdma_refused_kdma_pkg_widths_disagree_or_no_cores u_refused ();
`else
    $fatal(1, "kdma_top: kdma_pkg's widths disagree with its limits, or NumCores = %0d < 1", NumCores);
`endif
  end


  logic [NumCores-1:0]                     req_valid, req_ready, resp_valid, core_idle, core_ready;
  logic [NumCores-1:0][LINE_ADDR_BITS-1:0] req_addr, resp_addr;
  logic [NumCores-1:0][DWARM_EXTRA_BITS-1:0] req_extra;  // each read's extra latency
  logic [NumCores-1:0][LINE_BITS-1:0]      resp_data;
  // Each core's KMem head line (Payload), gathered in a variable before kmem_data_o: a
  // core's port on a slice of the packed output made Icarus resolve the whole output
  // bit by bit on every core's new line (as in kdma_mem_model's resp_data).
  logic [NumCores-1:0][LINE_BITS-1:0]      kmem_head;
  logic [NumCores-1:0][RATE_BITS-1:0]      core_rate;   // each core's governed refill
  logic [NumCores-1:0]                     prev_q, cur_q;       // cores still on each task
  logic [NumCores-1:0]                     prev_d, cur_d;
  logic [CYCLE_BITS-1:0]                   cycles_q;
  logic                                    done_q;
  logic                                    idle, ready, accept;

  assign idle   = (prev_q == '0) && (cur_q == '0) && (&core_idle);
  assign ready  = idle || ((prev_d == '0) && (core_en_i == cur_q) && (&(core_ready | ~core_en_i)));
  assign accept = start_i && ready;

  for (genvar c = 0; c < NumCores; c++) begin : g_core
    logic [LINE_BITS-1:0] core_kmem_data;

    always_comb kmem_head[c] = core_kmem_data;

    kdma_core #(
      .CreditMode      (CreditMode),
      .RingBits        (RingBits),
      .PrefetchMaxLines(PrefetchMaxLines),
      .KmemLines       (KmemLines),
      .Payload         (Payload)
    ) u_core (
      .clk_i,
      .rst_ni,
      .settings_i,
      .rate_o              (core_rate[c]),
      .start_i             (accept && core_en_i[c]),
      .base_addr_i         (base_addr_i[c]),
      .size_bytes_i        (size_bytes_i[c]),
      .ready_o             (core_ready[c]),
      .idle_o              (core_idle[c]),
      .done_o              (core_done_o[c]),
      .unaligned_o         (unaligned_o[c]),
      .partial_o           (partial_o[c]),
      .wrap_o              (wrap_o[c]),
      .req_valid_o         (req_valid[c]),
      .req_ready_i         (req_ready[c]),
      .req_addr_o          (req_addr[c]),
      .req_extra_o         (req_extra[c]),
      .resp_valid_i        (resp_valid[c]),
      .resp_addr_i         (resp_addr[c]),
      .resp_data_i         (resp_data[c]),
      .kmem_valid_o        (kmem_valid_o[c]),
      .kmem_ready_i        (kmem_ready_i[c]),
      .kmem_addr_o         (kmem_addr_o[c]),
      .kmem_data_o         (core_kmem_data),
      .cycles_o            (core_cycles_o[c]),
      .zero_credit_cycles_o(zero_credit_cycles_o[c]),
      .peak_inflight_o     (peak_inflight_o[c]),
      .issued_lines_o      (issued_lines_o[c]),
      .consumed_lines_o    (consumed_lines_o[c])
    );
  end

  kdma_mem_model #(
    .NumCores        (NumCores),
    .DepthLines      (KmemLines),
    .Payload         (Payload)
  ) u_mem (
    .clk_i,
    .rst_ni,
    .latency_i   (settings_i.latency),
    .core_rate_i (core_rate),
    .agg_rate_i  (settings_i.agg_rate_q16),
    .arb_restart_i(accept),
    .req_valid_i (req_valid),
    .req_ready_o (req_ready),
    .req_addr_i  (req_addr),
    .req_extra_i (req_extra),
    .resp_valid_o(resp_valid),
    .resp_addr_o (resp_addr),
    .resp_data_o (resp_data)
  );

  // Task completion. A core finishes its older task first, so a done pulse
  // clears the core's bit in prev_q if set, else in cur_q.
  assign prev_d = prev_q & ~core_done_o;
  assign cur_d  = cur_q & ~(core_done_o & ~prev_q);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      prev_q   <= '0;
      cur_q    <= '0;
      cycles_q <= '0;
      done_q   <= 1'b0;
    end else begin
      // prev finishes strictly before cur on every core, so one pulse per cycle suffices
      done_q <= ((prev_q != '0) && (prev_d == '0)) || ((cur_q != '0) && (cur_d == '0));
      if (accept) begin
        prev_q <= cur_d;
        cur_q  <= core_en_i;
        if (core_en_i == '0) done_q <= 1'b1;
      end else begin
        prev_q <= prev_d;
        cur_q  <= cur_d;
      end
      if (accept && idle)   cycles_q <= '0;
      else if (!idle)       cycles_q <= cycles_q + 1'b1;
    end
  end

  assign kmem_data_o = kmem_head;
  assign ready_o  = ready;
  assign idle_o   = idle;
  assign done_o   = done_q;
  assign cycles_o = cycles_q;

endmodule

`resetall
