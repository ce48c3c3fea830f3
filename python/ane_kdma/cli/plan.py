"""`plan`: which weights sit in the notch, and how to split them."""

from __future__ import annotations

import argparse
import json

from ane_kdma.cli import common
from ane_kdma.plan import Shape, plan_shape


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("plan", help="which fp16 weights are in the notch, and how to split them")
    sp.add_argument("--shape", action="append", required=True, metavar="CINxCOUT")
    sp.add_argument(
        "--variant",
        default="signed",
        type=common.variant,
        help="the buggy reading to plan against (signed fits best)",
    )
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    shapes = [Shape.parse(t, chip) for t in args.shape]
    rows = [plan_shape(sh, chip, args.variant, args.engine).as_dict() for sh in shapes]
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"split plan for {args.variant.name} hardware, chip {chip.name}")
        common.print_table(rows, list(rows[0]))
    return 0
