// SPDX-License-Identifier: Apache-2.0
// Formal harness: the issue engine under a symbolic task, free memory handshake and a free drain.
//
// The task (base line, transfer lines, window) comes from kdma_formal_env as
// anyconst values: the solver picks them, including the 32-bit transfer size,
// and they stay fixed for the whole trace. Memory accepts a request whenever the
// solver likes (anyseq). Everything behind the memory port (reads in flight and
// lines waiting in KMem, across tasks) is abstracted as one counter,
// `outstanding`, which feeds the engine's outstanding_i: it rises by one when a
// request is accepted and the solver may lower it by one per cycle, only while
// it is above zero. Lines are never drained before they were requested. Of
// them, `spec_q` went the speculative path (CreditPaged only); the solver picks
// which kind leaves (any order: the core's FIFO order is one of them), and that
// count feeds spec_outstanding_i.
//
// Properties, by mode (see formal/README.md for the jobs that check them):
//   every mode  the engine reads only lines of the task, in order, once each:
//               req_addr - base_line (mod 2^26) == issued < transfer_lines;
//               issued never passes transfer_lines; outstanding never passes
//               KMem; a request, once raised, is held until accepted;
//               credit equals this file's own statement of the mode (credit_ref);
//               a line is speculative only in the paged reading.
//   Fixed       credit != 0 while lines remain, and with nothing outstanding the
//               engine always requests (it never hangs, even with window 0).
//   Literal,    the notch has the shape of erratum section 4: zero credit
//   Signed      exactly at transfer = k * 2^14, partial credit exactly for
//               x = transfer mod 2^14 in [0, 256) (Literal) or |x| < 256
//               (Signed); no hang while the window is non-zero.
//               Covers: the solver finds a transfer size with zero credit while
//               lines remain (Goal 1), partial credit past the first 1 MiB
//               (Goal 2; Goal 3 on the x < 0 side), a hang (Goal 5).
//   Paged       credit c = min(|x|, 256) on the first c lines of each 256-line
//               page of the task, 0 on the rest; a line is speculative exactly
//               when it has credit. At a whole number of laps (x = 0) the
//               speculative path is off for the whole transfer. Off them every
//               page opens on the speculative path (credit >= 1 at its first
//               line), so with nothing outstanding the engine always requests
//               a page's first line, even with window 0; with |x| >= 256 every
//               line has the full page of credit. Covers: zero credit at a page
//               start (Goal 6: the solver finds a whole number of laps), zero
//               credit inside a page off the laps (Goal 7), a stall off the laps
//               (Goal 8: window 0), both paths used and drained (Goal 9).

