// SPDX-License-Identifier: Apache-2.0
// Issue-rate governor of one core: each request starts slow and steps up to the core rate.

`default_nettype none

// A duty governor on the token refill the memory port applies to this core
// (the rate mechanism the chip's profile fits; docs/fidelity.md). A request (a
// task taken while idle) starts at ramp_start_i lines/cycle and gains
// ramp_inc_i every ramp_step_i granted lines, up to core_rate_i (all Q.16).
// ramp_start_i = 0, or at or above the core rate, turns it off; ramp_step_i = 0
// acts as 1. Idle, the port refills at the core rate.
module kdma_governor (
  input  logic clk_i,
  input  logic rst_ni,

  // ---- Run-time settings ----
  input  logic [kdma_pkg::RATE_BITS-1:0]      core_rate_i,
  input  logic [kdma_pkg::RATE_BITS-1:0]      ramp_start_i,
  input  logic [kdma_pkg::RAMP_STEP_BITS-1:0] ramp_step_i,
  input  logic [kdma_pkg::RATE_BITS-1:0]      ramp_inc_i,

  // ---- The core ----
  input  logic                                request_i,  // a task taken while idle
  input  logic                                busy_i,     // the core has a task
  input  logic                                grant_i,    // the memory took one of its reads
  output logic [kdma_pkg::RATE_BITS-1:0]      rate_o      // the port's token refill, Q.16
);

  import kdma_pkg::*;

  // ramp_q set: rate_q holds the ramp's current rate (below the core rate).
  logic [RATE_BITS-1:0]      rate_q;
  logic [RAMP_STEP_BITS-1:0] step_cnt_q;
  logic                      ramp_q, ramp_on;
  logic [RATE_BITS:0]        rate_next;

  assign ramp_on   = (ramp_start_i != '0) && (ramp_start_i < core_rate_i);
  assign rate_next = (RATE_BITS + 1)'(rate_q) + (RATE_BITS + 1)'(ramp_inc_i);
  // The governor throttles a busy core only. (rate_q < core_rate_i while a ramp
  // runs; the compare only matters if the core rate is lowered between requests.)
  assign rate_o    = (ramp_q && busy_i && (rate_q < core_rate_i)) ? rate_q : core_rate_i;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ramp_q     <= 1'b0;
      rate_q     <= '0;
      step_cnt_q <= '0;
    end else if (request_i) begin
      ramp_q     <= ramp_on;
      rate_q     <= ramp_start_i;
      step_cnt_q <= '0;
    end else if (grant_i && ramp_q) begin
      if (step_cnt_q + 1'b1 >= ramp_step_i) begin
        step_cnt_q <= '0;
        if (rate_next >= (RATE_BITS + 1)'(core_rate_i)) ramp_q <= 1'b0;
        else                                             rate_q <= RATE_BITS'(rate_next);
      end else begin
        step_cnt_q <= step_cnt_q + 1'b1;
      end
    end
  end

endmodule

`resetall
