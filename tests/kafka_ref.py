"""Reference encoders and decoders for the tests, independent of kbatch.

Building:
    build_batch(records, ...)     a magic-2 batch built by kafka-python's
                                  DefaultRecordBatchBuilder, then patched
                                  (base offset, leader epoch, LogAppendTime,
                                  compression with a chosen codec variant)
    control_batch(...)            a control batch encoded here from the spec
    empty_batch(...)              recordsCount 0, only the 61-byte header
    raw_batch(records_area, ...)  any header around any bytes (hostile input)
    encode_record(...)            one record, encoded here from the spec
    compress_records(...)         the codec variants real producers write

Reading:
    read_with_kafka_python(buf)   kafka-python's MemoryRecords / DefaultRecordBatch
                                  decoding of every batch: header fields, data
                                  records and control records

Nothing here imports kbatch: the expected values of the tests come from
kafka-python (and, for hostile bytes, from the layout in SPEC.md).
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from dataclasses import dataclass, field

import crc32c
import lz4.frame
import snappy
import zstandard
from kafka import codec as kcodec
from kafka.record.default_records import (ControlRecord, DefaultRecordBatch,
                                          DefaultRecordBatchBuilder)
from kafka.record.legacy_records import LegacyRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

HEADER_V2 = 61
CRC_START = 21
ATTR_CODEC = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

ABORT, COMMIT = 0, 1

# header layout (SPEC.md section 2), big-endian
_HEADER = struct.Struct(">qiibIhiqqqhii")


# --- varints (zig-zag), written here from the spec ------------------------

def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def uvarint(raw: int) -> bytes:
    """Unsigned base-128 varint of ``raw`` (already zig-zagged)."""
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(value: int) -> bytes:
    return uvarint(zigzag(value))


def long_varint(value: int, nbytes: int) -> bytes:
    """``value`` zig-zagged, padded to exactly ``nbytes`` bytes (non-minimal)."""
    raw = zigzag(value)
    out = bytearray()
    for i in range(nbytes):
        byte = raw & 0x7F
        raw >>= 7
        out.append(byte | (0x80 if i < nbytes - 1 else 0))
    assert raw == 0, "value does not fit"
    return bytes(out)


def crc32c_bitwise(data: bytes, state: int = 0) -> int:
    """CRC-32C one bit at a time from ``state`` (reflected polynomial
    0x82F63B78), no inversion: a definition, not a fast path."""
    for byte in data:
        state ^= byte
        for _ in range(8):
            state = (state >> 1) ^ (0x82F63B78 if state & 1 else 0)
    return state


def crc_of(batch) -> int:
    return crc32c.crc32c(bytes(batch[CRC_START:]))


def fix_crc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc_of(buf))
    return buf


# --- records and batches from raw parts ------------------------------------

def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=(),
                  attributes: int = 0) -> bytes:
    """One record (length prefix included), from DefaultRecord's layout."""
    body = bytearray([attributes & 0xFF])
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    for blob in (key, value):
        if blob is None:
            body += varint(-1)
        else:
            body += varint(len(blob)) + bytes(blob)
    body += varint(len(headers))
    for hkey, hvalue in headers:
        hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        body += varint(len(hk)) + hk
        if hvalue is None:
            body += varint(-1)
        else:
            body += varint(len(hvalue)) + bytes(hvalue)
    return varint(len(body)) + bytes(body)


def raw_batch(records_area: bytes, *, records_count: int, base_offset: int = 0,
              last_offset_delta: int | None = None, attributes: int = 0,
              base_timestamp: int = 0, max_timestamp: int | None = None,
              producer_id: int = -1, producer_epoch: int = -1,
              base_sequence: int = -1, partition_leader_epoch: int = 0,
              magic: int = 2, batch_length: int | None = None,
              crc: int | None = None) -> bytes:
    """A batch header around ``records_area`` (taken as is), CRC-32C computed.

    ``batch_length``/``crc`` override the computed values (hostile input).
    """
    if last_offset_delta is None:
        last_offset_delta = max(records_count - 1, 0)
    if max_timestamp is None:
        max_timestamp = base_timestamp
    length = HEADER_V2 - 12 + len(records_area)
    buf = bytearray(_HEADER.pack(
        base_offset, length if batch_length is None else batch_length,
        partition_leader_epoch, magic, 0, attributes, last_offset_delta,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
        records_count))
    buf += records_area
    fix_crc(buf)
    if crc is not None:
        struct.pack_into(">I", buf, 17, crc)
    return bytes(buf)


