// SPDX-License-Identifier: Apache-2.0
// Free choices of the formal environment: a symbolic task held for the whole run, and free handshakes.
//
// Read with `read_verilog -formal`: yosys' own frontend turns the anyconst and
// anyseq attributes into solver-chosen values. The harness kdma_formal_ring.sv
// is read with read_slang, which ignores those attributes, and instantiates
// this module as a black box. A black box has no parameters, and slang adapts
// port widths silently, so every task value is a full 32-bit word here; the
// harness takes the bits it needs (its widths come from kdma_pkg) and checks
// at elaboration that 32 bits are enough.

`default_nettype none

module kdma_formal_env (
  // ---- Task: chosen once by the solver, stable for the whole trace ----
  output wire [31:0] base_line_o,       // first line address of the transfer
  output wire [31:0] transfer_lines_o,  // lines in the transfer (any 32-bit value)
  output wire [31:0] window_o,          // demand window, lines
  // ---- Handshakes: chosen afresh by the solver every cycle ----
  output wire        req_ready_o,       // memory accepts the read request
  output wire        drain_o,           // one outstanding line may leave KMem
  output wire        drain_spec_o       // ... a speculative one, if both kinds are outstanding
);

  // Driven by the solver, not by logic.
  /* verilator lint_off UNDRIVEN */
  (* anyconst *) reg [31:0] base_line;
  (* anyconst *) reg [31:0] transfer_lines;
  (* anyconst *) reg [31:0] window;
  (* anyseq *)   reg        req_ready;
  (* anyseq *)   reg        drain;
  (* anyseq *)   reg        drain_spec;
  /* verilator lint_on UNDRIVEN */

  assign base_line_o      = base_line;
  assign transfer_lines_o = transfer_lines;
  assign window_o         = window;
  assign req_ready_o      = req_ready;
  assign drain_o          = drain;
  assign drain_spec_o     = drain_spec;

endmodule

`resetall
