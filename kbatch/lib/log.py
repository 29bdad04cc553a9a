"""Partitions and broker data directories, wherever they are stored.

    <log.dir>/<topic>-<partition>/
        00000000000000000000.log        batches; the name is the base offset
        00000000000000000000.index      offset -> byte position hints
        00000000000000000000.timeindex  timestamp -> offset hints
        00000000000000000000.txnindex   aborted transactions

or a tiered bucket's ``<topic>-<topicId>/<partition>/`` (``kbatch.lib.tiered``).
What a path or URL names, and its segments, come from the one door
(``kbatch.lib.open``, ``kbatch.lib.logfiles``); which bytes a read needs
from ``kbatch.lib.plan``; a partition's pieces are decoded by the one run
loop (``kbatch.lib.chain``) or, chunk by chunk, by each segment's source.
A local file and an object are two sources, never two code paths: the
same bytes give the same records, ends, skipped ranges and errors. An
object that changed or was deleted since its partition was listed (a sync
uploading the active segment again after appends, retention deleting the
oldest segment, the cleaner's swap) is a new state of the partition: a
read of whole partitions lists it again and reads that listing
(``kbatch.lib.relist``), never bytes of two versions. A ``PartitionLog``
may be shared between threads: each read works on one snapshot of the
listing, which a relist replaces in one step.
Transient files (``.deleted``, ``.cleaned``, ``.swap``) and directories
(``-delete``, ``-future``, ``-stray``) are skipped, and so are names above the
largest offset (int64).

Seeks use the ``.index`` and ``.timeindex`` files as Kafka does, by
default and wherever the segments are stored: the ``.index`` entry at or
below the start offset (a sparse lower bound: decoding starts there and
records below the start are dropped) and the ``.timeindex`` entry below the
start timestamp (a running maximum) say where to start, and only the bytes
from there on are read. Every entry is checked before use (the position
holds a whole CRC-valid batch with fitting offsets; the time index is in
order and matches the batch it names) and the walk over the batch headers
decides when one is wrong, so damaged index files cannot change a result.
An entry crafted to name a valid batch stored inside a record value passes
the check; the decode from there runs into damage, and damage after an
index seek is decided by the walk too: ``read`` then returns the exhaustive
answer, ``iter`` does when the first chunk meets it and raises otherwise
(``kbatch.lib.plan.check_seek``). ``verify`` reports wrong entries.

``use_index=False`` never reads the index files: each segment's batch
boundaries come from one walk over its batch headers (no record is
decoded; cached per segment), exact whatever the index files hold. The
walk touches every batch header, so on object storage it reads about as
much as the segment itself.

Offset ranges are half-open, ``[start_offset, end_offset)``. Timestamps map
to offsets as Kafka's offsets-for-times does: ``start_timestamp=t`` starts at
the earliest offset whose timestamp is >= t, ``end_timestamp=t`` stops before
the earliest offset whose timestamp is >= t (``timestamp_mode="exact"``
filters by each record's own timestamp instead).

Damage: only the last (active) segment of a partition may end in a torn
tail. Anything else (a corrupt batch anywhere, a truncated batch or zero
padding at the end of an earlier segment) raises ``CorruptRecordError``;
``on_corrupt="stop"`` ends the whole read before it (no later segment is
read, ``Records.end`` says where and why) and ``on_corrupt="skip"`` resumes
at the next valid batch, listing each damaged range in ``Records.skipped``.
A batch whose records disagree with its header (offset deltas outside
0..lastOffsetDelta) is corrupt, so header-based seeks never miss records.

Missing data: offsets that evidence says existed and no segment holds
(``kbatch.lib.missing``: index files without their ``.log``, a segment
that is not the last one cut short of what its index files name, a high
watermark above the log end, a partition the checkpoint files name with no
directory) are not invented: a read returns what the segments hold, as a
consumer would see it, and warns once on the ``kbatch`` logger of those in
its range, from what the read has at hand.
"""

from __future__ import annotations

import copy
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Iterator, Sequence

import numpy as np

from kbatch.errors import ArgumentError, CorruptRecordError, FileChangedError, LimitExceededError
from kbatch.lib import missing, plan as planner
from kbatch.lib.batchrows import (BatchPart, Damage, batch_table, check_level, count_batches,
                                  decoded_counts, kept_part)
from kbatch.lib.chain import Piece, decode_run, settle_segment_end, source_size, split_runs
from kbatch.lib.index import TxnIndex
from kbatch.lib.latest import apply_view, check_columns, check_view
from kbatch.lib.repeats import RepeatWatch, warn_repeated
from kbatch.lib.logfiles import Segment, list_segments
from kbatch.lib.open import Partition, expect
from kbatch.lib.paths import PathKind
from kbatch.lib.plan import ReadPlan
from kbatch.lib.records import BatchTable, ControlRecords, Records
from kbatch.lib.relist import CHANGES, caught, read_listed, read_relisted
from kbatch.lib.segment import DEFAULT_CHUNK_BYTES, DEFAULT_CHUNK_RECORDS, DecodeOptions, \
    check_options, decode_options
from kbatch.lib.storage import STORAGE_KEYS as STORAGE_ARGS, Storage
from kbatch.lib.tables import PartitionRecords
from kbatch.lib.timestamps import to_millis
from kbatch.lib.txn import TxnState, check_isolation
from kbatch.lib.uploads import served
from kbatch.wire import INT64_MIN, UNBOUNDED

TIMESTAMP_MODES = ("offsets", "exact")
TXN_CHUNK_RECORDS, TXN_CHUNK_BYTES = 1 << 18, 32 << 20    # a transaction pass's chunks


