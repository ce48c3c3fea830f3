#!/usr/bin/env python3
"""Mutation check (`make mutants`): one-line RTL bugs, each of which the checks must catch.

Every mutant is a copy of rtl/ and the harness in a scratch directory (the
repository is never touched) with one line changed. It is built there, in its
own build directory, and the pyuvm environment (tb/uvm/) runs on it with a
short, fixed-seed plan. A mutant is *caught* when the run fails; the tool
names the check that fired first: an RTL immediate assertion ($error), the
HDL line checker, or a tagged scoreboard, timeout or coverage failure.

Before the mutants, the same plan runs on the unmodified RTL (the normal
cached builds) and must pass, so that a kill means the mutation was seen.

    python tools/mutants.py --sim verilator          # all mutants, 2 at a time
    python tools/mutants.py --only credit_clamp_removed --keep

Exit status: 0 when every mutant is caught, 1 otherwise, 2 on a setup error.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TB = REPO / "tb"
if str(TB) not in sys.path:
    sys.path.insert(0, str(TB))  # the runner builds the simulator's PYTHONPATH from sys.path

from ane_kdma import chip, hypotheses  # noqa: E402
from ane_kdma.engines.cocotb import build_params  # noqa: E402
from ane_kdma.sim import (  # noqa: E402
    RTL,
    TIMESCALE,
    check_simulator,
    rtl_sources,
    run,
    simulator_args,
)

TOP = "kdma_tb_top"
TEST_MODULE = "uvm.tests"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # under rtl/
    find: str  # text that occurs exactly once in the file
    replace: str
    mode: str  # the hypothesis (ane_kdma.hypotheses) whose build exposes it
    what: str
    cores: int = 1


MUTANTS = (
    Mutant(
        "credit_end_ptr_off_by_one",
        "kdma_credit.sv",
        "assign end_ptr   = start_ptr_i + transfer_lines_i[RingBits-1:0];",
        "assign end_ptr   = start_ptr_i + transfer_lines_i[RingBits-1:0] + 1'b1;",
        "literal",
        "kdma_credit: the ring's end pointer one line too far",
    ),
    Mutant(
        "credit_clamp_removed",
        "kdma_credit.sv",
        "assign credit_o = (avail > Clamp) ? CreditBits'(PrefetchMaxLines) : CreditBits'(avail);",
        "assign credit_o = CreditBits'(avail);",
        "fixed",
        "kdma_credit: no min(credit, 256)",
    ),
    Mutant(
        "fix_subtraction_14_bits",
        "kdma_credit.sv",
        "CreditFixed:   avail = transfer_lines_i - issued_lines_i;",
        "CreditFixed:   avail = COUNT_BITS'(RingBits'(transfer_lines_i - issued_lines_i));",
        "fixed",
        "kdma_credit FIXED: lines left computed in 14 bits (the erratum back in the fix)",
    ),
    Mutant(
        "inflight_cap_ignored",
        "kdma_prefetch_ring.sv",
        " && (outstanding_i < cap_o);",
        ";",
        "fixed",
        "kdma_prefetch_ring: issue gate ignores window + credit",
    ),
    Mutant(
        "window_ignored",
        "kdma_prefetch_ring.sv",
        "assign window_plus_credit = SumBits'(window_i) + SumBits'(credit_o);",
        "assign window_plus_credit = SumBits'(credit_o);",
        "signed",
        "kdma_prefetch_ring: demand window dropped from the cap",
    ),
    Mutant(
        "request_address_off_by_one",
        "kdma_prefetch_ring.sv",
        "assign req_addr_o     = base_line_i + issued_q[LINE_ADDR_BITS-1:0];",
        "assign req_addr_o     = base_line_i + issued_q[LINE_ADDR_BITS-1:0] + 1'b1;",
        "fixed",
        "kdma_prefetch_ring: every read one line ahead",
    ),
    Mutant(
        "data_words_swapped_pkg",
        "kdma_pkg.sv",
        "d[32*j+:32] = line_word(line_addr, 4'(j));",
        "d[32*j+:32] = line_word(line_addr, 4'(j) ^ 4'd1);",
        "fixed",
        "kdma_pkg line_data: adjacent words swapped (the HDL checker shares it)",
    ),
    Mutant(
        "data_of_next_line_mem",
        "kdma_mem_model.sv",
        "assign resp_data_o[c]  = line_data(addr_mem[rd_q]);",
        "assign resp_data_o[c]  = line_data(addr_mem[rd_q] + 1'b1);",
        "fixed",
        "kdma_mem_model: returns the next line's data",
    ),
    Mutant(
        "done_one_line_early",
        "kdma_core.sv",
        "assign cur_last   = cur_drain && (consumed_q + 1'b1 == lines_q);",
        "assign cur_last   = cur_drain && (consumed_q + 2'd2 == lines_q);",
        "fixed",
        "kdma_core: done raised one line early",
    ),
    Mutant(
        "partial_line_dropped",
        "kdma_core.sv",
        "+ COUNT_BITS'(|size_bytes_i[LINE_SHIFT-1:0]);",
        ";",
        "fixed",
        "kdma_core: a size's partial last line not rounded up",
    ),
    Mutant(
        "kmem_read_pointer_stuck",
        "kdma_core.sv",
        "if (drain)        kmem_rd_q <= kmem_rd_q + 1'b1;",
        "if (1'b0)         kmem_rd_q <= kmem_rd_q + 1'b1;",
        "literal",
        "kdma_core: KMem read pointer never advances",
    ),
    Mutant(
        "tail_not_kept",
        "kdma_core.sv",
        "if (cur_busy_q && !cur_last) tail_q <=",
        "if (1'b0) tail_q <=",
        "signed",
        "kdma_core: a back-to-back task forgets the draining task's lines",
    ),
    Mutant(
        "arbiter_never_restarts",
        "kdma_top.sv",
        ".arb_restart_i(accept),",
        ".arb_restart_i(1'b0),",
        "fixed",
        "kdma_top: round-robin does not restart at port 0 per task",
        cores=16,
    ),
)

# "[tag] message" raised by tb/uvm; an RTL $error on Verilator or Icarus.
TAG = re.compile(r"AssertionError: \[([\w:-]+)\] (.*)")
RTL_ERROR = re.compile(
    r"(?:%Error: \S+: Assertion failed in \S+: |ERROR: \S+kdma_\w+\.sv:\d+: )(.*)"
)


@dataclass
class Outcome:
    mutant: Mutant
    caught: bool
    check: str
    detail: str
    seconds: float


def _env(args: argparse.Namespace, cores: int) -> dict[str, str]:
    transfers = args.transfers if cores == 1 else max(args.transfers, 25 * args.multi_tasks)
    return {
        "KDMA_UVM_SIM": args.sim,
        "KDMA_SEED": str(args.seed),
        "KDMA_UVM_TRANSFERS": str(transfers),
        "KDMA_UVM_KMAX": str(args.kmax),
        "KDMA_UVM_LINE_CHECK": "4096",
    }


def _case(cores: int) -> str:
    return "KdmaRegressionTest" if cores == 1 else "KdmaMultiCoreTest"


def _params(mode: str, cores: int) -> dict[str, int]:
    """The build of the m3 chip for `mode`, as tb/test_kdma.py and the CLI's RTL engine make it."""
    return build_params(hypotheses.get(mode), chip.load(), cores)


