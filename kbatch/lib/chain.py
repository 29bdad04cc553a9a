"""A run of a partition's segments decoded into one set of columns.

    segment 0 --+
    segment 1 --+--> one BatchDecoder --> Records: columns as one chunk,
    segment 2 --+    (continue_with)       ``sources`` the segments, the
                                           batch table's ``source`` per batch

Decoding each segment apart and then joining them copies every column a
second time: for a whole partition of small records that join is as much
work as the decode itself with the CRC off, and, being a memory copy, it
scales worse over cores. ``decode_run`` hands one decoder the segments one
after another instead, so the columns grow in place (the memory pool grows
them with ``mremap``: no byte moves) and nothing is joined.

Each segment's end is checked as the per-segment path checks it: a torn
tail or zero padding is damage unless the segment is the partition's last
(the active one), and a truncated batch followed by valid batches is a
damaged length. With zero_copy, a segment's windows become buffer objects
of their own before the decoder moves on (``replace_source_windows``), so
the views of one chunk can point into several mappings. Used for reads with
``on_corrupt="raise"`` (``runs_apply``); a read that stops at or skips
damage decodes segment by segment.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from kbatch._core import _batch
from kbatch.errors import CorruptRecordError, LimitExceededError
from kbatch.lib.decoder import decoder, skips_payload
from kbatch.lib.records import Records, SegmentEnd
from kbatch.lib.segment import (decompress_pending, end_of_data, open_source,
                                 project_columns, zeros_from)
from kbatch.lib.views import SourceHold
from kbatch.wire import UNBOUNDED


def inner_end_error(end: SegmentEnd, path) -> CorruptRecordError:
    """The error for a segment that is not the last of its partition but
    ends in a torn tail or zero padding (Kafka trims a segment when it
    rolls: only the active segment can be cut short)."""
    what = ("its last batch runs past the end of the file" if end.reason == "truncated"
            else "zero bytes follow its last batch")
    return CorruptRecordError(
        f"{what} ({end.trailing_bytes} bytes not read), but it is not the last segment "
        "of the partition (only the active segment can have a torn tail)",
        path=path, position=end.valid_bytes, batch_position=end.valid_bytes,
        base_offset=None)


def runs_apply(opts) -> bool:
    """Whether ``decode_run`` can read with ``opts``: damage raises (nothing
    to stop at or skip)."""
    return opts.on_corrupt == "raise"


def split_runs(segments: Sequence, pieces: int) -> list[list]:
    """``segments`` cut into at most ``pieces`` runs of consecutive segments
    holding about the same number of bytes (a run is never empty)."""
    segments = list(segments)
    pieces = max(1, min(pieces, len(segments)))
    if pieces == 1:
        return [segments] if segments else []
    sizes = np.array([file_size(s.path) for s in segments], dtype=np.float64)
    # cut where the running total crosses each k/pieces of the whole
    ends = np.cumsum(sizes)
    marks = ends[-1] * np.arange(1, pieces) / pieces
    cuts = sorted(set(int(i) + 1 for i in np.searchsorted(ends, marks, side="left")))
    cuts = [c for c in cuts if 0 < c < len(segments)]
    bounds = [0, *cuts, len(segments)]
    return [segments[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def file_size(path) -> int:
    """Bytes of the file at ``path`` (0 when it cannot be read)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0     # the read raises with the path when it opens it


class Piece(NamedTuple):
    """Bytes ``[start, stop)`` of the segment at ``path`` (stop None: to its
    end). ``torn_ok``: it may end in a torn tail or zero padding (the
    partition's last segment, or a range that stops inside the segment);
    any other piece must end at a batch boundary."""

    path: object
    start: int = 0
    stop: int | None = None
    torn_ok: bool = False


def whole_segments(segments: Sequence, last_is_active: bool) -> list[Piece]:
    """``segments`` (each with ``.path``) read whole; ``last_is_active``: the
    last of them is the partition's last segment."""
    n = len(segments)
    return [Piece(s.path, 0, None, last_is_active and i == n - 1)
            for i, s in enumerate(segments)]


