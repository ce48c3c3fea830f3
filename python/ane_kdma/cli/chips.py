"""`chips`: every bundled chip side by side: its ceiling, the notch at 1 MiB, the floor at 2 MiB.

Why a command: the README's chips table is this command's output (``make docs``
regenerates it), so the table cannot drift from the profiles. Each figure is the
chip's fitted profile on the analytic engine (every core streaming at x = 0);
where a profile carries intervals (a fit from a handful of figures), the range
over its fits that all pass follows in brackets.
"""

from __future__ import annotations

import argparse
import json

from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import PROFILE_FILE, Chip, chips_dir, load
from ane_kdma.cli import common
from ane_kdma.contract import Workload

ENGINE = "analytic"  # O(1) in the size: the table is quick to regenerate
MIB = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "chips", help="every bundled chip: ceiling, notch depth at 1 MiB, floor at 2 MiB, source"
    )
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout")
    sp.set_defaults(func=run)


def _gbps(chip: Chip, size: int, buggy: bool) -> float:
    h = chip.hypothesis if buggy else hyps.get(hyps.FIXED)
    load_ = Workload.from_size(size, chip.cores, 1, chip.line_bytes)
    return contract.run(ENGINE, h, chip, load_).gbps


def _fmt(v: float, span: list[float], unit: str, places: int) -> str:
    lo, hi = span
    if round(lo, places) == round(hi, places):
        return f"{v:.{places}f}{unit}"
    return f"{v:.{places}f}{unit} ({lo:.{places}f}-{hi:.{places}f})"


def chip_row(chip: Chip) -> dict[str, object]:
    p = chip.profile
    members = p.members()
    methods = chip.measured.methods.values()
    one, two = MIB, 2 * MIB
    g1 = [_gbps(chip.with_profile(m), one, True) for m in members]
    f1 = [_gbps(chip.with_profile(m), one, False) for m in members]
    d1 = [f / g for f, g in zip(f1, g1, strict=True)]
    g2 = [_gbps(chip.with_profile(m), two, True) for m in members]
    fitted = p.notes.get("status", "").split("`")
    command = fitted[1] if len(fitted) > 2 else "hand-written"
    return {
        "chip": chip.name,
        "ceiling_gbps": round(chip.ceiling_gbps, 3),
        "notch_1mib_gbps": round(g1[0], 2),
        "notch_1mib_depth": round(d1[0], 3),
        "notch_1mib_depth_range": [round(min(d1), 3), round(max(d1), 3)],
        "fixed_1mib_gbps": round(f1[0], 2),
        "floor_2mib_gbps": round(g2[0], 2),
        "floor_2mib_gbps_range": [round(min(g2), 2), round(max(g2), 2)],
        "predict_overhead_us": p.predict_overhead_us,
        "fits": len(members),
        "profile": command,
        "data": f"{chip.path.name}/measured ({', '.join(sorted(set(methods)))})",
    }


def run(args: argparse.Namespace) -> int:
    names = sorted(p.name for p in chips_dir().iterdir() if (p / PROFILE_FILE).is_file())
    rows = [chip_row(load(n)) for n in names]
    if args.json:
        print(json.dumps({"engine": ENGINE, "chips": rows}))
        return 0
    print(f"chips: {ENGINE} engine, every core at x = 0; (lo-hi): over the profile's fits")
    table = []
    for r in rows:
        depth = [float(x) for x in r["notch_1mib_depth_range"]]  # type: ignore[attr-defined]
        floor = [float(x) for x in r["floor_2mib_gbps_range"]]  # type: ignore[attr-defined]
        table.append(
            {
                "chip": r["chip"],
                "ceiling": f"{r['ceiling_gbps']:g} GB/s",
                "1 MiB notch/fixed": f"{r['notch_1mib_gbps']:.1f}/{r['fixed_1mib_gbps']:.1f} GB/s",
                "depth at 1 MiB": _fmt(float(r["notch_1mib_depth"]), depth, "x", 2),  # type: ignore[arg-type]
                "floor at 2 MiB": _fmt(float(r["floor_2mib_gbps"]), floor, " GB/s", 1),  # type: ignore[arg-type]
            }
        )
    common.print_table(table, list(table[0]))
    for r in rows:
        print(f"{r['chip']}: `{r['profile']}` on {r['data']}")
    return 0
