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
second); ``model`` and ``rtl`` run the cycle model or the RTL per size and
take minutes.
"""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ane_kdma import analytic, engines, measured
from ane_kdma.errors import InputError
from ane_kdma.fileio import write_atomic
from ane_kdma.hw import LINE_BYTES, NUM_CORES_MAX, PREFETCH_MAX_LINES, RING_LINES, CreditMode
from ane_kdma.profile import Profile, load

SWEEP_ENGINES = ("analytic", "model", "rtl")
HARMONIC_BAND = 0.10  # lines this close to the strongest count as its harmonics
NOTCH_LAPS = tuple(range(1, 9))
NOTCH_HALF_WIDTH = 2 * PREFETCH_MAX_LINES  # overlay x range, lines
NOTCH_STEP = 8  # overlay x step, lines (a D step of 1 at N = 4096)
MAX_POINTS = 100_000
PAD = 8  # zero-padding factor of the spectrum
FLAT_FRACTION = 1e-3  # a notch signal below 0.1% of the throughput is no notch
VARIANTS = (CreditMode.LITERAL, CreditMode.SIGNED, CreditMode.FIXED)


@dataclass
class Sweep:
    d: np.ndarray
    n: int
    lines: np.ndarray
    bytes_per_core: np.ndarray
    time_us: dict[str, np.ndarray]
    gbps: dict[str, np.ndarray]
    engine: str


@dataclass
class Spectrum:
    wavelength: np.ndarray  # in D, one per rfft bin above DC
    magnitude: dict[str, np.ndarray]
    dominant: dict[str, float | None]  # None: a flat signal, no line at all


@dataclass
class Overlay:
    x: np.ndarray
    laps: tuple[int, ...]
    time_us: dict[str, np.ndarray]  # (laps, x)
    excess_us: dict[str, np.ndarray]  # (laps, x), over the fix


def _cycles(engine: str, mode: CreditMode, profile: Profile, lines: np.ndarray) -> np.ndarray:
    """Task cycles of 16 cores streaming `lines` each, on the chosen engine."""
    s = profile.settings
    if engine == "analytic":
        return analytic.task_cycles(mode, s, lines)
    per_core = np.array(engines.cycles(engine, mode, s, [[int(n)] for n in lines]), dtype=float)
    return np.maximum(per_core, analytic.ceiling_cycles(s, lines))


def check_range(d_min: int, d_max: int, d_step: int, n: int) -> np.ndarray:
    """The D values of a sweep, or an InputError saying what is wrong."""
    if d_min < 1 or d_step < 1:
        raise InputError(f"--d-min and --d-step must be positive (got {d_min}, {d_step})")
    if d_max < d_min:
        raise InputError(f"--d-max {d_max} is below --d-min {d_min}")
    if n < NUM_CORES_MAX or n % NUM_CORES_MAX:
        raise InputError(f"--n {n} must be a positive multiple of {NUM_CORES_MAX}")
    d = np.arange(d_min, d_max + 1, d_step, dtype=np.int64)
    if d.size < 8:
        raise InputError(f"a sweep needs at least 8 points for its spectrum, got {d.size}")
    if d.size > MAX_POINTS:
        raise InputError(f"{d.size} points is too many (at most {MAX_POINTS})")
    size = measured.bytes_per_core(d, n)
    if np.any(size % LINE_BYTES):
        bad = int(d[np.argmax(size % LINE_BYTES != 0)])
        raise InputError(f"D = {bad}, N = {n} gives a core size that is not whole 64-byte lines")
    if size.max() >= 1 << 32:
        raise InputError(f"D = {int(d.max())}, N = {n} exceeds the 32-bit core size register")
    return d


def compute_sweep(
    profile: Profile, d_min: int, d_max: int, d_step: int, n: int, engine: str = "analytic"
) -> Sweep:
    if engine not in SWEEP_ENGINES:
        raise InputError(f"unknown engine {engine!r} (one of: {', '.join(SWEEP_ENGINES)})")
    d = check_range(d_min, d_max, d_step, n)
    size = measured.bytes_per_core(d, n)
    lines = size // LINE_BYTES
    timing = analytic.Timing(profile.ns_per_cycle, profile.overhead_us)
    times, gbps = {}, {}
    for mode in VARIANTS:
        cyc = _cycles(engine, mode, profile, lines)
        times[mode.name.lower()] = timing.time_us(cyc)
        gbps[mode.name.lower()] = timing.gbps(size, cyc)
    return Sweep(d, n, lines, size, times, gbps, engine)


def notch_signal(y: np.ndarray, d_step: int, n: int) -> np.ndarray:
    """y minus its running median over three notch widths: the notches, without the trend."""
    notch_d = 2 * PREFETCH_MAX_LINES * LINE_BYTES * NUM_CORES_MAX / (n * 2)  # full width in D
    half = max(1, int(np.ceil(1.5 * notch_d / d_step)))
    padded = np.pad(y, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return y - np.median(windows, axis=1)


def spectrum(sweep: Sweep) -> Spectrum:
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
    mags, dom = {}, {}
    for name, y in sweep.gbps.items():
        sig = notch_signal(y, step, sweep.n)
        mag = np.abs(np.fft.rfft(sig, n=size))[keep]
        mags[name] = mag
        flat = np.abs(sig).max() <= FLAT_FRACTION * np.abs(y).max()
        dom[name] = None if flat else dominant_wavelength(wavelength, mag)
    return Spectrum(wavelength, mags, dom)


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


def overlay(profile: Profile, engine: str = "analytic") -> Overlay:
    """Time around each notch k x 0x4000 lines, re-centred on x (analytic unless asked)."""
    x = np.arange(-NOTCH_HALF_WIDTH, NOTCH_HALF_WIDTH + 1, NOTCH_STEP)
    laps = np.array(NOTCH_LAPS)
    lines = (laps[:, None] * RING_LINES + x[None, :]).ravel()
    timing = analytic.Timing(profile.ns_per_cycle, profile.overhead_us)
    times = {}
    for mode in VARIANTS:
        cyc = _cycles(engine, mode, profile, lines)
        times[mode.name.lower()] = timing.time_us(cyc).reshape(laps.size, x.size)
    excess = {m: times[m] - times["fixed"] for m in ("literal", "signed")}
    return Overlay(x, NOTCH_LAPS, times, excess)


# ---------------------------------------------------------------- files


def _csv(header: list[str], columns: list[np.ndarray], fmt: list[str]) -> bytes:
    out = io.StringIO()
    out.write(",".join(header) + "\n")
    for row in zip(*columns, strict=True):
        out.write(",".join(f.format(v) for f, v in zip(fmt, row, strict=True)) + "\n")
    return out.getvalue().encode()


def sweep_csv(sw: Sweep) -> bytes:
    k = np.floor(sw.lines / RING_LINES + 0.5).astype(np.int64)
    x = sw.lines - k * RING_LINES
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


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


STYLE = {
    "literal": {"color": "tab:orange", "ls": "-", "lw": 1.4},
    "signed": {"color": "tab:red", "ls": "--", "lw": 1.4},
    "fixed": {"color": "tab:blue", "ls": "-", "lw": 1.8},
}


def plot_sweep(sw: Sweep, profile: Profile, meas: measured.Measurements | None) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 5.5), layout="constrained")
    ax = fig.add_subplot()
    for name, y in sw.gbps.items():
        ax.plot(sw.d, y, label=f"model, {name}", **STYLE[name])
    if meas is not None and meas.table_a.n == sw.n:
        ta = meas.table_a
        g = measured.aggregate_gbps(ta.bytes_per_core, ta.medians)
        ax.plot(ta.d, g, "ko", ms=5, label="measured, Table A medians")
        f = meas.facts
        ax.plot(
            [f.shoulder_d, f.notch_d],
            [f.shoulder_gbps.value, f.notch_gbps.value],
            "ks",
            mfc="none",
            ms=7,
            label="measured, D = 2016 and 2048",
        )
    ax.axhline(profile.ceiling_gbps, color="grey", ls=":", lw=1)
    ax.text(sw.d[0], profile.ceiling_gbps, " LPDDR5-6400 ceiling", va="bottom", color="grey")
    ax.set_xlabel(f"D (input channels), N = {sw.n}; one lap = 2048 in D at N = 4096")
    ax.set_ylabel("aggregate throughput, 16 cores (GB/s)")
    ax.set_title(
        f"Throughput against D at N = {sw.n}: buggy hypotheses and the fix "
        f"({sw.engine} engine, profile {profile.name})"
    )
    ax.set_ylim(0, profile.ceiling_gbps * 1.08)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower center", ncol=2)
    return _png(fig)


def plot_spectrum(sp: Spectrum, sw: Sweep) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 5.5), layout="constrained")
    ax = fig.add_subplot()
    for name, mag in sp.magnitude.items():
        dom = sp.dominant[name]
        tag = f"dominant {dom:.0f}" if dom is not None else "flat: no notch"
        ax.plot(sp.wavelength, mag, label=f"{name} ({tag})", **STYLE[name])
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
    ax.legend(loc="upper left")
    return _png(fig)


def plot_overlay(ov: Overlay, profile: Profile) -> bytes:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 9), layout="constrained")
    axes = fig.subplots(2, 2, sharex=True)
    cmap = colormaps["viridis"]
    for row, name in enumerate(("literal", "signed")):
        for col, (data, what) in enumerate(
            (
                (ov.time_us[name], "time / k (µs per lap)"),
                (ov.excess_us[name], "excess over fixed / k (µs per lap)"),
            )
        ):
            ax = axes[row, col]
            for i, k in enumerate(ov.laps):
                ax.plot(ov.x, data[i] / k, color=cmap(i / max(1, len(ov.laps) - 1)), label=f"k={k}")
            for edge in (-PREFETCH_MAX_LINES, PREFETCH_MAX_LINES):
                ax.axvline(edge, color="grey", ls=":", lw=1)
            ax.set_title(f"{name.upper()}: {what}")
            ax.set_ylabel(what)
            ax.grid(alpha=0.3)
            if row == 1:
                ax.set_xlabel("x = lines - k x 0x4000 (lines per core, re-centred on notch k)")
    axes[0, 0].legend(ncol=2, fontsize="small", title="lap")
    fig.suptitle(
        f"Notch overlay, k = 1..8: LITERAL is one-sided, SIGNED is a V (profile {profile.name}; "
        "dotted: x = +-256)"
    )
    return _png(fig)


def write_all(
    out: Path,
    sw: Sweep,
    sp: Spectrum,
    ov: Overlay,
    profile: Profile,
    meas: measured.Measurements | None,
) -> list[Path]:
    """Every output file, each written atomically; returns the paths."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {out}: {exc.strerror or exc}") from None
    files = {
        "sweep.csv": sweep_csv(sw),
        "spectrum.csv": spectrum_csv(sp),
        "notch_overlay.csv": overlay_csv(ov),
        "sweep_gbps.png": plot_sweep(sw, profile, meas),
        "sweep_fft.png": plot_spectrum(sp, sw),
        "notch_overlay.png": plot_overlay(ov, profile),
    }
    paths = []
    for name, data in files.items():
        write_atomic(out / name, data)
        paths.append(out / name)
    return paths