def decode_run(pieces: Sequence[Piece], opts, *, chunk_bytes: int = 1 << 30,
               drops: Mapping | None = None) -> Records:
    """The records of ``pieces`` (of consecutive segments of one partition,
    in order) as one ``Records``; ``Records.end`` is the last piece's.

    ``opts``: a ``DecodeOptions`` for which ``runs_apply`` holds.
    ``max_read_bytes`` bounds the whole run. Keeps in memory the result, one
    decompressed batch and one segment's mapping at a time (with zero_copy,
    every mapping the result points into). ``chunk_bytes``: columns beyond
    it start a new chunk (chunks are joined at the end; at most 1 GiB keeps
    int32 offsets). ``drops``: per piece path, the sorted positions of the
    batches whose records are checked and not stored (read_committed, see
    ``PartitionLog.dropped_batches``). zero_copy falls back to copies when
    kbatch's table of guarded mappings is full, as ``read_segment`` does.
    """
    if not runs_apply(opts):
        raise ValueError("decode_run reads with on_corrupt='raise'")
    try:
        return _run(pieces, opts, chunk_bytes, drops)
    except _Unguarded:
        return _run(pieces, replace(opts, zero_copy=False), chunk_bytes, drops)


class _Unguarded(Exception):
    """A zero_copy run met a mapping the SIGBUS guard's table has no room for."""


def _run(pieces, opts, chunk_bytes, drops) -> Records:
    views = opts.zero_copy and not skips_payload(opts)
    paths = [str(piece.path) for piece in pieces]
    # a chunk never holds more than max_read_bytes (plus one batch)
    chunk_bytes = min(chunk_bytes, 1 << 30, max(opts.max_read_bytes // 2, 1))
    expect = sum(max((file_size(p) if piece.stop is None else piece.stop) - piece.start, 0)
                 for p, piece in zip(paths, pieces))
    chunks: list[Records] = []
    marks: list[tuple[int, int]] = []    # (piece, batch rows of the chunk at its end)
    holds: list[SourceHold] = []         # zero_copy: the mappings views point into
    held = 0
    dec = view = None
    end = None

    def take(end_here):
        nonlocal held
        cols = dec.take()
        data = cols["data"]
        if opts.columns is not None:
            project_columns(data, opts.columns)
        if views:     # windows of the open source (earlier ones were replaced)
            data["buffers"] = SourceHold.windows(view, data["buffers"])
            data["holds"] = tuple(holds)
        source = np.zeros(len(cols["batches"]), np.int32)
        first = 0
        for index, rows in marks:
            source[first:rows] = index
            first = rows
        marks.clear()
        chunk = Records.from_chunk(cols, end_here, None, sources=paths, batch_source=source)
        held += chunk.nbytes
        if held > opts.max_read_bytes:
            raise LimitExceededError(
                f"decoded data exceeds max_read_bytes={opts.max_read_bytes} "
                "(read in chunks with log.iter)", path=dec.path, position=dec.position)
        dec.set_read_budget(opts.max_read_bytes - held)
        chunks.append(chunk)
        return cols["batches"]

    for index, piece in enumerate(pieces):
        drop = None if drops is None else drops.get(piece.path)
        stop = -1 if piece.stop is None else piece.stop
        with open_source(paths[index], populate=True) as (view, path):
            if views:
                hold = SourceHold(view, path)
                if not hold.guarded:
                    raise _Unguarded()
                holds.append(hold)
            if dec is None:
                dec = decoder(view, path, opts, piece.start, piece.stop, UNBOUNDED, chunk_bytes,
                              zeros_from=zeros_from(view), expect_bytes=expect,
                              drop_positions=drop)
            else:
                dec.continue_with(view, start=piece.start, stop=stop, path=path,
                                  zeros_from=zeros_from(view), drop_positions=drop)
            try:
                end = _decode_one(dec, view, path, opts, index, marks, take)
                if views:   # the views into this mapping keep it through their windows
                    dec.replace_source_windows(SourceHold.windows(view, dec.source_windows()))
            finally:
                dec.release()     # the mapping can close: the decoder holds no view of it
            view = None
            if end.reason is not None and not piece.torn_ok:
                raise inner_end_error(end, path)
    if dec is None:
        return Records.empty()
    take(end)
    return Records.concat(chunks)


def _decode_one(dec, view, path, opts, index: int, marks: list, take) -> SegmentEnd:
    """Decode the segment ``dec`` now reads (``index`` in the run) to its
    end, taking a chunk whenever the columns fill one; its ``SegmentEnd``
    (a damaged length raises)."""
    first_row, seen = dec.batch_rows, -1
    while True:
        status = dec.run()
        if status == _batch.STATUS_COMPRESSED:
            decompress_pending(dec, path, opts.max_decompressed_bytes)
            continue
        if status != _batch.STATUS_CHUNK_FULL:
            break
        marks.append((index, dec.batch_rows))
        rows = take(None)[first_row:]
        if len(rows):
            seen = max(seen, int(rows["last_offset"].max()))
        first_row = 0
    if dec.end_reason is not None:     # where a resync would have to start
        seen = max(seen, dec.max_last_offset(first_row))
    end, _, _ = end_of_data(view, path, opts, dec, seen)
    marks.append((index, dec.batch_rows))
    return end
