"""Confluent's framing of a key or value, read for a whole column at once
(numpy, no per-row Python).

    magic 0 (4-byte id):   | 0x00 | schema id: int32 big-endian | payload ...
    magic 1 (16-byte guid): | 0x01 | schema guid: 16 bytes (UUID, msb first) | payload ...
    Protobuf payloads start with the message indexes (kbatch.payloads.protobuf):
        zig-zag varint count | count zig-zag varints; a single 0 means [0]
    a schema id in a header (HeaderSchemaIdSerializer): the header
        "__value_schema_id" / "__key_schema_id" holds magic 1 + guid (or magic 0 +
        id) and the value is the payload alone

A null or empty value is a null row, not an error. Anything else shorter
than its framing, or with another magic byte, is a row that fails with
``ST_FRAME`` / ``ST_MAGIC``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    bytes, or None: the value then carries its own prefix)."""
    prefixed = split(rows)
    for i, raw in enumerate(header_ids):
        if raw is None or prefixed.null[i]:
            continue
        prefixed.start[i] = rows.offsets[i]
        prefixed.status[i] = 0
        if len(raw) == 1 + ID_BYTES and raw[0] == MAGIC_ID:
            prefixed.ids[i] = int.from_bytes(raw[1:], "big", signed=True)
            prefixed.guid_rows[i] = False
        elif len(raw) == 1 + GUID_BYTES and raw[0] == MAGIC_GUID:
            if prefixed.guids is None:
                prefixed.guids = np.zeros((len(rows), GUID_BYTES), np.uint8)
            prefixed.guids[i] = np.frombuffer(raw[1:1 + GUID_BYTES], np.uint8)
            prefixed.guid_rows[i] = True
            prefixed.ids[i] = -1
        else:
            prefixed.status[i] = Status.ST_MAGIC
    return prefixed
