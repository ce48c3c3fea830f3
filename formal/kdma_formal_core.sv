// SPDX-License-Identifier: Apache-2.0
// Formal harness around kdma_core: back-to-back symbolic tasks, free memory and consumer.
//
// The free inputs are the module's ports, which the solver sets on every cycle
// (`sat -set-def-inputs`; no anyseq black box is needed here). It offers a task
// (any 32-bit byte address and byte size) on any cycle, changes the demand
// window at will (<= KMem), picks the run-time settings of the issue-rate
// governor and the demand path's warm-up within their legal ranges (held while
// the core is busy, free while it is idle; the warm-up's extra latency is free
// on every cycle), and drives the memory
// port: req_ready is free, and a response may come on any cycle while at least
// one read is outstanding. Responses come in order, one per cycle, and only for
// lines that were requested; the core does not look at resp_addr/resp_data
// except to store them in KMem, so they are tied to 0 and the KMem arrays
// (1024 x 512 bits) drop out of the netlist. The consumer's kmem_ready is free.
//
// The harness keeps its own account of the tasks, stated from the interface:
//   h_tail_left  lines of the older task (fully issued) not yet drained
//   h_cur_*      the newest task: valid, lines, first line, issued, drained
//   h_mem_q      reads accepted by memory, not yet answered
//   h_kmem_q     lines answered, not yet drained
// Drains go to the older task first (KMem is a FIFO and the older task's
// lines were all requested first).
//
// Properties (proven by temporal induction with yosys' own SAT solver, see
// core_proof_prove.ys; z3 4.8.12 under yosys-smtbmc does not finish even
// parsing the kdma_core model, see formal/README.md):
//   - done_o pulses exactly one cycle after the last line of a task was
//     drained (or after a zero-length task was taken), and at no other time;
//   - the core requests only lines of the current task, in order:
//     req_addr == first line + issued (mod 2^26), and issued < lines;
//     issued never exceeds the task's lines;
//   - lines requested and not yet drained (in flight + KMem, both tasks)
//     never exceed KMem (1024 lines), and the core's own `outstanding`
//     equals that count; a line is drained only after it was returned;
//   - a task is taken only when the current one is fully issued and no older
//     task is left (at most two tasks in the core), and always when idle;
//   - the demand path's warm-up: a read carries the extra latency exactly
//     when it is starved (credit 0) and fewer than dwarm_lines starved reads
//     were granted since the request started (a task taken while idle), else
//     none;
//   - the governor: rate_o <= core rate and rate_o != 0 (it never stops the
//     port); a request that starts with the ramp off runs at the core rate;
//     within a request rate_o never falls; every granted line of a running
//     ramp moves it strictly closer to its end (a ranking function: the ramp
//     ends after finitely many grants) and nothing else moves it;
//   - progress: with lines left and nothing outstanding the core requests
//     unless the next line has neither credit nor a demand window;
//   - the paged reading (CreditPaged builds): a line is speculative exactly
//     when its place in its 256-line page is below the task's page credit
//     min(|x|, 256), and the core's count of speculative lines outstanding is
//     exact (so never above the lines outstanding), as is each line's bit.
// The core's own immediate assertions sit under `ifndef SYNTHESIS`, which
// read_slang defines (and yosys-slang cannot lower them inside the core's
// async-reset always_ff); they are restated here. The helper invariants at the
// end tie the core's registers (hierarchical references) to the harness
// account, which makes the 32-bit induction close at length 1.

