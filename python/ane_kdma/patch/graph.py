"""The ML Program's graph, read and rewritten as protobuf: weights found, ops split, names kept.

Why protobuf and not MIL: loading the program into coremltools' MIL decodes
every weight and renames what it re-emits (an op's output takes the op's name
when saved), and saving it again runs passes that either fuse the parts back
or, left out, keep every original weight in the file. Working on the
program's own protobuf changes exactly the ops that are split, keeps every
other op, name, function and attribute as it was, and leaves weight data in
the weight file until the new file is written.

A weight is a *form*: the tensors that store it and how each maps onto the
dense weight's dimensions. A dense weight is one tensor; a palettized one
(``constexpr_lut_to_dense``) is its indices plus a LUT with one entry block
per group of channels; a quantized one (``constexpr_blockwise_shift_scale``,
``constexpr_affine_dequantize``) its data plus scales (and offsets) per block
or per channel. Cutting the dense weight along one dimension cuts each stored
tensor along the same dimension, in whole blocks: every part's tensors are
exact slices of the stored ones, never decompressed.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ane_kdma.errors import InputError

#: stored bits of each MIL data type a weight can have
TYPE_BITS = {
    "FLOAT16": 16, "BFLOAT16": 16, "FLOAT32": 32, "FLOAT64": 64,
    "INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64, "INT4": 4,
    "UINT8": 8, "UINT16": 16, "UINT32": 32, "UINT64": 64,
    "UINT4": 4, "UINT2": 2, "UINT1": 1, "UINT6": 6, "UINT3": 3,
    "FLOAT8E4M3FN": 8, "FLOAT8E5M2": 8, "BOOL": 8,
}  # fmt: skip
TARGETS = ("conv", "linear", "matmul")
PENDING = "@ane-kdma/pending"  # a blobFileValue not yet written (offset = index in Graph.pending)


def pb() -> Any:
    """coremltools' protobuf modules, imported quietly (coremltools logs on stderr at import
    time off macOS: a run says at most one line there)."""
    if "coremltools.proto.Model_pb2" not in sys.modules:
        logger = logging.getLogger("coremltools")
        level = logger.level
        logger.setLevel(logging.CRITICAL)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                import coremltools  # type: ignore[import-untyped]  # noqa: F401
        finally:
            logger.setLevel(level)
    import coremltools  # type: ignore[import-untyped]  # noqa: F401
    from coremltools.proto import MIL_pb2, Model_pb2  # type: ignore[import-untyped]

    return MIL_pb2, Model_pb2


# ---------------------------------------------------------------- types and values


def dtype_name(tt: Any) -> str:
    mil, _ = pb()
    return str(mil.DataType.Name(tt.dataType))


def shape_of(tt: Any) -> tuple[int, ...] | None:
    """A tensor type's shape; None when a dimension is not a constant."""
    dims = []
    for d in tt.dimensions:
        if d.WhichOneof("dimension") != "constant":
            return None
        dims.append(int(d.constant.size))
    return tuple(dims)


def bits_of(tt: Any) -> int | None:
    return TYPE_BITS.get(dtype_name(tt))


@dataclass
class Param:
    """One stored tensor of a weight's form, and where it lives in the program."""

    key: str  # the op's argument or attribute name
    kind: str  # "attr" (an op attribute), "inline" (an input's value), "const" (a const op)
    value: Any  # the Value proto
    ttype: Any  # its TensorType
    const_op: Any = None  # for kind "const": the const op that holds it

    @property
    def shape(self) -> tuple[int, ...]:
        s = shape_of(self.ttype)
        if s is None:
            raise InputError(f"{self.key}: a stored tensor without a constant shape")
        return s

    @property
    def bits(self) -> int:
        b = bits_of(self.ttype)
        if b is None:
            raise InputError(f"{self.key}: stored as {dtype_name(self.ttype)}")
        return b

    @property
    def stored_bytes(self) -> int:
        return math.ceil(math.prod(self.shape) * self.bits / 8)


