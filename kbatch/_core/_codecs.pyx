# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The batch walk's one entry to the native codecs, without the GIL.

    codec 1 gzip    _gzip.pyx    zlib's inflate (the library Python's zlib uses)
    codec 2 snappy  _snappy.pyx  decoded here (xerial framing or a raw block)
    codec 3 lz4     _lz4.pyx     liblz4's frame API from the lz4 package
    codec 4 zstd    _zstd.pyx    libzstd from the zstandard package

Each accepts exactly what its Python path in ``compression.py`` accepts and
returns the same bytes; anything else (corrupt, truncated, over the limit,
out of memory, library missing) is ``CODEC_FAILED``, and the walk hands the
batch to the Python path, which raises the error users see. A decoder keeps
one ``CodecScratch``: the codec contexts and the output buffer are reused
from batch to batch; a failure frees the output (a refused bomb leaves
nothing behind).
"""

from libc.stdint cimport uint8_t

from kbatch._core._gzip cimport gzip_decompress, gzip_free, gzip_native
from kbatch._core._lz4 cimport (LZ4_OK, Lz4Scratch, lz4_decompress_frame, lz4_native,
                                lz4_scratch_free)
from kbatch._core._outbuf cimport CODEC_FAILED, CODEC_OK, OUT_SLACK, OutBuf, outbuf_free, outbuf_init
from kbatch._core._snappy cimport snappy_decompress
from kbatch._core._zstd cimport zstd_decompress, zstd_free, zstd_native
from kbatch._core._wire cimport CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD

from kbatch._core import _gzip

from kbatch._core import _lz4

from kbatch._core import _zstd


cdef void codec_scratch_init(CodecScratch *s) noexcept nogil:
    s.lz4.dctx = NULL
    s.lz4.data = NULL
    s.lz4.len = s.lz4.cap = 0
    s.lz4.borrowed = False
    s.zlib = NULL
    s.zstd = NULL
    outbuf_init(&s.out)


cdef void codec_scratch_free(CodecScratch *s) noexcept nogil:
    lz4_scratch_free(&s.lz4)
    gzip_free(&s.zlib)
    zstd_free(&s.zstd)
    outbuf_free(&s.out)


cdef unsigned codecs_available() noexcept nogil:
    """The mask of codecs that can be decoded here."""
    cdef unsigned mask = NATIVE_SNAPPY
    if gzip_native():
        mask |= NATIVE_GZIP
    if lz4_native():
        mask |= NATIVE_LZ4
    if zstd_native():
        mask |= NATIVE_ZSTD
    return mask


cdef int codec_decompress(CodecScratch *s, int codec, const uint8_t *src, size_t n,
                          size_t limit, const uint8_t **out,
                          size_t *out_len) noexcept nogil:
    """A batch's records compressed with ``codec`` from ``src[:n]``, at most
    ``limit`` bytes: CODEC_OK with ``out[:out_len]`` (valid until the next
    call), or CODEC_FAILED."""
    cdef int st
    if codec == CODEC_LZ4:
        if lz4_decompress_frame(&s.lz4, src, n, limit) != LZ4_OK:
            return CODEC_FAILED
        out[0] = s.lz4.data
        out_len[0] = s.lz4.len
        return CODEC_OK
    if codec == CODEC_GZIP:
        st = gzip_decompress(&s.zlib, &s.out, src, n, limit)
    elif codec == CODEC_SNAPPY:
        st = snappy_decompress(&s.out, src, n, limit)
    elif codec == CODEC_ZSTD:
        st = zstd_decompress(&s.zstd, &s.out, src, n, limit)
    else:
        st = CODEC_FAILED
    if st != CODEC_OK:
        outbuf_free(&s.out)
        return CODEC_FAILED
    out[0] = <const uint8_t *>s.out.data if s.out.data != NULL else <const uint8_t *>""
    out_len[0] = s.out.len
    return CODEC_OK


cdef int codec_decompress_into(CodecScratch *s, int codec, const uint8_t *src, size_t n,
                               size_t limit, uint8_t *dst, size_t cap,
                               size_t *out_len) noexcept nogil:
    """``codec_decompress`` into memory the caller owns (zero_copy: a
    decoder's arena, so the records stay where they were decompressed):
    ``dst[:out_len]``. ``cap`` must be at least ``codec_room(limit)``: the
    codecs then never need to grow it, and accept and refuse exactly what
    they do with their own buffer."""
    cdef OutBuf o
    cdef Lz4Scratch l
    cdef int st
    if cap < codec_room(limit):
        return CODEC_FAILED
    if codec == CODEC_LZ4:
        l.dctx = s.lz4.dctx
        l.data = dst
        l.len = 0
        l.cap = cap
        l.borrowed = True
        st = lz4_decompress_frame(&l, src, n, limit)
        s.lz4.dctx = l.dctx     # created, reused or freed by the call
        if st != LZ4_OK:
            return CODEC_FAILED
        out_len[0] = l.len
        return CODEC_OK
    o.data = dst
    o.len = 0
    o.cap = cap
    o.borrowed = True
    if codec == CODEC_GZIP:
        st = gzip_decompress(&s.zlib, &o, src, n, limit)
    elif codec == CODEC_SNAPPY:
        st = snappy_decompress(&o, src, n, limit)
    elif codec == CODEC_ZSTD:
        st = zstd_decompress(&s.zstd, &o, src, n, limit)
    else:
        st = CODEC_FAILED
    if st != CODEC_OK:
        return CODEC_FAILED
    out_len[0] = o.len
    return CODEC_OK


def native_codecs():
    """Per codec name, what decodes it without the GIL (None: the Python path)."""
    return {"gzip": _gzip.native_gzip(), "snappy": "kbatch._core._snappy",
            "lz4": "lz4 package (liblz4)" if _lz4.native_lz4() else None,
            "zstd": _zstd.native_zstd()}


def decompress(int codec, const uint8_t[::1] data, Py_ssize_t limit):
    """The native path of ``codec`` on a bytes-like object: the records, or
    None when it fails (for tests)."""
    cdef CodecScratch s
    cdef const uint8_t *out = NULL
    cdef size_t out_len = 0
    cdef size_t n = <size_t>data.shape[0]
    cdef int st
    if limit < 0:
        raise ValueError("limit must be >= 0")
    codec_scratch_init(&s)
    with nogil:
        st = codec_decompress(&s, codec, &data[0] if n else <const uint8_t *>"", n,
                              <size_t>limit, &out, &out_len)
    try:
        if st != CODEC_OK:
            return None
        return (<const char *>out)[:out_len] if out_len else b""
    finally:
        codec_scratch_free(&s)
