"""Partition directories and broker data directories.

    <log.dir>/<topic>-<partition>/
        00000000000000000000.log        batches; the name is the base offset
        00000000000000000000.index      offset -> byte position hints
        00000000000000000000.timeindex  timestamp -> offset hints
        00000000000000000000.txnindex   aborted transactions

Transient files (``.deleted``, ``.cleaned``, ``.swap``) and directories
(``-delete``, ``-future``, ``-stray``) are skipped, and so are names above the
largest offset (int64).

By default seeks do not trust the ``.index`` and ``.timeindex`` files: an
entry can point anywhere (even at a valid batch stored inside a record
value), and a time index can misstate the running maximum. Each segment's
batch boundaries come from one walk over its batch headers (no record is
decoded; the result is cached per segment), so range and timestamp reads
return exactly what a full read filtered to the range returns, whatever the
index files hold. The walk touches every batch header, so on cold storage it
reads about as much as the segment itself.

``use_index=True`` seeks as Kafka does instead: the ``.index`` entry at or
below the start offset (a sparse lower bound: decoding starts there and
records below the start are dropped) and the ``.timeindex`` entry below the
start timestamp (a running maximum) say where to start, and only the bytes
from there on are read. Every entry is checked before use (the position
holds a whole CRC-valid batch with fitting offsets; the time index is in
order and matches the batch it names) and a read falls back to the walk
when one is wrong, so damaged index files cannot change a result. An index
crafted to point at a valid batch stored inside a record value can: use it
on index files you trust (a broker's own). ``verify`` reports wrong entries.

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
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from kbatch.errors import ArgumentError, LimitExceededError
from kbatch.lib.chain import Piece, decode_run, file_size, settle_segment_end, split_runs
from kbatch.lib.decoder import batch_at, header_walk
from kbatch.lib.index import OffsetIndex, TimeIndex, TxnIndex
from kbatch.lib.paths import (INT64_MAX, SEGMENT_NAME, TRANSIENT_DIR_SUFFIXES,  # noqa: F401
                          parse_partition_dir, partition_dirs, segment_base)
from kbatch.lib.records import BatchTable, ControlRecords, Records
from kbatch.lib.paths import PathError, PathKind, expect
from kbatch.lib.segment import DEFAULT_CHUNK_BYTES, DEFAULT_CHUNK_RECORDS, DecodeOptions, \
    check_options, decode_chunks, decode_options, open_source, transaction_state, zeros_from
from kbatch.lib.timestamps import to_millis
from kbatch.lib.txn import TxnState, check_isolation
from kbatch.wire import UNBOUNDED

TIMESTAMP_MODES = ("offsets", "exact")


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


def _check_timestamp_mode(mode) -> None:
    if mode not in TIMESTAMP_MODES:
        raise ArgumentError(f"timestamp_mode must be one of {', '.join(TIMESTAMP_MODES)}, "
                            f"not {mode!r}")


def _only_transient(path: Path) -> bool:
    """A directory holding transient partition directories (and no live one)."""
    try:
        return path.is_dir() and any(c.is_dir() and c.name.endswith(TRANSIENT_DIR_SUFFIXES)
                                     for c in path.iterdir())
    except OSError:
        return False


def _as_kwargs(opts: DecodeOptions) -> dict:
    """``opts`` back as keyword arguments (for calls taking ``**options``)."""
    return {name: getattr(opts, name) for name in DecodeOptions.__dataclass_fields__}


MIN_MESSAGE_BYTES = 26     # the smallest entry of a log: a magic 0 message
MIN_BATCH_V2_BYTES = 61    # the smallest magic 2 batch (header only)

BOUNDS_DTYPE = np.dtype([("position", np.int64), ("size", np.int64),
                         ("base_offset", np.int64), ("last_offset", np.int64),
                         ("max_timestamp", np.int64), ("magic", np.int8)])


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


class Segment:
    """One ``.log`` file of a partition and the index files beside it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        base = segment_base(self.path.name)
        self.base_offset = 0 if base is None else base
        self._bounds: tuple | None = None
        stem = self.path.with_suffix("")
        self.index_path = stem.with_suffix(".index")
        self.timeindex_path = stem.with_suffix(".timeindex")
        self.txnindex_path = stem.with_suffix(".txnindex")

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, base_offset={self.base_offset})"

    @property
    def size(self) -> int:
        return self.path.stat().st_size

    def _max_entries(self, smallest_batch: int) -> int | None:
        """Entries an index of this segment can hold live: one per batch at
        most (an append starts a batch), so the log's size bounds them."""
        try:
            return self.path.stat().st_size // smallest_batch + 1
        except OSError:
            return None

    # index files are read with a bound (see kbatch.lib.index): a directory, FIFO
    # or device raises NotRegularFileError, a preallocated or sparse file costs
    # its live entries
    @functools.cached_property
    def offset_index(self) -> OffsetIndex:
        return OffsetIndex.read(self.index_path, self.base_offset,
                                self._max_entries(MIN_MESSAGE_BYTES))

    @functools.cached_property
    def time_index(self) -> TimeIndex:
        return TimeIndex.read(self.timeindex_path, self.base_offset,
                              self._max_entries(MIN_MESSAGE_BYTES))

    @functools.cached_property
    def txn_index(self) -> TxnIndex:
        # each entry is one aborted transaction: one control batch in the log
        return TxnIndex.read(self.txnindex_path, self._max_entries(MIN_BATCH_V2_BYTES))

    def batch_bounds(self) -> np.ndarray:
        """Position, size, offsets and max timestamp of every batch, from one
        walk over the batch headers (records are not decoded). It ends where
        valid data ends, or quietly at the first batch whose header is
        corrupt (a read reports that). Cached until the file changes."""
        stat = self.path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        if self._bounds is None or self._bounds[0] != key:
            with open_source(self.path) as (view, path):
                rows = header_walk(view, path, zeros_from=zeros_from(view))
            bounds = np.empty(len(rows), BOUNDS_DTYPE)
            for name in BOUNDS_DTYPE.names:
                bounds[name] = rows["size" if name == "size" else name]
            # a legacy wrapper's header names its last offset only: its records
            # start after the batch before it
            legacy = rows["magic"] < 2
            if legacy.any():
                after_previous = np.r_[self.base_offset, rows["last_offset"][:-1] + 1]
                bounds["base_offset"][legacy] = np.minimum(rows["base_offset"][legacy],
                                                           after_previous[legacy])
            self._bounds = (key, bounds)
        return self._bounds[1]


