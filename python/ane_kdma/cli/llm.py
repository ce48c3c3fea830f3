"""`llm`: decode tokens/s of a model, unsplit and with the split plan, projection by projection."""

from __future__ import annotations

import argparse
import json

from ane_kdma import bands
from ane_kdma.cli import common
from ane_kdma.cli.plan import add_axis, add_variant, add_weight_options
from ane_kdma.errors import InputError
from ane_kdma.llm import SCOPES, decode_rate, get_model, load_models, read_config

MAX_SHARDS = 1024  # ANEMLL uses 8 or 16; far more is a typo, and each shard costs engine runs


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "llm",
        help="decode tokens/s of a model, unsplit and split",
        description="Decode tokens/s of a model, unsplit and with the split plan, projection by "
        f"projection. {bands.HELP} The plans are chosen on the profile; the band times those "
        "plans under each fit.",
    )
    src = sp.add_mutually_exclusive_group()
    src.add_argument("--model", help="a bundled model (see --list)")
    src.add_argument("--config", metavar="PATH", help="a Hugging Face config.json")
    sp.add_argument("--list", action="store_true", help="name the bundled models")
    sp.add_argument(
        "--scope",
        default="all",
        choices=list(SCOPES),
        help="which projections the patch splits (all); mlp is the article's Llama patch",
    )
    add_weight_options(
        sp, None, "LM-head shards (default: the model's; 8 for Llama, 16 for Qwen and Gemma)"
    )
    add_variant(sp)
    add_axis(sp)
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        if args.model or args.config:
            raise InputError("--list names the models; it takes no --model or --config")
        models = load_models()
        if args.json:
            print(json.dumps(sorted(models)))
        else:
            for name, cfg in sorted(models.items()):
                print(f"{name:<16} {cfg.label}")
        return 0
    if args.lm_head_shards is not None and args.lm_head_shards > MAX_SHARDS:
        raise InputError(f"--lm-head-shards {args.lm_head_shards}: at most {MAX_SHARDS}")
    if args.config:
        model = read_config(args.config, args.lm_head_shards)
    elif args.model:
        model = get_model(args.model)
    else:
        raise InputError("llm needs --model NAME or --config PATH (or --list)")
    chip = common.load_chip(args)
    doc = decode_rate(
        model,
        chip,
        args.variant,
        args.engine,
        scope=args.scope,
        bits=args.dtype,
        lm_head_shards=args.lm_head_shards,
        axis=args.axis,
    )
    if args.json:
        print(json.dumps(doc))
        return 0
    common.print_header(
        "llm",
        chip,
        str(doc["engine"]),
        f"{doc['label']}, {doc['dtype']}, {doc['variant']} hardware; "
        f"the patch splits {args.scope} along {doc['axis']}"
        + (f"; {bands.header(chip)}" if bands.header(chip) else ""),
    )
    keys = ("tok_s_unsplit", "tok_s_split", "gbps_unsplit", "gbps_split")
    common.print_table([bands.texts(doc, keys)], keys)
    print()
    affected, breakdown = doc["affected"], doc["breakdown"]
    outside = doc["affected_outside_scope"]
    assert isinstance(affected, list) and isinstance(breakdown, dict)
    assert isinstance(outside, list)
    split = {a["projection"]: a for a in affected}
    rows = []
    for name, b in breakdown.items():
        a = split.get(name)
        plan = f"{a['axis']} /{a['splits']}" if a else ""
        if name in outside:
            plan = "(affected, not in scope)"
        rows.append(
            {"projection": name, **bands.texts(b, ["us_unsplit", "us_split"]), "plan": plan}
        )
    common.print_table(rows, ["projection", "count", "us_unsplit", "us_split", "plan"])
    return 0
