"""Deletes: what ``retention.ms`` / ``retention.bytes`` would remove.

``retention(source, retention_ms=, retention_bytes=, now=)`` plans, per
partition, the segments a broker would delete and the log start offset
that follows, with Kafka's own predicates (UnifiedLog.deleteOldSegments,
in its order, each pass on what the previous one left):

1. log start offset: a segment goes when the next segment's base offset is
   at or below the log start offset (``log-start-offset-checkpoint``);
2. size (``retention_bytes`` >= 0, and the partition at least that big):
   ``diff = size - retention_bytes``; oldest first, a segment goes while
   ``diff - its size >= 0`` (what stays is at least the limit);
3. time (``retention_ms`` >= 0; -1: none, and below -1 is refused, as
   Kafka's LogConfig refuses it): a segment goes when ``now - its largest
   timestamp > retention_ms``; its largest timestamp is the largest batch
   max timestamp, or, when it holds none (magic 0, or none >= 0), the
   file's modification time (LogSegment.largestTimestamp). A segment with
   an offset index but no time index (absent or empty) that the broker's
   load does not recover has no largest timestamp either (LogLoader: the
   time index is made empty, ``LogSegment.sanityCheck``): its file's time;
   the load recovers (rebuilding the time index from the batches) the
   segments from the one holding the recovery point on
   (``recovery-point-offset-checkpoint``, 0 when absent), unless the data
   directory holds ``.kafka_cleanshutdown``.

Passes 2 and 3 run only where the topic's ``cleanup.policy`` holds
"delete" (UnifiedLog.deleteOldSegments): ``cleanup_policy`` says it per
topic (default "delete"); the broker's own compacted topics
(``__consumer_offsets``, ``__transaction_state``) are "compact" unless a
mapping names them (AlterConfigs can change them), and the KRaft metadata log (``__cluster_metadata``) runs with
retention.ms and retention.bytes of -1 (KafkaMetadataLog: its snapshots
move its log start): for these only pass 1 deletes.

Each pass deletes a prefix (UnifiedLog.deletableSegments): it stops at the
first segment that does not qualify, at a segment whose upper bound (the
next segment's base offset, or the log end offset for the last one) is
above the high watermark, and at an empty last segment. The log start and
high watermark come from the data directory's checkpoint files
(``log-start-offset-checkpoint``, ``replication-offset-checkpoint``; for a
partition directory, those of the folder holding it); without an entry,
the first segment's base offset and the log end offset. A high watermark
below the log start is raised to it and one above the log end lowered to
it, as UnifiedLog.updateHighWatermark does when the partition is loaded.
When every segment goes, the broker first rolls a new empty segment at the log end offset
(an expired non-empty active segment is deleted too); the log start
offset becomes the base offset of the first segment kept.

``RetentionPlan.apply(dest)`` writes the retained copy (segments with
their index files, producer snapshots of kept segments, the leader epoch
file truncated from the new start as LeaderEpochFileCache.truncateFromStart
does, the checkpoint files with the new log start offsets, and every other
file of the source, which retention does not touch: KRaft snapshots,
``quorum-state``, ``partition.metadata``, a data directory's own files and
its partitions without segments). Tiered buckets are refused: the remote
log manager deletes by other rules (RemoteLogManager: the remote and
local logs counted together, no high watermark, no roll).
``RetentionPlan.lost()`` reads what would be deleted; a read with
``visibility="consumer", log_start=plan.log_start_offsets`` sees what a
consumer would see after the change.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbatch.errors import ArgumentError, CorruptRecordError
from kbatch.lib.checkpoints import (EPOCH_FILE, broker_load, carry_data_dir_files,
                                    holder_offsets, offsets_of, offsets_text, read_checkpoint)
from kbatch.lib.copies import carry_untouched, copy_file, set_aside_notes
from kbatch.lib.epochs import epoch_file_text, load, truncate_from_start
from kbatch.lib.log import PartitionLog
from kbatch.lib.logfiles import loaded_files, mtime_ms
from kbatch.lib.open import Partition, resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.storage import Storage
from kbatch.lib.tables import PartitionRecords
from kbatch.lib.writer import into_new_directory
from kbatch.wire import INT64_MAX, INT64_MIN


@dataclass(frozen=True)
class SegmentInfo:
    """What the predicates look at, per segment."""

    file: str
    base_offset: int
    size: int
    largest_timestamp: int       # ms: batches' max, else the file's modification time
    from_mtime: bool


@dataclass
class Deletion:
    file: str
    base_offset: int
    bytes: int
    reason: str          # "log_start_offset", "size" or "time"


@dataclass
class PartitionPlan:
    topic: str | None
    partition: int | None
    log: PartitionLog = field(repr=False)
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    deleted: list[Deletion] = field(default_factory=list)
    new_log_start_offset: int = 0
    rolled: bool = False        # a new empty segment at the log end offset first
    # a log start above the log end: a broker loading the directory deletes
    # every segment and starts an empty one at the log start (plan_partition)
    restarted: bool = False

    @property
    def roll_offset(self) -> int:
        """The base offset of the empty segment ``rolled`` adds."""
        return self.new_log_start_offset if self.restarted else self.log_end_offset
    checkpoint_start: int = 0   # the log-start-offset-checkpoint entry as loaded (0: none)
    # the topic's cleanup.policy; without "delete" only the log start deletes
    cleanup_policy: str = "delete"
    # what the plan's copy cannot show by itself (``open_transaction_notes``)
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        return (self.topic, self.partition)

    @property
    def kept(self) -> list[SegmentInfo]:
        gone = {d.file for d in self.deleted}
        return [s for s in self.segments if s.file not in gone]


@dataclass
class RetentionPlan:
    source: object = field(repr=False)
    partitions: list[PartitionPlan]
    retention_ms: int | None
    retention_bytes: int | None
    now: int
    # folders of the data directory the plan leaves out (``set_aside_notes``)
    notes: list[str] = field(default_factory=list)

    @property
    def log_start_offsets(self) -> dict[tuple, int]:
        """``{(topic, partition): new log start offset}``."""
        return {p.key: p.new_log_start_offset for p in self.partitions}

    def lost(self, **options) -> PartitionRecords:
        """The records the plan deletes, per partition (options: those of
        ``PartitionLog.read``: ``isolation``, ``columns``...)."""
        return PartitionRecords({p.key: p.log.read(end_offset=p.new_log_start_offset, **options)
                                 for p in self.partitions})

    def apply(self, dest) -> Path:
        """Write the retained copy into the new directory ``dest``."""
        return apply_plan(self, dest)


# What Kafka's LogConfig accepts (both LONG): retention.ms is atLeast(-1),
# -1 meaning no time limit; retention.bytes has no validator ("can be
# negative"): any negative value means no size limit
RETENTION_MS_RANGE = (-1, INT64_MAX)
RETENTION_BYTES_RANGE = (INT64_MIN, INT64_MAX)

# cleanup.policy values (LogConfig: a list of "delete" and "compact")
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
# topics whose policy the broker fixes: its compacted internal topics
# (GroupCoordinator, TransactionStateManager) and the KRaft metadata log
# (KafkaMetadataLog: retention.ms = retention.bytes = -1, snapshots move
# its log start)
FIXED_POLICIES = {"__consumer_offsets": "compact", "__transaction_state": "compact",
                  "__cluster_metadata": "metadata"}


def _policy(value, where: str) -> str:
    """``value`` as one of ``CLEANUP_POLICIES`` (LogConfig's list: "delete"
    and "compact", each at most once, case as written)."""
    if not isinstance(value, str):
        raise ArgumentError(f"{where} must be a str ({', '.join(CLEANUP_POLICIES)})")
    words = [w.strip() for w in value.split(",")]
    policy = ",".join(sorted(words))
    if len(set(words)) != len(words) or policy not in CLEANUP_POLICIES:
        raise ArgumentError(f"{where}={value!r}: cleanup.policy is a list of 'delete' and "
                            "'compact', each at most once")
    return policy


def policy_of(topic: str | None, cleanup_policy, default: str = "delete") -> str:
    """The cleanup.policy of ``topic``: fixed for the broker's own topics,
    else ``cleanup_policy`` (a str for every topic, or ``{topic: str}``
    with ``default`` for a topic it does not name)."""
    if isinstance(cleanup_policy, dict) and topic in cleanup_policy \
            and topic != "__cluster_metadata":
        # named on purpose: an internal topic's policy changed by AlterConfigs
        return _policy(cleanup_policy[topic], f"cleanup_policy[{topic!r}]")
    if topic in FIXED_POLICIES:
        return FIXED_POLICIES[topic]
    if isinstance(cleanup_policy, dict):
        return _policy(cleanup_policy.get(topic, default), f"cleanup_policy[{topic!r}]")
    return _policy(default if cleanup_policy is None else cleanup_policy, "cleanup_policy")


def check_policies(cleanup_policy) -> None:
    """``ArgumentError`` unless ``cleanup_policy`` is a policy or a mapping
    of topics to policies."""
    if isinstance(cleanup_policy, dict):
        for topic, value in cleanup_policy.items():
            _policy(value, f"cleanup_policy[{topic!r}]")
    elif cleanup_policy is not None:
        _policy(cleanup_policy, "cleanup_policy")


def _checked_ms(value, name: str, low: int, high: int) -> int | None:
    if value is None:
        return None
    no_limit = "-1" if low == -1 else "negative"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{name} must be an int (ms or bytes; {no_limit}: no limit)")
    if not low <= int(value) <= high:
        raise ArgumentError(f"{name}={int(value)} is out of range: Kafka's "
                            f"{name.replace('_', '.')} accepts {low}..{high} "
                            f"({no_limit}: no limit)")
    return int(value)


def segment_infos(log: PartitionLog, loaded: tuple[bool, int] | None = None
                  ) -> tuple[list[SegmentInfo], int]:
    """Each segment's size and largest timestamp, and the log end offset
    (from one walk over the batch headers, ``transaction_tables``).
    ``loaded``: ``(clean shutdown, recovery point)`` of the broker's load,
    for segments without a time index (``_time_index_lost``); None: every
    segment's batches count."""
    batches, _, _ = log.transaction_tables()
    src = batches.source if len(batches) else np.empty(0, np.int32)
    infos, end = [], log.segments[0].base_offset if log.segments else 0
    for i, seg in enumerate(log.segments):
        rows = np.flatnonzero(src == i)
        largest = int(batches.max_timestamp[rows].max()) if len(rows) else -1
        if loaded is not None and _time_index_lost(seg, log.segments[i + 1:], *loaded):
            largest = -1
        from_mtime = largest < 0
        if from_mtime:
            largest = mtime_ms(seg.location)
        infos.append(SegmentInfo(seg.location.name, seg.base_offset, seg.size, largest,
                                 from_mtime))
        if len(rows):
            end = max(end, int(batches.last_offset[rows].max()) + 1)
        end = max(end, seg.base_offset)
    return infos, end


