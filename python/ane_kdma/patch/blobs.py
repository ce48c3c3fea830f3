"""The weight file of an ML Program (MIL blob storage, version 2), read and written by byte range.

Why by hand: coremltools' loader decodes every weight into memory (a 2 GB
model takes twice that), and its writer re-encodes them. A patch changes a
few tensors and keeps the rest byte for byte, so this reads the file's
header and each referenced blob's 64-byte record, checks them against the
file, and writes a new file from byte ranges of the old one, one tensor at
a time: memory stays at the largest tensor that is sliced.

Layout (coremltools' MILBlob StorageFormat): a 64-byte header (count,
version 2); each blob is a 64-byte record (sentinel 0xDEADBEEF, data type,
size in bytes, data offset, padding bits) followed by its data, every record
and data block aligned to 64 bytes. A model's ``blobFileValue`` points at
the record.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ane_kdma.errors import InputError

HEADER = struct.Struct("<II56x")
RECORD = struct.Struct("<IIQQQ32x")
SENTINEL = 0xDEADBEEF
VERSION = 2
ALIGN = 64
COPY_CHUNK = 16 << 20  # bytes per read when a blob is copied whole


@dataclass(frozen=True)
class Blob:
    """One record of a weight file: where its data is, how long, of which stored type."""

    record: int  # offset of the 64-byte record (what the model points at)
    dtype: int  # the file's own data-type code, copied as it is
    size: int  # data bytes
    data: int  # offset of the data
    padding_bits: int


class WeightFile:
    """A weight file opened for reading; every record is checked before it is used."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path = path
        self.shown = shown
        try:
            self.fh: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by close())
            self.length = os.fstat(self.fh.fileno()).st_size
            head = self.fh.read(HEADER.size)
        except OSError as exc:
            raise InputError(f"{shown}: cannot read ({exc.strerror or exc})") from None
        if len(head) < HEADER.size:
            raise InputError(f"{shown}: truncated weight file ({self.length} bytes, no header)")
        self.count, version = HEADER.unpack(head)
        if version != VERSION:
            raise InputError(f"{shown}: weight file version {version}; patch reads version 2")
        self._cache: dict[int, Blob] = {}

    def close(self) -> None:
        self.fh.close()

    def blob(self, record: int) -> Blob:
        """The record at `record`, checked: sentinel, and data inside the file."""
        if record in self._cache:
            return self._cache[record]
        if record < HEADER.size or record + RECORD.size > self.length:
            raise InputError(
                f"{self.shown}: a weight offset ({record}) points outside the file "
                f"({self.length} bytes): truncated, or another model's weights?"
            )
        self.fh.seek(record)
        sentinel, dtype, size, data, pad = RECORD.unpack(self.fh.read(RECORD.size))
        if sentinel != SENTINEL:
            raise InputError(f"{self.shown}: no weight record at offset {record}")
        if data < record + RECORD.size or data + size > self.length:
            raise InputError(
                f"{self.shown}: the weight at offset {record} ({size} bytes at {data}) runs "
                f"past the end of the file ({self.length} bytes): truncated?"
            )
        b = Blob(record, dtype, size, data, pad)
        self._cache[record] = b
        return b

    def read(self, b: Blob) -> bytes:
        self.fh.seek(b.data)
        return self.fh.read(b.size)


# ---------------------------------------------------------------- sub-byte element packing


