# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Growable C buffers for the decoders, handed to numpy without a copy.

See ``_columns.pxd`` for the layout. Memory of a finished column is owned by
an ``OwnedBuffer`` (freed when the last numpy view of it goes away).
"""

from cpython.buffer cimport PyBuffer_FillInfo
from libc.stdint cimport int32_t, uint8_t
from libc.string cimport memset

from kbatch._core._coltable cimport (N_FIXED, fixed_ctype, fixed_dtype, fixed_name, fixed_role,
                                     fixed_width)

import numpy as np


cdef extern from "_memory.h" nogil:
    void *kb_resize(void *p, size_t length, size_t old_cap, size_t new_cap, size_t *cap,
                    int role)
    void kb_release(void *p, size_t cap, int role)
    size_t kb_pool_set_limit(size_t limit)
    size_t kb_pool_held()
    size_t kb_stat_fresh, kb_stat_reused, kb_stat_unmapped
    const size_t KB_BIG     # from here a buffer is a mapping
    size_t kb_trim(void *p, size_t length, size_t cap)

cdef enum:
    MIN_CAPACITY = 64


# The table the compiled columns were built from (coltable.py via
# _coltable.pxd): (name, C type, numpy dtype, bytes, pool role) per column;
# tests check it against coltable.py and the columns take() hands over.
FIXED_COLUMNS = tuple((fixed_name(k).decode(), fixed_ctype(k).decode(), fixed_dtype(k).decode(),
                       fixed_width(k), fixed_role(k)) for k in range(N_FIXED))
cdef tuple _TAKE_AS = tuple((c[0], np.dtype(c[2])) for c in FIXED_COLUMNS)


cdef class OwnedBuffer:
    """A buffer over memory that kbatch allocated (read-only, except those of
    ``pooled_empty``); frees it (to the pool) on release."""

    cdef char *data
    cdef Py_ssize_t size
    cdef size_t capacity
    cdef int role
    cdef bint writable

    def __cinit__(self):
        self.data = NULL
        self.size = 0
        self.capacity = 0
        self.writable = False

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.size, 0 if self.writable else 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass

    def __len__(self):
        return self.size

    def __dealloc__(self):
        kb_release(self.data, self.capacity, self.role)
        self.data = NULL


cdef int growbuf_grow(GrowBuf *b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t need, new_cap
    cdef size_t cap = 0
    cdef char *p
    if extra < 0 or extra > (<Py_ssize_t>1 << 62) - b.len:
        return -1
    need = b.len + extra
    # malloc'd buffers double; a mapping grows by a quarter (mremap moves its
    # pages, no byte is copied), so it ends at most a quarter too large and
    # kb_trim leaves it whole for the pool
    if <size_t>b.cap >= KB_BIG:
        new_cap = b.cap + b.cap // 4
    else:
        new_cap = b.cap * 2 if b.cap > MIN_CAPACITY else MIN_CAPACITY
    if new_cap < need:
        new_cap = need
    p = <char *>kb_resize(b.data, <size_t>b.len, <size_t>b.cap, <size_t>new_cap, &cap,
                          b.role)
    if p == NULL:
        return -1
    if b.zero_fill:
        # a recycled block holds old bytes past ``len``: zero all of them
        memset(p + b.len, 0, cap - <size_t>b.len)
    b.data = p
    b.cap = <Py_ssize_t>cap
    return 0


cdef void growbuf_free(GrowBuf *b) noexcept nogil:
    kb_release(b.data, <size_t>b.cap, b.role)
    b.data = NULL
    b.len = 0
    b.cap = 0


cdef inline int _offsets_init(BinaryBuilder *b, int role) noexcept nogil:
    b.offsets.role = role
    b.data.role = role + 1
    b.validity.role = role + 2
    b.views.role = role + 3
    b.views.len = 0
    b.count = 0
    b.null_count = 0
    b.validity.zero_fill = True
    if growbuf_reserve(&b.offsets, 4) != 0:
        return -1
    (<int32_t *>b.offsets.data)[0] = 0
    b.offsets.len = 4
    b.data.len = 0
    b.validity.len = 0
    return 0


cdef int columns_init(RecordColumns *c) noexcept nogil:
    """Empty columns ready to append to; buffers are kept if present."""
    cdef int k
    c.n = 0
    c.unread_header_rows = 0
    for k in range(N_FIXED):
        c.fixed[k].role = fixed_role(k)
        c.fixed[k].len = 0
    c.headers.role = 5
    if growbuf_reserve(&c.headers, 4) != 0:
        return -1
    (<int32_t *>c.headers.data)[0] = 0
    c.headers.len = 4
    if (_offsets_init(&c.key, 10) or _offsets_init(&c.value, 20)
            or _offsets_init(&c.hkey, 30) or _offsets_init(&c.hvalue, 40)):
        return -1
    return 0


cdef void _binary_free(BinaryBuilder *b) noexcept nogil:
    growbuf_free(&b.offsets)
    growbuf_free(&b.data)
    growbuf_free(&b.validity)
    growbuf_free(&b.views)


cdef void columns_free(RecordColumns *c) noexcept nogil:
    cdef int k
    for k in range(N_FIXED):
        growbuf_free(&c.fixed[k])
    growbuf_free(&c.headers)
    _binary_free(&c.key)
    _binary_free(&c.value)
    _binary_free(&c.hkey)
    _binary_free(&c.hvalue)


cdef int columns_reserve_rows(RecordColumns *c, Py_ssize_t rows) noexcept nogil:
    """Room for ``rows`` more records in every per-record column (not in a
    key or value column a projection leaves out)."""
    cdef int k
    for k in range(N_FIXED):
        if growbuf_reserve(&c.fixed[k], rows * fixed_width(k)) != 0:
            return -1
    if growbuf_reserve(&c.headers, rows * 4) != 0:
        return -1
    if ((not c.skip_key and binary_reserve_any(&c.key, rows, 0))
            or (not c.skip_value and binary_reserve_any(&c.value, rows, 0))):
        return -1
    return 0


cdef ColumnsMark columns_mark(const RecordColumns *c) noexcept nogil:
    cdef ColumnsMark m
    m.n = c.n
    m.key_bytes = c.key.data.len
    m.value_bytes = c.value.data.len
    m.key_nulls = c.key.null_count
    m.value_nulls = c.value.null_count
    m.headers = c.hkey.count
    m.hkey_bytes = c.hkey.data.len
    m.hvalue_bytes = c.hvalue.data.len
    m.hvalue_nulls = c.hvalue.null_count
    m.unread_header_rows = c.unread_header_rows
    return m


cdef void _binary_rollback(BinaryBuilder *b, Py_ssize_t count, Py_ssize_t nbytes,
                           Py_ssize_t nulls, bint committed) noexcept nogil:
    # A failed batch may have set validity bits past ``b.count`` before it
    # committed: clear every bit from ``count`` to the end of the capacity.
    # A committed batch (dropped by read_committed) set bits only below
    # ``b.count``: clear up to there, not the whole capacity (which a
    # column sized up front makes as large as the chunk, per dropped batch).
    cdef uint8_t *bits = <uint8_t *>b.validity.data
    cdef Py_ssize_t first = count >> 3
    cdef Py_ssize_t end = b.validity.cap
    if committed and ((b.count + 7) >> 3) < end:
        end = (b.count + 7) >> 3
    if first < end:
        bits[first] &= <uint8_t>((1 << (count & 7)) - 1)
        if end > first + 1:
            memset(bits + first + 1, 0, <size_t>(end - first - 1))
    b.count = count
    b.offsets.len = (count + 1) * 4
    if b.view_mode:
        b.views.len = count * 16
    b.data.len = nbytes
    b.null_count = nulls
    b.validity.len = (count + 7) >> 3


cdef void columns_rollback(RecordColumns *c, const ColumnsMark *m,
                           bint committed=False) noexcept nogil:
    """Forget everything appended since ``m`` was taken (``committed``: only
    whole records were, as when read_committed drops a decoded batch)."""
    cdef int k
    c.n = m.n
    c.unread_header_rows = m.unread_header_rows
    for k in range(N_FIXED):
        c.fixed[k].len = m.n * fixed_width(k)
    c.headers.len = (m.n + 1) * 4
    if not c.skip_key:      # a column left out by a projection stays empty
        _binary_rollback(&c.key, m.n, m.key_bytes, m.key_nulls, committed)
    if not c.skip_value:
        _binary_rollback(&c.value, m.n, m.value_bytes, m.value_nulls, committed)
    _binary_rollback(&c.hkey, m.headers, m.hkey_bytes, 0, committed)
    _binary_rollback(&c.hvalue, m.headers, m.hvalue_bytes, m.hvalue_nulls, committed)


cdef Py_ssize_t columns_payload_bytes(const RecordColumns *c) noexcept nogil:
    """Bytes of keys, values and headers held: what bounds a chunk's size."""
    return c.key.data.len + c.value.data.len + c.hkey.data.len + c.hvalue.data.len


