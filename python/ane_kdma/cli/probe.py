"""`probe`: measure your own chip. `make` a set of Core ML packages, `run` it on a Mac, `show` it.

* ``probe make --out DIR [--chip C] [--laps N]``: the packages and a manifest
  (extra ``coreml``; any OS);
* ``probe run DIR``: on macOS with coremltools, times every package and writes
  ``DIR/measured/timings.json``; elsewhere, one line and status 2;
* ``probe show DIR``: the set and its timings (if run), checked against each
  other, as a table or JSON.

See docs/probe.md for the whole path, from make to ``plan --chip``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ane_kdma import chip as chips
from ane_kdma import progress
from ane_kdma.cli import common
from ane_kdma.errors import InputError
from ane_kdma.probe import manifest as manifests
from ane_kdma.probe import runner
from ane_kdma.probe.design import MAX_LAPS


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("probe", help="measure a chip: Core ML probe packages, timed on a Mac")
    ps = sp.add_subparsers(dest="probe_command", required=True, parser_class=common.Parser)

    mk = ps.add_parser("make", help="write the probe packages and their manifest (coreml extra)")
    mk.add_argument("--out", required=True, metavar="DIR", help="a new (or empty) folder")
    mk.add_argument(
        "--laps",
        type=common.positive,
        default=MAX_LAPS,
        metavar="N",
        help=f"probe the notch at laps 1..N (1..{MAX_LAPS}, default {MAX_LAPS})",
    )
    _chip_option(mk, "the chip whose geometry sizes the set")
    mk.set_defaults(func=run_make)

    rn = ps.add_parser("run", help="time every package on this Mac's Neural Engine (macOS)")
    rn.add_argument("folder", metavar="DIR", help="a folder written by probe make")
    rn.add_argument("--rounds", type=common.positive, default=3, metavar="N")
    rn.add_argument("--per-round", type=common.positive, default=200, metavar="N")
    rn.add_argument("--warmup", type=common.integer, default=20, metavar="N")
    _chip_option(rn, "the chip the set was made for (default: the one its manifest names)")
    rn.set_defaults(func=run_run)

    sh = ps.add_parser("show", help="a probe set and its timings, checked against each other")
    sh.add_argument("folder", metavar="DIR")
    _chip_option(sh, "the chip the set was made for (default: the one its manifest names)")
    sh.set_defaults(func=run_show)


def _chip_option(sp: argparse.ArgumentParser, what: str) -> None:
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout")
    sp.add_argument("--chip", default=None, help=f"chip name or folder: {what}")


def timer_for() -> runner.Timer:
    """Core ML's timer, on macOS with coremltools; anywhere else one line (status 2)."""
    if sys.platform != "darwin":
        raise InputError(
            f"probe run times Core ML predictions, which only macOS can run (this is "
            f"{sys.platform}); copy the folder to a Mac and run it there"
        )
    from ane_kdma.probe.build import coremltools

    return runner.CoreMLTimer(coremltools())


def _set_chip(args: argparse.Namespace, m: manifests.Manifest) -> chips.Chip:
    return chips.load(args.chip if args.chip is not None else m.chip)


def run_make(args: argparse.Namespace) -> int:
    from ane_kdma.probe.build import make

    chip = chips.load(args.chip)
    m = make(chip, args.out, args.laps)
    total = sum(p.bytes_per_core for p in m.probes) * chip.cores
    if args.json:
        print(json.dumps({"out": str(args.out), "chip": chip.name, "probes": len(m.probes)}))
        return 0
    print(
        f"{args.out}: {len(m.probes)} probe packages for chip {chip.name} "
        f"({total / 2**20:.0f} MiB of fp16 weights) and {manifests.MANIFEST}"
    )
    print(f"next: copy {args.out} to a Mac and run `ane-kdma probe run {args.out}` there")
    return 0


def run_run(args: argparse.Namespace) -> int:
    timer = timer_for()
    folder = Path(args.folder)
    m = manifests.read(folder)
    chip = _set_chip(args, m)
    plan = runner.Plan(args.rounds, args.per_round, args.warmup).check()
    target = folder / "measured" / runner.TIMINGS
    if target.exists():  # before an hour of timing, not after
        raise InputError(f"{target} exists; probe run does not overwrite a measurement")
    with progress.bar(len(m.probes), "probe run", quiet=args.json) as bar:
        outcome = runner.run(folder, m, chip, timer, plan, bar.update)
    path = runner.write(folder, outcome)
    if args.json:
        print(json.dumps({"written": str(path), "refused": outcome.refused}))
    else:
        print(f"{path}: {len(outcome.doc['rows'])} probes timed")
        for name, why in outcome.refused.items():
            print(f"refused {name}: not on the Neural Engine ({why})")
    return 1 if outcome.refused else 0


def run_show(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    m = manifests.read(folder)
    chip = _set_chip(args, m)
    runner.check_set(folder, m, chip)
    times = _timings(folder, m, chip)
    rows: list[dict[str, Any]] = []
    for p in m.probes:
        t = times.get(p.name)
        row: dict[str, Any] = {
            "name": p.name,
            "cout_x_cin": f"{p.cout}x{p.cin}",
            "parts": len(p.cin_parts),
            "bytes_per_core": p.bytes_per_core,
            "k": p.k,
            "x": p.x,
            "purpose": p.purpose,
        }
        if t is not None:
            row["time_us"] = t
            row["gbps"] = round(chip.cores * p.bytes_per_core / (t * 1e3), 2)
        rows.append(row)
    if args.json:
        print(json.dumps({"folder": str(folder), "chip": chip.name, "probes": rows}))
        return 0
    keys = ["name", "cout_x_cin", "parts", "bytes_per_core", "k", "x", "purpose"]
    common.print_table(rows, [*keys, "time_us", "gbps"] if times else keys)
    return 0


def _timings(folder: Path, m: manifests.Manifest, chip: chips.Chip) -> dict[str, float]:
    """The run's medians by probe, each row matching its probe; {} before a run."""
    from ane_kdma import fileio
    from ane_kdma.measured import DATASETS, method
    from ane_kdma.schema import Doc

    path = folder / "measured" / runner.TIMINGS
    if fileio.probe(path, "timings file") is None:
        return {}
    doc = Doc.load(path, "timings file")
    method(doc)
    t = DATASETS[runner.TIMINGS](doc, chip)
    by_name = {p.name: p for p in m.probes}
    said = doc.obj("conditions").string("refused", "") if doc.has("conditions") else ""
    refused = {part.split(" (", 1)[0] for part in said.split("; ")} if said else set()
    for i, row in enumerate(t.rows):
        p = by_name.get(row.name)
        where = f"{runner.TIMINGS}: rows[{i}]"
        if p is None:
            raise InputError(f"{where}.name: {row.name!r} is not a probe of {manifests.MANIFEST}")
        if (row.cout, row.cin, row.task_bytes) != (p.cout, p.cin, p.task_bytes):
            raise InputError(
                f"{where}.shape: {row.cout}x{row.cin} in {len(row.task_bytes)} parts, the "
                f"manifest's {p.name} is {p.cout}x{p.cin} in {len(p.task_bytes)}"
            )
    timed = {r.name: r.time.value for r in t.rows}
    for p in m.probes:
        if p.name not in timed and p.name not in refused:
            raise InputError(f"{runner.TIMINGS}: rows: no timing for probe {p.name}")
    return timed
