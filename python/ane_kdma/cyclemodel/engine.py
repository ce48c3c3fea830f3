"""The recurrence: the groups, the aggregate bucket, and the task loop."""

from __future__ import annotations

import heapq

from ane_kdma.cyclemodel.group import Group, groups_of
from ane_kdma.cyclemodel.job import Backpressure, CoreResult, Job, ModelResult, check, top_cycles
from ane_kdma.cyclemodel.joint import Joint
from ane_kdma.cyclemodel.shortcuts import Shortcuts
from ane_kdma.hw import RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis
from ane_kdma.profile import Settings

JOINT_EVERY = 8  # the general loop looks at its joint state every this many lines
TOKEN_RETRY = 256  # lines of the first group between two tries of the joint token form
MERGE_RETRY = 32  # lines between two exact comparisons of the same two groups


class Engine(Shortcuts):
    """One run: the groups, the aggregate bucket, and the task loop.

    The general loop advances the groups from grant to grant through a heap
    (cost: one step per line per group). Its shortcuts bound the cost (all
    exact, all off with ``skip=False``; none with back-pressure):

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
      changes (see _token_jump). What the bucket sees is a pure function of
      the pattern relative to the leader's grant, so its analysis is
      memoised: the points of a sweep meet the same few patterns.
    * Merges. The general loop's groups that stand in one state in one cycle
      (parts of a group the bucket split, met again) become one group
      (:meth:`merge`): near-lockstep cores cost one group per state, not
      one per core, while no period lets them jump.
    * Periods. Otherwise (gates binding: demand-gated bursts), the whole
      state relative to the leader's latest grant (its ring window, bank,
      governor, credit phase; the aggregate bank and round-robin pointer; the
      followers' lags) is hashed (rolled per line, kept every few lines of the
      credit pattern's phase: RECORD_EVERY). When it repeats (checked exactly),
      the grants continue periodically: the leader lands as far as the credit
      pattern (the fix's tail), the governor's next step or the task's end
      allow, counters advanced in closed form (the zero-credit count by its
      gain per period; the in-flight peak repeats). Steady state is only
      searched past the memory's warm-up. Its cost is the transient plus one
      period: short for most settings, but a max-plus transient can be long
      (the paged reading at credit 1 takes 1.3 M lines to settle), and
      a period can be long (28 pages for the paged reading at credit 112 and
      window 80: the token bank's phase) or cut short (the demand window's
      steps every few hundred starved lines): those lines are stepped, on
      the leader alone.
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
        share: bool = True,
    ) -> None:
        super().__init__(len(job), s.agg_rate_q16)
        self.s = s
        self.kmem = geom.kmem_lines
        self.groups = groups_of(hyp, geom, s, job, bp, keep, share)
        self.fast = skip and (bp is None or bp.threshold == 0)
        self.apart: dict[tuple[int, int], int] = {}  # groups compared unequal: until line

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
            for p in grp.members:
                results[p] = grp.result(p)
        last = [grp.d_prev for grp in groups if grp.x]
        return ModelResult(top_cycles(last, accepts), results, "recurrence", accepts, fresh)

    def begin(self, j: int, accept: int, idle: bool) -> None:
        for grp in self.groups:
            busy = not idle and grp.finish() >= accept
            grp.start_task(j, accept, busy)

    def heap(self) -> list[tuple[int, int]]:
        heap = [(grp.earliest(), k) for k, grp in enumerate(self.groups) if grp.issuing]
        heapq.heapify(heap)
        return heap

    # ------------------------------------------------------------ groups that meet
    def merge(self, heap: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
        """Groups of the general loop that stand in one state in one cycle become one.

        The aggregate bucket parts a group when it refuses some of its cores;
        the parts often meet again in the same state (the refused ones catch
        up within a page, or the next refusal falls on the others), and from
        then on the general loop would grant them alike. Each is checked
        exactly (:meth:`Group.twin`); the survivor keeps the lowest index (the
        loop's first group stays first), takes in the members and records how
        their counters differ. Returns the new heap, or None (no change).
        """
        groups = self.groups
        where: dict[tuple[int, ...], int] = {}
        gone: set[int] = set()
        for e, k in sorted(heap, key=lambda t: t[1]):
            grp = groups[k]
            key = (e, grp.x, grp.g_prev, grp.d_prev, grp.tok_after)
            a = where.get(key)
            if a is None:
                where[key] = k
                continue
            pair = (id(groups[a]), id(grp))
            if self.apart.get(pair, -1) > grp.x:
                continue
            if groups[a].twin(grp):
                groups[a].merge(grp)
                gone.add(k)
            else:  # (lines the gates still see differ: look again some lines on)
                self.apart[pair] = grp.x + MERGE_RETRY
        if not gone:
            return None
        x = groups[0].x  # (forget the pairs due again: the dict stays as small as the groups)
        self.apart = {pair: line for pair, line in self.apart.items() if line > x}
        index: dict[int, int] = {}
        kept: list[Group] = []
        for k, grp in enumerate(groups):
            if k not in gone:
                index[k] = len(kept)
                kept.append(grp)
        self.groups[:] = kept
        out = [(e, index[k]) for e, k in heap if k not in gone]
        heapq.heapify(out)
        return out

    # ------------------------------------------------------------ the general loop
    def issue(self) -> None:
        """Grant every line of the current task: the aggregate bucket arbitrates each cycle."""
        groups = self.groups
        ncores = self.ncores
        one, big_r = RATE_ONE, self.big_r
        heap = self.heap()
        ticks, next_try, backoff, waits = 0, 0, 8, 0
        first = groups[0]  # the general loop's period search looks after its grants
        seen: dict[tuple[object, ...], Joint] = {}
        token_try = 0
        while heap:
            if (
                self.fast
                and len(heap) > 1
                and first.g_prev == self.last
                and first.issuing
                and not first.x % JOINT_EVERY
            ):
                merged = self.merge(heap)
                if merged is not None:  # groups that met in one state go on as one
                    heap = merged  # (the period search goes on: its key names the members)
                    if len(heap) < 2:
                        continue
                if first.x >= token_try:  # every group paced by its token bucket alone
                    jumped = self.joint_token(heap, self.last)
                    if jumped is not None:
                        heap = jumped
                        seen.clear()
                        continue
                    token_try = first.x + TOKEN_RETRY
                key = self.joint_key(heap, self.last)
                if key is not None:
                    hit = seen.get(key)
                    jumped = None if hit is None else self.joint_jump(heap, self.last, hit)
                    if jumped is not None:
                        heap = jumped
                        seen.clear()
                        continue
                    if len(seen) > 1 << 15:
                        seen.clear()
                    order = sorted(k for _, k in heap)
                    seen[key] = (
                        self.last,
                        [groups[k].x for k in order],
                        [(groups[k].zero, dict(groups[k].zoff)) for k in order],
                    )
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
            total = 0
            for k in asking:
                total += len(groups[k].members)
            if total <= cap:  # room for every port that asks: the pointer passes the farthest
                self.rr = (rr + max(self.table(groups[k].members)[rr] for k in asking) + 1) % ncores
                self.bank = min(avail - total * one, one)
                for k in asking:
                    grp = groups[k]
                    grp.grant(c)
                    if grp.issuing:
                        heapq.heappush(heap, (grp.earliest(), k))
                continue
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


def run(
    hyp: Hypothesis,
    geom: Geometry,
    settings: Settings,
    job: Job,
    backpressure: Backpressure | None = None,
    *,
    keep_lines: bool = False,
    skip: bool = True,
    share: bool = True,
) -> ModelResult:
    """Every core's counters after the job, advancing from grant to grant (exact).

    keep_lines: also return every line's grant and drain cycles (memory grows
    with the transfer; without it the run is O(1) in memory). skip=False
    steps every grant of every group (the same results in linear time: the
    tests hold the shortcuts to it). share=False gives every core its own
    group, even cores whose work differs only in its bases (the tests hold
    the sharing to it).
    """
    check(job, settings, geom)
    return Engine(hyp, geom, settings, job, backpressure, keep_lines, skip, share).run()


def _next_accept(groups: list[Group], j: int, prev_accept: int) -> tuple[int, bool]:
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
