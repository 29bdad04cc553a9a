"""Whole-file reads that copy the file instead of mapping it while many
reads run at once.

    one read at a time:        file --mmap--> decoder      (no copy)
    COPY_FROM_READERS or more: file --pread--> the thread's buffer --> decoder

Mapping a segment costs page-table work under the process's one mmap lock,
and unmapping it a TLB shootdown on every CPU that runs a thread of the
process. For one read at a time that is cheaper than copying the bytes
(the pages are mapped, not copied), but it does not scale: on a 16-core VM
(``bench/scaling_probe.py``, 2026-11-27, 32 plain segments of 23.5 MB,
``read_segment(path)`` on a pool of N threads) mapped reads took 88-108
ms at 16 threads and were slower at 16 than at 12 (two runs), the same
reads copying as this module does 70-76 ms (and faster at each thread
count from 12 on); the plain ``pread`` copy alone ran at 33-35 GB/s. At
one thread the copy costs 11-26% more, at two about the same, so a read
copies only when at least ``COPY_FROM_READERS`` whole-file reads are in
flight in the process (counted by ``reading``).

The copy goes into a buffer the thread keeps for its next copy (up to
``KEEP_BYTES``): its pages stay mapped, so a copy costs no page faults, no
kernel zeroing and no unmapping (a copy into blocks of kbatch's memory
pool, shared by all threads and by the decoded columns, measured no
better than mapping: 105 ms against 91 at 16 threads). Only copy-mode reads copy (a
zero-copy result points into its source and keeps a mapping), only files
without a trailing hole (preallocated or sparse tails stay mapped: their
zeros are never touched), and only while the copies held at once stay
within ``COPY_BUDGET`` bytes, so memory stays bounded however many threads
read: past the budget a read maps, as before.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import numpy as np

from kbatch.errors import FileChangedError

COPY_FROM_READERS = 6          # whole-file reads in flight from which a read copies
COPY_BUDGET = 1 << 30          # bytes of copies held at once, at most
KEEP_BYTES = 64 << 20          # a thread keeps its copy buffer up to this size

_lock = threading.Lock()
_readers = 0
_held = 0


@contextmanager
def reading():
    """Counts a whole-file read in flight while the block runs."""
    global _readers
    with _lock:
        _readers += 1
    try:
        yield
    finally:
        with _lock:
            _readers -= 1


def readers() -> int:
    """Whole-file reads in flight now."""
    return _readers


def _reserve(nbytes: int) -> bool:
    global _held
    with _lock:
        if _readers < COPY_FROM_READERS or _held + nbytes > COPY_BUDGET:
            return False
        _held += nbytes
        return True


def _unreserve(nbytes: int) -> None:
    global _held
    with _lock:
        _held -= nbytes


_local = threading.local()


def _buffer(size: int) -> np.ndarray:
    """``size`` bytes of this thread's copy buffer: the one it kept from
    its last copy when large enough, else a new one (kept for the next
    copy when at most ``KEEP_BYTES``)."""
    buf = getattr(_local, "buf", None)
    if buf is not None and len(buf) >= size:
        return buf[:size]
    _local.buf = None
    buf = np.empty(size, np.uint8)
    if size <= KEEP_BYTES:
        _local.buf = buf
    return buf


@contextmanager
def copied(fd: int, size: int, path: str):
    """The ``size`` bytes of the open file ``fd`` copied into this thread's
    buffer, as a memoryview (None, and nothing read, when this read should
    map: too few reads in flight, or the budget spent). A file that ends
    before ``size`` bytes raises ``FileChangedError`` naming where it
    ended. Keeps in memory the copy until the block ends, and afterwards
    the thread's buffer (``KEEP_BYTES`` at most)."""
    if size <= 0 or not _reserve(size):
        yield None
        return
    try:
        view = memoryview(_buffer(size))
        try:
            got = 0
            while got < size:
                n = os.preadv(fd, [view[got:]], got)     # the GIL is released meanwhile
                if n <= 0:
                    raise FileChangedError(
                        f"the file ended after {got} bytes while {size} were being read "
                        "(truncated or replaced meanwhile)",
                        path=path, position=got)
                got += n
            yield view
        finally:
            view.release()
    finally:
        _unreserve(size)