cdef Py_ssize_t columns_held_bytes(const RecordColumns *c) noexcept nogil:
    """Bytes the columns hold: the payload plus ROW_FIXED_BYTES per record."""
    return columns_payload_bytes(c) + c.n * ROW_FIXED_BYTES


cdef object growbuf_take(GrowBuf *b, object dtype):
    """Hand the buffer to numpy (no copy) and leave ``b`` empty."""
    cdef OwnedBuffer owner
    if b.len == 0:
        growbuf_free(b)
        return np.empty(0, dtype=dtype)
    owner = OwnedBuffer.__new__(OwnedBuffer)
    owner.data = b.data
    owner.size = b.len
    owner.capacity = kb_trim(b.data, <size_t>b.len, <size_t>b.cap)
    owner.role = b.role
    b.data = NULL
    b.len = 0
    b.cap = 0
    return np.frombuffer(owner, dtype=dtype)


cdef dict _binary_take(BinaryBuilder *b):
    cdef Py_ssize_t count = b.count, nulls = b.null_count
    validity = growbuf_take(&b.validity, np.uint8)
    if b.view_mode:     # binary views: the data buffers are the decoder's
        return {
            "views": growbuf_take(&b.views, np.uint8),
            "value_bytes": b.data.len,      # the bytes viewed (no memory of its own)
            "validity": validity if nulls else None,
            "null_count": nulls,
            "length": count,
        }
    return {
        "offsets": growbuf_take(&b.offsets, np.int32),
        "data": growbuf_take(&b.data, np.uint8),
        "validity": validity if nulls else None,
        "null_count": nulls,
        "length": count,
    }


