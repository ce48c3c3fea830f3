"""Decode tokens/s on the ANE, unsplit and with the plan applied to the projections in scope.

The model of a token (assumptions, written down, not fitted):

* decode streams every weight once per token, back to back, so it is bound by
  weight streaming;
* a weight costs its marginal time in that stream: two copies back to back
  minus one (no pipeline fill), on the engine the user picked; an LM head of N
  shards costs N shards' marginal time;
* the profile's per-request overhead is charged once per token: it was
  measured per submission, and a decode step is not one submission per
  weight, so this is a lower bound on overhead;
* the DMA streams stored bytes (int8 and int4 weights are moved packed);
* the plan is `plan`'s, weight by weight, on the same hypothesis and along
  the axis `patch` cuts (Cin partial sums unless ``--axis cout``); only the
  projections in `scope` are split, as a patch would (`mlp` is the article's
  Llama patch and ANEMLL's knob). GB/s counts the unsplit bytes for both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ane_kdma import bands
from ane_kdma import hypotheses as hyps
from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.llm.models import SCOPES, ModelConfig
from ane_kdma.plan import DEFAULT_AXIS, Decision, Weight, decide, dtype_name, retime


@dataclass(frozen=True)
class ProjectionCost:
    """One projection's per-token time, unsplit and as the patch leaves it."""

    name: str
    count: int
    decision: Decision
    in_scope: bool

    @property
    def us_unsplit(self) -> float:
        d = self.decision
        return self.count * d.before.count * d.time_before.marginal_us

    @property
    def us_split(self) -> float:
        d = self.decision
        if not (self.in_scope and d.affected):
            return self.us_unsplit
        return self.count * d.chosen.count * d.time_after.marginal_us


def decode_rate(
    model: ModelConfig,
    chip: Chip,
    h: Hypothesis | None = None,
    engine: str = "model",
    scope: str = "all",
    bits: int = 16,
    lm_head_shards: int | None = None,
    axis: str = DEFAULT_AXIS,
) -> dict[str, object]:
    """Tokens/s and GB/s, unsplit and patched along `axis` (patch's default unless asked
    otherwise), with a per-projection breakdown."""
    if scope not in SCOPES:
        raise InputError(f"unknown scope {scope!r} (one of: {', '.join(SCOPES)})")
    h = h or chip.variant(hyps.BUGGY)
    decided: dict[Weight, Decision] = {}
    costs: list[ProjectionCost] = []
    for p in model.projections(bits, lm_head_shards):
        if p.weight not in decided:
            decided[p.weight] = decide(p.weight, chip, h, engine, marginal=True, axis=axis)
        costs.append(ProjectionCost(p.name, p.count, decided[p.weight], p.name in SCOPES[scope]))
    total_bytes = sum(
        c.count * c.decision.before.count * chip.cores * sum(c.decision.before.chunk_bytes)
        for c in costs
    )

    def figures(c: Chip) -> dict[str, float]:
        """Every printed figure on `c` (the profile or a band's member), for the plans decided."""
        if c is chip:
            mine = costs
        else:
            again = dict(zip(decided, retime(list(decided.values()), c, h, True), strict=True))
            mine = [replace(x, decision=again[x.decision.weight]) for x in costs]
        return _figures(mine, c.profile.overhead_us, total_bytes)

    central, others = bands.over(chip, figures)
    band = bands.spans(central, others, 3)  # the breakdown's µs (the totals: _total_bands)
    breakdown: dict[str, dict[str, object]] = {}
    for name in [*(c.name for c in costs), "overhead"]:
        row: dict[str, object] = {"count": int(central[f"{name}.count"])}
        for key in ("us_unsplit", "us_split"):
            row[key] = round(central[f"{name}.{key}"], 3)
            if band:
                row[f"{key}_band"] = band[f"{name}.{key}_band"]
        breakdown[name] = row
    head = {k: central[k] for k in TOTALS}
    doc: dict[str, object] = {
        "model": model.name,
        "label": model.label,
        "source": model.source,
        "scope": scope,
        "dtype": dtype_name(bits),
        "variant": h.name,
        "engine": engine,
        "axis": axis,
        "lm_head_shards": costs[-1].decision.weight.shards,
        "tok_s_unsplit": round(head["tok_s_unsplit"], 3),
        "tok_s_split": round(head["tok_s_split"], 3),
        "gbps_unsplit": round(head["gbps_unsplit"], 2),
        "gbps_split": round(head["gbps_split"], 2),
    }
    doc = bands.merged(doc, _total_bands(head, others))
    doc["breakdown"] = breakdown
    doc["affected"] = [_entry(c) for c in costs if c.in_scope and c.decision.affected]
    doc["affected_outside_scope"] = [
        c.name for c in costs if not c.in_scope and c.decision.affected
    ]
    return doc


TOTALS = ("tok_s_unsplit", "tok_s_split", "gbps_unsplit", "gbps_split")
TOTAL_DIGITS = {"tok_s_unsplit": 3, "tok_s_split": 3, "gbps_unsplit": 2, "gbps_split": 2}


def _total_bands(head: dict[str, float], others: list[dict[str, float]]) -> dict[str, list[float]]:
    """The headline figures' bands, each rounded as its figure is."""
    out: dict[str, list[float]] = {}
    for key in TOTALS:
        out |= bands.spans({key: head[key]}, [{key: o[key]} for o in others], TOTAL_DIGITS[key])
    return out


def _figures(costs: list[ProjectionCost], overhead: float, total_bytes: int) -> dict[str, float]:
    """Tokens/s, GB/s and each projection's µs (keys ``NAME.us_unsplit``), unrounded."""
    t_unsplit = overhead + sum(c.us_unsplit for c in costs)
    t_split = overhead + sum(c.us_split for c in costs)
    out = {
        "tok_s_unsplit": 1e6 / t_unsplit,
        "tok_s_split": 1e6 / t_split,
        "gbps_unsplit": total_bytes / (t_unsplit * 1e3),
        "gbps_split": total_bytes / (t_split * 1e3),
        "overhead.count": 1,
        "overhead.us_unsplit": overhead,
        "overhead.us_split": overhead,
    }
    for c in costs:
        out[f"{c.name}.count"] = c.count * c.decision.before.count
        out[f"{c.name}.us_unsplit"] = c.us_unsplit
        out[f"{c.name}.us_split"] = c.us_split
    return out


def _entry(c: ProjectionCost) -> dict[str, object]:
    d, w = c.decision, c.decision.weight
    return {
        "projection": c.name,
        "cin": w.cin,
        "cout": w.shard_cout,
        "count": c.count * d.before.count,
        "bytes_per_core": d.before.chunk_bytes[0],
        "axis": d.chosen.axis,
        "splits": d.chosen.splits,
        "tasks": c.count * d.chosen.tasks,
        "chunk_bytes_per_core": list(d.chosen.chunk_bytes),
    }