def _offset_arg(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{name} must be an int offset, not {type(value).__name__}")
    return int(value)


def _ranged(*bounds) -> bool:
    """Whether a read was given any offset or timestamp bound."""
    return any(b is not None for b in bounds)


def _inside(batches: BatchTable, lo: int, hi: int) -> bool:
    """Every record of ``batches`` has an offset in ``[lo, hi)``: magic 2
    batches only (the decoder refuses a record outside its batch's offsets)
    and every batch inside the range."""
    return not len(batches) or (int(batches.magic.min()) == 2
                                and int(batches.base_offset.min()) >= lo
                                and int(batches.last_offset.max()) < hi)


def _in_window(records: Records, window) -> Records:
    """``records`` stamped inside ``window`` (``[start, end)`` ms, records
    without a timestamp left out); all of them when ``window`` is None."""
    if window is None:
        return records
    ts = records.timestamp
    inside = (ts >= window[0]) & (ts < window[1]) & (ts != -1)
    return records if inside.all() else records.take(inside)


def _plan_chunks(plan: ReadPlan, lo: int, hi: int, opts: DecodeOptions, **kw):
    """``source.chunks`` of ``plan``. Damage met after an index seek: in
    the first chunk, the segment is read again from the walk's positions;
    later (chunks were given out), a seek inside a batch of the walk
    raises (``kbatch.lib.plan.check_seek``), damage past the walk's stop
    ends the chunks, other damage is reported."""
    source = plan.segment.source
    chunks = source.chunks(opts, start=plan.start, stop=plan.stop, **kw)
    if not plan.index_seek:
        yield from chunks
        return
    try:
        first = next(chunks, None)
        damaged = first is not None and _damaged(first, plan)
    except CorruptRecordError:
        first, damaged = None, True
    if damaged:
        chunks.close()
        walked = planner.rewalked(plan, lo, hi)
        yield from source.chunks(opts, start=walked.start, stop=walked.stop, **kw)
        return
    if first is None:
        return
    yield first
    resume = after_chunk(first, plan.start)
    try:
        for chunk in chunks:
            if _damaged(chunk, plan):
                planner.check_seek(plan)
            yield chunk
            resume = after_chunk(chunk, resume)
    except CorruptRecordError as exc:
        planner.check_seek(plan)
        # damage below where the walk starts, or past where it stops (the
        # index, or its lack of an entry, placed the plan's ends): outside the
        # range, as for a walked read; on from the walk's start, or what the
        # chunk being decoded held read again up to the walk's stop
        walked = planner.rewalked(plan, lo, hi)
        at = exc.batch_position if exc.batch_position is not None else exc.position
        if at is not None and at < walked.start:
            yield from source.chunks(opts, start=max(resume, walked.start), stop=plan.stop, **kw)
            return
        if walked.stop is not None and at is not None and at >= walked.stop:
            if resume < walked.stop:
                yield from source.chunks(opts, start=resume, stop=walked.stop, **kw)
            return
        raise


def after_chunk(chunk: Records, position: int) -> int:
    """Where the bytes after ``chunk``'s last batch start (``position`` when
    it holds none)."""
    bt = chunk.batches
    if not len(bt):
        return position
    return max(position, int(bt.position[-1]) + int(bt.size[-1]))


def _steered(plans: list[ReadPlan]) -> bool:
    """Whether an index entry chose a byte range of ``plans`` (a walk
    starts every segment at 0 but the first, and stops none but the last,
    by the batch headers; plans with ``index_seek`` came from the index)."""
    return any(pl.index_seek for pl in plans)


def _damaged(records: Records, last: ReadPlan) -> bool:
    """Damage a read met: skipped ranges, a corrupt end, or a range the
    index stopped (``last.stop``) that ends inside a batch. A torn tail of
    a read to the end of the data is the data's end, not damage."""
    end = records.end
    if records.skipped:
        return True
    if end is None or end.reason in (None, "zero_padding"):
        return False
    return end.reason != "truncated" or last.stop is not None


def _no_view_in_chunks(options: dict) -> None:
    """``view=`` is for whole reads: a key's latest record may sit in any chunk."""
    view = options.pop("view", "all")
    if check_view(view) != "all":
        raise ArgumentError(f"view={view!r} needs every record of the partition at once: "
                            "use read(), not iter()")


def _no_view_in_batches(view: str) -> None:
    if view != "all":
        raise ArgumentError(f'view={view!r} is a table of records: level="batches" has none')


def _batch_level_mode(mode) -> None:
    if mode != "offsets":
        raise ArgumentError('level="batches" takes timestamp_mode="offsets" (a batch is '
                            "kept whole or cut by offsets, not by each record's timestamp)")


def _check_timestamp_mode(mode) -> None:
    if mode not in TIMESTAMP_MODES:
        raise ArgumentError(f"timestamp_mode must be one of {', '.join(TIMESTAMP_MODES)}, "
                            f"not {mode!r}")


def _as_kwargs(opts: DecodeOptions) -> dict:
    """``opts`` back as keyword arguments (for calls taking ``**options``)."""
    return {name: getattr(opts, name) for name in DecodeOptions.__dataclass_fields__}


def check_segment_end(chunk: Records, path, inner: bool, next_base: int | None,
                      opts: DecodeOptions, seen: int | None) -> tuple[Records, bool]:
    """The final chunk of a segment, checked: ``(chunk, stopped)``.

    A segment that is not the last of its partition (``inner``; the next
    one starts at ``next_base``) must end at a batch boundary (Kafka trims a
    segment when it rolls): a truncated batch or zero padding there is
    damage, raised, stopped at or skipped like a corrupt batch (``seen``:
    the last offset read from the segment). ``stopped``: the read must end
    here (``on_corrupt="stop"`` met damage)."""
    end, gap, stopped = settle_segment_end(chunk.end, path, inner, next_base, opts, seen)
    if end is not chunk.end:
        chunk = chunk.replace(end=end, skipped=chunk.skipped + ((gap,) if gap else ()))
    return chunk, stopped


def _has_content(chunk: Records) -> bool:
    """Records, control records or batch rows (empty batches count)."""
    return bool(len(chunk) or len(chunk.control) or len(chunk.batches))


def _below_limits(records: Records, limits: list[int | None]) -> Records:
    """Tiered uploads that overlap: the records of run piece ``i`` below
    ``limits[i]`` (``Segment.limit``: another upload serves the rest,
    ``kbatch.lib.uploads``)."""
    if all(limit is None for limit in limits) or not len(records.batches):
        return records
    bound = np.array([UNBOUNDED if x is None else x for x in limits], np.int64)
    batch_bound = bound[records.batches.source]
    return records.select(records.offset < batch_bound[records.batch],
                          records.control.offset < batch_bound[records.control.batch],
                          records.batches.base_offset < batch_bound)


def _listed(found) -> tuple[list[Segment], list]:
    """``(segments, listing)`` of a partition the door found (listed once)."""
    listing = list(found.entries) if found.entries is not None else found.location.list()
    return list_segments(found.location, found.storage, listing), listing


def _reach(plan: ReadPlan, last: int | None, lo: int) -> int:
    """Where the offsets of ``plan``'s segment, read from ``plan.start`` to
    its end, stop: one past ``last``, the last offset read (None: none was;
    then its base offset for a read from its start, else ``lo``: it holds
    none from there on)."""
    base = plan.segment.base_offset
    return last + 1 if last is not None else base if plan.start == 0 else max(lo, base)


def _reached(records: Records, plans: list[ReadPlan], lo: int) -> dict[int, int]:
    """``{base offset: _reach}`` of the planned segments ``records`` (one
    decoded run of ``plans``, its batch rows untrimmed) took to the end of
    their valid data without damage (``kbatch.lib.missing.cut_segments``)."""
    bt = records.batches
    damaged = {gap.path for gap in records.skipped}
    last = np.full(len(records.sources), -1, np.int64)
    if len(bt):
        np.maximum.at(last, bt.source, bt.last_offset)
    tops = {name: top for name, top in zip(records.sources, last.tolist()) if top >= 0}
    return {pl.segment.base_offset: _reach(pl, tops.get(pl.segment.source.name), lo)
            for pl in plans if pl.stop is None and pl.segment.source.name not in damaged}


_LISTINGS = itertools.count()    # the order listings were taken in (newest kept)
_SWAP = threading.Lock()         # held for one comparison and one assignment (relist)


class _Listed:
    """One listing of a partition: its segments, the listing they came
    from (None: not at hand), and what is worked out from them once
    (``claims``: ``PartitionLog.listing_claims``; ``txn``: the transaction
    tables). Replaced whole by a relist, never changed in place."""

    __slots__ = ("segments", "listing", "taken", "claims", "txn")

    def __init__(self, segments: list[Segment], listing=None, taken: int = -1):
        self.segments = segments
        self.listing = None if listing is None else list(listing)
        self.taken = taken
        self.claims: tuple | None = None
        self.txn: tuple | None = None


class PartitionLog:
    """A partition: its segments, in base-offset order, wherever stored.

    A ``PartitionLog`` may be shared between threads: every read works on
    the listing the log holds when the read starts (``snapshot``), which a
    relist (``kbatch.lib.relist``) replaces in one step.

    ``path``: a partition directory, a URL of one (``s3://bucket/data/orders-0``;
    tiered: ``.../orders-<topicId>/0``), or a path in ``storage.filesystem``.
    ``storage``: a ``kbatch.lib.storage.Storage`` (how to reach a URL).
    ``use_index``: seek with the ``.index``/``.timeindex`` files (checked
    hints, as Kafka does) instead of a walk over every batch header; see the
    module docstring for what each guarantees.
    """

    def __init__(self, path, *, use_index: bool = True, storage: Storage | None = None):
        found = expect(path, PathKind.PARTITION, what="open_log needs a partition directory",
                       storage=storage)
        self._setup(Partition(found.topic, found.partition, found.location), found.storage,
                    use_index, *_listed(found))

    @classmethod
    def at(cls, part: Partition, storage: Storage, use_index: bool = True) -> "PartitionLog":
        """The partition of a data directory's expansion (``Resolved.partitions``)."""
        log = cls.__new__(cls)
        listing = part.location.list()
        log._setup(part, storage, use_index, list_segments(part.location, storage, listing),
                   listing)
        return log

    def _setup(self, part: Partition, storage: Storage, use_index: bool,
               segments: list[Segment], listing=None) -> None:
        self.location = part.location
        self.storage = storage
        self.path = part.location.local_path()
        self.name = str(part.location)
        self.use_index = bool(use_index)
        self.topic, self.partition = part.topic, part.partition
        # the segments and the listing they came from (None: not at hand),
        # which says what else is there (kbatch.lib.missing: index files
        # without a .log): one object, replaced whole by relist()
        self._listed = _Listed(segments, listing)

    @property
    def segments(self) -> list[Segment]:
        """The segments of the listing the log holds now."""
        return self._listed.segments

    @property
    def listing(self):
        """The listing the segments came from (None: not at hand)."""
        return self._listed.listing

    def snapshot(self) -> "PartitionLog":
        """This log as listed now: a ``PartitionLog`` of the same partition
        whose listing a later ``relist`` of this one (another thread's read
        that found an object changed) leaves alone. Every read works on
        one (what is worked out from a listing, its transactions, is kept
        with the listing and shared); callers that plan with several calls
        (``plan``, ``transaction_state``, ``dropped_batches``, ``chunks``)
        and must see one listing make them on one snapshot."""
        return copy.copy(self)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, "
                f"{len(self.segments)} segments)")

    def relist(self) -> None:
        """List the partition again: its segments (and what is kept of
        them: ranges, transactions) are then those the store holds now. A
        read that found an object changed or deleted since the listing calls it
        (``kbatch.lib.relist``); only a partition made by a listing. The new
        listing replaces the old one in one step (reads in flight keep
        their snapshot); of two relists at once, the listing taken later
        is kept."""
        taken = next(_LISTINGS)
        listing = self.location.list()
        fresh = _Listed(list_segments(self.location, self.storage, listing), listing, taken)
        with _SWAP:
            if fresh.taken > self._listed.taken:
                self._listed = fresh

    # --- seeking ---------------------------------------------------------

    def plan(self, lo: int, hi: int, *, read_follows: bool = True) -> list[ReadPlan]:
        """The byte ranges to decode for offsets ``[lo, hi)`` (``kbatch.lib.plan``;
        ``read_follows=False``: the bytes are read elsewhere, Spark's executors)."""
        return planner.plan(self.segments, lo, hi, self.use_index, read_follows=read_follows)

    def offset_for_timestamp(self, timestamp, *, log_start: int | None = None,
                             **options) -> int | None:
        """The earliest offset whose record timestamp is >= ``timestamp``
        (Kafka's offsets-for-times), None when no record is that recent.
        ``timestamp``: anything ``kbatch.lib.timestamps.to_millis`` reads;
        ``log_start``: the log start offset (records below it are not in
        the log: the answer is the first record at or after it stamped late
        enough, as a broker answers); ``options``: those of the read (CRC
        check, limits, ``on_corrupt``) apply to the batches decoded here too
        (``kbatch.lib.plan``)."""
        timestamp = to_millis(timestamp, "timestamp")
        opts = decode_options("offset_for_timestamp", options)
        return planner.offset_for_timestamp(self.segments, timestamp, opts, self.use_index,
                                            log_start)

    def _offset_range(self, start_offset, end_offset, start_timestamp, end_timestamp,
                      opts: DecodeOptions, timestamp_mode: str = "offsets",
                      log_start: int | None = None):
        """``(lo, hi, window)``: the offsets to read and, for
        ``timestamp_mode="exact"``, the ``[start, end)`` milliseconds each
        record's own timestamp must lie in (None otherwise). ``log_start``:
        nothing below it is read, and the timestamps are searched from it."""
        _check_timestamp_mode(timestamp_mode)
        start_ts = to_millis(start_timestamp, "start_timestamp")
        end_ts = to_millis(end_timestamp, "end_timestamp")
        lo = 0 if start_offset is None else _offset_arg(start_offset, "start_offset")
        hi = UNBOUNDED if end_offset is None else _offset_arg(end_offset, "end_offset")
        if log_start is not None:
            lo = max(lo, _offset_arg(log_start, "log_start"))
        if start_ts is not None:
            # exact or not, nothing before the first record stamped >= start
            found = self.offset_for_timestamp(start_ts, log_start=log_start, **_as_kwargs(opts))
            lo = UNBOUNDED if found is None else max(lo, found)
        window = None
        if timestamp_mode == "exact":
            if start_ts is not None or end_ts is not None:
                window = (INT64_MIN if start_ts is None else start_ts,
                          UNBOUNDED if end_ts is None else end_ts)
        elif end_ts is not None:
            found = self.offset_for_timestamp(end_ts, log_start=log_start, **_as_kwargs(opts))
            if found is not None:
                hi = min(hi, found)
        return lo, hi, window

    # --- transactions ----------------------------------------------------

    def transaction_tables(self, **options):
        """``(batches, control, txn_index)`` of the whole partition: every batch
        header and control record (data records are not decoded), and every
        ``.txnindex`` entry. An abort marker may sit in a later segment than
        the data it aborts, so read_committed needs all of them. Cached
        until a segment changes. Keeps one row per batch."""
        opts = decode_options("transaction_tables", options)
        listed = self._listed       # one listing throughout (a relist may replace it)
        key = (tuple(sorted(options.items())),) + tuple(
            (s.name, s.version()) for s in listed.segments)
        cached = listed.txn
        if cached is None or cached[0] != key:
            tables, controls, shift = [], [], 0
            for i, seg in enumerate(listed.segments):
                whole = served(Records.concat(list(seg.source.chunks(
                    opts, control_only=True, chunk_records=TXN_CHUNK_RECORDS,
                    chunk_bytes=TXN_CHUNK_BYTES))), seg.limit)
                tables.append(whole.batches.with_source(np.array([i], dtype=np.int32)))
                controls.append(whole.control.shifted(shift))
                shift += len(whole.batches)
            if not tables:
                empty = Records.empty()
                tables, controls = [empty.batches], [empty.control]
            cached = (key, (BatchTable.concat(tables), ControlRecords.concat(controls),
                            TxnIndex.concat(s.txn_index for s in listed.segments)))
            listed.txn = cached
        return cached[1]

    def transaction_state(self, high_watermark: int | None = None, **options) -> TxnState:
        """Transactions of the whole partition, for read_committed reads
        (``high_watermark``: a consumer's, where known: see ``TxnState.build``)."""
        log = self.snapshot()
        last_base = log.segments[-1].base_offset if log.segments else 0
        return TxnState.build(*log.transaction_tables(**options), active_base=last_base,
                              high_watermark=high_watermark)

    def aborted_transactions(self) -> TxnIndex:
        """All ``.txnindex`` entries of the partition, in segment order."""
        return TxnIndex.concat(s.txn_index for s in self.segments)

    def dropped_batches(self, state: TxnState, options) -> dict[str, np.ndarray]:
        """Per segment (by source name), the positions of the batches a
        read_committed read leaves out (aborted or open transactions, at or
        past the LSO): the decoder drops their records as it goes instead
        of the rows being copied out afterwards. The chunks are still
        filtered by ``state``, so a segment that changed or decodes
        differently stays exact."""
        log = self.snapshot()
        batches, _, _ = log.transaction_tables(**options)
        drop = state.dropped(batches)
        out = {}
        for i, seg in enumerate(log.segments):
            rows = drop & (batches.source == i)
            out[seg.source.name] = np.sort(batches.position[rows]).astype(np.int64)
        return out

    # --- reading ---------------------------------------------------------

    def iter(self, start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None, timestamp_mode: str = "offsets",
             chunk_records: int = DEFAULT_CHUNK_RECORDS,
             chunk_bytes: int = DEFAULT_CHUNK_BYTES, isolation: str = "read_uncommitted",
             **options) -> Iterator[Records]:
        """Records of the range, chunk by chunk (whole batches, trimmed to the range).

        Timestamps: int milliseconds, ``datetime`` (naive: UTC),
        ``numpy.datetime64``, ``pandas.Timestamp`` or an ISO 8601 string.
        ``timestamp_mode="offsets"`` (default) maps them to offsets as
        Kafka's offsets-for-times does (records after the first one stamped
        at or after ``end_timestamp`` are left out, whatever their own
        timestamps); ``"exact"`` returns exactly the records whose own
        timestamp lies in ``[start_timestamp, end_timestamp)`` (records
        without one are left out). "exact" reads from the first record
        stamped at or after ``start_timestamp`` to the end of the offset
        range, since a later record may carry an earlier timestamp.

        Keeps in memory one chunk and one decompressed batch (and, for
        read_committed, one row per batch of the partition; from object
        storage, the ranges in flight). Yields every chunk with records,
        control records, batches or skipped ranges; the last chunk (the end
        of the last segment read, maybe empty) carries ``end``.
        """
        check_isolation(isolation)
        _no_view_in_chunks(options)
        opts = decode_options("PartitionLog.iter", options)
        if chunk_records < 1 or chunk_bytes < 1:
            raise ArgumentError("chunk_records and chunk_bytes must be positive")
        log = self.snapshot()       # one listing for the whole iteration
        state, drops, lo, hi, window = log._read_setup(
            isolation, options, opts, start_offset, end_offset, start_timestamp,
            end_timestamp, timestamp_mode)
        ranged = _ranged(start_offset, end_offset, start_timestamp, end_timestamp)
        return log._iter(lo, hi, opts, chunk_records, chunk_bytes, state, drops, window,
                         ranged)

    def _read_setup(self, isolation, options, opts, start_offset, end_offset,
                    start_timestamp, end_timestamp, timestamp_mode,
                    log_start: int | None = None, high_watermark: int | None = None) -> tuple:
        """``(state, drops, lo, hi, window)`` of a read or iter: the
        transactions and dropped batches (read_committed; else None) and
        the range (see ``_offset_range``). ``options``: without isolation."""
        state = drops = None
        if isolation == "read_committed":
            state = self.transaction_state(high_watermark, **options)
            drops = self.dropped_batches(state, options)
        lo, hi, window = self._offset_range(start_offset, end_offset, start_timestamp,
                                            end_timestamp, opts, timestamp_mode, log_start)
        return state, drops, lo, hi, window

    def chunks(self, lo: int, hi: int, opts: DecodeOptions, *, state: TxnState | None = None,
               drops=None, chunk_records: int = DEFAULT_CHUNK_RECORDS,
               chunk_bytes: int = DEFAULT_CHUNK_BYTES, plans=None) -> Iterator[Records]:
        """``iter`` over offsets ``[lo, hi)`` with options already checked
        (``plans``: the byte ranges, when the caller planned them; with
        ``state``, ``drops`` or ``plans``, plan on the same ``snapshot``)."""
        return self.snapshot()._iter(lo, hi, opts, chunk_records, chunk_bytes, state, drops,
                                     None, True, plans)

    def _iter(self, lo, hi, opts, chunk_records, chunk_bytes, state=None, drops=None,
              window=None, ranged=True, plans=None):
        for _, _, _, chunk in self._plan_iter(lo, hi, opts, chunk_records, chunk_bytes,
                                              state, drops, window, ranged, plans):
            yield chunk

    def _plan_iter(self, lo, hi, opts, chunk_records, chunk_bytes, state=None, drops=None,
                   window=None, ranged=True, plans=None, control_only=False,
                   high_watermark=None, log_start=None):
        """``(plan, low, high, chunk)``: ``iter``'s chunks with the plan each
        came from and the offsets ``[low, high)`` it was trimmed to.
        ``control_only``: data records are not decoded (batch rows, control
        records; CRCs checked as in a full read). Once the last chunk is
        given out, what says offsets of ``[lo, hi)`` are missing is warned
        of (``_warn_missing``); offsets met again, once met (``RepeatWatch``)."""
        segments = self.segments
        if plans is None:
            plans = planner.plan(segments, lo, hi, self.use_index) if lo < hi else []
        extra = {"control_only": True} if control_only else {}
        active = segments[-1] if segments else None
        reached = {}
        repeats = RepeatWatch(self.name)
        for k, plan in enumerate(plans):
            last_plan = k == len(plans) - 1
            # only the active (last) segment may end in a torn tail
            inner = plan.segment is not active and plan.stop is None
            source = plan.segment.source
            drop = None if drops is None else drops.get(source.name)
            # a whole read keeps every record the files hold (whatever its offset);
            # a tiered upload's records stop where it stops serving (kbatch.lib.uploads)
            low = lo if ranged else INT64_MIN
            high = hi if ranged else UNBOUNDED
            if plan.limit is not None:
                high = min(high, plan.limit)
            trim = ranged or plan.limit is not None
            stopped, seen, damaged = False, None, False
            for chunk in _plan_chunks(plan, lo, hi, opts, chunk_records=chunk_records,
                                      chunk_bytes=chunk_bytes, drop_positions=drop, **extra):
                if len(chunk.batches):
                    seen = int(chunk.batches.last_offset.max())
                    repeats.see(chunk, plan.limit)
                if chunk.end is not None:
                    chunk, stopped = check_segment_end(chunk, source.name, inner,
                                                       self._next_base(plan.segment), opts, seen)
                damaged = damaged or bool(chunk.skipped)
                if trim and not control_only:
                    # (batch rows are trimmed by count_batches: a magic 0/1
                    # wrapper's first offset is known once it is decoded)
                    chunk = chunk.select_offsets(low, high)
                chunk = _in_window(chunk, window)
                if state is not None:
                    chunk = state.filter(chunk)
                # every chunk with content or skipped ranges; the final
                # chunk (which carries ``end``) even when empty
                if (_has_content(chunk) or chunk.skipped
                        or ((last_plan or stopped) and chunk.end is not None)):
                    yield plan, low, high, chunk
                del chunk
            if stopped:
                return   # on_corrupt="stop": nothing after the first damage
            if plan.stop is None and not damaged:
                reached[plan.segment.base_offset] = _reach(plan, seen, lo)
        if not plans:
            empty = Records.empty()
            yield None, lo, hi, (empty if state is None else state.filter(empty))
        self._warn_missing(lo, hi, reached, high_watermark, log_start)

    def _warn_missing(self, lo: int, hi: int, reached: dict, high_watermark=None,
                      log_start=None, log_end=None) -> None:
        """Warn once, on the ``kbatch`` logger, of the offsets of ``[lo,
        hi)`` a read returns no record of though evidence says they existed
        (``kbatch.lib.missing.read_shortfalls``: the partition's listing,
        the index files of the segments in ``reached`` that end short of
        the next one, and the ``high_watermark`` of a consumer's view, whose
        ``log_start`` is where a partition without segments would start;
        ``log_end``: as ``read_shortfalls`` takes it)."""
        claims = [] if high_watermark is None else [
            missing.checkpoint_claim("replication-offset-checkpoint", high_watermark)]
        starts = [] if log_start is None else [log_start]
        found = missing.read_shortfalls(self, reached, claims, starts, log_end)
        missing.warn(missing.clip(found, lo, hi), self.name)

    def listing_claims(self) -> tuple[list, list]:
        """``(claims, orphans)`` of the files beside the segments in the
        partition's listing (``kbatch.lib.missing.side_file_claims``: index
        files without their ``.log``, whose last entries are read then, and
        producer snapshots), worked out once; none without a plain listing."""
        listed = self._listed
        if listed.claims is None:
            plain = listed.listing is not None and self.storage.layout == "plain"
            listed.claims = missing.side_file_claims(
                self.location, {s.base_offset for s in listed.segments}, listed.listing) \
                if plain else ([], [])
        return listed.claims

    def warn_missing(self, lo: int, hi: int, high_watermark: int | None = None,
                     log_start: int | None = None) -> None:
        """``read``'s warning of missing data, for a read of offsets ``[lo,
        hi)`` whose bytes are decoded elsewhere (Spark's executors): the
        log end from a walk over the last segment's tail
        (``kbatch.lib.plan.log_end_offset``), taken only when a claim lies
        past the last segment's base offset. Segments cut short are not
        looked for (their ends are read elsewhere)."""
        log = self.snapshot()
        log._warn_missing(lo, hi, {}, high_watermark, log_start,
                          lambda: planner.log_end_offset(log.segments, log.use_index))

    def _next_base(self, seg: Segment, listed: Sequence[Segment] | None = None) -> int | None:
        """The base offset of the segment after ``seg`` (None: it is the
        last) in ``listed`` (default: the segments)."""
        listed = self.segments if listed is None else listed
        following = [s.base_offset for s in listed if s.base_offset > seg.base_offset]
        return min(following) if following else None

    def _pieces(self, segments: Sequence[Segment]) -> list[Piece]:
        """Consecutive ``segments`` of this partition, read whole."""
        listed = self.segments
        active = listed[-1]
        return [Piece(s.source, 0, None, s is active, self._next_base(s, listed))
                for s in segments]

    @staticmethod
    def _limits(segments: Sequence[Segment]) -> list[int | None]:
        """Tiered: one past the last offset each segment serves (``Segment.limit``)."""
        return [s.limit for s in segments]

    def read(self, start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None, timestamp_mode: str = "offsets",
             level: str = "records", **options):
        """Records with offsets in ``[start_offset, end_offset)`` (and the
        timestamp bounds, see ``iter``), exactly as a full read filtered to
        that range.

        ``level="batches"``: instead of ``Records``, a ``pyarrow.Table`` with
        one row per batch of that read, from the CRC-checked batch headers
        (``kbatch.lib.batchrows``: its ``records`` column sums to the
        record count of the same read at ``level="records"``).

        Options: those of ``read_segment``, and ``isolation``
        ("read_committed" resolves transactions over the whole partition).
        Damage in a segment that is not the last one (a torn tail can only
        be in the last) raises; ``on_corrupt="stop"`` ends the whole read
        there, ``"skip"`` lists it in ``Records.skipped``.
        ``view="latest"``: the table a compacted topic stands for, one row
        per key (its record with the highest offset), keys whose latest
        record is a tombstone and records without a key left out
        (``kbatch.lib.latest``), after ``isolation`` and the range.
        ``log_start`` (an offset): the log start offset, as a consumer sees
        the log: nothing below it is read, and the timestamp bounds are
        searched from it (Kafka's offsets-for-times: the first record at or
        after it stamped late enough). ``high_watermark`` (an offset): the
        high watermark, as a consumer sees the log: nothing at or above it
        is read, and offsets below it the segments lack are missing data.
        Missing data (``kbatch.lib.missing``: index files without their
        ``.log``, a segment that is not the last one shorter than its index
        files say, a high watermark above the log end) is not invented: the
        read returns what the segments hold, as a consumer would see it,
        and warns once on the ``kbatch`` logger of the offsets of its range
        that are missing and what says they existed.
        The segments (the byte ranges the range needs) are decoded as one
        run into one set of columns (``kbatch.lib.chain``): nothing is
        joined; ``max_read_bytes`` bounds the whole read. Keeps in memory
        the result and one decompressed batch (from object storage, also
        the bytes of one or two planned ranges while they are decoded).
        In object storage, a read that finds an object changed or deleted
        since the partition was listed (``FileChangedError``,
        ``MissingObjectError``) lists it again and reads it again, at most
        three times in all (``kbatch.lib.relist``): the answer is the
        partition as it is at the last listing, and the log is that
        listing from then on. The read works on the listing the log holds
        when it starts (``snapshot``): a read of the same log in another
        thread that lists it again does not change it.
        """
        check_options("PartitionLog.read", options,
                      ("isolation", "view", "log_start", "high_watermark"))
        _check_timestamp_mode(timestamp_mode)
        view = check_view(options.pop("view", "all"))
        log_start = options.pop("log_start", None)
        high_watermark = options.pop("high_watermark", None)
        if high_watermark is not None:
            high_watermark = _offset_arg(high_watermark, "high_watermark")
            end_offset = high_watermark if end_offset is None else \
                min(_offset_arg(end_offset, "end_offset"), high_watermark)
        if view == "latest":
            check_columns(options.get("columns"))
        opts = DecodeOptions(**{k: v for k, v in options.items() if k != "isolation"})
        if check_level(level) == "batches":
            _batch_level_mode(timestamp_mode)
            _no_view_in_batches(view)
            damage: list = []
            parts = self.batch_parts(start_offset, end_offset, start_timestamp, end_timestamp,
                                     opts, options, log_start, high_watermark, damage)
            return batch_table(parts, damage=damage)
        records = read_relisted(self, lambda log: log._read_run(
            start_offset, end_offset, start_timestamp, end_timestamp, timestamp_mode, opts,
            options, log_start, high_watermark))
        return apply_view(records, view, self.name)

    def batch_parts(self, start_offset, end_offset, start_timestamp, end_timestamp,
                    opts: DecodeOptions, options: dict, log_start: int | None = None,
                    high_watermark: int | None = None,
                    damage: list | None = None) -> list[BatchPart]:
        """The rows of ``read(level="batches")`` (``kbatch.lib.batchrows``):
        the planned byte ranges walked with ``iter``'s rules (seeks, segment
        ends, ``on_corrupt``), data records not decoded, except those of
        batches the range cuts and of magic 0/1 message sets, which are
        counted exactly (with ``on_corrupt`` "skip" or "stop" all are).
        ``options``: the read's (``isolation`` among them); ``log_start``,
        ``high_watermark``: as ``read``. ``damage``: a list the read's
        ``Damage`` is appended to (the skipped ranges, where a stop ended
        it). Keeps in memory one row per batch read. A partition in object
        storage whose objects changed or were deleted since its listing is
        listed again and read again (``kbatch.lib.relist``)."""
        found: list = []

        def once(log):
            found.clear()       # the damage of the read that answers
            return log._batch_parts(start_offset, end_offset, start_timestamp,
                                     end_timestamp, opts, options, log_start, high_watermark,
                                     found)
        parts = read_relisted(self, once)
        if damage is not None:
            damage += found
        return parts

    def _batch_parts(self, start_offset, end_offset, start_timestamp, end_timestamp,
                     opts: DecodeOptions, options: dict, log_start: int | None,
                     high_watermark: int | None, damage: list) -> list[BatchPart]:
        """One read of ``batch_parts``, of the segments as listed."""
        isolation = check_isolation(options.get("isolation", "read_uncommitted"))
        plain = {k: v for k, v in options.items() if k != "isolation"}
        state, _, lo, hi, _ = self._read_setup(isolation, plain, opts, start_offset,
                                               end_offset, start_timestamp, end_timestamp,
                                               "offsets", log_start, high_watermark)
        ranged = _ranged(start_offset, end_offset, start_timestamp, end_timestamp, log_start)
        # skip/stop must find malformed records behind a valid CRC: decoded
        decode = opts.on_corrupt != "raise"
        walk = replace(opts, columns=("offset",)) if decode else opts
        parts, skipped, stop = [], [], None
        for plan, low, high, chunk in self._plan_iter(lo, hi, walk, UNBOUNDED, 1 << 30,
                                                      ranged=ranged, control_only=not decode,
                                                      high_watermark=high_watermark,
                                                      log_start=log_start):
            skipped += chunk.skipped
            if plan is not None and chunk.end is not None and chunk.end.reason == "corrupt":
                stop = (plan.segment.source.name, chunk.end)
            rows = chunk.batches
            if plan is None or not len(rows):
                continue
            if decode:
                rows, keep, counts = decoded_counts(chunk, state)
            else:
                rows, keep, counts = count_batches(rows, plan.segment.source, opts, low, high,
                                                   state)
            parts.append(kept_part(self.topic, self.partition, plan.segment.source.name,
                                   rows, keep, counts))
        if skipped or stop:
            damage.append(Damage(self.topic, self.partition, tuple(skipped),
                                 *(stop or (None, None))))
        return parts

    def _decode_plans(self, plans: list[ReadPlan], opts: DecodeOptions, drops) -> Records:
        """The planned ranges decoded as one run, each held below its limit."""
        listed = self.segments
        active = listed[-1]
        records = decode_run([Piece(pl.segment.source, pl.start, pl.stop,
                                    pl.segment is active or pl.stop is not None,
                                    self._next_base(pl.segment, listed))
                              for pl in plans], opts, drops=drops)
        return _below_limits(records, [pl.limit for pl in plans])

    def _read_run(self, start_offset, end_offset, start_timestamp, end_timestamp,
                  timestamp_mode, opts: DecodeOptions, options: dict,
                  log_start: int | None = None, high_watermark: int | None = None) -> Records:
        """``read()``: the planned ranges of the segments decoded as one run
        (``kbatch.lib.chain``), nothing joined; trimmed and filtered as
        ``iter()``'s chunks are."""
        isolation = check_isolation(options.get("isolation", "read_uncommitted"))
        plain = {k: v for k, v in options.items() if k != "isolation"}
        state, drops, lo, hi, window = self._read_setup(
            isolation, plain, opts, start_offset, end_offset, start_timestamp,
            end_timestamp, timestamp_mode, log_start, high_watermark)
        plans = self.plan(lo, hi) if lo < hi else []
        if not plans:
            self._warn_missing(lo, hi, {}, high_watermark, log_start)
            empty = Records.empty()
            return empty if state is None else state.filter(empty)
        try:
            records = self._decode_plans(plans, opts, drops)
            recheck = _damaged(records, plans[-1])
        except FileChangedError:
            raise           # not damage: a file or object changed while it was read
        except CorruptRecordError:
            if not _steered(plans):
                raise
            recheck = True
        if recheck and _steered(plans):
            # damage after an index seek: the walk decides (a lying entry
            # cannot make a damaged read differ from the exhaustive one)
            plans = planner.plan(self.segments, lo, hi, False)
            records = self._decode_plans(plans, opts, drops)
        if records.end is None or records.end.reason != "corrupt":    # (stop: end says it)
            self._warn_missing(lo, hi, _reached(records, plans, lo), high_watermark, log_start)
        warn_repeated(records, self.name)
        # a whole read keeps every record the files hold (whatever its offset)
        if (_ranged(start_offset, end_offset, start_timestamp, end_timestamp, log_start)
                and not _inside(records.batches, lo, hi)):
            records = records.select_offsets(lo, hi)
        records = _in_window(records, window)
        # filtered as the chunks of iter() are: exact even if a segment changed
        # between the transaction pass and the decode
        return records if state is None else state.filter(records)


