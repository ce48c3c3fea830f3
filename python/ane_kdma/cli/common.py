"""What every sub-command shares: the parser that fails in one line, options, tables, output.

Output goes through :class:`GuardedStdout` (installed by ``main``), so a
write that fails (a full disk, a closed stdout, a closed pipe) ends the run
in one line or quietly instead of a traceback; messages go through
:func:`say`, which keeps them on one line whatever a path contains.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from ane_kdma import chip as chips
from ane_kdma import contract, runner
from ane_kdma import hypotheses as hyps
from ane_kdma.errors import InputError
from ane_kdma.fileio import one_line

MAX_DIGITS = 40  # no size or count this tool takes needs more (2^128 has 39 digits)
_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|[0-9][0-9_]*)")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2
        raise InputError(message)


def arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser so argparse shows our message, not 'invalid value'."""

    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


def parse_int(text: str) -> int:
    """An integer as Python writes it (0x, 0o, 0b, _), ASCII digits only, bounded length."""
    t = text.strip()
    if len(t) > MAX_DIGITS or not _INT.fullmatch(t):
        shown = t if len(t) <= 24 else t[:21] + "..."
        raise InputError(f"not an integer: {shown!r}")
    try:
        return int(t, 0)
    except ValueError:
        raise InputError(f"not an integer: {t!r}") from None


def positive_int(text: str) -> int:
    value = parse_int(text)
    if value <= 0:
        raise InputError(f"must be positive: {text.strip()}")
    return value


def check_at_most(value: int, limit: int, option: str, why: str) -> None:
    """An argument range checked before anything is sized from it."""
    if value > limit:
        raise InputError(f"{option} {value}: at most {limit} ({why})")


positive = arg(positive_int)
integer = arg(parse_int)

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_SIZE = re.compile(r"([0-9][0-9_]*(?:\.[0-9_]+)?|0[xX][0-9a-fA-F_]+)\s*([a-zA-Z]*)")
_DECIMAL_UNITS = {"k", "kb", "m", "mb", "g", "gb"}


def parse_size(text: str) -> int:
    """A size in bytes: an integer as parse_int takes it, or a number with KiB, MiB or GiB.

    Why binary units only: "1MB" and "1M" are read as 10^6 or 2^20 by different
    tools, and the erratum sits at exactly 2^20; an exponent ("1e6") is refused
    with a hint rather than read as a float that may not be a whole size.
    """
    t = text.strip()
    shown = t if len(t) <= 24 else t[:21] + "..."
    hint = "write bytes as 1048576, 0x100000, 1MiB or 512KiB"
    if len(t) > MAX_DIGITS:
        raise InputError(f"not a size: {shown!r} ({hint})")
    if _INT.fullmatch(t):
        return parse_int(t)
    m = _SIZE.fullmatch(t)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        if m is not None and unit in _DECIMAL_UNITS:
            hint = f"KB, MB and GB are ambiguous: {hint}"
        elif re.fullmatch(r"[+-]?[0-9.]+[eE][+-]?[0-9]+", t):
            hint = f"no exponents: {hint}"
        raise InputError(f"not a size: {shown!r} ({hint})")
    from fractions import Fraction

    number = m.group(1).replace("_", "")
    value = Fraction(int(number, 16)) if number[:2].lower() == "0x" else Fraction(number)
    value *= _UNITS[unit]
    if value.denominator != 1:
        raise InputError(f"not a whole number of bytes: {shown!r}")
    return int(value)


def positive_size(text: str) -> int:
    value = parse_size(text)
    if value <= 0:
        raise InputError(f"must be positive: {text.strip()}")
    return value


size = arg(positive_size)
SIZE_HELP = "bytes: 1048576, 0x100000, 1MiB or 512KiB"


def _variant(text: str) -> hyps.Hypothesis | str:
    """A hypothesis, or "buggy" kept as a name until :func:`load_chip` asks the chip for it."""
    return hyps.BUGGY if hyps.is_buggy_alias(text) else hyps.get(text)


variant = arg(_variant)
engine = arg(contract.check_engine)


def parse_jobs(text: str) -> int:
    """--jobs N: ASCII digits only (str.isdigit also takes '\u0662' and '\u00b2'), 1..MAX_JOBS."""
    t = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,12}", t):
        raise InputError(f"not a number of processes: {ascii(t[:24])}")
    return runner.check_jobs(int(t))