def control_batch(*, base_offset: int, producer_id: int = -1, producer_epoch: int = -1,
                  control_type: int = COMMIT, version: int = 0,
                  coordinator_epoch: int = 0, timestamp: int = 0,
                  partition_leader_epoch: int = 0, transactional: bool = True,
                  base_sequence: int = -1, value: bytes | None = None,
                  codec: int = 0, variant: str | None = None,
                  log_append_time: int | None = None) -> bytes:
    """A control batch: one record, key ``>hh`` (version, type); for ABORT and
    COMMIT the value is ``>hi`` (version 0, coordinator epoch) unless given."""
    key = struct.pack(">hh", version, control_type)
    if value is None and control_type in (ABORT, COMMIT):
        value = struct.pack(">hi", 0, coordinator_epoch)
    area = encode_record(0, 0, key, value, ())
    attributes = ATTR_CONTROL | (ATTR_TRANSACTIONAL if transactional else 0)
    max_ts = timestamp
    if log_append_time is not None:
        attributes |= ATTR_LOG_APPEND_TIME
        max_ts = log_append_time
    batch = raw_batch(area, records_count=1, base_offset=base_offset,
                      last_offset_delta=0, attributes=attributes,
                      base_timestamp=timestamp, max_timestamp=max_ts,
                      producer_id=producer_id, producer_epoch=producer_epoch,
                      base_sequence=base_sequence,
                      partition_leader_epoch=partition_leader_epoch)
    if codec:
        batch = recompress(batch, codec, variant)
    return batch


def empty_batch(*, base_offset: int, last_offset_delta: int = 0,
                producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, base_timestamp: int = -1,
                max_timestamp: int = -1, attributes: int = 0,
                partition_leader_epoch: int = 0) -> bytes:
    """What compaction leaves to keep producer state: recordsCount 0, no records
    (attributes, codec bits included, are kept from the original batch)."""
    return raw_batch(b"", records_count=0, base_offset=base_offset,
                     last_offset_delta=last_offset_delta, attributes=attributes,
                     base_timestamp=base_timestamp, max_timestamp=max_timestamp,
                     producer_id=producer_id, producer_epoch=producer_epoch,
                     base_sequence=base_sequence,
                     partition_leader_epoch=partition_leader_epoch)


# --- compression variants ---------------------------------------------------

