// SPDX-License-Identifier: Apache-2.0
// Testbench harness: kdma_top plus per-core LFSR back-pressure and an in-HDL line checker.
//
// The checker and the back-pressure live in HDL so that throughput runs keep
// Python off the per-cycle path: Python starts a task, awaits done (or the
// checker's error edge) and reads counters. The LFSR and seed derivation are
// mirrored in ane_kdma.cyclemodel, so model and RTL see the same pattern.

`default_nettype none

module kdma_tb_top
  import kdma_pkg::*;  // in the header: the settings port's type (Icarus 11 cannot take kdma_pkg::settings_t)
#(
  // Number of cores.
  parameter int NumCores = 1,
  // Credit arithmetic (kdma_pkg::credit_mode_e encoding).
  parameter logic [CREDIT_MODE_BITS-1:0] CreditMode = CreditFixed,
  // Width of the prefetch ring pointers, in lines (a chip's ring_bits).
  parameter int RingBits = RING_BITS,
  // Clamp on the look-ahead credit, in lines (a chip's prefetch_max_lines).
  parameter int PrefetchMaxLines = PREFETCH_MAX_LINES,
  // KMem of every core, in lines (a chip's kmem_lines).
  parameter int KmemLines = KMEM_LINES,
  // Half clock period in simulation time units (the clock runs in HDL so
  // that Python never sits on the per-cycle path).
  parameter int HalfPeriod = 5
) (
  output logic clk_o,
  input  logic rst_ni,

  // ---- Run-time settings (kdma_pkg::settings_t; ane_kdma.rtl_settings packs it) ----
  input  settings_t                              settings_i,

  // ---- Task ----
  input  logic                                         start_i,
  input  logic [NumCores-1:0]                          core_en_i,
  input  logic [NumCores-1:0][kdma_pkg::ADDR_BITS-1:0] base_addr_i,
  input  logic [NumCores-1:0][kdma_pkg::ADDR_BITS-1:0] size_bytes_i,
  output logic                                         ready_o,
  output logic                                         idle_o,
  output logic                                         done_o,
  output logic [CYCLE_BITS-1:0]                        cycles_o,

  // ---- Per-core status and counters (kdma_top's, passed through) ----
  output logic [NumCores-1:0]                                      core_done_o,
  output logic [NumCores-1:0]                                      unaligned_o,
  output logic [NumCores-1:0]                                      partial_o,
  output logic [NumCores-1:0]                                      wrap_o,
  output logic [NumCores-1:0][CYCLE_BITS-1:0]                      core_cycles_o,
  output logic [NumCores-1:0][CYCLE_BITS-1:0]                      zero_credit_cycles_o,
  output logic [NumCores-1:0][$clog2(KmemLines+1)-1:0]             peak_inflight_o,
  output logic [NumCores-1:0][kdma_pkg::COUNT_BITS-1:0]            issued_lines_o,
  output logic [NumCores-1:0][kdma_pkg::COUNT_BITS-1:0]            consumed_lines_o,

  // ---- Consumer back-pressure ----
  input  logic [15:0]         bp_seed_i,       // LFSR seed, loaded when a task starts from idle
  input  logic [7:0]          bp_threshold_i,  // ready when lfsr[7:0] >= threshold; 0 = always
  input  logic                ext_ready_en_i,  // 1: ready comes from ext_ready_i instead
  input  logic [NumCores-1:0] ext_ready_i,

  // ---- Checker: first mismatch since start_i ----
  output logic                      chk_err_o,
  output logic [7:0]                chk_err_core_o,
  output logic [31:0]               chk_err_cycle_o,
  output logic [31:0]               chk_exp_addr_o,   // line addresses
  output logic [31:0]               chk_act_addr_o,
  output logic [7:0]                chk_word_o,       // first differing word (16 = address only)
  output logic [31:0]               chk_exp_word_o,
  output logic [31:0]               chk_act_word_o,
  output logic [NumCores-1:0][31:0] chk_count_o       // lines drained per core since idle
);

  localparam logic [15:0] LfsrTaps = 16'hB400;

  logic clk_i;
  initial clk_i = 1'b0;
  always #(HalfPeriod) clk_i = ~clk_i;
  assign clk_o = clk_i;

  logic [NumCores-1:0]                     kmem_valid, kmem_ready;
  logic [NumCores-1:0][LINE_ADDR_BITS-1:0] kmem_addr;
  logic [NumCores-1:0][LINE_BITS-1:0]      unused_kmem_data;  // each checker reads its own core's line
  logic [31:0]                             cyc_q;
  logic                                    accept, fresh;

  assign accept = start_i && ready_o;    // a task is taken this cycle
  assign fresh  = accept && idle_o;      // ... and it starts from idle

  kdma_top #(
    .NumCores        (NumCores),
    .CreditMode      (CreditMode),
    .RingBits        (RingBits),
    .PrefetchMaxLines(PrefetchMaxLines),
    .KmemLines       (KmemLines)
  ) u_top (
    .clk_i,
    .rst_ni,
    .settings_i,
    .start_i,
    .core_en_i,
    .base_addr_i,
    .size_bytes_i,
    .ready_o,
    .idle_o,
    .done_o,
    .cycles_o,
    .kmem_valid_o        (kmem_valid),
    .kmem_ready_i        (kmem_ready),
    .kmem_addr_o         (kmem_addr),
    .kmem_data_o         (unused_kmem_data),
    .core_done_o,
    .unaligned_o,
    .partial_o,
    .wrap_o,
    .core_cycles_o,
    .zero_credit_cycles_o,
    .peak_inflight_o,
    .issued_lines_o,
    .consumed_lines_o
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni)     cyc_q <= '0;
    else if (fresh)  cyc_q <= 32'd1;  // cycle numbering as ane_kdma.cyclemodel
    else             cyc_q <= cyc_q + 1'b1;
  end

  // ---------------------------------------------------------------------------
  // Per core: LFSR ready pattern and expected-line checker
  // ---------------------------------------------------------------------------
  logic [NumCores-1:0]       mism;
  logic [NumCores-1:0][31:0] exp_addr, act_addr, exp_word, act_word;
  logic [NumCores-1:0][7:0]  word_idx;

  for (genvar c = 0; c < NumCores; c++) begin : g_chk
    logic [15:0]               lfsr_q;
    logic [15:0]               seed;
    logic [LINE_ADDR_BITS-1:0] exp_q, nxt_base_q;   // expected line; queued task's base
    logic [31:0]               left_q, nxt_lines_q; // lines left in the draining task; queued
    logic                      nxt_valid_q;
    logic [31:0]               count_q;
    logic [31:0]               lines;
    logic [LINE_BITS-1:0]      want;
    logic                      drain, take, stray;

    assign seed = ((bp_seed_i ^ 16'(c * 32'h9E37)) == 16'd0) ? 16'd1 : (bp_seed_i ^ 16'(c * 32'h9E37));
    assign kmem_ready[c] = ext_ready_en_i ? ext_ready_i[c]
                                          : (bp_threshold_i == 8'd0) || (lfsr_q[7:0] >= bp_threshold_i);
    assign drain = kmem_valid[c] && kmem_ready[c];
    assign want  = line_data(exp_q);
    assign lines = 32'(size_bytes_i[c][ADDR_BITS-1:LINE_SHIFT]) + 32'(|size_bytes_i[c][LINE_SHIFT-1:0]);
    assign take  = accept && core_en_i[c];
    assign stray = drain && (left_q == '0);         // a line no task asked for

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        lfsr_q      <= 16'd1;
        exp_q       <= '0;
        left_q      <= '0;
        nxt_base_q  <= '0;
        nxt_lines_q <= '0;
        nxt_valid_q <= 1'b0;
        count_q     <= '0;
      end else begin
        lfsr_q <= {1'b0, lfsr_q[15:1]} ^ (lfsr_q[0] ? LfsrTaps : 16'd0);
        if (fresh) begin
          lfsr_q  <= seed;
          count_q <= '0;
        end else if (drain) begin
          count_q <= count_q + 1'b1;
        end
        if (drain) begin
          exp_q  <= exp_q + 1'b1;
          left_q <= left_q - 1'b1;
          if (left_q == 32'd1 && nxt_valid_q) begin
            exp_q       <= nxt_base_q;
            left_q      <= nxt_lines_q;
            nxt_valid_q <= 1'b0;
          end
        end
        if (take) begin
          if (left_q == '0 || (left_q == 32'd1 && drain)) begin
            exp_q  <= base_addr_i[c][ADDR_BITS-1:LINE_SHIFT];
            left_q <= lines;
          end else begin
            nxt_base_q  <= base_addr_i[c][ADDR_BITS-1:LINE_SHIFT];
            nxt_lines_q <= lines;
            nxt_valid_q <= 1'b1;
          end
        end
      end
    end

    // The comparison works on this core's own copies: an always_comb that
    // selected kmem_data[c] would wake on every core's lines under Icarus.
    logic [LINE_ADDR_BITS-1:0] got_addr;
    logic [LINE_BITS-1:0]      got_data;
    logic                      bad;
    logic [7:0]                bad_word;
    logic [31:0]               bad_exp, bad_act;

    assign got_addr = kmem_addr[c];
    // this core's own line, not its slice of kdma_top's packed kmem_data_o: in an
    // event-driven simulator (Icarus) any core's new line in that vector woke all
    // 16 checkers (a 16-core build streaming ran 1.7x slower per cycle)
    assign got_data = u_top.g_core[c].u_core.kmem_data_o;

    always_comb begin
      bad      = 1'b0;
      bad_word = 8'd16;
      bad_exp  = '0;
      bad_act  = '0;
      if (drain) begin
        if (got_addr != exp_q || stray) bad = 1'b1;
        // one 512-bit compare first: the word search runs only on a mismatch
        if (got_data != want) for (int j = 15; j >= 0; j--) begin
          if (got_data[32*j+:32] != want[32*j+:32]) begin
            bad      = 1'b1;
            bad_word = 8'(j);
            bad_exp  = want[32*j+:32];
            bad_act  = got_data[32*j+:32];
          end
        end
      end
    end

    assign mism[c]     = bad;
    assign exp_addr[c] = 32'(exp_q);
    assign act_addr[c] = 32'(got_addr);
    assign word_idx[c] = bad_word;
    assign exp_word[c] = bad_exp;
    assign act_word[c] = bad_act;
    assign chk_count_o[c] = count_q;
  end

  // First mismatch wins; the lowest core breaks a tie within a cycle.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      chk_err_o       <= 1'b0;
      chk_err_core_o  <= '0;
      chk_err_cycle_o <= '0;
      chk_exp_addr_o  <= '0;
      chk_act_addr_o  <= '0;
      chk_word_o      <= '0;
      chk_exp_word_o  <= '0;
      chk_act_word_o  <= '0;
    end else if (fresh) begin
      chk_err_o <= 1'b0;
    end else if (!chk_err_o && (mism != '0)) begin
      chk_err_o <= 1'b1;
      for (int c = NumCores - 1; c >= 0; c--) begin
        if (mism[c]) begin
          chk_err_core_o  <= 8'(c);
          chk_err_cycle_o <= cyc_q;
          chk_exp_addr_o  <= exp_addr[c];
          chk_act_addr_o  <= act_addr[c];
          chk_word_o      <= word_idx[c];
          chk_exp_word_o  <= exp_word[c];
          chk_act_word_o  <= act_word[c];
        end
      end
    end
  end

endmodule

`resetall
