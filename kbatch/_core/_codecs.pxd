# cython: language_level=3
"""Every codec's native path behind one call (see ``_codecs.pyx``)."""

from libc.stdint cimport uint8_t

from kbatch._core._lz4 cimport Lz4Scratch
from kbatch._core._outbuf cimport OutBuf


cdef struct CodecScratch:
    Lz4Scratch lz4      # lz4: context and output
    void *zlib          # gzip: zlib's inflate state, NULL until first use
    void *zstd          # zstd: a ZSTD_DCtx, NULL until first use
    OutBuf out          # gzip, snappy, zstd: the decompressed records


cdef enum:
    NATIVE_GZIP = 1 << 1    # bit (1 << codec) of a mask of codecs to decode here
    NATIVE_SNAPPY = 1 << 2
    NATIVE_LZ4 = 1 << 3
    NATIVE_ZSTD = 1 << 4


cdef void codec_scratch_init(CodecScratch *s) noexcept nogil
cdef void codec_scratch_free(CodecScratch *s) noexcept nogil
cdef unsigned codecs_available() noexcept nogil
cdef int codec_decompress(CodecScratch *s, int codec, const uint8_t *src, size_t n,
                          size_t limit, const uint8_t **out,
                          size_t *out_len) noexcept nogil
cdef int codec_decompress_into(CodecScratch *s, int codec, const uint8_t *src, size_t n,
                               size_t limit, uint8_t *dst, size_t cap,
                               size_t *out_len) noexcept nogil


cdef inline size_t codec_room(size_t limit) noexcept nogil:
    """Bytes ``codec_decompress_into`` needs for a batch of at most ``limit``:
    one past the limit (shows an overflow) and snappy's slack."""
    return limit + 1 + 16
