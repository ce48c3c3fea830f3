"""Output that cannot be half written: atomic files, sets of files, stdout failures, signals.

Every way a run can end (bad input, full disk, closed pipe, closed stdout,
Ctrl-C, SIGTERM) is an exit status and at most one stderr line, and leaves
either the old files or the new ones, never a mix and never a temporary file.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma import fileio
from ane_kdma.cli import main
from ane_kdma.cli import predict as predict_cmd
from ane_kdma.errors import InputError
from ane_kdma.fileio import write_atomic, write_set

SET = {"a.csv": b"new a\n", "b.csv": b"new b\n", "c.png": b"new c\n"}


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --------------------------------------------------------------------------- one file


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.symlink_to(p.with_name("real")), "it is a symbolic link"),
        (lambda p: os.mkfifo(p), "it is a FIFO (named pipe)"),
        (lambda p: p.mkdir(), "is a directory"),
    ],
)
def test_out_replaces_only_a_regular_file(
    tmp_path: Path, make: Callable[[Path], None], message: str
) -> None:
    (tmp_path / "real").write_text("keep")
    target = tmp_path / "out"
    make(target)
    before = _names(tmp_path)
    with pytest.raises(InputError, match=re.escape(message)):
        write_atomic(target, b"new")
    assert _names(tmp_path) == before and (tmp_path / "real").read_text() == "keep"


def test_out_refuses_a_device_and_a_read_only_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="/dev/null: it is a character device"):
        write_atomic(Path("/dev/null"), b"new")
    ro = tmp_path / "ro.txt"
    ro.write_text("keep")
    ro.chmod(0o444)
    with pytest.raises(InputError, match="the file is read-only"):
        write_atomic(ro, b"new")
    assert ro.read_text() == "keep" and _names(tmp_path) == ["ro.txt"]


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755])
def test_out_keeps_an_existing_file_mode(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "td.txt"
    target.write_text("old")
    target.chmod(mode)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_out_takes_names_up_to_the_system_limit(tmp_path: Path) -> None:
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    longest = tmp_path / ("n" * limit)
    write_atomic(longest, b"new")
    write_atomic(longest, b"newer")  # replacing it needs a temporary name too
    assert longest.read_bytes() == b"newer"
    with pytest.raises(InputError, match="File name too long"):
        write_atomic(tmp_path / ("n" * (limit + 1)), b"new")
    assert _names(tmp_path) == ["n" * limit]


def test_an_interrupted_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "td.txt"
    target.write_text("old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, b"new")
    assert target.read_text() == "old" and _names(tmp_path) == ["td.txt"]


# --------------------------------------------------------------------------- sets of files


def test_a_new_folder_appears_whole(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out"
    paths = write_set(out, SET)
    assert paths == [out / n for n in SET]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == SET
    assert _names(tmp_path / "deep") == ["out"]


def test_an_existing_folder_keeps_other_files_and_modes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "waves").mkdir(parents=True)
    (out / "notes.md").write_text("mine")
    (out / "a.csv").write_text("old a")
    (out / "a.csv").chmod(0o600)
    write_set(out, SET)
    assert _names(out) == ["a.csv", "b.csv", "c.png", "notes.md", "waves"]
    assert (out / "notes.md").read_text() == "mine"
    assert stat.S_IMODE((out / "a.csv").stat().st_mode) == 0o600
    assert all((out / n).read_bytes() == data for n, data in SET.items())


def _old_set(out: Path) -> dict[str, bytes]:
    out.mkdir()
    for name in SET:
        (out / name).write_bytes(b"old " + name.encode())
    return {p.name: p.read_bytes() for p in out.iterdir()}


def _nth_call_fails(
    real: Callable[..., object], n: int, exc: BaseException
) -> Callable[..., object]:
    """`real`, except that its n-th call raises `exc` (a disk error, a Ctrl-C) instead."""
    calls: list[object] = []

    def wrapper(*args: object) -> object:
        calls.append(args)
        if len(calls) == n:
            raise exc
        return real(*args)

    return wrapper


def test_a_failed_rename_puts_the_old_set_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    old = _old_set(out)
    monkeypatch.setattr(os, "replace", _nth_call_fails(os.replace, 3, OSError(errno.EIO, "I/O")))
    with pytest.raises(InputError, match=f"cannot write {out}: I/O"):
        write_set(out, SET)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old


def test_an_interrupted_set_leaves_the_old_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    old = _old_set(out)
    real_write = fileio._write_new
    monkeypatch.setattr(fileio, "_write_new", _nth_call_fails(real_write, 2, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_set(out, SET)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old
    monkeypatch.setattr(fileio, "_write_new", _nth_call_fails(real_write, 2, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_set(tmp_path / "fresh", SET)
    assert _names(tmp_path) == ["out"]


def test_a_signal_during_the_renames_waits_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stop(Exception):
        pass

    def stop(signum: int, frame: object) -> None:
        raise Stop

    out = tmp_path / "out"
    _old_set(out)
    real_replace, sent = os.replace, []

    def replace_and_signal(src: object, dst: object) -> None:
        if not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_and_signal)
    old_handler = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Stop):
            write_set(out, SET)
    finally:
        signal.signal(signal.SIGTERM, old_handler)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == SET  # the whole new set


def test_a_target_name_that_is_a_folder_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old = _old_set(out)
    (out / "b.csv").unlink()
    (out / "b.csv").mkdir()
    with pytest.raises(InputError, match="b.csv: is a directory"):
        write_set(out, SET)
    assert _names(out) == sorted(old)
    assert (out / "a.csv").read_bytes() == old["a.csv"]


# --------------------------------------------------------------------------- how main ends


class _Failing(io.StringIO):
    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.exc = exc

    def write(self, text: str) -> int:
        raise self.exc


ARGV = ["predict", "--bytes-per-core", "65536", "--engine", "analytic", "--json"]


@pytest.mark.parametrize(
    ("stdout", "status", "err"),
    [
        (_Failing(OSError(errno.ENOSPC, "No space left on device")), 2, "No space left on device"),
        (_Failing(OSError(errno.EIO, "Input/output error")), 2, "Input/output error"),
        (None, 2, "cannot write to standard output: it is closed"),
        (_Failing(BrokenPipeError(errno.EPIPE, "Broken pipe")), 141, ""),
    ],
)
def test_stdout_failures_end_in_one_line_or_quietly(
    stdout: io.StringIO | None,
    status: int,
    err: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(ARGV) == status
    lines = capsys.readouterr().err.splitlines()
    assert lines == ([] if not err else [lines[0]]) and err in "".join(lines)
    assert sys.stdout is stdout  # main puts back what it found


def test_undecodable_names_are_escaped_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "caf\udce9.txt"  # a file name that is not UTF-8
    dump.write_bytes(b"".join(b"TD+0x%03x 0x00100000\n" % (0xB4 + 4 * i) for i in range(16)))
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    assert main(["replay", dump.name, "--engine", "analytic"]) == 0
    sys.stdout.flush()
    assert "caf\\xe9.txt" in raw.getvalue().decode()


def test_ctrl_c_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(predict_cmd, "run", interrupted)
    monkeypatch.setattr(predict_cmd, "register", _register_with(interrupted))
    assert main(ARGV) == 130
    assert capsys.readouterr().err == "ane-kdma: interrupted\n"
    assert signal.getsignal(signal.SIGTERM) == before


def _register_with(func: Callable[[object], int]) -> Callable[[object], None]:
    real = predict_cmd.register

    def register(sub: object) -> None:
        real(sub)  # type: ignore[arg-type]
        sub.choices["predict"].set_defaults(func=func)  # type: ignore[attr-defined]

    return register


# --------------------------------------------------------------------------- real signals


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.mark.parametrize(
    ("sig", "status", "err"),
    [(signal.SIGINT, 130, "ane-kdma: interrupted\n"), (signal.SIGTERM, 143, "")],
)
def test_a_signalled_sweep_leaves_the_old_set_and_no_temporary_files(
    tmp_path: Path, sig: int, status: int, err: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name in ("sweep.csv", "spectrum.csv", "notch_overlay.csv", "keep.md"):
        (out / name).write_text("old\n")
    old = _digest(out)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ane_kdma.cli", "sweep", "--out", str(out), "--d-max", "1024"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own signals, as from a terminal, not pytest's
    )
    time.sleep(1.5)  # past start-up, inside the work
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    if proc.returncode == 0:  # it finished first: then the set is whole and new
        assert set(_digest(out)) == set(old) | {
            "sweep_gbps.png",
            "sweep_fft.png",
            "notch_overlay.png",
        }
    else:
        assert (proc.returncode, stderr) == (status, err)
        assert _digest(out) == old
    assert _names(tmp_path) == ["out"]
    assert not [n for n in _names(out) if n.startswith(".")]


# --------------------------------------------------------------------------- the real entry point

# A user's shell leaves Python's stdout block-buffered: the failed write then shows only at
# the final flush, at exit. Each case runs with and without PYTHONUNBUFFERED.
_DUMP = str(Path(__file__).resolve().parents[1] / "data" / "dumps" / "m3_n4096_d2048.txt")
STDOUT_COMMANDS = {
    "llm --list": ["llm", "--list"],
    "predict": ["predict", "--bytes-per-core", "65536", "--engine", "analytic"],
    "dump": ["dump", "--d", "2048", "--n", "4096"],
    "replay": ["replay", _DUMP, "--engine", "analytic"],
    "bench --help": ["bench", "--help"],
    "--help": ["--help"],
}


def _env(unbuffered: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("name", list(STDOUT_COMMANDS))
def test_a_full_disk_on_stdout_is_one_line_and_2(name: str, unbuffered: bool) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "ane_kdma.cli", *STDOUT_COMMANDS[name]],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(unbuffered),
            timeout=120,
        )
    assert (proc.returncode, proc.stderr) == (
        2,
        "ane-kdma: cannot write to standard output: No space left on device\n",
    )


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("name", ["llm --list", "dump", "--help"])
def test_a_reader_that_goes_away_ends_it_quietly_with_141(name: str, unbuffered: bool) -> None:
    """`| head -c 0`: no message, status 128 + SIGPIPE, what a shell shows for cat or grep."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ane_kdma.cli", *STDOUT_COMMANDS[name]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(unbuffered),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the first write reaches the pipe
    err = proc.stderr.read()
    assert (proc.wait(timeout=120), err) == (141, b"")


