"""The bytes of one segment, wherever they are: a byte source.

    MappedFile     a local file, memory-mapped (never read into a bytes object)
    RemoteBytes    an object in storage (``objects.RangeSource``) or a tiered
                   segment (``tiered.TieredSource``), read in ranges

Both serve the same things, every position a position in the segment's own
bytes, so that everything above them (seeks, index checks, the run loop of
``kbatch.lib.chain``, resync after damage) is one piece of code:

    size, version()           how long it is; a value that changes when it does
    window(start, stop)       a buffer ``v`` with ``v[i]`` the byte at ``i`` for
                              ``start <= i < stop``: a file's mapping, or for an
                              object ``[start, stop)`` fetched into a sparse
                              buffer (calloc'd: the pages before ``start`` are
                              never touched)
    chunks(opts, ...)         a streaming decode of ``[start, stop)``: one chunk
                              in memory (an object: plus the ranges in flight)
    header_rows(start)        batch header rows from ``start`` to the first
                              damage, in pieces (an object: window by window)
    batch_at(position)        the header row of a whole CRC-valid batch there, or None
    prefetch(start, stop)     start fetching a window the read will ask for next

A remote source keeps the last small ranges it fetched (a seek's check of
an index entry, then the read from that entry, cost one GET).
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from kbatch.lib.decoder import batch_at, header_walk_ends
from kbatch.lib.objects import FIRST_BLOCK
from kbatch.lib.scan import scan
from kbatch.lib.segment import (DEFAULT_MAX_BATCH_BYTES, decode_chunks, open_source,
                                zeros_from)
from kbatch.wire import LOG_OVERHEAD, UNBOUNDED, Header

CACHE_SPAN = 2 * FIRST_BLOCK      # ranges kept for a following read are at most this long
CACHE_SPANS = 4
CHECK_BYTES = 64 << 10            # what a batch check fetches first (most batches fit)


class MappedFile:
    """A local segment file (see the module docstring)."""

    remote = False

    def __init__(self, path, size: int | None = None):
        self.path = os.fspath(path)
        self.name = self.path
        self._size = size

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r})"

    @property
    def size(self) -> int:
        return os.stat(self.path).st_size

    def version(self) -> tuple:
        st = os.stat(self.path)
        return st.st_size, st.st_mtime_ns

    @contextmanager
    def window(self, start: int = 0, stop: int | None = None, *, populate: bool = False):
        """The whole mapping (``start``/``stop`` only say what is read)."""
        with open_source(self.path, populate=populate) as (view, _):
            yield view

    def prefetch(self, start: int, stop: int | None) -> None:
        """Nothing to do: the mapping is faulted in as it is read."""

    def chunks(self, opts, *, start: int = 0, stop: int | None = None,
               chunk_records: int = UNBOUNDED, chunk_bytes: int = 1 << 30,
               after_offset: int = -1, **extra) -> Iterator:
        with open_source(self.path) as (view, path):
            yield from decode_chunks(view, path, opts, start=start, stop=stop,
                                     chunk_records=chunk_records, chunk_bytes=chunk_bytes,
                                     after_offset=after_offset, **extra)

    def header_rows(self, start: int = 0, *,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[np.ndarray]:
        with open_source(self.path) as (view, path):
            rows, _, _ = header_walk_ends(view, path, start, zeros_from=zeros_from(view))
        yield rows

    def batch_at(self, position: int, stop: int | None = None, *, read_follows: bool = False,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES):
        with open_source(self.path) as (view, path):
            return batch_at(view, position, path, stop=stop)


class RemoteBytes:
    """An object's bytes read in ranges (see the module docstring).
    ``raw``: a ``RangeSource`` or a ``TieredSource`` (``size``, ``read``,
    ``blocks``, ``url``, ``block``). ``ahead``: what a batch check fetches
    when the read follows from that batch (an object: a first range that
    often holds the whole read; a tiered segment: its chunks cost a
    decode each, so less)."""

    remote = True

    def __init__(self, raw, version=None, ahead: int = FIRST_BLOCK):
        self.raw = raw
        self.ahead = ahead
        self.name = raw.url
        self.url = raw.url
        self.block = raw.block
        self._version = version
        self._lock = threading.Lock()
        self._spans: list[tuple[int, bytes]] = []
        self._ahead: dict[tuple[int, int], object] = {}

    def __repr__(self) -> str:
        return f"RemoteBytes({self.url!r})"

    @property
    def size(self) -> int:
        return self.raw.size

    def version(self) -> tuple:
        return (self.size,) if self._version is None else self._version

    # --- ranges ----------------------------------------------------------

    def _cached(self, start: int, stop: int) -> bytes | None:
        with self._lock:
            for a, data in self._spans:
                if a <= start and stop <= a + len(data):
                    return data[start - a:stop - a]
        return None

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` (clipped to the object); a range of at
        most ``CACHE_SPAN`` bytes is kept for the reads that follow."""
        stop = min(stop, self.size)
        if stop <= start:
            return b""
        hit = self._cached(start, stop)
        if hit is not None:
            return hit
        data = self.raw.read(start, stop)
        if len(data) <= CACHE_SPAN:
            with self._lock:
                self._spans = [(start, data)] + self._spans[:CACHE_SPANS - 1]
        return data

    def _fill(self, buf: np.ndarray, start: int, stop: int) -> None:
        """``buf[start:stop]`` from the cache and then from ranged reads."""
        pos = start
        with self._lock:
            spans = list(self._spans)
        progress = True
        while progress and pos < stop:
            progress = False
            for a, data in spans:
                if a <= pos < a + len(data):
                    take = min(a + len(data), stop) - pos
                    buf[pos:pos + take] = np.frombuffer(data, np.uint8, take, pos - a)
                    pos += take
                    progress = True
                    break
        if pos < stop:
            for at, data in self.raw.blocks(pos, stop, first=self.block):
                buf[at:at + len(data)] = np.frombuffer(data, np.uint8)
                del data

    def _fetched(self, start: int, stop: int) -> np.ndarray:
        # calloc'd zeros: a large buffer's untouched pages cost nothing
        buf = np.zeros(max(stop, 1), np.uint8)
        self._fill(buf, start, stop)
        return buf

    def prefetch(self, start: int, stop: int | None) -> None:
        """Fetch ``[start, stop)`` in the background for the ``window`` that
        asks for it next (one at a time)."""
        stop = self.size if stop is None else min(stop, self.size)
        key = (start, stop)
        with self._lock:
            if key in self._ahead or stop <= start:
                return
            done = threading.Event()
            box: dict = {}
            self._ahead = {key: (done, box)}

        def run():
            try:
                box["buf"] = self._fetched(start, stop)
            except BaseException as exc:     # handed to the window that asks for it
                box["error"] = exc
            finally:
                done.set()
        threading.Thread(target=run, name="kbatch-prefetch", daemon=True).start()

    @contextmanager
    def window(self, start: int = 0, stop: int | None = None, *, populate: bool = False):
        """``[start, stop)`` fetched (see the module docstring): a view whose
        positions are the object's. Keeps in memory the bytes fetched, as
        long as the view or a zero-copy result over it lives."""
        stop = self.size if stop is None else min(stop, self.size)
        start = min(start, stop)
        with self._lock:
            ahead = self._ahead.pop((start, stop), None)
        if ahead is not None:
            done, box = ahead
            done.wait()
            if "error" in box:
                raise box["error"]
            buf = box["buf"]
        else:
            buf = self._fetched(start, stop)
        view = memoryview(buf)
        try:
            yield view
        finally:
            view.release()

    # --- decoding ----------------------------------------------------------

    def chunks(self, opts, *, start: int = 0, stop: int | None = None,
               chunk_records: int = UNBOUNDED, chunk_bytes: int = 1 << 30,
               after_offset: int = -1, **extra) -> Iterator:
        """A streaming decode in ranges (``kbatch.lib.scan``)."""
        yield from scan(self.raw, opts, start=start, stop=stop, chunk_records=chunk_records,
                        chunk_bytes=chunk_bytes, after_offset=after_offset,
                        extra=extra or None)

    def header_rows(self, start: int = 0, *,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[np.ndarray]:
        """Header rows from ``start`` to the first damage, one window of
        ``block`` bytes at a time (a batch cut by a window's end is read
        again at the start of the next one, whole). Keeps in memory one
        window and its rows."""
        size = self.size
        pos, want = start, self.block
        while pos < size:
            stop = min(size, pos + want)
            with self.window(pos, stop) as view:
                rows, valid_end, reason = header_walk_ends(view, self.url, pos, stop)
                length = (int.from_bytes(view[pos + Header.LENGTH:pos + LOG_OVERHEAD], "big",
                                         signed=True) if stop - pos >= LOG_OVERHEAD else -1)
            if len(rows):
                yield rows
            if valid_end >= stop:
                pos, want = stop, self.block
                continue
            if reason != "truncated" or stop >= size:
                return                       # damage, or the object's torn end
            if valid_end > pos:
                pos, want = valid_end, self.block    # cut by the window: on from its start
                continue
            # one batch longer than the window: a window that holds it whole
            if length < 0 or length > max_batch_bytes:
                return
            want = max(self.block, LOG_OVERHEAD + length)

    def _length_at(self, position: int) -> int | None:
        head = self.read(position, position + LOG_OVERHEAD)
        if len(head) < LOG_OVERHEAD:
            return None
        return int.from_bytes(head[Header.LENGTH:Header.LENGTH + 4], "big", signed=True)

    def batch_at(self, position: int, stop: int | None = None, *, read_follows: bool = False,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES):
        """The header row of a whole CRC-valid batch at ``position`` (ending
        by ``stop``), or None; fetches that batch (at least ``CHECK_BYTES``
        from it, or ``ahead`` when ``read_follows`` from it: kept for the
        read), nothing when a range fetched before holds it."""
        size = self.size if stop is None else min(stop, self.size)
        if position < 0 or size - position < LOG_OVERHEAD:
            return None
        if self._cached(position, position + LOG_OVERHEAD) is None:
            first = max(self.ahead, CHECK_BYTES) if read_follows else CHECK_BYTES
            self.read(position, min(size, position + first))   # kept for what follows
        length = self._length_at(position)
        if length is None or length < 0 or length > max_batch_bytes \
                or LOG_OVERHEAD + length > size - position:
            return None
        end = position + LOG_OVERHEAD + length
        with self.window(position, end) as view:
            return batch_at(view, position, self.url, stop=end)


class FileRange:
    """A local file served like an object (``size``, ``read``, ``blocks``):
    what a tiered segment copied to a local disk is read through (its
    ``.log`` holds transformed chunks, not batches, so it is not mapped)."""

    def __init__(self, path, size: int | None = None, *, block: int = 8 << 20,
                 concurrency: int = 1):
        self.path = os.fspath(path)
        self.url = self.path
        self.block = block
        self.concurrency = concurrency
        self._size = size

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = os.stat(self.path).st_size
        return self._size

    def read(self, start: int, stop: int) -> bytes:
        from kbatch.errors import CorruptRecordError
        from kbatch.lib.files import open_regular, pread_exact
        stop = min(stop, self.size)
        if stop <= start:
            return b""
        fd = open_regular(self.path)
        if fd is None:
            raise FileNotFoundError(self.path)
        try:
            data = pread_exact(fd, stop - start, start)
        finally:
            os.close(fd)
        if len(data) != stop - start:
            raise CorruptRecordError(f"file shorter than its listed size {self.size}",
                                     path=self.path, position=start + len(data))
        return data

    def blocks(self, start: int = 0, stop: int | None = None, *, first: int = FIRST_BLOCK):
        stop = self.size if stop is None else min(stop, self.size)
        pos, step = start, min(first, self.block)
        while pos < stop:
            end = min(pos + step, stop)
            yield pos, self.read(pos, end)
            pos, step = end, self.block
