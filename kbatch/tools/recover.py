"""Recovery: ``kbatch.recover(source, dest)``, ``kbatch recover SRC DST``.

What a broker does to a log on an unclean start (LogLoader.recoverLog,
LogSegment.recover), done on a copy, and to every segment (the broker
recovers only those from its recovery point on, and none after a clean
shutdown; damage below them it would serve): every batch of every segment is
checked by the rules ``verify`` applies (``kbatch.tools.verify_rules``:
CRC, sizes, records, offsets that increase, last offsets not below the
segment's base as LogSegment.recover's ensureOffsetInRange checks them;
``first_damage`` says where a segment's valid prefix ends), and the
partition is cut at the first invalid batch: the rest of that segment and
every later segment are not copied. The report says what was dropped, per
partition (file, bytes, first offset, reason). The source is never
written; ``dest`` must not exist.

Each copied segment gets its side files rebuilt as LogSegment.recover
builds them, batch by batch (``kbatch.lib.writer.IndexBuilder``):

    .index       an entry (the batch's last offset, the batch's position)
                 when more than index.interval.bytes (default 4096) were
                 appended since the last entry, decided before the batch's
                 own size is added
    .timeindex   at each such entry, the largest batch max timestamp so far
                 and the last offset of the first batch holding it, if it
                 grew; and a final entry of that maximum, as on roll/close
    .txnindex    one entry per aborted non-empty transaction, in the segment
                 holding its ABORT marker: (producer id, first offset,
                 marker offset, last stable offset), the LSO as
                 ProducerStateManager.lastStableOffset computes it (the
                 first offset of the earliest transaction of another
                 producer still open, else the marker offset + 1)

and the partition's ``leader-epoch-checkpoint`` as LogLoader leaves it
(``kbatch.lib.epochs``): the source's file loaded (an epoch no batch
holds any more, its records compacted away, stays), each copied batch's
epoch assigned when it is larger than the latest (LogSegment.recover),
then the entries at or past the new log end offset removed
(truncateFromEnd) and the first moved up to the log start offset
(truncateFromStart). A source file that cannot be parsed is left out and
the epochs are rebuilt from the batches alone; the report's notes say
so. A data directory's checkpoint files are written for the
recovered logs: ``recovery-point-offset-checkpoint`` (each log end
offset: everything is flushed), ``log-start-offset-checkpoint`` (the
source's, where it is past the first copied segment, as
LogManager.checkpointLogStartOffsetsInDir writes it; a checkpoint past
the recovered log end offset deletes every segment and starts an empty
one there, as LogLoader does) and ``replication-offset-
checkpoint`` (the source's high watermarks, at most the new log end; a
partition without one gets none, as a broker loads it: 0), and
``cleaner-offset-checkpoint`` when the source has one (as it is); ``meta.properties``,
the data directory's other files (``bootstrap.checkpoint``...; not
``.kafka_cleanshutdown``: a broker must recover the copy) and each
partition's files that are not a segment's (``partition.metadata``,
``quorum-state``) are copied. A ``-future`` or ``-stray`` folder is not
recovered; the report's notes name it. Producer
snapshots (``.snapshot``) are left out: a broker that finds none rebuilds
producer state from the log (LogLoader), and the report says so.
KRaft snapshots (``__cluster_metadata-0/*.checkpoint``) are copied as they are.
A segment holding an offset more than 2**31 - 1 past its base (its
relative offsets overflow; an old broker could write such a segment) is
split into segments named by their first batch's base offset, as
LocalLog.splitOverflowedSegment does when a broker loads it
(``split_groups``; the report's ``split_from`` names the source segment):
nothing of it is dropped.

A batch past one of kbatch's decode limits (``max_decompressed_bytes``...)
is not damage: recovery stops with ``LimitExceededError`` naming the option
to raise rather than cut the partition there.

Kafka's recovery trusts a CRC-valid batch's records; this one decodes them
too (a batch whose records are malformed behind a valid CRC is cut), and
a batch whose offsets go back (which the broker would refuse to append) is
cut as well: the copy then reads without errors and verifies clean.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbatch.errors import ArgumentError, CorruptRecordError, LimitExceededError
from kbatch.lib import epochs as epoch_cache
from kbatch.lib.checkpoints import (CLEAN_SHUTDOWN_FILE, EPOCH_FILE, OFFSET_FILES,
                                    holder_offsets, offsets_of, offsets_text, read_checkpoint)
from kbatch.lib.copies import copy_file, copy_own_files, set_aside_notes
from kbatch.lib.log import PartitionLog
from kbatch.lib.logfiles import Segment, keep_mtime
from kbatch.lib.open import Partition, resolve
from kbatch.lib.paths import PathKind, file_offset, segment_base
from kbatch.lib.producers import ProducerState
from kbatch.lib.writer import DEFAULT_INDEX_INTERVAL, IndexBuilder, into_new_directory
from kbatch.tools.verify_rules import (CHUNK_BYTES, CHUNK_RECORDS, SegmentReport, check,
                                       first_damage, verify_options, walk)

INT32_MAX = (1 << 31) - 1


@dataclass
class Dropped:
    """Bytes of a source segment the recovered log does not hold."""

    file: str                  # the segment file's name
    start: int                 # first byte not copied
    bytes: int
    first_offset: int | None   # the first offset not kept (None: the segment held none)
    reason: str


@dataclass
class SegmentCopy:
    """A copied segment and how its rebuilt index files compare with the
    source's (None: the source had no such file or it was empty; an active
    segment's preallocated index is compared on its live entries, to which
    the final time index entry of a closed segment is then added)."""

    file: str
    bytes: int
    index_entries: int
    timeindex_entries: int
    txnindex_entries: int
    index_identical: bool | None = None
    timeindex_identical: bool | None = None
    split_from: str | None = None   # the source segment this part was split from


@dataclass
class PartitionRecovery:
    topic: str | None
    partition: int | None
    source: str
    dest: str
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    segments: list[SegmentCopy] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    leader_epochs: list[tuple[int, int]] = field(default_factory=list)   # as written
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}" if self.topic is not None else self.source


@dataclass
class RecoveryReport:
    dest: str
    partitions: list[PartitionRecovery]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing was dropped: the copy holds every byte of the source's logs."""
        return not any(p.dropped for p in self.partitions)


