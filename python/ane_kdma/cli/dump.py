"""`dump`: write the task descriptor of X[1,D] x W[D,N] in the chip's TD layout."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.fileio import write_atomic
from ane_kdma.hw import lap_and_offset
from ane_kdma.regdump import FORMATS, write_dump
from ane_kdma.regdump.writer import bytes_per_core


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "dump",
        help="write a task descriptor for X[1,D] x W[D,N]",
        description=(
            "Write the TD words that follow from D and N (core sizes N/cores*D*2 bytes, bases "
            "i*size, Cin=D, L2 stride and its mirror), at the chip's register offsets. Text "
            "forms go to stdout unless --out is given; the binary needs --out."
        ),
    )
    sp.add_argument("--d", type=common.positive, required=True, help="contracting dimension D")
    sp.add_argument(
        "--n", type=common.positive, required=True, help="output channels N, a multiple of cores"
    )
    sp.add_argument("--format", choices=FORMATS, default="text", help="output format (text)")
    sp.add_argument("--out", type=Path, default=None, help="write here (atomically)")
    common.add_common(sp, engine_default=None)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the dump; InputError propagates to the CLI's one-line handler."""
    chip = common.load_chip(args)
    fmt = args.format
    out: Path | None = args.out
    as_json = bool(getattr(args, "json", False))
    data = write_dump(args.d, args.n, fmt, chip)
    if out is None:
        if fmt == "bin":
            raise InputError("the binary format needs --out PATH (it is not written to a terminal)")
        if as_json:
            raise InputError("--json needs --out PATH: without it the dump itself goes to stdout")
        sys.stdout.write(data.decode())
        return 0
    write_atomic(out, data)
    size = bytes_per_core(args.d, args.n, chip)
    lines = size // chip.line_bytes
    k, x = lap_and_offset(lines, chip.ring_lines)
    if as_json:
        summary = {
            "path": str(out),
            "format": fmt,
            "d": args.d,
            "n": args.n,
            "bytes_per_core": size,
            "lines_per_core": lines,
            "k": k,
            "x": x,
        }
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(
            f"wrote {out} ({fmt}, D={args.d}, N={args.n}, "
            f"0x{size:x} bytes per core, k {k}, x {x:+d})\n"
        )
    return 0
