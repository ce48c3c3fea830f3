"""Choosing a plan: predict every candidate, take the simplest of the fastest, check it, explain it.

Why in two engines. The search runs every candidate on the analytic engine
(closed form, O(1) in the transfer size), so any legal shape plans in well
under a second; the chosen plan, the unsplit weight, the fixed hardware and
the two best rejected alternatives are then run on the engine the user asked
for, and those are the times reported. If the analytic engine has no closed
form for the hypothesis, the search runs on the user's engine instead (and
the row says so).

The rule (the issue's, in one place):

* among the candidates predicted within TIE (0.5%) of the fastest, take the
  fewest tasks, then no change before a bit-exact cut (cout, shards) before
  partial sums (cin), then the cut whose tasks sit farthest from the notch
  (the measured V's width is known only to its edges), then the faster;
* the weight is affected when that plan beats the unsplit weight by more
  than GAIN (1%) on the reporting engine, on the times as printed; a plan
  that gains less is not worth a rewrite and the weight stays whole.

Time of a plan: one request (the chip's per-request overhead plus
streaming). For an LM head of N shards the shards stream back to back in
one request; its time is taken as t1 + (N - 1)(t2 - t1), with t1 and t2 one
and two shards' worth, so no engine ever streams the whole head (each extra
shard costs its marginal time, as in the decode estimate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from ane_kdma import bands, contract, runner
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import lap_and_offset
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.plan.search import (
    AXIS_RANK,
    DEFAULT_AXIS,
    MAX_PARTS,
    SHARD_REACH,
    Candidate,
    candidates,
    unsplit,
)
from ane_kdma.plan.weight import Weight, dtype_name, in_window, lines_of, window_lines

SEARCH_ENGINE = "analytic"
TIE = 0.005  # plans this close to the fastest count as equally fast
GAIN = 0.01  # a plan must beat the unsplit weight by more than this to be applied
DIGITS = 3  # µs are reported (and compared) to this many decimals
ALTERNATIVES = 2


@dataclass(frozen=True)
class Timing:
    """One instance of a plan streamed once, and (when asked) twice back to back."""

    once_us: float
    twice_us: float | None = None
    floor_us: float = 0.0  # one instance's bytes at the chip's DRAM ceiling

    def request_us(self, count: int) -> float:
        """`count` instances back to back in one request: each extra one at its marginal time."""
        if count == 1:
            return self.once_us
        return self.once_us + (count - 1) * self.marginal_us

    @property
    def marginal_us(self) -> float:
        if self.twice_us is None:
            raise ValueError("marginal time needs the two-copy run")
        # the difference of two capped times is not capped itself: hold it to the ceiling
        return max(self.twice_us - self.once_us, self.floor_us)


def workload(chunk_bytes: Sequence[int], chip: Chip, copies: int = 1) -> Workload:
    """Every core streams the chunks (as whole lines) back to back, `copies` times over."""
    sizes = [lines_of(b, chip) * chip.line_bytes for b in chunk_bytes] * copies
    return Workload.from_chunks(sizes, chip.cores, chip.line_bytes)


def timings(
    engine: str, h: Hypothesis, chip: Chip, cands: Sequence[Candidate], marginal: bool = False
) -> list[Timing]:
    """Each candidate on `engine`; two copies too where a head has shards or `marginal` asks."""
    loads: list[Workload] = []
    for c in cands:
        loads.append(workload(c.chunk_bytes, chip))
        if marginal or c.count > 1:
            loads.append(workload(c.chunk_bytes, chip, 2))
    results = iter(runner.run_many(engine, h, chip, loads))
    out = []
    for c in cands:
        first = next(results)
        twice = next(results).time_us if marginal or c.count > 1 else None
        floor = first.bytes_total / (chip.ceiling_gbps * 1e3)
        out.append(Timing(first.time_us, twice, floor))
    return out


def beats(after_us: float, before_us: float) -> bool:
    """More than GAIN faster, on the times as reported."""
    return round(after_us, DIGITS) < (1 - GAIN) * round(before_us, DIGITS)


# ---------------------------------------------------------------- search and decision


@dataclass(frozen=True)
class Search:
    """Every candidate with its predicted request time, fastest first, and the pick."""

    ranked: tuple[tuple[Candidate, float], ...]
    proposed: Candidate
    clears: bool  # the splits offered all clear the window
    engine: str
    axis: str = DEFAULT_AXIS  # the axis searched

    @property
    def best_us(self) -> float:
        return self.ranked[0][1]

    def predicted(self, c: Candidate) -> float:
        return next(t for cand, t in self.ranked if cand == c)


def search(
    w: Weight, chip: Chip, h: Hypothesis, fallback_engine: str, axis: str = DEFAULT_AXIS
) -> Search:
    """Predict every candidate along `axis` and apply the tie rule (see the module docstring)."""
    cands, clears = candidates(w, chip, axis)
    engine = SEARCH_ENGINE
    try:
        times = timings(engine, h, chip, cands)
    except InputError:  # no closed form for this hypothesis: search where the user asked
        if fallback_engine == SEARCH_ENGINE:
            raise
        engine = fallback_engine
        times = timings(engine, h, chip, cands)
    ranked = sorted(
        ((c, t.request_us(c.count)) for c, t in zip(cands, times, strict=True)),
        key=lambda ct: ct[1],
    )
    best = ranked[0][1]
    eligible = [ct for ct in ranked if ct[1] <= best * (1 + TIE)]
    proposed = min(
        eligible,
        key=lambda ct: (ct[0].tasks, AXIS_RANK[ct[0].axis], -ct[0].clearance(chip), ct[1]),
    )[0]
    return Search(tuple(ranked), proposed, clears, engine, axis)


@dataclass(frozen=True)
class Decision:
    """The search's pick, checked on the reporting engine."""

    weight: Weight
    search: Search
    before: Candidate
    chosen: Candidate  # == before when the weight is not affected
    time_before: Timing
    time_after: Timing
    affected: bool
    engine: str

    @property
    def before_us(self) -> float:
        return self.time_before.request_us(self.before.count)

    @property
    def after_us(self) -> float:
        return self.time_after.request_us(self.chosen.count)


