# cython: language_level=3
"""Legacy message sets (magic 0 and 1), called by the batch walker."""

from libc.stdint cimport int32_t, uint8_t

from kbatch._core._columns cimport RecordColumns
from kbatch._core._types cimport BatchRow, ErrorInfo


cdef int legacy_top(RecordColumns *cols, BatchRow *row, ErrorInfo *err,
                    const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end,
                    int32_t batch_index, int crc_mode, bint headers_only,
                    Py_ssize_t *value_start, Py_ssize_t *value_stop) noexcept nogil

cdef int legacy_inner(RecordColumns *cols, BatchRow *row, ErrorInfo *err,
                      const uint8_t *buf, Py_ssize_t n, int32_t batch_index,
                      int crc_mode) noexcept nogil
