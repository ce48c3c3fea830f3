"""Property-based fuzzing (Hypothesis) of every dump parser, the data files and every command.

Generated and mutated inputs (truncations, bit flips, repeated lines, huge and
non-ASCII numbers, misspelt names, odd paths) must end in one of two ways: a
result, or one line of InputError (exit status 2 from the command line). Never
another exception (that is a traceback), never past the deadline, and never a
file left behind. A dump cut short or hit by one flipped bit must come back as
the whole task or be refused, never as a smaller task.

Examples are derandomized and no example database is kept: every run tries the
same inputs (CI and a laptop alike) and nothing is written into the tree. The
commands run on the analytic engine; `sweep` runs with its engine, spectrum and
plots stubbed, so its argument checks and its file writing are what is tested.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import string
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from datetime import timedelta
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refusal import Ran, check_refusal, refuses

from ane_kdma import chip as chips
from ane_kdma import sweep as sw_mod
from ane_kdma.cli import main
from ane_kdma.errors import InputError
from ane_kdma.llm import models as llm_models
from ane_kdma.regdump import DUMP_DIR, layout, parse_dump, task_from_dump
from ane_kdma.regdump.parsers import _ZIN_LINE

M3 = chips.load()
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(examples: int, **kw: object) -> settings:
    """FUZZ with this many examples (and any other change, such as a longer deadline)."""
    return settings(FUZZ, max_examples=examples, **kw)


PUBLISHED = {
    (d, fmt): (DUMP_DIR / f"m3_n4096_d{d}.{ext}").read_bytes()
    for d in (2044, 2048, 2052)
    for fmt, ext in (("text", "txt"), ("zin", "zin"), ("bin", "bin"))
}
SIZE = {2044: 0xFF800, 2048: 0x100000, 2052: 0x100800}


def _one_line(exc: InputError) -> None:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text, repr(text)


def _load(data: bytes):
    """The parsers and task rules on bytes: a task, or None after a one-line InputError."""
    try:
        return task_from_dump(parse_dump(data, "fuzz", M3))
    except InputError as exc:
        _one_line(exc)
        return None


# --------------------------------------------------------------------------- numbers

HUGE = st.sampled_from([40, 41, 400, 4300, 4301, 6000]).flatmap(  # around every digit limit
    lambda n: st.text(alphabet="0123456789", min_size=n, max_size=n)
)
ASCII_INTS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(0, 2**40).flatmap(lambda v: st.sampled_from([hex(v), oct(v), bin(v), f"{v:_}"])),
    st.integers(1, 1 << 22).map(lambda v: str(v * 64)),
    HUGE,
)
ODD_INTS = st.one_of(
    st.text(
        st.characters(categories=["Nd"], exclude_characters="0123456789"), min_size=1, max_size=6
    ),
    st.text(st.characters(categories=["No"]), min_size=1, max_size=3),  # ², ½
    st.sampled_from(["", " ", "0x", "1e3", "4096.0", "-0", "+64", "0x_40", "nan", "1_", "٢٠٤٨"]),
    st.text(max_size=12),
)
INTS = st.one_of(ASCII_INTS, ODD_INTS)


# --------------------------------------------------------------------------- parsers


@fuzz(150)
@given(
    st.one_of(
        st.binary(max_size=1500),
        st.text(max_size=600).map(str.encode),
        st.text(max_size=300).map(lambda t: t.encode("utf-16")),
        st.text(alphabet=string.printable, max_size=600).map(str.encode),
    )
)
def test_any_bytes_are_a_task_or_one_line(data: bytes) -> None:
    _load(data)


@fuzz(200)
@given(st.sampled_from(["text", "zin", "zin hex"]), st.one_of(HUGE, ASCII_INTS, ODD_INTS))
def test_numbers_in_dumps_are_ascii_and_bounded(form: str, token: str) -> None:
    """Every number a dump holds: read exactly, or refused in one line (never int()'s limit)."""
    if form == "text":
        line, token = f"TD+0x134 0x{token}", f"0x{token}"
    elif form == "zin":
        line = f"aneRegs.Common.Cin.Cin = {token}"
    else:
        line, token = f"aneRegs.Common.Cin.Cin = 0x{token}", f"0x{token}"
    try:
        dump = parse_dump(line.encode("utf-8", "surrogatepass"), "fuzz", M3)
    except InputError as exc:
        _one_line(exc)
        return
    value = dump.get("Common.Cin.Cin")
    want = int(token[2:], 16) if token.startswith("0x") else int(token)
    assert token.isascii() and value == want < 1 << 32


@st.composite
def _cut_or_flip(draw: st.DrawFn) -> tuple[int, bytes]:
    """A published text or Zin dump cut at any byte, or with one bit flipped."""
    d = draw(st.sampled_from([2044, 2048, 2052]))
    raw = PUBLISHED[(d, draw(st.sampled_from(["text", "zin"])))]
    if draw(st.booleans()):
        return d, raw[: draw(st.integers(0, len(raw)))]
    i, bit = draw(st.integers(0, len(raw) - 1)), draw(st.integers(0, 7))
    return d, raw[:i] + bytes([raw[i] ^ (1 << bit)]) + raw[i + 1 :]


@fuzz(250)
@given(_cut_or_flip())
def test_a_cut_or_a_flipped_bit_is_the_whole_task_or_refused(case: tuple[int, bytes]) -> None:
    d, data = case
    task = _load(data)
    if task is not None:
        assert task.enabled_cores == tuple(range(16))
        assert task.bytes_per_core == SIZE[d]


def test_every_bit_flip_of_a_binary_dump_is_the_whole_task_or_refused() -> None:
    raw = PUBLISHED[(2048, "bin")]
    accepted = 0
    for i in range(len(raw)):
        for bit in range(8):
            task = _load(raw[:i] + bytes([raw[i] ^ (1 << bit)]) + raw[i + 1 :])
            if task is not None:
                assert task.enabled_cores == tuple(range(16)) and task.bytes_per_core == 0x100000
                accepted += 1
    assert 0 < accepted < len(raw) * 8  # some flips are harmless (unknown words), many refused


NUMBER_TOKENS = st.one_of(ASCII_INTS, ODD_INTS, st.integers(0, 2**33).map(hex))


@st.composite
def _mangled(draw: st.DrawFn) -> bytes:
    """Published dumps with lines repeated, dropped, swapped, or numbers replaced."""
    fmt = draw(st.sampled_from(["text", "zin"]))
    lines = PUBLISHED[(draw(st.sampled_from([2044, 2048, 2052])), fmt)].decode().splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["repeat", "drop", "swap", "number", "junk"]))
        if op == "repeat":
            lines[i:i] = [lines[i]] * draw(st.integers(1, 3000))
        elif op == "drop":
            del lines[i]
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "number":
            head = lines[i].rsplit(" ", 1)[0] if " " in lines[i] else lines[i]
            lines[i] = f"{head} {draw(NUMBER_TOKENS)}"
        else:
            lines.insert(i, draw(st.text(max_size=80)))
        if not lines:
            break
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return end.join(lines).encode("utf-8", "surrogatepass")