def decide(
    w: Weight,
    chip: Chip,
    h: Hypothesis,
    engine: str = "model",
    marginal: bool = False,
    axis: str = DEFAULT_AXIS,
) -> Decision:
    """Search along `axis`, run the unsplit weight and the pick on `engine`, apply the GAIN rule."""
    check = contract.check_engine(engine)
    w.check(chip)
    s = search(w, chip, h, check, axis)
    before = unsplit(w, chip)
    split = s.proposed != before
    ts = timings(check, h, chip, [before, s.proposed] if split else [before], marginal)
    t_before, t_after = ts[0], ts[-1]
    affected = split and beats(t_after.request_us(s.proposed.count), t_before.request_us(w.shards))
    chosen = s.proposed if affected else before
    return Decision(
        weight=w,
        search=s,
        before=before,
        chosen=chosen,
        time_before=t_before,
        time_after=t_after if affected else t_before,
        affected=affected,
        engine=check,
    )


def retime(
    decisions: Sequence[Decision], chip: Chip, h: Hypothesis, marginal: bool = False
) -> list[Decision]:
    """The same plans timed on `chip` (a band's member): what each decided is kept.

    One engine call for every decision's candidates, so a band costs one call per member.
    """
    if not decisions:
        return []
    cands: list[Candidate] = []
    for d in decisions:
        cands += [d.before, d.chosen] if d.affected else [d.before]
    times = iter(timings(decisions[0].engine, h, chip, cands, marginal))
    out = []
    for d in decisions:
        before = next(times)
        out.append(replace(d, time_before=before, time_after=next(times) if d.affected else before))
    return out


# ---------------------------------------------------------------- the row


