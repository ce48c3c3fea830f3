"""`erratum`: cycles per core at k x ring lines, each buggy hypothesis against the fix."""

from __future__ import annotations

import argparse
import json

from ane_kdma import hypotheses as hyps
from ane_kdma import runner
from ane_kdma.cli import common
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError

MAX_LAPS = 255  # a bound on the work: the model's cost grows with k^2 (k = 1..LAPS, k laps each)


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("erratum", help="cycles at k x ring lines, each buggy reading vs fixed")
    sp.add_argument("--laps", type=common.positive, default=8, help="k = 1..LAPS (8)")
    sp.add_argument(
        "--cores", type=common.positive, default=1, help="cores streaming at once (1: per core)"
    )
    common.add_jobs(sp, "the workloads")
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    lb = chip.line_bytes
    fit = ((1 << 32) - 1) // (chip.ring_lines * lb)
    if args.laps > fit:
        raise InputError(f"--laps {args.laps}: at most {fit} laps fit the 32-bit size")
    common.check_at_most(args.laps, MAX_LAPS, "--laps", "the cost grows with the square of it")
    if args.cores > chip.cores:
        raise InputError(f"--cores {args.cores}: chip {chip.name} has {chip.cores}")
    laps = list(range(1, args.laps + 1))
    lines = [k * chip.ring_lines for k in laps]
    loads = [Workload.from_size(n * lb, args.cores, 1, lb) for n in lines]
    with runner.options(**common.run_options(args)):  # --jobs, --scheduler
        table = {h.name: runner.run_many(args.engine, h, chip, loads) for h in hyps.registry()}
    fixed = table[hyps.FIXED]
    rows = []
    for i, k in enumerate(laps):
        row: dict[str, object] = {"k": k, "lines": lines[i], "fixed": fixed[i].cycles}
        for h in hyps.buggy():
            c = table[h.name][i].cycles
            row[h.name] = c
            row[f"{h.name}/fixed"] = round(c / fixed[i].cycles, 2)
        rows.append(row)
    if args.json:
        print(json.dumps({"engine": args.engine, "rows": rows}))
    else:
        common.print_header("erratum", chip, args.engine, "kernel-DMA cycles per core")
        common.print_table(rows, list(rows[0]))
    return 0