@fuzz(150)
@given(_mangled())
def test_mangled_dumps_are_a_task_or_one_line(data: bytes) -> None:
    task = _load(data)
    if task is not None:
        assert task.bytes_per_core % 64 == 0 and 1 <= len(task.cores) <= 16
        assert all(c.size == task.bytes_per_core for c in task.cores)


KNOWN = sorted(layout.by_zin(M3.td, M3.cores))


@st.composite
def _one_edit(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(KNOWN))
    i = draw(st.integers(0, len(name)))
    ch = draw(st.sampled_from(string.ascii_letters + string.digits + "._[]"))
    op = draw(st.sampled_from(["insert", "delete", "change", "swap"]))
    if op == "insert":
        return name, name[:i] + ch + name[i:]
    i = min(i, len(name) - 2)
    if op == "delete":
        return name, name[:i] + name[i + 1 :]
    if op == "change":
        return name, name[:i] + ch + name[i + 1 :]
    return name, name[:i] + name[i + 1] + name[i] + name[i + 2 :]


@fuzz(400)
@given(_one_edit())
def test_one_slip_in_a_known_zin_name_is_caught(case: tuple[str, str]) -> None:
    """A misspelt field must not become an unknown extra (it would silently drop a core)."""
    name, edited = case
    known = edited in layout.by_zin(M3.td, M3.cores)
    unreadable = not _ZIN_LINE.fullmatch(f"{edited} = 1")
    assert known or unreadable or layout.near_miss(edited, M3) is not None, (name, edited)


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


