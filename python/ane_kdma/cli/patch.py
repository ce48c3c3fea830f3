"""`patch`: rewrite an .mlpackage so that no weight streams in the notch (extra `coreml`)."""

from __future__ import annotations

import argparse
import json

from ane_kdma.cli import common
from ane_kdma.cli.plan import add_axis, add_variant
from ane_kdma.errors import InputError
from ane_kdma.patch import patch

MAX_PATTERNS = 64


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "patch", help="split the notched weights of an .mlpackage (needs the coreml extra)"
    )
    sp.add_argument("src", metavar="IN.mlpackage")
    sp.add_argument("dst", metavar="OUT.mlpackage", nargs="?")
    sp.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would change and the decode step before and after; write nothing",
    )
    sp.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave ops alone whose op, weight or layer name matches (shell pattern; repeatable)",
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


def _kib(n: object) -> str:
    return f"{int(n) / 2**20:.1f} MiB" if isinstance(n, int) else "?"  # noqa: RUF100


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
    where = f" in {len(fns)} functions" if len(fns) > 1 else ""
    n = doc["weights"]
    weights = f"{n} stored weight{'' if n == 1 else 's'}"
    print(
        f"{doc['in']}: {weights}{where}; {verb} {len(changed)} along "
        f"{doc['axis']} ({doc['variant']} hardware, chip {chip.name}, {doc['engine']} engine)"
    )
    if changed:
        keys = ["op", "weight", "form", "shape", "bytes_per_core", "parts"]
        keys += ["time_us_before", "time_us_after"]
        if len(fns) > 1:
            keys.insert(0, "function")
        rows = [{**c, "parts": "+".join(map(str, c["parts"]))} for c in changed]
        common.print_table(rows, keys)
        side = sum(int(c["side_bytes"]) for c in changed)
        if side:
            print(
                f"compressed weights are planned on what they store, their LUTs, scales and "
                f"offsets ({side} bytes in all) streamed with their channels (an assumption)"
            )
    for c in changed:
        if c["shared_with"]:
            print(
                f"shared: {c['weight']} is also read by {', '.join(c['shared_with'])[:80]}, so it "
                f"stays stored whole too ({c['stored_bytes']} bytes duplicated; --skip it to avoid)"
            )
    skipped = doc["skipped"]
    assert isinstance(skipped, list)
    for s in skipped:
        print(f"left alone: {s['op']} ({s['op_type']}): {s['reason']}")
    if args.dry_run:
        d = doc["decode_us"]
        assert isinstance(d, dict)
        fn = f" of {d['function']}" if len(fns) > 1 else ""
        print(
            f"decode step{fn} (every stored weight once, marginal times): "
            f"{d['before']} us before, {d['after']} us after"
        )
    if doc["out"]:
        print(
            f"wrote {doc['out']} (weights {_kib(doc['weight_bytes_in'])} -> "
            f"{_kib(doc['weight_bytes_out'])})"
        )
    return 0
