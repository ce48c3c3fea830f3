"""Register dumps: the published M3 TDs, the three formats, self-checks, writing, bad input."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import re
import shutil
import struct
import sys
from pathlib import Path

import pytest

from ane_kdma import chip as chips
from ane_kdma import regdump
from ane_kdma.chip import Chip, TdLayout
from ane_kdma.cli import common
from ane_kdma.cli import dump as dump_cli
from ane_kdma.contract import Task, Workload
from ane_kdma.errors import InputError
from ane_kdma.regdump import (
    DUMP_DIR,
    TD_BYTES,
    CoreTransfer,
    DumpTask,
    describe,
    detect_format,
    dump_words,
    load_task,
    parse_dump,
    read_dump,
    render,
    task_from_dump,
    write_dump,
)
from ane_kdma.regdump.parsers import MAX_DUMP_BYTES

BAD_DIR = Path(__file__).parent / "bad_dumps"
PUBLISHED = (2044, 2048, 2052)
SUFFIX = {"text": "txt", "zin": "zin", "bin": "bin"}

# erratum.md section 5 (Eileen Yoon, https://eiln.github.io/posts/ane-dma.html):
# D -> (0x004, core size, core 1 base, core 2 base, core 15 base, Cin, stride, 0x214)
TABLE = {
    2044: (0x1EA, 0x000FF800, 0x000FF800, 0x001FF000, 0x00EF8800, 0x7FC, 0x7FC0, 0x8FC0),
    2048: (0x1EB, 0x00100000, 0x00100000, 0x00200000, 0x00F00000, 0x800, 0x8000, 0x9000),
    2052: (0x1EC, 0x00100800, 0x00100800, 0x00201000, 0x00F07800, 0x804, 0x8040, 0x9050),
}


def published(d: int, fmt: str) -> Path:
    return DUMP_DIR / f"m3_n4096_d{d}.{SUFFIX[fmt]}"


def parse_text(text: str, source: str = "t") -> regdump.Dump:
    return parse_dump(text.encode(), source)


def sizes_text(size: int, cores: range = range(16)) -> str:
    return "".join(f"TD+0x{0xB4 + 4 * i:03x} 0x{size:08x}\n" for i in cores)


def bases_text(size: int, cores: range = range(16)) -> str:
    return "".join(f"TD+0x{0x74 + 4 * i:03x} 0x{i * size:08x}\n" for i in cores)


def no_bases(cores: str = "cores 0-15") -> str:
    """The warning a task carries when the dump leaves enabled cores' bases out."""
    return (
        f"no base in the dump for {cores}: a replay uses the TD convention core i base = i x size"
    )


# --------------------------------------------------------------------------- published dumps


@pytest.mark.parametrize("d", PUBLISHED)
def test_published_text_holds_exactly_the_published_words(d: int) -> None:
    exe, size, core1, core2, core15, cin, stride, result = TABLE[d]
    dump = read_dump(published(d, "text"))
    assert dump.fmt == "text"
    assert len(dump.words) == 37
    assert dump.words[0x004] == exe
    assert dump.words[0x074] == 0
    assert dump.words[0x078] == core1
    assert dump.words[0x07C] == core2
    assert dump.words[0x0B0] == core15
    assert [dump.words[0x0B4 + 4 * i] for i in range(16)] == [size] * 16
    assert dump.words[0x134] == cin
    assert dump.words[0x1F0] == stride
    assert dump.words[0x1F4] == stride
    assert dump.words[0x214] == result
    # Unpublished fields stay unknown, never invented.
    assert dump.get("KernelDMASrc.CoeffDMAConfig[0].En") is None
    assert dump.get("KernelDMASrc.StreamWord") is None
    assert dump.unknown_fields() == {}


@pytest.mark.parametrize("d", PUBLISHED)
def test_published_binary_is_the_text_with_unknown_words_zero(d: int) -> None:
    raw = published(d, "bin").read_bytes()
    assert len(raw) == TD_BYTES == 0x274
    text = read_dump(published(d, "text"))
    words = struct.unpack("<157I", raw)
    for i, word in enumerate(words):
        assert word == text.words.get(4 * i, 0)


@pytest.mark.parametrize("d", PUBLISHED)
@pytest.mark.parametrize("fmt", ["text", "zin", "bin"])
def test_published_task(d: int, fmt: str) -> None:
    size = TABLE[d][1]
    task = load_task(published(d, fmt), cout=4096)
    assert task.enabled_cores == tuple(range(16))
    assert task.cores == tuple(CoreTransfer(i, i * size, size, "size") for i in range(16))
    assert task.bytes_per_core == size
    assert task.lines_per_core == 8 * d
    assert task.k == 1
    assert task.x == {2044: -32, 2048: 0, 2052: 32}[d]
    assert task.cin == d
    assert task.cout == 4096
    assert task.warnings == ()


@pytest.mark.parametrize("d", PUBLISHED)
def test_formats_give_identical_tasks(d: int) -> None:
    tasks = [load_task(published(d, fmt)) for fmt in ("text", "zin", "bin")]
    assert tasks[0] == tasks[1] == tasks[2]
    assert tasks[0].source != tasks[2].source  # where it came from is not part of the task


@pytest.mark.parametrize("d", PUBLISHED)
def test_published_fields_agree_across_formats(d: int) -> None:
    text, zin, binary = (read_dump(published(d, f)) for f in ("text", "zin", "bin"))
    named_text = text.fields()
    # The mirror word has no Apple name, so the Zin form cannot carry it.
    mirror = "L2.SourceRowStride.Stride (mirror, unnamed)"
    assert zin.fields() == {k: v for k, v in named_text.items() if k != mirror}
    for name, value in named_text.items():
        assert binary.get(name) == value


