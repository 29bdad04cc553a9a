# cython: language_level=3
"""The one bounds-checked reader that every kbatch parser goes through.

A ``Cursor`` is a window ``[pos, end)`` over a read-only byte region. Every
read checks ``n <= end - pos`` first (never ``pos + n <= end``, which can
overflow), returns a status code instead of raising (the callers run without
the GIL), and advances ``pos`` only when the read succeeded.

    big-endian fixed ints:  u8 | be16 | be32 | be64
    varint  (int32):  zig-zag, 7 bits per byte, at most 5 bytes
    varlong (int64):  zig-zag, 7 bits per byte, at most 10 bytes

Like Kafka's ByteUtils, bits of a 5th varint byte (10th varlong byte) that do
not fit the type are dropped; a continuation bit on that last byte is an error.
"""

from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t,
                          uint16_t, uint32_t, uint64_t)


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    static inline uint16_t kb_load_be16(const uint8_t *p) {
        uint16_t v; memcpy(&v, p, 2); return __builtin_bswap16(v);
    }
    static inline uint32_t kb_load_be32(const uint8_t *p) {
        uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v);
    }
    static inline uint64_t kb_load_be64(const uint8_t *p) {
        uint64_t v; memcpy(&v, p, 8); return __builtin_bswap64(v);
    }
    #define kb_likely(x) __builtin_expect(!!(x), 1)
    #define kb_unlikely(x) __builtin_expect(!!(x), 0)
    """
    uint16_t load_be16 "kb_load_be16"(const uint8_t *p) noexcept nogil
    uint32_t load_be32 "kb_load_be32"(const uint8_t *p) noexcept nogil
    uint64_t load_be64 "kb_load_be64"(const uint8_t *p) noexcept nogil
    bint likely "kb_likely"(bint) noexcept nogil
    bint unlikely "kb_unlikely"(bint) noexcept nogil


cdef enum CursorStatus:
    CUR_OK = 0
    CUR_SHORT = 1      # fewer bytes left than the read needs
    CUR_VARINT = 2     # a varint longer than 5 bytes or a varlong longer than 10


cdef struct Cursor:
    const uint8_t *buf   # base of the region
    Py_ssize_t pos       # next byte to read; 0 <= pos <= end
    Py_ssize_t end       # one past the last readable byte


cdef inline Cursor cursor_over(const uint8_t *buf, Py_ssize_t pos,
                               Py_ssize_t end) noexcept nogil:
    cdef Cursor c
    c.buf = buf
    c.pos = pos
    c.end = end
    return c


cdef inline Py_ssize_t remaining(const Cursor *c) noexcept nogil:
    return c.end - c.pos


cdef inline bint has(const Cursor *c, Py_ssize_t n) noexcept nogil:
    """True when ``n`` more bytes can be read (``n`` must be >= 0)."""
    return n <= c.end - c.pos


cdef inline int skip(Cursor *c, Py_ssize_t n) noexcept nogil:
    if unlikely(n < 0 or n > c.end - c.pos):
        return CUR_SHORT
    c.pos += n
    return CUR_OK


cdef inline int read_u8(Cursor *c, uint8_t *out) noexcept nogil:
    if unlikely(c.pos >= c.end):
        return CUR_SHORT
    out[0] = c.buf[c.pos]
    c.pos += 1
    return CUR_OK


cdef inline int read_be16(Cursor *c, int16_t *out) noexcept nogil:
    if unlikely(2 > c.end - c.pos):
        return CUR_SHORT
    out[0] = <int16_t>load_be16(c.buf + c.pos)
    c.pos += 2
    return CUR_OK


cdef inline int read_be32(Cursor *c, int32_t *out) noexcept nogil:
    if unlikely(4 > c.end - c.pos):
        return CUR_SHORT
    out[0] = <int32_t>load_be32(c.buf + c.pos)
    c.pos += 4
    return CUR_OK


cdef inline int read_be64(Cursor *c, int64_t *out) noexcept nogil:
    if unlikely(8 > c.end - c.pos):
        return CUR_SHORT
    out[0] = <int64_t>load_be64(c.buf + c.pos)
    c.pos += 8
    return CUR_OK


cdef inline int read_varint(Cursor *c, int32_t *out) noexcept nogil:
    """Zig-zag varint into int32; one- and two-byte values take short paths."""
    cdef uint32_t raw, b
    cdef int shift
    if likely(c.pos < c.end):
        b = c.buf[c.pos]
        if likely(b < 0x80):
            c.pos += 1
            out[0] = <int32_t>((b >> 1) ^ (0u - (b & 1)))
            return CUR_OK
        if likely(1 < c.end - c.pos) and c.buf[c.pos + 1] < 0x80:
            raw = (b & 0x7f) | (<uint32_t>c.buf[c.pos + 1] << 7)
            c.pos += 2
            out[0] = <int32_t>((raw >> 1) ^ (0u - (raw & 1)))
            return CUR_OK
    raw = 0
    shift = 0
    while True:
        if unlikely(c.pos >= c.end):
            return CUR_SHORT
        b = c.buf[c.pos]
        c.pos += 1
        raw |= (b & 0x7f) << shift
        if b < 0x80:
            break
        shift += 7
        if unlikely(shift > 28):
            return CUR_VARINT
    out[0] = <int32_t>((raw >> 1) ^ (0u - (raw & 1)))
    return CUR_OK


cdef inline int read_varlong(Cursor *c, int64_t *out) noexcept nogil:
    """Zig-zag varlong into int64, at most 10 bytes."""
    cdef uint64_t raw, b
    cdef int shift
    if likely(c.pos < c.end):
        b = c.buf[c.pos]
        if likely(b < 0x80):
            c.pos += 1
            out[0] = <int64_t>((b >> 1) ^ (0ull - (b & 1)))
            return CUR_OK
    raw = 0
    shift = 0
    while True:
        if unlikely(c.pos >= c.end):
            return CUR_SHORT
        b = c.buf[c.pos]
        c.pos += 1
        raw |= (b & 0x7f) << shift
        if b < 0x80:
            break
        shift += 7
        if unlikely(shift > 63):
            return CUR_VARINT
    out[0] = <int64_t>((raw >> 1) ^ (0ull - (raw & 1)))
    return CUR_OK


cdef inline bint all_zero(const uint8_t *buf, Py_ssize_t pos,
                          Py_ssize_t end) noexcept nogil:
    """True when every byte of ``buf[pos:end]`` is zero (preallocated tails)."""
    while pos < end:
        if buf[pos] != 0:
            return False
        pos += 1
    return True
