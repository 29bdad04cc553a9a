# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Gathering rows of an Arrow binary column (``BinaryColumn.take``): the
values at given rows, copied in order into new buffers.

    column   offsets int32|int64[n + 1] | data uint8[...] | validity bitmap
                                                            (LSB first) or None
    rows     int64[m], each in [0, n)
    result   offsets int32[m + 1] (int64 when the bytes pass 2**31 - 1)
             data    uint8[total], from the caller's ``allocate(total)``
             validity uint8[(m + 7) // 8] (None when the column has none)
             null count

Two passes over the rows, each cut into runs of equal rows (a multiple of
8, so that a run writes whole validity bytes) on up to ``threads`` threads
(``_threads.on_threads``):

    1. size    every row index is checked against n and every value's
               offsets against the data buffer (0 <= start <= end <= len);
               each run sums its bytes (and nulls)
    2. copy    each run writes from its own output position (the sum of the
               runs before it): value bytes, end offsets, validity bits.
               A value of up to 128 bytes is copied in whole 16-byte blocks
               when 128 bytes remain in the source and in the run's output
               (the overrun is overwritten by the next rows), others by memcpy.
               The source of a row a few ahead is prefetched (rows are
               usually ascending with gaps: a table view's winners)

Nothing is copied before the first pass has checked every row, and
nothing is read outside the column's buffers. The GIL is released for both
passes (not while ``allocate`` runs).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

import numpy as np

cdef extern from *:
    """
    #define KB_TAKE_PREFETCH(p) __builtin_prefetch((const void *)(p))
    """
    void KB_TAKE_PREFETCH(const void *p) noexcept nogil

from kbatch._core._threads cimport MAX_RUN_THREADS, on_threads


cdef enum:
    AHEAD = 8                   # rows ahead whose source is prefetched
    SHORT = 128                 # values up to this long are copied in inlined 16-byte blocks
    ROWS_PER_THREAD = 1 << 14   # fewer rows than this per thread: fewer threads
    OK = 0
    BAD_ROW = 1                 # a row index outside [0, n)
    BAD_OFFSETS = 2             # a value's offsets outside the data buffer


cdef struct Run:
    const void *offsets
    bint wide_in                # offsets are int64 (else int32)
    const uint8_t *data
    int64_t data_len
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


cdef void *_size(void *arg) noexcept nogil:
    """Pass 1 over a run: check its rows and sum their bytes and nulls."""
    cdef Run *r = <Run *>arg
    cdef int64_t i, k, start, end, total = 0, nulls = 0
    r.status = OK
    for i in range(r.lo, r.hi):
        k = r.rows[i]
        if k < 0 or k >= r.n:
            r.status = BAD_ROW
            r.bad = k
            return NULL
        start = _off(r.offsets, r.wide_in, k)
        end = _off(r.offsets, r.wide_in, k + 1)
        if start < 0 or end < start or end > r.data_len:
            r.status = BAD_OFFSETS
            r.bad = k
            return NULL
        total += end - start
        if r.validity != NULL and not _bit(r.validity, k):
            nulls += 1
    r.nbytes = total
    r.nulls = nulls
    return NULL


cdef void *_copy(void *arg) noexcept nogil:
    """Pass 2 over a checked run: bytes, end offsets and validity bits."""
    cdef Run *r = <Run *>arg
    cdef int64_t i, k, start, length, pos = r.at, j
    cdef int64_t ahead_end = r.hi - AHEAD
    cdef int64_t out_end = r.at + r.nbytes
    cdef uint8_t byte = 0
    for i in range(r.lo, r.hi):
        if i < ahead_end and r.data != NULL:
            KB_TAKE_PREFETCH(r.data + _off(r.offsets, r.wide_in, r.rows[i + AHEAD]))
        k = r.rows[i]
        start = _off(r.offsets, r.wide_in, k)
        length = _off(r.offsets, r.wide_in, k + 1) - start
        if 0 < length <= SHORT and SHORT <= r.data_len - start and SHORT <= out_end - pos:
            # a short value: whole 16-byte blocks, inlined; the bytes copied past
            # its end lie inside both buffers, and the next rows overwrite them
            j = 0
            while j < length:
                memcpy(r.out_data + pos + j, r.data + start + j, 16)
                j += 16
        elif length:
            memcpy(r.out_data + pos, r.data + start, <size_t>length)
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
    cdef const uint8_t[::1] bits
    cdef const void *offs
    cdef bint wide_in = offsets.dtype == np.int64
    cdef int64_t n, m = rows.shape[0], total = 0, nulls = 0, per, at
    cdef Run runs[MAX_RUN_THREADS]
    cdef int t, nt
    cdef uint8_t[::1] out_body
    cdef uint8_t[::1] out_bits
    cdef uint8_t[::1] out_offs
    if wide_in:
        off64 = offsets
        n = off64.shape[0] - 1
        offs = &off64[0] if off64.shape[0] else NULL
    else:
        off32 = offsets
        n = off32.shape[0] - 1
        offs = &off32[0] if off32.shape[0] else NULL
    if n < 0:
        raise ValueError("offsets must have at least one entry")
    if validity is not None:
        bits = validity
        if bits.shape[0] * 8 < n:
            raise ValueError("validity bitmap shorter than the column")
    nt = threads if threads < MAX_RUN_THREADS else MAX_RUN_THREADS
    if nt > m // ROWS_PER_THREAD:
        nt = <int>(m // ROWS_PER_THREAD)
    if nt < 1:
        nt = 1
    per = ((m + nt - 1) // nt + 7) & ~7
    for t in range(nt):
        runs[t].offsets = offs
        runs[t].wide_in = wide_in
        runs[t].data = &body[0] if body.shape[0] else NULL
        runs[t].data_len = body.shape[0]
        runs[t].validity = &bits[0] if validity is not None else NULL
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
            raise ValueError(f"offsets of row {runs[t].bad} are inconsistent with the "
                             "data buffer")
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
