"""Property-based fuzzing (Hypothesis) of every dump parser (`regdump/`).

Generated and mutated dumps (truncations, bit flips, repeated lines, huge and
non-ASCII numbers, misspelt names) must be a task or one line of InputError,
never another exception or past the deadline. A dump cut short or hit by one
flipped bit must come back as the whole task or be refused, never as a smaller task.
"""

from __future__ import annotations

import string
import struct

import pytest
from fuzzing import (
    ASCII_INTS,
    HUGE,
    M3,
    ODD_INTS,
    fuzz,
    one_line,
)
from hypothesis import given
from hypothesis import strategies as st

from ane_kdma.errors import InputError
from ane_kdma.regdump import DUMP_DIR, layout, parse_dump, task_from_dump
from ane_kdma.regdump.parsers import _ZIN_LINE

PUBLISHED = {
    (d, fmt): (DUMP_DIR / f"m3_n4096_d{d}.{ext}").read_bytes()
    for d in (2044, 2048, 2052)
    for fmt, ext in (("text", "txt"), ("zin", "zin"), ("bin", "bin"))
}
SIZE = {2044: 0xFF800, 2048: 0x100000, 2052: 0x100800}


def _load(data: bytes):
    """The parsers and task rules on bytes: a task, or None after a one-line InputError."""
    try:
        return task_from_dump(parse_dump(data, "fuzz", M3))
    except InputError as exc:
        one_line(exc)
        return None


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
        one_line(exc)
        return
    value = dump.get("Common.Cin.Cin")
    # leading zeros are not part of the value (and int() refuses more than 4300 digits)
    hexa = token.startswith("0x")
    digits = (token[2:] if hexa else token).lstrip("0") or "0"
    want = int(digits, 16 if hexa else 10)
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


def test_struct_of_a_binary_dump_is_what_the_flips_assume() -> None:
    raw = PUBLISHED[(2048, "bin")]
    assert struct.unpack_from("<I", raw, 0xB4)[0] == 0x100000 and len(raw) == M3.td.bytes


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
