"""Confluent's framing of a key or value, read for a whole column at once
(numpy, no per-row Python).

    magic 0 (4-byte id):   | 0x00 | schema id: int32 big-endian | payload ...
    magic 1 (16-byte guid): | 0x01 | schema guid: 16 bytes (UUID, msb first) | payload ...
    Protobuf payloads start with the message indexes (kbatch.payloads.protobuf):
        zig-zag varint count | count zig-zag varints; a single 0 means [0]
    a schema id in a header (HeaderSchemaIdSerializer): the header
        "__value_schema_id" / "__key_schema_id" holds magic 1 + guid (or magic 0 +
        id), then for Protobuf the message indexes (SchemaId.guidToBytes /
        idToBytes); the value is the datum alone

A null value is a null row, not an error; so is an empty value in prefix
framing (it has no framing). With the id in a header, an empty value is a
datum of zero bytes (an Avro record without fields, a Protobuf message of
defaults). Anything else shorter than its framing, or with another magic
byte, is a row that fails with ``ST_FRAME`` / ``ST_MAGIC``; bytes after the
id in a header fail the row unless the payload is Protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kbatch._core._avro import Status

MAGIC_ID = 0
MAGIC_GUID = 1
ID_BYTES = 4
GUID_BYTES = 16
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"

REASONS = {
    Status.ST_SHORT: "the datum ends early (truncated)",
    Status.ST_VARINT: "a varint runs on past its longest form",
    Status.ST_BOOL: "a boolean byte that is neither 0 nor 1",
    Status.ST_UTF8: "a string that is not valid UTF-8",
    Status.ST_LENGTH: "a negative length",
    Status.ST_UNION_INDEX: "a union branch index out of range",
    Status.ST_ENUM_INDEX: "an enum index out of range",
    Status.ST_ENUM_SYMBOL: "an enum symbol the reader's schema lacks (and it has no default)",
    Status.ST_NO_BRANCH: "a union branch the reader's schema cannot take",
    Status.ST_DECIMAL: "a decimal beyond its precision",
    Status.ST_UUID: "a uuid that is not 8-4-4-4-12 hexadecimal digits",
    Status.ST_TRAILING: "bytes left over after the datum",
    Status.ST_TOO_DEEP: "a recursive value nested deeper than max_depth",
    Status.ST_LIMIT: "more items than a decode may hold (16 Mi items that take no bytes), "
                     "or a column past 2 GiB",
    Status.ST_NOMEM: "out of memory",
    Status.ST_BLOCK: "a block whose byte size disagrees with its items",
    Status.ST_RANGE: "a value the Arrow type cannot hold",
    Status.ST_WIRETYPE: "a field whose wire type its type cannot have",
    Status.ST_TAG: "a field tag that is not valid (field number 0, wire type 4, 6 or 7, an unmatched group end)",
    Status.ST_REQUIRED: "a required field is missing",
    Status.ST_PACKED: "a packed run that is not whole values",
    Status.ST_MAGIC: "a magic byte that is neither 0 nor 1 (not Schema Registry framing)",
    Status.ST_FRAME: "shorter than its Schema Registry framing",
    Status.ST_UNKNOWN_ID: "a schema id the registry does not hold",
    Status.ST_INDEXES: "Protobuf message indexes that do not parse or name no message",
    Status.ST_RESOLVE: "the writer's schema cannot be read with the reader's",
}


@dataclass
class Rows:
    """A binary column as flat buffers: row i is ``data[offsets[i]:offsets[i + 1]]``,
    null where ``valid[i]`` is False."""
    data: np.ndarray        # uint8
    offsets: np.ndarray     # int64, n + 1
    valid: np.ndarray       # bool, n

    def __len__(self) -> int:
        return len(self.valid)


@dataclass
class Frames:
    """Each row's framing: ``status`` (0, or a framing Status), ``null`` (a
    null or empty value), ``ids`` (schema id, -1 when none or by guid),
    ``guids`` (16-byte rows for magic 1, else None), and the payload as
    ``data[start[i]:end[i])``."""
    status: np.ndarray      # int32
    null: np.ndarray        # bool
    ids: np.ndarray         # int64
    guid_rows: np.ndarray   # bool: magic 1
    guids: np.ndarray | None  # uint8 [n, 16] (zeros where not magic 1)
    start: np.ndarray       # int64
    end: np.ndarray         # int64
    header_rows: np.ndarray | None = None   # bool: the id came from a header
    header_rest: dict = field(default_factory=dict)   # row -> header bytes after the id
    reasons: dict = field(default_factory=dict)       # row -> why its framing failed


def gather(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """``data[at[i]:at[i] + width]`` as rows of a uint8 [n, width] array (every
    window must lie inside ``data``: the caller checked the lengths)."""
    if len(at) == 0:
        return np.zeros((0, width), np.uint8)
    return data[at[:, None] + np.arange(width, dtype=np.int64)]


def split(rows: Rows) -> Frames:
    """The framing of every row (prefix form)."""
    n = len(rows)
    start = rows.offsets[:-1].astype(np.int64, copy=True)
    end = rows.offsets[1:].astype(np.int64, copy=False)
    length = end - start
    null = ~rows.valid | (length == 0)
    status = np.zeros(n, np.int32)
    ids = np.full(n, -1, np.int64)
    magic = np.full(n, -1, np.int16)
    has = ~null
    magic[has] = rows.data[start[has]]
    is_id = has & (magic == MAGIC_ID)
    is_guid = has & (magic == MAGIC_GUID)
    status[has & ~is_id & ~is_guid] = Status.ST_MAGIC
    short_id = is_id & (length < 1 + ID_BYTES)
    short_guid = is_guid & (length < 1 + GUID_BYTES)
    status[short_id | short_guid] = Status.ST_FRAME
    ok_id = is_id & ~short_id
    ok_guid = is_guid & ~short_guid
    if ok_id.any():
        raw = gather(rows.data, start[ok_id] + 1, ID_BYTES).astype(np.int64)
        v = (raw[:, 0] << 24) | (raw[:, 1] << 16) | (raw[:, 2] << 8) | raw[:, 3]
        ids[ok_id] = np.where(v >= 1 << 31, v - (1 << 32), v)     # Java's int: signed
        start[ok_id] += 1 + ID_BYTES
    guids = None
    if ok_guid.any():
        guids = np.zeros((n, GUID_BYTES), np.uint8)
        guids[ok_guid] = gather(rows.data, start[ok_guid] + 1, GUID_BYTES)
        start[ok_guid] += 1 + GUID_BYTES
    return Frames(status, null, ids, ok_guid, guids, start, end)


def from_headers(rows: Rows, header_ids: list) -> Frames:
    """Framing taken from a header per row (``header_ids[i]``: the header's
    bytes, or None: the value then carries its own prefix). A header row's
    bytes after the id or guid (Protobuf's message indexes) are kept in
    ``header_rest``."""
    prefixed = split(rows)
    prefixed.header_rows = np.zeros(len(rows), bool)
    for i, raw in enumerate(header_ids):
        if raw is None or not rows.valid[i]:
            continue
        raw = bytes(raw)
        prefixed.start[i] = rows.offsets[i]
        prefixed.status[i] = 0
        prefixed.null[i] = False        # the id is in the header: even no bytes are a datum
        prefixed.header_rows[i] = True
        prefixed.guid_rows[i] = False
        prefixed.ids[i] = -1
        if raw[:1] == bytes([MAGIC_ID]) and len(raw) >= 1 + ID_BYTES:
            prefixed.ids[i] = int.from_bytes(raw[1:1 + ID_BYTES], "big", signed=True)
            rest = raw[1 + ID_BYTES:]
        elif raw[:1] == bytes([MAGIC_GUID]) and len(raw) >= 1 + GUID_BYTES:
            if prefixed.guids is None:
                prefixed.guids = np.zeros((len(rows), GUID_BYTES), np.uint8)
            prefixed.guids[i] = np.frombuffer(raw[1:1 + GUID_BYTES], np.uint8)
            prefixed.guid_rows[i] = True
            rest = raw[1 + GUID_BYTES:]
        else:
            prefixed.status[i] = Status.ST_FRAME if raw[:1] in (b"\x00", b"\x01") \
                else Status.ST_MAGIC
            if prefixed.status[i] == Status.ST_FRAME:
                prefixed.reasons[i] = "a schema id header shorter than its framing"
            continue
        if rest:
            prefixed.header_rest[i] = rest
    return prefixed


def refuse_header_rest(frames: Frames, live: np.ndarray, kind: str) -> None:
    """Rows whose schema id header has bytes after the id fail (``ST_FRAME``)
    unless the payload is Protobuf (whose header carries message indexes)."""
    for i in sorted(frames.header_rest):
        if live[i]:
            frames.status[i] = Status.ST_FRAME
            frames.reasons[i] = (f"{len(frames.header_rest[i])} byte(s) after the schema id "
                                 f"in its header, which only Protobuf has (message indexes), "
                                 f"not {kind}")
            live[i] = False
