"""A fit's notes, its confirmation against the analytic engine, and its reports."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from ane_kdma import analytic, runner
from ane_kdma import hypotheses as hyps
from ane_kdma import mechanisms as mechs
from ane_kdma.calibrate.engine import ANALYTIC_TOL, exact_engine, takes_engine
from ane_kdma.calibrate.exact import Calibration, Residual
from ane_kdma.calibrate.problem import DATASETS, Problem, problem
from ane_kdma.chip import MEASURED_DIR, Chip, chips_dir
from ane_kdma.contract import Workload
from ane_kdma.hw import RATE_ONE
from ane_kdma.measured import Measurements
from ane_kdma.profile import Profile, Settings
from ane_kdma.validate import specs as vspecs

# the demand warm-up's closed form on a static reading: within 2 cycles of the cycle model
# (its fluid token's rounding; analytic.governor_grid, tests/test_analytic.py)
WARM_CYCLES = 2


def static_slack(settings: Settings) -> int:
    """Cycles the analytic engine may miss a static reading by, as it states its accuracy.

    Exact without the governor; with it, the fluid token costs are within a cycle per
    rate step (:func:`ane_kdma.analytic.static_ramp_cycles`; tests/test_analytic.py holds
    exactness only without a ramp); with the demand warm-up, within WARM_CYCLES.
    Why not 0 for every ramp: a fitted paged x ramp profile lands 1 cycle off at two of
    its 22 sizes (a one-step ramp), and calibrate refused a valid pair on it.
    """
    steps = len(analytic.phases(settings)) - 1
    warm = WARM_CYCLES if settings.dwarm else 0
    return max(steps, warm)


@dataclass
class HoldOut:
    """A fit without some datasets, and its prediction of them (issue 16: honest fitting)."""

    held_out: tuple[str, ...]
    fit: Calibration  # fitted without them
    predictions: list[Residual]  # each held-out figure, predicted (as a time)
    gbps: list[tuple[float, float]]  # (model, measured) throughput of each prediction

    def errors(self) -> list[float]:
        """Each prediction's relative error in throughput, as the figures are published."""
        return [m / g - 1 for m, g in self.gbps]


def render_hold_out(h: HoldOut) -> str:
    p = h.fit.profile
    lines = [
        f"fitted without {', '.join(h.held_out)}: {p.hypothesis} x {p.mechanism}, RMS "
        f"{100 * h.fit.rms_rel_err:.2f}% on its own {len(h.fit.residuals)} targets; "
        f"constraints {'met' if h.fit.ok else 'NOT met'}",
        "predicted (model against measured, throughput):",
    ]
    for r, (m, g), e in zip(h.predictions, h.gbps, h.errors(), strict=True):
        lines.append(f"  {r.name:<24}{m:>8.2f} GB/s{g:>8.2f} GB/s{100 * e:>+8.1f}%")
    worst = max(h.errors(), key=abs)
    lines.append(f"  worst {100 * worst:+.1f}%")
    return "\n".join(lines)


def hold_out_report(h: HoldOut) -> dict[str, object]:
    return {
        "held_out": list(h.held_out),
        "fit": report(h.fit),
        "predictions": [
            {**asdict(r), "model_gbps": m, "measured_gbps": g, "gbps_rel_err": e}
            for r, (m, g), e in zip(h.predictions, h.gbps, h.errors(), strict=True)
        ],
    }


def _measured_dir(chip: Chip) -> str:
    """Where the figures came from: data/chips/<name>/measured for a bundled chip, else the
    folder itself (a chip given as --chip DIR)."""
    if chip.path.resolve().parent == chips_dir().resolve():
        return f"data/chips/{chip.path.name}/{MEASURED_DIR}"
    return str(chip.path / MEASURED_DIR)


_DATASET_NAMES = {
    "table_a": "every Table A replica",
    "points": "the point facts",
    "table_b": "Table B's unsplit and chunked columns",
    "table_c": "Table C's rows",
}


def _targets_note(prob: Problem) -> str:
    have = [d for d in DATASETS if any(t.dataset == d for t in prob.targets)]
    return (
        f"{len(prob.targets)} measured times ("
        + ", ".join(_DATASET_NAMES[d] for d in have)
        + ", throughputs read as times); least squares on relative error, equal weights"
    )


