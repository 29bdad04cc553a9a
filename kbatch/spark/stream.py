"""``spark.readStream.format("kbatch")``: a streaming source over partition
directories that grow (the active segment appended to, segments rolled, old
ones deleted by retention), with the meaning of Spark's Kafka source.

Offsets are Kafka offsets, the next one to read per topic-partition, as
JSON ``{"topic": {"0": 42}}`` (Spark checkpoints them). Each call of
``latestOffset`` lists the directories again: a partition's available end is
its log end offset (the last whole batch on disk), or for read_committed its
last stable offset, so an open transaction holds the stream back as it
holds back a Kafka consumer. New partitions start at their earliest offset
(data loss when that is not 0, as in Spark's Kafka source). With
``visibility=consumer`` a partition holds what a consumer could fetch:
earliest is the log start offset and the available end the high watermark,
from the data directory's checkpoint files, read again at each listing.

Read limits: ``maxOffsetsPerTrigger`` (at most that many offsets per
micro-batch, split across partitions in proportion to their backlog; never
more in total), ``minOffsetsPerTrigger`` with ``maxTriggerDelay`` (wait for
that many new offsets, at most that long), ``Trigger.AvailableNow`` (what
exists when the query starts, in micro-batches that honour the limits).

Data loss (``failOnDataLoss``): a start offset below the earliest offset on
disk (retention deleted unread data), a partition that vanished, a partition
added after the query started whose log does not start at 0, a log that
now ends before the offset already read (reported at once, also under a
rate limit), a segment deleted, or replaced (the cleaner's swap of a
compacted segment), between planning and reading. With true the query
fails with ``DataLossError``; with false the missing offsets are skipped and
a warning is logged (driver or executor log). The first micro-batch's start
is resolved once per run, before an AvailableNow target.

On object storage the active segment is uploaded again after appends (a
sync): a new object, longer, that still holds the planned bytes. Each slice
of a partition's last segment (the active one, the only one appended to)
carries a few of the bytes it was planned on (``planned_samples``: the
batch headers it starts and stops at, or the object's last bytes; what the
plan's checks fetched serves most of them, the rest cost about two small
ranged reads per partition); an object whose identity changed is read as a
local file that was appended to when it grew and still holds them at the
same positions, and is replaced otherwise (the same size or shorter, other
bytes there, or a segment that was not the last one). The batch reader
makes the same check (``kbatch.spark.planned``).

The planner keeps in memory one row per batch header of the partitions it
plans (read_committed: of whole partitions, to resolve transactions); a
task keeps one chunk of records.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from typing import Callable

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              ReadMinRows, SupportsTriggerAvailableNow)

from kbatch.errors import FileChangedError
from kbatch.lib import plan as planner
from kbatch.lib.log import PartitionLog
from kbatch.lib.open import Partition, resolve
from kbatch.lib.paths import PathError, PathKind
from kbatch.lib.relist import gone_until, listed, unexplained_deletion
from kbatch.lib.visibility import visible_ranges
from kbatch.spark.planned import file_identity, planned_samples, replaced_since_planning
from kbatch.spark.read import group_by_size, read_slice
from kbatch.spark.options import KafkaOptions, OffsetSpec, OptionError, parse_options
from kbatch.wire import UNBOUNDED

log = logging.getLogger("kbatch.spark")
TP = tuple  # (topic, partition)
WHOLE = UNBOUNDED                     # an end offset no log reaches


def discover(o: KafkaOptions) -> dict[TP, tuple[Partition, object]]:
    """The partitions under the query's paths that it reads, through the
    door (local paths and URLs alike): ``{(topic, partition): (Partition,
    its Storage)}``. A partition named by two paths is refused."""
    found: dict[TP, tuple] = {}
    for path in o.all_paths:
        where = resolve(path, o.store)
        if where.kind is PathKind.SEGMENT:
            raise OptionError("path", str(path), "a streaming query reads partition or data "
                              "directories, not a single segment file")
        if where.kind is PathKind.PARTITION and where.topic is None:
            raise OptionError("path", str(path), "a streaming query needs partition "
                              "directories named <topic>-<partition>")
        for part in where.partitions():
            key = (part.topic, part.partition)
            if key in found:
                raise PathError(f"{found[key][0].location} and {part.location} both name "
                                f"partition {part.partition} of topic {part.topic!r}: load "
                                "one of them")
            found[key] = (part, where.storage)
    chosen = o.select(sorted(found))
    return {tp: found[tp] for tp in chosen}


class Visible:
    """``visibility``: each partition's ``[earliest, end)`` as the query may
    see it. "all": every record on disk. "consumer": what a consumer could
    fetch, ``[log start offset, high watermark)`` from the checkpoint files
    of the data directory holding the partition (``kbatch.lib.visibility``;
    read once per data directory; a partition the files do not name, or
    one outside a data directory, is not limited on that side)."""

    def __init__(self, o: KafkaOptions):
        self.consumer = o.visibility == "consumer"
        self._dirs: dict[str, dict] = {}

    def bounds(self, topic, partition, data_dir) -> tuple[int | None, int | None]:
        """``(log start offset, high watermark)``, None for no bound."""
        if not self.consumer or topic is None:
            return None, None
        return self.ranges(data_dir).get((topic, partition), (None, None))

    def ranges(self, data_dir) -> dict:
        """``{(topic, partition): (log start offset, high watermark)}`` of
        every partition the checkpoint files of ``data_dir`` name."""
        key = str(data_dir)
        if key not in self._dirs:
            self._dirs[key] = visible_ranges(data_dir)
        return self._dirs[key]

    def of_log(self, plog: PartitionLog) -> tuple[int | None, int | None]:
        return self.bounds(plog.topic, plog.partition, plog.location.parent)

    @staticmethod
    def search(find: Callable[..., int | None], lo: int | None, hi: int | None):
        """Kafka's offsets-for-times inside ``[lo, hi)`` (``find``: a
        partition log's ``offset_for_timestamp``): the first record at or
        after the log start ``lo`` stamped late enough
        (FileRecords.searchForTimestamp from the log start offset), None
        when that is not below the high watermark ``hi`` (a broker answers
        no offset there)."""
        def search(timestamp: int) -> int | None:
            found = find(timestamp) if lo is None else find(timestamp, log_start=lo)
            return found if found is None or hi is None or found < hi else None
        return search


def log_range(plog: PartitionLog, visible: Visible | None = None) -> tuple[int, int] | None:
    """``(earliest, log end offset)`` from the segment names and the last
    segment's batch headers (``kbatch.lib.plan.log_end_offset``: a batch
    still being written ends the walk), cut to what ``visible`` shows;
    None for a partition without segments."""
    if not plog.segments:
        return None
    earliest = plog.segments[0].base_offset
    end = planner.log_end_offset(plog.segments, plog.use_index)
    lo, hi = visible.of_log(plog) if visible is not None else (None, None)
    if lo is not None:
        earliest = max(earliest, lo)
    if hi is not None:
        end = min(end, hi)
    return earliest, max(end, earliest)


def batch_ranges(o: KafkaOptions, logs: dict[TP, PartitionLog],
                 log_options: dict | None = None,
                 visible: Visible | None = None) -> dict[TP, tuple[int, int]]:
    """The offsets ``[start, end)`` a batch query reads of each chosen
    partition (``logs``: after assign/subscribe/subscribePattern), with
    Spark's meaning of the starting and ending options (``visibility``:
    earliest and latest are the log start offset and high watermark);
    partitions without segments and empty ranges are left out. Raises
    ``OptionError`` when a JSON option does not name exactly these
    partitions or a start lies after its end, ``DataLossError`` for a start
    below the earliest offset (failOnDataLoss=true). ``log_options``:
    decode options of the timestamp searches; ``visible``: the query's
    ``Visible`` (None: one of its own)."""
    o.check_cover(sorted(tp for tp in logs if tp[0] is not None))
    visible = Visible(o) if visible is None else visible
    out = {}
    for tp, plog in logs.items():
        if not plog.segments:
            continue
        vlo, vhi = visible.of_log(plog)
        earliest = plog.segments[0].base_offset
        if vlo is not None:
            earliest = max(earliest, vlo)
        search = Visible.search(functools.partial(plog.offset_for_timestamp,
                                                  **(log_options or {})), vlo, vhi)
        log_end = functools.partial(planner.log_end_offset, plog.segments, plog.use_index)
        latest = log_end if vhi is None else (lambda end=log_end, hw=vhi: min(end(), hw))
        lo = o.resolve_start(tp[0], tp[1], earliest, latest, search)
        # "latest" reads to whatever end the segments have (no bound from a
        # walk), or to the high watermark
        hi = o.resolve_end(tp[0], tp[1], earliest, WHOLE if vhi is None else vhi, search)
        start, end = o.start_spec(*tp), o.end_spec(*tp)
        if start[0] == end[0] == "offset" and start[1] > end[1]:
            raise OptionError("startingOffsets", str(start[1]), f"{tp[0]}-{tp[1]} would start "
                              f"after its ending offset {end[1]}")
        if lo < hi:
            out[tp] = (lo, hi)
    return out


def file_range(o: KafkaOptions, topic: str | None, partition: int | None) -> tuple[int, int]:
    """Offsets ``[start, end)`` of a batch read of one segment file (no
    partition log: earliest/latest are the file's own ends, timestamps
    cannot be searched)."""
    for name in ("startingTimestamp", "startingOffsetsByTimestamp", "endingTimestamp",
                 "endingOffsetsByTimestamp"):
        if name in o.given:
            raise OptionError(name, "...", "a single segment file has no partition log to "
                              "search by time; load its partition directory")
    if topic is not None:
        o.check_cover([(topic, partition)])
    elif any(isinstance(s, OffsetSpec) and s.kind == "json"
             for s in (o.starting_offsets, o.ending_offsets)):
        raise OptionError("startingOffsets", "...", "JSON offsets name topic-partitions, and "
                          "this segment file is not inside a <topic>-<partition> directory")
    start, end = o.start_spec(topic, partition), o.end_spec(topic, partition)
    return (start[1] if start[0] == "offset" else 0,
            end[1] if end[0] == "offset" else WHOLE)


class Snapshot:
    """The partitions of the query at one moment: their logs, earliest
    offsets and available ends (LSO for read_committed; ``visibility``:
    from the log start offset, up to the high watermark)."""

    def __init__(self, o: KafkaOptions, attempts: int = 5):
        for attempt in range(attempts):
            try:
                self._take(o)
                return
            except FileNotFoundError:   # a segment deleted while we looked: look again
                if attempt == attempts - 1:
                    raise
                time.sleep(0.05)

    def _take(self, o: KafkaOptions) -> None:
        self.logs: dict[TP, PartitionLog] = {}
        self.earliest: dict[TP, int] = {}
        self.end: dict[TP, int] = {}
        self.visible: dict[TP, tuple] = {}      # (log start, high watermark) or Nones
        visible = Visible(o)
        for tp, (part, storage) in discover(o).items():
            plog = PartitionLog.at(part, storage, o.use_index)
            bounds = log_range(plog, visible)
            if bounds is None:
                continue
            earliest, end = bounds
            self.visible[tp] = visible.of_log(plog)
            if o.isolation == "read_committed":
                state = plog.transaction_state(self.visible[tp][1], validate_crc=o.validate_crc)
                end = min(end, state.last_stable_offset)
            self.logs[tp], self.earliest[tp], self.end[tp] = plog, earliest, max(end, earliest)


def to_json(offsets: dict[TP, int]) -> dict:
    out: dict = {}
    for (topic, part), n in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(n)
    return out


def from_json(offsets: dict) -> dict[TP, int]:
    if isinstance(offsets, str):
        offsets = json.loads(offsets)
    return {(topic, int(p)): int(n) for topic, parts in offsets.items() for p, n in parts.items()}


def rate_limit(start: dict[TP, int], end: dict[TP, int], limit: int) -> dict[TP, int]:
    """Ends that move at most ``limit`` offsets in total past ``start``,
    shared in proportion to each partition's backlog (largest remainders
    get the leftover offsets, so the total is exactly ``min(limit, backlog)``)."""
    lag = {tp: max(end[tp] - start.get(tp, end[tp]), 0) for tp in end}
    total = sum(lag.values())
    if total <= limit:
        return dict(end)
    share = {tp: limit * n / total for tp, n in lag.items()}
    take = {tp: int(s) for tp, s in share.items()}
    left = limit - sum(take.values())
    for tp in sorted(share, key=lambda t: (take[t] - share[t], t))[:left]:
        take[tp] += 1
    # a partition whose end went below its start keeps that end: the plan
    # reports it at once, as Spark's rateLimit does (not after the backlog)
    return {tp: (min(start[tp] + take[tp], end[tp]) if tp in start else end[tp])
            for tp in end}


class StreamSlice(InputPartition):
    """Bytes ``[start, stop)`` of one segment, records with offsets ``[lo, hi)``
    (read_committed: the partition's transaction state and the positions of
    the batches it leaves out). ``segment``: its ``Segment`` (whatever
    stores it; the executor reads its own bytes). ``identity`` and
    ``samples``: what tells its file or object from a replaced one
    (``file_identity``, ``planned_samples``)."""

    def __init__(self, topic, partition, segment, start, stop, lo, hi, txn_state=None,
                 drop_positions=None, inner=False, next_base=None, identity=None,
                 samples=None):
        super().__init__(None)
        self.topic, self.partition, self.segment = topic, partition, segment
        self.path = segment.name
        self.start, self.stop, self.lo, self.hi = start, stop, lo, hi
        self.identity = file_identity(segment) if identity is None else identity
        self.samples = samples
        self.txn_state, self.drop_positions = txn_state, drop_positions
        # inner: the slice reaches the end of a segment that is not its
        # partition's last, which must end at a batch boundary (next_base:
        # where the next segment starts)
        self.inner, self.next_base = inner, next_base

    def __repr__(self) -> str:
        return (f"StreamSlice({self.topic}-{self.partition} {self.segment.location.name} "
                f"[{self.start}, {self.stop}) offsets [{self.lo}, {self.hi}))")

    def size(self) -> int:
        try:
            end = self.segment.size if self.stop is None else self.stop
        except FileNotFoundError:
            end = self.start     # deleted since it was planned: the read reports it
        return max(end - self.start, 0)


class StreamPack(InputPartition):
    def __init__(self, slices: list[StreamSlice]):
        super().__init__(None)
        self.slices = slices


class KbatchStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader Spark calls on the driver (offsets, planning) and
    on executors (``read``)."""

    def __init__(self, options, schema):
        self.options = parse_options(options, streaming=True)
        self.arrow_schema = (schema if isinstance(schema, pa.Schema)
                             else to_arrow_schema(schema, timezone="UTC"))
        self._target: dict[TP, int] | None = None
        self._initial: dict | None = None
        self._last_trigger = time.monotonic()
        # each partition's segments at the driver's last listing (names,
        # bases, identities): a segment gone since that neither retention
        # nor the cleaner explains is missing data (``_check_deletions``)
        self._listings: dict[TP, list] = {}

    def __getstate__(self) -> dict:
        """What executors get: the listings stay on the driver."""
        state = self.__dict__.copy()
        state["_listings"] = {}
        return state

    # --- offsets (driver) ------------------------------------------------

    def initialOffset(self) -> dict:
        """The first micro-batch's start, resolved once per query run (Spark
        asks more than once: "latest" or a timestamp resolved again on a
        growing log would move the start past the end already planned)."""
        if self._initial is None:
            o = self.options
            snap = Snapshot(o)
            o.check_cover(sorted(snap.logs))
            start = {}
            for tp, plog in snap.logs.items():
                start[tp] = o.resolve_start(tp[0], tp[1], snap.earliest[tp], snap.end[tp],
                                            Visible.search(plog.offset_for_timestamp,
                                                           *snap.visible[tp]))
            self._initial = to_json(start)
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:
        self.initialOffset()       # the start first, then the target (as Spark's Kafka source)
        self._target = dict(Snapshot(self.options).end)

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit | None = None) -> dict:
        o = self.options
        snap = Snapshot(o)
        self._remember(snap, only_new=True)
        begin = from_json(start)
        end = dict(snap.end)             # a vanished partition drops out: partitions() reports it
        if self._target is not None:     # Trigger.AvailableNow: nothing added later
            end = {tp: min(n, self._target[tp]) for tp, n in end.items() if tp in self._target}
        # the backlog of a new partition counts from its earliest offset
        base = {tp: begin.get(tp, snap.earliest.get(tp, end[tp])) for tp in end}
        if limit is None or isinstance(limit, ReadAllAvailable):
            return to_json(end)
        max_n = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
        min_n = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_offsets_per_trigger
        if min_n is not None and self._target is None:
            backlog = sum(max(end[tp] - base[tp], 0) for tp in end)
            waited = (time.monotonic() - self._last_trigger) * 1000
            if backlog < min_n and waited < o.max_trigger_delay_ms:
                return start
        self._last_trigger = time.monotonic()
        if max_n is not None:
            end = rate_limit(base, end, max_n)
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json(Snapshot(self.options).end)

    # --- planning (driver) -----------------------------------------------

    def partitions(self, start: dict, end: dict):
        for attempt in range(3):
            try:
                return self._plan(from_json(start), from_json(end))
            except (FileNotFoundError, FileChangedError):
                # retention deleted a segment while we planned, or a sync
                # uploaded an object again after its listing: list again
                if attempt == 2:
                    raise

    def _remember(self, snap: "Snapshot", only_new: bool = False) -> None:
        """The listing of ``snap`` kept as the one the next plan is compared
        with (``only_new``: of partitions not listed yet, so that what a
        plan compares with is the previous plan's listing); a partition
        gone from it keeps its last listing."""
        self._listings.update({tp: listed(plog.segments) for tp, plog in snap.logs.items()
                               if not only_new or tp not in self._listings})

    def _check_deletions(self, tp: TP, plog: PartitionLog, lo: int, hi: int) -> None:
        """Missing data (``failOnDataLoss``) when a segment of the partition's
        last listing is gone where neither retention (the oldest segments)
        nor the cleaner (after a segment rewritten since) explains it, and
        its offsets reach into ``[lo, hi)``: a sync that deleted the
        segments the cleaner cleaned and has not yet uploaded the rewritten
        one. Read on, the stream would pass those offsets for good."""
        before = self._listings.get(tp)
        if not before:
            return
        gone = unexplained_deletion(before, plog.segments)
        if gone is None:
            return
        until = gone_until(gone, plog.segments)
        upto = hi if until is None else until
        if gone.base_offset < hi and upto > lo:
            self.options.data_loss(
                f"{tp[0]}-{tp[1]}: segment {gone.name} (offsets {gone.base_offset} to "
                f"{upto - 1}) was deleted since the last listing while the segment before it "
                f"is unchanged (neither retention nor the log cleaner deletes one so: a copy "
                f"in progress?): offsets {max(lo, gone.base_offset)} to {min(hi, upto) - 1} "
                "are missing")

    def _plan(self, begin: dict[TP, int], stop: dict[TP, int]) -> list:
        o = self.options
        snap = Snapshot(o)
        for tp in sorted(set(begin) - set(stop)):
            o.data_loss(f"{tp[0]}-{tp[1]}: the partition is gone (read up to offset "
                        f"{begin[tp]})")
        slices = []
        for tp in sorted(stop):
            hi = stop[tp]
            if tp not in snap.logs:
                o.data_loss(f"{tp[0]}-{tp[1]}: the partition is gone (offsets "
                            f"{begin.get(tp, 0)} to {hi} were not read)")
                continue
            if tp not in begin and snap.earliest[tp] != 0:
                # a partition added since the query started (Spark's Kafka
                # source: "Added partition ... starts from X instead of 0")
                o.data_loss(f"{tp[0]}-{tp[1]}: added partition starts from offset "
                            f"{snap.earliest[tp]} instead of 0: offsets below it were not read")
            lo = begin.get(tp, snap.earliest[tp])
            if hi < lo:
                if snap.end[tp] >= lo:
                    # the log did not go back: an end planned before this start
                    # (a first micro-batch re-run after a restart resolves
                    # "latest" again); the next batch starts at that end
                    continue
                o.data_loss(f"{tp[0]}-{tp[1]}: the log now ends at {hi}, before offset {lo} "
                            "already read")
                continue
            lo = o.check_loss(tp[0], tp[1], lo, snap.earliest[tp], hi)
            if lo >= hi:
                continue
            self._check_deletions(tp, snap.logs[tp], lo, hi)
            slices.extend(self._slices(snap.logs[tp], tp, lo, hi, snap.visible[tp][1]))
        self._remember(snap)
        return self._pack(slices)

    def _slices(self, plog: PartitionLog, tp: TP, lo: int, hi: int,
                high_watermark: int | None = None) -> list[StreamSlice]:
        o = self.options
        state = drops = None
        if o.isolation == "read_committed":
            state = plog.transaction_state(high_watermark, validate_crc=o.validate_crc)
            drops = plog.dropped_batches(state, {"validate_crc": o.validate_crc})
        out = []
        index = {id(seg): i for i, seg in enumerate(plog.segments)}
        for rp in plog.plan(lo, hi, read_follows=False):
            i = index[id(rp.segment)]
            inner = rp.stop is None and i + 1 < len(plog.segments)
            next_base = plog.segments[i + 1].base_offset if inner else None
            # a tiered upload's records stop where the next upload starts
            upper = hi if rp.limit is None else min(hi, rp.limit)
            identity = file_identity(rp.segment)      # once per segment (a stat; remote: a request)
            active = i + 1 == len(plog.segments)      # the only segment appended to
            for start, stop in planner.split_points(rp.segment, rp.start, rp.stop,
                                                    o.max_partition_bytes, plog.use_index):
                drop = None
                if drops is not None:
                    drop = drops.get(rp.segment.source.name, np.empty(0, np.int64))
                    last = WHOLE if stop is None else stop
                    drop = drop[(drop >= start) & (drop < last)]
                samples = planned_samples(rp.segment, start, stop) if active else None
                out.append(StreamSlice(tp[0], tp[1], rp.segment, start, stop, lo, upper,
                                       state, drop, inner and stop is None, next_base, identity,
                                       samples))
        return out

    def _pack(self, slices: list[StreamSlice]) -> list[StreamPack]:
        """Slices in order, packed into about ``minPartitions`` input partitions
        of at most ``maxPartitionBytes``."""
        if not slices:
            return []
        o = self.options
        groups = group_by_size([s.size() for s in slices], o.max_partition_bytes,
                               o.partition_min())
        return [StreamPack([slices[i] for i in g]) for g in groups]

    # --- reading (executors) ---------------------------------------------

    def read(self, partition):
        if not isinstance(partition, StreamPack):
            return iter(())
        return (batch for piece in partition.slices for batch in self._read_slice(piece))

    def _read_slice(self, piece: StreamSlice):
        try:
            # an object uploaded again after appends still holds the planned
            # bytes: read as a local file that was appended to
            changed = replaced_since_planning(piece, file_identity(piece.segment))
        except FileNotFoundError:
            changed = False         # the read below reports it
        if changed:
            # the planned byte positions are no longer this file's (the log
            # cleaner swapped in a cleaned segment, or the log was rewritten)
            self.options.data_loss(
                f"{piece.topic}-{piece.partition}: segment {piece.path} was replaced after "
                f"it was planned (compacted or rewritten): its part of offsets "
                f"[{piece.lo}, {piece.hi}) was not read")
            return
        try:
            yield from read_slice(piece, self.options, self.arrow_schema)
        except FileNotFoundError:
            self.options.data_loss(f"{piece.topic}-{piece.partition}: segment {piece.path} was "
                                   f"deleted before offsets [{piece.lo}, {piece.hi}) were read")

    def commit(self, end: dict) -> None:
        """Nothing to release: offsets live in Spark's checkpoint."""

    def stop(self) -> None:
        """Nothing to release."""


__all__ = ["KbatchStreamReader", "Visible", "batch_ranges", "discover", "file_range", "log_range",
           "rate_limit"]