def test_format_is_told_by_content_not_extension(tmp_path: Path) -> None:
    for fmt in ("text", "zin", "bin"):
        target = tmp_path / f"renamed_{fmt}.dat"
        shutil.copy(published(2048, fmt), target)
        assert detect_format(target.read_bytes()) == fmt
        assert read_dump(target).fmt == fmt
        assert load_task(target) == load_task(published(2048, "text"))


# --------------------------------------------------------------------------- regenerating


@pytest.mark.parametrize("d", PUBLISHED)
def test_write_dump_regenerates_the_published_words(d: int) -> None:
    made = dump_words(d, 4096)
    pub = read_dump(published(d, "text")).words
    assert {off: pub[off] for off in made} == made
    assert set(pub) - set(made) == {0x004, 0x214}  # ExeCycles, ResultBase: not from D, N
    assert parse_dump(write_dump(d, 4096, "text")).words == made


@pytest.mark.parametrize("d", PUBLISHED)
def test_write_dump_binary_matches_published_binary_but_two_words(d: int) -> None:
    made = struct.unpack("<157I", write_dump(d, 4096, "bin"))
    pub = struct.unpack("<157I", published(d, "bin").read_bytes())
    differ = {4 * i for i in range(157) if made[i] != pub[i]}
    assert differ == {0x004, 0x214}
    assert made[0x004 // 4] == 0 and made[0x214 // 4] == 0


@pytest.mark.parametrize(("d", "n"), [(2048, 4096), (576, 4096), (4096, 14336), (2, 512)])
def test_write_dump_every_format_round_trips(d: int, n: int) -> None:
    size = n // 16 * d * 2
    tasks = [task_from_dump(parse_dump(write_dump(d, n, fmt)), cout=n) for fmt in regdump.FORMATS]
    assert tasks[0] == tasks[1] == tasks[2]
    task = tasks[0]
    assert task.bytes_per_core == size
    assert task.cores[15] == CoreTransfer(15, 15 * size, size, "size")
    assert task.cin == d
    assert task.warnings == ()


def test_write_dump_text_forms_leave_unfollowed_fields_out() -> None:
    text = write_dump(2048, 4096, "text").decode()
    zin = write_dump(2048, 4096, "zin").decode()
    assert "TD+0x004" not in text and "TD+0x214" not in text
    assert "ExeCycles" not in zin and "ResultBase" not in zin
    assert zin.startswith("// ZinIrRegBitPrintOutDebug_7u_\n")
    assert "aneRegs.KernelDMASrc.CoeffBfrSize[15].MemBfrSize = 1048576\n" in zin
    assert "TD+0x1f4 0x00008000" in text


@pytest.mark.parametrize(
    ("d", "n", "fmt", "message"),
    [
        (0, 4096, "text", "D must be a positive integer, got 0"),
        (2048, -16, "text", "N must be a positive integer, got -16"),
        (2048, 4100, "text", "N must be a multiple of 16 (one share per core), got 4100"),
        (3, 16, "bin", "D=3, N=16 gives 6 bytes per core, not a whole number of 64-byte lines"),
        (1 << 20, 4096, "bin", "is too large"),
        (2048, 4096, "hex", "unknown dump format 'hex' (one of: bin, text, zin)"),
    ],
)
def test_write_dump_rejects_bad_arguments(d: int, n: int, fmt: str, message: str) -> None:
    with pytest.raises(InputError) as exc:
        write_dump(d, n, fmt)
    assert message in str(exc.value)


# --------------------------------------------------------------------------- text forms


@pytest.mark.parametrize(
    "line",
    [
        "TD+0x0b4 0x00100000",
        "td + 0x0B4 0x00100000",
        "0x0b4 = 0x00100000",
        "0x0b4=0x00100000",
        "0x0b4: 0x00100000",
        "0x0B4\t0X00100000   # trailing comment",
        "0xb4 0x100000 // another comment",
    ],
)
def test_offset_value_spellings(line: str) -> None:
    dump = parse_text(f"# header\n\n{line}\n")
    assert dump.words == {0x0B4: 0x00100000}
    assert dump.get("KernelDMASrc.CoeffBfrSize[0].MemBfrSize") == 0x00100000


def test_crlf_and_bom_are_accepted() -> None:
    data = "\ufeffTD+0x0b4 0x00100000\r\nTD+0x134 0x00000800\r\n".encode()
    dump = parse_dump(data)
    assert dump.words == {0x0B4: 0x00100000, 0x134: 0x800}


def test_same_value_twice_is_fine() -> None:
    dump = parse_text("0x0b4 0x00100000\nTD+0x0b4 0x00100000\n")
    assert dump.words == {0x0B4: 0x00100000}
    zin = parse_text(
        "// ZinIrRegBitPrintOutDebug_7u_\naneRegs.Common.Cin.Cin = 7\naneRegs.Common.Cin.Cin = 7\n"
    )
    assert zin.get("Common.Cin.Cin") == 7


def test_partial_dump_invents_nothing() -> None:
    dump = parse_text(sizes_text(0x100000))
    task = task_from_dump(dump)
    assert task.cin is None
    assert [c.base for c in task.cores] == [None] * 16
    assert dump.get("Common.Cin.Cin") is None
    assert dump.get("L2.SourceRowStride.Stride") is None
    assert dump.get("Header[1].ExeCycles") is None


def test_unknown_offsets_are_kept_and_shown() -> None:
    dump = parse_text(sizes_text(0x100000) + "TD+0x1a0 0x12345678\nTD+0x034 0x10000003\n")
    assert dump.unknown_fields() == {
        "unknown@0x034 (other bits)": 0x2,
        "unknown@0x1a0": 0x12345678,
    }
    assert dump.get("KernelDMASrc.CoeffDMAConfig[0].En") == 1
    assert dump.get("KernelDMASrc.CoeffDMAConfig[0].PrefetchParticipateEn") == 1
    text = describe(dump)
    assert "unknown@0x1a0" in text and "0x12345678" in text


def test_zin_named_field_sets_only_its_bits() -> None:
    dump = parse_text(
        "// ZinIrRegBitPrintOutDebug_7u_\n"
        "aneRegs.KernelDMASrc.CoeffDMAConfig[2].En = 1\n"
        "aneRegs.KernelDMASrc.CoeffDMAConfig[2].PrefetchParticipateEn = 1\n"
        "aneRegs.KernelDMASrc.CoeffDMAConfig[2].CacheHint = 2\n"
        "aneTD.Header[1].ExeCycles = 491\n"
    )
    assert dump.fmt == "zin"
    assert dump.words[0x03C] == 0x10000001
    assert dump.known[0x03C] == 0x10000001
    assert dump.known[0x004] == 0xFFFF
    assert dump.get("Header[1].ExeCycles") == 491
    assert dump.unknown_fields() == {"aneRegs.KernelDMASrc.CoeffDMAConfig[2].CacheHint": 2}
    raw = render(dump, "bin")
    assert struct.unpack_from("<I", raw, 0x03C)[0] == 0x10000001
    # The text form writes whole words only; a word with unknown bits stays a comment.
    text = render(dump, "text").decode()
    assert "# 0x03c: only bits 0x10000001 known (0x10000001); not a whole word" in text
    assert "TD+" not in text


def test_spec_example_zin_parses_but_its_two_byte_size_is_not_a_task() -> None:
    example = (
        "// ZinIrRegBitPrintOutDebug_7u_\n"
        "aneTD.Header[1].ExeCycles = 0\n"
        "aneRegs.KernelDMASrc.CoeffBaseAddr[0].Addr = 0\n"
        "aneRegs.KernelDMASrc.CoeffBfrSize[0].MemBfrSize = 2\n"
        "aneRegs.KernelDMASrc.CoeffDMAConfig[0].En = 1\n"
        "aneRegs.Common.Cin.Cin = 1\n"
    )
    dump = parse_text(example, "example")
    assert dump.fields() == {
        "Header[1].ExeCycles": 0,
        "KernelDMASrc.CoeffDMAConfig[0].En": 1,
        "KernelDMASrc.CoeffBaseAddr[0].Addr": 0,
        "KernelDMASrc.CoeffBfrSize[0].MemBfrSize": 2,
        "Common.Cin.Cin": 1,
    }
    with pytest.raises(
        InputError, match="core 0 size 0x00000002 .2 bytes. is not a multiple of 64"
    ):
        task_from_dump(dump)
    assert "task: none (example: core 0 size 0x00000002" in describe(dump)


def test_zin_without_header_is_still_zin() -> None:
    dump = parse_text("aneRegs.Common.Cin.Cin = 2048\n")
    assert dump.fmt == "zin"
    assert dump.get("Common.Cin.Cin") == 2048


# --------------------------------------------------------------------------- enable rule


def _zin_cores(en: dict[int, int], size: int, bases: bool = False) -> str:
    """A Zin dump giving every core's En bit, with `size` on enabled cores and 0 on the others."""
    zin = "// ZinIrRegBitPrintOutDebug_7u_\n"
    for i in range(16):
        on = en.get(i, 0)
        zin += f"aneRegs.KernelDMASrc.CoeffDMAConfig[{i}].En = {on}\n"
        zin += f"aneRegs.KernelDMASrc.CoeffBfrSize[{i}].MemBfrSize = {size if on else 0}\n"
        if bases:
            zin += f"aneRegs.KernelDMASrc.CoeffBaseAddr[{i}].Addr = {i * size}\n"
    return zin


def test_en_bit_decides_when_config_is_known() -> None:
    task = task_from_dump(parse_text(_zin_cores({0: 1, 1: 1}, 0x100000)))
    assert task.cores == (
        CoreTransfer(0, None, 0x100000, "En"),
        CoreTransfer(1, None, 0x100000, "En"),
    )
    assert task.warnings == (no_bases("cores 0-1"),)  # cores 2-15 plainly off: no warning


def test_a_size_without_its_enable_is_refused() -> None:
    """A flipped En bit must not turn a 16-core task into a smaller one."""
    zin = _zin_cores(dict.fromkeys(range(16), 1), 0x100000).replace(
        "CoeffDMAConfig[7].En = 1", "CoeffDMAConfig[7].En = 0"
    )
    with pytest.raises(InputError, match=r"core 7 has a size .* but is not enabled \(Coeff"):
        task_from_dump(parse_text(zin))
    partial = "TD+0x034 0x00000001\n" + sizes_text(0x100000, range(3))
    with pytest.raises(
        InputError,
        match=r"core 1 has a size .* its enable bit \(CoeffDMAConfig\[1\]\.En\) is not in the "
        r"dump, while core 0's is",
    ):
        task_from_dump(parse_text(partial))


def test_without_enable_bits_the_size_decides() -> None:
    text = sizes_text(0x100000, range(3)) + "TD+0x0c0 0x00000000\n"
    task = task_from_dump(parse_text(text))
    assert [(c.core, c.enabled_by) for c in task.cores] == [(0, "size"), (1, "size"), (2, "size")]
    assert task.warnings == (
        "core 3: size 0 and no enable bit in the dump: replayed as off (3 of 16 cores stream)",
        "cores 4-15: no size, base or enable bit in the dump: replayed as off "
        "(3 of 16 cores stream)",
        no_bases("cores 0-2"),
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # a core missing from the middle: its size line gone, or 0 (one flipped bit of 0x100000)
        (("TD+0x0d0 0x00100000", ""), "core 7 is missing from the middle of the task: its size "),
        (("TD+0x0d0 0x00100000", "TD+0x0d0 0x00000000"), "core 7 is missing from the middle"),
        # the last core's size 0 while its base says it streams
        (("TD+0x0f0 0x00100000", "TD+0x0f0 0x00000000"), "core 15 has a base (CoeffBaseAddr[15]"),
    ],
)
def test_a_core_missing_from_the_task_is_refused(edit: tuple[str, str], message: str) -> None:
    text = published(2048, "text").read_text().replace(*edit)
    with pytest.raises(InputError) as exc:
        task_from_dump(parse_text(text))
    assert message in str(exc.value)


