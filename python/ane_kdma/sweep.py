"""The D sweep: throughput against D, its spectrum, and the notch overlay, as CSV and PNG.

Why: the erratum is a periodic notch in D, so the sweep shows it three ways.
(a) GB/s against D at fixed N for both buggy hypotheses and the fix, with the
measured points on top; (b) the spectrum of each variant's notch signal, with
its dominant wavelength marked (2048 in D at N = 4096: one 1 MiB lap per
core); (c) the time around each notch, re-centred on x and divided by k, for
k = 1..8, so the laps lie on one another as measured.

The notch signal is GB/s minus its running median (a window three notch
widths wide): it keeps the notches and drops the smooth rise with size, so a
design without a notch has a flat zero signal. At a step that samples only a
notch's centre, its harmonics are as strong as its fundamental; the dominant
wavelength is therefore the longest among the lines within HARMONIC_BAND of
the strongest one.

The default engine is the analytic model (a 256-point sweep in well under a
second); any engine of the contract's registry can run it (``model``, ``rtl``),
one workload per size on every core of the chip. The notch overlay and Table B
do not depend on the swept range, so they run on their own engine (analytic
unless asked): a narrow sweep on the RTL costs its own points only.

A sweep narrower than MIN_LAPS laps cannot show the lap's wavelength (what
peaks there is a harmonic of a notch); its verdict then names the deepest
notch it saw (D and depth) instead of a wavelength, and never calls it flat.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ane_kdma import contract, runner
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.fileio import check_dir_target, write_set
from ane_kdma.hw import lap_and_offset
from ane_kdma.measured import Measurements

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HARMONIC_BAND = 0.10  # lines this close to the strongest count as its harmonics
NOTCH_LAPS = tuple(range(1, 9))
NOTCH_STEP = 8  # overlay x step, lines (a D step of 1 at N = 4096)
MAX_POINTS = 100_000
PAD = 8  # zero-padding factor of the spectrum
FLAT_FRACTION = 1e-3  # a notch signal below 0.1% of the throughput is no notch
#: a sweep spanning fewer laps than this shows no wavelength: the spectrum looks only at
#: wavelengths that repeat twice, so near two laps the lap's line is at its edge and a
#: harmonic wins (at 2.03 laps, 1024; from 2.5 laps, 2048 on every reading)
MIN_LAPS = 2.5


@dataclass
class Sweep:
    d: np.ndarray
    n: int
    lines: np.ndarray
    bytes_per_core: np.ndarray
    time_us: dict[str, np.ndarray]
    gbps: dict[str, np.ndarray]
    engine: str
    ring_lines: int


@dataclass
class Notch:
    """The deepest notch a sweep saw: where, and how far below the trend around it."""

    d: int
    depth: float  # fraction of the trend's GB/s lost at d


@dataclass
class Spectrum:
    wavelength: np.ndarray  # in D, one per rfft bin above DC
    magnitude: dict[str, np.ndarray]
    dominant: dict[str, float | None]  # None: flat, or no line the sweep can resolve
    notch: dict[str, Notch | None] = field(default_factory=dict)  # None: flat, no notch
    lap_d: float = 0.0  # one lap of the ring, in D (a wavelength needs two inside the sweep)

    def verdict(self, name: str) -> str:
        """What the sweep says of one variant, in words (the CLI and the plot use it)."""
        dom, notch = self.dominant[name], self.notch.get(name)
        if dom is not None:
            return f"dominant wavelength {dom:.0f} in D"
        if notch is None:
            return "flat: no notch"
        where = f"notch at D = {notch.d}, {100 * notch.depth:.0f}% deep"
        need = MIN_LAPS * self.lap_d
        return f"{where}; too narrow for a wavelength (needs {need:.0f} in D)"


@dataclass
class Overlay:
    x: np.ndarray
    laps: tuple[int, ...]
    time_us: dict[str, np.ndarray]  # (laps, x)
    excess_us: dict[str, np.ndarray]  # (laps, x), over the fix
    page: int


def _run(
    engine: str, h: hyps.Hypothesis, chip: Chip, lines: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(time µs, GB/s) of every core of the chip streaming `lines` each, on the engine."""
    lb = chip.line_bytes
    loads = [Workload.from_size(int(n) * lb, chip.cores, 1, lb) for n in lines]
    res = runner.run_many(engine, h, chip, loads)
    return np.array([r.time_us for r in res]), np.array([r.gbps for r in res])