def _split(data: bytes, parts: int) -> list[bytes]:
    parts = max(1, min(parts, len(data)))
    step = -(-len(data) // parts)
    return [data[i:i + step] for i in range(0, len(data), step)] or [b""]


def _xerial(data: bytes, blocksize: int, little_endian_versions: bool) -> bytes:
    order = "<" if little_endian_versions else ">"
    out = io.BytesIO()
    out.write(b"\x82SNAPPY\x00" + struct.pack(order + "ii", 1, 1))
    for i in range(0, len(data), blocksize):
        block = snappy.compress(data[i:i + blocksize])
        out.write(struct.pack(">i", len(block)) + block)
    return out.getvalue()


def _zstd_frames(data: bytes, frames: int) -> bytes:
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    return b"".join(cctx.compress(part) for part in _split(data, frames))


VARIANTS = {
    1: ("gzip", "gzip-multi-member"),
    2: ("xerial", "xerial-small-blocks", "xerial-le", "raw"),
    3: ("lz4", "lz4-checksums"),
    4: ("zstd", "zstd-no-size-multi-frame"),
}


def compress_records(data: bytes, codec: int, variant: str | None = None) -> bytes:
    """``data`` compressed as producers write it for ``codec``; ``variant``
    picks one of ``VARIANTS[codec]`` (default: the first)."""
    data = bytes(data)
    variant = variant or VARIANTS[codec][0]
    assert variant in VARIANTS[codec], (codec, variant)
    if variant == "gzip":
        return kcodec.gzip_encode(data)
    if variant == "gzip-multi-member":
        return b"".join(gzip.compress(p, compresslevel=1) for p in _split(data, 3))
    if variant == "xerial":
        return kcodec.snappy_encode(data, xerial_compatible=True)
    if variant == "xerial-small-blocks":
        return kcodec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=100)
    if variant == "xerial-le":
        return _xerial(data, 32 * 1024, little_endian_versions=True)
    if variant == "raw":
        return snappy.compress(data)
    if variant == "lz4":
        return kcodec.lz4_encode(data)
    if variant == "lz4-checksums":
        return lz4.frame.compress(data, block_linked=False, content_checksum=True,
                                  block_checksum=True, store_size=False,
                                  block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    if variant == "zstd":
        return kcodec.zstd_encode(data)
    if variant == "zstd-no-size-multi-frame":
        return _zstd_frames(data, 3)
    raise AssertionError(variant)


def recompress(batch, codec: int, variant: str | None = None) -> bytes:
    """An uncompressed batch with its records area compressed with ``codec``:
    codec bits set, batchLength and CRC fixed (base offset, leader epoch kept)."""
    buf = bytearray(batch)
    attributes, = struct.unpack_from(">h", buf, 21)
    assert attributes & ATTR_CODEC == 0, "batch is already compressed"
    compressed = compress_records(buf[HEADER_V2:], codec, variant)
    out = bytearray(buf[:HEADER_V2]) + compressed
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, (attributes & ~ATTR_CODEC) | codec)
    return bytes(fix_crc(out))


def set_codec_bits(batch, codec: int) -> bytes:
    """Only the codec bits changed (records left as they are), CRC fixed."""
    buf = bytearray(batch)
    attributes, = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, (attributes & ~ATTR_CODEC) | codec)
    return bytes(fix_crc(buf))


# --- batches built by kafka-python ----------------------------------------

def build_batch(records, *, codec: int = 0, variant: str | None = None,
                base_offset: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, transactional: bool = False,
                partition_leader_epoch: int = 0, log_append_time: int | None = None,
                offset_deltas=None, last_offset_delta: int | None = None,
                delete_horizon: bool = False) -> bytes:
    """A magic-2 batch of ``records`` [(timestamp, key, value, headers)].

    kafka-python's builder writes the records uncompressed (it would drop the
    codec when compression does not pay off); the codec is applied here with
    ``recompress``. ``offset_deltas`` leave gaps like compaction does;
    ``last_offset_delta`` keeps a larger lastOffsetDelta (last record removed);
    ``delete_horizon`` sets attribute bit 6 (baseTimestamp is the horizon).
    """
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, batch_size=1 << 40)
    assert records, "use empty_batch() for a batch without records"
    deltas = list(range(len(records))) if offset_deltas is None else list(offset_deltas)
    assert len(deltas) == len(records)
    for delta, (timestamp, key, value, headers) in zip(deltas, records):
        meta = builder.append(delta, timestamp=timestamp, key=key, value=value,
                              headers=list(headers))
        assert meta is not None
    buf = bytearray(builder.build())
    # kafka-python writes `first_timestamp or 0`: fine for every int timestamp
    if log_append_time is not None:
        attributes, = struct.unpack_from(">h", buf, 21)
        struct.pack_into(">h", buf, 21, attributes | ATTR_LOG_APPEND_TIME)
        struct.pack_into(">q", buf, 35, log_append_time)
    if last_offset_delta is not None:
        struct.pack_into(">i", buf, 23, last_offset_delta)
    if delete_horizon:
        attributes, = struct.unpack_from(">h", buf, 21)
        struct.pack_into(">h", buf, 21, attributes | ATTR_DELETE_HORIZON)
    fix_crc(buf)
    batch = bytes(buf)
    if codec:
        batch = recompress(batch, codec, variant)
    buf = bytearray(batch)
    # outside the CRC: set by the broker
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, partition_leader_epoch)
    return bytes(buf)


