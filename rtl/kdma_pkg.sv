// SPDX-License-Identifier: Apache-2.0
// Constants, credit modes and the test-data function shared by the kernel-DMA model.

`default_nettype none

package kdma_pkg;

  // One kernel-DMA line is 64 bytes; byte addresses carry 6 offset bits.
  localparam int LINE_BYTES = 64;
  localparam int LINE_SHIFT = 6;
  // Byte addresses and byte sizes are 32 bits wide, so line addresses are 26.
  localparam int ADDR_BITS = 32;
  localparam int LINE_ADDR_BITS = ADDR_BITS - LINE_SHIFT;
  // Line counts (transfer, issued, consumed) are kept in 32 bits.
  localparam int COUNT_BITS = 32;
  // Width of the suspected speculative prefetch ring: 2^14 lines = 1 MiB.
  localparam int RING_BITS = 14;
  // Most lines the prefetcher may run ahead of demand: one 16 KiB page.
  localparam int PREFETCH_MAX_LINES = 256;
  // Resident kernel memory per core: 64 KiB = 1024 lines.
  localparam int KMEM_LINES = 1024;
  // Data payload of one line.
  localparam int LINE_BITS = 8 * LINE_BYTES;
  // Fixed-point rates (lines per cycle) carry this many fraction bits.
  localparam int RATE_FRAC_BITS = 16;
  localparam int RATE_ONE = 1 << RATE_FRAC_BITS;
  // The issue-rate governor counts granted lines per step in this many bits.
  localparam int RAMP_STEP_BITS = 20;
  // The demand path's warm-up (issue 16): each core counts the starved lines
  // (credit 0) granted since its request started in this many bits ...
  localparam int DWARM_LINES_BITS = 20;
  // ... and a starved line of the warm-up pops up to 2^DWARM_EXTRA_BITS - 1
  // cycles later than the memory's latency.
  localparam int DWARM_EXTRA_BITS = 12;

  // Credit modes are coded in this many bits: room for eight readings (four are used).
  localparam int CREDIT_MODE_BITS = 3;
  // How many codes that width holds.
  localparam int CREDIT_MODES = 1 << CREDIT_MODE_BITS;

  // How the credit unit turns the task into look-ahead credit.
  typedef enum logic [CREDIT_MODE_BITS-1:0] {
    // The article's sketch, literally: 14-bit distance end_ptr - rd_ptr,
    // fixed at task start. Aliases to 0 at k * 2^14 lines; one-sided notch.
    CreditLiteral = CREDIT_MODE_BITS'(0),
    // Two-sided hypothesis: the same 14-bit distance read as a signed ring
    // offset, and its magnitude clamped. Starves both sides: a V.
    CreditSigned  = CREDIT_MODE_BITS'(1),
    // The fix: full-width lines remaining, min(transfer - issued, 256).
    CreditFixed   = CREDIT_MODE_BITS'(2),
    // Page-granular: the signed credit c covers only the first c lines of
    // each 256-line page of the task (speculative, up to window + c ahead);
    // the rest of the page goes through the demand path (window lines).
    // Starves in proportion to |x|: a V that is linear near the notch.
    CreditPaged   = CREDIT_MODE_BITS'(3)
  } credit_mode_e;

  // The readings with a speculative page path, one bit per credit_mode_e code: a line
  // with credit > 0 is speculative (its own budget), a line with none goes through the
  // demand window. Python: Hypothesis.paths == "split".
  localparam logic [CREDIT_MODES-1:0] CREDIT_SPEC_PATH = CREDIT_MODES'(1) << CreditPaged;

  // Whether the reading a build's CreditMode selects has a speculative page path (and so
  // the core keeps a speculative-line budget next to the demand window).
  function automatic logic credit_has_spec_path(input logic [CREDIT_MODE_BITS-1:0] mode);
    return CREDIT_SPEC_PATH[mode];
  endfunction

  // The test data. Word j of the line at line address `line_addr` is
  //   w = line_addr * LINE_ADDR_MUL + j * LINE_WORD_MUL (mod 2^32), then w ^ (w >> 15):
  // a pure function of the address, so every checker can recompute it.
  // Python: ane_kdma.hw.line_words.
  localparam logic [31:0] LINE_ADDR_MUL = 32'h9E37_79B1;
  localparam logic [31:0] LINE_WORD_MUL = 32'h7F4A_7C15;

  // The 16 words are written out, not looped, and stored at once: Icarus runs a function's
  // loop (and a call per word, and a store per word) as interpreted code, and this function,
  // evaluated twice a line (the memory's response and the HDL checker's expected line), was
  // half of a one-core cocotb run there. Verilator unrolls either form alike.
  function automatic logic [LINE_BITS-1:0] line_data(input logic [LINE_ADDR_BITS-1:0] line_addr);
    logic [31:0]       a;
    logic [15:0][31:0] w;
    a = 32'(line_addr) * LINE_ADDR_MUL;
    // one store of all 16 words: word 15 first, word 0 (j = 0: a itself) last
    w = {a + 32'd15 * LINE_WORD_MUL, a + 32'd14 * LINE_WORD_MUL, a + 32'd13 * LINE_WORD_MUL,
         a + 32'd12 * LINE_WORD_MUL, a + 32'd11 * LINE_WORD_MUL, a + 32'd10 * LINE_WORD_MUL,
         a + 32'd9 * LINE_WORD_MUL, a + 32'd8 * LINE_WORD_MUL, a + 32'd7 * LINE_WORD_MUL,
         a + 32'd6 * LINE_WORD_MUL, a + 32'd5 * LINE_WORD_MUL, a + 32'd4 * LINE_WORD_MUL,
         a + 32'd3 * LINE_WORD_MUL, a + 32'd2 * LINE_WORD_MUL, a + 32'd1 * LINE_WORD_MUL,
         a};
    // w ^ (w >> 15) in every word at once: the mask keeps each word's shift inside it
    return w ^ ((w >> 15) & {16{32'h0001_FFFF}});
  endfunction

endpackage

`resetall