def open_log(path, *, use_index: bool | None = None, **kwargs) -> PartitionLog:
    """A partition (``<topic>-<partition>/``, a URL of one, or a tiered
    bucket's ``<topic>-<topicId>/<partition>/``) as a ``PartitionLog``.

    Storage keyword arguments (``kbatch.lib.storage.Storage``):
    ``storage_options`` (fsspec options of a URL), ``filesystem`` (an fsspec
    filesystem: ``path`` is then a path in it), ``layout`` ("plain" or
    "tiered"), ``private_key``, ``block``, ``concurrency``, ``retries``,
    ``remote_log_metadata``. ``use_index`` (default True, wherever the files
    are): seek with the index files, every entry checked before use and a
    lie falling back to the walk (``kbatch.lib.plan``); False: the
    exhaustive walk over every batch header, which no index file can steer
    (in object storage it reads the segment up to the offset)."""
    storage, rest = Storage.split(kwargs)
    if rest:
        raise ArgumentError(f"open_log: unknown argument(s) {', '.join(sorted(rest))}; "
                            "decode options go to read()/iter()")
    found = expect(path, PathKind.PARTITION, what="open_log needs a partition directory",
                   storage=storage)
    log = PartitionLog.__new__(PartitionLog)
    log._setup(Partition(found.topic, found.partition, found.location), found.storage,
               True if use_index is None else use_index, *_listed(found))
    return log


