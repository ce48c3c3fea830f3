"""Cycle-exact Python model of rtl/kdma_top.sv (no simulator imports).

Timeline, as the RTL defines it. Cycle 0 is the cycle in which ``start_i`` is
sampled. For a line granted by the memory in cycle g:

* the memory pops it in cycle g + L (L = max(latency, 1)) and KMem holds it
  from cycle g + L + 1;
* it is drained in the first cycle d >= max(g + L + 1, previous drain + 1) in
  which the consumer is ready; ``consumed`` counts it from cycle d + 1.

Line i may be requested in cycle c when i - consumed(c) < min(window +
credit(i), 1024), and the memory grants it when the core's token bucket and
the aggregate bucket allow. A core's ``cycles`` is the cycle of its last
drain; the top's is one more than the slowest core's.

Two engines compute this. ``simulate`` steps every cycle for any number of
cores and is the reference. ``run_task`` solves the same recurrence line by
line, per core, which is exact whenever the aggregate ceiling never refuses a
request (it checks that, and falls back to ``simulate`` when it does).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.hw import (
    ADDR_BITS,
    KMEM_LINES,
    LINE_ADDR_MASK,
    LINE_SHIFT,
    NUM_CORES_MAX,
    RATE_ONE,
    CreditMode,
    credit,
    lines_for_bytes,
)

LFSR_TAPS = 0xB400  # 16-bit Galois LFSR, maximal length (period 65535)
MAX_LATENCY_CYCLES = 4095  # kdma_top MaxLatencyCycles


@dataclass(frozen=True)
class Settings:
    """Run-time inputs of kdma_top (all in cycles, lines, or Q.16 lines/cycle)."""

    latency: int
    window: int
    core_rate_q16: int
    agg_rate_q16: int

    def __post_init__(self) -> None:
        if not 1 <= self.latency <= MAX_LATENCY_CYCLES:
            raise InputError(f"latency {self.latency} cycles outside 1..{MAX_LATENCY_CYCLES}")
        if not 1 <= self.window <= KMEM_LINES:
            raise InputError(f"demand window {self.window} lines outside 1..{KMEM_LINES}")
        if not 1 <= self.core_rate_q16 <= RATE_ONE:
            raise InputError(f"core rate {self.core_rate_q16}/65536 outside (0, 1] lines/cycle")
        # kdma_mem_model adds the rate to a bank of up to one line in 22 bits
        if not 1 <= self.agg_rate_q16 <= (1 << 22) - 1 - RATE_ONE:
            raise InputError(f"aggregate rate {self.agg_rate_q16}/65536 out of range")


@dataclass(frozen=True)
class Backpressure:
    """KMem consumer readiness from the harness LFSR: ready when lfsr[7:0] >= threshold."""

    seed: int
    threshold: int  # 0 = always ready, 128 ~ half the cycles, 255 ~ 1/256

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 255:
            raise InputError(f"back-pressure threshold {self.threshold} outside 0..255")


@dataclass(frozen=True)
class CoreTask:
    """One core's share of a task: byte address and byte size, as the TD holds them."""

    base_addr: int
    size_bytes: int

    def __post_init__(self) -> None:
        if not 0 <= self.base_addr < (1 << ADDR_BITS):
            raise InputError(f"base address {self.base_addr:#x} is not a 32-bit byte address")
        if not 0 <= self.size_bytes < (1 << ADDR_BITS):
            raise InputError(f"size {self.size_bytes} bytes is not a 32-bit byte count")

    @property
    def base_line(self) -> int:
        return self.base_addr >> LINE_SHIFT

    @property
    def lines(self) -> int:
        return lines_for_bytes(self.size_bytes)


@dataclass
class CoreResult:
    cycles: int
    zero_credit_cycles: int
    peak_inflight: int
    issued: int
    grants: np.ndarray = field(repr=False)  # grant cycle of each line
    drains: np.ndarray = field(repr=False)  # drain cycle of each line


@dataclass
class TaskResult:
    cycles: int
    cores: list[CoreResult | None]  # None for a disabled core
    engine: str  # "recurrence" or "stepped"


def lfsr_seed(seed: int, core: int) -> int:
    """Per-core LFSR seed, as tb/hdl/kdma_tb_top.sv derives it."""
    s = (seed ^ (core * 0x9E37)) & 0xFFFF
    return s if s else 1


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


