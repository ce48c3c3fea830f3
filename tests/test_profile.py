"""ane_kdma.profile: what a profile writes (the inputs of its own mechanism, and any on)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ane_kdma import chip as chips
from ane_kdma.errors import InputError
from ane_kdma.profile import Profile
from ane_kdma.schema import Doc

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


def _with_uncertainty(**u: object) -> dict[str, object]:
    doc = json.loads((M3 / "profile.json").read_text())
    doc["uncertainty"] = {
        "method": "two other fits that pass",
        "intervals": {"overhead_us": [28.0, 30.0], "latency_cycles": [570, 580]},
        "members": [{"overhead_us": 28.5, "latency_cycles": 571}, {"overhead_us": 29.9}],
        "free": {"overhead_us": "the control pins it"},
        **u,
    }
    return doc


def test_a_profile_s_members_are_itself_then_each_fit_of_its_uncertainty() -> None:
    """A band runs every member: the profile first, then each member's fields over it."""
    prof = Profile.from_doc(Doc(_with_uncertainty(), "", "p.json"))
    got = [(m.overhead_us, m.latency_cycles, m.uncertainty) for m in prof.members()]
    assert got == [(29.135, 576, None), (28.5, 571, None), (29.9, 576, None)]
    assert prof.uncertainty is not None and prof.uncertainty.intervals["latency_cycles"] == (
        570,
        580,
    )
    again = Profile.from_doc(Doc(json.loads(prof.to_json()), "", "p.json"))
    assert again == prof
    bare = replace(chips.load("m3").profile, uncertainty=None)  # no uncertainty: itself alone
    assert bare.members() == (bare,)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"members": [{"overhead_us": 31}]}, "uncertainty.members[0].overhead_us: 31"),
        ({"intervals": {"foo": [1, 2]}}, "uncertainty.intervals.foo: not a fitted field"),
        ({"intervals": {"overhead_us": [30, 31]}}, "uncertainty.intervals.overhead_us: must be"),
        ({"intervals": {"overhead_us": [28]}}, "uncertainty.intervals.overhead_us: must be"),
        ({"members": [{"window_lines": 0}]}, "uncertainty.members[0].window_lines"),
        ({"members": [{"name": "x"}]}, "uncertainty.members[0].name: not a fitted field"),
        ({"members": [{"latency_cycles": 571.5}]}, "uncertainty.members[0].latency_cycles"),
    ],
)
def test_an_uncertainty_that_does_not_hold_names_its_key(
    change: dict[str, object], said: str
) -> None:
    with pytest.raises(InputError) as exc:
        Profile.from_doc(Doc(_with_uncertainty(**change), "", "p.json"))
    assert str(exc.value).startswith(f"p.json: {said}"), exc.value
