"""Progress bars (tqdm) on long work, only where a person is watching; notes on slow steps.

A bar shows when stderr is a terminal and the caller is not quiet (the CLI
is quiet under --json); piped or redirected output stays clean. Nothing else
in the package imports tqdm.

A note is one stderr line saying what a slow step is doing (building the RTL
harness, running N workloads on the RTL): a wait of more than about two
seconds without a word reads as a hang. Notes show on a terminal, like bars;
redirected stderr stays exactly the CLI's contract (an error is one line)
unless ANE_KDMA_PROGRESS=1 asks for notes in a log too. ANE_KDMA_PROGRESS=0
silences both.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MIN_ITEMS = 2  # a bar for one item is noise
PREFIX = "ane-kdma: "  # as the CLI's own messages (cli.common.say)
SLOW_S = 2.0  # work still running after this, with no bar to show it, says what it is
CHUNK_WORKLOADS = 8  # a pooled run with a bar showing sends chunks this small, so it moves


def notes_wanted(stream: Any = None) -> bool:
    """Whether notes show: ANE_KDMA_PROGRESS=1 always, =0 never, else on a terminal."""
    switch = os.environ.get("ANE_KDMA_PROGRESS", "")
    if switch in ("0", "1"):
        return switch == "1"
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def note(message: str) -> None:
    """One line on stderr saying what a slow step is doing (see :func:`notes_wanted`)."""
    if not notes_wanted():
        return
    text = f"{PREFIX}{' '.join(message.split())}"  # one line, whatever it was given
    try:
        tq = sys.modules.get("tqdm")
        if tq is not None and getattr(tq.tqdm, "_instances", None):
            tq.tqdm.write(text, file=sys.stderr)  # above a bar that is showing, not through it
        else:
            print(text, file=sys.stderr, flush=True)
    except (AttributeError, OSError, ValueError):
        pass


@contextmanager
def announce_after(seconds: float, message: str) -> Iterator[None]:
    """:func:`note` the message if the block is still running after `seconds`.

    For work whose cost is not known in advance (a cycle-model run that is
    instant at most sizes and seconds at a few): a fast run prints nothing.
    """
    if seconds == float("inf"):  # never: no thread at all
        yield
        return
    timer = threading.Timer(seconds, note, (message,))
    timer.daemon = True  # never what keeps the process alive
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


class _Quiet:
    shown = False

    def update(self, n: int = 1) -> None:
        pass


class _Bar:
    shown = True

    def __init__(self, bar: Any) -> None:
        self._bar = bar

    def update(self, n: int = 1) -> None:
        self._bar.update(n)


def wanted(quiet: bool = False, stream: Any = None) -> bool:
    """Whether a bar may show: not quiet, stderr a terminal, and not switched off."""
    if quiet or os.environ.get("ANE_KDMA_PROGRESS", "") == "0":
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextmanager
def bar(
    total: int, desc: str, quiet: bool = False, what: str = "workloads"
) -> Iterator[_Bar | _Quiet]:
    """A bar of `total` steps on stderr (or a do-nothing one); ``.update(n)`` advances it.

    Without a bar (ANE_KDMA_PROGRESS=1 and stderr not a terminal), work still
    running after SLOW_S says once what it is, so a log shows what a long
    wait was; quiet (the CLI's --json) shows neither.
    """
    if total < MIN_ITEMS or not wanted(quiet):
        if quiet or total < MIN_ITEMS or not notes_wanted():  # quiet: --json, scripted
            yield _Quiet()
            return
        with announce_after(SLOW_S, f"running {total} {what} ({desc}); still working"):
            yield _Quiet()
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit="run", leave=False, file=sys.stderr) as t:
        yield _Bar(t)


def iterate(items: list[Any], desc: str, quiet: bool = False) -> Iterator[Any]:
    """Each item, with a bar over the list where one is wanted (for loops like a fit's)."""
    with bar(len(items), desc, quiet, "steps") as b:
        for item in items:
            yield item
            b.update(1)


def stop_pool(pool: Any) -> None:
    """End a process pool now: queued chunks cancelled, running workers killed.

    Why: leaving a ``with ProcessPoolExecutor`` block on an exception (Ctrl-C)
    waits for every queued chunk to finish, which was 18 s of a sweep ignoring
    Ctrl-C. The workers are killed, not asked: they hold no files of ours (the
    parent writes every output). Reads the pool's private worker table, the
    only handle on its processes; without it, the queue is still cancelled.
    """
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.kill()
            proc.join(5)
        except (OSError, ValueError, AttributeError):
            pass
