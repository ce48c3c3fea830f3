"""`probe run`: time every package of a probe set and write measured/timings.json.

Why the timing is injected. Core ML runs only on macOS, and the figures it
gives are what the project is judged by, so everything around the timing
(checking the set, warm-up, rounds, medians, the compute plan's verdict, the
file and its schema) must be tested here, on Linux. The runner therefore
takes a :class:`Timer`, which loads a package and times one prediction:
:class:`CoreMLTimer` on a Mac, and in the tests a timer whose times come from
the project's own model of a chip with hidden parameters
(:mod:`ane_kdma.probe.synthetic`).

What is written (``DIR/measured/timings.json``, ``"method": "coreml-predict"``):
per probe, the median of the round medians, each round's median, every raw
sample (µs), and the devices the compute plan chose for its convolutions;
in the conditions, the OS, the chip and the machine it ran on, the rounds,
predictions per round and warm-up. The document is read back through the
measured-data loader (:func:`ane_kdma.measured.load`'s timings reader) before
it is written, so what lands on disk is what ``calibrate`` will accept.

A probe whose convolution the compute plan puts anywhere but the Neural
Engine is refused: it is left out of the file (its time would not be an ANE
time), named in the conditions, and the run ends with status 1.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ane_kdma import fileio
from ane_kdma import measured as measured_data
from ane_kdma.chip import MEASURED_DIR, Chip
from ane_kdma.errors import InputError
from ane_kdma.probe.design import Probe
from ane_kdma.probe.manifest import MANIFEST, Manifest, check_packages
from ane_kdma.schema import MAX_DATA_BYTES, Doc

TIMINGS = "timings.json"
NE_DEVICE = "MLNeuralEngineComputeDevice"
MAX_ROUNDS = measured_data.MAX_ROUNDS
MAX_PER_ROUND = measured_data.MAX_SAMPLES
MAX_WARMUP = 10_000
SAMPLE_BYTES = 24  # a sample's share of timings.json at most (a float's repr and ", ")


class Session(Protocol):
    """One loaded package: times one prediction, and says which device runs each op."""

    def predict_us(self) -> float: ...

    def devices(self) -> dict[str, str] | None:
        """Op name -> device class name for the probe's convolutions; None: no compute plan."""
        ...


class Timer(Protocol):
    """Loads packages with the Neural Engine allowed; says what it runs on."""

    def describe(self) -> dict[str, str]: ...

    def load(self, path: Path, probe: Probe) -> Session: ...


@dataclass(frozen=True)
class Plan:
    """How much to time: warm-up predictions, then rounds of predictions."""

    rounds: int = 3
    per_round: int = 200
    warmup: int = 20

    def check(self) -> Plan:
        for name, value, hi in (
            ("--rounds", self.rounds, MAX_ROUNDS),
            ("--per-round", self.per_round, MAX_PER_ROUND),
        ):
            if not 1 <= value <= hi:
                raise InputError(f"{name} {value}: 1..{hi}")
        if not 0 <= self.warmup <= MAX_WARMUP:
            raise InputError(f"--warmup {self.warmup}: 0..{MAX_WARMUP}")
        return self


@dataclass
class Outcome:
    """What a run timed and what it refused (probe name -> why)."""

    doc: dict[str, Any]
    refused: dict[str, str] = field(default_factory=dict)


def _row(p: Probe, rounds: list[list[float]], devices: dict[str, str] | None) -> dict[str, Any]:
    medians = [float(statistics.median(r)) for r in rounds]
    row: dict[str, Any] = {
        "name": p.name,
        "purpose": p.purpose,
        "shape": {"cout": p.cout, "cin": p.cin},
        "dtype": p.dtype,
        "cin_parts": list(p.cin_parts),
        "bytes_per_core": {"value": p.bytes_per_core, "unit": "B"},
        "task_bytes_per_core": {"unit": "B", "values": list(p.task_bytes)},
        "k": p.k,
        "x": p.x,
        "time": {"value": float(statistics.median(medians)), "unit": "us", "qualifier": "median"},
        "rounds": {"unit": "us", "values": medians},
        "samples": {"unit": "us", "rounds": rounds},
    }
    if devices is not None:
        row["devices"] = dict(devices)
    return row


