"""Decoding a remote segment from ranges, without reading a byte twice.

    source.blocks() --> [carry | block] --> whole batches --> decode_chunks --> Records
                            ^                     |
                            +---- tail bytes -----+  (a batch cut by the range end)

Every batch (magic 2, and magic 0/1 messages alike) starts with
``base offset int64 | length int32`` and is ``12 + length`` bytes long, so the
whole batches of a buffer are found by stepping over these headers; the
decoder (``kbatch.segment.decode_chunks``) then checks and decodes them in
place. Positions in the results (``batches.position``, ``end``, errors) are
positions in the object. Keeps in memory: the source's blocks in flight,
the carried tail (at most one batch: ``max_batch_bytes``) and one chunk.

A header that cannot start a batch (length below 14 or above
``max_batch_bytes``, or zeros) ends the stepping: the rest of that buffer
goes to the decoder, which reports it as it does for a local file
(truncated, zero padding, corrupt); zeros count as a padded tail only
when they run to the end of the object.

``on_corrupt="skip"`` streams the same way (the decoder stops at damage)
and then searches past the damage in windows (``next_valid_in_ranges``,
the rule of ``kbatch.lib.resync``), so the result, the skipped ranges
included, is what the same bytes in a local file give; the tail after
the last whole batch is decoded as a local file's end is. Keeps in memory
one search window (4 MiB) and, for a candidate batch that runs past it,
that batch's bytes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np

from kbatch.errors import CorruptRecordError, DamagedLengthError
from kbatch.lib.decoder import MIN_MESSAGE, batch_at
from kbatch.lib.records import BatchTable, ControlRecords, Records, SegmentEnd, SkippedRange
from kbatch.lib.resync import HEADER_BYTES, candidates
from kbatch.lib.segment import DecodeOptions, decode_chunks
from kbatch.wire import LOG_OVERHEAD, UNBOUNDED, Header

_LENGTH, _MAGIC = int(Header.LENGTH), int(Header.MAGIC)
_DELTA = int(Header.LAST_OFFSET_DELTA)


def _int_at(buf, at: int, size: int) -> int:
    """The big-endian signed integer of ``size`` bytes at ``at``."""
    return int.from_bytes(buf[at:at + size], "big", signed=True)

MIN_ENTRY = MIN_MESSAGE     # the smallest length field: a magic 0 message (crc..value length)
RESYNC_WINDOW = 4 << 20


def offsets_only(opts: DecodeOptions) -> DecodeOptions:
    """The options of a transaction pass: the record loop stores offsets and
    skims the rest (keys, values and headers are checked, not kept)."""
    return replace(opts, columns=("offset",))


def batches_and_control(chunks) -> tuple[BatchTable, ControlRecords]:
    """Every batch header and control record of ``chunks``, joined (what a
    transaction pass keeps: one row per batch, not the records; each chunk
    is dropped once its tables are taken)."""
    tables, controls, shift = [], [], 0
    for chunk in chunks:
        tables.append(chunk.batches)
        controls.append(chunk.control.shifted(shift))
        shift += len(chunk.batches)
        del chunk
    if not tables:
        empty = Records.empty()
        tables, controls = [empty.batches], [empty.control]
    return BatchTable.concat(tables), ControlRecords.concat(controls)


def whole_batches(buf, max_batch_bytes: int, room: int | None = None) -> tuple[int, bool]:
    """``(end of the last whole batch, stepping stopped at a bad header)``.
    ``room``: bytes from ``buf[0]`` to the end of the data; a length above
    ``max_batch_bytes`` that runs past it (a torn or damaged tail, as a
    local file's decoder sees it) is not a bad header when the rest of the
    data is at most one batch: the caller carries it to the end."""
    n = len(buf)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        length = _int_at(buf, pos + _LENGTH, 4)
        if length > max_batch_bytes and room is not None \
                and LOG_OVERHEAD + length > room - pos \
                and room - pos <= max_batch_bytes + LOG_OVERHEAD:
            return pos, False
        if length < MIN_ENTRY or length > max_batch_bytes:
            return pos, True
        if length > n - pos - LOG_OVERHEAD:
            return pos, False
        pos += LOG_OVERHEAD + length
    return pos, False


def _shift(chunk: Records, base: int, url) -> Records:
    if base == 0:
        return chunk
    cols = dict(chunk.batches._all())
    cols["position"] = cols["position"] + np.int64(base)
    end = chunk.end
    if end is not None:
        error = end.error
        if isinstance(error, CorruptRecordError):
            error = _moved(error, base, url)
        end = SegmentEnd(end.valid_bytes + base, end.trailing_bytes, end.reason, error)
    skipped = tuple(g._replace(path=url, start=g.start + base, stop=g.stop + base)
                    for g in chunk.skipped)
    return chunk.replace(batches=BatchTable(cols), end=end, skipped=skipped)


def _moved(exc: CorruptRecordError, base: int, url) -> CorruptRecordError:
    new = type(exc)(exc.reason, path=url,
                    position=None if exc.position is None else exc.position + base,
                    base_offset=exc.base_offset,
                    batch_position=None if exc.batch_position is None
                    else exc.batch_position + base)
    return new


def _decode(buf, base: int, url, opts: DecodeOptions, chunk_records, chunk_bytes,
            final: bool, total_end: int, after_offset: int = -1,
            extra: dict | None = None) -> Iterator[Records]:
    """Chunks of ``buf`` (the object's bytes from ``base``); ``final``: it
    reaches the end of what is read (``total_end``). ``extra``: more
    arguments of ``decode_chunks`` (``control_only``, ``drop_positions`` as
    positions in the object)."""
    view = memoryview(buf)
    more = dict(extra or {})
    drops = more.get("drop_positions")
    if drops is not None:
        drops = np.asarray(drops, np.int64)
        more["drop_positions"] = drops[(drops >= base) & (drops < base + len(buf))] - base
    try:
        for chunk in decode_chunks(view, url, opts, chunk_records=chunk_records,
                                   chunk_bytes=chunk_bytes, after_offset=after_offset,
                                   more_follows=base + len(buf) < total_end, **more):
            if chunk.end is not None and not final and chunk.end.reason is None:
                chunk = chunk.replace(end=None)
            chunk = _shift(chunk, base, url)
            if chunk.end is not None and (final or chunk.end.reason is not None):
                e = chunk.end
                chunk = chunk.replace(end=SegmentEnd(e.valid_bytes,
                                                     total_end - e.valid_bytes,
                                                     e.reason, e.error))
            yield chunk
    except CorruptRecordError as exc:
        raise _moved(exc, base, url) from None
    finally:
        view.release()


def scan(source, opts: DecodeOptions, *, start: int = 0, stop: int | None = None,
         chunk_records: int = UNBOUNDED, chunk_bytes: int = 1 << 30,
         first: int | None = None, after_offset: int = -1,
         extra: dict | None = None) -> Iterator[Records]:
    """Records of ``source`` (a ``RangeSource`` or ``TieredSource``) from
    byte ``start`` (a batch boundary) to ``stop``, chunk by chunk; the last
    chunk carries ``end``. The consumer may stop early (close the
    generator): no further ranges are read. ``after_offset``: the last
    offset read before ``start``; ``extra``: see ``_decode``."""
    stop = source.size if stop is None else min(stop, source.size)
    if opts.on_corrupt == "skip":
        return _scan_skipping(source, opts, start, stop, chunk_records, chunk_bytes, first,
                              after_offset, extra)
    return _stream(source, opts, start, stop, chunk_records, chunk_bytes, first, after_offset,
                   extra)


def _stream(source, opts: DecodeOptions, start: int, stop: int, chunk_records, chunk_bytes,
            first: int | None, after_offset: int = -1,
            extra: dict | None = None) -> Iterator[Records]:
    url = source.url
    kwargs = {} if first is None else {"first": first}
    carry, carry_pos = b"", start
    blocks = source.blocks(start, stop, **kwargs)
    try:
        for pos, data in blocks:
            buf = carry + data if carry else data
            base = pos - len(carry)
            cut, bad = whole_batches(buf, opts.max_batch_bytes, stop - base)
            if bad:
                # the decoder says what is wrong here; nothing after it is read
                ended = None
                for chunk in _decode(buf, base, url, opts, chunk_records, chunk_bytes,
                                     True, stop, after_offset, extra):
                    ended = chunk.end
                    yield chunk
                if ended is not None and ended.reason is None:
                    raise CorruptRecordError("batch header with an impossible length",
                                             path=url, position=base + cut + 8)
                return
            if cut:
                ended = None
                for chunk in _decode(memoryview(buf)[:cut], base, url, opts, chunk_records,
                                     chunk_bytes, False, stop, after_offset, extra):
                    ended = chunk.end
                    if len(chunk.batches):
                        after_offset = max(after_offset,
                                           int(chunk.batches.last_offset.max()))
                    yield chunk
                if ended is not None:    # on_corrupt="stop" ended the data here
                    return
            carry, carry_pos = bytes(buf[cut:]), base + cut     # at most one batch
            del buf, data
    finally:
        blocks.close()
    yield from _decode(carry, carry_pos, url, opts, chunk_records, chunk_bytes, True, stop,
                       after_offset, extra)


def _scan_skipping(source, opts: DecodeOptions, start: int, stop: int, chunk_records,
                   chunk_bytes, first, after_offset: int = -1,
                   extra: dict | None = None) -> Iterator[Records]:
    """``on_corrupt="skip"``: stream with the decoder stopping at damage,
    find the next valid batch in ranges, go on from there (module docstring)."""
    halt = replace(opts, on_corrupt="stop")
    gaps: tuple = ()        # ride on the chunk after them, as in a local read
    last = after_offset
    pos = start
    while True:
        damage = None
        for chunk in _stream(source, halt, pos, stop, chunk_records, chunk_bytes, first, last,
                             extra):
            if len(chunk.batches):
                last = max(last, int(chunk.batches.last_offset.max()))
            if chunk.end is not None and chunk.end.reason == "corrupt":
                damage, chunk = chunk.end, chunk.replace(end=None)
            if gaps:
                chunk = chunk.replace(skipped=gaps + tuple(chunk.skipped))
                gaps = ()
            if (damage is None or len(chunk) or len(chunk.batches) or len(chunk.control)
                    or chunk.skipped):
                yield chunk
        if damage is None:
            return
        found = next_valid_in_ranges(source, damage.valid_bytes + 1, stop, last,
                                     opts.max_batch_bytes)
        error = None if damage.error is None else str(damage.error)
        # as a local skip read names it: a damaged length that runs past the end
        reason = "truncated" if isinstance(damage.error, DamagedLengthError) else "corrupt"
        gap = SkippedRange(source.url, damage.valid_bytes, stop if found is None else found[0],
                           reason, last if last >= 0 else None,
                           None if found is None else found[1], error)
        if found is None:
            yield Records.empty().replace(skipped=(gap,), end=SegmentEnd(stop, 0, None, None))
            return
        gaps, pos, first = (gap,), found[0], None


def next_valid_in_ranges(source, start: int, stop: int, after_offset: int,
                         max_batch_bytes: int) -> tuple[int, int] | None:
    """``(position, base offset)`` of the first valid batch at or after
    ``start`` ending by ``stop`` whose last offset is above ``after_offset``
    (``kbatch.lib.resync.next_valid_batch``'s rule, so a remote object and a
    local file resume at the same batch), or None. Reads the object in
    windows of ``RESYNC_WINDOW``; a candidate whose batch runs past its
    window is read alone (one range of at most ``max_batch_bytes``).
    Keeps in memory one window and that batch."""
    url = source.url
    pos = max(start, 0)
    tail = HEADER_BYTES - 1          # the bytes after a candidate's first that it needs
    while stop - pos >= HEADER_BYTES:
        buf = source.read(pos, min(stop, pos + RESYNC_WINDOW + 64))
        w = np.frombuffer(buf, np.uint8)
        count = min(len(w) - tail, RESYNC_WINDOW)
        for c in candidates(w[:count + tail], stop - pos, max_batch_bytes).tolist():
            if not _may_end_above(buf, c, after_offset):
                continue
            length = _int_at(buf, c + _LENGTH, 4)
            end = c + LOG_OVERHEAD + length
            if end <= len(buf):
                view, at = memoryview(buf), c
            else:
                view, at = memoryview(source.read(pos + c, pos + end)), 0
            try:
                row = batch_at(view, at, url, stop=at + LOG_OVERHEAD + length)
            finally:
                view.release()
            if (row is not None and int(row["position"]) == at
                    and int(row["last_offset"]) > after_offset):
                return pos + c, int(row["base_offset"])
        pos += count
    return None


def _may_end_above(buf: bytes, c: int, after_offset: int) -> bool:
    """False when the header at ``c`` (when in ``buf``) names a last offset
    at or below ``after_offset``: the batch cannot be the one sought, and
    its bytes need not be read (magic 2: base offset + last offset delta;
    magic 0/1: the message's own offset)."""
    if len(buf) - c < _DELTA + 4:
        return True
    base = _int_at(buf, c, 8)
    if buf[c + _MAGIC] == 2:
        base += _int_at(buf, c + _DELTA, 4)
    return base > after_offset
