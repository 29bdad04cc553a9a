# cython: language_level=3
"""Zstandard frames decompressed without the GIL (see ``_zstd.pyx``)."""

from libc.stdint cimport uint8_t

from kbatch._core._outbuf cimport OutBuf


cdef bint zstd_native() noexcept nogil
cdef int zstd_decompress(void **dctx, OutBuf *out, const uint8_t *src, size_t n,
                         size_t limit) noexcept nogil
cdef void zstd_free(void **dctx) noexcept nogil
