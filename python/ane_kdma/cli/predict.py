"""`predict`: time and GB/s of every core of the chip streaming B bytes, optionally split."""

from __future__ import annotations

import argparse
import json

from ane_kdma import bands, contract, progress
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.cli import common
from ane_kdma.contract import Workload
from ane_kdma.hypotheses import Hypothesis

SLOW_AFTER_S = 1.0  # a predict still running after this says what it is doing
# From this many laps per core, a band's fits are scaled from the analytic engine (below).
BAND_SCALED_FROM_LAPS = 16


def predict_one(
    chip: Chip, bytes_per_core: int, h: Hypothesis, split: int, engine: str
) -> dict[str, object]:
    """One row of the predict contract, and the fixed hardware's figures beside it.

    Why the fixed figures: a time means little without what the same transfer
    costs without the erratum; they are added keys, the contract's keys stay.
    """
    load = Workload.from_size(bytes_per_core, chip.cores, split, chip.line_bytes)
    lines = bytes_per_core // chip.line_bytes
    fits = len(bands.members(chip))
    also = f" under the profile and its {fits} fits (the band)" if fits else ""
    slow = (
        f"the {engine} engine is still running {lines} lines per core on the {h.name} reading{also}"
    )
    if engine == "model":
        # why (measured at 0xFFFFFFC0 B and at 64 laps - 1 line on the paged reading): the
        # state settles into its period (88 pages) only after about 850,000 lines of drift
        # against the token bucket, and the cycle model steps those lines one by one; a
        # jump over that start-up would need its closed form, which the model does not have
        slow += (
            " (just off a whole lap, the cycle model's state repeats only after about 850,000 "
            "lines, which it steps one by one: up to about 10 s); --engine analytic answers "
            "at once"
        )
    fix = hyps.get(hyps.FIXED)

    def figures(c: Chip, on: str = engine) -> dict[str, float]:
        res = contract.run(on, h, c, load)
        fixed = res if h.name == fix.name else contract.run(on, fix, c, load)
        return {
            "time_us": res.time_us,
            "gbps": res.gbps,
            "time_us_fixed": fixed.time_us,
            "gbps_fixed": fixed.gbps,
        }

    # the analytic engine is O(1) in the size: only the others can be slow at some sizes
    wait = SLOW_AFTER_S if engine != "analytic" else float("inf")
    scaled = (
        bool(fits) and engine != "analytic" and lines >= BAND_SCALED_FROM_LAPS * chip.ring_lines
    )
    with progress.announce_after(wait, slow):
        if scaled:
            # Just off a whole lap at many laps, each run of the cycle model steps a long
            # start-up (above): once per fit would multiply that by the fits. So the figure is
            # the engine's, and each fit's is the figure times that fit's ratio to the
            # profile on the analytic engine (within its stated accuracy of the cycle model;
            # the ratio's own error was not measured separately).
            central = figures(chip)
            base = figures(chip, "analytic")
            others = [
                {k: central[k] * f[k] / base[k] for k in central}
                for f in (figures(m, "analytic") for m in bands.members(chip))
            ]
        else:
            central, others = bands.over(chip, figures)
    row: dict[str, object] = {
        "bytes_per_core": bytes_per_core,
        "lines_per_core": lines,
        "variant": h.name,
        "split": split,
        **{k: round(v, 3) for k, v in central.items()},
    }
    if scaled:
        row["band_scaled_from"] = "analytic"
    return bands.merged(row, bands.spans(central, others, 3))


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "predict",
        help="time and GB/s for B bytes per core on every core",
        description="Time and GB/s of every core streaming B bytes, on the buggy reading and "
        f"on the fixed hardware. {bands.HELP}",
    )
    sp.add_argument(
        "--bytes-per-core",
        required=True,
        type=common.size,
        metavar="B",
        help=f"bytes each core streams, one task each unless --split ({common.SIZE_HELP})",
    )
    sp.add_argument(
        "--variant",
        default="buggy",
        type=common.variant,
        help="a hypothesis name, or buggy (the chip's fitted reading)",
    )
    sp.add_argument("--split", default=1, type=common.positive, help="back-to-back tasks (1)")
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    row = predict_one(chip, args.bytes_per_core, args.variant, args.split, args.engine)
    if args.json:
        print(json.dumps(row))
    else:
        band = bands.header(chip)
        detail = f"{chip.cores} cores" + (f"; {band}" if band else "")
        common.print_header("predict", chip, args.engine, detail)
        keys = [k for k in row if not k.endswith("_band")]
        common.print_table([bands.texts(row, keys)], keys)
    return 0
