"""The data-channel ClientMessage codec: header layout, digest, swapped UUID halves, chunking."""

from __future__ import annotations

import hashlib
import struct
import uuid

import pytest

from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.codec import ClientMessage, PayloadType


def test_header_layout_matches_the_wire_format() -> None:
    message_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    payload = b'{"cols":300,"rows":100}'
    frame = ClientMessage(
        codec.INPUT_STREAM_DATA,
        sequence_number=7,
        flags=0,
        payload_type=PayloadType.SIZE,
        payload=payload,
        message_id=message_id,
        created_ms=1_700_000_000_123,
    ).encode()
    assert len(frame) == 120 + len(payload)
    assert struct.unpack_from(">I", frame, 0)[0] == 116
    assert frame[4:36] == b"input_stream_data".ljust(32, b" ")
    assert struct.unpack_from(">I", frame, 36)[0] == 1
    assert struct.unpack_from(">Q", frame, 40)[0] == 1_700_000_000_123
    assert struct.unpack_from(">q", frame, 48)[0] == 7
    # MessageId halves are swapped on the wire.
    assert frame[64:72] == bytes.fromhex("8899aabbccddeeff")
    assert frame[72:80] == bytes.fromhex("0011223344556677")
    assert frame[80:112] == hashlib.sha256(payload).digest()
    assert struct.unpack_from(">I", frame, 112)[0] == PayloadType.SIZE
    assert struct.unpack_from(">I", frame, 116)[0] == len(payload)
    assert frame[120:] == payload


def test_decode_round_trips_and_strips_padding() -> None:
    original = codec.stream_message(codec.OUTPUT_STREAM_DATA, 3, PayloadType.OUTPUT, "ü".encode(), flags=1)
    decoded = codec.decode(original.encode())
    assert decoded.message_type == "output_stream_data"
    assert (decoded.sequence_number, decoded.flags, decoded.payload_type) == (3, 1, PayloadType.OUTPUT)
    assert decoded.message_id == original.message_id
    assert decoded.payload == "ü".encode()
    assert decoded.digest_ok


def test_a_corrupted_digest_is_detected_but_empty_payloads_are_not_checked() -> None:
    frame = bytearray(codec.stream_message(codec.OUTPUT_STREAM_DATA, 0, PayloadType.OUTPUT, b"data").encode())
    frame[80] ^= 0xFF
    assert not codec.decode(bytes(frame)).digest_ok
    empty = ClientMessage(codec.CHANNEL_CLOSED, digest=b"\x00" * 32)
    assert codec.decode(empty.encode()).digest_ok


def test_short_frames_and_foreign_header_lengths_are_rejected() -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(b"\x00" * 50)
    frame = bytearray(ClientMessage(codec.ACKNOWLEDGE).encode())
    frame[3] = 99
    with pytest.raises(codec.CodecError):
        codec.decode(bytes(frame))


def test_ack_names_the_message_by_sequence_and_plain_uuid() -> None:
    message = codec.stream_message(codec.OUTPUT_STREAM_DATA, 12, PayloadType.OUTPUT, b"x")
    ack = codec.decode(codec.acknowledgement(message).encode())
    assert (ack.message_type, ack.sequence_number, ack.flags) == ("acknowledge", 0, 3)
    body = ack.json()
    assert body["AcknowledgedMessageId"] == str(message.message_id)
    assert codec.acknowledged_sequence(ack) == 12


def test_utf8_chunks_never_split_a_character() -> None:
    data = ("a" * 1023 + "✓" + "é" * 700).encode()
    chunks = codec.utf8_chunks(data)
    assert b"".join(chunks) == data
    assert all(len(c) <= 1024 for c in chunks)
    for chunk in chunks:
        chunk.decode("utf-8")  # raises if a sequence was cut
    assert len(chunks[0]) == 1023
