"""A weight as the kernel DMA sees it: each core's payload, and where the notch sits.

Why a module of its own: the planner, the LLM estimate and the Core ML rewrite
all turn a weight (Cin, Cout, kernel, stored bits per weight) into per-core
bytes the same way, and all three ask the same question of a transfer: is it
within the notch window of a multiple of the ring?

The arithmetic (shared/spec/erratum.md, sections 1 and 6): the Cout output
channels are dealt to the chip's cores in groups of one channel per core, so
each core streams ceil(Cout / cores) x Cin x kernel area x bits / 8 bytes,
read as whole lines. Cout need not be a multiple of the core count: the last
group is partial and its missing channels cost nothing, so the payload counts
whole groups. Quantised weights are taken to stream as stored (packed, then
expanded on the core), so int8 moves half the bytes of fp16 and int4 a
quarter; that is an assumption, not a measurement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, lap_and_offset

#: stored bits per weight of each --dtype
DTYPE_BITS = {"fp16": 16, "int8": 8, "int4": 4}
DIM_DIGITS = 9  # no real dimension needs more; longer numbers are refused, not parsed
_SHAPE = re.compile(rf"[0-9]{{1,{DIM_DIGITS}}}(?:[xX][0-9]{{1,{DIM_DIGITS}}}){{1,3}}")
_DIM = re.compile(r"[0-9]+")


def dtype_bits(name: str) -> int:
    key = name.strip().lower()
    if key not in DTYPE_BITS:
        raise InputError(f"unknown dtype {name[:20]!r} (one of: {', '.join(DTYPE_BITS)})")
    return DTYPE_BITS[key]


def dtype_name(bits: int) -> str:
    return next((k for k, v in DTYPE_BITS.items() if v == bits), f"{bits}-bit")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Weight:
    """W[Cin, Cout] with a kh x kw kernel, `bits` stored bits per weight.

    `shards` > 1 makes it an LM head: the vocabulary (Cout) is cut into that
    many equal shards of ceil(Cout / shards) channels, each its own weight,
    issued back to back (ANEMLL's layout; a short last shard is taken as
    padded to the others, which all bundled vocabularies divide exactly).
    """

    cin: int  # input channels: the contracting dimension, streamed whole for each output
    cout: int  # output channels, dealt to the cores one per core per group
    kh: int = 1  # kernel height (only the area counts)
    kw: int = 1
    bits: int = 16  # stored bits per weight (DTYPE_BITS)
    shards: int = 1  # an LM head's vocabulary shards, each its own weight
    #: a compressed weight's blocks (a LUT per group of channels, a scale per block): a cut
    #: along Cin or Cout falls on a multiple of these so that every part is an exact slice
    cin_block: int = 1
    cout_block: int = 1
    #: a compressed weight's LUT, scale and offset bits per output channel (over all of Cin),
    #: taken to stream with the channel's data, as the stored form is (an assumption)
    side_bits: int = 0

    def __post_init__(self) -> None:
        for name in ("cin", "cout", "kh", "kw", "bits", "shards", "cin_block", "cout_block"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise InputError(f"weight {name} {v!r} is not a positive integer")
        if isinstance(self.side_bits, bool) or not isinstance(self.side_bits, int):
            raise InputError(f"weight side_bits {self.side_bits!r} is not an integer")
        if self.side_bits < 0:
            raise InputError(f"weight side_bits {self.side_bits} is negative")
        if self.shards > self.cout:
            raise InputError(f"{self.shards} shards of a {self.cout}-channel Cout")

    # ------------------------------------------------------------ sizes
    @property
    def kernel(self) -> int:
        return self.kh * self.kw

    @property
    def shard_cout(self) -> int:
        """Output channels of one shard (all of Cout when there is one)."""
        return ceil_div(self.cout, self.shards)

    def with_shards(self, shards: int) -> Weight:
        return Weight(
            self.cin,
            self.cout,
            self.kh,
            self.kw,
            self.bits,
            shards,
            self.cin_block,
            self.cout_block,
        )

    def groups(self, cores: int) -> int:
        """Groups of `cores` output channels in one shard (the last may be partial)."""
        return ceil_div(self.shard_cout, cores)

    def group_bits(self) -> int:
        """Bits one core streams for one output channel: Cin x kernel area x bits (plus its
        LUT, scale and offset bits, for a compressed weight)."""
        return self.cin * self.kernel * self.bits + self.side_bits

    def channel_bits(self, cores: int) -> int:
        """Bits one core streams for one input channel of one shard."""
        return self.groups(cores) * self.kernel * self.bits

    def bytes_per_core(self, cores: int) -> int:
        """One shard's payload on each core, in bytes."""
        return ceil_div(self.groups(cores) * self.group_bits(), 8)

    def check(self, chip: Chip) -> Weight:
        """A weight the size register can hold (two copies of a shard, for a sharded head)."""
        limit = (1 << ADDR_BITS) // (2 if self.shards > 1 else 1)
        if self.bytes_per_core(chip.cores) >= limit:
            what = "a shard's share (twice, back to back)" if self.shards > 1 else "a core's share"
            raise InputError(f"weight {self}: {what} exceeds the {ADDR_BITS}-bit size register")
        return self

    # ------------------------------------------------------------ text
    def __str__(self) -> str:
        tail = f"x{self.kh}x{self.kw}" if self.kernel > 1 else ""
        return f"{self.cin}x{self.cout}{tail}"

    @property
    def shard_shape(self) -> str:
        tail = f"x{self.kh}x{self.kw}" if self.kernel > 1 else ""
        return f"{self.cin}x{self.shard_cout}{tail}"

    @classmethod
    def parse(cls, text: str, bits: int = 16, shards: int = 1) -> Weight:
        """CINxCOUT or CINxCOUTxKHxKW, plain ASCII digits, each at most nine of them."""
        shown = text if len(text) <= 40 else text[:37] + "..."
        t = text.strip()
        m = _SHAPE.fullmatch(t) if t.isascii() and len(t) <= 4 * (DIM_DIGITS + 1) else None
        dims = [int(d) for d in _DIM.findall(t)] if m else []
        if len(dims) not in (2, 4):
            raise InputError(
                f"shape {shown!r} is not CINxCOUT or CINxCOUTxKHxKW "
                f"(e.g. 2048x8192; at most {DIM_DIGITS} digits each)"
            )
        if 0 in dims:
            raise InputError(f"shape {shown!r} has a zero dimension")
        kh, kw = dims[2:] if len(dims) == 4 else (1, 1)
        return cls(dims[0], dims[1], kh, kw, bits, shards)


# ---------------------------------------------------------------- the notch


def window_lines(chip: Chip) -> int:
    """Half-width of the notch: one prefetch clamp (256 lines on the M3; recovery at |x| = 256)."""
    return chip.geometry.prefetch_max_lines


def lines_of(size_bytes: int, chip: Chip) -> int:
    return ceil_div(size_bytes, chip.line_bytes)


def in_window(lines: int, chip: Chip) -> bool:
    """Within the window of a non-zero multiple of the ring: |x| < clamp, k >= 1."""
    k, x = lap_and_offset(lines, chip.ring_lines)
    return k >= 1 and abs(x) < window_lines(chip)


def clearance(lines: np.ndarray, ring_lines: int) -> np.ndarray:
    """Distance in lines to the nearest non-zero multiple of the ring (vectorised)."""
    n = np.asarray(lines, dtype=np.int64)
    k = np.maximum(1, (2 * n + ring_lines) // (2 * ring_lines))
    return np.abs(n - k * ring_lines)
