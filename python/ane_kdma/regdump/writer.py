"""Writing dumps and describing them: the chip decides offsets, core count and TD size.

Why a writer at all: a TD made from D and N alone, in any of the three
formats, lets the RTL and the model be driven by exactly what the compiler
would set, and round-trips through the parsers as a check on both.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.regdump import layout
from ane_kdma.regdump.layout import FORMATS, WORD_MASK
from ane_kdma.regdump.parsers import Dump
from ane_kdma.regdump.rules import convention_base, core_list, task_from_dump


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InputError(f"unknown dump format {fmt!r} (one of: {', '.join(FORMATS)})")


def bytes_per_core(d: int, n: int, chip: Chip) -> int:
    """Each core's share of W[D,N] in fp16 bytes: N / cores x D x 2, checked to fit the TD."""
    for name, value in (("D", d), ("N", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    cores, line = chip.cores, chip.line_bytes
    if n % cores:
        raise InputError(f"N must be a multiple of {cores} (one share per core), got {n}")
    size = n // cores * d * 2
    if size % line:
        raise InputError(
            f"D={d}, N={n} gives {size} bytes per core, not a whole number of {line}-byte lines"
        )
    if (cores - 1) * size > WORD_MASK or chip.td.stride_per_cin * d > WORD_MASK:
        raise InputError(
            f"D={d}, N={n} is too large: core {cores - 1} base 0x{(cores - 1) * size:x} "
            f"does not fit a 32-bit register"
        )
    return size


def dump_words(d: int, n: int, chip: Chip | None = None) -> dict[int, int]:
    """The TD words that follow from D and N alone, as the published dumps set them.

    ExeCycles and ResultBase do not follow from D and N, so they are left out.
    """
    chip = layout.chip_or_default(chip)
    size, td = bytes_per_core(d, n, chip), chip.td
    words = {td.coeff_base + 4 * i: convention_base(i, size) for i in range(chip.cores)}
    words.update({td.coeff_size + 4 * i: size for i in range(chip.cores)})
    words[td.cin] = d
    words[td.stride] = words[td.stride_mirror] = td.stride_per_cin * d
    return dict(sorted(words.items()))


def render(dump: Dump, fmt: str, header: Iterable[str] = ()) -> bytes:
    """Write a dump in one format (its chip's layout); header lines become comments.

    The binary writes unknown bits as 0 because it cannot say "unknown". The
    text form writes only whole words that are fully given. Zin writes only
    fields with an Apple name; anything else becomes a comment.
    """
    _check_format(fmt)
    td = dump.chip.td
    if fmt == "bin":
        buf = bytearray(td.bytes)
        for off, word in dump.words.items():
            struct.pack_into("<I", buf, off, word & dump.known.get(off, 0))
        return bytes(buf)
    lines: list[str] = []
    if fmt == "zin":
        lines.append(td.zin_header)
        lines += [f"// {h}" for h in header]
        for spec in dump.specs:
            value = dump.read(spec)
            if value is None:
                continue
            if spec.zin:
                lines.append(f"{spec.zin} = {value}")
            else:
                lines.append(
                    f"// 0x{spec.offset:03x} = 0x{value:08x} ({spec.name}: "
                    "no Apple name, not expressible in this form)"
                )
        for name, value in dump.named_extras.items():
            lines.append(f"{name} = {value}")
        return ("\n".join(lines) + "\n").encode()
    lines += [f"# {h}" for h in header]
    for off in sorted(dump.known):
        mask = dump.known[off]
        if mask == WORD_MASK:
            names = ", ".join(s.name for s in dump.specs if s.offset == off)
            lines.append(
                f"TD+0x{off:03x} 0x{dump.words[off]:08x}  # {names or f'unknown@0x{off:03x}'}"
            )
        else:
            lines.append(
                f"# 0x{off:03x}: only bits 0x{mask:08x} known "
                f"(0x{dump.words[off] & mask:08x}); not a whole word"
            )
    for name, value in dump.named_extras.items():
        lines.append(f"# {name} = {value} (no known offset)")
    return ("\n".join(lines) + "\n").encode()


def write_dump(d: int, n: int, fmt: str = "text", chip: Chip | None = None) -> bytes:
    """A TD for the decode matmul X[1,D] x W[D,N], holding only what follows from D and N."""
    _check_format(fmt)
    chip = layout.chip_or_default(chip)
    words = dump_words(d, n, chip)
    source = f"write_dump(d={d}, n={n})"
    dump = Dump(fmt, words, dict.fromkeys(words, WORD_MASK), {}, source, chip=chip)
    header = [
        f"ANE task descriptor for X[1,{d}] x W[{d},{n}] (fp16, {chip.cores} cores), ane-kdma dump",
        "Only the words that follow from D and N are given; every other word is unknown.",
    ]
    return render(dump, fmt, header)


def describe(dump: Dump, cout: int | None = None) -> str:
    """A human summary: known fields, kept unknown fields, and the task (or why there is none)."""
    out = [f"{dump.source}: {dump.fmt} dump"]
    if dump.fmt == "bin":
        out.append(
            "  (a binary cannot say 'unknown': words the capture lacked read as 0, and an "
            "all-zero CoeffDMAConfig block counts as not captured)"
        )
    named = layout.by_name(dump.chip.td, dump.chip.cores)
    fields = dump.fields()
    out.append(f"known fields ({len(fields)}):")
    for name, value in fields.items():
        out.append(f"  0x{named[name].offset:03x} {name:<52} = 0x{value:08x} ({value})")
    extras = dump.unknown_fields()
    zeros = [name for name, value in extras.items() if value == 0]
    note = f", {len(zeros)} of them zero, not listed" if dump.fmt == "bin" and zeros else ""
    out.append(f"unknown fields kept ({len(extras)}{note}):")
    for name, value in extras.items():
        if value != 0 or dump.fmt != "bin":
            out.append(f"  {name:<57} = 0x{value:08x} ({value})")
    try:
        task = task_from_dump(dump, cout)
    except InputError as exc:
        out.append(f"task: none ({exc})")
        return "\n".join(out)
    by = sorted({c.enabled_by for c in task.cores})
    rule = " and ".join("En bit" if b == "En" else "non-zero size (config unknown)" for b in by)
    out.append(
        f"task: {len(task.cores)} core(s) enabled by {rule}: {core_list(task.enabled_cores)}"
    )
    out.append(
        f"  bytes_per_core 0x{task.bytes_per_core:x} ({task.bytes_per_core}), "
        f"lines_per_core 0x{task.lines_per_core:x} ({task.lines_per_core}), "
        f"k {task.k}, x {task.x:+d}"
    )
    bases = ", ".join("?" if c.base is None else f"0x{c.base:x}" for c in task.cores)
    out.append(f"  bases: {bases}")
    out.append(
        f"  Cin {task.cin if task.cin is not None else 'unknown'}, "
        f"Cout {task.cout if task.cout is not None else 'unknown'}"
    )
    for warning in task.warnings:
        out.append(f"  warning: {warning}")
    return "\n".join(out)
