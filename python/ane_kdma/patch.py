"""`patch`: rewrite a Core ML ML Program so that no weight streams in the notch.

Why a rewrite and not only numbers: the split only helps once the compiler is
handed separate weights. This loads the package's ML Program into MIL
(coremltools, the optional extra ``coreml``, imported on first use), finds
every conv, linear and matmul whose weight is a constant fp16 tensor, plans
that weight exactly as ``plan`` does (same search, same hypothesis, same
engine check), and rewrites each affected op as its plan says:

* **cout**: one op per part on a slice of the output channels (and of the
  bias), joined by a concat on the channel axis: bit-exact;
* **cin**: the input split along its channel axis, one op per part on a
  slice of the input channels (the bias on the first), joined by adds in
  order: the summation order changes, as in the public Core ML pass.

Each chunk is its own constant, a bit-identical slice of the original; the
final op takes the original's name, so the model's outputs keep theirs. The
program is serialised with no graph passes beyond the backend's own (a fusing
pass could merge the parts again), with the original model description. A
package with nothing affected is copied unchanged. Grouped convolutions,
compressed (constexpr) weights, non-fp16 weights and a matmul whose constant
is its left operand are left alone and listed.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.plan import Decision, Weight, decide, in_window, lines_of

NEEDS = "patch needs the 'coreml' extra: pip install -e '.[coreml]'"
TARGETS = ("conv", "linear", "matmul")


# ---------------------------------------------------------------- coremltools, quietly


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """coremltools logs and draws progress bars on stderr; a run says at most one line there."""
    logger = logging.getLogger("coremltools")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def coreml() -> SimpleNamespace:
    """The coremltools pieces patch uses, imported now (InputError when the extra is missing)."""
    with _quiet():
        try:
            import coremltools as ct
            from coremltools.converters.mil import Builder as mb
            from coremltools.converters.mil.frontend.milproto import load as milload
            from coremltools.converters.mil.mil import types
        except ImportError:
            raise InputError(NEEDS) from None
    return SimpleNamespace(ct=ct, mb=mb, milload=milload, types=types)


def _shown(path: Path) -> str:
    s = str(path)
    return s if len(s) <= 60 else "..." + s[-57:]


@dataclass
class Package:
    """A loaded .mlpackage: the model (for its spec and description) and its MIL program."""

    path: Path
    model: Any
    spec: Any
    program: Any


def load(path: str | Path, cm: SimpleNamespace | None = None) -> Package:
    """An .mlpackage's ML Program as MIL; anything else is refused in one line."""
    cm = cm or coreml()
    p = Path(path)
    where = _shown(p)
    if not p.is_dir() or not (p / "Manifest.json").is_file():
        raise InputError(f"{where}: not an .mlpackage (a folder with a Manifest.json)")
    try:
        with _quiet():
            model = cm.ct.models.MLModel(str(p), skip_model_load=True)
            spec = model.get_spec()
    except Exception as exc:  # coremltools raises many types for a broken package
        raise InputError(f"{where}: not a readable Core ML package ({_why(exc)})") from None
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise InputError(f"{where}: a {kind} model, not an ML Program; patch rewrites ML Programs")
    try:
        with _quiet():
            prog = cm.milload.load(
                spec,
                specification_version=spec.specificationVersion,
                file_weights_dir=model.weights_dir,
            )
    except Exception as exc:
        raise InputError(f"{where}: its ML Program cannot be read ({_why(exc)})") from None
    if list(prog.functions) != ["main"]:
        raise InputError(f"{where}: {len(prog.functions)} functions; patch handles one, main")
    return Package(p, model, spec, prog)


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:80]}" if text else type(exc).__name__


# ---------------------------------------------------------------- finding weights


@dataclass(frozen=True)
class Target:
    """An op with a constant fp16 weight the planner can cut."""

    op: Any  # the MIL operation
    weight: Weight
    axis_in: int  # the input's channel axis (for a Cin split)
    axis_out: int  # the output's channel axis (for a Cout split)


@dataclass(frozen=True)
class Skipped:
    op: str
    op_type: str
    reason: str


def _const(var: Any) -> bool:
    return (
        var is not None and var.op is not None and var.op.op_type == "const" and var.val is not None
    )