@pytest.mark.parametrize("fmt", ["text", "zin"])
def test_a_dump_cut_after_its_first_size_is_refused(fmt: str) -> None:
    """The reproducer: a cut dump once replayed silently as 1 core (1.06 GB/s)."""
    lines = published(2048, fmt).read_text().splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if "CoeffBfrSize[0]" in ln)
    with pytest.raises(InputError, match="core 1 has a base .* a base without its size"):
        task_from_dump(parse_text("".join(lines[: first + 1])))


@pytest.mark.parametrize("fmt", ["text", "zin"])
def test_every_line_prefix_is_the_whole_task_or_refused(fmt: str) -> None:
    lines = published(2048, fmt).read_text().splitlines(keepends=True)
    last_size = max(i for i, ln in enumerate(lines) if "CoeffBfrSize[15]" in ln)
    whole = []
    for n in range(1, len(lines) + 1):
        try:
            task = task_from_dump(parse_text("".join(lines[:n])))
        except InputError:
            continue
        assert task.enabled_cores == tuple(range(16)), n
        assert task.bytes_per_core == 0x100000
        whole.append(n)
    assert whole == list(range(last_size + 1, len(lines) + 1))


def test_binary_with_config_words_is_authoritative() -> None:
    raw = bytearray(write_dump(2048, 4096, "bin"))
    struct.pack_into("<I", raw, 0x034, 1)
    struct.pack_into("<I", raw, 0x038, 0x10000001)
    with pytest.raises(InputError, match="core 2 has a size .* a size without its enable"):
        task_from_dump(parse_dump(bytes(raw)))  # a flipped En bit: not a 2-core task
    for i in range(2, 16):
        struct.pack_into("<I", raw, 0x0B4 + 4 * i, 0)
    task = task_from_dump(parse_dump(bytes(raw)))
    assert task.enabled_cores == (0, 1)
    assert task.cores[1] == CoreTransfer(1, 0x100000, 0x100000, "En")