`default_nettype none

module kdma_formal_ring
#(
  // Reading under test. The job files name it from the package
  // (-G CreditMode=kdma_pkg::CreditPaged): slang takes no bare number here.
  parameter kdma_pkg::credit_mode_e CreditMode = kdma_pkg::CreditFixed,
  // Witness a cover task asks for: 0 none, 1 zero credit while lines remain,
  // 2 partial credit (1..255) with transfer_lines >= 2^14, 3 as 2 but on the
  // x < 0 side of a multiple of 2^14, 4 a finished transfer (non-vacuity),
  // 5 a hang: lines left, nothing outstanding, no request; paged: 6 zero
  // credit at a page start, 7 zero credit off the laps, 8 a hang off the laps,
  // 9 a speculative and a demand line issued and drained.
  parameter int Goal = 0
) (
  input wire clk_i
);

  import kdma_pkg::*;

  localparam int CapBits    = $clog2(KMEM_LINES + 1);
  localparam int CreditBits = $clog2(PREFETCH_MAX_LINES + 1);
  // One ring turn, in lines (2^14 = 1 MiB): the period of the erratum.
  localparam logic [COUNT_BITS-1:0] RING_LINES = COUNT_BITS'(1) << RING_BITS;
  // Lines addressable before the 26-bit line address wraps.
  localparam logic [COUNT_BITS:0]   ADDR_SPACE_LINES = (COUNT_BITS + 1)'(1) << LINE_ADDR_BITS;
  localparam logic [CREDIT_MODE_BITS-1:0] MODE = CreditMode;
  // One page of the paged reading: the clamp's worth of lines (a power of two).
  localparam int PageBits = $clog2(PREFETCH_MAX_LINES);

  // ---------------------------------------------------------------------------
  // Reset: low in the first cycle only (initial values are the formal idiom)
  // ---------------------------------------------------------------------------
  /* verilator lint_off PROCASSINIT */
  /* verilator lint_off SYNCASYNCNET */
  logic rst_nq = 1'b0;
  /* verilator lint_on SYNCASYNCNET */
  logic past_valid_q = 1'b0;  // $past() has a value
  /* verilator lint_on PROCASSINIT */
  always_ff @(posedge clk_i) begin
    rst_nq       <= 1'b1;
    past_valid_q <= 1'b1;
  end

  // ---------------------------------------------------------------------------
  // Environment: symbolic task and free handshakes
  // ---------------------------------------------------------------------------
  localparam int EnvBits = 32;  // width of every task value kdma_formal_env offers

  if ((LINE_ADDR_BITS > EnvBits) || (COUNT_BITS > EnvBits) || (CapBits > EnvBits)) begin : g_env_check
    $error("kdma_formal_ring: kdma_formal_env offers %0d-bit task values, too narrow", EnvBits);
  end

  /* verilator lint_off UNUSEDSIGNAL */
  logic [EnvBits-1:0]        base_line_any, transfer_lines_any, window_any;  // upper bits unused
  /* verilator lint_on UNUSEDSIGNAL */
  logic [LINE_ADDR_BITS-1:0] base_line;
  logic [COUNT_BITS-1:0]     transfer_lines;
  logic [CapBits-1:0]        window;
  logic                      req_ready;
  logic                      drain;       // one outstanding line leaves (if any)
  logic                      drain_spec;  // ... a speculative one, if there is a choice

  kdma_formal_env u_env (
    .base_line_o     (base_line_any),
    .transfer_lines_o(transfer_lines_any),
    .window_o        (window_any),
    .req_ready_o     (req_ready),
    .drain_o         (drain),
    .drain_spec_o    (drain_spec)
  );

  assign base_line      = base_line_any[LINE_ADDR_BITS-1:0];
  assign transfer_lines = transfer_lines_any[COUNT_BITS-1:0];
  assign window         = window_any[CapBits-1:0];

  // ---------------------------------------------------------------------------
  // Device under test
  // ---------------------------------------------------------------------------
  logic                      req_valid;
  logic [LINE_ADDR_BITS-1:0] req_addr;
  logic [COUNT_BITS-1:0]     issued;
  logic [CreditBits-1:0]     credit;
  logic [CapBits-1:0]        cap;
  logic [CapBits-1:0]        outstanding_q;  // requested, not yet drained out of KMem
  logic [CapBits-1:0]        spec_q;         // of them, speculative
  logic                      req_spec;

  kdma_prefetch_ring #(
    .CreditMode(MODE)
  ) u_dut (
    .clk_i,
    .rst_ni          (rst_nq),
    .window_i        (WINDOW_BITS'(window)),
    .busy_i          (1'b1),
    .base_line_i     (base_line),
    .transfer_lines_i(transfer_lines),
    .clear_i         (1'b0),
    .outstanding_i   (outstanding_q),
    .spec_outstanding_i(spec_q),
    .req_valid_o     (req_valid),
    .req_ready_i     (req_ready),
    .req_addr_o      (req_addr),
    .req_spec_o      (req_spec),
    .issued_lines_o  (issued),
    .credit_o        (credit),
    .cap_o           (cap)
  );

  // Memory and KMem, abstracted: +1 per accepted request, and the solver may
  // retire one line per cycle while any is outstanding (both in one cycle too).
  // A speculative line leaves when the solver says so, or when no other is left.
  logic accepted, retired, retired_spec;
  assign accepted     = req_valid && req_ready;
  assign retired      = drain && (outstanding_q != '0);
  assign retired_spec = retired && (spec_q != '0) && (drain_spec || (spec_q == outstanding_q));

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      outstanding_q <= '0;
      spec_q        <= '0;
    end else begin
      outstanding_q <= outstanding_q + CapBits'(accepted) - CapBits'(retired);
      spec_q        <= spec_q + CapBits'(accepted && req_spec) - CapBits'(retired_spec);
    end
  end

  // ---------------------------------------------------------------------------
  // Reference values, stated independently of the RTL's ring pointers
  // ---------------------------------------------------------------------------
  logic                      lines_left;   // the transfer is not fully requested
  logic [COUNT_BITS-1:0]     remaining;    // lines still to request
  logic [LINE_ADDR_BITS-1:0] req_offset;   // requested line relative to the start
  logic [RING_BITS-1:0]      notch_x;      // transfer_lines mod 2^14
  logic [COUNT_BITS-1:0]     notch_mag;    // |x|: distance to the nearest multiple of 2^14
  logic [COUNT_BITS-1:0]     page_c;       // paged: min(|x|, 256), a page's credit
  logic [COUNT_BITS-1:0]     page_line;    // paged: issued mod 256, the next line's place
  logic [COUNT_BITS-1:0]     avail_ref;    // what the mode believes is left
  logic [CreditBits-1:0]     credit_ref;   // min(avail_ref, clamp)
  logic                      spec_ref;     // the next line goes the speculative path
  logic [CapBits-1:0]        demand_q;     // outstanding lines of the demand path
  logic [CapBits:0]          window_plus_credit;
  logic [CapBits-1:0]        cap_ref;

  assign lines_left = (issued < transfer_lines);
  assign remaining  = transfer_lines - issued;
  assign req_offset = req_addr - base_line;
  assign notch_x    = transfer_lines[RING_BITS-1:0];
  assign notch_mag  = notch_x[RING_BITS-1] ? RING_LINES - COUNT_BITS'(notch_x) : COUNT_BITS'(notch_x);
  assign page_c     = (notch_mag > COUNT_BITS'(PREFETCH_MAX_LINES)) ? COUNT_BITS'(PREFETCH_MAX_LINES)
                                                                    : notch_mag;
  assign page_line  = COUNT_BITS'(issued[PageBits-1:0]);
  assign demand_q   = outstanding_q - spec_q;

  // Literal: the 14-bit distance is just transfer_lines mod 2^14, whatever the
  // start. Signed: the same offset read as a signed ring offset, magnitude.
  // Paged: Signed's credit, on the first lines of each page of the task only.
  always_comb begin
    avail_ref = '0;
    unique case (MODE)
      CreditLiteral: avail_ref = COUNT_BITS'(notch_x);
      CreditSigned:  avail_ref = notch_mag;
      CreditFixed:   avail_ref = remaining;
      CreditPaged:   avail_ref = (page_line < page_c) ? page_c : '0;
      default:       avail_ref = '0;
    endcase
  end
  assign credit_ref = (avail_ref > COUNT_BITS'(PREFETCH_MAX_LINES)) ? CreditBits'(PREFETCH_MAX_LINES)
                                                                   : CreditBits'(avail_ref);
  assign spec_ref   = (MODE == CreditPaged) && (credit_ref != '0);
  assign window_plus_credit = (CapBits + 1)'(window) + (CapBits + 1)'(credit);
  assign cap_ref = (window_plus_credit > (CapBits + 1)'(KMEM_LINES)) ? CapBits'(KMEM_LINES)
                                                                    : CapBits'(window_plus_credit);

  // ---------------------------------------------------------------------------
  // Assumptions
  // ---------------------------------------------------------------------------
  always_comb begin
    assume (window <= CapBits'(KMEM_LINES));
  end

  // ---------------------------------------------------------------------------
  // Invariants and safety, every mode
  // ---------------------------------------------------------------------------
  always_comb begin
    if (rst_nq) begin
      // Counters: the helper invariants that make the 32-bit induction close.
      assert (issued <= transfer_lines);
      assert (COUNT_BITS'(outstanding_q) <= issued);
      assert (outstanding_q <= CapBits'(KMEM_LINES));
      assert (spec_q <= outstanding_q);
      // Credit, path and cap follow the mode's statement.
      assert (credit == credit_ref);
      assert (req_spec == spec_ref);
      assert (cap == cap_ref);
      // Requests stay inside [base_line, base_line + transfer_lines), modulo
      // the 26-bit line address space, and come in order. A speculative line
      // counts everything outstanding against window + credit, a demand line
      // only the demand lines (and every line must fit KMem).
      if (req_valid) begin
        assert (lines_left);
        assert ((req_spec ? outstanding_q : demand_q) < cap);
        assert (outstanding_q < CapBits'(KMEM_LINES));
        assert (req_offset == issued[LINE_ADDR_BITS-1:0]);
        assert (COUNT_BITS'(req_offset) < transfer_lines);
        if ({1'b0, transfer_lines} <= ADDR_SPACE_LINES) begin
          assert (COUNT_BITS'(req_offset) == issued);
        end
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (past_valid_q && rst_nq && $past(rst_nq)) begin
      // One line per accepted request, none otherwise.
      assert (issued == $past(issued) + COUNT_BITS'($past(req_valid && req_ready)));
      // A raised request is held, unchanged, until memory takes it.
      if ($past(req_valid && !req_ready)) begin
        assert (req_valid);
        assert (req_addr == $past(req_addr));
      end
    end
  end

  // ---------------------------------------------------------------------------
  // The fix: credit never runs dry while lines remain, so the engine can always
  // issue when nothing is in flight, even with a zero demand window.
  // The buggy modes: the same holds only with a non-zero window; and the notch
  // has exactly the shape of section 4 of the erratum (x = transfer mod 2^14).
  // ---------------------------------------------------------------------------
  if (CreditMode == int'(CreditFixed)) begin : g_fixed
    always_comb begin
      if (rst_nq && lines_left) begin
        assert (credit != '0);
        if (outstanding_q == '0) begin
          assert (req_valid);
        end
      end
    end
  end else if (CreditMode == int'(CreditPaged)) begin : g_paged
    always_comb begin
      if (rst_nq) begin
        if (notch_x == '0) begin
          // A whole number of laps: the speculative path is off for the whole
          // transfer; every line waits for the demand window.
          assert (credit == '0);
          assert (!req_spec);
        end else if (lines_left) begin
          // Off the laps the credit never runs dry for a whole page: each page
          // opens on the speculative path with min(|x|, 256) >= 1 lines of
          // credit, so with nothing outstanding its first line is requested
          // even with window 0. With |x| >= 256 no line is ever without it.
          if (page_line == '0) begin
            assert (credit != '0);
            assert (req_spec);
            if (outstanding_q == '0) assert (req_valid);
          end
          if (notch_mag >= COUNT_BITS'(PREFETCH_MAX_LINES)) begin
            assert (credit == CreditBits'(PREFETCH_MAX_LINES));
          end
        end
        // With nothing outstanding, a request is up exactly when the next line
        // has credit (speculative) or the demand window is open: the only stall
        // is a line without credit behind a zero window.
        if (lines_left && (outstanding_q == '0)) begin
          assert (req_valid == ((credit != '0) || (window != '0)));
        end
      end
    end
  end else begin : g_notch
    always_comb begin
      if (rst_nq) begin
        if (lines_left && (outstanding_q == '0) && (window != '0)) begin
          assert (req_valid);
        end
        // Zero credit exactly at multiples of 2^14 lines.
        assert ((credit == '0) == (notch_x == '0));
        // Less than full credit exactly inside the notch window: x in [0, 256)
        // for Literal (one side), |x| < 256 for Signed (both sides, a V).
        if (MODE == CreditLiteral) begin
          assert ((credit < CreditBits'(PREFETCH_MAX_LINES))
                  == (notch_x < RING_BITS'(PREFETCH_MAX_LINES)));
        end else begin
          assert ((credit < CreditBits'(PREFETCH_MAX_LINES))
                  == ((notch_x < RING_BITS'(PREFETCH_MAX_LINES))
                      || (notch_x > RING_BITS'(RING_LINES - PREFETCH_MAX_LINES))));
        end
      end
    end
  end

  // ---------------------------------------------------------------------------
  // Witnesses: the solver chooses the transfer size
  // ---------------------------------------------------------------------------
  logic partial_credit;
  logic spec_seen_q, demand_seen_q;  // a speculative, a demand line was accepted
  assign partial_credit = (credit != '0) && (credit < CreditBits'(PREFETCH_MAX_LINES))
                          && (transfer_lines >= RING_LINES);

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      spec_seen_q   <= 1'b0;
      demand_seen_q <= 1'b0;
    end else if (accepted) begin
      if (req_spec) spec_seen_q   <= 1'b1;
      else          demand_seen_q <= 1'b1;
    end
  end

  always_comb begin
    if (rst_nq) begin
      unique case (Goal)
        1:       cover (lines_left && (credit == '0));
        2:       cover (lines_left && partial_credit);
        3:       cover (lines_left && partial_credit && notch_x[RING_BITS-1]);
        4:       cover ((issued == transfer_lines) && (transfer_lines >= 32'd3)
                        && (outstanding_q == '0) && (window == '0));
        5:       cover (lines_left && (outstanding_q == '0) && !req_valid);
        6:       cover (lines_left && (page_line == '0) && (credit == '0) && !req_spec);
        7:       cover (lines_left && (credit == '0) && (notch_x != '0));
        8:       cover (lines_left && (outstanding_q == '0) && !req_valid && (notch_x != '0));
        9:       cover (spec_seen_q && demand_seen_q && (outstanding_q == '0));
        default: ;
      endcase
    end
  end

endmodule

`resetall
