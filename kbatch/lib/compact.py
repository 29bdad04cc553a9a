"""Compaction: ``kbatch.compact(source, dest, now=, delete_retention_ms=)``
writes what one run of Kafka's log cleaner would leave (LogCleaner.scala,
Cleaner.doClean / cleanSegments / cleanInto, MemoryRecords.filterTo,
CleanedTransactionMetadata), on a copy; the source is never written.

Per partition (magic 2 data):

- the cleanable range ends at the first uncleanable offset: the active
  segment's base offset, or the first offset of an open transaction, or the
  high watermark, or (``min_compaction_lag_ms`` > 0) the base of the first
  dirty segment whose largest timestamp is within that lag of ``now``,
  whichever is lowest; the segments wholly below it are cleaned, the rest
  (the active segment at least) are copied untouched;
- with ``min_cleanable_dirty_ratio`` the run happens only where the broker
  would pick the log (LogCleanerManager.grabFilthiestCompactedLog): its
  dirty ratio (cleanable bytes / clean + cleanable bytes) is above it, or
  ``max_compaction_lag_ms`` has passed since the first dirty segment's
  first batch and there is something to clean; a log not picked is copied
  untouched (without the option: one run, as if picked);
- the offset map holds, for each key of the dirty range's non-aborted
  data records, its highest offset: the dirty range starts at the cleaner
  checkpoint (``cleaner-offset-checkpoint``), else at the log start offset
  (a checkpoint outside the log is reset to it), and ends at the first
  uncleanable offset (keys rewritten in the active segment do not count:
  their older records stay in the cleaned segments); a key seen only
  below the dirty range is not in it, so its records all stay. The map
  holds what the dedupe buffer holds (``dedupe_buffer_bytes``, 128 MiB: 24
  bytes a key, 90% full): when it fills the run ends after the last batch
  read whole, and records past that stay as they are. Nothing dirty: the
  cleaner does not pick the log, and every segment is copied;
- a data record stays when it holds the latest offset of its key and has
  a value, or is a tombstone whose batch has no delete horizon yet or one
  in the future (``now`` < horizon); a record without a key is dropped;
- a batch of an aborted transaction loses its records; a COMMIT marker
  whose transaction has no batch left, or an ABORT marker whose aborted
  data is already gone, is dropped once its delete horizon has passed, and
  gets one (``now + delete_retention_ms``) the first time it could go;
- a batch that keeps tombstones and has no delete horizon is rewritten
  with one (attribute bit 6, base timestamp = ``now +
  delete_retention_ms``, record timestamps as deltas from it); a batch
  whose records all stay and needs no horizon is copied byte for byte;
  other kept batches are rewritten with their kept records, the same base
  and last offset, producer fields, codec and leader epoch;
- a batch left without records is kept as an empty batch header when it
  holds an active producer's last data offset (its sequence state) or
  ends the cleaning round, and dropped otherwise; a producer is active when
  its last batch is younger than ``producer_id_expiration_ms`` (1 day);
- cleaned segments are grouped as ``groupSegmentsBySize`` groups them
  (``segment_bytes`` of source data per group, offsets within 2**31), each group
  written as one segment named by its first base offset, appended in
  chunks of the cleaner's read buffer (``io_buffer_bytes``, 256 KiB; doubled
  up to ``max_message_bytes`` and past it to a batch's size when a batch
  does not fit, and so until the end of that source segment) with
  the index rule of LogSegment.append, the final time index entry of a
  rolled segment, and a ``.txnindex`` of the aborted transactions whose
  markers it keeps.

Only logs whose cleanup.policy holds "compact" are cleaned (``cleanup_policy``;
the KRaft metadata log never is): the others are copied as they are. A
partition directory is cleaned with the checkpoint files of the data
directory holding it (high watermark, log start, cleaner offset).

The cleaner-offset-checkpoint of the copy names where the cleaning ended;
the other checkpoint files and side files, the data directory's own files
and every file of a partition that is not a segment's are copied. A cleaned segment
takes the modification time of its group's last source segment
(cleanSegments), copied ones keep theirs: retention by time falls back on
them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbatch.errors import ArgumentError
from kbatch.lib.checkpoints import (broker_load, carry_data_dir_files, holder_offsets,
                                    offsets_of, offsets_text)
from kbatch.lib.log import PartitionLog
from kbatch.lib.copies import carry_untouched, copy_file, copy_partition, set_aside_notes
from kbatch.lib.logfiles import keep_mtime, loaded_files
from kbatch.lib.open import Partition, resolve
from kbatch.lib.paths import PathKind, file_offset
from kbatch.lib.producers import TXN_ENTRY, ProducerState
from kbatch.lib.records import Records
from kbatch.lib.segment import DecodeOptions
from kbatch.lib.storage import Storage
from kbatch.lib.writer import (DEFAULT_INDEX_INTERVAL, INT32_MAX, IndexBuilder, encode_batch,
                               into_new_directory)
from kbatch.wire import INT64_MAX, Attr, ControlType

DAY_MS = 24 * 3600 * 1000
DEFAULT_SEGMENT_BYTES = 1 << 30
IO_BUFFER_BYTES = 512 * 1024 // 2      # log.cleaner.io.buffer.size / threads / 2
MAX_MESSAGE_BYTES = 1048588            # max.message.bytes (and message.max.bytes)
DEDUPE_BUFFER_BYTES = 128 << 20        # log.cleaner.dedupe.buffer.size / threads
# LogConfig's validators: segment.bytes is an INT atLeast(14)
# (LegacyRecord.RECORD_OVERHEAD_V0; Kafka 4.x asks for 1 MiB, but a topic of
# an earlier broker may hold less), max.compaction.lag.ms a LONG atLeast(1),
# delete.retention.ms and min.compaction.lag.ms LONGs atLeast(0),
# index.interval.bytes and max.message.bytes INTs atLeast(0)
MIN_SEGMENT_BYTES = 14
SEGMENT_BYTES_RANGE = (MIN_SEGMENT_BYTES, INT32_MAX)
MS_RANGE = (0, INT64_MAX)
MAX_COMPACTION_LAG_MS_RANGE = (1, INT64_MAX)
INT_RANGE = (0, INT32_MAX)
# max.message.bytes: Kafka takes 0 too, but a cleaner buffer that grows up to
# 0 bytes never holds a batch: 1 at least here
MAX_MESSAGE_BYTES_RANGE = (1, INT32_MAX)
KAFKA_NAMES = {"segment_bytes": "segment.bytes", "delete_retention_ms": "delete.retention.ms",
               "min_compaction_lag_ms": "min.compaction.lag.ms",
               "max_compaction_lag_ms": "max.compaction.lag.ms",
               "index_interval_bytes": "index.interval.bytes",
               "max_message_bytes": "max.message.bytes"}


@dataclass
class CleanedSegment:
    file: str                       # the segment written (a group's first base offset)
    sources: list[str]
    batches_in: int = 0
    batches_out: int = 0
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass
class PartitionCompaction:
    topic: str | None
    partition: int | None
    first_uncleanable_offset: int
    first_dirty_offset: int = 0     # where this run's offset map starts
    end_offset: int = 0             # where it ended: the cleaner checkpoint after it
    dirty_ratio: float = 0.0        # cleanable bytes / (clean + cleanable bytes)
    picked: bool = True             # False: the broker would not clean it (the ratio)
    cleaned: list[CleanedSegment] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)
    null_keys: int = 0             # records without a key dropped
    tombstones_kept: int = 0
    tombstones_removed: int = 0
    aborted_batches: int = 0


@dataclass
class CompactionReport:
    dest: str
    partitions: list[PartitionCompaction]
    # partitions of topics the cleaner does not clean (their cleanup.policy
    # lacks "compact"), copied as they are: "<folder> (cleanup.policy ...)"
    not_compacted: list[str] = field(default_factory=list)
    # folders of the data directory the copy leaves out (``set_aside_notes``)
    notes: list[str] = field(default_factory=list)


def _active_producers(batches, now: int, expiration_ms: int) -> dict[int, tuple[int, int]]:
    """``{producer id: (last data offset or -1, epoch)}`` of the producers
    ProducerStateManager still holds: one whose last batch is younger than
    ``expiration_ms`` or whose transaction is open (isProducerExpired).
    A batch of another epoch clears what the entry knew of earlier batches
    (ProducerStateEntry.maybeUpdateProducerEpoch): after a marker that
    bumps the epoch the producer has no last data offset."""
    out: dict[int, tuple[int, int]] = {}
    last_ts: dict[int, int] = {}
    open_txn: set[int] = set()
    pid = batches.producer_id
    for r in np.flatnonzero(pid >= 0).tolist():
        p = int(pid[r])
        epoch = int(batches.producer_epoch[r])
        prev, prev_epoch = out.get(p, (-1, epoch))
        if epoch != prev_epoch:
            prev = -1
        if batches.is_control[r]:
            out[p] = (prev, epoch)
            open_txn.discard(p)
        else:
            out[p] = (int(batches.last_offset[r]), epoch)
            if batches.is_transactional[r]:
                open_txn.add(p)
        last_ts[p] = int(batches.max_timestamp[r])
    return {p: v for p, v in out.items() if p in open_txn or now - last_ts[p] < expiration_ms}


def _groups(segments, sizes, max_bytes: int, end: int) -> list[list]:
    """Cleaner.groupSegmentsBySize: consecutive segments up to ``max_bytes``
    whose offsets stay within 2**31 of the group's first base (relative
    offsets are int32). Kafka's index-size bound is not applied: kbatch's
    rebuilt indexes are never preallocated."""
    groups, i = [], 0
    while i < len(segments):
        group, size = [segments[i]], sizes[i]
        i += 1
        while (i < len(segments) and size + sizes[i] <= max_bytes
               and (sizes[i] == 0 or _last_offset(segments, i, end)
                    - group[0].base_offset <= (1 << 31) - 1)):
            group.append(segments[i])
            size += sizes[i]
            i += 1
        groups.append(group)
    return groups


def _last_offset(segments, i: int, end: int) -> int:
    nxt = segments[i + 1].base_offset if i + 1 < len(segments) else end
    return nxt - 1


class _Txns:
    """CleanedTransactionMetadata: aborted transactions met in offset order."""

    def __init__(self, aborted: list[tuple[int, int, int, int]]):
        self.pending = sorted(aborted, key=lambda a: a[1])   # (pid, first, last, lso)
        self.aborted: dict[int, list] = {}                    # pid -> [txn, seen batch]
        self.committed: set[int] = set()

    def _consume(self, offset: int) -> None:
        while self.pending and self.pending[0][1] <= offset:
            txn = self.pending.pop(0)
            self.aborted.setdefault(txn[0], [txn, False])

    def data(self, pid: int, last: int, transactional: bool) -> bool:
        """Whether the batch belongs to an aborted transaction."""
        self._consume(last)
        if not transactional:
            return False
        entry = self.aborted.get(pid)
        if entry is not None:
            entry[1] = True
            return True
        self.committed.add(pid)
        return False

    def control(self, pid: int, last: int, ctype: int | None) -> tuple[bool, tuple | None]:
        """``(discardable, aborted txn to index)`` of a control batch."""
        self._consume(last)
        if ctype is None:
            return True, None
        if ctype == ControlType.ABORT:
            entry = self.aborted.pop(pid, None)
            if entry is not None and entry[1]:
                return False, entry[0]
            return True, None
        if ctype == ControlType.COMMIT:
            if pid in self.committed:
                self.committed.discard(pid)
                return False, None
            return True, None
        return False, None


def compact_partition(log: PartitionLog, dest: Path, *, now: int, delete_retention_ms: int,
                      segment_bytes: int, producer_id_expiration_ms: int,
                      high_watermark: int | None, index_interval_bytes: int,
                      io_buffer_bytes: int,
                      max_message_bytes: int = MAX_MESSAGE_BYTES,
                      dedupe_buffer_bytes: int = DEDUPE_BUFFER_BYTES,
                      log_start: int | None = None,
                      cleaner_offset: int | None = None,
                      min_compaction_lag_ms: int = 0,
                      min_cleanable_dirty_ratio: float | None = None,
                      max_compaction_lag_ms: int | None = None,
                      loaded: tuple[bool, int] | None = None) -> PartitionCompaction:
    # loaded: (clean shutdown, recovery point) of the broker's load, for the
    # largest timestamps min_compaction_lag_ms looks at (retention.segment_infos)
    opts = DecodeOptions()
    whole = log.read()
    batches, control, _ = log.transaction_tables()
    state = log.transaction_state(high_watermark)
    dropped = state.dropped(batches)
    active = log.segments[-1]
    uncleanable = active.base_offset
    open_rows = np.flatnonzero(dropped & (batches.base_offset >= state.last_stable_offset))
    if len(open_rows):
        uncleanable = min(uncleanable, int(batches.base_offset[open_rows].min()))
    if high_watermark is not None:
        uncleanable = min(uncleanable, high_watermark)
    # rounded down to the base of the segment holding it, as
    # LogCleanerManager.calculateCleanableBytes does: a key rewritten in that
    # segment must not remove its older records from the cleaned ones
    uncleanable = max((s.base_offset for s in log.segments if s.base_offset <= uncleanable),
                      default=uncleanable)
    first_dirty = _first_dirty(log, batches, log_start, cleaner_offset)
    if min_compaction_lag_ms > 0:
        lagged = _lag_bound(log, first_dirty, now, min_compaction_lag_ms, loaded)
        if lagged is not None:
            uncleanable = min(uncleanable, lagged)
    out = PartitionCompaction(log.topic, log.partition, uncleanable, first_dirty)
    out.dirty_ratio, cleanable_bytes = _dirty_ratio(log, first_dirty, uncleanable)
    if min_cleanable_dirty_ratio is not None:
        due = max_compaction_lag_ms is not None and _compaction_delay(
            log, batches, first_dirty, now, max_compaction_lag_ms) > 0
        out.picked = (due and cleanable_bytes > 0) or \
            out.dirty_ratio > min_cleanable_dirty_ratio
    dest.mkdir(parents=True)
    # the aborted transactions, from the markers (as the .txnindex files say)
    markers = dict(zip(control.offset.tolist(), control.type.tolist()))
    producer_state, aborted = ProducerState(), []
    for r in range(len(batches)):
        base = int(batches.base_offset[r])
        entry = producer_state.aborted(base, int(batches.producer_id[r]),
                                       bool(batches.is_transactional[r]),
                                       bool(batches.is_control[r]), markers.get(base))
        if entry is not None:
            aborted.append(entry)
    txns = _Txns(aborted)
    # the offset map: the latest offset of every key in the dirty range
    # [first dirty, first uncleanable), aborted data left out, as many keys
    # as the cleaner's dedupe buffer holds
    if first_dirty < uncleanable and out.picked:
        rows = np.flatnonzero((whole.offset >= first_dirty) & (whole.offset < uncleanable)) \
            if len(whole) else np.zeros(0, np.int64)
        dirty = whole.take(rows)
        data_batches = whole.batches
        in_aborted = np.zeros(len(dirty), bool)
        if len(dirty):
            pid = data_batches.producer_id[dirty.batch]
            txn_flag = data_batches.is_transactional[dirty.batch].astype(bool)
            for p_, first, last, _ in aborted:
                in_aborted |= (txn_flag & (pid == p_) & (dirty.offset >= first)
                               & (dirty.offset <= last))
        key_latest, full_at = _offset_map(dirty.take(np.flatnonzero(~in_aborted)),
                                          _map_slots(dedupe_buffer_bytes))
        out.end_offset = uncleanable if full_at is None else \
            _latest_mapped(log, batches, first_dirty, full_at) + 1
        cleanable = [s for s in log.segments[:-1] if s.base_offset < out.end_offset]
    else:                # nothing dirty, or not picked: the cleaner leaves this log
        key_latest, cleanable, out.end_offset = {}, [], first_dirty
    producers = _active_producers(batches, now, producer_id_expiration_ms)
    sizes = [s.size for s in cleanable]
    for group in _groups(cleanable, sizes, segment_bytes, uncleanable):
        out.cleaned.append(_clean_group(group, dest, log, opts, key_latest, txns, producers,
                                        now, delete_retention_ms, uncleanable, out,
                                        index_interval_bytes, io_buffer_bytes,
                                        max_message_bytes))
    for seg in log.segments[len(cleanable):]:
        _copy_segment(seg, dest)
        out.untouched.append(seg.location.name)
    for name, e in loaded_files(log.location).items():
        # producer snapshots, and every file that is not a segment's
        # (partition.metadata, leader-epoch-checkpoint, KRaft's files)
        if name.endswith(".snapshot") or file_offset(name) is None:
            copy_file(log.location.child(e.name), dest / name)
    return out


def _first_dirty(log: PartitionLog, batches, log_start: int | None,
                 cleaner_offset: int | None) -> int:
    """LogCleanerManager.cleanableOffsets: the cleaner checkpoint, or the
    log start offset without one or when it lies outside the log."""
    first = log.segments[0].base_offset
    start = first if log_start is None else max(log_start, first)
    end = max(int(batches.last_offset.max()) + 1 if len(batches) else first,
              log.segments[-1].base_offset)
    dirty = start if cleaner_offset is None else cleaner_offset
    return start if dirty < start or dirty > end else dirty


def _dirty_segments(log: PartitionLog, first_dirty: int) -> list[int]:
    """UnifiedLog.nonActiveLogSegmentsFrom(first dirty): the indexes of the
    segment holding it and of every later one but the active segment."""
    segs = log.segments
    home = max((i for i, s in enumerate(segs) if s.base_offset <= first_dirty), default=0)
    return list(range(home, len(segs) - 1))


def _lag_bound(log: PartitionLog, first_dirty: int, now: int, lag_ms: int,
               loaded: tuple[bool, int] | None) -> int | None:
    """LogCleanerManager.cleanableOffsets' third bound: the base of the first
    dirty non-active segment whose largest timestamp (its batches' largest,
    else the file's modification time: LogSegment.largestTimestamp; as the
    broker's load leaves it, ``loaded``: see ``retention.segment_infos``) is
    later than ``now - lag_ms``; None when there is none."""
    from kbatch.lib.retention import segment_infos
    infos, _ = segment_infos(log, loaded)
    for i in _dirty_segments(log, first_dirty):
        if infos[i].largest_timestamp < 0:     # no timestamp, and the store gave no time
            raise ArgumentError(f"{log.segments[i].location}: no record timestamp and no "
                                "modification time: min_compaction_lag_ms cannot be applied")
        if infos[i].largest_timestamp > now - lag_ms:
            return log.segments[i].base_offset
    return None


def _dirty_ratio(log: PartitionLog, first_dirty: int, uncleanable: int) -> tuple[float, int]:
    """LogToClean: ``(cleanable bytes / (clean + cleanable bytes), cleanable
    bytes)``. Clean: the segments starting below the first dirty offset;
    cleanable: from the one holding the first dirty offset to the one
    holding the first uncleanable offset (excluded), as
    calculateCleanableBytes counts them (the segment holding the first
    dirty offset counts in both)."""
    segs = log.segments
    uncleanable = max(first_dirty, uncleanable)

    def floor(offset: int) -> int:
        return max((s.base_offset for s in segs if s.base_offset <= offset),
                   default=segs[0].base_offset)
    first_unclean = floor(uncleanable) if uncleanable < segs[-1].base_offset \
        else segs[-1].base_offset
    clean = sum(s.size for s in segs if s.base_offset < first_dirty)
    lo = floor(min(first_dirty, first_unclean))
    cleanable = sum(s.size for s in segs if lo <= s.base_offset < first_unclean)
    total = clean + cleanable
    return (cleanable / total if total else 0.0), cleanable


def _compaction_delay(log: PartitionLog, batches, first_dirty: int, now: int,
                      max_lag_ms: int) -> int:
    """LogCleanerManager.maxCompactionDelay: how long past ``max_lag_ms``
    the earliest first-batch timestamp of the dirty non-active segments is
    (positive timestamps only; 0: not overdue)."""
    src = batches.source if len(batches) else np.empty(0, np.int32)
    firsts = []
    for i in _dirty_segments(log, first_dirty):
        rows = np.flatnonzero(src == i)
        if len(rows) and int(batches.max_timestamp[rows[0]]) > 0:
            firsts.append(int(batches.max_timestamp[rows[0]]))
    until = now - max(max_lag_ms, 0)
    return until - min(firsts) if firsts and min(firsts) < until else 0


def _map_slots(dedupe_buffer_bytes: int) -> int:
    """How many keys the cleaner's SkippingOffsetMap takes before it is
    full: its slots (24 bytes each: an MD5 hash and an offset) times the
    load factor log.cleaner.io.buffer.load.factor (0.9)."""
    return int(min(dedupe_buffer_bytes, (1 << 31) - 1) // 24 * 0.9)


def _offset_map(records: Records, most: int) -> tuple[dict, int | None]:
    """``({key: highest offset}, None)`` of the keyed records (in offset
    order), or, when the map fills first (a record with a key met while it
    holds ``most``: Cleaner.buildOffsetMapForSegment returns there), the
    map so far and that record's offset."""
    keys = records.key.to_pylist()
    out: dict = {}
    for k, o in zip(keys, records.offset.tolist()):
        if k is None:
            continue
        if len(out) >= most:
            return out, o
        out[k] = o
    return out, None


def _latest_mapped(log: PartitionLog, batches, first_dirty: int, full_at: int) -> int:
    """The offset map's latestOffset when it filled at ``full_at``: the
    last offset of the last batch read whole before the one holding it
    (batches ending before the first dirty offset do not count), or the
    end of the dirty segment read whole before its segment
    (nextSegmentStartOffset - 1), whichever came last."""
    latest = -1
    at = np.flatnonzero((batches.base_offset <= full_at) & (batches.last_offset >= full_at))
    held_in = int(batches.base_offset[at[0]]) if len(at) else full_at
    before = (batches.last_offset >= first_dirty) & (batches.last_offset < held_in)
    if before.any():
        latest = int(batches.last_offset[before].max())
    bases = [s.base_offset for s in log.segments]
    home = max((b for b in bases if b <= full_at), default=bases[0])
    first_home = max((b for b in bases if b <= first_dirty), default=bases[0])
    if home > first_home:
        latest = max(latest, home - 1)
    return latest


def _copy_segment(seg, dest: Path) -> None:
    """``seg``'s files into ``dest``, under the names a broker gives them
    (``Segment.files``: an interrupted swap's without ``.swap``)."""
    for name, e in seg.files():
        child = seg.location.parent.child(e.name)
        with open(dest / name, "wb") as f:
            local = child.local_path()
            if isinstance(local, Path):
                with open(local, "rb") as src:
                    while piece := src.read(16 << 20):
                        f.write(piece)
            else:
                f.write(child.tree.read_small(child.path, 1 << 40) or b"")
        keep_mtime(child, dest / name)


def _clean_group(group, dest: Path, log, opts, key_latest, txns, producers, now,
                 delete_retention_ms, round_end, out: PartitionCompaction, interval,
                 io_buffer_bytes, max_message_bytes) -> CleanedSegment:
    base = group[0].base_offset
    name = f"{base:020d}.log"
    report = CleanedSegment(name, [s.location.name for s in group])
    indexes = IndexBuilder(base, interval)
    txn_entries = []
    position = 0
    with open(dest / name, "wb") as f:
        for seg in group:
            records = seg.source.chunks(opts, chunk_records=1 << 62, chunk_bytes=1 << 40)
            whole = Records.concat(list(records))
            b = whole.batches
            report.batches_in += len(b)
            report.records_in += len(whole)
            report.bytes_in += seg.size
            starts = np.searchsorted(whole.batch, np.arange(len(b) + 1))
            cstarts = np.searchsorted(whole.control.batch, np.arange(len(b) + 1))
            with seg.source.window(0, seg.size) as view:
                # the read buffer: its first size for each source segment
                # (cleanInto ends with restoreBuffers)
                chunk_from, pending, capacity = 0, [], io_buffer_bytes
                for r in range(len(b)):
                    pos, size = int(b.position[r]), int(b.size[r])
                    if int(b.magic[r]) < 2:
                        raise ArgumentError(
                            f"{seg.location}: the batch at byte {pos} has magic "
                            f"{int(b.magic[r])}; compact rewrites magic 2 logs only")
                    if pos + size - chunk_from > capacity and pos > chunk_from:
                        # the cleaner's read buffer is full: one append of what it kept
                        position = _append(f, indexes, pending, position)
                        chunk_from, pending = pos, []
                    while size > capacity:
                        # no whole batch in the buffer: growBuffersOrFail, until it fits
                        capacity = _grown(capacity, size, max_message_bytes)
                    got = _filter_batch(b, r, whole, starts, whole.control, cstarts, view,
                                        key_latest, txns, producers, now,
                                        delete_retention_ms, round_end, out, txn_entries)
                    if got is not None:
                        pending.append(got)
                        report.batches_out += 1
                        report.records_out += got[4]
                position = _append(f, indexes, pending, position)
    indexes.close()
    report.bytes_out = position
    # Cleaner.cleanSegments: the cleaned segment is as old as the group's last
    keep_mtime(group[-1].location, dest / name)
    stem = dest / name[:-len(".log")]
    Path(f"{stem}.index").write_bytes(indexes.index_bytes())
    Path(f"{stem}.timeindex").write_bytes(indexes.timeindex_bytes())
    if txn_entries:
        Path(f"{stem}.txnindex").write_bytes(b"".join(
            TXN_ENTRY.pack(0, *t) for t in txn_entries))
    return report


def _grown(capacity: int, batch_size: int, max_message_bytes: int) -> int:
    """Cleaner.growBuffersOrFail and growBuffers: the read buffer doubled,
    up to the topic's max.message.bytes (``max_message_bytes``, also taken
    for the broker's message.max.bytes), past it up to the batch's size."""
    wanted = max_message_bytes if capacity < max_message_bytes else batch_size
    return min(capacity * 2, max(wanted, max_message_bytes))


def _append(f, indexes: IndexBuilder, pending: list, position: int) -> int:
    """One LogSegment.append of the batches kept from one read buffer."""
    if not pending:
        return position
    data = b"".join(p[0] for p in pending)
    max_ts, shallow = -1, -1
    for _, _, ts, last, _ in pending:
        if ts > max_ts:
            max_ts, shallow = ts, last
    f.write(data)
    indexes.append(position, len(data), max(p[1] for p in pending), max_ts, shallow)
    return position + len(data)


def _filter_batch(b, r, whole, starts, control, cstarts, view, key_latest, txns, producers,
                  now, delete_retention_ms, round_end, out, txn_entries):
    """MemoryRecords.filterTo for one batch with the cleaner's filter:
    ``(bytes, max offset, max timestamp, shallow offset, records)`` kept,
    or None when the batch goes."""
    pos, size = int(b.position[r]), int(b.size[r])
    base, last = int(b.base_offset[r]), int(b.last_offset[r])
    pid, epoch = int(b.producer_id[r]), int(b.producer_epoch[r])
    attrs = int(b.attributes[r])
    horizon = int(b.base_timestamp[r]) if b.has_delete_horizon[r] else None
    is_control = bool(b.is_control[r])
    raw = bytes(view[pos:pos + size])
    lo, hi = int(starts[r]), int(starts[r + 1])
    if is_control:
        crows = np.arange(int(cstarts[r]), int(cstarts[r + 1]))
        ctype = int(control.type[crows[0]]) if len(crows) else None
        can_discard, aborted = txns.control(pid, last, ctype)
        if aborted is not None:
            txn_entries.append(aborted)
        discard_records = can_discard and horizon is not None and horizon <= now
        marker_of_empty = can_discard
    else:
        can_discard = txns.data(pid, last, bool(b.is_transactional[r]))
        if can_discard:
            out.aborted_batches += 1
        discard_records = can_discard
        marker_of_empty = False
    active = producers.get(pid) if pid >= 0 else None
    last_of_producer = active is not None and (
        last == active[0] if active[0] >= 0 else (is_control and epoch == active[1]))
    if last_of_producer or last + 1 == round_end:
        retention = "retain_empty"
    elif discard_records:
        return None
    else:
        retention = "delete_empty"
    # the records that stay
    if discard_records:
        kept = []
    elif is_control:
        kept = list(range(int(cstarts[r]), int(cstarts[r + 1])))
    else:
        kept = []
        keys = whole.key
        tombs = 0
        for i in range(lo, hi):
            k = keys[i]
            off = int(whole.offset[i])
            if off >= out.end_offset:
                kept.append(i)          # past the offset map's latest offset: it stays
                tombs += whole.value[i] is None
                continue
            if k is None:
                out.null_keys += 1
                continue
            if off < key_latest.get(k, -1):
                continue
            if whole.value[i] is None:
                if horizon is not None and now >= horizon:
                    out.tombstones_removed += 1
                    continue
                tombs += 1
            kept.append(i)
        out.tombstones_kept += tombs
    total = (int(cstarts[r + 1]) - int(cstarts[r])) if is_control else hi - lo
    if kept:
        tombstones = (not is_control and any(whole.value[i] is None for i in kept))
        need_horizon = (tombstones or marker_of_empty) and horizon is None
        if len(kept) == total and not need_horizon:
            return raw, last, int(b.max_timestamp[r]), last, len(kept)
        new_horizon = now + delete_retention_ms if need_horizon else horizon
        data, max_ts, max_off = _rebuild(b, r, whole, control, kept, is_control, new_horizon)
        return data, max_off, max_ts, last, len(kept)
    if retention == "retain_empty":
        # DefaultRecordBatch.writeEmptyHeader: no codec, no horizon, first timestamp -1
        ts = int(b.max_timestamp[r])
        header = encode_batch({"value": [], "offset": np.zeros(0, np.int64)}, base_offset=base,
                              last_offset=last, base_timestamp=-1, max_timestamp=ts,
                              attributes=attrs & (int(Attr.LOG_APPEND_TIME)
                                                  | int(Attr.TRANSACTIONAL) | int(Attr.CONTROL)),
                              producer_id=pid, producer_epoch=epoch,
                              base_sequence=int(b.base_sequence[r]),
                              partition_leader_epoch=int(b.partition_leader_epoch[r]))
        return header, last, ts, last, 0
    return None


def _rebuild(b, r, whole, control, kept, is_control, horizon):
    """The batch with the kept records (MemoryRecords.buildRetainedRecordsInto)."""
    attrs = int(b.attributes[r])
    log_append = bool(attrs & Attr.LOG_APPEND_TIME)
    if is_control:
        idx = np.array(kept, np.int64)
        cols = {"key": control.key.take(idx).to_pylist(), "value": control.value.take(idx)
                .to_pylist(), "timestamp": control.timestamp[idx], "offset": control.offset[idx]}
        ts = control.timestamp[idx]
    else:
        sub = whole.take(np.array(kept, np.int64))
        cols = sub
        ts = sub.timestamp
    max_ts = int(b.max_timestamp[r]) if log_append else int(ts.max())
    if horizon is not None:
        base_ts, attrs = horizon, attrs | int(Attr.DELETE_HORIZON)
    else:
        base_ts = int(ts[0])
    data = encode_batch(cols, base_offset=int(b.base_offset[r]), last_offset=int(b.last_offset[r]),
                        base_timestamp=base_ts, max_timestamp=max_ts, attributes=attrs,
                        producer_id=int(b.producer_id[r]), producer_epoch=int(b.producer_epoch[r]),
                        base_sequence=int(b.base_sequence[r]),
                        partition_leader_epoch=int(b.partition_leader_epoch[r]))
    max_off = int(whole.offset[kept[-1]]) if not is_control else int(control.offset[kept[-1]])
    return data, max_ts, max_off


def compact(source, dest, *, now=None, delete_retention_ms: int = DAY_MS,
            segment_bytes: int = DEFAULT_SEGMENT_BYTES,
            producer_id_expiration_ms: int = DAY_MS,
            index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
            io_buffer_bytes: int = IO_BUFFER_BYTES,
            max_message_bytes: int = MAX_MESSAGE_BYTES,
            dedupe_buffer_bytes: int = DEDUPE_BUFFER_BYTES,
            min_compaction_lag_ms: int = 0,
            min_cleanable_dirty_ratio: float | None = None,
            max_compaction_lag_ms: int | None = None, cleanup_policy="compact",
            **storage) -> CompactionReport:
    """What one run of Kafka's log cleaner leaves of ``source`` (a
    partition, a data directory, or a URL of one), written to the new
    directory ``dest`` (see the module docstring). ``now``: ms (default:
    the clock); ``delete_retention_ms``: the topic's delete.retention.ms;
    ``segment_bytes``: its segment.bytes (how cleaned segments are grouped);
    ``io_buffer_bytes``: the cleaner's read buffer (log.cleaner.io.buffer.size
    / threads / 2) and ``max_message_bytes`` the topic's max.message.bytes,
    up to which it grows for a larger batch (both decide where appends
    split, hence the index entries); ``dedupe_buffer_bytes``: the cleaner's
    log.cleaner.dedupe.buffer.size per thread (how many keys one run maps:
    24 bytes a key, 90% full at most; a run over more keys stops where its
    map filled, as the broker's does); ``min_compaction_lag_ms``: the topic's
    min.compaction.lag.ms (segments that recent stay dirty);
    ``min_cleanable_dirty_ratio`` (the topic's min.cleanable.dirty.ratio,
    e.g. 0.5) with ``max_compaction_lag_ms`` (max.compaction.lag.ms): clean
    only a log the broker would pick (None: one run on every log);
    ``cleanup_policy``: the topics' cleanup.policy (a str for every topic,
    or ``{topic: policy}``, "compact" for a topic it does not name): a
    topic without "compact" is copied as it is, and so is the KRaft
    metadata log, which the log cleaner never cleans (the broker's own
    ``__consumer_offsets`` and ``__transaction_state`` are compacted)."""
    from kbatch.lib.retention import check_policies, policy_of
    from kbatch.lib.timestamps import to_millis
    now_ms = int(time.time() * 1000) if now is None else to_millis(now, "now")
    # numpy integers are ints here (as retention takes them)
    (delete_retention_ms, segment_bytes, producer_id_expiration_ms, index_interval_bytes,
     io_buffer_bytes, max_message_bytes, dedupe_buffer_bytes, min_compaction_lag_ms,
     max_compaction_lag_ms) = (
        int(v) if isinstance(v, np.integer) else v for v in (
            delete_retention_ms, segment_bytes, producer_id_expiration_ms, index_interval_bytes,
            io_buffer_bytes, max_message_bytes, dedupe_buffer_bytes, min_compaction_lag_ms,
            max_compaction_lag_ms))
    for name, value in (("delete_retention_ms", delete_retention_ms),
                        ("segment_bytes", segment_bytes),
                        ("producer_id_expiration_ms", producer_id_expiration_ms),
                        ("index_interval_bytes", index_interval_bytes),
                        ("io_buffer_bytes", io_buffer_bytes),
                        ("max_message_bytes", max_message_bytes),
                        ("dedupe_buffer_bytes", dedupe_buffer_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ArgumentError(f"{name} must be a non-negative int")
    for name, value in (("io_buffer_bytes", io_buffer_bytes),
                        ("max_message_bytes", max_message_bytes),
                        ("dedupe_buffer_bytes", dedupe_buffer_bytes)):
        if value < 1:      # a buffer that doubles from 0 never holds a batch
            raise ArgumentError(f"{name} must be at least 1")
    for name, value in (("min_compaction_lag_ms", min_compaction_lag_ms),
                        ("max_compaction_lag_ms", max_compaction_lag_ms)):
        if (value is None and name == "min_compaction_lag_ms") or (
                value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                       or value < 0)):
            raise ArgumentError(f"{name} must be a non-negative int")
    # the topic configs' ranges in Kafka's LogConfig: what a broker refuses
    # to set is refused here too
    for name, value, (low, high) in (("segment_bytes", segment_bytes, SEGMENT_BYTES_RANGE),
                                     ("delete_retention_ms", delete_retention_ms, MS_RANGE),
                                     ("min_compaction_lag_ms", min_compaction_lag_ms, MS_RANGE),
                                     ("max_compaction_lag_ms", max_compaction_lag_ms,
                                      MAX_COMPACTION_LAG_MS_RANGE),
                                     ("index_interval_bytes", index_interval_bytes, INT_RANGE),
                                     ("max_message_bytes", max_message_bytes,
                                      MAX_MESSAGE_BYTES_RANGE)):
        if value is not None and not low <= value <= high:
            raise ArgumentError(f"{name}={value} is out of range: Kafka's {KAFKA_NAMES[name]} "
                                f"accepts {low}..{high}")
    ratio = min_cleanable_dirty_ratio
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                              or not 0 <= ratio <= 1):
        raise ArgumentError("min_cleanable_dirty_ratio must be a number in [0, 1] (or None)")
    if max_compaction_lag_ms is not None and min_compaction_lag_ms > max_compaction_lag_ms:
        # LogConfig.validateValues: "conflict topic config setting
        # min.compaction.lag.ms > max.compaction.lag.ms"
        raise ArgumentError(f"min_compaction_lag_ms={min_compaction_lag_ms} is above "
                            f"max_compaction_lag_ms={max_compaction_lag_ms} (Kafka refuses the "
                            "two topic configs together)")
    if max_compaction_lag_ms is not None and ratio is None:
        raise ArgumentError("max_compaction_lag_ms applies with min_cleanable_dirty_ratio "
                            "(it decides whether the broker picks a log)")
    check_policies(cleanup_policy)
    store, rest = Storage.split(storage)
    if rest:
        raise ArgumentError(f"compact: unknown argument(s) {', '.join(sorted(rest))}")
    found = resolve(source, store)
    if found.storage.layout == "tiered":
        raise ArgumentError(f"{found.name}: a tiered bucket: the log cleaner cleans a broker's "
                            "local log, never uploaded segments")
    dest = Path(os.fspath(dest))
    if dest.exists():
        raise ArgumentError(f"{dest}: exists; compact writes a new directory (never in place)")

    def write():
        starts, cleaner = {}, {}
        if found.kind is PathKind.PARTITION:
            parts, single = [Partition(found.topic, found.partition, found.location)], True
            # the checkpoints of the data directory holding the partition
            hws = holder_offsets(found.location, "high_watermark")
            starts = holder_offsets(found.location, "log_start_offset")
            cleaner = holder_offsets(found.location, "cleaner_offset")
            clean, recovery = broker_load(found.location, partition_alone=True)
        elif found.kind is PathKind.DATA_DIR:
            parts, single = found.partitions(), False
            hws = offsets_of(found.location, "high_watermark")
            starts = offsets_of(found.location, "log_start_offset")
            cleaner = offsets_of(found.location, "cleaner_offset")
            entries = found.location.list()
            clean, recovery = broker_load(found.location, partition_alone=False, entries=entries)
        else:
            raise ArgumentError(f"{found.name}: is a {found.kind.value}; compact takes a partition "
                                "directory or a broker data directory")
        if not single:
            dest.mkdir(parents=True)
        done, written, not_compacted = [], set(), []
        for p in parts:
            policy = policy_of(p.topic, cleanup_policy, default="compact")
            if "compact" not in policy.split(","):
                not_compacted.append(f"{p.location.name} (cleanup.policy {policy})")
                if single:
                    copy_partition(p.location, dest)
                continue        # carry_untouched copies it
            log = PartitionLog.at(p, found.storage)
            if not log.segments:
                continue
            target = dest if single else dest / p.location.name
            written.add(p.location.name)
            done.append(compact_partition(
                log, target, now=now_ms, delete_retention_ms=delete_retention_ms,
                segment_bytes=segment_bytes, producer_id_expiration_ms=producer_id_expiration_ms,
                high_watermark=hws.get((p.topic, p.partition)),
                index_interval_bytes=index_interval_bytes, io_buffer_bytes=io_buffer_bytes,
                max_message_bytes=max_message_bytes, dedupe_buffer_bytes=dedupe_buffer_bytes,
                log_start=starts.get((p.topic, p.partition)),
                cleaner_offset=cleaner.get((p.topic, p.partition)),
                min_compaction_lag_ms=min_compaction_lag_ms,
                min_cleanable_dirty_ratio=min_cleanable_dirty_ratio,
                max_compaction_lag_ms=max_compaction_lag_ms,
                loaded=(clean, recovery.get((p.topic, p.partition), 0))))
        if not single:
            cleaner.update({(c.topic, c.partition): c.end_offset for c in done})
            (dest / "cleaner-offset-checkpoint").write_text(offsets_text(cleaner))
            carry_data_dir_files(found.location, dest, "cleaner_offset")
            carry_untouched(found.location, parts, written, dest)
        notes = [] if single else set_aside_notes(entries, "cleaned")
        return CompactionReport(str(dest), done, not_compacted, notes)
    return into_new_directory(dest, write)


__all__ = ["CleanedSegment", "CompactionReport", "PartitionCompaction", "compact",
           "compact_partition"]
