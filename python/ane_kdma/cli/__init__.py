"""The `ane-kdma` command line: one sub-command per question (COMMAND_NAMES lists them).

Every sub-command prints a table, or exactly one JSON document with --json,
and takes --chip NAME|DIR (m3 by default). Bad input gets one line on stderr
and exit status 2, never a traceback.

This module is the console script's entry point, so it imports nothing heavy
at module level: the sub-commands (numpy and the engines behind them) are
imported inside :func:`main`, after its handlers are in place, so that a
Ctrl-C during start-up ends in one line and status 130, not a traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from contextlib import suppress
from types import FrameType, ModuleType
from typing import Any

COMMAND_NAMES = (
    "predict",
    "replay",
    "erratum",
    "plan",
    "llm",
    "patch",
    "validate",
    "sweep",
    "calibrate",
    "dump",
    "bench",
    "probe",
    "chips",
)


def commands() -> tuple[ModuleType, ...]:
    """The sub-command modules, imported on first use (each has register(sub) and run(args))."""
    import importlib

    return tuple(importlib.import_module(f"ane_kdma.cli.{name}") for name in COMMAND_NAMES)


def build_parser() -> Any:  # -> common.Parser (imported lazily)
    from ane_kdma.cli.common import Parser

    p = Parser(
        prog="ane-kdma",
        description="An executable model of the Apple M3 Neural Engine's kernel-DMA 1 MiB "
        "erratum, and a planner that keeps weights out of its notch. 'ane-kdma COMMAND --help' "
        "describes each command.",
    )
    sub = p.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND", title="commands"
    )
    for cmd in commands():
        cmd.register(sub)
    return p


class _Terminated(BaseException):
    """SIGTERM, raised where the program is, so cleanup (temporary files) runs on the way out."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


_interrupted: list[bool] = []  # set by _on_sigint: a Ctrl-C reached this process


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """Python's own handler, remembering that it ran.

    An import in C can swallow the KeyboardInterrupt: numpy's extension imports
    datetime through PyCapsule_Import and turns the interrupt into an ImportError.
    main() reads that ImportError as the Ctrl-C it is.
    """
    _interrupted.append(True)
    signal.default_int_handler(signum, frame)


def _say(message: str) -> None:
    """common.say without importing common (it may be what was interrupted)."""
    try:
        print(f"ane-kdma: {message}", file=sys.stderr, flush=True)
    except (AttributeError, OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every way it can end is an exit status and at most one stderr line.

    Bad input: one line, status 2. A failed write to stdout (a full disk, a
    closed stdout), the flush at the end included: one line, status 2. A
    closed pipe (``| head``): quiet, status 141 = 128 + SIGPIPE, the status a
    shell shows for cat, grep or yes killed by SIGPIPE (a status, not a
    death by the signal, so that main() can also be called in-process).
    Ctrl-C, start-up included: one line, status 130; SIGTERM: status 143,
    after temporary files are removed.
    """
    # Python's own SIGINT handler raises KeyboardInterrupt (or SIGINT is ignored, as in a
    # background job: left so); the try below covers the imports of the sub-commands.
    old_term = _set_handler(signal.SIGTERM, _on_sigterm)
    old_int = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        old_int = _set_handler(signal.SIGINT, _on_sigint)
    _interrupted.clear()
    saved = sys.stdout
    try:
        return _main(argv, saved)
    except KeyboardInterrupt:
        _stop_children()
        _say("interrupted")
        return 128 + signal.SIGINT
    except ImportError:
        if not _interrupted:
            raise
        _say("interrupted")
        return 128 + signal.SIGINT
    except _Terminated:
        _stop_children()
        return 128 + signal.SIGTERM
    finally:
        sys.stdout = saved
        _set_handler(signal.SIGTERM, old_term)
        _set_handler(signal.SIGINT, old_int)


def _stop_children() -> None:
    """End the worker processes a Ctrl-C or SIGTERM left behind, so that exit cannot wait on them.

    A signal that lands inside ProcessPoolExecutor.submit, after the fork of its
    workers and before its manager thread starts, leaves workers nobody tells to
    stop; multiprocessing joins them at exit, forever. They are killed, not sent
    SIGTERM: a forked worker has this module's SIGTERM handler and would print a
    traceback on the way out.
    """
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    for child in mp.active_children():
        with suppress(OSError, ValueError, AttributeError):
            child.kill()
            child.join(5)


def _main(argv: Sequence[str] | None, saved: Any) -> int:
    from ane_kdma.cli.common import GuardedStdout, OutputError, PipeClosed, say, silence
    from ane_kdma.errors import InputError

    sys.stdout = out = GuardedStdout(saved)
    try:
        status = _run(argv)
        out.flush()  # a write that fails shows here, not as noise at exit
        return status
    except InputError as exc:
        say(str(exc))
        return 2
    except OutputError as exc:
        say(f"cannot write to standard output: {exc}")
        silence(saved)  # what could not be written is dropped, so the exit flush stays quiet
        return 2
    except PipeClosed:
        silence(saved)
        return 128 + signal.SIGPIPE


def _run(argv: Sequence[str] | None) -> int:
    """Parse and run; --help and --version (argparse's own exits) are statuses too."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed --help: its text is flushed like any output
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    return int(args.func(args) or 0)


def _set_handler(signum: int, handler: Any) -> Any:
    """Install a signal handler where one can be (the main thread); the old one, or None."""
    if handler is None:
        return None
    try:
        return signal.signal(signum, handler)
    except (ValueError, OSError, TypeError):  # not the main thread
        return None


if __name__ == "__main__":
    sys.exit(main())
