"""`validate`: modeled against measured on every dataset the chip has; exit 1 outside tolerance."""

from __future__ import annotations

import argparse
import json

from ane_kdma import progress
from ane_kdma import validate as v
from ane_kdma.cli import common


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "validate",
        help="modeled against measured on every bundled dataset; exit 1 outside tolerance",
        description=v.__doc__.split("\n\n")[0],
    )
    common.add_jobs(sp, "the workloads")
    sp.add_argument(
        "--no-ranking",
        action="store_true",
        help="skip the ranking of every fitted hypothesis x mechanism (the chip's fits.json)",
    )
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    if not args.json:  # the long work is next: say so first, where a person watches
        fits = 0 if getattr(args, "no_ranking", False) else len(chip.fits)
        ranked = f", then ranks {fits} fits on their own profiles" if fits else ""
        progress.note(
            f"validate: runs every row on the {args.engine} engine{ranked}; this takes a "
            "minute or more on a small machine"
        )
    report = v.validate(
        args.engine,
        chip,
        rank=not getattr(args, "no_ranking", False),
        **common.run_options(args),  # --jobs, --scheduler, quiet under --json
    )
    if args.json:
        print(json.dumps(v.to_json(report, chip)))
    else:
        print(v.render(report, chip))
    return report.exit_status
