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
  It is exact (tests/test_cyclemodel.py holds it to :func:`simulate`).
"""

from __future__ import annotations

import copy
import heapq
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
    grants: np.ndarray = field(repr=False)  # grant cycle of every line, all tasks
    drains: np.ndarray = field(repr=False)  # drain cycle of every line


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
    a request, the refill is min(rate, start + inc * floor(j / step)) per cycle;
    in the cycle of the start itself it is still the previous request's rate.
    Off (no ramp): the core rate, always.
    """

    def __init__(self, s: Settings) -> None:
        self.rmax = s.core_rate_q16
        self.on = s.ramp
        self.start = s.ramp_start_q16 if self.on else self.rmax
        self.step, self.inc = s.ramp_step_lines, s.ramp_inc_q16
        self.rate = self.rmax  # the reset value
        self.count = 0  # lines granted in this request
        self.before: list[tuple[int, int]] = []  # (refill, last cycle) of starts since a grant

    def restart(self, e: int) -> None:
        """A request starts in cycle e: the refill up to e is still the rate held until now."""
        self.before.append((self.rate, e))
        self.rate, self.count = self.start, 0

    def _segments(self, c0: int) -> list[tuple[int, int]]:
        """(refill, last cycle) pieces from cycle c0 on."""
        return [p for p in self.before if p[1] >= c0] + [(self.rate, 1 << 62)]

    def earliest(self, c0: int, bank: int) -> int:
        """First cycle c >= c0 with (bank grown by the refills since c0, capped) + refill >= one."""
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


class _Group:
    """Cores with the same work in the same state: one grant schedule serves them all."""

    def __init__(
        self,
        members: list[int],
        tasks: Sequence[tuple[int, int]],
        hyp: Hypothesis,
        g: Geometry,
        s: Settings,
        ready: _Ready,
    ) -> None:
        self.members = members
        self.tasks = tasks
        self.hyp, self.geom, self.s = hyp, g, s
        self.ready = ready
        self.grants: list[int] = []
        self.drains: list[int] = []
        self.task_start: list[int] = []  # global line index of each task's first line
        self.j = -1  # task being issued
        self.q = 0  # line within it
        self.n = 0  # its lines
        self.g_prev = 0
        self.tok_after = RATE_ONE  # bank at cycle g_prev + 1: full at the start
        self.d_prev = 0
        self.last_grant_in_task = 0
        self.cred_static: int | None = None
        self.cred_arr: list[int] | None = None
        self.zero = 0
        self.epoch = 0  # accept cycle of this core's last start from idle
        self.epoch_line = 0
        self.floor = 1
        self.split = hyp.paths == "split"
        self.spec_arr: list[bool] | None = None
        self.demand_drains: list[int] = []  # drain cycle of every demand-path line, in order
        self.gov = _Governor(s)
        self.pop_prev = 0
        self.lat = max(s.latency, 1)
        self.pops: list[int] | None = [] if s.warm_lines else None  # kept when latency varies

    def copy(self, members: list[int]) -> _Group:
        twin = _Group.__new__(_Group)
        twin.__dict__.update(self.__dict__)
        twin.members = members
        twin.grants = list(self.grants)
        twin.drains = list(self.drains)
        twin.task_start = list(self.task_start)
        twin.demand_drains = list(self.demand_drains)
        twin.gov = copy.copy(self.gov)
        twin.gov.before = list(self.gov.before)
        twin.pops = None if self.pops is None else list(self.pops)
        twin.ready = self.ready  # only shared when there is no back-pressure
        return twin

    # ------------------------------------------------------------ task boundaries
    def finish(self) -> int:
        """Cycle of the last drain of everything issued so far (0 if nothing)."""
        return self.drains[-1] if self.drains else 0

    def start_task(self, j: int, accept: int, busy: bool) -> None:
        base, n = self.tasks[j]
        self.j, self.q, self.n = j, 0, n
        self.task_start.append(len(self.grants))
        self.floor = accept + 1 + self.s.task_gap_cycles
        self.last_grant_in_task = accept
        if not busy:  # kdma_core clears its counters when it takes a task while idle
            self.epoch, self.epoch_line, self.zero = accept, len(self.grants), 0
            self.gov.restart(accept)  # a request starts: the governor too
        if self.hyp.static:
            self.cred_static = self.hyp.credit(self.geom, base, n, 0)
            self.cred_arr = None
        else:
            self.cred_static = None
            self.cred_arr = self.hyp.credit_array(self.geom, n, np.arange(n), base).tolist()
        if self.split:
            cred = self.cred_arr if self.cred_arr is not None else [self.cred_static] * n
            self.spec_arr = [c > 0 for c in cred]

    @property
    def issuing(self) -> bool:
        return self.q < self.n

    # ------------------------------------------------------------ one line
    def _cred(self) -> int:
        return self.cred_static if self.cred_arr is None else self.cred_arr[self.q]

    def earliest(self) -> int:
        """The first cycle the next line may be granted, from this core's own constraints."""
        cred = self._cred()
        kmem = self.geom.kmem_lines
        g = self.gov.earliest(self.g_prev + 1, self.tok_after)
        if g < self.floor:
            g = self.floor
        cap = min(self.s.window + cred, kmem)
        if self.split and not self.spec_arr[self.q]:
            # the demand path counts only demand lines against its window ...
            m = len(self.demand_drains) - cap
            if m >= 0 and self.demand_drains[m] + 1 > g:
                g = self.demand_drains[m] + 1
            cap = kmem  # ... and every line in the core must still fit KMem
        m = len(self.grants) - cap
        if m >= 0 and self.drains[m] + 1 > g:
            g = self.drains[m] + 1
        return g

    def grant(self, c: int) -> None:
        self.tok_after = self.gov.grant(self.g_prev + 1, self.tok_after, c)
        cred = self._cred()
        if cred == 0:  # counted while lines remain: since the last grant (or the accept)
            self.zero += c - self.last_grant_in_task
        self.last_grant_in_task = c
        lat = self.lat
        if len(self.grants) - self.epoch_line < self.s.warm_lines:
            lat += self.s.warm_extra_cycles  # the memory's warm-up, from the request start
        pop = max(c + lat, self.pop_prev + 1)  # the port's queue pops in order
        d = pop + 1
        if d <= self.d_prev:
            d = self.d_prev + 1
        d = self.ready.next(d)
        self.grants.append(c)
        self.drains.append(d)
        if self.split and not self.spec_arr[self.q]:
            self.demand_drains.append(d)
        self.g_prev, self.d_prev, self.pop_prev = c, d, pop
        if self.pops is not None:
            self.pops.append(pop)
        self.q += 1

    def result(self) -> CoreResult:
        lat = max(self.s.latency, 1)
        g = np.asarray(self.grants, dtype=np.int64)
        d = np.asarray(self.drains, dtype=np.int64)
        return CoreResult(
            cycles=(int(d[-1]) - self.epoch) if d.size > self.epoch_line else 0,
            zero_credit_cycles=self.zero,
            peak_inflight=_peak_window(g[self.epoch_line :], lat)
            if self.pops is None
            else _peak_events(g[self.epoch_line :], np.asarray(self.pops[self.epoch_line :])),
            issued=len(self.grants),
            grants=g,
            drains=d,
        )


