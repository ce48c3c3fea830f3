"""From a dump to a task: which cores stream what, checked against the dump itself.

The rules live here because replay depends on them (the package docstring
states them): the En bit decides, else a known non-zero size; hard errors for
a dump no replay could be exact about; warnings where the transfers are still
well defined. :meth:`DumpTask.to_workload` then hands replay every enabled
core's own base and size, so nothing the dump says is averaged away.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ane_kdma.chip import Chip
from ane_kdma.contract import Task, Workload
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, lap_and_offset
from ane_kdma.regdump import layout
from ane_kdma.regdump.layout import BASE, CIN, EN, MIRROR, SIZE, STREAM, STRIDE, WORD_MASK, fail
from ane_kdma.regdump.parsers import Dump, read_dump


@dataclass(frozen=True)
class CoreTransfer:
    """One enabled core's weight stream: byte offset and byte count, as the TD holds them."""

    core: int
    base: int | None  # None when the dump leaves this core's base out
    size: int
    enabled_by: str  # "En" (config bit 1) or "size" (config unknown, size non-zero)


def convention_base(core: int, size: int) -> int:
    """The TD convention where a dump gives no base: core i's weights start at i x size."""
    return core * size % (1 << ADDR_BITS)


@dataclass(frozen=True)
class DumpTask:
    """The transfers a dump describes, plus whatever it says about Cin and Cout."""

    cores: tuple[CoreTransfer, ...]
    cin: int | None = None
    cout: int | None = None
    warnings: tuple[str, ...] = ()
    source: str = field(default="", compare=False)
    chip: Chip | None = field(default=None, compare=False, repr=False)  # None: the m3 chip

    @property
    def _chip(self) -> Chip:
        return layout.chip_or_default(self.chip)

    @property
    def bytes_per_core(self) -> int:
        return self.cores[0].size

    @property
    def lines_per_core(self) -> int:
        return self.bytes_per_core // self._chip.line_bytes

    @property
    def k(self) -> int:
        """The lap: the nearest multiple of the chip's ring (round half up)."""
        return lap_and_offset(self.lines_per_core, self._chip.ring_lines)[0]

    @property
    def x(self) -> int:
        """Signed offset in lines from the nearest lap, x = lines - k * ring."""
        return lap_and_offset(self.lines_per_core, self._chip.ring_lines)[1]

    @property
    def enabled_cores(self) -> tuple[int, ...]:
        return tuple(c.core for c in self.cores)

    def to_workload(self, chip: Chip) -> Workload:
        """One task per enabled core at its own index, with its own base and size.

        A base the dump leaves out takes :func:`convention_base`; the task's
        warnings already say so (see :func:`task_from_dump`).
        """
        seqs: list[tuple[Task, ...] | None] = [None] * chip.cores
        for c in self.cores:
            if c.core >= chip.cores:
                raise fail(
                    self.source,
                    f"core {c.core} is enabled but chip {chip.name} has {chip.cores} cores",
                )
            base = convention_base(c.core, c.size) if c.base is None else c.base
            seqs[c.core] = (Task(base, c.size),)
        return Workload(tuple(seqs), label=self.source)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view, for ``--json`` outputs."""
        return {
            "source": self.source,
            "cores": [
                {"core": c.core, "base": c.base, "size": c.size, "enabled_by": c.enabled_by}
                for c in self.cores
            ],
            "cin": self.cin,
            "cout": self.cout,
            "bytes_per_core": self.bytes_per_core,
            "lines_per_core": self.lines_per_core,
            "k": self.k,
            "x": self.x,
            "ring_lines": self._chip.ring_lines,
            "warnings": list(self.warnings),
        }


def core_list(cores: Iterable[int]) -> str:
    """'0-6, 8-15' style list of core numbers."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cores):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _share(value: int, cores: int) -> str:
    """value / cores, exact where the core count is a power of two (16 on m3)."""
    return str(value // cores) if value % cores == 0 else str(value / cores)


def _check_cout(cout: int | None) -> None:
    if cout is None:
        return
    if isinstance(cout, bool) or not isinstance(cout, int) or cout <= 0:
        raise InputError(f"Cout must be a positive integer, got {cout!r}")


def _enables(dump: Dump) -> list[int | None]:
    """Each core's En bit, None where unknown."""
    td, cores = dump.chip.td, dump.chip.cores
    if dump.fmt == "bin" and all(
        dump.words.get(td.coeff_dma_config + 4 * i, 0) == 0 for i in range(cores)
    ):
        return [None] * cores  # all-zero config block in a binary: not captured (package doc)
    return [dump.get(EN.format(i)) for i in range(cores)]


def _size_at(dump: Dump, core: int) -> str:
    return f"CoeffBfrSize[{core}] at 0x{dump.chip.td.coeff_size + 4 * core:03x}"


def _enabled(dump: Dump, en: list[int | None], sizes: list[int | None]) -> list[tuple[int, str]]:
    """(core, rule) for every enabled core; InputError where enables and sizes disagree.

    An enable without its size, or a size without its enable (En = 0, or En
    left out where other cores' are given), is what a cut or a flipped bit
    leaves, so it is refused rather than replayed as a smaller task.
    """
    src, cores = dump.source, dump.chip.cores

    enabled: list[tuple[int, str]] = []
    for i in range(cores):
        if en[i] == 1:
            if sizes[i] is None:
                raise fail(
                    src,
                    f"core {i} is enabled (CoeffDMAConfig[{i}].En = 1) but its size "
                    f"({_size_at(dump, i)}) is not in the dump",
                )
            if sizes[i] == 0:
                raise fail(
                    src,
                    f"zero size: core {i} is enabled (CoeffDMAConfig[{i}].En = 1) "
                    f"but its size ({_size_at(dump, i)}) is 0",
                )
            enabled.append((i, "En"))
        elif en[i] is None and sizes[i]:
            enabled.append((i, "size"))
    if not enabled:
        if all(s in (None, 0) for s in sizes):
            raise fail(src, "zero size: every core size in the dump is 0, nothing to stream")
        raise fail(
            src, "no enabled core: every core with a non-zero size has CoeffDMAConfig En = 0"
        )

    with_en = [i for i in range(cores) if en[i] is not None]
    for i in range(cores):
        if en[i] == 0 and sizes[i]:
            raise fail(
                src,
                f"core {i} has a size ({_size_at(dump, i)} = 0x{sizes[i]:08x}) but is not enabled "
                f"(CoeffDMAConfig[{i}].En = 0): a size without its enable",
            )
        if en[i] is None and sizes[i] and with_en:
            raise fail(
                src,
                f"core {i} has a size ({_size_at(dump, i)} = 0x{sizes[i]:08x}) but its enable bit "
                f"(CoeffDMAConfig[{i}].En) is not in the dump, while core {with_en[0]}'s is",
            )
    return enabled


def _coverage(
    dump: Dump,
    on: list[int],
    en: list[int | None],
    sizes: list[int | None],
    bases: list[int | None],
) -> list[str]:
    """Warnings for the cores that do not stream; InputError where one should.

    A core missing before or between enabled ones, or a base for a core whose
    size is left out or 0, does not form one task with the rest unless an En
    bit says the core is off. Cores the dump plainly turns off, or says
    nothing about beyond the enabled ones, are merely unusual: a warning.
    """
    src, cores = dump.source, dump.chip.cores

    first, last = on[0], on[-1]
    sits_out: list[int] = []
    left_out: list[int] = []
    zero_size: list[int] = []
    for i in sorted(set(range(cores)) - set(on)):
        if en[i] == 0:
            if first < i < last:
                sits_out.append(i)  # turned off in plain words, between enabled cores
            continue
        if i < last:  # no En bit: the cores that stream are the first ones, without a gap
            what = "is 0" if sizes[i] == 0 else f"({_size_at(dump, i)}) is not in the dump"
            where = "middle" if i > first else "start"
            raise fail(
                src,
                f"core {i} is missing from the {where} of the task: its size {what}, but "
                f"cores {core_list(on)} stream and no CoeffDMAConfig[{i}].En says it is off",
            )
        base = bases[i]
        if base is not None and (sizes[i] is None or base != 0):
            have = "size 0" if sizes[i] == 0 else f"no size ({_size_at(dump, i)})"
            raise fail(
                src,
                f"core {i} has a base (CoeffBaseAddr[{i}] = 0x{base:08x}) but {have} "
                f"and no enable bit: a base without its size",
            )
        (zero_size if sizes[i] == 0 else left_out).append(i)
    warnings = []
    if sits_out:
        warnings.append(
            f"core{_s(sits_out)} {core_list(sits_out)} sit{'' if len(sits_out) > 1 else 's'} "
            f"out (CoeffDMAConfig En = 0) between enabled cores {first} and {last}"
        )
    if zero_size:
        warnings.append(
            f"core{_s(zero_size)} {core_list(zero_size)}: size 0 and no enable bit in the "
            f"dump: replayed as off ({len(on)} of {cores} cores stream)"
        )
    if left_out:
        warnings.append(
            f"core{_s(left_out)} {core_list(left_out)}: no size, base or enable bit in the "
            f"dump: replayed as off ({len(on)} of {cores} cores stream)"
        )
    return warnings


def _s(items: list[int]) -> str:
    return "s" if len(items) > 1 else ""


def _common_size(dump: Dump, enabled_size: dict[int, int]) -> int:
    """The one size every enabled core streams, in whole lines; InputError otherwise."""
    line = dump.chip.line_bytes
    for i, size in enabled_size.items():
        if size % line:
            raise fail(
                dump.source,
                f"core {i} size 0x{size:08x} ({size} bytes) is not a multiple of "
                f"{line}: the kernel DMA moves whole {line}-byte lines and "
                f"the model replays whole lines only",
            )
    by_size: dict[int, list[int]] = {}
    for i, size in enabled_size.items():
        by_size.setdefault(size, []).append(i)
    if len(by_size) > 1:
        parts = "; ".join(
            f"0x{s:08x} on core{'s' if len(cs) > 1 else ''} {core_list(cs)}"
            for s, cs in sorted(by_size.items(), key=lambda kv: kv[1][0])
        )
        raise fail(dump.source, f"core sizes disagree: {parts}")
    return next(iter(by_size))


def _base_warnings(bases: list[int | None], enabled: list[int], size: int) -> list[str]:
    """Bases that do not step by the size, and the ones a replay has to assume."""
    out: list[str] = []
    known = [(i, b) for i, b in ((i, bases[i]) for i in enabled) if b is not None]
    if known:
        ref, ref_base = known[0]
        for i, base in known[1:]:
            want = ref_base + (i - ref) * size
            if base != want:
                out.append(
                    f"core {i} base 0x{base:08x} is not core {ref} base + {i - ref} x size "
                    f"(0x{want & WORD_MASK:08x})"
                )
    missing = [i for i in enabled if bases[i] is None]
    if missing:
        many = "s" if len(missing) > 1 else ""
        out.append(
            f"no base in the dump for core{many} {core_list(missing)}: a replay uses "
            f"the TD convention core i base = i x size"
        )
    return out


def task_from_dump(dump: Dump, cout: int | None = None) -> DumpTask:
    """The per-core transfers a dump describes, after checking it against itself."""
    _check_cout(cout)
    src, chip, td = dump.source, dump.chip, dump.chip.td
    sizes = [dump.get(SIZE.format(i)) for i in range(chip.cores)]
    bases = [dump.get(BASE.format(i)) for i in range(chip.cores)]
    if all(s is None for s in sizes):
        last = td.coeff_size + 4 * (chip.cores - 1)
        raise fail(
            src,
            f"no core sizes: none of CoeffBfrSize[0..{chip.cores - 1}] "
            f"(0x{td.coeff_size:03x}-0x{last:03x}) is in the dump",
        )
    en = _enables(dump)
    enabled = _enabled(dump, en, sizes)
    core_warnings = _coverage(dump, [i for i, _ in enabled], en, sizes, bases)
    size = _common_size(dump, {i: sizes[i] or 0 for i, _ in enabled})  # known, non-zero

    cin = dump.get(CIN)
    warnings: list[str] = []
    if cout is not None:
        if cin is None:
            warnings.append(f"Cout {cout} given but Cin is not in the dump: size not checked")
        elif cin * cout * 2 != chip.cores * size:  # fp16 weights, Cout split over the cores
            raise fail(
                src,
                f"Cin {cin} x Cout {cout} x 2 / {chip.cores} = "
                f"{_share(cin * cout * 2, chip.cores)} bytes, "
                f"but the core size is 0x{size:08x} ({size}) bytes",
            )
    warnings += core_warnings
    warnings += _base_warnings(bases, [i for i, _ in enabled], size)
    stride, mirror, stream = dump.get(STRIDE), dump.get(MIRROR), dump.get(STREAM)
    per_cin = td.stride_per_cin
    if stride is not None and cin is not None and stride != per_cin * cin:
        warnings.append(f"L2 stride 0x{stride:08x} is not {per_cin} x Cin (0x{per_cin * cin:08x})")
    if stride is not None and mirror is not None and mirror != stride:
        warnings.append(
            f"stride mirror 0x{mirror:08x} at 0x{td.stride_mirror:03x} differs from "
            f"stride 0x{stride:08x}"
        )
    if stream is not None and stream != td.stream_word and not (dump.fmt == "bin" and stream == 0):
        warnings.append(
            f"word 0x{stream:08x} at 0x{td.stream:03x} is not the KernelDMASrc stream word "
            f"0x{td.stream_word:08x}: this may be another TD layout"
        )

    cores = tuple(CoreTransfer(i, bases[i], size, how) for i, how in enabled)
    return DumpTask(cores, cin, cout, tuple(warnings), src, chip)


def load_task(
    path: str | os.PathLike[str], cout: int | None = None, chip: Chip | None = None
) -> DumpTask:
    """The one entry point replay uses: file in, checked task out, InputError otherwise."""
    return task_from_dump(read_dump(path, chip), cout)
