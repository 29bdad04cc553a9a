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
an index entry, then the read from that entry, cost one GET). Its bytes
are those of the object as listed, never of two versions
(``kbatch.lib.objects``): once a read of it has its bytes in hand (a
``window``, or the end of ``chunks`` or ``header_rows``) one HEAD confirms
the object is still the one listed, else the read raises the
``CorruptRecordError`` of a replaced object. So neither a read in flight
while the object is overwritten nor a new read of an open log after it was
(with ranges kept from an earlier read) gives records of two versions.
A check of one batch (``batch_at``, a seek's or a timestamp search's) is
not confirmed: the read that follows it is.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from kbatch.lib.decoder import batch_at, header_walk_ends
from kbatch.lib.objects import FIRST_BLOCK
from kbatch.lib.resync import HEADER_BYTES, candidates, next_valid_batch
from kbatch.lib.segment import (DEFAULT_MAX_BATCH_BYTES, decode_chunks, open_source,
                                zeros_from)
from kbatch.wire import LOG_OVERHEAD, UNBOUNDED, Header

_LENGTH, _MAGIC = int(Header.LENGTH), int(Header.MAGIC)
_DELTA = int(Header.LAST_OFFSET_DELTA)


def _int_at(buf, at: int, size: int) -> int:
    """The big-endian signed integer of ``size`` bytes at ``at``."""
    return int.from_bytes(buf[at:at + size], "big", signed=True)

CACHE_SPAN = 2 * FIRST_BLOCK      # ranges kept for a following read are at most this long
CACHE_BYTES = 16 * CACHE_SPAN     # ... and all of them together, every object's
CACHE_SPANS = 512
CHECK_BYTES = 64 << 10            # what a batch check fetches first (most batches fit)
RESYNC_WINDOW = 4 << 20           # what a search for the next valid batch reads at a time


