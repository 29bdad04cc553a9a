"""Writing real magic-2 segments and partition directories.

    write_segment(target, records, ...)   one segment file (or binary stream)
    write_log(directory, records, ...)    a partition directory: rolled
                                          segments, .index, .timeindex, .txnindex
    SegmentWriter / LogWriter             the same, batch by batch, with
                                          transaction markers (commit/abort)

Batches are what a broker stores (SPEC.md section 2): CRC-32C, every codec,
CreateTime or LogAppendTime, producer id/epoch/sequence, transactional and
control batches. Index entries follow LogSegment.append: after an append,
once more than ``index_interval_bytes`` were written since the last entry, an
offset index entry (last offset, position of the batch) and a time index entry
(largest timestamp so far, last offset of the batch holding it).

``records`` may be a ``kbatch.Records``, a mapping of columns (``key``,
``value``, optional ``timestamp``, ``headers``, ``offset``), or an iterable of
``(key, value[, timestamp[, headers]])`` tuples or dicts with those keys.
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Mapping

import numpy as np

from kbatch._checksums import crc32c_of
from kbatch._encode import encode_records
from kbatch.columns import BinaryColumn, HeadersColumn
from kbatch.compression import codec_id, compress
from kbatch.records import Records

HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte magic-2 batch header
CRC_FROM = 21
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ABORT, COMMIT = 0, 1
DEFAULT_BATCH_RECORDS = 1000
DEFAULT_BATCH_BYTES = 16 * 1024
DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_INDEX_INTERVAL = 4096
INDEX_PREALLOCATE = 10 * 1024 * 1024


# --- input as columns -----------------------------------------------------

@dataclass
class Columns:
    """Records to write, as columns (int64 offsets, bool validity)."""

    timestamp: np.ndarray
    key: BinaryColumn
    value: BinaryColumn
    headers: HeadersColumn
    offset: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.timestamp)


def _binary(values) -> BinaryColumn:
    if isinstance(values, BinaryColumn):
        return values
    return BinaryColumn.from_pylist(list(values))


def _headers(lists, n: int) -> HeadersColumn:
    if isinstance(lists, HeadersColumn):
        return lists
    if lists is None:
        return HeadersColumn(np.zeros(n + 1, np.int64), BinaryColumn.from_pylist([], utf8=True),
                             BinaryColumn.from_pylist([]))
    lists = list(lists)
    counts = np.fromiter((len(h) for h in lists), np.int64, len(lists))
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    keys = BinaryColumn.from_pylist([k for h in lists for k, _ in h], utf8=True)
    values = BinaryColumn.from_pylist([v for h in lists for _, v in h])
    return HeadersColumn(offsets, keys, values)


def to_columns(records, *, default_timestamp: int | None = None) -> Columns:
    """Normalise any accepted ``records`` input (see the module docstring)."""
    now = int(time.time() * 1000) if default_timestamp is None else default_timestamp
    if isinstance(records, Records):
        return Columns(np.asarray(records.timestamp, np.int64), records.key, records.value,
                       records.headers, np.asarray(records.offset, np.int64))
    if isinstance(records, Mapping):
        key = _binary(records.get("key", [None] * len(records["value"])))
        value = _binary(records["value"])
        n = len(value)
        ts = records.get("timestamp")
        ts = np.full(n, now, np.int64) if ts is None else np.asarray(ts, np.int64)
        off = records.get("offset")
        return Columns(ts, key, value, _headers(records.get("headers"), n),
                       None if off is None else np.asarray(off, np.int64))
    keys, values, stamps, headers = [], [], [], []
    for rec in records:
        if isinstance(rec, Mapping):
            k, v, t, h = rec.get("key"), rec.get("value"), rec.get("timestamp"), rec.get("headers")
        else:
            rec = tuple(rec)
            k, v = rec[0], rec[1]
            t = rec[2] if len(rec) > 2 else None
            h = rec[3] if len(rec) > 3 else None
        keys.append(k)
        values.append(v)
        stamps.append(now if t is None else t)
        headers.append(list(h or ()))
    return Columns(np.asarray(stamps, np.int64), _binary(keys), _binary(values),
                   _headers(headers, len(values)))


def _arrays(col: BinaryColumn):
    return (np.ascontiguousarray(col.offsets, np.int64), col.data,
            col.is_valid().view(np.uint8))


# --- batches ----------------------------------------------------------------

def build_batch(records_area: bytes, *, count: int, base_offset: int, last_offset_delta: int,
                base_timestamp: int, max_timestamp: int, attributes: int = 0,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                partition_leader_epoch: int = 0) -> bytes:
    """Header + records area, with the CRC-32C filled in."""
    buf = bytearray(HEADER.size + len(records_area))
    HEADER.pack_into(buf, 0, base_offset, len(buf) - 12, partition_leader_epoch, 2, 0,
                     attributes, last_offset_delta, base_timestamp, max_timestamp,
                     producer_id, producer_epoch, base_sequence, count)
    buf[HEADER.size:] = records_area
    struct.pack_into(">I", buf, 17, crc32c_of(memoryview(buf)[CRC_FROM:]))
    return bytes(buf)


def control_batch(control_type: int, *, base_offset: int, producer_id: int,
                  producer_epoch: int, coordinator_epoch: int = 0, timestamp: int,
                  partition_leader_epoch: int = 0) -> bytes:
    """A transaction marker (ABORT 0, COMMIT 1): key ``>hh``, value ``>hi``."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    cols = to_columns({"key": [key], "value": [value], "timestamp": [timestamp]})
    area = _encode(_prepare(cols), 0, 1, np.zeros(1, np.int64), np.zeros(1, np.int64))
    return build_batch(area, count=1, base_offset=base_offset, last_offset_delta=0,
                       base_timestamp=timestamp, max_timestamp=timestamp,
                       attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       partition_leader_epoch=partition_leader_epoch)


