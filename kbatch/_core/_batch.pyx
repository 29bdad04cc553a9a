# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Record batches, magic 2 (DefaultRecordBatch.java), decoded into columns.

Batch header, big-endian, then the records (compressed as one stream when
codec != 0):

    off  field                 type
     0   baseOffset            int64
     8   batchLength           int32   bytes after this field: batch = 12 + length
    12   partitionLeaderEpoch  int32
    16   magic                 int8    2 (0 and 1: legacy message sets)
    17   crc                   uint32  CRC-32C of bytes [21, end of batch)
    21   attributes            int16   bits 0-2 codec, 3 LogAppendTime,
                                       4 transactional, 5 control, 6 delete horizon
    23   lastOffsetDelta       int32
    27   baseTimestamp         int64
    35   maxTimestamp          int64
    43   producerId            int64
    51   producerEpoch         int16
    53   baseSequence          int32
    57   recordsCount          int32
    61   records

The records of a batch are decoded by ``_records.pyx``; magic 0/1 message
sets, met anywhere in the walk, by ``_legacy.pyx``.

``BatchDecoder.run()`` walks batches without the GIL and stops when the chunk
is full, at the end of the data, at a compressed batch it cannot decompress
itself (Python decompresses it and calls ``feed()``), at a legacy message set,
or at an error. Batches of every codec are decompressed in the walk itself by
``_codecs.pyx`` when the codec's library is reachable, so several threads
decode them in parallel. Errors leave the nogil
code as an ``ErrorInfo`` and become exceptions in ``_make_error``.
"""

from libc.stdint cimport INT32_MAX, INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

import numpy as np

from kbatch._core._checksums cimport crc32c
from kbatch._core._columns cimport (BinaryBuilder, ColumnsMark, GrowBuf,
                              RecordColumns, binary_append_unchecked, binary_reserve, columns_free,
                              columns_held_bytes, columns_init, columns_mark,
                              columns_payload_bytes,
                              columns_reserve_rows, columns_rollback, columns_take,
                              growbuf_free, growbuf_reserve, growbuf_take)
from kbatch._core._cursor cimport (CUR_OK, CUR_SHORT, CUR_VARINT, Cursor, all_zero,
                             cursor_over, likely, load_be16, load_be32, load_be64,
                             read_u8, read_varint, read_varlong, remaining, unlikely)
from kbatch._core._codecs cimport (NATIVE_GZIP, NATIVE_LZ4, NATIVE_SNAPPY, NATIVE_ZSTD,
                                   codec_decompress, codec_decompress_into, codec_room,
                                   codec_scratch_free, codec_scratch_init, codecs_available)
from kbatch._core._legacy cimport legacy_inner, legacy_top
from kbatch._core._mapguard cimport KB_FAULTED, kb_guarded_call, kb_guarded_copy, kb_guarded_fn
from kbatch._core._outbuf cimport CODEC_OK
from kbatch._core._presize cimport presize_estimate
from kbatch._core._records cimport decode_records, parse_control
from kbatch._core._types cimport *
from kbatch._core._viewbufs cimport (BUF_ARENA, BUF_FED, BUF_SOURCE, BufDesc, viewbufs_arena,
                                     viewbufs_at, viewbufs_fed, viewbufs_free, viewbufs_init,
                                     viewbufs_use, viewbufs_window)
from kbatch._core._wire cimport *

from kbatch.errors import CorruptRecordError, FileChangedError, LimitExceededError


cdef enum:
    HEADER_UP_TO_MAGIC = H_MAGIC + 1   # enough to tell the format apart
    MIN_LENGTH_V2 = HEADER_V2 - LOG_OVERHEAD
    MIN_LENGTH_ANY = 14        # smallest legacy message (magic 0)
    HEADER_STRIDE = 8          # a header walk fetches the header this many batches on


cdef extern from *:
    void prefetch "__builtin_prefetch"(const void *p) noexcept nogil



# --- the batch table's numpy dtype, from the C layout ---------------------

cdef int64_t[::1] _NO_DROP = np.empty(0, np.int64)
cdef BatchRow _probe_row
cdef ControlRow _probe_ctrl

cdef size_t _off(void *field, void *base) noexcept:
    return <size_t>(<char *>field - <char *>base)

BATCH_DTYPE = np.dtype({
    "names": ["base_offset", "last_offset", "position", "producer_id",
              "base_timestamp", "max_timestamp", "size", "partition_leader_epoch",
              "base_sequence", "records_count", "crc", "producer_epoch",
              "attributes", "magic", "codec", "timestamp_type", "is_transactional",
              "is_control", "has_delete_horizon", "crc_valid"],
    "formats": ["<i8", "<i8", "<i8", "<i8", "<i8", "<i8", "<i4", "<i4", "<i4",
                "<i4", "<u4", "<i2", "<i2", "i1", "i1", "i1", "?", "?", "?", "i1"],
    "offsets": [_off(&_probe_row.base_offset, &_probe_row),
                _off(&_probe_row.last_offset, &_probe_row),
                _off(&_probe_row.position, &_probe_row),
                _off(&_probe_row.producer_id, &_probe_row),
                _off(&_probe_row.base_timestamp, &_probe_row),
                _off(&_probe_row.max_timestamp, &_probe_row),
                _off(&_probe_row.size, &_probe_row),
                _off(&_probe_row.partition_leader_epoch, &_probe_row),
                _off(&_probe_row.base_sequence, &_probe_row),
                _off(&_probe_row.records_count, &_probe_row),
                _off(&_probe_row.crc, &_probe_row),
                _off(&_probe_row.producer_epoch, &_probe_row),
                _off(&_probe_row.attributes, &_probe_row),
                _off(&_probe_row.magic, &_probe_row),
                _off(&_probe_row.codec, &_probe_row),
                _off(&_probe_row.timestamp_type, &_probe_row),
                _off(&_probe_row.is_transactional, &_probe_row),
                _off(&_probe_row.is_control, &_probe_row),
                _off(&_probe_row.has_delete_horizon, &_probe_row),
                _off(&_probe_row.crc_valid, &_probe_row)],
    "itemsize": sizeof(BatchRow),
})

CONTROL_DTYPE = np.dtype({
    "names": ["coordinator_epoch", "version", "type", "value_version"],
    "formats": ["<i4", "<i2", "<i2", "<i2"],
    "offsets": [_off(&_probe_ctrl.coordinator_epoch, &_probe_ctrl),
                _off(&_probe_ctrl.version, &_probe_ctrl),
                _off(&_probe_ctrl.type, &_probe_ctrl),
                _off(&_probe_ctrl.value_version, &_probe_ctrl)],
    "itemsize": sizeof(ControlRow),
})

END_REASONS = {END_NONE: None, END_TRUNCATED: "truncated",
               END_ZERO_PADDING: "zero_padding", END_CORRUPT: "corrupt"}

# --- messages for every error code: the one place codes become text -----

_MESSAGES = {
    E_NOMEM: "out of memory while decoding",
    E_CRC: "CRC mismatch: stored {a:#010x}, computed {b:#010x}",
    E_MAGIC: "unknown magic byte {a}",
    E_BATCH_LENGTH: "batch length {a} is below the minimum {b}",
    E_COUNT_NEGATIVE: "negative record count {a}",
    E_COUNT_TOO_LARGE: "record count {a} cannot fit in {b} bytes of records",
    E_FEW_RECORDS: "records end after {a} of {b} records",
    E_RECORD_LENGTH: "record length {a} runs past the batch ({b} bytes left)",
    E_RECORD_TRUNCATED: "a record field runs past the record's length",
    E_VARINT: "varint longer than 5 bytes or varlong longer than 10",
    E_RECORD_SIZE: "record declares {a} bytes but its fields use {b}",
    E_HEADER_COUNT: "header count {a} does not fit in the {b} bytes left in the record",
    E_HEADER_KEY_NULL: "negative header key length {a}",
    E_HEADER_KEY_UTF8: "header key is not valid UTF-8",
    E_TRAILING_BYTES: "{a} bytes left over after the last record",
    E_LIMIT_BATCH_BYTES: "batch of {a} bytes is larger than max_batch_bytes={b}",
    E_LIMIT_RECORDS: "batch of {a} records is more than max_records_per_batch={b}",
    E_LIMIT_HEADERS: "record with {a} headers is more than max_headers_per_record={b}",
    E_LIMIT_READ_BYTES: ("decoded data exceeds max_read_bytes={b} (a batch of {a} records "
                         "does not fit; read in chunks with iter_segment / log.iter)"),
    E_LEGACY_LENGTH: "legacy message size {a} is below the minimum {b}",
    E_LEGACY_NESTED: "compressed legacy message nested inside another",
    E_LEGACY_ATTRIBUTES: "legacy message with unknown codec {a}",
    E_LEGACY_KEY_VALUE: "legacy key/value lengths disagree with the message size",
    E_LEGACY_EMPTY: "compressed legacy message holds no messages",
    E_LEGACY_OFFSETS: "wrapper offset {a} is below its last inner offset {b}",
    E_LEGACY_NULL_WRAPPER: "compressed legacy message has a null value",
    E_RECORD_OFFSET: "record offset delta {a} is outside the batch header's 0..{b} "
                     "(lastOffsetDelta)",
}


cdef object _make_error(const ErrorInfo *err, object path):
    """The one function that turns a decoder status into an exception."""
    text = _MESSAGES.get(err.code, "corrupt data (code {code})").format(
        a=err.a, b=err.b, code=err.code)
    if err.inner >= 0:
        text += f" (byte {err.inner} of the decompressed records)"
    cls = (LimitExceededError if err.code in (E_LIMIT_BATCH_BYTES, E_LIMIT_RECORDS,
                                              E_LIMIT_HEADERS, E_LIMIT_READ_BYTES)
           else CorruptRecordError)
    return cls(
        text, path=path, position=err.position,
        base_offset=err.base_offset if err.base_offset >= 0 else None,
        batch_position=err.batch_position)


cdef struct TailCheck:
    const uint8_t *buf
    Py_ssize_t position
    Py_ssize_t end
    Py_ssize_t zeros_from
    bint result


cdef int _torn_tail_entry(void *arg) noexcept nogil:
    cdef TailCheck *c = <TailCheck *>arg
    cdef int64_t length = <int32_t>load_be32(c.buf + c.position + H_LENGTH)
    cdef Py_ssize_t batch_end
    if length < 0 or length > c.end - c.position - LOG_OVERHEAD:
        return 0
    batch_end = c.position + LOG_OVERHEAD + length
    c.result = batch_end < c.end and all_zero(c.buf, batch_end, c.zeros_from)
    return 0


cdef int _run_entry(void *decoder) noexcept nogil:
    """The walk, as a C callback for the SIGBUS guard (``decoder`` is borrowed)."""
    return (<BatchDecoder>decoder)._run()


cdef inline Py_ssize_t batch_end_of(const uint8_t *buf, Py_ssize_t pos) noexcept nogil:
    return pos + LOG_OVERHEAD + <int32_t>load_be32(buf + pos + H_LENGTH)


cdef inline void _parse_header(const uint8_t *p, Py_ssize_t position, BatchRow *row) noexcept nogil:
    cdef int16_t attributes = <int16_t>load_be16(p + H_ATTRIBUTES)
    row.base_offset = <int64_t>load_be64(p)
    row.size = <int32_t>load_be32(p + H_LENGTH) + LOG_OVERHEAD
    row.partition_leader_epoch = <int32_t>load_be32(p + H_PARTITION_LEADER_EPOCH)
    row.magic = <int8_t>p[16]
    row.crc = load_be32(p + H_CRC)
    row.attributes = attributes
    row.last_offset = row.base_offset + <int32_t>load_be32(p + H_LAST_OFFSET_DELTA)
    row.base_timestamp = <int64_t>load_be64(p + H_BASE_TIMESTAMP)
    row.max_timestamp = <int64_t>load_be64(p + H_MAX_TIMESTAMP)
    row.producer_id = <int64_t>load_be64(p + H_PRODUCER_ID)
    row.producer_epoch = <int16_t>load_be16(p + H_PRODUCER_EPOCH)
    row.base_sequence = <int32_t>load_be32(p + H_BASE_SEQUENCE)
    row.records_count = <int32_t>load_be32(p + H_RECORDS_COUNT)
    row.position = position
    row.codec = attributes & ATTR_CODEC
    row.timestamp_type = 1 if attributes & ATTR_LOG_APPEND_TIME else 0
    row.is_transactional = (attributes & ATTR_TRANSACTIONAL) != 0
    row.is_control = (attributes & ATTR_CONTROL) != 0
    row.has_delete_horizon = (attributes & ATTR_DELETE_HORIZON) != 0
    row.crc_valid = -1
    row._pad = 0


cdef class BatchDecoder:
    """Walks the record batches of one buffer and fills columns, chunk by chunk.

    Holds: a view of the source (never copied), the columns of the current
    chunk, and the batch table of that chunk. Not thread-safe; make one per
    thread (the GIL is released while it decodes).
    """

    def __cinit__(self):
        columns_init(&self._data)
        columns_init(&self._ctrl)
        self._batches.zero_fill = False
        self._controls.zero_fill = False
        codec_scratch_init(&self._codecs)
        viewbufs_init(&self._vbufs)
        self._fed = []

    def __init__(self, const uint8_t[::1] view not None, *, Py_ssize_t start=0,
                 Py_ssize_t stop=-1, object path=None, object validate_crc=True,
                 bint headers_only=False, bint control_only=False,
                 bint include_control=False, bint strict=False,
                 bint stop_on_corrupt=False, Py_ssize_t chunk_records=1 << 62,
                 Py_ssize_t chunk_bytes=1 << 30, Py_ssize_t max_batch_bytes=INT32_MAX,
                 Py_ssize_t max_records_per_batch=INT32_MAX,
                 Py_ssize_t max_headers_per_record=INT32_MAX,
                 const int64_t[::1] drop_positions=None,
                 Py_ssize_t max_decompressed_bytes=256 << 20, bint native_lz4=True,
                 Py_ssize_t zeros_from=-1, Py_ssize_t max_read_bytes=-1,
                 bint native_gzip=True, bint native_snappy=True, bint native_zstd=True,
                 bint zero_copy=False, bint skip_key=False, bint skip_value=False,
                 bint skip_headers=False,
                 bint more_follows=False, bint validate_control_crc=False,
                 Py_ssize_t expect_bytes=0, Py_ssize_t data_end=-1):
        cdef Py_ssize_t size = view.shape[0]
        if stop < 0 or stop > size:
            stop = size
        if start < 0 or start > stop:
            raise ValueError(f"start {start} outside [0, {stop}]")
        if chunk_records < 1 or chunk_bytes < 1:
            raise ValueError("chunk_records and chunk_bytes must be positive")
        self._view = view
        self._buf = &view[0] if size > 0 else NULL
        self._pos = start
        self._end = stop
        # a trailing hole of the file (kbatch.lib.files.data_end): known zeros, so
        # a zero-padded tail is not scanned (nor its pages faulted in)
        self._zeros_from = zeros_from if 0 <= zeros_from < stop else stop
        # a window of a larger object (kbatch.lib.sources.RangeWindows): the data
        # goes on past ``stop`` (to ``data_end``), so zeros reaching it are not a
        # padded tail, and a batch cut by it is only truncated if it also runs
        # past the data's end (else the next window holds it)
        self._more_follows = more_follows
        self._data_end = data_end if data_end >= stop else stop
        # CRCs off, but control batches (transaction markers) checked anyway:
        # a transaction pass whose data batches the decode then checks
        self._control_crc = validate_control_crc
        self.path = path
        if validate_crc == "report":
            self._crc_mode = CRC_REPORT
        else:
            self._crc_mode = CRC_RAISE if validate_crc else CRC_SKIP
        self._headers_only = headers_only
        self._control_only = control_only
        self._include_control = include_control
        self._strict = strict
        self._stop_on_corrupt = stop_on_corrupt
        self._chunk_records = chunk_records
        # int32 Arrow offsets: a chunk's payload stays below 1 GiB + one batch
        self._chunk_bytes = min(chunk_bytes, 1 << 30)
        self._limits.max_batch_bytes = max_batch_bytes
        self._limits.max_records_per_batch = max_records_per_batch
        self._limits.max_headers_per_record = max_headers_per_record
        # max_read_bytes: what one chunk's columns may hold, fixed per-record
        # bytes included, checked before a batch's rows are reserved
        self._limits.max_read_bytes = max_read_bytes if max_read_bytes >= 0 else INT64_MAX
        self._limits.read_budget = self._limits.max_read_bytes
        self._err.code = E_NONE
        self._end_reason = END_NONE
        self._valid_end = start
        self._done = False
        self.end_error = None
        # read_committed: batches (sorted positions) decoded and checked as
        # usual, then their records rolled back (aborted transactions)
        self._drop = drop_positions if drop_positions is not None else _NO_DROP
        self._drop_next = 0
        # compressed batches: decompressed here without the GIL, or by Python (feed)
        if max_decompressed_bytes < 0:
            raise ValueError("max_decompressed_bytes must be >= 0")
        self._max_decompressed = <size_t>max_decompressed_bytes
        self._native = codecs_available() & (
            (NATIVE_LZ4 if native_lz4 else 0) | (NATIVE_GZIP if native_gzip else 0)
            | (NATIVE_SNAPPY if native_snappy else 0) | (NATIVE_ZSTD if native_zstd else 0))
        # zero_copy: data keys and values become binary views into the source
        # and the decompressed records (control records stay copied)
        self._zero_copy = zero_copy
        self._data.key.view_mode = self._data.value.view_mode = zero_copy
        # projection: data keys and values / headers checked but not stored
        # (take() gives None for them; control records are always whole)
        if zero_copy and skip_key and skip_value:
            raise ValueError("zero_copy has no keys or values to view when they are skipped")
        self._data.skip_key = skip_key
        self._data.skip_value = skip_value
        self._data.skip_payload = skip_key and skip_value
        self._data.skip_headers = skip_headers
        # bytes of data the chunk should span, over this source and the ones
        # continue_with() adds: sizes the first reservation (_presize) only
        self._expect_bytes = max(expect_bytes, 0)

    def __dealloc__(self):
        codec_scratch_free(&self._codecs)
        viewbufs_free(&self._vbufs)
        columns_free(&self._data)
        columns_free(&self._ctrl)
        growbuf_free(&self._batches)
        growbuf_free(&self._controls)

    # --- state visible to Python ---------------------------------------

    @property
    def position(self):
        """Byte where the next batch starts."""
        return self._pos

    @property
    def end_reason(self):
        return END_REASONS[self._end_reason]

    @property
    def valid_end(self):
        """Byte where valid data ends (after the last whole, valid batch)."""
        return self._valid_end

    @property
    def stop(self):
        return self._end

    @property
    def rows(self):
        return self._data.n

    @property
    def batch_rows(self):
        """Batch rows in the chunk being built."""
        return self._batches.len // sizeof(BatchRow)

    def source_windows(self):
        """zero_copy: ``(start, stop)`` of each window of the current source
        that the chunk's views point into, in buffer order."""
        cdef Py_ssize_t i, n = self._vbufs.desc.len // <Py_ssize_t>sizeof(BufDesc)
        cdef BufDesc *d
        out = []
        for i in range(n):
            d = viewbufs_at(&self._vbufs, i)
            if d.kind == BUF_SOURCE:
                out.append((d.start, d.stop))
        return out

    def replace_source_windows(self, list buffers not None):
        """zero_copy, before ``continue_with``: the windows ``source_windows()``
        listed become the buffer objects ``buffers`` (same order; each one
        exactly those bytes, kept alive here until ``take()``)."""
        cdef Py_ssize_t i, k = 0, n = self._vbufs.desc.len // <Py_ssize_t>sizeof(BufDesc)
        cdef BufDesc *d
        if len(buffers) != len(self.source_windows()):
            raise ValueError("one buffer per source window")
        for i in range(n):
            d = viewbufs_at(&self._vbufs, i)
            if d.kind == BUF_SOURCE:
                if len(memoryview(buffers[k])) != d.stop - d.start:
                    raise ValueError("a buffer differs in size from its window")
                d.kind = BUF_FED
                d.index = <int32_t>self._vbufs.fed
                d.start = d.stop = 0
                self._vbufs.fed += 1
                self._fed.append(buffers[k])
                k += 1
        self._vbufs.window = -1

    def max_last_offset(self, Py_ssize_t first_row=0):
        """The largest last offset of the chunk's batch rows from
        ``first_row`` on (None when there are none)."""
        cdef Py_ssize_t i, n = self._batches.len // sizeof(BatchRow)
        cdef int64_t top
        first_row = max(first_row, 0)
        if first_row >= n:
            return None
        top = self._row(first_row).last_offset
        for i in range(first_row + 1, n):
            if self._row(i).last_offset > top:
                top = self._row(i).last_offset
        return top

    def release(self):
        """Drop the view of the source (so an mmap can be closed)."""
        self._view = None
        self._buf = NULL
        self._end = self._pos

    def continue_with(self, const uint8_t[::1] view not None, *, Py_ssize_t start=0,
                      Py_ssize_t stop=-1, object path=None, Py_ssize_t zeros_from=-1,
                      const int64_t[::1] drop_positions=None, object more_follows=None,
                      Py_ssize_t data_end=-1):
        """Go on decoding ``view[start:stop]`` into the chunk being built,
        as if its batches followed the last source's (a partition's next
        segment, or the same source after a damaged range: no columns are
        joined afterwards). Only after ``run()`` ended the last source (its
        end is the caller's to check first); with zero_copy, once
        ``replace_source_windows`` has given the last source's windows
        their own buffer objects.
        Batch rows keep their positions in their own source; ``batch_rows``
        before the switch says where one source's rows end.
        ``drop_positions``, ``more_follows`` (None: unchanged), ``data_end``:
        as in the constructor, for this source (a range read window by
        window: the windows before the last are followed by more of the
        object)."""
        cdef Py_ssize_t size = view.shape[0]
        if self._zero_copy and self.source_windows():
            raise RuntimeError("zero_copy: the chunk's views still name windows of the last "
                               "source (replace_source_windows first)")
        if not self._done or self._has_pending:
            raise RuntimeError("continue_with needs the last source decoded to its end")
        if stop < 0 or stop > size:
            stop = size
        if start < 0 or start > stop:
            raise ValueError(f"start {start} outside [0, {stop}]")
        self._view = view
        self._buf = &view[0] if size > 0 else NULL
        self._pos = self._valid_end = start
        self._end = stop
        self._zeros_from = zeros_from if 0 <= zeros_from < stop else stop
        self.path = path
        self._end_reason = END_NONE
        self.end_error = None
        self._err.code = E_NONE    # a corrupt batch it stopped at (stop_on_corrupt) is passed
        self._drop = drop_positions if drop_positions is not None else _NO_DROP
        self._drop_next = 0
        if more_follows is not None:
            self._more_follows = bool(more_follows)
        self._data_end = data_end if data_end >= stop else stop
        self._done = False

    # --- the walk ------------------------------------------------------

    cdef BatchRow *_row(self, Py_ssize_t index) noexcept nogil:
        return <BatchRow *>self._batches.data + index

    cdef bint _dropped(self, int64_t position) noexcept nogil:
        """Whether the batch at ``position`` is listed in ``drop_positions``
        (positions come in increasing order as the walk goes)."""
        cdef Py_ssize_t n = self._drop.shape[0]
        while self._drop_next < n and self._drop[self._drop_next] < position:
            self._drop_next += 1
        return self._drop_next < n and self._drop[self._drop_next] == position

    cdef int _add_row(self, const BatchRow *row) noexcept nogil:
        if growbuf_reserve(&self._batches, sizeof(BatchRow)) != 0:
            return -1
        memcpy(self._batches.data + self._batches.len, row, sizeof(BatchRow))
        self._batches.len += sizeof(BatchRow)
        return 0

    cdef bint _chunk_full(self) noexcept nogil:
        # bytes: keys, values and headers plus ROW_FIXED_BYTES per record
        return self._batches.len > 0 and (
            self._data.n >= self._chunk_records
            or columns_held_bytes(&self._data) >= self._chunk_bytes)

    def set_read_budget(self, Py_ssize_t budget):
        """Bytes the chunk being built may still hold under max_read_bytes
        (a whole read spends one budget over all its chunks)."""
        self._limits.read_budget = max(budget, 0)

    cdef int _fail(self, int code, int64_t position, int64_t a, int64_t b) noexcept nogil:
        """A batch-level error at the batch starting at the cursor."""
        self._err.batch_position = self._pos
        self._err.base_offset = <int64_t>load_be64(self._buf + self._pos)
        return set_error(&self._err, code, position, -1, a, b)

    cdef int _decode_batch_records(self, const uint8_t *buf, Py_ssize_t start,
                                   Py_ssize_t stop, Py_ssize_t index,
                                   bint compressed, bint dropped) noexcept nogil:
        """Records of batch ``index`` from ``buf[start:stop]`` into the columns
        (``dropped``: only checked, see ``decode_records``)."""
        cdef BatchRow *row = self._row(index)
        cdef Py_ssize_t first_ctrl
        cdef int st
        self._err.batch_position = row.position
        self._err.base_offset = row.base_offset
        if row.is_control:
            first_ctrl = self._ctrl.n
            st = decode_records(&self._ctrl, &self._err, &self._limits, buf, start,
                                 stop, row, <int32_t>index, 0, False)
            if st == 0 and parse_control(&self._ctrl, &self._controls, first_ctrl) != 0:
                st = set_error(&self._err, E_NOMEM, row.position, -1, 0, 0)
            if st != 0 or not self._include_control:
                return self._finish_error(st, compressed)
        st = decode_records(&self._data, &self._err, &self._limits, buf, start, stop,
                             row, <int32_t>index, 0 if compressed else self._end, dropped)
        return self._finish_error(st, compressed)

    cdef int _view_source(self, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
        """zero_copy: the views that follow point into the source's bytes
        [start, stop) (a window of it): 0, or -1 when out of memory."""
        cdef Py_ssize_t desc = viewbufs_window(&self._vbufs, start, stop)
        if desc < 0:
            return -1
        return viewbufs_use(&self._data, desc, self._buf + viewbufs_at(&self._vbufs, desc).start)

    cdef int _finish_error(self, int st, bint compressed) noexcept nogil:
        """Errors inside compressed records point at the batch, plus an inner byte."""
        if st != 0 and compressed:
            self._err.inner = self._err.position
            self._err.position = self._err.batch_position
        return st

    cdef int _legacy_message(self, Py_ssize_t pos, Py_ssize_t batch_end) noexcept nogil:
        """A magic 0/1 top-level message: 0 when decoded, else a status."""
        cdef BatchRow row
        cdef Py_ssize_t index = self._batches.len // sizeof(BatchRow)
        cdef Py_ssize_t value_start = 0, value_stop = 0
        cdef int st
        if self._zero_copy and self._view_source(pos, batch_end) != 0:
            return self._fail(E_NOMEM, pos, 0, 0)
        st = legacy_top(&self._data, &row, &self._err, self._buf, pos, batch_end,
                                 <int32_t>index, self._crc_mode,
                                 self._headers_only or self._control_only,
                                 &value_start, &value_stop)
        if st == ST_ERROR:
            return st
        if self._add_row(&row) != 0:
            return self._fail(E_NOMEM, pos, 0, 0)
        if st == 1:
            self._has_pending = True
            self._pending_index = index
            self._pending_start = value_start
            self._pending_stop = value_stop
            self._pending_next = batch_end
            return ST_COMPRESSED
        self._pos = batch_end
        return 0

    cdef int _native_batch(self, Py_ssize_t pos, Py_ssize_t batch_end,
                           Py_ssize_t index, int codec) noexcept nogil:
        """The compressed batch ``index`` decompressed and decoded in the
        walk: 0, ST_ERROR (its records are corrupt), or ST_COMPRESSED when the
        decompression itself failed and Python must decompress it."""
        cdef const uint8_t *records
        cdef size_t n
        cdef GrowBuf *arena
        cdef Py_ssize_t at
        cdef int st
        if self._zero_copy:
            # decompressed where the views will point: the end of an arena
            arena = viewbufs_arena(&self._vbufs, codec_room(self._max_decompressed))
            if arena == NULL:
                return self._fail(E_NOMEM, pos, 0, 0)
            at = arena.len
            if codec_decompress_into(&self._codecs, codec, self._buf + pos + HEADER_V2,
                                     <size_t>(batch_end - pos - HEADER_V2),
                                     self._max_decompressed, <uint8_t *>arena.data + at,
                                     <size_t>(arena.cap - at), &n) != CODEC_OK:
                return ST_COMPRESSED
            viewbufs_use(&self._data, self._vbufs.arena, <const uint8_t *>arena.data)
            st = self._walk_records(<const uint8_t *>arena.data + at, 0, <Py_ssize_t>n,
                                    index, True)
            # kept only when views point into it (not for a batch read_committed drops)
            if st == 0 and not self._dropped(self._row(index).position):
                arena.len = at + <Py_ssize_t>n
            return st
        if codec_decompress(&self._codecs, codec, self._buf + pos + HEADER_V2,
                            <size_t>(batch_end - pos - HEADER_V2),
                            self._max_decompressed, &records, &n) != CODEC_OK:
            return ST_COMPRESSED
        return self._walk_records(records, 0, <Py_ssize_t>n, index, True)

    cdef int _walk_records(self, const uint8_t *buf, Py_ssize_t start, Py_ssize_t stop,
                           Py_ssize_t index, bint compressed) noexcept nogil:
        """Records of batch ``index`` (or the inner messages of a legacy
        wrapper) from ``buf[start:stop]``: 0 or ST_ERROR. On an error the
        chunk goes back to before the batch (its row too); a batch in
        ``drop_positions`` has its records checked as in a full decode, none
        stored, and its rows rolled back."""
        cdef ColumnsMark data_mark = columns_mark(&self._data)
        cdef ColumnsMark ctrl_mark = columns_mark(&self._ctrl)
        cdef Py_ssize_t ctrl_rows = self._controls.len
        cdef bint dropped = self._dropped(self._row(index).position)
        cdef int st
        if self._row(index).magic < 2:
            st = legacy_inner(&self._data, self._row(index), &self._err, buf + start,
                              stop - start, <int32_t>index, self._crc_mode)
        else:
            st = self._decode_batch_records(buf, start, stop, index, compressed, dropped)
        if st != 0:
            columns_rollback(&self._data, &data_mark)
            columns_rollback(&self._ctrl, &ctrl_mark)
            self._controls.len = ctrl_rows
            self._batches.len = index * sizeof(BatchRow)
            return st
        if dropped:
            columns_rollback(&self._data, &data_mark, True)
        return 0

    cdef void _presize(self) noexcept nogil:
        """Reserve a new chunk's record columns (and value bytes) up front
        from the estimate of ``_presize.pxd``: sized once instead of growing
        as the walk goes. A hint only: failures are ignored, and the walk
        still reserves (and reports) batch by batch."""
        cdef Py_ssize_t rows, data
        if (self._headers_only or self._control_only or self._data.n != 0
                or self._batches.len != 0 or self._buf == NULL):
            return
        rows = presize_estimate(self._buf, self._pos, min(self._end, self._zeros_from),
                                self._expect_bytes, self._chunk_records, self._chunk_bytes,
                                self._limits.read_budget, &data)
        if rows == 0:
            return
        if columns_reserve_rows(&self._data, rows) == 0 and not self._data.skip_value:
            if not self._data.value.view_mode:
                growbuf_reserve(&self._data.value.data, data)

    cdef int _run(self) noexcept nogil:
        cdef const uint8_t *buf = self._buf
        cdef Py_ssize_t pos, rem, batch_end
        cdef int32_t length
        cdef int8_t magic
        cdef uint32_t computed
        cdef BatchRow row
        cdef Py_ssize_t index
        cdef int st
        self._presize()
        while True:
            if self._chunk_full():
                return ST_CHUNK_FULL
            pos = self._pos
            self._valid_end = pos
            rem = self._end - pos
            if rem == 0:
                self._end_reason = END_NONE
                return ST_END
            if rem < HEADER_UP_TO_MAGIC:
                self._end_reason = (END_ZERO_PADDING if not self._more_follows
                                    and all_zero(buf, pos, self._zeros_from)
                                    else END_TRUNCATED)
                return ST_END
            length = <int32_t>load_be32(buf + pos + H_LENGTH)
            magic = <int8_t>buf[pos + H_MAGIC]
            if length < MIN_LENGTH_ANY:
                if not self._more_follows and all_zero(buf, pos, self._zeros_from):
                    self._end_reason = END_ZERO_PADDING
                    return ST_END
                if self._more_follows and all_zero(buf, pos, self._end):
                    # zeros to this window's end: what follows decides (more
                    # zeros to the data's end: padding; anything else: damage)
                    self._end_reason = END_TRUNCATED
                    return ST_END
                return self._fail(E_BATCH_LENGTH, pos + H_LENGTH, length, MIN_LENGTH_ANY)
            if length > rem - LOG_OVERHEAD:
                # past the data's end (a torn tail, or a damaged length: the caller
                # decides), or past this window of it (the next one holds it)
                if (length > self._data_end - pos - LOG_OVERHEAD
                        or length <= self._limits.max_batch_bytes):
                    self._end_reason = END_TRUNCATED
                    return ST_END
                # within the data, and larger than any batch may be
                if magic == 0 or magic == 1:
                    return self._fail(E_LIMIT_BATCH_BYTES, pos + H_LENGTH, length,
                                      self._limits.max_batch_bytes)
            if magic == 0 or magic == 1:
                # the same limit wherever the message lies (a window's edge or not)
                if length > self._limits.max_batch_bytes:
                    return self._fail(E_LIMIT_BATCH_BYTES, pos + H_LENGTH, length,
                                      self._limits.max_batch_bytes)
                st = self._legacy_message(pos, batch_end_of(buf, pos))
                if st != 0:
                    return st
                continue
            if magic != 2:
                return self._fail(E_MAGIC, pos + H_MAGIC, magic, 0)
            if length < MIN_LENGTH_V2:
                return self._fail(E_BATCH_LENGTH, pos + H_LENGTH, length, MIN_LENGTH_V2)
            if length > self._limits.max_batch_bytes:
                return self._fail(E_LIMIT_BATCH_BYTES, pos + H_LENGTH, length,
                                  self._limits.max_batch_bytes)
            batch_end = pos + LOG_OVERHEAD + length
            _parse_header(buf + pos, pos, &row)
            # keep a chunk's payload addressable by int32 Arrow offsets
            if (self._batches.len > 0 and row.codec == CODEC_NONE
                    and columns_payload_bytes(&self._data) + length > INT32_MAX // 2):
                return ST_CHUNK_FULL
            if self._crc_mode != CRC_SKIP or (self._control_crc and row.is_control):
                computed = crc32c(buf + pos + CRC_START, <size_t>(batch_end - pos - CRC_START))
                if computed == row.crc:
                    row.crc_valid = 1
                elif self._crc_mode != CRC_REPORT:
                    self._err.base_offset = row.base_offset
                    self._err.batch_position = pos
                    # the damage is somewhere in the bytes the CRC covers: the batch
                    # is named (its start), as verify, skip and stop name it
                    return set_error(&self._err, E_CRC, pos, -1, row.crc, computed)
                else:
                    row.crc_valid = 0
            index = self._batches.len // sizeof(BatchRow)
            if self._add_row(&row) != 0:
                return self._fail(E_NOMEM, pos, 0, 0)
            if (self._headers_only or row.crc_valid == 0
                    or (self._control_only and not row.is_control)):
                # records not decoded: headers only (or only control batches
                # wanted), or a CRC-failed batch being reported. Each header
                # read waits for memory (the next one's place is in this
                # one), so the header HEADER_STRIDE batches on is fetched
                # now, guessing they are all this size as producers' batches
                # mostly are (a wrong guess costs one wasted fetch)
                if batch_end - pos <= (self._end - batch_end) // HEADER_STRIDE:
                    prefetch(buf + batch_end + (HEADER_STRIDE - 1) * (batch_end - pos))
                self._pos = batch_end
                continue
            if row.codec != CODEC_NONE and not (row.records_count == 0 and batch_end == pos + HEADER_V2):
                if self._native & (1 << row.codec):
                    st = self._native_batch(pos, batch_end, index, row.codec)
                    if st == 0:
                        self._pos = batch_end
                        continue
                    if st != ST_COMPRESSED:
                        return st
                    # decompression failed: Python's path decompresses it again
                    # and raises the error users see
                self._has_pending = True
                self._pending_index = index
                self._pending_start = pos + HEADER_V2
                self._pending_stop = batch_end
                self._pending_next = batch_end
                return ST_COMPRESSED
            if self._zero_copy and self._view_source(pos, batch_end) != 0:
                return self._fail(E_NOMEM, pos, 0, 0)
            st = self._walk_records(buf, pos + HEADER_V2, batch_end, index, False)
            if st != 0:
                return st
            self._pos = batch_end

    def run(self):
        """Decode until the chunk is full, the data ends, or Python must act.

        Returns one of the ``ST_*`` codes. Raises ``CorruptRecordError``
        (or, with ``stop_on_corrupt``, records the error and returns ST_END).
        """
        cdef int st
        if self._done:
            return ST_END
        if self._has_pending:
            raise RuntimeError("a compressed batch is pending: call feed() first")
        if self._buf == NULL and self._end > self._pos:
            raise RuntimeError("decoder was released")
        with nogil:
            st = kb_guarded_call(_run_entry, <void *>self)
        if st == KB_FAULTED:
            self._file_changed()
        if st == ST_ERROR:
            return self._error_or_stop(-1)
        if st == ST_END:
            self._done = True
            self._check_strict()
        return st

    cdef object _error_or_stop(self, Py_ssize_t batch_index):
        """Raise the pending error, or end the data here when stopping on corrupt."""
        exc = _make_error(&self._err, self.path)
        if self._torn_tail(self._err.batch_position):
            exc.add_note("Only zeros follow this batch: a torn write at the end of a "
                         "preallocated segment? on_corrupt='stop' keeps the batches before it.")
        if not self._stop_on_corrupt:
            raise exc
        if batch_index >= 0:  # forget the failed batch's row
            self._batches.len = batch_index * sizeof(BatchRow)
        self._has_pending = False
        self._done = True
        self._valid_end = self._pos = self._err.batch_position
        self._end_reason = END_CORRUPT
        self.end_error = exc
        return ST_END

    cdef bint _torn_tail(self, Py_ssize_t position):
        """True when the batch at ``position`` is followed only by zeros
        (read under the SIGBUS guard: the file may be shrinking)."""
        cdef TailCheck check
        if (self._buf == NULL or position < 0 or self._more_follows
                or self._end - position < HEADER_UP_TO_MAGIC):
            return False
        check.buf = self._buf
        check.position = position
        check.end = self._end
        check.zeros_from = self._zeros_from
        check.result = False
        with nogil:
            if kb_guarded_call(_torn_tail_entry, &check) == KB_FAULTED:
                return False
        return check.result

    def _file_changed(self):
        """A page of the mapped source vanished (SIGBUS) while it was read."""
        self._done = True
        raise FileChangedError(
            "the file was truncated or replaced while it was being read",
            path=self.path, position=self._pos, base_offset=None,
            batch_position=self._pos)

    def pending_bytes(self):
        """A copy of the waiting batch's compressed bytes, read under the
        SIGBUS guard (codecs never touch the mapped source themselves)."""
        cdef Py_ssize_t n = self._pending_stop - self._pending_start
        cdef bytearray out
        cdef char *dst
        cdef int st
        if not self._has_pending:
            raise RuntimeError("no compressed batch is pending")
        out = bytearray(n)
        if n:
            dst = out
            with nogil:
                st = kb_guarded_copy(dst, self._buf + self._pending_start, <size_t>n)
            if st == KB_FAULTED:
                self._file_changed()
        return out

    def _check_strict(self):
        if self._strict and self._end_reason in (END_TRUNCATED, END_ZERO_PADDING):
            what = ("the last batch is truncated" if self._end_reason == END_TRUNCATED
                    else "zero padding follows the last batch")
            raise CorruptRecordError(
                f"{what} ({self._end - self._valid_end} trailing bytes)",
                path=self.path, position=self._valid_end, base_offset=None,
                batch_position=self._valid_end)

    # --- compressed batches --------------------------------------------

    def pending(self):
        """``(codec, start, stop, position, base_offset, magic)`` of the waiting
        batch: its compressed bytes are ``view[start:stop]``."""
        if not self._has_pending:
            return None
        row = self._row(self._pending_index)
        return (row.codec, self._pending_start, self._pending_stop, row.position,
                row.base_offset, row.magic)

    def feed(self, object source not None):
        """Decode the pending batch's records from their decompressed bytes
        (with zero_copy, the views point into ``source``, which is kept)."""
        cdef const uint8_t[::1] records = source
        cdef Py_ssize_t index = self._pending_index
        cdef Py_ssize_t n = records.shape[0]
        cdef const uint8_t *p = &records[0] if n > 0 else <const uint8_t *>""
        cdef int st
        if not self._has_pending:
            raise RuntimeError("no compressed batch is pending")
        if self._zero_copy:
            if viewbufs_use(&self._data, viewbufs_fed(&self._vbufs), p) != 0:
                raise MemoryError()
            self._fed.append(source)
        with nogil:
            st = self._walk_records(p, 0, n, index, True)
        if st != 0:
            return self._error_or_stop(index)
        self._has_pending = False
        self._pos = self._pending_next
        return 0

    def fail_pending(self, exc):
        """The pending batch could not be decompressed: raise, or stop there."""
        if not self._has_pending:
            raise RuntimeError("no compressed batch is pending")
        if not self._stop_on_corrupt:
            raise exc
        row = self._row(self._pending_index)
        self._batches.len = self._pending_index * sizeof(BatchRow)
        self._has_pending = False
        self._done = True
        self._pos = self._valid_end = row.position
        self._end_reason = END_CORRUPT
        self.end_error = exc
        return ST_END

    # --- taking a chunk --------------------------------------------------

    def take(self):
        """Everything decoded since the last take(), as numpy arrays.

        Returns ``{"data": columns, "control": columns, "control_rows":
        ControlRow array, "batches": BatchRow array}``; the decoder starts
        an empty chunk.
        """
        batches = growbuf_take(&self._batches, np.uint8).view(BATCH_DTYPE)
        controls = growbuf_take(&self._controls, np.uint8).view(CONTROL_DTYPE)
        data = columns_take(&self._data)
        if self._zero_copy:
            data["buffers"] = self._take_buffers()
        return {
            "data": data,
            "control": columns_take(&self._ctrl),
            "control_rows": controls,
            "batches": batches,
        }


    cdef list _take_buffers(self):
        """zero_copy: the data buffers of the chunk's views, in index order:
        ``(start, stop)`` for a window of the source, else a buffer object
        (an arena as a numpy array, a fed object); the table starts empty."""
        cdef Py_ssize_t i, n = self._vbufs.desc.len // <Py_ssize_t>sizeof(BufDesc)
        cdef BufDesc *d
        cdef GrowBuf *arenas = <GrowBuf *>self._vbufs.arenas.data
        out = []
        for i in range(n):
            d = viewbufs_at(&self._vbufs, i)
            if d.kind == BUF_SOURCE:
                out.append((d.start, d.stop))
            elif d.kind == BUF_ARENA:
                out.append(growbuf_take(&arenas[d.index], np.uint8))
            else:
                out.append(self._fed[d.index])
        self._vbufs.desc.len = 0
        self._vbufs.arenas.len = 0
        self._vbufs.window = self._vbufs.arena = -1
        self._vbufs.fed = 0
        self._fed = []
        return out


# status codes of run(), for the Python orchestration
STATUS_CHUNK_FULL = ST_CHUNK_FULL
STATUS_END = ST_END
STATUS_COMPRESSED = ST_COMPRESSED

