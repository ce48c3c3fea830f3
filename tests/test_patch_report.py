"""`patch`'s report as a model author reads it (issue 30, point 7).

A skipped op counts unsplit in the decode step; ``--skip`` and the report
take the dotted layer names PyTorch shows (``model.layers.0.mlp.down_proj``)
as well as the converter's underscored ones, and say when the dots are a
guess; a pattern that matches nothing is refused; sizes are the weight
file's own, each stored tensor once; ``unchanged`` names the function; OUT
must end in ``.mlpackage``. The programs are built with coremltools' MIL
builder as ct.convert names a PyTorch conversion (see test_patch_models.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from test_patch import BUGGY, CHIP, _q, coreml
from test_patch_models import SEED, WEIGHTS, _compressed, _convert, _mlp, _rename_outputs, _size

from ane_kdma.cli import main
from ane_kdma.errors import InputError
from ane_kdma.patch import names, patch

FAST = "analytic"
#: the decode step's figures are rounded to 3 decimals: a sum of three of them to 2e-3
ROUNDING = 2e-3


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main([*argv, "--engine", FAST, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], folder: Path) -> str:
    """One line on stderr, exit 2, and nothing new in the folder."""
    before = sorted(os.listdir(folder))
    assert main([*argv, "--engine", FAST]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert sorted(os.listdir(folder)) == before
    return captured.err


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Llama 3.2 1B's MLP as ct.convert names it: every weight on a ring lap."""
    folder = tmp_path_factory.mktemp("report_mlp")
    return _mlp(coreml(), folder / "in.mlpackage", np.random.default_rng(SEED))


def _small(cm, path: Path, weights: list[str], functions: tuple[str, ...] = ()) -> Path:
    """Linears out of the notch, one per weight name; with `functions`, a multifunction
    package whose functions share the weights (as ANEMLL's prefill and infer do)."""
    mb, types = cm.mb, cm.types
    values = [_q(np.random.default_rng(SEED + i), 256, 512) for i in range(len(weights))]

    def build(folder: Path) -> Path:
        @mb.program(
            input_specs=[mb.TensorSpec(shape=(1, 512), dtype=types.fp16)],
            opset_version=cm.ct.target.iOS18,
        )
        def prog(x):
            outs = []
            for i, (name, v) in enumerate(zip(weights, values, strict=True)):
                w = mb.const(val=v, name=name)
                outs.append(mb.linear(x=x, weight=w, name=f"linear_{i}_cast_fp16"))
            return tuple(outs)

        _rename_outputs(prog, [f"h{i}" for i in range(len(weights))])
        return _convert(cm, prog, folder)

    if not functions:
        return build(path)
    desc = cm.ct.utils.MultiFunctionDescriptor()
    for f in functions:
        one = build(path.parent / f"{f}.mlpackage")
        desc.add_function(str(one), src_function_name="main", target_function_name=f)
    desc.default_function_name = functions[-1]
    with contextlib.redirect_stderr(io.StringIO()):
        cm.ct.utils.save_multifunction(desc, str(path))
    return path


# ---------------------------------------------------------------- the decode step


def test_skipping_every_op_leaves_the_decode_step_unsplit(mlp: Path, capsys) -> None:
    full = _json(capsys, ["patch", str(mlp), "--dry-run"])["decode_us"]
    assert full["after"] < full["before"] and full["held_whole"] == 0
    doc = _json(capsys, ["patch", str(mlp), "--dry-run", "--skip", "*"])
    d = doc["decode_us"]
    assert doc["changed"] == [] and len(doc["skipped"]) == 3 and doc["weights"] == 3
    assert d["before"] == d["after"] == full["before"] and d["held_whole"] == 3
    assert main(["patch", str(mlp), "--dry-run", "--engine", FAST, "--skip", "*"]) == 0
    out = capsys.readouterr().out
    assert "3 stored weights; would split 0 along cin" in " ".join(out.split())  # wrapped
    # each figure with its band where the profile has fits; what it counts on the next line
    before = re.escape(str(full["before"]))
    assert re.search(rf"^decode step: {before}( \(\S+\))? us before, ", out, re.M), out
    assert re.search(
        r"^  \(every stored weight once, marginal times; 3 kept whole, counted", out, re.M
    )


