# cython: language_level=3
"""Checksums the decoders call without the GIL.

- CRC-32C (Castagnoli), magic 2: a VPCLMULQDQ folding routine where the CPU
  has one (``_crc32c_fold.h``), else the ``crc32c`` package's own hardware (or
  software) routine, called through a function pointer resolved at import.
- CRC-32 (IEEE, as zlib), magic 0/1: a slicing-by-8 table implementation.
"""

from libc.stdint cimport uint8_t, uint32_t

cdef uint32_t crc32c(const uint8_t *data, size_t n) noexcept nogil
cdef uint32_t crc32_ieee(const uint8_t *data, size_t n) noexcept nogil