cdef dict columns_take(RecordColumns *c):
    """All columns as numpy arrays (the fixed ones under their table names);
    ``c`` is re-initialised empty."""
    cdef int k
    out = {"n": c.n}
    for k in range(N_FIXED):
        name, dtype = _TAKE_AS[k]
        out[name] = growbuf_take(&c.fixed[k], dtype)
    out.update({
        "headers": growbuf_take(&c.headers, np.int32),
        "key": None if c.skip_key else _binary_take(&c.key),
        "value": None if c.skip_value else _binary_take(&c.value),
        "header_key": None if c.skip_headers else _binary_take(&c.hkey),
        "header_value": None if c.skip_headers else _binary_take(&c.hvalue),
    })
    if c.skip_headers:    # and how many records had headers that were not read
        out["headers"] = None
        out["unread_header_rows"] = c.unread_header_rows
    if columns_init(c) != 0:
        raise MemoryError()
    return out


def pooled_empty(Py_ssize_t nbytes, int role):
    """A writable ``OwnedBuffer`` of ``nbytes`` uninitialised bytes from
    kbatch's memory: a released mapping of the pool when one fits (``role``
    names what it holds, so the same kind of buffer is reused), else a new
    one (huge pages where the kernel allows). Joins write into these so that
    a log directory read reuses the pages its segments' columns released
    instead of paying the kernel to zero fresh ones."""
    cdef OwnedBuffer out = OwnedBuffer()
    cdef size_t cap = 0
    cdef void *p
    if nbytes < 0:
        raise ValueError("nbytes must not be negative")
    with nogil:
        p = kb_resize(NULL, 0, 0, <size_t>(nbytes if nbytes > 0 else 1), &cap, role)
    if p == NULL:
        raise MemoryError()
    out.data = <char *>p
    out.size = nbytes
    out.capacity = cap
    out.role = role
    out.writable = True
    return out


def default_memory_pool_bytes():
    """The pool limit kbatch starts with (1 GiB)."""
    return 1 << 30


def set_memory_pool(Py_ssize_t max_bytes):
    """Keep at most ``max_bytes`` of released column memory for reuse (0: none).

    Returns the bytes the pool holds afterwards.
    """
    if max_bytes < 0:
        raise ValueError("max_bytes must not be negative")
    return kb_pool_set_limit(<size_t>max_bytes)


def memory_pool_bytes():
    """Bytes of released column memory kept for reuse."""
    return kb_pool_held()


def memory_stats():
    """What kbatch's column memory has cost since the process started:
    ``fresh_bytes`` of new mappings (pages the kernel zeroes when they are
    first written), ``reused_blocks`` taken from the pool instead,
    ``unmapped_bytes`` given back to the kernel, and ``pool_bytes`` held
    now. Compare two readings around a read to see whether it reused memory
    or paid for new pages."""
    return {"fresh_bytes": kb_stat_fresh, "reused_blocks": kb_stat_reused,
            "unmapped_bytes": kb_stat_unmapped, "pool_bytes": kb_pool_held()}
