"""A fit from a handful of figures: free only what the data can pin, the rest from a prior chip.

``calibrate --chip DIR --prior m3`` reads DIR's timed convolutions (``timings.json``,
translated once into validate's checks) and a prior chip's profile. Three figures can pin
three numbers, so three are free:

* ``predict_overhead_us``, the host's cost per Core ML prediction, which a predict-timed
  figure includes and an ANE task time does not (fitted, never folded into a rate);
* ``window_lines``, the demand window, which sets how fast a starved transfer streams and
  so how fast the notch's time grows with size;
* the notch depth, the prior mechanism's per-request warm-up of the starved path
  (:data:`DEPTH`), which deepens the notch without touching a transfer off it.

Everything else (latency, rate and its governor, the warm-up's length, the reading) is the
prior's, and the profile says so field by field. The search scans the window; at each one
the time is linear in the depth and the overhead adds, so the two follow by least squares
on relative error, then the depth is rounded and the overhead re-solved on exact times.
The intervals are the span of the fits that pass: from the best window outwards, line by
line, every window whose own least-squares fit meets each figure within validate's point
band (no fit that passes: refused, naming the figure); those fits are the profile's members
(up to 31, evenly spread), so a prediction's band runs each of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.chip import Chip
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.profile import MAX_MEMBERS, Profile, Uncertainty
from ane_kdma.validate import base as vbase
from ane_kdma.validate import specs as vspecs
from ane_kdma.validate.specs import Bands, Check

ENGINE = "analytic"  # closed form: O(1) in the size, exact to the cycle model's static readings
DEPTH = "dwarm_extra_cycles"  # the notch depth: the starved path's per-request warm-up
WINDOW = "window_lines"
OVERHEAD = "predict_overhead_us"
FREE = (OVERHEAD, WINDOW, DEPTH)
COARSE = 64  # the window's coarse scan: this many windows across the chip's KMem
REFINE = 3  # then every window around this many of the best coarse ones (the time is not
#             smooth in the window: a single best can sit beside a deeper minimum)
PROBE_DEPTH = 1000  # cycles: the second point of the time's line in the depth


@dataclass(frozen=True)
class Candidate:
    window: int
    depth: int
    overhead_us: float
    errors: tuple[float, ...]  # relative, each figure

    @property
    def worst(self) -> float:
        return max(abs(e) for e in self.errors)


def checks(chip: Chip, band: Bands) -> list[Check]:
    """The chip's timed figures as validate's checks (the one translation of them)."""
    return [c for c in vbase.measured_checks(chip, chip.measured, band) if c.dataset == "timings"]


def start(chip: Chip, prior: Chip) -> Profile:
    """The prior's profile on this chip: its ceiling and clock, every other field kept."""
    p = prior.profile
    if DEPTH not in mechs.get(p.mechanism).inputs:
        raise InputError(
            f"--prior {prior.name}: its profile's mechanism {p.mechanism!r} has no {DEPTH} "
            "to carry the notch depth (fit the prior with the demand path's warm-up)"
        )
    return replace(
        p,
        name=chip.name,
        ceiling_gbps=chip.ceiling_gbps,
        ns_per_cycle=chip.ns_per_cycle_hand_set,
        notes={},
        uncertainty=None,
    )


def _depth(value: int) -> dict[str, Any]:
    return {DEPTH: value}


def _times(chip: Chip, prof: Profile, figs: Sequence[Check]) -> np.ndarray:
    ch = chip.with_profile(prof)
    h = hyps.get(prof.hypothesis)
    lb = ch.line_bytes
    out = []
    for c in figs:
        load = (
            Workload.from_size(c.parts[0] * lb, ch.cores, 1, lb)
            if len(c.parts) == 1
            else Workload.from_chunks([p * lb for p in c.parts], ch.cores, lb)
        )
        out.append(contract.run(ENGINE, h, ch, load).time_us)
    return np.array(out)


