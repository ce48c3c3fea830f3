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
  // Cycle counters (busy cycles, zero-credit cycles) are kept in 32 bits.
  localparam int CYCLE_BITS = 32;
  // Width of the suspected speculative prefetch ring: 2^14 lines = 1 MiB.
  localparam int RING_BITS = 14;
  // Most lines the prefetcher may run ahead of demand: one 16 KiB page.
  localparam int PREFETCH_MAX_LINES = 256;
  // Resident kernel memory per core: 64 KiB = 1024 lines (kdma_top's default KmemLines).
  localparam int KMEM_LINES = 1024;
  // A build's KMem (kdma_top's KmemLines) is a power of two up to 2^KMEM_MAX_BITS lines,
  // and the demand window setting is wide enough for the largest: 0..4096 lines.
  localparam int KMEM_MAX_BITS = 12;
  localparam int MAX_KMEM_LINES = 1 << KMEM_MAX_BITS;
  localparam int WINDOW_BITS = KMEM_MAX_BITS + 1;
  // The memory latency setting: 1..MAX_LATENCY_CYCLES cycles.
  localparam int LATENCY_BITS = 12;
  localparam int MAX_LATENCY_CYCLES = (1 << LATENCY_BITS) - 1;
  // Data payload of one line.
  localparam int LINE_BITS = 8 * LINE_BYTES;
  // Fixed-point rates (lines per cycle) carry this many fraction bits.
  localparam int RATE_FRAC_BITS = 16;
  localparam int RATE_ONE = 1 << RATE_FRAC_BITS;
  // A per-core rate (and the governor's start and step) is at most one line a cycle.
  localparam int RATE_BITS = RATE_FRAC_BITS + 1;
  // The aggregate DRAM ceiling: the memory's bucket adds it to a bank of at most one line
  // in this many bits, so it is at most AGG_RATE_MAX_Q16 (about 63 lines a cycle).
  localparam int AGG_RATE_BITS = RATE_FRAC_BITS + 6;
  localparam int AGG_RATE_MAX_Q16 = (1 << AGG_RATE_BITS) - 1 - RATE_ONE;
  // The issue-rate governor counts granted lines per step in this many bits.
  localparam int RAMP_STEP_BITS = 20;
  // The demand path's warm-up (issue 16): each core counts the starved lines
  // (credit 0) granted since its request started in this many bits ...
  localparam int DWARM_LINES_BITS = 20;
  // ... and a starved line of the warm-up pops up to 2^DWARM_EXTRA_BITS - 1
  // cycles later than the memory's latency.
  localparam int DWARM_EXTRA_BITS = 12;

  // The run-time settings, one packed struct from the host to every module that reads one
  // (the first member at the most significant bits). Python packs it from
  // ane_kdma.mechanisms.rtl_fields(), which names the members in this order with these
  // widths (tests/test_pkg_parity.py holds the two equal). They hold steady during a task.
  typedef struct packed {
    logic [LATENCY_BITS-1:0]     latency;             // memory latency, cycles
    logic [WINDOW_BITS-1:0]      window;              // demand window, lines (<= KMem)
    logic [RATE_BITS-1:0]        core_rate_q16;       // per-core rate, lines/cycle
    logic [AGG_RATE_BITS-1:0]    agg_rate_q16;        // aggregate DRAM ceiling, lines/cycle
    logic [RATE_BITS-1:0]        ramp_start_q16;      // issue-rate governor: start rate (0: off)
    logic [RAMP_STEP_BITS-1:0]   ramp_step_lines;     //   granted lines per step
    logic [RATE_BITS-1:0]        ramp_inc_q16;        //   rate added per step
    logic [DWARM_LINES_BITS-1:0] dwarm_lines;         // demand warm-up: starved lines (0: off)
    logic [DWARM_EXTRA_BITS-1:0] dwarm_extra_cycles;  //   their extra latency, cycles
  } settings_t;

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

  // The 16 words are written out, not looped: Icarus runs a function's loop (and a call and
  // a store per word) as interpreted code, and this function, evaluated twice a line (the
  // memory's response and the HDL checker's expected line), was half of a one-core cocotb run
  // there. Each word is a 32-bit variable with its own shift-xor: a shift of the whole
  // 512-bit line (one form tried) costs Verilator a multi-word shift per call (+17% per cycle
  // in the 16-core build), and part-selects of a packed [15:0][31:0] line inside the
  // function made Icarus' 16-core runs many times slower.
  function automatic logic [LINE_BITS-1:0] line_data(input logic [LINE_ADDR_BITS-1:0] line_addr);
    logic [31:0] a, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15;
    a   = 32'(line_addr) * LINE_ADDR_MUL;
    w0  = a;
    w1  = a + 32'd1  * LINE_WORD_MUL;
    w2  = a + 32'd2  * LINE_WORD_MUL;
    w3  = a + 32'd3  * LINE_WORD_MUL;
    w4  = a + 32'd4  * LINE_WORD_MUL;
    w5  = a + 32'd5  * LINE_WORD_MUL;
    w6  = a + 32'd6  * LINE_WORD_MUL;
    w7  = a + 32'd7  * LINE_WORD_MUL;
    w8  = a + 32'd8  * LINE_WORD_MUL;
    w9  = a + 32'd9  * LINE_WORD_MUL;
    w10 = a + 32'd10 * LINE_WORD_MUL;
    w11 = a + 32'd11 * LINE_WORD_MUL;
    w12 = a + 32'd12 * LINE_WORD_MUL;
    w13 = a + 32'd13 * LINE_WORD_MUL;
    w14 = a + 32'd14 * LINE_WORD_MUL;
    w15 = a + 32'd15 * LINE_WORD_MUL;
    // word 15 first (the high bits), word 0 last
    return {w15 ^ (w15 >> 15), w14 ^ (w14 >> 15), w13 ^ (w13 >> 15), w12 ^ (w12 >> 15),
            w11 ^ (w11 >> 15), w10 ^ (w10 >> 15), w9 ^ (w9 >> 15), w8 ^ (w8 >> 15),
            w7 ^ (w7 >> 15), w6 ^ (w6 >> 15), w5 ^ (w5 >> 15), w4 ^ (w4 >> 15),
            w3 ^ (w3 >> 15), w2 ^ (w2 >> 15), w1 ^ (w1 >> 15), w0 ^ (w0 >> 15)};
  endfunction

endpackage

`resetall