def _off_ne(devices: dict[str, str] | None) -> str | None:
    if devices is None:
        return None
    off = {op: d for op, d in devices.items() if d != NE_DEVICE}
    if not devices:
        return "the compute plan lists no convolution"
    return ", ".join(f"{op} on {d}" for op, d in sorted(off.items())) or None


def run(
    folder: str | Path,
    manifest: Manifest,
    chip: Chip,
    timer: Timer,
    plan: Plan,
    tick: Callable[[], None] = lambda: None,
) -> Outcome:
    """Time every probe (module doc); the document is checked by the loader, not yet written.

    `tick` is called once per probe (a progress bar's update)."""
    base = Path(folder)
    plan.check()
    samples = len(manifest.probes) * plan.rounds * plan.per_round
    if samples * SAMPLE_BYTES > MAX_DATA_BYTES:  # checked now, not after an hour of timing
        raise InputError(
            f"--rounds x --per-round: {samples} samples over {len(manifest.probes)} probes "
            f"would not fit a data file (at most {MAX_DATA_BYTES // SAMPLE_BYTES})"
        )
    check_set(base, manifest, chip)
    rows, refused, seen = [], {}, {}
    for p in manifest.probes:
        session = timer.load(base / p.file, p)
        devices = session.devices()
        why = _off_ne(devices)
        if why is not None:
            refused[p.name] = why
            tick()
            continue
        for _ in range(plan.warmup):
            _sample(session, p)
        rounds = [[_sample(session, p) for _ in range(plan.per_round)] for _ in range(plan.rounds)]
        rows.append(_row(p, rounds, devices))
        seen[p.name] = devices is not None
        tick()
    if not rows:
        raise InputError(f"{base}: no probe ran on the Neural Engine; nothing written")
    about = timer.describe()
    conditions: dict[str, Any] = {
        **about,
        "op": "one fp16 1x1 convolution per package (a split: its parts, summed), single token",
        "compute_units": "CPU_AND_NE",
        "statistic": (
            f"median of {plan.rounds} rounds x {plan.per_round} Core ML predictions "
            f"(each round's median, then their median), after {plan.warmup} warm-up predictions"
        ),
        "rounds": plan.rounds,
        "predictions_per_round": plan.per_round,
        "warmup_predictions": plan.warmup,
        "set_made_for": manifest.chip,
        "compute_plan": "checked" if all(seen.values()) else "not available: devices not checked",
    }
    if refused:
        conditions["refused"] = "; ".join(f"{n} ({w})" for n, w in refused.items())
    doc = {
        "dataset": "timings",
        "method": "coreml-predict",
        "title": "A probe set timed by ane-kdma probe run: Core ML predictions from the host",
        "source": {
            "name": f"ane-kdma probe run on {about.get('machine', 'a Mac')}",
            "cited_in": f"this folder's {MANIFEST} and conditions",
        },
        "conditions": conditions,
        "rows": rows,
    }
    measured_data.DATASETS[TIMINGS](Doc(doc, "", TIMINGS), chip)  # the loader's verdict
    return Outcome(doc, refused)


def _sample(session: Session, p: Probe) -> float:
    try:
        t = session.predict_us()
    except InputError as exc:
        raise InputError(f"{p.name}: {exc}") from None
    if isinstance(t, bool) or not isinstance(t, int | float) or not np.isfinite(t) or t <= 0:
        raise InputError(f"{p.name}: the timer gave {t!r}, not a time in us")
    return float(t)


