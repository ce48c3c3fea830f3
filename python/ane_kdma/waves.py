"""Wave dumps of the erratum for GTKWave: `python -m ane_kdma.waves --sim SIM --out DIR`.

One transfer of one ring's worth of lines (0x4000 on the m3) per hypothesis
(by default the default buggy reading and the fix, from ane_kdma.hypotheses),
each run by tb/cocotb_waves.py on a wave build of kdma_tb_top, which KdmaTB
checks against the cycle model as in every other test. The dump the simulator
wrote is moved to DIR/kdma_<hypothesis>.vcd (Verilator, as sim.py builds it)
or .fst (Icarus). tb/waves/kdma.gtkw lays the ring out in groups; both simulators name
the scopes the same way (``g_core[0]``), so one save file serves both.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from ane_kdma import chip as chips
from ane_kdma import hypotheses
from ane_kdma.engines.cocotb import build_params
from ane_kdma.errors import InputError
from ane_kdma.fileio import locked
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.sim import SIMULATORS, TB, build, check_simulator, rtl_sources, run

TOP = "kdma_tb_top"
TEST_MODULE = "cocotb_waves"
TESTCASE = "one_transfer"
WAVES_DIR = TB / "waves"
SAVE_FILE = WAVES_DIR / "kdma.gtkw"
# Verilator only: leaves the 512-bit line data out of the VCD (about half its size).
TRACE_CONTROL = WAVES_DIR / "kdma_trace.vlt"
# the reading the bundled chip's profile names, and the fix
DEFAULT_MODES = (chips.load().hypothesis, hypotheses.get(hypotheses.FIXED))
DUMP_SUFFIXES = (".fst", ".vcd")
# Screen for the GTKWave screenshots; the save file asks for a 1400 x 800 window.
XVFB_SCREEN = "1600x1000x24"

_RANGE = re.compile(r"^(?P<name>.*?)\[(?P<msb>\d+):(?P<lsb>\d+)\]$")
_GRP_BEGIN = 0x800000  # GTKWave trace flags (TR_GRP_BEGIN, TR_GRP_END)
_GRP_END = 0x1000000


@dataclass(frozen=True)
class Dump:
    """One wave dump written by `write_dump`."""

    hyp: Hypothesis
    sim: str
    path: Path
    seconds: float  # build (if not cached) + simulation + move

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


@dataclass(frozen=True)
class SaveSignal:
    """A signal a GTKWave save file shows: its full name, width (None: 1 bit) and group."""

    name: str  # as the dump names it: kdma_tb_top.u_top.g_core[0].u_core.lines_q
    width: int | None
    group: str  # "task", "ring", "progress"; nested groups joined by "/"
    spelled: str  # as GTKWave spells it, with the range: ...u_core.lines_q[31:0]


def dump_name(hyp: Hypothesis) -> str:
    return f"kdma_{hyp.name}"


def find_dump(out: Path, hyp: Hypothesis) -> Path:
    """The newest dump of `hyp` in `out`, whichever format the simulator wrote."""
    found = [p for p in (out / (dump_name(hyp) + s) for s in DUMP_SUFFIXES) if p.is_file()]
    if not found:
        raise FileNotFoundError(f"no {dump_name(hyp)}.fst or .vcd in {out}")
    return max(found, key=lambda p: p.stat().st_mtime)


def wave_sources(sim: str) -> list[Path]:
    return rtl_sources() + ([TRACE_CONTROL] if sim == "verilator" else [])


def params(hyp: Hypothesis) -> dict[str, int]:
    """A one-core build of the m3 chip (the parameters the CLI's RTL engine uses)."""
    return build_params(hyp, chips.load(), 1)


def write_dump(sim: str, hyp: Hypothesis, out: Path, lines: int | None = None) -> Dump:
    """Run one transfer of `lines` lines (default: one ring); move the dump to out/kdma_<name>.*.

    Verilator writes dump.vcd into the test directory, which is ours. Icarus
    (cocotb's iverilog dump module) writes <top>.fst into the shared build
    directory, so that run holds a lock until the file is moved away.
    """
    check_simulator(sim)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / f".run-{dump_name(hyp)}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    sources = wave_sources(sim)
    p = params(hyp)
    env = {} if lines is None else {"KDMA_WAVE_LINES": str(lines)}
    t0 = time.monotonic()
    build_dir = build(sim, TOP, p, sources=sources, waves=True)
    guard: AbstractContextManager[None]
    if sim == "verilator":
        # dump.vcd from a --trace build (what sim.py asks for), dump.fst from --trace-fst
        written, guard = [run_dir / f"dump{s}" for s in DUMP_SUFFIXES], nullcontext()
    else:
        written = [build_dir / f"{TOP}.fst"]
        guard = locked(build_dir.parent / f".{build_dir.name}.dump.lock")
    with guard:
        for w in written:
            w.unlink(missing_ok=True)
        run(sim, TOP, p, TEST_MODULE, TESTCASE, env, waves=True, test_dir=run_dir, sources=sources)
        got = [w for w in written if w.is_file()]
        if not got:
            raise RuntimeError(f"the simulator wrote no dump ({written[0].name}); see {run_dir}")
        dest = out / (dump_name(hyp) + got[0].suffix)
        shutil.move(got[0], dest)
    shutil.rmtree(run_dir)  # only on success: after a failure it holds the simulator's log
    return Dump(hyp=hyp, sim=sim, path=dest, seconds=time.monotonic() - t0)


# ------------------------------------------------------------------- save file
def save_file_signals(save: Path = SAVE_FILE) -> list[SaveSignal]:
    """The signals a .gtkw file shows, with the group each sits in.

    '@<hex>' sets the flags of the rows after it; a '-<label>' row opens a
    group under TR_GRP_BEGIN and closes it under TR_GRP_END, and is a blank
    or comment row otherwise. '[' lines are settings or comments, '*' the
    zoom; every other line is a signal name as GTKWave spells it.
    """
    signals: list[SaveSignal] = []
    groups: list[str] = []
    flags = 0
    for raw in save.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "[*":
            continue
        if line[0] == "@":
            flags = int(line[1:], 16)
        elif line[0] == "-":
            if flags & _GRP_BEGIN:
                groups.append(line[1:])
            elif flags & _GRP_END and groups:
                groups.pop()
        else:
            m = _RANGE.match(line)
            name, width = (m["name"], abs(int(m["msb"]) - int(m["lsb"])) + 1) if m else (line, None)
            signals.append(SaveSignal(name, width, "/".join(groups), line))
    return signals


def dump_vars(dump: Path) -> dict[str, int]:
    """Full name -> width of every variable in a VCD or FST dump."""
    import pywellen

    wave = pywellen.Waveform(str(dump))
    return {v.full_name: v.bitwidth for v in wave.all_vars()}


def missing_signals(dump: Path, save: Path = SAVE_FILE) -> list[str]:
    """Signals the save file names that the dump lacks (or has at another width)."""
    have = dump_vars(dump)
    missing = []
    for s in save_file_signals(save):
        width = have.get(s.name)
        if width is None or width != (s.width or 1):
            missing.append(s.name if width is None else f"{s.name} (width {width}, not {s.width})")
    return missing


# --------------------------------------------------------------------- GTKWave
def gtkwave_available() -> str | None:
    """None if GTKWave can run headless here, else the reason it cannot."""
    for exe, pkg in (("gtkwave", "gtkwave"), ("xvfb-run", "xvfb")):
        if shutil.which(exe) is None:
            return f"{exe} not found (apt-get install {pkg})"
    return None


def gtkwave_snapshot(
    dump: Path, png: Path | None = None, save: Path = SAVE_FILE, timeout: float = 120.0
) -> list[str]:
    """Open `dump` with `save` in GTKWave on a virtual X server; return the signals it shows.

    With `png`, also grab the window as GTKWave draws it (File > Grab To File).
    The Tcl script refers only to names in its own directory, so no path needs quoting.
    """
    reason = gtkwave_available()
    if reason:
        raise InputError(reason)
    with tempfile.TemporaryDirectory(prefix="kdma-gtkwave-") as tmp:
        work = Path(tmp)
        tcl = ['puts "KDMA_SHOWN [gtkwave::getDisplayedSignals]"']
        if png is not None:
            tcl.append("gtkwave::/File/Grab_To_File shot.png")
        tcl.append("gtkwave::/File/Quit")
        (work / "snap.tcl").write_text("\n".join(tcl) + "\n")
        cmd = [
            "xvfb-run",
            "-a",
            "-s",
            f"-screen 0 {XVFB_SCREEN}",
            "gtkwave",
            "--script=snap.tcl",
            str(dump.resolve()),
            str(save.resolve()),
        ]
        proc = subprocess.run(
            cmd, cwd=work, capture_output=True, text=True, timeout=timeout, check=False
        )
        shown = [
            line.split(" ", 1)[1].split() if " " in line else []
            for line in proc.stdout.splitlines()
            if line.startswith("KDMA_SHOWN")
        ]
        if proc.returncode != 0 or not shown:
            raise RuntimeError(
                f"gtkwave failed (status {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        if png is not None:
            shot = work / "shot.png"
            if not shot.is_file():
                raise RuntimeError(f"gtkwave wrote no screenshot:\n{proc.stdout}\n{proc.stderr}")
            png.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(shot), str(png))
        return shown[-1]


# ------------------------------------------------------------------------- CLI
def _shown(path: Path) -> str:
    """A path as short as it can be printed: relative to the working directory if inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _modes(text: str) -> list[Hypothesis]:
    try:
        modes = [hypotheses.get(t) for t in text.split(",") if t.strip()]
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    python_only = [h.name for h in modes if h.encoding is None]
    if python_only:
        raise argparse.ArgumentTypeError(f"not in the RTL: {', '.join(python_only)}")
    return modes


def _lines(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ane_kdma.waves",
        description="Wave dumps of a buggy and a fixed one-ring (1 MiB) transfer, for GTKWave.",
    )
    p.add_argument("--sim", choices=SIMULATORS, default=os.environ.get("SIM", "verilator"))
    p.add_argument("--out", type=Path, default=Path("out/waves"), help="directory for the dumps")
    p.add_argument(
        "--modes",
        type=_modes,
        default=list(DEFAULT_MODES),
        help="hypotheses, comma-separated (default: "
        + ",".join(h.name for h in DEFAULT_MODES)
        + "; any of "
        + ",".join(h.name for h in hypotheses.in_rtl())
        + ")",
    )
    p.add_argument(
        "--lines", type=_lines, default=None, help="transfer length (default: one ring, 0x4000)"
    )
    p.add_argument(
        "--png",
        action="store_true",
        help="also save GTKWave's view of each dump as DIR/kdma_<hypothesis>.png (gtkwave, xvfb)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_simulator(args.sim)
        if args.png and gtkwave_available():
            raise InputError(f"--png: {gtkwave_available()}")
        dumps = []
        for hyp in args.modes:
            d = write_dump(args.sim, hyp, args.out, args.lines)
            dumps.append(d)
            print(
                f"{hyp.name:8s} {_shown(d.path)}  "
                f"{d.size_bytes / 1e6:.1f} MB, {d.seconds:.1f} s ({args.sim})"
            )
            missing = missing_signals(d.path)
            if missing:
                print(f"  warning: {SAVE_FILE.name} names signals not in this dump: {missing}")
            if args.png:
                png = d.path.with_suffix(".png")
                gtkwave_snapshot(d.path, png)
                print(f"         {_shown(png)}")
    except InputError as exc:
        print(f"ane_kdma.waves: {exc}", file=sys.stderr)
        return 2
    print("open with:")
    for d in dumps:
        print(f"  gtkwave {_shown(d.path)} {_shown(SAVE_FILE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
