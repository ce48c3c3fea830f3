"""Register dumps (ANE task descriptors): read, check, describe and write them.

A dump is the evidence the rest of the model stands on, so this layer never
invents a word. A :class:`Dump` holds exactly the bits a file gives; a field
the file leaves out reads as ``None``. :func:`task_from_dump` then turns the
words into a :class:`DumpTask` (per-core base and size), and checks the dump
against itself on the way. Offsets, core count and TD size are the chip's
data (``chip.json``, ``td``); every entry point takes a ``chip`` and reads
the m3 chip only where the caller gives none.

Modules by job: :mod:`.layout` (the field map of a TD layout),
:mod:`.parsers` (format detection and the three parsers), :mod:`.rules`
(dump to task, self-checks, workload) and :mod:`.writer` (TDs from D and N,
rendering, the human summary). The ``dump`` command is :mod:`ane_kdma.cli.dump`.

Three formats, told apart by content, never by file name:

* ``bin``: a raw TD, exactly the layout's TD size (0x274 bytes on m3) of
  little-endian 32-bit words. A binary cannot say "unknown", so every word
  counts as given.
* ``text``: ``offset value`` lines, both in hex with a ``0x`` prefix, e.g.
  ``TD+0x0b4 0x00100000`` or ``0x0b4 = 0x00100000``. ``#`` and ``//``
  start comments. A bare ``2048`` is refused, not read as hex.
* ``zin``: Apple's ``ZinIrRegBitPrintOutDebug`` printout, ``name = decimal``
  lines after the layout's header (``// ZinIrRegBitPrintOutDebug_7u_``). A
  line such as ``CoeffDMAConfig[3].En = 1`` gives only bit 0 of its word.
  The other bits stay unknown. A name the layout does not know is kept as an
  extra, unless it is a slip of a known one (one edit away, another case or
  punctuation, or a core the chip lacks): that is refused, since as an extra
  it would silently drop a core or a size.

Reading (bounded, so any file is answered in linear time): only a regular
file, or standard input for ``-``, of at most 1 MiB. Text is UTF-8 (a
byte-order mark is fine), UTF-16 (what a Windows shell writes) or, failing
both, read as Latin-1 so that a comment in a legacy encoding is no error;
ANSI colour codes are dropped; CRLF, CR, tabs and a missing final newline are
fine. Register lines are ASCII: a number is ASCII digits of bounded length
(longer is refused as wider than any register), never ``²`` or ``٢``.

Rules for building a task (documented here because replay depends on them).
The enabled cores, their sizes and their bases must form one task: a dump
cut short, or hit by one flipped bit, is refused rather than replayed as a
smaller task.

* A core is enabled when its ``CoeffDMAConfig.En`` bit is 1. Where the dump
  gives no En bit at all (the published dumps leave the config words out), a
  core is enabled when its size is known and non-zero. In a binary, an
  all-zero config block (every core's word) is read as "not captured" rather
  than "every core off": a TD that turns every core off has nothing to
  stream, so such a block only occurs where the capture left the config
  words out. For the same reason, a zero stream word in a binary raises no
  warning.
* Hard errors (:class:`~ane_kdma.errors.InputError`): no core sizes; an
  enabled core with its size unknown or 0 (an enable without its size); a
  non-zero size with En = 0, or with its En left out where other cores' are
  given (a size without its enable); where no En bit says which cores are
  off, a core before or between streaming ones whose size is 0 or left out
  (a core missing from the task), or a non-streaming core with a base (a base
  without its size); every size 0; a size that is not whole lines (the kernel
  DMA moves whole lines and the model replays whole lines, so a ragged size
  cannot be replayed exactly); enabled cores whose sizes disagree; and ``Cin
  x Cout x 2 / cores`` not equal to the core size when the caller passes
  Cout.
* Soft warnings (listed in ``DumpTask.warnings``; replay prints them): cores
  the dump plainly turns off (En = 0) between enabled ones; cores after the
  last streaming one with size 0, or that the dump says nothing about (fewer
  cores than the chip's stream); core bases that do not step by the core
  size; an enabled core whose base the dump leaves out (a replay then takes
  the TD convention core i base = i x size); an L2 stride other than
  ``stride_per_cin x Cin``; a stride mirror that differs from the stride; a
  stream word other than the layout's. The transfers are still well defined
  in each of these cases.
"""

from __future__ import annotations

from ane_kdma import chip as chips
from ane_kdma.regdump.layout import FORMATS, FieldSpec, fields
from ane_kdma.regdump.parsers import DUMP_DIR, Dump, detect_format, parse_dump, read_dump
from ane_kdma.regdump.rules import CoreTransfer, DumpTask, load_task, task_from_dump
from ane_kdma.regdump.writer import describe, dump_words, render, write_dump

__all__ = [
    "DUMP_DIR",
    "FIELDS",
    "FORMATS",
    "TD_BYTES",
    "CoreTransfer",
    "Dump",
    "DumpTask",
    "FieldSpec",
    "describe",
    "detect_format",
    "dump_words",
    "load_task",
    "parse_dump",
    "read_dump",
    "render",
    "task_from_dump",
    "write_dump",
]


def __getattr__(name: str) -> object:
    """FIELDS and TD_BYTES: the m3 chip's, read when first asked for, not at import."""
    if name in ("FIELDS", "TD_BYTES"):
        m3 = chips.load(chips.DEFAULT_CHIP)
        return fields(m3.td, m3.cores) if name == "FIELDS" else m3.td.bytes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
