"""A synthetic chip "measured" through the probe kit: the model itself, with hidden parameters.

Why: the kit's output must be right before anyone runs it on a Mac, and the
only chip whose every parameter is known is one the model itself defines.
:func:`hidden_chip` takes a chip folder and replaces its profile's parameters
by hidden ones (a different per-task overhead, latency, window and core
rate); :class:`ModelTimer` answers ``probe run`` with that chip's predicted
time for each package's tasks (via :mod:`ane_kdma.contract`, any engine) plus
a hidden per-prediction host overhead and seeded multiplicative noise, as a
Core ML prediction timed from the host would carry both. Nothing here is a
measurement: it is the closed loop's measuring half (calibrating from the
kit's output and predicting the hidden chip at sizes the kit did not measure
is the other half, which needs the fit against a prior chip).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ane_kdma import contract, fileio
from ane_kdma.chip import CHIP_FILE, MEASURED_DIR, Chip
from ane_kdma.errors import InputError
from ane_kdma.plan.planner import workload
from ane_kdma.probe import manifest, runner
from ane_kdma.probe.design import Probe
from ane_kdma.probe.runner import NE_DEVICE


@dataclass(frozen=True)
class Hidden:
    """The parameters the kit must recover: the profile's and the host's."""

    overhead_us: float = 21.5  # per request, in the chip's profile
    latency_cycles: int = 640
    window_lines: int = 80
    core_rate_q16: int = 30000
    host_us: float = 95.0  # the framework's per-prediction cost, on top of the task
    noise: float = 0.01  # relative spread of one prediction's time (a normal, seeded)


def hidden_chip(chip: Chip, hidden: Hidden) -> Chip:
    """`chip` with its profile's parameters replaced by the hidden ones."""
    p = replace(
        chip.profile,
        name=f"{chip.name}-hidden",
        overhead_us=hidden.overhead_us,
        latency_cycles=hidden.latency_cycles,
        window_lines=hidden.window_lines,
        core_rate_q16=hidden.core_rate_q16,
        notes={"status": "synthetic: hidden parameters of the probe kit's closed loop"},
    )
    return chip.with_profile(p)


@dataclass
class ModelTimer:
    """A Timer whose predictions take the hidden chip's model time plus the host's overhead."""

    chip: Chip
    hidden: Hidden
    engine: str = "analytic"
    seed: int = 1
    off_ne: frozenset[str] = frozenset()  # probes whose compute plan puts the conv on the CPU
    no_plan: bool = False  # an OS without the compute plan API
    loaded: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, str]:
        return {
            "os": "synthetic (no OS: the project's model)",
            "chip": f"synthetic: {self.chip.name} with hidden parameters",
            "machine": "ane_kdma.probe.synthetic.ModelTimer",
            "coremltools": "none",
        }

    def task_us(self, probe: Probe) -> float:
        """The hidden chip's time for the probe's tasks, back to back in one request."""
        wl = workload(probe.task_bytes, self.chip)
        return contract.run(self.engine, self.chip.hypothesis, self.chip, wl).time_us

    def load(self, path: Path, probe: Probe) -> _ModelSession:
        if not path.is_dir():
            raise InputError(f"{path}: no such package")
        self.loaded.append(probe.name)
        rng = np.random.default_rng([self.seed, len(self.loaded)])
        mean = self.task_us(probe) + self.hidden.host_us
        device = "MLCPUComputeDevice" if probe.name in self.off_ne else NE_DEVICE
        devices = (
            None if self.no_plan else {f"conv_{i}": device for i in range(len(probe.task_bytes))}
        )
        return _ModelSession(mean, self.hidden.noise, rng, devices)


@dataclass
class _ModelSession:
    mean_us: float
    noise: float
    rng: np.random.Generator
    plan: dict[str, str] | None

    def predict_us(self) -> float:
        return float(self.mean_us * (1.0 + self.noise * self.rng.standard_normal()))

    def devices(self) -> dict[str, str] | None:
        return self.plan


def measure(
    set_folder: str | Path,
    chip: Chip,
    hidden: Hidden,
    out: str | Path,
    plan: runner.Plan | None = None,
    seed: int = 1,
) -> Path:
    """A chip folder for the hidden chip, as a user would assemble it after `probe run`.

    `set_folder` is a probe set made for `chip`'s geometry; the hidden chip
    (:func:`hidden_chip`) is "measured" through the kit's runner and the
    result written as `out`/measured/timings.json beside a copy of `chip`'s
    chip.json named after `out`. No profile: that is calibrate's to fit.
    """
    out = Path(out)
    fileio.check_dir_target(out)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out} is not empty")
    truth = hidden_chip(chip, hidden)
    m = manifest.read(set_folder)
    outcome = runner.run(
        set_folder, m, truth, ModelTimer(truth, hidden, seed=seed), plan or runner.Plan()
    )
    doc = json.loads((chip.path / CHIP_FILE).read_text())
    doc.update(
        name=out.name,
        label=f"synthetic: {chip.label} with hidden parameters, measured through the probe kit",
    )
    fileio.write_set(out, {CHIP_FILE: (json.dumps(doc, indent=1) + "\n").encode()})
    runner.write(out, outcome)
    return out / MEASURED_DIR