# --- one segment ------------------------------------------------------------------

def check_segment(seg: Segment, last: bool, **options):
    """``(report, batches, markers, cut)``: the verify walk of ``seg``
    (``markers``: control type by offset of its control records) and where
    its valid prefix ends (``(byte, reason)``, None: all of it)."""
    opts = verify_options(options)
    report = SegmentReport(seg.name, seg.base_offset, seg.size, last_segment=last)
    markers: dict[int, int] = {}

    def chunks():
        for chunk in seg.source.chunks(opts, chunk_records=CHUNK_RECORDS,
                                       chunk_bytes=CHUNK_BYTES):
            ctl = chunk.control
            markers.update(zip(ctl.offset.tolist(), ctl.type.tolist()))
            yield chunk
    batches = walk(report, chunks())
    check(report, batches, None, "", None, "")
    cut = first_damage(report, batches)
    _refuse_limit(seg, cut)
    return report, batches, markers, cut


# the decode limits (``read_segment``'s options): a batch past one is not
# damage, and Kafka's recovery (sizes and CRCs) would keep it
DECODE_LIMITS = ("max_batch_bytes", "max_decompressed_bytes", "max_records_per_batch",
                 "max_headers_per_record")


def _refuse_limit(seg: Segment, cut: tuple[int, str] | None) -> None:
    """``LimitExceededError`` when a segment's valid prefix would end at a
    batch only because it passes one of kbatch's decode limits: cutting
    there would drop valid data (and every later segment)."""
    if cut is None:
        return
    reason = cut[1].replace(str(seg.location), "")
    for name in DECODE_LIMITS:
        if re.search(rf"\b{name}=\d", reason):
            raise LimitExceededError(
                f"{cut[1]}: a limit of this read, not damage (a broker's recovery checks "
                f"sizes and CRCs only); recovering would cut the partition here: raise it "
                f"(recover(..., {name}=N), kbatch recover --{name.replace('_', '-')} N)",
                path=str(seg.location), position=cut[0], base_offset=None,
                batch_position=cut[0])


