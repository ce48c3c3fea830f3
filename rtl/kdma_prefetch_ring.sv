// SPDX-License-Identifier: Apache-2.0
// Issue engine of one kernel DMA: in-order line reads gated by demand window + credit and KMem space.

`default_nettype none

module kdma_prefetch_ring
#(
  // Credit arithmetic: a buggy hypothesis or the fix (see kdma_credit).
  parameter logic [kdma_pkg::CREDIT_MODE_BITS-1:0] CreditMode = kdma_pkg::CreditFixed,
  // Width of the prefetch ring pointers, in lines.
  parameter int RingBits = kdma_pkg::RING_BITS,
  // Clamp on the look-ahead credit, in lines.
  parameter int PrefetchMaxLines = kdma_pkg::PREFETCH_MAX_LINES,
  // KMem capacity, in lines (64 KiB).
  parameter int KmemLines = kdma_pkg::KMEM_LINES
) (
  input  logic clk_i,
  input  logic rst_ni,

  // ---- Run-time setting ----
  // Non-speculative demand window, in lines (1..KmemLines; window + credit is
  // capped at KmemLines). With 0, a task whose credit is 0 can never issue
  // (formal/ *_trace hang covers show it).
  input  logic [kdma_pkg::WINDOW_BITS-1:0] window_i,

  // ---- Task (held by the core for the whole transfer) ----
  input  logic                      busy_i,            // a task is running
  input  logic [kdma_pkg::LINE_ADDR_BITS-1:0] base_line_i,       // first line address
  input  logic [kdma_pkg::COUNT_BITS-1:0]     transfer_lines_i,  // lines in the task
  input  logic                      clear_i,           // a new task starts: zero the counts

  // ---- Occupancy: lines requested and not yet drained out of KMem (all tasks) ----
  input  logic [$clog2(KmemLines+1)-1:0] outstanding_i,
  input  logic [$clog2(KmemLines+1)-1:0] spec_outstanding_i, // of them, speculative

  // ---- Read requests to memory ----
  output logic                      req_valid_o,
  input  logic                      req_ready_i,
  output logic [kdma_pkg::LINE_ADDR_BITS-1:0] req_addr_o,
  output logic                      req_spec_o,        // the request is speculative

  // ---- State, for counters, waves and assertions ----
  output logic [kdma_pkg::COUNT_BITS-1:0]     issued_lines_o,
  output logic [$clog2(PrefetchMaxLines+1)-1:0] credit_o,
  output logic [$clog2(KmemLines+1)-1:0] cap_o         // window + credit, capped by KMem
);

  import kdma_pkg::*;

  localparam int CapBits = $clog2(KmemLines + 1);
  // window + credit, without overflow (the window setting is wider than a small KMem's count)
  localparam int SumBits = ((WINDOW_BITS > CapBits) ? WINDOW_BITS : CapBits) + 1;

  logic [COUNT_BITS-1:0] issued_q;
  logic [SumBits-1:0]    window_plus_credit;
  logic [CapBits-1:0]    demand_outstanding;  // lines on the demand path, not yet drained
  logic                  spec;                // the next line is speculative
  logic                  room;                // its path has room for it

  kdma_credit #(
    .CreditMode      (CreditMode),
    .RingBits        (RingBits),
    .PrefetchMaxLines(PrefetchMaxLines)
  ) u_credit (
    .start_ptr_i     (RingBits'(base_line_i)),  // the low RingBits (zero-extended above 26)
    .transfer_lines_i(transfer_lines_i),
    .issued_lines_i  (issued_q),
    .credit_o        (credit_o),
    .spec_o          (spec)
  );

  assign window_plus_credit = SumBits'(window_i) + SumBits'(credit_o);
  assign cap_o = (window_plus_credit > SumBits'(KmemLines)) ? CapBits'(KmemLines)
                                                            : CapBits'(window_plus_credit);

  // A speculative line may run window + credit ahead of everything in the core;
  // a demand line waits only for the demand lines (the window), and in the
  // modes without a speculative path every line is a demand line counted
  // against window + credit, as before. Every line must also fit KMem.
  assign demand_outstanding = outstanding_i - spec_outstanding_i;
  assign room = spec ? (outstanding_i < cap_o)
                     : (demand_outstanding < cap_o) && (outstanding_i < CapBits'(KmemLines));
  assign req_valid_o    = busy_i && (issued_q != transfer_lines_i) && room;
  assign req_spec_o     = spec;
  assign req_addr_o     = base_line_i + issued_q[LINE_ADDR_BITS-1:0];  // wraps at 2^32 bytes
  assign issued_lines_o = issued_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      issued_q <= '0;
    end else if (clear_i) begin
      issued_q <= '0;
    end else if (req_valid_o && req_ready_i) begin
      issued_q <= issued_q + 1'b1;
    end
  end

endmodule

`resetall