# --------------------------------------------------------------------------- self-checks


def test_bases_that_do_not_step_are_a_warning() -> None:
    text = sizes_text(0x100000) + bases_text(0x100000) + "TD+0x080 0x00300040\n"
    text = text.replace("TD+0x080 0x00300000\n", "")
    task = task_from_dump(parse_text(text))
    assert task.warnings == ("core 3 base 0x00300040 is not core 0 base + 3 x size (0x00300000)",)
    assert task.cores[3].base == 0x00300040


def test_bases_step_relative_to_core_zero_base() -> None:
    text = sizes_text(0x100000) + "".join(
        f"TD+0x{0x74 + 4 * i:03x} 0x{0x4000000 + i * 0x100000:08x}\n" for i in range(16)
    )
    assert task_from_dump(parse_text(text)).warnings == ()


def test_stride_mirror_and_stream_word_warnings() -> None:
    text = sizes_text(0x100000) + (
        "TD+0x134 0x00000800\nTD+0x1f0 0x00008040\nTD+0x1f4 0x00008000\nTD+0x028 0x12345678\n"
    )
    assert task_from_dump(parse_text(text)).warnings == (
        no_bases(),
        "L2 stride 0x00008040 is not 16 x Cin (0x00008000)",
        "stride mirror 0x00008000 at 0x1f4 differs from stride 0x00008040",
        "word 0x12345678 at 0x028 is not the KernelDMASrc stream word 0xf401f800: "
        "this may be another TD layout",
    )
    good = (
        sizes_text(0x100000)
        + bases_text(0x100000)
        + "TD+0x028 0xf401f800\nTD+0x134 0x800\nTD+0x1f0 0x8000\n"
    )
    assert task_from_dump(parse_text(good)).warnings == ()


def test_cin_cout_must_match_the_core_size() -> None:
    dump = read_dump(published(2048, "text"))
    assert task_from_dump(dump, cout=4096).cout == 4096
    with pytest.raises(InputError) as exc:
        task_from_dump(dump, cout=4112)
    assert str(exc.value) == (
        f"{published(2048, 'text')}: Cin 2048 x Cout 4112 x 2 / 16 = 1052672 bytes, "
        "but the core size is 0x00100000 (1048576) bytes"
    )
    no_cin = task_from_dump(parse_text(sizes_text(0x100000)), cout=4096)
    assert no_cin.warnings == (
        "Cout 4096 given but Cin is not in the dump: size not checked",
        no_bases(),
    )