def check_range(chip: Chip, d_min: int, d_max: int, d_step: int, n: int) -> np.ndarray:
    """The D values of a sweep, or an InputError saying what is wrong (before allocating)."""
    if d_min < 1 or d_step < 1:
        raise InputError(f"--d-min and --d-step must be positive (got {d_min}, {d_step})")
    if d_max < d_min:
        raise InputError(f"--d-max {d_max} is below --d-min {d_min}")
    if n < chip.cores or n % chip.cores:
        raise InputError(f"--n {n} must be a positive multiple of {chip.cores}")
    count = (d_max - d_min) // d_step + 1
    if count < 8:
        raise InputError(f"a sweep needs at least 8 points for its spectrum, got {count}")
    if count > MAX_POINTS:
        raise InputError(f"{count} points is too many (at most {MAX_POINTS})")
    d = np.arange(d_min, d_max + 1, d_step, dtype=np.int64)
    geo = chip.measured.geo
    size = geo.bytes_per_core(d, n)
    if np.any(size % chip.line_bytes):
        bad = int(d[np.argmax(size % chip.line_bytes != 0)])
        raise InputError(f"D = {bad}, N = {n} gives a core size that is not whole lines")
    if size.max() >= 1 << 32:
        raise InputError(f"D = {int(d.max())}, N = {n} exceeds the 32-bit core size register")
    return d


def compute_sweep(
    chip: Chip, d_min: int, d_max: int, d_step: int, n: int, engine: str = "analytic"
) -> Sweep:
    contract.check_engine(engine)
    d = check_range(chip, d_min, d_max, d_step, n)
    size = chip.measured.geo.bytes_per_core(d, n)
    lines = size // chip.line_bytes
    times, gbps = {}, {}
    for h in hyps.registry():
        times[h.name], gbps[h.name] = _run(engine, h, chip, lines)
    return Sweep(d, n, lines, size, times, gbps, engine, chip.ring_lines)


