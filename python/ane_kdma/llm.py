"""Decode tokens/s of known LLMs on the ANE, unsplit and with the split plan applied.

Decode streams every weight once per token, so a token costs the sum of its
weights' streaming times. Each projection (q, k, v, o, gate, up, down) is a
1x1 convolution with Cin x Cout fp16 weights; the LM head is sharded along the
vocabulary. A decode step issues its weights back to back, so a weight costs
its marginal time in a stream (cycles of two copies minus one: no pipeline
fill). The profile's per-request overhead is charged once per token: it was
measured per submission, and a decode step is not one submission per weight,
so this is a lower bound on overhead (an assumption, written down, not fitted).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ane_kdma import contract
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip, data_dir
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.plan import Shape, plan_shape


def models_file() -> Path:
    return data_dir() / "models" / "anemll.json"


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

    def weights(self, cores: int) -> list[tuple[Shape, int]]:
        """(shape, how many of it) for one decode step."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = [
            (h, q),
            (h, kv),
            (h, kv),
            (q, h),
            (h, self.intermediate),
            (h, self.intermediate),
            (self.intermediate, h),
        ]
        shard = -(-self.vocab // self.lm_head_shards)
        shard += -shard % cores  # pad the shard to whole core shares
        counts: dict[tuple[int, int], int] = {}
        for cin, cout in per_layer:
            counts[(cin, cout)] = counts.get((cin, cout), 0) + self.layers
        counts[(h, shard)] = counts.get((h, shard), 0) + self.lm_head_shards
        return [(Shape(cin, cout, cores), n) for (cin, cout), n in counts.items()]


def load_models(path: Path | None = None) -> dict[str, ModelConfig]:
    path = path or models_file()
    raw = json.loads(path.read_text())["models"]
    return {name: ModelConfig(name=name, **cfg) for name, cfg in raw.items()}


def get_model(name: str) -> ModelConfig:
    models = load_models()
    if name not in models:
        raise InputError(f"unknown model {name!r} (ane-kdma llm --list names them)")
    return models[name]


def stream_us(chip: Chip, h: Hypothesis, chunks: list[int], engine: str) -> float:
    """Marginal time of one weight (as `chunks` lines per task) inside a back-to-back stream."""
    lb = chip.line_bytes
    one, two = (
        Workload.from_chunks([n * lb for n in seq], chip.cores, lb) for seq in (chunks, chunks * 2)
    )
    r1, r2 = contract.run_many(engine, h, chip, [one, two])
    return r2.time_us - r1.time_us


def decode_rate(
    model: ModelConfig, chip: Chip, h: Hypothesis | None = None, engine: str = "model"
) -> dict[str, object]:
    """Tokens/s and streaming GB/s, buggy hardware unsplit and with the plan applied."""
    h = h or hyps.get(hyps.DEFAULT_BUGGY)
    total_bytes = 0
    t_unsplit = t_split = chip.profile.overhead_us
    affected = []
    for shape, count in model.weights(chip.cores):
        row = plan_shape(shape, chip, h, engine)
        lines = row.lines_per_core
        parts = row.splits or 1
        chunks = [shape.bytes_per_core(parts) // chip.line_bytes] * parts
        total_bytes += count * chip.cores * row.bytes_per_core
        t_unsplit += count * stream_us(chip, h, [lines], engine)
        t_split += count * stream_us(chip, h, chunks, engine)
        if row.affected:
            affected.append({"shape": row.shape, "count": count, "splits": row.splits})
    return {
        "model": model.name,
        "tok_s_unsplit": round(1e6 / t_unsplit, 3),
        "tok_s_split": round(1e6 / t_split, 3),
        "gbps_unsplit": round(total_bytes / (t_unsplit * 1e3), 2),
        "gbps_split": round(total_bytes / (t_split * 1e3), 2),
        "affected": affected,
    }
