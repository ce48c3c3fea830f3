"""The `ane-kdma` command line: predict, plan, llm, replay, erratum, validate, sweep, calibrate.

Every sub-command prints a table, or exactly one JSON document with --json,
and takes --chip NAME|DIR (m3 by default). Bad input gets one line on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from ane_kdma.cli import (
    bench,
    calibrate,
    dump,
    erratum,
    llm,
    patch,
    plan,
    predict,
    replay,
    sweep,
    validate,
)
from ane_kdma.cli.common import (
    GuardedStdout,
    OutputError,
    Parser,
    PipeClosed,
    say,
    silence,
)
from ane_kdma.errors import InputError

COMMANDS = (predict, replay, erratum, plan, llm, patch, validate, sweep, calibrate, dump, bench)


def build_parser() -> Parser:
    p = Parser(prog="ane-kdma", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for cmd in COMMANDS:
        cmd.register(sub)
    return p


class _Terminated(BaseException):
    """SIGTERM, raised where the program is, so cleanup (temporary files) runs on the way out."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every way it can end is an exit status and at most one stderr line.

    Bad input: one line, status 2. A failed write to stdout (full disk, closed
    stdout): one line, status 2; a closed pipe: quiet, status 141 (SIGPIPE), as
    standard tools end. Ctrl-C: one line, status 130; SIGTERM: status 143,
    after temporary files are removed.
    """
    saved = sys.stdout
    sys.stdout = out = GuardedStdout(saved)
    old_term = _set_handler(signal.SIGTERM, _on_sigterm)
    try:
        args = build_parser().parse_args(argv)
        status = int(args.func(args) or 0)
        out.flush()  # a write that fails shows here, not as noise at exit
        return status
    except InputError as exc:
        say(str(exc))
        return 2
    except OutputError as exc:
        say(f"cannot write to standard output: {exc}")
        return 2
    except PipeClosed:
        silence(saved)
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        say("interrupted")
        return 128 + signal.SIGINT
    except _Terminated:
        return 128 + signal.SIGTERM
    finally:
        sys.stdout = saved
        _set_handler(signal.SIGTERM, old_term)


def _set_handler(signum: int, handler: object) -> object:
    """Install a signal handler where one can be (the main thread); the old one, or None."""
    if handler is None:
        return None
    try:
        return signal.signal(signum, handler)  # type: ignore[arg-type]
    except (ValueError, OSError):  # not the main thread
        return None


if __name__ == "__main__":
    sys.exit(main())
