"""The CLI's error contract, checked one way everywhere: :func:`refuses`.

Bad input on the command line is one line on stderr (``ane-kdma: ...``),
exit status 2, no traceback, nothing on stdout and no file written. Every
test of a refusal calls :func:`refuses` (a fuzzer, whose run may or may not
refuse, calls :func:`check_refusal` on the runs that did); a test that needs
more (a time bound, a signal) checks that beside it.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ane_kdma.cli import main

PREFIX = "ane-kdma: "
TIMEOUT_S = 120  # a refusal in a child process: well within this


def snapshot(folders: Iterable[Path]) -> dict[str, tuple[int, int]]:
    """Every file below `folders` with its size and modification time (ns); each folder."""
    out: dict[str, tuple[int, int]] = {}
    for top in folders:
        if not top.exists():
            out[str(top)] = (-1, -1)
            continue
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                p = os.path.join(root, name)
                st = os.lstat(p)
                out[p] = (st.st_size, st.st_mtime_ns) if name in files else (0, 0)
    return out


@dataclass(frozen=True)
class Ran:
    """What one run of the CLI gave: its status and what it printed."""

    status: int
    out: str
    err: str


def run_cli(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    child: bool = False,
    cwd: Path | None = None,
    timeout: float = TIMEOUT_S,
    prefix: Sequence[str] = (),
) -> Ran:
    """``ane-kdma argv`` in this process (its output captured here, whether or not the test
    captures), or with `child` (or an `env`, or a `prefix` command such as setpriv) as
    ``python -m ane_kdma.cli`` in a child process with that environment, as a user's shell
    would run it."""
    argv = [str(a) for a in argv]
    if child or env is not None or prefix:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "ane_kdma.cli", *argv],
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            timeout=timeout,
        )
        return Ran(proc.returncode, proc.stdout, proc.stderr)
    o, e = io.StringIO(), io.StringIO()
    here = Path.cwd()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        if cwd is not None:
            os.chdir(cwd)
        try:
            status = main(argv)
        finally:
            os.chdir(here)
    return Ran(status, o.getvalue(), e.getvalue())


def check_refusal(ran: Ran, *words: str, argv: Sequence[str] = ()) -> str:
    """The contract on a run that refused: exit 2, one stderr line naming every one of
    `words`, no traceback, empty stdout. Returns the line."""
    err = ran.err
    assert ran.status == 2, (argv, ran.status, err[-2000:])
    assert ran.out == "", (argv, ran.out[:2000])
    assert "Traceback" not in err, (argv, err[-2000:])
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), (argv, err[-2000:])
    assert lines[0].startswith(PREFIX), (argv, lines[0])
    for word in words:
        assert word in lines[0], (argv, word, lines[0])
    return lines[0]


def refuses(
    argv: Sequence[str],
    *words: str,
    watch: Iterable[Path] = (),
    env: Mapping[str, str] | None = None,
    child: bool = False,
    cwd: Path | None = None,
    timeout: float = TIMEOUT_S,
    prefix: Sequence[str] = (),
) -> str:
    """Run ``ane-kdma argv`` (:func:`run_cli`) and check it refuses (:func:`check_refusal`)
    and wrote nothing below `watch` (no file made, changed or left). Returns the line."""
    folders = [Path(p) for p in watch]
    before = snapshot(folders)
    line = check_refusal(run_cli(argv, env, child, cwd, timeout, prefix), *words, argv=argv)
    after = snapshot(folders)
    assert after == before, (argv, sorted(set(after.items()) ^ set(before.items()))[:10])
    return line
