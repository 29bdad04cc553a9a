"""Models of a log's life, written from Apache Kafka's source (not from
kbatch; nothing here imports kbatch), for tests/test_latest.py,
test_recover.py, test_retention.py and test_compact.py.

    write_partition(dir, segments)     a partition directory of raw batches
                                       (bytes from tests/kafka_ref.py's encoders)
    latest_model(records, aborted)     the table a compacted topic stands for
    header(batch) / walk(buf)          batch headers and FileLogInputStream's walk
    recover_model(buf, ...)            LogSegment.recover: valid prefix + indexes
    retention_model(...)               UnifiedLog.deleteOldSegments' predicates
    clean_model(...)                   Cleaner.cleanSegments' record rules

Each model names the Kafka class and method it follows (apache/kafka trunk,
storage/ and core/ modules).
"""

from __future__ import annotations

import pathlib
import struct

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")   # DefaultRecordBatch's 61-byte header
LEGACY = struct.Struct(">qiIbb")             # offset, size, crc, magic, attributes


def write_partition(directory, segments: list[list[bytes]], bases: list[int] | None = None):
    """A ``<topic>-<partition>`` directory: one ``.log`` file per list of
    raw batches, named by its first batch's base offset (or ``bases``)."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for i, batches in enumerate(segments):
        base = bases[i] if bases else struct.unpack_from(">q", batches[0])[0]
        (d / f"{base:020d}.log").write_bytes(b"".join(batches))
    return d


def latest_model(records, aborted=frozenset()):
    """``{key: record}`` of the highest offset per key, tombstones (value
    None) and null keys left out; ``records`` are kafka-python rows
    (``tests/kafka_ref.read_with_kafka_python``) with their producer id
    and ``transactional`` flag; ``aborted``: ``(producer_id, offset)`` of
    records of aborted transactions, which never count."""
    table = {}
    for rec in sorted(records, key=lambda r: r["offset"]):
        if (rec.get("producer_id"), rec["offset"]) in aborted or rec["key"] is None:
            continue
        table[rec["key"]] = rec
    return {k: r for k, r in table.items() if r["value"] is not None}


# --- batch headers, as FileLogInputStream reads them ----------------------------

def header(buf: bytes, pos: int) -> dict:
    """The 61-byte header of the magic-2 batch at ``pos`` as a dict."""
    (base, length, ple, magic, crc, attrs, last_delta, first_ts, max_ts, pid, epoch,
     seq, count) = HEADER.unpack_from(buf, pos)
    return {"base_offset": base, "length": length, "size": length + 12, "magic": magic,
            "crc": crc, "attributes": attrs, "last_offset": base + last_delta,
            "first_timestamp": first_ts, "max_timestamp": max_ts, "producer_id": pid,
            "producer_epoch": epoch, "records_count": count, "position": pos,
            "leader_epoch": ple, "transactional": bool(attrs & 0x10),
            "control": bool(attrs & 0x20)}


# --- recovery: LogSegment.recover over FileLogInputStream --------------------------

HEADER_SIZE_UP_TO_MAGIC = 17      # FileLogInputStream
RECORD_OVERHEAD_V0 = 14           # LegacyRecord.RECORD_OVERHEAD_V0
RECORD_BATCH_OVERHEAD = 61        # DefaultRecordBatch.RECORD_BATCH_OVERHEAD


def walk(buf: bytes):
    """FileLogInputStream.nextBatch then batch.ensureValid(), magic 2 only:
    ``(batches, valid_bytes)``: the headers of the valid batches, and where
    the walk stopped (a short or past-the-end batch ends it quietly; a size
    below the minimum, a short v2 batch or a CRC mismatch is
    CorruptRecordException, caught by LogSegment.recover: the same cut)."""
    pos, out, end = 0, [], len(buf)
    while pos < end - HEADER_SIZE_UP_TO_MAGIC:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < RECORD_OVERHEAD_V0:
            break                                   # CorruptRecordException
        if pos > end - 12 - size:
            break                                   # past the end: nextBatch() is null
        if buf[pos + 16] != 2 or size + 12 < RECORD_BATCH_OVERHEAD:
            break                                   # ensureValid (this model: magic 2)
        h = header(buf, pos)
        if crc32c.crc32c(buf[pos + 21:pos + 12 + size]) != h["crc"]:
            break
        out.append(h)
        pos += 12 + size
    return out, pos


def control_type(buf: bytes, h: dict) -> int | None:
    """The type of an uncompressed control batch's record (key ``>hh``)."""
    if h["records_count"] == 0:
        return None
    p = h["position"] + 61
    _, p = _varint(buf, p)          # length
    p += 1                          # attributes
    _, p = _varint(buf, p)          # timestamp delta
    _, p = _varint(buf, p)          # offset delta
    klen, p = _varint(buf, p)
    return struct.unpack_from(">h", buf, p + 2)[0] if klen >= 4 else None


def _varint(buf: bytes, p: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), p


def recover_model(segments: list[tuple[int, bytes]], interval: int = 4096):
    """LogLoader.recoverLog + LogSegment.recover over ``[(base offset,
    bytes)]``: per kept segment ``(base, valid_bytes, .index bytes,
    .timeindex bytes, .txnindex bytes)``; segments after the first cut are
    gone. Index rule: an entry (batch last offset, batch position) when
    ``validBytes - lastIndexEntry > indexIntervalBytes`` before the batch
    is added; the time index gets maxTimestampSoFar (and the last offset of
    the batch that raised it) when larger than its last entry, and once
    more at the end. Producer state as ProducerStateManager: an aborted
    non-empty transaction's entry (version 0, pid, first, marker offset,
    LSO) in the segment of its marker."""
    kept, ongoing, epochs = [], {}, []
    for base, buf in segments:
        batches, valid = walk(buf)
        index, times, txn = [], [], []
        last_entry, max_ts, max_off = 0, -1, -1
        for h in batches:
            if h["max_timestamp"] > max_ts:
                max_ts, max_off = h["max_timestamp"], h["last_offset"]
            if h["position"] - last_entry > interval:
                index.append(struct.pack(">ii", h["last_offset"] - base, h["position"]))
                if max_ts > (struct.unpack_from(">q", times[-1])[0] if times else -1):
                    times.append(struct.pack(">qi", max_ts, max_off - base))
                last_entry = h["position"]
            if h["leader_epoch"] >= 0 and (not epochs or h["leader_epoch"] > epochs[-1][0]):
                epochs.append((h["leader_epoch"], h["base_offset"]))
            pid = h["producer_id"]
            if pid >= 0 and not h["control"] and h["transactional"]:
                ongoing.setdefault(pid, h["base_offset"])
            elif pid >= 0 and h["control"]:
                ctype = control_type(buf, h)
                if ctype in (0, 1) and pid in ongoing:
                    others = sorted(f for p, f in ongoing.items() if p != pid)
                    lso = others[0] if others else h["base_offset"] + 1
                    if ctype == 0:
                        txn.append(struct.pack(">hqqqq", 0, pid, ongoing[pid],
                                               h["base_offset"], lso))
                    del ongoing[pid]
        if max_ts > (struct.unpack_from(">q", times[-1])[0] if times else -1):
            times.append(struct.pack(">qi", max_ts, max_off - base))
        kept.append((base, valid, b"".join(index), b"".join(times), b"".join(txn)))
        if valid < len(buf):
            break
    return kept, epochs
