"""`sweep`: the D sweep as CSV and PNG (GB/s against D, its FFT, the notch overlay)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ane_kdma import runner
from ane_kdma import sweep as sw_mod
from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.fileio import STDOUT, check_dir_target
from ane_kdma.hw import ADDR_BITS

MAX_ARG = (1 << ADDR_BITS) - 1  # D and N past this give no 32-bit core size


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "sweep",
        help="D sweep: CSV and PNG plots of GB/s against D, its FFT, the notch overlay",
        description=sw_mod.__doc__.split("\n\n")[0],
    )
    sp.add_argument("--out", type=Path, default=Path("out"), help="output directory (out/)")
    sp.add_argument("--d-min", type=common.positive, default=64, help="first D (64)")
    sp.add_argument("--d-max", type=common.positive, default=16384, help="last D (16384)")
    sp.add_argument("--d-step", type=common.positive, default=64, help="D step (64)")
    sp.add_argument("--n", type=common.positive, default=4096, help="output channels N (4096)")
    common.add_jobs(sp, "the workloads")
    common.add_common(sp, engine_default="analytic")
    extras = sp.add_mutually_exclusive_group()
    extras.add_argument(
        "--overlay-engine",
        default="analytic",
        type=common.engine,
        metavar="E",
        help="engine for the notch overlay (k = 1..8: 1,032 runs of every core per reading) "
        "and Table B, which do not depend on --d-min/--d-max (analytic)",
    )
    extras.add_argument(
        "--no-overlay",
        action="store_true",
        help="leave the notch overlay out (notch_overlay.*)",
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for option, value in (
        ("--d-min", args.d_min),
        ("--d-max", args.d_max),
        ("--d-step", args.d_step),
        ("--n", args.n),
    ):
        common.check_at_most(value, MAX_ARG, option, "no larger value gives a 32-bit core size")
    if str(args.out) == STDOUT:
        raise InputError("--out -: sweep writes a set of files (CSV and PNG), so --out is a folder")
    check_dir_target(Path(args.out))  # before the work, not after
    chip = common.load_chip(args)
    with runner.options(**common.run_options(args)):  # --jobs, --scheduler
        sw = sw_mod.compute_sweep(chip, args.d_min, args.d_max, args.d_step, args.n, args.engine)
        ov = None if args.no_overlay else sw_mod.overlay(chip, args.overlay_engine)
        sp = sw_mod.spectrum(sw, chip)
        paths = sw_mod.write_all(
            Path(args.out), sw, sp, ov, chip, chip.measured, args.overlay_engine
        )
    for name, why in sw_mod.left_out(sw, chip, chip.measured, ov).items():
        common.say(f"{name} left out: {why}")
    summary = {
        "out": str(args.out),
        "files": [str(p) for p in paths],
        "engine": sw.engine,
        "points": int(sw.d.size),
        "overlay_engine": None if ov is None else args.overlay_engine,
        "dominant_wavelength_d": sp.dominant,
        "verdict": {name: sp.verdict(name) for name in sp.dominant},
        "min_gbps": {k: round(float(v.min()), 3) for k, v in sw.gbps.items()},
        "max_gbps": {k: round(float(v.max()), 3) for k, v in sw.gbps.items()},
    }
    if args.json:
        print(json.dumps(summary))
    else:
        common.print_header("sweep", chip, sw.engine, f"{sw.d.size} points")
        print(f"wrote {len(paths)} files to {args.out}/")
        for name in sp.dominant:
            print(f"  {name:<8} {sp.verdict(name)}")
    return 0
