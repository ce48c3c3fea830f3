"""Decoder shapes: the bundled ANEMLL models, or any Hugging Face config.json of a known family.

Why both: the bundled list (data/models/anemll.json) is what the article and
ANEMLL ran; `--config` lets a user plan a model that is not in it. A config is
read the way transformers reads it: a key the family's configuration class
defaults is taken at that default (data/models/hf_families.json, with its
source), head_dim defaults to hidden / heads, KV heads to the head count
(GQA when fewer), and a multimodal config (Gemma 3) is read through its
text_config, since decode streams only the language model.

Tied embeddings change nothing here: the LM head streams vocab x hidden
every token whether or not it shares storage with the embedding table (the
embedding lookup reads one row). A mixture-of-experts config is refused:
decode streams only the routed experts, which this estimate does not model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ane_kdma import fileio
from ane_kdma.chip import data_dir
from ane_kdma.errors import InputError
from ane_kdma.plan import Weight

#: every projection a decoder layer streams, then the head (never merged by shape)
PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down", "lm_head")
SCOPES = {
    "all": PROJECTIONS,
    "mlp": ("gate", "up", "down"),  # the article's Llama patch, ANEMLL's split knob
    "attn": ("q", "k", "v", "o"),
    "lm_head": ("lm_head",),
}
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few KiB
#: The most a config may ask for, size by size: 16 times the largest published dense
#: decoder or more (Llama 3.1 405B: hidden 16384, intermediate 53248, 126 layers, 128
#: heads; Gemma 3: a 262208-token vocabulary, head_dim 256), and small enough that no
#: weight, layer count or product of them is out of reach: a config that asks for more
#: is refused before anything is sized from it.
LIMITS = {
    "hidden_size": 1 << 18,
    "intermediate_size": 1 << 20,
    "num_hidden_layers": 1 << 12,
    "num_attention_heads": 1 << 12,
    "num_key_value_heads": 1 << 12,
    "head_dim": 1 << 12,
    "vocab_size": 1 << 23,
}
MAX_DIM = max(LIMITS.values())
MAX_LAYERS = LIMITS["num_hidden_layers"]
#: text_config inside text_config: a multimodal wrapper is one level, two at most seen
MAX_NESTING = 3
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")
REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers")


def models_file() -> Path:
    return data_dir() / "models" / "anemll.json"


def families_file() -> Path:
    return data_dir() / "models" / "hf_families.json"


@dataclass(frozen=True)
class Projection:
    """One projection of the model: its weight, and how many of it a token streams."""

    name: str
    weight: Weight
    count: int  # layers (an LM head: 1 weight, cut into weight.shards shards)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    label: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    head_dim: int
    kv_heads: int
    vocab: int
    lm_head_shards: int
    tied: bool = False
    source: str = ""

    def projections(self, bits: int = 16, lm_head_shards: int | None = None) -> list[Projection]:
        """The weights of one decode step, one entry per projection."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        shapes = {
            "q": (h, q),
            "k": (h, kv),
            "v": (h, kv),
            "o": (q, h),
            "gate": (h, self.intermediate),
            "up": (h, self.intermediate),
            "down": (self.intermediate, h),
        }
        out = [
            Projection(n, Weight(ci, co, bits=bits), self.layers) for n, (ci, co) in shapes.items()
        ]
        shards = lm_head_shards or self.lm_head_shards
        if shards > self.vocab:
            raise InputError(f"{shards} LM-head shards of a {self.vocab}-token vocabulary")
        out.append(Projection("lm_head", Weight(h, self.vocab, bits=bits, shards=shards), 1))
        return out


# ---------------------------------------------------------------- bundled models


def load_models(path: Path | None = None) -> dict[str, ModelConfig]:
    path = path or models_file()
    raw = json.loads(path.read_text())["models"]
    src = path.name
    return {name: ModelConfig(name=name, source=src, **cfg) for name, cfg in raw.items()}


def get_model(name: str) -> ModelConfig:
    """A bundled model by name, in any case: users type "Llama-3.2-1B" as Hugging Face spells it."""
    models = load_models()
    by_folded = {key.casefold(): cfg for key, cfg in models.items()}
    found = by_folded.get(name.strip().casefold())
    if found is None:
        shown = name if len(name) <= 40 else name[:37] + "..."
        raise InputError(f"unknown model {shown!r} (ane-kdma llm --list names them)")
    return found


# ---------------------------------------------------------------- Hugging Face configs


