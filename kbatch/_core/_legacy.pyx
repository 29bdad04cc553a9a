# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Legacy message sets, magic 0 and 1 (LegacyRecord.java), into columns.

One log entry, big-endian:

    off  field        type
     0   offset       int64
     8   size         int32    bytes after this field (>= 14 magic 0, >= 22 magic 1)
    12   crc          uint32   CRC-32 (IEEE) of bytes [16, 12 + size)
    16   magic        int8     0 or 1
    17   attributes   int8     bits 0-2 codec (0 none 1 gzip 2 snappy 3 lz4),
                               bit 3 LogAppendTime (magic 1)
    18   timestamp    int64    magic 1 only
     .   keyLength    int32    -1 = null
     .   key
     .   valueLength  int32    -1 = null
     .   value        for a compressed "wrapper": a whole message set, compressed

Offsets of the messages inside a wrapper (AbstractLegacyRecordBatch.java):
magic 0 holds absolute offsets; magic 1 relative ones, absolute = wrapper
offset - last inner offset + inner offset (a wrapper offset of 0, written by
some clients, means the inner offsets are already absolute). Inner records
take the wrapper's timestamp when the wrapper says LogAppendTime. A nested
compressed message is an error.

Each top-level message is one row of the batch table (like Kafka's
AbstractLegacyRecordBatch); a wrapper's row counts its inner records.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t

from kbatch._core._checksums cimport crc32_ieee
from kbatch._core._coltable cimport *
from kbatch._core._columns cimport (RecordColumns, binary_append_any, binary_reserve_any,
                              columns_add_rows, columns_reserve_rows, growbuf_reserve)
from kbatch._core._cursor cimport (CUR_OK, Cursor, cursor_over, read_be32, read_be64,
                             read_u8, skip)
from kbatch._core._types cimport (E_CRC, E_LEGACY_ATTRIBUTES, E_LEGACY_EMPTY,
                            E_LEGACY_KEY_VALUE, E_LEGACY_LENGTH, E_LEGACY_NESTED,
                            E_LEGACY_NULL_WRAPPER, E_LEGACY_OFFSETS, E_MAGIC,
                            E_NOMEM, E_RECORD_TRUNCATED, ST_ERROR, CRC_RAISE,
                            CRC_SKIP, BatchRow, ErrorInfo)
from kbatch._core._wire cimport (CODEC_LZ4, CODEC_NONE, LEGACY_ATTR_CODEC,
                                 LEGACY_ATTR_LOG_APPEND_TIME, LOG_OVERHEAD)


cdef enum:
    MIN_SIZE_V0 = 14   # crc, magic, attributes, key length, value length
    MIN_SIZE_V1 = 22   # + timestamp
    CRC_FROM = 16      # the CRC covers [magic, end of message)


cdef struct Message:
    int64_t offset
    int32_t size
    uint32_t crc
    int8_t magic
    int8_t attributes
    int64_t timestamp      # -1 for magic 0
    Py_ssize_t key_pos
    int32_t key_len        # -1: null
    Py_ssize_t value_pos
    int32_t value_len      # -1: null
    Py_ssize_t start       # first byte of the entry
    Py_ssize_t end         # one past its last byte


cdef inline int _fail(ErrorInfo *err, int code, int64_t position, int64_t a,
                      int64_t b) noexcept nogil:
    err.code = code
    err.position = position
    err.a = a
    err.b = b
    return ST_ERROR


cdef int _parse(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Message *m,
                ErrorInfo *err) noexcept nogil:
    """Read one log entry at ``pos``; every field checked against ``end``."""
    cdef Cursor c = cursor_over(buf, pos, end)
    cdef Cursor body
    cdef int32_t raw = 0
    cdef uint8_t byte = 0
    m.start = pos
    if read_be64(&c, &m.offset) != CUR_OK or read_be32(&c, &m.size) != CUR_OK:
        return _fail(err, E_RECORD_TRUNCATED, pos, 0, 0)
    if m.size < MIN_SIZE_V0:
        return _fail(err, E_LEGACY_LENGTH, pos + 8, m.size, MIN_SIZE_V0)
    if m.size > c.end - c.pos:
        return _fail(err, E_RECORD_TRUNCATED, pos + 8, 0, 0)
    body = cursor_over(buf, c.pos, c.pos + m.size)
    m.end = body.end
    read_be32(&body, &raw)
    m.crc = <uint32_t>raw
    read_u8(&body, &byte)
    m.magic = <int8_t>byte
    read_u8(&body, &byte)
    m.attributes = <int8_t>byte
    m.timestamp = -1
    if m.magic == 1:
        if m.size < MIN_SIZE_V1:
            return _fail(err, E_LEGACY_LENGTH, pos + 8, m.size, MIN_SIZE_V1)
        read_be64(&body, &m.timestamp)
    elif m.magic != 0:
        return _fail(err, E_MAGIC, pos + 16, m.magic, 0)
    if read_be32(&body, &m.key_len) != CUR_OK:
        return _fail(err, E_LEGACY_KEY_VALUE, body.pos, -1, 0)
    if m.key_len < 0:
        m.key_len = -1
    m.key_pos = body.pos
    if m.key_len > 0 and skip(&body, m.key_len) != CUR_OK:
        return _fail(err, E_LEGACY_KEY_VALUE, m.key_pos - 4, m.key_len, 0)
    if read_be32(&body, &m.value_len) != CUR_OK:
        return _fail(err, E_LEGACY_KEY_VALUE, body.pos, -1, 0)
    if m.value_len < 0:
        m.value_len = -1
    m.value_pos = body.pos
    if m.value_len > 0 and skip(&body, m.value_len) != CUR_OK:
        return _fail(err, E_LEGACY_KEY_VALUE, m.value_pos - 4, m.value_len, 0)
    if body.pos != body.end:
        return _fail(err, E_LEGACY_KEY_VALUE, body.pos, body.end - body.pos, 0)
    return 0


