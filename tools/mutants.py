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

Exit status: 0 when every mutant is caught, 1 otherwise, 2 on a setup error (a mutant
that no longer applies, or the plan failing on an unmodified build).
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


class Stale(Exception):
    """A mutant's site is not in the RTL exactly once: the RTL changed under it."""


# ---------------------------------------------------------------- finding a site by meaning
#
# A mutant names the statement it changes by what that statement drives and reads
# (signal names and operators), not by a verbatim line: the patterns below are
# SystemVerilog tokens that match whatever whitespace, line breaks and comments
# lie between them. Two wildcards: `...` is any text inside one statement (never
# a `;`), `@` is one identifier. A reformatted line, a new comment, a wider
# parameter or a renamed localparam elsewhere leave every mutant in place; a
# change of the construct itself (the signal is gone, the operator differs) is
# refused as stale, never silently skipped, and tests/test_mutants.py applies
# every mutant to the repository's RTL in `make test`.

_TOKEN = re.compile(
    r"\.\.\.|@|[A-Za-z_$][\w$]*|\d*'[sS]?[bodhBODH][0-9a-fA-F_xzXZ?]+|\d+"
    r"|<=|>=|==|!=|&&|\|\||<<|>>|\+:|\S"
)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def loose(spec: str) -> str:
    """The regex for SystemVerilog tokens `spec`, any whitespace between them."""
    parts = []
    for tok in _TOKEN.findall(spec):
        if tok == "...":
            parts.append(r"[^;]*?")
        elif tok == "@":
            parts.append(r"(?<![\w$])[A-Za-z_][\w$]*(?![\w$])")
        elif tok[0].isalnum() or tok[0] in "_$":
            parts.append(rf"(?<![\w$']){re.escape(tok)}(?![\w$])")
        else:
            parts.append(re.escape(tok))
    return r"\s*".join(parts)


def _mask_comments(text: str) -> str:
    """`text` with every comment blanked (same length, newlines kept), so offsets still agree."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: in `file`, the one statement `site` finds, every `find` replaced."""

    name: str
    file: str  # under rtl/
    site: str  # tokens that start exactly one statement of the file (comments ignored)
    find: str  # tokens inside that statement (each match is replaced)
    replace: str  # SystemVerilog text put in place of each match; {} is the matched text
    modes: tuple[str, ...]  # the hypotheses (ane_kdma.hypotheses) whose builds it runs on
    what: str
    # the checks that see this bug for its own reason (docs/mutants.md says why); a run caught
    # first by any other check is reported as caught for the wrong reason, and fails
    checks: tuple[str, ...] = ("scoreboard:cycles",)
    cores: int = 1

    def apply(self, text: str) -> str:
        """`text` (the file) with the mutant applied; Stale if its site is not there once."""
        masked = _mask_comments(text)
        sites = list(re.finditer(loose(self.site), masked))
        if len(sites) != 1:
            raise Stale(
                f"{self.name}: {len(sites)} statements of rtl/{self.file} match {self.site!r}"
            )
        begin = sites[0].start()
        semi = masked.find(";", sites[0].end() - 1)
        if semi < 0:
            raise Stale(f"{self.name}: the statement at {self.site!r} has no end")
        stmt = masked[begin : semi + 1]
        new, hits = re.subn(loose(self.find), lambda m: self.replace.replace("{}", m.group()), stmt)
        if not hits:
            raise Stale(f"{self.name}: {self.find!r} is not in the statement {_short(stmt)!r}")
        return text[:begin] + new + text[semi + 1 :]

    def runs(self) -> list[Run]:
        return [Run(self, mode) for mode in self.modes]


def _short(stmt: str) -> str:
    s = " ".join(stmt.split())
    return s if len(s) <= 80 else s[:77] + "..."


@dataclass(frozen=True)
class Run:
    """A mutant on one build (one reading of the credit)."""

    mutant: Mutant
    mode: str

    @property
    def key(self) -> str:
        return f"{self.mutant.name}@{self.mode}"