@dataclass(frozen=True)
class ReadPlan:
    """Bytes ``[start, stop)`` of ``segment`` to decode (stop None: to the end)."""

    segment: Segment
    start: int
    stop: int | None


def _has_content(chunk: Records) -> bool:
    """Records, control records or batch rows (empty batches count)."""
    return bool(len(chunk) or len(chunk.control) or len(chunk.batches))


class PartitionLog:
    """A partition directory: its segments, in base-offset order.

    ``use_index``: seek with the ``.index``/``.timeindex`` files (checked
    hints, as Kafka does) instead of a walk over every batch header; see the
    module docstring for what each guarantees.
    """

    def __init__(self, path, *, use_index: bool = False):
        found = expect(path, PathKind.PARTITION, what="open_log needs a partition directory")
        self.path = found.path
        self.use_index = bool(use_index)
        self.topic, self.partition = found.topic, found.partition
        self.segments = sorted(
            (Segment(p) for p in self.path.iterdir()
             if segment_base(p.name) is not None and p.is_file()),
            key=lambda s: s.base_offset)
        self._txn_cache: tuple | None = None

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, "
                f"{len(self.segments)} segments)")

    # --- seeking ---------------------------------------------------------

    def _segments_for(self, lo: int, hi: int) -> list[int]:
        """Indexes of the segments that may hold offsets in ``[lo, hi)``."""
        bases = [s.base_offset for s in self.segments]
        out = []
        for i, base in enumerate(bases):
            nxt = bases[i + 1] if i + 1 < len(bases) else UNBOUNDED
            if nxt > lo and base < hi:
                out.append(i)
        return out

    def _start_position(self, seg: Segment, offset: int) -> int:
        """The first batch that may hold ``offset`` or more: every earlier
        batch ends below it."""
        if offset <= seg.base_offset:
            return 0
        if self.use_index:
            hint = self._indexed_start(seg, offset)
            if hint is not None:
                return hint
        bounds = seg.batch_bounds()
        reach = np.flatnonzero(bounds["last_offset"] >= offset)
        if len(reach):
            return int(bounds["position"][reach[0]])
        return int(bounds["position"][-1] + bounds["size"][-1]) if len(bounds) else 0

    # An offset index entry (o, p) is written per append: o is the last offset
    # appended, p the byte where the append's first batch starts. An append may
    # hold several batches, so the batch at p ends at or before o, and every
    # batch before p ends before it starts.

    @staticmethod
    def _indexed_start(seg: Segment, offset: int) -> int | None:
        """The ``.index`` lower bound for ``offset`` when it checks out (a
        whole CRC-valid batch at that position starting at or below
        ``offset``), else None."""
        _, position = seg.offset_index.lookup(offset)
        if position == 0:
            return 0
        with open_source(seg.path) as (view, path):
            row = batch_at(view, position, path)
        if row is None or int(row["base_offset"]) > offset:
            return None
        return position

    def _stop_position(self, seg: Segment, offset: int) -> int | None:
        """The first batch from which every batch starts at or above
        ``offset`` (None: the end of the segment)."""
        if self.use_index:
            return self._indexed_stop(seg, offset)
        bounds = seg.batch_bounds()
        # with offsets out of order (a damaged log) every later batch must qualify
        below = np.flatnonzero(bounds["base_offset"] < offset)
        after = below[-1] + 1 if len(below) else 0
        if after >= len(bounds):
            return None
        return int(bounds["position"][after])

    @staticmethod
    def _indexed_stop(seg: Segment, offset: int) -> int | None:
        """A batch at or above ``offset`` that one of the next ``.index``
        entries names, checked; None (read to the end of the segment, the
        records are trimmed) when none checks out."""
        idx = seg.offset_index
        first = int(np.searchsorted(idx.offsets, offset, side="left"))
        with open_source(seg.path) as (view, path):
            for k in range(first, min(first + 3, len(idx))):
                position = int(idx.positions[k])
                row = batch_at(view, position, path)
                if row is None:
                    return None
                if int(row["base_offset"]) >= offset:
                    return position
        return None

    def plan(self, lo: int, hi: int) -> list[ReadPlan]:
        """The byte ranges to decode for offsets ``[lo, hi)``."""
        plans = []
        chosen = self._segments_for(lo, hi)
        for k, i in enumerate(chosen):
            seg = self.segments[i]
            start = self._start_position(seg, lo) if k == 0 else 0
            whole_tail = (i + 1 < len(self.segments) and self.segments[i + 1].base_offset <= hi
                          ) or hi >= UNBOUNDED
            stop = None if k < len(chosen) - 1 or whole_tail else self._stop_position(seg, hi)
            plans.append(ReadPlan(seg, start, stop))
        return plans

    def offset_for_timestamp(self, timestamp, **options) -> int | None:
        """The earliest offset whose record timestamp is >= ``timestamp``
        (Kafka's offsets-for-times), None when no record is that recent.
        ``timestamp``: anything ``kbatch.lib.timestamps.to_millis`` reads;
        ``options``: those of the read (CRC check, limits, ``on_corrupt``)
        apply to the batches decoded here too.

        The batch headers' max timestamps (cached per segment; with
        ``use_index`` only those after the ``.timeindex`` hint) say which
        batches can hold one; those are decoded in order until one does.
        """
        timestamp = to_millis(timestamp, "timestamp")
        opts = decode_options("offset_for_timestamp", options)
        for seg in self.segments:
            with open_source(seg.path) as (view, path):
                if self.use_index:
                    bounds = self._hinted_headers(seg, view, path, timestamp)
                else:
                    bounds = seg.batch_bounds()
                candidates = np.flatnonzero(bounds["max_timestamp"] >= timestamp)
                for i in candidates.tolist():
                    position = int(bounds["position"][i])
                    records = Records.concat(list(decode_chunks(
                        view, path, opts, start=position,
                        stop=position + int(bounds["size"][i]))))
                    hits = np.flatnonzero(records.timestamp >= timestamp)
                    if len(hits):
                        return int(records.offset[hits[0]])
        return None

    def _hinted_headers(self, seg: Segment, view, path, timestamp: int) -> np.ndarray:
        """Header rows of the batches that may hold the first record at or
        after ``timestamp``, from the ``.timeindex``: its last entry below
        ``timestamp`` names an offset up to which every record is older. The
        entry is used only when the index is in order (timestamps and offsets
        increase) and the batch holding that offset carries exactly that max
        timestamp; otherwise every batch header of the segment."""
        ti = seg.time_index
        below = ti.last_below(timestamp)
        in_order = not (np.any(np.diff(ti.timestamps) < 0) or np.any(np.diff(ti.offsets) < 0))
        if below is not None and in_order:
            entry_ts, entry_offset = below
            rows = header_walk(view, path, self._start_position(seg, entry_offset),
                                   zeros_from=zeros_from(view))
            hit = np.flatnonzero(rows["last_offset"] >= entry_offset)
            if len(hit):
                row = rows[hit[0]]
                if (int(row["base_offset"]) <= entry_offset
                        and int(row["max_timestamp"]) == entry_ts):
                    return rows[hit[0]:]
        return header_walk(view, path, 0, zeros_from=zeros_from(view))

    def _offset_range(self, start_offset, end_offset, start_timestamp, end_timestamp,
                      opts: DecodeOptions, timestamp_mode: str = "offsets"):
        """``(lo, hi, window)``: the offsets to read and, for
        ``timestamp_mode="exact"``, the ``[start, end)`` milliseconds each
        record's own timestamp must lie in (None otherwise)."""
        _check_timestamp_mode(timestamp_mode)
        start_ts = to_millis(start_timestamp, "start_timestamp")
        end_ts = to_millis(end_timestamp, "end_timestamp")
        lo = 0 if start_offset is None else _offset_arg(start_offset, "start_offset")
        hi = UNBOUNDED if end_offset is None else _offset_arg(end_offset, "end_offset")
        if start_ts is not None:
            # exact or not, nothing before the first record stamped >= start
            found = self.offset_for_timestamp(start_ts, **_as_kwargs(opts))
            lo = UNBOUNDED if found is None else max(lo, found)
        window = None
        if timestamp_mode == "exact":
            if start_ts is not None or end_ts is not None:
                window = (-(1 << 63) if start_ts is None else start_ts,
                          UNBOUNDED if end_ts is None else end_ts)
        elif end_ts is not None:
            found = self.offset_for_timestamp(end_ts, **_as_kwargs(opts))
            if found is not None:
                hi = min(hi, found)
        return lo, hi, window

    # --- transactions ----------------------------------------------------

    def transaction_tables(self, **options):
        """``(batches, control, txn_index)`` of the whole partition: every batch
        header and control record (data records are not decoded), and every
        ``.txnindex`` entry. An abort marker may sit in a later segment than
        the data it aborts, so read_committed needs all of them."""
        opts = decode_options("transaction_tables", options)
        key = (tuple(sorted(options.items())),) + tuple(
            (s.path, *(lambda st: (st.st_size, st.st_mtime_ns))(s.path.stat()))
            for s in self.segments)
        if self._txn_cache is None or self._txn_cache[0] != key:
            tables, controls, shift = [], [], 0
            for i, seg in enumerate(self.segments):
                with open_source(seg.path) as (view, path):
                    batches, control = transaction_state(view, path, opts)
                tables.append(batches.with_source(np.array([i], dtype=np.int32)))
                controls.append(control.shifted(shift))
                shift += len(batches)
            if not tables:
                empty = Records.empty()
                tables, controls = [empty.batches], [empty.control]
            self._txn_cache = (key, (BatchTable.concat(tables), ControlRecords.concat(controls),
                                     self.aborted_transactions()))
        return self._txn_cache[1]

    def transaction_state(self, **options) -> TxnState:
        """Transactions of the whole partition, for read_committed reads."""
        return TxnState.build(*self.transaction_tables(**options))

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
        read_committed, one row per batch of the partition). Yields every
        chunk with records, control records, batches or skipped ranges; the
        last chunk (the end of the last segment read, maybe empty) carries
        ``end``.
        """
        check_isolation(isolation)
        opts = decode_options("PartitionLog.iter", options)
        if chunk_records < 1 or chunk_bytes < 1:
            raise ArgumentError("chunk_records and chunk_bytes must be positive")
        state, drops, lo, hi, window = self._read_setup(
            isolation, options, opts, start_offset, end_offset, start_timestamp,
            end_timestamp, timestamp_mode)
        ranged = _ranged(start_offset, end_offset, start_timestamp, end_timestamp)
        return self._iter(lo, hi, opts, chunk_records, chunk_bytes, state, drops, window,
                          ranged)

    def _read_setup(self, isolation, options, opts, start_offset, end_offset,
                    start_timestamp, end_timestamp, timestamp_mode) -> tuple:
        """``(state, drops, lo, hi, window)`` of a read or iter: the
        transactions and dropped batches (read_committed; else None) and
        the range (see ``_offset_range``). ``options``: without isolation."""
        state = drops = None
        if isolation == "read_committed":
            state = self.transaction_state(**options)
            drops = self.dropped_batches(state, options)
        lo, hi, window = self._offset_range(start_offset, end_offset, start_timestamp,
                                            end_timestamp, opts, timestamp_mode)
        return state, drops, lo, hi, window

    def dropped_batches(self, state: TxnState, options) -> dict[Path, np.ndarray]:
        """Per segment, the positions of the batches a read_committed read
        leaves out (aborted or open transactions, at or past the LSO): the
        decoder drops their records as it goes instead of the rows being
        copied out afterwards. The chunks are still filtered by ``state``,
        so a segment that changed or decodes differently stays exact."""
        batches, _, _ = self.transaction_tables(**options)
        drop = state.dropped(batches)
        out = {}
        for i, seg in enumerate(self.segments):
            rows = drop & (batches.source == i)
            out[seg.path] = np.sort(batches.position[rows]).astype(np.int64)
        return out

    def _iter(self, lo, hi, opts, chunk_records, chunk_bytes, state=None, drops=None,
              window=None, ranged=True):
        plans = self.plan(lo, hi) if lo < hi else []
        active = self.segments[-1] if self.segments else None
        for k, plan in enumerate(plans):
            last_plan = k == len(plans) - 1
            # only the active (last) segment may end in a torn tail
            inner = plan.segment is not active and plan.stop is None
            drop = None if drops is None else drops.get(plan.segment.path)
            stopped, seen = False, None
            with open_source(plan.segment.path) as (view, path):
                for chunk in decode_chunks(view, path, opts, start=plan.start,
                                           stop=plan.stop, chunk_records=chunk_records,
                                           chunk_bytes=chunk_bytes, drop_positions=drop):
                    if len(chunk.batches):
                        seen = int(chunk.batches.last_offset.max())
                    if chunk.end is not None:
                        chunk, stopped = self._segment_end(chunk, plan.segment, inner, opts,
                                                           path, seen)
                    if ranged:     # a whole read keeps every record the files hold
                        chunk = chunk.select_offsets(lo, hi)
                    chunk = _in_window(chunk, window)
                    if state is not None:
                        chunk = state.filter(chunk)
                    # every chunk with content or skipped ranges; the final
                    # chunk (which carries ``end``) even when empty
                    if (_has_content(chunk) or chunk.skipped
                            or ((last_plan or stopped) and chunk.end is not None)):
                        yield chunk
                    del chunk
            if stopped:
                return   # on_corrupt="stop": nothing after the first damage
        if not plans:
            empty = Records.empty()
            yield empty if state is None else state.filter(empty)

    def _segment_end(self, chunk: Records, seg: Segment, inner: bool, opts: DecodeOptions,
                     path, seen: int | None) -> tuple[Records, bool]:
        return check_segment_end(chunk, path, inner, self._next_base(seg), opts, seen)

    def _next_base(self, seg: Segment) -> int | None:
        """The base offset of the segment after ``seg`` (None: it is the last)."""
        following = [s.base_offset for s in self.segments if s.base_offset > seg.base_offset]
        return min(following) if following else None

    def _pieces(self, segments: Sequence[Segment]) -> list[Piece]:
        """Consecutive ``segments`` of this partition, read whole."""
        active = self.segments[-1]
        return [Piece(s.path, 0, None, s is active, self._next_base(s)) for s in segments]

    def read(self, start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None, timestamp_mode: str = "offsets",
             **options) -> Records:
        """Records with offsets in ``[start_offset, end_offset)`` (and the
        timestamp bounds, see ``iter``), exactly as a full read filtered to
        that range.

        Options: those of ``read_segment``, and ``isolation``
        ("read_committed" resolves transactions over the whole partition).
        Damage in a segment that is not the last one (a torn tail can only
        be in the last) raises; ``on_corrupt="stop"`` ends the whole read
        there, ``"skip"`` lists it in ``Records.skipped``.
        The segments (the byte ranges the range needs) are decoded as one
        run into one set of columns (``kbatch.lib.chain``): nothing is
        joined. Keeps in memory the result and one decompressed batch.
        """
        check_options("PartitionLog.read", options, ("isolation",))
        _check_timestamp_mode(timestamp_mode)
        opts = DecodeOptions(**{k: v for k, v in options.items() if k != "isolation"})
        return self._read_run(start_offset, end_offset, start_timestamp, end_timestamp,
                              timestamp_mode, opts, options)

    def _read_run(self, start_offset, end_offset, start_timestamp, end_timestamp,
                  timestamp_mode, opts: DecodeOptions, options: dict) -> Records:
        """``read()``: the planned ranges of the segments decoded as one run
        (``kbatch.lib.chain``), nothing joined; trimmed and filtered as
        ``iter()``'s chunks are."""
        isolation = check_isolation(options.get("isolation", "read_uncommitted"))
        plain = {k: v for k, v in options.items() if k != "isolation"}
        state, drops, lo, hi, window = self._read_setup(
            isolation, plain, opts, start_offset, end_offset, start_timestamp,
            end_timestamp, timestamp_mode)
        plans = self.plan(lo, hi) if lo < hi else []
        if not plans:
            empty = Records.empty()
            return empty if state is None else state.filter(empty)
        active = self.segments[-1]
        records = decode_run([Piece(pl.segment.path, pl.start, pl.stop,
                                    pl.segment is active or pl.stop is not None,
                                    self._next_base(pl.segment))
                              for pl in plans], opts, drops=drops)
        # a whole read keeps every record the files hold (whatever its offset)
        if (_ranged(start_offset, end_offset, start_timestamp, end_timestamp)
                and not _inside(records.batches, lo, hi)):
            records = records.select_offsets(lo, hi)
        records = _in_window(records, window)
        # filtered as the chunks of iter() are: exact even if a segment changed
        # between the transaction pass and the decode
        return records if state is None else state.filter(records)

    def aborted_transactions(self) -> TxnIndex:
        """All ``.txnindex`` entries of the partition, in segment order."""
        return TxnIndex.concat(s.txn_index for s in self.segments)


