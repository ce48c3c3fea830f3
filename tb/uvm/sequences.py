"""Sequences: notch-focused, random sizes, split pairs, resets, multi-core, and the regression mix.

Every random choice comes from one ``random.Random`` per run, drawn in a fixed
order, so ``KDMA_SEED`` replays a run exactly.

Cost control (see knobs): a run is checked line by line in Python only when
its lines (all cores, both tasks of a pair) are at most ``line_check_lines``;
longer runs are checked by the HDL checker, the counters and the cycle model.
Big transfers take modest back-pressure, and external ready (Python drives it
every cycle) is used on line-checked runs only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from pyuvm import uvm_sequence

from ane_kdma import cyclemodel as cm
from ane_kdma.hw import LINE_ADDR_BITS, LINE_BYTES, RATE_ONE
from ane_kdma.hypotheses import Geometry, Hypothesis

from .covermodel import X_CLASSES, notch_classes
from .items import KdmaTaskItem
from .knobs import Knobs

MIB = 1 << 20
BIG_MAX_BYTES = 8 * MIB  # "uniformly random sizes up to 8 MiB per core"
SMALL_MAX_BYTES = 64 << 10
LINE_SPACE = 1 << LINE_ADDR_BITS


def random_settings(
    rng: random.Random, kmem_lines: int, multi: bool = False, governed: bool | None = None
) -> cm.Settings:
    """Run-time settings that keep runs short: notch slow-down at most ~3x.

    The window is at least a third of the latency, so even zero credit streams
    a third of a line per cycle. The aggregate ceiling never binds one core
    (>= 1 line/cycle); in the 16-core build it may (2..16 lines/cycle).
    """
    latency = rng.randint(4, 48)
    window = rng.randint(max(1, (latency + 1) // 3), min(kmem_lines, 2 * (latency + 1)))
    rate = rng.randint(RATE_ONE // 2, RATE_ONE)
    ramp = {}
    if governed if governed is not None else rng.random() < 0.3:  # the governor, from below
        ramp = {
            "ramp_start_q16": rng.randint(RATE_ONE // 4, rate - 1),
            "ramp_step_lines": rng.randint(1, 400),
            "ramp_inc_q16": rng.randint(1, RATE_ONE // 8),
        }
    return cm.Settings(
        latency=latency,
        window=window,
        core_rate_q16=rate,
        agg_rate_q16=rng.randint((2 if multi else 1) * RATE_ONE, 16 * RATE_ONE),
        **ramp,
    )


@dataclass
class SeqContext:
    """What every sequence needs: the run's random stream, the build, the chip and the knobs."""

    rng: random.Random
    hyp: Hypothesis
    geometry: Geometry
    build_cores: int
    knobs: Knobs
    chip_settings: cm.Settings  # the chip's fitted profile as run-time inputs
    # a warmed transfer of this run already has a warm-up boundary the counters show (warmed)
    boundary_shown: bool = False

    @property
    def ring_lines(self) -> int:
        return self.geometry.ring_lines

    def line_check(self, lines: int) -> bool:
        return lines <= self.knobs.line_check_lines

    def base_addr(self, lines: int) -> int:
        """A random 64-byte-aligned start; 1 in 20 crosses the top of the address space."""
        rng = self.rng
        if lines and rng.random() < 0.05:
            line = LINE_SPACE - rng.randint(1, min(lines, LINE_SPACE))
        else:
            line = rng.randrange(LINE_SPACE)
        return line * LINE_BYTES

    def size_bytes(self, lines: int) -> int:
        """`lines` lines, half the time with a partial last line."""
        if lines == 0 or self.rng.random() < 0.5:
            return lines * LINE_BYTES
        return lines * LINE_BYTES - self.rng.randrange(1, LINE_BYTES)

    def backpressure(self, lines: int, p: float = 1 / 3) -> cm.Backpressure | None:
        """LFSR back-pressure with probability p; long runs get a mild one."""
        rng = self.rng
        if rng.random() >= p:
            return None
        top = 200 if lines <= 20_000 else 64
        return cm.Backpressure(seed=rng.randrange(1, 1 << 16), threshold=rng.randrange(1, top))


