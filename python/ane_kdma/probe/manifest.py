"""The probe set's manifest (``manifest.json``): what each package holds and what it pins.

Why a manifest: the packages are timed on another machine (a Mac) and their
times come back as figures of a chip folder, so each package must carry its
shape, its per-core bytes and its purpose with it, and the runner must be
able to tell that the folder it was handed is the set the manifest describes
(:func:`check_packages`) before it times anything. Reading is strict, as for
every data file (:class:`ane_kdma.schema.Doc`): a missing or malformed field
is one line naming the file and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ane_kdma.errors import InputError
from ane_kdma.fileio import is_dir
from ane_kdma.hw import lap_and_offset
from ane_kdma.plan.weight import Weight
from ane_kdma.probe.design import MAX_LAPS, PURPOSES, Probe
from ane_kdma.schema import Doc

MANIFEST = "manifest.json"
KIND = "ane-kdma probe set"
VERSION = 1
MAX_PROBES = 64
MAX_DIM = 1 << 20  # channels: no probe needs more
MAX_PARTS = 8
_NAME = re.compile(r"[A-Za-z0-9_+-]{1,64}")


@dataclass(frozen=True)
class Manifest:
    """A probe set: the chip it was made for (its geometry) and its probes."""

    chip: str
    cores: int
    line_bytes: int
    ring_lines: int
    probes: tuple[Probe, ...]

    def to_json(self) -> str:
        doc = {
            "kind": KIND,
            "version": VERSION,
            "chip": self.chip,
            "cores": self.cores,
            "line_bytes": self.line_bytes,
            "ring_lines": self.ring_lines,
            "dtype": "fp16",
            "note": (
                "one fp16 1x1 convolution per package, Cout x Cin, single token; a split "
                "variant is the same weight as several convolutions along Cin, summed; bytes "
                "per core are the planner's for the chip named here"
            ),
            "probes": [
                {
                    "name": p.name,
                    "file": p.file,
                    "shape": {"cout": p.cout, "cin": p.cin},
                    "dtype": p.dtype,
                    "cin_parts": list(p.cin_parts),
                    "bytes_per_core": p.bytes_per_core,
                    "task_bytes_per_core": list(p.task_bytes),
                    "k": p.k,
                    "x": p.x,
                    "purpose": p.purpose,
                    "why": p.why,
                }
                for p in self.probes
            ],
        }
        return json.dumps(doc, indent=1) + "\n"


def read(folder: str | Path) -> Manifest:
    """``folder/manifest.json``, checked field by field (one line naming file and field)."""
    path = Path(folder) / MANIFEST
    doc = Doc.load(path, "probe manifest")
    if doc.string("kind") != KIND:
        raise doc.fail("kind", f"not {KIND!r}")
    if doc.integer("version") != VERSION:
        raise doc.fail("version", f"this version of ane-kdma reads version {VERSION}")
    cores = doc.integer("cores", 1, 64)
    line_bytes = doc.integer("line_bytes", 4, 4096)
    ring = doc.integer("ring_lines", 4, 1 << 31)
    probes = []
    names: set[str] = set()
    for p in doc.objects("probes", MAX_PROBES):
        name = p.string("name")
        if not _NAME.fullmatch(name):
            raise p.fail(p.key("name"), "1-64 characters of A-Z a-z 0-9 _ + -")
        if name in names:
            raise p.fail(p.key("name"), f"{name!r} given twice")
        names.add(name)
        if p.string("file") != f"{name}.mlpackage":
            raise p.fail(p.key("file"), f"expected {name}.mlpackage")
        shape = p.obj("shape")
        cout, cin = shape.integer("cout", 1, MAX_DIM), shape.integer("cin", 1, MAX_DIM)
        if p.string("dtype") != "fp16":
            raise p.fail(p.key("dtype"), "probe sets are fp16")
        parts = tuple(p.integers("cin_parts", MAX_PARTS))
        if any(c < 1 for c in parts) or sum(parts) != cin:
            raise p.fail(p.key("cin_parts"), f"must be positive and add up to Cin = {cin}")
        size = p.integer("bytes_per_core", 1, (1 << 32) - 1)
        tasks = tuple(p.integers("task_bytes_per_core", MAX_PARTS))
        if len(tasks) != len(parts) or sum(tasks) != size:
            raise p.fail(
                p.key("task_bytes_per_core"),
                f"one per part ({len(parts)}), adding up to {size} B",
            )
        for j, (c, b) in enumerate(zip(parts, tasks, strict=True)):
            want = Weight(c, cout).bytes_per_core(cores)  # the planner's, on the set's cores
            if b != want:
                raise p.fail(
                    f"{p.key('task_bytes_per_core')}[{j}]",
                    f"{b} B, but {cout} x {c} fp16 is {want} B per core on {cores} cores",
                )
        k = p.integer("k", 0, MAX_LAPS + 1)
        x = p.integer("x", -ring // 2, ring // 2)
        if size % line_bytes or (k, x) != lap_and_offset(size // line_bytes, ring):
            raise p.fail(p.key("x"), f"k, x = {k}, {x} is not where {size} B per core lies")
        purpose = p.string("purpose")
        if purpose not in PURPOSES:
            raise p.fail(p.key("purpose"), f"one of {', '.join(PURPOSES)}")
        probes.append(Probe(name, cout, parts, size, tasks, k, x, purpose, p.string("why", "")))
    return Manifest(doc.string("chip"), cores, line_bytes, ring, tuple(probes))


def check_packages(folder: str | Path, manifest: Manifest) -> None:
    """The folder holds exactly the manifest's packages, each with the convolutions it lists.

    Each package's program is read (its protobuf only, no weight decoded) and
    its convolutions' weights must be Cout x Cin_part x 1 x 1 for the probe's
    parts, in order; a package the manifest does not list is refused too, so a
    run never times a set that was mixed with another.
    """
    from ane_kdma.patch import graph, package

    base = Path(folder)
    listed = {p.file for p in manifest.probes}
    extra = sorted(
        e.name for e in base.iterdir() if e.name.endswith(".mlpackage") and e.name not in listed
    )
    if extra:
        raise InputError(f"{MANIFEST}: probes: {extra[0]} is in the folder but not listed")
    for i, p in enumerate(manifest.probes):
        where = f"{MANIFEST}: probes[{i}].file"
        path = base / p.file
        if not is_dir(path, where):
            raise InputError(f"{where}: {p.file} is not in the folder")
        try:
            pkg = package.read(path)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        convs: list[tuple[int, int, int, int]] = []
        for fn in graph.functions(pkg.spec.mlProgram):
            found, _ = graph.targets(fn)
            convs.extend((t.cout, t.cin, t.kh, t.kw) for t in found)
        want = [(p.cout, c, 1, 1) for c in p.cin_parts]
        if convs != want:
            shown = ", ".join(f"{o}x{c}" for o, c, _, _ in convs) or "none"
            listed_shapes = ", ".join(f"{o}x{c}" for o, c, _, _ in want)
            raise InputError(
                f"{where}: {p.file} holds convolutions {shown} (Cout x Cin), "
                f"the manifest lists {listed_shapes}"
            )