# The child interrupts itself while main() imports the sub-commands (numpy, the engines):
# deterministic, where a signal sent after a delay would land anywhere in start-up.
_INTERRUPT_DURING_IMPORT = """
import os, signal, sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == sys.argv[1]:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
from ane_kdma.cli import main
sys.exit(main(["predict", "--bytes-per-core", "65536"]))
"""


# "datetime": numpy's C extension imports it through PyCapsule_Import, which turns the
# KeyboardInterrupt into an ImportError (numpy's "Importing the numpy C-extensions failed").
@pytest.mark.parametrize(
    "module", ["numpy", "datetime", "ane_kdma.cli.common", "ane_kdma.cli.bench"]
)
def test_ctrl_c_during_start_up_is_one_line_and_130(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_DURING_IMPORT, module],
        capture_output=True,
        text=True,
        env=_env(False),
        timeout=120,
    )
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "ane-kdma: interrupted\n", "")


# SIGTERM (or Ctrl-C) that lands inside ProcessPoolExecutor.submit, after the fork of the
# workers and before the executor's manager thread starts: nobody tells the workers to
# stop, and multiprocessing joins them at exit. validate under `timeout 120` hung so.
_SIGNAL_WITH_IDLE_WORKERS = """
import multiprocessing as mp, sys, time
import ane_kdma.cli as cli
kind = sys.argv[1]
def stuck(argv, saved):
    mp.get_context("fork").Process(target=time.sleep, args=(600,)).start()
    raise cli._Terminated if kind == "term" else KeyboardInterrupt
cli._main = stuck
sys.exit(cli.main(["predict", "--bytes-per-core", "65536"]))
"""


