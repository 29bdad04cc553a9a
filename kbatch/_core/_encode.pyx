# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Records of a magic-2 batch, encoded from columns (the writer's hot loop).

Each record (DefaultRecord.java), zig-zag varints:

    length varint | attributes int8 (0) | timestampDelta varlong
    | offsetDelta varint | keyLength varint (-1 null) | key
    | valueLength varint (-1 null) | value
    | headersCount varint | [keyLength varint | key | valueLength varint | value]...

``encode_records`` sizes every record first, allocates the output once, then
writes it; columns are in Arrow layout (int64 offsets, uint8 validity: one
byte per value, 0 = null).

Bounds: the writer validates its columns in Python first, but this module
trusts nothing it is given. The sizing pass checks every offset it will read
(rows and header entries inside their offset arrays, offsets increasing and
inside their data, validity long enough); the writing pass checks every write
against the end of the output (``n <= end - p``), so arrays changed by
another thread between the passes stop the encoder with ``ValueError``
instead of writing out of bounds.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

# a batch's size field is an int32 and the header takes 61 - 12 bytes of it
DEF MAX_AREA = 2147483647 - 49


cdef inline int _varint_size(int64_t value) noexcept nogil:
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while raw >= 0x80:
        raw >>= 7
        n += 1
    return n


cdef inline char *_put_varint(char *p, char *end, int64_t value) noexcept nogil:
    """Write ``value`` zig-zag encoded; NULL when it does not fit before ``end``."""
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    if p == NULL or _varint_size(value) > end - p:
        return NULL
    while raw >= 0x80:
        p[0] = <char>((raw & 0x7F) | 0x80)
        raw >>= 7
        p += 1
    p[0] = <char>raw
    return p + 1


cdef inline int64_t _span(const int64_t[::1] offs, Py_ssize_t data_len,
                          Py_ssize_t i) noexcept nogil:
    """Length of value ``i``, or -1 when its offsets are out of order or
    outside the data (``i + 1`` is inside ``offs``: checked by the caller)."""
    cdef int64_t lo = offs[i], hi = offs[i + 1]
    if lo < 0 or hi < lo or hi > data_len:
        return -1
    return hi - lo


cdef inline int64_t _blob_size(const int64_t[::1] offs, Py_ssize_t data_len,
                               const uint8_t[::1] valid, Py_ssize_t i) noexcept nogil:
    """Encoded size of value ``i`` (-1: bad offsets)."""
    cdef int64_t n
    if i >= valid.shape[0] or i + 1 >= offs.shape[0]:
        return -1
    if not valid[i]:
        return 1
    n = _span(offs, data_len, i)
    if n < 0:
        return -1
    return _varint_size(n) + n


cdef inline char *_put_bytes(char *p, char *end, const int64_t[::1] offs,
                             const uint8_t[::1] data, Py_ssize_t i) noexcept nogil:
    cdef int64_t n
    if p == NULL or i + 1 >= offs.shape[0]:
        return NULL
    n = _span(offs, data.shape[0], i)
    if n < 0:
        return NULL
    p = _put_varint(p, end, n)
    if p == NULL or n > end - p:
        return NULL
    if n:
        memcpy(p, &data[offs[i]], <size_t>n)
    return p + n


cdef inline char *_put_blob(char *p, char *end, const int64_t[::1] offs,
                            const uint8_t[::1] data, const uint8_t[::1] valid,
                            Py_ssize_t i) noexcept nogil:
    if p == NULL or i >= valid.shape[0]:
        return NULL
    if not valid[i]:
        return _put_varint(p, end, -1)
    return _put_bytes(p, end, offs, data, i)


cdef struct Cols:
    Py_ssize_t key_len, value_len, hkey_len, hval_len


