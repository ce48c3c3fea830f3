"""Runs on a Dask distributed cluster: ``--scheduler ADDRESS`` (or ``ANE_KDMA_SCHEDULER``).

Why a module of its own: it is the one place that imports ``distributed``
(the optional extra ``cluster``), so the package works without it and a
missing extra is one line. It sits on the runner (:mod:`ane_kdma.runner`),
which never imports it: the unit of work is the one the local process pool
runs, :func:`ane_kdma.runner.run_chunk` on an interleaved chunk of workloads
(:func:`ane_kdma.runner.chunks`); :func:`ane_kdma.runner.run_many` hands its
chunks here when :func:`ane_kdma.runner.options` holds a :class:`Cluster`
(a :class:`ane_kdma.runner.Remote`), as :func:`options` or :func:`at` set up.

* The chip and each hypothesis are scattered once per connection (a sweep's
  every call reuses them), to every worker; the chunks refer to them, and
  the results are put back in the order of the workloads.
* A worker that dies takes its chunk with it: the scheduler gives the chunk
  to another worker (up to its ``distributed.scheduler.allowed-failures``);
  past that the run stops with one line. A chunk that raises is retried
  :data:`RETRIES` times; bad input (InputError) is not retried.
* Ctrl-C (or any exit from the wait) cancels every future of the call.

The RTL engine builds its harness on each worker at its first call, into
the worker's own cache, or into ``ANE_KDMA_HARNESS_CACHE`` when the workers
share one (ane_kdma.engines.verilator.cache_root).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import urllib.parse
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ane_kdma import runner
from ane_kdma.errors import InputError

if TYPE_CHECKING:
    from ane_kdma.chip import Chip
    from ane_kdma.contract import Result, Workload
    from ane_kdma.hypotheses import Hypothesis

ENV = "ANE_KDMA_SCHEDULER"
SCHEMES = ("tcp", "tls", "ws", "wss")  # dask's network protocols (ucx needs its own stack)
DEFAULT_PORT = 8786  # dask's scheduler port
MAX_ADDRESS = 1024
CONNECT_TIMEOUT_S = 4.0  # an address that does not answer: one line well within 10 s
CLOSE_TIMEOUT_S = 5.0
RETRIES = 2  # a chunk that raised (not bad input) runs again, this many times
EXTRA = "pip install 'ane-kdma[cluster]'"
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?")


class ClusterError(InputError):
    """The cluster could not do the work (no scheduler, workers lost): one line, exit 2."""


def check_address(text: str, what: str = "--scheduler") -> str:
    """A scheduler address as dask writes it, ``tcp://host:port`` (scheme and port filled in).

    Accepted: ``host``, ``host:port``, ``[v6]:port``, each with an optional
    ``tcp://``, ``tls://``, ``ws://`` or ``wss://``; the port defaults to 8786.
    Empty or malformed: InputError, one line (nothing is contacted here);
    `what` names the source in the message ("" under argparse, which names it).
    """
    t = text.strip() if isinstance(text, str) else ""
    example = "host:port, e.g. tcp://10.0.0.5:8786"
    if not t:
        raise InputError(f"{what + ': ' if what else ''}empty address (give {example})")
    shown = t if t.isascii() and t.isprintable() else ascii(t)
    shown = shown if len(shown) <= 48 else shown[:45] + "..."
    shown = (what if what.endswith("=") else f"{what} ") + shown if what else shown
    bad = f"{shown}: not a scheduler address ({example})"
    if len(t) > MAX_ADDRESS or not t.isprintable() or any(c.isspace() for c in t):
        raise InputError(bad)
    scheme, sep, rest = t.partition("://")
    if not sep:
        scheme, rest = "tcp", t
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise InputError(f"{shown}: protocol {scheme!r} is not one of {', '.join(SCHEMES)}")
    try:
        parts = urllib.parse.urlsplit(f"{scheme}://{rest}")
        port = parts.port
        host = parts.hostname
    except ValueError:
        raise InputError(bad) from None
    if (
        not host
        or parts.username is not None
        or parts.password is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or rest.endswith(":")
    ):
        raise InputError(bad)
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InputError(bad) from None
        host = f"[{host}]"
    elif (
        not _HOST.fullmatch(host)
        or len(host) > 253
        or any(not 1 <= len(label) <= 63 for label in host.rstrip(".").split("."))
    ):
        raise InputError(bad)
    if port == 0:
        raise InputError(f"{shown}: port 0 is not a scheduler's port")
    return f"{scheme}://{host}:{DEFAULT_PORT if port is None else port}"


def parse_address(text: str) -> str:
    """--scheduler as argparse reads it (it names the option in the message itself)."""
    return check_address(text, what="")


def from_env(environ: dict[str, str] | None = None) -> str | None:
    """``ANE_KDMA_SCHEDULER``, checked (unset or empty: None, run on this machine)."""
    raw = (os.environ if environ is None else environ).get(ENV, "")
    return check_address(raw, f"{ENV}=") if raw.strip() else None


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise InputError(f"--scheduler needs the optional extra 'cluster': {EXTRA}") from None
    return distributed


@dataclass(frozen=True)
class Refused:
    """Bad input met on a worker: sent back as a value so the scheduler does not retry it."""

    message: str


def run_on_worker(
    engine: str, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
) -> list[Result] | Refused:
    """runner.run_chunk as a worker runs it (bad input comes back as :class:`Refused`)."""
    try:
        return runner.run_chunk(engine, hypothesis, chip, workloads)
    except InputError as exc:
        return Refused(str(exc))


class Cluster:
    """A connected Dask client, and how many chunks to cut a call into.

    `slots`: how many workers' worth of chunks (``--jobs N`` with
    ``--scheduler``); None asks the scheduler for its threads at each call.
    """

    def __init__(
        self,
        client: Any,
        address: str,
        slots: int | None = None,
        logs: dict[str, int] | None = None,
    ) -> None:
        self.client = client
        self.address = address
        self.slots = slots
        self._shared: dict[int, tuple[object, Any]] = {}  # id -> (object, its future)
        self._logs = logs or {}  # the log levels to give back at close

    def share(self, obj: object) -> Any:
        """`obj` on every worker, scattered once for this connection (a sweep's every call)."""
        held = self._shared.get(id(obj))
        if held is not None and held[0] is obj and held[1].status == "finished":
            return held[1]
        fut = self.client.scatter(obj, broadcast=True, hash=False)  # broadcast: a lost worker
        self._shared[id(obj)] = (obj, fut)  # does not lose it; the object kept: id stays its
        return fut

    def width(self) -> int:
        """Threads to fill: --jobs, else the cluster's (else this machine's, until workers come)."""
        if self.slots is not None:
            return self.slots
        try:
            threads = sum(self.client.nthreads().values())
        except Exception as exc:  # the scheduler went away between calls
            raise self._lost(exc) from None
        return max(1, min(threads or runner.default_jobs(), runner.MAX_JOBS))

    def run(
        self,
        engine: str,
        hypothesis: Hypothesis,
        chip: Chip,
        workloads: Sequence[Workload],
        per_slot: int,
        done: Callable[[int], None] | None = None,
    ) -> list[Result]:
        """Every workload through run_chunk on the cluster, in order; `done(n)` as chunks land."""
        dist = _distributed()
        chunks = runner.chunks(len(workloads), self.width() * per_slot)
        out: list[Result | None] = [None] * len(workloads)
        futures: list[Any] = []
        try:
            chip_f, hyp_f = self.share(chip), self.share(hypothesis)
            by_key = {}
            for c in chunks:
                fut = self.client.submit(
                    run_on_worker,
                    engine,
                    hyp_f,
                    chip_f,
                    [workloads[i] for i in c],
                    pure=False,
                    retries=RETRIES,
                )
                futures.append(fut)
                by_key[fut.key] = c
            for fut in dist.as_completed(futures, loop=self.client.loop):
                part = self._result(fut, dist)
                if isinstance(part, Refused):
                    raise InputError(part.message)
                c = by_key[fut.key]
                for i, r in zip(c, part, strict=True):
                    out[i] = r
                if done is not None:
                    done(len(c))
        except InputError:
            self._cancel(futures)
            raise
        except Exception as exc:  # here, not on a worker: the scheduler or the link
            self._cancel(futures)
            raise self._explain(exc, dist) from None
        except BaseException:  # Ctrl-C, SIGTERM: nothing left running on the cluster
            self._cancel(futures)
            raise
        finally:
            futures.clear()
        missing = [i for i, r in enumerate(out) if r is None]
        if missing:  # cannot happen while every chunk answers; never return a hole
            raise ClusterError(f"cluster {self.address}: {len(missing)} workloads came back empty")
        return [r for r in out if r is not None]

    def on_every_worker(
        self, engine: str, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> int:
        """run_chunk once on each worker now (builds the RTL harness on each); returns workers."""
        try:
            answers = self.client.run(run_on_worker, engine, hypothesis, chip, list(workloads))
        except Exception as exc:
            raise self._explain(exc, _distributed()) from None
        for part in answers.values():
            if isinstance(part, Refused):
                raise InputError(part.message)
        return len(answers)

    def close(self) -> None:
        self._shared.clear()
        with suppress(Exception):
            self.client.close(timeout=CLOSE_TIMEOUT_S)
        _restore_logs(self._logs)
        self._logs = {}

    # ------------------------------------------------------------ failures

    def _cancel(self, futures: list[Any]) -> None:
        if futures:
            with suppress(Exception):
                self.client.cancel(futures, force=True)

    def _lost(self, exc: BaseException) -> ClusterError:
        return ClusterError(f"lost the scheduler at {self.address}: {_one_line(exc)}")

    def _result(self, fut: Any, dist: Any) -> Any:
        """A finished chunk's value; what ended it otherwise, as one line."""
        import concurrent.futures

        try:
            return fut.result()
        except dist.KilledWorker:
            raise ClusterError(
                f"cluster {self.address}: workers died running the same chunk "
                "(dask's distributed.scheduler.allowed-failures); stopped"
            ) from None
        except concurrent.futures.CancelledError:
            raise ClusterError(
                f"cluster {self.address}: the work was cancelled (the scheduler cancelled it "
                "or went away)"
            ) from None
        except InputError:
            raise
        except dist.comm.CommClosedError as exc:  # the client's link closed while gathering
            raise self._lost(exc) from None
        except Exception as exc:  # raised by run_chunk on a worker, retried RETRIES times
            raise ClusterError(
                f"cluster {self.address}: a chunk failed on a worker after {RETRIES} "
                f"retries: {_one_line(exc)}"
            ) from None

    def _explain(self, exc: Exception, dist: Any) -> ClusterError:
        """One line for what ended a call on this side (the link, the scheduler)."""
        if isinstance(exc, OSError | dist.comm.CommClosedError):
            return self._lost(exc)
        return ClusterError(f"cluster {self.address}: {_one_line(exc)}")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_LOGGERS = ("distributed", "tornado", "bokeh")  # dask's logging config gives each a handler


def _quiet_logs() -> dict[str, int]:
    """Silence dask's client-side loggers while connected; the old levels, to give back.

    Why: a scheduler that goes away makes the client log tracebacks on stderr,
    where the command says what happened in one line (ClusterError).
    """
    saved = {}
    for name, lg in list(logging.root.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger) and name.split(".")[0] in _LOGGERS and lg.handlers:
            saved[name] = lg.level
            lg.setLevel(logging.CRITICAL + 10)
    return saved


def _restore_logs(saved: dict[str, int]) -> None:
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def connect(address: str, slots: int | None = None, timeout: float = CONNECT_TIMEOUT_S) -> Cluster:
    """A client on the scheduler at `address`, or ClusterError (one line) within `timeout` s."""
    addr = check_address(address)
    dist = _distributed()
    logs = _quiet_logs()
    client = dist.Client.__new__(dist.Client)
    try:
        with warnings.catch_warnings():  # version-mismatch notes: many lines, not ours to print
            warnings.simplefilter("ignore")
            client.__init__(addr, timeout=timeout, set_as_default=False)
    except Exception as exc:  # refused, timed out, or something that is not a scheduler
        with suppress(Exception):
            client.close(timeout=1)  # else its finaliser complains at exit
        _restore_logs(logs)
        if isinstance(exc, OSError) and "Timed out" in str(exc):
            why = f"no Dask scheduler answers there (waited {timeout:g} s)"
        elif isinstance(exc, OSError):
            why = f"cannot reach it ({_one_line(exc)})"
        else:  # a reply that is not dask's protocol, or one it could not read
            said = _one_line(exc)
            said = said if len(said) <= 80 else said[:77] + "..."
            why = f"what answers there is not a Dask scheduler ({said})"
        raise ClusterError(f"--scheduler {addr}: {why}") from None
    return Cluster(client, addr, slots, logs)


def at(address: str) -> runner.Connect:
    """The `connect` of :func:`ane_kdma.runner.options` for the scheduler at `address`.

    Checked now (malformed: one line); contacted when the block is entered,
    with --jobs as the slots.
    """
    addr = check_address(address)

    def connect_here(slots: int | None) -> Cluster:
        return connect(addr, slots=slots)

    return connect_here


@contextmanager
def options(
    scheduler: str | None, jobs: int | None = None, quiet: bool | None = None
) -> Iterator[Cluster | None]:
    """:func:`ane_kdma.runner.options` with its chunks on the scheduler at `scheduler`.

    None: this machine, as the enclosing block has it. The block yields the
    connected :class:`Cluster` (None without a scheduler) and closes it at its end.
    """
    with runner.options(jobs, quiet, at(scheduler) if scheduler is not None else None) as opts:
        yield opts.cluster if isinstance(opts.cluster, Cluster) else None
