"""`calibrate`: fit the chip's profile to its measurements and write it (atomically).

With no --hypothesis/--mechanism every buggy hypothesis x rate mechanism is
fitted, ranked by validate's own rows and tolerances (the ranking `validate`
prints), the ranking goes to fits.json beside the profile, and its head
becomes the profile. Naming both fits just that one.

--hold-out DATASET fits one pair (named, or the profile's) without that
dataset and predicts it: a test of the fit, which writes no file.

--engine names the exact engine (the cycle model by default, or the RTL:
rtl) that runs every exact evaluation; the search itself is the closed form,
so the analytic engine is refused. The exact engines agree to the cycle: the
profile and fits.json are the same bytes whichever ran. The RTL builds some
of the mechanisms only: a pair it lacks, or the full ranking (which has
them all), is refused before any fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ane_kdma import calibrate as cal_mod
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma import validate
from ane_kdma.chip import PROFILE_FILE, Chip
from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.fileio import STDOUT, check_file_target, write_atomic
from ane_kdma.profile import Profile

FITS_FILE = "fits.json"


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "calibrate",
        help="fit the chip's profile to its measurements and write it",
        description=cal_mod.__doc__.split("\n\n")[0],
    )
    sp.add_argument(
        "--out",
        type=Path,
        default=None,
        help="profile JSON (the chip's profile.json); - writes the profile to stdout, nothing else",
    )
    sp.add_argument(
        "--hypothesis", default=None, help=f"one of {', '.join(h.name for h in hyps.buggy())}"
    )
    sp.add_argument("--mechanism", default=None, help=f"one of {', '.join(mechs.names())}")
    sp.add_argument(
        "--hold-out",
        dest="hold_out",
        default=None,
        metavar="DATASET",
        help=f"fit without this dataset ({', '.join(cal_mod.DATASETS)}) and predict it; "
        "the pair named, or the profile's; writes nothing",
    )
    sp.add_argument(
        "--prior",
        default=None,
        metavar="CHIP",
        help="fit a handful of timed figures (measured/timings.json): free only what they pin "
        "(the per-prediction overhead, the demand window, the notch depth), every other field "
        "from this chip's profile, with intervals; writes the profile",
    )
    sp.add_argument(
        "--intervals",
        action="store_true",
        help="add intervals to the chip's fitted profile (its values unchanged): each fitted "
        "field's widest move that keeps every counted row of validate passing",
    )
    common.add_jobs(sp, "the workloads")
    common.add_common(sp, engine_default=None)
    sp.add_argument(  # add_common's --engine, with what it does here
        "--engine",
        default=cal_mod.EXACT_ENGINE,
        type=common.engine,
        help="the exact engine of every exact evaluation (the residuals, the constraints, the "
        "correction to the closed-form search, the confirmation): model (default), rtl or "
        "cocotb (the RTL's mechanisms and geometry only); not analytic, the search's own "
        "closed form",
    )
    sp.set_defaults(func=run)


def _check_out(out: Path) -> None:
    check_file_target(out)  # a directory, symlink, device or read-only file is refused
    if not out.parent.is_dir():
        raise InputError(f"cannot write {out}: no such directory: {out.parent}")


def fits_document(cals: list[cal_mod.Calibration]) -> dict[str, object]:
    """The ranking of every fit, best first, for validate and the README."""
    return {
        "status": "written by `ane-kdma calibrate` (all fits); regenerate, do not hand-edit",
        "rule": validate.RANK_RULE + "; shortfalls: the rows of validate the fit fails",
        "margin": (cal_mod.margin(cals) or {}).get("text"),
        "fits": [
            {
                "hypothesis": c.profile.hypothesis,
                "mechanism": c.profile.mechanism,
                "constraints_met": c.ok,
                "shortfalls": cal_mod.shortfalls(c),
                "rms_rel_err": round(c.rms_rel_err, 5),
                "v_slope_us_per_line_per_lap": None if c.slope is None else round(c.slope, 4),
                "v_slope_worst_r2": None if c.slope_r2 is None else round(c.slope_r2, 4),
                "profile": json.loads(c.profile.to_json()),
            }
            for c in cals
        ],
    }


def _jobs(args: argparse.Namespace) -> dict[str, Any]:
    """--jobs, --scheduler, quiet under --json, and --engine (checked: analytic is refused)."""
    engine = cal_mod.check_engine(getattr(args, "engine", None) or cal_mod.EXACT_ENGINE)
    return {**common.run_options(args), "engine": engine}


def _hold_out(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    if args.out is not None:
        raise InputError("--hold-out writes no profile: it takes no --out")
    if args.hold_out not in cal_mod.DATASETS:
        raise InputError(
            f"unknown dataset {args.hold_out!r} to hold out (one of: {', '.join(cal_mod.DATASETS)})"
        )
    if (args.hypothesis is None) != (args.mechanism is None):
        raise InputError("name both --hypothesis and --mechanism, or neither (the profile's)")
    if args.hypothesis is not None:
        h, m = hyps.get(args.hypothesis).name, mechs.get(args.mechanism).name
    else:
        h, m = chip.profile.hypothesis, chip.profile.mechanism
    if not hyps.get(h).buggy:
        raise InputError(f"{h} is the fix: calibrate fits the buggy readings")
    held = cal_mod.hold_out(chip, h, m, (args.hold_out,), **_jobs(args))  # fit checks the engine
    if args.json:
        print(json.dumps(cal_mod.hold_out_report(held)))
    else:
        print(cal_mod.render_hold_out(held))
    return 0


def _refuse_flags(args: argparse.Namespace, mode: str, why: str, flags: tuple[str, ...]) -> None:
    """Refuse each of `flags` given with `mode` (`--prior`, `--intervals`), saying why."""
    for flag in flags:
        if getattr(args, flag.removeprefix("--").replace("-", "_")) is not None:
            raise InputError(f"{mode} {why}: it takes no {flag}")


def _profile_target(args: argparse.Namespace, chip: Chip) -> Path | None:
    """Where the profile goes: --out FILE (checked now, before any fit), the chip's
    profile.json, or None for ``--out -`` (stdout)."""
    if str(args.out) == STDOUT:
        return None
    out = Path(args.out) if args.out is not None else chip.path / PROFILE_FILE
    _check_out(out)
    return out


def _write_profile(
    args: argparse.Namespace, prof: Profile, out: Path | None, report: Callable[[], None]
) -> int:
    """The profile to stdout alone (`out` None), or written atomically to `out`, then its
    JSON document (--json) or `report` (text) and the file named."""
    if out is None:
        sys.stdout.write(prof.to_json())
        return 0
    write_atomic(out, prof.to_json().encode())
    if args.json:
        print(json.dumps({"profile": json.loads(prof.to_json()), "written": str(out)}))
        return 0
    report()
    print(f"wrote {out}")
    return 0


def _prior(args: argparse.Namespace) -> int:
    """--prior CHIP: the fit from a handful of figures (ane_kdma.calibrate.prior)."""
    from ane_kdma.calibrate import prior as prior_mod
    from ane_kdma.chip import load

    why = "keeps the prior's reading and mechanism"
    _refuse_flags(args, "--prior", why, ("--hypothesis", "--mechanism", "--hold-out"))
    chip = common.load_chip(args)
    try:
        prior = load(args.prior)
    except InputError as exc:
        raise InputError(f"--prior: {exc}") from None
    if prior.fitted is None:
        raise InputError(
            f"--prior {args.prior}: chip {prior.name} has no profile.json to start from"
        )
    out = _profile_target(args, chip)
    prof = prior_mod.fit_prior(chip, prior)
    u = prof.uncertainty
    assert u is not None

    def report() -> None:
        print(
            f"calibrate: chip {chip.name} from {chip.path.name}/measured/timings.json, "
            f"prior {prior.name}"
        )
        print(f"residuals: {prof.notes['residuals']}")
        print("free (each pinned by the figures), value [interval]:")
        for name, why in u.free.items():
            lo, hi = u.intervals[name]
            print(f"  {name} = {getattr(prof, name):g} [{lo:g}, {hi:g}]: {why}")
        print(f"kept from {prior.name}: " + ", ".join(u.kept))
        print(f"intervals: {u.method}")

    return _write_profile(args, prof, out, report)


def _intervals(args: argparse.Namespace) -> int:
    """--intervals: the fitted profile's uncertainty (ane_kdma.calibrate.intervals)."""
    from ane_kdma.calibrate import intervals as iv

    why = "reads the chip's profile as it is"
    flags = ("--hypothesis", "--mechanism", "--hold-out", "--prior")
    _refuse_flags(args, "--intervals", why, flags)
    chip = common.load_chip(args)
    out = _profile_target(args, chip)
    prof = iv.with_intervals(chip, chip.profile, quiet=args.json or out is None)
    u = prof.uncertainty
    assert u is not None

    def report() -> None:
        print(f"calibrate: intervals of chip {chip.name}'s profile {prof.name} (values unchanged)")
        for name, (lo, hi) in u.intervals.items():
            print(f"  {name} = {getattr(prof, name):g} [{lo:g}, {hi:g}]")
        print(f"intervals: {u.method}")

    return _write_profile(args, prof, out, report)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "intervals", False):
        return _intervals(args)
    if getattr(args, "prior", None) is not None:
        return _prior(args)
    if getattr(args, "hold_out", None) is not None:
        return _hold_out(args)
    opts = _jobs(args)  # a bad engine or scheduler address: before the chip is read
    chip = common.load_chip(args)
    if str(args.out) == STDOUT and args.json:
        raise InputError("--out - writes the profile itself to stdout: it takes no --json")
    out = _profile_target(args, chip)  # fail before the fit, not after
    if (args.hypothesis is None) != (args.mechanism is None):
        raise InputError("name both --hypothesis and --mechanism, or neither (fit them all)")
    if args.hypothesis is not None:
        h = hyps.get(args.hypothesis)
        if not h.buggy:
            raise InputError(f"{h.name} is the fix: calibrate fits the buggy readings")
        m = mechs.get(args.mechanism).name
        one = cal_mod.fit(chip, h.name, m, **opts)
        cals = cal_mod.rank(chip, [one], **common.run_options(args))
    else:
        cals = cal_mod.fit_all(chip, **opts)  # refuses mechanisms the engine lacks first
    best = cals[0]
    with cal_mod.engine_options(opts["engine"]):  # one core, a few sizes: inline
        best.confirmed = cal_mod.confirm(chip, best)
    if not best.confirmed["ok"]:
        exact = cal_mod.ENGINE_WORDS.get(opts["engine"], f"the {opts['engine']} engine")
        misses = best.confirmed.get("misses")
        said = "; ".join(misses) if isinstance(misses, list) else "see confirm()"
        raise InputError(
            f"calibration: the analytic engine disagrees with the {exact} beyond its "
            f"stated accuracy: {said}"
        )
    if out is None:  # the profile alone, as `--out FILE` would hold it (no fits.json, no report)
        sys.stdout.write(best.profile.to_json())
        return 0
    write_atomic(out, best.profile.to_json().encode())
    if len(cals) > 1:
        doc = fits_document(cals)
        write_atomic(out.parent / FITS_FILE, (json.dumps(doc, indent=1) + "\n").encode())
    if args.json:
        doc = fits_document(cals)
        print(json.dumps({**cal_mod.report(best), "ranking": doc["fits"], "margin": doc["margin"]}))
    else:
        print(cal_mod.render(best, str(out)))
        if len(cals) > 1:
            print("ranking (best first):")
            for c in cals:
                slope = "-" if c.slope is None else f"{c.slope:.2f}"
                st = c.standing or {"passed": 0, "rows": 0, "rms_rel_err": 0.0}
                print(
                    f"  {c.profile.hypothesis:<8} x {c.profile.mechanism:<13} "
                    f"{st['passed']:>2}/{st['rows']} rows, RMS {100 * st['rms_rel_err']:5.2f}% "
                    f"(fit {100 * c.rms_rel_err:5.2f}%)  V slope {slope} us/line/lap  "
                    f"shortfalls: {'; '.join(cal_mod.shortfalls(c)) or 'none'}"
                )
            won = cal_mod.margin(cals)
            if won is not None:
                print(f"margin: {won['text']}")
    return 0