def open_log(path, *, use_index: bool | None = None, **remote) -> PartitionLog:
    """A partition directory (``<topic>-<partition>/``) as a ``PartitionLog``
    (``use_index``: seek with the index files, see ``PartitionLog``).

    A URL (``s3://bucket/data/orders-0``, any fsspec URL), or a path with
    ``filesystem=``, gives a ``kbatch.lib.remote.log.RemoteLog`` (same
    ``read``/``iter``): keyword arguments ``storage_options``,
    ``filesystem``, ``layout`` ("plain" or "tiered": the tiered-storage
    plugin's bucket layout), ``private_key``, ``block``, ``concurrency``.
    ``use_index`` defaults to False for a local directory (the exact header
    walk) and True for a URL (seeks from the index objects, each entry
    checked; False: every read walks its segments from their start)."""
    if remote or _is_url(path):
        from kbatch.lib.remote.log import RemoteLog
        return RemoteLog(path, use_index=True if use_index is None else use_index, **remote)
    return PartitionLog(path, use_index=bool(use_index))


def _is_url(path) -> bool:
    from kbatch.lib.remote.fs import is_url
    return is_url(path)


class LogDir:
    """A broker data directory: every partition directory in it
    (``use_index``: see ``PartitionLog``)."""

    def __init__(self, path, *, use_index: bool = False):
        try:
            self.path = expect(path, PathKind.DATA_DIR,
                               what="open_log_dir needs a broker data directory").path
        except PathError:
            # a data directory whose partitions are all being deleted or
            # moved (``-delete``, ``-future``, ``-stray``) holds nothing live
            if not _only_transient(Path(path)):
                raise
            self.path = Path(path)
        self.partitions = [PartitionLog(child, use_index=use_index)
                           for _, _, child in partition_dirs(self.path)]

    def __repr__(self) -> str:
        return f"LogDir({self.path}, {len(self.partitions)} partitions)"

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
        if topics is None:
            return list(self.partitions)
        if isinstance(topics, (str, bytes)):
            topics = [topics.decode() if isinstance(topics, bytes) else topics]
        wanted = list(topics)
        if not all(isinstance(t, str) for t in wanted):
            raise ArgumentError("topics must be a topic name or a list of topic names")
        known = set(self.topics)
        missing = [t for t in wanted if t not in known]
        if missing:
            raise ArgumentError(
                f"{self.path}: no topic {', '.join(map(repr, missing))} here; topics: "
                f"{', '.join(sorted(known)) or '(none)'}")
        return [p for p in self.partitions if p.topic in set(wanted)]

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
             visibility: str = "all",
             **options) -> dict[tuple[str, int], Records]:
        """Every selected partition as ``{(topic, partition): Records}``:
        whole, or the range (arguments of ``PartitionLog.read``) of each.

        ``topics``: a topic name or a list of them (None: all); an unknown
        name raises. Whole partitions are decoded on ``threads`` threads at
        once (default: one per core; the decoder releases the GIL); ranges
        partition by partition on those threads.
        Damage is handled as in ``PartitionLog.read`` (``on_corrupt``).
        ``visibility="consumer"``: only ``[log start offset, high watermark)``
        of each partition, from the checkpoint files
        (``kbatch.lib.visibility``); "all" (default): everything.

        Each partition's segments are decoded one after another into one
        set of columns (``kbatch.lib.chain``): nothing is joined, except a
        partition holding 1.5 or more threads' shares of the bytes, which is
        cut into that many runs decoded in parallel and then joined. Keeps
        in memory the result (and, while a cut partition is joined, its
        runs) and one decompressed batch per thread.
        """
        from kbatch.lib.visibility import apply_visibility, check_visibility
        check_visibility(visibility)
        check_isolation(isolation)
        opts = decode_options("LogDir.read", options)
        parts = self.select(topics)
        workers = threads or os.cpu_count() or 1
        if _ranged(start_offset, end_offset, start_timestamp, end_timestamp):
            def read_part(p):
                return p.read(start_offset, end_offset, start_timestamp=start_timestamp,
                              end_timestamp=end_timestamp, timestamp_mode=timestamp_mode,
                              isolation=isolation, **options)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return {(p.topic, p.partition): rec
                        for p, rec in zip(parts, pool.map(read_part, parts))}

        def decode(job):     # a run of a partition's segments into one set of columns
            p, run, nbytes = job       # (sized once, by _jobs)
            return decode_run(p._pieces(run), opts, expect_bytes=nbytes)

        pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
        try:
            jobs = _jobs(parts, workers)
            # the largest first, so the threads finish together
            order = sorted(range(len(jobs)), key=lambda i: -jobs[i][2])
            done = (pool.map(decode, [jobs[i] for i in order]) if pool is not None
                    else (decode(jobs[i]) for i in order))
            results: list = [None] * len(jobs)
            for i, rec in zip(order, done):
                results[i] = rec
            return self._joined(parts, jobs, results, opts, options, isolation, visibility,
                                pool)
        finally:
            if pool is not None:
                pool.shutdown()

    def _joined(self, parts, jobs, results, opts, options, isolation, visibility, pool):
        """Each partition's runs joined into one ``Records`` (the copies on
        ``pool``), transactions and visibility applied. A run that stopped
        at damage (``on_corrupt="stop"``) is the last one of its partition."""
        from kbatch.lib.visibility import apply_visibility
        out: dict[tuple[str, int], list[Records]] = {}
        stopped: set = set()
        for (p, _, _), rec in zip(jobs, results):
            key = (p.topic, p.partition)
            if key in stopped:
                continue   # on_corrupt="stop": nothing after the first damage
            if rec.end is not None and rec.end.reason == "corrupt":
                stopped.add(key)
            out.setdefault(key, []).append(rec)
        rec = None
        results.clear()        # the caller's list: each run is now held by ``out`` only
        result = {}
        homes = {(p.topic, p.partition): p.path for p in parts}
        for key in list(out):  # a partition's runs are released once it is joined
            runs = out.pop(key)
            held = sum(r.nbytes for r in runs)
            if held > opts.max_read_bytes:   # each run was bounded alone
                raise LimitExceededError(
                    f"decoded data exceeds max_read_bytes={opts.max_read_bytes} (read in "
                    "chunks with log.iter)", path=str(homes[key]))
            result[key] = Records.concat(runs, pool=pool)
            del runs
        result |= {(p.topic, p.partition): Records.empty() for p in parts if not p.segments}
        if check_isolation(isolation) == "read_committed":
            for p in parts:
                key = (p.topic, p.partition)
                result[key] = p.transaction_state(**options).filter(result[key])
        return apply_visibility(self.path, result, visibility)


