"""Cycle-exact Python model of rtl/kdma_top.sv (no simulator imports).

Timeline, as the RTL defines it. Cycle 0 is the cycle in which the first task
is accepted. For a line granted by the memory in cycle g:

* the memory pops it in cycle g + L (L = max(latency, 1)) and KMem holds it
  from cycle g + L + 1;
* it is drained in the first cycle d >= max(g + L + 1, previous drain + 1) in
  which the consumer is ready.

Line i of a core may be requested in cycle c when (lines requested and not yet
drained) < min(window + credit, KMem lines), with the credit the hypothesis
gives for the current task and progress. A hypothesis with split paths sends a
line with credit 0 down the demand path instead, where only demand lines count
against the window. The memory grants a line when the core's token bucket (its
refill set by the core's issue-rate governor) and the aggregate bucket allow
(round-robin over the ports). The rate mechanisms of :class:`Settings` (the
governor's ramp, the memory's warm-up, a per-task cost) are all modeled here,
whether or not the RTL builds them.

A job is, per core, a list of tasks issued back to back: task j goes to every
enabled core at once, and the top takes it once every core has issued all of
task j-1 and drained all of task j-2 (kdma_top's ready). If a core has
drained all of task j-1 before the others are ready, the top waits for idle.

Two engines compute this:

* :func:`simulate` steps every register of kdma_top, kdma_core and
  kdma_mem_model cycle by cycle: the slow, obviously faithful reference.
* :func:`run` advances only at grants: each core's next grant is the latest of
  its token, task and occupancy constraints (a max-plus recurrence), and the
  aggregate bucket arbitrates the cores that ask in the same cycle. Cores with
  identical work share one state until the aggregate bucket tells them apart.
  Its cost is bounded for any legal size: it keeps O(1) state per core (the
  gates see at most KMem lines back), steps one leader for cores that are
  time-shifted copies of one another, and jumps steady state: in closed form
  while the token bucket alone paces, by whole periods otherwise (see
  :class:`_Engine`). It is exact (tests/test_cyclemodel.py holds it to
  :func:`simulate`, and to itself without the shortcuts).
"""

from __future__ import annotations

import copy
import heapq
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ane_kdma.contract import MAX_CORES, Task
from ane_kdma.errors import InputError
from ane_kdma.hw import LINE_ADDR_MASK, RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import MAX_LATENCY_CYCLES, Settings

__all__ = [
    "MAX_LATENCY_CYCLES",
    "Backpressure",
    "CoreResult",
    "CoreTask",
    "ModelResult",
    "Settings",
    "job_of",
    "run",
    "simulate",
]

CoreTask = Task  # the TB's name for one core's task
LFSR_TAPS = 0xB400  # 16-bit Galois LFSR, maximal length (period 65535)

#: per core, a list of (base line, lines) tasks; None for a disabled core
Job = Sequence[Sequence[tuple[int, int]] | None]


@dataclass(frozen=True)
class Backpressure:
    """KMem consumer readiness from the harness LFSR: ready when lfsr[7:0] >= threshold."""

    seed: int
    threshold: int  # 0 = always ready, 128 ~ half the cycles, 255 ~ 1/256

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 255:
            raise InputError(f"back-pressure threshold {self.threshold} outside 0..255")


@dataclass
class CoreResult:
    """One core's counters as kdma_core holds them after the job (since its last idle start)."""

    cycles: int
    zero_credit_cycles: int
    peak_inflight: int
    issued: int
    # every line's grant and drain cycle, all tasks: simulate always, run(keep_lines=True)
    grants: np.ndarray | None = field(default=None, repr=False)
    drains: np.ndarray | None = field(default=None, repr=False)


@dataclass
class ModelResult:
    cycles: int  # the top's span: first accept (cycle 0) to the last drain, plus one
    cores: list[CoreResult | None]
    engine: str  # "recurrence" or "stepped"
    accepts: list[int] = field(default_factory=list)  # accept cycle of each task
    fresh: int = 0  # accept cycle of the last task taken while idle (cycles_o restarts there)

    @property
    def cycles_o(self) -> int:
        """What kdma_top's cycles_o shows at the end (it restarts at an idle accept)."""
        return self.cycles - self.fresh


def job_of(workload_cores: Sequence[Sequence[Task] | None], line_bytes: int = 64) -> list:
    """A job from per-core task lists (contract tasks or the TB's CoreTask)."""
    return [
        None
        if seq is None
        else [(t.base_line_of(line_bytes) & LINE_ADDR_MASK, t.lines_of(line_bytes)) for t in seq]
        for seq in workload_cores
    ]


def _check(job: Job, settings: Settings, g: Geometry) -> None:
    if not 1 <= len(job) <= MAX_CORES:
        raise InputError(f"{len(job)} cores: the ANE has 1..{MAX_CORES}")
    counts = {len(seq) for seq in job if seq is not None}
    if len(counts) > 1:
        raise InputError("every enabled core needs the same number of tasks")
    if counts == {0}:
        raise InputError("an empty task sequence")
    settings.check(g.kmem_lines)


# ---------------------------------------------------------------- consumer readiness


@lru_cache(maxsize=1)
def _lfsr_cycle() -> tuple[np.ndarray, np.ndarray]:
    """The whole LFSR period from state 1, and each state's index in it."""
    seq = np.empty(65535, dtype=np.int64)
    s = 1
    for i in range(65535):
        seq[i] = s
        s = (s >> 1) ^ (LFSR_TAPS if s & 1 else 0)
    index = np.empty(65536, dtype=np.int64)
    index[seq] = np.arange(65535)
    return seq, index


@lru_cache(maxsize=256)
def _ready_table(threshold: int) -> np.ndarray:
    """For each LFSR position, cycles to the next position whose state lets the consumer drain."""
    seq, _ = _lfsr_cycle()
    ready = (seq & 0xFF) >= threshold
    if not ready.any():
        raise InputError("back-pressure threshold leaves the consumer never ready")
    n = len(seq)
    idx = np.flatnonzero(np.concatenate([ready, ready]))
    pos = np.arange(n)
    nxt = idx[np.searchsorted(idx, pos)]
    return nxt - pos


def lfsr_seed(seed: int, core: int) -> int:
    """Per-core LFSR seed, as tb/hdl/kdma_tb_top.sv derives it."""
    s = (seed ^ (core * 0x9E37)) & 0xFFFF
    return s if s else 1


class _Ready:
    """Answers 'first cycle >= c in which a core may drain' (reseeded at each idle start)."""

    def __init__(self, bp: Backpressure | None, core: int) -> None:
        self.always = bp is None or bp.threshold == 0
        if self.always:
            return
        _, index = _lfsr_cycle()
        self.dist = _ready_table(bp.threshold)
        self.n = len(self.dist)
        self.offset = int(index[lfsr_seed(bp.seed, core)])  # the seed's state: cycle fresh + 1
        self.fresh = 0

    def restart(self, fresh: int) -> None:
        self.fresh = fresh

    def next(self, c: int) -> int:
        if self.always:
            return c
        return c + int(self.dist[(self.offset + c - self.fresh - 1) % self.n])

    def at(self, c: int) -> bool:
        return self.always or self.next(c) == c


# ---------------------------------------------------------------- the rate governor


