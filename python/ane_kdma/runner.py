"""The runner above the contract: run_many, chunking, ``--jobs`` and the run options.

Why a module of its own: the contract (:mod:`ane_kdma.contract`) says what a
workload, a result and an engine are; how many of them run where is a
separate choice, made once by the command line and read deep inside the
analyses. This module imports the contract and never the reverse; a Dask
cluster (:mod:`ane_kdma.cluster`) plugs in from above through the
:class:`Remote` protocol, so this module imports no cluster either.

* :func:`run_many`: every workload on one engine, in order, each distinct
  one run once, inline, over a process pool, or on a :class:`Remote`.
* :func:`chunks`: how the workloads are cut (the pool and the cluster share it).
* :func:`run_chunk`: the unit of parallel work, wherever it runs.
* :func:`options` / :func:`current_options`: the one ambient setting of a
  run (processes, quiet, a remote pool, the exact engine of a fit);
  :func:`takes_options` gives a function the same keywords.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ane_kdma import progress
from ane_kdma.contract import EngineInfo, Result, Workload, check_engine, engine_info, get_engine
from ane_kdma.errors import InputError

if TYPE_CHECKING:
    from ane_kdma.chip import Chip
    from ane_kdma.hypotheses import Hypothesis

MAX_JOBS = 1024
CHUNKS_PER_JOB = 4  # more chunks than processes: sizes differ, so the load evens out
EXACT_ENGINE = "model"  # the exact engine a fit runs on unless told (the cycle model)


def check_jobs(jobs: int) -> int:
    """A process count for --jobs: 1..MAX_JOBS."""
    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise InputError(f"{jobs!r} processes: not an integer")
    if not 1 <= jobs <= MAX_JOBS:
        raise InputError(f"{jobs} processes: must be 1..{MAX_JOBS}")
    return jobs


def default_jobs() -> int:
    return min(os.cpu_count() or 1, MAX_JOBS)


class Remote(Protocol):
    """Where chunks go instead of the local pool (a Dask cluster: ane_kdma.cluster.Cluster)."""

    address: str

    def run(
        self,
        engine: str,
        hypothesis: Hypothesis,
        chip: Chip,
        workloads: Sequence[Workload],
        per_slot: int,
        done: Callable[[int], None] | None = None,
    ) -> list[Result]: ...

    def close(self) -> None: ...


Connect = Callable[[int | None], Remote]  # slots (--jobs, None: the remote's own width) -> Remote


@dataclass(frozen=True)
class RunOptions:
    """How run_many spreads work, whether a bar may show, and the exact engine of a fit."""

    jobs: int = 1
    quiet: bool = False
    cluster: Remote | None = None  # set: chunks go there (ane_kdma.cluster)
    exact_engine: str = EXACT_ENGINE  # the engine calibrate's exact evaluations run on


_OPTIONS: ContextVar[RunOptions | None] = ContextVar("ane_kdma_run_options", default=None)


def current_options() -> RunOptions:
    return _OPTIONS.get() or RunOptions()


@contextmanager
def options(
    jobs: int | None = None,
    quiet: bool | None = None,
    connect: Connect | None = None,
    exact_engine: str | None = None,
) -> Iterator[RunOptions]:
    """Within the block, run_many and the fits use these (None: as the enclosing block had it).

    Why a context and not a parameter everywhere: the analyses (sweep, validate,
    calibrate) call run_many deep down; the CLI decides how wide to run them,
    and calibrate's caller which engine its exact evaluations use.
    `connect`: called once at entry with `jobs` (the slots), it gives the
    :class:`Remote` every parallel run_many goes to; the block closes it at
    its end (:func:`ane_kdma.cluster.at` makes one from a scheduler address).
    """
    cur = current_options()
    n = check_jobs(jobs) if jobs is not None else None
    exact = check_engine(exact_engine) if exact_engine is not None else cur.exact_engine
    remote = connect(n) if connect is not None else cur.cluster
    new = RunOptions(
        n if n is not None else cur.jobs,
        cur.quiet if quiet is None else quiet,
        remote,
        exact,
    )
    token = _OPTIONS.set(new)
    try:
        yield new
    finally:
        _OPTIONS.reset(token)
        if remote is not None and remote is not cur.cluster:
            remote.close()


F = TypeVar("F", bound=Callable[..., Any])


def takes_options(fn: F) -> F:
    """Give `fn` the keywords of :func:`options` (jobs=, quiet=, connect=, exact_engine=)."""

    @functools.wraps(fn)
    def wrapped(
        *args: Any,
        jobs: int | None = None,
        quiet: bool | None = None,
        connect: Connect | None = None,
        exact_engine: str | None = None,
        **kw: Any,
    ) -> Any:
        with options(jobs, quiet, connect, exact_engine):
            return fn(*args, **kw)

    return wrapped  # type: ignore[return-value]


def run_many(
    engine: str,
    hypothesis: Hypothesis,
    chip: Chip,
    workloads: Sequence[Workload],
    jobs: int | None = None,
) -> list[Result]:
    """Every workload on the engine, in order; spread over `jobs` processes (1: inline).

    Each distinct workload runs once. With jobs > 1 and an engine worth it,
    the workloads go to a process pool in interleaved chunks; each chunk is
    the engine's own run_many (:func:`run_chunk`), so the per-workload
    function is the same wherever it runs. With a remote in :func:`options`
    (``--scheduler``) the same chunks go there instead, whatever `jobs` says.
    """
    opts = current_options()
    n_jobs = check_jobs(jobs) if jobs is not None else opts.jobs
    info = engine_info(engine)
    unique = list(dict.fromkeys(workloads))
    if opts.cluster is not None and info.parallel and len(unique) >= 2:
        res = _remote(opts.cluster, engine, hypothesis, chip, unique, info, opts.quiet)
    elif n_jobs <= 1 or not info.parallel or len(unique) < 2:
        with progress.bar(len(unique), f"{engine} {hypothesis.name}", opts.quiet) as bar:
            if not bar.shown or len(unique) < 2 or not (info.parallel and info.cheap_calls):
                res = get_engine(engine).run_many(hypothesis, chip, unique)
                bar.update(len(unique))
            else:  # in pieces, so the bar moves
                res = []
                pieces = -(-len(unique) // progress.CHUNK_WORKLOADS)  # workload granularity
                for chunk in chunks(len(unique), pieces, contiguous=True):
                    part = [unique[i] for i in chunk]
                    res += get_engine(engine).run_many(hypothesis, chip, part)
                    bar.update(len(part))
    else:
        per_job = CHUNKS_PER_JOB if info.cheap_calls else 1
        res = _pooled(engine, hypothesis, chip, unique, n_jobs, per_job, opts.quiet)
    by = dict(zip(unique, res, strict=True))
    return [by[w] for w in workloads]


def chunks(count: int, n: int, contiguous: bool = False) -> list[list[int]]:
    """The indices 0..count-1 in at most `n` chunks: interleaved (sizes differ: the load
    evens out), or contiguous (a bar that moves in order)."""
    idx = list(range(count))
    n = max(1, min(n, count))
    if contiguous:
        size = -(-count // n)
        return [idx[i : i + size] for i in range(0, count, size)]
    return [idx[i::n] for i in range(n)]


def run_chunk(
    engine: str, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
) -> list[Result]:
    """The unit of parallel work: one engine's run_many on one chunk (the pool, or Dask)."""
    return get_engine(engine).run_many(hypothesis, chip, workloads)