class LogDir:
    """A broker data directory (or a prefix of partitions in object storage,
    plain or tiered): every partition in it (``use_index``: see
    ``PartitionLog``)."""

    def __init__(self, path, *, use_index: bool = True, storage: Storage | None = None):
        # a data directory whose partitions are all being deleted or moved
        # (``-delete``, ``-future``, ``-stray``) holds nothing live
        found = expect(path, PathKind.DATA_DIR, what="open_log_dir needs a broker data directory",
                       storage=storage, transient_ok=True)
        self.location = found.location
        self.storage = found.storage
        self.path = found.path
        self.name = found.name
        self.partitions = [PartitionLog.at(p, found.storage, use_index)
                           for p in found.partitions()]

    def __repr__(self) -> str:
        return f"LogDir({self.name}, {len(self.partitions)} partitions)"

    @property
    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def partition(self, topic: str, partition: int) -> PartitionLog:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise KeyError(f"{topic}-{partition}")

    def select(self, topics: str | Sequence[str] | None = None) -> list[PartitionLog]:
        """The partitions of ``topics`` (a topic name, or several; None: all).
        A name the directory does not hold raises ``ArgumentError``."""
        return select_topics(self.partitions, topics, self.name)

    def iter(self, topics: str | Sequence[str] | None = None,
             start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None, timestamp_mode: str = "offsets",
             chunk_records: int = DEFAULT_CHUNK_RECORDS, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             isolation: str = "read_uncommitted",
             **options) -> Iterator[tuple[tuple[str, int], Records]]:
        """``((topic, partition), chunk)`` for every chunk of every selected
        partition in turn, with the range arguments of ``PartitionLog.iter``
        applied to each partition. Keeps in memory one chunk (and one
        decompressed batch)."""
        _no_view_in_chunks(options)
        check_options("LogDir.iter", options)
        parts = self.select(topics)
        for p in parts:
            for chunk in p.iter(start_offset, end_offset, start_timestamp=start_timestamp,
                                end_timestamp=end_timestamp, timestamp_mode=timestamp_mode,
                                chunk_records=chunk_records, chunk_bytes=chunk_bytes,
                                isolation=isolation, **options):
                yield (p.topic, p.partition), chunk

    def read(self, topics: str | Sequence[str] | None = None,
             start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None, timestamp_mode: str = "offsets",
             threads: int | None = None, isolation: str = "read_uncommitted",
             visibility: str = "all", view: str = "all", log_start=None,
             level: str = "records",
             **options) -> PartitionRecords:
        """Every selected partition as ``{(topic, partition): Records}``:
        whole, or the range (arguments of ``PartitionLog.read``) of each.
        The dict (``kbatch.lib.tables.PartitionRecords``) also gives one
        table with ``topic`` and ``partition`` columns: ``.to_arrow()``,
        ``.to_pandas()``.

        ``topics``: a topic name or a list of them (None: all); an unknown
        name raises. Whole partitions are decoded on ``threads`` threads at
        once (default: one per core; the decoder releases the GIL); ranges
        partition by partition on those threads.
        Damage is handled as in ``PartitionLog.read`` (``on_corrupt``).
        ``visibility="consumer"``: only ``[log start offset, high watermark)``
        of each partition, from the checkpoint files
        (``kbatch.lib.visibility``); "all" (default): everything. Offsets
        below a high watermark that no segment holds, and partitions the
        files name with no directory here, are warned of (see
        ``PartitionLog.read``).
        ``log_start``: ``{(topic, partition): offset}`` (or a
        ``kbatch.lib.retention.RetentionPlan``) standing in for the
        checkpoint's log start offsets with ``visibility="consumer"``: what
        a consumer would see after a retention change.
        ``view="latest"``: each partition as the table of its keys (see
        ``PartitionLog.read``), after isolation and visibility.

        Each partition's segments are decoded one after another into one
        set of columns (``kbatch.lib.chain``): nothing is joined, except a
        partition holding 1.5 or more shares of the bytes (a share: 1/threads
        of the read, never less than 1/8: ``_jobs``), which is cut into that many
        runs decoded in parallel and then joined. Keeps
        in memory the result (and, while a cut partition is joined, its
        runs) and one decompressed batch per thread.

        ``level="batches"``: one ``pyarrow.Table``, a row per batch of the
        read (``PartitionLog.read``), partitions in (topic, partition) order.
        A partition in object storage whose objects changed or were deleted
        since its listing is listed again and read again
        (``kbatch.lib.relist``); while it is, the results of the others are
        kept. Each partition is read from one snapshot of its listing
        (``PartitionLog.snapshot``).
        """
        from kbatch.lib.visibility import check_visibility
        check_visibility(visibility)
        check_isolation(isolation)
        log_start = getattr(log_start, "log_start_offsets", log_start)
        if log_start is not None and visibility != "consumer":
            raise ArgumentError("log_start= applies with visibility='consumer'")
        if check_view(view) == "latest":
            check_columns(options.get("columns"))
        opts = decode_options("LogDir.read", options)
        parts = self.select(topics)
        workers = threads or os.cpu_count() or 1
        ranges = self._visible_ranges(visibility, log_start)    # the checkpoints read once
        if visibility == "consumer":       # partitions the checkpoints name, not here
            chosen = {p.topic for p in parts}
            missing.warn_unnamed(self.location, ranges,
                                 {(p.topic, p.partition) for p in self.partitions},
                                 lambda topic, _: topics is None or topic in chosen)
        if check_level(level) == "batches":
            _batch_level_mode(timestamp_mode)
            _no_view_in_batches(view)
            return self._batch_level(parts, workers, start_offset, end_offset,
                                     start_timestamp, end_timestamp, opts,
                                     {**options, "isolation": isolation}, ranges)
        if _ranged(start_offset, end_offset, start_timestamp, end_timestamp):
            def read_part(p):       # (timestamps searched from the log start, as Kafka's)
                lo, hi = ranges.get((p.topic, p.partition), (None, None))
                return p.read(start_offset, end_offset, start_timestamp=start_timestamp,
                              end_timestamp=end_timestamp, timestamp_mode=timestamp_mode,
                              isolation=isolation, log_start=lo, high_watermark=hi, **options)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                result = {(p.topic, p.partition): rec
                          for p, rec in zip(parts, pool.map(read_part, parts))}
            return self._viewed(self._visible(result, visibility, log_start, ranges), view,
                                workers)

        pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
        txn = options if isolation == "read_committed" else None
        try:
            # a partition whose objects changed or were deleted since its listing:
            # listed and read again
            # (each partition read from one snapshot of its listing: ``logs``)
            runs, logs = read_listed(parts, lambda logs: _decoded_runs(logs, opts, workers,
                                                                       pool, txn))
            jobs = [job for found in runs for job, _ in found]
            results = [rec for found in runs for _, rec in found]
            del runs
            joined = self._joined(logs, jobs, results, opts, options, isolation,
                                  (visibility, log_start, ranges), pool)
        finally:
            if pool is not None:
                pool.shutdown()
        return self._viewed(joined, view, workers)

    def _visible_ranges(self, visibility: str, log_start=None) -> dict:
        """``{(topic, partition): (log start, high watermark)}`` of
        visibility "consumer" (``log_start``: a simulated retention change's
        starts in place of the checkpoint's); {} for "all"."""
        from kbatch.lib.visibility import consumer_ranges
        if visibility == "consumer":
            return consumer_ranges(self.location, log_start)
        return {key: (start, None) for key, start in (log_start or {}).items()}

    def _batch_level(self, parts, workers, start_offset, end_offset, start_timestamp,
                     end_timestamp, opts, options, ranges: dict):
        """``read(level="batches")``: each partition's rows on ``workers``
        threads (``ranges``: a consumer's view, each range cut to the
        checkpoints', timestamps searched from the log start)."""
        parts = sorted(parts, key=lambda p: (str(p.topic), -1 if p.partition is None
                                             else p.partition))

        def one(p):
            lo, hi = ranges.get((p.topic, p.partition), (None, None))
            end = end_offset if hi is None else hi if end_offset is None \
                else min(hi, end_offset)
            damage: list = []
            return p.batch_parts(start_offset, end, start_timestamp, end_timestamp, opts,
                                 options, lo, hi, damage), damage
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(parts)))) as pool:
            done = list(pool.map(one, parts))
        return batch_table([x for found, _ in done for x in found],
                           damage=[d for _, damage in done for d in damage])

    def _visible(self, result: dict, visibility: str, log_start=None,
                 ranges: dict | None = None) -> PartitionRecords:
        from kbatch.lib.visibility import apply_visibility
        return PartitionRecords(apply_visibility(self.location, result, visibility, log_start,
                                                 ranges if visibility == "consumer" else None))

    def _viewed(self, result: PartitionRecords, view: str, workers: int) -> PartitionRecords:
        """Each partition as ``view`` shows it (the kernel releases the GIL:
        partitions on ``workers`` threads)."""
        if view == "all":
            return result
        homes = {(p.topic, p.partition): p.name for p in self.partitions}
        keys = list(result)
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(keys) or 1))) as pool:
            share = max(1, workers // max(len(keys), 1))     # the kernel's threads each
            done = pool.map(lambda k: apply_view(result[k], view, homes.get(k), share), keys)
            return PartitionRecords(dict(zip(keys, done)))

    def _joined(self, parts, jobs, results, opts, options, isolation, visibility, pool):
        """Each partition's runs joined into one ``Records`` (the copies on
        ``pool``), transactions and visibility applied. A run that stopped
        at damage (``on_corrupt="stop"``) is the last one of its partition."""
        out: dict[tuple[str, int], list[Records]] = {}
        stopped: set = set()
        reached: dict[tuple, dict] = {}      # what each partition's runs read (_warn_missing)
        for (p, run, _), rec in zip(jobs, results):
            key = (p.topic, p.partition)
            if key in stopped:
                continue   # on_corrupt="stop": nothing after the first damage
            if rec.end is not None and rec.end.reason == "corrupt":
                stopped.add(key)
            out.setdefault(key, []).append(rec)
            reached.setdefault(key, {}).update(
                _reached(rec, [ReadPlan(s, 0, None) for s in run], 0))
        rec = None
        results.clear()        # the caller's list: each run is now held by ``out`` only
        result = {}
        homes = {(p.topic, p.partition): p.name for p in parts}
        for key in list(out):  # a partition's runs are released once it is joined
            runs = out.pop(key)
            held = sum(r.nbytes for r in runs)
            if held > opts.max_read_bytes:   # each run was bounded alone
                raise LimitExceededError(
                    f"decoded data exceeds max_read_bytes={opts.max_read_bytes} (read in "
                    "chunks with log.iter)", path=homes[key])
            result[key] = Records.concat(runs, pool=pool)
            del runs
        result |= {(p.topic, p.partition): Records.empty() for p in parts if not p.segments}
        ranges = visibility[2]
        for p in parts:    # (a stopped partition's end says where it stopped)
            key = (p.topic, p.partition)
            if key not in stopped:
                lo, hi = ranges.get(key, (None, None))
                p._warn_missing(lo or 0, UNBOUNDED if hi is None else hi,
                                reached.get(key, {}), hi, lo)
        if check_isolation(isolation) == "read_committed":
            for p in parts:
                key = (p.topic, p.partition)
                hw = ranges.get(key, (None, None))[1] if visibility[0] == "consumer" else None
                result[key] = p.transaction_state(hw, **options).filter(result[key])
        return self._visible(result, *visibility)


def select_topics(partitions: list, topics, where: str) -> list:
    """The partitions of ``topics`` (a name or several; None: all); a name
    not among them raises ``ArgumentError`` naming the topics there are."""
    if topics is None:
        return list(partitions)
    if isinstance(topics, (str, bytes)):
        topics = [topics.decode() if isinstance(topics, bytes) else topics]
    wanted = list(topics)
    if not all(isinstance(t, str) for t in wanted):
        raise ArgumentError("topics must be a topic name or a list of topic names")
    known = {p.topic for p in partitions if p.topic is not None}
    missing = [t for t in wanted if t not in known]
    if missing:
        raise ArgumentError(
            f"{where}: no topic {', '.join(map(repr, missing))} here; topics: "
            f"{', '.join(sorted(known)) or '(none)'}")
    return [p for p in partitions if p.topic in set(wanted)]


def _decoded_runs(parts: list, opts: DecodeOptions, workers: int, pool,
                  txn_options: dict | None = None) -> list:
    """Per partition of ``parts``, ``[(job, records), ...]``: its runs
    (``_jobs``) decoded on ``pool`` (the largest first, so the threads
    finish together) and, with ``txn_options`` (read_committed), its
    transactions read (``PartitionLog.transaction_state``, kept for
    ``LogDir._joined``); or, for a partition whose objects changed since
    its listing (or were deleted), that ``FileChangedError`` or
    ``MissingObjectError`` (``kbatch.lib.relist``). Keeps
    in memory the decoded runs."""
    def decode(job):     # a run of a partition's segments into one set of columns
        p, run, nbytes = job       # (sized once, by _jobs)
        return caught(p, lambda: _below_limits(
            decode_run(p._pieces(run), opts, expect_bytes=nbytes), p._limits(run)))
    jobs = _jobs(parts, workers)
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i][2])
    done = (pool.map(decode, [jobs[i] for i in order]) if pool is not None
            else (decode(jobs[i]) for i in order))
    results: list = [None] * len(jobs)
    for i, rec in zip(order, done):
        results[i] = rec
    runs: dict[int, list] = {id(p): [] for p in parts}
    for job, rec in zip(jobs, results):
        runs[id(job[0])].append((job, rec))
    del results
    return [_settled(p, runs.pop(id(p)), txn_options) for p in parts]


