"""``kbatch.read_segment`` / ``kbatch.iter_segment``: one segment, wherever it is.

A bytes-like object (bytes, bytearray, memoryview, mmap, numpy uint8) is
decoded in place. Anything else is a target for the door
(``kbatch.lib.open``: a path, a ``file://`` URL, an object URL, a path in a
filesystem object), which names the segment and its byte source; the
decode is then the same code for every source (``kbatch.lib.segment``):

    read_segment   the source's window (a file's mapping, or the object's
                   range fetched) decoded whole, as for a file
    iter_segment   the source's streaming decode (a mapping, or ranges
                   read ahead), through the one chunked read
"""

from __future__ import annotations

from typing import Iterator

from kbatch.lib import segment as decode
from kbatch.lib.open import expect
from kbatch.lib.paths import PathKind
from kbatch.lib.records import Records
from kbatch.lib.storage import Storage

WHAT = "read_segment and iter_segment read one segment file (open_log reads a partition)"


def _is_buffer(source) -> bool:
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        return isinstance(source, bytes)
    try:
        memoryview(source).release()
        return True
    except TypeError:
        return False


def _segment(source, storage: Storage, start, stop):
    """The segment ``source`` names, with ``start`` checked against its size
    as the decoder checks a buffer's (before anything is fetched)."""
    seg = expect(source, PathKind.SEGMENT, what=WHAT, storage=storage).segment()
    size = seg.source.size
    end = size if stop is None or stop < 0 or stop > size else stop
    if start < 0 or start > end:
        raise ValueError(f"start {start} outside [0, {end}]")
    return seg


def read_segment(source, **kwargs) -> Records:
    """``kbatch.lib.segment.read_segment`` of a buffer, a path or a URL
    (storage keywords: ``kbatch.lib.storage.Storage``). An object is
    fetched whole (its ``[start, stop)``) and decoded as a file's mapping
    is: keeps in memory also those bytes."""
    if _is_buffer(source):
        return decode.read_segment(source, **kwargs)
    storage, rest = Storage.split(kwargs)
    start, stop = rest.pop("start", 0), rest.pop("stop", None)
    isolation = rest.pop("isolation", "read_uncommitted")
    opts = decode.read_options("read_segment", isolation=isolation, **rest)
    seg = _segment(source, storage, start, stop)
    with seg.source.window(start, stop, populate=True, copy=not opts.zero_copy) as view:
        return decode.read_view(view, seg.name, opts, isolation, start, stop)


def iter_segment(source, **kwargs) -> Iterator[Records]:
    """``kbatch.lib.segment.iter_segment`` of a buffer, a path or a URL: an
    object is read in ranges (memory: one chunk and the ranges in flight)."""
    if _is_buffer(source):
        return decode.iter_segment(source, **kwargs)
    storage, rest = Storage.split(kwargs)
    start, stop = rest.pop("start", 0), rest.pop("stop", None)
    isolation = rest.pop("isolation", "read_uncommitted")
    chunk_records = rest.pop("chunk_records", decode.DEFAULT_CHUNK_RECORDS)
    chunk_bytes = rest.pop("chunk_bytes", decode.DEFAULT_CHUNK_BYTES)
    opts = decode.read_options("iter_segment", isolation=isolation, **rest)
    if chunk_records < 1 or chunk_bytes < 1:
        raise ValueError("chunk_records and chunk_bytes must be positive")
    seg = _segment(source, storage, start, stop)
    return decode.iter_decoded(seg.source.chunks, seg.name, opts, start, stop, chunk_records,
                               chunk_bytes, isolation)


read_segment.__wrapped__ = decode.read_segment      # inspect.signature shows its keywords
iter_segment.__wrapped__ = decode.iter_segment
read_segment.__doc__ = (decode.read_segment.__doc__ or "") + """
    A path or URL goes through the door (``kbatch.lib.open``; storage
    keywords ``storage_options``, ``filesystem``, ``layout``,
    ``private_key``...): an object is fetched and decoded as a file is."""
iter_segment.__doc__ = (decode.iter_segment.__doc__ or "") + """
    A URL is read in ranges (one chunk and the ranges in flight in memory)."""