def _pooled(
    engine: str,
    hypothesis: Hypothesis,
    chip: Chip,
    workloads: list[Workload],
    jobs: int,
    per_job: int,
    quiet: bool,
) -> list[Result]:
    # a bar moves at chunk granularity: where calls are cheap, chunks of a few workloads
    n_chunks = jobs * per_job
    if per_job > 1 and progress.wanted(quiet):
        n_chunks = max(n_chunks, -(-len(workloads) // progress.CHUNK_WORKLOADS))
    cut = chunks(len(workloads), n_chunks)
    out: list[Result | None] = [None] * len(workloads)
    workers = min(jobs, len(cut))
    with (
        progress.bar(len(workloads), f"{engine} {hypothesis.name} x{workers}", quiet) as bar,
        ProcessPoolExecutor(workers, mp_context=_mp_context()) as pool,
    ):
        try:
            futs = {
                pool.submit(run_chunk, engine, hypothesis, chip, [workloads[i] for i in c]): c
                for c in cut
            }
            for fut in as_completed(futs):
                c = futs[fut]
                for i, r in zip(c, fut.result(), strict=True):
                    out[i] = r
                bar.update(len(c))
        except BaseException:  # Ctrl-C, SIGTERM, a failed chunk: stop now, not after the queue
            progress.stop_pool(pool)
            raise
    return [r for r in out if r is not None]


def _remote(
    remote: Remote,
    engine: str,
    hypothesis: Hypothesis,
    chip: Chip,
    workloads: list[Workload],
    info: EngineInfo,
    quiet: bool,
) -> list[Result]:
    per_job = CHUNKS_PER_JOB if info.cheap_calls else 1
    desc = f"{engine} {hypothesis.name} on {remote.address}"
    with progress.bar(len(workloads), desc, quiet) as bar:
        return remote.run(engine, hypothesis, chip, workloads, per_job, bar.update)


def _mp_context() -> Any:
    """fork where there is one (no re-import, the registry as the parent has it), else spawn."""
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")