@dataclass(frozen=True)
class PlanRow:
    """One weight's plan, as `plan` prints it (architecture.md's contract plus context)."""

    shape: str
    dtype: str
    shards: int
    bytes_per_core: int
    lines_per_core: int
    k: int
    x: int
    in_window: bool
    affected: bool
    axis: str
    splits: int
    tasks: int
    chunk_bytes_per_core: list[int]
    time_us_before: float
    time_us_after: float
    time_us_fixed: float
    alternatives: list[dict[str, object]]
    variant: str
    engine: str
    search_engine: str
    search_axis: str  # the axis searched: patch's default unless --axis says otherwise
    explanation: list[str] = field(default_factory=list, compare=False)
    bands: dict[str, list[float]] = field(default_factory=dict)  # KEY_band: over the members

    def as_dict(self, explain: bool = False) -> dict[str, object]:
        d = asdict(self)
        if not explain:
            d.pop("explanation")
        return bands.merged(d, d.pop("bands"))


def plan_weight(
    w: Weight, chip: Chip, h: Hypothesis, engine: str = "model", axis: str = DEFAULT_AXIS
) -> PlanRow:
    """The plan for one weight along `axis` (the one `patch` would cut by default), with the
    fixed hardware's time and two rejected alternatives."""
    d = decide(w, chip, h, engine, axis=axis)
    alts = _alternatives(d, chip)

    def figures(c: Chip) -> tuple[dict[str, float], list[float]]:
        """The row's times on `c` (the profile or a band's member), for the plan decided."""
        on = retime([d], c, h)[0] if c is not chip else d
        fixed = timings(d.engine, hyps.get(hyps.FIXED), c, [d.before])[0]
        alt = timings(d.engine, h, c, alts) if alts else []
        times = {
            "time_us_before": on.before_us,
            "time_us_after": on.after_us,
            "time_us_fixed": fixed.request_us(w.shards),
        }
        return times, [t.request_us(a.count) for a, t in zip(alts, alt, strict=True)]

    (times, alt_us), others = bands.over(chip, figures)
    band = bands.spans(times, [o[0] for o in others], DIGITS)
    alt_bands = [
        bands.spans({"time_us": t}, [{"time_us": o[1][i]} for o in others], DIGITS)
        for i, t in enumerate(alt_us)
    ]
    lines = lines_of(d.before.chunk_bytes[0], chip)
    k, x = lap_and_offset(lines, chip.ring_lines)
    row = PlanRow(
        shape=str(w),
        dtype=dtype_name(w.bits),
        shards=w.shards,
        bytes_per_core=d.before.chunk_bytes[0],
        lines_per_core=lines,
        k=k,
        x=x,
        in_window=in_window(lines, chip),
        affected=d.affected,
        axis=d.chosen.axis,
        splits=d.chosen.splits,
        tasks=d.chosen.tasks,
        chunk_bytes_per_core=list(d.chosen.chunk_bytes),
        time_us_before=round(times["time_us_before"], DIGITS),
        time_us_after=round(times["time_us_after"], DIGITS),
        time_us_fixed=round(times["time_us_fixed"], DIGITS),
        alternatives=[
            bands.merged(
                {
                    "axis": a.axis,
                    "splits": a.splits,
                    "tasks": a.tasks,
                    "chunk_bytes_per_core": list(a.chunk_bytes),
                    "time_us": round(t, DIGITS),
                    "rejected": _reason(d, a),
                },
                ab,
            )
            for a, t, ab in zip(alts, alt_us, alt_bands, strict=True)
        ],
        variant=h.name,
        engine=d.engine,
        search_engine=d.search.engine,
        search_axis=d.search.axis,
        bands=band,
    )
    return _with_explanation(row, d, chip)


def _alternatives(d: Decision, chip: Chip) -> list[Candidate]:
    """The fastest of each other (axis, task count), best first: what the choice passed over."""
    taken = {(d.chosen.axis, d.chosen.tasks), ("none", d.before.tasks)}
    out: list[Candidate] = []
    order = sorted(
        d.search.ranked,
        key=lambda ct: (
            round(ct[1], DIGITS),
            ct[0].tasks,
            AXIS_RANK[ct[0].axis],
            -ct[0].clearance(chip),
        ),
    )
    for c, _ in order:
        key = (c.axis, c.tasks)
        if key not in taken:
            taken.add(key)
            out.append(c)
        if len(out) == ALTERNATIVES:
            break
    return out