def _prepare(cols: Columns) -> tuple:
    """The column buffers ``encode_records`` reads (computed once per append)."""
    ko, kd, kv = _arrays(cols.key)
    vo, vd, vv = _arrays(cols.value)
    ho, hd, _ = _arrays(cols.headers.keys)
    hvo, hvd, hvv = _arrays(cols.headers.values)
    return (ko, kd, kv, vo, vd, vv, np.ascontiguousarray(cols.headers.offsets, np.int64),
            ho, hd, hvo, hvd, hvv)


def _encode(prepared: tuple, start: int, stop: int, offset_deltas, ts_deltas) -> bytes:
    return encode_records(start, stop, np.ascontiguousarray(offset_deltas, np.int64),
                          np.ascontiguousarray(ts_deltas, np.int64), *prepared)


def _batch_bounds(cols: Columns, batch_records: int, batch_bytes: int) -> list[tuple[int, int]]:
    """Split rows into batches of at most ``batch_records`` rows and about
    ``batch_bytes`` bytes of payload (at least one row each)."""
    n = len(cols)
    sizes = (cols.key.lengths().astype(np.int64) + cols.value.lengths()
             + np.diff(np.asarray(cols.headers.offsets, np.int64)) * 8 + 8)
    cum = np.concatenate([[0], np.cumsum(sizes)])
    bounds, i = [], 0
    while i < n:
        j = int(np.searchsorted(cum, cum[i] + batch_bytes, side="right")) - 1
        j = min(max(j, i + 1), i + batch_records, n)
        bounds.append((i, j))
        i = j
    return bounds


# --- segment writer -----------------------------------------------------------