# Which builds: a mutant of logic every reading shares runs on the paged reading
# and on a static one (literal or signed), so that neither the page path nor its
# absence can hide it; a mutant of one reading's own arithmetic runs on the
# builds that use it (the fix's subtraction: fixed; the page path: paged), since
# on the others it is the same circuit (an equivalent mutant, not a miss).
PAGED_AND_STATIC = ("paged", "signed")

MUTANTS = (
    Mutant(
        "credit_end_ptr_off_by_one",
        "kdma_credit.sv",
        "assign end_ptr =",
        ";",
        " + 1'b1;",
        ("paged", "literal"),
        "kdma_credit: the ring's end pointer one line too far",
    ),
    Mutant(
        "credit_clamp_removed",
        "kdma_credit.sv",
        "assign credit_o =",
        "= ... ? ... :",
        "=",
        ("signed", "fixed"),
        "kdma_credit: no min(credit, 256) (paged clamps each page first: equivalent there)",
        checks=("rtl-assertion",),
    ),
    Mutant(
        "fix_subtraction_14_bits",
        "kdma_credit.sv",
        "CreditFixed : avail =",
        "transfer_lines_i - issued_lines_i",
        "COUNT_BITS'(RingBits'({}))",
        ("fixed",),
        "kdma_credit FIXED: lines left computed in 14 bits (the erratum back in the fix)",
        checks=("scoreboard:cycles", "coverage:illegal"),
    ),
    Mutant(
        "inflight_cap_ignored",
        "kdma_prefetch_ring.sv",
        "assign room =",
        "@ < cap_o",
        "1'b1",
        PAGED_AND_STATIC,
        "kdma_prefetch_ring: issue gate ignores window + credit (both paths)",
        checks=("rtl-assertion",),
    ),
    Mutant(
        "window_ignored",
        "kdma_prefetch_ring.sv",
        "assign window_plus_credit =",
        "window_i",
        "1'b0",
        PAGED_AND_STATIC,
        "kdma_prefetch_ring: demand window dropped from the cap",
        checks=("timeout", "scoreboard:cycles"),
    ),
    Mutant(
        "request_address_off_by_one",
        "kdma_prefetch_ring.sv",
        "assign req_addr_o =",
        ";",
        " + 1'b1;",
        PAGED_AND_STATIC,
        "kdma_prefetch_ring: every read one line ahead",
        checks=("hdl-checker", "scoreboard:request", "scoreboard:data"),
    ),
    Mutant(
        "data_words_shifted_pkg",
        "kdma_pkg.sv",
        "a = 32 ' ( line_addr ) *",
        "LINE_ADDR_MUL",
        "LINE_ADDR_MUL - LINE_WORD_MUL",  # word j takes the value word j - 1 should have
        PAGED_AND_STATIC,
        "kdma_pkg line_data: each word one word index low (the HDL checker shares it)",
        checks=("scoreboard:data",),
    ),
    Mutant(
        "data_of_next_line_mem",
        "kdma_mem_model.sv",
        "always_comb resp_data [ @ ] = line_data (",
        ") ;",
        " + 1'b1);",
        PAGED_AND_STATIC,
        "kdma_mem_model: returns the next line's data",
        checks=("hdl-checker", "scoreboard:data"),
    ),
    Mutant(
        "done_one_line_early",
        "kdma_core.sv",
        "assign cur_last =",
        "consumed_q + 1'b1 ==",
        "consumed_q + 2'd2 ==",
        PAGED_AND_STATIC,
        "kdma_core: done raised one line early",
        checks=("rtl-assertion", "scoreboard:counters"),
    ),
    Mutant(
        "partial_line_dropped",
        "kdma_core.sv",
        "assign start_lines =",
        "+ @ ' ( | size_bytes_i [ ... ] )",
        "",
        PAGED_AND_STATIC,
        "kdma_core: a size's partial last line not rounded up",
        checks=("scoreboard:counters", "scoreboard:request", "scoreboard:line"),
    ),
    Mutant(
        "kmem_read_pointer_stuck",
        "kdma_core.sv",
        "if ( drain ) kmem_rd_q <=",
        "( drain )",
        "(1'b0)",
        PAGED_AND_STATIC,
        "kdma_core: KMem read pointer never advances",
        checks=("hdl-checker", "scoreboard:line", "scoreboard:data"),
    ),
    Mutant(
        "tail_not_kept",
        "kdma_core.sv",
        "( cur_busy_q && ! cur_last ) tail_q <=",
        "cur_busy_q && ! cur_last",
        "1'b0",
        PAGED_AND_STATIC,
        "kdma_core: a back-to-back task forgets the draining task's lines",
        checks=("rtl-assertion",),
    ),
    Mutant(
        "arbiter_never_restarts",
        "kdma_top.sv",
        ". arb_restart_i (",
        "( accept )",
        "(1'b0)",
        PAGED_AND_STATIC,
        "kdma_top: round-robin does not restart at port 0 per task",
        cores=16,
    ),
    Mutant(
        "governor_never_ramps",
        "kdma_governor.sv",
        "assign ramp_on =",
        "= ... ;",
        "= 1'b0;",
        PAGED_AND_STATIC,
        "kdma_governor: a request never starts below the core rate",
    ),
    Mutant(
        "governor_step_ignored",
        "kdma_governor.sv",
        "if ( step_cnt_q + 1'b1 >= ramp_step_i )",
        ">= ramp_step_i",
        ">= 1'b1",
        PAGED_AND_STATIC,
        "kdma_governor: the rate rises every granted line, not every ramp_step lines",
    ),
    Mutant(
        "dwarm_one_line_too_many",
        "kdma_dwarm.sv",
        "assign hot =",
        "cnt_q < dwarm_lines_i",
        "cnt_q <= dwarm_lines_i",
        PAGED_AND_STATIC,
        "kdma_dwarm: one starved line more than dwarm_lines pays the extra latency",
    ),
    Mutant(
        "governor_rate_never_rises",
        "kdma_governor.sv",
        "else rate_q <=",
        "<= ... ;",
        "<= rate_q;",
        PAGED_AND_STATIC,
        "kdma_governor: a ramp holds its start rate until it ends (the increments lost)",
        # a run held at a low start rate can take more than the model's cycles + 25%, and the
        # run watchdog reports the same excess of cycles before the run ends
        checks=("scoreboard:cycles", "timeout"),
    ),
    Mutant(
        "dwarm_on_fed_lines_too",
        "kdma_dwarm.sv",
        "assign hot =",
        "starved_i &&",
        "",
        PAGED_AND_STATIC,
        "kdma_dwarm: a request's first lines pay the extra latency with credit or without",
    ),
    Mutant(
        "page_path_never_speculative",
        "kdma_credit.sv",
        "assign spec_o =",
        "= ... ;",
        "= 1'b0;",
        ("paged",),
        "kdma_credit PAGED: no line takes the speculative page path",
    ),
    Mutant(
        "page_credit_every_line",
        "kdma_credit.sv",
        "CreditPaged : avail =",
        "= ... ;",
        "= paged_c;",
        ("paged",),
        "kdma_credit PAGED: the credit covers the whole page, not its first c lines",
    ),
    Mutant(
        "page_spec_lines_never_retire",
        "kdma_core.sv",
        "spec_out_q <= spec_out_q +",
        "- @ ' ( drain_spec )",
        "",
        ("paged",),
        "kdma_core PAGED: a drained speculative line is never taken off the speculative count",
        checks=("rtl-assertion",),
    ),
)