class KdmaSeq(uvm_sequence):
    """Base: owns the context and sends items."""

    def __init__(self, name: str, ctx: SeqContext, count: int = 1) -> None:
        super().__init__(name)
        self.ctx = ctx
        self.count = count

    async def send(self, item: KdmaTaskItem) -> None:
        await self.start_item(item)
        await self.finish_item(item)

    def task(self, lines: int, **kw) -> KdmaTaskItem:
        """A task item of `lines` lines per core with random start, size rounding and settings."""
        ctx = self.ctx
        cores = kw.pop("cores", 1)
        kw.setdefault("base_addr", ctx.base_addr(lines * cores))
        kw.setdefault("size_bytes", ctx.size_bytes(lines))
        kw.setdefault("line_check", ctx.line_check(lines * cores))
        return KdmaTaskItem(self.get_name(), hyp=ctx.hyp, cores=cores, **kw)


def _boundary(
    s: cm.Settings,
    lines: int,
    hyp: Hypothesis,
    geometry: Geometry,
    backpressure: cm.Backpressure | None,
    extra: int,
) -> int | None:
    """The first of a few warm-up lengths (whole windows) at which one line more changes the
    cycle model's counters on this transfer under this back-pressure; None if none does."""
    first = s.window * -(-(1 + lines % 997 * 13) // s.window)
    job = [[(0, lines)]]
    for length in range(first, first + 8 * s.window, s.window):
        if length + 1 >= lines:
            break
        a, b = (
            cm.run(
                hyp,
                geometry,
                replace(s, dwarm_lines=n, dwarm_extra_cycles=extra),
                job,
                backpressure,
            ).cores[0]
            for n in (length, length + 1)
        )
        if a != b:
            return length
    return None


def warmed(
    s: cm.Settings,
    lines: int,
    hyp: Hypothesis,
    geometry: Geometry,
    backpressure: cm.Backpressure | None,
    search: bool = True,
) -> tuple[cm.Settings, cm.Backpressure | None, bool]:
    """`s` with the demand path's warm-up on, and the back-pressure to run it under: the
    warm-up's length and extra latency (1..97 cycles) follow from the size and the cycle
    model, so the run's random stream is not drawn.

    The length is chosen so that the warm-up's last line decides the counters: a starved
    stream goes out in waves of `window` lines, each wave waiting for the one before it to
    drain, and one line more under the warm-up changes the run only where that line ends a
    wave (the next wave then pays the extra latency whole); off a wave's end the shift is lost
    in the in-order drain. So the length is a whole number of windows (about 1..13 000
    starved lines), the first of a few such lengths at which the cycle model, run on this
    transfer and back-pressure, gives different counters for one line more. Without that, a
    one-line error in the warm-up's length went unseen on the signed reading (starved only at a
    whole number of laps, every line of the transfer) whatever length the plan drew.

    Heavy back-pressure can hide every such boundary: when the memory port refuses most
    cycles, the port, not the window's waves, paces the starved stream, and one line more
    under the warm-up is lost in it (seed 1 on Icarus drew such a back-pressure for the one
    starved transfer of its plan, and a one-line error in the warm-up's length survived). A
    transfer with a boundary without back-pressure, and none under the drawn one, runs
    without it; back-pressure stays on every other transfer.

    One such transfer in a run is enough: the scoreboard holds every transfer to the cycle
    model exactly, so a one-line error shows on it. With `search` off (the run has one
    already) the length is the first whole-window one, with no model runs: the search is two
    to thirty-two runs of a transfer of up to eight laps in the Python cycle model, and it
    was about 70% of a pyuvm regression's CPU time when every warmed transfer searched (a
    transfer that shows a boundary did so at the first length in every case seen). The third
    value says whether this transfer shows one.
    """
    extra = 1 + lines % 97
    first = s.window * -(-(1 + lines % 997 * 13) // s.window)
    if not search:
        return replace(s, dwarm_lines=first, dwarm_extra_cycles=extra), backpressure, False
    length = _boundary(s, lines, hyp, geometry, backpressure, extra)
    if length is None and backpressure is not None:
        length = _boundary(s, lines, hyp, geometry, None, extra)
        if length is not None:
            backpressure = None
    shown = length is not None
    if length is None:
        length = first
    return replace(s, dwarm_lines=length, dwarm_extra_cycles=extra), backpressure, shown


class NotchSeq(KdmaSeq):
    """Transfers of k rings + x lines, x drawn from one offset class per transfer.

    ``bins`` lists (k, class) pairs to visit in order (the sweep that closes
    every notch bin); without it, `count` transfers draw k from 0..k_draw.
    Transfers within 31 lines of a lap run under the chip's settings with the
    demand path's warm-up on (a starved request's first lines pay more latency).
    """

    def __init__(
        self,
        name: str,
        ctx: SeqContext,
        count: int = 1,
        bins: list[tuple[int, str]] | None = None,
        k_draw: int = 1,
    ) -> None:
        super().__init__(name, ctx, count)
        self.bins = bins
        self.k_draw = k_draw

    async def body(self) -> None:
        rng = self.ctx.rng
        todo = self.bins
        if todo is None:
            todo = []
            for _ in range(self.count):
                k = rng.randint(0, self.k_draw)
                todo.append((k, rng.choice(notch_classes(k))))
        bounds = {name: (lo, hi) for name, lo, hi in X_CLASSES}
        for k, cls in todo:
            lo, hi = bounds[cls]
            x = rng.randint(lo, hi)
            lines = k * self.ctx.ring_lines + x
            bp = self.ctx.backpressure(lines, p=0.25)
            ctx = self.ctx
            kw = {}
            if k and abs(x) < 32:
                kw["settings"], bp, shown = warmed(
                    ctx.chip_settings, lines, ctx.hyp, ctx.geometry, bp, not ctx.boundary_shown
                )
                ctx.boundary_shown |= shown
            await self.send(self.task(lines, backpressure=bp, **kw))


class RandomSizeSeq(KdmaSeq):
    """Sizes uniformly random in 0..max_bytes per core; some with their own settings."""

    def __init__(
        self,
        name: str,
        ctx: SeqContext,
        count: int = 1,
        max_bytes: int = SMALL_MAX_BYTES,
        bp: str | None = None,
        wrap: bool = False,
        governed: bool = False,
    ) -> None:
        super().__init__(name, ctx, count)
        self.max_bytes = max_bytes
        self.bp = bp  # None: random; "lfsr" or "ext": forced
        self.wrap = wrap  # force a crossing of a ring boundary
        self.governed = governed  # force settings whose governor ramps from below the rate

    async def body(self) -> None:
        ctx = self.ctx
        rng = ctx.rng
        for _ in range(self.count):
            size = rng.randint(0, self.max_bytes)
            lines = -(-size // LINE_BYTES)
            if self.wrap:
                lines = max(lines, 2)
                size = max(size, 2 * LINE_BYTES)
            kw: dict = {"size_bytes": size}
            if self.wrap:
                # start 1..lines-1 lines below a ring boundary
                ring = ctx.ring_lines
                boundary = rng.randrange(1, LINE_SPACE // ring) * ring
                kw["base_addr"] = (boundary - rng.randint(1, lines - 1)) * LINE_BYTES
            line_check = ctx.line_check(lines)
            if self.bp is None:
                bp = ctx.backpressure(lines)
                ext = bp is not None and line_check and rng.random() < 0.3
            else:
                bp = cm.Backpressure(rng.randrange(1, 1 << 16), rng.randrange(1, 160))
                if lines > 20_000:
                    bp = cm.Backpressure(bp.seed, 1 + bp.threshold % 63)  # mild on long runs
                ext = self.bp == "ext"
            roll = rng.random()
            if self.governed:
                kw["settings"] = random_settings(rng, ctx.geometry.kmem_lines, governed=True)
            elif roll < 0.15:
                kw["settings"] = random_settings(rng, ctx.geometry.kmem_lines)
            elif roll < 0.2 and lines <= 4096:
                kw["settings"] = ctx.chip_settings  # the chip's fitted profile
            await self.send(self.task(lines, backpressure=bp, ext_ready=ext, **kw))


class SplitPairSeq(KdmaSeq):
    """The split workaround: one transfer given as two tasks back to back on core 0.

    The second task starts where the first ends and is offered while the first
    still drains (start_i held high). Half the pairs split a transfer near a
    notch (k <= 1) in two equal halves, as the erratum's workaround does.
    """

    async def body(self) -> None:
        ctx = self.ctx
        rng = ctx.rng
        for _ in range(self.count):
            if ctx.knobs.k_max >= 1 and rng.random() < 0.5:
                total = ctx.ring_lines + rng.randint(-300, 300)
                first = total // 2
            else:
                total = rng.randint(2, 6000)
                first = rng.randint(1, total - 1)
            second = total - first
            bp = ctx.backpressure(total)
            ext = bp is not None and ctx.line_check(total) and rng.random() < 0.3
            check = ctx.line_check(total)
            base = ctx.base_addr(total)
            a = self.task(
                first,
                base_addr=base,
                size_bytes=first * LINE_BYTES,
                backpressure=bp,
                ext_ready=ext,
                line_check=check,
            )
            b = self.task(
                second,
                base_addr=(base + first * LINE_BYTES) % (LINE_SPACE * LINE_BYTES),
                size_bytes=ctx.size_bytes(second),
                backpressure=bp,
                ext_ready=ext,
                line_check=check,
                chained=True,
            )
            await self.send(a)
            await self.send(b)


class ResetSeq(KdmaSeq):
    """A transfer cut short by a reset somewhere in its first `lines` cycles."""

    async def body(self) -> None:
        ctx = self.ctx
        rng = ctx.rng
        for _ in range(self.count):
            lines = rng.randint(64, 4096)
            await self.send(
                self.task(
                    lines,
                    backpressure=ctx.backpressure(lines),
                    reset_at=rng.randint(1, lines),
                )
            )


class MultiCoreSeq(KdmaSeq):
    """Tasks on 1..16 cores of the 16-core build: 16, 1 and 2..15 first, then random."""

    async def body(self) -> None:
        ctx = self.ctx
        rng = ctx.rng
        top = ctx.knobs.multi_max_lines
        for n in range(self.count):
            cores = (16, 1, rng.randint(2, 15))[n] if n < 3 else rng.choice((1, 4, 8, 16, 16))
            cores = min(cores, ctx.build_cores)
            lines = rng.randint(0, top)
            bp = ctx.backpressure(lines * cores)
            ext = bp is not None and ctx.line_check(lines * cores) and rng.random() < 0.3
            multi = rng.random() < 0.5
            settings = random_settings(rng, ctx.geometry.kmem_lines, True) if multi else None
            await self.send(
                self.task(lines, cores=cores, backpressure=bp, ext_ready=ext, settings=settings)
            )


class RegressionSeq(KdmaSeq):
    """The single-core build's mix: the notch sweep, the directed transfers, then random steps.

    `count` is the number of transfers (a split pair counts two). The sweep
    visits every (k, x class) bin once; the directed transfers close the other
    bins (LFSR and external back-pressure, the latter under a governor that
    ramps from below the core rate, a ring-wrap crossing, a reset, a split
    pair, and one random size up to 8 MiB). The rest is drawn by weight.
    """

    async def body(self) -> None:
        ctx = self.ctx
        rng = ctx.rng
        k_max = ctx.knobs.k_max
        sweep = [(k, c) for k in range(k_max + 1) for c in notch_classes(k)]
        rng.shuffle(sweep)
        steps: list[KdmaSeq] = [
            NotchSeq("notch_sweep", ctx, bins=sweep),
            RandomSizeSeq("directed_lfsr", ctx, max_bytes=BIG_MAX_BYTES, bp="lfsr"),
            RandomSizeSeq("directed_ext", ctx, max_bytes=SMALL_MAX_BYTES, bp="ext", governed=True),
            RandomSizeSeq("directed_wrap", ctx, max_bytes=SMALL_MAX_BYTES, wrap=True),
            ResetSeq("directed_reset", ctx),
            SplitPairSeq("directed_split", ctx),
        ]
        left = self.count - len(sweep) - 6
        kinds = (
            ("small", 0.38),
            ("big", 0.03 if ctx.knobs.heavy else 0.0),
            ("notch", 0.22),
            ("split", 0.15),
            ("reset", 0.1),
            ("wrap", 0.12),
        )
        names, weights = zip(*kinds, strict=True)
        extra: list[KdmaSeq] = []
        while left > 0:
            kind = rng.choices(names, weights)[0]
            if kind == "split" and left < 2:
                kind = "small"
            if kind == "small":
                extra.append(RandomSizeSeq("random_small", ctx))
            elif kind == "big":
                extra.append(RandomSizeSeq("random_big", ctx, max_bytes=BIG_MAX_BYTES))
            elif kind == "notch":
                # laps above 1 cost k x 16k lines each: a quarter of the draws, full runs only
                wide = ctx.knobs.full and ctx.knobs.heavy and rng.random() < 0.25
                extra.append(NotchSeq("notch_random", ctx, k_draw=k_max if wide else min(1, k_max)))
            elif kind == "split":
                extra.append(SplitPairSeq("split_pair", ctx))
            elif kind == "reset":
                extra.append(ResetSeq("reset_mid_task", ctx))
            else:
                extra.append(RandomSizeSeq("ring_wrap", ctx, wrap=True))
            left -= 2 if kind == "split" else 1
        steps += extra
        rng.shuffle(steps)
        for step in steps:
            await step.start(self.sequencer)