def with_notes(chip: Chip, cal: Calibration, prob: Problem, meas: Measurements) -> Profile:
    """The profile with notes written from the chip's own data (nothing chip-specific here)."""
    p = cal.profile
    f, ta = meas.facts, meas.table_a
    cited = [t.source for t in (ta, meas.table_b, meas.table_c) if t is not None]
    cited += [q.gbps.source for q in (f.shoulder, f.notch) if q is not None and q.gbps.source]
    mech = mechs.get(p.mechanism)
    notes = {
        "status": "fitted by `ane-kdma calibrate` (deterministic); regenerate, do not hand-edit",
        "source": f"measurements: {_measured_dir(chip)} ("
        + "; ".join(sorted({s.cite() for s in cited}))
        + ")",
        "hand_set": (
            f"ns_per_cycle = {chip.ns_per_cycle_hand_set} is hand-set in chip.json, not fitted: "
            f"the data fix only latency x ns and rate / ns. ceiling_gbps = "
            f"{chip.ceiling_gbps:g} is the chip's DRAM ceiling ({chip.ceiling.citation}). "
            "No other parameter is hand-set."
        ),
        "hypothesis": f"{p.hypothesis}: {hyps.get(p.hypothesis).description}",
        "mechanism": f"{mech.name}: {mech.summary}",
        "targets": _targets_note(prob),
        "constraints": "; ".join(dict.fromkeys(b.statement for b in prob.bounds))
        + (f"; full recovery at |x| = {prob.page}" if prob.page else ""),
        "judged": "not fitted, judged by validate (the ranking): every other row of validate, "
        "among them the speedups, the lap times and the V"
        + (" (the V also chooses the window)" if prob.slope_per_lap is not None else ""),
        "exactness": (
            "residuals and constraint checks are from the cycle model with all "
            f"{chip.cores} cores streaming"
        ),
        "residuals": ", ".join(f"{r.name} {100 * r.rel_err:+.1f}%" for r in cal.residuals),
        "rms_rel_err": f"{cal.rms_rel_err:.4f}",
    }
    if prob.held_out:
        notes["held_out"] = ", ".join(prob.held_out) + ": left out of this fit, to predict"
    if cal.slope is not None:
        near = (prob.bands or vspecs.bands()).slope_x
        notes["v_slope"] = (
            f"{cal.slope:.3f} us/line per lap near the notch (|x| <= {near}), worst R^2 "
            f"{cal.slope_r2:.3f}; measured {cal.slope_target:g}; the window was chosen for it"
        )
    return replace(p, notes=notes)


@runner.takes_options
@takes_engine
def confirm(chip: Chip, cal: Calibration) -> dict[str, object]:
    """The fitted sizes on one core in every mode: the analytic engine beside the exact one.

    Static readings must agree within :func:`static_slack` cycles (to the cycle without
    the governor); a progress-dependent reading's closed form is an approximation within
    ANALYTIC_TOL. ``ok`` says whether both held; ``misses`` says where not.
    """
    prob = problem(chip, chip.measured)
    fitted = chip.with_profile(cal.profile)
    lb = chip.line_bytes
    lines = sorted({t.lines for t in prob.targets} | {b.lines for b in prob.bounds})
    loads = [Workload.from_size(n * lb, 1, 1, lb) for n in lines]
    per_mode: dict[str, float] = {}
    if not mechs.get(cal.profile.mechanism).closed_form:
        return {
            "sizes": len(lines),
            "modes": {},
            "max_rel_diff": None,
            "ok": True,
            "skipped": f"the analytic engine has no closed form for {cal.profile.mechanism}",
        }
    slack = static_slack(fitted.settings)
    misses: list[str] = []
    for h in hyps.registry():
        exact = [r.cycles for r in runner.run_many(exact_engine(), h, fitted, loads)]
        fast = [r.cycles for r in runner.run_many("analytic", h, fitted, loads)]
        diff = max(abs(a - b) / a for a, b in zip(exact, fast, strict=True))
        per_mode[h.name] = diff
        if h.static:  # to the cycle, or within a cycle per governor step (static_slack)
            worst = max(abs(a - b) for a, b in zip(exact, fast, strict=True))
            if worst > slack:
                misses.append(f"{h.name} by {worst:g} cycles (stated: {slack})")
        elif diff > ANALYTIC_TOL:
            misses.append(f"{h.name} by {diff:.1%} (stated: {ANALYTIC_TOL:.0%})")
    return {
        "sizes": len(lines),
        "modes": per_mode,
        "max_rel_diff": max(per_mode.values()),
        "static_slack_cycles": slack,
        "misses": misses,
        "ok": not misses,
    }


