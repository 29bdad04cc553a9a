# cython: language_level=3
"""Arrow columns filled value by value without the GIL (the payload
decoders: kbatch._core._protobuf): a validity bitmap, then fixed-width
values (bytes, int32, int64, floats), binary offsets and data, or list
offsets into one child; a struct's children hold one entry per row.

    K_NULL    length only            K_BOOL     values: a bitmap
    K_FIXED   values: width bytes    K_BINARY   offs int32[n + 1] | values
    K_STRUCT  children               K_LIST / K_MAP  offs int32[n + 1] into child 0

Kinds are kbatch._core._avro.ColKind's numbers. Functions return 0, or
AC_LIMIT (an offset past 2 GiB) / AC_NOMEM, the numbers of
kbatch._core._avro.Status.ST_LIMIT / ST_NOMEM.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, INT32_MAX
from libc.string cimport memcpy, memset

from kbatch._core._columns cimport GrowBuf, growbuf_reserve


cdef enum:
    AC_OK = 0
    AC_LIMIT = 14
    AC_NOMEM = 15

cdef enum:
    K_NULL = 0
    K_BOOL = 1
    K_FIXED = 2
    K_BINARY = 3
    K_STRUCT = 4
    K_LIST = 5
    K_MAP = 6


cdef struct Col:
    int kind
    int width
    int nkid
    int kid0
    Py_ssize_t length
    Py_ssize_t nulls
    GrowBuf valid
    GrowBuf values
    GrowBuf offs


cdef inline int col_bit(GrowBuf *b, Py_ssize_t i, bint v) noexcept nogil:
    cdef uint8_t *p
    if (i & 7) == 0:
        if growbuf_reserve(b, 1) != 0:
            return AC_NOMEM
        (<uint8_t *>b.data)[b.len] = 0
        b.len += 1
    p = <uint8_t *>b.data + (i >> 3)
    if v:
        p[0] |= <uint8_t>(1 << (i & 7))
    else:
        p[0] &= <uint8_t>~(1 << (i & 7))
    return AC_OK


cdef inline int col_valid(Col *c) noexcept nogil:
    if col_bit(&c.valid, c.length, True) != AC_OK:
        return AC_NOMEM
    c.length += 1
    return AC_OK


cdef inline int col_offset(GrowBuf *offs, Py_ssize_t v) noexcept nogil:
    cdef int32_t o
    if v > INT32_MAX:
        return AC_LIMIT
    if growbuf_reserve(offs, 4) != 0:
        return AC_NOMEM
    o = <int32_t>v
    memcpy(offs.data + offs.len, &o, 4)
    offs.len += 4
    return AC_OK


cdef inline int col_bytes(Col *c, const uint8_t *src, Py_ssize_t n) noexcept nogil:
    if n > INT32_MAX - c.values.len:
        return AC_LIMIT
    if growbuf_reserve(&c.values, n) != 0:
        return AC_NOMEM
    if n:
        memcpy(c.values.data + c.values.len, src, <size_t>n)
        c.values.len += n
    if col_offset(&c.offs, c.values.len) != AC_OK:
        return AC_LIMIT
    return col_valid(c)


cdef inline int col_scalar(Col *c, int64_t v) noexcept nogil:
    """A fixed-width value (the low ``width`` bytes of v) or a boolean."""
    cdef int32_t v32
    cdef int8_t v8
    if c.kind == K_BOOL:
        if col_bit(&c.values, c.length, v != 0) != AC_OK:
            return AC_NOMEM
        return col_valid(c)
    if growbuf_reserve(&c.values, c.width) != 0:
        return AC_NOMEM
    if c.width == 8:
        memcpy(c.values.data + c.values.len, &v, 8)
    elif c.width == 4:
        v32 = <int32_t>v
        memcpy(c.values.data + c.values.len, &v32, 4)
    else:
        v8 = <int8_t>v
        memcpy(c.values.data + c.values.len, &v8, 1)
    c.values.len += c.width
    return col_valid(c)


cdef inline int col_null(Col *cols, const int *kids, int ci) noexcept nogil:
    """A null in column ci (and placeholders in its children, as Arrow wants)."""
    cdef Col *c = &cols[ci]
    cdef int k, st
    if c.kind == K_BOOL:
        if col_bit(&c.values, c.length, False) != AC_OK:
            return AC_NOMEM
    elif c.kind == K_FIXED:
        if growbuf_reserve(&c.values, c.width) != 0:
            return AC_NOMEM
        memset(c.values.data + c.values.len, 0, <size_t>c.width)
        c.values.len += c.width
    elif c.kind == K_BINARY:
        st = col_offset(&c.offs, c.values.len)
        if st != AC_OK:
            return st
    elif c.kind == K_STRUCT:
        for k in range(c.nkid):
            st = col_null(cols, kids, kids[c.kid0 + k])
            if st != AC_OK:
                return st
    elif c.kind == K_LIST or c.kind == K_MAP:
        st = col_offset(&c.offs, cols[kids[c.kid0]].length)
        if st != AC_OK:
            return st
    if col_bit(&c.valid, c.length, False) != AC_OK:
        return AC_NOMEM
    c.length += 1
    c.nulls += 1
    return AC_OK


cdef inline void col_truncate(Col *cols, const int *kids, int ci, Py_ssize_t n) noexcept nogil:
    """Back to n entries, and the children to what those entries hold."""
    cdef Col *c = &cols[ci]
    cdef Py_ssize_t i
    cdef int k
    cdef const uint8_t *bits = <const uint8_t *>c.valid.data
    cdef const int32_t *offs = <const int32_t *>c.offs.data
    if n > c.length:            # never past the end; n == length still cuts the children
        n = c.length
    for i in range(n, c.length):
        if not (bits[i >> 3] >> (i & 7)) & 1:
            c.nulls -= 1
    if c.kind == K_BOOL:
        c.values.len = (n + 7) >> 3
    elif c.kind == K_FIXED:
        c.values.len = n * c.width
    elif c.kind == K_BINARY:
        c.values.len = offs[n]
        c.offs.len = (n + 1) * 4
    elif c.kind == K_STRUCT:
        for k in range(c.nkid):
            col_truncate(cols, kids, kids[c.kid0 + k], n)
    elif c.kind == K_LIST or c.kind == K_MAP:
        col_truncate(cols, kids, kids[c.kid0], offs[n])
        c.offs.len = (n + 1) * 4
    c.valid.len = (n + 7) >> 3
    c.length = n
