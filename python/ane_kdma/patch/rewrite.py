"""Splitting one op in the program's protobuf: the parts, their weights, and the join.

* **cin** (the default): the input is split along its channel axis, each
  part op reads its slice of the input channels and of the weight (the bias
  on the first part only), and the partial results are added in order:
  ``((p0 + p1) + p2) ...``. The summation order changes, as in the public
  Core ML pass and the article's patch.
* **cout**: each part op reads all the input and a slice of the output
  channels (and of the bias); a concat on the channel axis joins them, which
  is bit-exact.

The op that produces the original output var keeps that var's name and type,
so every consumer and every model output is untouched; the new ops and
weights are named after the original (``{op}_cin0``, ``{weight}_cin0``).
Weight slices are recorded as pending blobs and written with the new weight
file (see :mod:`.blobs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ane_kdma.errors import InputError
from ane_kdma.patch.blobs import slice_bytes
from ane_kdma.patch.graph import PENDING, Form, Param, Target, bits_of, dtype_name, pb


@dataclass(frozen=True)
class Slice:
    """A pending blob: elements a:b along `dim` of the tensor stored at (file, record)."""

    file: str
    record: int
    shape: tuple[int, ...]
    bits: int
    dim: int
    a: int
    b: int


class Pending:
    """The slices the rewrite asked for, by index (the placeholder offset)."""

    def __init__(self) -> None:
        self.items: list[Slice] = []
        self._index: dict[Slice, int] = {}

    def add(self, s: Slice) -> int:
        if s not in self._index:
            self._index[s] = len(self.items)
            self.items.append(s)
        return self._index[s]


# ---------------------------------------------------------------- proto builders


def _tt(base: Any, dim: int | None = None, size: int | None = None) -> Any:
    mil, _ = pb()
    tt = mil.TensorType()
    tt.CopyFrom(base)
    if dim is not None:
        tt.dimensions[dim].constant.size = int(size)  # type: ignore[arg-type]
    return tt


def _string(value: str) -> Any:
    mil, _ = pb()
    v = mil.Value()
    v.type.tensorType.dataType = mil.DataType.Value("STRING")
    v.immediateValue.tensor.strings.values.append(value)
    return v


def _ints(values: list[int], scalar: bool = False) -> Any:
    mil, _ = pb()
    v = mil.Value()
    tt = v.type.tensorType
    tt.dataType = mil.DataType.Value("INT32")
    if not scalar:
        tt.rank = 1
        tt.dimensions.add().constant.size = len(values)
    v.immediateValue.tensor.ints.values.extend(values)
    return v


def _bool(value: bool) -> Any:
    mil, _ = pb()
    v = mil.Value()
    v.type.tensorType.dataType = mil.DataType.Value("BOOL")
    v.immediateValue.tensor.bools.values.append(value)
    return v


def _const(name: str, value: Any) -> Any:
    mil, _ = pb()
    op = mil.Operation()
    op.type = "const"
    out = op.outputs.add()
    out.name = name
    out.type.CopyFrom(value.type)
    op.attributes["name"].CopyFrom(_string(name))
    op.attributes["val"].CopyFrom(value)
    return op


def _op(kind: str, name: str, inputs: dict[str, list[str]], outputs: list[tuple[str, Any]]) -> Any:
    mil, _ = pb()
    op = mil.Operation()
    op.type = kind
    for key, names in inputs.items():
        arg = op.inputs[key]
        for n in names:
            arg.arguments.add().name = n
    for oname, tt in outputs:
        o = op.outputs.add()
        o.name = oname
        o.type.tensorType.CopyFrom(tt)
    op.attributes["name"].CopyFrom(_string(name))
    return op


def _set_input(op: Any, key: str, name: str) -> None:
    del op.inputs[key].arguments[:]
    op.inputs[key].arguments.add().name = name


# ---------------------------------------------------------------- slicing stored tensors


def _immediate_slice(p: Param, dim: int, a: int, b: int) -> Any:
    """A small tensor stored in the program itself, sliced and stored the same way."""
    mil, _ = pb()
    t = p.value.immediateValue.tensor
    which = t.WhichOneof("value")
    shape = p.shape
    out = mil.Value()
    out.CopyFrom(p.value)
    ot = out.immediateValue.tensor
    if which == "bytes":
        raw, _pad = slice_bytes(bytes(t.bytes.values), shape, p.bits, dim, a, b)
        ot.bytes.values = raw
        return out
    if which not in ("floats", "ints", "longInts", "doubles", "bools"):
        raise InputError(f"{p.key}: an immediate {which} tensor cannot be sliced")
    vals = np.array(list(getattr(t, which).values)).reshape(shape)
    index = [slice(None)] * len(shape)
    index[dim] = slice(a, b)
    field = getattr(ot, which)
    del field.values[:]
    field.values.extend(vals[tuple(index)].reshape(-1).tolist())
    return out


def slice_param(p: Param, dim: int, a: int, b: int, blk: int | None, pending: Pending) -> Any:
    """The stored tensor for dense elements a:b along `dim` (kept whole when blk is None)."""
    mil, _ = pb()
    if blk is None:
        out = mil.Value()
        out.CopyFrom(p.value)
        return out
    a2, b2 = a // blk, b // blk
    tt = _tt(p.ttype, dim, b2 - a2)
    which = p.value.WhichOneof("value")
    if which == "immediateValue":
        out = _immediate_slice(p, dim, a2, b2)
    elif which == "blobFileValue":
        bits = bits_of(p.ttype)
        if bits is None:
            raise InputError(f"{p.key}: stored as {dtype_name(p.ttype)}")
        bf = p.value.blobFileValue
        idx = pending.add(Slice(bf.fileName, int(bf.offset), p.shape, bits, dim, a2, b2))
        out = mil.Value()
        out.blobFileValue.fileName = PENDING
        out.blobFileValue.offset = idx
    else:
        raise InputError(f"{p.key}: a {which} value cannot be sliced")
    out.type.tensorType.CopyFrom(tt)
    return out


def part_weight(
    form: Form, dim: int, a: int, b: int, name: str, pending: Pending
) -> tuple[list[Any], str]:
    """The ops that store dense elements a:b along `dim` of the weight, and the var they make."""
    mil, _ = pb()
    if form.kind == "const":
        (p,) = form.params
        return [_const(name, slice_param(p, dim, a, b, 1, pending))], name
    ops: list[Any] = []
    op = mil.Operation()
    op.CopyFrom(form.op)
    op.attributes["name"].CopyFrom(_string(name))
    op.outputs[0].name = name
    op.outputs[0].type.tensorType.CopyFrom(_tt(form.op.outputs[0].type.tensorType, dim, b - a))
    for p in form.params:
        v = slice_param(p, dim, a, b, form.blocks[p.key][dim], pending)
        if p.kind == "attr":
            op.attributes[p.key].CopyFrom(v)
        elif p.kind == "inline":
            op.inputs[p.key].arguments[0].value.CopyFrom(v)
        else:
            cname = f"{p.const_op.outputs[0].name}_{name.rsplit('_', 1)[-1]}"
            ops.append(_const(cname, v))
            _set_input(op, p.key, cname)
    ops.append(op)
    return ops, name


def bias_part(
    t: Target, a: int, b: int, tag: str, pending: Pending
) -> tuple[list[Any], str | None]:
    """The bias for output channels a:b (cout), or None when the op has none."""
    from ane_kdma.patch.graph import arg_names, form_of

    names = arg_names(t.op, "bias")
    if not names:
        return [], None
    form = form_of(t.fn, names[0])
    if not isinstance(form, Form) or len(form.shape) != 1:
        raise InputError(f"{t.name}: its bias is not a stored vector")
    return part_weight(form, 0, a, b, f"{names[0]}_{tag}", pending)


# ---------------------------------------------------------------- the split


def split_op(t: Target, axis: str, parts: tuple[int, ...], pending: Pending) -> list[Any]:
    """The ops that replace `t.op`, in program order; the last produces the original output."""
    mil, _ = pb()
    op, name = t.op, t.name
    out_var = op.outputs[0]
    edges = np.concatenate([[0], np.cumsum(parts)]).astype(int).tolist()
    bounds = list(zip(edges[:-1], edges[1:], strict=True))
    new: list[Any] = []
    xname = op.inputs["x"].arguments[0].name
    xtt = t.fn.types[xname].tensorType
    dim = t.dim_in if axis == "cin" else t.dim_out
    if axis == "cin":
        split_name = f"{name}_split"
        sizes, ax = f"{split_name}_sizes", f"{split_name}_axis"
        new += [_const(sizes, _ints(list(parts))), _const(ax, _ints([t.x_axis], scalar=True))]
        xs = [(f"{split_name}_{i}", _tt(xtt, t.x_axis, n)) for i, n in enumerate(parts)]
        new.append(
            _op("split", split_name, {"x": [xname], "split_sizes": [sizes], "axis": [ax]}, xs)
        )
    outs: list[str] = []
    for i, (a, b) in enumerate(bounds):
        tag = f"{axis}{i}"
        wops, wvar = part_weight(t.form, dim, a, b, f"{t.weight_var}_{tag}", pending)
        new += wops
        part = mil.Operation()
        part.CopyFrom(op)
        part.attributes["name"].CopyFrom(_string(f"{name}_{tag}"))
        _set_input(part, t.weight_key, wvar)
        if axis == "cin":
            _set_input(part, "x", xs[i][0])
            if i > 0 and "bias" in part.inputs:
                del part.inputs["bias"]
            ott = out_var.type.tensorType
        else:
            bops, bvar = bias_part(t, a, b, tag, pending)
            new += bops
            if bvar is not None:
                _set_input(part, "bias", bvar)
            ott = _tt(out_var.type.tensorType, t.y_axis, b - a)
        part.outputs[0].name = f"{out_var.name}_{tag}"
        part.outputs[0].type.tensorType.CopyFrom(ott)
        new.append(part)
        outs.append(part.outputs[0].name)
    ott = out_var.type.tensorType
    if axis == "cin":
        acc = outs[0]
        for i, o in enumerate(outs[1:], start=1):
            last = i == len(outs) - 1
            sname = name if last else f"{name}_sum{i}"
            oname = out_var.name if last else f"{out_var.name}_sum{i}"
            new.append(_op("add", sname, {"x": [acc], "y": [o]}, [(oname, ott)]))
            acc = oname
    else:
        ax, il = f"{name}_cat_axis", f"{name}_cat_interleave"
        new += [_const(ax, _ints([t.y_axis], scalar=True)), _const(il, _bool(False))]
        new.append(
            _op(
                "concat",
                name,
                {"values": outs, "axis": [ax], "interleave": [il]},
                [(out_var.name, ott)],
            )
        )
    return new


def _copied(ops: list[Any]) -> list[Any]:
    mil, _ = pb()
    out = []
    for o in ops:
        c = mil.Operation()
        c.CopyFrom(o)
        out.append(c)
    return out


def rebuild(block: Any, replacements: dict[int, list[Any]]) -> None:
    """Put each replacement list where the op of that index was in `block`."""
    ops: list[Any] = []
    for i, o in enumerate(block.operations):
        ops.extend(replacements.get(i, [o]))
    ops = _copied(ops)
    del block.operations[:]
    block.operations.extend(ops)


def used_names(block: Any) -> set[str]:
    names = set(block.outputs)
    for op in block.operations:
        for arg in op.inputs.values():
            names.update(b.name for b in arg.arguments if b.WhichOneof("binding") == "name")
        for inner in op.blocks:
            names |= used_names(inner)
    return names


def drop_dead_weights(block: Any) -> int:
    """Remove const and constexpr ops nothing reads any more (the weights that were split)."""
    dropped = 0
    while True:
        used = used_names(block)
        keep = [
            o
            for o in block.operations
            if not (
                (o.type == "const" or o.type.startswith("constexpr"))
                and not any(out.name in used for out in o.outputs)
            )
        ]
        gone = len(block.operations) - len(keep)
        if not gone:
            return dropped
        dropped += gone
        keep = _copied(keep)
        del block.operations[:]
        block.operations.extend(keep)