def notch_signal(
    y: np.ndarray, d_step: int, n: int, page: int, line_bytes: int, cores: int
) -> np.ndarray:
    """y minus its running median over three notch widths: the notches, without the trend."""
    notch_d = 2 * page * line_bytes * cores / (n * 2)  # full width in D
    half = max(1, int(np.ceil(1.5 * notch_d / d_step)))
    padded = np.pad(y, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return y - np.median(windows, axis=1)


def spectrum(sweep: Sweep, chip: Chip) -> Spectrum:
    """FFT of each variant's notch signal (zero-padded 8x); wavelengths in D.

    The padding samples the spectrum finely enough that a wavelength which is
    not a whole fraction of the sweep's span still shows as one peak. The
    notch signal is a train of same-signed dips, whose spectrum peaks exactly
    at the harmonics of its period; removing its mean would bias that, so it
    is kept, and only wavelengths that repeat at least twice within the sweep
    are looked at (which also leaves the zero-frequency lobe out).
    """
    step = int(sweep.d[1] - sweep.d[0])
    count = sweep.d.size
    size = 1 << int(np.ceil(np.log2(PAD * count)))
    freq = np.fft.rfftfreq(size, d=step)
    keep = freq * count * step >= 2  # at least two periods inside the sweep
    wavelength = 1.0 / freq[keep]
    mags: dict[str, np.ndarray] = {}
    dom: dict[str, float | None] = {}
    notches: dict[str, Notch | None] = {}
    page = chip.geometry.prefetch_max_lines
    for name, y in sweep.gbps.items():
        sig = notch_signal(y, step, sweep.n, page, chip.line_bytes, chip.cores)
        mag = np.abs(np.fft.rfft(sig, n=size))[keep]
        mags[name] = mag
        flat = np.abs(sig).max() <= FLAT_FRACTION * np.abs(y).max()
        dom[name] = None if flat else dominant_wavelength(wavelength, mag)
        notches[name] = None if flat else deepest_notch(sweep.d, y, sig)
    lap = lap_d(chip, sweep.n)
    if count * step < MIN_LAPS * lap:  # the lap's line sits at the spectrum's edge, or past
        dom = dict.fromkeys(dom)  # it: what peaks there is a harmonic of a notch, not a period
    return Spectrum(wavelength, mags, dom, notches, lap)


def lap_d(chip: Chip, n: int) -> float:
    """One lap of the ring (ring lines per core) in D at this N: the notches' spacing."""
    return chip.ring_lines * chip.line_bytes * chip.cores / (n * 2)


def deepest_notch(d: np.ndarray, y: np.ndarray, sig: np.ndarray) -> Notch | None:
    """The D where the notch signal dips lowest, and the dip as a fraction of the trend there."""
    i = int(np.argmin(sig))
    trend = float(y[i] - sig[i])
    if sig[i] >= 0 or trend <= 0:
        return None  # a notch is a dip; a bump alone is not one
    return Notch(int(d[i]), float(-sig[i] / trend))


def dominant_wavelength(wavelength: np.ndarray, mag: np.ndarray) -> float | None:
    """Longest wavelength among the spectral peaks within HARMONIC_BAND of the strongest.

    None when the signal is flat (no notch at all).
    """
    peak = float(mag.max(initial=0.0))
    if peak < 1e-9:
        return None
    left = np.concatenate([[np.inf], mag[:-1]])  # the ends are never peaks
    right = np.concatenate([mag[1:], [np.inf]])
    peaks = (mag >= left) & (mag > right) & (mag >= (1 - HARMONIC_BAND) * peak)
    if not peaks.any():
        return None
    return float(wavelength[peaks].max())


def overlay(chip: Chip, engine: str = "analytic") -> Overlay:
    """Time around each notch k x ring lines, re-centred on x, for every hypothesis."""
    page = chip.geometry.prefetch_max_lines
    x = np.arange(-2 * page, 2 * page + 1, NOTCH_STEP)
    laps = np.array(NOTCH_LAPS)
    lines = (laps[:, None] * chip.ring_lines + x[None, :]).ravel()
    times = {}
    for h in hyps.registry():
        t, _ = _run(engine, h, chip, lines)
        times[h.name] = t.reshape(laps.size, x.size)
    fixed = times[hyps.FIXED]
    excess = {h.name: times[h.name] - fixed for h in hyps.buggy()}
    return Overlay(x, NOTCH_LAPS, times, excess, page)


# ---------------------------------------------------------------- files


def _csv(header: list[str], columns: list[np.ndarray], fmt: list[str]) -> bytes:
    out = io.StringIO()
    out.write(",".join(header) + "\n")
    for row in zip(*columns, strict=True):
        out.write(",".join(f.format(v) for f, v in zip(fmt, row, strict=True)) + "\n")
    return out.getvalue().encode()


def sweep_csv(sw: Sweep) -> bytes:
    k = (2 * sw.lines + sw.ring_lines) // (2 * sw.ring_lines)  # round half up, as lap_and_offset
    x = sw.lines - k * sw.ring_lines
    header = ["d", "n", "lines_per_core", "bytes_per_core", "k", "x_lines"]
    cols: list[np.ndarray] = [sw.d, np.full(sw.d.size, sw.n), sw.lines, sw.bytes_per_core, k, x]
    fmt = ["{}"] * 6
    for name in sw.gbps:
        header += [f"{name}_time_us", f"{name}_gbps"]
        cols += [sw.time_us[name], sw.gbps[name]]
        fmt += ["{:.4f}", "{:.4f}"]
    return _csv(header, cols, fmt)


def spectrum_csv(sp: Spectrum) -> bytes:
    header = ["wavelength_d"] + [f"{n}_magnitude" for n in sp.magnitude]
    cols = [sp.wavelength] + list(sp.magnitude.values())
    return _csv(header, cols, ["{:.3f}"] + ["{:.6g}"] * len(sp.magnitude))


def overlay_csv(ov: Overlay) -> bytes:
    header = ["k", "x_lines"]
    kk, xx = np.meshgrid(np.array(ov.laps), ov.x, indexing="ij")
    cols: list[np.ndarray] = [kk.ravel(), xx.ravel()]
    fmt = ["{}", "{}"]
    for name, t in ov.time_us.items():
        header.append(f"{name}_time_us")
        cols.append(t.ravel())
        fmt.append("{:.4f}")
    for name, e in ov.excess_us.items():
        header.append(f"{name}_excess_us")
        cols.append(e.ravel())
        fmt.append("{:.4f}")
    return _csv(header, cols, fmt)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _style(name: str) -> dict[str, Any]:
    return dict(hyps.get(name).style)


def _legend_below(fig: Any, handles: list[Any], labels: list[str], ncol: int = 3) -> None:
    """One legend under the axes, so no legend ever covers a curve or a measured point."""
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize="small")