@contextmanager
def _scratch() -> Iterator[Path]:
    """A fresh folder per example (Hypothesis reuses function-scoped fixtures)."""
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


PROFILE_TEXT = (M3.path / chips.PROFILE_FILE).read_text()
CHIP_TEXT = (M3.path / chips.CHIP_FILE).read_text()


@fuzz(100)
@given(st.data())
def test_profiles_are_checked_as_a_schema(data: st.DataObject) -> None:
    with _scratch() as tmp:
        path = tmp / "p.json"
        path.write_text(data.draw(_mutated_json(PROFILE_TEXT)))
        try:
            chip = chips.load(None, path)
        except InputError as exc:
            _one_line(exc)
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
    with _scratch() as tmp:
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
                    _one_line(exc)
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
    with _scratch() as tmp:
        folder = tmp / "chip"
        shutil.copytree(M3.path, folder)
        text = (M3.path / name).read_text()
        (folder / name).write_text(data.draw(_mutated_json(text)))
        try:
            chip = chips.load(folder)
            meas = chip.measured
        except InputError as exc:
            _one_line(exc)
            return
        assert 1 <= chip.cores <= 16 and math.isfinite(chip.ceiling_gbps)
        for figure in (meas.facts.notch, meas.facts.shoulder):
            assert figure is None or math.isfinite(figure.gbps.value)


# --------------------------------------------------------------------------- the commands


