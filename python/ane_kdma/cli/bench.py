"""`bench`: speed and peak memory of every engine, side by side, in one run (never asserted).

cycles_per_s: the batch harness (on the full RTL, and on the counters-only
build the rtl engine runs), cocotb on Verilator and on Icarus (when
installed), and the cycle model on the same workloads, each beside a bare
Verilator C++ loop over the same RTL (the clock toggled, nothing else), the
honest floor for a cycle-based simulator. predict_s: predict at 4 GiB - 64 B
per core on its default engine (the cycle model's slowest size). sweep_s: the full-aperture sweep
D = 8..16384 step 8 at N = 4096 on every core of the chip, the buggy reading
and the fix, as rtl-batch, model and analytic. Every item runs in its own
process, so its peak memory (its own and its children's largest resident
set) is its alone; builds happen before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ane_kdma import contract, runner
from ane_kdma.cli import common
from ane_kdma.errors import InputError

if TYPE_CHECKING:
    from ane_kdma.chip import Chip
    from ane_kdma.contract import Workload

MB = 1024.0  # ru_maxrss is in KiB on Linux
SWEEP = (8, 16384, 8, 4096)  # d_min, d_max, d_step, N
TARGETS = {  # the targets on 2 cores
    "batch-verilator": ("cycles_per_s", ">=", 20e6),
    "sweep-rtl-batch": ("sweep_s", "<=", 60.0),
    "sweep-model": ("sweep_s", "<=", 10.0),
    "sweep-analytic": ("sweep_s", "<=", 1.0),
    "predict-4gib": ("predict_s", "<=", 1.0),
}
SPEED_ITEMS = (
    "bare-verilator",
    "batch-verilator",
    "batch-verilator-counters",
    "cocotb-verilator",
    "cocotb-icarus",
    "model",
)
#: the counters-only build against the full one, both on the chip's 16-core build
COUNTERS_SPEEDUP = 3.0
SWEEP_ITEMS = ("sweep-rtl-batch", "sweep-model", "sweep-analytic")
#: predict at the largest 32-bit size per core, just off a whole lap, on predict's default
#: engine: the cycle model's slowest case (issue: "predict at any 32-bit size within 1 s")
PREDICT_ITEMS = ("predict-4gib",)
PREDICT_BYTES = (1 << 32) - 64


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "bench",
        help="speed and peak memory of every engine, side by side (printed, not asserted)",
        description=__doc__.split("\n\n")[0],
    )
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout")
    common.add_jobs(sp, "the sweeps")
    sp.add_argument(
        "--only",
        default=None,
        help="comma list of items (default all): "
        + ", ".join(SPEED_ITEMS + SWEEP_ITEMS + PREDICT_ITEMS),
    )
    sp.set_defaults(func=run)


# ---------------------------------------------------------------- the items (one process each)


def _chip() -> Chip:
    from ane_kdma import chip as chips

    return chips.load()


def _speed_loads(cores: int = 1, laps: tuple[int, ...] = (1, 2, 3, 4)) -> list[Workload]:
    """k x ring lines on `cores` cores, one workload per k: millions of cycles on the RTL."""
    from ane_kdma.contract import Workload

    chip = _chip()
    lb = chip.line_bytes
    return [Workload.from_size(k * chip.ring_lines * lb, cores) for k in laps]


def _marginal(run: Callable[[list], list], small: list, big: list) -> dict[str, object]:
    """cycles/s from the difference of two runs: start-up (a simulator launch) cancels out."""
    run(small[:1])  # build, warm caches
    t0 = time.perf_counter()
    a = run(small)
    t1 = time.perf_counter()
    b = run(big)
    t2 = time.perf_counter()
    ca, cb = sum(r.cycles for r in a), sum(r.cycles for r in b)
    rate = (cb - ca) / max((t2 - t1) - (t1 - t0), 1e-9)
    return {"cycles_per_s": rate, "cycles": cb, "seconds": t2 - t1, "startup_s": None}


def _item_bare() -> dict[str, object]:
    """A bare loop while the RTL streams one transfer far longer than the run (the floor).

    The plain fields are the full RTL (the floor of batch-verilator); the
    ``_counters`` fields the counters-only build (the floor of batch-verilator-counters).
    """
    from ane_kdma.contract import Workload
    from ane_kdma.engines import verilator as vb

    chip = _chip()
    h = chip.hypothesis
    lb = chip.line_bytes
    one = Workload.from_size(64 * chip.ring_lines * lb, 1)
    wide = Workload.from_size(64 * chip.ring_lines * lb, chip.cores)
    return {
        "cycles_per_s": vb.bare_cycles_per_s(h, chip, 1, 20_000_000, one),
        f"cycles_per_s_{chip.cores}_cores": vb.bare_cycles_per_s(
            h, chip, chip.cores, 1_000_000, wide
        ),
        "cycles_per_s_idle": vb.bare_cycles_per_s(h, chip, 1, 20_000_000),
        "cycles_per_s_counters": vb.bare_cycles_per_s(h, chip, 1, 20_000_000, one, False),
        f"cycles_per_s_{chip.cores}_cores_counters": vb.bare_cycles_per_s(
            h, chip, chip.cores, 1_000_000, wide, False
        ),
    }


def _item_batch(payload: bool) -> dict[str, object]:
    """The batch engine on the full RTL (payload) or the counters-only build it runs by default."""
    from ane_kdma.engines.verilator import VerilatorEngine

    chip = _chip()
    h = chip.hypothesis
    eng = VerilatorEngine(payload=payload)
    loads = _speed_loads(1, (1, 8, 7, 6, 5))  # about 4 M cycles
    out = _marginal(lambda ws: eng.run_many(h, chip, ws), loads[:1], loads)
    wide = _speed_loads(chip.cores)[:2]
    many = _marginal(lambda ws: eng.run_many(h, chip, ws), wide[:1], wide)
    out[f"cycles_per_s_{chip.cores}_cores"] = many["cycles_per_s"]
    return out


def _item_cocotb(sim: str) -> dict[str, object]:
    from ane_kdma.engines.cocotb import CocotbEngine
    from ane_kdma.sim import check_simulator

    check_simulator(sim)
    chip = _chip()
    h = chip.hypothesis
    eng = CocotbEngine(sim)
    loads = _speed_loads(1)
    big = loads[:2] if sim == "icarus" else loads
    return _marginal(lambda ws: eng.run_many(h, chip, ws), loads[:1], big)


def _item_model() -> dict[str, object]:
    chip = _chip()
    h = chip.hypothesis
    eng = contract.get_engine("model")
    loads = _speed_loads(1)
    eng.run_many(h, chip, loads[:1])
    t0 = time.perf_counter()
    res = eng.run_many(h, chip, loads)
    dt = time.perf_counter() - t0
    cyc = sum(r.cycles for r in res)
    return {"cycles_per_s": cyc / dt, "cycles": cyc, "seconds": dt}


def _item_predict() -> dict[str, object]:
    """predict --bytes-per-core 0xFFFFFFC0 on its default engine: the chip's reading and the fix."""
    from ane_kdma.cli.predict import predict_one

    chip = _chip()
    t0 = time.perf_counter()
    row = predict_one(chip, PREDICT_BYTES, chip.hypothesis, 1, "model")
    return {"predict_s": time.perf_counter() - t0, "time_us": row["time_us"]}


