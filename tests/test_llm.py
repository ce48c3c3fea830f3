"""The LLM decode estimate (`llm`): the bundled models, Hugging Face configs, and bad input.

Rates follow from the planner's arithmetic on each projection (tests/test_plan.py
holds the planner); exact values are asserted only where the arithmetic gives them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma.cli import main
from ane_kdma.errors import InputError
from ane_kdma.llm import PROJECTIONS, from_hf_dict, get_model, load_models, read_config

CHIP = chips.load()
FAST = "analytic"  # the properties hold on any engine; the closed form keeps the file quick
HF = chips.data_dir() / "models" / "hf"
LLAMA_1B = HF / "llama-3.2-1b" / "config.json"
GEMMA_4B = HF / "gemma-3-4b-it" / "config.json"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- the command


def _llm(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    return _json(capsys, ["llm", *argv, "--engine", FAST, "--json"])


def test_llm_models_and_rates(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(load_models()) == {
        "llama-3.2-1b",
        "llama-3.2-3b",
        "llama-3.1-8b",
        "qwen3-8b",
        "gemma-3-4b",
    }
    doc = _llm(capsys, "--model", "llama-3.2-1b")
    assert set(doc) >= {
        "model",
        "scope",
        "dtype",
        "tok_s_unsplit",
        "tok_s_split",
        "gbps_unsplit",
        "gbps_split",
        "breakdown",
        "affected",
    }
    assert (doc["scope"], doc["dtype"]) == ("all", "fp16")
    assert [a["projection"] for a in doc["affected"]] == ["gate", "up", "down"]  # the MLP
    for a in doc["affected"]:
        assert {"cin", "cout", "count", "bytes_per_core", "axis", "splits"} <= set(a)
        assert sum(a["chunk_bytes_per_core"]) == a["bytes_per_core"] == 2 * (1 << 20)
        assert a["count"] == 16
    assert doc["tok_s_split"] > doc["tok_s_unsplit"]
    assert doc["gbps_split"] < CHIP.ceiling_gbps


def test_llm_breakdown_is_per_projection_never_merged(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _llm(capsys, "--model", "llama-3.2-1b")
    b = doc["breakdown"]
    assert list(b) == [*PROJECTIONS, "overhead"]  # q and o share a shape, not an entry
    assert b["q"] == b["o"] and b["q"]["count"] == 16 and b["lm_head"]["count"] == 8
    total = sum(v["us_unsplit"] for v in b.values())
    assert total == pytest.approx(1e6 / doc["tok_s_unsplit"], rel=1e-4)
    split = sum(v["us_split"] for v in b.values())
    assert split == pytest.approx(1e6 / doc["tok_s_split"], rel=1e-4)


def test_llm_scope_chooses_what_the_patch_splits(capsys: pytest.CaptureFixture[str]) -> None:
    every = _llm(capsys, "--model", "llama-3.2-1b")
    mlp = _llm(capsys, "--model", "llama-3.2-1b", "--scope", "mlp")
    attn = _llm(capsys, "--model", "llama-3.2-1b", "--scope", "attn")
    assert mlp["tok_s_split"] == every["tok_s_split"]  # only the MLP is in the notch
    assert attn["affected"] == [] and attn["tok_s_split"] == attn["tok_s_unsplit"]
    assert attn["affected_outside_scope"] == ["gate", "up", "down"]
    head = _llm(capsys, "--model", "gemma-3-4b", "--scope", "lm_head")
    assert [a["projection"] for a in head["affected"]] == ["lm_head"]
    assert head["affected"][0]["count"] == 16 and head["affected"][0]["cout"] == 16388


def test_llm_dtype_scales_the_stored_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _llm(capsys, "--model", "qwen3-8b", "--dtype", "int8")
    assert doc["dtype"] == "int8"
    q = next(a for a in doc["affected"] if a["projection"] == "q")
    assert q["bytes_per_core"] == 4096 * 4096 // 16  # one lap at one byte a weight


def test_llm_config_matches_the_bundled_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped configs are the bundled models' sources: same weights, same figures."""
    for path, name in ((LLAMA_1B, "llama-3.2-1b"), (GEMMA_4B, "gemma-3-4b")):
        cfg, bundled = read_config(path), get_model(name)
        assert cfg.projections() == bundled.projections(), name
        by_config = _llm(capsys, "--config", str(path))
        by_name = _llm(capsys, "--model", name)
        for key in ("tok_s_unsplit", "tok_s_split", "affected", "breakdown"):
            assert by_config[key] == by_name[key], (name, key)
    gemma = read_config(GEMMA_4B)
    assert (gemma.heads, gemma.kv_heads, gemma.head_dim, gemma.vocab) == (8, 4, 256, 262208)
    assert gemma.tied and read_config(LLAMA_1B).tied  # tied heads still stream every token


