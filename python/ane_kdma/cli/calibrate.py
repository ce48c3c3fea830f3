"""`calibrate`: fit the chip's profile to its measurements and write it (atomically)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ane_kdma import calibrate as cal_mod
from ane_kdma.chip import PROFILE_FILE
from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.fileio import write_atomic


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "calibrate",
        help="fit the chip's profile to its measurements and write it",
        description=cal_mod.__doc__.split("\n\n")[0],
    )
    sp.add_argument("--out", type=Path, default=None, help="profile JSON (the chip's profile.json)")
    common.add_common(sp, engine_default=None)
    sp.set_defaults(func=run)


def _check_out(out: Path) -> None:
    if out.is_dir():
        raise InputError(f"cannot write {out}: is a directory")
    if not out.parent.is_dir():
        raise InputError(f"cannot write {out}: no such directory: {out.parent}")


def run(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    out = Path(args.out) if args.out is not None else chip.path / PROFILE_FILE
    _check_out(out)  # fail before the fit, not after
    cal = cal_mod.fit(chip)
    cal.confirmed = cal_mod.confirm(chip, cal)
    if cal.confirmed["max_cycle_diff"] != 0:
        raise InputError("calibration: the cycle model disagrees with the analytic fit")
    write_atomic(out, cal.profile.to_json().encode())
    if args.json:
        print(json.dumps(cal_mod.report(cal)))
    else:
        print(cal_mod.render(cal, str(out)))
    return 0
