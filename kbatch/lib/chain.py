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

Each segment's end is checked as ``iter()`` checks it, segment by segment:
a torn tail or zero padding is damage unless the segment is the
partition's last (the active one), and a truncated batch followed by valid
batches is a damaged length. Damage raises, ends the run there
(``on_corrupt="stop"``) or is passed over (``"skip"``: the decoder goes on
in the same source after the damaged range, which ``Records.skipped``
lists). With zero_copy, a segment's windows become buffer objects of their
own before the decoder moves on (``replace_source_windows``), so the views
of one chunk can point into several mappings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from kbatch._core import _batch
from kbatch.errors import CorruptRecordError, LimitExceededError
from kbatch.lib.decoder import decoder, skips_payload
from kbatch.lib.records import Records, SegmentEnd, SkippedRange
from kbatch.lib.segment import decompress_pending, end_of_data, project_columns, zeros_from
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


def settle_segment_end(end: SegmentEnd, path, inner: bool, next_base: int | None, opts,
                       seen: int | None) -> tuple[SegmentEnd, SkippedRange | None, bool]:
    """``(end, gap, stopped)``: a segment's ``end`` as the read reports it.

    A segment that is not the last of its partition (``inner``; the next
    one starts at ``next_base``) must end at a batch boundary (Kafka trims a
    segment when it rolls): a truncated batch or zero padding there is
    damage, raised, stopped at (``end`` becomes "corrupt") or skipped (the
    ``gap`` a ``SkippedRange``; ``seen``: the last offset read from the
    segment). ``stopped``: the read ends here (``on_corrupt="stop"`` met
    damage). ``end`` comes back unchanged (the same object) when nothing
    is wrong."""
    if end.reason == "corrupt":
        return end, None, True
    if not inner or end.reason is None:
        return end, None, False
    error = inner_end_error(end, path)
    if opts.on_corrupt == "raise":
        raise error
    if opts.on_corrupt == "stop":
        return SegmentEnd(end.valid_bytes, end.trailing_bytes, "corrupt", error), None, True
    gap = SkippedRange(path, end.valid_bytes, end.valid_bytes + end.trailing_bytes,
                       end.reason, seen, next_base, str(error))
    return SegmentEnd(end.valid_bytes + end.trailing_bytes, 0, None, None), gap, False