def test_llm_lm_head_shards_option(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _llm(capsys, "--config", str(LLAMA_1B), "--lm-head-shards", "4")
    assert doc["lm_head_shards"] == 4 and doc["breakdown"]["lm_head"]["count"] == 4


def _hf(**over: object) -> dict:
    base = {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "vocab_size": 128256,
    }
    return {**base, **over}


def test_hf_families_and_defaults() -> None:
    m = from_hf_dict(_hf(), "t")
    assert (m.head_dim, m.kv_heads, m.lm_head_shards, m.tied) == (64, 32, 8, False)  # MHA
    q2 = from_hf_dict(_hf(model_type="qwen2", num_key_value_heads=4), "t")
    assert (q2.head_dim, q2.kv_heads, q2.lm_head_shards) == (64, 4, 16)
    q3 = from_hf_dict(_hf(model_type="qwen3"), "t")
    assert q3.head_dim == 128  # Qwen3's default head_dim is not hidden / heads
    mi = from_hf_dict(_hf(model_type="mistral"), "t")
    assert mi.kv_heads == 8
    g2 = from_hf_dict(_hf(model_type="gemma2"), "t")
    assert (g2.head_dim, g2.tied) == (256, True)
    k = next(p for p in q2.projections() if p.name == "k")
    assert (k.weight.cin, k.weight.cout) == (2048, 4 * 64)  # GQA: fewer KV heads


@pytest.mark.parametrize(
    "doc,words",
    [
        ([1, 2], "one JSON object"),
        (_hf(model_type="mixtral", num_local_experts=8), "mixture-of-experts"),
        (_hf(model_type="qwen3_moe", num_experts=128), "mixture-of-experts"),
        (_hf(num_experts=64), "mixture-of-experts"),
        (_hf(model_type="gpt2"), "is not one of"),
        ({k: v for k, v in _hf().items() if k != "hidden_size"}, "missing hidden_size"),
        (_hf(hidden_size="2048"), "not an integer"),
        (_hf(hidden_size=2048.0), "not an integer"),
        (_hf(hidden_size=True), "not an integer"),
        (_hf(num_hidden_layers=0), "out of range"),
        (_hf(vocab_size=10**40), "out of range"),
        (_hf(tie_word_embeddings="yes"), "true or false"),
        (_hf(num_attention_heads=30), "not a multiple"),
        (_hf(model_type=None), "model_type"),
        ({"model_type": "gemma3", "text_config": []}, "text_config"),
    ],
    ids=lambda v: str(v)[:30],
)
def test_llm_bad_configs_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: object, words: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    refuses(["llm", "--config", str(path), "--engine", FAST], words)


def test_llm_unreadable_configs_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    refuses(["llm", "--config", str(bad)], "not JSON")
    bad.write_bytes(b"\xff\xfe\x00")
    refuses(["llm", "--config", str(bad)], "not UTF-8")
    bad.write_text("[" * 100000 + "]" * 100000)
    refuses(["llm", "--config", str(bad)], str(bad.name))
    bad.write_text('{"hidden_size": ' + "9" * 5000 + "}")
    refuses(["llm", "--config", str(bad)], "config.json")
    refuses(["llm", "--config", str(tmp_path / "none.json")], "no such config")
    refuses(["llm", "--config", str(tmp_path)], "no such config")


def test_llm_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    refuses(["llm", "--model", "gpt-5"], "unknown model")
    refuses(["llm"], "--model NAME or --config PATH")
    refuses(["llm", "--model", "llama-3.2-1b", "--config", "x.json"], "not allowed")
    refuses(["llm", "--model", "llama-3.2-1b", "--scope", "ffn"], "invalid choice")
    refuses(["llm", "--model", "llama-3.2-1b", "--dtype", "bf16"], "unknown dtype")
    with pytest.raises(InputError):
        get_model("nope")
