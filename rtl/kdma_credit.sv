// SPDX-License-Identifier: Apache-2.0
// Look-ahead credit of the kernel-DMA prefetcher: the erratum and its fix side by side.

`default_nettype none

module kdma_credit
#(
  // Which arithmetic to build: a buggy hypothesis or the fix.
  parameter logic [kdma_pkg::CREDIT_MODE_BITS-1:0] CreditMode = kdma_pkg::CreditFixed,
  // Width of the prefetch ring pointers in lines (14: the suspected erratum).
  parameter int RingBits = kdma_pkg::RING_BITS,
  // Clamp on the credit, in lines (one 16 KiB page).
  parameter int PrefetchMaxLines = kdma_pkg::PREFETCH_MAX_LINES
) (
  // Task, as latched by the core
  input  logic [RingBits-1:0]             start_ptr_i,       // first line address, low RingBits
  input  logic [kdma_pkg::COUNT_BITS-1:0] transfer_lines_i,  // lines in the task
  // Progress
  input  logic [kdma_pkg::COUNT_BITS-1:0] issued_lines_i,    // lines already requested
  // Credit: lines the prefetcher may run ahead of the demand window
  output logic [$clog2(PrefetchMaxLines+1)-1:0] credit_o,
  // The next line goes through the speculative path (paged mode only)
  output logic                                  spec_o
);

  import kdma_pkg::*;

  localparam int CreditBits = $clog2(PrefetchMaxLines + 1);
  localparam int PageBits = $clog2(PrefetchMaxLines);  // one page = one clamp of lines
  localparam logic [COUNT_BITS-1:0] Clamp = COUNT_BITS'(PrefetchMaxLines);

  // The build's geometry, checked at elaboration: a page is the low PageBits of
  // the issued count, and the credit (at most half a ring turn, read signed)
  // fits the ring. Icarus 11 has no elaboration-time $error: there an instance
  // of a module that does not exist stops the elaboration, and its name says why.
  if ((PrefetchMaxLines < 1) || ((PrefetchMaxLines & (PrefetchMaxLines - 1)) != 0)) begin : g_bad_clamp
`ifdef __ICARUS__
    kdma_refused_PrefetchMaxLines_is_not_a_power_of_two u_refused ();
`else
    $fatal(1, "kdma_credit: PrefetchMaxLines = %0d is not a power of two", PrefetchMaxLines);
`endif
  end
  if ((RingBits < 2) || (RingBits >= COUNT_BITS)
      || (PrefetchMaxLines > (1 << (RingBits - 1)))) begin : g_bad_ring
`ifdef __ICARUS__
    kdma_refused_RingBits_out_of_range_or_below_the_clamp u_refused ();
`else
    $fatal(1, "kdma_credit: RingBits = %0d outside 2..%0d, or half its ring below PrefetchMaxLines = %0d",
           RingBits, COUNT_BITS - 1, PrefetchMaxLines);
`endif
  end

  // The ring, as the article sketches it (names kept for waves and formal).
  logic [RingBits-1:0]   rd_ptr;      // start_line[13:0]: all the ring ever sees
  logic [RingBits-1:0]   end_ptr;     // (start_line + transfer_lines)[13:0]
  logic [RingBits-1:0]   distance;    // end_ptr - rd_ptr, wraps modulo 2^RingBits
  logic [RingBits-1:0]   magnitude;   // |distance| read as a signed ring offset
  logic [COUNT_BITS-1:0] avail;       // lines the mode believes are left
  logic [COUNT_BITS-1:0] paged_c;     // paged: the signed credit, clamped to one page
  logic [COUNT_BITS-1:0] page_line;   // paged: the next line's place in its page

  assign rd_ptr    = start_ptr_i;
  assign end_ptr   = start_ptr_i + transfer_lines_i[RingBits-1:0];
  assign distance  = end_ptr - rd_ptr;
  assign magnitude = distance[RingBits-1] ? RingBits'(-distance) : distance;
  assign paged_c   = (COUNT_BITS'(magnitude) > Clamp) ? Clamp : COUNT_BITS'(magnitude);
  assign page_line = COUNT_BITS'(issued_lines_i[PageBits-1:0]);

  // ---------------------------------------------------------------------------
  // The erratum in three lines. Literal and Signed see only the 14-bit ring
  // distance, which aliases to 0 at every multiple of 2^14 lines; Paged spends
  // the signed credit on the first lines of each page only. The fix counts
  // what is actually left, in full width.
  // ---------------------------------------------------------------------------
  always_comb begin
    avail = '0;
    unique case (CreditMode)
      CreditLiteral: avail = COUNT_BITS'(distance);
      CreditSigned:  avail = COUNT_BITS'(magnitude);
      CreditFixed:   avail = transfer_lines_i - issued_lines_i;
      CreditPaged:   avail = (page_line < paged_c) ? paged_c : '0;
      default:       avail = '0;
    endcase
  end

  assign credit_o = (avail > Clamp) ? CreditBits'(PrefetchMaxLines) : CreditBits'(avail);
  assign spec_o   = credit_has_spec_path(CreditMode) && (credit_o != '0);

endmodule

`resetall