def test_a_skipped_op_counts_at_its_unsplit_time(mlp: Path, capsys) -> None:
    """Skip down, then gate and up: each op is in one run split and in the other whole, so
    the two runs' steps add up to the full run's before plus its after (2e-3: rounding)."""
    full = _json(capsys, ["patch", str(mlp), "--dry-run"])["decode_us"]
    down = _json(capsys, ["patch", str(mlp), "--dry-run", "--skip", "model.layers.0.mlp.down_proj"])
    argv = ["patch", str(mlp), "--dry-run", "--skip", "model.layers.0.mlp.gate_proj"]
    rest = _json(capsys, [*argv, "--skip", "*.up_proj"])
    assert [c["module"] for c in down["changed"]] == [
        "model.layers.0.mlp.gate_proj",
        "model.layers.0.mlp.up_proj",
    ]
    assert [c["module"] for c in rest["changed"]] == ["model.layers.0.mlp.down_proj"]
    for doc in (down, rest):
        assert doc["decode_us"]["before"] == full["before"]
        assert full["after"] < doc["decode_us"]["after"] < full["before"]
    total = down["decode_us"]["after"] + rest["decode_us"]["after"]
    assert total == pytest.approx(full["before"] + full["after"], abs=ROUNDING)


def test_an_op_patch_cannot_plan_is_named_as_left_out_of_the_decode_step(
    tmp_path: Path, capsys
) -> None:
    cm = coreml()
    mb, types = cm.mb, cm.types
    rng = np.random.default_rng(SEED)
    grouped, dense = _q(rng, 64, 32, 1, 1), _q(rng, 64, 64, 1, 1)

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(1, 64, 1, 1), dtype=types.fp16)],
        opset_version=cm.ct.target.iOS18,
    )
    def prog(x):
        y = mb.conv(x=x, weight=grouped, groups=2, name="conv_0_cast_fp16")
        return mb.conv(x=y, weight=dense, name="conv_1_cast_fp16")

    src = _convert(cm, prog, tmp_path / "in.mlpackage")
    doc = _json(capsys, ["patch", str(src), "--dry-run"])
    (s,) = doc["skipped"]
    assert (s["function"], s["op"], s["reason"]) == (
        "main",
        "conv_0_cast_fp16",
        "grouped convolution (groups=2)",
    )
    assert doc["decode_us"]["not_counted"] == ["conv_0_cast_fp16"]
    assert doc["unchanged"] == ["main/conv_1_cast_fp16"]
    # a --skip of an op already left alone matches it: not refused
    assert _json(capsys, ["patch", str(src), "--dry-run", "--skip", "conv_0*"])["skipped"] == [s]
    assert main(["patch", str(src), "--dry-run", "--engine", FAST]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the words: lines wrap at 100 columns
    assert "not in the decode step: 1 op left alone that patch cannot plan (conv_0_cast" in out


# ---------------------------------------------------------------- layer names


@pytest.mark.parametrize(
    "weight,dotted,sure",
    [
        ("model_layers_0_mlp_down_proj_weight_to_fp16", "model.layers.0.mlp.down_proj", True),
        ("p_model_layers_3_self_attn_q_proj_weight", "model.layers.3.self_attn.q_proj", True),
        ("model_embed_tokens_weight_to_fp16_palettized", "model.embed_tokens", True),
        ("lm_head_weight_to_fp16", "lm_head", True),
        ("transformer_h_11_attn_c_attn_weight", "transformer.h.11.attn.c_attn", True),
        (
            "encoder_block_0_layer_1_DenseReluDense_wi_0_weight",
            "encoder.block.0.layer.1.DenseReluDense.wi_0",
            True,
        ),
        ("lm_head8_1_weight_to_fp16", "lm_head8_1", True),  # ANEMLL's LM head shard
        ("model_layers_0_feedfwd_w_in_weight_to_fp16", "model.layers.0.feedfwd.w.in", False),
    ],
)
def test_a_converted_weight_name_gives_the_module_path(
    weight: str, dotted: str, sure: bool
) -> None:
    m = names.of_weight(weight)
    assert m is not None and (m.dotted, m.sure) == (dotted, sure)
    assert m.dotted.replace(".", "_") == m.underscored  # only underscores became dots


@pytest.mark.parametrize("weight", ["const_0", "proj_bias_to_fp16", "w", "model__x_weight"])
def test_a_name_that_is_not_a_parameters_gives_no_dotted_name(weight: str) -> None:
    m = names.of_weight(weight)
    assert m is None or (m.dotted == m.underscored and not m.sure)


def test_an_op_named_after_its_module_gives_it_only_when_every_part_is_known() -> None:
    m = names.layer("model_layers_0_mlp_down_proj", "const_7")
    assert m is not None and (m.dotted, m.sure) == ("model.layers.0.mlp.down_proj", True)
    assert names.layer("linear_0_cast_fp16", "const_7") is None
    assert names.layer("my_block_fc", "const_7") is None


def test_a_dotted_name_the_user_gives_is_shown_as_given_when_it_reads_the_same() -> None:
    weight = "model_layers_0_feedfwd_w_in_weight_to_fp16"
    for given, shown, sure in [
        (["model.layers.0.feedfwd.w_in"], "model.layers.0.feedfwd.w_in", True),
        (["model.layers.0.feedfwd.w_in.weight"], "model.layers.0.feedfwd.w_in", True),
        (["model.layers.0.*"], "model.layers.0.feedfwd.w.in", False),  # a pattern names none
        (["model.layers.1.feedfwd.w_in"], "model.layers.0.feedfwd.w.in", False),  # another
    ]:
        m = names.layer("linear_0_cast_fp16", weight, given)
        assert m is not None and (m.dotted, m.sure) == (shown, sure)


def test_a_dotted_pattern_matches_the_underscored_names() -> None:
    under = ["model_layers_0_feedfwd_w_in"]
    for p in ("model.layers.0.feedfwd.w_in", "model.layers.0.feedfwd.w.in", "model.layers.0.*"):
        assert names.matches(p, under)
    assert not names.matches("model.layers.1.*", under)
    assert not names.matches("model.layers.0", under)  # a whole name, not a prefix


def test_the_report_shows_dotted_names_and_says_which_are_guesses(tmp_path: Path, capsys) -> None:
    src = _small(
        coreml(),
        tmp_path / "in.mlpackage",
        ["model_layers_0_feedfwd_w_in_weight_to_fp16", "lm_head_weight_to_fp16"],
    )
    doc = _json(capsys, ["patch", str(src), "--dry-run", "--skip", "model.layers.0.feedfwd.w_in"])
    (s,) = doc["skipped"]
    assert (s["function"], s["op"], s["weight"]) == (
        "main",
        "linear_0_cast_fp16",
        "model_layers_0_feedfwd_w_in_weight_to_fp16",
    )
    # the name the user gave reads as the converted one: shown as given, not as the guess
    assert (s["module"], s["module_guessed"]) == ("model.layers.0.feedfwd.w_in", False)
    assert s["reason"] == "--skip model.layers.0.feedfwd.w_in"
    assert doc["unchanged"] == ["main/linear_1_cast_fp16"]
    argv = ["patch", str(src), "--dry-run", "--engine", FAST, "--skip", "*feedfwd_w_in*"]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())  # the words: lines wrap at 100 columns
    assert "left alone: linear_0_cast_fp16 (linear, model.layers.0.feedfwd.w.in?)" in out
    doc = _json(capsys, ["patch", str(src), "--dry-run", "--skip", "*feedfwd_w_in*"])
    (s,) = doc["skipped"]
    assert (s["module"], s["module_guessed"]) == ("model.layers.0.feedfwd.w.in", True)
    assert "? marks a guessed layer name" in out
    # a name from the known lists is not a guess: no mark, no note
    assert main(["patch", str(src), "--dry-run", "--engine", FAST, "--skip", "lm_head"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the words: lines wrap at 100 columns
    assert "(linear, lm_head): --skip lm_head" in out and "?" not in out


@pytest.mark.parametrize(
    "pattern",
    [
        "model.layers.0.mlp.down_proj",  # PyTorch's module path
        "model.layers.0.mlp.down_proj.weight",  # and its parameter
        "model_layers_0_mlp_down_proj",  # as the converter leaves it
        "model_layers_0_mlp_down_proj_weight_to_fp16",  # the weight
        "linear_2_cast_fp16",  # the op
        "*.down_proj",
    ],
)
def test_skip_takes_every_name_of_an_op(mlp: Path, pattern: str, capsys) -> None:
    doc = _json(capsys, ["patch", str(mlp), "--dry-run", "--skip", pattern])
    assert [s["op"] for s in doc["skipped"]] == ["linear_2_cast_fp16"]
    assert len(doc["changed"]) == 2


@pytest.mark.parametrize("pattern", ["model.layers.1.mlp.down_proj", "down_proj", "nothing*"])
def test_a_pattern_that_matches_nothing_is_one_line(mlp: Path, pattern: str, capsys) -> None:
    out = mlp.parent / "never.mlpackage"
    for argv in (["patch", str(mlp), str(out)], ["patch", str(mlp), "--dry-run"]):
        err = _refused(capsys, [*argv, "--skip", "*.up_proj", "--skip", pattern], mlp.parent)
        assert f"--skip {pattern!r} matches no op, weight or layer name" in err
        assert "model.layers.0.mlp.gate_proj" in err  # what names look like


# ---------------------------------------------------------------- sizes and functions


def test_unchanged_names_the_function_and_sizes_count_a_shared_tensor_once(
    tmp_path: Path, capsys
) -> None:
    weight = "model_layers_0_mlp_up_proj_weight_to_fp16"
    src = _small(coreml(), tmp_path / "multi.mlpackage", [weight], ("prefill", "infer"))
    assert _size(src) < 2 * 256 * 512 * 2  # the functions share the tensor: stored once
    dst = tmp_path / "out.mlpackage"
    doc = _json(capsys, ["patch", str(src), str(dst)])
    assert doc["unchanged"] == ["infer/linear_0_cast_fp16", "prefill/linear_0_cast_fp16"]
    assert doc["weight_bytes_in"] == doc["weight_bytes_out"] == _size(src) == _size(dst)
    assert doc["duplicated_bytes"] == doc["side_bytes"] == 0 and doc["shared"] == []


def test_a_compressed_weight_two_functions_share_counts_once(tmp_path: Path, capsys) -> None:
    """Both functions read one int8 weight with its scales: each function's op is split, the
    slices are stored once, and the scales are counted once in the report."""
    cm = coreml()
    desc = cm.ct.utils.MultiFunctionDescriptor()
    for f in ("prefill", "infer"):
        one = _compressed(
            cm, tmp_path / f"{f}.mlpackage", "int8_block", np.random.default_rng(SEED)
        )
        desc.add_function(str(one), src_function_name="main", target_function_name=f)
    desc.default_function_name = "infer"
    src = tmp_path / "multi.mlpackage"
    with contextlib.redirect_stderr(io.StringIO()):
        cm.ct.utils.save_multifunction(desc, str(src))
    dst = tmp_path / "out.mlpackage"
    doc = _json(capsys, ["patch", str(src), str(dst)])
    changed = doc["changed"]
    assert [c["function"] for c in changed] == ["infer", "prefill"]
    assert changed[0]["side_bytes"] == changed[1]["side_bytes"] > 0
    assert doc["side_bytes"] == changed[0]["side_bytes"]  # one stored tensor, counted once
    assert _size(src) < 2 * changed[0]["stored_bytes"]  # and stored once in the input
    assert (doc["weight_bytes_in"], doc["weight_bytes_out"]) == (_size(src), _size(dst))
    assert _size(dst) <= _size(src) * 1.01
    assert main(["patch", str(src), "--dry-run", "--engine", FAST]) == 0
    words = " ".join(capsys.readouterr().out.split())  # the words: lines wrap at 100 columns
    assert f"offsets ({doc['side_bytes']} bytes in all)" in words


def test_the_printed_size_change_is_the_weight_files(mlp: Path, tmp_path: Path, capsys) -> None:
    dst = tmp_path / "out.mlpackage"
    assert main(["patch", str(mlp), str(dst), "--engine", FAST]) == 0
    out = capsys.readouterr().out
    line = " ".join(out.split()[out.split().index("wrote") :])  # the last line, as it may wrap
    m = re.search(r"weight files ([0-9.]+) MiB -> ([0-9.]+) MiB, ([+-][0-9,]+) bytes", line)
    assert m is not None, line
    assert int(m.group(3).replace(",", "")) == _size(dst) - _size(mlp)
    assert (float(m.group(1)), float(m.group(2))) == (
        round(_size(mlp) / 2**20, 1),
        round(_size(dst) / 2**20, 1),
    )
    assert (dst / WEIGHTS).is_file()


# ---------------------------------------------------------------- the output's name


@pytest.mark.parametrize("name", ["out", "out.mlmodel", "out.mlpackage.tmp", ".mlpackage"])
def test_an_output_not_named_mlpackage_is_one_line(mlp: Path, name: str, capsys) -> None:
    out = mlp.parent / name
    err = _refused(capsys, ["patch", str(mlp), str(out)], mlp.parent)
    assert "OUT must end in .mlpackage" in err and name in err
    err = _refused(capsys, ["patch", str(mlp), str(out), "--dry-run"], mlp.parent)
    assert "OUT must end in .mlpackage" in err
    with pytest.raises(InputError, match="OUT must end in .mlpackage"):
        patch(mlp, out, CHIP, BUGGY, FAST)
    assert not os.path.lexists(out)
