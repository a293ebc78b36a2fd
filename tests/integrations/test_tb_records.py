"""The record framing and CRC checks of event files, and the vectorised decoding of common scalar
events, against TensorBoard's own implementations (its CRC, protobuf's parser)."""

from __future__ import annotations

import io
import os
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.tb_reference import framed
from tallyboard.integrations.tb_records import (
    FileRead,
    crc32c,
    mask,
    masked_crc32c_rows,
    read_chunks,
    read_records,
)
from tallyboard.integrations.tb_scalar_events import decode


@given(st.lists(st.binary(max_size=80), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_crc32c_equals_tensorboards_one_by_one_and_vectorised(blobs: list[bytes]) -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    for blob in blobs:
        assert mask(crc32c(blob)) == masked_crc32c(blob)
        rows = np.frombuffer(blob * 20, dtype=np.uint8).reshape(20, len(blob))
        assert set(masked_crc32c_rows(rows).tolist()) == {masked_crc32c(blob)}


@given(st.lists(st.binary(max_size=300), max_size=200))
@settings(max_examples=40, deadline=None)
def test_every_record_comes_back_with_the_offset_after_it(blobs: list[bytes]) -> None:
    data = b"".join(map(framed, blobs))
    result = FileRead("f", 0)
    got = list(read_records(io.BytesIO(data), "f", 0, result))
    assert [blob for blob, _ in got] == blobs
    assert [end for _, end in got] == list(np.cumsum([len(b) + 16 for b in blobs]))
    assert (result.offset, result.damage, result.incomplete) == (len(data), None, False)


def test_reading_resumes_at_an_offset_and_stops_before_an_unfinished_record() -> None:
    blobs = [os.urandom(n) for n in (5, 40, 0, 7)]
    data = b"".join(map(framed, blobs))
    start = len(framed(blobs[0]))
    result = FileRead("f", start)
    assert [blob for blob, _ in read_records(io.BytesIO(data[:-3]), "f", start, result)] == blobs[1:3]
    assert result.incomplete and result.damage is None and result.offset == len(data) - len(framed(blobs[3]))


def test_a_record_larger_than_a_chunk_is_read_whole() -> None:
    big = os.urandom((1 << 20) * 3 + 17)
    data = framed(b"x") + framed(big) + framed(b"y")
    assert [blob for blob, _ in read_records(io.BytesIO(data), "f", 0, FileRead("f", 0))] == [b"x", big, b"y"]


def test_damage_is_reported_at_the_offset_of_the_first_bad_record() -> None:
    blobs = [b"a" * 30] * 50 + [b"b" * 31] * 3
    data = bytearray(b"".join(map(framed, blobs)))
    bad_at = 46 * 46
    data[bad_at + 14] ^= 1  # inside record 47's data (vectorised group)
    result = FileRead("f", 0)
    chunks = list(read_chunks(io.BytesIO(bytes(data)), "f", 0, result))
    assert (
        sum(map(len, chunks)) == 46
        and result.damage.offset == bad_at
        and result.damage.reason == "CRC mismatch"
    )
    data = bytearray(b"".join(map(framed, blobs)))
    data[0:8] = struct.pack("<Q", 1 << 40)  # a length field no writer writes
    result = FileRead("f", 0)
    assert list(read_records(io.BytesIO(bytes(data)), "f", 0, result)) == []
    assert result.damage.offset == 0 and "implausible record length" in result.damage.reason


steps = st.one_of(st.integers(0, 3), st.integers(-(2**63), 2**63 - 1))
floats = st.floats(width=32, allow_nan=True, allow_infinity=True)
tags = st.text(min_size=0, max_size=20).filter(lambda t: "\x00" not in t)


@given(st.lists(st.tuples(tags, steps, floats, st.floats(0, 2e9)), min_size=1, max_size=60), st.booleans())
@settings(max_examples=80, deadline=None)
def test_common_scalar_events_decode_exactly_as_protobuf_parses_them(
    events: list[tuple[str, int, float, float]], mixed: bool
) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    protos = []
    for tag, step, value, wall in events:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        if mixed and step % 3 == 0:  # other shapes: two values, or metadata, are protobuf's to parse
            summary.value.add(tag="other", simple_value=1.0)
        protos.append(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    data = b"".join(framed(p.SerializeToString()) for p in protos)
    [chunk] = list(read_chunks(io.BytesIO(data), "f", 0, FileRead("f", 0)))
    fast = decode(chunk)
    for index in range(len(protos)):
        parsed = event_pb2.Event.FromString(chunk.data(index))
        if not mixed:  # the common shape is never left to protobuf (a tag and a wall time given)
            assert fast.decoded[index] == (bool(parsed.summary.value[0].tag) and parsed.wall_time != 0)
        if not fast.decoded[index]:
            assert len(parsed.summary.value) != 1 or not parsed.summary.value[0].tag or parsed.wall_time == 0
            continue
        [value] = parsed.summary.value
        assert fast.tags[fast.tag_index[index]] == value.tag
        assert int(fast.steps[index]) == parsed.step
        assert float(fast.walls[index]) == parsed.wall_time
        got, want = float(fast.values[index]), value.simple_value
        assert got == want or (got != got and want != want)