# ---------------------------------------------------------------- output


def report(cal: Calibration) -> dict[str, object]:
    return {
        "profile": json.loads(cal.profile.to_json()),
        "residuals": [asdict(r) for r in cal.residuals],
        "constraints": [asdict(b) for b in cal.bounds],
        "objective": cal.objective,
        "rms_rel_err": cal.rms_rel_err,
        "v_slope_us_per_line_per_lap": cal.slope,
        "v_slope_worst_r2": cal.slope_r2,
        "v_slope_measured": cal.slope_target,
        "knee_lines_per_cycle": cal.knee_lines_per_cycle,
        "rate_lines_per_cycle": cal.rate_lines_per_cycle,
        "constraints_met": cal.ok,
        "confirmed_on_cycle_model": cal.confirmed,
    }


ENGINE_WORDS = {"model": "cycle model", "rtl": "RTL (Verilator)", "cocotb": "RTL (cocotb)"}


def render(cal: Calibration, out: str) -> str:
    """The human report: parameters, residuals, constraints, the V."""
    p = cal.profile
    lines = [
        f"calibrated profile {p.name} ({p.hypothesis} x {p.mechanism}) -> {out}",
        f"  overhead_us {p.overhead_us}  latency_cycles {p.latency_cycles}  window_lines "
        f"{p.window_lines}  core_rate_q16 {p.core_rate_q16} ({p.core_rate_q16 / RATE_ONE:.4f} "
        f"lines/cycle)  ns_per_cycle {p.ns_per_cycle} (hand-set)",
    ]
    if p.ramp_start_q16:
        lines.append(
            f"  governor: starts at {p.ramp_start_q16 / RATE_ONE:.4f} lines/cycle, +"
            f"{p.ramp_inc_q16 / RATE_ONE:.4f} every {p.ramp_step_lines} lines"
        )
    if p.task_gap_cycles:
        lines.append(f"  per-task cost: {p.task_gap_cycles} cycles")
    lines.append("fit residuals (model - measured) / measured:")
    for r in cal.residuals:
        lines.append(
            f"  {r.name:<22}{r.lines:>8}{r.measured_us:>10.1f}{r.model_us:>10.1f}"
            f"{100 * r.rel_err:>+8.1f}%"
        )
    lines.append(f"  RMS relative error {100 * cal.rms_rel_err:.2f}%")
    for b in cal.bounds:
        lines.append(f"  {b.name:<22}{b.model_gbps:>8.2f} GB/s  {'ok' if b.ok else 'VIOLATED'}")
    lines.append(
        f"  knee (window+page)/(latency+2) = {cal.knee_lines_per_cycle:.4f} vs rate "
        f"{cal.rate_lines_per_cycle:.4f} lines/cycle"
    )
    if cal.slope is not None:
        lines.append(
            f"V slope near the notch {cal.slope:.3f} us/line per lap (worst R^2 "
            f"{cal.slope_r2:.3f}), measured {cal.slope_target:g}"
        )
    c = cal.confirmed
    said = ENGINE_WORDS.get(cal.engine, f"the {cal.engine} engine")
    if c.get("skipped"):
        lines.append(f"{said} only: {c['skipped']}")
    elif c:
        modes = c["modes"]
        assert isinstance(modes, dict)
        lines.append(
            f"{said}: {c['sizes']} sizes on one core; the analytic engine's largest "
            "relative difference: " + ", ".join(f"{m} {d:.1e}" for m, d in modes.items())
        )
    return "\n".join(lines)