class SegmentWriter:
    """Appends batches to one segment file (or binary stream).

    Keeps in memory one batch at a time plus the index entries of the segment.
    """

    def __init__(self, target: str | os.PathLike | BinaryIO, *, base_offset: int = 0,
                 codec="none", batch_records: int = DEFAULT_BATCH_RECORDS,
                 batch_bytes: int = DEFAULT_BATCH_BYTES, partition_leader_epoch: int = 0,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL):
        if isinstance(target, (str, os.PathLike)):
            self._file = open(target, "wb")
            self._owned = True
        else:
            self._file = target
            self._owned = False
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.position = 0
        self.codec = codec_id(codec)
        self.batch_records = batch_records
        self.batch_bytes = batch_bytes
        self.partition_leader_epoch = partition_leader_epoch
        self.index_interval_bytes = index_interval_bytes
        self.offset_index: list[tuple[int, int]] = []   # (offset, position)
        self.time_index: list[tuple[int, int]] = []     # (timestamp, offset)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._since_index = 0
        self._sequences: dict[int, int] = {}

    def __enter__(self) -> "SegmentWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._owned and not self._file.closed:
            self._file.close()

    def _write(self, batch: bytes, last_offset: int, max_timestamp: int) -> None:
        position = self.position
        self._file.write(batch)
        self.position += len(batch)
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._since_index > self.index_interval_bytes:
            self.offset_index.append((last_offset, position))
            self._add_time_entry()
            self._since_index = 0
        self._since_index += len(batch)
        self.next_offset = last_offset + 1

    def _add_time_entry(self) -> None:
        if self.max_timestamp >= 0 and (not self.time_index
                                        or self.max_timestamp > self.time_index[-1][0]):
            self.time_index.append((self.max_timestamp, self.offset_of_max_timestamp))

    def append(self, records, *, producer_id: int = -1, producer_epoch: int | None = None,
               transactional: bool = False, codec=None, timestamp_type: str = "create",
               log_append_time: int | None = None, keep_offsets: bool = False) -> tuple[int, int]:
        """Write ``records`` as batches; returns ``(first_offset, last_offset)``.

        Offsets continue from the last batch (``keep_offsets``: use the
        records' own offsets, which must increase; gaps are kept). With a
        ``producer_id``, sequences continue per producer.
        """
        cols = records if isinstance(records, Columns) else to_columns(records)
        if timestamp_type not in ("create", "log_append"):
            raise ValueError("timestamp_type must be 'create' or 'log_append'")
        if transactional and producer_id < 0:
            raise ValueError("transactional batches need a producer_id")
        epoch = (0 if producer_id >= 0 else -1) if producer_epoch is None else producer_epoch
        codec = self.codec if codec is None else codec_id(codec)
        if keep_offsets and cols.offset is not None and len(cols):
            if np.any(np.diff(cols.offset) <= 0) or cols.offset[0] < self.next_offset:
                raise ValueError("offsets must increase and follow the segment's last offset")
            offsets = cols.offset
        else:
            offsets = self.next_offset + np.arange(len(cols), dtype=np.int64)
        first = int(offsets[0]) if len(cols) else self.next_offset
        prepared = _prepare(cols)
        for start, stop in _batch_bounds(cols, self.batch_records, self.batch_bytes):
            base = int(offsets[start])
            ts = cols.timestamp[start:stop]
            area = _encode(prepared, start, stop, offsets[start:stop] - base, ts - ts[0])
            attributes = codec | (ATTR_TRANSACTIONAL if transactional else 0)
            max_ts = int(ts.max())
            if timestamp_type == "log_append":
                attributes |= ATTR_LOG_APPEND_TIME
                max_ts = int(time.time() * 1000) if log_append_time is None else log_append_time
            if codec:
                packed = compress(codec, area)
                if len(packed) < len(area):
                    area = packed
                else:  # as producers do: store uncompressed when it does not pay
                    attributes &= ~0x07
            sequence = -1
            if producer_id >= 0:
                sequence = self._sequences.get(producer_id, 0)
                self._sequences[producer_id] = (sequence + stop - start) % (1 << 31)
            last = int(offsets[stop - 1])
            batch = build_batch(area, count=stop - start, base_offset=base,
                                last_offset_delta=last - base, base_timestamp=int(ts[0]),
                                max_timestamp=max_ts, attributes=attributes,
                                producer_id=producer_id, producer_epoch=epoch,
                                base_sequence=sequence,
                                partition_leader_epoch=self.partition_leader_epoch)
            self._write(batch, last, max_ts)
        return first, self.next_offset - 1

    def marker(self, control_type: int, *, producer_id: int, producer_epoch: int = 0,
               coordinator_epoch: int = 0, timestamp: int | None = None) -> int:
        """Write a COMMIT (1) or ABORT (0) marker; returns its offset."""
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        offset = self.next_offset
        self._write(control_batch(control_type, base_offset=offset, producer_id=producer_id,
                                  producer_epoch=producer_epoch,
                                  coordinator_epoch=coordinator_epoch, timestamp=ts,
                                  partition_leader_epoch=self.partition_leader_epoch),
                    offset, ts)
        return offset

    def write_indexes(self, stem: str | os.PathLike, *, preallocate: bool = False) -> None:
        """Write ``<stem>.index`` and ``<stem>.timeindex`` (relative offsets).

        ``preallocate`` leaves them zero-padded to 10 MiB, as the broker keeps
        the indexes of its active segment (sparse files: no disk used).
        """
        rel = lambda off: off - self.base_offset  # noqa: E731
        index = b"".join(struct.pack(">ii", rel(o), p) for o, p in self.offset_index)
        times = b"".join(struct.pack(">qi", t, rel(o)) for t, o in self.time_index)
        for suffix, data in ((".index", index), (".timeindex", times)):
            path = Path(str(stem) + suffix)
            with open(path, "wb") as f:
                f.write(data)
                if preallocate:
                    entry = 8 if suffix == ".index" else 12
                    f.truncate(INDEX_PREALLOCATE - INDEX_PREALLOCATE % entry)