def _solve(a: np.ndarray, b: np.ndarray, m: np.ndarray, calls: np.ndarray, hi: int) -> tuple:
    """Least squares on relative error of  calls * c + a + b * depth = m,  c >= 0, depth in
    [0, hi]: the overhead and the depth at one window."""
    A = np.stack([calls / m, b / m], axis=1)
    y = (m - a) / m
    sol, *_ = np.linalg.lstsq(A, y, rcond=None)
    c, d = float(sol[0]), float(sol[1])
    d = min(max(d, 0.0), float(hi))
    if c < 0 or not calls.any():
        c = 0.0
    return c, d


def _overhead(t: np.ndarray, m: np.ndarray, calls: np.ndarray) -> float:
    """The per-call overhead that best closes exact times to the figures (relative LS)."""
    if not calls.any():
        return 0.0
    w = calls / m**2
    return max(0.0, float(np.sum(w * (m - t)) / np.sum(w * calls)))


def candidate(chip: Chip, base: Profile, figs: Sequence[Check], window: int) -> Candidate:
    """The least-squares fit at one window, on exact times after rounding the depth."""
    m = np.array([c.value for c in figs])
    calls = np.array([1.0 if c.per_call else 0.0 for c in figs])
    hi = next(i.hi for i in mechs.inputs() if i.name == DEPTH)
    p0 = replace(base, window_lines=window, **_depth(0))
    a = _times(chip, p0, figs)
    b = (_times(chip, replace(p0, **_depth(PROBE_DEPTH)), figs) - a) / PROBE_DEPTH
    _, d = _solve(a, b, m, calls, hi)
    depth = int(round(d))
    t = _times(chip, replace(p0, **_depth(depth)), figs)
    c = _overhead(t, m, calls)
    return Candidate(window, depth, round(c, 3), tuple(float(x) for x in (t + c * calls) / m - 1))


def _sse(c: Candidate) -> float:
    return sum(e * e for e in c.errors)