class MappedFile:
    """A local segment file (see the module docstring)."""

    remote = False

    def __init__(self, path):
        self.path = os.fspath(path)
        self.name = self.path

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r})"

    @property
    def size(self) -> int:
        return os.stat(self.path).st_size

    def version(self) -> tuple:
        st = os.stat(self.path)
        return st.st_size, st.st_mtime_ns

    @contextmanager
    def window(self, start: int = 0, stop: int | None = None, *, populate: bool = False,
               copy: bool = False, confirm: bool = True):
        """The whole mapping (``start``/``stop`` only say what is read);
        ``copy``: a copy-mode read of the whole file, which may be copied
        instead (``open_source``). ``confirm``: an object's (nothing here)."""
        with open_source(self.path, populate=populate,
                         copy=copy and start == 0 and stop is None) as (view, _):
            yield view

    def prefetch(self, start: int, stop: int | None) -> None:
        """Nothing to do: the mapping is faulted in as it is read."""

    def drop_prefetch(self) -> None:
        """Nothing to do (see ``prefetch``)."""

    def chunks(self, opts, *, start: int = 0, stop: int | None = None,
               chunk_records: int = UNBOUNDED, chunk_bytes: int = 1 << 30,
               after_offset: int = -1, **extra) -> Iterator:
        with open_source(self.path) as (view, path):
            yield from decode_chunks(view, path, opts, start=start, stop=stop,
                                     chunk_records=chunk_records, chunk_bytes=chunk_bytes,
                                     after_offset=after_offset, **extra)

    def header_rows(self, start: int = 0, *,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[np.ndarray]:
        """Header rows from ``start``, past damage to the next valid batch
        (``kbatch.lib.resync``), to the end of the data."""
        with open_source(self.path) as (view, path):
            pos, last, stop = start, -1, len(view)
            while True:
                rows, valid_end, reason = header_walk_ends(view, path, pos,
                                                           zeros_from=zeros_from(view))
                yield rows
                if len(rows):
                    last = max(last, int(rows["last_offset"].max()))
                if reason not in ("corrupt", "truncated") or valid_end >= stop:
                    return
                found = next_valid_batch(view, valid_end + 1, stop, after_offset=last,
                                         max_batch_bytes=max_batch_bytes, path=path)
                if found is None:
                    return
                pos = found[0]

    def batch_at(self, position: int, stop: int | None = None, *, read_follows: bool = False,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES):
        with open_source(self.path) as (view, path):
            return batch_at(view, position, path, stop=stop)


class SpanCache:
    """Ranges kept for the reads that follow them (an index check's batch,
    then the read from it), for every object together: at most
    ``budget`` bytes and ``count`` ranges, the least recently used go
    first. One per process: what a log keeps does not grow with its
    partitions, nor live as long as the log."""

    def __init__(self, budget: int = CACHE_BYTES, count: int = CACHE_SPANS):
        self.budget, self.count = budget, count
        self._lock = threading.Lock()
        self._spans: OrderedDict = OrderedDict()     # (owner, start) -> bytes
        self._bytes = 0

    def get(self, owner, start: int, stop: int) -> bytes | None:
        with self._lock:
            for key in reversed(self._spans):
                if key[0] is owner:
                    data = self._spans[key]
                    if key[1] <= start and stop <= key[1] + len(data):
                        self._spans.move_to_end(key)
                        return data[start - key[1]:stop - key[1]]
        return None

    def spans(self, owner) -> list[tuple[int, bytes]]:
        with self._lock:
            return [(key[1], data) for key, data in self._spans.items() if key[0] is owner]

    def put(self, owner, start: int, data: bytes) -> None:
        with self._lock:
            old = self._spans.pop((owner, start), None)
            self._bytes -= 0 if old is None else len(old)
            self._spans[(owner, start)] = data
            self._bytes += len(data)
            while self._bytes > self.budget or len(self._spans) > self.count:
                _, dropped = self._spans.popitem(last=False)
                self._bytes -= len(dropped)

    @property
    def nbytes(self) -> int:
        return self._bytes


SPANS = SpanCache()


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
        self._owner = object()            # its ranges in ``SPANS``
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
        return SPANS.get(self._owner, start, stop)

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
            SPANS.put(self._owner, start, data)
        return data

    def _fill(self, buf: np.ndarray, start: int, stop: int) -> None:
        """``buf[start:stop]`` from the cache and then from ranged reads."""
        pos = start
        spans = SPANS.spans(self._owner)
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

    def _fetched(self, start: int, stop: int, confirm: bool = False) -> np.ndarray:
        # calloc'd zeros: a large buffer's untouched pages cost nothing
        buf = np.zeros(max(stop, 0), np.uint8)
        self._fill(buf, start, stop)
        if confirm:
            self.confirm()
        return buf

    def confirm(self) -> None:
        """One HEAD: the object is still the one listed (else a
        ``CorruptRecordError``: see the module docstring)."""
        self.raw.confirm()

    def prefetch(self, start: int, stop: int | None) -> None:
        """Fetch ``[start, stop)`` in the background for the ``window`` that
        asks for it next (one at a time), and confirm the object."""
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
                box["buf"] = self._fetched(start, stop, confirm=True)
            except BaseException as exc:     # handed to the window that asks for it
                box["error"] = exc
            finally:
                done.set()
        threading.Thread(target=run, name="kbatch-prefetch", daemon=True).start()

    def drop_prefetch(self) -> None:
        """Forget a prefetch no window asked for (a read that stopped or
        raised first): its bytes go when its fetch ends."""
        with self._lock:
            self._ahead = {}

    @contextmanager
    def window(self, start: int = 0, stop: int | None = None, *, populate: bool = False,
               copy: bool = False, confirm: bool = True):
        """``[start, stop)`` fetched (see the module docstring): a view whose
        positions are the object's. Keeps in memory the bytes fetched, as
        long as the view or a zero-copy result over it lives. ``confirm``:
        the object is confirmed once they are fetched (one HEAD), unless
        the caller's read does that itself."""
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
            buf = self._fetched(start, stop, confirm)
        view = memoryview(buf)
        try:
            yield view
        finally:
            view.release()

    # --- decoding ----------------------------------------------------------

    def fetched_view(self, start: int, stop: int) -> memoryview:
        """``[start, stop)`` fetched into a buffer whose positions are the
        object's (see ``window``), as a memoryview that keeps it alive."""
        stop = min(stop, self.size)
        if stop <= 0:
            return memoryview(b"")
        return memoryview(self._fetched(min(start, stop), stop))

    def chunks(self, opts, *, start: int = 0, stop: int | None = None,
               chunk_records: int = UNBOUNDED, chunk_bytes: int = 1 << 30,
               after_offset: int = -1, **extra) -> Iterator:
        """A streaming decode window by window: the one chunked decode
        (``segment.decode_chunks``) over ``RangeWindows``, so the chunks,
        ends, skipped ranges and errors are those of the same bytes in a
        file. Keeps in memory one chunk and one window (``block`` bytes, or
        one batch when a batch is longer; the windows a zero-copy chunk's
        views point into)."""
        stop = self.size if stop is None else min(stop, self.size)
        windows = RangeWindows(self, start, stop, opts.max_batch_bytes)
        yield from decode_chunks(None, self.name, opts, start=start, stop=stop,
                                 chunk_records=chunk_records, chunk_bytes=chunk_bytes,
                                 after_offset=after_offset, windows=windows, **extra)
        self.confirm()      # after the last chunk: raises before the read ends

    def header_rows(self, start: int = 0, *,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[np.ndarray]:
        """Header rows from ``start``, past damage to the next valid batch (as
        ``MappedFile.header_rows``), one window of ``block`` bytes at a time (a
        batch cut by a window's end is read again at the start of the next
        one, whole); the object confirmed after the last. Keeps in memory
        one window and its rows."""
        yield from self._header_rows(start, max_batch_bytes)
        self.confirm()

    def _header_rows(self, start: int, max_batch_bytes: int) -> Iterator[np.ndarray]:
        size = self.size
        pos, want, last = start, self.block, -1
        while pos < size:
            stop = min(size, pos + want)
            with self.window(pos, stop, confirm=False) as view:
                rows, valid_end, reason = header_walk_ends(view, self.url, pos, stop,
                                                           more_follows=stop < size)
                length = (int.from_bytes(view[pos + Header.LENGTH:pos + LOG_OVERHEAD], "big",
                                         signed=True) if stop - pos >= LOG_OVERHEAD else -1)
            if len(rows):
                yield rows
                last = max(last, int(rows["last_offset"].max()))
            if valid_end >= stop:
                pos, want = stop, self.block
                continue
            if reason == "truncated" and stop < size:
                if valid_end > pos:
                    pos, want = valid_end, self.block    # cut by the window: on from there
                    continue
                if 0 < length and valid_end + LOG_OVERHEAD + length <= size:
                    want = max(self.block, LOG_OVERHEAD + length)   # one batch, whole
                    continue
            if reason not in ("corrupt", "truncated"):
                return
            # damage (or a length past the end): on at the next valid batch
            found = next_valid_in_ranges(self.raw, valid_end + 1, size, last, max_batch_bytes)
            if found is None:
                return
            pos, want = found[0], self.block

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
        with self.window(position, end, confirm=False) as view:
            return batch_at(view, position, self.url, stop=end)


class RangeWindows:
    """The windows ``decode_chunks`` reads an object's ``[start, stop)``
    through: ``block`` bytes at a time, a window always holding the whole
    batch the decoder needs next. The bytes come from one stream of ranged
    reads (``raw.blocks``: the first range alone, then ``concurrency``
    ranges in flight ahead of the decoder); a window's bytes the next one
    needs again (a batch cut by its end) are kept, not fetched twice. A
    jump past what was read (the resync after damage) starts the stream
    again there. Past the current window it looks with the object's
    ranges (``RangeFinders``). Keeps in memory one window, the bytes kept
    for the next one and the ranges in flight."""

    def __init__(self, src: RemoteBytes, start: int, stop: int, max_batch_bytes: int):
        self.src = src
        self.stop = stop
        self.max_batch_bytes = max_batch_bytes
        self._wstart = start
        self._zeros_to_end = False    # zeros run from the decoder's stop to ``stop``
        self._stream = None           # (position, bytes) from ``_have_at + len(_have)`` on
        self._have_at, self._have = start, bytearray()   # read, not yet passed

    def first(self, start: int):
        return self.next(start, 0)

    def next(self, position: int, need: int):
        """The window from ``position`` (at least ``need`` bytes, when the
        object has them)."""
        wstop = min(self.stop, position + max(need, self.src.block))
        have_end = self._have_at + len(self._have)
        if not self._have_at <= position <= have_end or self._stream is None:
            self._restart(position)
            have_end = position
        del self._have[:position - self._have_at]      # the decoder never goes back
        self._have_at = position
        while have_end < wstop:
            block = next(self._stream, None)
            if block is None:
                break
            self._have += block[1]
            have_end += len(block[1])
        wstop = min(wstop, have_end)
        buf = np.zeros(wstop, np.uint8)        # positions are the object's
        buf[position:wstop] = np.frombuffer(self._have, np.uint8, wstop - position)
        self._wstart = position
        return memoryview(buf), wstop

    def _restart(self, position: int) -> None:
        if self._stream is not None:
            self._stream.close()               # cancels the reads in flight
        self._stream = self.src.raw.blocks(position, self.stop, first=self.src.block)
        self._have_at, self._have = position, bytearray()

    def _bytes(self, start: int, stop: int) -> bytes:
        """``[start, stop)`` from what was read when it holds them, else fetched."""
        if self._have_at <= start and stop <= self._have_at + len(self._have):
            return bytes(self._have[start - self._have_at:stop - self._have_at])
        return self.src.read(start, stop)

    def holds(self, view, position: int) -> bool:
        return self._wstart <= position < len(view)

    def more_follows(self, window_stop: int) -> bool:
        return window_stop < self.stop and not self._zeros_to_end

    def needs(self, dec, window_stop: int) -> int | None:
        """Bytes the next window must hold from where the decoder stopped,
        or None when the data ends there (its end, or damage)."""
        if window_stop >= self.stop:
            return None
        at = dec.valid_end
        if dec.end_reason is None and at >= window_stop:
            return 0                          # whole batches to the window's end
        if dec.end_reason != "truncated":
            return None                       # damage: the decode's end decides
        head = self._bytes(at, at + LOG_OVERHEAD)
        if len(head) < LOG_OVERHEAD:
            return None
        if not any(head):
            # zeros to the window's end: a file's mapping sees them run to the
            # end (padding: the next window is the last) or meet other bytes
            # (damage: the next window holds the first of them)
            other = self._first_nonzero(window_stop)
            if other is None:
                self._zeros_to_end = True
                return LOG_OVERHEAD
            return other + 1 - at
        length = int.from_bytes(head[Header.LENGTH:Header.LENGTH + 4], "big", signed=True)
        if length < 0 or at + LOG_OVERHEAD + length > self.stop:
            return None                       # runs past the data: a torn tail, or damage
        return LOG_OVERHEAD + length

    def _first_nonzero(self, position: int) -> int | None:
        """The first byte at or after ``position`` (before ``stop``) that is
        not zero, read ``block`` bytes at a time; None: zeros to ``stop``."""
        while position < self.stop:
            upto = min(self.stop, position + self.src.block)
            data = np.frombuffer(self.src.read(position, upto), dtype=np.uint8)
            found = np.flatnonzero(data)
            if len(found):
                return position + int(found[0])
            if len(data) < upto - position:
                return None                   # the object ends early: its check says so
            position = upto
        return None

    def finders(self, view):
        return RangeFinders(self.src, self.max_batch_bytes)


class RangeFinders:
    """``segment.ViewFinders`` over an object's ranges (the rule of
    ``kbatch.lib.resync``, read window by window: ``next_valid_in_ranges``)."""

    def __init__(self, src: RemoteBytes, max_batch_bytes: int):
        self.src, self.max_batch_bytes = src, max_batch_bytes

    def next_valid(self, start: int, stop: int, after_offset: int) -> tuple[int, int] | None:
        return next_valid_in_ranges(self.src.raw, start, stop, after_offset,
                                    self.max_batch_bytes)

    def chains(self, position: int, stop: int) -> bool:
        """CRC-valid batches follow one another from ``position`` exactly to
        ``stop`` (a walk over their headers, window by window)."""
        pos = position
        while pos < stop:
            head = self.src.read(pos, pos + LOG_OVERHEAD)
            if len(head) < LOG_OVERHEAD:
                return False
            length = int.from_bytes(head[Header.LENGTH:Header.LENGTH + 4], "big", signed=True)
            if length < 0 or length > self.max_batch_bytes \
                    or pos + LOG_OVERHEAD + length > stop:
                return False
            wstop = min(stop, max(pos + self.src.block, pos + LOG_OVERHEAD + length))
            view = self.src.fetched_view(pos, wstop)
            try:
                _, valid_end, reason = header_walk_ends(view, self.src.name, pos, wstop,
                                                        crc=True, more_follows=wstop < stop)
            finally:
                view.release()
            if reason is None and valid_end == wstop:
                pos = wstop
            elif reason == "truncated" and pos < valid_end and wstop < stop:
                pos = valid_end          # a batch cut by the window: on from its start
            else:
                return False
        return pos == stop

    def base_offset_at(self, position: int) -> int | None:
        head = self.src.read(position, position + 8)
        return int.from_bytes(head, "big", signed=True) if len(head) == 8 else None


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

    def confirm(self) -> None:
        """Nothing to check: a local file is read as it is."""


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
