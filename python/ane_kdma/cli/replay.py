"""`replay`: register dumps run as they are (every core's base and size), on every hypothesis."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ane_kdma import contract, regdump
from ane_kdma import hypotheses as hyps
from ane_kdma.cli import common
from ane_kdma.hw import lap_and_offset

if TYPE_CHECKING:
    from ane_kdma.measured import Measurements


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "replay",
        help="run register dumps on every hypothesis, buggy and fixed",
        description=(
            "Replay each dump (text, Zin or binary; - reads standard input) as the task it "
            "describes, every enabled core with its own base and size. A dump that does not "
            "form one consistent task is refused; an unusual one is replayed with its "
            "warnings on stderr (and in --json). A measured figure is shown only for a dump "
            "with the measurement's per-core size and core count."
        ),
    )
    sp.add_argument("dumps", nargs="+", metavar="DUMP")
    common.add_common(sp)
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chip = common.load_chip(args)
    meas = chip.measured
    tasks = [regdump.load_task(path, chip=chip) for path in args.dumps]
    loads = [task.to_workload(chip) for task in tasks]  # every dump checked before any runs
    rows = []
    for path, task, load in zip(args.dumps, tasks, loads, strict=True):
        lines = task.lines_per_core
        k, x = lap_and_offset(lines, chip.ring_lines)
        cores = len(task.enabled_cores)
        row: dict[str, object] = {
            "dump": str(path),
            "cin": task.cin,
            "bytes_per_core": task.bytes_per_core,
            "lines_per_core": lines,
            "k": k,
            "x": x,
            "cores": cores,
            "measured_gbps": meas.known_gbps_for(task.bytes_per_core, cores),
        }
        for h in hyps.registry():
            res = contract.run(args.engine, h, chip, load)
            row[f"{h.name}_cycles"] = res.cycles
            row[f"{h.name}_gbps"] = round(res.gbps, 2)
        row["warnings"] = list(task.warnings)
        rows.append(row)
    for r in rows:
        warnings = r["warnings"]
        assert isinstance(warnings, list)
        for w in warnings:
            common.warn(f"{r['dump']}: {w}")
    if args.json:
        print(json.dumps({"engine": args.engine, "profile": chip.profile.name, "dumps": rows}))
        return 0
    sources = sorted({f.source.where for f in _figures(meas) if f.source})
    common.print_header("replay", chip, args.engine, f"{len(rows)} dumps")
    names = [h.name for h in hyps.registry()]
    for unit, what in (("gbps", "GB/s of all cores"), ("cycles", "kernel-DMA cycles")):
        print()
        measured = f"; measured: {', '.join(sources)}" if unit == "gbps" and sources else ""
        print(f"{what} per reading{measured}")
        table = []
        for r in rows:
            shown: dict[str, object] = {"dump": r["dump"]}
            if unit == "gbps":  # the task once, in the first table
                shown |= {"lines": r["lines_per_core"], "k": r["k"], "x": r["x"]}
                shown["cores"] = r["cores"]
            shown |= {n: r[f"{n}_{unit}"] for n in names}
            if unit == "gbps":
                shown["measured"] = r["measured_gbps"] or "-"
            table.append(shown)
        common.print_table(table, list(table[0]))
    return 0


def _figures(meas: Measurements) -> list:
    f = meas.facts
    out = [p.gbps for p in (f.notch, f.shoulder) if p is not None]
    if meas.table_a is not None:
        from ane_kdma.measured import Figure

        out.append(Figure(0, "us", source=meas.table_a.source))
    return out