@pytest.mark.parametrize("cout", [0, -4096, True, "4096"])
def test_bad_cout_is_an_input_error(cout: object) -> None:
    with pytest.raises(InputError, match="Cout must be a positive integer"):
        load_task(published(2048, "text"), cout=cout)  # type: ignore[arg-type]


def test_task_json_view() -> None:
    task = load_task(published(2052, "text"), cout=4096)
    doc = json.loads(json.dumps(task.as_dict()))
    assert doc["bytes_per_core"] == 0x100800
    assert doc["lines_per_core"] == 16416
    assert (doc["k"], doc["x"]) == (1, 32)
    assert doc["cores"][15] == {
        "core": 15,
        "base": 0xF07800,
        "size": 0x100800,
        "enabled_by": "size",
    }


def test_describe_lists_fields_and_task() -> None:
    text = describe(read_dump(published(2044, "text")), cout=4096)
    assert "0x134 Common.Cin.Cin" in text
    assert "= 0x000007fc (2044)" in text
    assert "unknown fields kept (0):" in text
    assert "task: 16 core(s) enabled by non-zero size (config unknown): 0-15" in text
    assert "lines_per_core 0x3fe0 (16352), k 1, x -32" in text
    binary = describe(read_dump(published(2044, "bin")))
    assert "unknown fields kept (103, 103 of them zero, not listed):" in binary


def test_dump_task_is_a_plain_dataclass() -> None:
    task = DumpTask((CoreTransfer(0, 0, 0x100000, "size"),), cin=2048)
    assert (task.bytes_per_core, task.lines_per_core, task.k, task.x) == (0x100000, 0x4000, 1, 0)


# --------------------------------------------------------------------------- bad input


def _expected() -> dict[str, str]:
    doc = json.loads((BAD_DIR / "expected.json").read_text())
    return {name: message for name, message in doc.items() if not name.startswith("_")}


def test_bad_corpus_is_complete() -> None:
    files = {p.name for p in BAD_DIR.iterdir() if p.name != "expected.json"}
    assert files == set(_expected())


@pytest.mark.parametrize(("name", "message"), sorted(_expected().items()))
def test_bad_dump_is_one_line_input_error(name: str, message: str) -> None:
    path = BAD_DIR / name
    with pytest.raises(InputError) as exc:
        load_task(path)
    text = str(exc.value)
    assert type(exc.value) is InputError
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    assert message in text


def test_missing_file_and_directory() -> None:
    with pytest.raises(InputError) as exc:
        load_task(BAD_DIR / "no_such_dump.bin")
    assert str(exc.value) == f"no such file: {BAD_DIR / 'no_such_dump.bin'}"
    with pytest.raises(InputError, match="is a directory"):
        load_task(BAD_DIR)


def test_empty_bytes_and_odd_lengths() -> None:
    with pytest.raises(InputError, match="empty dump file"):
        parse_dump(b"")
    with pytest.raises(InputError, match="truncated TD binary: 624 bytes"):
        parse_dump(bytes(TD_BYTES - 4))


# --------------------------------------------------------------------------- CLI glue


def _cli(argv: list[str]) -> int:
    parser = common.Parser(prog="ane-kdma")
    dump_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _namespace(**given: object) -> argparse.Namespace:
    """What the dump parser would hand run(), for calls that skip the parser."""
    args = {"d": 2048, "n": 4096, "format": "text", "out": None, "json": False, "chip": None}
    return argparse.Namespace(**{**args, "profile": None, **given})


def test_cli_dump_text_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["dump", "--d", "2048", "--n", "4096"]) == 0
    assert capsys.readouterr().out == write_dump(2048, 4096, "text").decode()
    assert _cli(["dump", "--d", "2048", "--n", "4096", "--format", "zin"]) == 0
    assert capsys.readouterr().out == write_dump(2048, 4096, "zin").decode()


def test_cli_binary_needs_out() -> None:
    with pytest.raises(InputError, match="the binary format needs --out PATH"):
        _cli(["dump", "--d", "2048", "--n", "4096", "--format", "bin"])