cdef inline bint _crc_ok(const uint8_t *buf, const Message *m) noexcept nogil:
    return crc32_ieee(buf + m.start + CRC_FROM, <size_t>(m.end - m.start - CRC_FROM)) == m.crc


cdef int _append(RecordColumns *cols, const uint8_t *buf, const Message *m,
                 int64_t offset, int64_t timestamp, int8_t ts_type,
                 int32_t batch_index) noexcept nogil:
    """One record; legacy messages have no headers. A key or value left out
    by a projection is not stored."""
    cdef Py_ssize_t n = cols.n
    if (columns_reserve_rows(cols, 1) != 0
            or (not cols.skip_key and binary_reserve_any(
                &cols.key, 0, m.key_len if m.key_len > 0 else 0) != 0)
            or (not cols.skip_value and binary_reserve_any(
                &cols.value, 0, m.value_len if m.value_len > 0 else 0) != 0)):
        return -1
    # the fixed columns (coltable.py), one typed store each
    (<col_offset_t *>cols.fixed[COL_OFFSET].data)[n] = offset
    (<col_timestamp_t *>cols.fixed[COL_TIMESTAMP].data)[n] = timestamp
    (<col_timestamp_type_t *>cols.fixed[COL_TIMESTAMP_TYPE].data)[n] = ts_type
    (<col_batch_t *>cols.fixed[COL_BATCH].data)[n] = batch_index
    (<int32_t *>cols.headers.data)[n + 1] = <int32_t>cols.hkey.count
    if not cols.skip_key:
        binary_append_any(&cols.key, buf + m.key_pos, m.key_len)      # zero_copy: views
    if not cols.skip_value:
        binary_append_any(&cols.value, buf + m.value_pos, m.value_len)
    columns_add_rows(cols, n, 1)
    return 0


cdef int legacy_top(RecordColumns *cols, BatchRow *row, ErrorInfo *err,
                    const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end,
                    int32_t batch_index, int crc_mode, bint headers_only,
                    Py_ssize_t *value_start, Py_ssize_t *value_stop) noexcept nogil:
    """A top-level message at ``pos``: fill ``row``; append it when plain.

    Returns 0 when done, 1 for a compressed wrapper (its compressed value is
    ``buf[value_start:value_stop]``, for ``legacy_inner`` once decompressed),
    or ST_ERROR. With ``headers_only``, or a CRC failure being reported, only
    ``row`` is filled.
    """
    cdef Message m
    cdef int8_t codec, ts_type
    err.batch_position = pos
    err.base_offset = -1
    err.inner = -1
    if _parse(buf, pos, end, &m, err) != 0:
        return ST_ERROR
    err.base_offset = m.offset
    codec = m.attributes & LEGACY_ATTR_CODEC
    ts_type = -1 if m.magic == 0 else (1 if m.attributes & LEGACY_ATTR_LOG_APPEND_TIME else 0)
    row.base_offset = m.offset
    row.last_offset = m.offset
    row.position = pos
    row.size = m.size + LOG_OVERHEAD
    row.partition_leader_epoch = -1
    row.producer_id = -1
    row.producer_epoch = -1
    row.base_sequence = -1
    row.base_timestamp = m.timestamp
    row.max_timestamp = m.timestamp
    row.records_count = 1 if codec == CODEC_NONE else 0
    row.crc = m.crc
    row.attributes = <uint8_t>m.attributes
    row.magic = m.magic
    row.codec = codec
    row.timestamp_type = ts_type
    row.is_transactional = 0
    row.is_control = 0
    row.has_delete_horizon = 0
    row.crc_valid = -1
    row._pad = 0
    if crc_mode != CRC_SKIP:
        if _crc_ok(buf, &m):
            row.crc_valid = 1
        elif crc_mode == CRC_RAISE:
            return _fail(err, E_CRC, pos, m.crc,   # the message's start, as verify names it
                         crc32_ieee(buf + pos + CRC_FROM, <size_t>(m.end - pos - CRC_FROM)))
        else:
            row.crc_valid = 0
    if headers_only or row.crc_valid == 0:
        return 0
    if codec == CODEC_NONE:
        if _append(cols, buf, &m, m.offset, m.timestamp, ts_type, batch_index) != 0:
            return _fail(err, E_NOMEM, pos, 0, 0)
        return 0
    if codec > CODEC_LZ4:      # magic 0/1 know codecs up to lz4
        return _fail(err, E_LEGACY_ATTRIBUTES, pos + 17, codec, 0)
    if m.value_len < 0:
        return _fail(err, E_LEGACY_NULL_WRAPPER, m.value_pos - 4, 0, 0)
    value_start[0] = m.value_pos
    value_stop[0] = m.value_pos + m.value_len
    return 1


