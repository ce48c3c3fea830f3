"""Property-based fuzzing (Hypothesis) of chip folders, as test_regdump_fuzz.py fuzzes dumps.

A chip folder is every file a command reads from it: chip.json, profile.json,
fits.json and the datasets in measured/. Generated folders (values replaced by
extreme or ill-typed numbers, keys dropped or given twice, files cut short,
missing, replaced by a folder or a FIFO, padded with unknown files) must end
in one of two ways: a chip that keeps every rule the loader states, or one
line of InputError naming the file. Never another exception, never past the
deadline. A folder the loader accepts must also run a command to its end (on
the analytic engine) within the deadline: bounds that hold in the loader but
not in the commands would be no bounds.

Examples are derandomized and no example database is kept, as in tests/fuzzing.py.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refusal import Ran, check_refusal

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import measured
from ane_kdma import mechanisms as mechs
from ane_kdma.cli import main
from ane_kdma.errors import InputError
from ane_kdma.hw import MAX_CORES
from ane_kdma.profile import AGG_RATE_MAX_Q16

M3 = chips.chips_dir() / "m3"
DATASETS = [f"measured/{name}" for name in measured.DATASETS if (M3 / "measured" / name).exists()]
FILES = ["chip.json", "profile.json", "fits.json", *DATASETS]
TEXT = {name: (M3 / name).read_text() for name in FILES}
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=20),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples)


# --------------------------------------------------------------------------- strategies

#: what a schema must refuse or bound: the findings' numbers first
NUMBERS = [
    "0",
    "-0.0",
    "-1",
    "1e308",
    "-1e308",
    str(10**30),
    "1e20",
    "0.001",
    "1e-300",
    "65536",
    "4294967296",
    "3.5",
    "NaN",
    "1e999",
]
VALUES = st.one_of(
    st.sampled_from(NUMBERS),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["null", "true", "[]", "{}", '"16"', '""', '"bogus"', '"buggy"', '"fixed"']),
    st.sampled_from([f'"{n}"' for n in hyps.names() + mechs.names()]),
    st.sampled_from(['"0x1f0"', '"0x074"', '"0x0b0"', '"0x0"', '"0xFFFFFFFF"', '"0x"']),
    st.text(max_size=12).map(json.dumps),
)


def _leaves(doc: object, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], object]]:
    if isinstance(doc, dict):
        return [leaf for k, v in doc.items() for leaf in _leaves(v, (*path, k))] + [(path, doc)]
    if isinstance(doc, list):
        return [leaf for i, v in enumerate(doc) for leaf in _leaves(v, (*path, i))] + [(path, doc)]
    return [(path, doc)]


@st.composite
def _mutated(draw: st.DrawFn, text: str) -> str:
    """The document with one to three values replaced, dropped or given twice, or cut short."""
    if draw(st.integers(0, 11)) == 0:
        return text[: draw(st.integers(0, len(text)))]
    doc = json.loads(text)
    tokens: list[str] = []
    for i in range(draw(st.integers(1, 3))):
        leaves = [leaf for leaf in _leaves(doc) if leaf[0]]
        scalars = [leaf for leaf in leaves if isinstance(leaf[1], int | float | str)]
        path, _ = draw(st.sampled_from(scalars if scalars and draw(st.booleans()) else leaves))
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        op = draw(
            st.sampled_from(["value", "drop", "twice"] if isinstance(key, str) else ["value"])
        )
        if op == "drop":
            del parent[key]
            continue
        if op == "twice":  # the key given twice: the loader must not keep either silently
            tokens.append(f"{json.dumps(parent[key])}, {json.dumps(key)}: {draw(VALUES)}")
        else:
            tokens.append(draw(VALUES))
        parent[key] = f"__fuzz{i}__"
    body = json.dumps(doc)
    for i, token in enumerate(tokens):  # spliced in raw: NaN, 1e999 and 10^30 stay as written
        body = body.replace(f'"__fuzz{i}__"', token, 1)
    return body


@contextmanager
def _scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "chip"
        shutil.copytree(M3, folder)
        yield folder


def _one_line(exc: InputError) -> None:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text, repr(text)


# --------------------------------------------------------------------------- the rules


def _rules(chip: chips.Chip) -> None:
    """What an accepted chip keeps: every bound chip.py, profile.py and measured.py state."""
    g = chip.geometry
    assert 1 <= chip.cores <= MAX_CORES
    for v in (g.line_bytes, g.kmem_lines, g.prefetch_max_lines):
        assert v > 0 and v & (v - 1) == 0
    assert g.prefetch_max_lines <= min(g.kmem_lines, g.ring_lines // 2)
    assert g.kmem_lines <= chips.MAX_KMEM_LINES
    ns = chip.ns_per_cycle_hand_set
    assert chips.CLOCK_NS[0] <= ns <= chips.CLOCK_NS[1]
    lines_per_cycle = chip.ceiling_gbps * ns / g.line_bytes
    assert 1.0 - 1e-9 <= lines_per_cycle <= AGG_RATE_MAX_Q16 / (1 << 16) * (1 + 1e-9)
    spans = sorted(
        (getattr(chip.td, n), 4 * chip.cores if n.startswith("coeff_") else 4)
        for n in chip.td.OFFSETS
    )
    for (a, size), (b, _) in zip(spans, spans[1:], strict=False):
        assert a + size <= b  # no two registers overlap
    for prof in (chip.fitted, *chip.fits):
        if prof is None:
            continue
        h = hyps.get(prof.hypothesis)
        assert h.buggy and prof.mechanism in mechs.names()
        assert math.isclose(prof.ceiling_gbps, chip.ceiling_gbps)
        assert math.isclose(prof.ns_per_cycle, ns)
    assert len({(p.hypothesis, p.mechanism) for p in chip.fits}) == len(chip.fits)
    if chip.fitted is not None:
        assert chip.variant("buggy") is chip.hypothesis
        chip.settings  # noqa: B018 (the RTL's inputs, every one in range)
    meas = chip.measured
    figures = [
        f.gbps
        for f in (meas.facts.notch, meas.facts.shoulder)
        if f is not None  # the points
    ]
    if meas.platform is not None:
        figures.append(meas.platform.anemll)
    for fig in figures:
        assert 0 < fig.value <= chip.ceiling_gbps and fig.unit and fig.source is not None
    for p in (meas.facts.notch, meas.facts.shoulder):
        if p is not None:
            assert 0 < p.bytes_per_core < 1 << 32 and p.bytes_per_core % g.line_bytes == 0
    t = meas.table_a
    if t is not None:
        assert len(t.d) <= 64 and all(0 < b < 1 << 32 for b in t.bytes_per_core.tolist())
        g_each = chip.aggregate_gbps(t.bytes_per_core, t.medians)
        assert all(0 < v <= chip.ceiling_gbps * (1 + 1e-9) for v in g_each.tolist())


def _load_or_refuse(folder: Path) -> chips.Chip | None:
    try:
        chip = chips.load(folder)
    except InputError as exc:
        _one_line(exc)
        return None
    _rules(chip)
    return chip


# --------------------------------------------------------------------------- the tests


@fuzz(150)
@given(st.sampled_from(FILES), st.data())
def test_a_mutated_chip_file_is_a_chip_that_keeps_the_rules_or_one_line(
    name: str, data: st.DataObject
) -> None:
    with _scratch() as folder:
        (folder / name).write_text(data.draw(_mutated(TEXT[name])))
        _load_or_refuse(folder)


@fuzz(60)
@given(st.lists(st.tuples(st.sampled_from(FILES), st.data()), min_size=2, max_size=4))
def test_several_files_mutated_at_once(edits: list[tuple[str, st.DataObject]]) -> None:
    with _scratch() as folder:
        for name, data in edits:
            (folder / name).write_text(data.draw(_mutated(TEXT[name])))
        _load_or_refuse(folder)


@fuzz(40)
@given(
    st.sampled_from(FILES),
    st.sampled_from(["missing", "folder", "fifo", "empty", "binary", "huge", "link-loop"]),
)
def test_a_file_that_is_not_a_json_file(name: str, kind: str) -> None:
    """Missing, a folder, a FIFO (never opened: it would block), empty, binary, too large."""
    with _scratch() as folder:
        path = folder / name
        path.unlink()
        if kind == "folder":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "binary":
            path.write_bytes(bytes(range(256)) * 4)
        elif kind == "huge":
            path.write_bytes(b" " * (5 << 20) + b"{}")
        elif kind == "link-loop":
            path.symlink_to(path)
        chip = _load_or_refuse(folder)
        if chip is not None:  # only an optional file (not chip.json) may be left out
            assert kind == "missing" and name != "chip.json", kind


@fuzz(20)
@given(st.integers(0, 400), st.sampled_from(["measured", "."]))
def test_unknown_files_are_never_read(count: int, where: str) -> None:
    """A folder holding many unknown files loads as the bare folder does: nothing lists it."""
    with _scratch() as folder:
        for i in range(count):
            (folder / where / f"extra{i}.json").write_text("{")
        chip = _load_or_refuse(folder)
        assert chip is not None
        assert [p.name for p in chip.measured.files] == [Path(n).name for n in DATASETS]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


COMMANDS = [
    ["predict", "--bytes-per-core", str((1 << 20) + 8192), "--engine", "analytic"],
    ["dump", "--d", "2048", "--n", "4096"],
    ["llm", "--model", "llama-3.2-1b", "--engine", "analytic"],
    ["plan", "--shape", "2048x4096", "--engine", "analytic"],
]


@settings(FUZZ, max_examples=25, deadline=timedelta(seconds=60))  # llm: seconds on a busy box
@given(st.sampled_from(["chip.json", "profile.json"]), st.data(), st.sampled_from(COMMANDS))
def test_a_command_on_a_fuzzed_chip_ends_in_time(
    name: str, data: st.DataObject, argv: list[str]
) -> None:
    """What the loader accepts, a command finishes (within the deadline); else one line."""
    with _scratch() as folder:
        (folder / name).write_text(data.draw(_mutated(TEXT[name])))
        status, out, err = _run([*argv, "--chip", str(folder)])
        if status == 2:
            check_refusal(Ran(status, out, err), argv=argv)
        else:
            assert status == 0 and out, (status, err)
