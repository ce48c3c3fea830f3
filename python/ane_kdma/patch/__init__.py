"""`patch`: rewrite a Core ML ML Program so that no weight streams in the notch.

Why a rewrite and not only numbers: the split only helps once the compiler is
handed separate weights. ``patch`` reads the package's protobuf (coremltools'
proto modules, the optional extra ``coreml``), finds every conv, linear and
matmul whose weight is stored (dense, palettized or quantized: see
:mod:`.graph`), plans each weight exactly as ``plan`` does (same search, same
hypothesis, same engine check, the same axis), and replaces each affected op
by its parts (:mod:`.rewrite`): partial sums along Cin by default, a concat of
Cout slices with ``--axis cout``.

What it keeps: every model input and output, name and place; every other op,
function and attribute as it was (a multifunction package stays one, with
its default function); every weight byte once (the new weight file is
written from byte ranges of the old one, the split weights' originals
dropped unless another op still reads them, shared tensors written once).
What it never does: write into its input, decompress a weight, or leave a
partial output package (:mod:`.package`).

What it reports, so that a model author can check it: each op by function,
op, weight and PyTorch layer name (dotted again, guesses marked: see
:mod:`.names`); the decode step with every op it leaves whole (``--skip``,
a cut off its blocks) at its unsplit time; sizes as the weight files' own,
each stored tensor once however many ops or functions read it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ane_kdma import bands
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.patch import blobs, graph, names, package, rewrite
from ane_kdma.patch.graph import Left, Target
from ane_kdma.plan import (
    DEFAULT_AXIS,
    Decision,
    Weight,
    check_axis,
    decide,
    in_window,
    lines_of,
    retime,
)

NEEDS = "patch needs the 'coreml' extra: pip install -e '.[coreml]'"
DIGITS = 3

__all__ = ["NEEDS", "patch"]


def _proto() -> None:
    try:
        graph.pb()
    except ImportError:
        raise InputError(NEEDS) from None


_SUFFIX = re.compile(r"(_weight)?(_to_fp16|_to_fp32|_cast_fp16|_palettized|_quantized|_0)*$")


def layer_of(weight_name: str) -> str:
    """The layer a converter's weight name comes from: model_layers_0_mlp_gate_proj_weight_to_fp16
    -> model_layers_0_mlp_gate_proj (as the converter left it; `names` puts the dots back)."""
    return _SUFFIX.sub("", weight_name) or weight_name


def _module(op: str, weight: str, given: Sequence[str] = ()) -> dict[str, object]:
    """The report's PyTorch module path (dotted) of an op, and whether its dots are a guess."""
    m = names.layer(op, weight, given)
    return {"module": m.dotted if m else None, "module_guessed": bool(m and not m.sure)}


@dataclass
class Cut:
    """One op, its weight, and its plan."""

    target: Target
    weight: Weight
    decision: Decision
    shared_with: list[str]  # other readers of the weight that are not split with it
    held: str | None = None  # why it stays whole though planned (--skip, a cut off its blocks)

    @property
    def parts(self) -> tuple[int, ...]:
        return self.decision.chosen.parts

    def as_dict(self, chip: Chip, given: Sequence[str] = ()) -> dict[str, object]:
        t, d = self.target, self.decision
        lines = lines_of(d.before.chunk_bytes[0], chip)
        return {
            "function": t.fn.name,
            "op": t.name,
            "op_type": t.op.type,
            "weight": t.weight_name,
            "layer": layer_of(t.weight_name),
            **_module(t.name, t.weight_name, given),
            "form": t.form.kind,
            "shape": str(self.weight),
            "cin": t.cin,
            "cout": t.cout,
            "bits": self.weight.bits,
            "stored_bytes": t.form.stored_bytes,
            "side_bytes": t.form.side_bytes(),
            "bytes_per_core": d.before.chunk_bytes[0],
            "lines_per_core": lines,
            "in_window": in_window(lines, chip),
            "affected": d.affected,
            "axis": d.chosen.axis,
            "splits": d.chosen.splits,
            "parts": list(d.chosen.parts),
            "chunk_bytes_per_core": list(d.chosen.chunk_bytes),
            "time_us_before": round(d.before_us, DIGITS),
            "time_us_after": round(d.after_us, DIGITS),
            "shared_with": self.shared_with,
        }