def unpack(raw: bytes, bits: int, count: int) -> np.ndarray:
    """Elements of `bits` bits packed little-end first into bytes, as uint8 (or a view for 8+)."""
    if bits >= 8:
        raise ValueError("unpack is for sub-byte types")
    u = np.frombuffer(raw, dtype=np.uint8)
    if 8 % bits == 0:  # 1, 2, 4 bits: whole elements per byte, by shifts (no bit array)
        per, mask = 8 // bits, (1 << bits) - 1
        n = -(-count // per)
        out = np.empty((n, per), dtype=np.uint8)
        for j in range(per):
            out[:, j] = (u[:n] >> (j * bits)) & mask
        return out.reshape(-1)[:count]
    flat = np.unpackbits(u, bitorder="little")[: count * bits]
    weights = (1 << np.arange(bits, dtype=np.uint8)).astype(np.uint8)
    return (flat.reshape(count, bits) * weights).sum(axis=1, dtype=np.uint8)


def pack(values: np.ndarray, bits: int) -> tuple[bytes, int]:
    """The inverse of `unpack`; also the padding bits in the last byte."""
    v = np.ascontiguousarray(values, dtype=np.uint8).reshape(-1)
    if 8 % bits == 0:
        per = 8 // bits
        pad = (-len(v) * bits) % 8
        padded = np.zeros(-(-len(v) // per) * per, dtype=np.uint8)
        padded[: len(v)] = v
        lanes = padded.reshape(-1, per)
        packed = np.zeros(len(lanes), dtype=np.uint8)
        for j in range(per):
            packed |= (lanes[:, j] << (j * bits)).astype(np.uint8)
        return packed.tobytes(), pad
    flat = ((v[:, None] >> np.arange(bits, dtype=np.uint8)) & 1).astype(np.uint8).reshape(-1)
    pad = (-len(flat)) % 8
    return np.packbits(flat, bitorder="little").tobytes(), pad


def slice_bytes(
    raw: bytes, shape: tuple[int, ...], bits: int, dim: int, a: int, b: int
) -> tuple[bytes, int]:
    """Elements a:b along `dim` of a C-ordered tensor stored in `raw`, re-stored the same way."""
    count = int(np.prod(shape))
    if bits >= 8:
        if (bits % 8) != 0 or len(raw) < count * bits // 8:
            raise ValueError("stored size does not match the shape")
        arr = np.frombuffer(raw, dtype=np.dtype(f"V{bits // 8}"), count=count).reshape(shape)
        index = [slice(None)] * len(shape)
        index[dim] = slice(a, b)
        return np.ascontiguousarray(arr[tuple(index)]).tobytes(), 0
    if len(raw) * 8 < count * bits:
        raise ValueError("stored size does not match the shape")
    arr = unpack(raw, bits, count).reshape(shape)
    index = [slice(None)] * len(shape)
    index[dim] = slice(a, b)
    return pack(arr[tuple(index)], bits)


# ---------------------------------------------------------------- writing


class Writer:
    """A new weight file, blob by blob; the same source (and slice) is written once."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.count = 0
        self.fh.write(HEADER.pack(0, VERSION))
        self._done: dict[object, int] = {}

    def _align(self) -> None:
        pos = self.fh.tell()
        if pos % ALIGN:
            self.fh.write(b"\0" * (ALIGN - pos % ALIGN))

    def add(self, key: object, dtype: int, size: int, pad: int, fill: Callable[[], None]) -> int:
        """A record for `key` (once), its data written by `fill`; returns the record offset."""
        if key in self._done:
            return self._done[key]
        self._align()
        record = self.fh.tell()
        data = record + RECORD.size
        self.fh.write(RECORD.pack(SENTINEL, dtype, size, data, pad))
        fill()
        if self.fh.tell() != data + size:
            raise ValueError("a blob wrote the wrong number of bytes")
        self.count += 1
        self._done[key] = record
        return record

    def copy(self, src: WeightFile, b: Blob) -> int:
        """A blob of `src` as it is, streamed in chunks."""

        def fill() -> None:
            src.fh.seek(b.data)
            left = b.size
            while left:
                chunk = src.fh.read(min(COPY_CHUNK, left))
                if not chunk:
                    raise InputError(f"{src.shown}: truncated while copying")
                self.fh.write(chunk)
                left -= len(chunk)

        return self.add((src.path, b.record), b.dtype, b.size, b.padding_bits, fill)

    def put(self, key: object, dtype: int, raw: bytes, pad: int) -> int:
        def fill() -> None:
            self.fh.write(raw)

        return self.add(key, dtype, len(raw), pad, fill)

    def finish(self) -> None:
        self._align()
        self.fh.seek(0)
        self.fh.write(HEADER.pack(self.count, VERSION))
