"""`patch`: ML Programs built with coremltools' MIL builder, rewritten, read back, run in numpy.

No Core ML runtime is needed (it exists only on macOS): the programs are
built, converted and saved with coremltools on this machine, read back into
MIL, and both graphs are evaluated by the small numpy interpreter below. The
weights and inputs are multiples of 1/256 below 2 in magnitude, so every
product and every partial sum is exact in float64: the rewritten graph must
equal the original to the bit, whichever way a sum is ordered.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma.cli import main
from ane_kdma.patch import NEEDS, patch
from ane_kdma.plan import Weight, in_window, lines_of, plan_weight

CHIP = chips.load()
#: the bundled chip's own reading (what --variant buggy means for it)
BUGGY = CHIP.variant("buggy")
FAST = "analytic"
RNG_SEED = 20260810


def coreml() -> SimpleNamespace:
    """The coremltools pieces the tests build and read programs with (quietly imported)."""
    pytest.importorskip("coremltools")
    with contextlib.redirect_stderr(io.StringIO()):
        import coremltools as ct
        from coremltools.converters.mil import Builder as mb
        from coremltools.converters.mil.frontend.milproto import load as milload
        from coremltools.converters.mil.mil import types
    return SimpleNamespace(ct=ct, mb=mb, milload=milload, types=types)


def _cm() -> SimpleNamespace:
    return coreml()


def load(path: Path, cm: SimpleNamespace) -> SimpleNamespace:
    """A saved package as coremltools reads it: its spec and its MIL program (every function)."""
    with contextlib.redirect_stderr(io.StringIO()):
        model = cm.ct.models.MLModel(str(path), skip_model_load=True)
        spec = model.get_spec()
        prog = cm.milload.load(
            spec,
            specification_version=spec.specificationVersion,
            file_weights_dir=model.weights_dir,
        )
    return SimpleNamespace(spec=spec, program=prog, model=model)


def _q(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """fp16 values k / 256, |k| < 512: exact in fp16, products and sums exact in float64."""
    return (rng.integers(-511, 512, shape) / 256).astype(np.float16)


def _save(cm, prog, path: Path) -> Path:
    with contextlib.redirect_stderr(io.StringIO()):
        model = cm.ct.convert(
            prog,
            convert_to="mlprogram",
            pass_pipeline=cm.ct.PassPipeline.EMPTY,
            minimum_deployment_target=cm.ct.target.iOS17,
            skip_model_load=True,
        )
    model.save(str(path))
    return path


# ---------------------------------------------------------------- the programs


def _notched(cm, path: Path, rng: np.random.Generator) -> tuple[Path, dict[str, Weight]]:
    """Convs (1x1, 3x3), a linear and matmuls in the notch, three of them cut only along Cin."""
    mb, types = cm.mb, cm.types
    w_conv, b_conv = _q(rng, 4096, 2048, 1, 1), _q(rng, 4096)  # one lap, x = 0
    w_3x3, b_3x3 = _q(rng, 7280, 128, 3, 3), _q(rng, 7280)  # x = -4
    w_lin, b_lin = _q(rng, 16, 524288), _q(rng, 16)  # Cout one group: only Cin can cut it
    y_mm = _q(rng, 2048, 4096)  # [Cin, Cout], one lap
    y_mmt = _q(rng, 2048, 4096)  # transposed: [Cout, Cin], one lap
    y_clear = _q(rng, 4096, 64)  # 512 lines: clear
    w_cin, b_cin = _q(rng, 16, 524288, 1, 1), _q(rng, 16)  # a conv only Cin can cut
    y_cin = _q(rng, 524288, 16)  # a matmul only Cin can cut
    specs = [
        mb.TensorSpec(shape=(1, 2048, 1, 1), dtype=types.fp16),
        mb.TensorSpec(shape=(1, 128, 3, 3), dtype=types.fp16),
        mb.TensorSpec(shape=(2, 524288), dtype=types.fp16),
        mb.TensorSpec(shape=(1, 524288, 1, 1), dtype=types.fp16),
    ]

    @mb.program(input_specs=specs, opset_version=cm.ct.target.iOS17)
    def prog(a, b, c, d):
        y = mb.conv(x=a, weight=w_conv, bias=b_conv, name="proj")
        y = mb.reshape(x=y, shape=[1, 4096], name="flat")
        z = mb.conv(x=b, weight=w_3x3, bias=b_3x3, pad_type="custom", pad=[1, 1, 1, 1], name="c3")
        u = mb.linear(x=c, weight=w_lin, bias=b_lin, name="head")
        cut = mb.slice_by_size(x=y, begin=[0, 0], size=[1, 2048], name="cut")
        v = mb.matmul(x=mb.relu(x=cut, name="act"), y=y_mm, name="mm")
        t = mb.matmul(x=v, y=y_mmt, transpose_y=True, name="mmt")
        s = mb.matmul(x=y, y=y_clear, name="small")
        e = mb.conv(x=d, weight=w_cin, bias=b_cin, name="cinconv")
        f = mb.matmul(x=c, y=y_cin, name="cinmm")
        return z, u, t, s, e, f

    shapes = {
        "proj": Weight(2048, 4096),
        "c3": Weight(128, 7280, 3, 3),
        "head": Weight(524288, 16),
        "mm": Weight(2048, 4096),
        "mmt": Weight(4096, 2048),
        "small": Weight(4096, 64),
        "cinconv": Weight(524288, 16),
        "cinmm": Weight(524288, 16),
    }
    return _save(cm, prog, path), shapes


def _clear(cm, path: Path, rng: np.random.Generator) -> Path:
    mb, types = cm.mb, cm.types
    w = _q(rng, 256, 512, 1, 1)

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(1, 512, 1, 1), dtype=types.fp16)],
        opset_version=cm.ct.target.iOS17,
    )
    def prog(x):
        return mb.conv(x=x, weight=w, name="c")

    return _save(cm, prog, path)


# ---------------------------------------------------------------- numpy, op by op


def _conv(x, w, b, strides, pad, dilations) -> np.ndarray:
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[1]), (pad[2], pad[3])))
    oh = (xp.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, cout, oh, ow))
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilations[0], j * dilations[1]
            patch_ = xp[
                :, :, r0 : r0 + strides[0] * oh : strides[0], c0 : c0 + strides[1] * ow : strides[1]
            ]
            out += np.einsum("nchw,oc->nohw", patch_, w[:, :, i, j])
    return out if b is None else out + b[None, :, None, None]


def run_numpy(
    prog, feeds: dict[str, np.ndarray], function: str = "main", known: dict | None = None
) -> list[np.ndarray]:
    """The program's outputs for `feeds`, in float64 (the ops patch and these tests use);
    `known` holds compressed weights already decompressed, by op name."""
    known = known or {}
    fn = prog.functions[function]
    env: dict[str, np.ndarray] = {v.name: np.asarray(feeds[k], float) for k, v in fn.inputs.items()}

    def val(var):
        if var.name in env:
            return env[var.name]
        return (
            np.asarray(var.val, float) if var.dtype is not None and var.val is not None else var.val
        )

    def attr(op, key, default=None):
        return op.inputs[key].val if key in op.inputs else default

    for op in fn.operations:
        a, t, out = op.inputs, op.op_type, op.outputs
        if t == "const":
            v = out[0].val
            env[out[0].name] = np.asarray(v, float) if isinstance(v, np.ndarray) else v
            continue
        if t.startswith("constexpr_"):  # a compressed weight, decompressed by coremltools
            dense = known[op.name] if op.name in known else op.materialized_val_inference()
            env[out[0].name] = np.asarray(dense, float)
            continue
        if t == "conv":
            pad = (
                list(attr(op, "pad", [0, 0, 0, 0])) if attr(op, "pad_type") == "custom" else [0] * 4
            )
            b = val(a["bias"]) if "bias" in a else None
            r = _conv(
                val(a["x"]), val(a["weight"]), b, attr(op, "strides"), pad, attr(op, "dilations")
            )
        elif t == "linear":
            r = val(a["x"]) @ val(a["weight"]).T + (val(a["bias"]) if "bias" in a else 0)
        elif t == "matmul":
            x, y = val(a["x"]), val(a["y"])
            x = np.swapaxes(x, -1, -2) if attr(op, "transpose_x", False) else x
            y = np.swapaxes(y, -1, -2) if attr(op, "transpose_y", False) else y
            r = x @ y
        elif t == "concat":
            r = np.concatenate([val(v) for v in a["values"]], axis=int(attr(op, "axis")))
        elif t == "split":
            edges = np.cumsum(attr(op, "split_sizes"))[:-1]
            for o, piece in zip(
                out, np.split(val(a["x"]), edges, axis=int(attr(op, "axis"))), strict=True
            ):
                env[o.name] = piece
            continue
        elif t == "add":
            r = val(a["x"]) + val(a["y"])
        elif t == "relu":
            r = np.maximum(val(a["x"]), 0)
        elif t == "silu":
            x = val(a["x"])
            r = x / (1 + np.exp(-x))
        elif t == "mul":
            r = val(a["x"]) * val(a["y"])
        elif t == "cast":
            r = val(a["x"])  # float64 throughout
        elif t in ("greater_equal", "less", "greater", "less_equal"):
            f = {"greater_equal": np.greater_equal, "less": np.less}.get(t) or getattr(np, t)
            r = f(val(a["x"]), val(a["y"]))
        elif t == "select":
            r = np.where(val(a["cond"]), val(a["a"]), val(a["b"]))
        elif t == "gather":
            r = np.take(val(a["x"]), val(a["indices"]).astype(int), axis=int(attr(op, "axis", 0)))
        elif t == "reshape":
            r = val(a["x"]).reshape([int(s) for s in attr(op, "shape")])
        elif t == "slice_by_size":
            begin, size = attr(op, "begin"), attr(op, "size")
            r = val(a["x"])[
                tuple(slice(int(b), int(b) + int(s)) for b, s in zip(begin, size, strict=True))
            ]
        else:
            raise NotImplementedError(t)
        env[out[0].name] = r
    return [env[v.name] for v in fn.outputs]


def _ops(prog, function: str = "main") -> dict[str, object]:
    return {op.name: op for op in prog.functions[function].operations}


def _weight_of(op) -> np.ndarray:
    return (op.inputs["y"] if op.op_type == "matmul" else op.inputs["weight"]).val


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def notched(tmp_path_factory: pytest.TempPathFactory):
    cm = _cm()
    folder = tmp_path_factory.mktemp("patch")
    src, shapes = _notched(cm, folder / "in.mlpackage", np.random.default_rng(RNG_SEED))
    dst = folder / "out.mlpackage"
    report = patch(src, dst, CHIP, BUGGY, FAST)
    return cm, src, dst, shapes, report


def test_every_affected_op_is_replaced_and_nothing_else(notched) -> None:
    cm, src, dst, shapes, report = notched
    expect = {name for name, w in shapes.items() if plan_weight(w, CHIP, BUGGY, FAST).affected}
    assert {"proj", "mm", "mmt", "head", "cinconv", "cinmm"} <= expect and "small" not in expect
    assert {c["op"] for c in report["changed"]} == expect
    assert set(report["unchanged"]) == {f"main/{n}" for n in set(shapes) - expect}
    before, after = _ops(load(src, cm).program), _ops(load(dst, cm).program)
    for name in shapes:
        if name in expect:  # the name now belongs to the op that joins the parts
            assert after[name].op_type in ("concat", "add"), name
        else:
            assert after[name].op_type == before[name].op_type, name
            assert np.array_equal(_weight_of(after[name]), _weight_of(before[name]))


def test_chunks_are_bit_identical_slices_out_of_the_notch(notched) -> None:
    cm, src, dst, shapes, report = notched
    before, after = _ops(load(src, cm).program), _ops(load(dst, cm).program)
    for change in report["changed"]:
        name, axis = change["op"], change["axis"]
        parts = [after[f"{name}_{axis}{i}"] for i in range(change["splits"])]
        chunks = [_weight_of(p) for p in parts]
        original = _weight_of(before[name])
        op_type = before[name].op_type
        transposed = op_type == "matmul" and bool(before[name].inputs["transpose_y"].val)
        if op_type == "matmul":
            dim = (0 if transposed else 1) if axis == "cout" else (1 if transposed else 0)
        else:
            dim = 0 if axis == "cout" else 1
        assert [c.shape[dim] for c in chunks] == change["parts"]
        joined = np.concatenate(chunks, axis=dim)
        assert joined.dtype == np.float16
        assert np.array_equal(joined.view(np.uint16), original.view(np.uint16)), name
        w = shapes[name]
        for c in chunks:
            cin, cout = (c.shape[1], c.shape[0]) if op_type != "matmul" or transposed else c.shape
            part = Weight(int(cin), int(cout), w.kh, w.kw)
            lines = lines_of(part.bytes_per_core(CHIP.cores), CHIP)
            assert not in_window(lines, CHIP), (name, lines)
        consts = {
            (p.inputs["y"] if p.op_type == "matmul" else p.inputs["weight"]).op.name for p in parts
        }
        assert len(consts) == len(parts)  # each chunk its own constant


def test_rewritten_graph_equals_the_original(notched) -> None:
    cm, src, dst, _, _ = notched
    rng = np.random.default_rng(RNG_SEED + 1)
    feeds = {
        "a": _q(rng, 1, 2048, 1, 1),
        "b": _q(rng, 1, 128, 3, 3),
        "c": _q(rng, 2, 524288),
        "d": _q(rng, 1, 524288, 1, 1),
    }
    want = run_numpy(load(src, cm).program, feeds)
    got = run_numpy(load(dst, cm).program, feeds)
    assert len(want) == len(got) == 6
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape and np.array_equal(w, g)


def test_outputs_and_description_survive(notched) -> None:
    cm, src, dst, _, _ = notched
    a, b = load(src, cm), load(dst, cm)
    assert a.spec.description == b.spec.description
    assert a.spec.specificationVersion == b.spec.specificationVersion


def test_dry_run_lists_and_writes_nothing(
    notched, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, src, _, _, report = notched
    out = tmp_path / "never.mlpackage"
    argv = ["patch", str(src), str(out), "--dry-run", "--engine", FAST, "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] and doc["out"] is None and not out.exists()
    assert doc["changed"] == report["changed"]
    for c in doc["changed"]:
        assert sum(c["chunk_bytes_per_core"]) == c["bytes_per_core"]
        assert {"op", "op_type", "axis", "splits", "parts"} <= set(c)


def test_unaffected_model_comes_out_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cm = _cm()
    src = _clear(cm, tmp_path / "clear.mlpackage", np.random.default_rng(RNG_SEED))
    dst = tmp_path / "same.mlpackage"
    assert main(["patch", str(src), str(dst), "--json"]) == 0  # default engine
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] == [] and doc["unchanged"] == ["main/c"]
    files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(dst) for p in dst.rglob("*") if p.is_file())
    for f in files:
        assert (src / f).read_bytes() == (dst / f).read_bytes()


def test_patch_text_output(notched, capsys: pytest.CaptureFixture[str]) -> None:
    _, src, _, _, report = notched
    assert main(["patch", str(src), "--dry-run", "--engine", FAST]) == 0
    out = capsys.readouterr().out
    # the contract moved: compressed weights count too, and the axis is named
    # one header naming engine, chip and profile, as every result command has (issue 30)
    assert out.startswith(f"patch: {FAST} engine, chip m3, profile "), out
    words = " ".join(out.split())  # the report wraps at 100 columns (a long path wraps it)
    assert f"8 stored weights; would split {len(report['changed'])} along cin" in words
    # the figures on one line, what they count (and the band's words) below
    assert re.search(r"^decode step: \S+ .*us before, \S+ .*us after$", out, re.M), out
    assert "\n  (every stored weight once, marginal times" in out
    assert all(c["op"] in out for c in report["changed"])


def test_not_a_package_is_one_line(
    notched, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, src, dst, _, _ = notched
    file = tmp_path / "file.mlpackage"
    file.write_text("not a package")
    refuses(["patch", str(file), "--dry-run"], "not an .mlpackage")
    empty = tmp_path / "empty.mlpackage"
    empty.mkdir()
    refuses(["patch", str(empty), "--dry-run"], "not an .mlpackage")
    broken = tmp_path / "broken.mlpackage"
    broken.mkdir()
    (broken / "Manifest.json").write_text("{]")
    refuses(["patch", str(broken), "--dry-run"], "Manifest.json does not name the model")
    refuses(["patch", str(tmp_path / "none.mlpackage"), "--dry-run"], "No such file")
    refuses(["patch", str(src)], "OUT.mlpackage")
    refuses(["patch", str(src), str(dst)], "exists")
    refuses(["patch", str(src), str(tmp_path / "no" / "x.mlpackage")], "no such folder")


def test_a_neural_network_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cm = _cm()
    src = _clear(cm, tmp_path / "c.mlpackage", np.random.default_rng(RNG_SEED))
    spec = load(src, cm).spec
    nn = cm.ct.proto.Model_pb2.Model()
    nn.specificationVersion = 4
    nn.description.CopyFrom(spec.description)
    nn.neuralNetwork.SetInParent()
    pkg = tmp_path / "nn.mlpackage"
    with contextlib.redirect_stderr(io.StringIO()):
        cm.ct.models.MLModel(nn, skip_model_load=True).save(str(pkg))
    refuses(["patch", str(pkg), "--dry-run"], "not an ML Program")


def test_missing_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "coremltools", None)  # import fails as if not installed
    refuses(["patch", str(tmp_path), "--dry-run"], NEEDS)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 6])
def test_sub_byte_packing_matches_the_bit_order_coremltools_reads(bits: int) -> None:
    """Elements packed low bit first, byte by byte (what coremltools' blob reader unpacks; the
    compressed-model tests read every packed slice back through it); slices re-pack alike."""
    from ane_kdma.patch import blobs

    rng = np.random.default_rng(RNG_SEED + bits)
    for n in (1, 7, 8, 9, 1001):
        v = rng.integers(0, 1 << bits, n).astype(np.uint8)
        raw, pad = blobs.pack(v, bits)
        flat = ((v[:, None] >> np.arange(bits, dtype=np.uint8)) & 1).reshape(-1)
        assert raw == np.packbits(flat.astype(np.uint8), bitorder="little").tobytes()
        assert pad == (-n * bits) % 8 and np.array_equal(blobs.unpack(raw, bits, n), v)
    m = rng.integers(0, 1 << bits, (6, 10)).astype(np.uint8)
    raw, _ = blobs.pack(m, bits)
    for dim, (a, b) in ((0, (2, 5)), (1, (3, 10))):
        part, _ = blobs.slice_bytes(raw, m.shape, bits, dim, a, b)
        want = m[2:5] if dim == 0 else m[:, 3:10]
        assert part == blobs.pack(want, bits)[0]