def _settled(part: PartitionLog, runs: list, txn_options: dict | None):
    """``runs`` (``_decoded_runs``) of one partition, or the first
    ``FileChangedError`` or ``MissingObjectError`` among them or of its
    transactions (``kbatch.lib.relist.CHANGES``)."""
    for _, rec in runs:
        if isinstance(rec, CHANGES):
            return rec
    if txn_options is not None:
        state = caught(part, lambda: part.transaction_state(**txn_options))
        if isinstance(state, CHANGES):
            return state
    return runs


ENOUGH_RUNS = 8     # runs decoded at once that already take the memory bandwidth


def _jobs(parts: list, workers: int) -> list[tuple]:
    """``(partition, run of segments, bytes)`` to decode: each partition as
    one run, cut into runs of about one share of the bytes when it holds 1.5
    shares or more, a share being 1/``min(workers, ENOUGH_RUNS)`` of the
    whole read (its runs are joined afterwards: a join only where the
    threads need the pieces).

    A cut costs a join, which copies the whole partition again on threads
    that compete for the same memory bandwidth, so runs are not cut finer
    than ``ENOUGH_RUNS`` in all: on a 16-core VM (``bench/scaling_probe.py``,
    2026-11-27) the decoder from memory stopped scaling at 8 threads (5.1x
    one thread at 8, 5.0x at 16), and 8 plain partitions of 94 MB read in
    71 ms on 8 threads (one run each) but in 188 ms on 16, each cut in two
    runs (shares of 1/16) and joined."""
    sizes = {s.name: source_size(s.source) for p in parts for s in p.segments}

    def size(run):
        return sum(sizes[s.name] for s in run)
    share = sum(sizes.values()) / max(min(workers, ENOUGH_RUNS), 1)
    jobs = []
    for p in parts:
        whole = size(p.segments)
        # a partition a little over its share stays whole: a cut costs a join
        pieces = 1 if share <= 0 else max(1, round(whole / share))
        runs = split_runs(p.segments, pieces, [sizes[s.name] for s in p.segments])
        jobs += [(p, run, size(run)) for run in runs]
    return jobs


