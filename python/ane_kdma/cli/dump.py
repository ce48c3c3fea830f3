"""`dump`: write the task descriptor of X[1,D] x W[D,N] in the chip's TD layout."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ane_kdma.cli import common
from ane_kdma.cli.common import OutputError, PipeClosed
from ane_kdma.errors import InputError
from ane_kdma.fileio import STDOUT, write_atomic
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
            "forms go to stdout unless --out is given; the binary needs --out (--out - is "
            "stdout, for the binary too when stdout is not a terminal)."
        ),
    )
    sp.add_argument("--d", type=common.positive, required=True, help="contracting dimension D")
    sp.add_argument(
        "--n", type=common.positive, required=True, help="output channels N, a multiple of cores"
    )
    sp.add_argument("--format", choices=FORMATS, default="text", help="output format (text)")
    sp.add_argument("--out", type=Path, default=None, help="write here (atomically); - is stdout")
    common.add_common(sp, engine_default=None)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the dump; InputError propagates to the CLI's one-line handler."""
    chip = common.load_chip(args)
    fmt = args.format
    out: Path | None = args.out
    as_json = bool(getattr(args, "json", False))
    to_stdout = out is None or str(out) == STDOUT
    if to_stdout and as_json:
        raise InputError("--json needs --out PATH: without it the dump itself goes to stdout")
    if to_stdout and fmt == "bin" and out is None:
        raise InputError("the binary format needs --out PATH (or --out - for stdout, redirected)")
    data = write_dump(args.d, args.n, fmt, chip)
    if out is None or to_stdout:
        if fmt == "bin":
            _write_binary(data)
        else:
            sys.stdout.write(data.decode())
        return 0
    assert out is not None  # a path, or stdout above
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


def _write_binary(data: bytes) -> None:
    """The binary dump on stdout's byte stream: never to a terminal, failures as for text."""
    try:
        tty = sys.stdout.isatty()
        buffer = sys.stdout.buffer
    except (AttributeError, ValueError, OSError):  # no stdout at all
        raise OutputError("it is closed") from None
    if tty:
        raise InputError("--format bin --out -: standard output is a terminal (redirect it)")
    try:
        sys.stdout.flush()
        buffer.write(data)
        buffer.flush()
    except BrokenPipeError:
        raise PipeClosed from None
    except (OSError, ValueError) as exc:
        raise OutputError(getattr(exc, "strerror", None) or str(exc)) from None