def plot_sweep(sw: Sweep, chip: Chip, meas: Measurements | None) -> bytes:
    return _png(sweep_figure(sw, chip, meas))


def sweep_figure(sw: Sweep, chip: Chip, meas: Measurements | None) -> Any:
    """GB/s against D over the swept range only, measured points inside it on top."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 6), layout="constrained")
    ax = fig.add_subplot()
    lo, hi = int(sw.d[0]), int(sw.d[-1])
    for name, y in sw.gbps.items():
        ax.plot(sw.d, y, label=f"model, {name}", **_style(name))
    if meas is not None and meas.table_a is not None and meas.table_a.n == sw.n:
        ta = meas.table_a
        g = meas.geo.aggregate_gbps(ta.bytes_per_core, ta.medians)
        inside = (np.asarray(ta.d) >= lo) & (np.asarray(ta.d) <= hi)  # the swept range only
        if inside.any():
            d_in = np.asarray(ta.d)[inside]
            ax.plot(d_in, np.asarray(g)[inside], "ko", ms=5, label="measured, Table A medians")
    points = [p for p in (meas.facts.shoulder, meas.facts.notch) if p is not None] if meas else []
    points = [p for p in points if p.n == sw.n and lo <= p.d <= hi]
    if points:
        ax.plot(
            [p.d for p in points],
            [p.gbps.value for p in points],
            "ks",
            mfc="none",
            ms=7,
            label="measured, D = " + " and ".join(str(p.d) for p in points),
        )
    ceiling = chip.ceiling_gbps
    ax.axhline(ceiling, color="grey", ls=":", lw=1)
    ax.text(lo, ceiling, " DRAM ceiling", va="bottom", color="grey")
    ax.set_xlim(lo, hi)
    ax.set_xlabel(f"D (input channels), N = {sw.n}; one lap = {lap_d(chip, sw.n):g} in D")
    ax.set_ylabel(f"aggregate throughput, {chip.cores} cores (GB/s)")
    ax.set_title(
        f"Throughput against D at N = {sw.n}: buggy hypotheses and the fix "
        f"({sw.engine} engine, chip {chip.name}, profile {chip.profile.name})"
    )
    ax.set_ylim(0, ceiling * 1.08)
    ax.grid(alpha=0.3)
    _legend_below(fig, *ax.get_legend_handles_labels())
    return fig


def plot_spectrum(sp: Spectrum, sw: Sweep) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 6), layout="constrained")
    ax = fig.add_subplot()
    for name, mag in sp.magnitude.items():
        ax.plot(sp.wavelength, mag, label=f"{name}: {sp.verdict(name)}", **_style(name))
    marked = {v for v in sp.dominant.values() if v is not None}
    for v in sorted(marked):
        ax.axvline(v, color="k", ls=":", lw=1)
        ax.annotate(
            f"dominant wavelength {v:.0f} in D",
            (v, ax.get_ylim()[1] * 0.92),
            xytext=(8, 0),
            textcoords="offset points",
        )
    if any(v is not None for v in sp.dominant.values()):
        ax.text(
            0.99,
            0.55,
            f"peaks within {100 * HARMONIC_BAND:g}% of the strongest\ncount as its harmonics "
            "(a narrow\nnotch makes them all strong); the\nlongest, the fundamental, is "
            "marked.\nZero-padded 8x.",
            transform=ax.transAxes,
            ha="right",
            va="center",
            fontsize="small",
            bbox={"fc": "white", "ec": "grey", "alpha": 0.9},
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("wavelength (in D, input channels; log scale)")
    ax.set_ylabel("|FFT| of the notch signal (GB/s x samples)")
    ax.set_title(
        f"Spectrum of the D sweep (GB/s minus its running median), D = {sw.d[0]}.."
        f"{sw.d[-1]} step {sw.d[1] - sw.d[0]}"
    )
    ax.grid(alpha=0.3, which="both")
    _legend_below(fig, *ax.get_legend_handles_labels(), ncol=1)
    return _png(fig)


def _measured_v(meas: Measurements | None, chip: Chip) -> list[tuple[float, float, str]]:
    """Measured times per lap at their x (k = 1): the shoulder and notch points, Table A's notch."""
    if meas is None:
        return []
    out: list[tuple[float, float, str]] = []
    for p in (meas.facts.shoulder, meas.facts.notch):
        if p is not None:
            k, x = lap_and_offset(p.lines, chip.ring_lines)
            t = float(meas.geo.time_for_gbps(p.bytes_per_core, p.gbps.value))
            out.append((x, t / max(k, 1), f"D = {p.d} point"))
    ta = meas.table_a
    if ta is not None:
        for n, times in zip(ta.lines_per_core, np.array(list(ta.replicas.values())).T, strict=True):
            k, x = lap_and_offset(int(n), chip.ring_lines)
            if k >= 1 and abs(x) <= 2 * chip.geometry.prefetch_max_lines:
                out += [(x, float(t) / k, "Table A replicas") for t in times]
    return out


