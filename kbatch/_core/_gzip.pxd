# cython: language_level=3
"""gzip streams inflated without the GIL (see ``_gzip.pyx``)."""

from libc.stdint cimport uint8_t

from kbatch._core._outbuf cimport OutBuf


cdef bint gzip_native() noexcept nogil
cdef int gzip_decompress(void **stream, OutBuf *out, const uint8_t *src, size_t n,
                         size_t limit) noexcept nogil
cdef void gzip_free(void **stream) noexcept nogil
