# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Vectorised helpers over finished columns (binary views; the take is
``_take``).

    views_to_pylist(views, validity, buffers)       binary views -> bytes | None
    views_from_binary(offsets, data, out_views, b)  offsets/data -> binary views

Every view is checked against its buffer before it is read.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

ctypedef fused offset_t:
    int32_t
    int64_t


# --- binary views (zero_copy columns) --------------------------------------
#
#     view (16 bytes)  length int32 | value (<= 12 bytes, zero padded)
#                      length int32 | prefix 4 B | buffer int32 | offset int32

cdef inline int32_t _i32(const uint8_t *p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)
    return v


def views_to_pylist(const uint8_t[::1] views, object validity, list buffers):
    """``bytes`` (None where the bitmap says null) of every view; a view
    that points outside its buffer raises ValueError."""
    cdef Py_ssize_t n = views.shape[0] // 16
    cdef Py_ssize_t nbuf = len(buffers), i
    cdef const uint8_t[::1] bits
    cdef bint has_bits = validity is not None
    cdef int32_t length, b, off
    cdef const uint8_t *v
    cdef const uint8_t **ptrs = NULL
    cdef Py_ssize_t *sizes = NULL
    cdef const uint8_t[::1] mv
    keep = []
    if has_bits:
        bits = validity
        if bits.shape[0] * 8 < n:
            raise ValueError("validity bitmap too short")
    out = [None] * n
    ptrs = <const uint8_t **>malloc(sizeof(void *) * (nbuf + 1))
    sizes = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * (nbuf + 1))
    if ptrs == NULL or sizes == NULL:
        free(ptrs)
        free(sizes)
        raise MemoryError()
    try:
        for i in range(nbuf):
            mv = memoryview(buffers[i]).cast("B")
            keep.append(mv)
            sizes[i] = mv.shape[0]
            ptrs[i] = &mv[0] if sizes[i] else NULL
        for i in range(n):
            if has_bits and not (bits[i >> 3] >> (i & 7)) & 1:
                continue
            v = &views[i * 16]
            length = _i32(v)
            if length <= 12:
                if length < 0:
                    raise ValueError(f"view {i} has a negative length")
                out[i] = PyBytes_FromStringAndSize(<const char *>v + 4, length)
                continue
            b = _i32(v + 8)
            off = _i32(v + 12)
            if b < 0 or b >= nbuf or off < 0 or length > sizes[b] - off:
                raise ValueError(f"view {i} points outside its data buffer")
            out[i] = PyBytes_FromStringAndSize(<const char *>ptrs[b] + off, length)
    finally:
        free(ptrs)
        free(sizes)
    return out


def views_from_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                      uint8_t[::1] out_views, int32_t buffer):
    """Binary views of an offsets/data column: long values point into
    ``data`` as data buffer ``buffer`` (nulls: zeros, as the bitmap says)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, i
    cdef int64_t start, length
    cdef uint8_t *v
    cdef int32_t len32, off32
    if out_views.shape[0] != n * 16:
        raise ValueError("out_views must hold 16 bytes per value")
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        if start < 0 or length < 0 or start + length > data.shape[0] or start > 0x7FFFFFFF:
            raise ValueError("offsets are inconsistent with the data buffer")
    with nogil:
        for i in range(n):
            start = offsets[i]
            length = offsets[i + 1] - start
            v = &out_views[i * 16]
            memset(v, 0, 16)
            len32 = <int32_t>length
            memcpy(v, &len32, 4)
            if length > 12:
                off32 = <int32_t>start
                memcpy(v + 4, &data[start], 4)
                memcpy(v + 8, &buffer, 4)
                memcpy(v + 12, &off32, 4)
            elif length > 0:
                memcpy(v + 4, &data[start], <size_t>length)