# "[tag] message" raised by tb/uvm; an RTL $error on Verilator or Icarus.
TAG = re.compile(r"AssertionError: \[([\w:-]+)\] (.*)")
RTL_ERROR = re.compile(
    r"(?:%Error: \S+: Assertion failed in \S+: |ERROR: \S+kdma_\w+\.sv:\d+: )(.*)"
)


@dataclass
class Outcome:
    run: Run
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


def mutated_text(m: Mutant, rtl: Path = RTL) -> str:
    """The mutant's file as it would be built; Stale if the RTL changed under the mutant."""
    path = rtl / m.file
    if not path.is_file():
        raise Stale(f"{m.name}: rtl/{m.file} is gone")
    return m.apply(path.read_text())


def stale(mutants: list[Mutant] | tuple[Mutant, ...] = MUTANTS, rtl: Path = RTL) -> list[str]:
    """Why each mutant that no longer applies does not (empty: all apply)."""
    out = []
    for m in mutants:
        try:
            mutated_text(m, rtl)
        except Stale as exc:
            out.append(str(exc))
    for m in mutants:
        unknown = [x for x in m.modes if x not in hypotheses.names()]
        if unknown:
            out.append(f"{m.name}: no hypothesis {unknown[0]!r}")
    return out


def mutate(m: Mutant, root: Path) -> list[Path]:
    """Copy the RTL and harness under root/src with m applied; return the sources in order."""
    src = root / "src"
    src.mkdir(parents=True)
    out = []
    for orig in rtl_sources():
        dest = src / orig.name
        text = orig.read_text()
        if orig.parent == RTL and orig.name == m.file:
            text = m.apply(text)
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