def open_log_dir(path, *, use_index: bool | None = None, **kwargs) -> LogDir:
    """A broker data directory (many ``<topic>-<partition>`` directories), a
    URL of one, or a tiered bucket's prefix (``layout="tiered"``: its
    ``<topic>-<topicId>/<partition>/`` folders); storage keywords and
    ``use_index`` as ``open_log``."""
    storage, rest = Storage.split(kwargs)
    if rest:
        raise ArgumentError(f"open_log_dir: unknown argument(s) {', '.join(sorted(rest))}; "
                            "decode options go to read()/iter()")
    found = expect(path, PathKind.DATA_DIR, what="open_log_dir needs a broker data directory",
                   storage=storage, transient_ok=True)
    logs = LogDir.__new__(LogDir)
    logs.location, logs.storage, logs.path, logs.name = (found.location, found.storage,
                                                         found.path, found.name)
    index = True if use_index is None else use_index
    logs.partitions = [PartitionLog.at(p, found.storage, index) for p in found.partitions()]
    return logs


def _visible_window(log: PartitionLog, data_dir, options: dict) -> None:
    """``visibility="consumer"`` (and ``log_start=``) for a partition read
    alone: its ``[log start offset, high watermark)`` from the checkpoint
    files of the data directory holding it, as ``options``' ``log_start``
    and ``high_watermark`` (a directory without them: no bound, as for a
    data directory read)."""
    from kbatch.lib.visibility import check_visibility, visible_ranges
    visibility = check_visibility(options.pop("visibility", "all"))
    log_start = options.pop("log_start", None)
    log_start = getattr(log_start, "log_start_offsets", log_start)
    if visibility == "all":
        if log_start is not None:
            raise ArgumentError("log_start= applies with visibility='consumer'")
        return
    key = (log.topic, log.partition)
    lo, hi = visible_ranges(data_dir).get(key, (None, None)) if log.topic is not None \
        else (None, None)
    if log_start is not None and key in log_start:
        lo = log_start[key]
    if lo is not None:          # the read starts there; so do its timestamp searches
        options["log_start"] = lo
    if hi is not None:
        options["high_watermark"] = hi