def write_segment(target, records, *, codec="none", batch_records: int = DEFAULT_BATCH_RECORDS,
                  batch_bytes: int = DEFAULT_BATCH_BYTES, base_offset: int = 0,
                  producer_id: int = -1, producer_epoch: int | None = None,
                  transactional: bool = False, timestamp_type: str = "create",
                  log_append_time: int | None = None, keep_offsets: bool = False,
                  commit: bool | None = None) -> tuple[int, int]:
    """Write ``records`` as one segment; returns ``(first_offset, last_offset)``.

    ``commit``: for a transactional write, end it with a COMMIT (True) or
    ABORT (False) marker; None leaves the transaction open.
    """
    with SegmentWriter(target, base_offset=base_offset, codec=codec,
                       batch_records=batch_records, batch_bytes=batch_bytes) as w:
        first, last = w.append(records, producer_id=producer_id, producer_epoch=producer_epoch,
                               transactional=transactional, timestamp_type=timestamp_type,
                               log_append_time=log_append_time, keep_offsets=keep_offsets)
        if transactional and commit is not None:
            epoch = 0 if producer_epoch is None else producer_epoch
            w.marker(COMMIT if commit else ABORT, producer_id=producer_id, producer_epoch=epoch)
    return first, last


# --- partition directories ------------------------------------------------------

