// SPDX-License-Identifier: Apache-2.0
// One ANE core's kernel DMA: task latch, prefetch ring, KMem buffer and performance counters.

`default_nettype none

module kdma_core
  import kdma_pkg::*;  // in the header: the settings port's type (Icarus 11 cannot take kdma_pkg::settings_t)
#(
  // Credit arithmetic: a buggy hypothesis or the fix (see kdma_credit).
  parameter logic [CREDIT_MODE_BITS-1:0] CreditMode = CreditFixed,
  // Width of the prefetch ring pointers, in lines.
  parameter int RingBits = RING_BITS,
  // Clamp on the look-ahead credit, in lines (a power of two: one page).
  parameter int PrefetchMaxLines = PREFETCH_MAX_LINES,
  // KMem capacity, in lines (a power of two, up to MAX_KMEM_LINES).
  parameter int KmemLines = KMEM_LINES,
  // 1: KMem stores each line's address and data for the drain port. 0:
  // counters only; KMem keeps its occupancy, not its contents (kmem_addr_o
  // and kmem_data_o read 0; resp_addr_i and resp_data_i are not read).
  parameter bit Payload = 1'b1
) (
  input  logic clk_i,
  input  logic rst_ni,

  // ---- Run-time settings (kdma_pkg::settings_t; the memory's latency and ceiling unread) ----
  input  settings_t                      settings_i,
  output logic [RATE_BITS-1:0]           rate_o,         // this core's token refill, Q.16

  // ---- Task interface ----
  input  logic                           start_i,        // taken when ready_o is high
  input  logic [ADDR_BITS-1:0]           base_addr_i,    // byte address; low 6 bits ignored
  input  logic [ADDR_BITS-1:0]           size_bytes_i,   // rounded up to whole lines
  output logic                           ready_o,        // can take a task (idle, or the current
                                                         //   one fully issued and nothing older left)
  output logic                           idle_o,         // no task at all
  output logic                           done_o,         // pulse per task: its last line consumed
  output logic                           unaligned_o,    // task's base had low bits set
  output logic                           partial_o,      // task's size was rounded up
  output logic                           wrap_o,         // task crossed the top of the address space

  // ---- Memory port ----
  output logic                           req_valid_o,
  input  logic                           req_ready_i,
  output logic [LINE_ADDR_BITS-1:0]      req_addr_o,
  output logic [DWARM_EXTRA_BITS-1:0]    req_extra_o,    // the read's extra latency, cycles
  input  logic                           resp_valid_i,
  input  logic [LINE_ADDR_BITS-1:0]      resp_addr_i,
  input  logic [LINE_BITS-1:0]           resp_data_i,

  // ---- KMem drain port (consumer side, optional back-pressure) ----
  output logic                           kmem_valid_o,
  input  logic                           kmem_ready_i,
  output logic [LINE_ADDR_BITS-1:0]      kmem_addr_o,
  output logic [LINE_BITS-1:0]           kmem_data_o,

  // ---- Performance counters (cleared by a start_i taken while idle) ----
  output logic [CYCLE_BITS-1:0]          cycles_o,             // cycles busy
  output logic [CYCLE_BITS-1:0]          zero_credit_cycles_o, // busy, lines left, credit 0
  output logic [$clog2(KmemLines+1)-1:0] peak_inflight_o,      // most reads in flight
  output logic [COUNT_BITS-1:0]          issued_lines_o,
  output logic [COUNT_BITS-1:0]          consumed_lines_o
);

  // How to read it: the erratum is the credit (kdma_credit, inside the issue engine
  // u_ring), which lets this core run up to window + credit reads ahead of what
  // KMem has drained; at a transfer of k x 2^14 lines the buggy readings' credit
  // is 0 and the core crawls at the demand window (zero_credit_cycles_o counts
  // it). Around it: the task latch, the speculative-line account (paged only),
  // KMem and the counters. The rate mechanism the profile fits is in its own
  // modules (kdma_governor, kdma_dwarm), the assertions at the end.

  localparam int CapBits = $clog2(KmemLines + 1);
  localparam int PtrBits = $clog2(KmemLines);
  localparam int CreditBits = $clog2(PrefetchMaxLines + 1);

  // The build's KMem, checked at elaboration: a power of two (its pointers wrap),
  // within what the window setting can ask for, and room for one page of credit.
  // (Icarus 11: an instance of a module that does not exist, as in kdma_credit.)
  if ((KmemLines < 2) || (KmemLines > MAX_KMEM_LINES) || ((KmemLines & (KmemLines - 1)) != 0)
      || (PrefetchMaxLines > KmemLines)) begin : g_bad_kmem
`ifdef __ICARUS__
    kdma_refused_KmemLines_not_a_power_of_two_in_range_or_below_the_clamp u_refused ();
