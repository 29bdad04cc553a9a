# cython: language_level=3
"""The batch walker's class, declared for the modules that cimport it."""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t

from kbatch._core._codecs cimport CodecScratch
from kbatch._core._columns cimport GrowBuf, RecordColumns
from kbatch._core._types cimport BatchRow, ControlRow, ErrorInfo, Limits
from kbatch._core._viewbufs cimport ViewBuffers


cdef class BatchDecoder:
    cdef const uint8_t[::1] _view
    cdef const uint8_t *_buf
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _end
    cdef Py_ssize_t _zeros_from
    cdef bint _more_follows
    cdef Py_ssize_t _data_end
    cdef bint _control_crc
    cdef RecordColumns _data
    cdef RecordColumns _ctrl
    cdef GrowBuf _batches
    cdef GrowBuf _controls
    cdef ErrorInfo _err
    cdef Limits _limits
    cdef int _crc_mode
    cdef bint _headers_only
    cdef bint _control_only
    cdef bint _include_control
    cdef bint _strict
    cdef bint _stop_on_corrupt
    cdef Py_ssize_t _chunk_records
    cdef Py_ssize_t _chunk_bytes
    cdef bint _has_pending
    cdef bint _done
    cdef Py_ssize_t _pending_index
    cdef Py_ssize_t _pending_start
    cdef Py_ssize_t _pending_stop
    cdef Py_ssize_t _pending_next
    cdef int _end_reason
    cdef Py_ssize_t _valid_end
    cdef const int64_t[::1] _drop      # sorted batch positions whose records are dropped
    cdef Py_ssize_t _drop_next
    cdef CodecScratch _codecs        # compressed batches decompressed in the walk (no GIL)
    cdef unsigned _native            # codecs decompressed in the walk: bits 1 << codec
    cdef size_t _max_decompressed
    cdef bint _zero_copy             # keys and values as binary views (no copy)
    cdef ViewBuffers _vbufs          # zero_copy: the buffers the views point into
    cdef list _fed                   # zero_copy: records fed by Python, kept
    cdef Py_ssize_t _expect_bytes    # data the chunk should span, over every source
    cdef readonly object path
    cdef readonly object end_error

    cdef void _presize(self) noexcept nogil
    cdef int _run(self) noexcept nogil
    cdef bint _dropped(self, int64_t position) noexcept nogil
    cdef int _legacy_message(self, Py_ssize_t pos, Py_ssize_t batch_end) noexcept nogil
    cdef int _native_batch(self, Py_ssize_t pos, Py_ssize_t batch_end,
                           Py_ssize_t index, int codec) noexcept nogil
    cdef int _walk_records(self, const uint8_t *buf, Py_ssize_t start, Py_ssize_t stop,
                           Py_ssize_t index, bint compressed) noexcept nogil
    cdef int _decode_batch_records(self, const uint8_t *buf, Py_ssize_t start,
                                   Py_ssize_t stop, Py_ssize_t index,
                                   bint compressed, bint dropped) noexcept nogil
    cdef int _view_source(self, Py_ssize_t start, Py_ssize_t stop) noexcept nogil
    cdef list _take_buffers(self)
    cdef int _finish_error(self, int st, bint compressed) noexcept nogil
    cdef int _fail(self, int code, int64_t position, int64_t a,
                   int64_t b) noexcept nogil
    cdef BatchRow *_row(self, Py_ssize_t index) noexcept nogil
    cdef int _add_row(self, const BatchRow *row) noexcept nogil
    cdef bint _chunk_full(self) noexcept nogil
    cdef object _error_or_stop(self, Py_ssize_t batch_index)
    cdef bint _torn_tail(self, Py_ssize_t position)
