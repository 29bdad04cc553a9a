# cython: language_level=3
"""LZ4 frames decompressed without the GIL (see ``_lz4.pyx``)."""

from libc.stdint cimport uint8_t


cdef struct Lz4Scratch:
    void *dctx          # an LZ4F decompression context, NULL until first use
    uint8_t *data       # the decompressed records of the last batch
    size_t len          # bytes of ``data`` in use
    size_t cap          # bytes allocated
    bint borrowed       # data is a decoder's arena (zero_copy): never grown nor freed


cdef enum Lz4Status:
    LZ4_OK = 0
    LZ4_FAILED = 1      # not an LZ4 frame, corrupt, truncated, over the limit,
                        # or out of memory: the Python path says which


cdef bint lz4_native() noexcept nogil
cdef int lz4_decompress_frame(Lz4Scratch *s, const uint8_t *src, size_t n,
                              size_t limit) noexcept nogil
cdef void lz4_scratch_free(Lz4Scratch *s) noexcept nogil