def _overlap_cut(batches, next_offset: int | None, cut: tuple[int, str] | None
                 ) -> tuple[int, str] | None:
    """``cut``, or the first batch of a segment starting at or below an
    offset the segments before it hold (``next_offset``: one past the last
    offset kept), if it comes first: the offsets go back across segments.
    A broker would keep both copies and serve the first; the copy would
    hold the offsets twice, so it is cut there, as offsets going back
    within a segment are."""
    if next_offset is None or not len(batches):
        return cut
    back = np.flatnonzero(batches.base_offset < next_offset)
    if not len(back):
        return cut
    at = int(batches.position[back[0]])
    if cut is not None and cut[0] <= at:
        return cut
    return at, (f"offsets do not increase: a batch starts at {int(batches.base_offset[back[0]])}"
                f", below {next_offset}, the end of the segments before it")


def split_groups(seg_base: int, base, last, keep: list[int]) -> list[tuple[int, list[int]]]:
    """The kept batches as the segments they go into: one, named
    ``seg_base``, unless a batch's last offset lies more than 2**31 - 1
    past it (a relative offset must fit 32 bits: LogSegment.
    ensureOffsetInRange). Then the segment is split as LocalLog.
    splitOverflowedSegment splits it on load: each new segment is named by
    its first batch's base offset and takes batches while their last
    offsets fit relative to that base."""
    if not keep or all(int(last[r]) - seg_base <= INT32_MAX for r in keep):
        return [(seg_base, keep)]
    groups: list[tuple[int, list[int]]] = []
    for r in keep:
        if not groups or int(last[r]) - groups[-1][0] > INT32_MAX:
            groups.append((int(base[r]), []))
        groups[-1][1].append(r)
    return groups


def _live(data: bytes, size: int) -> tuple[bytes, bool]:
    """The entries before a zero tail, and whether there was one (an active
    segment's preallocated index)."""
    n = len(data) // size
    end = n
    while end and data[(end - 1) * size:end * size] == bytes(size):
        end -= 1
    return data[:end * size], end != n


def _same(source: bytes | None, rebuilt: bytes, size: int) -> bool | None:
    """Whether a rebuilt index file equals the source's (None: no source
    file). A preallocated source (a running broker's active segment) is
    compared on its live entries, without the final time index entry a
    closed segment gets."""
    if source is None:
        return None
    live, padded = _live(source, size)
    if padded and size == 12 and len(rebuilt) == len(live) + size:
        rebuilt = rebuilt[:-size]
    return live == rebuilt


def _side(seg: Segment, suffix: str) -> bytes | None:
    """A source side file's bytes (None: absent or unreadable)."""
    name = seg.location.name
    tail = ".swap" if name.endswith(".log.swap") else ""      # an interrupted swap's
    name = name[:-len(tail)] if tail else name
    stem = name[:-len(".log")] if name.endswith(".log") else name
    loc = seg.location.parent.child(stem + suffix + tail)
    try:
        return loc.tree.read_small(loc.path, 64 << 20)
    except OSError:
        return None


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _copy_range(seg: Segment, dest: Path, start: int, stop: int) -> None:
    """Bytes ``[start, stop)`` of ``seg`` into ``dest``, in 16 MiB pieces."""
    with open(dest, "wb") as out:
        if stop <= start:
            return
        with seg.source.window(start, stop) as view:
            for at in range(start, stop, 16 << 20):
                out.write(view[at:min(stop, at + (16 << 20))])


# --- a partition --------------------------------------------------------------------