# A mutant's model is compiled once for a short plan, so the C++ compiler's time is most of a
# run's. Two settings make it cheap: its C++ at -O0 (-CFLAGS come after verilated.mk's -Os, so
# they win), and Verilator's -fno-inline, which keeps each module its own C++ class, so a mutant
# recompiles only its own module's files and ccache serves the rest from the mutant before it.
# Measured from an empty ccache: two mutants (done_one_line_early and arbiter_never_restarts,
# paged) 84 CPU s at -Os and 60 at -O0; with -fno-inline as well, a second mutant of kdma_core
# after a first took 12 CPU s for its two builds and runs; the whole set 393 CPU s, 34/34 caught.
# The baselines keep the normal builds (ane_kdma.sim.build, shared with make test).
_FAST_COMPILE = {"verilator": ["-CFLAGS", "-O0", "-fno-inline"]}


def run_one(r: Run, args: argparse.Namespace, scratch: Path) -> Outcome:
    """Build the mutant for r.mode in its own directory and run the plan on it."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    m = r.mutant
    t0 = time.time()
    root = scratch / r.key.replace("@", "-")
    sources = mutate(m, root)
    runner = get_runner(args.sim)
    build_dir = root / "build"
    try:
        runner.build(
            sources=[str(s) for s in sources],
            hdl_toplevel=TOP,
            parameters=_params(r.mode, m.cores),
            build_args=simulator_args(args.sim, False) + _FAST_COMPILE.get(args.sim, []),
            build_dir=str(build_dir),
            timescale=TIMESCALE,
            always=True,
            log_file=str(root / "build.log"),
        )
    except Exception as exc:  # noqa: BLE001 - a mutant that does not compile is reported
        return Outcome(r, False, "BUILD ERROR", f"{exc} (see {root / 'build.log'})", 0.0)
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
    except (RuntimeError, SystemExit):
        pass  # the runner exits (sys.exit) when the simulator or a test fails; the log says why
    seconds = time.time() - t0
    total, failed = get_results(results) if results.is_file() else (0, 1)
    if total and not failed:
        return Outcome(r, False, "SURVIVED", f"the plan passed (see {log_file})", seconds)
    check, detail = _classify(log_file.read_text() if log_file.is_file() else "")
    if check == "failed":  # no check fired: a crash of the testbench is not a kill
        return Outcome(r, False, "UNEXPLAINED FAILURE", f"no check named (see {log_file})", seconds)
    if check not in m.checks:  # failed, but not for the bug's own reason: not a kill
        want = " or ".join(m.checks)
        return Outcome(r, False, f"WRONG CHECK {check}", f"expected {want}: {detail}", seconds)
    return Outcome(r, True, check, detail, seconds)


def _baseline(args: argparse.Namespace, scratch: Path, mode: str, cores: int) -> str:
    """The plan on one unmodified build (the normal cached build); "" if it passed, else why."""
    t0 = time.time()
    tdir = scratch / f"baseline-{mode}-{cores}"
    p = _params(mode, cores)
    try:
        run(args.sim, TOP, p, TEST_MODULE, _case(cores), extra_env=_env(args, cores), test_dir=tdir)
    except (AssertionError, RuntimeError, SystemExit) as exc:  # sim.run: AssertionError
        print(f"baseline {mode:<7} x{cores:<2} FAILED ({time.time() - t0:.0f} s)", flush=True)
        return f"the plan fails on the unmodified {mode} x{cores} build ({exc}; see {tdir})"
    print(f"baseline {mode:<7} x{cores:<2} passed ({time.time() - t0:.0f} s)", flush=True)
    return ""


def _table(outcomes: list[Outcome], markdown: bool) -> str:
    rows = [("mutant", "build", "caught", "first check", "what", "detail")]
    for o in outcomes:
        m = o.run.mutant
        build = o.run.mode + (f" x{m.cores}" if m.cores > 1 else "")
        detail = o.detail if len(o.detail) <= 90 else o.detail[:87] + "..."
        rows.append((m.name, build, "yes" if o.caught else "NO", o.check, m.what, detail))
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


def _commit() -> str:
    """HEAD's short hash, marked when rtl/, tb/ or this tool differ from it."""
    import subprocess

    def git(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode:
        return "unknown commit"
    dirty = git("status", "--porcelain", "--", "rtl", "tb", "tools/mutants.py").stdout.strip()
    return head.stdout.strip() + (" with uncommitted changes" if dirty else "")


def doc_markers(sim: str) -> tuple[str, str]:
    """The comments around the generated table of `sim` in docs/mutants.md."""
    return f"<!-- mutants-table:{sim}:begin -->", f"<!-- mutants-table:{sim}:end -->"


def doc_block(
    outcomes: list[Outcome], args: argparse.Namespace, seconds: float, commit: str
) -> str:
    """The generated part of docs/mutants.md for one simulator: how it was run, the table."""
    killed = sum(o.caught for o in outcomes)
    runs = len(outcomes)
    when = time.strftime("%Y-%m-%d", time.gmtime())
    return "\n".join(
        [
            "<!-- generated by tools/mutants.py --doc; do not edit by hand -->",
            f"`python tools/mutants.py --sim {args.sim} --seed {args.seed} --doc docs/mutants.md`"
            f", {when}, commit {commit}: **kill rate {killed}/{runs}"
            f" = {100 * killed / runs:.0f} %**, {len({o.run.mutant.name for o in outcomes})}"
            f" mutants, {seconds:.0f} s on this project's 2-core machine with {args.jobs}"
            " runs at once (a wall time, not a speed figure).",
            "",
            _table(outcomes, True),
        ]
    )


def write_doc(path: Path, sim: str, block: str) -> None:
    """Replace the text between `sim`'s markers in `path` by `block`; the rest is prose."""
    begin, end = doc_markers(sim)
    text = path.read_text()
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"{path}: no {begin} ... {end} section to write the table into")
    path.write_text(text[: i + len(begin)] + "\n" + block + "\n" + text[j:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.environ.get("SIM", "verilator"))
    ap.add_argument("--only", nargs="*", help="mutant names (default: all)")
    ap.add_argument("--mode", nargs="*", help="only these builds (hypothesis names)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true", help="only check that every mutant applies")
    ap.add_argument("--seed", type=int, default=1, help="KDMA_SEED of every run (default 1)")
    ap.add_argument("--transfers", type=int, default=100, help="single-core plan (default 100)")
    ap.add_argument("--kmax", type=int, default=1, help="notch laps 0..kmax (default 1)")
    ap.add_argument("--multi-tasks", type=int, default=12, help="16-core tasks (default 12)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants built and run at once")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument(
        "--doc",
        type=Path,
        help="write the table into this file's section for --sim (docs/mutants.md); "
        "only after a run of every mutant on every build",
    )
    args = ap.parse_args(argv)

    if args.list:
        for m in MUTANTS:
            print(f"{m.name:<30} {','.join(m.modes):<14} {m.file:<22} {m.what}")
        return 0
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    unknown = set(args.only or []) - {m.name for m in MUTANTS}
    if unknown or not mutants:
        print(f"mutants: unknown mutant(s) {sorted(unknown)}; see --list", file=sys.stderr)
        return 2
    why = stale(mutants)
    if why:
        print("mutants: the RTL changed under a mutant:\n  " + "\n  ".join(why), file=sys.stderr)
        return 2
    runs = [r for m in mutants for r in m.runs() if not args.mode or r.mode in args.mode]
    if args.doc and (args.only or args.mode or args.no_baseline):
        print(
            "mutants: --doc writes the whole table: not with --only, --mode or --no-baseline",
            file=sys.stderr,
        )
        return 2
    if args.doc and not args.doc.is_file():
        print(f"mutants: --doc {args.doc}: no such file", file=sys.stderr)
        return 2
    if args.check or not runs:
        print(f"{len(mutants)} mutants apply, each exactly once ({len(runs)} runs)")
        return 0
    try:
        check_simulator(args.sim)
    except ValueError as exc:
        print(f"mutants: {exc}", file=sys.stderr)
        return 2
    if args.sim == "verilator":
        os.environ["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"  # as ane_kdma.sim.build

    t0 = time.time()
    commit = _commit()  # what is built: read before the runs, as a later commit may land meanwhile
    scratch = Path(tempfile.mkdtemp(prefix="kdma-mutants-"))
    print(f"{len(mutants)} mutants, {len(runs)} runs on {args.sim}, seed {args.seed}; {scratch}")
    outcomes: list[Outcome] = []
    failed_baselines: list[str] = []
    try:
        # One pool for the baselines and the mutants, the 16-core ones first (the longest), so
        # no worker idles while a baseline runs alone; a failed baseline voids every kill.
        builds = sorted({(r.mode, r.mutant.cores) for r in runs}, key=lambda b: (-b[1], b[0]))
        order = sorted(runs, key=lambda r: -r.mutant.cores)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            base = (
                []
                if args.no_baseline
                else [pool.submit(_baseline, args, scratch, *b) for b in builds]
            )
            submitted = {r.key: pool.submit(run_one, r, args, scratch) for r in order}
            futures = [submitted[r.key] for r in runs]
            failed_baselines = [why for why in (f.result() for f in base) if why]
            for f in futures:
                o = f.result()
                outcomes.append(o)
                state = "caught" if o.caught else o.check
                print(f"  {o.run.key:<40} {state:<9} {o.check:<22} ({o.seconds:.0f} s)", flush=True)
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    if failed_baselines:
        for why in failed_baselines:
            print(f"mutants: {why}", file=sys.stderr)
        return 2
    killed = sum(o.caught for o in outcomes)
    print()
    print(_table(outcomes, args.markdown))
    print()
    print(
        f"kill rate {killed}/{len(outcomes)} = {100 * killed / len(outcomes):.0f}% "
        f"({args.sim}, seed {args.seed}, {time.time() - t0:.0f} s)"
    )
    if args.doc:
        write_doc(args.doc, args.sim, doc_block(outcomes, args, time.time() - t0, commit))
        print(f"wrote the {args.sim} table into {args.doc}")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
