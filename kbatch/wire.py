"""The wire vocabulary: numbers Kafka's on-disk formats give meaning to.

One home for what every reader, writer and tool names: codec ids, batch
attribute bits, header field offsets, control-record types. Compiled code
cimports the same numbers from ``_wire.pxd``; a test checks the two agree.

Record batch (magic 2, DefaultRecordBatch.java), big-endian:

    off  field                 type
     0   baseOffset            int64
     8   batchLength           int32   bytes after this field: batch = 12 + length
    12   partitionLeaderEpoch  int32
    16   magic                 int8
    17   crc                   uint32  CRC-32C of bytes [21, end of batch)
    21   attributes            int16   Attr bits
    23   lastOffsetDelta       int32
    27   baseTimestamp         int64
    35   maxTimestamp          int64
    43   producerId            int64
    51   producerEpoch         int16
    53   baseSequence          int32
    57   recordsCount          int32
    61   records

Legacy message (magic 0/1, in a message set): offset int64 | size int32 |
crc uint32 | magic int8 | attributes int8 | [timestamp int64, magic 1] |
key bytes | value bytes.
"""

from __future__ import annotations

import enum

__all__ = ["Attr", "Codec", "ControlType", "Header", "TimestampType",
           "LOG_OVERHEAD", "HEADER_V2", "CRC_START", "ATTR_CODEC_MASK",
           "LEGACY_ATTR_CODEC_MASK", "LEGACY_ATTR_LOG_APPEND_TIME",
           "END_TXN_MARKERS", "CODEC_NAMES", "CONTROL_TYPE_NAMES", "UNBOUNDED", "INT64_MIN",
           "INT64_MAX",
           "codec_name", "codec_id", "control_type_name"]


class Header(enum.IntEnum):
    """Byte offsets of the magic-2 batch header fields."""

    BASE_OFFSET = 0
    LENGTH = 8
    PARTITION_LEADER_EPOCH = 12
    MAGIC = 16
    CRC = 17
    ATTRIBUTES = 21
    LAST_OFFSET_DELTA = 23
    BASE_TIMESTAMP = 27
    MAX_TIMESTAMP = 35
    PRODUCER_ID = 43
    PRODUCER_EPOCH = 51
    BASE_SEQUENCE = 53
    RECORDS_COUNT = 57
    RECORDS = 61


LOG_OVERHEAD = 12            # baseOffset + batchLength, in every format
HEADER_V2 = int(Header.RECORDS)
CRC_START = int(Header.ATTRIBUTES)


class Codec(enum.IntEnum):
    """Compression codec ids (attributes bits 0-2, every magic)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """The lower-case name Kafka's tools print (``compresscodec: lz4``)."""
        return self.name.lower()


class Attr(enum.IntFlag):
    """Magic-2 batch attribute bits."""

    LOG_APPEND_TIME = 0x08
    TRANSACTIONAL = 0x10
    CONTROL = 0x20
    DELETE_HORIZON = 0x40


ATTR_CODEC_MASK = 0x07
LEGACY_ATTR_CODEC_MASK = 0x07
LEGACY_ATTR_LOG_APPEND_TIME = 0x08


class TimestampType(enum.IntEnum):
    NONE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(enum.IntEnum):
    """Control record types (ControlRecordType.java): the key's int16 type."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


END_TXN_MARKERS = (ControlType.ABORT, ControlType.COMMIT)

# id -> name tables, derived from the enums (for vectorised look-ups)
CODEC_NAMES = {int(c): c.label for c in Codec}
CONTROL_TYPE_NAMES = {int(t): t.name for t in ControlType}

# Not on the wire: kbatch's "no bound" for offset ranges and chunk sizes
# (above any offset a broker assigns in practice, and safe to add to).
UNBOUNDED = 1 << 62
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1   # the int64 range (limits, not sentinels)


def codec_name(codec: int) -> str:
    """``"lz4"`` for 3; an id Kafka never defined gives ``"codec-<n>"``."""
    try:
        return Codec(int(codec)).label
    except ValueError:
        return f"codec-{int(codec)}"


def codec_id(codec: int | str) -> Codec:
    """A codec given by name (any case) or id; ValueError names the valid ones."""
    if isinstance(codec, str):
        try:
            return Codec[codec.upper()]
        except KeyError:
            raise ValueError(f"unknown codec {codec!r}; one of "
                             f"{[c.label for c in Codec]}") from None
    try:
        return Codec(int(codec))
    except (ValueError, TypeError):
        raise ValueError(f"unknown codec {codec!r}; one of "
                         f"{[int(c) for c in Codec]}") from None


def control_type_name(ctype: int) -> str:
    """``"COMMIT"`` for 1; unknown types give ``"UNKNOWN(<n>)"``."""
    try:
        return ControlType(int(ctype)).name
    except ValueError:
        return f"UNKNOWN({int(ctype)})"