def _item_sweep(engine: str, jobs: int) -> dict[str, object]:
    from ane_kdma import cluster
    from ane_kdma import hypotheses as hyps
    from ane_kdma.contract import Workload

    chip = _chip()
    d_min, d_max, d_step, n = SWEEP
    from ane_kdma import sweep as sw

    d = sw.check_range(chip, d_min, d_max, d_step, n)
    lines = chip.measured.geo.bytes_per_core(d, n) // chip.line_bytes
    lb = chip.line_bytes
    loads = [Workload.from_size(int(x) * lb, chip.cores) for x in lines]
    pair = (chip.hypothesis, hyps.get(hyps.FIXED))
    with cluster.options(cluster.from_env()) as on:  # bench --scheduler
        for h in pair:  # builds outside the clock (on every worker of a cluster)
            runner.run_many(engine, h, chip, loads[:1], jobs=1)
            workers = on.on_every_worker(engine, h, chip, loads[:1]) if on else 0
        t0 = time.perf_counter()
        cyc = 0
        for h in pair:
            cyc += sum(r.cycles for r in runner.run_many(engine, h, chip, loads, jobs=jobs))
        dt = time.perf_counter() - t0
    where = {"scheduler": on.address, "workers": workers} if on else {}
    return {
        "sweep_s": dt,
        "points": len(loads) * len(pair),
        "hypotheses": [h.name for h in pair],
        "cycles": cyc,
        "jobs": jobs,
        **where,
    }


