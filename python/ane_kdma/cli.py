"""The `ane-kdma` command line: predict, plan, llm, replay, erratum, validate, sweep, dump.

Every sub-command prints a table, or exactly one JSON document with --json.
Bad input gets one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ane_kdma import calibrate, measured, regdump, sweep, validate
from ane_kdma.engines import ENGINES, check_engine, cycles
from ane_kdma.errors import InputError
from ane_kdma.hw import (
    LINE_BYTES,
    NUM_CORES_MAX,
    RING_LINES,
    CreditMode,
    lap_and_offset,
    lines_for_bytes,
)
from ane_kdma.llm import decode_rate, get_model, load_models
from ane_kdma.plan import Shape, plan_shape
from ane_kdma.profile import Profile, load


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, status 2
        raise InputError(message)


def _arg(parse):
    """Wrap a parser so argparse shows our message, not 'invalid value'."""

    def wrapped(text: str):
        try:
            return parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    wrapped.__name__ = parse.__name__
    return wrapped


def _positive_int(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise InputError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise InputError(f"must be positive: {text}")
    return value


_positive = _arg(_positive_int)
_variant = _arg(CreditMode.parse)
_engine = _arg(check_engine)


def split_lines(lines: int, parts: int) -> list[int]:
    """`parts` near-equal tasks, each a whole number of lines."""
    if parts < 1 or parts > lines:
        raise InputError(f"cannot split {lines} lines into {parts} tasks")
    base, extra = divmod(lines, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def predict_one(
    profile: Profile, bytes_per_core: int, mode: CreditMode, split: int, engine: str
) -> dict[str, object]:
    """Time and aggregate GB/s of 16 cores streaming `bytes_per_core` each."""
    if bytes_per_core % LINE_BYTES:
        raise InputError(f"{bytes_per_core} bytes per core is not a multiple of 64-byte lines")
    lines = lines_for_bytes(bytes_per_core)
    if lines * LINE_BYTES >= 1 << 32:
        raise InputError(f"{bytes_per_core} bytes per core exceeds the 32-bit size register")
    parts = split_lines(lines, split)
    total = cycles(engine, mode, profile.settings, [parts])[0]
    time_us = profile.overhead_us + profile.us(total)
    return {
        "bytes_per_core": bytes_per_core,
        "lines_per_core": lines,
        "variant": mode.name.lower(),
        "split": split,
        "time_us": round(time_us, 3),
        "gbps": round(NUM_CORES_MAX * bytes_per_core / (time_us * 1e3), 3),
    }


def _print_table(rows: list[dict[str, object]], keys: Sequence[str]) -> None:
    widths = [max(len(k), *(len(str(r.get(k, ""))) for r in rows)) for k in keys]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r.get(k, "")).rjust(w) for k, w in zip(keys, widths, strict=True)))


def cmd_predict(args: argparse.Namespace) -> int:
    profile = load(args.profile)
    row = predict_one(profile, args.bytes_per_core, args.variant, args.split, args.engine)
    if args.json:
        print(json.dumps(row))
    else:
        _print_table([row], list(row))
    return 0


def measured_gbps(bytes_per_core: int) -> float | None:
    """A published aggregate GB/s for this per-core size at 16 cores, if there is one."""
    meas = measured.load()
    f = meas.facts
    known = {
        int(measured.bytes_per_core(f.notch_d, f.notch_n)): f.notch_gbps.value,
        int(measured.bytes_per_core(f.shoulder_d, f.shoulder_n)): f.shoulder_gbps.value,
    }
    t = meas.table_a
    for b, us in zip(t.bytes_per_core.tolist(), t.medians.tolist(), strict=True):
        known.setdefault(int(b), float(measured.aggregate_gbps(b, us)))
    return known.get(bytes_per_core)


def cmd_replay(args: argparse.Namespace) -> int:
    profile = load(args.profile)
    rows = []
    for path in args.dumps:
        task = regdump.load_task(path)
        lines = task.lines_per_core
        k, x = lap_and_offset(lines)
        row: dict[str, object] = {
            "dump": str(path),
            "cin": task.cin,
            "bytes_per_core": task.bytes_per_core,
            "lines_per_core": lines,
            "k": k,
            "x": x,
            "cores": len(task.enabled_cores),
            "measured_gbps": measured_gbps(task.bytes_per_core),
        }
        for mode in CreditMode:
            c = cycles(args.engine, mode, profile.settings, [[lines]])[0]
            t = profile.overhead_us + profile.us(c)
            name = mode.name.lower()
            row[f"{name}_cycles"] = c
            row[f"{name}_gbps"] = round(
                len(task.enabled_cores) * task.bytes_per_core / (t * 1e3), 2
            )
        rows.append(row)
    if args.json:
        print(json.dumps({"engine": args.engine, "profile": profile.name, "dumps": rows}))
    else:
        keys = ["dump", "lines_per_core", "k", "x"]
        keys += [f"{m.name.lower()}_{u}" for m in CreditMode for u in ("cycles", "gbps")]
        keys += ["measured_gbps"]
        for r in rows:
            r["measured_gbps"] = r["measured_gbps"] or "-"
        print(
            f"replay on the {args.engine} engine, profile {profile.name}; "
            "measured: Yoon 2026, https://eiln.github.io/posts/ane-dma.html"
        )
        _print_table(rows, keys)
    return 0


def cmd_erratum(args: argparse.Namespace) -> int:
    """Cycles at k x 0x4000 lines per core: each buggy mode against the fix."""
    profile = load(args.profile)
    laps = list(range(1, args.laps + 1))
    lines = [k * RING_LINES for k in laps]
    table = {m: cycles(args.engine, m, profile.settings, [[n] for n in lines]) for m in CreditMode}
    rows = []
    for i, k in enumerate(laps):
        fixed = table[CreditMode.FIXED][i]
        row: dict[str, object] = {"k": k, "lines": lines[i], "fixed": fixed}
        for m in (CreditMode.LITERAL, CreditMode.SIGNED):
            row[m.name.lower()] = table[m][i]
            row[f"{m.name.lower()}/fixed"] = round(table[m][i] / fixed, 2)
        rows.append(row)
    if args.json:
        print(json.dumps({"engine": args.engine, "rows": rows}))
    else:
        print(f"kernel-DMA cycles per core, {args.engine} engine, profile {profile.name}")
        _print_table(rows, list(rows[0]))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    profile = load(args.profile)
    shapes = [Shape.parse(t) for t in args.shape]
    rows = [plan_shape(sh, profile, args.variant, args.engine).as_dict() for sh in shapes]
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"split plan for {args.variant.name.lower()} hardware, profile {profile.name}")
        _print_table(rows, list(rows[0]))
    return 0


def cmd_llm(args: argparse.Namespace) -> int:
    if args.list:
        models = load_models()
        if args.json:
            print(json.dumps(sorted(models)))
        else:
            for name, cfg in sorted(models.items()):
                print(f"{name:<16} {cfg.label}")
        return 0
    if not args.model:
        raise InputError("llm needs --model NAME (or --list)")
    row = decode_rate(get_model(args.model), load(args.profile), args.engine)
    if args.json:
        print(json.dumps(row))
    else:
        flat = {k: v for k, v in row.items() if k != "affected"}
        flat["affected"] = (
            ", ".join(f"{a['count']}x {a['shape']} /{a['splits']}" for a in row["affected"])
            or "none"
        )
        _print_table([flat], list(flat))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ane-kdma", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(sp: argparse.ArgumentParser, engine: bool = True) -> None:
        sp.add_argument("--json", action="store_true", help="one JSON document on stdout")
        sp.add_argument("--profile", default=None, help="profile name or JSON path (m3)")
        if engine:
            sp.add_argument(
                "--engine", default="model", type=_engine, help=f"one of {', '.join(ENGINES)}"
            )

    sp = sub.add_parser("predict", help="time and GB/s for B bytes per core on 16 cores")
    sp.add_argument("--bytes-per-core", required=True, type=_positive)
    sp.add_argument(
        "--variant", default="signed", type=_variant, help="literal, signed (= buggy), or fixed"
    )
    sp.add_argument("--split", default=1, type=_positive)
    common(sp)
    sp.set_defaults(func=cmd_predict)

    sp = sub.add_parser("replay", help="run register dumps, buggy and fixed")
    sp.add_argument("dumps", nargs="+")
    common(sp)
    sp.set_defaults(func=cmd_replay)

    sp = sub.add_parser("erratum", help="cycles at k x 0x4000 lines, buggy against fixed")
    sp.add_argument("--laps", type=_positive, default=8)
    common(sp)
    sp.set_defaults(func=cmd_erratum)

    sp = sub.add_parser("plan", help="which fp16 weights are in the notch, and how to split them")
    sp.add_argument("--shape", action="append", required=True, metavar="CINxCOUT")
    sp.add_argument(
        "--variant",
        default="signed",
        type=_variant,
        help="the buggy reading to plan against (signed fits best)",
    )
    common(sp)
    sp.set_defaults(func=cmd_plan)

    sp = sub.add_parser("llm", help="decode tokens/s of a known model, unsplit and split")
    sp.add_argument("--model", help="see --list")
    sp.add_argument("--list", action="store_true", help="name the known models")
    common(sp)
    sp.set_defaults(func=cmd_llm)

    regdump.add_dump_command(sub)
    calibrate.add_calibrate_command(sub)
    validate.add_validate_command(sub)
    sweep.add_sweep_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"ane-kdma: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
