"""Property-based fuzzing (Hypothesis) of the data files (`chip.py`, `profile.py`, `schema.py`).

A profile, chip file or measured file with any one value or key mutated must
load or be refused in one line naming its file and key; never another
exception, a non-finite figure, or a file left behind.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
from fuzzing import (
    M3,
    fuzz,
    one_line,
    scratch,
)
from hypothesis import given
from hypothesis import strategies as st

from ane_kdma import chip as chips
from ane_kdma.errors import InputError

# --------------------------------------------------------------------------- data files

SPECIAL_TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e999",
    "-1",
    "0",
    "-0.0",
    "0.5",
    "1e308",
]
SPECIAL_NUMBERS = st.sampled_from(SPECIAL_TOKENS)
JSON_VALUES = st.one_of(
    SPECIAL_NUMBERS,  # what a schema must refuse or range-check, so drawn most
    st.integers(-(2**80), 2**80).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["null", "true", "[]", "{}", '"738"', '""']),
    st.text(alphabet="0123456789", min_size=40, max_size=5000),
    st.text(max_size=20).map(json.dumps),
    st.integers(1, 100_000).map(lambda n: "[" * n + "]" * n),
)


def _leaves(doc: object, path: tuple = ()) -> list[tuple]:
    """Every place in a JSON document that holds a value: (key path, value)."""
    if isinstance(doc, dict):
        return [leaf for k, v in doc.items() for leaf in _leaves(v, (*path, k))] + [(path, doc)]
    if isinstance(doc, list):
        return [leaf for i, v in enumerate(doc) for leaf in _leaves(v, (*path, i))]
    return [(path, doc)]


@st.composite
def _mutated_json(draw: st.DrawFn, text: str) -> str:
    """The document with one value replaced, dropped or given twice, or the text cut short."""
    if draw(st.integers(0, 9)) == 0:
        return text[: draw(st.integers(0, len(text)))]
    doc = json.loads(text)
    leaves = [leaf for leaf in _leaves(doc) if leaf[0]]
    numbers = [leaf for leaf in leaves if isinstance(leaf[1], int | float)]
    path, _ = draw(st.sampled_from(numbers if numbers and draw(st.booleans()) else leaves))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key, token = path[-1], draw(JSON_VALUES)
    op = draw(st.sampled_from(["value", "drop", "twice"] if isinstance(key, str) else ["value"]))
    if op == "drop":
        del parent[key]
        return json.dumps(doc)
    old = json.dumps(parent[key])
    parent[key] = "__fuzz__"
    body = json.dumps(doc)
    if op == "value":
        return body.replace('"__fuzz__"', token, 1)
    return body.replace(f'"{key}": "__fuzz__"', f'"{key}": {old}, "{key}": {token}', 1)


PROFILE_TEXT = (M3.path / chips.PROFILE_FILE).read_text()
CHIP_TEXT = (M3.path / chips.CHIP_FILE).read_text()


@fuzz(100)
@given(st.data())
def test_profiles_are_checked_as_a_schema(data: st.DataObject) -> None:
    with scratch() as tmp:
        path = tmp / "p.json"
        path.write_text(data.draw(_mutated_json(PROFILE_TEXT)))
        try:
            chip = chips.load(None, path)
        except InputError as exc:
            one_line(exc)
            return
        p = chip.profile
        values = (p.ns_per_cycle, p.overhead_us, p.ceiling_gbps)
        assert all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in values)
        assert all(type(v) is int for v in (p.latency_cycles, p.window_lines, p.core_rate_q16))
        assert 1 <= p.window_lines <= chip.geometry.kmem_lines


@pytest.mark.parametrize("name", [chips.PROFILE_FILE, chips.CHIP_FILE])
def test_every_number_in_a_data_file_is_checked(name: str) -> None:
    """Each numeric value, in turn, replaced by each special token: refused, or finite."""
    text = (M3.path / name).read_text()
    doc = json.loads(text)
    numbers = [path for path, v in _leaves(doc) if path and isinstance(v, int | float)]
    assert len(numbers) >= 6
    with scratch() as tmp:
        folder = tmp / "chip"
        shutil.copytree(M3.path, folder)
        for path in numbers:
            for token in SPECIAL_TOKENS:
                bad = json.loads(text)
                parent = bad
                for key in path[:-1]:
                    parent = parent[key]
                parent[path[-1]] = "__fuzz__"
                (folder / name).write_text(json.dumps(bad).replace('"__fuzz__"', token))
                try:
                    chip = chips.load(folder)
                except InputError as exc:
                    one_line(exc)
                    continue
                p = chip.profile
                floats = (
                    p.ns_per_cycle,
                    p.overhead_us,
                    chip.ceiling_gbps,
                    chip.ns_per_cycle_hand_set,
                )
                assert all(math.isfinite(v) and v >= 0 for v in floats), (path, token)


DATA_FILES = ["chip.json", "measured/point_facts.json", "measured/table_a.json"]


@fuzz(60)
@given(st.sampled_from(DATA_FILES), st.data())
def test_chip_files_are_checked_as_a_schema(name: str, data: st.DataObject) -> None:
    with scratch() as tmp:
        folder = tmp / "chip"
        shutil.copytree(M3.path, folder)
        text = (M3.path / name).read_text()
        (folder / name).write_text(data.draw(_mutated_json(text)))
        try:
            chip = chips.load(folder)
            meas = chip.measured
        except InputError as exc:
            one_line(exc)
            return
        assert 1 <= chip.cores <= 16 and math.isfinite(chip.ceiling_gbps)
        for figure in (meas.facts.notch, meas.facts.shoulder):
            assert figure is None or math.isfinite(figure.gbps.value)


# --------------------------------------------------------------------------- the commands


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
