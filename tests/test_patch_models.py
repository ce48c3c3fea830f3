"""`patch` on the forms people ship: converter names, compressed, shared, multifunction.

The programs are built with coremltools' MIL builder in the shapes ct.convert
and ANEMLL emit: ops named by the converter (``linear_0_cast_fp16``), weights
named after the PyTorch layer (``model_layers_0_mlp_gate_proj_weight_to_fp16``),
a model output that comes straight from a split op under a name that is not the
op's (``h``, ``logits``), 1x1 convs, weights compressed by coremltools' optimize
API, a weight read by two ops, a tied embedding, and a multifunction package.
Each is patched, read back by coremltools, and checked: names, sizes, exact
slices of the stored (compressed) tensors, and equal outputs evaluated in numpy
(float64; a Cin split only reorders a sum, so those outputs agree to float64
rounding, a Cout split to the bit). No test needs PyTorch.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from refusal import refuses
from test_patch import BUGGY, CHIP, _q, coreml, load, run_numpy

from ane_kdma.cli import main
from ane_kdma.patch import patch

FAST = "analytic"
SEED = 20261201
D, F = 2048, 8192  # Llama 3.2 1B: hidden and MLP widths (each MLP weight sits on a ring lap)
WEIGHTS = "Data/com.apple.CoreML/weights/weight.bin"
#: float64 summed in another order: n x 2^-53 of the terms' magnitude; 1e-9 is far above that
#: (n <= 8192: about 1e-12) and far below any real error (a missing part is O(1) off)
REORDER_RTOL = 1e-9


def _convert(cm, prog, path: Path, target=None) -> Path:
    """ct.convert as a user runs it (the default pass pipeline), then saved."""
    target = target or cm.ct.target.iOS18
    with contextlib.redirect_stderr(io.StringIO()):
        model = cm.ct.convert(
            prog, convert_to="mlprogram", minimum_deployment_target=target, skip_model_load=True
        )
        model.save(str(path))
    return path


def _rename_outputs(prog, names: list[str]) -> None:
    """ct.convert from PyTorch names the outputs after the traced module's, not after the ops."""
    for var, name in zip(prog.functions["main"].outputs, names, strict=True):
        var.name = name


def _mlp(cm, path: Path, rng: np.random.Generator, conv: bool = False) -> Path:
    """A Llama MLP as ct.convert emits it (linear) or ANEMLL writes it (1x1 conv); the output
    `h` comes straight from the down projection, which the patch splits."""
    mb, types = cm.mb, cm.types
    gate, up, down = _q(rng, F, D), _q(rng, F, D), _q(rng, D, F)
    shape = (1, D, 1, 1) if conv else (1, D)

    def w(name: str, value: np.ndarray):
        value = value.reshape(*value.shape, 1, 1) if conv else value
        return mb.const(val=value, name=f"model_layers_0_mlp_{name}_proj_weight_to_fp16")

    def proj(x, weight, i: int):
        if conv:
            return mb.conv(x=x, weight=weight, name=f"conv_{i}_cast_fp16")
        return mb.linear(x=x, weight=weight, name=f"linear_{i}_cast_fp16")

    @mb.program(
        input_specs=[mb.TensorSpec(shape=shape, dtype=types.fp16)],
        opset_version=cm.ct.target.iOS18,
    )
    def prog(hidden_states):
        g = proj(hidden_states, w("gate", gate), 0)
        u = proj(hidden_states, w("up", up), 1)
        a = mb.silu(x=g, name="silu_0_cast_fp16")
        m = mb.mul(x=a, y=u, name="mul_0_cast_fp16")
        return proj(m, w("down", down), 2)

    _rename_outputs(prog, ["h"])
    return _convert(cm, prog, path)


def _size(pkg: Path) -> int:
    return (pkg / WEIGHTS).stat().st_size


def _feeds(prog, rng: np.random.Generator, function: str = "main") -> dict[str, np.ndarray]:
    fn = prog.functions[function]
    return {k: _q(rng, *v.shape) for k, v in fn.inputs.items()}


