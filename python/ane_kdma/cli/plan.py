"""`plan`: which weights sit in the notch, the simplest split that gets them out, and why."""

from __future__ import annotations

import argparse
import json

from ane_kdma import bands
from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.plan import (
    AXES,
    DEFAULT_AXIS,
    DTYPE_BITS,
    PlanRow,
    Weight,
    dtype_bits,
    plan_weight,
)

MAX_SHAPES = 64  # a command line's worth; each shape is planned in well under a second
TABLE = (
    "shape",
    "lines_per_core",
    "k",
    "x",
    "in_window",
    "affected",
    "axis",
    "splits",
    "tasks",
    "chunks",
    "time_us_before",
    "time_us_after",
    "time_us_fixed",
)


def add_variant(sp: argparse.ArgumentParser) -> None:
    """--variant, as plan, llm and patch take it: the hypothesis plans are made against."""
    sp.add_argument(
        "--variant",
        default="buggy",
        type=common.variant,
        help="the buggy reading to plan against (buggy: the default reading)",
    )


def add_axis(sp: argparse.ArgumentParser) -> None:
    """--axis, as plan, llm and patch take it: the axis a weight is cut along."""
    sp.add_argument(
        "--axis",
        default=DEFAULT_AXIS,
        choices=list(AXES),
        help=f"cut along Cin as partial sums joined by adds ({DEFAULT_AXIS}, patch's default) "
        "or along Cout joined by a concat",
    )


def add_weight_options(sp: argparse.ArgumentParser, shards: int | None, shards_help: str) -> None:
    """--dtype and --lm-head-shards, as plan and llm take them."""
    sp.add_argument(
        "--dtype",
        default="fp16",
        type=common.arg(dtype_bits),
        help=f"stored weight format, {'|'.join(DTYPE_BITS)} (fp16); the DMA streams stored bytes",
    )
    sp.add_argument(
        "--lm-head-shards", default=shards, type=common.positive, metavar="N", help=shards_help
    )


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "plan",
        help="which weights are in the notch, and how to split them",
        description="Which weights stream in the notch, the simplest split that gets them out, "
        f"and the times before and after. {bands.HELP} The split is chosen on the profile; "
        "the band times that split under each fit.",
    )
    sp.add_argument(
        "--shape", action="append", required=True, metavar="CINxCOUT", help="also CINxCOUTxKHxKW"
    )
    add_variant(sp)
    add_axis(sp)
    add_weight_options(sp, 1, "each shape is an LM head (Cout = vocabulary) issued as N shards")
    sp.add_argument("--explain", action="store_true", help="the reasoning, in words")
    common.add_common(sp)
    sp.set_defaults(func=run)


def chunks_text(sizes: list[int]) -> str:
    """Task sizes in bytes, runs folded: [524288] * 4 -> '4x524288'."""
    runs: list[list[int]] = []
    for s in sizes:
        if runs and runs[-1][1] == s:
            runs[-1][0] += 1
        else:
            runs.append([1, s])
    return "+".join(f"{n}x{s}" if n > 1 else str(s) for n, s in runs)


def run(args: argparse.Namespace) -> int:
    if len(args.shape) > MAX_SHAPES:
        raise InputError(f"{len(args.shape)} shapes: at most {MAX_SHAPES} per call")
    chip = common.load_chip(args)
    weights = [Weight.parse(t, args.dtype, args.lm_head_shards).check(chip) for t in args.shape]
    rows: list[PlanRow] = [
        plan_weight(w, chip, args.variant, args.engine, args.axis) for w in weights
    ]
    if args.json:
        print(json.dumps([r.as_dict(args.explain) for r in rows]))
        return 0
    shards = f", LM heads in {args.lm_head_shards} shards" if args.lm_head_shards > 1 else ""
    searched = rows[0].search_engine
    searched = f"searched on {searched}; " if searched != rows[0].engine else ""
    common.print_header(
        "plan",
        chip,
        rows[0].engine,
        f"{searched}{args.variant.name} hardware, {rows[0].dtype}{shards}, cut along {args.axis}; "
        "chunks in bytes per core" + (f"; {bands.header(chip)}" if bands.header(chip) else ""),
    )
    table = [
        {**bands.texts(r.as_dict(), TABLE), "chunks": chunks_text(r.chunk_bytes_per_core)}
        for r in rows
    ]
    common.print_table(table, TABLE)
    if args.explain:
        for r in rows:
            print()
            for line in r.explanation:
                common.print_wrapped(line)
    return 0
