// SPDX-License-Identifier: Apache-2.0
// Formal harness around kdma_core: back-to-back symbolic tasks, free memory and consumer.
//
// The free inputs are the module's ports, which the solver sets on every cycle
// (`sat -set-def-inputs`; no anyseq black box is needed here). It offers a task
// (any 32-bit byte address and byte size) on any cycle, changes the demand
// window at will (<= KMem), and drives the memory
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
//     none (dwarm_lines held for the trace, as a run-time setting is).
// The core's own immediate assertions sit under `ifndef SYNTHESIS`, which
// read_slang defines (and yosys-slang cannot lower them inside the core's
// async-reset always_ff); they are restated here. The helper invariants at the
// end tie the core's registers (hierarchical references) to the harness
// account, which makes the 32-bit induction close at length 1.

`default_nettype none

module kdma_formal_core
#(
  // Credit arithmetic under test (kdma_pkg::credit_mode_e): 2 Fixed, 1 Signed.
  parameter int CreditMode = 2
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
  input wire [31:0] dwarm_lines_i, // demand path's warm-up: starved lines (held for the trace)
  input wire [31:0] dwarm_extra_i, // ... and their extra latency (free)
  // ---- Witness for the non-vacuity run ----
  output wire       witness_o      // a second task was taken while the first
                                   //   still drained, and both are done
);

  import kdma_pkg::*;

  localparam int CapBits = $clog2(KMEM_LINES + 1);
  localparam logic [CREDIT_MODE_BITS-1:0] MODE = CREDIT_MODE_BITS'(CreditMode);
  localparam int HBits = COUNT_BITS + 1;  // harness line counts: wide enough never to wrap

  if ((ADDR_BITS != 32) || (CapBits > 32)) begin : g_port_check
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

  // ---------------------------------------------------------------------------
  // Device under test
  // ---------------------------------------------------------------------------
  logic                      ready, idle, done, req_valid, kmem_valid;
  logic [LINE_ADDR_BITS-1:0] req_addr;
  logic [DWARM_EXTRA_BITS-1:0] req_extra;
  logic [COUNT_BITS-1:0]     issued, consumed;
  settings_t                 settings;

  // The settings struct: the window and the warm-up free, the governor off (proofs are about
  // order), the memory's latency and ceiling unread by the core.
  always_comb begin
    settings                    = '0;
    settings.window             = WINDOW_BITS'(window);
    settings.core_rate_q16      = RATE_BITS'(RATE_ONE);
    settings.dwarm_lines        = dwarm_lines_i[DWARM_LINES_BITS-1:0];  // only req_extra_o reads it
    settings.dwarm_extra_cycles = dwarm_extra_i[DWARM_EXTRA_BITS-1:0];
  end

  kdma_core #(
    .CreditMode(MODE)
  ) u_core (
    .clk_i,
    .rst_ni              (rst_nq),
    .settings_i          (settings),
    .rate_o              (),
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
  logic [DWARM_LINES_BITS-1:0] dwarm_lines, h_dwarm_lines_q;  // the setting; as last cycle
  logic [DWARM_EXTRA_BITS-1:0] dwarm_extra;
  logic [WBits-1:0]            h_starved_q;
  logic                        starved;   // the next read has no credit

  assign dwarm_lines = dwarm_lines_i[DWARM_LINES_BITS-1:0];
  assign dwarm_extra = dwarm_extra_i[DWARM_EXTRA_BITS-1:0];
  assign starved     = (u_core.credit == '0);

  always_ff @(posedge clk_i) begin
    h_dwarm_lines_q <= dwarm_lines;
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
  always_comb begin
    assume (window_i <= 32'(KMEM_LINES));
    if (rst_nq) assume (dwarm_lines == h_dwarm_lines_q);  // a run-time setting holds steady
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
      if (starved && (h_starved_q < WBits'(dwarm_lines))) assert (req_extra == dwarm_extra);
      else                                                 assert (req_extra == '0);
    end
  end

  // The core's own immediate assertions (kdma_core.sv, `ifndef SYNTHESIS`).
  always_comb begin
    if (rst_nq) begin
      assert (32'(u_core.credit) <= 32'(PREFETCH_MAX_LINES));
      if (req_valid) assert (u_core.outstanding < u_core.cap);
      assert (u_core.outstanding <= CapBits'(KMEM_LINES));
      if (u_core.cur_busy_q) assert (issued <= u_core.lines_q);
      if (req_valid) assert (issued < u_core.lines_q);
      if (u_core.cur_last) begin
        assert (issued == u_core.lines_q);
        assert (u_core.kmem_count_q == CapBits'(1));
        assert (u_core.inflight_q == '0);
      end
      if (u_core.tail_drain) assert (u_core.cur_busy_q);
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
      assert (WBits'(u_core.u_dwarm.cnt_q) == ((h_starved_q < WBits'(dwarm_lines)) ? h_starved_q
                                                                               : WBits'(dwarm_lines)));
    end
  end

  // ---------------------------------------------------------------------------
  // Non-vacuity: a second task taken while the first still drains, and both done
  // ---------------------------------------------------------------------------
  assign witness_o = rst_nq && overlap_q && (taken_q == 2'd2) && (dones_q == 2'd2) && idle;

endmodule

`resetall
