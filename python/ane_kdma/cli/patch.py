"""`patch`: rewrite a Core ML ML Program so that no weight streams in the notch (extra `coreml`)."""

from __future__ import annotations

import argparse
import json

from ane_kdma.cli import common
from ane_kdma.cli.plan import add_variant
from ane_kdma.errors import InputError
from ane_kdma.patch import patch


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "patch", help="split the notched weights of an .mlpackage (needs the coreml extra)"
    )
    sp.add_argument("src", metavar="IN.mlpackage")
    sp.add_argument("dst", metavar="OUT.mlpackage", nargs="?")
    sp.add_argument("--dry-run", action="store_true", help="list what would change; write nothing")
    add_variant(sp)
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.dst is None and not args.dry_run:
        raise InputError("patch needs IN.mlpackage OUT.mlpackage (or --dry-run)")
    chip = common.load_chip(args)
    doc = patch(args.src, args.dst, chip, args.variant, args.engine, args.dry_run)
    if args.json:
        print(json.dumps(doc))
        return 0
    verb = "would split" if args.dry_run else "split"
    print(
        f"{doc['in']}: {doc['weights']} constant fp16 weights; {verb} {len(doc['changed'])} "
        f"({doc['variant']} hardware, chip {chip.name}, {doc['engine']} engine)"
    )
    if doc["changed"]:
        keys = [
            "op",
            "op_type",
            "shape",
            "lines_per_core",
            "axis",
            "splits",
            "parts",
            "time_us_before",
            "time_us_after",
        ]
        rows = [{**c, "parts": "+".join(map(str, c["parts"]))} for c in doc["changed"]]
        common.print_table(rows, keys)
    for s in doc["skipped"]:
        print(f"left alone: {s['op']} ({s['op_type']}): {s['reason']}")
    if doc["out"]:
        print(f"wrote {doc['out']}")
    return 0