cdef inline int64_t _body_size(Py_ssize_t i, int64_t offset_delta, int64_t ts_delta,
                               const int64_t[::1] key_offsets, const uint8_t[::1] key_valid,
                               const int64_t[::1] value_offsets,
                               const uint8_t[::1] value_valid,
                               const int64_t[::1] header_offsets,
                               const int64_t[::1] hkey_offsets,
                               const int64_t[::1] hval_offsets,
                               const uint8_t[::1] hval_valid, Cols c) noexcept nogil:
    """Bytes of one record after its length varint (-1: bad column offsets)."""
    cdef int64_t size = 1 + _varint_size(ts_delta) + _varint_size(offset_delta)
    cdef int64_t h0, h1, j, n, k, v
    if i + 1 >= header_offsets.shape[0]:
        return -1
    h0 = header_offsets[i]
    h1 = header_offsets[i + 1]
    if h0 < 0 or h1 < h0 or h1 >= hkey_offsets.shape[0] or h1 >= hval_offsets.shape[0]:
        return -1
    k = _blob_size(key_offsets, c.key_len, key_valid, i)
    v = _blob_size(value_offsets, c.value_len, value_valid, i)
    if k < 0 or v < 0:
        return -1
    size += k + v + _varint_size(h1 - h0)
    for j in range(h0, h1):
        n = _span(hkey_offsets, c.hkey_len, j)
        v = _blob_size(hval_offsets, c.hval_len, hval_valid, j)
        if n < 0 or v < 0:
            return -1
        size += _varint_size(n) + n + v
        if size > MAX_AREA:
            return -1
    return size


def encode_records(Py_ssize_t start, Py_ssize_t stop,
                   const int64_t[::1] offset_deltas, const int64_t[::1] timestamp_deltas,
                   const int64_t[::1] key_offsets, const uint8_t[::1] key_data,
                   const uint8_t[::1] key_valid,
                   const int64_t[::1] value_offsets, const uint8_t[::1] value_data,
                   const uint8_t[::1] value_valid,
                   const int64_t[::1] header_offsets,
                   const int64_t[::1] hkey_offsets, const uint8_t[::1] hkey_data,
                   const int64_t[::1] hval_offsets, const uint8_t[::1] hval_data,
                   const uint8_t[::1] hval_valid):
    """The records area of rows ``[start, stop)`` (deltas indexed by row - start).

    Raises ValueError when the rows or offsets do not fit the arrays, or the
    area would not fit a batch (2 GiB)."""
    cdef Py_ssize_t i, j, n = stop - start
    cdef int64_t body, size, total = 0, h0, h1
    cdef int bad = 0
    cdef char *p
    cdef char *end
    cdef Cols c
    c.key_len = key_data.shape[0]
    c.value_len = value_data.shape[0]
    c.hkey_len = hkey_data.shape[0]
    c.hval_len = hval_data.shape[0]
    if start < 0 or n < 0 or offset_deltas.shape[0] < n or timestamp_deltas.shape[0] < n:
        raise ValueError("deltas must cover the rows")
    if (stop > key_valid.shape[0] or stop > value_valid.shape[0]
            or stop >= header_offsets.shape[0] or stop >= key_offsets.shape[0]
            or stop >= value_offsets.shape[0]):
        raise ValueError("columns shorter than the rows")
    with nogil:
        for i in range(start, stop):
            size = _body_size(i, offset_deltas[i - start], timestamp_deltas[i - start],
                              key_offsets, key_valid, value_offsets, value_valid,
                              header_offsets, hkey_offsets, hval_offsets, hval_valid, c)
            if size < 0:
                bad = 1
                break
            total += _varint_size(size) + size
            if total > MAX_AREA:
                bad = 2
                break
    if bad == 1:
        raise ValueError(f"column offsets out of order or outside their data (row {i})")
    if bad == 2:
        raise ValueError("records do not fit one batch (2 GiB)")
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    end = p + total
    with nogil:
        for i in range(start, stop):
            body = _body_size(i, offset_deltas[i - start], timestamp_deltas[i - start],
                              key_offsets, key_valid, value_offsets, value_valid,
                              header_offsets, hkey_offsets, hval_offsets, hval_valid, c)
            if body < 0 or p == NULL or 1 + _varint_size(body) > end - p:
                p = NULL
                break
            p = _put_varint(p, end, body)
            p[0] = 0  # record attributes: unused
            p += 1
            p = _put_varint(p, end, timestamp_deltas[i - start])
            p = _put_varint(p, end, offset_deltas[i - start])
            p = _put_blob(p, end, key_offsets, key_data, key_valid, i)
            p = _put_blob(p, end, value_offsets, value_data, value_valid, i)
            h0 = header_offsets[i]
            h1 = header_offsets[i + 1]
            p = _put_varint(p, end, h1 - h0)
            if p == NULL or h0 < 0 or h1 < h0 or h1 >= hkey_offsets.shape[0]:
                p = NULL
                break
            for j in range(h0, h1):
                p = _put_bytes(p, end, hkey_offsets, hkey_data, j)
                p = _put_blob(p, end, hval_offsets, hval_data, hval_valid, j)
            if p == NULL:
                break
    if p != end:
        raise ValueError("columns changed while they were encoded")
    return out
