"""Long work shows itself and stops on Ctrl-C: notes on stderr, bars in a terminal, status 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ane_kdma import progress

CTRL_C_S = 2.0  # the bound: Ctrl-C acts within 2 s on every engine
HANG_GUARD_S = 120.0  # a subprocess that runs past this is hung, not slow


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Notes on, as in a terminal (pytest's stderr is not one)."""
    monkeypatch.setenv("ANE_KDMA_PROGRESS", "1")


def test_notes_show_on_a_terminal_only_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("ANE_KDMA_PROGRESS", raising=False)
    assert progress.notes_wanted(Tty()) and not progress.notes_wanted(object())
    monkeypatch.setenv("ANE_KDMA_PROGRESS", "1")
    assert progress.notes_wanted(object())
    monkeypatch.setenv("ANE_KDMA_PROGRESS", "0")
    assert not progress.notes_wanted(Tty())


def test_redirected_stderr_gets_no_note(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error is one line on stderr: a note before it would make two (tests/test_cluster)."""
    monkeypatch.delenv("ANE_KDMA_PROGRESS", raising=False)
    progress.note("building")
    assert capsys.readouterr().err == ""


def test_a_note_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str], notes: None) -> None:
    progress.note("building\nthe harness")
    assert capsys.readouterr().err == "ane-kdma: building the harness\n"


def test_notes_can_be_switched_off(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANE_KDMA_PROGRESS", "0")
    progress.note("building")
    assert capsys.readouterr().err == ""


def test_slow_work_announces_itself_and_fast_work_stays_quiet(
    capsys: pytest.CaptureFixture[str], notes: None
) -> None:
    with progress.announce_after(60.0, "never shown"):
        pass
    with progress.announce_after(0.05, "still working"):
        time.sleep(0.5)
    assert capsys.readouterr().err == "ane-kdma: still working\n"


def test_a_bar_without_a_terminal_says_what_runs_once_it_is_slow(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, notes: None
) -> None:
    monkeypatch.setattr(progress, "SLOW_S", 0.05)
    with progress.bar(1032, "model paged x2") as b:
        assert not b.shown  # pytest's stderr is not a terminal
        time.sleep(0.5)
    assert capsys.readouterr().err == (
        "ane-kdma: running 1032 workloads (model paged x2); still working\n"
    )
    with progress.bar(1032, "model paged x2", quiet=True):  # --json: stderr untouched
        time.sleep(0.5)
    assert capsys.readouterr().err == ""


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (Linux's /proc), in its group or in a new one."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parent[int(entry.name)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


#: per engine, a command that runs for many seconds and a note it prints once at work
LONG_RUNS = {
    # the pooled runner: its queue of chunks was 18 s of a sweep ignoring Ctrl-C
    "model": ["sweep", "--engine", "model", "--jobs", "2", "--out", "{out}"],
    # one harness process fed 16 cores x 64 MiB; the same 16-core builds as tests/test_batch_rtl
    "rtl": ["predict", "--bytes-per-core", "64MiB", "--engine", "rtl"],
    # the closed form over 65,473 sizes a reading, one process: numpy between the chunks
    "analytic": [
        *("sweep", "--engine", "analytic", "--d-step", "1", "--d-max", "65536"),
        *("--jobs", "1", "--no-overlay", "--out", "{out}"),
    ],
    # the simulator under cocotb: a build (first run) or a 16-core 64 MiB run, in a child
    "cocotb": ["predict", "--bytes-per-core", "64MiB", "--engine", "cocotb"],
}


def _need_rtl() -> None:
    from ane_kdma.engines import verilator as vb

    try:
        vb.toolchain()
    except vb.HarnessBuildError as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("engine", sorted(LONG_RUNS))
def test_ctrl_c_during_long_work_acts_at_once_and_leaves_nothing(
    engine: str, tmp_path: Path
) -> None:
    """SIGINT once the work has said what it is doing: status 130 within CTRL_C_S, one line,
    no files, no process of its group left (pool workers, the harness, a build)."""
    if engine in ("rtl", "cocotb"):
        _need_rtl()
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"  # the system temp dir of the run: the cocotb engine's job folder
    scratch.mkdir()
    argv = [a.format(out=out) for a in LONG_RUNS[engine]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ane_kdma.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: what is left of it can be looked for
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
            "ANE_KDMA_PROGRESS": "1",  # the notes a terminal would show, as the marker
            "TMPDIR": str(scratch),
        },
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # a note: the pool, the harness or its build is at work
        assert first.startswith(("ane-kdma: running ", "ane-kdma: the rtl engine is still")) or (
            first.startswith("ane-kdma: building the RTL harness")
        ), first
        if engine == "cocotb":  # its note comes first; then predict's, a second on
            more = proc.stderr.readline()  # the simulator (or its build) is running
            assert more.startswith("ane-kdma: the cocotb engine is still running"), more
        below = _descendants(proc.pid) if Path("/proc/self/stat").exists() else set()
        os.kill(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        rest = proc.stderr.read()
        proc.wait(HANG_GUARD_S)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"{engine}: exit {took:.2f} s after SIGINT")
    assert proc.returncode == 130
    assert rest == "ane-kdma: interrupted\n"
    assert took < CTRL_C_S
    assert list(tmp_path.iterdir()) == [scratch] and list(scratch.iterdir()) == []
    assert _group_gone(proc.pid), "a process of the run outlived it"
    time.sleep(0.2)  # an orphan's reaping by init
    left = [pid for pid in below if _alive(pid)]
    assert not left, f"processes the run started outlived it: {left}"


def test_predict_at_the_largest_32_bit_size_answers_or_says_why() -> None:
    """0xFFFFFFC0 bytes per core on predict's default engine: the right figure (the analytic
    engine's closed form within its stated 1% of the cycle model), and a note on stderr if it
    took over predict's SLOW_AFTER_S. The time is bench's (`bench --only predict-4gib`); the
    bound here only guards against a hang."""
    from ane_kdma.cli.predict import SLOW_AFTER_S

    argv = [sys.executable, "-m", "ane_kdma.cli", "predict", "--bytes-per-core", "0xFFFFFFC0"]
    t0 = time.monotonic()
    proc = subprocess.run(
        [*argv, "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
        env={**os.environ, "ANE_KDMA_PROGRESS": "1"},  # the note a terminal would show
    )
    took = time.monotonic() - t0
    print(f"predict at 0xFFFFFFC0: {took:.2f} s wall, stderr {proc.stderr!r}")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["lines_per_core"] == (1 << 26) - 1
    if "time_us_band" in doc:  # a profile with fits: at this size scaled from the analytic engine
        assert doc["band_scaled_from"] == "analytic"
        lo, hi = doc["time_us_band"]
        assert lo <= doc["time_us"] <= hi and hi - lo < 0.05 * doc["time_us"]
    fast = subprocess.run(
        [*argv, "--engine", "analytic", "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=True,
    )
    closed = json.loads(fast.stdout)
    assert doc["time_us"] == pytest.approx(closed["time_us"], rel=0.01)
    assert doc["time_us_fixed"] == pytest.approx(closed["time_us_fixed"], rel=0.01)
    if took > SLOW_AFTER_S + 1.0:  # interpreter start-up aside
        assert "--engine analytic answers at once" in proc.stderr