def _time_index_lost(seg, after, clean_shutdown: bool, recovery_point: int) -> bool:
    """A segment whose offset index is there and whose time index is absent
    or empty, which the broker's load leaves as it is (LogLoader: such a
    time index is made empty, and only a segment without its offset index
    or one it recovers gets its index files rebuilt from the batches). The
    load recovers, after an unclean shutdown, the segment holding the
    recovery point and every later one (``segments.values(recoveryPoint,
    ...)``): those whose next segment starts above it, and the last."""
    files = dict(seg.files())
    if not any(name.endswith(".index") for name in files):
        return False
    time_index = [e for name, e in files.items() if name.endswith(".timeindex")]
    if time_index and time_index[0].size > 0:
        return False
    recovered = not clean_shutdown and (not after or after[0].base_offset > recovery_point)
    return not recovered


def plan_partition(plan: PartitionPlan, retention_ms: int | None, retention_bytes: int | None,
                   now: int) -> PartitionPlan:
    """Fill ``plan.deleted``/``new_log_start_offset``/``rolled`` by the
    three passes of UnifiedLog.deleteOldSegments (the size and time passes
    only where ``plan.cleanup_policy`` holds "delete")."""
    if "delete" not in plan.cleanup_policy.split(","):
        retention_ms = retention_bytes = None
    segs = list(plan.segments)
    start = plan.log_start_offset
    if segs and start > plan.log_end_offset:
        # LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: the log as a
        # broker loads it has no segment but an empty one at the log start
        plan.deleted += [Deletion(s.file, s.base_offset, s.size, "log_start_offset")
                         for s in segs]
        plan.rolled = plan.restarted = True
        plan.new_log_start_offset = start
        return plan

    def deletable(predicate) -> list[SegmentInfo]:
        out = []
        for k, seg in enumerate(segs):
            nxt = segs[k + 1] if k + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else plan.log_end_offset
            last_and_empty = nxt is None and seg.size == 0
            # Kafka tests the predicate before last_and_empty; an empty
            # segment changes no predicate's state, so the order is free
            if plan.high_watermark >= upper and not last_and_empty and predicate(seg, nxt):
                out.append(seg)
            else:
                break
        return out

    def delete(found: list[SegmentInfo], reason: str) -> None:
        nonlocal segs, start
        if not found:
            return
        if len(found) == len(segs):      # roll first: the log keeps a segment
            rolled = SegmentInfo(f"{plan.log_end_offset:020d}.log", plan.log_end_offset, 0,
                                 -1, False)
            if found[-1].base_offset == rolled.base_offset:
                found = found[:-1]       # an empty active segment at the log end: recreated
            else:
                plan.rolled = True
                segs = segs + [rolled]
            if not found:
                return
        after = segs[segs.index(found[-1]) + 1]
        start = max(start, after.base_offset)
        plan.deleted += [Deletion(s.file, s.base_offset, s.size, reason) for s in found]
        segs = segs[len(found):]

    delete(deletable(lambda s, nxt: nxt is not None and nxt.base_offset <= start),
           "log_start_offset")
    if retention_bytes is not None and retention_bytes >= 0:
        size = sum(s.size for s in segs)
        if size >= retention_bytes:
            diff = size - retention_bytes

            def by_size(seg, _nxt):
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False
            delete(deletable(by_size), "size")
    if retention_ms is not None and retention_ms >= 0:
        def expired(seg, _nxt):
            if seg.largest_timestamp < 0:      # no timestamp, and the store gave no time
                raise ArgumentError(
                    f"{plan.log.name}: {seg.file} holds no timestamp and its store reports no "
                    "modification time: its age for retention_ms cannot be told")
            return now - seg.largest_timestamp > retention_ms
        delete(deletable(expired), "time")
    plan.new_log_start_offset = start
    return plan