def read_table(path, topics: str | Sequence[str] | None = None, *,
               use_index: bool | None = None, **kwargs):
    """Everything ``open_log_dir(path).read(topics, ...)`` reads (or a
    partition's ``read``, for a partition), as one ``pyarrow.Table`` with
    ``topic`` and ``partition`` beside each record's columns (see
    ``kbatch.lib.tables``). Storage keywords as ``open_log``; the rest are
    ``LogDir.read``'s arguments (``start_offset``, ``isolation``,
    ``columns``, ``threads``...); ``level="batches"``: a row per batch
    (``kbatch.lib.batchrows``; a segment file is read too). Keeps in memory
    the records and the table."""
    from kbatch.lib.open import resolve
    storage, rest = Storage.split({k: v for k, v in kwargs.items()
                                   if k in STORAGE_ARGS or k == "storage"})
    options = {k: v for k, v in kwargs.items() if k not in STORAGE_ARGS and k != "storage"}
    found = resolve(path, storage, transient_ok=True)
    batches = options.get("level", "records") == "batches"
    if found.kind is PathKind.SEGMENT and batches:
        # a lone segment file: a partition of that one (last) segment
        log = PartitionLog.__new__(PartitionLog)
        log._setup(Partition(found.topic, found.partition, found.location), found.storage,
                   True if use_index is None else use_index, [found.segment()])
        select_topics([log], topics, found.name)
        options.pop("threads", None)
        _visible_window(log, found.location.parent.parent, options)
        return log.read(**options)
    if found.kind is PathKind.PARTITION:
        log = PartitionLog.at(Partition(found.topic, found.partition, found.location),
                              found.storage, True if use_index is None else use_index)
        select_topics([log], topics, found.name)
        options.pop("threads", None)
        _visible_window(log, found.location.parent, options)
        read = log.read(**options)
        return read if batches else PartitionRecords({(log.topic, log.partition): read}).to_arrow()
    logs = open_log_dir(found, use_index=use_index)
    read = logs.read(topics, **options)
    return read if batches else read.to_arrow()
