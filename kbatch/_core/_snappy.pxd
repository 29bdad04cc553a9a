# cython: language_level=3
"""Snappy (raw blocks and xerial framing) decoded without the GIL (see ``_snappy.pyx``)."""

from libc.stdint cimport uint8_t

from kbatch._core._outbuf cimport OutBuf


cdef int snappy_decompress(OutBuf *out, const uint8_t *src, size_t n,
                           size_t limit) noexcept nogil