def plot_overlay(ov: Overlay, chip: Chip, meas: Measurements | None = None) -> bytes:
    """One row per buggy hypothesis: time / k and excess over the fix / k, re-centred on x.

    The measured points (time per lap at their x) sit on the time panels, with
    the measured slope near the notch drawn through the measured notch time.
    """
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    names = list(ov.excess_us)
    fig = Figure(figsize=(13, 4.5 * len(names) + 0.8), layout="constrained")
    axes = fig.subplots(len(names), 2, sharex=True, squeeze=False)
    cmap = colormaps["viridis"]
    for row, name in enumerate(names):
        for col, (data, what) in enumerate(
            (
                (ov.time_us[name], "time / k (µs per lap)"),
                (ov.excess_us[name], "excess over fixed / k (µs per lap)"),
            )
        ):
            ax = axes[row, col]
            for i, k in enumerate(ov.laps):
                ax.plot(ov.x, data[i] / k, color=cmap(i / max(1, len(ov.laps) - 1)), label=f"k={k}")
            for edge in (-ov.page, ov.page):
                ax.axvline(edge, color="grey", ls=":", lw=1)
            ax.set_title(f"{name.upper()}: {what}")
            ax.set_ylabel(what)
            ax.grid(alpha=0.3)
            if row == len(names) - 1:
                ax.set_xlabel(
                    f"x = lines - k x {chip.ring_lines:#x} (lines per core, re-centred on notch k)"
                )
    pts = _measured_v(meas, chip)
    kf = meas.facts.k_scaling if meas is not None else None
    for row in range(len(names)):
        ax = axes[row, 0]
        seen = set()
        for x, t, label in pts:
            ax.plot(
                [x],
                [t],
                "ks" if "point" in label else "k^",
                mfc="none",
                ms=7,
                label=None if label in seen else f"measured, {label}",
            )
            seen.add(label)
        notch = [t for x, t, label in pts if x == 0 and "point" in label]
        if kf is not None and notch:
            xs = np.arange(-128, 129, 8)
            ax.plot(
                xs,
                notch[0] - kf.slope_per_lap.value * np.abs(xs),
                "k--",
                lw=1,
                label=f"measured slope {kf.slope_per_lap.value:g} µs/line per lap, |x| <= 128",
            )
    # one legend under the panels: the laps, then the measured marks (the same on every row)
    handles, labels = axes[0, 1].get_legend_handles_labels()
    for h, lab in zip(*axes[0, 0].get_legend_handles_labels(), strict=True):
        if lab.startswith("measured"):
            handles.append(h)
            labels.append(lab)
    _legend_below(fig, handles, labels, ncol=6)
    fig.suptitle(
        f"Notch overlay, k = {ov.laps[0]}..{ov.laps[-1]}, one row per buggy hypothesis "
        f"(chip {chip.name}, profile {chip.profile.name}; dotted: x = +-{ov.page})"
    )
    return _png(fig)


