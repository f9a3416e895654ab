"""The binary ClientMessage of the Session Manager data channel, shared by our client and the
simulated agent.

Layout (all integers big-endian, 120-byte header): HeaderLength (always 116, the offset of
PayloadLength), MessageType (32 ASCII bytes, space padded), SchemaVersion, CreatedDate (epoch
ms), SequenceNumber, Flags, MessageId (UUID with its two 8-byte halves swapped), SHA-256 of the
payload, PayloadType, PayloadLength, then the payload.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from hyperpod_nccl.bounded import loads_json

HEADER_LENGTH = 116
HEADER_SIZE = HEADER_LENGTH + 4
SCHEMA_VERSION = 1
_HEADER = struct.Struct(">I32sIQqQ16s32sII")

INPUT_STREAM_DATA = "input_stream_data"
OUTPUT_STREAM_DATA = "output_stream_data"
ACKNOWLEDGE = "acknowledge"
CHANNEL_CLOSED = "channel_closed"

FLAG_SYN = 1
FLAG_ACK = 3  # what acks and session-state messages carry in practice
# The agent reads command output in chunks of this size (StreamDataPayloadSize).
STREAM_CHUNK_BYTES = 1024
# The largest frame either side accepts (the websocket's max_size, and `decode`): 64 times the
# largest output chunk, room for the handshake's JSON; anything bigger is not this protocol.
MAX_FRAME_BYTES = 64 * 1024


class PayloadType(IntEnum):
    """What a stream message carries."""

    NONE = 0
    OUTPUT = 1
    ERROR = 2
    SIZE = 3
    PARAMETER = 4
    HANDSHAKE_REQUEST = 5
    HANDSHAKE_RESPONSE = 6
    HANDSHAKE_COMPLETE = 7
    ENC_CHALLENGE_REQUEST = 8
    ENC_CHALLENGE_RESPONSE = 9
    FLAG = 10
    STDERR = 11
    EXIT_CODE = 12


class CodecError(ValueError):
    """A frame that cannot be a ClientMessage (too short, bad header length)."""


def swap_uuid_halves(raw: bytes) -> bytes:
    """The wire form of a UUID: its two 8-byte halves exchanged (the operation is its own inverse)."""
    return raw[8:16] + raw[0:8]


@dataclass
class ClientMessage:
    """One data-channel message."""

    message_type: str
    sequence_number: int = 0
    flags: int = 0
    payload_type: int = PayloadType.NONE
    payload: bytes = b""
    message_id: uuid.UUID = field(default_factory=uuid.uuid4)
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    schema_version: int = SCHEMA_VERSION
    digest: bytes | None = None  # None: computed from the payload when encoding

    @property
    def digest_ok(self) -> bool:
        """Whether the carried digest matches the payload (an empty payload is never checked)."""
        if not self.payload:
            return True
        return self.digest == hashlib.sha256(self.payload).digest()

    def encode(self) -> bytes:
        """The binary frame."""
        digest = self.digest if self.digest is not None else hashlib.sha256(self.payload).digest()
        header = _HEADER.pack(
            HEADER_LENGTH,
            self.message_type.encode("ascii").ljust(32, b" "),
            self.schema_version,
            self.created_ms,
            self.sequence_number,
            self.flags,
            swap_uuid_halves(self.message_id.bytes),
            digest,
            int(self.payload_type),
            len(self.payload),
        )
        return header + self.payload

    def json(self) -> Any:
        """The payload parsed as JSON (`bounded.UnreadableData`, a ValueError, when it is not JSON
        or is nested past any real message: json itself would raise RecursionError)."""
        return loads_json(self.payload.decode("utf-8"), max_bytes=None)


def decode(frame: bytes) -> ClientMessage:
    """Parse a binary frame. The payload is everything after the header, as the plugin reads it."""
    if len(frame) < HEADER_SIZE:
        raise CodecError(f"frame of {len(frame)} bytes is shorter than the {HEADER_SIZE}-byte header")
    if len(frame) > MAX_FRAME_BYTES:
        raise CodecError(f"frame of {len(frame)} bytes is over the {MAX_FRAME_BYTES}-byte limit")
    (header_length, raw_type, schema, created, seq, flags, raw_id, digest, ptype, _length) = _HEADER.unpack_from(frame)
    if header_length != HEADER_LENGTH:
        raise CodecError(f"unexpected HeaderLength {header_length}")
    return ClientMessage(
        message_type=raw_type.decode("ascii", "replace").strip("\x00 \t\r\n"),
        sequence_number=seq,
        flags=flags,
        payload_type=ptype,
        payload=frame[header_length + 4 :],
        message_id=uuid.UUID(bytes=swap_uuid_halves(raw_id)),
        created_ms=created,
        schema_version=schema,
        digest=digest,
    )


def stream_message(
    message_type: str, seq: int, payload_type: PayloadType, payload: bytes, flags: int = 0
) -> ClientMessage:
    """An input/output stream message."""
    return ClientMessage(message_type, sequence_number=seq, flags=flags, payload_type=payload_type, payload=payload)


def json_bytes(document: Any) -> bytes:
    """Compact JSON, as the Go side writes it."""
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def acknowledgement(of: ClientMessage) -> ClientMessage:
    """The ack of a stream message (seq 0, flags 3, matched by sequence number)."""
    return ClientMessage(
        ACKNOWLEDGE,
        sequence_number=0,
        flags=FLAG_ACK,
        payload=json_bytes(
            {
                "AcknowledgedMessageType": of.message_type,
                "AcknowledgedMessageId": str(of.message_id),
                "AcknowledgedMessageSequenceNumber": of.sequence_number,
                "IsSequentialMessage": True,
            }
        ),
    )


def acknowledged_sequence(ack: ClientMessage) -> int:
    """The sequence number an acknowledge message acknowledges."""
    return int(ack.json()["AcknowledgedMessageSequenceNumber"])


def channel_closed(session_id: str, target: str, output: str = "") -> ClientMessage:
    """What MGS sends the client when the session ends."""
    message = ClientMessage(CHANNEL_CLOSED, sequence_number=0, flags=FLAG_ACK)
    message.payload = json_bytes(
        {
            "MessageId": str(message.message_id),
            "CreatedDate": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "DestinationId": target,
            "SessionId": session_id,
            "MessageType": CHANNEL_CLOSED,
            "SchemaVersion": 1,
            "Output": output,
        }
    )
    return message


def utf8_chunks(data: bytes, size: int = STREAM_CHUNK_BYTES) -> list[bytes]:
    """Split `data` into chunks of at most `size` bytes without cutting a UTF-8 sequence."""
    chunks: list[bytes] = []
    start = 0
    while start < len(data):
        end = min(start + size, len(data))
        if end < len(data):
            # Back off over continuation bytes (10xxxxxx) so the next chunk starts on a lead byte.
            cut = end
            while cut > start and (data[cut] & 0xC0) == 0x80:
                cut -= 1
            end = cut if cut > start else end
        chunks.append(data[start:end])
        start = end
    return chunks
