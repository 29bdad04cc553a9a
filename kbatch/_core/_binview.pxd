# cython: language_level=3
"""One Arrow binary view (16 bytes) located in its data buffers, bounds
checked: the table view's kernel (``_latest``) and the gather (``_take``)
read views through this one rule.

    view   length int32 | value (<= 12 bytes, zero padded)
           length int32 | prefix 4 B | buffer int32 | offset int32
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

cdef enum:
    VIEW_INLINE = 12            # a view holds a value of up to this many bytes itself


cdef inline bint view_bytes(const uint8_t *v, const uint8_t **bufs, const int64_t *buf_len,
                            int32_t nbuf, const uint8_t **p, int64_t *n,
                            int64_t *room) noexcept nogil:
    """The value of view ``v``: where its bytes start, how many, and how many
    bytes of their buffer lie from there on (12 for an inline value: the
    view's own, never the next view's); False when they are not inside it."""
    cdef int32_t length, b, off
    memcpy(&length, v, 4)
    if length < 0:
        return False
    if length <= VIEW_INLINE:
        p[0] = v + 4
        n[0] = length
        room[0] = VIEW_INLINE
        return True
    memcpy(&b, v + 8, 4)
    memcpy(&off, v + 12, 4)
    if b < 0 or b >= nbuf or off < 0 or length > buf_len[b] - off:
        return False
    p[0] = bufs[b] + off
    n[0] = length
    room[0] = buf_len[b] - off
    return True