def validate_band(table: str) -> float:
    """validate's relative tolerance for a Table A or Table B row, read where validate keeps it.

    Why one function: the plots draw the band validate judges by, so the figure
    and the verdict cannot disagree; if validate's tolerances move, only this
    reads them.
    """
    from ane_kdma.validate import specs

    bands = specs.bands()  # the one typed value, read when called
    return {"a": bands.table_a, "b": bands.table_b}[table]


def table_a_left_out(sw: Sweep, chip: Chip, meas: Measurements | None) -> str | None:
    """Why table_a.* cannot be drawn from this sweep, or None when it can."""
    ta = meas.table_a if meas is not None else None
    if ta is None:
        return f"chip {chip.name} has no Table A"
    if ta.n != sw.n:
        return f"Table A is at N = {ta.n}, the sweep at N = {sw.n}"
    swept = set(sw.d.tolist())
    missing = [d for d in ta.d if d not in swept]
    if missing:
        shown = ", ".join(str(d) for d in missing[:2]) + (", ..." if len(missing) > 2 else "")
        swept_text = f"D = {sw.d[0]}..{sw.d[-1]} step {sw.d[1] - sw.d[0]}"
        return f"the sweep ({swept_text}) misses Table A's D = {shown}"
    return None


def table_b_left_out(sw: Sweep, chip: Chip, meas: Measurements | None) -> str | None:
    """Why table_b.* cannot be drawn for this sweep, or None when it can."""
    tb = meas.table_b if meas is not None else None
    if tb is None:
        return f"chip {chip.name} has no Table B"
    if tb.n != sw.n:
        return f"Table B is at N = {tb.n}, the sweep at N = {sw.n}"
    return None


def _table_a_files(sw: Sweep, chip: Chip, meas: Measurements | None) -> dict[str, bytes]:
    """Table A modeled against measured, with residuals (when the chip has a Table A at this N)."""
    ta = meas.table_a if meas is not None else None
    if meas is None or ta is None or table_a_left_out(sw, chip, meas) is not None:
        return {}
    h = chip.profile.hypothesis
    idx = [int(np.flatnonzero(sw.d == d)[0]) for d in ta.d]
    model = sw.time_us[h][idx]
    med = ta.medians
    reps = np.array(list(ta.replicas.values()))
    header = ["d", "model_us", "median_us", *[f"rep_{r}_us" for r in ta.replicas], "residual"]
    cols = [np.array(ta.d), model, med, *reps, (model - med) / med]
    return {
        "table_a.csv": _csv(header, cols, ["{}"] + ["{:.3f}"] * (len(header) - 2) + ["{:+.5f}"]),
        "table_a.png": plot_table_a(sw, chip, meas, model),
    }


