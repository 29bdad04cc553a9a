# cython: language_level=3
"""Column builders: growable C buffers that become numpy arrays without a copy.

A ``RecordColumns`` is what one decode chunk fills, in Arrow layout:

    fixed[COL_<NAME>]  col_<name>_t[n], one per fixed-width column of the table
                       (``coltable.py``, listed in the generated ``_coltable.pxd``:
                       offset, timestamp, timestamp type and batch row so far)
    key        BinaryBuilder     value      BinaryBuilder
    headers    int32[n + 1]      (header index where each record's headers start)
    hkey       BinaryBuilder     hvalue     BinaryBuilder   (one entry per header)

    BinaryBuilder:  offsets int32[m + 1] | data uint8[...] | validity bitmap
                    (LSB-first, bit set = not null, as Arrow)

    view mode (zero_copy, key and value only): every value is also written
    as a 16-byte Arrow binary view into a data buffer the decoder keeps (the
    source, or decompressed records), and no value byte is copied:

        views   [length int32 LE | value, zero padded]            length <= 12
                [length int32 LE | prefix 4 B | buffer int32 | offset int32]

    ``data`` then holds nothing (``data.len`` counts the bytes viewed, so
    chunk sizes and limits are those of the copy mode) and ``offsets`` keep
    the lengths' running sum.

Capacity is reserved once per batch from bounds the bytes guarantee (a batch
holds at most ``size / 7`` records and at most ``size`` payload bytes), so the
record loop writes through plain pointers. Buffers grow with ``realloc``,
which on Linux moves large blocks by remapping pages instead of copying.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

from kbatch._core._coltable cimport FIXED_ROW_BYTES, N_FIXED


cdef struct GrowBuf:
    char *data
    Py_ssize_t len       # bytes in use
    Py_ssize_t cap       # bytes allocated
    bint zero_fill       # new capacity is zeroed (bitmaps)
    int role             # which column it serves (memory pool matching)


cdef extern from *:
    # ``len += rows * width`` for each fixed column, written out in a macro
    # generated from the table (``_coltable.pxd``)
    void fixed_add_rows "KB_FIXED_ADD_ROWS"(GrowBuf *fixed, Py_ssize_t rows) noexcept nogil


cdef struct BinaryBuilder:
    GrowBuf offsets      # int32, count + 1 entries, offsets[0] == 0
    GrowBuf data         # uint8
    GrowBuf validity     # bitmap, ceil(count / 8) bytes, zero-filled
    Py_ssize_t count
    Py_ssize_t null_count
    GrowBuf views              # view mode: 16 bytes per value
    bint view_mode
    int32_t view_buffer        # view mode: buffer index of the bytes being decoded
    const uint8_t *view_base   # ... and their first byte


# Bytes every record takes whatever its size: the fixed columns'
# (FIXED_ROW_BYTES, their widths summed from coltable.py), key/value/header
# offsets 4 + 4 + 4, and the key and value validity bits (counted as a byte)
cdef enum:
    ROW_FIXED_BYTES = FIXED_ROW_BYTES + 13


cdef struct RecordColumns:
    Py_ssize_t n
    GrowBuf fixed[N_FIXED]   # coltable.py's columns, index COL_<NAME> (_coltable.pxd)
    BinaryBuilder key
    BinaryBuilder value
    GrowBuf headers      # int32, n + 1 entries
    BinaryBuilder hkey
    BinaryBuilder hvalue
    # projection (``columns=``): the record loop walks and checks these fields
    # but stores nothing for them; ``columns_take`` gives None in their place
    bint skip_key        # key
    bint skip_value      # value
    bint skip_payload    # both (skip_key and skip_value)
    bint skip_headers    # headers
    Py_ssize_t unread_header_rows   # with skip_headers: records that had headers


# A snapshot of the lengths, to undo a batch that failed half-way.
cdef struct ColumnsMark:
    Py_ssize_t n
    Py_ssize_t key_bytes, value_bytes, key_nulls, value_nulls
    Py_ssize_t headers, hkey_bytes, hvalue_bytes, hvalue_nulls
    Py_ssize_t unread_header_rows


cdef int growbuf_grow(GrowBuf *b, Py_ssize_t extra) noexcept nogil
cdef void growbuf_free(GrowBuf *b) noexcept nogil
cdef int columns_init(RecordColumns *c) noexcept nogil
cdef void columns_free(RecordColumns *c) noexcept nogil
cdef int columns_reserve_rows(RecordColumns *c, Py_ssize_t rows) noexcept nogil
cdef ColumnsMark columns_mark(const RecordColumns *c) noexcept nogil
cdef void columns_rollback(RecordColumns *c, const ColumnsMark *m,
                           bint committed=*) noexcept nogil
cdef Py_ssize_t columns_payload_bytes(const RecordColumns *c) noexcept nogil
cdef Py_ssize_t columns_held_bytes(const RecordColumns *c) noexcept nogil
cdef dict columns_take(RecordColumns *c)
cdef object growbuf_take(GrowBuf *b, object dtype)


cdef inline int growbuf_reserve(GrowBuf *b, Py_ssize_t extra) noexcept nogil:
    """Make room for ``extra`` more bytes; 0 on success, -1 when out of memory."""
    if extra <= b.cap - b.len:
        return 0
    return growbuf_grow(b, extra)


cdef inline void columns_add_rows(RecordColumns *c, Py_ssize_t n,
                                  Py_ssize_t rows) noexcept nogil:
    """``rows`` records written after the first ``n`` (``c.n``, which the
    caller has read) into the fixed columns and the header offsets, their
    capacity reserved by ``columns_reserve_rows``: commit them."""
    c.n = n + rows
    fixed_add_rows(c.fixed, rows)
    c.headers.len += rows * 4


cdef inline int binary_reserve(BinaryBuilder *b, Py_ssize_t items,
                               Py_ssize_t nbytes) noexcept nogil:
    """Room for ``items`` more values holding ``nbytes`` bytes in all."""
    if growbuf_reserve(&b.offsets, items * 4) != 0:
        return -1
    if growbuf_reserve(&b.data, nbytes) != 0:   # never in view mode: nbytes 0
        return -1
    # validity.len tracks ceil(count / 8); one spare byte covers the rounding
    return growbuf_reserve(&b.validity, (items >> 3) + 1)


cdef inline int binary_reserve_any(BinaryBuilder *b, Py_ssize_t items,
                                   Py_ssize_t nbytes) noexcept nogil:
    """``binary_reserve`` for either mode. View mode: room for the views
    (and offsets, bitmap); ``data`` is never reserved, as its ``len`` counts
    bytes viewed, not bytes held."""
    if not b.view_mode:
        return binary_reserve(b, items, nbytes)
    if (growbuf_reserve(&b.offsets, items * 4) != 0
            or growbuf_reserve(&b.views, items * 16) != 0):
        return -1
    return growbuf_reserve(&b.validity, (items >> 3) + 1)


cdef inline void binary_append_unchecked(BinaryBuilder *b, const uint8_t *src,
                                         Py_ssize_t length) noexcept nogil:
    """Append one value (``length < 0`` is null); capacity must be reserved."""
    cdef int32_t *offs = <int32_t *>b.offsets.data
    cdef Py_ssize_t i = b.count
    if length >= 0:
        (<uint8_t *>b.validity.data)[i >> 3] |= <uint8_t>(1 << (i & 7))
        if length > 0:  # an empty value may meet a still unallocated (NULL) buffer
            kb_copy(b.data.data + b.data.len, src, <size_t>length)
            b.data.len += length
    else:
        b.null_count += 1
    offs[i + 1] = <int32_t>b.data.len
    b.count = i + 1
    b.offsets.len += 4
    b.validity.len = (b.count + 7) >> 3


cdef inline void binary_append_any(BinaryBuilder *b, const uint8_t *src,
                                   Py_ssize_t length) noexcept nogil:
    """``binary_append_unchecked``, or in view mode the value's view (into
    ``b.view_base``'s buffer, nothing copied); capacity must be reserved."""
    cdef int32_t *offs
    cdef Py_ssize_t i = b.count
    if not b.view_mode:
        binary_append_unchecked(b, src, length)
        return
    kb_view(b.views.data + b.views.len, src, length, b.view_buffer, src - b.view_base)
    b.views.len += 16
    if length >= 0:
        (<uint8_t *>b.validity.data)[i >> 3] |= <uint8_t>(1 << (i & 7))
        b.data.len += length
    else:
        b.null_count += 1
    offs = <int32_t *>b.offsets.data
    offs[i + 1] = <int32_t>b.data.len
    b.count = i + 1
    b.offsets.len += 4
    b.validity.len = (b.count + 7) >> 3


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Copy n bytes; short copies (most keys and header fields) as two
       overlapping fixed-size moves inside [src, src + n), no libc call. */
    static inline void kb_copy(void *dst, const void *src, size_t n) {
        char *d = (char *)dst;
        const char *s = (const char *)src;
        if (n > 16) {
            memcpy(d, s, n);
        } else if (n >= 8) {
            uint64_t a, b;
            memcpy(&a, s, 8); memcpy(&b, s + n - 8, 8);
            memcpy(d, &a, 8); memcpy(d + n - 8, &b, 8);
        } else if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, s, 4); memcpy(&b, s + n - 4, 4);
            memcpy(d, &a, 4); memcpy(d + n - 4, &b, 4);
        } else {
            for (size_t i = 0; i < n; i++) d[i] = s[i];
        }
    }
    /* One Arrow binary view (16 bytes) of src[:n] at byte ``offset`` of data
       buffer ``buffer``; n < 0 (null) writes zeros. */
    static inline void kb_view(void *dst, const void *src, Py_ssize_t n,
                               int32_t buffer, Py_ssize_t offset) {
        unsigned char v[16];
        int32_t len = n > 0 ? (int32_t)n : 0;
        memset(v, 0, 16);
        memcpy(v, &len, 4);
        if (len > 12) {
            int32_t off = (int32_t)offset;
            memcpy(v + 4, src, 4);
            memcpy(v + 8, &buffer, 4);
            memcpy(v + 12, &off, 4);
        } else if (len > 0) {
            kb_copy(v + 4, src, (size_t)len);
        }
        memcpy(dst, v, 16);
    }
    /* kb_view without branches on the length (n >= 0, and 12 bytes readable
       at src: the record loop checks): key lengths around 12 would
       otherwise mispredict. Little-endian hosts; others use kb_view. */
    static const uint64_t kb_low_bytes[9] = {
        0x0ULL, 0xFFULL, 0xFFFFULL, 0xFFFFFFULL, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL,
        0xFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFFFULL};
    static inline void kb_view12(void *dst, const void *src, Py_ssize_t n,
                                 int32_t buffer, Py_ssize_t offset) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        const unsigned char *s = (const unsigned char *)src;
        uint32_t head;
        uint64_t tail, w0, w1, far;
        uint32_t len = (uint32_t)n;
        uint32_t k4 = len < 4 ? len : 4;
        uint32_t k8 = len < 4 ? 0 : (len - 4 > 8 ? 8 : len - 4);
        memcpy(&head, s, 4);
        memcpy(&tail, s + 4, 8);
        w0 = (uint64_t)len | ((uint64_t)(head & (uint32_t)kb_low_bytes[k4]) << 32);
        far = (uint64_t)(uint32_t)buffer | ((uint64_t)(uint32_t)offset << 32);
        w1 = len > 12 ? far : (tail & kb_low_bytes[k8]);
        memcpy(dst, &w0, 8);
        memcpy((char *)dst + 8, &w1, 8);
    #else
        kb_view(dst, src, n, buffer, offset);
    #endif
    }
    """
    void kb_copy(void *dst, const void *src, size_t n) noexcept nogil
    void kb_view(void *dst, const void *src, Py_ssize_t n, int32_t buffer,
                 Py_ssize_t offset) noexcept nogil
    void kb_view12(void *dst, const void *src, Py_ssize_t n, int32_t buffer,
                   Py_ssize_t offset) noexcept nogil
