# cython: language_level=3
"""The output buffer of the native codecs (gzip, snappy, zstd): one malloc'd
region reused from batch to batch, grown on demand, never past a limit.

    data[0:len)   the decompressed records of the last batch
    data[len:cap) room; snappy reserves ``OUT_SLACK`` bytes past the length
                  it declares, so its copies can write 16 bytes at a time
"""

from libc.stdint cimport uint8_t
from libc.stdlib cimport free, realloc


cdef enum:
    OUT_SLACK = 16
    OUT_FIRST_CAPACITY = 64 << 10


cdef struct OutBuf:
    uint8_t *data
    size_t len
    size_t cap
    bint borrowed       # data is someone else's (zero_copy: a decoder's arena):
                        # never reallocated nor freed, its cap is all there is


cdef inline void outbuf_init(OutBuf *b) noexcept nogil:
    b.data = NULL
    b.len = b.cap = 0
    b.borrowed = False


cdef inline void outbuf_free(OutBuf *b) noexcept nogil:
    if not b.borrowed:
        free(b.data)
    outbuf_init(b)


cdef inline int outbuf_reserve(OutBuf *b, size_t need, size_t ceiling) noexcept nogil:
    """At least ``need`` bytes allocated, doubling but never past ``ceiling``
    (unless ``need`` is larger): 0, or -1 without memory. ``need`` comes from
    a count already checked against the limit."""
    cdef size_t want
    cdef uint8_t *p
    if need <= b.cap:
        return 0
    if b.borrowed:
        return -1
    want = b.cap * 2
    if want > ceiling:
        want = ceiling
    if want < need:
        want = need
    p = <uint8_t *>realloc(b.data, want)
    if p == NULL:
        return -1
    b.data = p
    b.cap = want
    return 0


cdef inline int outbuf_grow(OutBuf *b, size_t n_in, size_t limit) noexcept nogil:
    """More room for a stream of unknown length: double (at first a few times
    the input ``n_in``), never past ``limit + 1`` bytes (one more than allowed
    shows the overflow). 0, or -1 when no more is allowed or no memory."""
    cdef size_t want = b.cap * 2 if b.cap else max(<size_t>OUT_FIRST_CAPACITY, 4 * n_in)
    if want > limit + 1:
        want = limit + 1
    if want <= b.cap:
        return -1
    return outbuf_reserve(b, want, want)


cdef enum CodecStatus:
    CODEC_OK = 0
    CODEC_FAILED = 1    # corrupt, truncated, over the limit or out of memory:
                        # the Python path decompresses it again and says which
