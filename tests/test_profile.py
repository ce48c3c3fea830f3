"""ane_kdma.profile: what a profile writes (the inputs of its own mechanism, and any on)."""

from __future__ import annotations

import json
from dataclasses import replace

from ane_kdma import chip as chips

M3 = chips.chips_dir() / "m3"
URL = "https://eiln.github.io/posts/ane-dma.html"
MIB = 1 << 20


def test_a_profile_writes_the_starved_inputs_only_when_on() -> None:
    """The committed profile's JSON is what it loaded from; another mechanism's inputs are
    written only when on (the registry's table: the starved ones are not always written)."""
    p = chips.load("m3").profile
    assert json.loads(p.to_json()) == json.loads((M3 / "profile.json").read_text())
    on = json.loads(replace(p, dwarm_lines=16916, dwarm_extra_cycles=56).to_json())
    assert (on["dwarm_lines"], on["dwarm_extra_cycles"]) == (
        16916,
        56,
    ) and "dwin_step_lines" not in on