def _check_applies(m: Mutant) -> str | None:
    """Why `m` no longer applies to the repository's RTL, or None."""
    path = RTL / m.file
    hits = path.read_text().count(m.find) if path.is_file() else 0
    return None if hits == 1 else f"{m.name}: {m.find!r} occurs {hits} times in rtl/{m.file}"


def _mutate(m: Mutant, root: Path) -> list[Path]:
    """Copy the RTL and harness under root/src with m applied; return the sources in order."""
    src = root / "src"
    src.mkdir(parents=True)
    out = []
    for orig in rtl_sources():
        dest = src / orig.name
        text = orig.read_text()
        if orig.parent == RTL and orig.name == m.file:
            text = text.replace(m.find, m.replace)
        dest.write_text(text)
        out.append(dest)
    return out


def _classify(log: str) -> tuple[str, str]:
    """The first check that fired, in log order."""
    for line in log.splitlines():
        rtl = RTL_ERROR.search(line)
        if rtl:
            return "rtl-assertion", rtl.group(1).strip()
        tag = TAG.search(line)
        if tag:
            return tag.group(1), tag.group(2).strip()
    if "Verilog $stop" in log or "SimFailure" in log:
        return "simulation stopped", ""
    return "failed", ""


def _run_mutant(m: Mutant, args: argparse.Namespace, scratch: Path) -> Outcome:
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    t0 = time.time()
    root = scratch / m.name
    sources = _mutate(m, root)
    runner = get_runner(args.sim)
    build_dir = root / "build"
    try:
        runner.build(
            sources=[str(s) for s in sources],
            hdl_toplevel=TOP,
            parameters=_params(m.mode, m.cores),
            build_args=simulator_args(args.sim, False),
            build_dir=str(build_dir),
            timescale=TIMESCALE,
            always=True,
            log_file=str(root / "build.log"),
        )
    except Exception as exc:  # noqa: BLE001 - a mutant that does not compile is reported
        return Outcome(m, False, "BUILD ERROR", f"{exc} (see {root / 'build.log'})", 0.0)
    results = root / "results.xml"
    log_file = root / "sim.log"
    try:
        runner.test(
            test_module=TEST_MODULE,
            testcase=_case(m.cores),
            hdl_toplevel=TOP,
            hdl_toplevel_lang="verilog",
            build_dir=str(build_dir),
            test_dir=str(root),
            results_xml=str(results),
            extra_env=_env(args, m.cores),
            timescale=TIMESCALE,
            log_file=str(log_file),
        )
    except RuntimeError:
        pass  # the simulator exits non-zero after an RTL $error; the log says why
    seconds = time.time() - t0
    total, failed = get_results(results) if results.is_file() else (0, 1)
    if total and not failed:
        return Outcome(m, False, "SURVIVED", f"the plan passed (see {log_file})", seconds)
    check, detail = _classify(log_file.read_text() if log_file.is_file() else "")
    return Outcome(m, True, check, detail, seconds)