def recover_partition(log: PartitionLog, dest: Path, *, index_interval_bytes: int,
                      high_watermark: int | None = None, log_start: int | None = None,
                      **options) -> PartitionRecovery:
    """Copy the valid prefix of ``log`` into the new directory ``dest``."""
    dest.mkdir(parents=True)
    out = PartitionRecovery(log.topic, log.partition, log.name, str(dest))
    producers = ProducerState()
    epochs = _source_epochs(log, out)
    cut_done = False
    next_offset = None
    for i, seg in enumerate(log.segments):
        name = seg.location.name
        if cut_done:
            out.dropped.append(Dropped(name, 0, seg.size, seg.base_offset,
                                       "after the first invalid batch"))
            continue
        report, batches, markers, cut = check_segment(seg, i == len(log.segments) - 1,
                                                      **options)
        cut = _overlap_cut(batches, next_offset, cut)
        stop = report.valid_bytes if cut is None else cut[0]
        keep = np.flatnonzero(batches.position < stop) if len(batches) else np.empty(0, int)
        pos, size = batches.position, batches.size
        last, max_ts = batches.last_offset, batches.max_timestamp
        groups = split_groups(seg.base_offset, batches.base_offset, last, keep.tolist())
        for part, (part_base, rows) in enumerate(groups):
            # a split segment's parts: [its first batch, the next part's first batch)
            start = int(pos[rows[0]]) if len(groups) > 1 else 0
            end = int(pos[groups[part + 1][1][0]]) if part + 1 < len(groups) else stop
            indexes = IndexBuilder(part_base, index_interval_bytes)
            txn = []
            for r in rows:
                indexes.append(int(pos[r]) - start, int(size[r]), int(last[r]),
                               int(max_ts[r]), int(last[r]))
                base = int(batches.base_offset[r])
                if int(batches.magic[r]) >= 2:
                    epoch = int(batches.partition_leader_epoch[r])
                    if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
                        epochs = epoch_cache.assign(epochs, epoch, base)
                    entry = producers.batch(base, int(batches.producer_id[r]),
                                            bool(batches.is_transactional[r]),
                                            bool(batches.is_control[r]), markers.get(base))
                    if entry is not None:
                        txn.append(entry)
                next_offset = int(last[r]) + 1
            indexes.close()
            # an interrupted swap's segment is written under the name it takes
            # when the broker completes the swap
            file = name if len(groups) == 1 and not name.endswith(".swap") \
                else f"{part_base:020d}.log"
            _copy_range(seg, dest / file, start, end)
            if len(groups) == 1 and end == seg.size:
                # LogSegment.recover leaves an intact file as it is: as old as
                # the source (retention by time falls back on it); a cut or
                # split file is new
                keep_mtime(seg.location, dest / file)
            stem = dest / file[:-len(".log")]
            index, times = indexes.index_bytes(), indexes.timeindex_bytes()
            _write(Path(f"{stem}.index"), index)
            _write(Path(f"{stem}.timeindex"), times)
            if txn:
                _write(Path(f"{stem}.txnindex"), b"".join(txn))
            whole = len(groups) == 1        # a split part has no source index to match
            out.segments.append(SegmentCopy(
                file, end - start, len(indexes.offset_index), len(indexes.time_index),
                len(txn), _same(_side(seg, ".index"), index, 8) if whole else None,
                _same(_side(seg, ".timeindex"), times, 12) if whole else None,
                split_from=None if whole else name))
        if cut is not None:
            cut_done = True
            out.dropped.append(Dropped(name, stop, seg.size - stop, next_offset
                                       if next_offset is not None else seg.base_offset,
                                       cut[1]))
    if log.segments:
        end = next_offset if next_offset is not None else log.segments[0].base_offset
        end = max(end, max(s.base_offset for s in log.segments
                           if s.location.name in {c.split_from or c.file
                                                   for c in out.segments}))
        # LogManager loads a partition without a checkpoint entry with 0
        checkpoint = 0 if log_start is None else log_start
        first = log.segments[0].base_offset
        if end < checkpoint:
            end, epochs = _start_past_end(out, dest, end, checkpoint), []
            first = checkpoint
        out.log_end_offset = end
        out.log_start_offset = max(checkpoint, first)     # LogLoader.load
        epochs = epoch_cache.truncate_from_end(epochs, end)
        epochs = epoch_cache.truncate_from_start(epochs, checkpoint)
    out.leader_epochs = epochs
    _write(dest / EPOCH_FILE, epoch_cache.epoch_file_text(epochs).encode())
    meta = log.location.child("partition.metadata")
    data = meta.tree.read_small(meta.path, 1 << 16)
    if data is not None:
        _write(dest / "partition.metadata", data)
    for e in log.location.list():
        # KRaft snapshots (*.checkpoint), quorum-state: every file that is
        # not a segment's or rebuilt here, as it is
        if e.is_file and file_offset(e.name) is None and e.name != EPOCH_FILE \
                and not (dest / e.name).exists():
            copy_file(log.location.child(e.name), dest / e.name)
    return out


