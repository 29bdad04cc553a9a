"""Writing real magic-2 segments and partition directories.

    write_segment(target, records, ...)   one segment file (or binary stream)
    write_log(directory, records, ...)    a partition directory: rolled
                                          segments, .index, .timeindex, .txnindex
    SegmentWriter / LogWriter             the same, batch by batch, with
                                          transaction markers (commit/abort)
    LogWriter.append_batch(raw)           already-encoded batches, appended
                                          unchanged as a broker appends them
                                          (``roll``, ``restart``: the broker's)

Batches are what a broker stores (SPEC.md section 2): CRC-32C, every codec,
CreateTime or LogAppendTime, producer id/epoch/sequence, transactional and
control batches. Index entries follow LogSegment.append: an append (one batch
the writer encodes, or the bytes given to ``append_batch``) made when more
than ``index_interval_bytes`` were written since the last entry gets an offset
index entry (the append's largest offset, the position of its first byte) and
a time index entry (largest timestamp so far and the offset
``time_index_offset`` names for it), if larger than the last. A segment that
rolls, or closes as in a clean shutdown, gets the final time index entry.
Re-appending the raw batches of real broker partitions reproduces the
broker's .index/.timeindex byte for byte (tests/test_writer_indexes.py).

Every argument is checked in Python before anything is written (TypeError
for a wrong type, ValueError for a wrong value); the compiled encoder checks
its bounds again.

``records`` may be a ``kbatch.Records``, a mapping of columns (``key``,
``value``, optional ``timestamp``, ``headers``, ``offset``), or an iterable of
``(key, value[, timestamp[, headers]])`` tuples or dicts with those keys.
``Records`` holding records of aborted or open transactions (a
read_uncommitted read) are refused: written as plain records, they would be
visible to every consumer of the copy.
"""

from __future__ import annotations

import base64
import io
import operator
import os
import shutil
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Mapping

import numpy as np

from kbatch._core._checksums import crc32c_of
from kbatch._core._encode import encode_records
from kbatch.lib.columns import BinaryColumn, HeadersColumn
from kbatch.wire import ATTR_CODEC_MASK, INT64_MAX, INT64_MIN, Attr, ControlType
from kbatch.lib.compression import codec_id, compress
from kbatch.errors import ArgumentError
from kbatch.lib.paths import file_offset, parse_partition_dir, segment_base, swap_segment_base
from kbatch.lib.records import BatchTable, ControlRecords, Records

HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte magic-2 batch header
ROW_FIELDS = frozenset({"key", "value", "timestamp", "headers"})   # of a row given as a mapping
CRC_FROM = 21
ATTR_LOG_APPEND_TIME = Attr.LOG_APPEND_TIME
ATTR_TRANSACTIONAL = Attr.TRANSACTIONAL
ATTR_CONTROL = Attr.CONTROL
ABORT, COMMIT = ControlType.ABORT, ControlType.COMMIT
DEFAULT_BATCH_RECORDS = 1000
DEFAULT_BATCH_BYTES = 16 * 1024
DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000     # segment.ms: 7 days
DEFAULT_INDEX_INTERVAL = 4096
INDEX_PREALLOCATE = 10 * 1024 * 1024
INT16_MAX, INT32_MAX = (1 << 15) - 1, (1 << 31) - 1


# --- argument checks ---------------------------------------------------------
# Everything a caller passes is checked here, before the compiled encoder runs:
# TypeError for a wrong type, ValueError for a wrong value.