def _jobs(parts: list, workers: int) -> list[tuple]:
    """``(partition, run of segments, bytes)`` to decode: each partition as
    one run, cut into runs of about 1/``workers`` of the bytes when it holds
    1.5 such shares or more (its runs are joined afterwards: a join only
    where the threads need the pieces)."""
    sizes = {s.path: file_size(s.path) for p in parts for s in p.segments}

    def size(run):
        return sum(sizes[s.path] for s in run)
    share = sum(sizes.values()) / max(workers, 1)
    jobs = []
    for p in parts:
        whole = size(p.segments)
        # a partition a little over its share stays whole: a cut costs a join
        pieces = 1 if share <= 0 else max(1, round(whole / share))
        runs = split_runs(p.segments, pieces, [sizes[s.path] for s in p.segments])
        jobs += [(p, run, size(run)) for run in runs]
    return jobs


def open_log_dir(path, *, use_index: bool | None = None, **remote) -> LogDir:
    """A broker data directory (many ``<topic>-<partition>`` directories).
    A URL (or ``filesystem=``) gives a ``kbatch.lib.remote.log.RemoteLogDir``
    of a prefix of partitions (``layout="tiered"``: of the plugin's
    ``<topic>-<topicId>/<partition>/``); keywords as ``open_log``."""
    if remote or _is_url(path):
        from kbatch.lib.remote.log import RemoteLogDir
        return RemoteLogDir(path, use_index=True if use_index is None else use_index, **remote)
    return LogDir(path, use_index=bool(use_index))