def add_jobs(sp: argparse.ArgumentParser, what: str = "the workloads") -> None:
    """--jobs N: processes to spread `what` over (0, negative or absurd: one line, exit 2).

    And --scheduler ADDRESS: a Dask cluster to send them to instead (see :func:`run_options`).
    """
    sp.add_argument(
        "--jobs",
        type=arg(parse_jobs),
        default=None,
        metavar="N",
        help=f"processes to spread {what} over (default: the number of CPUs; with "
        "--scheduler, workers' worth of chunks, default the cluster's threads)",
    )
    add_scheduler(sp, what)


def add_scheduler(sp: argparse.ArgumentParser, what: str = "the workloads") -> None:
    """--scheduler ADDRESS: checked when parsed (empty or malformed: one line, exit 2)."""
    from ane_kdma import cluster

    sp.add_argument(
        "--scheduler",
        type=arg(cluster.parse_address),
        default=None,
        metavar="ADDRESS",
        help=f"a Dask scheduler (tcp://host:8786) to run {what} on; default "
        f"${cluster.ENV}, else this machine (needs the extra 'cluster')",
    )


def scheduler_of(args: argparse.Namespace) -> str | None:
    """--scheduler, else ANE_KDMA_SCHEDULER (checked: a bad value is one line), else None."""
    from ane_kdma import cluster

    scheduler: str | None = getattr(args, "scheduler", None)
    return scheduler if scheduler is not None else cluster.from_env()


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """jobs=, quiet= and connect= for runner.options or a takes_options function.

    The scheduler is :func:`scheduler_of`; with one and no --jobs, the
    cluster's width decides. The connection is made when the block starts.
    """
    from ane_kdma import cluster

    scheduler = scheduler_of(args)
    jobs = getattr(args, "jobs", None)
    if jobs is None and scheduler is None:
        jobs = runner.default_jobs()
    return {
        "jobs": jobs,
        "quiet": bool(getattr(args, "json", False)),
        "connect": cluster.at(scheduler) if scheduler is not None else None,
    }


def add_common(sp: argparse.ArgumentParser, engine_default: str | None = "model") -> None:
    """--json, --chip and --profile on every command; --engine where it runs workloads."""
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout")
    sp.add_argument(
        "--chip", default=None, help=f"chip name or folder (default {chips.DEFAULT_CHIP})"
    )
    sp.add_argument(
        "--profile", default=None, help="another profile JSON (or chip name) for this chip"
    )
    if engine_default is not None:
        sp.add_argument(
            "--engine",
            default=engine_default,
            type=engine,
            help=f"one of {', '.join(contract.engine_names())} ({engine_default})",
        )


def load_chip(args: argparse.Namespace) -> chips.Chip:
    """The --chip (with --profile), and --variant buggy resolved to the chip's fitted reading."""
    chip = chips.load(getattr(args, "chip", None), getattr(args, "profile", None))
    if isinstance(getattr(args, "variant", None), str):
        args.variant = chip.variant(args.variant)  # "buggy": the reading its profile names
    return chip


def header_text(title: str, chip: chips.Chip, engine: str | None, detail: str = "") -> str:
    """The one line above a result: what ran, on which engine, chip and profile.

    One helper so every result command names the three the same way (a figure
    means nothing without them); `detail` adds what is particular to it.
    """
    p = chip.profile
    where = f"{engine} engine, " if engine else ""
    text = f"{title}: {where}chip {chip.name}, profile {p.name} ({p.hypothesis} x {p.mechanism})"
    return f"{text}; {detail}" if detail else text


def print_header(title: str, chip: chips.Chip, engine: str | None, detail: str = "") -> None:
    """Print :func:`header_text` in WIDTH columns (text output only: --json carries no header)."""
    print_wrapped(header_text(title, chip, engine, detail))


WIDTH = 100  # columns of text output: prose wraps and tables fold to fit (validate's width too)
INDENT = "  "  # a wrapped line's continuation