def _int(name: str, value, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    value = operator.index(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} {value} outside [{lo}, {hi}]")
    return value


def _codec(codec) -> int:
    if isinstance(codec, bool) or not isinstance(codec, (str, int, np.integer)):
        raise TypeError(f"codec must be a name or a number, not {type(codec).__name__}")
    return codec_id(codec)


def _int64_array(name: str, values, n: int) -> np.ndarray:
    """An int64 array of ``n`` integers (no float, no wrap-around)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of integers")
    try:
        arr = np.asarray(values)
    except (OverflowError, ValueError) as e:
        raise ValueError(f"{name}: {e}") from None
    if arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"{name} must be one-dimensional with {n} values, not shape {arr.shape}")
    if arr.dtype == object:   # Python ints too large for a numpy dtype, or mixed types
        try:
            arr = np.array([_int(name, v, INT64_MIN, INT64_MAX) for v in arr.tolist()],
                           np.int64).reshape(n)
        except TypeError:
            raise TypeError(f"{name} must hold integers") from None
    if n and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, not {arr.dtype}")
    if n and arr.dtype.kind == "u" and arr.max() > INT64_MAX:
        raise ValueError(f"{name} past the int64 range")
    return np.ascontiguousarray(arr, np.int64)


def _check_timestamps(ts: np.ndarray) -> None:
    """-1 (no timestamp) or a time in ms; deltas within one batch fit int64."""
    if len(ts) and int(ts.min()) < -1:
        raise ValueError(f"timestamp {int(ts.min())} below -1 (-1: none)")


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

    def validate(self) -> "Columns":
        """Check every column and that they have one row each (ValueError)."""
        n = len(self.timestamp)
        for name, col, kind in (("key", self.key, BinaryColumn),
                                ("value", self.value, BinaryColumn),
                                ("headers", self.headers, HeadersColumn)):
            if not isinstance(col, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, not {type(col).__name__}")
            if len(col) != n:
                raise ValueError(f"{name} has {len(col)} rows, timestamp {n}")
            col.validate()
        self.timestamp = _int64_array("timestamp", self.timestamp, n)
        _check_timestamps(self.timestamp)
        if self.offset is not None:
            self.offset = _int64_array("offset", self.offset, n)
        return self


def _binary(values) -> BinaryColumn:
    if isinstance(values, BinaryColumn):
        return values
    if values is None or isinstance(values, (str, bytes, bytearray, memoryview)):
        raise TypeError("key and value columns must be sequences of bytes, str or None")
    values = list(values)
    for v in values:
        if v is not None and not isinstance(v, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"a key or value must be bytes, str or None, not {type(v).__name__}")
    return BinaryColumn.from_pylist([bytes(v) if isinstance(v, (bytearray, memoryview)) else v
                                     for v in values])


def _headers(lists, n: int) -> HeadersColumn:
    if isinstance(lists, HeadersColumn):
        return lists
    if lists is None:
        return HeadersColumn(np.zeros(n + 1, np.int64), BinaryColumn.from_pylist([], utf8=True),
                             BinaryColumn.from_pylist([]))
    lists = [[] if h is None else list(h) for h in lists]
    counts = np.fromiter((len(h) for h in lists), np.int64, len(lists))
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    pairs = []
    for h in lists:
        for pair in h:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"a header must be a (key, value) pair, not {pair!r:.80}")
            k, v = pair
            if not isinstance(k, (str, bytes)):
                raise TypeError("a header key must be str (or UTF-8 bytes), "
                                f"not {type(k).__name__}")
            pairs.append((k, v))
    keys = BinaryColumn.from_pylist([k for k, _ in pairs], utf8=True)
    values = _binary([v for _, v in pairs])
    return HeadersColumn(offsets, keys, values)


def to_columns(records, *, default_timestamp: int | None = None,
               check_transactions: bool = True) -> Columns:
    """Normalise any accepted ``records`` input (see the module docstring).
    ``check_transactions``: refuse ``Records`` holding records of aborted or
    open transactions (``_refuse_undecided``); off where the batch written
    keeps its transactional attributes (``encode_batch``)."""
    now = int(time.time() * 1000) if default_timestamp is None else default_timestamp
    if isinstance(records, Columns):
        return records.validate()
    if isinstance(records, Records):
        if check_transactions:
            _refuse_undecided(records)
        return Columns(records.timestamp, records.key, records.value,
                       records.headers, records.offset).validate()
    if isinstance(records, Mapping):
        unknown = set(records) - {"key", "value", "timestamp", "headers", "offset"}
        if unknown:
            raise ValueError(f"unknown columns {sorted(unknown)}")
        if "value" not in records:
            raise ValueError("records need a 'value' column")
        value = _binary(records["value"])
        n = len(value)
        key = records.get("key")
        key = _binary([None] * n if key is None else key)
        ts = records.get("timestamp")
        ts = np.full(n, now, np.int64) if ts is None else ts
        return Columns(ts, key, value, _headers(records.get("headers"), n),
                       records.get("offset")).validate()
    if records is None or isinstance(records, (str, bytes, bytearray, memoryview)):
        raise TypeError("records must be Records, a mapping of columns or an iterable of rows")
    keys, values, stamps, headers = [], [], [], []
    for rec in records:
        if isinstance(rec, Mapping):
            unknown = set(rec) - ROW_FIELDS
            if unknown:     # a typo ("valeu") would write a null value: a tombstone
                raise ValueError(f"a row has unknown field(s) {sorted(map(str, unknown))} "
                                 f"(a row's fields: {', '.join(sorted(ROW_FIELDS))})")
            k, v, t, h = rec.get("key"), rec.get("value"), rec.get("timestamp"), rec.get("headers")
        else:
            if isinstance(rec, (str, bytes, bytearray, memoryview)) or not hasattr(rec, "__len__"):
                raise TypeError(f"a row must be a tuple or a mapping, not {type(rec).__name__}")
            rec = tuple(rec)
            if not 2 <= len(rec) <= 4:
                raise ValueError(f"a row has 2 to 4 fields (key, value, timestamp, headers), "
                                 f"not {len(rec)}")
            k, v = rec[0], rec[1]
            t = rec[2] if len(rec) > 2 else None
            h = rec[3] if len(rec) > 3 else None
        keys.append(k)
        values.append(v)
        stamps.append(now if t is None else t)
        headers.append(h)
    return Columns(_int64_array("timestamp", stamps, len(stamps)), _binary(keys),
                   _binary(values), _headers(headers, len(values))).validate()


def _refuse_undecided(records: Records) -> None:
    """``ValueError`` when ``records`` hold records of transactions they do
    not show committed: aborted ones (their ABORT marker among the
    records), and, unless read with read_committed, open ones (no marker
    among the records: the marker may be past the range read, or never
    written). Written as plain records they would be visible to every
    consumer of the copy, read_committed ones too. A read_committed read
    (``last_stable_offset`` set) holds no aborted record, and its open ones
    are committed (their markers lie past the range read)."""
    bt = records.batches
    markers = int(bt.is_control[records.batch].sum()) if len(records) else 0
    if markers:
        raise ValueError(
            f"{markers} control record(s) (transaction "
            "markers, include_control=True) would be written as data records: read without "
            "include_control, or copy the batches as they are with LogWriter.append_batch")
    if not len(records) or not (bt.is_transactional & ~bt.is_control).any():
        return
    from kbatch.lib.txn import ABORTED, OPEN, TxnState
    bt, control = _producers_per_partition(records)
    verdict = TxnState.build(bt, control).verdict(bt)[records.batch]
    aborted = int((verdict == ABORTED).sum())
    undecided = int((verdict == OPEN).sum()) if records.last_stable_offset is None else 0
    if aborted or undecided:
        raise ValueError(
            f"{aborted} record(s) of aborted and {undecided} of open transactions (no marker "
            "among these records) would be written as plain records, visible to every "
            "consumer: read with isolation='read_committed' to write the committed records, "
            "copy the batches as they are with LogWriter.append_batch, or pass a mapping "
            "of the columns (key, value, timestamp, headers, offset) to write them all as "
            "plain records")


def _partition_of(source) -> str:
    """What names the partition of a batch read from ``source`` (a file's
    path or URL, None for a buffer): its folder's ``<topic>-<partition>``
    name, else the folder."""
    if source is None:
        return ""
    folder = str(source).replace("\\", "/").rstrip("/").rpartition("/")[0]
    parsed = parse_partition_dir(folder.rpartition("/")[2])
    return folder if parsed is None else f"{parsed[0]}\x00{parsed[1]}"


def _producers_per_partition(records: Records):
    """The batch table and control records of ``records`` with each
    producer id made one per partition: a join of two partitions' reads
    (``Records.concat``) holds one producer's transactions of both, and a
    marker ends only its own partition's transaction. A batch's partition
    is the ``<topic>-<partition>`` folder of its file (two copies of one
    partition, ``arch/t-0`` and ``live/t-0``, are one), else the folder
    itself; batches read from buffers (no file) are taken as one partition."""
    bt, control = records.batches, records.control
    folders = [_partition_of(s) for s in records.sources]
    if len(set(folders)) < 2:
        return bt, control
    _, folder_of_source = np.unique(np.array(folders, dtype=object).astype(str),
                                    return_inverse=True)
    group = folder_of_source[np.asarray(bt.source, np.int64)]
    pairs = np.stack([group.astype(np.int64), np.asarray(bt.producer_id, np.int64)])
    _, ids = np.unique(pairs, axis=1, return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    table = BatchTable({**bt._all(), "producer_id": ids})
    cols = {name: getattr(control, name) for name in ControlRecords.__slots__}
    cols["producer_id"] = ids[np.asarray(control.batch, np.int64)] if len(control.batch) \
        else np.asarray(control.producer_id, np.int64)
    return table, ControlRecords(**cols)


def _arrays(col: BinaryColumn):
    return (np.ascontiguousarray(col.offsets, np.int64), np.ascontiguousarray(col.data),
            np.ascontiguousarray(col.is_valid().view(np.uint8)))


# --- batches ----------------------------------------------------------------

def build_batch(records_area: bytes, *, count: int, base_offset: int, last_offset_delta: int,
                base_timestamp: int, max_timestamp: int, attributes: int = 0,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                partition_leader_epoch: int = 0) -> bytes:
    """Header + records area, with the CRC-32C filled in."""
    if HEADER.size + len(records_area) - 12 > INT32_MAX:
        raise ValueError("a batch must fit 2 GiB")
    _int("count", count, 0, INT32_MAX)
    _int("base_offset", base_offset, 0, INT64_MAX)
    _int("last_offset_delta", last_offset_delta, 0, INT32_MAX)
    _int("base_timestamp", base_timestamp, INT64_MIN, INT64_MAX)
    _int("max_timestamp", max_timestamp, INT64_MIN, INT64_MAX)
    _int("attributes", attributes, 0, INT16_MAX)
    _int("producer_id", producer_id, -1, INT64_MAX)
    _int("producer_epoch", producer_epoch, -1, INT16_MAX)
    _int("base_sequence", base_sequence, -1, INT32_MAX)
    _int("partition_leader_epoch", partition_leader_epoch, -1, INT32_MAX)
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
    if _int("control_type", control_type, 0, 1) not in (ABORT, COMMIT):
        raise ValueError("control_type must be ABORT (0) or COMMIT (1)")
    _int("producer_id", producer_id, 0, INT64_MAX)
    _int("coordinator_epoch", coordinator_epoch, -(1 << 31), INT32_MAX)
    _int("timestamp", timestamp, -1, INT64_MAX)
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    cols = to_columns({"key": [key], "value": [value], "timestamp": [timestamp]})
    area = _encode(_prepare(cols), 0, 1, np.zeros(1, np.int64), np.zeros(1, np.int64))
    return build_batch(area, count=1, base_offset=base_offset, last_offset_delta=0,
                       base_timestamp=timestamp, max_timestamp=timestamp,
                       attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       partition_leader_epoch=partition_leader_epoch)


def encode_batch(records, *, base_offset: int, last_offset: int, base_timestamp: int,
                 max_timestamp: int, attributes: int, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 partition_leader_epoch: int = 0) -> bytes:
    """One magic-2 batch of ``records`` (anything ``to_columns`` takes, with
    an ``offset`` column) as Kafka's MemoryRecordsBuilder writes a batch it
    rebuilds (the log cleaner): offset deltas from ``base_offset``,
    timestamp deltas from ``base_timestamp`` (the delete horizon when
    ``attributes`` has it), ``last_offset`` kept even when the last record
    is gone, the records compressed with the codec of ``attributes``
    (always: no fallback to uncompressed). Its records stay in their
    transaction (``attributes`` and the producer are the batch's own), so
    ``Records`` of any transaction are taken."""
    cols = to_columns(records, check_transactions=False)
    if cols.offset is None:
        raise ValueError("encode_batch needs the records' offsets")
    n = len(cols)
    area = _encode(_prepare(cols), 0, n, cols.offset - base_offset,
                   cols.timestamp - base_timestamp) if n else b""
    codec = attributes & ATTR_CODEC_MASK
    if codec and n:
        area = compress(codec, area)
    return build_batch(area, count=n, base_offset=base_offset,
                       last_offset_delta=last_offset - base_offset,
                       base_timestamp=base_timestamp, max_timestamp=max_timestamp,
                       attributes=attributes, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
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


def _batch_bounds(cols: Columns, batch_records: int, batch_bytes: int,
                  offsets: np.ndarray | None = None) -> list[tuple[int, int]]:
    """Split rows into batches of at most ``batch_records`` rows and about
    ``batch_bytes`` bytes of payload (at least one row each); with
    ``offsets``, a batch also ends before an offset more than 2**31 - 1 past
    its first (offset deltas are int32)."""
    n = len(cols)
    if offsets is None and cols.offset is not None:
        offsets = cols.offset
    # each record's key, value and header bytes (8 more per header, 8 per
    # record: about their varints), so a batch's payload stays near batch_bytes
    per_header = np.concatenate([[0], np.cumsum(
        cols.headers.keys.lengths().astype(np.int64) + cols.headers.values.lengths() + 8)])
    header_bytes = np.diff(per_header[np.asarray(cols.headers.offsets, np.int64)])
    sizes = (cols.key.lengths().astype(np.int64) + cols.value.lengths() + header_bytes + 8)
    cum = np.concatenate([[0], np.cumsum(sizes)])
    bounds, i = [], 0
    while i < n:
        j = int(np.searchsorted(cum, cum[i] + batch_bytes, side="right")) - 1
        j = min(max(j, i + 1), i + batch_records, n)
        if offsets is not None:
            j = min(j, int(np.searchsorted(offsets, int(offsets[i]) + INT32_MAX, side="right")))
        bounds.append((i, j))
        i = j
    return bounds


# --- index entries ------------------------------------------------------------

class IndexBuilder:
    """A segment's ``.index`` and ``.timeindex`` entries, as a broker makes
    them (LogSegment.append / LogSegment.recover, OffsetIndex.append,
    TimeIndex.maybeAppend).

    ``append(position, size, largest_offset, largest_timestamp, shallow)``:
    one append of ``size`` bytes at ``position``. When more than
    ``interval`` bytes were appended since the last entry (decided before
    this append's size is added), an offset index entry (``largest_offset``,
    ``position``) and a time index entry (the largest timestamp so far and
    the offset recorded with it) are added. The largest timestamp moves
    only when an append's is strictly larger; the time index only grows (an
    entry whose timestamp is not above the last one is not written, nor one
    without a timestamp, -1). ``close()`` adds the final time index entry a
    rolled or closed segment ends with (onBecomeInactiveSegment, close,
    and the end of recover). A broker's recovery appends batch by batch;
    a running broker appends what one produce or fetch request carried
    (before Kafka 3.9: one entry at most per request).
    """

    def __init__(self, base_offset: int, interval: int = DEFAULT_INDEX_INTERVAL):
        self.base_offset = base_offset
        self.interval = interval
        self.offset_index: list[tuple[int, int]] = []   # (offset, position)
        self.time_index: list[tuple[int, int]] = []     # (timestamp, offset)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.since_index = 0

    def append(self, position: int, size: int, largest_offset: int, largest_timestamp: int,
               shallow_offset_of_max_timestamp: int) -> None:
        if largest_timestamp > self.max_timestamp:
            self.max_timestamp = largest_timestamp
            self.offset_of_max_timestamp = shallow_offset_of_max_timestamp
        if self.since_index > self.interval:
            self.offset_index.append((largest_offset, position))
            self.close()
            self.since_index = 0
        self.since_index += size

    def close(self) -> None:
        """TimeIndex.maybeAppend(maxTimestampSoFar, its offset)."""
        if self.max_timestamp >= 0 and (not self.time_index
                                        or self.max_timestamp > self.time_index[-1][0]):
            self.time_index.append((self.max_timestamp, self.offset_of_max_timestamp))

    def restart(self) -> None:
        """A new LogSegment object over the same files (a broker restart):
        the bytes-since-last-entry counter starts again from 0."""
        self.since_index = 0

    def full(self) -> bool:
        """Whether an index holds as many entries as 10 MiB (the broker rolls)."""
        return (len(self.offset_index) >= INDEX_PREALLOCATE // 8
                or len(self.time_index) >= INDEX_PREALLOCATE // 12)

    def index_bytes(self) -> bytes:
        """The ``.index`` file: ``relativeOffset int32 | position int32`` each."""
        return b"".join(struct.pack(">ii", o - self.base_offset, p) for o, p in self.offset_index)

    def timeindex_bytes(self) -> bytes:
        """The ``.timeindex`` file: ``timestamp int64 | relativeOffset int32`` each."""
        return b"".join(struct.pack(">qi", t, o - self.base_offset) for t, o in self.time_index)


# --- segment writer -----------------------------------------------------------

class SegmentWriter:
    """Appends batches to one segment file (or binary stream).

    Keeps in memory one batch at a time plus the index entries of the segment.
    Index entries follow LogSegment.append: one append is one batch from
    ``append``/``marker``, or the whole bytes given to ``append_batch``.
    """

    def __init__(self, target: str | os.PathLike | BinaryIO, *, base_offset: int = 0,
                 codec="none", batch_records: int = DEFAULT_BATCH_RECORDS,
                 batch_bytes: int = DEFAULT_BATCH_BYTES, partition_leader_epoch: int = 0,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
                 time_index_offset: str = "batch"):
        if time_index_offset not in TIME_INDEX_OFFSETS:
            raise ValueError(f"time_index_offset must be one of {TIME_INDEX_OFFSETS}")
        self.time_index_offset = time_index_offset
        self.base_offset = _int("base_offset", base_offset, 0, INT64_MAX)
        self.codec = _codec(codec)
        self.batch_records = _int("batch_records", batch_records, 1, INT32_MAX)
        self.batch_bytes = _int("batch_bytes", batch_bytes, 1, INT32_MAX)
        self.partition_leader_epoch = _int("partition_leader_epoch", partition_leader_epoch,
                                           -1, INT32_MAX)
        self.index_interval_bytes = _int("index_interval_bytes", index_interval_bytes,
                                         0, INT32_MAX)
        if isinstance(target, (str, os.PathLike)):
            self._file = open(target, "wb")
            self._owned = True
        elif callable(getattr(target, "write", None)):
            self._file = target
            self._owned = False
        else:
            raise TypeError("target must be a path or a binary stream, "
                            f"not {type(target).__name__}")
        self.next_offset = self.base_offset
        self.position = 0
        self.indexes = IndexBuilder(self.base_offset, self.index_interval_bytes)
        # LogSegment's roll clock: the largest timestamp of the first append
        # (rollingBasedTimestamp; None: nothing appended), and the first
        # batch's max timestamp (what a restarted broker loads instead)
        self.rolling_timestamp: int | None = None
        self.first_batch_max_timestamp: int | None = None
        self._sequences: dict[int, int] = {}
        self._epochs: dict[int, int] = {}        # producer id -> its latest epoch

    @property
    def offset_index(self) -> list[tuple[int, int]]:
        return self.indexes.offset_index

    @property
    def time_index(self) -> list[tuple[int, int]]:
        return self.indexes.time_index

    def __enter__(self) -> "SegmentWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._owned and not self._file.closed:
            self._file.close()

    def fits(self, last_offset: int) -> bool:
        """Whether ``last_offset`` has a relative offset (int32) here."""
        return 0 <= last_offset - self.base_offset <= INT32_MAX

    def _write(self, data: bytes, first_offset: int, largest_offset: int,
               largest_timestamp: int, shallow_offset_of_max_timestamp: int) -> None:
        """One LogSegment.append: the index entry (if due) points at the
        first byte of ``data`` and names its largest offset."""
        if first_offset < self.next_offset or not self.fits(largest_offset):
            raise ValueError(f"offsets {first_offset}..{largest_offset} do not follow "
                             f"{self.next_offset - 1} in the segment based at {self.base_offset}")
        position = self.position
        if position == 0:
            self.rolling_timestamp = largest_timestamp
            self.first_batch_max_timestamp = HEADER.unpack_from(data)[8]
        self._file.write(data)
        self.position += len(data)
        self.indexes.append(position, len(data), largest_offset, largest_timestamp,
                            shallow_offset_of_max_timestamp)
        self.next_offset = largest_offset + 1

    def index_full(self) -> bool:
        """Whether an index holds as many entries as 10 MiB (the broker rolls)."""
        return self.indexes.full()

    def encode(self, records, *, producer_id: int = -1, producer_epoch: int | None = None,
               transactional: bool = False, codec=None, timestamp_type: str = "create",
               log_append_time: int | None = None, keep_offsets: bool = False):
        """Check every argument now, then return an iterator over the batches
        of ``records``: ``(batch bytes, last offset, max timestamp)``.

        Offsets continue from ``next_offset`` (``keep_offsets``: the records'
        own, which must increase; gaps are kept). Sequences continue per
        producer. Keeps one batch in memory at a time."""
        if timestamp_type not in ("create", "log_append"):
            raise ValueError("timestamp_type must be 'create' or 'log_append'")
        producer_id = _int("producer_id", producer_id, -1, INT64_MAX)
        if transactional and producer_id < 0:
            raise ValueError("transactional batches need a producer_id")
        epoch = (0 if producer_id >= 0 else -1) if producer_epoch is None else producer_epoch
        epoch = _int("producer_epoch", epoch, -1, INT16_MAX)
        if log_append_time is not None:
            _int("log_append_time", log_append_time, 0, INT64_MAX)
        codec = self.codec if codec is None else _codec(codec)
        cols = to_columns(records)
        if keep_offsets and cols.offset is not None and len(cols):
            if np.any(np.diff(cols.offset) <= 0) or cols.offset[0] < self.next_offset:
                raise ValueError("offsets must increase and follow the segment's last offset")
            offsets = cols.offset
        else:
            if self.next_offset + len(cols) - 1 > INT64_MAX:
                raise ValueError("offsets would pass the int64 range")
            offsets = self.next_offset + np.arange(len(cols), dtype=np.int64)
        for start, stop in _batch_bounds(cols, self.batch_records, self.batch_bytes, offsets):
            if int(cols.timestamp[start:stop].max()) - int(cols.timestamp[start]) > INT64_MAX:
                raise ValueError("timestamps of one batch span more than the int64 range")
        if producer_id >= 0 and len(cols):      # (checked last: nothing refused after it)
            self._check_epoch(producer_id, epoch)
        return self._batches(cols, offsets, producer_id, epoch, transactional, codec,
                             timestamp_type, log_append_time)

    def _check_epoch(self, producer_id: int, epoch: int) -> None:
        """A producer's batches and markers never go back to an older epoch,
        and a new epoch starts its sequence again at 0 (ProducerAppendInfo:
        checkProducerEpoch, checkSequence), as a broker takes them."""
        latest = self._epochs.get(producer_id)
        if latest is not None and epoch < latest:
            raise ValueError(f"producer {producer_id}: epoch {epoch} is older than its epoch "
                             f"{latest} (a broker refuses it)")
        if latest != epoch:
            self._epochs[producer_id] = epoch
            self._sequences[producer_id] = 0

    def _batches(self, cols, offsets, producer_id, epoch, transactional, codec,
                 timestamp_type, log_append_time):
        prepared = _prepare(cols)
        for start, stop in _batch_bounds(cols, self.batch_records, self.batch_bytes, offsets):
            base = int(offsets[start])
            ts = cols.timestamp[start:stop]
            area = _encode(prepared, start, stop, offsets[start:stop] - base, ts - ts[0])
            attributes = codec | (ATTR_TRANSACTIONAL if transactional else 0)
            max_ts = int(ts.max())
            if timestamp_type == "log_append":
                attributes |= ATTR_LOG_APPEND_TIME
                max_ts = int(time.time() * 1000) if log_append_time is None else log_append_time
            if codec:        # the codec asked for, even where it does not pay (as
                area = compress(codec, area)      # Kafka's MemoryRecordsBuilder writes it)
            sequence = -1
            if producer_id >= 0:
                sequence = self._sequences.get(producer_id, 0)
                self._sequences[producer_id] = (sequence + stop - start) % (1 << 31)
            last = int(offsets[stop - 1])
            shallow = last
            if self.time_index_offset == "record" and not attributes & (ATTR_CODEC_MASK | ATTR_LOG_APPEND_TIME):
                shallow = int(offsets[start + int(np.argmax(ts))])
            yield (build_batch(area, count=stop - start, base_offset=base,
                               last_offset_delta=last - base, base_timestamp=int(ts[0]),
                               max_timestamp=max_ts, attributes=attributes,
                               producer_id=producer_id, producer_epoch=epoch,
                               base_sequence=sequence,
                               partition_leader_epoch=self.partition_leader_epoch),
                   last, max_ts, shallow)

    def append(self, records, **options) -> tuple[int, int]:
        """Write ``records`` as batches (options: see ``encode``); returns
        ``(first_offset, last_offset)``."""
        first = self.next_offset
        wrote = False
        for batch, last, max_ts, shallow in self.encode(records, **options):
            if not wrote:
                first = int.from_bytes(batch[:8], "big", signed=True)
                wrote = True
            self._write(batch, int.from_bytes(batch[:8], "big", signed=True), last, max_ts,
                        shallow)
        return first, self.next_offset - 1

    def append_batch(self, data) -> "BatchInfo":
        """Append already-encoded magic-2 batches (the bytes of one or more
        whole batches, as a broker appends a producer's request) unchanged,
        as one LogSegment.append: at most one index entry, at the position of
        the first batch, naming the largest offset. Returns their summary."""
        info = scan_batches(data, self.time_index_offset)
        self._write(bytes(data), info.first_offset, info.last_offset, info.max_timestamp,
                    info.offset_of_max_timestamp)
        return info

    def marker(self, control_type: int, *, producer_id: int, producer_epoch: int = 0,
               coordinator_epoch: int = 0, timestamp: int | None = None) -> int:
        """Write a COMMIT (1) or ABORT (0) marker; returns its offset."""
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        offset = self.next_offset
        producer_epoch = _int("producer_epoch", producer_epoch, 0, INT16_MAX)
        self._check_epoch(_int("producer_id", producer_id, 0, INT64_MAX), producer_epoch)
        batch = control_batch(control_type, base_offset=offset, producer_id=producer_id,
                              producer_epoch=producer_epoch,
                              coordinator_epoch=coordinator_epoch, timestamp=ts,
                              partition_leader_epoch=self.partition_leader_epoch)
        self._write(batch, offset, offset, ts, offset)
        return offset

    def write_indexes(self, stem: str | os.PathLike, *, preallocate: bool = False) -> None:
        """Write ``<stem>.index`` and ``<stem>.timeindex`` (relative offsets).

        ``preallocate`` leaves them zero-padded to 10 MiB, as the broker keeps
        the indexes of its active segment (sparse files: no disk used).
        """
        index, times = self.indexes.index_bytes(), self.indexes.timeindex_bytes()
        for suffix, data in ((".index", index), (".timeindex", times)):
            path = Path(str(stem) + suffix)
            with open(path, "wb") as f:
                f.write(data)
                if preallocate:
                    entry = 8 if suffix == ".index" else 12
                    f.truncate(INDEX_PREALLOCATE - INDEX_PREALLOCATE % entry)


# --- already-encoded batches ------------------------------------------------------

@dataclass
class BatchInfo:
    """What an append of raw batches needs from their headers."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int      # last offset of the first batch holding it
    batches: list                     # (base offset, last offset, attributes, producer id,
                                      #  control type or None)


TIME_INDEX_OFFSETS = ("batch", "record")


def scan_batches(data, time_index_offset: str = "batch") -> BatchInfo:
    """Check that ``data`` is one or more whole, CRC-valid magic-2 batches
    with increasing offsets, and summarise them (ValueError otherwise).

    ``time_index_offset``: the offset a time index entry names for a batch's
    max timestamp: ``"batch"``, its last offset (Kafka 3.8 and later, and
    every broker's recovery); ``"record"``, for an uncompressed CreateTime
    batch, the first record holding it (brokers up to 3.7 validating a
    producer's batch in place; other batches: the last offset)."""
    if time_index_offset not in TIME_INDEX_OFFSETS:
        raise ValueError(f"time_index_offset must be one of {TIME_INDEX_OFFSETS}")
    try:
        view = memoryview(data).cast("B")
    except TypeError:
        raise TypeError(f"batch data must be bytes-like, not {type(data).__name__}") from None
    pos, end = 0, len(view)
    if end == 0:
        raise ValueError("no batch to append")
    batches = []
    max_ts, shallow, prev_last = -1, -1, -1
    while pos < end:
        if HEADER.size > end - pos:
            raise ValueError(f"a batch header at byte {pos} is cut short")
        (base, length, _ple, magic, crc, attributes, last_delta, _first_ts, batch_max_ts,
         producer_id, _epoch, _seq, count) = HEADER.unpack_from(view, pos)
        if magic != 2:
            raise ValueError(f"batch at byte {pos} has magic {magic}; only magic 2 is appended")
        if length < HEADER.size - 12 or length > end - pos - 12:
            raise ValueError(f"batch at byte {pos} has length {length}, past the data")
        size = length + 12
        if crc32c_of(view[pos + CRC_FROM:pos + size]) != crc:
            raise ValueError(f"batch at byte {pos} (base offset {base}) fails its CRC")
        if base < 0 or last_delta < 0 or count < 0:
            raise ValueError(f"batch at byte {pos} has negative offsets or count")
        if base <= prev_last:
            raise ValueError(f"batch at byte {pos}: base offset {base} does not follow "
                             f"{prev_last}")
        last = base + last_delta
        if last > INT64_MAX:
            raise ValueError(f"batch at byte {pos}: last offset past the int64 range")
        control_type = None
        if attributes & ATTR_CONTROL:
            control_type = _control_type(view[pos + HEADER.size:pos + size], attributes, pos)
        if batch_max_ts > max_ts:
            max_ts, shallow = batch_max_ts, last
            if (time_index_offset == "record" and not attributes & (ATTR_CODEC_MASK | ATTR_LOG_APPEND_TIME)
                    and not attributes & ATTR_CONTROL):
                shallow = _offset_of_max_timestamp(view[pos + HEADER.size:pos + size], base,
                                                   _first_ts, count, pos)
        batches.append((base, last, attributes, producer_id, control_type))
        prev_last = last
        pos += size
    return BatchInfo(batches[0][0], prev_last, max_ts, shallow, batches)


def _zigzag(view, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """A zig-zag varint (``max_bytes`` 5) or varlong (10) at ``pos``:
    ``(value, next position)``."""
    what = "varint" if max_bytes == 5 else "varlong"
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ValueError(f"a {what} is cut short")
        b = view[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
    raise ValueError(f"a {what} runs past {max_bytes} bytes")


def _offset_of_max_timestamp(area, base: int, first_ts: int, count: int, at: int) -> int:
    """Offset of the first record of an uncompressed batch holding its
    largest timestamp (LogValidator up to Kafka 3.7)."""
    end = len(area)
    p, best, best_off = 0, -1, -1
    for _ in range(count):
        length, q = _zigzag(area, p, end)
        if length < 3 or length > end - q:
            raise ValueError(f"batch at byte {at}: a record runs past the batch")
        ts_delta, r = _zigzag(area, q + 1, end, 10)
        off_delta, _ = _zigzag(area, r, end)
        if first_ts + ts_delta > best:
            best, best_off = first_ts + ts_delta, base + off_delta
        p = q + length
    return best_off


def _control_type(area, attributes: int, at: int) -> int | None:
    """The type of a control batch's first record (``>hh`` key: version,
    type); None when it has no record."""
    if attributes & ATTR_CODEC_MASK:
        raise ValueError(f"control batch at byte {at} is compressed")
    end = len(area)
    if end == 0:
        return None
    _, p = _zigzag(area, 0, end)          # record length
    p += 1                                # attributes
    _, p = _zigzag(area, p, end, 10)      # timestamp delta
    _, p = _zigzag(area, p, end)          # offset delta
    klen, p = _zigzag(area, p, end)
    if klen < 4 or klen > end - p:
        raise ValueError(f"control batch at byte {at} has no control key")
    return struct.unpack_from(">h", area, p + 2)[0]


def write_segment(target, records, *, codec="none", batch_records: int = DEFAULT_BATCH_RECORDS,
                  batch_bytes: int = DEFAULT_BATCH_BYTES, base_offset: int = 0,
                  producer_id: int = -1, producer_epoch: int | None = None,
                  transactional: bool = False, timestamp_type: str = "create",
                  log_append_time: int | None = None, keep_offsets: bool = False,
                  commit: bool | None = None) -> tuple[int, int]:
    """Write ``records`` as one segment; returns ``(first_offset, last_offset)``.

    ``commit``: for a transactional write, end it with a COMMIT (True) or
    ABORT (False) marker; None leaves the transaction open. Every argument is
    checked before the target is opened.
    """
    cols = to_columns(records)
    if commit is not None and not isinstance(commit, bool):
        raise TypeError("commit must be True, False or None")
    probe = SegmentWriter(io.BytesIO(), base_offset=base_offset, codec=codec,
                          batch_records=batch_records, batch_bytes=batch_bytes)
    probe.encode(cols, producer_id=producer_id, producer_epoch=producer_epoch,
                 transactional=transactional, timestamp_type=timestamp_type,
                 log_append_time=log_append_time, keep_offsets=keep_offsets)
    with SegmentWriter(target, base_offset=base_offset, codec=codec,
                       batch_records=batch_records, batch_bytes=batch_bytes) as w:
        first, last = w.append(cols, producer_id=producer_id, producer_epoch=producer_epoch,
                               transactional=transactional, timestamp_type=timestamp_type,
                               log_append_time=log_append_time, keep_offsets=keep_offsets)
        if transactional and commit is not None:
            epoch = 0 if producer_epoch is None else producer_epoch
            w.marker(COMMIT if commit else ABORT, producer_id=producer_id, producer_epoch=epoch)
    return first, last


# --- partition directories ------------------------------------------------------

class LogWriter:
    """A partition directory, written like a broker: a segment rolls before
    an append that would take it past ``segment_bytes`` (or past 2**31 - 1
    offsets from its base, or fill an index), or whose largest timestamp is
    more than ``segment_ms`` after the largest timestamp of the segment's
    first append (a segment whose first append has no timestamp, -1: more
    than ``segment_ms`` of ``clock`` since the segment was created), as
    LogSegment.shouldRoll decides with ``segment.jitter.ms`` 0; each segment
    with its indexes; aborted transactions go to the ``.txnindex`` of the
    segment holding the ABORT marker. ``segment_ms`` None (the default): no
    time roll (a broker's default is ``DEFAULT_SEGMENT_MS``, 7 days: pass it to
    roll as a broker with default settings does).
    ``clock``: the broker's wall clock in milliseconds (default: the time now).

    ``time_index_offset``: which offset a time index entry names, ``"batch"``
    (Kafka 3.8+) or ``"record"`` (up to 3.7; see ``scan_batches``).

    ``preallocate_indexes``: the active segment's indexes are left as a running
    broker keeps them (zero-padded to 10 MiB, no final time index entry);
    False leaves them as a clean shutdown does (trimmed, with the final time
    index entry, LogSegment.close).

    Keeps in memory one batch and the index entries of the open segment.
    """

    def __init__(self, directory: str | os.PathLike, *, base_offset: int = 0, codec="none",
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 segment_ms: int | None = None,
                 batch_records: int = DEFAULT_BATCH_RECORDS,
                 batch_bytes: int = DEFAULT_BATCH_BYTES,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
                 partition_leader_epoch: int = 0, preallocate_indexes: bool = True,
                 time_index_offset: str = "batch", clock=None):
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a path, not {type(directory).__name__}")
        self.segment_bytes = _int("segment_bytes", segment_bytes, 1, INT32_MAX)
        self.segment_ms = None if segment_ms is None else \
            _int("segment_ms", segment_ms, 1, INT64_MAX)
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be callable, not {type(clock).__name__}")
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._opts = dict(codec=codec, batch_records=batch_records, batch_bytes=batch_bytes,
                          partition_leader_epoch=partition_leader_epoch,
                          index_interval_bytes=index_interval_bytes,
                          time_index_offset=time_index_offset)
        SegmentWriter(io.BytesIO(), base_offset=base_offset, **self._opts)  # checks them
        self.directory = Path(directory)
        refuse_existing_log(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.codec = codec
        self.preallocate_indexes = bool(preallocate_indexes)
        self.partition_leader_epoch = partition_leader_epoch
        self._open_txns: dict[int, int] = {}     # producer id -> first offset
        self._txn_entries: list[bytes] = []
        self._segment: SegmentWriter | None = None
        self._sequences: dict[int, int] = {}
        self._epochs: dict[int, int] = {}
        self._start_segment(base_offset)
        topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        (self.directory / "partition.metadata").write_text(
            f"version: 0\ntopic_id: {topic_id}\n")
        epochs = [f"{partition_leader_epoch} {base_offset}"] if partition_leader_epoch >= 0 else []
        (self.directory / "leader-epoch-checkpoint").write_text(
            "\n".join(["0", str(len(epochs)), *epochs]) + "\n")

    @property
    def next_offset(self) -> int:
        return self._segment.next_offset

    def _stem(self, base_offset: int) -> Path:
        return self.directory / f"{base_offset:020d}"

    def _start_segment(self, base_offset: int) -> None:
        self._segment = SegmentWriter(Path(str(self._stem(base_offset)) + ".log"),
                                      base_offset=base_offset, **self._opts)
        self._segment._sequences = self._sequences
        self._segment._epochs = self._epochs
        self._segment_created = self._clock()
        self._txn_entries = []

    def _finish_segment(self, active: bool) -> None:
        seg = self._segment
        prealloc = active and self.preallocate_indexes
        if not prealloc:
            # the final entry of a rolled (onBecomeInactiveSegment) or closed segment
            seg.indexes.close()
        seg.close()
        stem = self._stem(seg.base_offset)
        seg.write_indexes(stem, preallocate=prealloc)
        if self._txn_entries:
            Path(str(stem) + ".txnindex").write_bytes(b"".join(self._txn_entries))

    def roll(self, base_offset: int | None = None) -> None:
        """Close the active segment (as a broker rolls it) and start a new one
        at ``base_offset`` (default and minimum: the next offset)."""
        nxt = self.next_offset
        base = nxt if base_offset is None else _int("base_offset", base_offset, nxt, INT64_MAX)
        self._finish_segment(active=False)
        self._start_segment(base)

    def restart(self) -> None:
        """What a broker's clean restart leaves in the active segment: the
        final time index entry of LogSegment.close, and an offset index
        counter that starts again from 0 (a new LogSegment object)."""
        self._segment.indexes.close()
        self._segment.indexes.restart()
        # a new LogSegment object: created now, its roll clock loaded from the
        # file's first batch (loadFirstBatchTimestamp)
        self._segment_created = self._clock()
        self._segment.rolling_timestamp = self._segment.first_batch_max_timestamp

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int,
                    max_timestamp: int) -> None:
        """LogSegment.shouldRoll before an append (``max_timestamp``: the
        append's largest timestamp); the new segment starts at the append's
        first offset (or the next offset, if larger)."""
        seg = self._segment
        if seg.position > 0 and (seg.position > self.segment_bytes - size
                                 or self._waited_too_long(max_timestamp)
                                 or not seg.fits(last_offset) or seg.index_full()):
            self.roll(max(first_offset, self.next_offset))

    def _waited_too_long(self, max_timestamp: int) -> bool:
        """LogSegment.timeWaitedForRoll past ``segment_ms``: the append's
        largest timestamp minus the segment's roll timestamp, or (that
        timestamp is -1) the clock's time since the segment was created."""
        if self.segment_ms is None:
            return False
        first = self._segment.rolling_timestamp
        waited = max_timestamp - first if first is not None and first >= 0 \
            else self._clock() - self._segment_created
        return waited > self.segment_ms

    def _track(self, base: int, attributes: int, producer_id: int, control_type) -> None:
        """Open transactions, and the .txnindex entry of an ABORT marker."""
        if not attributes & ATTR_TRANSACTIONAL:
            return
        if control_type is None:
            if not attributes & ATTR_CONTROL:
                self._open_txns.setdefault(producer_id, base)
            return
        if control_type not in (ABORT, COMMIT):
            return
        first = self._open_txns.pop(producer_id, None)
        if control_type == ABORT and first is not None:
            others = list(self._open_txns.values())
            lso = min(others) if others else base + 1
            self._txn_entries.append(struct.pack(">hqqqq", 0, producer_id, first, base, lso))

    def append(self, records, **options) -> tuple[int, int]:
        """Write records (options of ``SegmentWriter.encode``), rolling
        segments between batches; returns ``(first_offset, last_offset)``."""
        first = None
        pid = options.get("producer_id", -1)
        if pid is not None and pid >= 0 and not options.get("transactional") \
                and pid in self._open_txns:
            raise ValueError(f"producer {pid} has an open transaction: a non-transactional "
                             "batch of it is refused, as a broker refuses it "
                             "(InvalidTxnStateException)")
        for batch, last, max_ts, shallow in self._segment.encode(records, **options):
            base = int.from_bytes(batch[:8], "big", signed=True)
            self._maybe_roll(len(batch), base, last, max_ts)
            self._segment._write(batch, base, last, max_ts, shallow)
            self._track(base, batch[22] & 0xFF, pid, None)
            first = base if first is None else first
        if first is None:
            return self.next_offset, self.next_offset - 1
        return first, self.next_offset - 1

    def append_batch(self, data, *, time_index_offset: str | None = None) -> BatchInfo:
        """Append already-encoded magic-2 batches unchanged, as a broker
        appends them (one LogSegment.append: index entries, roll rules,
        transactions and ``.txnindex`` as for the batches it writes itself).
        A leader appends a producer's batch alone; a follower appends what
        one fetch returned (several batches) at once, with
        ``time_index_offset="batch"``. Returns their summary (``BatchInfo``)."""
        info = scan_batches(data, time_index_offset or self._segment.time_index_offset)
        data = bytes(data)
        self._maybe_roll(len(data), info.first_offset, info.last_offset, info.max_timestamp)
        self._segment._write(data, info.first_offset, info.last_offset, info.max_timestamp,
                             info.offset_of_max_timestamp)
        for base, _last, attributes, producer_id, control_type in info.batches:
            self._track(base, attributes, producer_id, control_type)
        return info

    def end_transaction(self, producer_id: int, *, commit: bool, producer_epoch: int = 0,
                        coordinator_epoch: int = 0, timestamp: int | None = None) -> int:
        """Write the producer's COMMIT or ABORT marker; returns its offset."""
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        offset = self.next_offset
        producer_epoch = _int("producer_epoch", producer_epoch, 0, INT16_MAX)
        self._segment._check_epoch(_int("producer_id", producer_id, 0, INT64_MAX), producer_epoch)
        batch = control_batch(COMMIT if commit else ABORT, base_offset=offset,
                              producer_id=producer_id,
                              producer_epoch=producer_epoch,
                              coordinator_epoch=coordinator_epoch, timestamp=ts,
                              partition_leader_epoch=self._segment.partition_leader_epoch)
        self._maybe_roll(len(batch), offset, offset, ts)
        self._segment._write(batch, offset, offset, ts, offset)
        self._track(offset, ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id,
                    COMMIT if commit else ABORT)
        return offset

    def close(self) -> None:
        if self._segment is not None:
            self._finish_segment(active=True)
            self._segment = None

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()



def into_new_directory(dest: Path, write):
    """``write()``, which fills the new directory ``dest`` (the caller has
    checked that it did not exist); when it raises, whatever it wrote there
    is removed, so a failed run leaves no half-written copy."""
    try:
        return write()
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def refuse_existing_log(directory: Path) -> None:
    """``ArgumentError`` when ``directory`` already holds a log (a segment
    file, or an interrupted swap's or cleaner's; ``.deleted`` files, which a
    broker deletes on load, and other files do not count): the writer
    starts new logs only, and would overwrite the segment at its base offset."""
    if not directory.is_dir():
        return
    held = sorted(p.name for p in directory.iterdir() if p.is_file() and (
        segment_base(p.name) is not None or swap_segment_base(p.name) is not None
        or (p.name.endswith(".log.cleaned") and file_offset(p.name) is not None)))
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise ArgumentError(f"{directory}: already holds a log ({shown}): kbatch writes new "
                            "partition directories only (read this one with kbatch.open_log; "
                            "write into an empty or new directory)")


def write_log(directory, records, *, codec="none", segment_bytes: int = DEFAULT_SEGMENT_BYTES,
              segment_ms: int | None = None,
              batch_records: int = DEFAULT_BATCH_RECORDS, batch_bytes: int = DEFAULT_BATCH_BYTES,
              base_offset: int = 0, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
              **append_options: Any) -> tuple[int, int]:
    """Write ``records`` into a partition directory (``<topic>-<partition>``),
    rolling segments at ``segment_bytes`` and ``segment_ms`` (``LogWriter``)
    with ``.index``/``.timeindex`` files; returns ``(first_offset,
    last_offset)``. Every argument is checked before the directory is created."""
    cols = to_columns(records)
    SegmentWriter(io.BytesIO(), base_offset=base_offset, codec=codec,
                  batch_records=batch_records, batch_bytes=batch_bytes,
                  index_interval_bytes=index_interval_bytes).encode(cols, **append_options)
    if segment_ms is not None:
        _int("segment_ms", segment_ms, 1, INT64_MAX)
    refuse_existing_log(Path(directory))
    with LogWriter(directory, base_offset=base_offset, codec=codec, segment_bytes=segment_bytes,
                   segment_ms=segment_ms, batch_records=batch_records, batch_bytes=batch_bytes,
                   index_interval_bytes=index_interval_bytes) as log:
        return log.append(cols, **append_options)
