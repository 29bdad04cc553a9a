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
