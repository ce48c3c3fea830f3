"""`patch` on ANEMLL's forms and on every LUT width.

ANEMLL's LM head, as its converters write it (llama_converter / qwen_converter
``convert_lm_head``): the vocabulary in N near-equal 1x1 ``Conv2d`` shards
(``lm_head8_1`` .. ``lm_head8_8`` for Llama, 16 for Qwen and Gemma) over the
one input ``hidden_states`` (1, 1, hidden), each shard's logits returned as its
own model output ``logits1`` .. ``logitsN`` (not concatenated; only its
argmax-in-model variant joins them), palettized with the optimize API
(k-means there, ``per_grouped_channel``, 6 bits for the head by default). Its
FFN is 1x1 convs palettized at 4 bits (default) or 6.

Two kinds of test. At real scale, the planner is asked where ANEMLL's shapes
sit (Weight-level, no program built). At test scale (small programs, shared
per module), the rewrite is asked to cut each form into two parts along the
axis under test by forcing the plan (``decide`` wrapped so that the weight is
affected, cut at a block boundary): a notch-sized shard is 16 MiB stored per
shard on the m3, 128 MiB for eight, too much to build per test run. Each
forced cut is checked as patch checks a real one: names and outputs in order,
weight.bin within 1% of the original (LUTs kept whole are stored once), the
parts' indices and LUTs exact slices (or the whole LUT where it does not vary
along the cut), the parts decompressing to exactly the original, and equal
outputs in numpy.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_patch import BUGGY, CHIP, coreml, load, run_numpy
from test_patch_models import REORDER_RTOL, SEED, WEIGHTS

import ane_kdma.patch as patch_mod
from ane_kdma.patch import patch
from ane_kdma.patch.blobs import ALIGN, HEADER
from ane_kdma.plan import Weight, decide, in_window, lines_of
from ane_kdma.plan.search import _cin, _cout

FAST = "analytic"
LUT = "constexpr_lut_to_dense"
NBITS = (1, 2, 3, 4, 6, 8)
GROUP = 8  # output (or input) channels per LUT in the grouped forms (ANEMLL's per_channel 8)


def _size(pkg: Path) -> int:
    return (pkg / WEIGHTS).stat().st_size


def _blobs(pkg: Path) -> int:
    """Records in weight.bin (its header's count)."""
    with open(pkg / WEIGHTS, "rb") as fh:
        return int(HEADER.unpack(fh.read(HEADER.size))[0])


def _stored_once(src: Path, dst: Path) -> None:
    """weight.bin holds each byte once: at most 1% more than the original or, for these
    small programs, no more than each new record's 64 bytes and its data's alignment (the
    parts' data adds up to the original's; _lut_records shows a whole LUT is not copied)."""
    extra = _blobs(dst) - _blobs(src)
    assert _size(dst) <= max(_size(src) * 1.01, _size(src) + extra * (2 * ALIGN - 1))


def _lut_records(spec, ops: list[str]) -> list[object]:
    """Where each named constexpr op's LUT is stored: its record offset in weight.bin (the
    same offset for two ops means one copy), or the inline value."""
    block = spec.mlProgram.functions["main"].block_specializations["CoreML8"]
    by_out = {o.name: op for op in block.operations for o in op.outputs}
    out = []
    for name in ops:
        arg = by_out[name].inputs["lut"].arguments[0]
        value = arg.value if arg.WhichOneof("binding") == "value" else None
        if value is None:
            value = by_out[arg.name].attributes["val"]
        if value.WhichOneof("value") == "blobFileValue":
            out.append(value.blobFileValue.offset)
        else:
            out.append(value.SerializeToString())
    return out


def _palettize(cm, src: Path, dst: Path, nbits: int, granularity: str, axis: int = 0) -> Path:
    import coremltools.optimize.coreml as cto

    kw = {"group_size": GROUP, "channel_axis": axis} if granularity != "per_tensor" else {}
    cfg = cto.OpPalettizerConfig(
        mode="uniform", nbits=nbits, granularity=granularity, weight_threshold=0, **kw
    )
    with contextlib.redirect_stderr(io.StringIO()):
        model = cm.ct.models.MLModel(str(src), skip_model_load=True)
        model = cto.palettize_weights(model, cto.OptimizationConfig(global_config=cfg))
        model.save(str(dst))
    return dst


def _convert(cm, prog, path: Path) -> Path:
    with contextlib.redirect_stderr(io.StringIO()):
        model = cm.ct.convert(
            prog,
            convert_to="mlprogram",
            minimum_deployment_target=cm.ct.target.iOS18,
            skip_model_load=True,
        )
        model.save(str(path))
    return path


def _forced(cut: str):
    """`decide` as patch calls it, but every weight cut in two along `cut` at the block
    boundary nearest the middle (the chunk bytes from the search's own accounting)."""

    def fake(w: Weight, chip, h, engine="model", marginal=False, axis="cin"):
        d = decide(w, chip, h, engine, marginal=marginal, axis=cut)
        if cut == "cin":
            a = max(w.cin_block, (w.cin // 2) // w.cin_block * w.cin_block)
            cand = _cin(w, chip, (a, w.cin - a))
        else:
            groups = w.groups(chip.cores)
            per = max(1, w.cout_block // chip.cores)
            g = max(per, (groups // 2) // per * per)
            cand = _cout(w, chip, (g, groups - g))
        return replace(d, chosen=cand, affected=True)

    return fake


def _parts(prog, name: str, axis: str, n: int = 2) -> list:
    ops = {op.name: op for op in prog.functions["main"].operations}
    return [ops[f"{name}_{axis}{i}"] for i in range(n)]


def _check_lut_parts(original, parts, dim: int) -> None:
    """Each part's indices and LUT are exact slices of the original's (a LUT that does not
    vary along `dim` kept whole), and the parts decompress to exactly the original."""
    idx = original.inputs["indices"].val
    lut = original.inputs["lut"].val
    assert all(p.op_type == LUT for p in parts)  # never decompressed
    assert np.array_equal(np.concatenate([p.inputs["indices"].val for p in parts], dim), idx)
    if lut.shape[dim] == 1:
        assert all(np.array_equal(p.inputs["lut"].val, lut) for p in parts)
    else:
        assert np.array_equal(np.concatenate([p.inputs["lut"].val for p in parts], dim), lut)
    dense = original.materialized_val_inference()
    joined = np.concatenate([p.materialized_val_inference() for p in parts], dim)
    assert np.array_equal(joined.view(np.uint16), dense.view(np.uint16))


def _x(shape: tuple[int, ...]) -> np.ndarray:
    """An input of values k / 256 (exact in fp16)."""
    return np.random.default_rng(SEED + 1).integers(-511, 512, shape) / 256


def _close(got: np.ndarray, want: np.ndarray, exact: bool) -> None:
    assert got.shape == want.shape
    if exact:
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(
            got, want, rtol=REORDER_RTOL, atol=REORDER_RTOL * abs(want).max()
        )


# ---------------------------------------------------------------- every LUT width


CIN, COUT = 64, 96  # Cout: 6 groups of 16 channels; both multiples of GROUP


@pytest.fixture(scope="module")
def dense_linear(tmp_path_factory: pytest.TempPathFactory):
    cm = coreml()
    mb, types = cm.mb, cm.types
    folder = tmp_path_factory.mktemp("luts")
    rng = np.random.default_rng(SEED)
    weight = (rng.standard_normal((COUT, CIN)) / 8).astype(np.float16)

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(1, CIN), dtype=types.fp16)],
        opset_version=cm.ct.target.iOS18,
    )
    def prog(x):
        w = mb.const(val=weight, name="model_layers_0_mlp_up_proj_weight_to_fp16")
        return mb.linear(x=x, weight=w, name="linear_0_cast_fp16")

    prog.functions["main"].outputs[0].name = "h"
    return _convert(cm, prog, folder / "dense.mlpackage"), folder


#: (granularity, LUT axis): per-tensor, a LUT per GROUP output channels, per GROUP input ones
LUT_FORMS = [("per_tensor", 0), ("per_grouped_channel", 0), ("per_grouped_channel", 1)]


@pytest.mark.parametrize("axis", ["cin", "cout"])
@pytest.mark.parametrize("form", LUT_FORMS, ids=["tensor", "grouped_cout", "grouped_cin"])
@pytest.mark.parametrize("nbits", NBITS)
def test_every_lut_width_and_granularity_is_cut_exactly(
    dense_linear, nbits: int, form: tuple[str, int], axis: str, monkeypatch
) -> None:
    src_dense, folder = dense_linear
    cm = coreml()
    granularity, lut_axis = form
    tag = f"{nbits}_{granularity}_{lut_axis}"
    src = folder / f"lut{tag}.mlpackage"
    if not src.exists():
        _palettize(cm, src_dense, src, nbits, granularity, lut_axis)
    monkeypatch.setattr(patch_mod, "decide", _forced(axis))
    dst = folder / f"out{tag}_{axis}.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST, axis=axis)
    assert doc["skipped"] == []
    (c,) = doc["changed"]
    assert (c["form"], c["bits"], c["axis"], c["splits"]) == (LUT, nbits, axis, 2)
    # the LUT's bytes, as stored: 2^nbits fp16 entries per LUT
    luts = 1 if granularity == "per_tensor" else (COUT if lut_axis == 0 else CIN) // GROUP
    assert c["side_bytes"] == luts * (1 << nbits) * 2
    a, b = load(src, cm), load(dst, cm)
    assert a.spec.description == b.spec.description
    assert [v.name for v in b.program.functions["main"].outputs] == ["h"]
    original = next(op for op in a.program.functions["main"].operations if op.op_type == LUT)
    parts = _parts(b.program, original.outputs[0].name, axis)
    dim = 1 if axis == "cin" else 0
    assert [p.outputs[0].shape[dim] for p in parts] == c["parts"]
    _check_lut_parts(original, parts, dim)
    records = _lut_records(b.spec, [p.outputs[0].name for p in parts])
    whole = original.inputs["lut"].val.shape[dim] == 1
    assert (records[0] == records[1]) == whole  # a LUT kept whole in both parts: one copy
    _stored_once(src, dst)
    feeds = {"x": _x((1, CIN))}
    (want,) = run_numpy(a.program, feeds)
    (got,) = run_numpy(b.program, feeds)
    _close(got, want, exact=axis == "cout")


@pytest.mark.parametrize("nbits", NBITS)
def test_a_lut_is_planned_with_the_bytes_each_part_reads(nbits: int) -> None:
    """Per-grouped-channel LUTs along Cout do not vary along Cin: each Cin part's op keeps
    them whole and reads them whole (stored once, read twice); a LUT grouped along Cin is
    read in proportion. A Cout part reads its own channels' LUTs; a per-tensor LUT is read
    whole by every core and every part."""
    cores = CHIP.cores
    cin, cout, lut_bits = 2048, 8192, (1 << nbits) * 16
    per_cout = Weight(cin, cout, bits=nbits, cout_block=GROUP, side_whole_bits=lut_bits // GROUP)
    groups = per_cout.groups(cores)
    data = groups * cin * nbits  # one core's data bits
    side = groups * lut_bits // GROUP  # one core's share of the LUTs
    assert per_cout.bytes_per_core(cores) == (data + side) // 8
    halves = _cin(per_cout, CHIP, (cin // 2, cin // 2)).chunk_bytes
    assert halves == ((data // 2 + side) // 8,) * 2  # each half reads all of its LUTs
    assert sum(halves) > per_cout.bytes_per_core(cores)
    per_cin = Weight(cin, cout, bits=nbits, cin_block=GROUP, core_bits=lut_bits * cin // GROUP)
    lut_total = lut_bits * cin // GROUP
    assert per_cin.bytes_per_core(cores) == -(-(data + lut_total) // 8)
    halves = _cin(per_cin, CHIP, (cin // 2, cin // 2)).chunk_bytes
    assert halves == (-(-(data + lut_total) // 16),) * 2  # half the LUTs each
    tensor = Weight(cin, cout, bits=nbits, core_whole_bits=lut_bits)
    for cand in (_cin(tensor, CHIP, (cin // 2,) * 2), _cout(tensor, CHIP, (groups // 2,) * 2)):
        assert cand.chunk_bytes == (-(-(data // 2 + lut_bits) // 8),) * 2
    quarters = _cout(per_cout, CHIP, (groups // 4, 3 * groups // 4)).chunk_bytes
    assert quarters == ((data + side) // 32, 3 * (data + side) // 32)


# ---------------------------------------------------------------- ANEMLL's LM head


HIDDEN = 64
SHARDS = 8  # Llama's lm_head8_1 .. lm_head8_8
SHARD = 96  # vocabulary 8 x 96 here; ANEMLL's near-equal split, each shard a multiple of GROUP


@pytest.fixture(scope="module")
def lm_head(tmp_path_factory: pytest.TempPathFactory):
    """ANEMLL's Llama LM head: hidden_states (1, 1, hidden) to eight 1x1 conv shards, each
    returned as its own output logits1 .. logits8, palettized 6-bit per grouped channel."""
    cm = coreml()
    mb, types = cm.mb, cm.types
    folder = tmp_path_factory.mktemp("lm_head")
    rng = np.random.default_rng(SEED)
    shards = [
        (rng.standard_normal((SHARD, HIDDEN, 1, 1)) / 8).astype(np.float16) for _ in range(SHARDS)
    ]

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(1, 1, HIDDEN), dtype=types.fp16)],
        opset_version=cm.ct.target.iOS18,
    )
    def prog(hidden_states):
        x = mb.reshape(x=hidden_states, shape=[1, HIDDEN, 1, 1], name="input_1_cast_fp16")
        outs = []
        for i, w in enumerate(shards, start=1):
            wt = mb.const(val=w, name=f"lm_head8_{i}_weight_to_fp16")
            y = mb.conv(x=x, weight=wt, name=f"var_{100 + i}_cast_fp16")
            outs.append(mb.reshape(x=y, shape=[1, 1, SHARD], name=f"var_{200 + i}_cast_fp16"))
        return tuple(outs)

    for i, var in enumerate(prog.functions["main"].outputs, start=1):
        var.name = f"logits{i}"
    dense = _convert(cm, prog, folder / "dense.mlpackage")
    src = _palettize(cm, dense, folder / "head.mlpackage", 6, "per_grouped_channel")
    return src, folder


def test_anemll_llama_lm_head_shard_sits_in_the_notch_at_real_scale() -> None:
    """Llama 3.2 1B's head as ANEMLL ships it: 128256 / 8 = 16032 channels a shard over
    2048, 6-bit with a 64-entry fp16 LUT per 8 channels; and a vocabulary whose shard is
    one lap, to show the planner cuts such a shard along Cin."""
    lut_per_channel = 64 * 16 // GROUP
    shipped = Weight(2048, 16032, bits=6, cout_block=GROUP, side_whole_bits=lut_per_channel)
    lines = lines_of(shipped.bytes_per_core(CHIP.cores), CHIP)
    assert lines == -(-1002 * (2048 * 6 + lut_per_channel) // (8 * CHIP.line_bytes)) == 24299
    assert not in_window(lines, CHIP)  # 1.48 laps: the shipped shard is clear of the notch
    # 676 groups of 16 channels a shard (vocabulary 86528): 16393 lines, 9 past the lap
    notched = replace(shipped, cout=676 * CHIP.cores)
    lines = lines_of(notched.bytes_per_core(CHIP.cores), CHIP)
    assert lines == CHIP.ring_lines + 9 and in_window(lines, CHIP)
    d = decide(notched, CHIP, BUGGY, FAST)
    assert d.affected and d.chosen.axis == "cin"
    # each Cin part reads its input channels of every output channel, and all of those
    # channels' LUTs (the LUTs do not vary along Cin: each part's op keeps them whole)
    groups = notched.groups(CHIP.cores)
    want = tuple(-(-groups * (c * 6 + lut_per_channel) // 8) for c in d.chosen.parts)
    assert d.chosen.chunk_bytes == want
    assert not any(in_window(lines_of(n, CHIP), CHIP) for n in want)


@pytest.mark.parametrize("axis", ["cin", "cout"])
def test_anemll_lm_head_keeps_its_eight_outputs_and_cuts_each_shard_exactly(
    lm_head, axis: str, monkeypatch
) -> None:
    src, folder = lm_head
    cm = coreml()
    monkeypatch.setattr(patch_mod, "decide", _forced(axis))
    dst = folder / f"out_{axis}.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST, axis=axis)
    assert [c["weight"] for c in doc["changed"]] == [
        f"lm_head8_{i}_weight_to_fp16_palettized" for i in range(1, SHARDS + 1)
    ]
    assert [c["layer"] for c in doc["changed"]] == [f"lm_head8_{i}" for i in range(1, SHARDS + 1)]
    assert {(c["form"], c["bits"], c["shape"]) for c in doc["changed"]} == {
        (LUT, 6, f"{HIDDEN}x{SHARD}")
    }
    # planned on what each shard stores and each part reads: 6-bit indices, a 64-entry fp16
    # LUT per GROUP output channels going with those channels, and all of them in each Cin
    # part (the LUTs do not vary along Cin), a share of them in each Cout part
    lut_bits = 64 * 16 // GROUP  # per output channel
    groups = -(-SHARD // CHIP.cores)
    for c in doc["changed"]:
        assert c["side_bytes"] == SHARD // GROUP * 64 * 2
        assert c["bytes_per_core"] == -(-groups * (HIDDEN * 6 + lut_bits) // 8)
        if axis == "cin":
            want = [-(-groups * (n * 6 + lut_bits) // 8) for n in c["parts"]]
        else:
            want = [-(-(n // CHIP.cores) * (HIDDEN * 6 + lut_bits) // 8) for n in c["parts"]]
        assert c["chunk_bytes_per_core"] == want
    a, b = load(src, cm), load(dst, cm)
    assert a.spec.description == b.spec.description  # one input, eight outputs, in order
    names = [f"logits{i}" for i in range(1, SHARDS + 1)]
    assert [o.name for o in b.spec.description.output] == names
    assert [v.name for v in b.program.functions["main"].outputs] == names
    _stored_once(src, dst)
    dim = 1 if axis == "cin" else 0
    before = {op.name: op for op in a.program.functions["main"].operations}
    known_a, known_b = {}, {}
    for i in range(1, SHARDS + 1):
        original = before[f"lm_head8_{i}_weight_to_fp16_palettized"]
        parts = _parts(b.program, original.outputs[0].name, axis)
        _check_lut_parts(original, parts, dim)
        known_a[original.name] = original.materialized_val_inference()
        known_b.update({p.name: p.materialized_val_inference() for p in parts})
    feeds = {
        "hidden_states": np.random.default_rng(SEED + 1).integers(-511, 512, (1, 1, HIDDEN)) / 256
    }
    want = run_numpy(a.program, feeds, known=known_a)
    got = run_numpy(b.program, feeds, known=known_b)
    assert len(got) == len(want) == SHARDS
    for g, w in zip(got, want, strict=True):
        _close(g, w, exact=axis == "cout")


# ---------------------------------------------------------------- ANEMLL's FFN


D, F = 64, 192


@pytest.fixture(scope="module")
def ffn(tmp_path_factory: pytest.TempPathFactory):
    """ANEMLL's Llama MLP: gate, up and down as 1x1 convs on (1, hidden, 1, 1)."""
    cm = coreml()
    mb, types = cm.mb, cm.types
    folder = tmp_path_factory.mktemp("ffn")
    rng = np.random.default_rng(SEED)
    gate, up, down = (
        (rng.standard_normal(s) / 8).astype(np.float16)
        for s in ((F, D, 1, 1), (F, D, 1, 1), (D, F, 1, 1))
    )

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(1, D, 1, 1), dtype=types.fp16)],
        opset_version=cm.ct.target.iOS18,
    )
    def prog(hidden_states):
        def w(name, v):
            return mb.const(val=v, name=f"model_layers_0_mlp_{name}_proj_weight_to_fp16")

        g = mb.conv(x=hidden_states, weight=w("gate", gate), name="conv_0_cast_fp16")
        u = mb.conv(x=hidden_states, weight=w("up", up), name="conv_1_cast_fp16")
        m = mb.mul(x=mb.silu(x=g, name="silu_0_cast_fp16"), y=u, name="mul_0_cast_fp16")
        return mb.conv(x=m, weight=w("down", down), name="conv_2_cast_fp16")

    prog.functions["main"].outputs[0].name = "output_hidden_states"
    return _convert(cm, prog, folder / "dense.mlpackage"), folder


@pytest.mark.parametrize("nbits", [4, 6])
def test_anemll_ffn_palettized_is_cut_exactly(ffn, nbits: int, monkeypatch) -> None:
    dense, folder = ffn
    cm = coreml()
    src = _palettize(cm, dense, folder / f"ffn{nbits}.mlpackage", nbits, "per_grouped_channel")
    monkeypatch.setattr(patch_mod, "decide", _forced("cin"))
    dst = folder / f"out{nbits}.mlpackage"
    doc = patch(src, dst, CHIP, BUGGY, FAST)
    assert [c["op"] for c in doc["changed"]] == [f"conv_{i}_cast_fp16" for i in range(3)]
    assert {(c["form"], c["bits"], c["axis"]) for c in doc["changed"]} == {(LUT, nbits, "cin")}
    a, b = load(src, cm), load(dst, cm)
    assert a.spec.description == b.spec.description
    assert [v.name for v in b.program.functions["main"].outputs] == ["output_hidden_states"]
    _stored_once(src, dst)
    before = {op.name: op for op in a.program.functions["main"].operations}
    for p in ("gate", "up", "down"):
        original = before[f"model_layers_0_mlp_{p}_proj_weight_to_fp16_palettized"]
        _check_lut_parts(original, _parts(b.program, original.outputs[0].name, "cin"), 1)
    feeds = {
        "hidden_states": np.random.default_rng(SEED + 1).integers(-511, 512, (1, D, 1, 1)) / 256
    }
    (want,) = run_numpy(a.program, feeds)
    (got,) = run_numpy(b.program, feeds)
    _close(got, want, exact=False)
    # planned with the bytes each part reads: the per-core LUT share is in every Cin part
    for c in doc["changed"]:
        t_cout = c["cout"]
        assert c["side_bytes"] == t_cout // GROUP * (1 << nbits) * 2