@pytest.mark.parametrize(
    ("kind", "status", "err"), [("term", 143, ""), ("int", 130, "ane-kdma: interrupted\n")]
)
def test_a_signal_leaves_no_worker_for_exit_to_wait_on(kind: str, status: int, err: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_WITH_IDLE_WORKERS, kind],
        capture_output=True,
        text=True,
        env=_env(False),
        timeout=60,
    )
    assert (proc.returncode, proc.stderr, proc.stdout) == (status, err, "")


def test_the_entry_module_imports_nothing_heavy() -> None:
    """What runs before main()'s handlers: the entry module and the standard library only."""
    code = (
        "import sys; before = set(sys.modules); import ane_kdma.cli; "
        "print(sorted(m for m in set(sys.modules) - before if m.startswith(('ane_kdma', 'numpy'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "['ane_kdma', 'ane_kdma.cli']"


# --------------------------------------------------------------------------- --out - is stdout


def _commands_with_out() -> set[str]:
    from ane_kdma.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.choices and "dump" in a.choices)
    return {
        name
        for name, sp in sub.choices.items()
        if any("--out" in a.option_strings for a in sp._actions)
    }


def test_every_out_option_is_known_to_take_or_refuse_a_dash() -> None:
    """dump and calibrate write one file (- is stdout); sweep writes a folder (- refused).

    A new command with --out fails here until it is given the same treatment.
    """
    assert _commands_with_out() == {"dump", "calibrate", "sweep"}