def run_item(name: str, jobs: int) -> dict[str, object]:
    """One item, measured in this process (bench runs each in a fresh one)."""
    table: dict[str, Callable[[], dict[str, object]]] = {
        "bare-verilator": _item_bare,
        "batch-verilator": lambda: _item_batch(True),
        "batch-verilator-counters": lambda: _item_batch(False),
        "cocotb-verilator": lambda: _item_cocotb("verilator"),
        "cocotb-icarus": lambda: _item_cocotb("icarus"),
        "model": _item_model,
        "sweep-rtl-batch": lambda: _item_sweep("rtl", jobs),
        "sweep-model": lambda: _item_sweep("model", jobs),
        "sweep-analytic": lambda: _item_sweep("analytic", jobs),
        "predict-4gib": _item_predict,
    }
    out = table[name]()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MB
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / MB
    out["peak_mb"] = round(max(own, kids), 1)
    out["peak_mb_self"] = round(own, 1)
    out["peak_mb_largest_child"] = round(kids, 1)
    return out


# ---------------------------------------------------------------- the command


def machine() -> dict[str, object]:
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
    }


def _wanted(only: str | None) -> list[str]:
    """The items to run, in table order; nothing to run is bad input (one line), not a 0."""
    items = list(SPEED_ITEMS + SWEEP_ITEMS + PREDICT_ITEMS)
    if only is not None:
        want = [x.strip() for x in only.split(",") if x.strip()]
        if not want:
            raise InputError(f"--only {only!r} names no bench item (one of: {', '.join(items)})")
        bad = [x for x in want if x not in items]
        if bad:
            raise InputError(f"unknown bench item {bad[0]!r} (one of: {', '.join(items)})")
        items = [x for x in items if x in want]
    if shutil.which("iverilog") is None and "cocotb-icarus" in items:
        items.remove("cocotb-icarus")
        if not items:
            raise InputError("nothing to run: cocotb-icarus needs Icarus Verilog (no iverilog)")
        if only is not None:
            common.warn("cocotb-icarus skipped: Icarus Verilog (iverilog) is not installed")
    return items