def _same_outputs(src: Path, dst: Path, exact: bool, function: str = "main") -> None:
    cm = coreml()
    a, b = load(src, cm).program, load(dst, cm).program
    feeds = _feeds(a, np.random.default_rng(SEED + 1), function)
    want, got = run_numpy(a, feeds, function), run_numpy(b, feeds, function)
    assert [v.name for v in a.functions[function].outputs] == [
        v.name for v in b.functions[function].outputs
    ]
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape
        if exact:
            assert np.array_equal(w, g)
        else:
            np.testing.assert_allclose(g, w, rtol=REORDER_RTOL, atol=REORDER_RTOL * abs(w).max())


# ---------------------------------------------------------------- converter names and outputs


@pytest.fixture(scope="module", params=["linear", "conv"])
def mlp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    cm = coreml()
    folder = tmp_path_factory.mktemp(f"mlp_{request.param}")
    src = _mlp(cm, folder / "in.mlpackage", np.random.default_rng(SEED), request.param == "conv")
    return request.param, src, folder


@pytest.mark.parametrize("axis", ["cin", "cout"])
def test_converted_mlp_keeps_its_names_and_function(mlp, axis: str) -> None:
    kind, src, folder = mlp
    dst = folder / f"out_{axis}.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST, axis=axis)
    op = "conv" if kind == "conv" else "linear"
    assert [c["op"] for c in doc["changed"]] == [f"{op}_{i}_cast_fp16" for i in range(3)]
    assert [c["weight"] for c in doc["changed"]] == [
        f"model_layers_0_mlp_{p}_proj_weight_to_fp16" for p in ("gate", "up", "down")
    ]
    assert [c["layer"] for c in doc["changed"]] == [
        f"model_layers_0_mlp_{p}_proj" for p in ("gate", "up", "down")
    ]
    assert {c["axis"] for c in doc["changed"]} == {axis}
    cm = coreml()
    a, b = load(src, cm), load(dst, cm)
    assert a.spec.description == b.spec.description  # inputs and outputs, names and places
    assert [v.name for v in b.program.functions["main"].outputs] == ["h"]
    producer = b.program.functions["main"].outputs[0].op
    assert producer.op_type == ("add" if axis == "cin" else "concat")
    assert producer.name == f"{op}_2_cast_fp16"
    # each byte once: the originals are gone, the parts are the same bytes
    assert _size(dst) <= _size(src) * 1.01
    assert doc["weight_bytes_out"] == _size(dst) and doc["duplicated_bytes"] == 0
    _same_outputs(src, dst, exact=axis == "cout")


def test_dry_run_names_layers_and_the_decode_step(mlp, capsys: pytest.CaptureFixture[str]) -> None:
    _, src, _ = mlp
    assert main(["patch", str(src), "--dry-run", "--engine", FAST]) == 0
    out = capsys.readouterr().out
    assert "3 stored weights; would split 3 along cin" in " ".join(out.split())  # wrapped
    assert "model.layers.0.mlp.down_proj " in out  # the layer as PyTorch names it, not a guess
    assert "?" not in out and "layer names:" not in out
    line = next(x for x in out.splitlines() if x.startswith("decode step"))
    # each figure may carry its band, "6049.615 (5956-6051) us", where the profile has fits
    before, after = (float(v) for v in re.findall(r"([0-9.]+)(?: \([0-9.]+-[0-9.]+\))? us", line))
    assert after < before
    assert main(["patch", str(src), "--dry-run", "--engine", FAST, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    d = doc["decode_us"]
    assert (d["before"], d["after"]) == (before, after)
    per_op = sum(c["time_us_before"] - c["time_us_after"] for c in doc["changed"])
    assert d["before"] > d["after"] and per_op > 0
    for c in doc["changed"]:
        assert c["shape"] in ("2048x8192", "8192x2048") and c["bytes_per_core"] == 2 << 20


# ---------------------------------------------------------------- compressed weights


def _compressed(cm, path: Path, how: str, rng: np.random.Generator) -> Path:
    """One linear whose stored form sits on a ring lap, compressed with the optimize API."""
    import coremltools.optimize.coreml as cto

    mb, types = cm.mb, cm.types
    # stored data plus LUTs or scales on a ring lap: int8 with a 16-bit scale per 32 weights
    # streams 17/16 bytes per weight, so 4080 x 3872 (16392 lines per core)
    cout, cin = {"lut4": (8192, 4096), "int8_block": (4080, 3872), "int4": (8192, 4096)}.get(
        how, (4096, 4096)
    )
    weight = (rng.standard_normal((cout, cin)) / 8).astype(np.float16)
    target = cm.ct.target.iOS16 if how == "affine8" else cm.ct.target.iOS18

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, cin), dtype=types.fp16)], opset_version=target)
    def prog(x):
        w = mb.const(val=weight, name="lm_head_weight_to_fp16")
        return mb.linear(x=x, weight=w, name="linear_0_cast_fp16")

    _rename_outputs(prog, ["logits"])
    dense = _convert(cm, prog, path.with_name("dense_" + path.name), target)
    with contextlib.redirect_stderr(io.StringIO()):
        model = cm.ct.models.MLModel(str(dense), skip_model_load=True)
        if how == "lut4":
            cfg = cto.OpPalettizerConfig(
                mode="uniform",
                nbits=4,
                granularity="per_grouped_channel",
                group_size=16,
                weight_threshold=0,
            )
            model = cto.palettize_weights(model, cto.OptimizationConfig(global_config=cfg))
        else:
            cfg = {
                "int8_block": cto.OpLinearQuantizerConfig(
                    mode="linear_symmetric",
                    dtype="int8",
                    granularity="per_block",
                    block_size=32,
                    weight_threshold=0,
                ),
                "int4": cto.OpLinearQuantizerConfig(
                    mode="linear", dtype="int4", granularity="per_channel", weight_threshold=0
                ),
                "affine8": cto.OpLinearQuantizerConfig(
                    mode="linear", dtype="int8", granularity="per_channel", weight_threshold=0
                ),
            }[how]
            model = cto.linear_quantize_weights(model, cto.OptimizationConfig(global_config=cfg))
        model.save(str(path))
    return path