class _Ready:
    """Answers 'first ready cycle >= c' for one core's consumer."""

    def __init__(self, bp: Backpressure | None, core: int) -> None:
        self.always = bp is None or bp.threshold == 0
        if self.always:
            return
        seq, index = _lfsr_cycle()
        ready = (seq & 0xFF) >= bp.threshold
        if not ready.any():
            raise InputError("back-pressure threshold leaves the consumer never ready")
        # distance from each position to the next ready position, cyclically
        n = len(seq)
        dist = np.empty(n, dtype=np.int64)
        nxt = None
        for i in range(2 * n - 1, -1, -1):
            if ready[i % n]:
                nxt = i
            if i < n:
                dist[i] = nxt - i
        self.dist = dist
        self.n = n
        self.offset = int(index[lfsr_seed(bp.seed, core)])  # state in cycle 1 = seed

    def next(self, c: int) -> int:
        if self.always:
            return c
        return c + int(self.dist[(self.offset + c - 1) % self.n])

    def at(self, c: int) -> bool:
        return self.always or self.next(c) == c


def _static_credit(mode: CreditMode, base_line: int, lines: int) -> int | None:
    return None if mode is CreditMode.FIXED else credit(mode, base_line, lines, 0)


def _core_recurrence(
    mode: CreditMode, s: Settings, tasks: Sequence[CoreTask], ready: _Ready
) -> CoreResult:
    """Grant and drain cycle of every line of one core, assuming the aggregate never binds.

    `tasks` run back to back: `start_i` is held high, so task j is taken in the
    first cycle the core is ready (task j-1 fully issued, task j-2 fully
    drained, and j a non-empty task; an empty one waits for idle).
    """
    lat = max(s.latency, 1)
    one, r = RATE_ONE, s.core_rate_q16
    window = s.window
    total = sum(t.lines for t in tasks)
    grants = [0] * total
    drains = [0] * total
    tok_after = one  # bank at cycle g_prev + 1; full when the first task starts
    g_prev = 0
    d_prev = 0
    always = ready.always
    zero = 0
    i = 0
    accept = 0
    prev_start = 0  # first line index of the previous task
    for j, task in enumerate(tasks):
        n = task.lines
        if j:
            if n == 0 or tasks[j - 1].lines == 0:
                ready_at = (d_prev + 1) if i else accept + 1  # wait for idle
            else:
                ready_at = g_prev + 1  # previous task fully issued
                if prev_start:
                    ready_at = max(ready_at, drains[prev_start - 1] + 1)  # older one drained
            accept = max(accept + 1, ready_at)
            prev_start = i
        static = _static_credit(mode, task.base_line, n)
        if n and static == 0:
            zero -= accept  # counted below as (last grant - accept)
        floor = accept + 1
        for q in range(n):
            c_cred = static if static is not None else min(n - q, 256)
            cap = min(window + c_cred, KMEM_LINES)
            # token: earliest k >= 0 cycles after g_prev + 1 with bank + refill >= one
            need = one - r - tok_after
            k_tok = 0 if need <= 0 else -(-need // r)
            g = g_prev + 1 + k_tok
            if g < floor:
                g = floor
            m = i - cap
            if m >= 0:
                gate = drains[m] + 1
                if gate > g:
                    g = gate
            bank = tok_after + (g - g_prev - 1) * r
            if bank > one:
                bank = one
            tok_after = bank + r - one
            grants[i] = g
            d = g + lat + 1
            if d <= d_prev:
                d = d_prev + 1
            if not always:
                d = ready.next(d)
            drains[i] = d
            g_prev, d_prev = g, d
            i += 1
        if n and static == 0:
            zero += g_prev
    g_arr = np.asarray(grants, dtype=np.int64)
    d_arr = np.asarray(drains, dtype=np.int64)
    return CoreResult(
        cycles=int(d_arr[-1]) if total else 0,
        zero_credit_cycles=zero,
        peak_inflight=_peak_window(g_arr, lat),
        issued=total,
        grants=g_arr,
        drains=d_arr,
    )


def _peak_window(grants: np.ndarray, lat: int) -> int:
    """Most grants inside any `lat` consecutive cycles: the in-flight peak."""
    if grants.size == 0:
        return 0
    hi = np.searchsorted(grants, grants + lat, side="left")
    return int((hi - np.arange(grants.size)).max())


def _aggregate_ok(results: Sequence[CoreResult | None], s: Settings) -> bool:
    """Replay the aggregate bucket over the merged grants; True if it never refused one."""
    lists = [r.grants for r in results if r is not None and r.grants.size]
    if not lists:
        return True
    cycles, counts = np.unique(np.concatenate(lists), return_counts=True)
    one, big_r = RATE_ONE, s.agg_rate_q16
    if counts.max() * one <= big_r:
        return True  # the refill alone covers the busiest cycle
    bank, last = one, 0  # bank at the start of cycle `last + 1`
    for c, n in zip(cycles.tolist(), counts.tolist(), strict=True):
        bank = min(bank + (c - last - 1) * big_r, one) if c > last + 1 else bank
        if bank + big_r < n * one:
            return False
        bank = min(bank + big_r - n * one, one)
        last = c
    return True


def _check(tasks: Sequence[CoreTask | None]) -> None:
    if not 1 <= len(tasks) <= NUM_CORES_MAX:
        raise InputError(f"{len(tasks)} cores: the ANE has 1..{NUM_CORES_MAX}")


def run_task(
    mode: CreditMode,
    settings: Settings,
    tasks: Sequence[CoreTask | None],
    backpressure: Backpressure | None = None,
) -> TaskResult:
    """Cycles of one kdma_top task; ``tasks[c]`` is None for a disabled core."""
    _check(tasks)
    results: list[CoreResult | None] = []
    for c, t in enumerate(tasks):
        results.append(
            None if t is None else _core_recurrence(mode, settings, [t], _Ready(backpressure, c))
        )
    if len(tasks) > 1 and not _aggregate_ok(results, settings):
        return simulate(mode, settings, tasks, backpressure)
    return TaskResult(_top_cycles(results), results, "recurrence")


def _top_cycles(results: Sequence[CoreResult | None]) -> int:
    enabled = [r.cycles for r in results if r is not None]
    top = max(enabled) + 1 if enabled else 0
    if top >= 1 << 32:
        raise InputError(f"{top} cycles overflow the RTL's 32-bit cycle counters")
    return top


def simulate(
    mode: CreditMode,
    settings: Settings,
    tasks: Sequence[CoreTask | None],
    backpressure: Backpressure | None = None,
    max_cycles: int = 50_000_000,
) -> TaskResult:
    """Step kdma_top cycle by cycle: the slow, obviously-faithful reference."""
    _check(tasks)
    s = settings
    ncores = len(tasks)
    one, r, big_r = RATE_ONE, s.core_rate_q16, s.agg_rate_q16
    lat = max(s.latency, 1)
    ready = [_Ready(backpressure, c) for c in range(ncores)]
    lines = [t.lines if t is not None else 0 for t in tasks]
    base = [t.base_line if t is not None else 0 for t in tasks]
    busy = [t is not None and t.lines > 0 for t in tasks]
    issued = [0] * ncores
    consumed = [0] * ncores
    kmem = [0] * ncores
    tok = [one] * ncores
    agg = one
    rr = 0
    pops: list[deque[int]] = [deque() for _ in range(ncores)]
    grants: list[list[int]] = [[] for _ in range(ncores)]
    drains: list[list[int]] = [[] for _ in range(ncores)]
    zero = [0] * ncores
    inflight = [0] * ncores
    peak = [0] * ncores
    end = [0] * ncores
    c = 0
    while any(busy):
        c += 1
        if c > max_cycles:
            raise RuntimeError("simulation did not finish")
        eligible = [False] * ncores
        for k in range(ncores):
            peak[k] = max(peak[k], inflight[k])
            if not busy[k] or issued[k] == lines[k]:
                continue
            cr = credit(mode, base[k], lines[k], issued[k])
            if cr == 0:
                zero[k] += 1
            cap = min(s.window + cr, KMEM_LINES)
            if issued[k] - consumed[k] < cap and tok[k] + r >= one and inflight[k] < KMEM_LINES:
                eligible[k] = True
        avail, spent, rr_next = agg + big_r, 0, rr
        grant = [False] * ncores
        for i in range(ncores):
            k = (rr + i) % ncores
            if eligible[k] and avail - spent >= one:
                grant[k] = True
                spent += one
                rr_next = (k + 1) % ncores
        # register updates at the end of cycle c
        for k in range(ncores):
            popped = bool(pops[k]) and pops[k][0] == c
            drained = busy[k] and kmem[k] > 0 and ready[k].at(c)
            if grant[k]:
                tok[k] = tok[k] + r - one
                pops[k].append(c + lat)
                grants[k].append(c)
                issued[k] += 1
            else:
                tok[k] = min(tok[k] + r, one)
            if popped:
                pops[k].popleft()
            inflight[k] += int(grant[k]) - int(popped)
            kmem[k] += int(popped) - int(drained)
            if drained:
                drains[k].append(c)
                consumed[k] += 1
                if consumed[k] == lines[k]:
                    busy[k] = False
                    end[k] = c
        agg = min(avail - spent, one)
        rr = rr_next
    results: list[CoreResult | None] = []
    for k, t in enumerate(tasks):
        if t is None:
            results.append(None)
            continue
        results.append(
            CoreResult(
                cycles=end[k],
                zero_credit_cycles=zero[k],
                peak_inflight=peak[k],
                issued=issued[k],
                grants=np.asarray(grants[k], dtype=np.int64),
                drains=np.asarray(drains[k], dtype=np.int64),
            )
        )
    return TaskResult(_top_cycles(results), results, "stepped")


def run_sequence(
    mode: CreditMode,
    settings: Settings,
    tasks: Sequence[CoreTask],
    backpressure: Backpressure | None = None,
) -> TaskResult:
    """One core given `tasks` back to back (start held high): the split workaround.

    ``cycles`` spans the first task's start to the last one's done, as
    kdma_top's cycles_o counts it.
    """
    if not tasks:
        raise InputError("an empty task sequence")
    core = _core_recurrence(mode, settings, tasks, _Ready(backpressure, 0))
    return TaskResult(_top_cycles([core]) if core.issued else 1, [core], "recurrence")


def simulate_sequence(
    mode: CreditMode,
    settings: Settings,
    tasks: Sequence[CoreTask],
    backpressure: Backpressure | None = None,
    max_cycles: int = 50_000_000,
) -> TaskResult:
    """Step one core through back-to-back tasks, register by register as kdma_core does."""
    s = settings
    one, r = RATE_ONE, s.core_rate_q16
    lat = max(s.latency, 1)
    ready = _Ready(backpressure, 0)
    queue = list(tasks)
    cur = queue.pop(0)  # accepted in cycle 0
    lines, issued, consumed, tail = cur.lines, 0, 0, 0
    cur_busy = lines > 0
    tok, inflight, kmem = one, 0, 0
    pops: deque[int] = deque()
    grants: list[int] = []
    drains: list[int] = []
    zero = peak = end = 0
    c = 0
    while cur_busy or tail or queue:
        c += 1
        if c > max_cycles:
            raise RuntimeError("simulation did not finish")
        peak = max(peak, inflight)
        busy = cur_busy or tail > 0
        cr = credit(mode, cur.base_line, lines, issued)
        if cur_busy and issued != lines and cr == 0:
            zero += 1
        cap = min(s.window + cr, KMEM_LINES)
        valid = cur_busy and issued != lines and inflight + kmem < cap
        grant = valid and tok + r >= one and inflight < KMEM_LINES
        popped = bool(pops) and pops[0] == c
        drained = kmem > 0 and ready.at(c)
        nxt = queue[0] if queue else None
        can_take = not busy or (issued == lines and tail == 0 and nxt is not None and nxt.lines > 0)
        accept = nxt is not None and can_take
        tail_drain = drained and tail > 0
        cur_drain = drained and tail == 0 and cur_busy
        cur_last = cur_drain and consumed + 1 == lines
        # end of cycle c
        tok = tok + r - one if grant else min(tok + r, one)
        if grant:
            pops.append(c + lat)
            grants.append(c)
        if popped:
            pops.popleft()
        inflight += int(grant) - int(popped)
        kmem += int(popped) - int(drained)
        if drained:
            drains.append(c)
            end = c
        if tail_drain:
            tail -= 1
        if grant:
            issued += 1
        if accept:
            if cur_busy and not cur_last:
                tail = lines - consumed - int(cur_drain)
            cur = queue.pop(0)
            lines, issued, consumed = cur.lines, 0, 0
            cur_busy = lines > 0
        else:
            if cur_drain:
                consumed += 1
            if cur_last:
                cur_busy = False
    core = CoreResult(
        cycles=end,
        zero_credit_cycles=zero,
        peak_inflight=peak,
        issued=len(grants),
        grants=np.asarray(grants, dtype=np.int64),
        drains=np.asarray(drains, dtype=np.int64),
    )
    return TaskResult(end + 1 if grants else 1, [core], "stepped")


def single(
    mode: CreditMode,
    settings: Settings,
    lines: int,
    base_line: int = 0,
    backpressure: Backpressure | None = None,
) -> TaskResult:
    """One core streaming `lines` lines from `base_line`: the erratum's unit of work."""
    if lines < 0 or lines << LINE_SHIFT >= 1 << ADDR_BITS:
        raise InputError(f"{lines} lines is not a transfer one core can be given")
    task = CoreTask((base_line & LINE_ADDR_MASK) << LINE_SHIFT, lines << LINE_SHIFT)
    return run_task(mode, settings, [task], backpressure)
