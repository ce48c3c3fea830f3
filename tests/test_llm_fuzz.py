"""Property-based fuzzing (Hypothesis) of Hugging Face config.json files (`llm/models.py`).

Any JSON document, and configs with sizes at and past their limits, must be a
model or one line of InputError; `llm --config` on one ends in bounded time.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from fuzzing import (
    check,
    fuzz,
    one_line,
    run,
    scratch,
)
from hypothesis import given
from hypothesis import strategies as st

from ane_kdma import chip as chips
from ane_kdma.errors import InputError
from ane_kdma.llm import models as llm_models

# --------------------------------------------------------------------------- Hugging Face configs

HF_DIR = chips.data_dir() / "models" / "hf"
HF_BASE = json.loads((HF_DIR / "llama-3.2-1b" / "config.json").read_text())
HF_FAMILIES = sorted(json.loads(llm_models.families_file().read_text())["families"])
SIZE_KEYS = sorted(llm_models.LIMITS)
SIZES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from(
        [0, 1, -1, 10**30, 2**31, 2**32, 2**63, 2**64, *llm_models.LIMITS.values()]
    ).flatmap(lambda v: st.sampled_from([v - 1, v, v + 1])),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=6),
    st.lists(st.integers(0, 9), max_size=2),
)
HF_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(st.sampled_from([*SIZE_KEYS, "model_type", "text_config", "x"]), kids)
    ),
    max_leaves=16,
)


def _hf_model(doc: object) -> llm_models.ModelConfig | None:
    """from_hf_dict: a model whose every size is within LIMITS, or one line of InputError."""
    try:
        m = llm_models.from_hf_dict(doc, "fuzz")
    except InputError as exc:
        one_line(exc)
        return None
    sizes = {
        "hidden_size": m.hidden,
        "intermediate_size": m.intermediate,
        "num_hidden_layers": m.layers,
        "num_attention_heads": m.heads,
        "num_key_value_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "vocab_size": m.vocab,
    }
    for key, value in sizes.items():
        assert type(value) is int and 1 <= value <= llm_models.LIMITS[key], (key, value)
    assert m.heads % m.kv_heads == 0
    return m


@fuzz(300)
@given(
    st.dictionaries(st.sampled_from(SIZE_KEYS), SIZES, max_size=len(SIZE_KEYS)),
    st.sampled_from([*HF_FAMILIES, "gemma3", "gpt2", "mixtral", "", "LLAMA"]),
)
def test_every_size_in_a_config_is_bounded_or_refused(over: dict, model_type: str) -> None:
    """A 10^30-wide layer, a float, a bool or a string where a size goes: refused in one line."""
    doc = {**HF_BASE, "model_type": model_type, **over}
    m = _hf_model(doc)
    if m is not None:
        try:
            weights = [p.weight for p in m.projections()]
        except InputError as exc:  # more LM-head shards than tokens
            one_line(exc)
            return
        # the largest weight the limits allow: hidden x (heads x head_dim) = 2^18 x 2^24
        assert all(0 < w.cin * w.cout <= 2**42 for w in weights)


@fuzz(200)
@given(HF_DOCUMENTS)
def test_any_json_document_is_a_config_or_one_line(doc: object) -> None:
    _hf_model(doc)
    if isinstance(doc, dict):
        _hf_model({**HF_BASE, **doc})


@fuzz(30)
@given(st.integers(0, 12), st.sampled_from(["gemma3", "llama", None]))
def test_text_config_is_read_a_few_levels_deep_and_no_deeper(depth: int, outer: str | None) -> None:
    doc: dict = dict(HF_BASE)
    for _ in range(depth):
        doc = {"model_type": outer, "text_config": doc} if outer else {"text_config": doc}
    m = _hf_model(doc)
    if outer is None and depth:
        assert m is None  # a wrapper must say what it is
    else:
        assert (m is not None) == (depth <= llm_models.MAX_NESTING), depth
        assert m is None or m.hidden == HF_BASE["hidden_size"]


@fuzz(8, deadline=timedelta(seconds=60))
@given(st.fixed_dictionaries({k: st.integers(1, v) for k, v in llm_models.LIMITS.items()}))
def test_llm_on_a_config_at_the_limits_ends_in_bounded_time(sizes: dict) -> None:
    """Through the command line, on the analytic engine: a result or one line, in the deadline."""
    with scratch() as tmp:
        path = tmp / "config.json"
        path.write_text(json.dumps({**HF_BASE, "model_type": "llama", **sizes}))
        argv = ["llm", "--config", str(path), "--engine", "analytic", "--json"]
        check(argv, *run(argv))


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