@dataclass
class Form:
    """How a weight is stored: its tensors, each with the block each dense dimension maps onto.

    `blocks[key][d]` is how many dense elements along d share one element of
    that tensor (1 for data, the group or block size for a LUT or scale,
    None when the tensor does not vary along d and is kept whole).
    """

    kind: str  # "const" or the constexpr op type
    op: Any  # the const or constexpr op
    shape: tuple[int, ...]  # the dense weight's shape
    params: list[Param]
    blocks: dict[str, list[int | None]]
    data_key: str  # the tensor whose bits are the weight's stored bits per element

    @property
    def bits(self) -> int:
        return next(p for p in self.params if p.key == self.data_key).bits

    @property
    def stored_bytes(self) -> int:
        return sum(p.stored_bytes for p in self.params)

    def side_bytes(self) -> int:
        """LUT, scale and offset bytes (everything but the data)."""
        return sum(p.stored_bytes for p in self.params if p.key != self.data_key)

    def block_along(self, dim: int) -> int:
        """The dense elements along `dim` that a cut must keep together (1 for a dense weight)."""
        return math.lcm(1, *(b for p in self.params if (b := self.blocks[p.key][dim])))

    def cut_reason(self, dim: int, edges: list[int]) -> str | None:
        """Why these part edges along `dim` are not on the form's block boundaries (None: fine)."""
        for p in self.params:
            blk = self.blocks[p.key][dim]
            if blk is None or blk == 1:
                continue
            bad = [e for e in edges if e % blk]
            if bad:
                return f"a cut at {bad[0]} is inside a {blk}-channel block of its {p.key}"
        return None


@dataclass
class Fn:
    """One function of the program: its block, and every var's type and producer."""

    name: str
    block: Any
    types: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)


def functions(program: Any) -> Iterator[Fn]:
    for name in sorted(program.functions):
        f = program.functions[name]
        for opset in sorted(f.block_specializations):
            fn = Fn(
                f"{name}" if len(f.block_specializations) == 1 else f"{name}/{opset}",
                f.block_specializations[opset],
            )
            for i in f.inputs:
                fn.types[i.name] = i.type
            for op in walk_ops(fn.block):
                for o in op.outputs:
                    fn.types[o.name] = o.type
                    fn.producer[o.name] = op
            yield fn


def walk_ops(block: Any) -> Iterator[Any]:
    for op in block.operations:
        yield op
        for inner in op.blocks:
            yield from walk_ops(inner)


def walk_ops_of(op: Any) -> Iterator[Any]:
    """The op, then every op of its nested blocks."""
    yield op
    for inner in op.blocks:
        yield from walk_ops(inner)


def op_name(op: Any) -> str:
    a = op.attributes.get("name")
    if a is not None and a.immediateValue.tensor.strings.values:
        return str(a.immediateValue.tensor.strings.values[0])
    return op.outputs[0].name if op.outputs else op.type


def arg_names(op: Any, key: str) -> list[str]:
    if key not in op.inputs:
        return []
    return [a.name for a in op.inputs[key].arguments if a.WhichOneof("binding") == "name"]


def const_ints(fn: Fn, op: Any, key: str) -> list[int] | None:
    """An input's integer (or bool) value when it is a constant: inline or a const op."""
    if key not in op.inputs or not op.inputs[key].arguments:
        return None
    arg = op.inputs[key].arguments[0]
    if arg.WhichOneof("binding") == "value":
        value = arg.value
    else:
        src = fn.producer.get(arg.name)
        if src is None or src.type != "const" or "val" not in src.attributes:
            return None
        value = src.attributes["val"]
    t = value.immediateValue.tensor
    which = t.WhichOneof("value")
    if which in ("ints", "longInts", "bools"):
        return [int(v) for v in getattr(t, which).values]
    return None


# ---------------------------------------------------------------- weights: finding forms


def _param(fn: Fn, op: Any, key: str) -> Param | None:
    """The tensor behind an op's attribute or input `key` (None if absent)."""
    if key in op.attributes:
        v = op.attributes[key]
        return Param(key, "attr", v, v.type.tensorType)
    if key not in op.inputs or not op.inputs[key].arguments:
        return None
    arg = op.inputs[key].arguments[0]
    if arg.WhichOneof("binding") == "value":
        return Param(key, "inline", arg.value, arg.value.type.tensorType)
    src = fn.producer.get(arg.name)
    if src is None or src.type != "const" or "val" not in src.attributes:
        raise _Unsplittable(f"its {key} is computed, not stored")
    v = src.attributes["val"]
    return Param(key, "const", v, v.type.tensorType, src)


class _Unsplittable(Exception):
    """A weight form this rewrite cannot cut exactly (the message is the reason)."""


def form_of(fn: Fn, var: str) -> Form | str | None:
    """The form of the weight `var`; a reason string when it cannot be cut; None if not stored."""
    src = fn.producer.get(var)
    if src is None:
        return None
    try:
        return _form(fn, src)
    except _Unsplittable as exc:
        return str(exc)


