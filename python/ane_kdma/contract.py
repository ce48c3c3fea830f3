"""The engine contract: tasks, workloads, results, and the one registry of engines.

Why one module: every analysis (validate, calibrate, sweep, plan, llm, replay)
speaks only these types and asks the registry for an engine by name, so an
engine can be swapped (closed form, cycle model, RTL) without the analysis
knowing. This module imports no engine; the registry names each engine's
module and imports it on first use.

* :class:`Task`: one core's share of a task descriptor, a byte address and a
  byte size, as the TD holds them.
* :class:`Workload`: for each core, a sequence of tasks issued back to back.
  The hardware issues task j to every enabled core at once (one descriptor
  per step), so every enabled core has the same number of tasks.
* :class:`Result`: the top's cycles (first accept to last line drained),
  per-core counters, and time and GB/s with the chip's overhead and DRAM
  ceiling applied by :meth:`ane_kdma.chip.Chip.time_us`, nowhere else.
* :class:`Engine`: ``run(hypothesis, chip, workload) -> Result``.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, LINE_BYTES, MAX_CORES

if TYPE_CHECKING:
    from ane_kdma.chip import Chip
    from ane_kdma.cluster import Cluster
    from ane_kdma.hypotheses import Hypothesis

MAX_TASKS = 1 << 16  # tasks per core in one workload


@dataclass(frozen=True)
class Task:
    """One core's transfer: byte address and byte size (rounded up to whole lines)."""

    base_addr: int
    size_bytes: int

    def __post_init__(self) -> None:
        for name, v in (("base address", self.base_addr), ("size", self.size_bytes)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(f"task {name} {v!r} is not an integer")
        if not 0 <= self.base_addr < (1 << ADDR_BITS):
            raise InputError(f"base address {self.base_addr:#x} is not a 32-bit byte address")
        if not 0 <= self.size_bytes < (1 << ADDR_BITS):
            raise InputError(f"size {self.size_bytes} bytes is not a 32-bit byte count")

    def lines_of(self, line_bytes: int = LINE_BYTES) -> int:
        return -(-self.size_bytes // line_bytes)

    def base_line_of(self, line_bytes: int = LINE_BYTES) -> int:
        return self.base_addr // line_bytes

    @property
    def lines(self) -> int:  # the RTL's 64-byte lines
        return self.lines_of()

    @property
    def base_line(self) -> int:
        return self.base_line_of()


def split_lines(lines: int, parts: int) -> list[int]:
    """`parts` near-equal tasks, each a whole number of lines (the larger ones first)."""
    if parts < 1 or parts > lines:
        raise InputError(f"cannot split {lines} lines into {parts} tasks")
    base, extra = divmod(lines, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


@dataclass(frozen=True)
class Workload:
    """Per core, the tasks it is given back to back; None for a core that sits out."""

    cores: tuple[tuple[Task, ...] | None, ...]
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not 1 <= len(self.cores) <= MAX_CORES:
            raise InputError(f"{len(self.cores)} cores: a workload has 1..{MAX_CORES}")
        counts = {len(seq) for seq in self.cores if seq is not None}
        if not counts:
            raise InputError("a workload needs at least one enabled core")
        if len(counts) > 1:
            raise InputError(
                "every enabled core needs the same number of tasks (one descriptor per step)"
            )
        n = counts.pop()
        if not 1 <= n <= MAX_TASKS:
            raise InputError(f"{n} tasks per core (1..{MAX_TASKS})")
        for seq in self.cores:
            for t in seq or ():
                if not isinstance(t, Task):
                    raise InputError(f"not a task: {t!r}")
                if t.size_bytes == 0:
                    raise InputError("a workload task must move at least one byte")

    # ------------------------------------------------------------ views
    @property
    def enabled(self) -> list[int]:
        return [c for c, seq in enumerate(self.cores) if seq is not None]

    @property
    def steps(self) -> int:
        return len(next(seq for seq in self.cores if seq is not None))

    def bytes_total(self, line_bytes: int = LINE_BYTES) -> int:
        """Bytes the DMA moves: whole lines, as the hardware reads them."""
        return sum(t.lines_of(line_bytes) * line_bytes for seq in self.cores for t in seq or ())

    def lines_per_core(self, line_bytes: int = LINE_BYTES) -> list[int]:
        return [sum(t.lines_of(line_bytes) for t in seq) for seq in self.cores if seq is not None]

    # ------------------------------------------------------------ builders
    @classmethod
    def from_chunks(
        cls,
        chunk_bytes: Sequence[int],
        cores: int,
        line_bytes: int = LINE_BYTES,
        label: str = "",
    ) -> Workload:
        """Every one of `cores` cores streams the same chunks back to back (a plan's tasks).

        Core c's weights start at c x (its total), the layout of the published
        dumps (core i base = i x size); the chunks follow each other in memory.
        """
        if any(b <= 0 or b % line_bytes for b in chunk_bytes):
            raise InputError(f"task sizes must be positive whole {line_bytes}-byte lines")
        total = sum(chunk_bytes)
        if total >= 1 << ADDR_BITS:
            raise InputError(f"{total} bytes per core exceeds the 32-bit size register")
        if not 1 <= cores <= MAX_CORES:
            raise InputError(f"{cores} cores: a workload has 1..{MAX_CORES}")
        seqs = []
        for c in range(cores):
            base = (c * total) % (1 << ADDR_BITS)
            seq = []
            for b in chunk_bytes:
                seq.append(Task(base, b))
                base = (base + b) % (1 << ADDR_BITS)
            seqs.append(tuple(seq))
        return cls(tuple(seqs), label)

    @classmethod
    def from_size(
        cls, bytes_per_core: int, cores: int, split: int = 1, line_bytes: int = LINE_BYTES
    ) -> Workload:
        """`bytes_per_core` on each of `cores` cores, as `split` near-equal back-to-back tasks."""
        if bytes_per_core <= 0 or bytes_per_core % line_bytes:
            raise InputError(
                f"{bytes_per_core} bytes per core is not a positive multiple of "
                f"{line_bytes}-byte lines"
            )
        if bytes_per_core >= 1 << ADDR_BITS:
            raise InputError(f"{bytes_per_core} bytes per core exceeds the 32-bit size register")
        parts = split_lines(bytes_per_core // line_bytes, split)
        label = f"{bytes_per_core} B/core" + (f" in {split} tasks" if split > 1 else "")
        return cls.from_chunks([p * line_bytes for p in parts], cores, line_bytes, label)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class CoreCounters:
    """kdma_core's performance counters for one core (None: the engine does not model it)."""

    cycles: int
    zero_credit_cycles: int | None = None
    peak_inflight: int | None = None


@dataclass(frozen=True)
class Counters:
    """What the RTL's counters say after a workload: the top's span and each core's."""

    cycles: int
    cores: tuple[CoreCounters | None, ...]

    def mismatches(self, want: Counters, what: str = "RTL", ref: str = "model") -> list[str]:
        """Every counter that differs from `want`, as 'name: RTL x, model y' lines.

        The one comparison the TB class, the sequence runner and the pyuvm
        scoreboard share; a counter either side leaves as None is not compared.
        """
        out = []
        if self.cycles != want.cycles:
            out.append(f"cycles: {what} {self.cycles}, {ref} {want.cycles}")
        if len(self.cores) != len(want.cores):
            out.append(f"cores: {what} {len(self.cores)}, {ref} {len(want.cores)}")
            return out
        for c, (g, w) in enumerate(zip(self.cores, want.cores, strict=True)):
            if g is None or w is None:
                if (g is None) != (w is None):
                    out.append(f"core {c}: enabled in one, not the other")
                continue
            for name in ("cycles", "zero_credit_cycles", "peak_inflight"):
                gv, wv = getattr(g, name), getattr(w, name)
                if gv is not None and wv is not None and gv != wv:
                    out.append(f"core {c} {name}: {what} {gv}, {ref} {wv}")
        return out


@dataclass(frozen=True)
class Result:
    """One workload on one engine: counters, and time and throughput as the chip reports them."""

    engine: str
    hypothesis: str
    chip: str
    counters: Counters
    bytes_total: int
    time_us: float
    gbps: float
    exact: bool  # the RTL's counters to the cycle (False: the closed form)

    @property
    def cycles(self) -> int:
        return self.counters.cycles

    @property
    def cores(self) -> tuple[CoreCounters | None, ...]:
        return self.counters.cores

    @classmethod
    def make(
        cls,
        engine: str,
        hypothesis: Hypothesis,
        chip: Chip,
        workload: Workload,
        counters: Counters,
        exact: bool,
    ) -> Result:
        """The only constructor: time and GB/s come from the chip, ceiling and overhead included."""
        total = workload.bytes_total(chip.line_bytes)
        t = chip.time_us(counters.cycles, total)
        return cls(
            engine=engine,
            hypothesis=hypothesis.name,
            chip=chip.name,
            counters=counters,
            bytes_total=total,
            time_us=t,
            gbps=chip.gbps(total, t),
            exact=exact,
        )


# ---------------------------------------------------------------- engines


class Engine(Protocol):
    name: str
    exact: bool

    def run(self, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result: ...

    def run_many(
        self, hypothesis: Hypothesis, chip: Chip, workloads: Sequence[Workload]
    ) -> list[Result]: ...


@dataclass(frozen=True)
class EngineInfo:
    name: str
    module: str  # imported on first use; it defines ENGINE
    summary: str
    parallel: bool = True  # worth spreading over processes (False: vectorised already)
    cheap_calls: bool = True  # False: each run_many call starts a simulator (few, big chunks)


REGISTRY: tuple[EngineInfo, ...] = (
    EngineInfo(
        "analytic",
        "ane_kdma.engines.analytic",
        "closed form, vectorised: sweeps, fits",
        parallel=False,
    ),
    EngineInfo("model", "ane_kdma.engines.model", "the cycle model: the RTL's counters exactly"),
    EngineInfo(
        "rtl", "ane_kdma.engines.verilator", "the RTL itself, a Verilator C++ batch harness"
    ),
    EngineInfo(
        "cocotb",
        "ane_kdma.engines.cocotb",
        "the RTL under the cocotb testbench (SIM=icarus too)",
        cheap_calls=False,
    ),
)


def engine_names() -> list[str]:
    return [e.name for e in REGISTRY]


def check_engine(name: str) -> str:
    if name not in engine_names():
        raise InputError(f"unknown engine {name!r} (one of: {', '.join(engine_names())})")
    return name


def get_engine(name: str) -> Engine:
    """The engine registered under `name` (its module is imported now, not before)."""
    check_engine(name)
    info = next(e for e in REGISTRY if e.name == name)
    return importlib.import_module(info.module).ENGINE


def run(engine: str, hypothesis: Hypothesis, chip: Chip, workload: Workload) -> Result:
    return get_engine(engine).run(hypothesis, chip, workload)


# ---------------------------------------------------------------- parallel runs

MAX_JOBS = 1024
CHUNKS_PER_JOB = 4  # more chunks than processes: sizes differ, so the load evens out


def check_jobs(jobs: int) -> int:
    """A process count for --jobs: 1..MAX_JOBS."""
    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise InputError(f"{jobs!r} processes: not an integer")
    if not 1 <= jobs <= MAX_JOBS:
        raise InputError(f"{jobs} processes: must be 1..{MAX_JOBS}")
    return jobs


def default_jobs() -> int:
    return min(os.cpu_count() or 1, MAX_JOBS)


@dataclass(frozen=True)
class RunOptions:
    """How run_many spreads work: processes or a Dask cluster, and whether a bar may show."""

    jobs: int = 1
    quiet: bool = False
    cluster: Cluster | None = None  # set: chunks go to this Dask cluster (ane_kdma.cluster)


_OPTIONS: ContextVar[RunOptions | None] = ContextVar("ane_kdma_run_options", default=None)


def current_options() -> RunOptions:
    return _OPTIONS.get() or RunOptions()


@contextmanager
def options(
    jobs: int | None = None, quiet: bool | None = None, scheduler: str | None = None
) -> Iterator[RunOptions]:
    """Within the block, run_many calls that name no `jobs` use these (the CLI sets them).

    Why a context and not a parameter everywhere: the analyses (sweep, validate,
    calibrate) call run_many deep down; the CLI decides how wide to run them.
    `scheduler`: a Dask scheduler's address; the block connects to it first
    (one line and exit 2 if it does not answer), sends every parallel run_many
    to it, and closes the client at its end. `jobs` is then the number of
    workers' worth of chunks (None: the cluster's threads).
    """
    cur = current_options()
    n = check_jobs(jobs) if jobs is not None else None
    cluster = cur.cluster
    if scheduler is not None:
        from ane_kdma import cluster as cluster_mod

        cluster = cluster_mod.connect(scheduler, slots=n)
    new = RunOptions(
        n if n is not None else cur.jobs,
        cur.quiet if quiet is None else quiet,
        cluster,
    )
    token = _OPTIONS.set(new)
    try:
        yield new
    finally:
        _OPTIONS.reset(token)
        if cluster is not None and cluster is not cur.cluster:
            cluster.close()


F = TypeVar("F", bound=Callable[..., Any])


def takes_jobs(fn: F) -> F:
    """Give `fn` `jobs=`, `quiet=` and `scheduler=` keywords that set :func:`options` around it."""

    @functools.wraps(fn)
    def wrapped(
        *args: Any,
        jobs: int | None = None,
        quiet: bool | None = None,
        scheduler: str | None = None,
        **kw: Any,
    ) -> Any:
        with options(jobs, quiet, scheduler):
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
    function is the same wherever it runs. With a cluster in :func:`options`
    (``--scheduler``) the same chunks go to Dask workers instead, whatever
    `jobs` says (ane_kdma.cluster).
    """
    from ane_kdma import progress

    opts = current_options()
    n_jobs = check_jobs(jobs) if jobs is not None else opts.jobs
    check_engine(engine)
    info = next(e for e in REGISTRY if e.name == engine)
    unique = list(dict.fromkeys(workloads))
    if opts.cluster is not None and info.parallel and len(unique) >= 2:
        res = _on_cluster(opts.cluster, engine, hypothesis, chip, unique, info, opts.quiet)
    elif n_jobs <= 1 or not info.parallel or len(unique) < 2:
        with progress.bar(len(unique), f"{engine} {hypothesis.name}", opts.quiet) as bar:
            if not bar.shown or len(unique) < 2 or not (info.parallel and info.cheap_calls):
                res = get_engine(engine).run_many(hypothesis, chip, unique)
                bar.update(len(unique))
            else:  # in pieces, so the bar moves
                res = []
                pieces = -(-len(unique) // progress.CHUNK_WORKLOADS)  # workload granularity
                for chunk in _chunks(list(range(len(unique))), pieces, contiguous=True):
                    part = [unique[i] for i in chunk]
                    res += get_engine(engine).run_many(hypothesis, chip, part)
                    bar.update(len(part))
    else:
        per_job = CHUNKS_PER_JOB if info.cheap_calls else 1
        res = _pooled(engine, hypothesis, chip, unique, n_jobs, per_job, opts.quiet)
    by = dict(zip(unique, res, strict=True))
    return [by[w] for w in workloads]


def _chunks(idx: list[int], n: int, contiguous: bool = False) -> list[list[int]]:
    n = max(1, min(n, len(idx)))
    if contiguous:
        size = -(-len(idx) // n)
        return [idx[i : i + size] for i in range(0, len(idx), size)]
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
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from ane_kdma import progress

    # a bar moves at chunk granularity: where calls are cheap, chunks of a few workloads
    n_chunks = jobs * per_job
    if per_job > 1 and progress.wanted(quiet):
        n_chunks = max(n_chunks, -(-len(workloads) // progress.CHUNK_WORKLOADS))
    chunks = _chunks(list(range(len(workloads))), n_chunks)
    out: list[Result | None] = [None] * len(workloads)
    workers = min(jobs, len(chunks))
    with (
        progress.bar(len(workloads), f"{engine} {hypothesis.name} x{workers}", quiet) as bar,
        ProcessPoolExecutor(workers, mp_context=_mp_context()) as pool,
    ):
        try:
            futs = {
                pool.submit(run_chunk, engine, hypothesis, chip, [workloads[i] for i in c]): c
                for c in chunks
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


def _on_cluster(
    cluster: Cluster,
    engine: str,
    hypothesis: Hypothesis,
    chip: Chip,
    workloads: list[Workload],
    info: EngineInfo,
    quiet: bool,
) -> list[Result]:
    from ane_kdma import progress

    per_job = CHUNKS_PER_JOB if info.cheap_calls else 1
    desc = f"{engine} {hypothesis.name} on {cluster.address}"
    with progress.bar(len(workloads), desc, quiet) as bar:
        return cluster.run(engine, hypothesis, chip, workloads, per_job, bar.update)


def _mp_context() -> Any:
    """fork where there is one (no re-import, the registry as the parent has it), else spawn."""
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")