def retention(source, *, retention_ms: int | None = None, retention_bytes: int | None = None,
              now=None, high_watermark: dict | None = None, cleanup_policy="delete",
              **storage) -> RetentionPlan:
    """The segments Kafka's retention would delete from ``source`` (a
    partition, a data directory, or a URL of one), per partition, with the
    reason for each and the new log start offset (see the module
    docstring). ``now``: ms (default: the clock). ``high_watermark``:
    ``{(topic, partition): offset}`` overriding the checkpoint (default:
    ``replication-offset-checkpoint``, else the log end offset).
    ``cleanup_policy``: the topics' cleanup.policy ("delete", "compact" or
    "compact,delete"; a str for every topic or ``{topic: policy}``; None:
    "delete"), fixed for the broker's own topics (``FIXED_POLICIES``) unless
    a mapping names them (the metadata log's stays). A tiered bucket
    (``layout="tiered"``) is refused: the remote log manager's rules are
    not these."""
    from kbatch.lib.timestamps import to_millis
    retention_ms = _checked_ms(retention_ms, "retention_ms", *RETENTION_MS_RANGE)
    retention_bytes = _checked_ms(retention_bytes, "retention_bytes", *RETENTION_BYTES_RANGE)
    now_ms = int(time.time() * 1000) if now is None else to_millis(now, "now")
    store, rest = Storage.split(storage)
    if rest:
        raise ArgumentError(f"retention: unknown argument(s) {', '.join(sorted(rest))}")
    check_policies(cleanup_policy)
    found = resolve(source, store)
    if found.storage.layout == "tiered":
        raise ArgumentError(
            f"{found.name}: a tiered bucket: Kafka's remote log manager deletes remote "
            "segments by its own rules (the remote and local logs counted together, no high "
            "watermark, no roll), which retention() does not model; plan it on the broker's "
            "local data directory")
    if found.kind is PathKind.PARTITION:
        parts, notes = [Partition(found.topic, found.partition, found.location)], []
        # the checkpoints of the data directory holding the partition
        starts = holder_offsets(found.location, "log_start_offset")
        hws = holder_offsets(found.location, "high_watermark")
        clean, recovery = broker_load(found.location, partition_alone=True)
    elif found.kind is PathKind.DATA_DIR:
        parts = found.partitions()
        starts = offsets_of(found.location, "log_start_offset")
        hws = offsets_of(found.location, "high_watermark")
        entries = found.location.list()
        clean, recovery = broker_load(found.location, partition_alone=False, entries=entries)
        notes = set_aside_notes(entries, "planned")
    else:
        raise ArgumentError(f"{found.name}: is a {found.kind.value}; retention takes a partition "
                            "directory or a broker data directory")
    hws = {**hws, **(high_watermark or {})}
    plans = []
    for p in parts:
        log = PartitionLog.at(p, found.storage)
        if not log.segments:
            continue
        key = (p.topic, p.partition)
        infos, end = segment_infos(log, (clean, recovery.get(key, 0)))
        start = max(starts.get(key, infos[0].base_offset), infos[0].base_offset)
        # UnifiedLog.updateHighWatermark: at least the log start, at most the log end
        hw = min(max(hws.get(key, end), start), end)
        plan = PartitionPlan(p.topic, p.partition, log, infos, start, end, hw,
                             checkpoint_start=starts.get(key, 0),
                             cleanup_policy=policy_of(p.topic, cleanup_policy))
        plan = plan_partition(plan, retention_ms, retention_bytes, now_ms)
        plan.notes += open_transaction_notes(plan) + roll_notes(plan)
        plans.append(plan)
    return RetentionPlan(found, plans, retention_ms, retention_bytes, now_ms, notes)