class LogWriter:
    """A partition directory, written like a broker: segments roll at
    ``segment_bytes``, each with its indexes; aborted transactions go to the
    ``.txnindex`` of the segment holding the ABORT marker.

    Keeps in memory one batch and the index entries of the open segment.
    """

    def __init__(self, directory: str | os.PathLike, *, base_offset: int = 0, codec="none",
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 batch_records: int = DEFAULT_BATCH_RECORDS,
                 batch_bytes: int = DEFAULT_BATCH_BYTES,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
                 partition_leader_epoch: int = 0, preallocate_indexes: bool = True):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.codec = codec
        self.segment_bytes = segment_bytes
        self._opts = dict(codec=codec, batch_records=batch_records, batch_bytes=batch_bytes,
                          partition_leader_epoch=partition_leader_epoch,
                          index_interval_bytes=index_interval_bytes)
        self.preallocate_indexes = preallocate_indexes
        self.partition_leader_epoch = partition_leader_epoch
        self._open_txns: dict[int, int] = {}     # producer id -> first offset
        self._txn_entries: list[bytes] = []
        self._segment: SegmentWriter | None = None
        self._sequences: dict[int, int] = {}
        self._start_segment(base_offset)
        (self.directory / "partition.metadata").write_text(
            f"version: 0\ntopic_id: {uuid.uuid4().hex[:22]}\n")
        (self.directory / "leader-epoch-checkpoint").write_text(
            f"0\n1\n{partition_leader_epoch} {base_offset}\n")

    @property
    def next_offset(self) -> int:
        return self._segment.next_offset

    def _stem(self, base_offset: int) -> Path:
        return self.directory / f"{base_offset:020d}"

    def _start_segment(self, base_offset: int) -> None:
        self._segment = SegmentWriter(Path(str(self._stem(base_offset)) + ".log"),
                                      base_offset=base_offset, **self._opts)
        self._segment._sequences = self._sequences
        self._txn_entries = []

    def _finish_segment(self, active: bool) -> None:
        seg = self._segment
        if not active:
            seg._add_time_entry()  # the broker's final entry when a segment rolls
        seg.close()
        stem = self._stem(seg.base_offset)
        seg.write_indexes(stem, preallocate=active and self.preallocate_indexes)
        if self._txn_entries:
            Path(str(stem) + ".txnindex").write_bytes(b"".join(self._txn_entries))

    def _maybe_roll(self) -> None:
        if self._segment.position >= self.segment_bytes:
            nxt = self._segment.next_offset
            self._finish_segment(active=False)
            self._start_segment(nxt)

    def append(self, records, **kwargs) -> tuple[int, int]:
        """Write records (options of ``SegmentWriter.append``), rolling
        segments between batches; returns ``(first_offset, last_offset)``."""
        cols = records if isinstance(records, Columns) else to_columns(records)
        bounds = _batch_bounds(cols, self._segment.batch_records, self._segment.batch_bytes)
        first = last = None
        for start, stop in bounds:
            self._maybe_roll()
            part = Columns(cols.timestamp[start:stop], cols.key[start:stop],
                           cols.value[start:stop], cols.headers[start:stop],
                           None if cols.offset is None else cols.offset[start:stop])
            lo, last = self._segment.append(part, **kwargs)
            first = lo if first is None else first
            pid = kwargs.get("producer_id", -1)
            if kwargs.get("transactional") and pid not in self._open_txns:
                self._open_txns[pid] = lo
        if first is None:
            return self.next_offset, self.next_offset - 1
        return first, last

    def end_transaction(self, producer_id: int, *, commit: bool, producer_epoch: int = 0,
                        coordinator_epoch: int = 0, timestamp: int | None = None) -> int:
        """Write the producer's COMMIT or ABORT marker; returns its offset."""
        self._maybe_roll()
        offset = self._segment.marker(COMMIT if commit else ABORT, producer_id=producer_id,
                                      producer_epoch=producer_epoch,
                                      coordinator_epoch=coordinator_epoch, timestamp=timestamp)
        first = self._open_txns.pop(producer_id, None)
        if not commit and first is not None:
            others = list(self._open_txns.values())
            lso = min(others) if others else offset + 1
            self._txn_entries.append(struct.pack(">hqqqq", 0, producer_id, first, offset, lso))
        return offset

    def close(self) -> None:
        if self._segment is not None:
            self._finish_segment(active=True)
            self._segment = None

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_log(directory, records, *, codec="none", segment_bytes: int = DEFAULT_SEGMENT_BYTES,
              batch_records: int = DEFAULT_BATCH_RECORDS, batch_bytes: int = DEFAULT_BATCH_BYTES,
              base_offset: int = 0, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
              **append_options: Any) -> tuple[int, int]:
    """Write ``records`` into a partition directory (``<topic>-<partition>``),
    rolling segments at ``segment_bytes`` with ``.index``/``.timeindex``
    files; returns ``(first_offset, last_offset)``."""
    with LogWriter(directory, base_offset=base_offset, codec=codec, segment_bytes=segment_bytes,
                   batch_records=batch_records, batch_bytes=batch_bytes,
                   index_interval_bytes=index_interval_bytes) as log:
        return log.append(records, **append_options)