def _target(op: Any, cm: SimpleNamespace) -> Target | Skipped | None:
    """The op's weight as a Weight, why it is left alone, or None if it has no weight."""
    if op.op_type == "matmul":
        w, other = op.inputs.get("y"), op.inputs.get("x")
    else:
        w, other = op.inputs.get("weight"), op.inputs.get("x")
    if w is None or w.op is None:
        return None
    if w.op.op_type.startswith("constexpr"):
        return Skipped(op.name, op.op_type, f"compressed weight ({w.op.op_type})")
    if not _const(w):
        if op.op_type == "matmul" and _const(other):
            return Skipped(op.name, op.op_type, "the constant is the left operand")
        return None  # activations times activations: no weight
    if w.dtype != cm.types.fp16:
        return Skipped(op.name, op.op_type, f"weight is {cm.types.builtin_to_string(w.dtype)}")
    bias = op.inputs.get("bias")
    if bias is not None and not _const(bias):
        return Skipped(op.name, op.op_type, "bias is not a constant")
    shape = w.val.shape
    rank_out = op.outputs[0].rank
    if op.op_type == "conv":
        groups = int(op.inputs["groups"].val) if "groups" in op.inputs else 1
        if groups != 1:
            return Skipped(op.name, op.op_type, f"grouped convolution (groups={groups})")
        others = [k for k in op.inputs if k not in ("x", "weight", "bias")]
        if any(not _const(op.inputs[k]) for k in others):
            return Skipped(op.name, op.op_type, "a non-constant attribute")
        kernel = [int(k) for k in shape[2:]] or [1]
        weight = Weight(int(shape[1]), int(shape[0]), kernel[0], math.prod(kernel[1:]))
        return Target(op, weight, 1, 1)
    if len(shape) != 2:
        return Skipped(op.name, op.op_type, f"rank-{len(shape)} weight")
    if op.op_type == "linear":
        return Target(op, Weight(int(shape[1]), int(shape[0])), -1, rank_out - 1)
    ty = bool(op.inputs["transpose_y"].val) if "transpose_y" in op.inputs else False
    tx = bool(op.inputs["transpose_x"].val) if "transpose_x" in op.inputs else False
    cin, cout = (shape[1], shape[0]) if ty else (shape[0], shape[1])
    return Target(op, Weight(int(cin), int(cout)), -2 if tx else -1, rank_out - 1)


def scan(prog: Any, cm: SimpleNamespace) -> tuple[list[Target], list[Skipped]]:
    """Every conv, linear and matmul of the program (nested blocks too), in program order."""
    targets: list[Target] = []
    skipped: list[Skipped] = []

    def walk(block: Any) -> None:
        for op in list(block.operations):
            for inner in op.blocks:
                walk(inner)
            if op.op_type in TARGETS:
                t = _target(op, cm)
                if isinstance(t, Target):
                    targets.append(t)
                elif isinstance(t, Skipped):
                    skipped.append(t)

    for fn in prog.functions.values():
        walk(fn)
    return targets, skipped


# ---------------------------------------------------------------- the rewrite


def _bounds(parts: tuple[int, ...]) -> list[tuple[int, int]]:
    edges = np.concatenate([[0], np.cumsum(parts)]).tolist()
    return list(zip(edges[:-1], edges[1:], strict=True))


def _attrs(op: Any) -> dict[str, Any]:
    """The op's constant arguments other than its input, weight and bias."""
    skip = {"x", "weight", "bias", "y"}
    return {k: v.val for k, v in op.inputs.items() if k not in skip}


def _slice_weight(t: Target, a: int, b: int, axis: str) -> np.ndarray:
    """Output (axis 'cout') or input (axis 'cin') channels a:b of the stored weight."""
    op = t.op
    w = (op.inputs["y"] if op.op_type == "matmul" else op.inputs["weight"]).val
    if op.op_type == "matmul":
        ty = bool(op.inputs["transpose_y"].val) if "transpose_y" in op.inputs else False
        out_dim = 0 if ty else 1  # y is [Cin, Cout], or [Cout, Cin] transposed
        dim = out_dim if axis == "cout" else 1 - out_dim
    else:
        dim = 0 if axis == "cout" else 1  # conv [Cout, Cin, ...], linear [Cout, Cin]
    index = [slice(None)] * w.ndim
    index[dim] = slice(a, b)
    return np.ascontiguousarray(w[tuple(index)])


def _part(t: Target, cm: SimpleNamespace, x: Any, weight: np.ndarray, bias: Any, name: str) -> Any:
    op = t.op
    kw: dict[str, Any] = {**_attrs(op), "before_op": op, "name": name}
    if op.op_type == "matmul":
        return cm.mb.matmul(x=x, y=weight, **kw)
    if bias is not None:
        kw["bias"] = bias
    if op.op_type == "conv":
        return cm.mb.conv(x=x, weight=weight, **kw)
    return cm.mb.linear(x=x, weight=weight, **kw)


