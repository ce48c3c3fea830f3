"""`patch`: rewrite an .mlpackage so that no weight streams in the notch (extra `coreml`)."""

from __future__ import annotations

import argparse
import json

from ane_kdma import bands
from ane_kdma.cli import common
from ane_kdma.cli.plan import add_axis, add_variant
from ane_kdma.errors import InputError
from ane_kdma.patch import patch

MAX_PATTERNS = 64
GUESSED = "? marks a guessed layer name: a part is not a known module name, so a '_' may be a '.'"


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "patch", help="split the notched weights of an .mlpackage (needs the coreml extra)"
    )
    sp.add_argument("src", metavar="IN.mlpackage", help="the ML Program to read (never written)")
    sp.add_argument(
        "dst",
        metavar="OUT.mlpackage",
        nargs="?",
        help="the new package: a new path ending in .mlpackage (optional with --dry-run)",
    )
    sp.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would change and the decode step before and after, each with its band "
        "where the profile carries fits (see plan --help); write nothing",
    )
    sp.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="PATTERN",
        help=(
            "leave ops alone whose op, weight or layer name matches, dotted as in PyTorch "
            "(model.layers.0.mlp.down_proj) or as converted (shell pattern; repeatable)"
        ),
    )
    sp.add_argument(
        "--function",
        action="append",
        default=[],
        metavar="NAME",
        help="patch only this function of a multifunction package (repeatable; default: all)",
    )
    add_axis(sp)
    add_variant(sp)
    common.add_common(sp)
    sp.set_defaults(func=run)


def _mib(n: object) -> str:
    return f"{int(n) / 2**20:.1f} MiB" if isinstance(n, int) else "?"  # noqa: RUF100


def _layer(row: dict[str, object]) -> str:
    """The name a model author knows: the dotted module path (marked ? when guessed), else the
    weight's own name."""
    if row.get("module"):
        return f"{row['module']}{'?' if row.get('module_guessed') else ''}"
    return str(row.get("weight") or "")


def _where(row: dict[str, object], many: bool) -> str:
    return f"{row['function']}/{row['op']}" if many else str(row["op"])


def run(args: argparse.Namespace) -> int:
    if args.dst is None and not args.dry_run:
        raise InputError("patch needs IN.mlpackage OUT.mlpackage (or --dry-run)")
    if len(args.skip) + len(args.function) > MAX_PATTERNS:
        raise InputError(f"at most {MAX_PATTERNS} --skip and --function options")
    chip = common.load_chip(args)
    doc = patch(
        args.src,
        args.dst,
        chip,
        args.variant,
        args.engine,
        args.dry_run,
        axis=args.axis,
        skip=args.skip,
        function=args.function,
    )
    if args.json:
        print(json.dumps(doc))
        return 0
    verb = "would split" if args.dry_run else "split"
    changed = doc["changed"]
    assert isinstance(changed, list)
    fns = doc["functions"]
    assert isinstance(fns, list)
    many = len(fns) > 1
    where = f" in {len(fns)} functions" if many else ""
    n = doc["weights"]
    weights = f"{n} stored weight{'' if n == 1 else 's'}"
    common.print_header(
        "patch",
        chip,
        str(doc["engine"]),
        f"{doc['variant']} hardware; {doc['in']}: {weights}{where}; "
        f"{verb} {len(changed)} along {doc['axis']}",
    )
    skipped = doc["skipped"]
    shared = doc["shared"]
    assert isinstance(skipped, list) and isinstance(shared, list)
    if changed:
        keys = ["op", "layer", "form", "shape", "bytes_per_core", "parts"]
        keys += ["time_us_before", "time_us_after"]
        if many:
            keys.insert(0, "function")
        rows = [{**c, "layer": _layer(c), "parts": "+".join(map(str, c["parts"]))} for c in changed]
        common.print_table(rows, keys, keep=2 if many else 1)
        side = doc["side_bytes"]
        if side:
            common.print_wrapped(
                f"compressed weights are planned on what they store, their LUTs, scales and "
                f"offsets ({side} bytes in all) streamed with their channels (an assumption)"
            )
    for x in shared:
        common.print_wrapped(
            f"shared: {_layer(x)} is also read by {', '.join(x['readers'])[:80]}, so it "
            f"stays stored whole too ({x['bytes']} bytes duplicated; --skip it to avoid)"
        )
    for s in skipped:
        layer = _layer(s)
        named = f", {layer}" if layer and layer != s["op"] else ""
        common.print_wrapped(
            f"left alone: {_where(s, many)} ({s['op_type']}{named}): {s['reason']}"
        )
    if any(r.get("module_guessed") for r in [*changed, *skipped, *shared]):
        common.print_wrapped(GUESSED)
    if args.dry_run:
        d = doc["decode_us"]
        assert isinstance(d, dict)
        fn = f" of {d['function']}" if many else ""
        held = f"; {d['held_whole']} kept whole, counted unsplit" if d["held_whole"] else ""
        held += f"; {bands.header(chip)}" if "before_band" in d else ""
        # the figures on one line, what they count on the next (held to WIDTH columns)
        before, after = bands.text(d, "before"), bands.text(d, "after")
        print(f"decode step{fn}: {before} us before, {after} us after")
        common.print_wrapped(f"{common.INDENT}(every stored weight once, marginal times{held})")
        gone = d["not_counted"]
        if gone:
            common.print_wrapped(
                f"not in the decode step: {len(gone)} op{'' if len(gone) == 1 else 's'} left "
                f"alone that patch cannot plan ({', '.join(gone)[:60]})"
            )
    if doc["out"]:
        w_in, w_out = doc["weight_bytes_in"], doc["weight_bytes_out"]
        assert isinstance(w_in, int) and isinstance(w_out, int)
        common.print_wrapped(
            f"wrote {doc['out']} (weight files {_mib(w_in)} -> {_mib(w_out)}, "
            f"{w_out - w_in:+,} bytes)"
        )
    return 0