`else
    $fatal(1, "kdma_core: KmemLines = %0d is not a power of two in 2..%0d, or below PrefetchMaxLines = %0d",
           KmemLines, MAX_KMEM_LINES, PrefetchMaxLines);
`endif
  end

  // ---------------------------------------------------------------------------
  // Task latch. A new task may be taken as soon as the current one has issued
  // its last line: its lines then stream behind the current task's, which
  // drains as the "tail". At most two tasks are in the core at once.
  // ---------------------------------------------------------------------------
  logic                      cur_busy_q, done_q, unaligned_q, partial_q, wrap_q;
  logic [LINE_ADDR_BITS-1:0] base_line_q;
  logic [COUNT_BITS-1:0]     lines_q, consumed_q;
  logic [CapBits-1:0]        tail_q;        // older task's lines not yet drained
  logic [COUNT_BITS-1:0]     start_lines;   // ceil(size / 64)
  logic                      busy, ready, accept;
  logic                      tail_drain, cur_drain, cur_last, tail_last;
  logic [COUNT_BITS-1:0]     issued;                     // current task's requested lines
  logic [CreditBits-1:0]     credit;
  logic [CapBits-1:0]        cap, outstanding;           // outstanding: requested, not drained
  logic [CapBits-1:0]        inflight_q, kmem_count_q;
  logic [CapBits-1:0]        spec_out_q;                 // of them, speculative
  logic                      req_spec, grant, drain;
  logic                      spec_ok;                    // spec_out_q <= outstanding

  assign start_lines = COUNT_BITS'(size_bytes_i >> LINE_SHIFT) + COUNT_BITS'(|size_bytes_i[LINE_SHIFT-1:0]);
  assign busy   = cur_busy_q || (tail_q != '0);
  // A zero-length task waits for idle, so two tasks never finish in one cycle.
  assign ready  = !busy || ((issued == lines_q) && (tail_q == '0) && (start_lines != '0));
  assign accept = start_i && ready;

  // ---------------------------------------------------------------------------
  // Issue engine
  // ---------------------------------------------------------------------------

  kdma_prefetch_ring #(
    .CreditMode      (CreditMode),
    .RingBits        (RingBits),
    .PrefetchMaxLines(PrefetchMaxLines),
    .KmemLines       (KmemLines)
  ) u_ring (
    .clk_i,
    .rst_ni,
    .window_i        (settings_i.window),
    .busy_i          (cur_busy_q),
    .base_line_i     (base_line_q),
    .transfer_lines_i(lines_q),
    .clear_i         (accept),
    .outstanding_i   (outstanding),
    .spec_outstanding_i(spec_out_q),
    .req_valid_o,
    .req_ready_i,
    .req_addr_o,
    .req_spec_o      (req_spec),
    .issued_lines_o  (issued),
    .credit_o        (credit),
    .cap_o           (cap)
  );

  assign outstanding = inflight_q + kmem_count_q;
  assign grant       = req_valid_o && req_ready_i;

  // ---------------------------------------------------------------------------
  // Which lines in the core are speculative: one bit per line, in issue order,
  // which is also drain order (the memory and KMem are in order). Only the
  // paged mode has a speculative path; the other builds have no such state.
  // ---------------------------------------------------------------------------
  if (credit_has_spec_path(CreditMode)) begin : g_spec
    logic [KmemLines-1:0] spec_bits_q;   // a bit vector, not a memory: formal's SAT reads it
    logic [PtrBits-1:0]   spec_wr_q, spec_rd_q;
    logic                 drain_spec;

    assign drain_spec = drain && spec_bits_q[spec_rd_q];

    always_ff @(posedge clk_i) begin
      if (grant) spec_bits_q[spec_wr_q] <= req_spec;
    end

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        spec_wr_q  <= '0;
        spec_rd_q  <= '0;
        spec_out_q <= '0;
      end else begin
        if (grant) spec_wr_q <= spec_wr_q + 1'b1;
        if (drain) spec_rd_q <= spec_rd_q + 1'b1;
        spec_out_q <= spec_out_q + CapBits'(grant && req_spec) - CapBits'(drain_spec);
      end
    end
    assign spec_ok = (spec_out_q <= outstanding);
  end else begin : g_no_spec
    assign spec_out_q = '0;  // no speculative path in this mode
    assign spec_ok    = 1'b1;
  end

  // ---------------------------------------------------------------------------
  // The rate mechanism the profile fits: the issue-rate governor throttles the
  // port's refill, the demand path's warm-up delays a request's first starved
  // reads. Each starts over when a request (a task taken while idle) starts.
  // ---------------------------------------------------------------------------
  logic request;      // a task taken while idle
  logic unused_settings;  // the memory's settings: kdma_top hands them to kdma_mem_model

  assign request         = accept && !busy;
  assign unused_settings = ^{settings_i.latency, settings_i.agg_rate_q16};

  kdma_governor u_governor (
    .clk_i,
    .rst_ni,
    .core_rate_i (settings_i.core_rate_q16),
    .ramp_start_i(settings_i.ramp_start_q16),
    .ramp_step_i (settings_i.ramp_step_lines),
    .ramp_inc_i  (settings_i.ramp_inc_q16),
    .request_i   (request),
    .busy_i      (busy),
    .grant_i     (grant),
    .rate_o
  );

  kdma_dwarm u_dwarm (
    .clk_i,
    .rst_ni,
    .dwarm_lines_i(settings_i.dwarm_lines),
    .dwarm_extra_i(settings_i.dwarm_extra_cycles),
    .request_i    (request),
    .starved_i    (credit == '0),
    .grant_i      (grant),
    .extra_o      (req_extra_o)
  );

  // ---------------------------------------------------------------------------
  // KMem: lines returned from memory wait here until the consumer drains them.
  // The issue gate keeps issued - consumed <= KmemLines, so it never overflows.
  // ---------------------------------------------------------------------------
  logic [PtrBits-1:0]        kmem_wr_q, kmem_rd_q;
  logic [CapBits-1:0]        peak_inflight_q;

  assign kmem_valid_o = (kmem_count_q != '0);
  assign drain        = kmem_valid_o && kmem_ready_i;

  // The payload: the lines themselves (the pointers and count above stay).
  if (Payload) begin : g_payload
    logic [LINE_ADDR_BITS-1:0] kmem_addr [KmemLines];
    logic [LINE_BITS-1:0]      kmem_data [KmemLines];

    assign kmem_addr_o = kmem_addr[kmem_rd_q];
    assign kmem_data_o = kmem_data[kmem_rd_q];

    always_ff @(posedge clk_i) begin
      if (resp_valid_i) begin
        kmem_addr[kmem_wr_q] <= resp_addr_i;
        kmem_data[kmem_wr_q] <= resp_data_i;
      end
    end
  end else begin : g_no_payload
    logic unused_payload;  // the counters-only build stores no line

    assign unused_payload = ^{resp_addr_i, resp_data_i};
    assign kmem_addr_o    = '0;
    assign kmem_data_o    = '0;
  end

  assign tail_drain = drain && (tail_q != '0);
  assign tail_last  = tail_drain && (tail_q == CapBits'(1));
  assign cur_drain  = drain && (tail_q == '0) && cur_busy_q;
  assign cur_last   = cur_drain && (consumed_q + 1'b1 == lines_q);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cur_busy_q      <= 1'b0;
      done_q          <= 1'b0;
      unaligned_q     <= 1'b0;
      partial_q       <= 1'b0;
      wrap_q          <= 1'b0;
      base_line_q     <= '0;
      lines_q         <= '0;
      consumed_q      <= '0;
      tail_q          <= '0;
      kmem_wr_q       <= '0;
      kmem_rd_q       <= '0;
      kmem_count_q    <= '0;
      inflight_q      <= '0;
      peak_inflight_q <= '0;
    end else begin
      done_q <= tail_last || cur_last || (accept && (start_lines == '0));
      if (resp_valid_i) kmem_wr_q <= kmem_wr_q + 1'b1;
      if (drain)        kmem_rd_q <= kmem_rd_q + 1'b1;
      kmem_count_q <= kmem_count_q + CapBits'(resp_valid_i) - CapBits'(drain);
      inflight_q   <= inflight_q + CapBits'(grant) - CapBits'(resp_valid_i);
      if (inflight_q > peak_inflight_q) peak_inflight_q <= inflight_q;
      if (tail_drain) tail_q <= tail_q - 1'b1;
      if (accept) begin
        // what the current task still has to drain becomes the tail
        if (cur_busy_q && !cur_last) tail_q <= CapBits'(lines_q - consumed_q - COUNT_BITS'(cur_drain));
        if (!busy) peak_inflight_q <= '0;
        cur_busy_q      <= (start_lines != '0);
        unaligned_q     <= |base_addr_i[LINE_SHIFT-1:0];
        partial_q       <= |size_bytes_i[LINE_SHIFT-1:0];
        wrap_q          <= ({{(COUNT_BITS + 1 - LINE_ADDR_BITS) {1'b0}}, base_addr_i[ADDR_BITS-1:LINE_SHIFT]}
                            + {1'b0, start_lines}) > ((COUNT_BITS + 1)'(1) << LINE_ADDR_BITS);
        base_line_q     <= base_addr_i[ADDR_BITS-1:LINE_SHIFT];
        lines_q         <= start_lines;
        consumed_q      <= '0;
      end else begin
        if (cur_drain) consumed_q <= consumed_q + 1'b1;
        if (cur_last)  cur_busy_q <= 1'b0;
      end
    end
  end

  // ---------------------------------------------------------------------------
  // Performance counters
  // ---------------------------------------------------------------------------
  logic [CYCLE_BITS-1:0] cycles_q, zero_credit_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cycles_q      <= '0;
      zero_credit_q <= '0;
    end else if (request) begin
      cycles_q      <= '0;
      zero_credit_q <= '0;
    end else if (busy) begin
      cycles_q <= cycles_q + 1'b1;
      if (cur_busy_q && (issued != lines_q) && (credit == '0)) zero_credit_q <= zero_credit_q + 1'b1;
    end
  end

  assign idle_o               = !busy;
  assign ready_o              = ready;
  assign done_o               = done_q;
  assign unaligned_o          = unaligned_q;
  assign partial_o            = partial_q;
  assign wrap_o               = wrap_q;
  assign cycles_o             = cycles_q;
  assign zero_credit_cycles_o = zero_credit_q;
  assign peak_inflight_o      = peak_inflight_q;
  assign issued_lines_o       = issued;
  assign consumed_lines_o     = consumed_q;

  // ---------------------------------------------------------------------------
  // Immediate assertions (simulation only; formal/ restates them as properties)
  //
  // Each condition is written once, as a bit of assert_ok. A failure prints a
  // $error and sets its bit in assert_fail_q, which stays set until reset: a
  // testbench reads it to see that an assertion fired even on a simulator that
  // carries on after $error (Icarus). Verilator, built with --assert, stops at
  // the first $error unless +verilator+error+limit is raised.
  // tb/cocotb_assertions.py drives illegal states to prove they fire.
  // Bit 1 checks "in flight + KMem < window + credit" when a read issues (for
  // a demand line of the paged mode: the demand lines alone): the fix's credit
  // shrinks over a task's last lines, so between issues the occupancy may sit
  // above the (new, smaller) cap by design.
  // ---------------------------------------------------------------------------
`ifndef SYNTHESIS
  localparam int NumAsserts = 9;
  logic [NumAsserts-1:0] assert_fail_q;
  logic [NumAsserts-1:0] assert_ok;   // the nine conditions, by bit

  // The conditions, written once: the guard below and each assertion expand the same
  // macro (undefined at the end of the file). A vector that the guard and each assertion
  // read would be kept as a variable, which costs Verilator every cycle what the guard saves.
`define KDMA_OK_CREDIT  (credit <= CreditBits'(PrefetchMaxLines))
`define KDMA_OK_CAP     (!req_valid_o || ((req_spec ? outstanding : outstanding - spec_out_q) < cap))
`define KDMA_OK_KMEM    (outstanding <= CapBits'(KmemLines))
`define KDMA_OK_ISSUED  (!cur_busy_q || (issued <= lines_q))
`define KDMA_OK_END     (!req_valid_o || (issued < lines_q))
`define KDMA_OK_DONE    (!cur_last || (issued == lines_q && kmem_count_q == CapBits'(1) && inflight_q == '0))
`define KDMA_OK_TAIL    (!tail_drain || cur_busy_q)
`define KDMA_OK_SPEC    (spec_ok)
`define KDMA_OK_RATE    (rate_o <= settings_i.core_rate_q16)

  assign assert_ok = {
    `KDMA_OK_RATE,    // 8 governed rate above the core rate
    `KDMA_OK_SPEC,    // 7 more speculative lines than lines
    `KDMA_OK_TAIL,    // 6 stray tail
    `KDMA_OK_DONE,    // 5 done early
    `KDMA_OK_END,     // 4 read beyond the end
    `KDMA_OK_ISSUED,  // 3 issued above lines
    `KDMA_OK_KMEM,    // 2 outstanding above KMem
    `KDMA_OK_CAP,     // 1 issue at cap
    `KDMA_OK_CREDIT   // 0 credit above clamp
  };

  // Why the guard: a passing cycle then costs one test per core, not nine
  // assertion checks (about 4% of a 16-core build's instructions per cycle).
  // `!== 1'b1` runs them on an X condition too (Icarus), as a bare assertion of
  // X fails; on the reduction, Verilator tests one bit per core (`assert_ok !== '1`
  // cost it about 16 instructions a core a cycle).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      assert_fail_q <= '0;
    end else if ((&assert_ok) !== 1'b1) begin  // a 0 bit, or X in a 4-state simulator
      assert (`KDMA_OK_CREDIT)
        else begin
          $error("kdma: credit %0d above clamp %0d", credit, PrefetchMaxLines);
          assert_fail_q[0] <= 1'b1;
        end
      assert (`KDMA_OK_CAP)
        else begin
          $error("kdma: issue with %0d outstanding, cap %0d", outstanding, cap);
          assert_fail_q[1] <= 1'b1;
        end
      assert (`KDMA_OK_KMEM)
        else begin
          $error("kdma: %0d lines outstanding, KMem holds %0d", outstanding, KmemLines);
          assert_fail_q[2] <= 1'b1;
        end
      assert (`KDMA_OK_ISSUED)
        else begin
          $error("kdma: issued %0d of %0d lines", issued, lines_q);
          assert_fail_q[3] <= 1'b1;
        end
      assert (`KDMA_OK_END)
        else begin
          $error("kdma: read beyond the end of the transfer");
          assert_fail_q[4] <= 1'b1;
        end
      assert (`KDMA_OK_DONE)
        else begin
          $error("kdma: done with %0d of %0d issued", issued, lines_q);
          assert_fail_q[5] <= 1'b1;
        end
      assert (`KDMA_OK_TAIL)
        else begin
          $error("kdma: tail line drained with no current task");
          assert_fail_q[6] <= 1'b1;
        end
      assert (`KDMA_OK_SPEC)
        else begin
          $error("kdma: %0d speculative lines of %0d outstanding", spec_out_q, outstanding);
          assert_fail_q[7] <= 1'b1;
        end
      assert (`KDMA_OK_RATE)
        else begin
          $error("kdma: governed rate %0d above the core rate %0d", rate_o,
                 settings_i.core_rate_q16);
          assert_fail_q[8] <= 1'b1;
        end
    end
  end

  // End-of-simulation summary, for a log that scrolled past the $error lines.
  final begin
    if (assert_fail_q != '0) $display("kdma: assertion bits %b set at the end", assert_fail_q);
  end
`undef KDMA_OK_CREDIT
`undef KDMA_OK_CAP
`undef KDMA_OK_KMEM
`undef KDMA_OK_ISSUED
`undef KDMA_OK_END
`undef KDMA_OK_DONE
`undef KDMA_OK_TAIL
`undef KDMA_OK_SPEC
`undef KDMA_OK_RATE
`endif

endmodule

`resetall