@pytest.mark.parametrize("fmt", ["text", "zin", "bin"])
def test_dump_out_dash_is_stdout(fmt: str, tmp_path: Path) -> None:
    from ane_kdma.regdump import write_dump

    proc = subprocess.run(
        [sys.executable, "-m", "ane_kdma.cli", "dump", "--d", "2048", "--n", "4096"]
        + ["--format", fmt, "--out", "-"],
        capture_output=True,
        env=_env(False),
        cwd=tmp_path,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout == write_dump(2048, 4096, fmt)
    assert _names(tmp_path) == []  # no file called "-"


def test_dump_out_dash_refuses_binary_to_a_terminal_and_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    argv = ["dump", "--d", "2048", "--n", "4096", "--out", "-"]
    assert main([*argv, "--format", "bin"]) == 2
    assert capsys.readouterr().err == (
        "ane-kdma: --format bin --out -: standard output is a terminal (redirect it)\n"
    )
    refuses([*argv, "--json"], "--json needs --out PATH")


def _tree(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_calibrate_out_dash_prints_the_profile_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fit itself is stubbed (it takes a minute): what is tested is where it goes."""
    from types import SimpleNamespace

    from ane_kdma import calibrate as cal_mod
    from ane_kdma import chip as chips

    folder = tmp_path / "m3"
    shutil.copytree(chips.chips_dir() / "m3", folder)
    before = _tree(folder)
    profile = chips.load(folder).profile
    monkeypatch.setattr(
        cal_mod, "fit_all", lambda chip, **kw: [SimpleNamespace(profile=profile, confirmed=None)]
    )
    monkeypatch.setattr(cal_mod, "confirm", lambda chip, best: {"ok": True})
    assert main(["calibrate", "--chip", str(folder), "--out", "-"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (profile.to_json(), "")
    assert _tree(folder) == before and _names(tmp_path) == ["m3"]
    argv = ["calibrate", "--chip", str(folder), "--out", "-", "--json"]
    refuses(argv, "takes no --json", watch=[tmp_path])


def test_sweep_out_dash_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    line = refuses(["sweep", "--out", "-"], watch=[tmp_path])
    assert line == (
        "ane-kdma: --out -: sweep writes a set of files (CSV and PNG), so --out is a folder"
    )
    assert _names(tmp_path) == []


def test_a_full_disk_under_a_real_bench_run_is_one_line_and_2() -> None:
    """bench's table comes after its items ran (here the quickest, the analytic sweep)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "ane_kdma.cli", "bench", "--only", "sweep-analytic"]
            + ["--jobs", "1", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(False),
            timeout=300,
        )
    assert (proc.returncode, proc.stderr) == (
        2,
        "ane-kdma: cannot write to standard output: No space left on device\n",
    )