def plot_table_a(sw: Sweep, chip: Chip, meas: Measurements, model: np.ndarray) -> bytes:
    return _png(table_a_figure(sw, chip, meas, model))


def table_a_figure(sw: Sweep, chip: Chip, meas: Measurements, model: np.ndarray) -> Any:
    """Top: every replica, the median and the model; bottom: residuals against the median."""
    from matplotlib.figure import Figure

    ta = meas.table_a
    assert ta is not None  # drawn only when the chip's data has Table A
    h = chip.profile.hypothesis
    fig = Figure(figsize=(10, 7.6), layout="constrained")
    top, bot = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    lo, hi = int(ta.d[0]) - 64, int(ta.d[-1]) + 64
    sel = (sw.d >= lo) & (sw.d <= hi)
    top.plot(
        sw.d[sel], sw.time_us[h][sel], label=f"model, {h} x {chip.profile.mechanism}", **_style(h)
    )
    for name, times in ta.replicas.items():
        top.plot(ta.d, times, "o", ms=4, alpha=0.6, label=f"measured, replica {name}")
    top.plot(ta.d, ta.medians, "ks", mfc="none", ms=8, label="measured, median")
    top.set_ylabel("time (µs)")
    top.set_title(f"Table A at N = {ta.n}: modeled against measured ({sw.engine} engine)")
    top.grid(alpha=0.3)
    res = 100 * (model - ta.medians) / ta.medians
    band = 100 * validate_band("a")
    bot.axhspan(-band, band, color="tab:green", alpha=0.12, label=f"+-{band:g}% (validate's band)")
    bot.bar(ta.d, res, width=40, color="tab:gray")
    for d, r in zip(ta.d, res, strict=True):
        bot.annotate(f"{r:+.1f}%", (d, r), ha="center", va="bottom" if r >= 0 else "top")
    bot.axhline(0, color="k", lw=0.8)
    bot.set_ylabel("residual vs median (%)")
    bot.set_xlabel(f"D (input channels), N = {ta.n}")
    bot.grid(alpha=0.3)
    handles, labels = top.get_legend_handles_labels()
    for h, lab in zip(*bot.get_legend_handles_labels(), strict=True):
        handles.append(h)
        labels.append(lab)
    _legend_below(fig, handles, labels)
    return fig