def add_sweep_command(subparsers: argparse._SubParsersAction) -> None:
    """Register ``ane-kdma sweep`` on the CLI's sub-command parsers."""
    p = subparsers.add_parser(
        "sweep",
        help="D sweep: CSV and PNG plots of GB/s against D, its FFT, the notch overlay",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory (out/)")
    p.add_argument(
        "--engine", default="analytic", help=f"one of {', '.join(SWEEP_ENGINES)} (analytic)"
    )
    p.add_argument("--d-min", type=int, default=64, help="first D (64)")
    p.add_argument("--d-max", type=int, default=16384, help="last D (16384)")
    p.add_argument("--d-step", type=int, default=64, help="D step (64)")
    p.add_argument("--n", type=int, default=4096, help="output channels N (4096)")
    p.add_argument("--profile", default=None, help="profile name or JSON path (m3)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_sweep)


def run_sweep(args: argparse.Namespace) -> int:
    profile = load(getattr(args, "profile", None))
    sw = compute_sweep(profile, args.d_min, args.d_max, args.d_step, args.n, args.engine)
    sp = spectrum(sw)
    ov = overlay(profile, "analytic" if args.engine == "analytic" else args.engine)
    try:
        meas = measured.load()
    except InputError:
        meas = None  # the plots still work without the measured overlay
    paths = write_all(Path(args.out), sw, sp, ov, profile, meas)
    summary = {
        "out": str(args.out),
        "files": [str(p) for p in paths],
        "engine": sw.engine,
        "points": int(sw.d.size),
        "dominant_wavelength_d": sp.dominant,
        "min_gbps": {k: round(float(v.min()), 3) for k, v in sw.gbps.items()},
        "max_gbps": {k: round(float(v.max()), 3) for k, v in sw.gbps.items()},
    }
    if getattr(args, "json", False):
        print(json.dumps(summary))
    else:
        print(f"wrote {len(paths)} files to {args.out}/ ({sw.engine} engine, {sw.d.size} points)")
        for name, dom in sp.dominant.items():
            text = f"{dom:.0f} in D" if dom is not None else "none (flat: no notch)"
            print(f"  {name:<8} dominant wavelength {text}")
    return 0
