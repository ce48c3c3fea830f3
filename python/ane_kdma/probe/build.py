"""`probe make`: the probe set as Core ML ML Program packages, written all at once or not at all.

Each package is built with coremltools' MIL builder (extra ``coreml``): an
fp16 input of Cin channels, one 1x1 convolution of a fixed pseudo-random fp16
weight (seeded, so a set can be rebuilt byte for byte), or, for a split
variant, the same weight's Cin slices as separate convolutions whose outputs
are added. ``ct.convert(..., skip_model_load=True)`` needs no Core ML runtime,
so a set is made on any machine and timed on a Mac (:mod:`.runner`).

The set is built in a hidden folder beside OUT and renamed into place when
every package and the manifest are written and the manifest has been checked
against the packages; on any failure (or Ctrl-C) the hidden folder is
removed, so OUT either holds a whole set or does not exist.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.fileio import shown
from ane_kdma.probe.design import Probe, design
from ane_kdma.probe.manifest import MANIFEST, Manifest, check_packages

SEED = 20260912
WEIGHT_SCALE = 1.0 / 64  # weights and outputs stay well inside fp16's range
NEEDS = "probe make needs coremltools (pip install 'ane-kdma[coreml]')"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """coremltools logs and prints on stderr (off macOS, at import): one line per run is ours."""
    logger = logging.getLogger("coremltools")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def coremltools() -> Any:
    """coremltools, imported quietly; one line if it is not installed."""
    try:
        with _quiet():
            import coremltools as ct  # type: ignore[import-untyped]
    except ImportError:
        raise InputError(NEEDS) from None
    return ct


def check_out(out: Path) -> None:
    """OUT must be new or an empty folder, in a folder that exists (``-`` is no folder)."""
    if str(out) == "-":
        raise InputError("--out -: probe make writes a folder of packages, not standard output")
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise InputError(f"{shown(out)}: {why}") from None
    if st is not None:
        if not out.is_dir() or out.is_symlink():
            raise InputError(
                f"{shown(out)} exists and is not a folder; probe make does not overwrite"
            )
        if any(out.iterdir()):
            raise InputError(f"{shown(out)} is not empty; probe make writes a new folder")
    if not out.parent.is_dir():
        raise InputError(f"{shown(out.parent)}: no such folder for the output")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise InputError(f"{shown(out.parent)}: folder not writable")


def save_package(ct: Any, probe: Probe, path: Path, rng: np.random.Generator) -> None:
    """One probe as an ML Program package at `path` (module doc)."""
    from coremltools.converters.mil import Builder as mb  # type: ignore[import-untyped]
    from coremltools.converters.mil.mil import types  # type: ignore[import-untyped]

    weight = (rng.standard_normal((probe.cout, probe.cin), np.float32) * WEIGHT_SCALE).astype(
        np.float16
    )
    spec = mb.TensorSpec(shape=(1, probe.cin, 1, 1), dtype=types.fp16)

    @mb.program(input_specs=[spec], opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        if len(probe.cin_parts) == 1:
            return mb.conv(x=x, weight=weight[:, :, None, None], name="probe_conv")
        out, start = None, 0
        for i, c in enumerate(probe.cin_parts):
            part = mb.slice_by_size(x=x, begin=[0, start, 0, 0], size=[1, c, 1, 1], name=f"in_{i}")
            w = weight[:, start : start + c, None, None]
            y = mb.conv(x=part, weight=w, name=f"probe_conv_{i}")
            out = y if out is None else mb.add(x=out, y=y, name=f"sum_{i}")
            start += c
        return out

    model = ct.convert(
        prog,
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.iOS17,
        skip_model_load=True,
    )
    model.short_description = f"ane-kdma probe {probe.name}: {probe.why}"
    model.user_defined_metadata["ane_kdma.probe"] = probe.name
    model.save(str(path))


def make(chip: Chip, out: str | Path, laps: int, seed: int = SEED) -> Manifest:
    """Write the probe set for `chip` to `out` (new or empty), whole or not at all."""
    out = Path(out)
    probes = design(chip, laps)  # bad --laps or a chip it cannot probe: before anything is written
    check_out(out)
    ct = coremltools()
    manifest = Manifest(chip.name, chip.cores, chip.line_bytes, chip.ring_lines, tuple(probes))
    try:
        stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=".ane-kdma-probe-"))
    except OSError as exc:
        raise InputError(
            f"{shown(out.parent)}: cannot create the output there ({exc.strerror})"
        ) from None
    try:
        build = stage / "set"
        build.mkdir()
        rng = np.random.default_rng(seed)
        with _quiet():
            for p in probes:
                save_package(ct, p, build / p.file, rng)
        (build / MANIFEST).write_text(manifest.to_json())
        check_packages(build, manifest)  # what was written is what the manifest says
        if out.is_dir():
            out.rmdir()  # empty (checked): replaced by the whole set in one rename
        os.rename(build, out)
    except OSError as exc:
        raise InputError(f"cannot write {shown(out)}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return manifest
