# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Records of a magic-2 batch, encoded from columns (the writer's hot loop).

Each record (DefaultRecord.java), zig-zag varints:

    length varint | attributes int8 (0) | timestampDelta varlong
    | offsetDelta varint | keyLength varint (-1 null) | key
    | valueLength varint (-1 null) | value
    | headersCount varint | [keyLength varint | key | valueLength varint | value]...

``encode_records`` sizes every record first, allocates the output once, then
writes it; columns are in Arrow layout (int64 offsets, bool validity).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef inline int _varint_size(int64_t value) noexcept nogil:
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while raw >= 0x80:
        raw >>= 7
        n += 1
    return n


cdef inline char *_put_varint(char *p, int64_t value) noexcept nogil:
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while raw >= 0x80:
        p[0] = <char>((raw & 0x7F) | 0x80)
        raw >>= 7
        p += 1
    p[0] = <char>raw
    return p + 1


cdef inline int64_t _blob_size(const int64_t[::1] offs, const uint8_t[::1] valid,
                               Py_ssize_t i) noexcept nogil:
    cdef int64_t n
    if not valid[i]:
        return 1
    n = offs[i + 1] - offs[i]
    return _varint_size(n) + n


cdef inline char *_put_blob(char *p, const int64_t[::1] offs, const uint8_t[::1] data,
                            const uint8_t[::1] valid, Py_ssize_t i) noexcept nogil:
    cdef int64_t n
    if not valid[i]:
        return _put_varint(p, -1)
    n = offs[i + 1] - offs[i]
    p = _put_varint(p, n)
    if n:
        memcpy(p, &data[offs[i]], <size_t>n)
    return p + n


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
    """The records area of rows ``[start, stop)`` (deltas indexed by row - start)."""
    cdef Py_ssize_t i, j, n = stop - start
    cdef int64_t body, total = 0, h0, h1
    cdef char *p
    if n < 0 or offset_deltas.shape[0] < n or timestamp_deltas.shape[0] < n:
        raise ValueError("deltas must cover the rows")
    if (stop > key_valid.shape[0] or stop > value_valid.shape[0]
            or stop >= header_offsets.shape[0]):
        raise ValueError("columns shorter than the rows")
    with nogil:
        for i in range(start, stop):
            total += _record_size(i, offset_deltas[i - start], timestamp_deltas[i - start],
                                  key_offsets, key_valid, value_offsets, value_valid,
                                  header_offsets, hkey_offsets, hval_offsets, hval_valid)
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    with nogil:
        for i in range(start, stop):
            body = _body_size(i, offset_deltas[i - start], timestamp_deltas[i - start],
                              key_offsets, key_valid, value_offsets, value_valid,
                              header_offsets, hkey_offsets, hval_offsets, hval_valid)
            p = _put_varint(p, body)
            p[0] = 0  # record attributes: unused
            p += 1
            p = _put_varint(p, timestamp_deltas[i - start])
            p = _put_varint(p, offset_deltas[i - start])
            p = _put_blob(p, key_offsets, key_data, key_valid, i)
            p = _put_blob(p, value_offsets, value_data, value_valid, i)
            h0 = header_offsets[i]
            h1 = header_offsets[i + 1]
            p = _put_varint(p, h1 - h0)
            for j in range(h0, h1):
                p = _put_key(p, hkey_offsets, hkey_data, j)
                p = _put_blob(p, hval_offsets, hval_data, hval_valid, j)
    return out


cdef inline char *_put_key(char *p, const int64_t[::1] offs, const uint8_t[::1] data,
                           Py_ssize_t j) noexcept nogil:
    cdef int64_t n = offs[j + 1] - offs[j]
    p = _put_varint(p, n)
    if n:
        memcpy(p, &data[offs[j]], <size_t>n)
    return p + n


cdef inline int64_t _body_size(Py_ssize_t i, int64_t offset_delta, int64_t ts_delta,
                               const int64_t[::1] key_offsets, const uint8_t[::1] key_valid,
                               const int64_t[::1] value_offsets,
                               const uint8_t[::1] value_valid,
                               const int64_t[::1] header_offsets,
                               const int64_t[::1] hkey_offsets,
                               const int64_t[::1] hval_offsets,
                               const uint8_t[::1] hval_valid) noexcept nogil:
    """Bytes of one record after its length varint."""
    cdef int64_t size = 1 + _varint_size(ts_delta) + _varint_size(offset_delta)
    cdef int64_t h0 = header_offsets[i], h1 = header_offsets[i + 1], j, n
    size += _blob_size(key_offsets, key_valid, i) + _blob_size(value_offsets, value_valid, i)
    size += _varint_size(h1 - h0)
    for j in range(h0, h1):
        n = hkey_offsets[j + 1] - hkey_offsets[j]
        size += _varint_size(n) + n + _blob_size(hval_offsets, hval_valid, j)
    return size


cdef inline int64_t _record_size(Py_ssize_t i, int64_t offset_delta, int64_t ts_delta,
                                 const int64_t[::1] key_offsets, const uint8_t[::1] key_valid,
                                 const int64_t[::1] value_offsets,
                                 const uint8_t[::1] value_valid,
                                 const int64_t[::1] header_offsets,
                                 const int64_t[::1] hkey_offsets,
                                 const int64_t[::1] hval_offsets,
                                 const uint8_t[::1] hval_valid) noexcept nogil:
    """Bytes of one record, its length varint included."""
    cdef int64_t body = _body_size(i, offset_delta, ts_delta, key_offsets, key_valid,
                                   value_offsets, value_valid, header_offsets,
                                   hkey_offsets, hval_offsets, hval_valid)
    return _varint_size(body) + body