def roll_notes(plan: PartitionPlan) -> list[str]:
    """A plan that rolls deletes every segment that held data: the broker
    snapshots its producer state at the new segment (UnifiedLog.roll:
    ``takeSnapshot`` at its base offset), so idempotent and transactional
    producers keep their sequence numbers and epochs; the copy holds no
    snapshot (kbatch writes none), and a broker loading it starts with no
    producer state. Said when the deleted batches name producers."""
    if not plan.rolled or plan.restarted:
        return []
    batches = plan.log.transaction_tables()[0]
    producers = np.unique(np.asarray(batches.producer_id, np.int64))
    producers = producers[producers >= 0]
    if not len(producers):
        return []
    return [f"the broker snapshots its producer state at the rolled segment "
            f"({plan.roll_offset:020d}.snapshot; {len(producers)} producer id(s) in the deleted "
            f"batches); the copy holds no producer snapshot, so a broker loading it starts "
            f"with no producer state (an idempotent producer's sequence numbers, a "
            f"transactional producer's epoch are forgotten)"]


def open_transaction_notes(plan: PartitionPlan) -> list[str]:
    """A transaction still open at the high watermark (no marker below it)
    that begins in a segment the plan deletes: the broker keeps it in its
    producer state (the ``.snapshot`` files), so a consumer's last stable
    offset stays at the new log start until it ends (UnifiedLog:
    ``max(first unstable offset, log start)``), while the retained log alone
    no longer holds its first records: a read_committed read of the copy
    would show the records after the new log start."""
    new_start = plan.new_log_start_offset
    if not plan.deleted or plan.restarted:
        return []
    from kbatch.lib.txn import OPEN, TxnState
    batches, control, txn_index = plan.log.transaction_tables()
    state = TxnState.build(batches, control, txn_index,
                           active_base=plan.log.segments[-1].base_offset,
                           high_watermark=plan.high_watermark)
    verdict = state.verdict(batches)
    unstable = (verdict == OPEN) | state.ended_at_or_above(batches, verdict,
                                                           plan.high_watermark)
    rows = np.flatnonzero(unstable & (batches.base_offset < new_start))
    notes = []
    for pid in sorted(set(batches.producer_id[rows].tolist())):
        first = int(batches.base_offset[rows][batches.producer_id[rows] == pid].min())
        notes.append(
            f"producer {pid}'s transaction from offset {first} is open at the high watermark "
            f"{plan.high_watermark} and begins in a deleted segment: the broker keeps it in its "
            f"producer state, so read_committed consumers see nothing at or past the new log "
            f"start {new_start} until it ends; the copy's log alone no longer shows it (a "
            f"read_committed read of the copy would return those records)")
    return notes