def _data_dir_files(source, dest: Path) -> list[str]:
    """A data directory's own files that recovery does not write
    (``bootstrap.checkpoint``...), copied; ``.kafka_cleanshutdown`` left out
    (the copy's producer snapshots are: a broker starting on it must load
    it as after an unclean shutdown). Returns notes on what is not
    recovered: folders of a move between log directories in progress
    (``-future``) or stray logs (``-stray``) are not partitions of this
    directory's log."""
    entries = source.list()
    copy_own_files(source, dest, leave=(CLEAN_SHUTDOWN_FILE,), entries=entries)
    return set_aside_notes(entries, "recovered")


def _start_past_end(out: PartitionRecovery, dest: Path, end: int, checkpoint: int) -> int:
    """LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: a log start
    offset checkpoint past the recovered log end offset (segments lost, or
    cut here) deletes every segment and leaves one empty segment at the
    checkpoint (the leader epochs are cleared too); returns the new end."""
    for copy in out.segments:
        stem = dest / copy.file[:-len(".log")]
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            Path(f"{stem}{suffix}").unlink(missing_ok=True)
        out.dropped.append(Dropped(copy.file, 0, copy.bytes, segment_base(copy.file),
                                   f"log start offset {checkpoint} (checkpoint) is past the "
                                   f"recovered log end offset {end}: Kafka deletes every "
                                   "segment"))
    out.notes.append(f"the log start offset checkpoint ({checkpoint}) is past the recovered log "
                     f"end offset ({end}): every segment deleted and an empty one started at "
                     f"{checkpoint}, leader epochs cleared, as a broker's LogLoader does")
    name = f"{checkpoint:020d}.log"
    for suffix in (".log", ".index", ".timeindex"):
        _write(dest / (name[:-len(".log")] + suffix), b"")
    out.segments = [SegmentCopy(name, 0, 0, 0, 0)]
    return checkpoint


def _source_epochs(log: PartitionLog, out: PartitionRecovery) -> list[tuple[int, int]]:
    """The leader epoch cache a broker loads from the source's
    ``leader-epoch-checkpoint`` (empty without one; a file that cannot be
    parsed or holds a negative entry is left out, with a note)."""
    try:
        return epoch_cache.load(read_checkpoint(log.location.child(EPOCH_FILE))[1])
    except FileNotFoundError:
        return []
    except (CorruptRecordError, ValueError, OSError) as exc:
        out.notes.append(f"{EPOCH_FILE} not used ({exc}): leader epochs rebuilt from the "
                         "batches alone")
        return []


# --- the entry point -------------------------------------------------------------------

def _offsets_file(path: Path, entries: dict) -> None:
    path.write_text(offsets_text(entries))


