"""Layer names as a PyTorch user knows them, recovered from what a conversion leaves.

Why: ct.convert names a weight after its ``state_dict`` key with every ``.``
made ``_`` (``model.layers.0.mlp.down_proj.weight`` becomes
``model_layers_0_mlp_down_proj_weight``, then ``..._to_fp16`` when cast to
fp16; a torch.export conversion adds ``p_`` in front), so the dots are lost:
``mlp_down_proj`` reads as ``mlp.down_proj``, ``mlp_down.proj`` or
``mlp.down.proj``. A dot is put back between the parts a PyTorch model's
module path is made of: a ModuleList index, or a module name of the common
Hugging Face families listed below (``down_proj``, ``self_attn``,
``embed_tokens``, ...). A path with a part outside those lists is still
shown dotted, every underscore read as a dot, and marked as a guess: the
report says so.

A dotted name the user gives (``--skip`` without wildcards) that reads as the
converted one is shown as given. Matching never depends on the guess: a
pattern with dots also matches the underscored names with each of its dots
read as an underscore, so ``model.layers.0.mlp.down_proj`` finds
``model_layers_0_mlp_down_proj`` whichever underscores were dots.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: module names with an underscore inside, as the common Hugging Face models spell them
#: (Llama, Mistral, Qwen, Gemma, Phi, GPT-2, GPT-NeoX, BERT, T5, CLIP, Whisper, Mixtral)
COMPOUND = frozenset(
    {
        "embed_tokens", "self_attn", "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj",
        "gate_proj", "up_proj", "down_proj", "gate_up_proj", "lm_head", "rotary_emb",
        "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
        "post_feedforward_layernorm", "q_norm", "k_norm", "block_sparse_moe",
        "feed_forward", "c_attn", "c_proj", "c_fc", "ln_1", "ln_2", "ln_f",
        "query_key_value", "dense_h_to_4h", "dense_4h_to_h", "embed_in", "embed_out",
        "final_layernorm", "final_layer_norm", "layer_norm", "layer_norm1", "layer_norm2",
        "word_embeddings", "position_embeddings", "token_type_embeddings",
        "patch_embeddings", "patch_embedding", "class_embedding", "position_embedding",
        "token_embedding", "embed_positions", "text_model", "vision_model",
        "text_projection", "visual_projection", "out_proj", "in_proj",
        "encoder_attn", "encoder_attn_layer_norm", "self_attn_layer_norm",
        "relative_attention_bias", "wi_0", "wi_1", "shared_expert", "shared_experts", "gpt_neox",
    }
)  # fmt: skip
#: module names without one: each reads as a whole part
WORDS = frozenset(
    {
        "model", "layers", "layer", "h", "transformer", "encoder", "decoder", "block",
        "blocks", "mlp", "attn", "attention", "self", "norm", "embeddings", "output",
        "dense", "intermediate", "query", "key", "value", "fc1", "fc2", "wte", "wpe",
        "wq", "wk", "wv", "wo", "wi", "w1", "w2", "w3", "gate", "experts", "router",
        "LayerNorm", "SelfAttention", "EncDecAttention", "DenseReluDense", "conv1",
        "conv2", "embed", "head", "classifier", "pooler",
    }
)  # fmt: skip
#: names built with an index inside (ANEMLL's LM head shards: lm_head8_1 .. lm_head8_8)
PATTERNS = (re.compile(r"lm_head\d+_\d+"),)
LONGEST = 4  # parts in the longest COMPOUND name

#: what converters append to a parameter's name: casts, compression, uniquifying indices
_CAST = re.compile(r"(_to_fp16|_to_fp32|_cast_fp16|_cast_fp32|_palettized|_quantized)+$")
_PARAM = re.compile(r"^(?P<path>.+?)_weight(_\d+)?$")


@dataclass(frozen=True)
class Layer:
    """A module path: as the converter left it, dotted, and whether the dots are certain."""

    underscored: str
    dotted: str
    sure: bool  # every part a ModuleList index or a name from COMPOUND / WORDS / PATTERNS


def dotted(path: str) -> Layer:
    """`path`'s underscores read as dots between known parts (see the module docstring)."""
    tokens = path.split("_")
    if "." in path or "" in tokens:
        return Layer(path, path, "." in path)
    parts: list[str] = []
    sure = True
    i = 0
    while i < len(tokens):
        for j in range(min(len(tokens), i + LONGEST), i + 1, -1):
            name = "_".join(tokens[i:j])
            if name in COMPOUND or any(p.fullmatch(name) for p in PATTERNS):
                break
        else:
            j, name = i + 1, tokens[i]
            sure = sure and (name.isdigit() or name in WORDS)
        parts.append(name)
        i = j
    return Layer(path, ".".join(parts), sure)


def of_weight(weight_name: str) -> Layer | None:
    """The module of a converted PyTorch parameter (None: the name is not one's)."""
    m = _PARAM.match(_CAST.sub("", weight_name))
    if m is None:
        return None
    path = m.group("path")
    if path.startswith("p_") and len(path) > 2:  # torch.export's lifted parameter
        path = path[2:]
    return dotted(path)


def of_op(op_name: str) -> Layer | None:
    """An op named after its module (some converters do): only when every part is known."""
    layer = dotted(_CAST.sub("", op_name))
    return layer if layer.sure and "." in layer.dotted else None


def layer(op_name: str, weight_name: str, given: Iterable[str] = ()) -> Layer | None:
    """The op's module: from its weight's name, else from its own name, else None. A dotted
    name the user `given` (a --skip without wildcards) that reads as it is taken as it is."""
    m = of_weight(weight_name) or of_op(op_name)
    under = m.underscored if m is not None else _CAST.sub("", op_name)
    for name in given:
        path = name.removesuffix(".weight")
        if "." in path and not any(c in path for c in "*?[") and path.replace(".", "_") == under:
            return Layer(under, path, True)
    return m


def matches(pattern: str, names: Iterable[str]) -> bool:
    """A shell pattern against names; one with dots also with its dots read as underscores."""
    pats = [pattern]
    if "." in pattern:
        pats.append(pattern.replace(".", "_"))
    return any(fnmatch.fnmatchcase(n, p) for n in names for p in pats)
