// SPDX-License-Identifier: Apache-2.0
// The demand path's warm-up of one core: a request's first starved reads pop late.

`default_nettype none

// A read granted with no credit (starved: it goes through the demand path)
// while fewer than dwarm_lines_i starved reads have been granted in this
// request carries dwarm_extra_i cycles of extra latency to the memory, which
// keeps its port in order (the line pops no earlier than the one before it).
// The count clears when a request (a task taken while idle) starts and holds
// at dwarm_lines_i. Either setting at 0 turns it off. (issue 16;
// docs/fidelity.md: the demand path's reads go out cold.)
module kdma_dwarm (
  input  logic clk_i,
  input  logic rst_ni,

  // ---- Run-time settings ----
  input  logic [kdma_pkg::DWARM_LINES_BITS-1:0] dwarm_lines_i,
  input  logic [kdma_pkg::DWARM_EXTRA_BITS-1:0] dwarm_extra_i,

  // ---- The core ----
  input  logic                                  request_i,  // a task taken while idle
  input  logic                                  starved_i,  // the next read has credit 0
  input  logic                                  grant_i,    // the memory took the read
  output logic [kdma_pkg::DWARM_EXTRA_BITS-1:0] extra_o     // the next read's extra latency
);

  import kdma_pkg::*;

  logic [DWARM_LINES_BITS-1:0] cnt_q;  // starved reads granted in this request (held)
  logic                        hot;    // the next read, if granted, is one of the warm-up

  assign hot     = starved_i && (cnt_q < dwarm_lines_i);
  assign extra_o = hot ? dwarm_extra_i : '0;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cnt_q <= '0;
    end else if (request_i) begin
      cnt_q <= '0;
    end else if (grant_i && hot) begin
      cnt_q <= cnt_q + 1'b1;
    end
  end

endmodule

`resetall
