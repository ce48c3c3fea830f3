"""The `ane-kdma` command line: predict, plan, llm, replay, erratum, validate, sweep, calibrate.

Every sub-command prints a table, or exactly one JSON document with --json,
and takes --chip NAME|DIR (m3 by default). Bad input gets one line on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ane_kdma.cli import (
    calibrate,
    dump,
    erratum,
    llm,
    plan,
    predict,
    replay,
    sweep,
    validate,
)
from ane_kdma.cli.common import Parser
from ane_kdma.errors import InputError

COMMANDS = (predict, replay, erratum, plan, llm, validate, sweep, calibrate, dump)


def build_parser() -> Parser:
    p = Parser(prog="ane-kdma", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for cmd in COMMANDS:
        cmd.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"ane-kdma: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