def _baseline(args: argparse.Namespace, scratch: Path, mutants: list[Mutant]) -> None:
    """The plan on the unmodified RTL (normal cached builds) must pass."""
    for mode, cores in sorted({(m.mode, m.cores) for m in mutants}):
        t0 = time.time()
        tdir = scratch / f"baseline-{mode}-{cores}"
        p = _params(mode, cores)
        run(args.sim, TOP, p, TEST_MODULE, _case(cores), extra_env=_env(args, cores), test_dir=tdir)
        print(f"baseline {mode:<7} x{cores:<2} passed ({time.time() - t0:.0f} s)")


def _table(outcomes: list[Outcome], markdown: bool) -> str:
    rows = [("mutant", "mode", "caught", "first check", "what", "detail")]
    for o in outcomes:
        m = o.mutant
        mode = m.mode + (f" x{m.cores}" if m.cores > 1 else "")
        detail = o.detail if len(o.detail) <= 90 else o.detail[:87] + "..."
        rows.append((m.name, mode, "yes" if o.caught else "NO", o.check, m.what, detail))
    if markdown:
        out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:4], widths, strict=True)]
        lines.append("  ".join(cells) + "  " + r[5])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.environ.get("SIM", "verilator"))
    ap.add_argument("--only", nargs="*", help="mutant names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--seed", type=int, default=1, help="KDMA_SEED of every run (default 1)")
    ap.add_argument("--transfers", type=int, default=40, help="single-core plan (default 40)")
    ap.add_argument("--kmax", type=int, default=1, help="notch laps 0..kmax (default 1)")
    ap.add_argument("--multi-tasks", type=int, default=12, help="16-core tasks (default 12)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants built and run at once")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = ap.parse_args(argv)

    if args.list:
        for m in MUTANTS:
            print(f"{m.name:<28} {m.mode:<8} {m.file:<22} {m.what}")
        return 0
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    unknown = set(args.only or []) - {m.name for m in MUTANTS}
    if unknown or not mutants:
        print(f"mutants: unknown mutant(s) {sorted(unknown)}; see --list", file=sys.stderr)
        return 2
    stale = [why for m in mutants if (why := _check_applies(m))]
    if stale:
        print("mutants: the RTL changed under a mutant:\n  " + "\n  ".join(stale), file=sys.stderr)
        return 2
    try:
        check_simulator(args.sim)
    except ValueError as exc:
        print(f"mutants: {exc}", file=sys.stderr)
        return 2
    if args.sim == "verilator":
        os.environ["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"  # as ane_kdma.sim.build

    t0 = time.time()
    scratch = Path(tempfile.mkdtemp(prefix="kdma-mutants-"))
    print(f"{len(mutants)} mutants on {args.sim}, seed {args.seed}; scratch {scratch}")
    try:
        if not args.no_baseline:
            _baseline(args, scratch, mutants)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(_run_mutant, m, args, scratch) for m in mutants]
            outcomes = []
            for f in futures:
                o = f.result()
                outcomes.append(o)
                state = "caught" if o.caught else o.check
                print(f"  {o.mutant.name:<28} {state:<9} {o.check:<22} ({o.seconds:.0f} s)")
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    killed = sum(o.caught for o in outcomes)
    print()
    print(_table(outcomes, args.markdown))
    print()
    print(
        f"kill rate {killed}/{len(outcomes)} = {100 * killed / len(outcomes):.0f}% "
        f"({args.sim}, seed {args.seed}, {time.time() - t0:.0f} s)"
    )
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
