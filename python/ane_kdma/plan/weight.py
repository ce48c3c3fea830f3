"""A weight as the kernel DMA sees it: each core's payload, and where the notch sits.

Why a module of its own: the planner, the LLM estimate and the Core ML rewrite
all turn a weight (Cin, Cout, kernel, stored bits per weight) into per-core
bytes the same way, and all three ask the same question of a transfer: is it
within the notch window of a multiple of the ring?

The arithmetic (docs/erratum.md, sections 1 and 6): the Cout output
channels are dealt to the chip's cores in groups of one channel per core, so
each core streams ceil(Cout / cores) x Cin x kernel area x bits / 8 bytes,
read as whole lines. Cout need not be a multiple of the core count: the last
group is partial and its missing channels cost nothing, so the payload counts
whole groups. Quantised weights are taken to stream as stored (packed, then
expanded on the core), so int8 moves half the bytes of fp16 and int4 a
quarter; that is an assumption, not a measurement.

A compressed weight (``patch`` on a palettized or quantized program) streams
its LUTs, scales and offsets as well, as stored: each task that decompresses
with a LUT or scale reads it. So a side tensor counts by where it varies. One
that varies along Cout (a LUT per group of output channels, a scale per
channel) goes with its channels, a share per output channel, as the weight's
data does; one that does not (a per-tensor LUT or scale) is read whole by
every core. Along Cin, one that varies (a scale per block of input channels)
is sliced with the input channels, so a Cin part reads its share; one that
does not is read whole by every Cin part, since the rewrite keeps it whole in
each part's constexpr op (see :meth:`Weight.cin_bits`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from ane_kdma.chip import Chip
from ane_kdma.errors import InputError
from ane_kdma.hw import ADDR_BITS, lap_and_offset

#: stored bits per weight of each --dtype
DTYPE_BITS = {"fp16": 16, "int8": 8, "int4": 4}
#: a compressed weight's side-tensor fields (LUT, scale and offset bits; see Weight)
SIDE_FIELDS = ("side_bits", "side_whole_bits", "core_bits", "core_whole_bits")
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
    #: a compressed weight's LUT, scale and offset bits, taken to stream as stored (an
    #: assumption; see the module docstring), by where the tensor varies:
    side_bits: int = 0  # per output channel, over all of Cin; a Cin part reads its share
    side_whole_bits: int = 0  # per output channel; constant along Cin: every Cin part reads it
    core_bits: int = 0  # constant along Cout (every core reads it); a Cin part reads its share
    core_whole_bits: int = 0  # constant along both: every core and every part reads it whole

    def __post_init__(self) -> None:
        for name in ("cin", "cout", "kh", "kw", "bits", "shards", "cin_block", "cout_block"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise InputError(f"weight {name} {v!r} is not a positive integer")
        for name in SIDE_FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(f"weight {name} {v!r} is not an integer")
            if v < 0:
                raise InputError(f"weight {name} {v} is negative")
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
        return replace(self, shards=shards)

    def groups(self, cores: int) -> int:
        """Groups of `cores` output channels in one shard (the last may be partial)."""
        return ceil_div(self.shard_cout, cores)

    def group_bits(self) -> int:
        """Bits one core streams for one output channel: Cin x kernel area x bits (plus its
        LUT, scale and offset bits, for a compressed weight)."""
        return self.cin * self.kernel * self.bits + self.side_bits + self.side_whole_bits

    def fixed_bits(self) -> int:
        """Bits each core streams for any task whatever its output channels: the side tensors
        that do not vary along Cout (a per-tensor LUT or scale), read whole by every core."""
        return self.core_bits + self.core_whole_bits

    def channel_bits(self, cores: int) -> int:
        """Bits one core streams for one input channel of one shard (its data alone)."""
        return self.groups(cores) * self.kernel * self.bits

    def cin_bits(self, cores: int) -> tuple[int, int, int]:
        """A Cin part of c input channels streams (c x num / per + fixed) bits on each core:
        its data and its share of the side tensors that vary along Cin (num / per bits a
        channel), plus every side tensor that does not, whole (`fixed`: each part's op keeps
        it whole and must read it to decompress)."""
        data = self.channel_bits(cores)
        shared = self.groups(cores) * self.side_bits + self.core_bits
        fixed = self.groups(cores) * self.side_whole_bits + self.core_whole_bits
        if not shared:
            return data, 1, fixed
        return data * self.cin + shared, self.cin, fixed

    def bytes_per_core(self, cores: int) -> int:
        """One shard's payload on each core, in bytes."""
        return ceil_div(self.groups(cores) * self.group_bits() + self.fixed_bits(), 8)

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