def test_cli_writes_file_atomically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "td.bin"
    out.write_bytes(b"old")
    assert _cli(["dump", "--d", "2052", "--n", "4096", "--format", "bin", "--out", str(out)]) == 0
    assert out.read_bytes() == write_dump(2052, 4096, "bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["td.bin"]
    assert capsys.readouterr().out == (
        f"wrote {out} (bin, D=2052, N=4096, 0x100800 bytes per core, k 1, x +32)\n"
    )
    assert load_task(out, cout=4096) == load_task(published(2052, "text"), cout=4096)


def test_cli_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "td.txt"
    assert _cli(["dump", "--d", "2044", "--n", "4096", "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "path": str(out),
        "format": "text",
        "d": 2044,
        "n": 4096,
        "bytes_per_core": 0xFF800,
        "lines_per_core": 16352,
        "k": 1,
        "x": -32,
    }
    with pytest.raises(InputError, match="--json needs --out PATH"):
        _cli(["dump", "--d", "2044", "--n", "4096", "--json"])


def test_cli_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    out = tmp_path / "td.txt"
    with pytest.raises(InputError) as exc:
        _cli(["dump", "--d", "2048", "--n", "4096", "--out", str(out)])
    assert str(exc.value) == f"cannot write {out}: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_cli_missing_directory_and_bad_sizes(tmp_path: Path) -> None:
    out = tmp_path / "nowhere" / "td.txt"
    with pytest.raises(InputError, match="no such directory"):
        _cli(["dump", "--d", "2048", "--n", "4096", "--out", str(out)])
    with pytest.raises(InputError, match="argument --d: must be positive: -1"):
        _cli(["dump", "--d", "-1", "--n", "4096"])
    with pytest.raises(InputError, match="D must be a positive integer, got -1"):
        dump_cli.run(_namespace(d=-1))
    with pytest.raises(InputError, match="N must be a multiple of 16"):
        _cli(["dump", "--d", "2048", "--n", "4095", "--out", str(tmp_path / "x.txt")])
    assert list(tmp_path.iterdir()) == []


def test_cli_sizes_take_any_integer_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["dump", "--d", "0x800", "--n", "4_096"]) == 0
    assert capsys.readouterr().out == write_dump(2048, 4096, "text").decode()
    with pytest.raises(InputError, match="argument --n: not an integer: '4096.0'"):
        _cli(["dump", "--d", "2048", "--n", "4096.0"])


def test_cli_run_takes_a_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    assert dump_cli.run(_namespace(d=2052, format="zin")) == 0
    assert capsys.readouterr().out == write_dump(2052, 4096, "zin").decode()


# --------------------------------------------------------------------------- workloads


@pytest.mark.parametrize("d", PUBLISHED)
@pytest.mark.parametrize("fmt", ["text", "zin", "bin"])
def test_to_workload_keeps_every_core_base_and_size(d: int, fmt: str) -> None:
    m3 = chips.load()
    size, core15 = TABLE[d][1], TABLE[d][4]
    task = load_task(published(d, fmt), chip=m3)
    load = task.to_workload(m3)
    assert len(load.cores) == m3.cores == 16
    assert load == Workload(tuple((Task(i * size, size),) for i in range(16)))
    assert load.cores[15] == (Task(core15, size),)
    assert task.warnings == ()


def test_missing_bases_take_the_convention_and_say_so() -> None:
    task = task_from_dump(parse_text(sizes_text(0x100000)))
    assert task.warnings == (no_bases(),)
    assert [c.base for c in task.cores] == [None] * 16  # the task itself invents nothing
    load = task.to_workload(chips.load())
    assert load.cores == tuple((Task(i * 0x100000, 0x100000),) for i in range(16))
    assert f"warning: {no_bases()}" in describe(parse_text(sizes_text(0x100000)))


def test_given_bases_are_kept_and_only_missing_ones_assumed() -> None:
    given = "".join(
        f"TD+0x{0x74 + 4 * i:03x} 0x{0x4000000 + i * 0x100000:08x}\n" for i in range(16) if i != 3
    )
    task = task_from_dump(parse_text(sizes_text(0x100000) + given))
    assert task.warnings == (no_bases("core 3"),)
    load = task.to_workload(chips.load())
    assert load.cores[2] == (Task(0x4200000, 0x100000),)
    assert load.cores[3] == (Task(0x300000, 0x100000),)
    assert load.cores[4] == (Task(0x4400000, 0x100000),)


def test_disabled_cores_sit_out_at_their_index() -> None:
    task = task_from_dump(parse_text(_zin_cores({1: 1, 5: 1}, 0x100000, bases=True)))
    assert task.warnings == (
        "cores 2-4 sit out (CoeffDMAConfig En = 0) between enabled cores 1 and 5",
    )
    load = task.to_workload(chips.load())
    assert load.enabled == [1, 5]
    assert load.cores[5] == (Task(0x500000, 0x100000),)
    assert sum(seq is None for seq in load.cores) == 14


def test_workload_refuses_a_core_the_chip_lacks() -> None:
    task = load_task(published(2048, "text"))
    with pytest.raises(InputError, match="core 8 is enabled but chip synthetic has 8 cores"):
        task.to_workload(synthetic_chip())


# --------------------------------------------------------------------------- other layouts

# A made-up layout: other offsets (sizes before bases), another TD size, header,
# stream word and stride rule, and 8 cores. Nothing of m3's may leak into it.
SYNTH_TD = TdLayout(
    bytes=0x180,
    stream_word=0xA5A50001,
    zin_header="// ZinIrRegBitPrintOutDebug_9u_",
    stride_per_cin=8,
    exe_cycles=0x00C,
    stream=0x010,
    coeff_dma_config=0x020,
    coeff_base=0x060,
    coeff_size=0x040,
    cin=0x100,
    stride=0x104,
    stride_mirror=0x170,
    result_base=0x110,
)


def synthetic_chip() -> Chip:
    return dataclasses.replace(chips.load(), name="synthetic", cores=8, td=SYNTH_TD)


def test_field_map_follows_the_layout() -> None:
    m3 = chips.load()
    assert regdump.FIELDS == regdump.layout.fields(m3.td, 16)
    assert TD_BYTES == m3.td.bytes == 0x274
    specs = {s.name: s for s in regdump.layout.fields(SYNTH_TD, 8)}
    assert regdump.layout.fields(SYNTH_TD, 8) is regdump.layout.fields(SYNTH_TD, 8)  # cached
    size7 = specs["KernelDMASrc.CoeffBfrSize[7].MemBfrSize"]
    assert (size7.offset, size7.zin) == (0x05C, "aneRegs.KernelDMASrc.CoeffBfrSize[7].MemBfrSize")
    assert "KernelDMASrc.CoeffBfrSize[8].MemBfrSize" not in specs
    assert specs["KernelDMASrc.CoeffDMAConfig[1].PrefetchParticipateEn"].offset == 0x024
    offsets = [s.offset for s in regdump.layout.fields(SYNTH_TD, 8)]
    assert offsets == sorted(offsets)  # TD order


@pytest.mark.parametrize("fmt", regdump.FORMATS)
def test_synthetic_layout_round_trips(fmt: str) -> None:
    chip = synthetic_chip()
    size = 4096 // 8 * 2048 * 2
    data = write_dump(2048, 4096, fmt, chip)
    if fmt == "bin":
        assert len(data) == 0x180
    if fmt == "zin":
        assert data.decode().startswith("// ZinIrRegBitPrintOutDebug_9u_\n")
        assert "(fp16, 8 cores)" in data.decode()
    dump = parse_dump(data, "synthetic", chip)
    assert dump.fmt == fmt
    assert dump.get("KernelDMASrc.CoeffBfrSize[7].MemBfrSize") == size
    assert dump.get("KernelDMASrc.CoeffBaseAddr[7].Addr") == 7 * size
    assert dump.get("L2.SourceRowStride.Stride") == 8 * 2048
    made = dump_words(2048, 4096, chip)
    assert made[0x040] == size and made[0x104] == made[0x170] == 8 * 2048
    assert {off: dump.words[off] for off in made if off in dump.known} == {
        off: v
        for off, v in made.items()
        if fmt != "zin" or off != 0x170  # mirror: no Zin name
    }
    task = task_from_dump(dump, cout=4096)
    assert task.cores == tuple(CoreTransfer(i, i * size, size, "size") for i in range(8))
    assert (task.cin, task.warnings) == (2048, ())
    assert (task.lines_per_core, task.k, task.x) == (0x8000, 2, 0)
    assert task.to_workload(chip) == Workload(tuple((Task(i * size, size),) for i in range(8)))


def test_synthetic_layout_drives_checks_and_messages() -> None:
    chip = synthetic_chip()
    text = write_dump(2048, 4096, "text", chip)
    with pytest.raises(InputError, match=r"none of CoeffBfrSize\[0\.\.15\] \(0x0b4-0x0f0\)"):
        task_from_dump(parse_dump(text, "as m3"))  # m3 finds no sizes at these offsets
    with pytest.raises(InputError, match=r"none of CoeffBfrSize\[0\.\.7\] \(0x040-0x05c\)"):
        task_from_dump(parse_dump(b"TD+0x0b4 0x00100000\n", "t", chip))
    with pytest.raises(InputError, match="outside the 0x180-byte TD"):
        parse_dump(b"TD+0x180 0x1\n", "t", chip)
    with pytest.raises(InputError, match="truncated TD binary: 384 bytes"):
        parse_dump(write_dump(2048, 4096, "bin", chip))  # read as m3: too short
    words = {**dump_words(2048, 4096, chip), 0x010: 0xF401F800, 0x104: 0x8000}
    odd = "".join(f"TD+0x{off:03x} 0x{value:08x}\n" for off, value in words.items())
    assert task_from_dump(parse_dump(odd.encode(), "t", chip), cout=4096).warnings == (
        "L2 stride 0x00008000 is not 8 x Cin (0x00004000)",
        "stride mirror 0x00004000 at 0x170 differs from stride 0x00008000",
        "word 0xf401f800 at 0x010 is not the KernelDMASrc stream word 0xa5a50001: "
        "this may be another TD layout",
    )


def test_cli_dump_takes_the_chip_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "synthetic"
    shutil.copytree(chips.chips_dir() / "m3", folder)
    # m3's measurements are of 16 cores (the loader holds each D x N to its x); dump needs none
    shutil.rmtree(folder / "measured")
    doc = json.loads((folder / "chip.json").read_text())
    doc.update(name="synthetic", cores=8)
    doc["td"].update(
        bytes=hex(SYNTH_TD.bytes),
        stream_word=hex(SYNTH_TD.stream_word),
        zin_header=SYNTH_TD.zin_header,
        stride_per_cin=SYNTH_TD.stride_per_cin,
        offsets={name: hex(getattr(SYNTH_TD, name)) for name in TdLayout.OFFSETS},
    )
    (folder / "chip.json").write_text(json.dumps(doc))
    assert chips.load(folder).td == SYNTH_TD
    assert _cli(["dump", "--chip", str(folder), "--d", "2048", "--n", "4096"]) == 0
    assert capsys.readouterr().out == write_dump(2048, 4096, "text", synthetic_chip()).decode()
    out = tmp_path / "td.bin"
    argv = ["dump", "--chip", str(folder), "--d", "2048", "--n", "4096", "--format", "bin"]
    assert _cli([*argv, "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["bytes_per_core"], summary["k"], summary["x"]) == (0x200000, 2, 0)
    assert out.read_bytes() == write_dump(2048, 4096, "bin", synthetic_chip())
    with pytest.raises(InputError, match="N must be a multiple of 8"):
        _cli(["dump", "--chip", str(folder), "--d", "2048", "--n", "4100"])


# --------------------------------------------------------------------------- as users write them


def _variants(text: str) -> dict[str, bytes]:
    """One dump spelt the ways editors, shells and terminals write it."""
    return {
        "crlf": text.replace("\n", "\r\n").encode(),
        "cr": text.replace("\n", "\r").encode(),
        "bom": b"\xef\xbb\xbf" + text.encode(),
        "tabs and trailing spaces": text.replace(" ", "\t").replace("\n", "  \t\n").encode(),
        "no final newline": text.rstrip("\n").encode(),
        "utf-16 with bom": text.replace("\n", "\r\n").encode("utf-16"),
        "utf-16-be with bom": b"\xfe\xff" + text.encode("utf-16-be"),
        "utf-16-le without bom": text.encode("utf-16-le"),
        "latin-1 comment": ("# caf\xe9, cr\xe8me br\xfbl\xe9e\n" + text).encode("latin-1"),
        "ansi colours": ("\x1b[1;31m// colour\x1b[0m\n" + text)
        .replace("aneRegs.Common", "\x1b[32maneRegs.Common")
        .replace("TD+0x134", "\x1b[32mTD+0x134\x1b[0m")
        .encode(),
    }


@pytest.mark.parametrize("fmt", ["text", "zin"])
def test_files_as_users_write_them_are_read(fmt: str) -> None:
    want = load_task(published(2052, fmt), cout=4096)
    for name, data in _variants(published(2052, fmt).read_text()).items():
        got = task_from_dump(parse_dump(data, name), cout=4096)
        assert got == want, name
        assert got.warnings == (), name


def test_odd_characters_in_register_lines_are_named() -> None:
    text = published(2048, "text").read_text().replace("TD+0x134", "TD+0x134\xe9")
    with pytest.raises(InputError, match=r"line 37: non-ASCII character 'é' \(U\+00E9\)") as exc:
        parse_dump(text.encode("latin-1"))
    assert "the file is not UTF-8 (read as Latin-1)" in str(exc.value)
    with pytest.raises(InputError, match=r"line 2: control character '\\x00'"):
        parse_dump(b"TD+0x0b4 0x00100000\nTD+0x0b8\x00 0x00100000\n")


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, message in [
        (fifo, "a FIFO (named pipe), not a regular file: cannot be a dump file"),
        (Path("/dev/zero"), "a character device, not a regular file"),
        (tmp_path, "is a directory, not a dump file"),
    ]:
        with pytest.raises(InputError, match=re.escape(f"{path}: {message}")):
            read_dump(path)
    big = tmp_path / "big.txt"
    big.write_bytes(b"#" * (MAX_DUMP_BYTES + 1))
    with pytest.raises(InputError, match="1048577 bytes is too large for a dump file"):
        read_dump(big)
    link = tmp_path / "link.txt"
    link.symlink_to(published(2048, "text"))
    assert load_task(link) == load_task(published(2048, "text"))


def test_stdin_is_read_for_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = published(2044, "bin").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    dump = read_dump("-")
    assert dump.source == "<stdin>" and dump.fmt == "bin"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"#" * (MAX_DUMP_BYTES + 1))))
    with pytest.raises(InputError, match="standard input: more than 1048576 bytes"):
        read_dump("-")


