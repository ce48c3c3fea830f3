// SPDX-License-Identifier: Apache-2.0
// Behavioural DRAM shared by the cores: in order, fixed latency, per-core and aggregate rate limits.

`default_nettype none

module kdma_mem_model
#(
  // Number of request/response ports (one per core).
  parameter int NumCores = 1,
  // Requests each port may have outstanding (the core caps itself lower).
  parameter int DepthLines = kdma_pkg::KMEM_LINES,
  // 1: each response carries its line address and test data (line_data).
  // 0: counters only; no address queue and no test data, and resp_addr_o
  // and resp_data_o read 0 (the grant and response timing are the same).
  parameter bit Payload = 1'b1
) (
  input  logic clk_i,
  input  logic rst_ni,

  // ---- Run-time settings (hold steady while any task runs) ----
  // Cycles from an accepted request to its response, 1..MAX_LATENCY_CYCLES (0 acts as
  // 1; a request's extra latency, up to 2^DWARM_EXTRA_BITS - 1, comes on top).
  input  logic [kdma_pkg::LATENCY_BITS-1:0]                latency_i,
  // Per-port rate limit in lines per cycle, fixed point, 0 < rate <= 1.0
  // (each core's governor drives its own port's).
  input  logic [NumCores-1:0][kdma_pkg::RATE_BITS-1:0]    core_rate_i,
  // Aggregate ceiling over all ports in lines per cycle, fixed point.
  input  logic [kdma_pkg::AGG_RATE_BITS-1:0]              agg_rate_i,
  // A new task starts: round-robin arbitration restarts at port 0.
  input  logic                                  arb_restart_i,

  // ---- Requests, one line each ----
  input  logic [NumCores-1:0]                     req_valid_i,
  output logic [NumCores-1:0]                     req_ready_o,  // the grant
  input  logic [NumCores-1:0][kdma_pkg::LINE_ADDR_BITS-1:0] req_addr_i,
  // Cycles this request's response comes later than latency_i (the demand
  // path's warm-up); the port stays in order, so a line behind it waits too.
  input  logic [NumCores-1:0][kdma_pkg::DWARM_EXTRA_BITS-1:0] req_extra_i,

  // ---- Responses, in request order, no back-pressure ----
  output logic [NumCores-1:0]                     resp_valid_o,
  output logic [NumCores-1:0][kdma_pkg::LINE_ADDR_BITS-1:0] resp_addr_o,
  output logic [NumCores-1:0][kdma_pkg::LINE_BITS-1:0]      resp_data_o
);

  import kdma_pkg::*;

  localparam int LatBits   = LATENCY_BITS;
  // A due time is at most latency + extra ahead, and the head of a port is at
  // most one extra latency overdue (a line waits behind a slower one before
  // it): one bit for the sum, one for the sign keep the compare wrap-safe.
  localparam int DelayBits = ((LatBits > DWARM_EXTRA_BITS) ? LatBits : DWARM_EXTRA_BITS) + 1;
  localparam int TsBits    = DelayBits + 1;
  localparam int PtrBits   = $clog2(DepthLines);
  localparam int CoreBits  = (NumCores > 1) ? $clog2(NumCores) : 1;
  localparam int AccBits   = AGG_RATE_BITS;  // holds bank (<= 1.0) + agg rate (<= AGG_RATE_MAX_Q16)
  localparam logic [AccBits-1:0] One = AccBits'(RATE_ONE);

  // ---------------------------------------------------------------------------
  // Rate limits: token buckets that bank at most one line of credit. A port may
  // be granted when its bank plus this cycle's refill reaches one line; the
  // aggregate bucket grants at most floor(bank + refill) lines per cycle, to
  // eligible ports in round-robin order.
  // ---------------------------------------------------------------------------
  logic [TsBits-1:0]                   now_q;
  logic [AccBits-1:0]                  agg_q;
  logic [CoreBits-1:0]                 rr_q;
  logic [NumCores-1:0]                 fifo_full;
  logic [NumCores-1:0]                 eligible;
  logic [NumCores-1:0]                 grant;
  logic [AccBits-1:0]                  agg_avail;
  logic [AccBits-1:0]                  agg_spent;
  logic [CoreBits-1:0]                 rr_d;
  // Each port's response line (Payload), one variable the ports write a slice each of: as
  // 16 continuous assignments to slices of the output port, Icarus resolved the whole
  // NumCores x 512-bit net bit by bit (with strengths) on every port's new line.
  logic [NumCores-1:0][LINE_BITS-1:0]  resp_data;

  assign resp_data_o = resp_data;

  assign agg_avail = agg_q + AccBits'(agg_rate_i);

  always_comb begin
    int idx;
    grant     = '0;
    agg_spent = '0;
    rr_d      = rr_q;
    for (int i = 0; i < NumCores; i++) begin
      idx = int'(rr_q) + i;
      if (idx >= NumCores) idx = idx - NumCores;
      if (eligible[idx] && (agg_avail - agg_spent >= One)) begin
        grant[idx] = 1'b1;
        agg_spent  = agg_spent + One;
        rr_d       = (idx + 1 >= NumCores) ? '0 : CoreBits'(idx + 1);
      end
    end
  end

  assign req_ready_o = grant;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      now_q <= '0;
      agg_q <= One;
      rr_q  <= '0;
    end else begin
      now_q <= now_q + 1'b1;
      rr_q  <= arb_restart_i ? '0 : rr_d;
      agg_q <= (agg_avail - agg_spent > One) ? One : agg_avail - agg_spent;
    end
  end

  // ---------------------------------------------------------------------------
  // Per port: its token bucket, and its in-order response queue of (line
  // address, due cycle).
  // ---------------------------------------------------------------------------
  for (genvar c = 0; c < NumCores; c++) begin : g_port
    // The port's token bucket (its own register: a packed array of all the
    // ports' buckets costs Verilator a wide word per port on every cycle).
    logic [AccBits-1:0]        tok_q, tok_sum;

    assign tok_sum     = tok_q + AccBits'(core_rate_i[c]);
    assign eligible[c] = req_valid_i[c] && !fifo_full[c] && (tok_sum >= One);

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni)            tok_q <= One;  // buckets start full, as the cycle model assumes
      else if (grant[c])      tok_q <= tok_sum - One;
      else if (tok_sum > One) tok_q <= One;
      else                    tok_q <= tok_sum;
    end

    logic [TsBits-1:0]         due_mem  [DepthLines];
    logic [PtrBits-1:0]        wr_q, rd_q;
    logic [PtrBits:0]          count_q;
    logic [TsBits-1:0]         head_wait;   // now - due, as a signed quantity
    logic                      pop;

    assign fifo_full[c] = (count_q == (PtrBits + 1)'(DepthLines));
    assign head_wait    = now_q - due_mem[rd_q];
    assign pop          = (count_q != '0) && !head_wait[TsBits-1];

    assign resp_valid_o[c] = pop;

    always_ff @(posedge clk_i) begin
      if (grant[c]) due_mem[wr_q] <= now_q + TsBits'(latency_i) + TsBits'(req_extra_i[c]);
    end

    // The payload: each response's line address, and its test data.
    if (Payload) begin : g_payload
      logic [LINE_ADDR_BITS-1:0] addr_mem [DepthLines];

      assign resp_addr_o[c] = addr_mem[rd_q];
      always_comb resp_data[c] = line_data(addr_mem[rd_q]);

      always_ff @(posedge clk_i) begin
        if (grant[c]) addr_mem[wr_q] <= req_addr_i[c];
      end
    end else begin : g_no_payload
      logic unused_addr;  // the request address only feeds the payload

      assign unused_addr    = ^req_addr_i[c];
      assign resp_addr_o[c] = '0;
      assign resp_data[c]   = '0;
    end

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        wr_q    <= '0;
        rd_q    <= '0;
        count_q <= '0;
      end else begin
        if (grant[c]) wr_q <= wr_q + 1'b1;
        if (pop)      rd_q <= rd_q + 1'b1;
        count_q <= count_q + (PtrBits + 1)'(grant[c]) - (PtrBits + 1)'(pop);
      end
    end
  end

endmodule

`resetall