def legacy_message_set(records, *, magic: int, codec: int = 0, base_offset: int = 0,
                       log_append_time: int | None = None) -> bytes:
    """A magic 0/1 message set from kafka-python's MemoryRecordsBuilder
    (records: [(timestamp, key, value)]), laid out as a broker stores it.

    kafka-python's builder writes a compressed wrapper at offset 0; a broker
    stores it at the absolute offset of its last inner message, with magic-1
    inner offsets relative (0..n-1) and magic-0 ones absolute. The wrapper
    offset is outside the legacy CRC (which covers magic..end).
    ``log_append_time`` sets the wrapper's (or each message's) timestamp type
    bit and timestamp, CRC fixed. A CreateTime magic-1 wrapper carries the
    largest inner timestamp, as the broker sets it (LogValidator's
    ``setMaxTimestamp``; kafka-python's builder leaves 0 there).
    """
    relative = magic == 1 and codec != 0
    builder = MemoryRecordsBuilder(magic=magic, compression_type=codec,
                                   batch_size=1 << 30, offset=0 if relative else base_offset)
    for timestamp, key, value in records:
        assert builder.append(timestamp, key, value) is not None
    builder.close()
    buf = bytearray(builder.buffer())
    if codec:
        struct.pack_into(">q", buf, 0, base_offset + len(records) - 1)
    if relative and log_append_time is None:
        size, = struct.unpack_from(">i", buf, 8)
        struct.pack_into(">q", buf, 18, max(t for t, _, _ in records))
        struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:12 + size])))
    if log_append_time is not None:
        assert magic == 1
        pos = 0
        while pos < len(buf):
            size, = struct.unpack_from(">i", buf, pos + 8)
            buf[pos + 17] |= ATTR_LOG_APPEND_TIME
            struct.pack_into(">q", buf, pos + 18, log_append_time)
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16:pos + 12 + size])))
            pos += 12 + size
    return bytes(buf)