`default_nettype none

module kdma_formal_core
#(
  // Reading under test. The job files name it from the package
  // (-G CreditMode=kdma_pkg::CreditPaged): slang takes no bare number here.
  parameter kdma_pkg::credit_mode_e CreditMode = kdma_pkg::CreditFixed
) (
  input wire clk_i,
  // ---- Free inputs: the solver picks every one of them on every cycle ----
  input wire [31:0] window_i,      // demand window, lines (assumed <= KMem)
  input wire        start_i,       // offer a task
  input wire [31:0] base_addr_i,   // its byte address
  input wire [31:0] size_bytes_i,  // its size in bytes
  input wire        req_ready_i,   // memory accepts the read request
  input wire        resp_valid_i,  // memory returns the oldest outstanding read
  input wire        kmem_ready_i,  // consumer drains one KMem line
  input wire [31:0] dwarm_lines_i, // demand path's warm-up: starved lines (held while busy)
  input wire [31:0] dwarm_extra_i, // ... and their extra latency (free)
  input wire [31:0] core_rate_i,   // governor: the core's rate, Q.16 (held while busy)
  input wire [31:0] ramp_start_i,  // ... a request's first rate (0: no ramp)
  input wire [31:0] ramp_step_i,   // ... granted lines per step
  input wire [31:0] ramp_inc_i,    // ... rate added per step
  // ---- Witness for the non-vacuity run ----
  output wire       witness_o,     // a second task was taken while the first
                                   //   still drained, and both are done
  output wire       witness_gov_o  // ... and a speculative line was granted and the
                                   //   governor raised the rate within a request
);

  import kdma_pkg::*;

  localparam int CapBits = $clog2(KMEM_LINES + 1);
  localparam logic [CREDIT_MODE_BITS-1:0] MODE = CreditMode;
  localparam int HBits = COUNT_BITS + 1;  // harness line counts: wide enough never to wrap

  if ((ADDR_BITS != 32) || (CapBits > 32) || (RATE_BITS > 32)
      || (RAMP_STEP_BITS > 32) || (DWARM_LINES_BITS > 32) || (DWARM_EXTRA_BITS > 32)) begin : g_port_check
    $error("kdma_formal_core: the free inputs are 32 bits wide, kdma_pkg disagrees");
  end

  // ---------------------------------------------------------------------------
  // Reset: low in the first cycle only
  // ---------------------------------------------------------------------------
  /* verilator lint_off PROCASSINIT */
  /* verilator lint_off SYNCASYNCNET */
  logic rst_nq = 1'b0;
  /* verilator lint_on SYNCASYNCNET */
  /* verilator lint_on PROCASSINIT */
  always_ff @(posedge clk_i) rst_nq <= 1'b1;

  // ---------------------------------------------------------------------------
  // Environment
  // ---------------------------------------------------------------------------
  logic [CapBits-1:0]   window;
  logic                 start, req_ready, resp_valid, kmem_ready;
  logic [ADDR_BITS-1:0] base_addr, size_bytes;

  assign window     = window_i[CapBits-1:0];
  assign start      = start_i;
  assign base_addr  = base_addr_i;
  assign size_bytes = size_bytes_i;
  assign req_ready  = req_ready_i;
  assign resp_valid = resp_valid_i;
  assign kmem_ready = kmem_ready_i;

  // Run-time settings, at the core's widths (the assumptions below keep them legal).
  localparam int RateBits = RATE_BITS;
  logic [RateBits-1:0]         core_rate, ramp_start, ramp_inc, rate;
  logic [RAMP_STEP_BITS-1:0]   ramp_step;
  logic [DWARM_LINES_BITS-1:0] dwarm_lines;
  logic [DWARM_EXTRA_BITS-1:0] dwarm_extra;

  assign core_rate   = core_rate_i[RateBits-1:0];
  assign ramp_start  = ramp_start_i[RateBits-1:0];
  assign ramp_step   = ramp_step_i[RAMP_STEP_BITS-1:0];
  assign ramp_inc    = ramp_inc_i[RateBits-1:0];
  assign dwarm_lines = dwarm_lines_i[DWARM_LINES_BITS-1:0];
  assign dwarm_extra = dwarm_extra_i[DWARM_EXTRA_BITS-1:0];

  // ---------------------------------------------------------------------------
  // Device under test
  // ---------------------------------------------------------------------------
  logic                      ready, idle, done, req_valid, kmem_valid;
  logic [LINE_ADDR_BITS-1:0] req_addr;
  logic [DWARM_EXTRA_BITS-1:0] req_extra;
  logic [COUNT_BITS-1:0]     issued, consumed;
  settings_t                 settings;

  // The settings struct: the window, the governor and the warm-up free (within the
  // assumptions below); the memory's latency and ceiling are not read by the core.
  always_comb begin
    settings                    = '0;
    settings.window             = WINDOW_BITS'(window);
    settings.core_rate_q16      = core_rate;
    settings.ramp_start_q16     = ramp_start;
    settings.ramp_step_lines    = ramp_step;
    settings.ramp_inc_q16       = ramp_inc;
    settings.dwarm_lines        = dwarm_lines;
    settings.dwarm_extra_cycles = dwarm_extra;
  end

  kdma_core #(
    .CreditMode(MODE)
  ) u_core (
    .clk_i,
    .rst_ni              (rst_nq),
    .settings_i          (settings),
    .rate_o              (rate),
    .start_i             (start),
    .base_addr_i         (base_addr),
    .size_bytes_i        (size_bytes),
    .ready_o             (ready),
    .idle_o              (idle),
    .done_o              (done),
    .unaligned_o         (),
    .partial_o           (),
    .wrap_o              (),
    .req_valid_o         (req_valid),
    .req_ready_i         (req_ready),
    .req_addr_o          (req_addr),
    .req_extra_o         (req_extra),
    .resp_valid_i        (resp_valid),
    .resp_addr_i         ('0),
    .resp_data_i         ('0),
    .kmem_valid_o        (kmem_valid),
    .kmem_ready_i        (kmem_ready),
    .kmem_addr_o         (),
    .kmem_data_o         (),
    .cycles_o            (),
    .zero_credit_cycles_o(),
    .peak_inflight_o     (),
    .issued_lines_o      (issued),
    .consumed_lines_o    (consumed)
  );

  // ---------------------------------------------------------------------------
  // Harness account of the tasks and of the memory side
  // ---------------------------------------------------------------------------
  logic                      accept, issue, drain, tail_drain, cur_drain, tail_last, cur_last;
  logic [HBits-1:0]          new_lines;   // ceil(size / 64), stated independently
  logic                      h_cur_valid, h_done_q;
  logic [HBits-1:0]          h_cur_lines, h_cur_iss, h_cur_drn, h_tail_left;
  logic [LINE_ADDR_BITS-1:0] h_cur_base;
  logic [HBits-1:0]          h_mem_q, h_kmem_q, h_outstanding;
  logic [1:0]                dones_q;     // done pulses seen (saturating), for the cover
  logic [1:0]                taken_q;     // tasks taken (saturating), for the cover
  logic                      overlap_q;   // a task was taken while an older one still drained

  assign new_lines     = (HBits'(size_bytes) + HBits'(LINE_BYTES - 1)) >> LINE_SHIFT;
  assign accept        = start && ready;
  assign issue         = req_valid && req_ready;
  assign drain         = kmem_valid && kmem_ready;
  assign tail_drain    = drain && (h_tail_left != '0);
  assign cur_drain     = drain && (h_tail_left == '0);
  assign tail_last     = tail_drain && (h_tail_left == HBits'(1));
  assign cur_last      = cur_drain && (h_cur_drn + 1'b1 == h_cur_lines);
  assign h_outstanding = h_mem_q + h_kmem_q;

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      h_cur_valid <= 1'b0;
      h_done_q    <= 1'b0;
      h_cur_lines <= '0;
      h_cur_iss   <= '0;
      h_cur_drn   <= '0;
      h_cur_base  <= '0;
      h_tail_left <= '0;
      h_mem_q     <= '0;
      h_kmem_q    <= '0;
      dones_q     <= '0;
      taken_q     <= '0;
      overlap_q   <= 1'b0;
    end else begin
      h_done_q <= tail_last || cur_last || (accept && (new_lines == '0));
      h_mem_q  <= h_mem_q + HBits'(issue) - HBits'(resp_valid);
      h_kmem_q <= h_kmem_q + HBits'(resp_valid) - HBits'(drain);
      if (done && (dones_q != 2'd3)) dones_q <= dones_q + 1'b1;
      if (accept && (taken_q != 2'd3)) taken_q <= taken_q + 1'b1;
      if (tail_drain) h_tail_left <= h_tail_left - 1'b1;
      if (cur_drain)  h_cur_drn   <= h_cur_drn + 1'b1;
      if (cur_last)   h_cur_valid <= 1'b0;
      if (issue)      h_cur_iss   <= h_cur_iss + 1'b1;
      if (accept) begin
        // The current task's undrained lines become the older task.
        if (h_cur_valid && !cur_last) begin
          h_tail_left <= h_cur_lines - h_cur_drn - HBits'(cur_drain);
          overlap_q   <= 1'b1;
        end
        h_cur_valid <= (new_lines != '0);
        h_cur_lines <= new_lines;
        h_cur_base  <= base_addr[ADDR_BITS-1:LINE_SHIFT];
        h_cur_iss   <= '0;
        h_cur_drn   <= '0;
      end
    end
  end

  // ---------------------------------------------------------------------------
  // The demand path's warm-up, stated from the interface: the starved reads
  // granted since the request started, held once above any dwarm_lines
  // ---------------------------------------------------------------------------
  localparam int WBits = DWARM_LINES_BITS + 1;
  logic [WBits-1:0]            h_starved_q;
  logic                        starved;   // the next read has no credit

  assign starved     = (u_core.credit == '0);

  always_ff @(posedge clk_i) begin
    if (!rst_nq || (accept && idle)) begin
      h_starved_q <= '0;
    end else if (issue && starved && (h_starved_q != {WBits{1'b1}})) begin
      h_starved_q <= h_starved_q + 1'b1;
    end
  end

  // ---------------------------------------------------------------------------
  // Assumptions: the window setting and an in-order memory that answers only
  // reads it was asked for
  // ---------------------------------------------------------------------------
  // The run-time settings as last cycle: a busy core sees them steady.
  logic [RateBits-1:0]         h_core_rate_q, h_ramp_start_q, h_ramp_inc_q;
  logic [RAMP_STEP_BITS-1:0]   h_ramp_step_q;
  logic [DWARM_LINES_BITS-1:0] h_dwarm_lines_q;

  always_ff @(posedge clk_i) begin
    h_core_rate_q   <= core_rate;
    h_ramp_start_q  <= ramp_start;
    h_ramp_step_q   <= ramp_step;
    h_ramp_inc_q    <= ramp_inc;
    h_dwarm_lines_q <= dwarm_lines;
  end

  always_comb begin
    assume (window_i <= 32'(KMEM_LINES));
    // The legal ranges (ane_kdma.profile checks the same): core rate in (0, 1]
    // lines/cycle, ramp start and increment in [0, 1], a ramp that starts below
    // the core rate has an increment; any 20-bit step (0 acts as 1) and warm-up.
    assume ((core_rate_i != '0) && (core_rate_i <= 32'(RATE_ONE)));
    assume (ramp_start_i <= 32'(RATE_ONE));
    assume (ramp_inc_i <= 32'(RATE_ONE));
    assume (ramp_step_i < (32'(1) << RAMP_STEP_BITS));
    assume (dwarm_lines_i < (32'(1) << DWARM_LINES_BITS));
    assume (dwarm_extra_i < (32'(1) << DWARM_EXTRA_BITS));
    if ((ramp_start != '0) && (ramp_start < core_rate)) assume (ramp_inc != '0);
    if (rst_nq && !idle) begin
      assume (core_rate == h_core_rate_q);
      assume (ramp_start == h_ramp_start_q);
      assume (ramp_step == h_ramp_step_q);
      assume (ramp_inc == h_ramp_inc_q);
      assume (dwarm_lines == h_dwarm_lines_q);
    end
    if (rst_nq) begin
      if (resp_valid) assume (h_mem_q != '0);
    end else begin
      assume (!resp_valid);
    end
  end

  // ---------------------------------------------------------------------------
  // Properties
  // ---------------------------------------------------------------------------
  always_comb begin
    if (rst_nq) begin
      // done exactly when a task's last line has been drained.
      assert (done == h_done_q);
      // Requests: only the current task's lines, in order, never past its end.
      if (req_valid) begin
        assert (h_cur_valid);
        assert (h_cur_iss < h_cur_lines);
        assert (req_addr == h_cur_base + h_cur_iss[LINE_ADDR_BITS-1:0]);
      end
      assert (h_cur_iss <= h_cur_lines);
      assert (HBits'(issued) == h_cur_iss);
      assert (HBits'(issued) <= h_cur_lines);
      // Occupancy: requested and not drained, over both tasks, fits in KMem.
      assert (h_outstanding <= HBits'(KMEM_LINES));
      assert (HBits'(u_core.outstanding) == h_outstanding);
      // A line leaves KMem only after it came back from memory.
      if (kmem_valid) assert (h_kmem_q != '0);
      // Task hand-over: at most two tasks; always ready when idle.
      if (ready) begin
        assert (h_tail_left == '0);
        assert (!h_cur_valid || (h_cur_iss == h_cur_lines));
      end
      if (!h_cur_valid && (h_tail_left == '0)) assert (ready && idle);
      assert (idle == (!h_cur_valid && (h_tail_left == '0)));
      // The warm-up: the extra latency on exactly the request's first starved reads.
      if (!idle) begin
        if (starved && (h_starved_q < WBits'(dwarm_lines))) assert (req_extra == dwarm_extra);
        else                                                 assert (req_extra == '0);
      end
      // Progress: an empty core with lines left requests, unless the next line
      // has neither credit nor a demand window.
      if (h_cur_valid && (h_cur_iss < h_cur_lines) && (h_outstanding == '0)
          && ((window != '0) || !starved)) begin
        assert (req_valid);
      end
    end
  end

  // The core's own immediate assertions (kdma_core.sv, `ifndef SYNTHESIS`).
  always_comb begin
    if (rst_nq) begin
      assert (32'(u_core.credit) <= 32'(PREFETCH_MAX_LINES));
      if (req_valid) begin
        assert ((u_core.req_spec ? u_core.outstanding : u_core.outstanding - u_core.spec_out_q)
                < u_core.cap);
      end
      assert (u_core.outstanding <= CapBits'(KMEM_LINES));
      if (u_core.cur_busy_q) assert (issued <= u_core.lines_q);
      if (req_valid) assert (issued < u_core.lines_q);
      if (u_core.cur_last) begin
        assert (issued == u_core.lines_q);
        assert (u_core.kmem_count_q == CapBits'(1));
        assert (u_core.inflight_q == '0);
      end
      if (u_core.tail_drain) assert (u_core.cur_busy_q);
      assert (u_core.spec_out_q <= u_core.outstanding);
      assert (rate <= core_rate);
    end
  end

  // Helper invariants: the account above, and the core's registers against it.
  always_comb begin
    if (rst_nq) begin
      assert (h_cur_drn <= h_cur_iss);
      assert (h_cur_lines <= (HBits'(1) << LINE_ADDR_BITS));
      assert (h_outstanding == h_tail_left + h_cur_iss - h_cur_drn);
      if (h_tail_left != '0) assert (h_cur_valid);
      if (!h_cur_valid) assert (h_cur_drn == h_cur_lines);
      assert (u_core.cur_busy_q == h_cur_valid);
      assert (HBits'(u_core.lines_q) == h_cur_lines);
      assert (u_core.base_line_q == h_cur_base);
      assert (HBits'(u_core.consumed_q) == h_cur_drn);
      assert (HBits'(consumed) == h_cur_drn);
      assert (HBits'(u_core.tail_q) == h_tail_left);
      assert (HBits'(u_core.inflight_q) == h_mem_q);
      assert (HBits'(u_core.kmem_count_q) == h_kmem_q);
      assert (u_core.done_q == h_done_q);
      if (!idle) begin
        assert (WBits'(u_core.u_dwarm.cnt_q) == ((h_starved_q < WBits'(dwarm_lines)) ? h_starved_q
                                                                                 : WBits'(dwarm_lines)));
      end
    end
  end

  // ---------------------------------------------------------------------------
  // The issue-rate governor, stated from its ports; the helper invariants read
  // its registers (ramp_q, rate_q, step_cnt_q). rank: what a running ramp has
  // left, {rate still to gain, granted lines left in this step}, compared
  // lexicographically.
  // ---------------------------------------------------------------------------
  localparam int RankBits = RateBits + RAMP_STEP_BITS;
  logic                      new_req;                // a request starts (a task taken while idle)
  logic                      ramping;                // a ramp runs in a busy core
  logic [RAMP_STEP_BITS-1:0] step_lines;             // the step, 0 read as 1
  logic [RankBits-1:0]       rank;
  logic                      h_ramp_req_q;           // this request started with a ramp
  logic                      h_was_busy_q, h_was_ramping_q, h_was_granted_q;
  logic [RankBits-1:0]       h_rank_q;
  logic [RateBits-1:0]       h_rate_q;

  assign new_req    = accept && idle;
  assign ramping    = !idle && u_core.u_governor.ramp_q;
  assign step_lines = (ramp_step == '0) ? RAMP_STEP_BITS'(1) : ramp_step;
  assign rank       = {core_rate - u_core.u_governor.rate_q, step_lines - 1'b1 - u_core.u_governor.step_cnt_q};

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      h_ramp_req_q    <= 1'b0;
      h_was_busy_q    <= 1'b0;
      h_was_ramping_q <= 1'b0;
    end else begin
      if (new_req) h_ramp_req_q <= (ramp_start != '0) && (ramp_start < core_rate);
      h_was_busy_q    <= !idle && !new_req;
      h_was_ramping_q <= ramping && !new_req;
    end
    h_was_granted_q <= issue;
    h_rank_q        <= rank;
    h_rate_q        <= rate;
  end

  always_comb begin
    if (rst_nq) begin
      // rate_o never stops the port, never passes the core rate.
      assert (rate != '0);
      assert (rate <= core_rate);
      // A request that starts with the ramp off runs at the core rate.
      if (!idle && !h_ramp_req_q) assert (rate == core_rate);
      // Within a request the rate never falls.
      if (h_was_busy_q && !idle) assert (rate >= h_rate_q);
      // Every granted line of a running ramp brings its end strictly closer;
      // nothing else moves it.
      if (h_was_ramping_q && !idle) begin
        if (h_was_granted_q) assert (!u_core.u_governor.ramp_q || (rank < h_rank_q));
        else                 assert (u_core.u_governor.ramp_q && (rank == h_rank_q));
      end
      // Helper invariants.
      if (u_core.u_governor.ramp_q) assert (u_core.u_governor.rate_q != '0);
      if (!idle && h_ramp_req_q) assert ((ramp_start != '0) && (ramp_start < core_rate));
      if (ramping) begin
        assert (h_ramp_req_q);
        assert (u_core.u_governor.rate_q < core_rate);
        assert (u_core.u_governor.step_cnt_q < step_lines);
      end
    end
  end

  // ---------------------------------------------------------------------------
  // The paged reading: which lines are speculative, from the account alone.
  // Line j of a task of T lines is speculative iff j mod 256 < c(T), with
  // c(T) = min(|x|, 256) and x = T's signed distance to the nearest multiple of
  // 2^14. So the speculative lines among a run [first, first + n) of one task
  // number pages * c + min(end mod 256, c) - min(first mod 256, c), pages the
  // page boundaries crossed (at most 4, as n <= KMem): no popcount needed.
  //
  // The core keeps one bit per line in a 1024-slot ring (g_spec). The harness
  // shadows the ring with two masks of its own, written at the same slots:
  // h_valid (the slot holds an outstanding line) and h_cur (a line of the
  // current task); and it notes the slot b of the current task's line 0 (bt:
  // the older task's). Line j of a task then sits in slot b + j, so the bit a
  // slot s must hold is a fixed pattern of s mod 256 for the whole task. Every
  // per-slot invariant relates a slot to its neighbour or to a pointer, never
  // to an adder: a rotated-thermometer form (s - rd < n per slot) gave 1.5 M
  // SAT variables per induction step and had not finished after 15 minutes.
  // ---------------------------------------------------------------------------
  if (MODE == CreditPaged) begin : g_paged
    localparam int PageBits   = $clog2(PREFETCH_MAX_LINES);
    localparam int PageLines  = 1 << PageBits;
    localparam int PtrBits    = $clog2(KMEM_LINES);
    localparam int CreditBits = $clog2(PREFETCH_MAX_LINES + 1);
    localparam int NBits      = CapBits + 2;  // speculative-line counts

    // c(T): the page credit of a task of T lines.
    function automatic logic [CreditBits-1:0] page_credit(input logic [HBits-1:0] lines);
      logic [RING_BITS-1:0] x;
      logic [RING_BITS:0]   mag;
      x   = lines[RING_BITS-1:0];
      mag = x[RING_BITS-1] ? ((RING_BITS + 1)'(1) << RING_BITS) - (RING_BITS + 1)'(x)
                           : (RING_BITS + 1)'(x);
      return (mag > (RING_BITS + 1)'(PREFETCH_MAX_LINES)) ? CreditBits'(PREFETCH_MAX_LINES)
                                                           : CreditBits'(mag);
    endfunction

    // The speculative lines among lines [first, first + n) of a task with page credit c.
    function automatic logic [NBits-1:0] spec_lines(input logic [HBits-1:0] first,
                                                    input logic [HBits-1:0] n,
                                                    input logic [CreditBits-1:0] c);
      logic [HBits-1:0] last;
      logic [2:0]       pages;
      logic [NBits-1:0] hi, lo;
      last  = first + n;
      pages = 3'((last >> PageBits) - (first >> PageBits));
      hi    = (NBits'(last[PageBits-1:0]) < NBits'(c)) ? NBits'(last[PageBits-1:0]) : NBits'(c);
      lo    = (NBits'(first[PageBits-1:0]) < NBits'(c)) ? NBits'(first[PageBits-1:0]) : NBits'(c);
      return NBits'(pages) * NBits'(c) + hi - lo;
    endfunction

    logic [HBits-1:0]      h_tail_end_q;  // the older task's lines
    logic [CreditBits-1:0] h_tail_c_q;    // ... and its page credit
    logic [CreditBits-1:0] cur_c;
    logic [HBits-1:0]      tail_first;    // the older task's first undrained line
    logic [HBits-1:0]      cur_out;       // the current task's lines outstanding
    logic [NBits-1:0]      spec_count;
    logic [PtrBits-1:0]    wr, rd;        // the core's ring pointers
    logic [KMEM_LINES-1:0] bits;          // ... and its bits
    logic [KMEM_LINES-1:0] h_valid_q, h_cur_q;
    logic [PtrBits-1:0]    h_b_q, h_bt_q;
    logic [PageLines-1:0]  pat_cur, pat_tail;  // the bit of a slot, by s mod 256, per task
    logic [KMEM_LINES-1:0] at_wr, at_rd, at_b; // slot s + 1 is wr, rd, b
    logic [KMEM_LINES-1:0] slot_ok;            // the per-slot invariants, by slot

    assign cur_c      = page_credit(h_cur_lines);
    assign tail_first = h_tail_end_q - h_tail_left;
    assign cur_out    = h_cur_iss - h_cur_drn;
    assign spec_count = spec_lines(tail_first, h_tail_left, h_tail_c_q)
                      + spec_lines(h_cur_drn, cur_out, cur_c);
    assign wr         = u_core.g_spec.spec_wr_q;
    assign rd         = u_core.g_spec.spec_rd_q;
    assign bits       = u_core.g_spec.spec_bits_q;

    always_ff @(posedge clk_i) begin
      if (!rst_nq) begin
        h_valid_q <= '0;
        h_cur_q   <= '0;
        h_b_q     <= '0;
      end else begin
        if (issue) begin
          h_valid_q[wr] <= 1'b1;
          h_cur_q[wr]   <= 1'b1;
        end
        if (drain) h_valid_q[rd] <= 1'b0;
        if (accept) begin  // no read is granted in that cycle
          h_cur_q <= '0;
          h_b_q   <= wr;
          h_bt_q  <= h_b_q;
        end
      end
      if (rst_nq && accept && h_cur_valid && !cur_last) begin
        h_tail_end_q <= h_cur_lines;
        h_tail_c_q   <= cur_c;
      end
    end

    // The place in its page of the line in slot q (mod 256), per task: q - b, in 8 bits.
    for (genvar q = 0; q < PageLines; q++) begin : g_place
      logic [PageBits-1:0] place_cur, place_tail;
      assign place_cur   = PageBits'(q) - h_b_q[PageBits-1:0];
      assign place_tail  = PageBits'(q) - h_bt_q[PageBits-1:0];
      assign pat_cur[q]  = (CreditBits'(place_cur) < cur_c);
      assign pat_tail[q] = (CreditBits'(place_tail) < h_tail_c_q);
    end

    for (genvar i = 0; i < KMEM_LINES; i++) begin : g_slot
      localparam int Next = (i + 1) % KMEM_LINES;
      assign at_wr[i] = (wr == PtrBits'(Next));
      assign at_rd[i] = (rd == PtrBits'(Next));
      assign at_b[i]  = (h_b_q == PtrBits'(Next));
      assign slot_ok[i] =
          // an outstanding line's bit is its task's pattern
          (!h_valid_q[i] || (bits[i] == (h_cur_q[i] ? pat_cur[i % PageLines]
                                                    : pat_tail[i % PageLines])))
          // the outstanding slots are the run [rd, wr)
          && (!h_valid_q[i] || at_wr[i] || h_valid_q[Next])
          && (h_valid_q[i] || at_rd[i] || !h_valid_q[Next])
          // in it, the older task's lines [rd, b) come first, then the current's
          && (!h_valid_q[i] || !h_cur_q[i] || at_wr[i] || h_cur_q[Next])
          && (!h_valid_q[i] || h_cur_q[i] || at_b[i] || !h_cur_q[Next]);
    end

    always_comb begin
      if (rst_nq) begin
        // The paged reading at the core: a line is speculative iff its place in
        // its page is below the task's page credit.
        if (req_valid) begin
          assert (u_core.req_spec == (CreditBits'(h_cur_iss[PageBits-1:0]) < cur_c));
        end
        // The core's account of speculative lines is exact.
        assert (NBits'(u_core.spec_out_q) == spec_count);
        // Helper invariants: the ring's pointers, masks and bits against the account.
        assert (wr - rd == PtrBits'(h_outstanding));
        assert (wr == h_b_q + PtrBits'(h_cur_iss));
        assert (&slot_ok);
        if (h_outstanding != '0) assert (h_valid_q[rd]);
        if (h_outstanding != HBits'(KMEM_LINES)) assert (!h_valid_q[wr]);
        if (h_tail_left != '0) begin
          assert (h_tail_left <= h_tail_end_q);
          assert (h_b_q - rd == PtrBits'(h_tail_left));
          assert (rd == h_bt_q + PtrBits'(tail_first));
          assert (!h_cur_q[rd]);
          if (h_cur_iss != '0) assert (h_cur_q[h_b_q]);
        end else begin
          assert (rd == h_b_q + PtrBits'(h_cur_drn));
          if (cur_out != '0) assert (h_cur_q[rd]);
        end
        assert (h_tail_left <= HBits'(KMEM_LINES));
        // The older task's page credit is its task's (the induction's first counterexample
        // started from h_tail_c_q = 271, above any page).
        if (h_tail_left != '0) assert (h_tail_c_q == page_credit(h_tail_end_q));
      end
    end
  end

  // ---------------------------------------------------------------------------
  // Non-vacuity: a second task taken while the first still drains, and both done
  // ---------------------------------------------------------------------------
  assign witness_o = rst_nq && overlap_q && (taken_q == 2'd2) && (dones_q == 2'd2) && idle;

  // The paged reading's cover: the same, with the speculative path and the ramp in use.
  logic spec_grant, rate_rise, spec_seen_q, rate_rose_q;
  assign spec_grant = issue && u_core.req_spec;
  assign rate_rise  = h_was_busy_q && !idle && (rate > h_rate_q);

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      spec_seen_q <= 1'b0;
      rate_rose_q <= 1'b0;
    end else begin
      if (spec_grant) spec_seen_q <= 1'b1;
      if (rate_rise)  rate_rose_q <= 1'b1;
    end
  end

  assign witness_gov_o = witness_o && spec_seen_q && rate_rose_q;

endmodule

`resetall
