# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Gathering rows of an Arrow binary column (``BinaryColumn.take``): the
values at given rows, copied in order into new buffers.

    column   offsets int32|int64[n + 1] | data uint8[...] | validity bitmap
                                                            (LSB first) or None
    or views 16 bytes per value (Arrow binary views, ``ViewColumn``):
               length int32 | value (<= 12 bytes, zero padded)
               length int32 | prefix 4 B | buffer int32 | offset int32
             | the data buffers the views point into | validity bitmap
    rows     int64[m], each in [0, n)
    result   offsets int32[m + 1] (int64 when the bytes pass 2**31 - 1)
             data    uint8[total], from the caller's ``allocate(total)``
             validity uint8[(m + 7) // 8] (None when the column has none)
             null count

Two passes over the rows, each cut into runs of equal rows (a multiple of
8, so that a run writes whole validity bytes) on up to ``threads`` threads
(``_threads.on_threads``):

    1. size    every row index is checked against n and every value's
               offsets against the data buffer (0 <= start <= end <= len;
               a view: length >= 0, its buffer one of those given, its
               bytes inside it; a null slot's view is not read: Arrow
               gives it no meaning); each run sums its bytes (and nulls)
    2. copy    each run writes from its own output position (the sum of the
               runs before it): value bytes, end offsets, validity bits.
               A value of up to 128 bytes is copied in whole 16-byte blocks
               when 128 bytes remain in the source and in the run's output
               (the overrun is overwritten by the next rows), others by memcpy.
               The source of a row a few ahead is prefetched, its first
               two cache lines (rows are usually ascending with gaps: a
               table view's winners)

Nothing is copied before the first pass has checked every row, and
nothing is read outside the column's buffers. The GIL is released for both
passes (not while ``allocate`` runs).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import numpy as np

cdef extern from *:
    """
    #define KB_TAKE_PREFETCH(p) __builtin_prefetch((const void *)(p))
    """
    void KB_TAKE_PREFETCH(const void *p) noexcept nogil

from kbatch._core._binview cimport view_bytes
from kbatch._core._threads cimport MAX_RUN_THREADS, on_threads, run_count


cdef enum:
    AHEAD = 16                  # rows ahead whose source is prefetched
    SHORT = 128                 # values up to this long are copied in inlined 16-byte blocks
    ROWS_PER_THREAD = 1 << 14   # fewer rows than this per thread: fewer threads
    OK = 0
    BAD_ROW = 1                 # a row index outside [0, n)
    BAD_OFFSETS = 2             # a value's offsets outside the data buffer


cdef struct Run:
    const void *offsets         # NULL: the column is views
    bint wide_in                # offsets are int64 (else int32)
    const uint8_t *data
    int64_t data_len
    const uint8_t *views        # views: 16 bytes a value
    const uint8_t **bufs        # views: the data buffers, and their lengths
    const int64_t *buf_len
    int32_t nbuf
    const uint8_t *validity     # NULL: no validity bitmap
    const int64_t *rows
    int64_t n                   # rows of the column
    int64_t lo, hi              # this run's rows of ``rows``: [lo, hi)
    # pass 1
    int64_t nbytes, nulls
    int status
    int64_t bad                 # the row index that failed
    # pass 2
    int64_t at                  # output position of the run's first byte
    uint8_t *out_data
    void *out_offsets
    bint wide_out
    uint8_t *out_validity


cdef inline int64_t _off(const void *p, bint wide, int64_t i) noexcept nogil:
    if wide:
        return (<const int64_t *>p)[i]
    return (<const int32_t *>p)[i]


cdef inline bint _bit(const uint8_t *bits, int64_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


cdef inline bint _value(const Run *r, int64_t k, const uint8_t **src, int64_t *length,
                        int64_t *room) noexcept nogil:
    """Row ``k``'s bytes: where they start, how many, and how many bytes of
    their buffer lie from there on; False when they are not inside it."""
    cdef int64_t start, end
    if r.offsets != NULL:
        start = _off(r.offsets, r.wide_in, k)
        end = _off(r.offsets, r.wide_in, k + 1)
        if start < 0 or end < start or end > r.data_len:
            return False
        src[0] = r.data + start if r.data != NULL else NULL
        length[0] = end - start
        room[0] = r.data_len - start
        return True
    return view_bytes(r.views + k * 16, r.bufs, r.buf_len, r.nbuf, src, length, room)


cdef inline const uint8_t *_start(const Run *r, int64_t k) noexcept nogil:
    """Where row ``k``'s bytes start, for a prefetch (any address will do)."""
    cdef int32_t b, off
    if r.offsets != NULL:
        return r.data + _off(r.offsets, r.wide_in, k) if r.data != NULL else NULL
    memcpy(&b, r.views + k * 16 + 8, 4)
    memcpy(&off, r.views + k * 16 + 12, 4)
    if b < 0 or b >= r.nbuf:
        return r.views + k * 16
    return r.bufs[b] + off


cdef void *_size(void *arg) noexcept nogil:
    """Pass 1 over a run: check its rows and sum their bytes and nulls."""
    cdef Run *r = <Run *>arg
    cdef int64_t i, k, length, room, total = 0, nulls = 0
    cdef const uint8_t *src
    r.status = OK
    for i in range(r.lo, r.hi):
        k = r.rows[i]
        if k < 0 or k >= r.n:
            r.status = BAD_ROW
            r.bad = k
            return NULL
        if r.validity != NULL and not _bit(r.validity, k):
            nulls += 1
            if r.offsets == NULL:
                continue            # a null slot's view means nothing (Arrow): not read
        if not _value(r, k, &src, &length, &room):
            r.status = BAD_OFFSETS
            r.bad = k
            return NULL
        total += length
    r.nbytes = total
    r.nulls = nulls
    return NULL


cdef void *_copy(void *arg) noexcept nogil:
    """Pass 2 over a checked run: bytes, end offsets and validity bits."""
    cdef Run *r = <Run *>arg
    cdef int64_t i, k, length = 0, room = 0, pos = r.at, j
    cdef int64_t ahead_end = r.hi - AHEAD, far_end = r.hi - 2 * AHEAD
    cdef int64_t out_end = r.at + r.nbytes
    cdef const uint8_t *src = NULL
    cdef const uint8_t *next
    cdef uint8_t byte = 0
    for i in range(r.lo, r.hi):
        if i < ahead_end:
            next = _start(r, r.rows[i + AHEAD])
            KB_TAKE_PREFETCH(next)
            KB_TAKE_PREFETCH(next + 64)
            if i < far_end:     # the view (or offsets) that ``_start`` reads later
                KB_TAKE_PREFETCH(r.views + r.rows[i + 2 * AHEAD] * 16 if r.offsets == NULL
                                 else <const uint8_t *>r.offsets
                                 + r.rows[i + 2 * AHEAD] * (8 if r.wide_in else 4))
        k = r.rows[i]
        if r.offsets == NULL and r.validity != NULL and not _bit(r.validity, k):
            length = 0              # a null slot of a views column: no bytes
        else:
            _value(r, k, &src, &length, &room)
        if 0 < length <= SHORT and SHORT <= room and SHORT <= out_end - pos:
            # a short value: whole 16-byte blocks, inlined; the bytes copied past
            # its end lie inside both buffers, and the next rows overwrite them
            j = 0
            while j < length:
                memcpy(r.out_data + pos + j, src + j, 16)
                j += 16
        elif length:
            memcpy(r.out_data + pos, src, <size_t>length)
        pos += length
        if r.wide_out:
            (<int64_t *>r.out_offsets)[i + 1] = pos
        else:
            (<int32_t *>r.out_offsets)[i + 1] = <int32_t>pos
        if r.out_validity != NULL:
            if _bit(r.validity, k):
                byte |= <uint8_t>(1 << (i & 7))
            if (i & 7) == 7 or i == r.hi - 1:
                r.out_validity[i >> 3] = byte
                byte = 0
    return NULL


def take_binary(offsets, data, validity, const int64_t[::1] rows, int threads, allocate):
    """The values at ``rows`` of the column ``offsets``/``data``/``validity``:
    ``(out_offsets, out_data, out_validity, nulls)``; ``out_data`` comes
    from ``allocate(total_bytes)`` (a uint8 array of at least that size),
    ``out_validity`` is None when ``validity`` is. Raises IndexError for a
    row outside the column, ValueError for offsets outside the data."""
    cdef const int32_t[::1] off32
    cdef const int64_t[::1] off64
    cdef const uint8_t[::1] body = data
    cdef int64_t n
    cdef Run proto
    memset(&proto, 0, sizeof(Run))
    proto.wide_in = offsets.dtype == np.int64
    if proto.wide_in:
        off64 = offsets
        n = off64.shape[0] - 1
        proto.offsets = &off64[0] if off64.shape[0] else NULL
    else:
        off32 = offsets
        n = off32.shape[0] - 1
        proto.offsets = &off32[0] if off32.shape[0] else NULL
    if n < 0:
        raise ValueError("offsets must have at least one entry")
    proto.data = &body[0] if body.shape[0] else NULL
    proto.data_len = body.shape[0]
    return _gather(&proto, n, validity, rows, threads, allocate)


def take_views(views, list buffers, validity, const int64_t[::1] rows, int threads,
               allocate):
    """``take_binary`` of a column of Arrow binary views (``views``: 16
    bytes a value, pointing into ``buffers``): the values at ``rows``
    copied into an offsets/data column. Raises IndexError for a row outside
    the column, ValueError for a view outside its buffers."""
    cdef const uint8_t[::1] vs = views
    cdef const uint8_t[::1] mv
    cdef Run proto
    cdef int32_t i
    if vs.shape[0] % 16:
        raise ValueError("views must hold 16 bytes a value")
    if len(buffers) > 0x7FFFFFFF:
        raise ValueError("too many data buffers")
    memset(&proto, 0, sizeof(Run))
    held = [memoryview(b).cast("B") for b in buffers]
    proto.views = &vs[0] if vs.shape[0] else NULL
    proto.nbuf = <int32_t>len(held)
    proto.bufs = <const uint8_t **>malloc(sizeof(void *) * (proto.nbuf + 1))
    proto.buf_len = <const int64_t *>malloc(sizeof(int64_t) * (proto.nbuf + 1))
    try:
        if proto.bufs == NULL or proto.buf_len == NULL:
            raise MemoryError()
        for i in range(proto.nbuf):
            mv = held[i]
            (<int64_t *>proto.buf_len)[i] = mv.shape[0]
            proto.bufs[i] = &mv[0] if mv.shape[0] else NULL
        return _gather(&proto, vs.shape[0] // 16, validity, rows, threads, allocate)
    finally:
        free(<void *>proto.bufs)
        free(<void *>proto.buf_len)


cdef _gather(const Run *proto, int64_t n, validity, const int64_t[::1] rows, int threads,
             allocate):
    """Both passes over ``rows`` of the column ``proto`` describes."""
    cdef const uint8_t[::1] bits
    cdef int64_t m = rows.shape[0], total = 0, nulls = 0, per, at
    cdef Run runs[MAX_RUN_THREADS]
    cdef int t, nt
    cdef uint8_t[::1] out_body
    cdef uint8_t[::1] out_bits
    cdef uint8_t[::1] out_offs
    if validity is not None:
        bits = validity
        if bits.shape[0] * 8 < n:
            raise ValueError("validity bitmap shorter than the column")
    nt = run_count(threads, m, ROWS_PER_THREAD)
    per = ((m + nt - 1) // nt + 7) & ~7
    for t in range(nt):
        runs[t] = proto[0]
        runs[t].validity = &bits[0] if validity is not None and bits.shape[0] else NULL
        runs[t].rows = &rows[0] if m else NULL
        runs[t].n = n
        runs[t].lo = min(m, t * per)
        runs[t].hi = min(m, (t + 1) * per)
        runs[t].nbytes = runs[t].nulls = 0
        runs[t].status = OK
    with nogil:
        on_threads(runs, sizeof(Run), nt, _size)
    for t in range(nt):
        if runs[t].status == BAD_ROW:
            raise IndexError(f"index {runs[t].bad} out of range for {n} values")
        if runs[t].status == BAD_OFFSETS:
            raise ValueError(f"value of row {runs[t].bad} lies outside its data buffer")
        total += runs[t].nbytes
        nulls += runs[t].nulls
    wide_out = total > 0x7FFFFFFF
    out_offsets = np.empty(m + 1, np.int64 if wide_out else np.int32)
    out_offsets[0] = 0
    out_data = allocate(total)
    out_body = out_data
    if out_body.shape[0] < total:
        raise ValueError("allocate() gave fewer bytes than asked")
    out_validity = None
    if validity is not None:
        out_validity = np.empty((m + 7) // 8, np.uint8)
        out_bits = out_validity
    out_offs = out_offsets.view(np.uint8)
    at = 0
    for t in range(nt):
        runs[t].at = at
        at += runs[t].nbytes
        runs[t].out_data = &out_body[0] if total else NULL
        runs[t].out_offsets = &out_offs[0]
        runs[t].wide_out = wide_out
        runs[t].out_validity = &out_bits[0] if validity is not None and m else NULL
    with nogil:
        on_threads(runs, sizeof(Run), nt, _copy)
    return out_offsets, out_data, out_validity, nulls