def _table_b_files(
    sw: Sweep, chip: Chip, meas: Measurements | None, engine: str | None = None
) -> dict[str, bytes]:
    """Table B modeled against measured: unsplit, chunked and the speedup per size.

    On `engine` (the sweep's unless given): Table B's sizes are its own, not the
    swept range's, so the CLI runs it on the overlay's engine.
    """
    if meas is None or meas.table_b is None or table_b_left_out(sw, chip, meas) is not None:
        return {}
    engine = engine or sw.engine
    tb = meas.table_b
    lb = chip.line_bytes
    h = hyps.get(chip.profile.hypothesis)
    loads: list[Workload] = []
    for r in tb.rows:
        chunks = [tb.chunk_bytes] * (r.bytes_per_core // tb.chunk_bytes)
        loads += [
            Workload.from_size(r.bytes_per_core, chip.cores, 1, lb),
            Workload.from_chunks(chunks, chip.cores, lb),
        ]
    res = runner.run_many(engine, h, chip, loads)
    whole = np.array([x.gbps for x in res[0::2]])
    chunked = np.array([x.gbps for x in res[1::2]])
    mib = np.array([r.bytes_per_core / (1 << 20) for r in tb.rows])
    meas_cols = [
        np.array([getattr(r, k).value for r in tb.rows]) for k in ("unsplit", "chunked", "speedup")
    ]
    header = [
        "d",
        "mib_per_core",
        "model_unsplit_gbps",
        "unsplit_gbps",
        "model_chunked_gbps",
        "chunked_gbps",
        "model_speedup",
        "speedup",
    ]
    cols = [
        np.array([r.d for r in tb.rows]),
        mib,
        whole,
        meas_cols[0],
        chunked,
        meas_cols[1],
        chunked / whole,
        meas_cols[2],
    ]
    fmt = ["{}", "{:g}"] + ["{:.3f}"] * 6
    return {
        "table_b.csv": _csv(header, cols, fmt),
        "table_b.png": plot_table_b(chip, meas, mib, (whole, chunked, chunked / whole), engine),
    }


def plot_table_b(
    chip: Chip,
    meas: Measurements,
    mib: np.ndarray,
    model: tuple[np.ndarray, np.ndarray, np.ndarray],
    engine: str,
) -> bytes:
    """Unsplit, chunked and the speedup against MiB per core: the model, the published figures,
    and the band validate judges each by (:func:`validate_band`)."""
    from matplotlib.figure import Figure

    tb = meas.table_b
    assert tb is not None  # drawn only when the chip's data has Table B
    p = chip.profile
    fig = Figure(figsize=(13, 5), layout="constrained")
    axes = fig.subplots(1, 3)
    band = validate_band("b")
    panels = (
        ("unsplit (one task per core)", "GB/s", "unsplit"),
        (f"{tb.chunk_bytes >> 10} KiB chunks", "GB/s", "chunked"),
        ("speedup, chunked over unsplit", "x", "speedup"),
    )
    for ax, (title, unit, key), m in zip(axes, panels, model, strict=True):
        measured = np.array([getattr(r, key).value for r in tb.rows])
        ax.fill_between(
            mib,
            measured * (1 - band),
            measured * (1 + band),
            color="tab:green",
            alpha=0.15,
            label=f"measured +-{100 * band:g}% (validate's band)",
        )
        ax.plot(mib, measured, "ks", mfc="none", ms=8, label="measured (Table B)")
        ax.plot(mib, m, "o-", color="tab:red", label=f"model, {p.hypothesis} x {p.mechanism}")
        for x, a, b in zip(mib, m, measured, strict=True):
            ax.annotate(
                f"{100 * (a - b) / b:+.1f}%",
                (x, a),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize="x-small",
            )
        ax.set_title(title)
        ax.set_xlabel(f"MiB per core (N = {tb.n}, D = 2048 per MiB)")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    _legend_below(fig, *axes[0].get_legend_handles_labels())
    fig.suptitle(f"Table B: modeled against measured (chip {chip.name}, {engine} engine)")
    return _png(fig)


def left_out(
    sw: Sweep, chip: Chip, meas: Measurements | None, ov: Overlay | None
) -> dict[str, str]:
    """Each file set write_all leaves out, and why (the CLI says so on stderr)."""
    why = {
        "notch_overlay.*": None
        if ov is not None
        else "the overlay was not asked for (--no-overlay)",
        "table_a.*": table_a_left_out(sw, chip, meas),
        "table_b.*": table_b_left_out(sw, chip, meas),
    }
    return {name: reason for name, reason in why.items() if reason is not None}


def write_all(
    out: Path,
    sw: Sweep,
    sp: Spectrum,
    ov: Overlay | None,
    chip: Chip,
    meas: Measurements | None,
    extras_engine: str | None = None,
) -> list[Path]:
    """Every output file, written as one set: the new files appear together, or none do.

    `ov` None: no overlay files. `extras_engine`: the engine Table B runs on
    (the sweep's if None).
    """
    check_dir_target(out)
    overlay_files = {}
    if ov is not None:
        overlay_files = {
            "notch_overlay.csv": overlay_csv(ov),
            "notch_overlay.png": plot_overlay(ov, chip, meas),
        }
    files = {
        "sweep.csv": sweep_csv(sw),
        "spectrum.csv": spectrum_csv(sp),
        "sweep_gbps.png": plot_sweep(sw, chip, meas),
        "sweep_fft.png": plot_spectrum(sp, sw),
        **overlay_files,
        **_table_a_files(sw, chip, meas),
        **_table_b_files(sw, chip, meas, extras_engine),
    }
    return write_set(out, files)