def check_set(folder: Path, manifest: Manifest, chip: Chip) -> None:
    """The set was made for a chip of this geometry, and the folder holds its packages."""
    got = (manifest.cores, manifest.line_bytes, manifest.ring_lines)
    want = (chip.cores, chip.line_bytes, chip.ring_lines)
    if got != want:
        raise InputError(
            f"{MANIFEST}: cores, line_bytes, ring_lines: the set was made for {got}, "
            f"chip {chip.name} has {want}"
        )
    check_packages(folder, manifest)


def write(folder: str | Path, outcome: Outcome) -> Path:
    """``folder/measured/timings.json``, new (a run never overwrites a measurement)."""
    out = Path(folder) / MEASURED_DIR
    target = out / TIMINGS
    if fileio.probe(target, "timings file") is not None:
        raise InputError(f"{target} exists; probe run does not overwrite a measurement")
    text = json.dumps(outcome.doc, separators=(",", ":"))  # compact: SAMPLE_BYTES a sample
    fileio.write_set(out, {TIMINGS: (text + "\n").encode()})
    return target


# ---------------------------------------------------------------- on a Mac


class CoreMLTimer:
    """Core ML on macOS: each package loaded with CPU_AND_NE, predictions timed from the host."""

    def __init__(self, ct: Any) -> None:
        self.ct = ct

    def describe(self) -> dict[str, str]:
        """The OS, the chip and the Mac's model (not its host name: the file may be shared)."""
        return {
            "os": f"macOS {platform.mac_ver()[0]}".strip(),
            "chip": _sysctl("machdep.cpu.brand_string") or platform.machine(),
            "machine": _sysctl("hw.model") or "a Mac",
            "coremltools": str(getattr(self.ct, "__version__", "")),
        }

    def load(self, path: Path, probe: Probe) -> Session:
        try:
            model = self.ct.models.MLModel(str(path), compute_units=self.ct.ComputeUnit.CPU_AND_NE)
        except Exception as exc:  # Core ML's own errors, whatever their class: one line
            raise InputError(f"{path.name}: Core ML cannot load it ({_first_line(exc)})") from None
        rng = np.random.default_rng(0)
        x = {"x": rng.standard_normal((1, probe.cin, 1, 1)).astype(np.float16)}
        return _CoreMLSession(self.ct, model, x)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:120]}" if text else type(exc).__name__


def _sysctl(name: str) -> str:
    """One sysctl value ("Apple M4", "Mac16,10"); "" where there is none."""
    import subprocess

    try:
        out = subprocess.run(
            ["sysctl", "-n", name], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()[:80] if out.returncode == 0 else ""


class _CoreMLSession:
    def __init__(self, ct: Any, model: Any, x: dict[str, np.ndarray]) -> None:
        self.ct, self.model, self.x = ct, model, x

    def predict_us(self) -> float:
        t0 = time.perf_counter_ns()
        try:
            self.model.predict(self.x)
        except Exception as exc:  # as in load: one line, whatever Core ML raised
            raise InputError(f"a prediction failed ({_first_line(exc)})") from None
        return (time.perf_counter_ns() - t0) / 1e3

    def devices(self) -> dict[str, str] | None:
        try:
            from coremltools.models.compute_plan import (  # type: ignore[import-untyped]
                MLComputePlan,
            )
        except ImportError:
            return None
        try:
            cplan = MLComputePlan.load_from_path(
                path=self.model.get_compiled_model_path(),
                compute_units=self.ct.ComputeUnit.CPU_AND_NE,
            )
        except Exception:  # an OS without the compute plan API: devices not checked
            return None
        program = cplan.model_structure.program
        if program is None:
            return None
        out: dict[str, str] = {}
        for fn in program.functions.values():
            for op in fn.block.operations:
                if op.operator_name != "conv":
                    continue
                usage = cplan.get_compute_device_usage_for_mlprogram_operation(op)
                name = op.outputs[0].name if op.outputs else f"conv{len(out)}"
                dev = type(usage.preferred_compute_device).__name__ if usage else "unknown"
                out[name] = dev
        return out
