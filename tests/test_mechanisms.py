"""ane_kdma.mechanisms: one entry per mechanism, and everything that derives from it.

Settings and Profile declare the registry's field table as dataclass fields
(for the type checker); these tests hold every copy to the table, as
test_pkg_parity holds the package's localparams. The RTL struct's parity is
the RTL's test (rtl_fields against kdma_pkg::settings_t).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, fields, replace

import pytest

from ane_kdma import analytic
from ane_kdma import chip as chips
from ane_kdma import mechanisms as mechs
from ane_kdma.errors import InputError
from ane_kdma.hw import RATE_ONE
from ane_kdma.profile import Profile, Settings
from ane_kdma.schema import Doc

CHIP = chips.load()
#: the settings_t members, in declaration order (the RTL round's interface)
SETTINGS_T = (
    ("latency", 12),
    ("window", 13),  # up to hw.MAX_KMEM_LINES (4096): KmemLines is a build parameter
    ("core_rate_q16", 17),
    ("agg_rate_q16", 22),
    ("ramp_start_q16", 17),
    ("ramp_step_lines", 20),
    ("ramp_inc_q16", 17),
    ("dwarm_lines", 20),
    ("dwarm_extra_cycles", 12),
)


def test_settings_fields_are_the_table() -> None:
    got = [(f.name, f.default) for f in fields(Settings)]
    base = [(i.name, None) for i in mechs.BASE]
    want = base + [(i.name, i.off) for i in mechs.inputs()]
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, default), (_, off) in zip(got, want, strict=True):
        if off is not None:
            assert default == off, name


def test_profile_fields_are_the_table() -> None:
    own = {f.name: f.default for f in fields(Profile)}
    for i in mechs.inputs():
        assert own[i.name] == i.off, i.name
    assert Profile.mechanism_inputs(CHIP.profile).keys() == {i.name for i in mechs.inputs()}


def test_each_input_has_one_owner_and_a_sane_range() -> None:
    names = [i.name for i in mechs.fields_all()]
    assert len(names) == len(set(names))
    for i in mechs.fields_all():
        assert i.lo <= i.off <= i.hi, i.name
        if i.rtl_bits is not None:
            assert i.hi < 1 << i.rtl_bits or i.name == "window", i.name  # window: KMem-bound


def test_rtl_fields_keep_the_settings_t_order() -> None:
    assert [(f.name, f.rtl_bits) for f in mechs.rtl_fields()] == list(SETTINGS_T)
    assert mechs.rtl_names() == tuple(n for n, _ in SETTINGS_T)


def test_in_rtl_and_extends_are_derived() -> None:
    built = [m.name for m in mechs.REGISTRY if m.in_rtl]
    assert built == ["none", "ramp", "ramp-linear", "demand-warmup"]
    for m in mechs.REGISTRY:
        assert m.inputs == tuple(i.name for i in m.table)
        if m.parent is not None:
            assert m.inputs[: len(m.parent.inputs)] == m.parent.inputs
            assert m.params[: len(m.parent.params)] == m.parent.params


def test_ranges_are_checked_from_the_table() -> None:
    s = CHIP.settings
    for i in mechs.fields_all():
        if i.hi < (1 << 30):
            with pytest.raises(InputError, match=i.what.split(" (")[0]):
                replace(s, **{i.name: i.hi + 1})
    with pytest.raises(InputError, match="increment"):
        replace(s, ramp_start_q16=100, ramp_inc_q16=0)
    with pytest.raises(InputError, match="demand window start"):
        replace(s, dwin_start_lines=s.window + 1)


def test_profile_schema_derives_from_the_table(tmp_path) -> None:
    doc = json.loads(CHIP.profile.to_json())
    for i in mechs.inputs():
        if i.name in mechs.get(CHIP.profile.mechanism).inputs:
            bad = {**doc, i.name: i.hi + 1}
            path = tmp_path / "p.json"
            path.write_text(json.dumps(bad))
            with pytest.raises(InputError, match=i.name):
                Profile.from_doc(Doc.load(path, "profile"))
        else:  # another mechanism's input, on: refused with the reason
            path = tmp_path / "p.json"
            path.write_text(json.dumps({**doc, i.name: max(i.off + 1, i.lo + 1)}))
            with pytest.raises(InputError, match="another rate mechanism"):
                Profile.from_doc(Doc.load(path, "profile"))


def test_analytic_refuses_what_the_registry_says_it_lacks() -> None:
    s = CHIP.settings
    analytic.check_settings(s)
    rng = random.Random(29)
    for m in mechs.REGISTRY:
        for _ in range(20):
            drawn = m.draw(rng, asdict(s))
            one = replace(s, **{**mechs.off_values(), **drawn})
            if m.closed_form or not m.active(asdict(one)):
                analytic.check_settings(one)
            else:
                with pytest.raises(InputError, match=m.name):
                    analytic.check_settings(one)


@pytest.mark.parametrize("seed", range(5))
def test_draw_settings_gives_valid_settings_of_every_mechanism(seed: int) -> None:
    rng = random.Random(seed)
    seen: set[str] = set()
    for _ in range(200):
        base = {
            "latency": rng.randrange(1, 600),
            "window": rng.randrange(1, 300),
            "core_rate_q16": rng.randrange(RATE_ONE // 10, RATE_ONE + 1),
            "agg_rate_q16": rng.randrange(RATE_ONE // 2, 16 * RATE_ONE),
        }
        s = Settings(**base, **mechs.draw_settings(rng, base))  # type: ignore[arg-type]
        seen |= {m.name for m in mechs.REGISTRY if m.inputs_own and m.active(asdict(s))}
    assert seen == {m.name for m in mechs.REGISTRY if m.inputs_own}  # each one drawn


def test_to_inputs_maps_knobs_into_the_ranges() -> None:
    k = mechs.Knobs(
        rate=0.5,
        period_per_line=7.0,
        window=96,
        params={p.name: p.hi for m in mechs.REGISTRY for p in m.params},
    )
    for m in mechs.REGISTRY:
        got, ovh = m.to_inputs(k, 32767, 30.0, 8.0)
        assert set(got) <= set(m.inputs), m.name
        for name, v in got.items():
            (inp,) = [i for i in mechs.fields_all() if i.name == name]
            inp.check(v)
        assert ovh == (0.0 if m.intercept_per_task else 30.0)


@pytest.mark.parametrize("name", [m.name for m in mechs.REGISTRY if m.steps])
def test_a_governor_entry_maps_its_own_steps(name: str) -> None:
    """The governor's map is `ramp`'s, run for the entry that extends it: its steps count."""
    m = mechs.get(name)
    k = mechs.Knobs(0.5, 7.0, 96, {"start": 0.5, "ramp_lines": 16000.0})
    got, _ = m.to_inputs(k, 32000, 30.0, 8.0)
    assert got["ramp_start_q16"] == 16000
    assert got["ramp_inc_q16"] == -(-16000 // m.steps)
    assert got["ramp_step_lines"] == round(16000 / m.steps)


def test_no_module_outside_the_registry_names_a_mechanism() -> None:
    """A mechanism is one entry: no string literal elsewhere in the package is a mechanism's
    name ("none" aside, a common word: the plan's axis, a plot's marker face)."""
    import ast
    from pathlib import Path

    pkg = Path(mechs.__file__).parent
    names = set(mechs.names()) - {"none"}
    found = []
    for path in sorted(pkg.rglob("*.py")):
        if path.name == "mechanisms.py" and path.parent == pkg:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(pkg)}:{node.lineno}: {node.value!r}")
    assert not found, found
