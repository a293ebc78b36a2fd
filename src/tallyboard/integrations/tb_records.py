"""TFRecord framing of TensorBoard event files, read in chunks with every CRC checked.

A record is: length (uint64 LE), masked CRC32C of those 8 bytes (uint32 LE), the data, masked
CRC32C of the data. Why this module exists instead of TensorBoard's own reader: TensorBoard checks
the CRCs in pure Python one byte at a time, which is most of what a million-scalar import cost.
Here a chunk's records are checked together: the CRC32C table lookup runs as one numpy operation
per byte position over every record of the same length (event files hold few distinct lengths:
one scalar event of a tag is as long as the next). Memory is one chunk, whatever the file's size.

A damaged record ends the file: what comes before it is kept, the damage is reported with its byte
offset. An incomplete record at the end is not damage but a writer still at work: reading stops
before it, and the next read of the file resumes there.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

CHUNK_BYTES = 1 << 20
LENGTH = struct.Struct("<Q")
FOOTER = 4
# Fewer records than this of one length are checked one by one: numpy's per-call cost would dominate.
VECTOR_MIN = 16
MAX_RECORD_BYTES = 1 << 31  # a larger length field is damage, never a record (TensorBoard's limit too)


def _table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[byte] = crc
    return table


TABLE = _table()
_TABLE_LIST = [int(value) for value in TABLE]


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli) of `data`, one byte at a time (for short inputs and tests)."""
    crc = 0xFFFFFFFF
    table = _TABLE_LIST
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """TFRecord's masking of a CRC (rotate right by 15, add a constant), as stored in the file."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """Masked CRC32C of every row of a 2-d uint8 array (all rows the same length), vectorised."""
    return masked_crc32c_at(rows.reshape(-1), np.arange(rows.shape[0]) * rows.shape[1], rows.shape[1])


def masked_crc32c_at(array: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """Masked CRC32C of the `length` bytes of `array` (uint8) at each of `starts`, vectorised over
    the starts: one table lookup per byte position, memory O(len(starts))."""
    crc = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    for offset in range(length):
        crc = TABLE[(crc ^ array[starts + offset]) & 0xFF] ^ (crc >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    rotated = ((crc >> 15) | (crc << 17)).astype(np.uint64)
    return ((rotated + 0xA282EAD8) & 0xFFFFFFFF).astype(np.uint32)


@dataclass(frozen=True)
class Damage:
    """Where a file stops being readable, and why."""

    path: str
    offset: int
    reason: str


@dataclass
class FileRead:
    """The outcome of reading one file: how far it was read (`offset`: the next record starts
    there) and, when reading stopped at damage, the damage."""

    path: str
    offset: int
    damage: Damage | None = None
    incomplete: bool = False  # bytes of an unfinished record follow `offset`


@dataclass
class Chunk:
    """The whole, intact records of one read: `buffer` holds them, `array` is the same bytes as
    uint8; record i's data is `buffer[starts[i] : starts[i] + lengths[i]]` and the file offset
    just after it is `ends[i]`."""

    buffer: bytes
    array: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def data(self, index: int) -> bytes:
        start = int(self.starts[index])
        return self.buffer[start : start + int(self.lengths[index])]


def _frames(buffer: bytes) -> tuple[list[int], list[int], int, str | None]:
    """Record starts and data lengths of the whole records in `buffer`; the offset where the whole
    records end; a reason when a length field is implausible (damage), else None. (The hottest
    loop of an import: kept to one unpack and one comparison per record.)"""
    starts: list[int] = []
    lengths: list[int] = []
    add_start, add_length = starts.append, lengths.append
    unpack = LENGTH.unpack_from
    position, end = 0, len(buffer)
    last_header = end - 12
    while position <= last_header:
        (length,) = unpack(buffer, position)
        stop = position + 16 + length
        if stop > end:
            if length > MAX_RECORD_BYTES:
                return starts, lengths, position, f"implausible record length {length}"
            break
        add_start(position)
        add_length(length)
        position = stop
    return starts, lengths, position, None


def _first_bad(buffer: bytes, array: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> int | None:
    """Index of the first record whose header or data CRC does not match, or None."""
    bad = masked_crc32c_at(array, starts, 8) != _uint32_at(array, starts + 8)
    for length in np.unique(lengths).tolist():
        members = np.flatnonzero(lengths == length)
        data_starts = starts[members] + 12
        if len(members) < VECTOR_MIN:
            computed = np.array(
                [mask(crc32c(buffer[s : s + length])) for s in data_starts.tolist()], dtype=np.uint32
            )
        else:
            computed = masked_crc32c_at(array, data_starts, length)
        bad[members] |= computed != _uint32_at(array, data_starts + length)
    failing = np.flatnonzero(bad)
    return int(failing[0]) if len(failing) else None


def _uint32_at(array: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each of `starts`."""
    value = array[starts].astype(np.uint32)
    for byte in (1, 2, 3):
        value |= array[starts + byte].astype(np.uint32) << np.uint32(8 * byte)
    return value


def read_chunks(file: BinaryIO, path: str, offset: int, result: FileRead) -> Iterator[Chunk]:
    """The whole, intact records of `file` from byte `offset` on, a chunk at a time, in order.

    `result` is filled as reading goes: `offset` where the next read should start (just after the
    last record handed out), `damage` when a damaged record ended the read, `incomplete` when the
    file ends inside a record."""
    result.offset = offset
    file.seek(offset)
    pending = b""
    while True:
        read = file.read(_wanted(pending))
        buffer = pending + read if pending else read
        base = result.offset
        starts_list, lengths_list, end, reason = _frames(buffer)
        array = np.frombuffer(buffer, dtype=np.uint8)
        starts = np.array(starts_list, dtype=np.int64)
        lengths = np.array(lengths_list, dtype=np.int64)
        bad = _first_bad(buffer, array, starts, lengths) if len(starts) else None
        if bad is not None:
            starts, lengths, reason = starts[:bad], lengths[:bad], "CRC mismatch"
        if len(starts):
            ends = base + starts + 12 + lengths + FOOTER
            yield Chunk(buffer, array, starts + 12, lengths, ends)
            result.offset = int(ends[-1])
        if reason is not None:
            result.damage = Damage(path, result.offset, reason)
            return
        pending = buffer[end:]
        if not read:
            result.incomplete = bool(pending)
            return


def _wanted(pending: bytes) -> int:
    """Bytes to read next: a chunk, or all that a record larger than a chunk still lacks (so a
    large record is read in one go, not re-scanned a chunk at a time)."""
    if len(pending) < 12:
        return CHUNK_BYTES
    (length,) = LENGTH.unpack_from(pending)
    return max(CHUNK_BYTES, min(length, MAX_RECORD_BYTES) + 16 - len(pending))


def read_records(file: BinaryIO, path: str, offset: int, result: FileRead) -> Iterator[tuple[bytes, int]]:
    """(data, file offset just after it) of every whole, intact record, one at a time (`read_chunks`)."""
    for chunk in read_chunks(file, path, offset, result):
        for index, end in enumerate(chunk.ends.tolist()):
            yield chunk.data(index), end
