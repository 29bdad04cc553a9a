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
``max_batch_bytes``, or zero padding) ends the stepping: the rest of that
buffer goes to the decoder, which reports it as it does for a local file
(truncated, zero padding, corrupt). ``on_corrupt="skip"`` needs to search
past damage: the remainder of the object is then read into memory and
decoded as one buffer.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from kbatch.errors import CorruptRecordError
from kbatch.lib.records import BatchTable, Records, SegmentEnd
from kbatch.lib.segment import DecodeOptions, decode_chunks

MIN_ENTRY = 14     # the smallest length field: a magic 0 message (crc..value length)


def whole_batches(buf, max_batch_bytes: int) -> tuple[int, bool]:
    """``(end of the last whole batch, stepping stopped at a bad header)``."""
    n = len(buf)
    pos = 0
    while n - pos >= 12:
        length = int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True)
        if length < MIN_ENTRY or length > max_batch_bytes:
            return pos, True
        if length > n - pos - 12:
            return pos, False
        pos += 12 + length
    return pos, False


def _shift(chunk: Records, base: int, url) -> Records:
    if base == 0:
        return chunk
    cols = dict(chunk.batches._all())
    cols["position"] = cols["position"] + np.int64(base)
    end = chunk.end
    if end is not None:
        end = SegmentEnd(end.valid_bytes + base, end.trailing_bytes, end.reason, end.error)
    return chunk.replace(batches=BatchTable(cols), end=end)


def _moved(exc: CorruptRecordError, base: int, url) -> CorruptRecordError:
    new = type(exc)(exc.reason, path=url,
                    position=None if exc.position is None else exc.position + base,
                    base_offset=exc.base_offset,
                    batch_position=None if exc.batch_position is None
                    else exc.batch_position + base)
    return new


def _decode(buf, base: int, url, opts: DecodeOptions, chunk_records, chunk_bytes,
            final: bool, total_end: int) -> Iterator[Records]:
    view = memoryview(buf)
    try:
        for chunk in decode_chunks(view, url, opts, chunk_records=chunk_records,
                                   chunk_bytes=chunk_bytes):
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
         chunk_records: int = 1 << 62, chunk_bytes: int = 1 << 30,
         first: int | None = None) -> Iterator[Records]:
    """Records of ``source`` (a ``RangeSource`` or ``TieredSource``) from
    byte ``start`` (a batch boundary) to ``stop``, chunk by chunk; the last
    chunk carries ``end``. The consumer may stop early (close the
    generator): no further ranges are read."""
    url = source.url
    stop = source.size if stop is None else min(stop, source.size)
    if opts.on_corrupt == "skip":
        data = source.read(start, stop)
        yield from _decode(data, start, url, opts, chunk_records, chunk_bytes, True, stop)
        return
    kwargs = {} if first is None else {"first": first}
    carry, carry_pos = b"", start
    blocks = source.blocks(start, stop, **kwargs)
    try:
        for pos, data in blocks:
            buf = carry + data if carry else data
            base = pos - len(carry)
            cut, bad = whole_batches(buf, opts.max_batch_bytes)
            if bad:
                # the decoder says what is wrong here; nothing after it is read
                ended = None
                for chunk in _decode(buf, base, url, opts, chunk_records, chunk_bytes,
                                     True, stop):
                    ended = chunk.end
                    yield chunk
                if ended is not None and ended.reason is None:
                    raise CorruptRecordError("batch header with an impossible length",
                                             path=url, position=base + cut + 8)
                return
            if cut:
                ended = None
                for chunk in _decode(memoryview(buf)[:cut], base, url, opts, chunk_records,
                                     chunk_bytes, False, stop):
                    ended = chunk.end
                    yield chunk
                if ended is not None:    # on_corrupt="stop" ended the data here
                    return
            carry, carry_pos = bytes(buf[cut:]), base + cut     # at most one batch
            del buf, data
    finally:
        blocks.close()
    yield from _decode(carry, carry_pos, url, opts, chunk_records, chunk_bytes, True, stop)