def weight_of(t: Target) -> Weight:
    """The weight as the planner sees it: its stored bits, its blocks, and its LUTs, scales
    and offsets by where each varies (see ane_kdma.plan.weight: each task that decompresses
    with a side tensor reads the part of it that the task's op keeps; a tensor constant along
    Cin is kept whole in every Cin part, one constant along Cout is read by every core)."""
    form = t.form
    side = {"side_bits": 0, "side_whole_bits": 0, "core_bits": 0, "core_whole_bits": 0}
    for p in form.params:
        if p.key == form.data_key:
            continue
        along_out = form.blocks[p.key][t.dim_out] is not None
        along_in = form.blocks[p.key][t.dim_in] is not None
        key = ("side" if along_out else "core") + ("_bits" if along_in else "_whole_bits")
        side[key] += math.prod(p.shape) * p.bits
    per_channel = {k: -(-side[k] // t.cout) for k in ("side_bits", "side_whole_bits")}
    return Weight(
        t.cin,
        t.cout,
        t.kh,
        t.kw,
        form.bits,
        cin_block=form.block_along(t.dim_in),
        cout_block=form.block_along(t.dim_out),
        side_bits=per_channel["side_bits"],
        side_whole_bits=per_channel["side_whole_bits"],
        core_bits=side["core_bits"],
        core_whole_bits=side["core_whole_bits"],
    )


def _names_of(op: str, weight: str, var: str = "") -> list[str]:
    """Every name --skip matches an op by: op, weight, layer, and the module path dotted."""
    out = [op, weight, var, layer_of(weight)] if weight else [op]
    m = names.layer(op, weight)
    if m is not None:
        out += [m.underscored, m.dotted, f"{m.dotted}.weight"]
    return [n for n in out if n]


def _skipped(candidates: Sequence[str], patterns: Sequence[str], used: set[str]) -> str | None:
    """The first pattern that matches one of the names (all that match are marked used)."""
    hits = [p for p in patterns if names.matches(p, candidates)]
    used.update(hits)
    return hits[0] if hits else None


def _left(fn: str, x: Left, given: Sequence[str]) -> dict[str, object]:
    """A skipped op as the report lists it: function, op, why, and its layer's names."""
    return {
        "function": fn,
        "op": x.op,
        "op_type": x.op_type,
        "reason": x.reason,
        "weight": x.weight or None,
        **_module(x.op, x.weight, given),
    }


def _readers(fn: graph.Fn) -> dict[str, list[str]]:
    """Each var and the ops that read it (by op name)."""
    out: dict[str, list[str]] = {}
    for op in graph.walk_ops(fn.block):
        for arg in op.inputs.values():
            for b in arg.arguments:
                if b.WhichOneof("binding") == "name":
                    out.setdefault(b.name, []).append(graph.op_name(op))
    for o in fn.block.outputs:
        out.setdefault(o, []).append("(function output)")
    return out


def _check_blobs(pkg: package.Package, files: dict[str, blobs.WeightFile]) -> None:
    """Every weight the program points at, checked against its file (each file opened once)."""
    for value in _blob_values(pkg.spec.mlProgram):
        bf = value.blobFileValue
        wf = _weight_file(pkg, files, bf.fileName)
        b = wf.blob(int(bf.offset))
        tt = value.type.tensorType
        shape, bits = graph.shape_of(tt), graph.bits_of(tt)
        if shape is not None and bits is not None:
            need = -(-_prod(shape) * bits // 8)
            if b.size < need:
                raise InputError(
                    f"{wf.shown}: the weight at offset {b.record} holds {b.size} bytes; "
                    f"its type {graph.dtype_name(tt)} {list(shape)} needs {need}"
                )


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _weight_file(
    pkg: package.Package, files: dict[str, blobs.WeightFile], name: str
) -> blobs.WeightFile:
    rel = pkg.weight_rel(name)
    if rel not in files:
        files[rel] = blobs.WeightFile(pkg.path / rel, package.shown(pkg.path / rel))
    return files[rel]


def _blob_values_of(block: Any) -> list[Any]:
    """Every Value of a block (nested blocks too) stored in a weight file, in program order."""
    out: list[Any] = []
    for op in block.operations:
        values = list(op.attributes.values())
        for arg in op.inputs.values():
            values += [b.value for b in arg.arguments if b.WhichOneof("binding") == "value"]
        out += [v for v in values if v.WhichOneof("value") == "blobFileValue"]
        for inner in op.blocks:
            out += _blob_values_of(inner)
    return out


def _blob_values(program: Any) -> list[Any]:
    """Every Value of the program stored in a weight file, in program order."""
    out: list[Any] = []
    for name in sorted(program.functions):
        for opset in sorted(program.functions[name].block_specializations):
            out += _blob_values_of(program.functions[name].block_specializations[opset])
    return out


def patch(
    src: str | Path,
    dst: str | Path | None,
    chip: Chip,
    h: Hypothesis,
    engine: str = "model",
    dry_run: bool = False,
    axis: str = DEFAULT_AXIS,
    skip: Sequence[str] = (),
    function: Sequence[str] = (),
) -> dict[str, object]:
    """Plan every stored weight of `src`; unless `dry_run`, write the rewritten package to `dst`."""
    _proto()
    check_axis(axis)
    out = None
    if dry_run and dst is not None:
        package.check_suffix(dst)
    if not dry_run:
        if dst is None:
            raise InputError("patch needs OUT.mlpackage (or --dry-run)")
        out = package.check_output(dst, src)
    pkg = package.read(src)
    program = pkg.spec.mlProgram
    names_ = sorted(program.functions)
    for f in function:
        if f not in program.functions:
            raise InputError(
                f"{package.shown(pkg.path)}: no function {f[:40]!r} "
                f"(it has: {', '.join(names_)[:80]})"
            )
    files: dict[str, blobs.WeightFile] = {}
    try:
        _check_blobs(pkg, files)
        plan = _plan(pkg, chip, h, engine, dry_run, axis, skip, function)
        cuts = plan.cuts
        changed = [c for c in cuts if c.decision.affected]
        shared = _shared(changed, skip)
        doc: dict[str, object] = {
            "in": str(pkg.path),
            "out": None,
            "dry_run": dry_run,
            "variant": h.name,
            "engine": engine,
            "axis": axis,
            "functions": names_,
            "weights": len(cuts) + len(plan.held),
            "changed": [c.as_dict(chip, skip) for c in changed],
            "unchanged": [
                f"{c.target.fn.name}/{c.target.name}" for c in cuts if not c.decision.affected
            ],
            "skipped": plan.left,
            # the weight files the program reads, as they are on disk (each byte once)
            "weight_bytes_in": sum(wf.length for wf in files.values()),
            "duplicated_bytes": sum(int(str(x["bytes"])) for x in shared),
            "side_bytes": sum(_stored(changed, side=True).values()),
            "shared": shared,
        }
        if dry_run:
            doc["decode_us"] = _decode(pkg, plan, chip, h)
            return doc
        assert out is not None
        doc["weight_bytes_out"] = _write(pkg, out, changed, plan.fns, files)
        doc["out"] = str(out)
        return doc
    finally:
        for wf in files.values():
            wf.close()


@dataclass
class Planned:
    """What the plan found: the ops it plans, those it keeps whole, and those it cannot plan."""

    cuts: list[Cut]  # planned ops (split or not)
    held: list[Cut]  # planned but kept whole: --skip, or a cut that falls inside a block
    left: list[dict[str, object]]  # every op left alone, as the report lists it
    fns: list[graph.Fn]
    # a dry run's ops of the functions --function leaves out: whole in the decode step
    outside: list[Cut] = field(default_factory=list)
    outside_refused: list[tuple[str, str]] = field(default_factory=list)  # (function, op)


def _plan(
    pkg: package.Package,
    chip: Chip,
    h: Hypothesis,
    engine: str,
    marginal: bool,
    axis: str,
    skip: Sequence[str],
    function: Sequence[str],
) -> Planned:
    decided: dict[Weight, Decision] = {}
    cuts: list[Cut] = []
    held: list[Cut] = []
    left: list[dict[str, object]] = []
    used: set[str] = set()
    outside: list[Cut] = []
    outside_refused: list[tuple[str, str]] = []
    fns = list(graph.functions(pkg.spec.mlProgram))
    for fn in fns:
        if function and fn.name.split("/")[0] not in function:
            if marginal:  # the decode step counts its ops whole
                found, refused = graph.targets(fn)
                outside_refused += [(fn.name, x.op) for x in refused]
                for t in found:
                    w = weight_of(t)
                    if w not in decided:
                        decided[w] = decide(w, chip, h, engine, marginal=True, axis=axis)
                    outside.append(Cut(t, w, decided[w], [], "not in --function"))
            continue
        found, refused = graph.targets(fn)
        for x in refused:
            _skipped(_names_of(x.op, x.weight), skip, used)  # already left alone: a match
            left.append(_left(fn.name, x, skip))
        for t in found:
            w = weight_of(t)
            if w not in decided:
                decided[w] = decide(w, chip, h, engine, marginal=marginal, axis=axis)
            d = decided[w]
            pattern = _skipped(_names_of(t.name, t.weight_name, t.weight_var), skip, used)
            why = None if pattern is None else f"--skip {pattern}"
            if why is None and d.affected:
                dim = t.dim_in if d.chosen.axis == "cin" else t.dim_out
                edges = [sum(d.chosen.parts[:i]) for i in range(1, len(d.chosen.parts))]
                cut = t.form.cut_reason(dim, edges)
                if cut is not None:
                    why = f"planned {d.chosen.axis} {list(d.chosen.parts)}, but {cut}"
            if why is not None:
                held.append(Cut(t, w, d, [], why))
                left.append(_left(fn.name, Left(t.name, t.op.type, why, t.weight_name), skip))
                continue
            cuts.append(Cut(t, w, d, []))
    for pattern in skip:
        if pattern not in used:
            raise InputError(
                f"--skip {pattern[:60]!r} matches no op, weight or layer name"
                f"{' in the functions patched' if function else ''} "
                f"(names look like: {_example(cuts + held, left)})"
            )
    # a weight read by an op that is not split with it stays stored whole as well
    for fn in fns:
        readers = _readers(fn)
        split_here = {c.target.name for c in cuts if c.target.fn is fn and c.decision.affected}
        for c in cuts:
            if c.target.fn is fn and c.decision.affected:
                others = [r for r in readers.get(c.target.weight_var, []) if r not in split_here]
                c.shared_with = sorted(set(others))
    # ... or a function left out by --function that reads the same stored tensor
    if function:
        kept: dict[tuple[str, int], str] = {}
        for fn in fns:
            if fn.name.split("/")[0] not in function:
                for v in _blob_values_of(fn.block):
                    kept[(v.blobFileValue.fileName, int(v.blobFileValue.offset))] = fn.name
        for c in cuts:
            if c.decision.affected:
                for p in c.target.form.params:
                    key = (p.value.blobFileValue.fileName, int(p.value.blobFileValue.offset))
                    if p.value.WhichOneof("value") == "blobFileValue" and key in kept:
                        c.shared_with = sorted({*c.shared_with, f"function {kept[key]}"})
    return Planned(cuts, held, left, fns, outside, outside_refused)


def _example(cuts: list[Cut], left: list[dict[str, object]]) -> str:
    """One op's names, to show what a pattern can match (bounded: the error is one line)."""
    if cuts:
        t = cuts[0].target
        op, weight = t.name, t.weight_name
    elif left:
        op, weight = str(left[0]["op"]), str(left[0]["weight"] or "")
    else:
        return "none: no op with a stored weight"
    m = names.layer(op, weight)
    shown = [op, weight] + ([m.dotted] if m is not None else [])
    return ", ".join(dict.fromkeys(n[:60] for n in shown if n))


def _key(c: Cut) -> tuple[object, ...]:
    """The stored tensors of a cut's weight: the same key for every op that reads them."""
    form = c.target.form
    return tuple(
        (p.value.blobFileValue.fileName, int(p.value.blobFileValue.offset))
        if p.value.WhichOneof("value") == "blobFileValue"
        else (c.target.fn.name, graph.op_name(form.op), p.key)
        for p in form.params
    )


def _stored(cuts: list[Cut], side: bool = False) -> dict[tuple[object, ...], int]:
    """Each stored weight of the cuts once (however many ops or functions read it): its bytes,
    or with `side` its LUT, scale and offset bytes."""
    return {
        _key(c): c.target.form.side_bytes() if side else c.target.form.stored_bytes for c in cuts
    }


def _shared(changed: list[Cut], given: Sequence[str]) -> list[dict[str, object]]:
    """Each split weight that an unsplit reader keeps whole, once: what it duplicates."""
    out: dict[tuple[object, ...], dict[str, object]] = {}
    readers: dict[tuple[object, ...], list[str]] = {}
    for c in changed:
        if c.shared_with:
            t, key = c.target, _key(c)
            mine = readers.setdefault(key, [])
            mine += [r for r in c.shared_with if r not in mine]
            out.setdefault(
                key,
                {
                    "weight": t.weight_name,
                    **_module(t.name, t.weight_name, given),
                    "readers": mine,
                    "bytes": t.form.stored_bytes,
                },
            )
    return list(out.values())


def _decode(pkg: package.Package, plan: Planned, chip: Chip, h: Hypothesis) -> dict[str, object]:
    """One decode step of the default function: every weight once, each at its marginal time;
    an op left whole (--skip, a cut off its blocks, a function --function leaves out) at its
    unsplit time."""
    desc = pkg.spec.description
    default = desc.defaultFunctionName or ("main" if "main" in pkg.spec.mlProgram.functions else "")

    def mine(fn: str) -> bool:
        return fn.split("/")[0] == default if default else True

    planned = [c for c in plan.cuts if mine(c.target.fn.name)]
    whole = [c for c in plan.held + plan.outside if mine(c.target.fn.name)]
    decided = list({c.decision.weight: c.decision for c in planned + whole}.values())

    def figures(on: Chip) -> dict[str, float]:
        """Before and after on `on` (the profile or a band's member), for the plans decided."""
        timed = decided if on is chip else retime(decided, on, h, marginal=True)
        by_weight = {d.weight: d for d in timed}

        def us(c: Cut, split: bool) -> float:
            d = by_weight[c.decision.weight]
            return (d.time_after if split and d.affected else d.time_before).marginal_us

        whole_us = sum(us(c, False) for c in whole)
        return {
            "before": on.profile.overhead_us + sum(us(c, False) for c in planned) + whole_us,
            "after": on.profile.overhead_us + sum(us(c, True) for c in planned) + whole_us,
        }

    central, others = bands.over(chip, figures)
    kept = {(c.target.fn.name, c.target.name) for c in plan.held}
    refused = [(str(x["function"]), str(x["op"])) for x in plan.left]
    unplanned = [
        op for fn, op in refused + plan.outside_refused if mine(fn) and (fn, op) not in kept
    ]
    return {
        "function": default,
        **bands.merged(
            {k: round(v, DIGITS) for k, v in central.items()},
            bands.spans(central, others, DIGITS),
        ),
        "held_whole": len(whole),  # left alone, counted at their unsplit time
        "not_counted": unplanned,  # stored-weight ops that could not be planned (see skipped)
    }


def _write(
    pkg: package.Package,
    out: Path,
    changed: list[Cut],
    fns: list[graph.Fn],
    files: dict[str, blobs.WeightFile],
) -> int:
    """The new package at `out` (staged, renamed into place); its weight bytes."""
    pending = rewrite.Pending()
    by_fn: dict[int, dict[int, list[Any]]] = {}
    for c in changed:
        new = rewrite.split_op(c.target, c.decision.chosen.axis, c.parts, pending)
        by_fn.setdefault(id(c.target.fn), {})[c.target.index] = new
    for fn in fns:
        if id(fn) in by_fn:
            rewrite.rebuild(fn.block, by_fn[id(fn)])
            rewrite.drop_dead_weights(fn.block)
    with package.staged(out) as build:
        if not changed:  # nothing in the notch: the package as it was, byte for byte
            package.copy_files(pkg, build, set())
            return sum(os.path.getsize(build / pkg.weight_rel(n)) for n in _weight_names(pkg))
        rels = {pkg.weight_rel(n) for n in _weight_names(pkg) | {s.file for s in pending.items}}
        package.copy_files(pkg, build, {pkg.model_rel} | rels)
        total = _write_weights(pkg, build, pending, files)
        with open(build / pkg.model_rel, "wb") as fh:
            fh.write(pkg.spec.SerializeToString())
    return total


def _weight_names(pkg: package.Package) -> set[str]:
    return {
        v.blobFileValue.fileName
        for v in _blob_values(pkg.spec.mlProgram)
        if v.blobFileValue.fileName != graph.PENDING
    }


def _write_weights(
    pkg: package.Package, build: Path, pending: rewrite.Pending, files: dict[str, blobs.WeightFile]
) -> int:
    """Each weight file the new program reads, written from the old ones; its total size."""
    writers: dict[str, blobs.Writer] = {}
    handles = []
    try:
        for value in _blob_values(pkg.spec.mlProgram):
            bf = value.blobFileValue
            if bf.fileName == graph.PENDING:
                s = pending.items[int(bf.offset)]
                name = s.file
            else:
                s, name = None, bf.fileName
            rel = pkg.weight_rel(name)
            if rel not in writers:
                fh = open(build / rel, "wb")  # noqa: SIM115 (closed below)
                handles.append(fh)
                writers[rel] = blobs.Writer(fh)
            w, src = writers[rel], _weight_file(pkg, files, name)
            if s is None:
                offset = w.copy(src, src.blob(int(bf.offset)))
            else:
                b = src.blob(s.record)
                raw, pad = blobs.slice_bytes(src.read(b), s.shape, s.bits, s.dim, s.a, s.b)
                offset = w.put(s, b.dtype, raw, pad)
            bf.fileName = name
            bf.offset = offset
        for w in writers.values():
            w.finish()
    finally:
        for fh in handles:
            fh.close()
    return sum(os.path.getsize(build / r) for r in writers)