def legacy_message(*, offset: int, magic: int, value, key=None, attributes: int = 0,
                   timestamp: int = -1) -> bytes:
    """One legacy log entry encoded here (LegacyRecord.java), CRC-32 computed."""
    body = bytes([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


# --- lz4 as Kafka 0.8/0.9 wrote it (magic 0) ------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def xxh32_small(data: bytes, seed: int = 0) -> int:
    """xxHash32 (spec) of fewer than 16 bytes: enough for an LZ4 descriptor."""
    assert len(data) < 16
    m = 0xFFFFFFFF
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & m  # noqa: E731
    h = (seed + _P5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & m, 17) * _P4 & m
        i += 4
    for b in data[i:]:
        h = rotl((h + b * _P5) & m, 11) * _P1 & m
    h ^= h >> 15
    h = h * _P2 & m
    h ^= h >> 13
    h = h * _P3 & m
    h ^= h >> 16
    return h


def lz4_frame_header_checksum(frame: bytes, *, broken: bool) -> tuple[int, int]:
    """(position, value) of the descriptor checksum byte of an LZ4 frame: the
    spec's (xxh32 of the descriptor) or old Kafka's (which also hashed the
    4 magic bytes)."""
    flags = frame[4]
    pos = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    covered = frame[0:pos] if broken else frame[4:pos]
    return pos, (xxh32_small(covered) >> 8) & 0xFF


def lz4_old_kafka(data: bytes) -> bytes:
    """An LZ4 frame with the header checksum Kafka 0.8/0.9 wrote for magic 0."""
    frame = bytearray(lz4.frame.compress(data, block_linked=False, store_size=False))
    pos, good = lz4_frame_header_checksum(bytes(frame), broken=False)
    assert frame[pos] == good, "xxh32_small disagrees with lz4"
    frame[pos] = lz4_frame_header_checksum(bytes(frame), broken=True)[1]
    return bytes(frame)


# --- reading with kafka-python ----------------------------------------------

@dataclass
class KafkaRead:
    """What kafka-python decodes from a buffer."""

    batches: list = field(default_factory=list)   # one dict per batch
    records: list = field(default_factory=list)   # data records, file order
    control: list = field(default_factory=list)   # control records, file order
    rows: list = field(default_factory=list)      # every record in file order
    valid_bytes: int = 0                          # end of the last whole batch

    def data_tuples(self):
        return [(r["offset"], r["timestamp"], r["timestamp_type"], r["key"],
                 r["value"], r["headers"]) for r in self.records]

    def column(self, name):
        return [r[name] for r in self.records]

    def batch_column(self, name):
        return [b[name] for b in self.batches]


def _coordinator_epoch(ctype, value):
    if ctype in (ABORT, COMMIT) and value is not None and len(value) >= 6:
        return struct.unpack_from(">hi", value)[1]
    return -1


def read_with_kafka_python(buf, *, check_crc: bool = False) -> KafkaRead:
    """Decode ``buf`` with kafka-python (raises whatever kafka-python raises).

    Stops, like MemoryRecords, at a last batch that runs past the end.
    ``check_crc`` raises AssertionError on a batch whose CRC is wrong.
    """
    data = bytes(buf)
    memory = MemoryRecords(data)
    out = KafkaRead()
    position = 0
    while memory.has_next():
        batch = memory.next_batch()
        index = len(out.batches)
        size = batch.size_in_bytes
        if isinstance(batch, LegacyRecordBatch):
            info = {"position": position, "size": size, "magic": batch.magic,
                    "base_offset": batch.base_offset, "is_control": False}
            out.batches.append(info)
            for rec in batch:
                # magic 0: no timestamp, no type (Java: NO_TIMESTAMP, NO_TIMESTAMP_TYPE)
                row = {"offset": rec.offset,
                       "timestamp": -1 if rec.timestamp is None else rec.timestamp,
                       "timestamp_type": -1 if rec.timestamp_type is None else rec.timestamp_type,
                       "key": rec.key, "value": rec.value, "headers": [],
                       "batch": index, "is_control": False}
                out.records.append(row)
                out.rows.append(row)
            position += size
            continue
        assert isinstance(batch, DefaultRecordBatch)
        crc_valid = batch.validate_crc()
        if check_crc:
            assert crc_valid, f"CRC of the batch at {position} is wrong"
        info = {
            "base_offset": batch.base_offset,
            "last_offset": batch.last_offset,
            "last_offset_delta": batch.last_offset_delta,
            "position": position,
            "size": size,
            "partition_leader_epoch": batch.leader_epoch,
            "magic": batch.magic,
            "crc": batch.crc,
            "crc_valid": crc_valid,
            "attributes": batch.attributes,
            "codec": batch.compression_type,
            "timestamp_type": batch.timestamp_type,
            "is_transactional": batch.is_transactional,
            "is_control": batch.is_control_batch,
            "has_delete_horizon": bool(batch.attributes & ATTR_DELETE_HORIZON),
            "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence,
            "base_timestamp": batch.first_timestamp,
            "max_timestamp": batch.max_timestamp,
            "records_count": batch.records_count,
        }
        out.batches.append(info)
        if batch.records_count == 0 and size == HEADER_V2:
            records = []   # an empty batch: nothing to decompress
        else:
            records = list(batch)
        for rec in records:
            row = {"offset": rec.offset, "timestamp": rec.timestamp,
                   "timestamp_type": rec.timestamp_type, "key": rec.key,
                   "value": rec.value, "headers": [(k, v) for k, v in rec.headers],
                   "batch": index, "is_control": isinstance(rec, ControlRecord)}
            if isinstance(rec, ControlRecord):
                row.update({
                    "type": rec.type, "version": rec.version,
                    "coordinator_epoch": _coordinator_epoch(rec.type, rec.value),
                    "producer_id": batch.producer_id,
                    "producer_epoch": batch.producer_epoch,
                })
                out.control.append(row)
            else:
                out.records.append(row)
            out.rows.append(row)
        position += size
    out.valid_bytes = position
    return out


def batch_bounds(buf) -> list[tuple[int, int]]:
    """(start, end) of every whole batch, walking the length fields."""
    data = bytes(buf)
    bounds = []
    pos = 0
    while len(data) - pos >= 12:
        length, = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if length <= 0 or end > len(data):
            break
        bounds.append((pos, end))
        pos = end
    return bounds


# --- generated segments ---------------------------------------------------
#
# One generator, two sources of choices: Hypothesis (``HypothesisChoices``,
# shrinks) or a seeded ``random.Random`` (``RandomChoices``, for the byte-by-
# byte corruption loops, which need the same input every run).

_TEXT_CHARS = "ak_-.Zé日🙂\u00a0\x00"


class RandomChoices:
    def __init__(self, rng):
        self.rng = rng

    def integer(self, lo, hi):
        return self.rng.randint(lo, hi)

    def choice(self, seq):
        return self.rng.choice(list(seq))

    def binary(self, lo, hi):
        return self.rng.randbytes(self.rng.randint(lo, hi))

    def text(self, hi):
        return "".join(self.rng.choice(_TEXT_CHARS) for _ in range(self.rng.randint(0, hi)))


class HypothesisChoices:
    def __init__(self, draw):
        from hypothesis import strategies as st
        self.draw = draw
        self.st = st

    def integer(self, lo, hi):
        return self.draw(self.st.integers(lo, hi))

    def choice(self, seq):
        return self.draw(self.st.sampled_from(list(seq)))

    def binary(self, lo, hi):
        return self.draw(self.st.binary(min_size=lo, max_size=hi))

    def text(self, hi):
        chars = self.st.characters(blacklist_categories=("Cs",))
        return self.draw(self.st.text(alphabet=chars, max_size=hi))


def _blob(c, big: bool):
    kind = c.choice(["none", "empty", "small", "small", "repeat"] + (["big"] if big else []))
    if kind == "none":
        return None
    if kind == "empty":
        return b""
    if kind == "small":
        return c.binary(1, 40)
    if kind == "repeat":
        return c.binary(1, 3) * c.integer(1, 400)
    return c.binary(200, 3000)


def _timestamp(c):
    kind = c.choice(["now", "now", "none", "zero", "any"])
    if kind == "now":
        return c.integer(1_500_000_000_000, 1_800_000_000_000)
    if kind == "none":
        return -1
    if kind == "zero":
        return 0
    return c.integer(-(1 << 50), 1 << 50)


def _record(c, base_ts: int, big: bool):
    if c.choice(["near", "near", "own"]) == "near" and base_ts != -1:
        ts = base_ts + c.integer(-100_000, 100_000)   # deltas of both signs
    else:
        ts = _timestamp(c)
    headers = [(c.text(6), c.choice([None, b"", b"v", c.binary(0, 20)]))
               for _ in range(c.integer(0, 4))]
    return (ts, _blob(c, big), _blob(c, big), headers)


@dataclass
class BatchSpec:
    kind: str                  # "data", "control" or "empty"
    base_offset: int
    codec: int = 0
    variant: str | None = None
    records: list = field(default_factory=list)
    offset_deltas: list | None = None


def generate_segment(c, *, max_batches: int = 6, max_records: int = 8,
                     codecs=(0, 1, 2, 3, 4), kinds=("data", "data", "data", "control", "empty"),
                     big: bool = True):
    """``(bytes, [BatchSpec])``: a segment of several batches (data batches of
    every codec, several producers, transactions, offset gaps, LogAppendTime,
    control and empty batches), as a broker leaves it on disk."""
    next_offset = c.choice([0, c.integer(0, 1 << 40)])
    producers = [(c.integer(0, 1 << 40), c.integer(0, 32767),
                  c.choice([0, c.integer(0, (1 << 31) - 1), (1 << 31) - 3]))
                 for _ in range(c.integer(1, 3))]
    parts, specs = [], []
    for _ in range(c.integer(1, max_batches)):
        kind = c.choice(kinds)
        base_offset = next_offset + c.choice([0, 0, 0, c.integer(1, 1000)])
        leader_epoch = c.choice([0, c.integer(-1, 1 << 20)])
        producer = c.choice([None, *producers])
        pid, epoch, seq = producer if producer else (-1, -1, -1)
        if kind == "data":
            base_ts = _timestamp(c)
            records = [_record(c, base_ts, big) for _ in range(c.integer(1, max_records))]
            if records[0][0] == -1 and base_ts != -1:
                records[0] = (base_ts,) + records[0][1:]
            codec = c.choice(codecs)
            variant = c.choice(VARIANTS[codec]) if codec else None
            deltas = None
            last_delta = None
            if c.choice([False, False, True]):   # compacted: gaps between offsets
                deltas, d = [], c.integer(0, 3)
                for _ in records:
                    deltas.append(d)
                    d += c.integer(1, 4)
                if c.choice([False, True]):
                    last_delta = deltas[-1] + c.integer(1, 5)
            batch = build_batch(
                records, codec=codec, variant=variant, base_offset=base_offset,
                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                transactional=producer is not None and c.choice([False, True]),
                partition_leader_epoch=leader_epoch,
                log_append_time=c.choice([None, None, None, _timestamp(c)]),
                offset_deltas=deltas, last_offset_delta=last_delta,
                delete_horizon=c.choice([False, False, False, True]))
            last = (last_delta if last_delta is not None
                    else (deltas[-1] if deltas else len(records) - 1))
            specs.append(BatchSpec("data", base_offset, codec, variant, records, deltas))
        elif kind == "control":
            ctype = c.choice([ABORT, COMMIT, COMMIT, 2, 3, 4, 5, 6, 17])
            marker = ctype in (ABORT, COMMIT)
            codec = c.choice([0, 0, *codecs])
            batch = control_batch(
                base_offset=base_offset, producer_id=pid, producer_epoch=epoch,
                control_type=ctype, coordinator_epoch=c.integer(0, 1 << 20),
                timestamp=_timestamp(c), partition_leader_epoch=leader_epoch,
                transactional=marker, value=None if marker else c.choice([None, c.binary(0, 30)]),
                codec=codec, variant=c.choice(VARIANTS[codec]) if codec else None,
                log_append_time=c.choice([None, None, None, _timestamp(c)]))
            last = 0
            specs.append(BatchSpec("control", base_offset, codec))
        else:
            last = c.integer(0, 5)
            attributes = c.choice([0, *codecs]) | c.choice([0, ATTR_TRANSACTIONAL])
            if producer is None:
                attributes &= ~ATTR_TRANSACTIONAL
            batch = empty_batch(base_offset=base_offset, last_offset_delta=last,
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                base_timestamp=c.choice([-1, _timestamp(c)]),
                                max_timestamp=c.choice([-1, _timestamp(c)]),
                                attributes=attributes, partition_leader_epoch=leader_epoch)
            specs.append(BatchSpec("empty", base_offset, attributes & ATTR_CODEC))
        parts.append(batch)
        next_offset = base_offset + last + 1
    return b"".join(parts), specs


def hypothesis_segments(**kwargs):
    """A Hypothesis strategy of ``generate_segment(...)`` results."""
    from hypothesis import strategies as st
    return st.composite(lambda draw: generate_segment(HypothesisChoices(draw), **kwargs))()