# --- the retained copy -----------------------------------------------------------------

def apply_plan(plan: RetentionPlan, dest) -> Path:
    """The retained copy of ``plan.source`` in the new directory ``dest``."""
    dest = Path(os.fspath(dest))
    if dest.exists():
        raise ArgumentError(f"{dest}: exists; retention writes a new directory (never in place)")

    def write():
        found = plan.source
        single = found.kind is PathKind.PARTITION
        dest.mkdir(parents=True)
        for p in plan.partitions:
            out = dest if single else dest / p.log.location.name
            out.mkdir(exist_ok=True)
            gone = {d.base_offset for d in p.deleted}
            # the files as a broker loads them (an interrupted swap completed)
            for name, e in loaded_files(p.log.location).items():
                stem_base = _stem_base(name)
                if name == EPOCH_FILE:
                    data = p.log.location.child(e.name)
                    _, entries = read_checkpoint(data)
                    try:
                        cache = load(entries)       # as a broker loads it
                    except ValueError as exc:      # a negative entry: Kafka refuses it
                        raise CorruptRecordError(str(exc), path=str(data)) from None
                    # as a broker holds it: truncated from the checkpoint's
                    # start on load (LogLoader), then from the new start when
                    # retention moves it up (UnifiedLog.maybeIncrementLogStartOffset)
                    kept = truncate_from_start(cache, p.checkpoint_start)
                    if p.new_log_start_offset > p.log_start_offset:
                        kept = truncate_from_start(kept, p.new_log_start_offset)
                    if p.restarted:     # LogLoader clears it (clearAndFlush)
                        kept = []
                    (out / name).write_text(epoch_file_text(kept))
                elif stem_base is not None and stem_base in gone:
                    continue        # a deleted segment, its index files and snapshot
                elif p.restarted and name.endswith(".snapshot"):
                    continue        # ProducerStateManager.truncateFullyAndStartAt deletes them
                else:
                    # kept segments and their files, and every file retention does
                    # not touch (partition.metadata, KRaft snapshots, quorum-state);
                    # as old as the original: the time pass falls back on it
                    copy_file(p.log.location.child(e.name), out / name)
            if p.rolled:
                stem = out / f"{p.roll_offset:020d}"
                for suffix in (".log", ".index", ".timeindex"):
                    Path(f"{stem}{suffix}").write_bytes(b"")
        if not single:
            starts = offsets_of(found.location, "log_start_offset")
            starts.update(plan.log_start_offsets)
            (dest / "log-start-offset-checkpoint").write_text(offsets_text(starts))
            carry_data_dir_files(found.location, dest, "log_start_offset")
            carry_untouched(found.location, found.partitions(),
                            {p.log.location.name for p in plan.partitions}, dest)
        return dest
    return into_new_directory(dest, write)


def _stem_base(name: str) -> int | None:
    """The base offset of a segment's side file (``.index``, ``.timeindex``,
    ``.txnindex``, ``.snapshot``, ``.log``), None for other files."""
    from kbatch.lib.paths import segment_base
    for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
        if name.endswith(suffix):
            return segment_base(name[:-len(suffix)] + ".log")
    return None


__all__ = ["Deletion", "PartitionPlan", "RetentionPlan", "SegmentInfo", "apply_plan",
           "check_policies", "open_transaction_notes", "plan_partition", "policy_of", "roll_notes",
           "retention",
           "segment_infos"]