def fit_prior(chip: Chip, prior: Chip, band: Bands | None = None) -> Profile:
    """The chip's profile from its timed figures and the prior's profile (module doc)."""
    band = band if band is not None else vspecs.bands()
    figs = checks(chip, band)
    if chip.measured.timings is None:
        raise InputError(
            f"{chip.path.name}/measured: no timings.json (timed convolutions) to fit with a prior"
        )
    if len(figs) < len(FREE):
        raise InputError(
            f"{chip.path.name}/measured/timings.json: rows: {len(figs)} timed figures cannot "
            f"pin {len(FREE)} free parameters ({', '.join(FREE)})"
        )
    if not any(c.per_call for c in figs):
        raise InputError(
            f"{chip.path.name}/measured/timings.json: method: not coreml-predict, so no "
            "per-prediction overhead to fit; calibrate without --prior fits task times"
        )
    base = start(chip, prior)
    top = chip.geometry.kmem_lines
    tol = band.point
    step = max(1, top // COARSE)
    coarse = {w: candidate(chip, base, figs, w) for w in range(step, top + 1, step)}
    seen = dict(coarse)
    for w0 in sorted(coarse, key=lambda w: (_sse(coarse[w]), w))[:REFINE]:
        for w in range(max(1, w0 - step), min(top, w0 + step) + 1):
            seen.setdefault(w, candidate(chip, base, figs, w))
    best = min(seen.values(), key=lambda c: (_sse(c), c.window))
    if best.worst > tol:
        i = max(range(len(figs)), key=lambda j: abs(best.errors[j]))
        raise InputError(
            f"{chip.path.name}/measured/timings.json: rows: no fit meets every figure within "
            f"+-{100 * tol:g}% ({figs[i].key} is off by {100 * best.errors[i]:+.1f}% at best); "
            f"the fields kept from {prior.name} (latency, rate) may not hold for this chip"
        )
    passing = [best]
    for step in (-1, 1):  # out from the best window, one line at a time, while fits pass
        w = best.window + step
        while 1 <= w <= top:
            c = seen.get(w) or candidate(chip, base, figs, w)
            seen[w] = c
            if c.worst > tol:
                break
            passing.append(c)
            w += step
    return _profile(chip, prior, base, figs, best, passing, tol)


def _profile(
    chip: Chip,
    prior: Chip,
    base: Profile,
    figs: Sequence[Check],
    best: Candidate,
    passing: list[Candidate],
    tol: float,
) -> Profile:
    passing.sort(key=lambda c: c.window)
    keep = passing
    if len(passing) > MAX_MEMBERS:  # evenly spread, the two ends kept
        idx = np.linspace(0, len(passing) - 1, MAX_MEMBERS).round().astype(int)
        keep = [passing[i] for i in dict.fromkeys(idx.tolist())]
    members = tuple(
        {WINDOW: c.window, DEPTH: c.depth, OVERHEAD: c.overhead_us} for c in keep if c is not best
    )

    def span(get: object) -> tuple[float, float]:
        vals = [get(c) for c in passing]  # type: ignore[operator]
        return (float(min(vals)), float(max(vals)))

    intervals = {
        OVERHEAD: span(lambda c: c.overhead_us),
        WINDOW: span(lambda c: c.window),
        DEPTH: span(lambda c: c.depth),
    }
    p = prior.profile
    what = ", ".join(f"{c.key} {c.value:g} us" for c in figs)
    free = {
        OVERHEAD: "the control's time off the notch, less the prior's stream time: what a "
        "Core ML prediction costs the host beyond the ANE's task (in every predict-timed "
        "figure, in no task time)",
        WINDOW: "the notch's growth with size (1 MiB to 2 MiB per core at x = 0): the starved "
        "stream's rate, window / latency",
        DEPTH: "the notch at 1 MiB per core against the control: the starved path's "
        "per-request warm-up",
    }
    kept_fields = [
        f
        for f in ("latency_cycles", "core_rate_q16", "overhead_us", "dwarm_lines")
        + tuple(i for i in mechs.get(p.mechanism).inputs if i not in FREE and i != "dwarm_lines")
    ]
    why = {
        "core_rate_q16": "the control fixes the call overhead plus the stream time off the "
        "notch, not the two apart; kept, as anemll-bench's ANE streaming on an M4 (64.18 GB/s) "
        "is within 2% of the M3's (63.10 GB/s)",
        "overhead_us": "the ANE's per-request cost: every figure adds it with the call "
        "overhead, so the data cannot tell the two apart; the free call overhead takes the rest",
    }
    kept = {
        f: f"{getattr(p, f)} from {prior.name}: "
        + why.get(
            f,
            f"{len(figs)} figures pin {len(FREE)} numbers; this one is not among those the "
            "figures separate (it moves the same times as a free one)",
        )
        for f in kept_fields
    }
    kept["hypothesis"] = f"{p.hypothesis}, the prior's reading: three figures cannot rank readings"
    notes = {
        "status": f"fitted by `ane-kdma calibrate --chip {chip.path.name} --prior {prior.name}` "
        "(deterministic); regenerate, do not hand-edit",
        "source": f"measurements: {chip.path.name}/measured/timings.json ({what}), "
        f"{figs[0].provenance.split('(', 1)[-1].rstrip(')')}",
        "prior": f"{prior.name}'s profile ({prior.path.name}/profile.json): every field not "
        "listed free in uncertainty.free is its value",
        "residuals": ", ".join(
            f"{c.key} {100 * e:+.1f}%" for c, e in zip(figs, best.errors, strict=True)
        ),
        "hand_set": f"ns_per_cycle = {chip.ns_per_cycle_hand_set:g} and ceiling_gbps = "
        f"{chip.ceiling_gbps:g} from chip.json",
    }
    prof = replace(
        base,
        window_lines=best.window,
        predict_overhead_us=best.overhead_us,
        notes=notes,
        **_depth(best.depth),
    )
    unc = Uncertainty(
        method=f"the least-squares fit at each demand window from the best one outwards, line "
        f"by line, while it meets each of the {len(figs)} figures within validate's "
        f"+-{100 * tol:g}% point band; intervals span those fits ({len(passing)}), members "
        f"are {len(members)} of them",
        intervals=intervals,
        members=members,
        free=free,
        kept=kept,
    )
    return replace(prof, uncertainty=unc)