def _run(argv: list[str]) -> tuple[int, str, str]:
    """main() in process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def _check(argv: list[str], status: int, out: str, err: str) -> None:
    """The CLI contract: a result on stdout, or one line on stderr and status 2."""
    if status == 2:
        check_refusal(Ran(status, out, err), argv=argv)
        return
    assert status == 0, (argv, status, err)
    assert out, argv
    if "--json" in argv:
        json.loads(out)  # exactly one document
    assert all(ln.startswith("ane-kdma: warning: ") for ln in err.splitlines()), (argv, err)


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


FLAGS = st.lists(st.sampled_from(["--json", "--chip", "--profile"]), max_size=2, unique=True)
NAMES = st.one_of(st.sampled_from(["m3", "", "m9", "/", "/dev/null", "-"]), st.text(max_size=12))


def _common(flags: list[str], name: str) -> list[str]:
    out = []
    for f in flags:
        out += [f] if f == "--json" else [f, name]
    return out


@fuzz(40)
@given(
    INTS,
    st.one_of(st.none(), INTS),
    st.sampled_from(["signed", "fixed", "buggy", "bogus"]),
    FLAGS,
    NAMES,
)
def test_predict_arguments(
    size: str, split: str | None, variant: str, flags: list[str], name: str
) -> None:
    argv = ["predict", f"--bytes-per-core={size}", "--variant", variant, "--engine", "analytic"]
    argv += [f"--split={split}"] if split is not None else []
    argv += _common(flags, name)
    _check(argv, *_run(argv))


@fuzz(30)
@given(INTS, INTS, FLAGS, NAMES)
def test_erratum_arguments(laps: str, cores: str, flags: list[str], name: str) -> None:
    argv = ["erratum", f"--laps={laps}", f"--cores={cores}", "--engine", "analytic"]
    argv += _common(flags, name)
    _check(argv, *_run(argv))


OUT_NAMES = st.one_of(
    st.sampled_from(["td.txt", "a b", "new\nline", "caf\u00e9", "-", ".", "x" * 255, "x" * 300]),
    st.text(alphabet=st.characters(exclude_characters="/\x00"), min_size=1, max_size=20),
)


@fuzz(40)
@given(
    INTS,
    INTS,
    st.sampled_from(["text", "zin", "bin", "hex"]),
    st.one_of(st.none(), OUT_NAMES),
    st.booleans(),
)
def test_dump_arguments(d: str, n: str, fmt: str, out: str | None, as_json: bool) -> None:
    with _scratch() as tmp:
        argv = ["dump", f"--d={d}", f"--n={n}", "--format", fmt]
        argv += ["--out", str(tmp / out)] if out is not None else []
        argv += ["--json"] if as_json else []
        status, stdout, err = _run(argv)
        _check(argv, status, stdout, err)
        written = [out] if status == 0 and out is not None else []
        assert _listing(tmp) == sorted(written), argv  # the file, whole, or nothing at all


@fuzz(40)
@given(
    st.lists(st.one_of(_mangled(), _cut_or_flip().map(lambda c: c[1])), min_size=1, max_size=3),
    FLAGS,
    NAMES,
)
def test_replay_arguments(dumps: list[bytes], flags: list[str], name: str) -> None:
    with _scratch() as tmp:
        paths = []
        for i, data in enumerate(dumps):
            (tmp / f"d{i}").write_bytes(data)
            paths.append(str(tmp / f"d{i}"))
        argv = ["replay", *paths, "--engine", "analytic", *_common(flags, name)]
        _check(argv, *_run(argv))
        assert _listing(tmp) == [f"d{i}" for i in range(len(dumps))]


def _fake_run(engine: str, h: object, chip: object, lines: np.ndarray):
    return np.ones(len(lines)), np.ones(len(lines))


def _fake_spectrum(sw: sw_mod.Sweep, chip: object) -> sw_mod.Spectrum:
    return sw_mod.Spectrum(np.ones(2), {k: np.ones(2) for k in sw.gbps}, dict.fromkeys(sw.gbps))


def _fake_overlay(chip: object, engine: str = "analytic") -> sw_mod.Overlay:
    zero = np.zeros((1, 1))
    return sw_mod.Overlay(np.zeros(1), (1,), {"signed": zero}, {"signed": zero}, 256)


@fuzz(30)
@given(INTS, INTS, INTS, INTS, st.sampled_from(["new", "existing", "file"]))
def test_sweep_arguments(d_min: str, d_max: str, d_step: str, n: str, out: str) -> None:
    with (
        _scratch() as tmp,
        mock.patch.multiple(
            sw_mod,
            _run=_fake_run,
            spectrum=_fake_spectrum,
            overlay=_fake_overlay,
            plot_sweep=lambda *a: b"png",
            plot_spectrum=lambda *a: b"png",
            plot_overlay=lambda *a: b"png",
        ),
    ):
        target = tmp / "out"
        if out == "existing":
            target.mkdir()
            (target / "keep.md").write_text("mine")
        elif out == "file":
            target.write_text("mine")
        before = _listing(tmp)
        argv = ["sweep", f"--d-min={d_min}", f"--d-max={d_max}", f"--d-step={d_step}", f"--n={n}"]
        argv += ["--out", str(target), "--json"]
        status, stdout, err = _run(argv)
        _check(argv, status, stdout, err)
        if status == 2:
            assert _listing(tmp) == before
        else:
            files = {str(Path(f).relative_to(tmp)) for f in json.loads(stdout)["files"]}
            assert len(files) == 6  # the whole set, and nothing else beside what was there
            assert _listing(tmp) == sorted({*before, "out", *files})


@fuzz(8, deadline=timedelta(seconds=60))  # a valid call runs every row (~2 s)
@given(FLAGS, NAMES)
def test_validate_arguments(flags: list[str], name: str) -> None:
    argv = ["validate", "--engine", "analytic", "--no-ranking", *_common(flags, name)]
    status, out, err = _run(argv)
    _check(argv, 0 if status == 1 else status, out, err)  # 1: a row outside tolerance


@fuzz(12)
@given(st.sampled_from(["dir", "missing", "line\nbreak/x.json"]), FLAGS, NAMES)
def test_calibrate_arguments(out: str, flags: list[str], name: str) -> None:
    """Only outputs that fail before the fit (a real fit takes half a minute)."""
    with _scratch() as tmp:
        target = {"dir": tmp, "missing": tmp / "no" / "p.json"}.get(out, tmp / out)
        argv = ["calibrate", "--out", str(target), *_common(flags, name)]
        refuses(argv, watch=[tmp])
        assert _listing(tmp) == []


SHAPES = st.one_of(
    st.tuples(INTS, INTS).map(lambda t: f"{t[0]}x{t[1]}"),
    st.sampled_from(["2048x4096", "4096x2048", "2048x4096x1x1", "x", ""]),
    st.text(max_size=20),
)


@fuzz(25)
@given(st.lists(SHAPES, min_size=1, max_size=3), FLAGS, NAMES)
def test_plan_arguments(shapes: list[str], flags: list[str], name: str) -> None:
    argv = [
        "plan",
        *[f"--shape={s}" for s in shapes],
        "--engine",
        "analytic",
        *_common(flags, name),
    ]
    _check(argv, *_run(argv))


@fuzz(20)
@given(
    st.one_of(st.none(), st.sampled_from(["llama-3.2-1b", "bogus"]), st.text(max_size=12)),
    st.booleans(),
    FLAGS,
)
def test_llm_arguments(model: str | None, listing: bool, flags: list[str]) -> None:
    argv = ["llm", "--engine", "analytic", *(["--list"] if listing else [])]
    argv += [f"--model={model}"] if model is not None else []
    argv += ["--json"] if "--json" in flags else []
    _check(argv, *_run(argv))


WORDS = st.sampled_from(
    ["predict", "replay", "erratum", "plan", "llm", "validate", "sweep", "calibrate", "dump",
     "--json", "--chip", "--profile", "--engine", "--variant", "--split", "--laps", "--cores",
     "--d", "--n", "--format", "--out", "--shape", "--model", "--list", "--bytes-per-core",
     "-", "--", "-x", "--bogus", "analytic", "64", "0x40", "text", "m3", "/dev/null"]
)  # fmt: skip


@fuzz(60)
@given(st.lists(st.one_of(WORDS, INTS, st.text(max_size=8)), max_size=6))
def test_any_command_line(words: list[str]) -> None:
    """Any words at all: parsed, or one line. Slow commands are kept off by their options."""
    argv = [*words, "--engine", "analytic"]
    if any(w in ("calibrate", "sweep", "replay", "dump") for w in words):
        argv += ["--bogus-stop"]  # these write or read files: argument errors only here
    try:
        status, out, err = _run(argv)
    except SystemExit as exc:  # --help and friends print and exit 0, as argparse does
        assert exc.code == 0, argv
        return
    if status == 1 and argv[0] == "validate":
        status = 0
    _check(argv, status, out, err)


@fuzz(6, deadline=timedelta(seconds=60))
@given(st.sampled_from(["predict", "replay"]), INTS)
def test_the_console_script_never_shows_a_traceback(command: str, value: str) -> None:
    """The real entry point, in a subprocess with a timeout: no traceback, one line or a result."""
    with _scratch() as tmp:
        if command == "predict":
            argv = ["predict", f"--bytes-per-core={value}", "--engine", "analytic"]
        else:
            (tmp / "d.zin").write_text(
                f"aneRegs.KernelDMASrc.CoeffBfrSize[0].MemBfrSize = {value}\n"
            )
            argv = ["replay", str(tmp / "d.zin"), "--engine", "analytic"]
        proc = subprocess.run(
            [sys.executable, "-m", "ane_kdma.cli", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        assert "Traceback" not in proc.stderr
        _check(argv, proc.returncode, proc.stdout, proc.stderr)


# --------------------------------------------------------------------------- Hugging Face configs

HF_DIR = chips.data_dir() / "models" / "hf"
HF_BASE = json.loads((HF_DIR / "llama-3.2-1b" / "config.json").read_text())
HF_FAMILIES = sorted(json.loads(llm_models.families_file().read_text())["families"])
SIZE_KEYS = sorted(llm_models.LIMITS)
SIZES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from(
        [0, 1, -1, 10**30, 2**31, 2**32, 2**63, 2**64, *llm_models.LIMITS.values()]
    ).flatmap(lambda v: st.sampled_from([v - 1, v, v + 1])),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=6),
    st.lists(st.integers(0, 9), max_size=2),
)
HF_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(st.sampled_from([*SIZE_KEYS, "model_type", "text_config", "x"]), kids)
    ),
    max_leaves=16,
)


def _hf_model(doc: object) -> llm_models.ModelConfig | None:
    """from_hf_dict: a model whose every size is within LIMITS, or one line of InputError."""
    try:
        m = llm_models.from_hf_dict(doc, "fuzz")
    except InputError as exc:
        _one_line(exc)
        return None
    sizes = {
        "hidden_size": m.hidden,
        "intermediate_size": m.intermediate,
        "num_hidden_layers": m.layers,
        "num_attention_heads": m.heads,
        "num_key_value_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "vocab_size": m.vocab,
    }
    for key, value in sizes.items():
        assert type(value) is int and 1 <= value <= llm_models.LIMITS[key], (key, value)
    assert m.heads % m.kv_heads == 0
    return m


@fuzz(300)
@given(
    st.dictionaries(st.sampled_from(SIZE_KEYS), SIZES, max_size=len(SIZE_KEYS)),
    st.sampled_from([*HF_FAMILIES, "gemma3", "gpt2", "mixtral", "", "LLAMA"]),
)
def test_every_size_in_a_config_is_bounded_or_refused(over: dict, model_type: str) -> None:
    """A 10^30-wide layer, a float, a bool or a string where a size goes: refused in one line."""
    doc = {**HF_BASE, "model_type": model_type, **over}
    m = _hf_model(doc)
    if m is not None:
        try:
            weights = [p.weight for p in m.projections()]
        except InputError as exc:  # more LM-head shards than tokens
            _one_line(exc)
            return
        # the largest weight the limits allow: hidden x (heads x head_dim) = 2^18 x 2^24
        assert all(0 < w.cin * w.cout <= 2**42 for w in weights)


@fuzz(200)
@given(HF_DOCUMENTS)
def test_any_json_document_is_a_config_or_one_line(doc: object) -> None:
    _hf_model(doc)
    if isinstance(doc, dict):
        _hf_model({**HF_BASE, **doc})


@fuzz(30)
@given(st.integers(0, 12), st.sampled_from(["gemma3", "llama", None]))
def test_text_config_is_read_a_few_levels_deep_and_no_deeper(depth: int, outer: str | None) -> None:
    doc: dict = dict(HF_BASE)
    for _ in range(depth):
        doc = {"model_type": outer, "text_config": doc} if outer else {"text_config": doc}
    m = _hf_model(doc)
    if outer is None and depth:
        assert m is None  # a wrapper must say what it is
    else:
        assert (m is not None) == (depth <= llm_models.MAX_NESTING), depth
        assert m is None or m.hidden == HF_BASE["hidden_size"]


@fuzz(8, deadline=timedelta(seconds=60))
@given(st.fixed_dictionaries({k: st.integers(1, v) for k, v in llm_models.LIMITS.items()}))
def test_llm_on_a_config_at_the_limits_ends_in_bounded_time(sizes: dict) -> None:
    """Through the command line, on the analytic engine: a result or one line, in the deadline."""
    with _scratch() as tmp:
        path = tmp / "config.json"
        path.write_text(json.dumps({**HF_BASE, "model_type": "llama", **sizes}))
        argv = ["llm", "--config", str(path), "--engine", "analytic", "--json"]
        _check(argv, *_run(argv))


def test_hypothesis_writes_nothing_into_the_tree() -> None:
    assert FUZZ.database is None and FUZZ.derandomize
    repo = Path(__file__).resolve().parents[1]
    assert not (repo / ".hypothesis").exists() and not (repo / "tests" / ".hypothesis").exists()


def test_struct_of_a_binary_dump_is_what_the_flips_assume() -> None:
    raw = PUBLISHED[(2048, "bin")]
    assert struct.unpack_from("<I", raw, 0xB4)[0] == 0x100000 and len(raw) == M3.td.bytes


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
