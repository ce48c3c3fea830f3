// SPDX-License-Identifier: Apache-2.0
// Testbench top for the credit unit alone: one kdma_credit per credit-mode code, side by side.
//
// Every instance is the unit as the cores build it (its mode a parameter), and all of them
// read the same task and progress, so one build and one simulator run check every reading
// the registry has (tb/cocotb_credit.py picks each hypothesis's lane by its encoding).
// Codes no reading uses give the unit's default, credit 0. The credit unit is
// combinational: the lanes settle within the same time step as the inputs.

`default_nettype none

module kdma_credit_tb #(
  // Width of the prefetch ring pointers, in lines (a chip's ring_bits).
  parameter int RingBits = kdma_pkg::RING_BITS,
  // Clamp on the look-ahead credit, in lines (a chip's prefetch_max_lines).
  parameter int PrefetchMaxLines = kdma_pkg::PREFETCH_MAX_LINES
) (
  input  logic [RingBits-1:0]             start_ptr_i,
  input  logic [kdma_pkg::COUNT_BITS-1:0] transfer_lines_i,
  input  logic [kdma_pkg::COUNT_BITS-1:0] issued_lines_i,
  // lane m: the credit of the unit built with CreditMode = m
  output logic [kdma_pkg::CREDIT_MODES-1:0][$clog2(PrefetchMaxLines+1)-1:0] credit_o,
  output logic [kdma_pkg::CREDIT_MODES-1:0]                                 spec_o
);

  for (genvar m = 0; m < kdma_pkg::CREDIT_MODES; m++) begin : g_mode
    kdma_credit #(
      .CreditMode      (kdma_pkg::CREDIT_MODE_BITS'(m)),
      .RingBits        (RingBits),
      .PrefetchMaxLines(PrefetchMaxLines)
    ) u_credit (
      .start_ptr_i,
      .transfer_lines_i,
      .issued_lines_i,
      .credit_o(credit_o[m]),
      .spec_o  (spec_o[m])
    );
  end

endmodule

`resetall
