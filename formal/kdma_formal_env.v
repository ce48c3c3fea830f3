// SPDX-License-Identifier: Apache-2.0
// Free choices of the formal environment: a symbolic task held for the whole run, and free handshakes.
//
// Read with `read_verilog -formal` (yosys' own frontend honours the anyconst and
// anyseq attributes). The harness kdma_formal_ring.sv is read with read_slang,
// which does not, and instantiates this module as a black box: so the widths
// below are fixed and must match kdma_pkg (LINE_ADDR_BITS = 26, COUNT_BITS = 32,
// $clog2(KMEM_LINES + 1) = 11). slang rejects a port-width mismatch.

`default_nettype none

module kdma_formal_env (
  // ---- Task: chosen once by the solver, stable for the whole trace ----
  output wire [25:0] base_line_o,       // first line address of the transfer
  output wire [31:0] transfer_lines_o,  // lines in the transfer (any 32-bit value)
  output wire [10:0] window_o,          // demand window, lines (harness assumes <= 1024)
  // ---- Handshakes: chosen afresh by the solver every cycle ----
  output wire        req_ready_o,       // memory accepts the read request
  output wire        consume_o          // consumer wants to drain one line
);

  (* anyconst *) reg [25:0] base_line;
  (* anyconst *) reg [31:0] transfer_lines;
  (* anyconst *) reg [10:0] window;
  (* anyseq *)   reg        req_ready;
  (* anyseq *)   reg        consume;

  assign base_line_o      = base_line;
  assign transfer_lines_o = transfer_lines;
  assign window_o         = window;
  assign req_ready_o      = req_ready;
  assign consume_o        = consume;

endmodule

`resetall
