"""Decode tokens/s of LLMs on the ANE, unsplit and with the split plan applied.

* :mod:`.models`: the bundled ANEMLL shapes, and Hugging Face config.json files
  of the Llama, Mistral, Qwen2/Qwen3 and Gemma 2/3 families;
* :mod:`.decode`: the per-token cost, one entry per projection, and which
  projections a patch splits (`scope`).
"""

from __future__ import annotations

from ane_kdma.llm.decode import decode_rate
from ane_kdma.llm.models import (
    PROJECTIONS,
    SCOPES,
    ModelConfig,
    Projection,
    from_hf_dict,
    get_model,
    load_models,
    read_config,
)

__all__ = [
    "PROJECTIONS",
    "SCOPES",
    "ModelConfig",
    "Projection",
    "decode_rate",
    "from_hf_dict",
    "get_model",
    "load_models",
    "read_config",
]