def _spawn(name: str, jobs: int, scheduler: str | None = None) -> dict[str, object]:
    from ane_kdma import cluster

    env = dict(os.environ, ANE_KDMA_PROGRESS="0")
    env.pop(cluster.ENV, None)
    if scheduler is not None and name in SWEEP_ITEMS:
        env[cluster.ENV] = scheduler  # the sweeps run on it; the speed items on this machine
    proc = subprocess.run(
        [sys.executable, "-m", "ane_kdma.cli.bench", name, str(jobs)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return {"error": lines[-1][:200] if lines else f"exit status {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _judge_counters(results: dict[str, dict[str, object]]) -> None:
    """The counters-only build against the full one, on the chip's multi-core build."""
    full, fast = results.get("batch-verilator", {}), results.get("batch-verilator-counters", {})
    key = next((k for k in fast if k.startswith("cycles_per_s_") and k.endswith("_cores")), None)
    if key is None or key not in full or "error" in fast or "error" in full:
        return
    speedup = float(fast[key]) / float(full[key])  # type: ignore[arg-type]
    fast["speedup_vs_payload"] = speedup
    fast["target"] = f"{key} >= {COUNTERS_SPEEDUP:g}x batch-verilator"
    fast["met"] = speedup >= COUNTERS_SPEEDUP


def _judge(name: str, res: dict[str, object]) -> dict[str, object]:
    if name not in TARGETS or "error" in res:
        return {}
    field, op, goal = TARGETS[name]
    value = float(res[field])  # type: ignore[arg-type]
    met = value >= goal if op == ">=" else value <= goal
    return {"target": f"{field} {op} {goal:g}", "met": met}


def run(args: argparse.Namespace) -> int:
    from ane_kdma import cluster

    jobs = args.jobs or runner.default_jobs()
    items = _wanted(args.only)
    scheduler = common.scheduler_of(args)
    if scheduler is not None and any(name in SWEEP_ITEMS for name in items):
        with cluster.options(scheduler):
            pass  # an address that does not answer: one line now, not an error per item
    results: dict[str, dict[str, object]] = {}
    for name in items:
        if not args.json:
            common.say(f"bench: {name} ...")
        results[name] = _spawn(name, jobs, scheduler)
        results[name].update(_judge(name, results[name]))
    _judge_counters(results)
    bare = results.get("bare-verilator", {}).get("cycles_per_s")
    for name in SPEED_ITEMS:
        r = results.get(name)
        if r and bare and "cycles_per_s" in r:
            r["ratio_to_bare"] = float(r["cycles_per_s"]) / float(bare)  # type: ignore[arg-type]
    doc = {
        "machine": (m := machine()),
        "jobs": jobs,
        "sweep": dict(zip(("d_min", "d_max", "d_step", "n"), SWEEP, strict=True)),
        "results": results,
    }
    if args.json:
        print(json.dumps(doc))
        return 0
    how = f"on the cluster at {scheduler}" if scheduler else f"with {jobs} jobs"
    print(f"bench on {m['cpu']}, {m['nproc']} CPUs, {m['date']}, sweeps {how}")
    rows = []
    for name, r in results.items():
        sweep_s = r.get("sweep_s", r.get("predict_s"))  # the items timed whole
        rows.append(
            {
                "item": name,
                "cycles_per_s": _fmt_rate(r.get("cycles_per_s")),
                "all_cores": _fmt_rate(_all_cores(r)),
                "vs_bare": "" if "ratio_to_bare" not in r else f"{r['ratio_to_bare']:.2f}",
                "seconds": "" if not isinstance(sweep_s, int | float) else f"{sweep_s:.2f}",
                "peak_mb": r.get("peak_mb", ""),
                "target": r.get("target", ""),
                "met": "" if "met" not in r else ("yes" if r["met"] else "NO"),
                "note": r.get("error", ""),
            }
        )
    common.print_table(rows, list(rows[0]) if rows else ["item"])
    return 0


def _all_cores(r: dict[str, object]) -> object:
    """The item's rate on the chip's every-core build (cycles_per_s_16_cores on the m3), if any."""
    return next(
        (v for k, v in r.items() if k.startswith("cycles_per_s_") and k.endswith("_cores")), None
    )


def _fmt_rate(v: object) -> str:
    return "" if v is None else f"{float(v) / 1e6:.2f} M"  # type: ignore[arg-type]


if __name__ == "__main__":  # the per-item child: python -m ane_kdma.cli.bench ITEM JOBS
    print(json.dumps(run_item(sys.argv[1], int(sys.argv[2]))))
