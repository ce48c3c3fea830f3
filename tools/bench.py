#!/usr/bin/env python3
"""Speed and memory figures for the engines (`make bench`): printed, never asserted.

Timed unit tests are flaky on a shared 2-core machine; this script is where
speed targets are measured and reported instead.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable

from ane_kdma import cyclemodel as cm
from ane_kdma.engines import cycles
from ane_kdma.hw import RING_LINES, CreditMode
from ane_kdma.profile import load


def _timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", default="verilator", help="comma list: verilator,icarus")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    s = load().settings
    rows: list[dict[str, object]] = []

    lines = 8 * RING_LINES
    for mode in (CreditMode.FIXED, CreditMode.SIGNED):
        dt, res = _timed(lambda m=mode: cm.single(m, s, lines))
        rows.append(
            {
                "what": f"model recurrence, {mode.name.lower()}, 8 MiB/core",
                "seconds": dt,
                "rate": f"{lines / dt / 1e6:.2f} M lines/s",
            }
        )
    tasks = [cm.CoreTask(c * 0x100000, 4096 * 64) for c in range(16)]
    dt, res = _timed(lambda: cm.simulate(CreditMode.FIXED, s, tasks), repeat=1)
    rows.append(
        {
            "what": "model stepped, 16 cores x 256 KiB",
            "seconds": dt,
            "rate": f"{res.cycles / dt / 1e3:.1f} k cycles/s",
        }
    )
    try:
        from ane_kdma import analytic  # noqa: F401

        sweep = getattr(analytic, "bench_sweep", None)
        if sweep is not None:
            dt, n = _timed(sweep)
            rows.append(
                {"what": "analytic sweep D=64..16384", "seconds": dt, "rate": f"{n} points"}
            )
    except ImportError:
        pass

    for sim in [x for x in args.sims.split(",") if x]:
        seq = [[RING_LINES]]
        cycles("rtl", CreditMode.SIGNED, s, [[64]], sim=sim)  # build outside the timing
        t0 = time.perf_counter()
        got = cycles("rtl", CreditMode.SIGNED, s, seq, sim=sim)
        dt = time.perf_counter() - t0
        rows.append(
            {
                "what": f"RTL {sim}, buggy 1 MiB/core (incl. start-up)",
                "seconds": dt,
                "rate": f"{got[0] / dt / 1e3:.0f} k cycles/s",
            }
        )

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append({"what": "peak RSS of this process", "seconds": 0.0, "rate": f"{rss:.0f} MiB"})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['what']:<50} {r['seconds']:8.3f} s  {r['rate']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
