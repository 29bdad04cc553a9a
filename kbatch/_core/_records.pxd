# cython: language_level=3
"""The record loop of magic-2 batches, called by the batch walker."""

from libc.stdint cimport int32_t, uint8_t

from kbatch._core._columns cimport GrowBuf, RecordColumns
from kbatch._core._types cimport BatchRow, ErrorInfo, Limits


cdef enum:
    MIN_RECORD_SIZE = 7        # length, attributes, 2 deltas, key, value, headers


cdef int decode_records(RecordColumns *cols, ErrorInfo *err, const Limits *limits,
                        const uint8_t *buf, Py_ssize_t start, Py_ssize_t stop,
                        const BatchRow *row, int32_t batch_index,
                        Py_ssize_t prefetch_end, bint check_only) noexcept nogil

cdef int parse_control(RecordColumns *ctrl, GrowBuf *rows, Py_ssize_t first) noexcept nogil