def split_runs(segments: Sequence, pieces: int, sizes: Sequence[int] | None = None
               ) -> list[list]:
    """``segments`` cut into at most ``pieces`` runs of consecutive segments
    holding about the same number of bytes (a run is never empty).
    ``sizes``: their sizes in bytes (None: from their sources)."""
    segments = list(segments)
    pieces = max(1, min(pieces, len(segments)))
    if pieces == 1:
        return [segments] if segments else []
    if sizes is None:
        sizes = [source_size(s.source) for s in segments]
    sizes = np.asarray(sizes, dtype=np.float64)
    # cut where the running total crosses each k/pieces of the whole
    ends = np.cumsum(sizes)
    marks = ends[-1] * np.arange(1, pieces) / pieces
    cuts = sorted(set(int(i) + 1 for i in np.searchsorted(ends, marks, side="left")))
    cuts = [c for c in cuts if 0 < c < len(segments)]
    bounds = [0, *cuts, len(segments)]
    return [segments[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def source_size(source) -> int:
    """Bytes of a segment's source (0 when it cannot be read: the read
    raises with its name when it opens it)."""
    try:
        return source.size
    except (OSError, ValueError):
        return 0


class Piece(NamedTuple):
    """Bytes ``[start, stop)`` of a segment's ``source``
    (``kbatch.lib.sources``; stop None: to its end). ``torn_ok``: it may end
    in a torn tail or zero padding (the partition's last segment, or a
    range that stops inside the segment); any other piece must end at a
    batch boundary. ``next_base``: the base offset of the partition's next
    segment (what a skipped tail names)."""

    source: object
    start: int = 0
    stop: int | None = None
    torn_ok: bool = False
    next_base: int | None = None


def decode_run(pieces: Sequence[Piece], opts, *, chunk_bytes: int = 1 << 30,
               drops: Mapping | None = None, expect_bytes: int | None = None) -> Records:
    """The records of ``pieces`` (of consecutive segments of one partition,
    in order) as one ``Records``; ``Records.end`` is the last piece's.

    ``opts``: the read's ``DecodeOptions``; damage raises, stops the run
    (nothing after it) or is skipped (``Records.skipped``), as in
    ``decode_chunks``.
    ``max_read_bytes`` bounds the whole run. Keeps in memory the result, one
    decompressed batch and one segment's mapping at a time (with zero_copy,
    every mapping the result points into). ``chunk_bytes``: columns beyond
    it start a new chunk (chunks are joined at the end; at most 1 GiB keeps
    int32 offsets). ``drops``: per piece path, the sorted positions of the
    batches whose records are checked and not stored (read_committed, see
    ``PartitionLog.dropped_batches``). zero_copy falls back to copies when
    kbatch's table of guarded mappings is full, as ``read_segment`` does.
    ``expect_bytes``: the bytes the pieces hold, when the caller knows them
    (None: each source is sized here), to size the columns once. A remote
    source's piece is fetched (the next one in the background while this
    one decodes) and then decoded as a file's mapping is: keeps in memory
    also one or two pieces' bytes.
    """
    try:
        return _run(pieces, opts, chunk_bytes, drops, expect_bytes)
    except _Unguarded:
        return _run(pieces, replace(opts, zero_copy=False), chunk_bytes, drops, expect_bytes)


class _Unguarded(Exception):
    """A zero_copy run met a mapping the SIGBUS guard's table has no room for."""


def _run(pieces, opts, chunk_bytes, drops, expect) -> Records:
    views = opts.zero_copy and not skips_payload(opts)
    paths = [piece.source.name for piece in pieces]
    # a chunk never holds more than max_read_bytes (plus one batch)
    chunk_bytes = min(chunk_bytes, 1 << 30, max(opts.max_read_bytes // 2, 1))
    if expect is None:
        expect = sum(max((source_size(piece.source) if piece.stop is None else piece.stop)
                         - piece.start, 0) for piece in pieces)
    chunks: list[Records] = []
    marks: list[tuple[int, int]] = []    # (piece, batch rows of the chunk at its end)
    holds: list[SourceHold] = []         # zero_copy: the mappings views point into
    skipped: list[SkippedRange] = []     # on_corrupt="skip": ranges not yet in a chunk
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
        chunk = Records.from_chunk(cols, end_here, None, tuple(skipped), sources=paths,
                                   batch_source=source)
        skipped.clear()
        held += chunk.nbytes
        if held > opts.max_read_bytes:
            raise LimitExceededError(
                f"decoded data exceeds max_read_bytes={opts.max_read_bytes} "
                "(read in chunks with log.iter)", path=dec.path, position=dec.position)
        dec.set_read_budget(opts.max_read_bytes - held)
        chunks.append(chunk)

    try:
        for index, piece in enumerate(pieces):
            drop = None if drops is None else drops.get(paths[index])
            stop = -1 if piece.stop is None else piece.stop
            if index + 1 < len(pieces):     # an object's next piece comes while this one decodes
                after = pieces[index + 1]
                after.source.prefetch(after.start, after.stop)
            path = paths[index]
            with piece.source.window(piece.start, piece.stop, populate=True,
                                     copy=not views) as view:
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
                    end, seen = _decode_piece(dec, view, path, opts, index, stop, drop, marks,
                                              skipped, take)
                    _hand_over_windows(dec, view)
                finally:
                    dec.release()     # the mapping can close: the decoder holds no view of it
                view = None
            end, gap, stopped = settle_segment_end(end, path, not piece.torn_ok, piece.next_base,
                                                   opts, seen)
            if gap is not None:
                skipped.append(gap)
            if stopped:
                break    # on_corrupt="stop": nothing after the first damage
    finally:     # a read that stopped or raised leaves no prefetch behind
        for piece in pieces:
            piece.source.drop_prefetch()
    if dec is None:
        return Records.empty()
    take(end)
    return Records.concat(chunks)


def _decode_piece(dec, view, path, opts, index: int, stop: int, drop, marks: list,
                  skipped: list, take) -> tuple[SegmentEnd, int | None]:
    """Decode the piece ``dec`` now reads (``index`` in the run) to its end,
    taking a chunk whenever the columns fill one and, with
    ``on_corrupt="skip"``, resuming after each damaged range (listed in
    ``skipped``). ``(end, seen)``: its ``SegmentEnd`` (a damaged length
    raises unless skipped or stopped at) and the last offset read from it
    (None: none)."""
    first_row, seen = dec.batch_rows, None
    while True:
        status = dec.run()
        if status == _batch.STATUS_COMPRESSED:
            decompress_pending(dec, path, opts.max_decompressed_bytes)
            continue
        if status == _batch.STATUS_CHUNK_FULL:
            marks.append((index, dec.batch_rows))
            seen = _top(seen, dec.max_last_offset(first_row))
            take(None)
            first_row = 0
            continue
        seen = _top(seen, dec.max_last_offset(first_row))
        # a resync only accepts batches after what was read (as decode_chunks)
        end, resume, gap = end_of_data(view, path, opts, dec, _top(-1, seen))
        if gap is not None:
            skipped.append(gap)
        if resume is None:
            marks.append((index, dec.batch_rows))
            return end, seen
        _hand_over_windows(dec, view)    # the same source: a new window after the gap
        dec.continue_with(view, start=resume, stop=stop, path=path, zeros_from=zeros_from(view),
                          drop_positions=drop)


def _hand_over_windows(dec, view) -> None:
    """zero_copy: the chunk's windows of ``view`` become buffer objects of
    their own (views of those bytes, which keep the mapping alive), so the
    decoder can move on (nothing to do without views)."""
    windows = dec.source_windows()
    if windows:
        dec.replace_source_windows(SourceHold.windows(view, windows))


def _top(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