def test_repeated_lines_cost_one_comparison_each() -> None:
    """20,000 copies once took minutes (pairwise); the origin list stays one entry per word."""
    dump = parse_text("TD+0x0b4 0x00100000\n" * 20_000)
    assert dump.words == {0x0B4: 0x00100000}
    with pytest.raises(InputError, match=r"line 20001: offset 0x0b4 given twice .* on line 1,"):
        parse_text("TD+0x0b4 0x00100000\n" * 20_000 + "TD+0x0b4 0x00100040\n")


@pytest.mark.parametrize(
    "name",
    [
        "aneRegs.KernelDMASrc.CoeffDMAConfig[3].CacheHint",
        "aneRegs.KernelDMASrc.CoeffDMAConfig[3].CrH",
        "aneRegs.KernelDMASrc.Spare[0].Spare",
        "aneRegs.Common.Cout.Cout",
        "aneRegs.Common.Win.Win",
        "aneRegs.Common.InDim.Win",
        "aneRegs.L2.SourceChannelStride.Stride",
        "aneRegs.L2.SourceBase.Addr",
        "aneRegs.L2.ResultCfg.ResultType",
        "aneRegs.TileDMASrc.Src1RowStride.Stride",
        "aneTD.Header[0].TID",
        "aneTD.Header[3].NextPointer",
    ],
)
def test_other_apple_fields_are_kept_not_taken_for_slips(name: str) -> None:
    zin = published(2048, "zin").read_text() + f"{name} = 7\n"
    dump = parse_text(zin)
    assert dump.unknown_fields() == {name: 7}
    assert task_from_dump(dump) == load_task(published(2048, "zin"))


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("aneRegs.KernelDMASrc.CoeffBfrSize[4].MemBfrSiz", "CoeffBfrSize[4].MemBfrSize"),
        ("aneRegs.KernelDMASrc.CoefBfrSize[4].MemBfrSize", "CoeffBfrSize[4].MemBfrSize"),
        ("aneRegs.KernelDMASrc.CoeffBfrSize[4].memBfrSize", "CoeffBfrSize[4].MemBfrSize"),
        ("aneRegs.KernelDMASrc.CoeffBfrSize[4]MemBfrSize", "CoeffBfrSize[4].MemBfrSize"),
        ("aneRegs.KernelDMASrc.CoeffBaseAdrr[4].Addr", "CoeffBaseAddr[4].Addr"),
        ("aneRegs.KernelDMASrc.CoeffDMAConfig[4].EN", "CoeffDMAConfig[4].En"),
        ("aneRegs.KernelDMASrc.CoeffBfrSize[q].MemBfrSize", "CoeffBfrSize[i].MemBfrSize"),
        ("anRegs.Common.Cin.Cin", "aneRegs.Common.Cin.Cin"),
        ("aneRegs.Common.Cin.Cn", "aneRegs.Common.Cin.Cin"),
    ],
)
def test_a_slip_in_a_field_name_is_refused(name: str, meant: str) -> None:
    zin = published(2048, "zin").read_text() + f"{name} = 1048576\n"
    with pytest.raises(
        InputError, match=rf"line 42: unknown field .*did you mean .*{re.escape(meant)}"
    ):
        parse_text(zin)
