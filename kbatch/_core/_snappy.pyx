# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Snappy batches (codec 2) decoded here, without the GIL.

The python-snappy package wraps a Rust decoder with no C entry points, so the
format is decoded here; it is small. What ``compression.unsnappy`` accepts:

    xerial framing (told apart by the first 8 bytes; the 8 version bytes that
    follow are not checked, Java writes them in either byte order):

        82 'SNAPPY' 00 | version i32 | compat i32 | { length i32 BE | raw block }*

    otherwise one raw block:

        uncompressed length (varint, at most 5 bytes here) | elements
        element = tag byte, low 2 bits:
          00 literal: len-1 in the high 6 bits; 60..63 mean 1..4 LE bytes of
             len-1 follow; then len bytes
          01 copy: len 4..11 (bits 2-4), offset 11 bits (bits 5-7 | 1 byte)
          10 copy: len 1..64 (high 6 bits), offset u16 LE
          11 copy: len 1..64 (high 6 bits), offset u32 LE
        a copy's offset is 1..bytes written so far (it may overlap its own
        output); the elements must fill exactly the declared length

A block is accepted exactly when the reference decoder (the Rust ``snap``
crate behind python-snappy) accepts it, including its one quirk: a literal
with a length byte needs 4 bytes left after its tag. A declared length over
the limit is refused before anything is allocated. Anything refused returns
``CODEC_FAILED`` and the Python path raises the error users see.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from kbatch._core._cursor cimport likely, load_be32, unlikely
from kbatch._core._outbuf cimport (CODEC_FAILED, CODEC_OK, OUT_SLACK, OutBuf, outbuf_free,
                             outbuf_init, outbuf_reserve)

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    static inline uint32_t kb_load_le32(const uint8_t *p) {
        uint32_t v; memcpy(&v, p, 4); return v;   /* x86-64 and aarch64: LE */
    }
    static inline uint32_t kb_load_le16(const uint8_t *p) {
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    }
    """
    uint32_t load_le32 "kb_load_le32"(const uint8_t *p) noexcept nogil
    uint32_t load_le16 "kb_load_le16"(const uint8_t *p) noexcept nogil

cdef const uint8_t *XERIAL_MAGIC = b"\x82SNAPPY\x00"
cdef enum:
    XERIAL_HEADER = 16
    MAX_LENGTH_BYTES = 5

cdef uint32_t[5] _MASK
_MASK[:] = [0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF]


cdef inline void _copy_back(uint8_t *d, size_t offset, size_t n) noexcept nogil:
    """``n`` bytes from ``offset`` back in the output, overlap allowed (the
    pattern repeats). Writes at most ``n + OUT_SLACK`` bytes past ``d``."""
    cdef const uint8_t *s = d - offset
    cdef size_t i
    if offset >= 16:
        while True:
            memcpy(d, s, 16)
            if n <= 16:
                return
            d += 16
            s += 16
            n -= 16
    if offset >= 8:
        while True:
            memcpy(d, s, 8)
            if n <= 8:
                return
            d += 8
            s += 8
            n -= 8
    for i in range(n):
        d[i] = s[i]


cdef int _raw_block(OutBuf *out, const uint8_t *src, size_t n, size_t limit) noexcept nogil:
    """One raw block from ``src[:n]`` appended to ``out``, whose total stays
    at most ``limit``: CODEC_OK or CODEC_FAILED."""
    cdef uint64_t length = 0
    cdef size_t s = 0, d, dlen, size, offset, extra
    cdef uint8_t *dst
    cdef uint8_t tag
    while True:  # the declared length: a varint of at most 5 bytes
        if s == MAX_LENGTH_BYTES or s == n:
            return CODEC_FAILED
        tag = src[s]
        length |= <uint64_t>(tag & 0x7F) << (7 * s)
        s += 1
        if tag < 0x80:
            break
    if length > limit - out.len:
        return CODEC_FAILED
    dlen = <size_t>length
    if outbuf_reserve(out, out.len + dlen + OUT_SLACK, limit + OUT_SLACK) != 0:
        return CODEC_FAILED
    dst = out.data + out.len
    d = 0
    while s < n:
        tag = src[s]
        s += 1
        if (tag & 3) == 0:  # literal
            size = (tag >> 2) + 1
            if likely(size <= 16 and 16 <= n - s and 16 <= dlen - d):
                memcpy(dst + d, src + s, 16)
                s += size
                d += size
                continue
            if size > 60:
                if n - s < 4:  # the reference decoder reads 4 bytes here
                    return CODEC_FAILED
                extra = size - 60
                size = <size_t>(load_le32(src + s) & _MASK[extra]) + 1
                s += extra
            if size > n - s or size > dlen - d:
                return CODEC_FAILED
            memcpy(dst + d, src + s, size)
            s += size
            d += size
            continue
        if (tag & 3) == 1:
            if n - s < 1:
                return CODEC_FAILED
            size = ((tag >> 2) & 7) + 4
            offset = (<size_t>(tag >> 5) << 8) | src[s]
            s += 1
        elif (tag & 3) == 2:
            if n - s < 2:
                return CODEC_FAILED
            size = (tag >> 2) + 1
            offset = load_le16(src + s)
            s += 2
        else:
            if n - s < 4:
                return CODEC_FAILED
            size = (tag >> 2) + 1
            offset = load_le32(src + s)
            s += 4
        if offset == 0 or offset > d or size > dlen - d:
            return CODEC_FAILED
        _copy_back(dst + d, offset, size)
        d += size
    if d != dlen:
        return CODEC_FAILED
    out.len += dlen
    return CODEC_OK


cdef int snappy_decompress(OutBuf *out, const uint8_t *src, size_t n,
                           size_t limit) noexcept nogil:
    """A batch's snappy records (xerial or one raw block) from ``src[:n]``
    into ``out.data[:out.len]``, at most ``limit`` bytes: CODEC_OK or
    CODEC_FAILED. Keeps in memory: the output buffer (reused)."""
    cdef size_t pos = XERIAL_HEADER
    cdef int64_t size
    out.len = 0
    if n < XERIAL_HEADER or memcmp(src, XERIAL_MAGIC, 8) != 0:
        return _raw_block(out, src, n, limit)
    while pos < n:
        if n - pos < 4:
            return CODEC_FAILED
        size = <int32_t>load_be32(src + pos)
        pos += 4
        if size < 0 or <size_t>size > n - pos:
            return CODEC_FAILED
        if _raw_block(out, src + pos, <size_t>size, limit) != CODEC_OK:
            return CODEC_FAILED
        pos += <size_t>size
    return CODEC_OK


def decompress(const uint8_t[::1] data, Py_ssize_t limit):
    """The native path on a bytes-like object: the records, or None when it
    fails (for tests)."""
    cdef OutBuf out
    cdef int st
    cdef size_t n = <size_t>data.shape[0]
    if limit < 0:
        raise ValueError("limit must be >= 0")
    outbuf_init(&out)
    with nogil:
        st = snappy_decompress(&out, &data[0] if n else <const uint8_t *>"", n,
                               <size_t>limit)
    try:
        if st != CODEC_OK:
            return None
        return (<const char *>out.data)[:out.len] if out.len else b""
    finally:
        outbuf_free(&out)