def read_config(path: str | Path, lm_head_shards: int | None = None) -> ModelConfig:
    """A Hugging Face config.json of a known dense family, as a ModelConfig."""
    p = Path(path)
    shown = fileio.shown(p, 60)
    if fileio.is_dir(p, "--config"):
        raise InputError(f"{shown}: no such config file (a folder: name the config.json in it)")
    raw = fileio.read_input(
        p, MAX_CONFIG_BYTES, "config.json", missing=f"{shown}: no such config file"
    )
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{shown}: not UTF-8 text, so not a config.json") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{shown}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise InputError(f"{shown}: not a usable JSON document ({str(exc)[:60]})") from None
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply to be a config.json") from None
    name = p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return from_hf_dict(doc, name=name, where=shown, lm_head_shards=lm_head_shards)


def from_hf_dict(
    doc: object, name: str, where: str = "config", lm_head_shards: int | None = None
) -> ModelConfig:
    if not isinstance(doc, dict):
        raise InputError(f"{where}: a config.json holds one JSON object")
    table = json.loads(families_file().read_text())
    families: dict[str, dict] = table["families"]
    top_type = _string(doc, "model_type", where)
    chain = [doc]  # the config, then each text_config in it: the last is the language model
    outer_type = top_type
    while "text_config" in chain[-1]:  # a multimodal wrapper: the language model decodes
        if len(chain) > MAX_NESTING:
            raise InputError(f"{where}: text_config nested more than {MAX_NESTING} levels deep")
        inner = chain[-1]["text_config"]
        if not isinstance(inner, dict):
            raise InputError(f"{where}: text_config is not an object")
        if isinstance(chain[-1].get("model_type"), str):
            outer_type = chain[-1]["model_type"]
        chain.append(inner)
        where = f"{where} text_config"
    cfg = chain[-1]
    kind = cfg.get("model_type", table["text_config_of"].get(outer_type, outer_type))
    if not isinstance(kind, str):
        raise InputError(f"{where}: model_type is not a string")
    _refuse_moe(cfg, kind, where)
    if kind not in families:
        raise InputError(
            f"{where}: model_type {kind[:40]!r} is not one of {', '.join(sorted(families))}"
        )
    fam = families[kind]
    missing = [k for k in REQUIRED if k not in cfg]
    if missing:
        raise InputError(f"{where}: missing {', '.join(missing)}")
    hidden = _dim(cfg, "hidden_size", where)
    heads = _dim(cfg, "num_attention_heads", where, fam)
    head_dim_default = fam["head_dim"]
    if "head_dim" not in cfg and head_dim_default is None and hidden % heads:
        raise InputError(f"{where}: hidden_size {hidden} is not a multiple of {heads} heads")
    fam = {**fam, "head_dim": head_dim_default or hidden // heads}
    fam["num_key_value_heads"] = fam["num_key_value_heads"] or heads
    kv = _dim(cfg, "num_key_value_heads", where, fam)
    if heads % kv:
        raise InputError(f"{where}: {heads} attention heads are not a multiple of {kv} KV heads")
    tied = next(
        (c["tie_word_embeddings"] for c in reversed(chain) if "tie_word_embeddings" in c),
        fam["tie_word_embeddings"],
    )
    if not isinstance(tied, bool):
        raise InputError(f"{where}: tie_word_embeddings is not true or false")
    layers = _dim(cfg, "num_hidden_layers", where)
    return ModelConfig(
        name=name,
        label=f"{name} ({kind} config)",
        hidden=hidden,
        intermediate=_dim(cfg, "intermediate_size", where),
        layers=layers,
        heads=heads,
        head_dim=_dim(cfg, "head_dim", where, fam),
        kv_heads=kv,
        vocab=_dim(cfg, "vocab_size", where, fam),
        lm_head_shards=lm_head_shards or fam["lm_head_shards"],
        tied=tied,
        source=where,
    )


def _string(doc: dict, key: str, where: str) -> str:
    v = doc.get(key)
    if not isinstance(v, str) or not v:
        raise InputError(f"{where}: {key} is missing or not a string")
    return v


def _dim(cfg: dict, key: str, where: str, defaults: dict | None = None) -> int:
    """A positive integer dimension, from the config or the family's default."""
    v = cfg.get(key, (defaults or {}).get(key))
    if v is None and key not in cfg:
        raise InputError(f"{where}: missing {key}")
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: {key} is {type(v).__name__}, not an integer")
    limit = LIMITS[key]
    if not 1 <= v <= limit:
        shown = str(v) if abs(v) < 10**12 else f"{str(v)[:12]}... ({len(str(abs(v)))} digits)"
        raise InputError(f"{where}: {key} {shown} is out of range (1..{limit})")
    return v


def _refuse_moe(cfg: dict, kind: str, where: str) -> None:
    experts = {k: cfg[k] for k in MOE_KEYS if k in cfg and cfg[k] not in (None, 0, 1)}
    if experts or "moe" in kind or kind == "mixtral":
        what = ", ".join(f"{k} = {v}" for k, v in experts.items()) or f"model_type {kind}"
        raise InputError(
            f"{where}: a mixture-of-experts model ({what[:60]}); decode streams only the "
            "routed experts, which this estimate does not model"
        )
