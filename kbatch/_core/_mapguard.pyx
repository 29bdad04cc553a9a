# cython: language_level=3
"""kbatch's one SIGBUS handler: guarded reads, and zero-copy mappings that
survive the truncation of their file.

Touching a page of a memory-mapped file past the file's current end raises
SIGBUS, which kills the interpreter. Two kinds of access need protection:

- reads kbatch makes while it decodes (``kb_guarded_call``/``kb_guarded_copy``,
  cimported by ``_batch.pyx``): a SIGBUS jumps back and the read raises
  ``FileChangedError``, as before; ``read_mapped`` is the guarded copy
  Python code reads a mapping's bytes with;
- zero-copy results (key/value columns pointing into the mapping) that users
  touch long after the read: a ``MappingGuard`` registers the mapping; a
  SIGBUS on one of its pages replaces the lost pages (from the faulting page
  to the mapping's end) with zero pages, marks the guard invalidated and lets
  the access proceed (it reads zeros). kbatch's accessors call
  ``guard.check()``, which raises ``MappingInvalidatedError`` from then on.

Every other SIGBUS goes to the handler installed before kbatch's (Python's
faulthandler under pytest; the default action kills the process, as without
kbatch). The handler is installed lazily (first guarded read or first
registered mapping) and again at each guarded read or registration when
something else replaced it. The C side (registry, handler) is ``_guard.h``;
this module is its only includer, so the process has one of each.

Registry: a fixed table of ``capacity()`` slots, lock-free and consulted
from the handler without locks or allocation. When it is full,
``try_guard`` returns None (the caller reads in copy mode instead) and
``MappingGuard()`` raises ``MappingTableFullError``; nothing crashes.

Interface for zero-copy reads (how a read wires it in):

    guard = try_guard(mm, path=path)      # mm: the mmap.mmap of the segment
    if guard is None: ...copy mode...     # table full
    # the result (Records / its Arrow buffers' owner) keeps a reference to
    # `guard`; the guard holds a buffer export of `mm`, so the mapping cannot
    # be closed (or its range reused) while the guard is registered;
    # the guard unregisters when the last reference goes (or .release()).
    guard.check()          # in every kbatch accessor of a zero-copy column:
                           # one atomic load; raises MappingInvalidatedError
    guard.revalidate()     # before exporting columns (to_arrow): a stat of
                           # the path; a shrunken file invalidates the guard
                           # now and zeroes the lost pages up front

Memory kept: one table slot per live guard and one buffer export of the mmap.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from libc.stdint cimport uint8_t, uintptr_t

import mmap as _mmap
import os

from kbatch.errors import FileChangedError, MappingInvalidatedError, MappingTableFullError


cdef extern from *:
    """
    #define KBATCH_GUARD_IMPLEMENTATION 1
    """

cdef extern from "_guard.h" nogil:
    ctypedef int (*kbg_fn)(void *arg) noexcept nogil
    int KBG_FAULTED
    int KBG_SLOTS
    int PROT_READ
    int PROT_WRITE
    int kbg_call(kbg_fn fn, void *arg)
    int kbg_copy(void *dst, const void *src, size_t n)
    int kbg_register(uintptr_t start, size_t length, int prot)
    int kbg_invalidate(int slot, uintptr_t lost_from)
    int kbg_invalidated(int slot)
    void kbg_unregister(int slot)
    int kbg_live_count()
    int kbg_installed()
    void kbg_install()


assert KBG_FAULTED == KB_FAULTED


cdef int kb_guarded_call(kb_guarded_fn fn, void *arg) noexcept nogil:
    """fn(arg) with this thread's guard armed, or KB_FAULTED after a SIGBUS."""
    return kbg_call(<kbg_fn>fn, arg)


cdef int kb_guarded_copy(void *dst, const void *src, size_t n) noexcept nogil:
    """memcpy from a mapping under the guard: 0, or KB_FAULTED."""
    return kbg_copy(dst, src, n)


def capacity() -> int:
    """How many mappings can be registered at once."""
    return KBG_SLOTS


def live_count() -> int:
    """How many mappings are registered now."""
    return kbg_live_count()


def handler_installed() -> bool:
    """Whether kbatch's SIGBUS handler is the one installed now."""
    return bool(kbg_installed())


def install_handler() -> None:
    """Install kbatch's handler now (on top of the current one, which it
    chains to); nothing when it already is the installed one."""
    kbg_install()