def wrapped(text: str, width: int = WIDTH) -> list[str]:
    """`text` in `width` columns, continuation lines indented by :data:`INDENT`.

    Why breaks after "; " first: a header or a note is a list of clauses, and a
    clause kept whole reads better than one cut at the last space that fits; a
    clause longer than a line is then wrapped at spaces (a word is never cut).
    """
    import textwrap

    out: list[str] = []
    line = ""
    for clause in text.split("; "):
        lead = INDENT if out else ""
        joined = f"{line}; {clause}" if line else clause
        if len(lead + joined) <= width:
            line = joined
            continue
        if line and len(INDENT + clause) <= width:
            # the clause starts the next line whole; this one keeps its semicolon
            out.append(f"{lead}{line};")
            line = clause
            continue
        # a clause longer than a line: wrapped at spaces, from where this line stands
        pieces = textwrap.wrap(
            joined,
            width,
            initial_indent=lead,
            subsequent_indent=INDENT,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [lead]
        out += pieces[:-1]
        line = pieces[-1][len(lead) if len(pieces) == 1 else len(INDENT) :]
    out.append((INDENT if out else "") + line)
    return out


def print_wrapped(text: str) -> None:
    """Print :func:`wrapped`: one line of prose (a header, a note) in WIDTH columns."""
    for line in wrapped(text):
        print(line)


def table_lines(
    rows: Sequence[dict[str, object]], keys: Sequence[str], keep: int = 1, width: int = WIDTH
) -> list[str]:
    """Right-aligned columns; a table wider than `width` folds into stacked sections.

    Each section repeats the first `keep` columns (what names a row), so a row
    is read across sections by them, as a wide data frame prints; sections are
    separated by a blank line. Why fold rather than abbreviate: every figure
    and band stays whole in a terminal of `width` columns.
    """
    cells = [[one_line(str(r.get(k, ""))) for k in keys] for r in rows]
    widths = [max(len(k), *(len(row[j]) for row in cells)) for j, k in enumerate(keys)]

    def span(cols: Sequence[int]) -> int:
        return sum(widths[j] for j in cols) + 2 * (len(cols) - 1)

    def render(cols: Sequence[int]) -> list[str]:
        lines = ["  ".join(keys[j].rjust(widths[j]) for j in cols)]
        lines += ["  ".join(row[j].rjust(widths[j]) for j in cols) for row in cells]
        return [line.rstrip() for line in lines]  # an empty last cell pads nothing

    every = list(range(len(keys)))
    lead = every[:keep]
    if span(every) <= width or len(keys) <= keep:
        return render(every)
    sections: list[list[int]] = [[]]
    for j in every[keep:]:
        if sections[-1] and span([*lead, *sections[-1], j]) > width:
            sections.append([])
        sections[-1].append(j)
    out: list[str] = []
    for section in sections:
        out += [""] if out else []
        out += render([*lead, *section])
    return out


def print_table(rows: Sequence[dict[str, object]], keys: Sequence[str], keep: int = 1) -> None:
    """Print :func:`table_lines` (a table in WIDTH columns, folded if need be)."""
    for line in table_lines(rows, keys, keep):
        print(line)


# ---------------------------------------------------------------- messages and stdout


def say(message: str) -> None:
    """One line on stderr, ``ane-kdma: message``; nothing if stderr itself is gone."""
    try:
        print(f"ane-kdma: {one_line(message)}", file=sys.stderr, flush=True)
    except (AttributeError, OSError, ValueError):
        pass


def warn(message: str) -> None:
    say(f"warning: {message}")


class OutputError(Exception):
    """Standard output cannot be written (full disk, I/O error, closed): the message says why."""


class PipeClosed(Exception):
    """The reader of standard output went away (``| head``): end quietly."""


class GuardedStdout:
    """sys.stdout for one run: failed writes become OutputError or PipeClosed.

    Text that the stream's encoding cannot hold (a path with undecodable
    bytes) is written with backslash escapes instead of failing.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def _call(self, method: str, *args: Any) -> Any:
        if self._stream is None:
            raise OutputError("it is closed")
        try:
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:
            raise PipeClosed from None
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from None
        except ValueError as exc:  # I/O on a closed file
            raise OutputError(str(exc)) from None

    def write(self, text: str) -> int:
        try:
            return self._call("write", text)
        except UnicodeEncodeError:
            enc = getattr(self._stream, "encoding", None) or "utf-8"
            return self._call("write", text.encode(enc, "backslashreplace").decode(enc))

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def silence(stream: TextIO | None) -> None:
    """After a closed pipe: point stdout at /dev/null so the exit flush stays quiet."""
    try:
        fd = stream.fileno() if stream is not None else -1
        if fd >= 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
    except (AttributeError, OSError, ValueError):
        pass