cdef int legacy_inner(RecordColumns *cols, BatchRow *row, ErrorInfo *err,
                      const uint8_t *buf, Py_ssize_t n, int32_t batch_index,
                      int crc_mode) noexcept nogil:
    """The inner messages of the wrapper ``row``, decompressed into ``buf[:n]``.

    Errors report the wrapper's position, with ``err.inner`` the byte in the
    decompressed data.
    """
    cdef Message m
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t count = 0
    cdef int64_t last_inner = 0, base = 0, timestamp
    cdef bint log_append = row.timestamp_type == 1
    err.batch_position = row.position
    err.base_offset = row.last_offset
    # pass 1: validate every inner message and find the last inner offset
    while pos < n:
        if _parse(buf, pos, n, &m, err) != 0:
            return _inner_error(err, row)
        if m.attributes & LEGACY_ATTR_CODEC:
            _fail(err, E_LEGACY_NESTED, pos + 17, 0, 0)
            return _inner_error(err, row)
        if crc_mode != CRC_SKIP and not _crc_ok(buf, &m):
            _fail(err, E_CRC, pos, m.crc,
                  crc32_ieee(buf + pos + CRC_FROM, <size_t>(m.end - pos - CRC_FROM)))
            _name_inner_base(err, row, buf, n)
            return _inner_error(err, row)
        last_inner = m.offset
        count += 1
        pos = m.end
    if count == 0:
        _fail(err, E_LEGACY_EMPTY, 0, 0, 0)
        return _inner_error(err, row)
    if row.magic == 0 and last_inner > row.last_offset:
        # magic 0 inner offsets are absolute: the wrapper names the last one
        _fail(err, E_LEGACY_OFFSETS, 0, row.last_offset, last_inner)
        return _inner_error(err, row)
    if row.magic == 1 and row.last_offset != 0:
        if row.last_offset < last_inner:
            _fail(err, E_LEGACY_OFFSETS, 0, row.last_offset, last_inner)
            return _inner_error(err, row)
        base = row.last_offset - last_inner
    # pass 2: append
    if columns_reserve_rows(cols, count) != 0:
        return _fail(err, E_NOMEM, row.position, 0, 0)
    pos = 0
    count = 0
    while pos < n:
        _parse(buf, pos, n, &m, err)
        if count == 0:
            row.base_offset = base + m.offset
        timestamp = m.timestamp
        if m.magic == 1 and log_append:
            timestamp = row.max_timestamp
        if _append(cols, buf, &m, base + m.offset, timestamp,
                   -1 if m.magic == 0 else row.timestamp_type, batch_index) != 0:
            return _fail(err, E_NOMEM, row.position, 0, 0)
        count += 1
        pos = m.end
    row.records_count = <int32_t>count
    return 0


cdef void _name_inner_base(ErrorInfo *err, const BatchRow *row, const uint8_t *buf,
                           Py_ssize_t n) noexcept nogil:
    """``err.base_offset``: the wrapper's first inner offset where its
    messages' framing can be walked whole (their CRCs not checked; magic 1
    inner offsets are relative to the last, which the wrapper names), else
    left as the wrapper's own offset."""
    cdef Message m
    cdef ErrorInfo scratch
    cdef Py_ssize_t pos = 0
    cdef int64_t first = 0, last = 0
    cdef bint seen = False
    while pos < n:
        if _parse(buf, pos, n, &m, &scratch) != 0:
            return
        if not seen:
            first = m.offset
            seen = True
        last = m.offset
        pos = m.end
    if not seen or first < 0 or last < first:
        return
    if row.magic == 1 and row.last_offset != 0:
        if last - first <= row.last_offset:     # (the last inner message is the wrapper's)
            err.base_offset = row.last_offset - (last - first)
    elif first <= row.last_offset:
        err.base_offset = first


cdef int _inner_error(ErrorInfo *err, const BatchRow *row) noexcept nogil:
    err.inner = err.position
    err.position = row.position
    return ST_ERROR
