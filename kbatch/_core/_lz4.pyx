# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""LZ4 frames (codec 3 of magic-2 batches) decompressed without the GIL.

The ``lz4`` package's Python functions hold the GIL around every call, so
with several decoding threads each compressed batch costs GIL hand-offs that
serialise them. The package's ``_frame`` extension carries liblz4's frame API
as exported C symbols; at import we look up the five entry points below
(``LZ4F_*``, a stable API since liblz4 1.8), check them on a frame the package
itself compressed, and call them straight from the decode loop. When the
symbols are missing (another build of the package) ``lz4_native()`` is false
and every lz4 batch takes the Python path of ``compression.py``: slower, never
different.

The frame format (lz4_Frame_format.md), which liblz4 parses and checks:

    magic 04 22 4D 18 | FLG BD [content size u64] [dict id u32] HC
    | blocks: size u32 LE (bit 31: stored) data [xxh32]  ... | 00 00 00 00
    | [content xxh32]

Only success is decided here: a frame that fails in any way (bad magic or
checksum, a truncated frame, output beyond the limit, no memory) returns
``LZ4_FAILED`` and the caller hands the batch to the Python path, which fails
the same way and raises the error users see. Bytes after the frame's end mark
are ignored, as in the Python path.
"""

import ctypes

import lz4.frame as _lz4_frame

from libc.stdint cimport uint8_t, uintptr_t
from libc.stdlib cimport free, realloc

ctypedef size_t (*create_fn)(void **dctx, unsigned version) noexcept nogil
ctypedef size_t (*free_fn)(void *dctx) noexcept nogil
ctypedef void (*reset_fn)(void *dctx) noexcept nogil
ctypedef unsigned (*is_error_fn)(size_t code) noexcept nogil
ctypedef size_t (*decompress_fn)(void *dctx, void *dst, size_t *dst_size,
                                 const void *src, size_t *src_size,
                                 const void *options) noexcept nogil

cdef enum:
    LZ4F_VERSION = 100
    FIRST_CAPACITY = 64 << 10

cdef create_fn _create = NULL
cdef free_fn _free = NULL
cdef reset_fn _reset = NULL
cdef is_error_fn _is_error = NULL
cdef decompress_fn _decompress = NULL


cdef bint lz4_native() noexcept nogil:
    return _decompress != NULL


cdef void lz4_scratch_free(Lz4Scratch *s) noexcept nogil:
    if s.dctx != NULL and _free != NULL:
        _free(s.dctx)
    s.dctx = NULL
    if not s.borrowed:
        free(s.data)
    s.data = NULL
    s.len = s.cap = 0


cdef int _grow(Lz4Scratch *s, size_t n, size_t limit) noexcept nogil:
    """More room for output: double (at first a few times the input), never
    past ``limit + 1`` bytes (one more than allowed shows the overflow)."""
    cdef size_t want = s.cap * 2 if s.cap else max(<size_t>FIRST_CAPACITY, 4 * n)
    cdef uint8_t *p
    if s.borrowed:
        return -1
    if want > limit + 1:
        want = limit + 1
    if want <= s.cap:
        return -1
    p = <uint8_t *>realloc(s.data, want)
    if p == NULL:
        return -1
    s.data = p
    s.cap = want
    return 0


cdef int lz4_decompress_frame(Lz4Scratch *s, const uint8_t *src, size_t n,
                              size_t limit) noexcept nogil:
    """One LZ4 frame from ``src[:n]`` into ``s.data[:s.len]``, at most
    ``limit`` bytes: ``LZ4_OK`` or ``LZ4_FAILED``. On failure the scratch
    buffer is freed (a refused bomb leaves nothing allocated behind)."""
    cdef size_t in_pos = 0, dst_size, src_size, hint
    if _decompress == NULL:
        return LZ4_FAILED
    if s.dctx == NULL:
        if _is_error(_create(&s.dctx, LZ4F_VERSION)):
            s.dctx = NULL
            return LZ4_FAILED
    else:
        _reset(s.dctx)  # forget a frame an earlier failure left half read
    s.len = 0
    while True:
        if s.cap == s.len and _grow(s, n, limit) != 0:
            lz4_scratch_free(s)  # over the limit (or no memory)
            return LZ4_FAILED
        dst_size = s.cap - s.len
        src_size = n - in_pos
        hint = _decompress(s.dctx, s.data + s.len, &dst_size, src + in_pos, &src_size, NULL)
        if _is_error(hint):
            lz4_scratch_free(s)
            return LZ4_FAILED
        in_pos += src_size
        s.len += dst_size
        if s.len > limit or (src_size == 0 and dst_size == 0):
            lz4_scratch_free(s)  # over the limit, or liblz4 made no progress
            return LZ4_FAILED
        if hint == 0:  # the end mark (and content checksum) read: frame done
            return LZ4_OK
        if in_pos == n and s.len < s.cap:
            # all input taken, room left, frame not finished: truncated
            lz4_scratch_free(s)
            return LZ4_FAILED


def _resolve():
    """Addresses of the LZ4F entry points in the lz4 package, or None."""
    try:
        lib = ctypes.CDLL(_lz4_frame._frame.__file__)
        names = ("LZ4F_createDecompressionContext", "LZ4F_freeDecompressionContext",
                 "LZ4F_resetDecompressionContext", "LZ4F_isError", "LZ4F_decompress")
        return [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in names]
    except (OSError, AttributeError):
        return None


def _install():
    global _create, _free, _reset, _is_error, _decompress
    addresses = _resolve()
    if not addresses or not all(addresses):
        return
    _create = <create_fn><uintptr_t>addresses[0]
    _free = <free_fn><uintptr_t>addresses[1]
    _reset = <reset_fn><uintptr_t>addresses[2]
    _is_error = <is_error_fn><uintptr_t>addresses[3]
    _decompress = <decompress_fn><uintptr_t>addresses[4]
    probe = bytes(range(256)) * 700 + b"kbatch" * 3000
    frames = [_lz4_frame.compress(probe, block_size=_lz4_frame.BLOCKSIZE_MAX64KB,
                                  block_linked=linked, content_checksum=linked,
                                  store_size=linked) for linked in (False, True)]
    if any(decompress_frame(f, len(probe)) != probe for f in frames):
        _decompress = NULL


def native_lz4():
    """True when lz4 batches decompress without the GIL (liblz4's C API)."""
    return _decompress != NULL


def decompress_frame(const uint8_t[::1] data, Py_ssize_t limit):
    """The native path on a bytes-like object: the frame's bytes, or None
    when it fails (for tests and the import check)."""
    cdef Lz4Scratch s
    cdef int st
    cdef size_t n = <size_t>data.shape[0]
    if limit < 0:
        raise ValueError("limit must be >= 0")
    s.dctx = NULL
    s.data = NULL
    s.len = s.cap = 0
    s.borrowed = False
    with nogil:
        st = lz4_decompress_frame(&s, &data[0] if n else <const uint8_t *>"", n,
                                  <size_t>limit)
    try:
        if st != LZ4_OK:
            return None
        return (<const char *>s.data)[:s.len] if s.len else b""
    finally:
        lz4_scratch_free(&s)


_install()