def _pct(a: float, b: float) -> str:
    return f"{abs(a / b - 1) * 100:.1f}%"


def _reason(d: Decision, a: Candidate) -> str:
    """Why `a` lost, in the terms of the rule (predicted times, where the choice was made)."""
    s = d.search
    t = s.predicted(a)
    if a == s.proposed and not d.affected:
        return (
            f"predicted {_pct(t, s.predicted(d.before))} faster, but not more than "
            f"{GAIN:.0%} faster on the {d.engine} engine"
        )
    if t > s.best_us * (1 + TIE):
        return f"{_pct(t, s.best_us)} slower than the fastest plan"
    if not d.affected:
        return f"gains {_pct(t, s.predicted(d.before))}: a split must gain more than {GAIN:.0%}"
    if a.tasks > d.chosen.tasks:
        return f"as fast within {TIE:.1%}, but {a.tasks} tasks instead of {d.chosen.tasks}"
    if AXIS_RANK[a.axis] > AXIS_RANK[d.chosen.axis]:
        why = "changes the summation order" if a.axis == "cin" else "changes the shard layout"
        return f"as fast with as many tasks, but it {why}"
    return f"as fast with as many tasks, {_pct(t, s.predicted(d.chosen))} slower predicted"


def _with_explanation(row: PlanRow, d: Decision, chip: Chip) -> PlanRow:
    """The reasoning in words (`plan --explain`)."""
    w, s = d.weight, d.search
    ring, win = chip.ring_lines, window_lines(chip)
    head = f"{row.shape} ({row.dtype})"
    if w.shards > 1:
        head += f" as {w.shards} shards of {w.shard_shape}"
    where = "inside" if row.in_window else "outside"
    lines = [
        f"{head}: {row.bytes_per_core} B per core = {row.lines_per_core} lines = "
        f"{row.k} x {ring:#x} {row.x:+d}, {where} the +/-{win}-line window.",
        f"unsplit: {row.time_us_before} us on {row.variant} hardware ({row.engine} engine); "
        f"{row.time_us_fixed} us with the fix.",
    ]
    along = (
        f"Cout in whole {chip.cores}-channel groups"
        if s.axis == "cout"
        else "Cin in whole-line chunks (partial sums, patch's default axis)"
    )
    space = f"{along}, 2..{MAX_PARTS} tasks" + (
        f" per shard, or up to {SHARD_REACH} more shards" if w.shards > 1 else ""
    )
    cleared = (
        f"every task at least {win} lines from a multiple of {ring:#x}"
        if s.clears
        else "no cut clears the window, so near-equal cuts were tried as they are"
    )
    lines.append(
        f"searched {len(s.ranked)} plans on the {s.engine} engine ({space}; {cleared}); "
        f"fastest predicted: {s.ranked[0][0].describe(chip)}, {s.best_us:.3f} us."
    )
    if d.affected:
        exact = "bit-exact" if d.chosen.bit_exact else "changes the summation order"
        lines.append(
            f"chosen: {d.chosen.describe(chip)}: {row.time_us_after} us, "
            f"{_pct(row.time_us_after, row.time_us_before)} faster than unsplit ({exact}); "
            f"the fewest tasks among plans within {TIE:.1%} of the fastest, "
            f"then the farthest from the notch ({d.chosen.clearance(chip)} lines)."
        )
    elif s.proposed != d.before:
        lines.append(
            f"left whole: the best plan, {s.proposed.describe(chip)}, does not beat the "
            f"unsplit weight by more than {GAIN:.0%} on the {d.engine} engine."
        )
    else:
        lines.append(f"left whole: no plan is more than {TIE:.1%} faster than the unsplit weight.")
    for a, alt in zip(_alternatives(d, chip), row.alternatives, strict=True):
        lines.append(f"rejected: {a.describe(chip)}: {alt['time_us']} us, {alt['rejected']}.")
    return replace(row, explanation=lines)