FORMS = {
    "lut4": "constexpr_lut_to_dense",
    "int8_block": "constexpr_blockwise_shift_scale",
    "int4": "constexpr_blockwise_shift_scale",
    "affine8": "constexpr_affine_dequantize",
}


#: the channels a cut must keep together, by form and axis (LUTs per 16 output channels,
#: one int8 scale per 32 input channels; per-channel scales and offsets go with their channel)
BLOCK = {"lut4": {"cout": 16, "cin": 1}, "int8_block": {"cin": 32, "cout": 1}}


@pytest.fixture(scope="module", params=list(FORMS))
def compressed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    cm = coreml()
    folder = tmp_path_factory.mktemp(request.param)
    src = _compressed(cm, folder / "in.mlpackage", request.param, np.random.default_rng(SEED))
    return request.param, src, folder


@pytest.mark.parametrize("axis", ["cin", "cout"])
def test_compressed_weights_are_cut_in_their_stored_form(compressed, axis: str) -> None:
    how, src, folder = compressed
    cm = coreml()
    dst = folder / f"out_{axis}.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST, axis=axis)
    (c,) = doc["changed"]
    assert c["form"] == FORMS[how] and c["axis"] == axis and c["side_bytes"] > 0
    assert c["bits"] == (4 if how in ("lut4", "int4") else 8)  # planned on the stored bits
    # ... plus the LUTs, scales and offsets, shared out per output channel
    cores = CHIP.cores
    per_channel = -(-c["side_bytes"] * 8 // c["cout"])
    groups = -(-c["cout"] // cores)
    assert c["bytes_per_core"] == -(-groups * (c["cin"] * c["bits"] + per_channel) // 8)
    block = BLOCK.get(how, {}).get(axis, 1)
    assert all(p % block == 0 for p in c["parts"][:-1]), c["parts"]  # whole blocks
    a, b = load(src, cm).program, load(dst, cm).program
    before = {op.name: op for op in a.functions["main"].operations}
    after = {op.name: op for op in b.functions["main"].operations}
    original = before["lm_head_weight_to_fp16_" + ("palettized" if how == "lut4" else "quantized")]
    parts = [after[f"{original.outputs[0].name}_{axis}{i}"] for i in range(c["splits"])]
    assert all(p.op_type == FORMS[how] for p in parts)  # never decompressed
    dim = 1 if axis == "cin" else 0
    dense = original.materialized_val_inference()
    pieces = [p.materialized_val_inference() for p in parts]
    assert [x.shape[dim] for x in pieces] == c["parts"]
    joined = np.concatenate(pieces, axis=dim)
    assert np.array_equal(joined.view(np.uint16), dense.view(np.uint16))  # decompresses exactly
    # the stored tensors of each part are exact slices of the original's
    key = {"lut4": "indices", "affine8": "quantized_data"}.get(how, "data")
    stored = np.concatenate([p.inputs[key].val for p in parts], axis=dim)
    assert np.array_equal(stored, original.inputs[key].val)
    assert _size(dst) <= _size(src) * 1.01
    feeds = _feeds(a, np.random.default_rng(SEED + 1))  # decompressed once, above
    (want,) = run_numpy(a, feeds, known={original.name: dense})
    (got,) = run_numpy(b, feeds, known={p.name: x for p, x in zip(parts, pieces, strict=True)})
    if axis == "cout":
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(
            got, want, rtol=REORDER_RTOL, atol=REORDER_RTOL * abs(want).max()
        )


# ---------------------------------------------------------------- shared and tied weights


def _shared(cm, path: Path, rng: np.random.Generator, tied: bool) -> Path:
    """A weight read by two linears (shared), or by a gather and the LM head (tied)."""
    mb, types = cm.mb, cm.types
    table = _q(rng, F, D)  # vocabulary F, hidden D: an LM head on a ring lap
    specs = [mb.TensorSpec(shape=(1, D), dtype=types.fp16)]
    if tied:
        specs.append(mb.TensorSpec(shape=(1, 4), dtype=types.int32))

    def body(x, ids=None):
        w = mb.const(val=table, name="model_embed_tokens_weight_to_fp16")
        logits = mb.linear(x=x, weight=w, name="linear_0_cast_fp16")
        if ids is not None:
            return logits, mb.gather(x=w, indices=ids, axis=0, name="embedding_0_cast_fp16")
        return logits, mb.linear(x=x, weight=w, name="linear_1_cast_fp16")

    if tied:

        @mb.program(input_specs=specs, opset_version=cm.ct.target.iOS18)
        def prog(x, input_ids):
            return body(x, input_ids)

    else:

        @mb.program(input_specs=specs, opset_version=cm.ct.target.iOS18)
        def prog(x):
            return body(x)

    _rename_outputs(prog, ["logits", "embeds" if tied else "logits_2"])
    return _convert(cm, prog, path)


def test_a_weight_two_ops_share_is_stored_once(tmp_path: Path) -> None:
    cm = coreml()
    src = _shared(cm, tmp_path / "in.mlpackage", np.random.default_rng(SEED), tied=False)
    dst = tmp_path / "out.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST)
    assert [c["op"] for c in doc["changed"]] == ["linear_0_cast_fp16", "linear_1_cast_fp16"]
    assert all(c["shared_with"] == [] for c in doc["changed"]) and doc["duplicated_bytes"] == 0
    assert _size(src) >= F * D * 2 and _size(dst) <= _size(src) * 1.01  # once, as before
    _same_outputs(src, dst, exact=False)


def test_a_tied_embedding_says_what_it_duplicates_and_can_be_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cm = coreml()
    src = _shared(cm, tmp_path / "in.mlpackage", np.random.default_rng(SEED), tied=True)
    dst = tmp_path / "out.mlpackage"
    assert main(["patch", str(src), str(dst), "--engine", FAST, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (c,) = doc["changed"]
    (reader,) = c["shared_with"]  # the gather (ct.convert renames it as it casts the indices)
    assert reader.startswith("embedding_0_cast_fp16")
    assert doc["duplicated_bytes"] == F * D * 2
    assert _size(dst) - _size(src) >= F * D * 2  # the gather still reads the whole table
    _same_outputs(src, dst, exact=False)
    assert main(["patch", str(src), "--dry-run", "--engine", FAST]) == 0
    assert f"also read by {reader}" in capsys.readouterr().out
    kept = tmp_path / "kept.mlpackage"
    argv = ["patch", str(src), str(kept), "--engine", FAST, "--skip", "model_embed_*", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] == [] and doc["skipped"][0]["reason"] == "--skip model_embed_*"
    assert (kept / WEIGHTS).read_bytes() == (src / WEIGHTS).read_bytes()


# ---------------------------------------------------------------- multifunction


@pytest.fixture(scope="module")
def multifunction(tmp_path_factory: pytest.TempPathFactory):
    """prefill (64 tokens) and infer (1 token) sharing their weights, as ANEMLL packages them."""
    cm = coreml()
    folder = tmp_path_factory.mktemp("multi")
    rng = np.random.default_rng(SEED)
    up, down = _q(rng, F, D), _q(rng, D, F)
    paths = []
    mb, types = cm.mb, cm.types
    for name, tokens in (("prefill", 64), ("infer", 1)):

        @mb.program(
            input_specs=[mb.TensorSpec(shape=(1, tokens, D), dtype=types.fp16)],
            opset_version=cm.ct.target.iOS18,
        )
        def prog(x):
            u = mb.const(val=up, name="model_layers_0_mlp_up_proj_weight_to_fp16")
            d = mb.const(val=down, name="model_layers_0_mlp_down_proj_weight_to_fp16")
            h = mb.linear(x=x, weight=u, name="linear_0_cast_fp16")
            h = mb.relu(x=h, name="relu_0_cast_fp16")
            return mb.linear(x=h, weight=d, name="linear_1_cast_fp16")

        _rename_outputs(prog, ["h"])
        paths.append(_convert(cm, prog, folder / f"{name}.mlpackage"))
    desc = cm.ct.utils.MultiFunctionDescriptor()
    desc.add_function(str(paths[0]), src_function_name="main", target_function_name="prefill")
    desc.add_function(str(paths[1]), src_function_name="main", target_function_name="infer")
    desc.default_function_name = "infer"
    src = folder / "multi.mlpackage"
    with contextlib.redirect_stderr(io.StringIO()):
        cm.ct.utils.save_multifunction(desc, str(src))
    return src, folder


def test_every_function_is_patched_and_the_package_stays_multifunction(multifunction) -> None:
    src, folder = multifunction
    dst = folder / "out.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST)
    assert doc["functions"] == ["infer", "prefill"]
    assert sorted((c["function"], c["op"]) for c in doc["changed"]) == [
        (f, f"linear_{i}_cast_fp16") for f in ("infer", "prefill") for i in (0, 1)
    ]
    plans = {(c["op"], c["function"]): (c["axis"], c["parts"]) for c in doc["changed"]}
    for i in (0, 1):  # a weight the functions share: the same plan in each
        assert (
            plans[(f"linear_{i}_cast_fp16", "infer")] == plans[(f"linear_{i}_cast_fp16", "prefill")]
        )
    cm = coreml()
    a, b = load(src, cm), load(dst, cm)
    assert a.spec.description == b.spec.description
    assert b.spec.description.defaultFunctionName == "infer"
    assert sorted(b.program.functions) == ["infer", "prefill"]
    assert _size(dst) <= _size(src) * 1.01  # shared slices written once for both functions
    # the figures are the weight file's own sizes: a tensor both functions read counts once
    assert (doc["weight_bytes_in"], doc["weight_bytes_out"]) == (_size(src), _size(dst))
    for f in ("infer", "prefill"):
        _same_outputs(src, dst, exact=False, function=f)


def test_one_function_can_be_patched_alone(multifunction, capsys) -> None:
    src, folder = multifunction
    doc = patch(src, folder / "one.mlpackage", CHIP, BUGGY, FAST, function=["prefill"])
    assert {c["function"] for c in doc["changed"]} == {"prefill"}
    # infer still reads the whole weights: kept, and the report says what that duplicates
    assert all(c["shared_with"] == ["function infer"] for c in doc["changed"])
    assert doc["duplicated_bytes"] == 2 * F * D * 2
    assert _size(folder / "one.mlpackage") >= _size(src) + doc["duplicated_bytes"]
    # the decode step is infer's (the default): left out by --function, its ops count whole
    full = patch(src, None, CHIP, BUGGY, FAST, dry_run=True)["decode_us"]
    alone = patch(src, None, CHIP, BUGGY, FAST, dry_run=True, function=["prefill"])["decode_us"]
    assert full["after"] < full["before"] == alone["before"] == alone["after"]
    assert (full["held_whole"], alone["held_whole"]) == (0, 2)
    bad = folder / "bad.mlpackage"
    argv = ["patch", str(src), str(bad), "--function", "decode"]
    refuses(argv, "no function 'decode'", "infer, prefill", watch=[folder])
    assert not os.path.lexists(bad)


# ---------------------------------------------------------------- bad packages


def _spec(pkg: Path):
    from coremltools.proto import Model_pb2

    s = Model_pb2.Model()
    s.ParseFromString((pkg / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
    return s


def _put_spec(pkg: Path, spec) -> None:
    (pkg / "Data/com.apple.CoreML/model.mlmodel").write_bytes(spec.SerializeToString())


def _refused(capsys, src: Path, words: str) -> None:
    """Patched and dry-run alike: refused, no output and no staging folder left."""
    out = src.parent / "never.mlpackage"
    refuses(["patch", str(src), str(out), "--engine", FAST], words, watch=[src.parent])
    refuses(["patch", str(src), "--dry-run", "--engine", FAST], words, watch=[src.parent])


def _copy_of(compressed, how: str, tmp_path: Path) -> Path:
    assert compressed[0] == how
    return Path(shutil.copytree(compressed[1], tmp_path / "in.mlpackage"))


@pytest.mark.parametrize("compressed", ["int8_block"], indirect=True)
def test_a_truncated_weight_file_is_one_line(compressed, tmp_path: Path, capsys) -> None:
    src = _copy_of(compressed, "int8_block", tmp_path)
    with open(src / WEIGHTS, "r+b") as fh:
        fh.truncate(_size(src) // 2)
    _refused(capsys, src, "truncated")


def test_an_offset_outside_the_weight_file_is_one_line(tmp_path: Path, capsys) -> None:
    cm = coreml()
    src = _shared(cm, tmp_path / "in.mlpackage", np.random.default_rng(SEED), tied=False)
    spec = _spec(src)
    block = spec.mlProgram.functions["main"].block_specializations["CoreML8"]
    const = next(
        op
        for op in block.operations
        if op.type == "const"
        and "val" in op.attributes
        and op.attributes["val"].WhichOneof("value") == "blobFileValue"
    )
    const.attributes["val"].blobFileValue.offset = _size(src) + 4096
    _put_spec(src, spec)
    _refused(capsys, src, "points outside the file")


@pytest.mark.parametrize("compressed", ["lut4"], indirect=True)
def test_inconsistent_compressed_shapes_are_one_line(compressed, tmp_path: Path, capsys) -> None:
    src = _copy_of(compressed, "lut4", tmp_path)
    spec = _spec(src)
    block = spec.mlProgram.functions["main"].block_specializations["CoreML8"]
    op = next(op for op in block.operations if op.type == "constexpr_lut_to_dense")
    lut = op.inputs["lut"].arguments[0].value.type.tensorType
    lut.dimensions[0].constant.size = 7  # 7 LUTs do not divide 8192 output channels
    _put_spec(src, spec)
    _refused(capsys, src, "inconsistent compressed weight")


def test_a_weight_kept_whole_is_counted_once_however_many_ops_split_it(tmp_path: Path) -> None:
    """Two linears and a gather read one table: both linears split, the table stays (the
    gather reads it), and the duplicate is its size once, not once per split op."""
    cm = coreml()
    mb, types = cm.mb, cm.types
    table = _q(np.random.default_rng(SEED), F, D)
    specs = [
        mb.TensorSpec(shape=(1, D), dtype=types.fp16),
        mb.TensorSpec(shape=(1, 4), dtype=types.int32),
    ]

    @mb.program(input_specs=specs, opset_version=cm.ct.target.iOS18)
    def prog(x, input_ids):
        w = mb.const(val=table, name="model_embed_tokens_weight_to_fp16")
        a = mb.linear(x=x, weight=w, name="linear_0_cast_fp16")
        b = mb.linear(x=x, weight=w, name="linear_1_cast_fp16")
        return a, b, mb.gather(x=w, indices=input_ids, axis=0, name="embedding_0_cast_fp16")

    _rename_outputs(prog, ["logits", "logits_2", "embeds"])
    src = _convert(cm, prog, tmp_path / "in.mlpackage")
    dst = tmp_path / "out.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST)
    assert len(doc["changed"]) == 2 and all(c["shared_with"] for c in doc["changed"])
    assert doc["duplicated_bytes"] == F * D * 2
    assert _size(dst) <= (_size(src) + F * D * 2) * 1.01
    _same_outputs(src, dst, exact=False)