class _Governor:
    """A port's token refill per cycle, as the core's issue-rate governor drives it.

    kdma_core's governor counts the lines granted since the request started
    (a task taken while the core is idle). At that start its rate register
    loads ``ramp_start``; every ``ramp_step_lines`` granted lines it adds
    ``ramp_inc``, up to the core rate. So while a core waits for its line j of
    a request, the refill is min(rate, start + inc * floor(j / step)) per cycle.
    The governor throttles only a busy core: while the core is idle (from the
    cycle after its last drain, through the start cycle of the next request)
    the refill is the core rate. Off (no ramp): the core rate, always.
    """

    def __init__(self, s: Settings) -> None:
        self.rmax = s.core_rate_q16
        self.on = s.ramp
        self.start = s.ramp_start_q16 if self.on else self.rmax
        self.step, self.inc = s.ramp_step_lines, s.ramp_inc_q16
        self.rate = self.rmax  # the reset value
        self.count = 0  # lines granted in this request
        self.before: list[tuple[int, int]] = []  # (refill, last cycle) of starts since a grant

    def restart(self, e: int, last_busy: int) -> None:
        """A request starts in cycle e: the held rate until the core went idle, then the core's."""
        self.before += [(self.rate, last_busy), (self.rmax, e)]
        self.rate, self.count = self.start, 0

    def _segments(self, c0: int) -> list[tuple[int, int]]:
        """(refill, last cycle) pieces from cycle c0 on."""
        return [p for p in self.before if p[1] >= c0] + [(self.rate, 1 << 62)]

    def earliest(self, c0: int, bank: int) -> int:
        """First cycle c >= c0 with (bank grown by the refills since c0, capped) + refill >= one."""
        if not self.before:  # one refill from c0 on (every line but a request's first)
            need = RATE_ONE - self.rate - bank
            return c0 if need <= 0 else c0 - (-need // self.rate)
        c = c0
        for r, end in self._segments(c0):
            need = RATE_ONE - r - bank
            k = 0 if need <= 0 else -(-need // r)
            if c + k <= end:
                return c + k
            bank = min(bank + (end - c + 1) * r, RATE_ONE)
            c = end + 1
        raise AssertionError("unreachable")

    def grant(self, c0: int, bank: int, c: int) -> int:
        """A grant in cycle c: the bank after it, from `bank` in cycle c0 and none in between."""
        if not self.before:
            r = self.rate
            if c > c0:
                bank = min(bank + (c - c0) * r, RATE_ONE)
            bank += r - RATE_ONE
        else:
            for r, end in self._segments(c0):
                last = min(end, c - 1)
                if last >= c0:
                    bank = min(bank + (last - c0 + 1) * r, RATE_ONE)
                    c0 = last + 1
                if c <= end:
                    bank += r - RATE_ONE
                    break
            self.before = []
        self.count += 1
        if self.rate < self.rmax and self.count % self.step == 0:
            self.rate = min(self.rate + self.inc, self.rmax)
        return bank


# ---------------------------------------------------------------- the fast engine

#: Per line, a group keeps only a ring of its latest lines: grant, drain and pop
#: cycles, the line's path (1: demand), and after the grant the token bank, the
#: governor's rate and count and the zero-credit count; a leader (see _Engine)
#: adds its running in-flight peak, a hash of the line, and the aggregate
#: bucket's bank and round-robin pointer after it, for the period search.
_FIELDS = ("G", "D", "PO", "CL", "TK", "RT", "CN", "ZR", "PK", "SG", "AB", "RR")
#: the ring of a leader: a period of the state (the token bank's is at most 65536
#: lines) plus the KMem lines the gates look back over
_RING_LONG = 1 << 17
_CHUNK = 4096  # credits are computed this many lines at a time
_HASH_M = (1 << 61) - 1  # the period search's rolling hash (a hit is then checked exactly)
_HASH_B = 1_000_003
_NEVER = 1 << 62


def _ring_lines(kmem: int) -> int:
    """A group's usual ring: at least KMem lines and a follower's lag, a power of two."""
    return 1 << (2 * kmem + 2).bit_length()


class _Group:
    """Cores with the same work in the same state: one grant schedule serves them all.

    The state is O(1) in the transfer: the gates look back at most KMem lines
    (a ring of the latest lines), the demand path its latest KMem demand lines,
    the in-flight count the pops still pending. Counters are kept as they go.
    """

    def __init__(
        self,
        members: list[int],
        tasks: Sequence[tuple[int, int]],
        work: tuple,
        hyp: Hypothesis,
        g: Geometry,
        s: Settings,
        ready: _Ready,
        keep: bool,
    ) -> None:
        self.members = members
        self.tasks = tasks
        self.work = work  # equal work (and no back-pressure): groups may shadow each other
        self.hyp, self.geom, self.s = hyp, g, s
        self.ready = ready
        self.kmem, self.window = g.kmem_lines, s.window
        self.split = hyp.paths == "split"
        self.lat = max(s.latency, 1)
        self.lat_warm = self.lat + s.warm_extra_cycles  # a line of the memory's warm-up
        self.warm_end = s.warm_lines  # the first line past it
        self.always = ready.always
        self.gov = _Governor(s)
        self.x = 0  # lines granted, all tasks
        self.j = -1  # task being issued
        self.q = 0  # line within it
        self.n = 0  # its lines
        self.task_first = 0  # x at the task's start
        self.prev_done = 0  # drain cycle of line task_first - 1
        self.g_prev = 0
        self.tok_after = RATE_ONE  # bank at cycle g_prev + 1: full at the start
        self.d_prev = 0
        self.pop_prev = 0
        self.last_grant_in_task = 0
        self.floor = 1
        self.zero = 0
        self.peak = 0
        self.inflight = 0  # in flight just after the last grant
        self.epoch = 0  # accept cycle of this core's last start from idle
        self.epoch_line = 0
        self.refused = -1  # the latest line the aggregate bucket held back
        self.dd: deque[int] = deque(maxlen=self.kmem)  # drains of the latest demand-path lines
        self.pend: deque[int] = deque()  # pop cycles of the lines in flight
        self.cred_static: int | None = None
        self.carr: list[int] = []  # credits of lines clo..chi-1 of the task
        self.clo = self.chi = 0
        self.base = 0
        self.period, self.horizon = 1, 0
        self.keep: tuple[list[int], list[int]] | None = ([], []) if keep else None
        self.cap, self.mask, self.lo = 1, 0, 0
        self._ring(_ring_lines(self.kmem), 0)

    # ------------------------------------------------------------ the ring of latest lines
    def _ring(self, cap: int, lo: int) -> None:
        """A ring of `cap` lines holding what the current one holds of lines lo..x-1."""
        lo = max(lo, self.low, self.x - cap + 1)
        keep = np.arange(lo, self.x, dtype=np.int64)
        for f in _FIELDS:
            new = array("q", [0]) * cap
            old = getattr(self, f, None)
            if old is not None and keep.size:
                view = np.frombuffer(new, np.int64)
                view[keep & (cap - 1)] = np.frombuffer(old, np.int64)[keep & self.mask]
            setattr(self, f, new)
        self.cap, self.mask, self.lo = cap, cap - 1, lo

    @property
    def low(self) -> int:
        """The first line the ring still holds."""
        return max(self.lo, self.x - self.cap + 1)

    def view(self, f: str) -> np.ndarray:
        return np.frombuffer(getattr(self, f), np.int64)

    def copy(self, members: list[int]) -> _Group:
        twin = _Group.__new__(_Group)
        twin.__dict__.update(self.__dict__)
        twin.members = members
        for f in _FIELDS:
            setattr(twin, f, array("q", getattr(self, f)))
        twin.dd = deque(self.dd, maxlen=self.kmem)
        twin.pend = deque(self.pend)
        twin.gov = copy.copy(self.gov)
        twin.gov.before = list(self.gov.before)
        if self.keep is not None:
            twin.keep = (list(self.keep[0]), list(self.keep[1]))
        twin.ready = self.ready  # only shared when there is no back-pressure
        return twin

    # ------------------------------------------------------------ task boundaries
    def finish(self) -> int:
        """Cycle of the last drain of everything issued so far (0 if nothing)."""
        return self.d_prev if self.x else 0

    def start_task(self, j: int, accept: int, busy: bool) -> None:
        base, n = self.tasks[j]
        self.j, self.q, self.n = j, 0, n
        self.task_first, self.prev_done = self.x, self.d_prev
        self.floor = accept + 1 + self.s.task_gap_cycles
        self.last_grant_in_task = accept
        if not busy:  # kdma_core clears its counters when it takes a task while idle
            self.epoch, self.epoch_line, self.zero, self.peak = accept, self.x, 0, 0
            self.warm_end = self.x + self.s.warm_lines
            self.gov.restart(accept, self.finish())  # a request starts: the governor too
        hyp, g = self.hyp, self.geom
        self.base = base
        self.cred_static = hyp.credit(g, base, n, 0) if hyp.static else None
        self.clo = self.chi = 0
        # how far the credit pattern repeats (the period search may not jump past it)
        page = g.prefetch_max_lines
        self.period, self.horizon = 1, 0
        if hyp.progress == "static":
            self.horizon = n
        elif hyp.progress == "paged":  # a pattern per page (constant when it covers none or all)
            page_credits = hyp.credit_array(g, n, np.arange(min(n, page)), base)
            self.horizon = n
            self.period = 1 if np.all(page_credits == page_credits[:1]) else page
        elif hyp.progress == "remaining" and n > page + 1:
            # at the clamp until the last lines; held to the credit arithmetic itself
            if hyp.credit(g, base, n, 0) == hyp.credit(g, base, n, n - page - 1):
                self.horizon = n - page

    @property
    def issuing(self) -> bool:
        return self.q < self.n

    def credit(self, q: int) -> int:
        if self.cred_static is not None:
            return self.cred_static
        if not self.clo <= q < self.chi:
            self.clo, self.chi = q, min(self.n, q + _CHUNK)
            issued = np.arange(self.clo, self.chi, dtype=np.int64)
            self.carr = self.hyp.credit_array(self.geom, self.n, issued, self.base).tolist()
        return self.carr[q - self.clo]

    # ------------------------------------------------------------ one line
    def earliest(self) -> int:
        """The first cycle the next line may be granted, from this core's own constraints."""
        cred = self.cred_static
        if cred is None:
            cred = self.credit(self.q)
        kmem = self.kmem
        gov = self.gov
        if gov.before:
            g = gov.earliest(self.g_prev + 1, self.tok_after)
        else:  # _Governor.earliest's closed form, inline (the hot path)
            g = self.g_prev + 1
            need = RATE_ONE - gov.rate - self.tok_after
            if need > 0:
                g -= -need // gov.rate
        if g < self.floor:
            g = self.floor
        cap = self.window + cred
        if cap > kmem:
            cap = kmem
        if cred == 0 and self.split:
            # the demand path counts only demand lines against its window ...
            dd = self.dd
            if len(dd) >= cap:
                v = dd[-cap] + 1
                if v > g:
                    g = v
            cap = kmem  # ... and every line in the core must still fit KMem
        i = self.x - cap
        if i >= 0:
            v = self.D[i & self.mask] + 1
            if v > g:
                g = v
        return g

    def grant(self, c: int) -> None:
        q, x = self.q, self.x
        cred = self.cred_static
        if cred is None:
            cred = self.credit(q)
        gov = self.gov
        if gov.before:
            tok = gov.grant(self.g_prev + 1, self.tok_after, c)
        else:  # _Governor.grant's one-rate case, inline (the hot path)
            r = gov.rate
            tok = self.tok_after
            if c > self.g_prev + 1:
                tok += (c - self.g_prev - 1) * r
                if tok > RATE_ONE:
                    tok = RATE_ONE
            tok += r - RATE_ONE
            gov.count += 1
            if r < gov.rmax and gov.count % gov.step == 0:
                gov.rate = min(r + gov.inc, gov.rmax)
        self.tok_after = tok
        if cred == 0:  # counted while lines remain: since the last grant (or the accept)
            self.zero += c - self.last_grant_in_task
        self.last_grant_in_task = c
        pop = c + (self.lat if x >= self.warm_end else self.lat_warm)  # the memory's warm-up
        if pop <= self.pop_prev:  # the port's queue pops in order
            pop = self.pop_prev + 1
        d = pop + 1
        if d <= self.d_prev:
            d = self.d_prev + 1
        if not self.always:
            d = self.ready.next(d)
        pend = self.pend
        pend.append(pop)
        while pend[0] <= c:  # in flight in cycle c + 1: granted and not popped by cycle c
            pend.popleft()
        n = self.inflight = len(pend)
        if n > self.peak:
            self.peak = n
        demand = cred == 0 and self.split
        if demand:
            self.dd.append(d)
        i = x & self.mask
        self.G[i], self.D[i], self.PO[i], self.CL[i] = c, d, pop, demand
        self.TK[i], self.RT[i], self.CN[i], self.ZR[i] = tok, gov.rate, gov.count, self.zero
        if self.keep is not None:
            self.keep[0].append(c)
            self.keep[1].append(d)
        self.g_prev, self.d_prev, self.pop_prev = c, d, pop
        self.x, self.q = x + 1, q + 1

    def result(self) -> CoreResult:
        keep = self.keep
        return CoreResult(
            cycles=self.d_prev - self.epoch if self.x > self.epoch_line else 0,
            zero_credit_cycles=self.zero,
            peak_inflight=self.peak,
            issued=self.x,
            grants=None if keep is None else np.asarray(keep[0], dtype=np.int64),
            drains=None if keep is None else np.asarray(keep[1], dtype=np.int64),
        )

    # ------------------------------------------------------------ shadows
    def same_state(self, lead: _Group, delta: int) -> bool:
        """True if this group, after its line x - 1, is `lead` after that line, delta later.

        What decides the future of a group after a grant: its token bank and
        governor, its request's start line (the warm-up), and the grant, drain,
        pop cycles and paths of the lines the gates and the in-flight count
        can still see (the last KMem), relative to the grant.
        """
        y = self.x - 1
        lo = max(y - self.kmem + 1, 0)
        if lo < lead.low or lo < self.low or y >= lead.x:
            return False
        i = y & lead.mask
        if (self.tok_after, self.gov.rate, self.gov.count, self.epoch_line, self.task_first) != (
            lead.TK[i],
            lead.RT[i],
            lead.CN[i],
            lead.epoch_line,
            lead.task_first,
        ) or self.gov.before:
            return False
        z = np.arange(lo, y + 1, dtype=np.int64)
        a, b = z & self.mask, z & lead.mask
        return all(
            np.array_equal(self.view(f)[a], lead.view(f)[b] + (delta if f != "CL" else 0))
            for f in ("G", "D", "PO", "CL")
        )

    def follow(self, lead: _Group, y: int, delta: int, zbase: int) -> None:
        """Become `lead` as it was after its line y - 1, `delta` cycles later."""
        if self.keep is not None and lead.keep is not None:
            for mine, theirs in zip(self.keep, lead.keep, strict=True):
                mine.extend(v + delta for v in theirs[self.x : y])
        lo = max(y - self.kmem - 1, lead.low, 0)
        z = np.arange(lo, y, dtype=np.int64)
        a, b = z & self.mask, z & lead.mask
        for f in ("G", "D", "PO", "CL", "TK", "RT", "CN", "ZR"):
            v = lead.view(f)[b]
            if f in ("G", "D", "PO"):
                v = v + delta
            elif f == "ZR":
                v = v + zbase
            self.view(f)[a] = v
        self.lo = lo
        i = (y - 1) & lead.mask
        self.x, self.q = y, y - self.task_first
        self.g_prev, self.d_prev = lead.G[i] + delta, lead.D[i] + delta
        self.pop_prev = lead.PO[i] + delta
        self.last_grant_in_task = self.g_prev
        self.tok_after = lead.TK[i]
        self.gov.rate, self.gov.count, self.gov.before = lead.RT[i], lead.CN[i], []
        self.zero = zbase + lead.ZR[i]
        self.peak = max(self.peak, lead.PK[i])
        d, po, cl = lead.view("D")[b] + delta, lead.view("PO")[b] + delta, lead.view("CL")[b]
        self.dd = deque(d[cl == 1].tolist(), maxlen=self.kmem)
        self.pend = deque(po[po > self.g_prev].tolist())
        self.inflight = len(self.pend)


def _groups(
    hyp: Hypothesis, g: Geometry, s: Settings, job: Job, bp: Backpressure | None, keep: bool
) -> list[_Group]:
    """Cores whose timing cannot differ share a group (the credit may depend on the base)."""
    keys: dict[tuple, list[int]] = {}
    for c, seq in enumerate(job):
        if seq is None:
            continue
        ring = g.ring_lines - 1
        work = tuple((b & ring if hyp.depends_on_start else 0, n) for b, n in seq)
        key = (work, c if bp is not None and bp.threshold else None)
        keys.setdefault(key, []).append(c)
    out = []
    for key, members in keys.items():
        seq = job[members[0]]
        out.append(_Group(members, seq, key, hyp, g, s, _Ready(bp, members[0]), keep))
    return out


class _Engine:
    """One run: the groups, the aggregate bucket, and the task loop.

    The general loop advances the groups from grant to grant through a heap
    (cost: one step per line per group). Three shortcuts bound the cost for
    any size (all exact, all off with ``skip=False``; none with back-pressure):

    * Shadows. Identical cores split at their first cycle (the aggregate
      bucket grants 13 of 16 full banks) and then run as time-shifted copies.
      Once every issuing group is, after the same line, the same state as a
      leader shifted by delta >= 0 cycles, only the leader is stepped; the
      followers' grants are its grants plus delta. The aggregate bucket sees
      every follower's grant in time order; should it refuse one, the
      followers are rebuilt from the leader's ring and the general loop goes
      on from that cycle. Accepts re-synchronise: shadows last one task.
    * The token form. While the token bucket alone paces the leader (every
      gate provably slack), its grants have a closed form, periodic with the
      bucket; the aggregate bucket is checked over that period. The leader
      lands on the last line before the credit pattern or the governor's rate
      changes (see _token_jump).
    * Periods. Otherwise (gates binding: demand-gated bursts), the whole
      state relative to the leader's latest grant (its ring window, bank,
      governor, credit phase; the aggregate bank and round-robin pointer; the
      followers' lags) is hashed per line. When it repeats (checked exactly),
      the grants continue periodically: the leader lands as far as the credit
      pattern (the fix's tail), the governor's next step or the task's end
      allow, counters advanced in closed form (the zero-credit count by its
      gain per period; the in-flight peak repeats). Steady state is only
      searched past the memory's warm-up. Its cost is the transient plus one
      period: short for most settings, but a max-plus transient can be long
      (the paged reading at credit 1 takes 1.3 M lines to settle).
    """

    def __init__(
        self,
        hyp: Hypothesis,
        geom: Geometry,
        s: Settings,
        job: Job,
        bp: Backpressure | None,
        keep: bool,
        skip: bool,
    ) -> None:
        self.s = s
        self.kmem = geom.kmem_lines
        self.groups = _groups(hyp, geom, s, job, bp, keep)
        self.ncores = len(job)
        self.big_r = s.agg_rate_q16
        self.bank, self.last, self.rr = RATE_ONE, 0, 0  # bank at the start of cycle last + 1
        self.fast = skip and (bp is None or bp.threshold == 0)
        self._tables: dict[tuple[int, ...], list[int]] = {}

    def table(self, members: list[int]) -> list[int]:
        """For each round-robin pointer, the farthest of these ports from it (mod cores)."""
        key = tuple(members)
        if key not in self._tables:
            n = self.ncores
            self._tables[key] = [max((p - rr) % n for p in members) for rr in range(n)]
        return self._tables[key]

    # ------------------------------------------------------------ tasks
    def run(self) -> ModelResult:
        groups = self.groups
        steps = len(groups[0].tasks)
        accepts = [0]
        fresh = 0
        self.begin(0, 0, True)
        for j in range(steps):
            self.issue()
            if j + 1 == steps:
                break
            accept, idle = _next_accept(groups, j, accepts[-1])
            if idle:
                fresh = accept
                for grp in groups:
                    grp.ready.restart(accept)
            accepts.append(accept)
            self.rr = 0  # arb_restart: every accept restarts the round robin
            if self.last < accept:
                self.bank = min(self.bank + (accept - self.last) * self.big_r, RATE_ONE)
                self.last = accept
            self.begin(j + 1, accept, idle)
        results: list[CoreResult | None] = [None] * self.ncores
        for grp in groups:
            res = grp.result()
            for p in grp.members:
                results[p] = res
        last = [grp.d_prev for grp in groups if grp.x]
        return ModelResult(_top_cycles(last, accepts), results, "recurrence", accepts, fresh)

    def begin(self, j: int, accept: int, idle: bool) -> None:
        for grp in self.groups:
            busy = not idle and grp.finish() >= accept
            grp.start_task(j, accept, busy)

    def heap(self) -> list[tuple[int, int]]:
        heap = [(grp.earliest(), k) for k, grp in enumerate(self.groups) if grp.issuing]
        heapq.heapify(heap)
        return heap

    # ------------------------------------------------------------ the general loop
    def issue(self) -> None:
        """Grant every line of the current task: the aggregate bucket arbitrates each cycle."""
        groups = self.groups
        ncores = self.ncores
        one, big_r = RATE_ONE, self.big_r
        heap = self.heap()
        ticks, next_try, backoff, waits = 0, 0, 8, 0
        while heap:
            if self.fast and ticks >= next_try:
                tried = self.try_shadow()
                if tried is None and waits < 64:  # not yet comparable: look again next cycle
                    next_try = ticks + 1
                    waits += 1
                else:
                    waits = 0
                    next_try = ticks + backoff
                    backoff = min(2 * backoff, 4096)
                    if tried:
                        heap = self.heap()
                        continue
            ticks += 1
            c = heap[0][0]
            asking = []
            while heap and heap[0][0] == c:
                asking.append(heapq.heappop(heap)[1])
            # the aggregate bucket at cycle c, then round-robin from rr over the asking ports
            if c > self.last + 1:
                self.bank = min(self.bank + (c - self.last - 1) * big_r, one)
            avail = self.bank + big_r
            cap = avail // one
            self.last = c
            if len(asking) == 1 and len(groups[asking[0]].members) <= cap:
                # the common case: one group asks and the bucket has room; while no other
                # group is waiting, stay with this one (no heap traffic)
                k = asking[0]
                grp = groups[k]
                m = len(grp.members)
                last = (self.rr + self.table(grp.members)[self.rr] + 1) % ncores
                while True:
                    self.rr = last
                    self.bank = min(avail - m * one, one)
                    grp.grant(c)
                    if not grp.issuing:
                        break
                    nxt = grp.earliest()
                    if heap or self.fast:  # fast: let the shadow search look
                        heapq.heappush(heap, (nxt, k))
                        break
                    bank = self.bank
                    if nxt > c + 1:
                        bank = min(bank + (nxt - c - 1) * big_r, one)
                    avail = bank + big_r
                    if m > avail // one:
                        heapq.heappush(heap, (nxt, k))
                        break
                    c = self.last = nxt
                continue
            rr = self.rr
            ports = sorted(((p - rr) % ncores, p, k) for k in asking for p in groups[k].members)
            budget = min(len(ports), cap)
            granted = {p for _, p, _ in ports[:budget]}
            if budget:
                self.rr = (ports[budget - 1][1] + 1) % ncores
            self.bank = min(avail - budget * one, one)
            for k in asking:
                grp = groups[k]
                got = [p for p in grp.members if p in granted]
                if len(got) < len(grp.members):
                    rest = [p for p in grp.members if p not in granted]
                    if got:  # the bucket splits the group: the refused cores go on alone
                        twin = grp.copy(rest)
                        twin.refused = twin.x
                        grp.members = got
                        groups.append(twin)
                        heapq.heappush(heap, (c + 1, len(groups) - 1))
                    else:
                        grp.refused = grp.x
                        heapq.heappush(heap, (c + 1, k))
                        continue
                grp.grant(c)
                if grp.issuing:
                    heapq.heappush(heap, (grp.earliest(), k))

    # ------------------------------------------------------------ shadows and periods
    def try_shadow(self) -> bool | None:
        """Step one leader for every issuing group, if they are shifted copies of it.

        None: not comparable yet (a group has no line of this task yet, waits
        on the bucket, or stands at another line); False: they differ; True:
        the shadow ran (the task is issued, or the bucket refused a follower).
        """
        issuing = [grp for grp in self.groups if grp.issuing]
        if not issuing:
            return None
        lead = max(issuing, key=lambda grp: (grp.x, -grp.g_prev))
        fols = [grp for grp in issuing if grp is not lead]
        if any(f.work != lead.work for f in fols):
            return False
        if lead.q < 1 or lead.refused >= lead.x:
            return None
        deltas = []
        if fols:
            x = fols[0].x
            if lead.refused >= x or any(f.x != x or f.q < 1 or f.refused >= f.x for f in fols):
                return None
            base = lead.G[(x - 1) & lead.mask]
            deltas = [f.g_prev - base for f in fols]
            if lead.x - x >= self.kmem or min(deltas) < 0:
                return False
            if x < lead.x and lead.G[x & lead.mask] + min(deltas) <= self.last:
                return False  # (cannot happen: a follower's next line is not in the past)
            if not all(f.same_state(lead, d) for f, d in zip(fols, deltas, strict=True)):
                return False
        self.shadow(lead, fols, deltas)
        return True

    def shadow(self, lead: _Group, fols: list[_Group], deltas: list[int]) -> None:
        """Step the leader; followers' grants are its own, delta later (see the class doc)."""
        kmem = self.kmem
        sync = fols[0].x - 1 if fols else lead.x - 1  # the line the followers last granted
        nf = len(fols)
        ys = [f.x for f in fols]  # each follower's next line
        zbase = [f.zero - lead.ZR[sync & lead.mask] for f in fols]
        sizes = [len(f.members) for f in fols]
        tabs = [self.table(f.members) for f in fols]
        m_lead, tab_lead = len(lead.members), self.table(lead.members)
        # the leader's in-flight peak since the followers' line, and its line hashes
        lead.lo = lead.low  # (its ring grows when the period search needs it)
        lo, entry = lead.lo, lead.x
        G, D, PO, CL, PK, SG = lead.G, lead.D, lead.PO, lead.CL, lead.PK, lead.SG
        AB, RR = lead.AB, lead.RR
        mask = lead.mask
        PK[sync & mask] = 0
        for z in range(sync + 1, lead.x):
            gz = G[z & mask]
            first = max(z - kmem + 1, lead.epoch_line, lo)
            infl = sum(1 for w in range(first, z + 1) if PO[w & mask] > gz)
            PK[z & mask] = max(PK[(z - 1) & mask], infl)
        SG[lo & mask] = 0
        for z in range(max(lo + 1, lead.x - kmem - 1), lead.x):
            i = z & mask
            SG[i] = hash((G[i] - G[(z - 1) & mask], D[i] - G[i], PO[i] - G[i], CL[i]))
        hwin = kmem  # the hash covers the KMem lines the state can see
        h = self._hash(lead, lead.x - 1)
        b_top = pow(_HASH_B, hwin, _HASH_M)
        seen: dict[tuple, tuple[int, int]] = {}
        warm = lead.warm_end
        one, big_r, ncores = RATE_ONE, self.big_r, self.ncores
        nxt = [G[y & mask] + dl if y < lead.x else _NEVER for y, dl in zip(ys, deltas, strict=True)]
        bank, last, rr = self.bank, self.last, self.rr
        groups = [(0, m_lead, tab_lead)] + list(zip(deltas, sizes, tabs, strict=True))
        token_try = 0
        first, horizon, period = lead.task_first, lead.horizon, lead.period
        n_end = first + lead.n  # the line after the task's last
        while True:
            xl = lead.x
            e = lead.earliest() if xl < n_end else _NEVER
            if nf:  # the followers' grants before cycle e, in time order, through the bucket
                t = min(nxt)
                while t < e:
                    ports, key = 0, -1
                    for k in range(nf):
                        if nxt[k] == t:
                            ports += sizes[k]
                            key = max(key, tabs[k][rr])
                    if t > last + 1:
                        bank = min(bank + (t - last - 1) * big_r, one)
                    avail = bank + big_r
                    if ports * one > avail:  # the bucket refuses one: back to the general loop
                        self.bank, self.last, self.rr = bank, last, rr
                        return self._unshadow(lead, fols, ys, deltas, zbase)
                    bank, last, rr = min(avail - ports * one, one), t, (rr + key + 1) % ncores
                    for k in range(nf):
                        if nxt[k] == t:
                            y = ys[k] = ys[k] + 1
                            nxt[k] = G[y & mask] + deltas[k] if y < xl else _NEVER
                    t = min(nxt)
            if e == _NEVER:
                break
            # cycle e: the leader and any follower due then (or in step with it)
            ports, key = m_lead, tab_lead[rr]
            for k in range(nf):
                if nxt[k] == e or (ys[k] == xl and deltas[k] == 0):
                    ports += sizes[k]
                    key = max(key, tabs[k][rr])
            if e > last + 1:
                bank += (e - last - 1) * big_r
                if bank > one:
                    bank = one
            avail = bank + big_r
            if ports * one > avail:
                self.bank, self.last, self.rr = bank, last, rr
                return self._unshadow(lead, fols, ys, deltas, zbase)
            bank, last, rr = avail - ports * one, e, (rr + key + 1) % ncores
            if bank > one:
                bank = one
            lead.grant(e)
            for k in range(nf):
                y = ys[k]
                if nxt[k] == e or (y == xl and deltas[k] == 0):  # granted with the leader
                    ys[k] = y = y + 1
                nxt[k] = G[y & mask] + deltas[k] if y <= xl else _NEVER
            # the leader's line xl: its peak, the aggregate after it, its hash
            i = xl & mask
            inflight, pk = lead.inflight, PK[(xl - 1) & mask]
            PK[i] = inflight if inflight > pk else pk
            AB[i], RR[i] = bank, rr
            sg = hash((e - G[(xl - 1) & mask], D[i] - e, PO[i] - e, CL[i]))
            SG[i] = sg
            old = xl - hwin
            h = (h * _HASH_B + sg - (SG[old & mask] if old >= lo else 0) * b_top) % _HASH_M
            if xl >= token_try:
                self.bank, self.last, self.rr = bank, last, rr
                if self._token_jump(lead, ys, nxt, deltas, groups):
                    seen.clear()
                    bank, last, rr = self.bank, self.last, self.rr
                    lo, entry = lead.lo, lead.x
                    h = self._hash(lead, lead.x - 1)
                    continue
                token_try = xl + kmem
            q = xl - first  # this line's index in the task
            lag = xl - min(ys) if nf else 0
            if old <= lo or q >= horizon or xl < warm or lag >= kmem:
                continue
            if lead.cap < _RING_LONG and xl - entry > lead.cap // 2:
                # no period within half the ring: hold a long one (the dict's lines stay)
                lead._ring(_RING_LONG, lo)
                G, D, PO, CL, PK, SG = lead.G, lead.D, lead.PO, lead.CL, lead.PK, lead.SG
                AB, RR = lead.AB, lead.RR
                mask, lo = lead.mask, lead.lo
            lags = (xl - ys[0]) if nf == 1 else tuple(xl - y for y in ys) if nf else 0
            state = (h, lead.tok_after, lead.gov.rate, q % period, bank, rr, lags)
            hit = seen.get(state)
            if hit is not None:
                self.bank, self.last, self.rr = bank, last, rr
                if self._jump(lead, hit, ys, nxt, deltas, lag):
                    seen.clear()
                    bank, last, rr = self.bank, self.last, self.rr
                    lo, entry = lead.lo, lead.x
                    h = self._hash(lead, lead.x - 1)
                    continue
            elif len(seen) >= _RING_LONG - 4 * kmem:
                seen.clear()  # a period longer than the ring holds: not searched
            seen[state] = (xl, lead.zero)
        self.bank, self.last, self.rr = bank, last, rr
        self._unshadow(lead, fols, ys, deltas, zbase)

    def _token_jump(
        self,
        lead: _Group,
        ys: list[int],
        nxt: list[int],
        deltas: list[int],
        groups: list[tuple[int, int, list[int]]],
    ) -> bool:
        """While the token bucket alone paces the leader, jump in closed form to its end.

        After a grant at g0 leaving the bank tok0 < rate r (none of it capped),
        the bucket alone would grant the leader's line x + n in cycle
        t(n) = g0 + ceil((n * one - tok0) / r), for every n (the past ones too,
        if it paced them), and t(n + P) = t(n) + T with P / T = r / one in
        lowest terms. So when the last KMem lines follow t and no gate can
        bind (every gate looks back k lines with floor(k * one / r) >= the
        round trip latency + 2), the leader follows t until the credit
        pattern or the governor's rate changes. The aggregate bucket and the
        followers see a pattern periodic in T: it is checked over at most two
        periods, exactly, and read at the landing cycle's phase.

        `groups`: (delta, ports, round-robin table) of the leader and each follower.
        """
        kmem, one = self.kmem, RATE_ONE
        gov, lat = lead.gov, lead.lat
        r = gov.rate
        x = lead.x - 1  # the leader's last line
        lines = lead.horizon - lead.q  # lines x + 1 .. x + lines keep the credit pattern
        if r < gov.rmax:
            lines = min(lines, (gov.count // gov.step + 1) * gov.step - 1 - gov.count)
        lag = x + 1 - min(ys) if ys else 0
        keep = kmem + 2 + lag
        first = x - kmem + 1
        if lines <= keep or lag >= kmem or first < max(lead.task_first, lead.warm_end, lead.low):
            return False
        g0, tok0 = lead.g_prev, lead.tok_after

        def at(n: np.ndarray) -> np.ndarray:
            return g0 - ((tok0 - n * one) // r)

        # the window the gates can see was paced by the bucket alone
        z = np.arange(first, x + 1, dtype=np.int64)
        w = z & lead.mask
        grants = lead.view("G")[w]
        if not (
            np.array_equal(grants, at(z - x))
            and np.array_equal(lead.view("PO")[w], grants + lat)
            and np.array_equal(lead.view("D")[w], grants + lat + 1)
        ):
            return False
        # no gate can bind: the nearest line each one looks back to, in lines
        period = lead.period
        pat = lead.hyp.credit_array(
            lead.geom, lead.n, np.arange(lead.q, lead.q + period, dtype=np.int64), lead.base
        )
        demand = (pat == 0) if lead.split else np.zeros(period, dtype=bool)
        reach = int(np.where(demand, kmem, np.minimum(lead.window + pat, kmem)).min())
        if demand.any():  # the demand path: back to the window-th demand line before
            tiled = np.flatnonzero(np.tile(demand, lead.window // int(demand.sum()) + 2))
            reach = min(reach, int((tiled[lead.window :] - tiled[: -lead.window]).min()))
        if reach * one // r < lat + 2:
            return False
        # the aggregate bucket over two periods of the pattern: refusals, and its period
        unit = np.gcd(r, one)
        p_lines, p_cycles = r // unit, one // unit
        end = g0 + 2 * p_cycles
        times, ports, bits = [], [], []
        for k, (delta, size, _tab) in enumerate(groups):
            n0 = 1 if k == 0 else ys[k - 1] - x
            n = np.arange(n0, n0 + 2 * p_lines + kmem + 2, dtype=np.int64)
            t = at(n) + delta
            t = t[t <= end]
            times.append(t)
            ports.append(np.full(t.size, size, dtype=np.int64))
            bits.append(np.full(t.size, 1 << k, dtype=np.int64))
        t_all = np.concatenate(times)
        order = np.argsort(t_all, kind="stable")
        t_all = t_all[order]
        starts = np.flatnonzero(np.diff(t_all, prepend=t_all[0] - 1))
        ev_t = t_all[starts]
        ev_ports = np.add.reduceat(np.concatenate(ports)[order], starts)
        ev_bits = np.bitwise_or.reduceat(np.concatenate(bits)[order], starts)
        big_r = self.big_r
        gap = np.diff(ev_t, prepend=self.last)
        step = gap * big_r - ev_ports * one
        top = np.minimum(one, one + big_r - ev_ports * one)
        run = np.cumsum(step)
        banks = run + np.minimum(self.bank, np.minimum.accumulate(top - run))
        before = np.concatenate(([self.bank], banks[:-1]))
        if np.any(ev_ports * one > np.minimum(before + (gap - 1) * big_r, one) + big_r):
            return False
        # the round-robin pointer, event by event (one period, or two if the first differs)
        kinds, which = np.unique(ev_bits, return_inverse=True)
        ncores = self.ncores
        moves = []
        for b in kinds.tolist():
            tabs = [groups[k][2] for k in range(len(groups)) if b >> k & 1]
            moves.append([(v + max(t[v] for t in tabs) + 1) % ncores for v in range(ncores)])
        ends = np.searchsorted(ev_t, [g0 + p_cycles, end], side="right")
        rrs: list[int] = []
        rr = self.rr
        for k in which[: ends[0]].tolist():
            rr = moves[k][rr]
            rrs.append(rr)

        def state(c: int) -> tuple[int, int]:  # the bucket after every event up to cycle c
            i = int(np.searchsorted(ev_t, c, side="right")) - 1
            return (self.bank, self.rr) if i < 0 else (int(banks[i]), rrs[i])

        base = 0
        if state(g0 + p_cycles) != (self.bank, self.rr):
            for k in which[ends[0] : ends[1]].tolist():
                rr = moves[k][rr]
                rrs.append(rr)
            base = 1
            if state(end) != state(g0 + p_cycles):
                return False
        t_land = int(at(np.int64(lines)))
        if t_land > g0 + (base + 1) * p_cycles:
            t_land = g0 + base * p_cycles + (t_land - g0 - base * p_cycles) % p_cycles
        bank, rr = state(t_land)
        # counters: zero-credit cycles (runs of demand lines), the in-flight peak
        zero_lines = pat == 0
        dz = 0
        if zero_lines.all():
            dz = int(at(np.int64(lines)) - g0)
        elif zero_lines.any():
            reps = np.arange(0, lines // period + 1, dtype=np.int64) * period
            j = 0
            while j < period:  # each run [j, k) of credit-0 positions of the pattern
                if not zero_lines[j]:
                    j += 1
                    continue
                k = j
                while k < period and zero_lines[k]:
                    k += 1
                lo_n = np.maximum(reps + j + 1, 1)
                hi_n = np.minimum(reps + k, lines)
                ok = lo_n <= hi_n
                dz += int((at(hi_n[ok]) - at(lo_n[ok] - 1)).sum())
                j = k
        span = min(lines, p_lines + 2)
        n = np.arange(1, span + 1, dtype=np.int64)
        past = at(np.arange(1 - kmem, span + 1, dtype=np.int64))
        inflight = n + kmem - np.searchsorted(past, at(n) - lat, side="right")
        peak = max(int(inflight.max()), int(lead.PK[x & lead.mask]))
        # land on line x + lines: its window, from the closed form
        t_n = np.arange(lines - keep + 1, lines + 1, dtype=np.int64)
        tg = at(t_n)
        last = x + lines
        w = (t_n + x) & lead.mask
        cls = np.asarray(demand[(t_n - 1) % period], dtype=np.int64)
        inc = np.where(zero_lines[(t_n - 1) % period], tg - at(t_n - 1), 0)
        zr = lead.zero + dz - (inc.sum() - np.cumsum(inc))
        cols = {
            "G": tg,
            "D": tg + lat + 1,
            "PO": tg + lat,
            "CL": cls,
            "TK": tok0 + r * (tg - g0) - t_n * one,
            "RT": np.full(t_n.size, r),
            "CN": gov.count + t_n,
            "ZR": zr,
            "PK": np.full(t_n.size, peak),
            "SG": np.zeros(t_n.size, dtype=np.int64),
            "AB": np.zeros(t_n.size, dtype=np.int64),
            "RR": np.zeros(t_n.size, dtype=np.int64),
        }
        for f, v in cols.items():
            lead.view(f)[w] = v
        if lead.keep is not None:
            every = at(np.arange(1, lines + 1, dtype=np.int64))
            lead.keep[0].extend(every.tolist())
            lead.keep[1].extend((every + lat + 1).tolist())
        lead.lo = last - keep + 1
        for z in range(lead.lo + 1, last + 1):
            i, h = z & lead.mask, (z - 1) & lead.mask
            lead.SG[i] = hash((lead.G[i] - lead.G[h], lat + 1, lat, lead.CL[i]))
        i = last & lead.mask
        lead.x, lead.q = last + 1, lead.q + lines
        lead.g_prev, lead.d_prev, lead.pop_prev = lead.G[i], lead.D[i], lead.PO[i]
        lead.last_grant_in_task = lead.g_prev
        lead.tok_after, gov.count = lead.TK[i], lead.CN[i]
        lead.zero, lead.peak = lead.ZR[i], max(lead.peak, peak)
        pops, dr = cols["PO"], cols["D"]
        lead.pend = deque(pops[pops > lead.g_prev].tolist())
        lead.inflight = len(lead.pend)
        lead.dd = deque(dr[cls == 1].tolist(), maxlen=kmem)
        self.bank, self.rr, self.last = bank, rr, lead.g_prev
        for k, dl in enumerate(deltas):  # each follower: its first line not yet due
            y = last + 1
            while y - 1 > lead.lo and lead.G[(y - 1) & lead.mask] + dl > lead.g_prev:
                y -= 1
            ys[k] = y
            nxt[k] = lead.G[y & lead.mask] + dl if y <= last else _NEVER
        return True

    def _hash(self, lead: _Group, x: int) -> int:
        """The rolling hash of the leader's lines x - KMem + 1..x (lines below its ring: 0)."""
        h = 0
        for z in range(x - self.kmem + 1, x + 1):
            h = (h * _HASH_B + (lead.SG[z & lead.mask] if z >= lead.lo else 0)) % _HASH_M
        return h

    def _unshadow(
        self, lead: _Group, fols: list[_Group], ys: list[int], deltas: list[int], zbase: list[int]
    ) -> None:
        """Rebuild the followers at their next lines; the leader goes back to a short ring."""
        for f, y, delta, zb in zip(fols, ys, deltas, zbase, strict=True):
            f.follow(lead, y, delta, zb)
        short = _ring_lines(self.kmem)
        if lead.cap > short:
            lead._ring(short, lead.lo)

    def _jump(
        self,
        lead: _Group,
        hit: tuple[int, int],
        ys: list[int],
        nxt: list[int],
        deltas: list[int],
        lag: int,
    ) -> bool:
        """The state after the leader's line x1 repeats that after line x0: jump ahead.

        The hash only proposes; the ring windows are compared exactly here.
        Periodic from x0 on, the state after line x1 + m * period + r is the
        state after line x0 + r, (m + 1) periods later: so the jump lands on
        any line, the last one before the credit pattern changes or the
        governor steps. Only the lines a state can see are carried over.
        """
        x0, zero0 = hit
        x1 = lead.x - 1
        period, mask = x1 - x0, lead.mask
        keep = self.kmem + 2 + lag  # lines of the ring a state needs: the window, the lags
        if x0 - keep < lead.low or period + keep + 1 >= lead.cap:
            return False
        z = np.arange(x0 - keep + 1, x0 + 1, dtype=np.int64)
        a, b = z & mask, (z + period) & mask
        span = lead.G[x1 & mask] - lead.G[x0 & mask]
        for f in ("G", "D", "PO", "CL"):
            v = lead.view(f)
            if not np.array_equal(v[b] - v[a], np.full(z.size, span if f != "CL" else 0)):
                return False
        # how many more lines: while the credit pattern and the governor's rate hold
        more = lead.horizon - 1 - (x1 - lead.task_first)
        gov = lead.gov
        if gov.rate < gov.rmax:
            more = min(more, (gov.count // gov.step + 1) * gov.step - 1 - gov.count)
        if more < keep:
            return False
        m, r = divmod(more, period)
        s = x0 + r  # the line whose state, m + 1 periods on, is the target's
        gain, dt, dz = (m + 1) * period, (m + 1) * span, (m + 1) * (lead.zero - zero0)
        src = np.arange(s - keep + 1, s + 1, dtype=np.int64)
        si, di = src & mask, (src + gain) & mask
        moved = {f: lead.view(f)[si] for f in _FIELDS}  # (copies, before any is overwritten)
        for f in ("G", "D", "PO"):
            moved[f] += dt
        moved["ZR"] += dz
        moved["CN"] += gain
        moved["PK"][:] = lead.PK[x1 & mask]  # the in-flight values repeat: no new peak
        for f in _FIELDS:
            lead.view(f)[di] = moved[f]
        if lead.keep is not None:
            for lst in lead.keep:
                seg = lst[x0 + 1 : x1 + 1]
                for k in range(1, m + 1):
                    lst.extend(v + k * span for v in seg)
                lst.extend(v + (m + 1) * span for v in seg[:r])
        t = s + gain
        i = t & mask
        lead.lo = t - keep + 1
        lead.x = t + 1
        lead.q = lead.x - lead.task_first
        lead.g_prev, lead.d_prev, lead.pop_prev = lead.G[i], lead.D[i], lead.PO[i]
        lead.last_grant_in_task = lead.g_prev
        lead.tok_after = lead.TK[i]
        gov.rate, gov.count = lead.RT[i], lead.CN[i]
        lead.zero = lead.ZR[i]
        w = np.arange(t - self.kmem + 1, t + 1, dtype=np.int64) & mask
        po, d, cl = lead.view("PO")[w], lead.view("D")[w], lead.view("CL")[w]
        lead.pend = deque(po[po > lead.g_prev].tolist())
        lead.inflight = len(lead.pend)
        lead.dd = deque(d[cl == 1].tolist(), maxlen=lead.kmem)
        self.bank, self.rr, self.last = lead.AB[i], lead.RR[i], lead.g_prev
        for k, dl in enumerate(deltas):  # each follower: its first line not yet due
            y = t + 1
            while y - 1 > t - keep + 1 and lead.G[(y - 1) & mask] + dl > lead.g_prev:
                y -= 1
            ys[k] = y
            nxt[k] = lead.G[y & mask] + dl if y <= t else _NEVER
        return True


def run(
    hyp: Hypothesis,
    geom: Geometry,
    settings: Settings,
    job: Job,
    backpressure: Backpressure | None = None,
    *,
    keep_lines: bool = False,
    skip: bool = True,
) -> ModelResult:
    """Every core's counters after the job, advancing from grant to grant (exact).

    keep_lines: also return every line's grant and drain cycles (memory grows
    with the transfer; without it the run is O(1) in memory). skip=False
    steps every grant of every group (the same results in linear time: the
    tests hold the shortcuts to it).
    """
    _check(job, settings, geom)
    return _Engine(hyp, geom, settings, job, backpressure, keep_lines, skip).run()


def _next_accept(groups: list[_Group], j: int, prev_accept: int) -> tuple[int, bool]:
    """When kdma_top takes task j + 1, and whether it does so from idle.

    Ready (not idle) needs, on every core: task j fully issued; task j-1 fully
    drained (its done pulse seen); the incoming task non-empty, or the core not
    busy; and no core done with task j yet (kdma_top's cur_q still equals the
    enable mask). Once a core has drained task j before that, the top waits
    for idle: two cycles after the last core's last drain.
    """
    c0 = prev_accept + 1
    finish_j = []
    for grp in groups:
        start = grp.task_first
        some = grp.x > start  # the core issued lines of task j
        issued_all = grp.g_prev + 1 if some else prev_accept + 1
        prev_done = grp.prev_done + 1 if start > 0 else 0
        fin = grp.d_prev if some else prev_accept  # done pulse next
        finish_j.append(fin)
        if grp.tasks[j + 1][1] == 0:
            ready = max(grp.finish() + 1, prev_accept + 1)  # waits until the core is not busy
        else:
            ready = max(issued_all, prev_done)
        c0 = max(c0, ready, prev_done)
    if c0 <= min(finish_j) + 1:
        return c0, False
    return max(finish_j) + 2, True


def _top_cycles(last_drains: Sequence[int], accepts: Sequence[int]) -> int:
    """The top's span: its last done, after the last drain or a trailing empty task's accept."""
    top = max([*last_drains, accepts[-1] if accepts else 0]) + 1
    if top >= 1 << 32:
        raise InputError(f"{top} cycles overflow the RTL's 32-bit cycle counters")
    return top


# ---------------------------------------------------------------- the stepped reference


@dataclass
class _CoreRegs:
    """kdma_core's registers, the ring's issued count and the memory port, for one core."""

    queue: list[tuple[int, int]]  # tasks not yet accepted
    base: int = 0
    lines: int = 0
    issued: int = 0
    consumed: int = 0
    tail: int = 0
    cur_busy: bool = False
    done_q: bool = False
    inflight: int = 0
    kmem: int = 0
    peak: int = 0
    cycles: int = 0
    zero: int = 0
    tok: int = RATE_ONE
    rate: int = 0  # the governor's rate register (set from the settings at reset)
    step_cnt: int = 0  # lines granted since its last step
    warm: int = 0  # lines granted since the request started (memory warm-up)
    gap: int = 0  # cycles the current task still holds its first request back
    spec_out: int = 0  # speculative lines requested and not drained
    classes: deque = field(default_factory=deque)  # spec bit of every line in the core, in order
    pops: deque = field(default_factory=deque)
    grants: list[int] = field(default_factory=list)
    drains: list[int] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.cur_busy or self.tail != 0


def simulate(
    hyp: Hypothesis,
    geom: Geometry,
    settings: Settings,
    job: Job,
    backpressure: Backpressure | None = None,
    max_cycles: int = 50_000_000,
) -> ModelResult:
    """Step kdma_top, its cores and the memory register by register (start held high)."""
    _check(job, settings, geom)
    s = settings
    one, big_r = RATE_ONE, s.agg_rate_q16
    lat = max(s.latency, 1)
    ncores = len(job)
    en = [seq is not None for seq in job]
    regs = [_CoreRegs(list(seq or [])) for seq in job]
    split = hyp.paths == "split"
    gov_start = s.ramp_start_q16 if s.ramp else s.core_rate_q16
    for k in regs:
        k.rate = s.core_rate_q16  # the governor's reset value
    ready = [_Ready(backpressure, c) for c in range(ncores)]
    prev_q = [False] * ncores
    cur_q = [False] * ncores
    agg, rr = one, 0
    accepts: list[int] = []
    fresh = 0
    c = 0
    while True:
        # ---- combinational: cycle c
        done_o = [k.done_q for k in regs]
        prev_d = [prev_q[i] and not done_o[i] for i in range(ncores)]
        cur_d = [cur_q[i] and not (done_o[i] and not prev_q[i]) for i in range(ncores)]
        core_idle = [not k.busy for k in regs]
        idle = not any(prev_q) and not any(cur_q) and all(core_idle)
        pending = any(k.queue for k in regs)
        if not pending and idle and accepts:
            break
        if c > max_cycles:
            raise RuntimeError("simulation did not finish")
        core_ready = []
        for k in regs:
            nxt = k.queue[0][1] if k.queue else 0
            core_ready.append(not k.busy or (k.issued == k.lines and k.tail == 0 and nxt != 0))
        top_ready = idle or (
            not any(prev_d)
            and en == cur_q
            and all(core_ready[i] or not en[i] for i in range(ncores))
        )
        accept = pending and top_ready
        valid, cred, spec = [False] * ncores, [0] * ncores, [False] * ncores
        for i, k in enumerate(regs):
            cred[i] = hyp.credit(geom, k.base, k.lines, k.issued)
            out = k.inflight + k.kmem
            cap = min(s.window + cred[i], geom.kmem_lines)
            spec[i] = split and cred[i] > 0
            if split and not spec[i]:  # the demand path: demand lines against the window
                room = out - k.spec_out < cap and out < geom.kmem_lines
            else:  # a speculative line (or one path): every line in the core counts
                room = out < cap
            valid[i] = k.cur_busy and k.issued != k.lines and room and k.gap == 0
        eligible = [
            valid[i] and regs[i].tok + regs[i].rate >= one and len(regs[i].pops) < geom.kmem_lines
            for i in range(ncores)
        ]
        avail, spent, rr_d = agg + big_r, 0, rr
        grant = [False] * ncores
        for n in range(ncores):
            i = (rr + n) % ncores
            if eligible[i] and avail - spent >= one:
                grant[i] = True
                spent += one
                rr_d = (i + 1) % ncores
        # ---- registers: end of cycle c
        if accept:
            accepts.append(c)
            if idle:
                fresh = c
                for rd in ready:
                    rd.restart(c)
        for i, k in enumerate(regs):
            popped = bool(k.pops) and k.pops[0] <= c
            drained = k.kmem > 0 and ready[i].at(c)
            tail_drain = drained and k.tail != 0
            cur_drain = drained and k.tail == 0 and k.cur_busy
            cur_last = cur_drain and k.consumed + 1 == k.lines
            tail_last = tail_drain and k.tail == 1
            take = accept and en[i]
            nxt_lines = k.queue[0][1] if take else 0
            busy = k.busy
            # counters (they see this cycle's registers)
            if take and not busy:
                k.cycles, k.zero = 0, 0
            elif busy:
                k.cycles += 1
                if k.cur_busy and k.issued != k.lines and cred[i] == 0:
                    k.zero += 1
            k.done_q = tail_last or cur_last or (take and nxt_lines == 0)
            if k.inflight > k.peak:
                k.peak = k.inflight
            rate = k.rate if busy and k.rate < s.core_rate_q16 else s.core_rate_q16
            if grant[i]:
                k.tok = k.tok + rate - one
                lat_i = lat + (s.warm_extra_cycles if k.warm < s.warm_lines else 0)
                k.pops.append(c + lat_i)
                k.grants.append(c)
                k.warm += 1
                k.classes.append(spec[i])
                k.spec_out += int(spec[i])
            else:
                k.tok = min(k.tok + rate, one)
            if popped:
                k.pops.popleft()
            k.inflight += int(grant[i]) - int(popped)
            k.kmem += int(popped) - int(drained)
            if drained:
                k.drains.append(c)
                k.spec_out -= int(k.classes.popleft())
            if tail_drain:
                k.tail -= 1
            # the governor: a request starts at ramp_start, then climbs with every step of lines
            if take and not busy:
                k.rate, k.step_cnt, k.warm = gov_start, 0, 0
            elif grant[i] and k.rate < s.core_rate_q16:
                if k.step_cnt == s.ramp_step_lines - 1:
                    k.step_cnt = 0
                    k.rate = min(k.rate + s.ramp_inc_q16, s.core_rate_q16)
                else:
                    k.step_cnt += 1
            if take:
                if k.cur_busy and not cur_last:
                    k.tail = k.lines - k.consumed - int(cur_drain)
                if not busy:
                    k.peak = 0
                k.base, k.lines = k.queue.pop(0)
                k.cur_busy = k.lines != 0
                k.consumed = 0
                k.issued = 0
                k.gap = s.task_gap_cycles
            else:
                if grant[i]:
                    k.issued += 1
                if cur_drain:
                    k.consumed += 1
                if cur_last:
                    k.cur_busy = False
                if k.gap:
                    k.gap -= 1
        agg = min(avail - spent, one)
        rr = 0 if accept else rr_d
        if accept:
            prev_q = cur_d
            cur_q = list(en)
        else:
            prev_q, cur_q = prev_d, cur_d
        c += 1
    results: list[CoreResult | None] = []
    for i, k in enumerate(regs):
        if not en[i]:
            results.append(None)
            continue
        results.append(
            CoreResult(
                cycles=k.cycles,
                zero_credit_cycles=k.zero,
                peak_inflight=k.peak,
                issued=len(k.grants),
                grants=np.asarray(k.grants, dtype=np.int64),
                drains=np.asarray(k.drains, dtype=np.int64),
            )
        )
    last = [k.drains[-1] for k in regs if k.drains]
    return ModelResult(_top_cycles(last, accepts), results, "stepped", accepts, fresh)