def recover(source, dest, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
            **options) -> RecoveryReport:
    """Recover ``source`` (a partition, a broker data directory or a URL of
    one) into the new local directory ``dest``: the valid prefix of every
    partition, with rebuilt index files and checkpoints (see the module
    docstring). ``index_interval_bytes``: the topic's index.interval.bytes.
    Options: storage keywords (``storage_options``...) and the decode
    limits of ``read_segment``. Returns what was copied and dropped."""
    from kbatch.lib.storage import Storage
    storage, options = Storage.split(options)
    if isinstance(index_interval_bytes, bool) or not isinstance(index_interval_bytes, int) \
            or not 0 <= index_interval_bytes <= INT32_MAX:
        raise ArgumentError("index_interval_bytes must be an int in 0..2147483647")
    found = resolve(source, storage)
    if found.kind not in (PathKind.PARTITION, PathKind.DATA_DIR):
        raise ArgumentError(f"{found.name}: is a {found.kind.value}; recover takes a partition "
                            "directory or a broker data directory")
    dest = Path(os.fspath(dest))
    if dest.exists():
        raise ArgumentError(f"{dest}: exists; recover writes a new directory (never in place)")
    if not found.remote and _inside(dest, Path(found.path)):
        raise ArgumentError(f"{dest}: inside the source {found.name}; write the copy elsewhere")

    def write():
        notes = ["producer snapshots (.snapshot) are not copied: a broker rebuilds producer "
                 "state from the log when it finds none"]
        if found.kind is PathKind.PARTITION:
            log = PartitionLog.at(Partition(found.topic, found.partition, found.location),
                                  found.storage)
            # the log start of the data directory holding it, as retention and
            # the cleaner's copy take it
            start = holder_offsets(found.location, "log_start_offset").get(
                (found.topic, found.partition))
            part = recover_partition(log, dest, index_interval_bytes=index_interval_bytes,
                                     log_start=start, **options)
            notes.append("a partition alone: the data directory's checkpoint files are not "
                         "written (recover the data directory for them)")
            return RecoveryReport(str(dest), [part], notes + _partition_notes([part]))
        hw = offsets_of(found.location, "high_watermark")
        starts = offsets_of(found.location, "log_start_offset")
        cleaner = offsets_of(found.location, "cleaner_offset")
        dest.mkdir(parents=True)
        parts = []
        for p in found.partitions():
            log = PartitionLog.at(p, found.storage)
            key = (p.topic, p.partition)
            parts.append(recover_partition(log, dest / p.location.name,
                                           index_interval_bytes=index_interval_bytes,
                                           log_start=starts.get(key), **options))
        ends = {(p.topic, p.partition): p.log_end_offset for p in parts
                if p.log_end_offset is not None}
        _offsets_file(dest / _file_of("recovery_point"), ends)
        # LogManager.checkpointLogStartOffsetsInDir writes a log start only
        # where it is past the log's first segment
        _offsets_file(dest / _file_of("log_start_offset"),
                      {(p.topic, p.partition): p.log_start_offset for p in parts
                       if p.log_start_offset is not None and p.segments
                       and p.log_start_offset > segment_base(p.segments[0].file)})
        # the source's high watermarks, at most the new log end; a partition
        # without an entry keeps none (a broker loads it as 0: Partition's
        # "No checkpointed highwatermark"), never one made up from its end
        _offsets_file(dest / _file_of("high_watermark"),
                      {k: min(hw[k], e) for k, e in ends.items() if k in hw})
        if cleaner:
            # as it was: a broker's cleaner resets a checkpoint past the log
            # end to the log start itself (LogCleanerManager.cleanableOffsets:
            # the whole log cleaned again), which a clamp here would prevent
            _offsets_file(dest / _file_of("cleaner_offset"),
                          {k: o for k, o in cleaner.items() if k in ends})
        meta = found.location.child("meta.properties")
        data = meta.tree.read_small(meta.path, 1 << 16)
        if data is not None:
            _write(dest / "meta.properties", data)
        notes += _data_dir_files(found.location, dest)
        return RecoveryReport(str(dest), parts, notes + _partition_notes(parts))
    return into_new_directory(dest, write)


def _partition_notes(parts: list[PartitionRecovery]) -> list[str]:
    return [f"{p.name}: {note}" for p in parts for note in p.notes]


def _file_of(kind: str) -> str:
    return {v: k for k, v in OFFSET_FILES.items()}[kind]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


__all__ = ["Dropped", "PartitionRecovery", "RecoveryReport", "SegmentCopy",
           "check_segment", "recover", "recover_partition"]
