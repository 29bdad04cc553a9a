"""The batch planner of ``format("kbatch")`` (runs on the driver): what the
paths hold, through the one door (``kbatch.lib.open``: local paths and URLs
alike), cut into slices for the executors.

    paths --door--> partitions (PartitionLog) --kbatch.lib.plan--> byte ranges
          --split_points--> SegmentSlice(segment, [start, stop), offsets [lo, hi))
          --pack--> SlicePack (one Spark input partition)

A slice carries its ``Segment`` (``kbatch.lib.logfiles``: a local file, an
object, a tiered upload with its manifest), so an executor reads its own
bytes and lists nothing. An object's slice also carries its identity as
listed and, in a partition's last segment, a few planned bytes
(``kbatch.spark.planned``): an executor reads the planned range of an
object a sync uploaded again after appends, and refuses one rewritten
since planning (``confirm_planned``: ``FileChangedError``; one deleted
since planning: ``MissingObjectError``). An object that
changes while the driver plans is planned again from new listings. Offsets follow Spark's Kafka source
(``kbatch.spark.options``: starting/ending offsets and timestamps, the
timestamp strategy, ``assign``/``subscribe`` checked against what is there,
``failOnDataLoss``). ``useIndex`` (default true, wherever the files are):
seeks and split points from the index files, every entry checked before
use (``kbatch.lib.plan``); false: from a walk over every batch header on
the driver (for object storage: every segment's bytes).

Keeps in memory one row per batch header of the partitions it plans
(read_committed: of whole partitions, to resolve transactions).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from pyspark.sql.datasource import InputPartition

from kbatch.errors import FileChangedError
from kbatch.lib import missing, plan as planner
from kbatch.lib.log import PartitionLog, check_segment_end
from kbatch.lib.logfiles import Segment
from kbatch.lib.objects import MissingObjectError
from kbatch.lib.open import resolve
from kbatch.lib.paths import PathError, PathKind
from kbatch.lib.records import Records
from kbatch.lib.relist import ATTEMPTS, CHANGES, refuse_unexplained
from kbatch.lib.segment import DecodeOptions
from kbatch.lib.txn import TxnState
from kbatch.spark.options import KafkaOptions, parse_options
from kbatch.spark.planned import pinned_identity, planned_samples, replaced_since_planning
from kbatch.spark.read import group_by_size
from kbatch.spark.stream import Visible, batch_ranges, file_range
from kbatch.spark.timefilter import prune, segment_older_than
from kbatch.wire import UNBOUNDED

log = logging.getLogger("kbatch.spark")
remote_log = logging.getLogger("kbatch.remote")


@dataclass
class Options:
    paths: list
    isolation: str = "read_uncommitted"
    validate_crc: bool = True
    max_decompressed_bytes: int | None = None
    on_corrupt: str = "fail"
    max_partition_bytes: int = 128 << 20
    min_partitions: int = 0
    chunk_records: int = 1 << 16
    use_index: bool = True
    topics: set | None = None          # pushed-down filters
    partitions: set | None = None
    offset_lo: int = 0
    offset_hi: int = UNBOUNDED
    # pushed-down timestamp filters, widened by a day (kbatch.spark.timefilter):
    # records outside are pruned, Spark still applies the exact filters
    ts_lo: int | None = None
    ts_hi: int | None = None
    kafka: KafkaOptions | None = None  # every option, as Spark's Kafka source means it

    def prune_by_time(self, chunk: Records) -> Records:
        """``chunk`` without the records the pushed timestamp bounds rule out."""
        return prune(chunk, self.ts_lo, self.ts_hi)

    @classmethod
    def parse(cls, options) -> "Options":
        """Checked by ``kbatch.spark.options`` (an unknown option or a bad
        value raises ``OptionError``, one line)."""
        k = parse_options(options)
        return cls(paths=k.all_paths, isolation=k.isolation, validate_crc=k.validate_crc,
                   max_decompressed_bytes=k.max_decompressed_bytes, on_corrupt=k.on_corrupt,
                   max_partition_bytes=k.max_partition_bytes, min_partitions=k.partition_min(),
                   chunk_records=k.chunk_records,
                   use_index=k.use_index, kafka=k)

    def decode_options(self) -> DecodeOptions:
        extra = {}
        if self.max_decompressed_bytes is not None:
            extra["max_decompressed_bytes"] = self.max_decompressed_bytes
        return DecodeOptions(validate_crc=self.validate_crc,
                             on_corrupt="raise" if self.on_corrupt == "fail" else self.on_corrupt,
                             **extra)

    def option_kwargs(self) -> dict:
        """``decode_options()`` as keyword arguments of the log functions."""
        opts = self.decode_options()
        return {name: getattr(opts, name) for name in DecodeOptions.__dataclass_fields__}


class SegmentSlice(InputPartition):
    """Bytes ``[start, stop)`` of one segment, records with offsets in
    ``[lo, hi)``, and (read_committed) the transaction state of its
    partition with the positions of the slice's batches whose records it
    leaves out. ``inner``: the slice reaches the end of a segment that is
    not its partition's last (``next_base``: where the next one starts),
    which must end at a batch boundary. ``identity`` (an object's, as
    listed) and ``samples`` (its partition's last segment: a few planned
    bytes) tell the object planned on from one uploaded again since
    (``kbatch.spark.planned``, ``confirm_planned``)."""

    def __init__(self, topic: str | None, partition: int | None, segment: Segment, start: int,
                 stop: int | None, lo: int, hi: int, txn_state: TxnState | None = None,
                 drop_positions: np.ndarray | None = None, inner: bool = False,
                 next_base: int | None = None, samples: tuple | None = None):
        super().__init__(None)
        self.inner, self.next_base = inner, next_base
        self.topic, self.partition, self.segment = topic, partition, segment
        self.path = segment.name
        self.start, self.stop, self.lo, self.hi = start, stop, lo, hi
        self.txn_state = txn_state
        self.drop_positions = drop_positions
        self.identity = pinned_identity(segment)
        self.samples = samples

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.topic}-{self.partition} "
                f"{self.segment.location.name} [{self.start}, {self.stop}) "
                f"offsets [{self.lo}, {self.hi}))")

    def size(self) -> int:
        try:
            end = self.segment.size if self.stop is None else self.stop
        except FileNotFoundError:
            end = self.start        # deleted since it was listed: the read reports it
        return max(end - self.start, 0)


class SlicePack(InputPartition):
    """One input partition: slices read one after the other."""

    def __init__(self, slices: list[SegmentSlice]):
        super().__init__(None)
        self.slices = slices


def confirm_planned(piece: SegmentSlice) -> None:
    """On an executor, before ``piece`` is read: its object is the one
    planned on, or one a sync uploaded again after appends (it grew and
    still holds the planned bytes: the planned range is read from it, as
    from a local file appended to); else a ``FileChangedError`` (a rewrite
    since planning: the planned byte positions are not this object's); an
    object deleted since planning (retention, the cleaner; ``aws s3 sync
    --delete``) is a ``MissingObjectError`` saying so, never an empty slice."""
    if piece.identity is None:
        return
    try:
        now = pinned_identity(piece.segment)
    except FileNotFoundError:
        raise MissingObjectError(
            "segment deleted after it was planned (retention or the log cleaner): run the "
            "query again to read the partition as it is now",
            url=str(piece.segment.location)) from None
    if replaced_since_planning(piece, now):
        raise FileChangedError(
            f"segment replaced after it was planned (planned at {piece.identity[0]} bytes, "
            f"now {now[0]} bytes, without the planned bytes at their positions: compacted "
            "or rewritten): run the query again to read it as it is now", path=piece.path)


def pack(slices: list[SegmentSlice], max_bytes: int, min_partitions: int) -> list[SlicePack]:
    """Group slices, in order, into packs of about ``max_bytes`` bytes, making at
    least ``min_partitions`` packs when there are enough slices."""
    groups = group_by_size([s.size() for s in slices], max_bytes, min_partitions)
    return [SlicePack([slices[i] for i in g]) for g in groups]


def by_partition(slices: list[SegmentSlice]) -> list[SlicePack]:
    """One pack per Kafka partition, its slices in order (``view=latest``)."""
    groups: dict = {}
    for s in slices:
        groups.setdefault((s.topic, s.partition), []).append(s)
    return [SlicePack(g) for g in groups.values()]


def split_bytes(max_bytes: int) -> int:
    """Segments are cut into slices of an eighth of ``maxPartitionBytes``
    (at least 8 MiB, or all of it when smaller), which ``pack`` then groups
    into balanced input partitions."""
    return max(max_bytes // 8, min(max_bytes, 8 << 20))


def sources(options: Options) -> tuple[list, list]:
    """``(partition logs, single segments)`` the query's paths name,
    through the door: ``(PartitionLog)`` and ``(topic, partition, Segment)``.
    A partition named twice (by two paths: two directories, or a directory
    and one of its segment files) is refused, and so is a file named twice."""
    k = options.kafka
    logs, files, seen = [], [], {}
    for path in options.paths:
        found = resolve(path, k.store)
        use_index = options.use_index
        if found.kind is PathKind.SEGMENT:
            files.append((found.topic, found.partition, found.segment()))
            continue
        for part in found.partitions():
            key = (part.topic, part.partition)
            if key in seen:
                raise PathError(f"{seen[key]} and {part.location} both name partition "
                                f"{part.partition} of topic {part.topic!r}: load one of them")
            seen[key] = part.location
            logs.append(PartitionLog.at(part, found.storage, use_index))
    # a segment file of a partition also named whole, or one file named
    # twice, would be read twice: refused as well
    named = set()
    for topic, partition, seg in files:
        if topic is not None and (topic, partition) in seen:
            raise PathError(f"{seg.location} is a segment of partition {partition} of topic "
                            f"{topic!r}, which {seen[(topic, partition)]} names whole: load "
                            "one of them")
        if str(seg.location) in named:
            raise PathError(f"{seg.location} is named twice: load it once")
        named.add(str(seg.location))
    return logs, files


def scan_damage(log_: PartitionLog, plans, opts: DecodeOptions):
    """``(stop_at, gaps)`` of the byte ranges ``plans`` of a partition will
    read, for onCorrupt stop/skip: ``stop_at`` = ``(segment index, byte,
    error)`` of the first damage (stop), ``gaps`` = every damaged
    ``SkippedRange`` (skip). Runs on the driver. For stop it decodes every
    record (a batch can pass its CRC and still be corrupt inside), so a
    split read stops exactly where one sequential read would; for skip it
    checks batch headers and CRCs only (the executors find the same gaps
    themselves; this pass is for the driver's warning). Keeps one chunk in
    memory."""
    gaps, segs = [], log_.segments
    index = {id(seg): i for i, seg in enumerate(segs)}
    full = opts.on_corrupt == "stop"
    for rp in plans:
        i = index[id(rp.segment)]
        seen = None
        for chunk in rp.segment.source.chunks(opts, start=rp.start, stop=rp.stop,
                                              control_only=not full, chunk_records=1 << 16,
                                              chunk_bytes=32 << 20):
            if len(chunk.batches):
                seen = int(chunk.batches.last_offset.max())
            gaps += chunk.skipped
            if chunk.end is None:
                continue
            inner = rp.stop is None and i + 1 < len(segs)
            chunk, stopped = check_segment_end(chunk, rp.segment.name, inner,
                                               segs[i + 1].base_offset if inner else None,
                                               opts, seen)
            gaps += [g for g in chunk.skipped if g not in gaps]
            if stopped:
                return (i, chunk.end.valid_bytes, chunk.end.error), gaps
    return None, gaps


def _warn_damage(log_: PartitionLog, stop_at, gaps) -> None:
    name = f"{log_.topic}-{log_.partition}"
    if stop_at is not None:
        i, position, error = stop_at
        later = len(log_.segments) - i - 1
        log.warning("kbatch: onCorrupt=stop: %s is read up to byte %d of %s only "
                    "(%d later segment(s) not read): %s", name, position,
                    log_.segments[i].location.name, later, error)
    if gaps:
        total = sum(g.stop - g.start for g in gaps)
        log.warning("kbatch: onCorrupt=skip: %s: %d damaged range(s), %d bytes skipped: %s",
                    name, len(gaps), total,
                    "; ".join(f"{str(g.path).rsplit('/', 1)[-1]} bytes {g.start}-{g.stop} "
                              f"({g.reason}) after offset {g.offset_before}" for g in gaps[:10]))


def _file_slices(options: Options, files: list) -> list[SegmentSlice]:
    """A single segment file given as a path: read whole (it has no
    partition log to seek in), cut to what ``visibility`` shows (the
    checkpoint files of the data directory above its partition)."""
    k = options.kafka
    slices = []
    for topic, part, seg in files:
        if options.on_corrupt != "fail":
            gaps = Records.concat(list(seg.source.chunks(options.decode_options(),
                                                         control_only=True))).skipped
            if gaps:
                log.warning("kbatch: onCorrupt=skip: %s: %d damaged range(s), %d bytes "
                            "skipped", seg.name, len(gaps), sum(g.stop - g.start for g in gaps))
        if not k.wants(topic, part):
            continue
        lo, hi = file_range(k, topic, part)
        vlo, vhi = Visible(k).bounds(topic, part, seg.location.parent.parent)
        lo = lo if vlo is None else max(lo, vlo)
        hi = hi if vhi is None else min(hi, vhi)
        lo, hi = max(lo, options.offset_lo), min(hi, options.offset_hi)
        state = None
        if options.isolation == "read_committed":
            whole = Records.concat(list(seg.source.chunks(options.decode_options(),
                                                          control_only=True)))
            state = TxnState.build(whole.batches, whole.control)
        # a lone segment is its own partition's last one
        slices.append(SegmentSlice(topic, part, seg, 0, None, lo, hi, state,
                                   samples=planned_samples(seg, 0, None)))
    return slices


def plan(options: Options) -> list[SegmentSlice]:
    """Input partitions for a read (runs on the driver), planned again from
    new listings when an object changed or was deleted while the driver
    read it (a sync uploaded the active segment again: ``FileChangedError``;
    retention deleted the oldest segment: ``MissingObjectError``), as a
    read of a partition is listed again (``kbatch.lib.relist``): at most
    ``ATTEMPTS`` plans, each new one warned of on the ``kbatch.remote``
    logger. A segment deleted where neither retention nor the cleaner
    deletes one (``relist.unexplained_deletion``: from the middle, the
    segment before it unchanged) fails the query with a
    ``MissingObjectError`` naming its offsets, never a plan without them."""
    deleted = None       # (the listing, the error) of the first plan that met a change
    for attempt in range(1, ATTEMPTS + 1):
        listed: dict = {}
        try:
            slices = _plan_once(options, listed)
        except CHANGES as exc:
            if deleted is None and listed:     # the listing before the first change met
                deleted = (listed, exc)
            if attempt == ATTEMPTS:
                raise
            remote_log.warning("%s; listing again and planning again (plan %d of at most %d)",
                               exc, attempt + 1, ATTEMPTS)
            continue
        if deleted is not None:
            before, exc = deleted
            for key, segments in before.items():
                refuse_unexplained(segments, listed.get(key, []), exc)
        return slices
    raise AssertionError("unreachable")


def _plan_once(options: Options, listed: dict | None = None) -> list[SegmentSlice]:
    """One plan, of the paths as listed now (``listed``: filled with each
    partition's segments as listed, by (topic, partition))."""
    k = options.kafka
    logs, files = sources(options)
    found = [(log_.topic, log_.partition) for log_ in logs]
    chosen = set(k.select(found))

    def reads(log_) -> bool:     # a partition this query reads
        return ((options.topics is None or log_.topic in options.topics)
                and (options.partitions is None or log_.partition in options.partitions))
    if listed is not None:
        listed.update({(log_.topic, log_.partition): log_.segments for log_ in logs
                       if (log_.topic, log_.partition) in chosen and reads(log_)})
    kwargs = options.option_kwargs()
    visible = Visible(k)
    ranges = batch_ranges(k, {(p.topic, p.partition): p for p in logs
                              if (p.topic, p.partition) in chosen}, kwargs, visible)
    wanted = []
    for log_ in logs:
        if not reads(log_) or (log_.topic, log_.partition) not in ranges:
            continue
        lo, hi = ranges[(log_.topic, log_.partition)]
        lo, hi = max(lo, options.offset_lo), min(hi, options.offset_hi)
        if lo < hi:
            wanted.append((log_, lo, hi))
    _warn_missing(options, logs, wanted, visible)
    states = _transactions(options, [w[0] for w in wanted], kwargs,
                           [visible.of_log(w[0])[1] if visible.consumer else None
                            for w in wanted])
    slices = _file_slices(options, files)
    for (log_, lo, hi), (state, drops) in zip(wanted, states):
        slices += _partition_slices(options, log_, lo, hi, state, drops)
    return slices


def _warn_missing(options: Options, logs: list, wanted: list, visible: Visible) -> None:
    """The driver's warnings of missing data (``kbatch.lib.missing``), once
    per read: per partition read (``wanted``: ``(log, lo, hi)``), what its
    listing and, with visibility=consumer, its high watermark say against
    its log end (``PartitionLog.warn_missing``; a segment cut short is not
    looked for: its end is read on an executor); and the partitions the
    checkpoint files name with no directory that the query would read."""
    for log_, lo, hi in wanted:
        start, hw = visible.of_log(log_)
        log_.warn_missing(lo, hi, hw, start)
    if not visible.consumer:
        return
    k = options.kafka

    def read(topic, partition) -> bool:
        return (k.wants(topic, partition)
                and (options.topics is None or topic in options.topics)
                and (options.partitions is None or partition in options.partitions))
    here = {(p.topic, p.partition) for p in logs}
    dirs = {str(p.location.parent): p.location.parent for p in logs if p.topic is not None}
    for data_dir in dirs.values():
        missing.warn_unnamed(data_dir, visible.ranges(data_dir), here, read)


def _transactions(options: Options, logs: list, kwargs: dict,
                  high_watermarks: list) -> list[tuple]:
    """``(state, drops)`` per partition for read_committed (a pass over
    each partition's batch headers and control records, on the driver's
    threads: partitions in object storage are fetched in parallel; with
    its high watermark where visibility=consumer knows it, TxnState.build);
    ``(None, None)`` otherwise."""
    if options.isolation != "read_committed":
        return [(None, None)] * len(logs)

    def one(log_, hw):
        state = log_.transaction_state(hw, **kwargs)
        return state, log_.dropped_batches(state, kwargs)
    if len(logs) <= 1:
        return [one(p, hw) for p, hw in zip(logs, high_watermarks)]
    with ThreadPoolExecutor(max_workers=min(8, len(logs))) as pool:
        return list(pool.map(one, logs, high_watermarks))


def _partition_slices(options: Options, log_: PartitionLog, lo: int, hi: int, state,
                      drops) -> list[SegmentSlice]:
    slices = []
    index = {id(seg): i for i, seg in enumerate(log_.segments)}
    plans = log_.plan(lo, hi, read_follows=False)
    stop_at = None
    if options.on_corrupt != "fail":
        stop_at, gaps = scan_damage(log_, plans, options.decode_options())
        _warn_damage(log_, stop_at, gaps)
    for rp in plans:
        i = index[id(rp.segment)]
        if (options.ts_lo is not None and log_.use_index
                and i + 1 < len(log_.segments)
                and segment_older_than(rp.segment, options.ts_lo)):
            continue        # useIndex: a rolled segment's time index names its maximum
        seg_stop = rp.stop
        if stop_at is not None:
            if i > stop_at[0]:
                break            # nothing after the first damage
            if i == stop_at[0]:
                seg_stop = stop_at[1] if rp.stop is None else min(rp.stop, stop_at[1])
                if seg_stop <= rp.start:
                    break
        inner = seg_stop is None and i + 1 < len(log_.segments)
        next_base = log_.segments[i + 1].base_offset if inner else None
        active = i + 1 == len(log_.segments)      # the only segment appended to
        # a tiered upload's records stop where the next upload starts
        upper = hi if rp.limit is None else min(hi, rp.limit)
        for start, stop in planner.split_points(rp.segment, rp.start, seg_stop,
                                                split_bytes(options.max_partition_bytes),
                                                log_.use_index):
            drop = None
            if drops is not None:   # only this slice's batches travel with it
                drop = drops[rp.segment.source.name]
                end = UNBOUNDED if stop is None else stop
                drop = drop[(drop >= start) & (drop < end)]
            samples = planned_samples(rp.segment, start, stop) if active else None
            slices.append(SegmentSlice(log_.topic, log_.partition, rp.segment, start, stop,
                                       lo, upper, state, drop, inner and stop is None,
                                       next_base, samples))
    return slices