def _blocks(dense: tuple[int, ...], side: tuple[int, ...], key: str) -> list[int | None]:
    if len(side) < len(dense):
        raise InputError(f"its {key} has rank {len(side)}, the weight {len(dense)}")
    out: list[int | None] = []
    for n, m in zip(dense, side[: len(dense)], strict=True):
        if m <= 0 or n % m:
            raise InputError(f"its {key} shape {side} does not divide the weight's {dense}")
        out.append(None if m == 1 and n > 1 else n // m)
    return out


def _form(fn: Fn, op: Any) -> Form | None:
    t = op.type
    if t == "const":
        p = _param(fn, op, "val")
        if p is None or shape_of(p.ttype) is None:
            return None
        return Form(t, op, p.shape, [p], {"val": [1] * len(p.shape)}, "val")
    if not t.startswith("constexpr"):
        return None
    out_shape = shape_of(op.outputs[0].type.tensorType)
    if out_shape is None:
        raise _Unsplittable(f"{t} with an unknown output shape")
    where = f"{op_name(op)} ({t})"
    try:
        if t == "constexpr_lut_to_dense" and "indices" in op.inputs:
            return _lut(fn, op, out_shape)
        if t == "constexpr_blockwise_shift_scale":
            return _shift_scale(fn, op, out_shape)
        if t == "constexpr_affine_dequantize":
            return _affine(fn, op, out_shape)
    except InputError as exc:
        raise InputError(f"{where}: inconsistent compressed weight: {exc}") from None
    if t == "constexpr_lut_to_dense":
        raise _Unsplittable("iOS16 LUT form (flat packed indices): not cut by this rewrite")
    raise _Unsplittable(f"{t}: not a form this rewrite cuts")


def _need(fn: Fn, op: Any, key: str) -> Param:
    p = _param(fn, op, key)
    if p is None:
        raise InputError(f"no {key}")
    if shape_of(p.ttype) is None or bits_of(p.ttype) is None:
        raise InputError(f"its {key} has no constant shape or a type without a size")
    if _producer_is_constexpr(fn, op, key):
        raise _Unsplittable(f"its {key} is itself compressed")
    return p


def _producer_is_constexpr(fn: Fn, op: Any, key: str) -> bool:
    names = arg_names(op, key)
    return (
        bool(names)
        and fn.producer.get(names[0]) is not None
        and fn.producer[names[0]].type.startswith("constexpr")
    )


def _lut(fn: Fn, op: Any, dense: tuple[int, ...]) -> Form:
    idx, lut = _need(fn, op, "indices"), _need(fn, op, "lut")
    if idx.shape != dense:
        raise InputError(f"indices {idx.shape} but output {dense}")
    if len(lut.shape) != len(dense) + 2 or lut.shape[-2] != 1 << idx.bits:
        raise InputError(
            f"LUT {lut.shape} for {idx.bits}-bit indices of a rank-{len(dense)} weight"
        )
    if lut.shape[-1] != 1:
        raise _Unsplittable(f"vector palettization (vector size {lut.shape[-1]})")
    blocks: dict[str, list[int | None]] = {
        "indices": [1] * len(dense),
        "lut": _blocks(dense, lut.shape, "lut"),
    }
    return Form(op.type, op, dense, [idx, lut], blocks, "indices")


def _shift_scale(fn: Fn, op: Any, dense: tuple[int, ...]) -> Form:
    data, scale = _need(fn, op, "data"), _need(fn, op, "scale")
    if data.shape != dense:
        raise InputError(f"data {data.shape} but output {dense}")
    if len(scale.shape) != len(dense):
        raise InputError(f"scale {scale.shape} for a rank-{len(dense)} weight")
    params = [data, scale]
    blocks: dict[str, list[int | None]] = {
        "data": [1] * len(dense),
        "scale": _blocks(dense, scale.shape, "scale"),
    }
    off = _param(fn, op, "offset")
    if off is not None:
        off = _need(fn, op, "offset")
        if off.shape != scale.shape:
            raise InputError(f"offset {off.shape} but scale {scale.shape}")
        params.append(off)
        blocks["offset"] = list(blocks["scale"])
    return Form(op.type, op, dense, params, blocks, "data")


def _affine(fn: Fn, op: Any, dense: tuple[int, ...]) -> Form:
    data = _need(fn, op, "quantized_data")
    if data.shape != dense:
        raise InputError(f"quantized_data {data.shape} but output {dense}")
    axis_v = (
        op.attributes["axis"].immediateValue.tensor.ints.values if "axis" in op.attributes else []
    )
    axis = int(axis_v[0]) if axis_v else 0
    axis = axis + len(dense) if axis < 0 else axis
    params = [data]
    blocks: dict[str, list[int | None]] = {"quantized_data": [1] * len(dense)}
    for key in ("zero_point", "scale"):
        p = _need(fn, op, key)
        if p.shape in ((), (1,)):
            blk: list[int | None] = [None] * len(dense)
        elif len(p.shape) == 1 and 0 <= axis < len(dense) and p.shape[0] == dense[axis]:
            blk = [None] * len(dense)
            blk[axis] = 1
        else:
            raise InputError(f"{key} {p.shape} for axis {axis} of {dense}")
        params.append(p)
        blocks[key] = blk
    return Form(op.type, op, dense, params, blocks, "quantized_data")


# ---------------------------------------------------------------- targets


@dataclass
class Target:
    """A conv, linear or matmul whose weight is stored: what the planner needs to cut it."""

    fn: Fn
    op: Any
    index: int  # the op's place in the function's block
    name: str
    form: Form
    weight_var: str
    weight_key: str  # "weight" or "y"
    cin: int
    cout: int
    kh: int
    kw: int
    dim_in: int  # the dense weight's Cin dimension
    dim_out: int  # the dense weight's Cout dimension
    x_axis: int  # the input's channel axis (non-negative)
    y_axis: int  # the output's channel axis (non-negative)

    @property
    def weight_name(self) -> str:
        return op_name(self.form.op)


@dataclass(frozen=True)
class Left:
    """An op with a stored weight that is left alone, and why."""

    op: str
    op_type: str
    reason: str
    weight: str = ""  # the weight's var name, when the op reads one by name


def target_of(fn: Fn, op: Any) -> Target | Left | None:
    """The op as a Target, why it is left alone, or None when it has no stored weight."""
    name = op_name(op)
    wkey, xkey = ("y", "x") if op.type == "matmul" else ("weight", "x")
    wnames, xnames = arg_names(op, wkey), arg_names(op, xkey)
    if not wnames or not xnames:
        if op.type == "matmul" and xnames and fn.producer.get(xnames[0]) is not None:
            pass
        return None
    form = form_of(fn, wnames[0])
    if form is None:
        if op.type == "matmul" and form_of(fn, xnames[0]) is not None:
            return Left(name, op.type, "the stored operand is the left one", xnames[0])
        return None
    if isinstance(form, str):
        return Left(name, op.type, form, wnames[0])
    shape = form.shape
    xt = fn.types.get(xnames[0])
    yt = op.outputs[0].type
    if xt is None or not xt.HasField("tensorType"):
        return Left(name, op.type, "input of unknown type", wnames[0])
    xr, yr = xt.tensorType.rank, yt.tensorType.rank
    if op.type == "conv":
        groups = const_ints(fn, op, "groups")
        if groups is not None and groups[0] != 1:
            return Left(name, op.type, f"grouped convolution (groups={groups[0]})", wnames[0])
        if len(shape) < 3:
            return Left(name, op.type, f"rank-{len(shape)} conv weight", wnames[0])
        kernel = list(shape[2:])
        kh, kw = kernel[0], math.prod(kernel[1:])
        return Target(
            fn, op, -1, name, form, wnames[0], wkey, shape[1], shape[0], kh, kw, 1, 0, 1, 1
        )
    if len(shape) != 2:
        return Left(name, op.type, f"rank-{len(shape)} weight", wnames[0])
    if op.type == "linear":
        return Target(
            fn, op, -1, name, form, wnames[0], wkey, shape[1], shape[0], 1, 1, 1, 0, xr - 1, yr - 1
        )
    tx = const_ints(fn, op, "transpose_x")
    ty = const_ints(fn, op, "transpose_y")
    if tx is None or ty is None:
        if "transpose_x" in op.inputs or "transpose_y" in op.inputs:
            return Left(name, op.type, "transpose flags that are not constants", wnames[0])
    if tx and tx[0]:
        return Left(name, op.type, "a transposed left operand", wnames[0])
    if xr < 2 or xr != yr and yr < 2:
        return Left(name, op.type, "a rank-1 operand", wnames[0])
    transposed = bool(ty and ty[0])
    din, dout = (1, 0) if transposed else (0, 1)
    return Target(
        fn,
        op,
        -1,
        name,
        form,
        wnames[0],
        wkey,
        shape[din],
        shape[dout],
        1,
        1,
        din,
        dout,
        xr - 1,
        yr - 1,
    )


def targets(fn: Fn) -> tuple[list[Target], list[Left]]:
    """Every conv, linear and matmul of the function with a stored weight, in program order."""
    found: list[Target] = []
    left: list[Left] = []
    for index, top in enumerate(fn.block.operations):
        for op in walk_ops_of(top):
            if op.type not in TARGETS:
                continue
            t = target_of(fn, op)
            if t is None:
                continue
            if isinstance(t, Target):
                if op is top:
                    t.index = index
                    found.append(t)
                    continue
                t = Left(t.name, op.type, "inside a control-flow block", t.weight_name)
            left.append(t)
    return found, left
