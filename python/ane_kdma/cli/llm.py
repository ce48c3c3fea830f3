"""`llm`: decode tokens/s of a known model, unsplit and with the split plan."""

from __future__ import annotations

import argparse
import json

from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.llm import decode_rate, get_model, load_models


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("llm", help="decode tokens/s of a known model, unsplit and split")
    sp.add_argument("--model", help="see --list")
    sp.add_argument("--list", action="store_true", help="name the known models")
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        if args.model:
            raise InputError("--list names the models; it takes no --model")
        models = load_models()
        if args.json:
            print(json.dumps(sorted(models)))
        else:
            for name, cfg in sorted(models.items()):
                print(f"{name:<16} {cfg.label}")
        return 0
    if not args.model:
        raise InputError("llm needs --model NAME (or --list)")
    chip = common.load_chip(args)
    row = decode_rate(get_model(args.model), chip, engine=args.engine)
    if args.json:
        print(json.dumps(row))
    else:
        flat = {k: v for k, v in row.items() if k != "affected"}
        flat["affected"] = (
            ", ".join(f"{a['count']}x {a['shape']} /{a['splits']}" for a in row["affected"])
            or "none"
        )
        common.print_table([flat], list(flat))
    return 0