cdef class MappingGuard:
    """A registered mapping of a file: truncating the file no longer kills
    the process when the mapping's pages are touched.

    ``MappingGuard(mm, path=None, offset=0)``: ``mm`` an ``mmap.mmap`` of
    ``path`` starting at file ``offset``. The guard holds a buffer export of
    ``mm`` (so ``mm.close()`` raises ``BufferError`` while it is
    registered) until it is freed or ``release()`` is called.
    """

    cdef Py_buffer _view
    cdef bint _held
    cdef int _slot
    cdef readonly object path
    cdef readonly Py_ssize_t offset
    cdef object _identity

    def __cinit__(self):
        self._held = False
        self._slot = -1

    def __init__(self, mm, *, path=None, Py_ssize_t offset=0):
        if not isinstance(mm, _mmap.mmap):
            raise TypeError(f"MappingGuard needs an mmap.mmap, not {type(mm).__name__}")
        if offset < 0:
            raise ValueError("offset must not be negative")
        if self._held:
            raise RuntimeError("MappingGuard is already initialised")
        self.path = os.fspath(path) if path is not None else None
        self.offset = offset
        self._identity = None
        if self.path is not None:
            try:
                st = os.stat(self.path)
                self._identity = (st.st_dev, st.st_ino)
            except OSError:
                pass
        PyObject_GetBuffer(mm, &self._view, PyBUF_SIMPLE)
        self._held = True
        if self._view.len <= 0:
            self.release()
            raise ValueError("cannot guard an empty mapping")
        prot = PROT_READ if self._view.readonly else PROT_READ | PROT_WRITE
        self._slot = kbg_register(<uintptr_t>self._view.buf, <size_t>self._view.len, prot)
        if self._slot < 0:
            self.release()
            raise MappingTableFullError(
                f"kbatch's table of guarded mappings is full ({KBG_SLOTS} at once)")

    @property
    def nbytes(self) -> int:
        return self._view.len if self._held else 0

    @property
    def registered(self) -> bool:
        return self._slot >= 0

    @property
    def valid(self) -> bool:
        """False once a page was lost (file truncated) or the guard released."""
        return self._slot >= 0 and not kbg_invalidated(self._slot)

    def check(self) -> None:
        """``MappingInvalidatedError`` when the mapping lost pages (or was released)."""
        if self._slot < 0:
            raise MappingInvalidatedError(self.path, "the mapping was released")
        if kbg_invalidated(self._slot):
            raise MappingInvalidatedError(self.path)

    def revalidate(self) -> bool:
        """Compare the file's size (stat of ``path``, when it still names the
        mapped file) with the mapping: a file that shrank invalidates the
        guard now, its lost pages replaced by zeros before anything touches
        them. Returns ``valid``."""
        if self._slot < 0 or kbg_invalidated(self._slot):
            return False
        if self.path is None or self._identity is None:
            return True
        try:
            st = os.stat(self.path)
        except OSError:
            return True          # gone or renamed: the mapping keeps the old file
        if (st.st_dev, st.st_ino) != self._identity:
            return True
        if st.st_size < self.offset + self._view.len:
            kept = max(st.st_size - self.offset, 0)
            kbg_invalidate(self._slot, <uintptr_t>self._view.buf + <uintptr_t>kept)
        return not kbg_invalidated(self._slot)

    def release(self) -> None:
        """Unregister and drop the buffer export (idempotent)."""
        if self._slot >= 0:
            kbg_unregister(self._slot)
            self._slot = -1
        if self._held:
            PyBuffer_Release(&self._view)
            self._held = False

    def __dealloc__(self):
        if self._slot >= 0:
            kbg_unregister(self._slot)
            self._slot = -1
        if self._held:
            PyBuffer_Release(&self._view)
            self._held = False

    def __repr__(self):
        state = "released" if self._slot < 0 else ("valid" if self.valid else "invalidated")
        return f"<MappingGuard {self.path!r} {self.nbytes} bytes {state}>"


def try_guard(mm, *, path=None, Py_ssize_t offset=0):
    """A ``MappingGuard`` of ``mm``, or None when the table is full (the
    caller then reads in copy mode)."""
    try:
        return MappingGuard(mm, path=path, offset=offset)
    except MappingTableFullError:
        return None


def read_mapped(const uint8_t[::1] view not None, Py_ssize_t position, Py_ssize_t n,
                object path=None):
    """A copy of ``view[position:position + n]`` (clipped to the view), read
    under the SIGBUS guard: the one way Python code reads bytes of a mapped
    file. A file truncated under the mapping raises ``CorruptRecordError``."""
    cdef Py_ssize_t size = view.shape[0]
    cdef bytearray out
    cdef char *dst
    cdef int st
    if position < 0 or n < 0:
        raise ValueError("position and n must not be negative")
    if position > size:
        position = size
    if n > size - position:
        n = size - position
    out = bytearray(n)
    if n:
        dst = out
        with nogil:
            st = kb_guarded_copy(dst, &view[position], <size_t>n)
        if st == KB_FAULTED:
            raise FileChangedError(
                "the file was truncated or replaced while it was being read",
                path=path, position=position, base_offset=None, batch_position=None)
    return bytes(out)


cdef extern from "<sys/mman.h>" nogil:
    int madvise(void *addr, size_t length, int advice)
    int MADV_WILLNEED


def populate(const uint8_t[::1] view not None, Py_ssize_t length, int advice) -> bool:
    """``madvise(advice)`` (MADV_POPULATE_READ: fault in) over the first
    ``length`` bytes of a mapping, without the GIL: Python's
    ``mmap.madvise`` holds it for the whole call, and populating a segment
    (about 100 ms for 400 MB cached in 4 KiB pages) then stopped every other
    thread of a read. Falls back to MADV_WILLNEED; False when neither
    applies (the pages then fault in as they are read)."""
    cdef int rc
    cdef size_t n
    if length > view.shape[0]:
        length = view.shape[0]
    if length <= 0:
        return False
    n = <size_t>length
    with nogil:
        rc = madvise(<void *>&view[0], n, advice)
        if rc != 0:
            rc = madvise(<void *>&view[0], n, MADV_WILLNEED)
    return rc == 0