def rewrite(t: Target, decision: Decision, cm: SimpleNamespace) -> None:
    """Replace the op by its plan's parts; the last op takes the original's name."""
    op, cand = t.op, decision.chosen
    name, block = op.name, op.enclosing_block
    bias_var = op.inputs.get("bias")
    bias = None if bias_var is None else bias_var.val
    with block:
        if cand.axis == "cout":
            outs = [
                _part(
                    t,
                    cm,
                    op.inputs["x"],
                    _slice_weight(t, a, b, "cout"),
                    None if bias is None else np.ascontiguousarray(bias[a:b]),
                    f"{name}_cout{i}",
                )
                for i, (a, b) in enumerate(_bounds(cand.parts))
            ]
            final = cm.mb.concat(values=outs, axis=t.axis_out, before_op=op, name=f"{name}_cat")
        elif cand.axis == "cin":
            x = op.inputs["x"]
            axis = t.axis_in if t.axis_in >= 0 else x.rank + t.axis_in
            xs = cm.mb.split(
                x=x, split_sizes=list(cand.parts), axis=axis, before_op=op, name=f"{name}_split"
            )
            final = None
            for i, (a, b) in enumerate(_bounds(cand.parts)):
                part = _part(
                    t,
                    cm,
                    xs[i],
                    _slice_weight(t, a, b, "cin"),
                    bias if i == 0 else None,
                    f"{name}_cin{i}",
                )
                final = (
                    part
                    if final is None
                    else cm.mb.add(x=final, y=part, before_op=op, name=f"{name}_sum{i}")
                )
        else:
            raise ValueError(f"{name}: no rewrite for axis {cand.axis!r}")
        block.replace_uses_of_var_after_op(anchor_op=op, old_var=op.outputs[0], new_var=final)
        block.remove_ops([op])
    final.name = name
    final.op.name = name


# ---------------------------------------------------------------- the command


@dataclass(frozen=True)
class OpPlan:
    op: str
    op_type: str
    decision: Decision

    def as_dict(self, chip: Chip) -> dict[str, object]:
        d = self.decision
        w = d.weight
        lines = lines_of(d.before.chunk_bytes[0], chip)
        return {
            "op": self.op,
            "op_type": self.op_type,
            "shape": str(w),
            "cin": w.cin,
            "cout": w.cout,
            "bytes_per_core": d.before.chunk_bytes[0],
            "lines_per_core": lines,
            "in_window": in_window(lines, chip),
            "affected": d.affected,
            "axis": d.chosen.axis,
            "splits": d.chosen.splits,
            "parts": list(d.chosen.parts),
            "chunk_bytes_per_core": list(d.chosen.chunk_bytes),
            "time_us_before": round(d.before_us, 3),
            "time_us_after": round(d.after_us, 3),
        }


def patch(
    src: str | Path,
    dst: str | Path | None,
    chip: Chip,
    h: Hypothesis,
    engine: str = "model",
    dry_run: bool = False,
) -> dict[str, object]:
    """Plan every weight of `src`; unless `dry_run`, write the rewritten package to `dst`."""
    cm = coreml()
    out = None if dst is None else Path(dst)
    if not dry_run:
        if out is None:
            raise InputError("patch needs OUT.mlpackage (or --dry-run)")
        if out.exists():
            raise InputError(f"{_shown(out)} exists; patch does not overwrite")
        if not out.parent.is_dir():
            raise InputError(f"{_shown(out.parent)}: no such folder for the output")
    pkg = load(src, cm)
    targets, skipped = scan(pkg.program, cm)
    decided: dict[Weight, Decision] = {}
    plans: list[tuple[Target, Decision]] = []
    for t in targets:
        if t.weight not in decided:
            decided[t.weight] = decide(t.weight, chip, h, engine)
        plans.append((t, decided[t.weight]))
    changed = [(t, d) for t, d in plans if d.affected]
    if not dry_run and out is not None:
        if not changed:
            shutil.copytree(pkg.path, out)  # nothing in the notch: the package as it was
        else:
            try:
                for t, d in changed:
                    rewrite(t, d, cm)
                _save(pkg, out, cm)
            except InputError:
                raise
            except Exception as exc:  # coremltools refusing the rewritten graph
                raise InputError(f"{_shown(pkg.path)}: the rewrite failed ({_why(exc)})") from None
    return {
        "in": str(pkg.path),
        "out": None if dry_run or out is None else str(out),
        "dry_run": dry_run,
        "variant": h.name,
        "engine": engine,
        "weights": len(targets),
        "changed": [OpPlan(t.op.name, t.op.op_type, d).as_dict(chip) for t, d in changed],
        "unchanged": [t.op.name for t, d in plans if not d.affected],
        "skipped": [s.__dict__ for s in skipped],
    }


def _save(pkg: Package, out: Path, cm: SimpleNamespace) -> None:
    """Serialise with the backend passes only and the original description, then move into place."""
    fn = pkg.program.functions["main"]
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".patch-") as tmp:
        staged = Path(tmp) / out.name
        with _quiet():
            target = (
                {} if fn.opset_version is None else {"minimum_deployment_target": fn.opset_version}
            )
            model = cm.ct.convert(
                pkg.program,
                convert_to="mlprogram",
                pass_pipeline=cm.ct.PassPipeline.EMPTY,
                skip_model_load=True,
                **target,
            )
            spec = model.get_spec()
            spec.description.CopyFrom(pkg.spec.description)
            cm.ct.models.MLModel(spec, weights_dir=model.weights_dir, skip_model_load=True).save(
                str(staged)
            )
        staged.rename(out)
