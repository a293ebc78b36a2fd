"""The common scalar event decoded for a whole chunk at once, without protobuf.

Nearly every record of a training log is one event holding one `simple_value` (what torch's and
tensorboardX's `add_scalar` and TF1 write). Serialised, such an event has a fixed shape (protobuf
writes fields in number order, and a oneof member even when it is 0):

    09 <wall_time: 8 bytes>  [10 <step: varint>]  2a <n1>  0a <n2>  0a <tag length> <tag>  15 <value: 4 bytes>

(`step` is absent when it is 0). Recognising that shape with numpy for every record of a chunk,
and reading its four fields the same way, costs a few array operations per byte position instead
of a protobuf parse per record. A record of any other shape is marked as not decoded here, and
the caller parses it with protobuf, in its place in the file; the two decodings agree field for
field (tests/integrations/test_tb_scalar_events.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tallyboard.integrations.tb_records import Chunk

MAX_VARINT = 10


@dataclass
class ScalarEvents:
    """Per record of a chunk: `decoded` (True: the fields below hold its values), the index of its
    tag in `tags`, its step, wall time and value (float32 widened to float64, NaN kept)."""

    decoded: np.ndarray
    tag_index: np.ndarray
    tags: list[str]
    steps: np.ndarray
    walls: np.ndarray
    values: np.ndarray


def _gather(chunk: Chunk, offsets: np.ndarray) -> np.ndarray:
    """Byte `offsets[i]` of record i's data. An offset past the record reads whatever follows it in
    the buffer: harmless, because a record is accepted only when its length equals the end of the
    shape read, which puts every byte read inside it."""
    return chunk.array[np.minimum(chunk.starts + offsets, len(chunk.array) - 1)].astype(np.int64)


def _little_endian(chunk: Chunk, offsets: np.ndarray, size: int) -> np.ndarray:
    value = np.zeros(len(offsets), dtype=np.uint64)
    for byte in range(size):
        value |= _gather(chunk, offsets + byte).astype(np.uint64) << np.uint64(8 * byte)
    return value


def decode(chunk: Chunk) -> ScalarEvents:
    count = len(chunk)
    zero = np.zeros(count, dtype=np.int64)
    ok = (_gather(chunk, zero) == 0x09) & (chunk.lengths >= 9 + 2 + 2 + 2 + 5)
    walls = _little_endian(chunk, zero + 1, 8).view(np.float64)
    has_step = _gather(chunk, zero + 9) == 0x10
    steps = np.zeros(count, dtype=np.uint64)
    step_bytes = np.zeros(count, dtype=np.int64)
    going = has_step.copy()
    for index in range(MAX_VARINT):
        byte = _gather(chunk, zero + 10 + index)
        steps |= np.where(going, byte & 0x7F, 0).astype(np.uint64) << np.uint64(7 * index)
        step_bytes += going
        going &= byte >= 0x80
    ok &= ~going  # a varint longer than 10 bytes is no step
    position = np.where(has_step, 10 + step_bytes, 9)
    summary_length = _gather(chunk, position + 1)
    value_length = _gather(chunk, position + 3)
    tag_length = _gather(chunk, position + 5)
    ok &= (_gather(chunk, position) == 0x2A) & (summary_length < 0x80)
    ok &= chunk.lengths == position + 2 + summary_length
    ok &= (_gather(chunk, position + 2) == 0x0A) & (value_length == summary_length - 2)
    ok &= (_gather(chunk, position + 4) == 0x0A) & (tag_length == value_length - 7) & (tag_length > 0)
    ok &= _gather(chunk, position + 6 + tag_length) == 0x15
    values = _little_endian(chunk, position + 7 + tag_length, 4).astype(np.uint32).view(np.float32)
    tag_index = np.full(count, -1, dtype=np.int64)
    tags: list[str] = []
    tag_starts = chunk.starts + position + 6
    for length in np.unique(tag_length[ok]).tolist():
        members = np.flatnonzero(ok & (tag_length == length))
        raw = chunk.array[tag_starts[members][:, None] + np.arange(length)]
        unique, inverse = np.unique(raw.view(f"V{length}").reshape(-1), return_inverse=True)
        for code, tag_bytes in enumerate(unique):
            try:
                tag = bytes(tag_bytes).decode("utf-8")
            except UnicodeDecodeError:  # protobuf refuses such a string: leave it to protobuf
                ok[members[inverse.reshape(-1) == code]] = False
                continue
            tag_index[members[inverse.reshape(-1) == code]] = len(tags)
            tags.append(tag)
    return ScalarEvents(ok, tag_index, tags, steps.view(np.int64), walls, values.astype(np.float64))
