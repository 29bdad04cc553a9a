"""Which bytes a read needs: segment selection, seeks by offset and by
timestamp, split points. One implementation for every segment, whatever
stores it (a file, an object, a tiered upload: ``kbatch.lib.logfiles``),
so the same bytes give the same plan.

    segments_for(segments, lo, hi)     the segments that may hold offsets [lo, hi)
    plan(segments, lo, hi, use_index)  ReadPlan(segment, start, stop) per segment
    rewalked(plan, lo, hi), check_seek  the walk's answer once an index seek met damage
    offset_for_timestamp(...)          Kafka's offsets-for-times over the segments
    log_end_offset(segments, ...)      one past the last offset of the last whole batch
    split_points(seg, start, stop, n)  batch boundaries about every n bytes (Spark)

Without ``use_index`` every position comes from a walk over the batch
headers (cached per segment): exact whatever the index files hold. With
``use_index`` the index entries are hints, each checked before use (the
trust rules below); a hint that fails its check is never used, and the
walk decides instead:

- an offset-index entry ``(o, p)`` seeking offset ``x`` (``o <= x``): the
  bytes at ``p`` hold a whole CRC-valid batch whose base offset is at most
  ``x`` and whose last offset is at most ``o`` (an entry names the last
  offset of an append whose first batch starts at ``p``);
- an entry seeking the end ``h`` of a range: a whole CRC-valid batch at
  ``p`` whose base offset is at least ``h`` (never a legacy compressed
  wrapper: its header names only its last offset, its inner messages may
  carry lower ones);
- a time-index entry ``(t, o)`` (every record up to offset ``o`` is older
  than ``t``): the index is in order (timestamps and offsets never go
  down) and the batch holding ``o`` carries exactly ``t`` as its maximum;
- a split point ``p``: a whole CRC-valid batch at ``p``.

An index crafted to point at a valid batch stored inside a record value
passes these checks; the decode from there meets the rest of the outer
batch as damage, and a read that met damage after an index seek is read
again by the walk (``rewalked``), or raises where records were already
given out (``check_seek``). A crafted entry whose false chain of batches
ends exactly where the outer batch does reads clean: ``use_index=False``
is the exhaustive mode for files you do not trust.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kbatch.errors import CorruptRecordError
from kbatch.lib.records import Records
from kbatch.wire import INT64_MIN, UNBOUNDED, Codec

CHECKED_STOP_ENTRIES = 3     # index entries at or past a range's end tried as its stop


@dataclass(frozen=True)
class ReadPlan:
    """Bytes ``[start, stop)`` of ``segment`` to decode (stop None: to the
    end). ``limit``: offsets at or above it belong to a later segment
    (a tiered re-upload that overlaps the next one); None: no such limit."""

    segment: object
    start: int
    stop: int | None
    limit: int | None = None
    index_seek: bool = False     # start or stop may have come from an index entry


def serves_until(segments, i: int) -> int:
    """One past the last offset segment ``i`` serves: the next segment's
    base offset, or its ``limit`` when that comes first (a tiered upload
    another one overlaps, ``kbatch.lib.uploads``); ``UNBOUNDED`` for the
    last one without a limit."""
    seg = segments[i]
    if getattr(seg, "undescribed", None) is not None:
        return UNBOUNDED        # a tiered upload of unknown extent: it may hold any offset
    nxt = segments[i + 1].base_offset if i + 1 < len(segments) else UNBOUNDED
    limit = getattr(seg, "limit", None)
    return nxt if limit is None else min(nxt, limit)


def segments_for(segments, lo: int, hi: int) -> list[int]:
    """Indexes of the segments that may hold offsets in ``[lo, hi)``: a
    segment holds offsets from its base up to ``serves_until``."""
    return [i for i, seg in enumerate(segments)
            if serves_until(segments, i) > lo and seg.base_offset < hi]


def checked_batch(seg, position: int, read_follows: bool = False):
    """The header row of the whole CRC-valid batch at ``position``, or None
    (a storage failure raises: it says nothing about the entry).
    ``read_follows``: a read starts there (an object fetches ahead)."""
    return seg.source.batch_at(position, read_follows=read_follows)


def indexed_start(seg, offset: int, read_follows: bool = True) -> int | None:
    """The ``.index`` lower bound for ``offset`` when it checks out (the
    trust rule in the module docstring), else None."""
    entry_offset, position = seg.offset_index.lookup(offset)
    if position == 0:
        return 0
    row = checked_batch(seg, position, read_follows=read_follows)
    if row is None or int(row["base_offset"]) > offset or int(row["last_offset"]) > entry_offset:
        return None
    return position


def start_position(seg, offset: int, use_index: bool, read_follows: bool = True) -> int:
    """The first batch that may hold ``offset`` or more: every earlier
    batch ends below it. ``read_follows``: the caller reads from there (an
    object's check of the index entry fetches ahead for it)."""
    if offset <= seg.base_offset:
        return 0
    if use_index:
        hint = indexed_start(seg, offset, read_follows)
        if hint is not None:
            return hint
    bounds = seg.batch_bounds()
    reach = np.flatnonzero(bounds["last_offset"] >= offset)
    if len(reach):
        return int(bounds["position"][reach[0]])
    return int(bounds["position"][-1] + bounds["size"][-1]) if len(bounds) else 0


def indexed_stop(seg, offset: int) -> int | None:
    """A batch at or above ``offset`` that one of the next ``.index``
    entries names, checked; None (read to the end of the segment, the
    records are trimmed) when none checks out."""
    idx = seg.offset_index
    first = int(np.searchsorted(idx.offsets, offset, side="left"))
    for k in range(first, min(first + CHECKED_STOP_ENTRIES, len(idx))):
        row = checked_batch(seg, int(idx.positions[k]))
        if row is None or (int(row["magic"]) < 2 and int(row["codec"]) != Codec.NONE):
            return None      # (a legacy wrapper's first offset is not in its header)
        if int(row["base_offset"]) >= offset:
            return int(idx.positions[k])
    return None


def stop_position(seg, offset: int, use_index: bool) -> int | None:
    """The first batch from which every batch starts at or above ``offset``
    (None: the end of the segment)."""
    if use_index:
        return indexed_stop(seg, offset)
    bounds = seg.batch_bounds()
    # with offsets out of order (a damaged log) every later batch must qualify
    below = np.flatnonzero(bounds["base_offset"] < offset)
    after = below[-1] + 1 if len(below) else 0
    if after >= len(bounds):
        return None
    return int(bounds["position"][after])


def rewalked(plan: ReadPlan, lo: int, hi: int) -> ReadPlan:
    """``plan`` with the walk's positions for ``[lo, hi)`` in place of the
    index's (the same segment, the same ends)."""
    seg = plan.segment
    # (a start or stop the index left at the segment's ends is the walk's to
    # decide too: no usable entry is not the walk's answer)
    return ReadPlan(seg, start_position(seg, lo, False), stop_position(seg, hi, False),
                    plan.limit, False)


def check_seek(plan: ReadPlan) -> None:
    """Raise ``CorruptRecordError`` when an index seek started or stopped
    ``plan`` inside a batch of the walk (an entry that named a valid batch
    stored in a record value): what was read from there is not the log's,
    or records before the stop were left out."""
    if not plan.index_seek:
        return
    bounds = plan.segment.batch_bounds()
    for what, position in (("seeks", plan.start), ("stops", plan.stop)):
        if not position:
            continue
        i = int(np.searchsorted(bounds["position"], position, side="right")) - 1
        if i < 0:
            continue
        at, size = int(bounds["position"][i]), int(bounds["size"][i])
        if at < position < at + size:
            base = int(bounds["base_offset"][i])
            raise CorruptRecordError(
                f"an .index entry {what} inside the batch at byte {at} (a read "
                f"from it is not the log's; read with use_index=False)",
                path=plan.segment.source.name, position=position, batch_position=at,
                base_offset=int(bounds["last_offset"][i]) if base == INT64_MIN else base)


def plan(segments, lo: int, hi: int, use_index: bool, *,
         read_follows: bool = True) -> list[ReadPlan]:
    """The byte ranges to decode for offsets ``[lo, hi)``. A tiered
    upload's records stop at its ``limit`` (``ReadPlan.limit``): another
    upload serves the rest (``kbatch.lib.uploads``).
    ``read_follows=False``: only planned here (Spark's driver), read
    elsewhere: an object's index checks fetch only the batches they check."""
    plans = []
    chosen = segments_for(segments, lo, hi)
    for k, i in enumerate(chosen):
        seg = segments[i]
        if getattr(seg, "undescribed", None) is not None:
            # which upload serves the offsets from its start cannot be decided
            raise seg.undescribed
        until = serves_until(segments, i)
        nxt = None if until >= UNBOUNDED else until
        start = start_position(seg, lo, use_index, read_follows) if k == 0 else 0
        whole_tail = (nxt is not None and nxt <= hi) or hi >= UNBOUNDED
        stop = None if k < len(chosen) - 1 or whole_tail else stop_position(seg, hi, use_index)
        # the index (or its lack of a usable entry) chose the start of the
        # first segment or the stop of the last one: a walk may choose other
        # batches (it passes damaged batches below the range by their
        # headers, as Kafka's fetch does), so damage met is decided by the walk
        seek_start = k == 0 and lo > seg.base_offset
        seek_stop = k == len(chosen) - 1 and not whole_tail
        plans.append(ReadPlan(seg, start, stop, getattr(seg, "limit", None),
                              use_index and (seek_start or seek_stop)))
    return plans


def log_end_offset(segments, use_index: bool) -> int:
    """The partition's log end offset: one past the last offset of the last
    whole batch of its last segment (its base offset when it holds none).
    The last segment's headers are walked from its start, or with
    ``use_index`` from its last checked ``.index`` entry (a seek: only the
    tail is read)."""
    last = segments[-1]
    start = 0
    idx = last.offset_index if use_index else None
    if idx is not None and len(idx):
        start = start_position(last, int(idx.offsets[-1]), True)
    rows = [r for r in last.source.header_rows(start) if len(r)]
    end = int(max(r["last_offset"].max() for r in rows)) + 1 if rows else last.base_offset
    if not rows and start:      # nothing from the hint on: the whole walk decides
        bounds = last.batch_bounds()
        end = int(bounds["last_offset"].max()) + 1 if len(bounds) else last.base_offset
    return max(end, last.base_offset)


def split_points(seg, start: int, stop: int | None, max_bytes: int,
                 use_index: bool) -> list[tuple[int, int | None]]:
    """``[start, stop)`` of ``seg`` cut at batch boundaries about every
    ``max_bytes``: every batch's (the header walk), or with ``use_index``
    the ``.index`` positions that hold a whole CRC-valid batch (a segment
    whose index is missing or empty is walked: it would otherwise be one
    slice, one task)."""
    end = seg.size if stop is None else stop
    if end - start <= max_bytes:
        return [(start, stop)]
    cuts, target = [], start + max_bytes
    indexed = np.unique(seg.offset_index.positions) if use_index else None
    if indexed is not None and len(indexed):
        for pos in indexed.tolist():
            if target <= pos < end and checked_batch(seg, pos) is not None:
                cuts.append(pos)
                target = pos + max_bytes
    else:
        for pos in seg.batch_bounds()["position"].tolist():
            if target <= pos < end:
                cuts.append(pos)
                target = pos + max_bytes
    bounds = [start] + cuts
    return list(zip(bounds, cuts + [stop]))


# --- timestamps ----------------------------------------------------------------

def _hinted_rows(seg, timestamp: int):
    """Header rows of the batches that may hold the first record at or
    after ``timestamp``, piece by piece: from the batch holding the offset
    of the ``.timeindex`` entry below ``timestamp`` when that entry passes
    its check (the trust rule in the module docstring), else every batch
    header of the segment."""
    ti = seg.time_index
    below = ti.last_below(timestamp)
    in_order = not (np.any(np.diff(ti.timestamps) < 0) or np.any(np.diff(ti.offsets) < 0))
    if below is not None and in_order:
        entry_ts, entry_offset = below
        pieces = seg.source.header_rows(start_position(seg, entry_offset, True))
        try:
            for rows in pieces:
                hit = np.flatnonzero(rows["last_offset"] >= entry_offset)
                if not len(hit):
                    continue          # the batch holding the entry's offset comes later
                row = rows[hit[0]]
                if (int(row["base_offset"]) <= entry_offset
                        and int(row["max_timestamp"]) == entry_ts):
                    yield rows[hit[0]:]
                    yield from pieces
                    return
                break
        finally:
            pieces.close()
    yield from seg.source.header_rows(0)


def offset_for_timestamp(segments, timestamp: int, opts, use_index: bool,
                         from_offset: int | None = None) -> int | None:
    """The earliest offset whose record timestamp is >= ``timestamp``
    (Kafka's offsets-for-times), None when no record is that recent.
    ``opts``: the read's ``DecodeOptions`` (CRC check, limits,
    ``on_corrupt``) for the batches decoded here. ``from_offset``: the log
    start offset; records below it are not looked at (Kafka's
    FileRecords.searchForTimestamp from the log start: a record at or
    after it, stamped late enough).

    The batch headers' max timestamps (the cached walk; with ``use_index``
    only those after the checked ``.timeindex`` hint) say which batches can
    hold one; those are decoded in order until one does. Keeps in memory
    one piece of header rows and one batch."""
    from kbatch.lib.segment import decode_chunks
    floor = INT64_MIN if from_offset is None else from_offset
    for k, seg in enumerate(segments):
        if k + 1 < len(segments) and segments[k + 1].base_offset <= floor:
            continue            # wholly below the log start
        # a tiered upload another one overlaps: the rest is that one's
        until = UNBOUNDED if getattr(seg, "limit", None) is None else serves_until(segments, k)
        pieces = _hinted_rows(seg, timestamp) if use_index else iter([seg.batch_bounds()])
        for rows in pieces:
            for i in np.flatnonzero((rows["max_timestamp"] >= timestamp)
                                    & (rows["last_offset"] >= floor)
                                    & (rows["base_offset"] < until)).tolist():
                position, size = int(rows["position"][i]), int(rows["size"][i])
                # one batch of a search: the read that follows confirms the object
                with seg.source.window(position, position + size, confirm=False) as view:
                    records = Records.concat(list(decode_chunks(
                        view, seg.name, opts, start=position, stop=position + size)))
                hits = np.flatnonzero((records.timestamp >= timestamp)
                                      & (records.offset >= floor) & (records.offset < until))
                if len(hits):
                    if hasattr(pieces, "close"):
                        pieces.close()
                    return int(records.offset[hits[0]])
    return None