def _peak_window(grants: np.ndarray, lat: int) -> int:
    """Most grants inside any `lat` consecutive cycles: the in-flight peak."""
    if grants.size == 0:
        return 0
    hi = np.searchsorted(grants, grants + lat, side="left")
    return int((hi - np.arange(grants.size)).max())


def _peak_events(grants: np.ndarray, pops: np.ndarray) -> int:
    """In flight during cycle c: granted before c and not popped before c; its maximum."""
    if grants.size == 0:
        return 0
    times = np.concatenate([grants + 1, pops + 1])
    steps = np.concatenate([np.ones(grants.size, np.int64), -np.ones(pops.size, np.int64)])
    order = np.lexsort((steps, times))  # at equal times the pop (-1) counts first
    return int(np.cumsum(steps[order]).max())


def _groups(
    hyp: Hypothesis, g: Geometry, s: Settings, job: Job, bp: Backpressure | None
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
    for members in keys.values():
        seq = job[members[0]]
        out.append(_Group(members, seq, hyp, g, s, _Ready(bp, members[0])))
    return out


def run(
    hyp: Hypothesis,
    geom: Geometry,
    settings: Settings,
    job: Job,
    backpressure: Backpressure | None = None,
) -> ModelResult:
    """Every core's counters after the job, advancing from grant to grant (exact)."""
    _check(job, settings, geom)
    s = settings
    ncores = len(job)
    groups = _groups(hyp, geom, s, job, backpressure)
    steps = len(groups[0].tasks)
    accepts = [0]
    fresh = 0
    one, big_r = RATE_ONE, s.agg_rate_q16
    agg_bank, agg_last, rr = one, 0, 0  # bank at the start of cycle agg_last + 1

    def begin(j: int, accept: int, idle: bool) -> None:
        for grp in groups:
            busy = not idle and grp.finish() >= accept
            grp.start_task(j, accept, busy)

    begin(0, 0, True)
    for j in range(steps):
        heap = [(grp.earliest(), k) for k, grp in enumerate(groups) if grp.issuing]
        heapq.heapify(heap)
        while heap:
            c = heap[0][0]
            asking = []
            while heap and heap[0][0] == c:
                asking.append(heapq.heappop(heap)[1])
            # the aggregate bucket at cycle c, then round-robin from rr over the asking ports
            if c > agg_last + 1:
                agg_bank = min(agg_bank + (c - agg_last - 1) * big_r, one)
            avail = agg_bank + big_r
            cap = avail // one
            agg_last = c
            if len(asking) == 1 and len(groups[asking[0]].members) <= cap:
                # the common case: one group asks and the bucket has room; while no other
                # group is waiting, stay with this one (no heap traffic)
                k = asking[0]
                grp = groups[k]
                m = len(grp.members)
                last = (max(grp.members, key=lambda p: (p - rr) % ncores) + 1) % ncores
                while True:
                    rr = last
                    agg_bank = min(avail - m * one, one)
                    grp.grant(c)
                    if not grp.issuing:
                        break
                    nxt = grp.earliest()
                    if heap:
                        heapq.heappush(heap, (nxt, k))
                        break
                    bank = agg_bank if nxt == c + 1 else min(agg_bank + (nxt - c - 1) * big_r, one)
                    avail = bank + big_r
                    if m > avail // one:
                        heapq.heappush(heap, (nxt, k))
                        break
                    c = agg_last = nxt
                continue
            ports = sorted(((p - rr) % ncores, p, k) for k in asking for p in groups[k].members)
            budget = min(len(ports), cap)
            granted = {p for _, p, _ in ports[:budget]}
            if budget:
                rr = (ports[budget - 1][1] + 1) % ncores
            agg_bank = min(avail - budget * one, one)
            for k in asking:
                grp = groups[k]
                got = [p for p in grp.members if p in granted]
                if len(got) < len(grp.members):
                    rest = [p for p in grp.members if p not in granted]
                    if got:  # the bucket splits the group: the refused cores go on alone
                        twin = grp.copy(rest)
                        grp.members = got
                        groups.append(twin)
                        heapq.heappush(heap, (c + 1, len(groups) - 1))
                    else:
                        heapq.heappush(heap, (c + 1, k))
                        continue
                grp.grant(c)
                if grp.issuing:
                    heapq.heappush(heap, (grp.earliest(), k))
        if j + 1 == steps:
            break
        accept, idle = _next_accept(groups, j, accepts[-1])
        if idle:
            fresh = accept
            for grp in groups:
                grp.ready.restart(accept)
        accepts.append(accept)
        rr = 0  # arb_restart: every accept restarts the round robin
        if agg_last < accept:
            agg_bank = min(agg_bank + (accept - agg_last) * big_r, one)
            agg_last = accept
        begin(j + 1, accept, idle)
    results: list[CoreResult | None] = [None] * ncores
    for grp in groups:
        res = grp.result()
        for p in grp.members:
            results[p] = res
    return ModelResult(_top_cycles(results, accepts), results, "recurrence", accepts, fresh)


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
        start = grp.task_start[j]
        issued_all = grp.grants[-1] + 1 if len(grp.grants) > start else prev_accept + 1
        prev_done = grp.drains[start - 1] + 1 if start > 0 else 0
        fin = grp.drains[-1] if len(grp.drains) > start else prev_accept  # done pulse next
        finish_j.append(fin)
        if grp.tasks[j + 1][1] == 0:
            ready = max(grp.finish() + 1, prev_accept + 1)  # waits until the core is not busy
        else:
            ready = max(issued_all, prev_done)
        c0 = max(c0, ready, prev_done)
    if c0 <= min(finish_j) + 1:
        return c0, False
    return max(finish_j) + 2, True


def _top_cycles(results: Sequence[CoreResult | None], accepts: Sequence[int]) -> int:
    """The top's span: its last done, after the last drain or a trailing empty task's accept."""
    last = [int(r.drains[-1]) for r in results if r is not None and r.drains.size]
    top = max([*last, accepts[-1] if accepts else 0]) + 1
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
            rate = k.rate
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
    return ModelResult(_top_cycles(results, accepts), results, "stepped", accepts, fresh)
