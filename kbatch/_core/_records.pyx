# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The records of one magic-2 batch (DefaultRecord.java) into columns.

Record, inside the (decompressed) records area, zig-zag varints:

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint (-1 null) | key | valueLength varint (-1 null) | value
    | headersCount varint | [headerKeyLength varint | key (UTF-8)
                             | headerValueLength varint (-1 null) | value]...

    offset = baseOffset + offsetDelta
    timestamp = baseTimestamp + timestampDelta (CreateTime), maxTimestamp (LogAppendTime)

Control records (key: version int16 | type int16; ABORT/COMMIT value:
version int16 | coordinatorEpoch int32) also get a ControlRow.

Every read goes through the cursor; a record is read through a cursor bounded
by its own length, so no field can run into the next record.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy, memset

from kbatch._core._coltable cimport *
from kbatch._core._columns cimport (GrowBuf, RecordColumns,
                              binary_reserve, columns_add_rows, columns_held_bytes,
                              columns_reserve_rows, growbuf_reserve, kb_copy, kb_view,
                              kb_view12, ROW_FIXED_BYTES)
from kbatch._core._cursor cimport (CUR_OK, CUR_SHORT, CUR_VARINT, Cursor, cursor_over,
                             likely, load_be16, load_be32, read_u8, read_varint,
                             read_varlong, unlikely)
from kbatch._core._types cimport *


cdef enum:
    MIN_HEADER_SIZE = 2        # key length + value length varints
    PREFETCH_AHEAD = 16384     # bytes ahead of the record being decoded
    OUT_AHEAD_ROWS = 128       # rows ahead of the one written (fixed columns)
    OUT_AHEAD_BYTES = 2048     # bytes ahead of the end of a copied column


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Strict UTF-8 check (no overlongs, no surrogates, <= U+10FFFF). */
    static int kb_utf8_valid(const uint8_t *s, Py_ssize_t n) {
        Py_ssize_t i = 0;
        while (n - i >= 8) {  /* ASCII fast path, 8 bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL) break;
            i += 8;
        }
        while (i < n) {
            uint8_t c = s[i];
            if (c < 0x80) { i++; continue; }
            if (c >= 0xC2 && c <= 0xDF) {
                if (n - i < 2 || (s[i+1] & 0xC0) != 0x80) return 0;
                i += 2;
            } else if (c >= 0xE0 && c <= 0xEF) {
                if (n - i < 3 || (s[i+1] & 0xC0) != 0x80 || (s[i+2] & 0xC0) != 0x80) return 0;
                if (c == 0xE0 && s[i+1] < 0xA0) return 0;
                if (c == 0xED && s[i+1] > 0x9F) return 0;
                i += 3;
            } else if (c >= 0xF0 && c <= 0xF4) {
                if (n - i < 4 || (s[i+1] & 0xC0) != 0x80 || (s[i+2] & 0xC0) != 0x80
                        || (s[i+3] & 0xC0) != 0x80) return 0;
                if (c == 0xF0 && s[i+1] < 0x90) return 0;
                if (c == 0xF4 && s[i+1] > 0x8F) return 0;
                i += 4;
            } else {
                return 0;
            }
        }
        return 1;
    }
    /* The cache line ``ahead`` bytes past p, fetched for writing (integer
       arithmetic: the address may lie past the column's end; a prefetch
       never faults). */
    #define KB_PREFETCH_W(p, ahead) \
        __builtin_prefetch((const void *)((uintptr_t)(p) + (uintptr_t)(ahead)), 1, 3)
    """
    bint utf8_valid "kb_utf8_valid"(const uint8_t *s, Py_ssize_t n) noexcept nogil
    void prefetch "__builtin_prefetch"(const void *p) noexcept nogil
    void prefetch_for_write "KB_PREFETCH_W"(const void *p, Py_ssize_t ahead) noexcept nogil




cdef int parse_control(RecordColumns *ctrl, GrowBuf *rows, Py_ssize_t first) noexcept nogil:
    """Fill a ControlRow for every control record from ``first`` on.

    Key: version int16 | type int16. ABORT/COMMIT value: version int16 |
    coordinatorEpoch int32. Short keys or values leave -1 (never an error).
    """
    cdef Py_ssize_t i, start, length
    cdef const int32_t *koffs = <const int32_t *>ctrl.key.offsets.data
    cdef const int32_t *voffs = <const int32_t *>ctrl.value.offsets.data
    cdef const uint8_t *kdata = <const uint8_t *>ctrl.key.data.data
    cdef const uint8_t *vdata = <const uint8_t *>ctrl.value.data.data
    cdef ControlRow *out
    if growbuf_reserve(rows, (ctrl.n - first) * <Py_ssize_t>sizeof(ControlRow)) != 0:
        return -1
    out = <ControlRow *>(rows.data + rows.len)
    for i in range(first, ctrl.n):
        out.version = -1
        out.type = -1
        out.value_version = -1
        out.coordinator_epoch = -1
        out._pad = 0
        start = koffs[i]
        length = koffs[i + 1] - start
        if length >= 4:
            out.version = <int16_t>load_be16(kdata + start)
            out.type = <int16_t>load_be16(kdata + start + 2)
        start = voffs[i]
        length = voffs[i + 1] - start
        if (out.type == 0 or out.type == 1) and length >= 6:
            out.value_version = <int16_t>load_be16(vdata + start)
            out.coordinator_epoch = <int32_t>load_be32(vdata + start + 2)
        out += 1
        rows.len += sizeof(ControlRow)
    return 0


cdef inline void _put_view(char *dst, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t stop,
                           int32_t length, int32_t view_buffer,
                           Py_ssize_t view_shift) noexcept nogil:
    """zero_copy: the view of ``buf[pos:pos + length]`` (branch-free unless
    fewer than 12 bytes are left in the region)."""
    if likely(stop - pos >= 12):
        kb_view12(dst, buf + pos, length, view_buffer, pos + view_shift)
    else:
        kb_view(dst, buf + pos, length, view_buffer, pos + view_shift)


cdef struct _HeaderOut:
    # the header key and value columns while a batch is decoded: written
    # through these (no store to the builders per header), put back into the
    # builders when the batch commits (``_headers_commit``)
    char *key_data
    char *value_data
    int32_t *key_offsets
    int32_t *value_offsets
    uint8_t *key_bits
    uint8_t *value_bits
    Py_ssize_t key_len
    Py_ssize_t value_len
    Py_ssize_t count          # headers so far (keys and values alike)
    Py_ssize_t value_nulls    # null values added in this batch


cdef inline void _headers_load(_HeaderOut *h, RecordColumns *cols) noexcept nogil:
    """The builders' buffers (again after they may have moved)."""
    h.key_data = cols.hkey.data.data
    h.value_data = cols.hvalue.data.data
    h.key_offsets = <int32_t *>cols.hkey.offsets.data
    h.value_offsets = <int32_t *>cols.hvalue.offsets.data
    h.key_bits = <uint8_t *>cols.hkey.validity.data
    h.value_bits = <uint8_t *>cols.hvalue.validity.data


cdef inline void _headers_commit(const _HeaderOut *h, RecordColumns *cols) noexcept nogil:
    cols.hkey.count = cols.hvalue.count = h.count
    cols.hkey.data.len = h.key_len
    cols.hvalue.data.len = h.value_len
    cols.hkey.offsets.len = cols.hvalue.offsets.len = (h.count + 1) * 4
    cols.hkey.validity.len = cols.hvalue.validity.len = (h.count + 7) >> 3
    cols.hvalue.null_count += h.value_nulls


cdef inline int _headers_reserve(_HeaderOut *h, RecordColumns *cols,
                                 Py_ssize_t items) noexcept nogil:
    """Room for ``items`` more headers (their bytes are reserved per batch);
    the builders are brought up to date only when they must grow."""
    if ((h.count + items + 1) * 4 <= cols.hkey.offsets.cap
            and (h.count + items + 1) * 4 <= cols.hvalue.offsets.cap
            and ((h.count + items) >> 3) + 1 <= cols.hkey.validity.cap
            and ((h.count + items) >> 3) + 1 <= cols.hvalue.validity.cap):
        return 0
    _headers_commit(h, cols)
    h.value_nulls = 0
    if binary_reserve(&cols.hkey, items, 0) != 0 or binary_reserve(&cols.hvalue, items, 0) != 0:
        return -1
    _headers_load(h, cols)
    return 0


cdef inline void _prefetch_header_columns(const _HeaderOut *h) noexcept nogil:
    """The header columns' lines ahead of their ends, for writing (once per
    record with headers; see the record loop)."""
    prefetch_for_write(h.key_data + h.key_len, OUT_AHEAD_BYTES)
    prefetch_for_write(h.value_data + h.value_len, OUT_AHEAD_BYTES)
    prefetch_for_write(h.key_offsets + h.count, OUT_AHEAD_ROWS * 4)
    prefetch_for_write(h.value_offsets + h.count, OUT_AHEAD_ROWS * 4)


# The record loop is compiled four times: keys and values copied (_Copy),
# written as binary views (_Views, zero_copy; both leave out the key or the
# value a projection does not ask for, checked but not stored), walked and
# checked but not stored (_Skip, a projection without key and value), or not
# walked at all (_Skim, a projection without key, value and headers: each record's
# length, attributes and deltas are read, the rest is jumped over);
# decode_records picks one per batch, so the copy loop carries no test of
# the mode.
cdef struct _Copy:
    char unused

cdef struct _Views:
    char unused

cdef struct _Skip:
    char unused

cdef struct _Skim:
    char unused

ctypedef fused record_mode:
    _Copy
    _Views
    _Skip
    _Skim


cdef int decode_records(RecordColumns *cols, ErrorInfo *err, const Limits *limits,
                         const uint8_t *buf, Py_ssize_t start, Py_ssize_t stop,
                         const BatchRow *row, int32_t batch_index,
                         Py_ssize_t prefetch_end, bint check_only) noexcept nogil:
    """Append the records of one batch (``buf[start:stop]``) to ``cols``
    (zero_copy columns get views into ``buf``, see ``_columns.pxd``).

    ``check_only`` (a batch read_committed leaves out): every record is
    walked and checked as in a full decode, no key, value or header is
    stored, and the caller rolls the batch's rows back."""
    if check_only:
        return _decode(<_Skip *>NULL, cols, err, limits, buf, start, stop, row,
                       batch_index, prefetch_end, False)
    if cols.skip_payload and cols.skip_headers:
        return _decode(<_Skim *>NULL, cols, err, limits, buf, start, stop, row,
                       batch_index, prefetch_end, False)
    if cols.skip_payload:
        return _decode(<_Skip *>NULL, cols, err, limits, buf, start, stop, row,
                       batch_index, prefetch_end, True)
    if cols.key.view_mode:
        return _decode(<_Views *>NULL, cols, err, limits, buf, start, stop, row,
                       batch_index, prefetch_end, True)
    return _decode(<_Copy *>NULL, cols, err, limits, buf, start, stop, row,
                   batch_index, prefetch_end, True)


cdef int _decode(record_mode *mode, RecordColumns *cols, ErrorInfo *err,
                 const Limits *limits, const uint8_t *buf, Py_ssize_t start,
                 Py_ssize_t stop, const BatchRow *row, int32_t batch_index,
                 Py_ssize_t prefetch_end, bint store_headers) noexcept nogil:
    """Append the records of one batch (``buf[start:stop]``) to ``cols``
    (headers only with ``store_headers``, and not when a projection skips
    them).

    ``buf[:prefetch_end]`` may be prefetched (the batches that follow).

    Capacity is reserved up front from what the region can hold, so the loop
    writes through plain pointers. On error nothing is committed (the caller
    rolls back the partial batch when it keeps going).
    """
    cdef Py_ssize_t region = stop - start
    cdef int32_t count = row.records_count
    cdef Py_ssize_t n = cols.n
    cdef Py_ssize_t i, j, rec_start
    cdef Cursor cur = cursor_over(buf, start, stop)
    cdef Cursor rec
    cdef int32_t length = 0, off_delta = 0, klen = 0, vlen = 0, hcount = 0
    cdef int32_t hklen = 0, hvlen = 0
    cdef int64_t ts_delta = 0
    cdef uint8_t attr
    cdef int8_t tt = row.timestamp_type
    cdef int64_t base_offset = row.base_offset
    # the header's lastOffsetDelta: every record's delta lies in 0..last_delta
    # (else the header and the records disagree: corrupt, see SPEC decisions)
    cdef int64_t last_delta = row.last_offset - row.base_offset
    cdef int64_t base_ts = row.base_timestamp
    cdef bint log_append = tt == 1
    # position of errors: file bytes for plain batches, the batch otherwise
    cdef int64_t where

    if count < 0:
        return set_error(err, E_COUNT_NEGATIVE, start, -1, count, 0)
    if count > region // MIN_RECORD_SIZE:
        return set_error(err, E_COUNT_TOO_LARGE, start, -1, count, region)
    if count > limits.max_records_per_batch:
        return set_error(err, E_LIMIT_RECORDS, start, -1, count,
                          limits.max_records_per_batch)
    # max_read_bytes holds before the rows are reserved: a small batch of
    # many empty records must not take count * ROW_FIXED_BYTES first
    if count * <Py_ssize_t>ROW_FIXED_BYTES > limits.read_budget - columns_held_bytes(cols):
        return set_error(err, E_LIMIT_READ_BYTES, start, -1, count, limits.max_read_bytes)
    if columns_reserve_rows(cols, count) != 0:
        return set_error(err, E_NOMEM, start, -1, 0, 0)
    # a projection may keep one of key and value (the other is walked, checked
    # and not stored: in the skip loop, both)
    cdef bint keep_key = (record_mode is not _Skip and record_mode is not _Skim
                          and not cols.skip_key)
    cdef bint keep_value = (record_mode is not _Skip and record_mode is not _Skim
                            and not cols.skip_value)
    if record_mode is _Copy:    # views hold no bytes
        if ((keep_key and binary_reserve(&cols.key, 0, region) != 0)
                or (keep_value and binary_reserve(&cols.value, 0, region) != 0)):
            return set_error(err, E_NOMEM, start, -1, 0, 0)
    # projection without headers: checked as usual, nothing stored
    cdef bint keep_headers = store_headers and not cols.skip_headers
    if keep_headers and (binary_reserve(&cols.hkey, 0, region) != 0
                         or binary_reserve(&cols.hvalue, 0, region) != 0):
        return set_error(err, E_NOMEM, start, -1, 0, 0)
    cdef _HeaderOut hdr
    hdr.key_len = cols.hkey.data.len
    hdr.value_len = cols.hvalue.data.len
    hdr.count = cols.hkey.count
    hdr.value_nulls = 0
    _headers_load(&hdr, cols)

    # the fixed columns (coltable.py): a typed pointer each, taken once per batch
    cdef col_offset_t *out_offset = <col_offset_t *>cols.fixed[COL_OFFSET].data + n
    cdef col_timestamp_t *out_ts = <col_timestamp_t *>cols.fixed[COL_TIMESTAMP].data + n
    cdef col_timestamp_type_t *out_tt = (<col_timestamp_type_t *>
                                         cols.fixed[COL_TIMESTAMP_TYPE].data + n)
    cdef col_batch_t *out_batch = <col_batch_t *>cols.fixed[COL_BATCH].data + n
    cdef int32_t *out_headers = <int32_t *>cols.headers.data + n + 1
    cdef int32_t *key_offs = <int32_t *>cols.key.offsets.data + n + 1
    cdef int32_t *val_offs = <int32_t *>cols.value.offsets.data + n + 1
    cdef uint8_t *key_bits = <uint8_t *>cols.key.validity.data
    cdef uint8_t *val_bits = <uint8_t *>cols.value.validity.data
    cdef char *key_data = cols.key.data.data
    cdef char *val_data = cols.value.data.data
    cdef Py_ssize_t key_len = cols.key.data.len
    cdef Py_ssize_t val_len = cols.value.data.len
    cdef Py_ssize_t key_nulls = 0, val_nulls = 0
    cdef Py_ssize_t row_i
    cdef int32_t headers_total = <int32_t>cols.hkey.count
    cdef int st
    # zero_copy (_Views): keys and values become 16-byte binary views into
    # ``buf`` (data buffer ``view_buffer``, whose first byte is ``view_base``)
    cdef char *key_views = NULL
    cdef char *val_views = NULL
    cdef int32_t view_buffer = cols.key.view_buffer
    cdef Py_ssize_t view_shift = 0
    if record_mode is _Views:
        key_views = cols.key.views.data + n * 16
        val_views = cols.value.views.data + n * 16
        view_shift = buf - cols.key.view_base

    for i in range(count):
        rec_start = cur.pos
        # pull the next batch toward the cache while this one decodes, so its
        # CRC pass reads from cache, not memory (only inside the source)
        if rec_start + PREFETCH_AHEAD + 128 <= prefetch_end:
            prefetch(buf + rec_start + PREFETCH_AHEAD)
            prefetch(buf + rec_start + PREFETCH_AHEAD + 64)
        # and the output toward the cache, for writing: a store that misses
        # waits for its line to be read, and the copy loop writes 8 streams,
        # more than the hardware prefetcher follows (-12% on a decode of small
        # records; the view and skim loops measured slower with it)
        if (record_mode is _Copy or record_mode is _Skip) and (i & 7) == 0:
            prefetch_for_write(out_offset + i, OUT_AHEAD_ROWS * 8)
            prefetch_for_write(out_ts + i, OUT_AHEAD_ROWS * 8)
            prefetch_for_write(out_headers + i, OUT_AHEAD_ROWS * 4)
            if record_mode is _Copy and keep_key:
                prefetch_for_write(key_offs + i, OUT_AHEAD_ROWS * 4)
            if record_mode is _Copy and keep_value:
                prefetch_for_write(val_offs + i, OUT_AHEAD_ROWS * 4)
        if record_mode is _Copy and keep_value:
            prefetch_for_write(val_data + val_len, OUT_AHEAD_BYTES)
            prefetch_for_write(val_data + val_len, OUT_AHEAD_BYTES + 64)
        if record_mode is _Copy and keep_key:
            prefetch_for_write(key_data + key_len, OUT_AHEAD_BYTES)
        st = read_varint(&cur, &length)
        if unlikely(st != CUR_OK):
            if st == CUR_SHORT:
                return set_error(err, E_FEW_RECORDS, rec_start, -1, i, count)
            return set_error(err, E_VARINT, rec_start, -1, 0, 0)
        if unlikely(length < 0 or length > cur.end - cur.pos):
            return set_error(err, E_RECORD_LENGTH, rec_start, -1, length,
                              cur.end - cur.pos)
        rec = cursor_over(buf, cur.pos, cur.pos + length)
        cur.pos += length

        if unlikely(read_u8(&rec, &attr) != CUR_OK):
            return set_error(err, E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
        st = read_varlong(&rec, &ts_delta)
        st |= read_varint(&rec, &off_delta)
        st |= read_varint(&rec, &klen)
        if unlikely(st != CUR_OK):
            return set_error(err, E_VARINT if st & CUR_VARINT else E_RECORD_TRUNCATED,
                              rec_start, -1, 0, 0)
        if unlikely(off_delta < 0 or off_delta > last_delta):
            return set_error(err, E_RECORD_OFFSET, rec_start, -1, off_delta, last_delta)
        if record_mode is _Skim:
            # offsets and timestamps only: the record's framing is checked
            # (its length, and that records fill the batch exactly), its
            # key, value and headers are not walked
            rec.pos = rec.end
        else:
            row_i = n + i
            if klen >= 0:
                if unlikely(klen > rec.end - rec.pos):
                    return set_error(err, E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
                if keep_key:
                    if record_mode is _Views:
                        _put_view(key_views + i * 16, buf, rec.pos, stop, klen, view_buffer,
                                  view_shift)
                    elif record_mode is _Copy and klen > 0:
                        kb_copy(key_data + key_len, buf + rec.pos, <size_t>klen)
                    key_len += klen
                    key_bits[row_i >> 3] |= <uint8_t>(1 << (row_i & 7))
                rec.pos += klen
            elif keep_key:
                key_nulls += 1
                if record_mode is _Views:
                    kb_view(key_views + i * 16, NULL, -1, 0, 0)
            if record_mode is _Copy and keep_key:    # views need no offsets
                key_offs[i] = <int32_t>key_len

            st = read_varint(&rec, &vlen)
            if unlikely(st != CUR_OK):
                return set_error(err, E_VARINT if st & CUR_VARINT else E_RECORD_TRUNCATED,
                                  rec_start, -1, 0, 0)
            if vlen >= 0:
                if unlikely(vlen > rec.end - rec.pos):
                    return set_error(err, E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
                if keep_value:
                    if record_mode is _Views:
                        _put_view(val_views + i * 16, buf, rec.pos, stop, vlen, view_buffer,
                                  view_shift)
                    elif record_mode is _Copy and vlen > 0:
                        kb_copy(val_data + val_len, buf + rec.pos, <size_t>vlen)
                    val_len += vlen
                    val_bits[row_i >> 3] |= <uint8_t>(1 << (row_i & 7))
                rec.pos += vlen
            elif keep_value:
                val_nulls += 1
                if record_mode is _Views:
                    kb_view(val_views + i * 16, NULL, -1, 0, 0)
            if record_mode is _Copy and keep_value:
                val_offs[i] = <int32_t>val_len

            st = read_varint(&rec, &hcount)
            if unlikely(st != CUR_OK):
                return set_error(err, E_VARINT if st & CUR_VARINT else E_RECORD_TRUNCATED,
                                  rec_start, -1, 0, 0)
            if hcount != 0:
                if unlikely(hcount < 0 or hcount > (rec.end - rec.pos) // MIN_HEADER_SIZE):
                    return set_error(err, E_HEADER_COUNT, rec_start, -1, hcount,
                                      rec.end - rec.pos)
                if unlikely(hcount > limits.max_headers_per_record):
                    return set_error(err, E_LIMIT_HEADERS, rec_start, -1, hcount,
                                      limits.max_headers_per_record)
                if keep_headers:
                    if _headers_reserve(&hdr, cols, hcount) != 0:
                        return set_error(err, E_NOMEM, rec_start, -1, 0, 0)
                    _prefetch_header_columns(&hdr)
                else:       # said, so a decode can tell whether a schema id header was left out
                    cols.unread_header_rows += 1
                for j in range(hcount):
                    st = read_varint(&rec, &hklen)
                    if unlikely(st != CUR_OK):
                        return set_error(err, E_VARINT if st & CUR_VARINT
                                          else E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
                    if unlikely(hklen < 0):
                        return set_error(err, E_HEADER_KEY_NULL, rec_start, -1, hklen, 0)
                    if unlikely(hklen > rec.end - rec.pos):
                        return set_error(err, E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
                    if unlikely(not utf8_valid(buf + rec.pos, hklen)):
                        return set_error(err, E_HEADER_KEY_UTF8, rec_start, -1, 0, 0)
                    if keep_headers:
                        hdr.key_bits[hdr.count >> 3] |= <uint8_t>(1 << (hdr.count & 7))
                        if hklen > 0:
                            kb_copy(hdr.key_data + hdr.key_len, buf + rec.pos, <size_t>hklen)
                            hdr.key_len += hklen
                        hdr.key_offsets[hdr.count + 1] = <int32_t>hdr.key_len
                    rec.pos += hklen
                    st = read_varint(&rec, &hvlen)
                    if unlikely(st != CUR_OK):
                        return set_error(err, E_VARINT if st & CUR_VARINT
                                          else E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
                    if hvlen >= 0:
                        if unlikely(hvlen > rec.end - rec.pos):
                            return set_error(err, E_RECORD_TRUNCATED, rec_start, -1, 0, 0)
                        if keep_headers:
                            hdr.value_bits[hdr.count >> 3] |= <uint8_t>(1 << (hdr.count & 7))
                            if hvlen > 0:
                                kb_copy(hdr.value_data + hdr.value_len, buf + rec.pos,
                                        <size_t>hvlen)
                                hdr.value_len += hvlen
                        rec.pos += hvlen
                    elif keep_headers:
                        hdr.value_nulls += 1
                    if keep_headers:
                        hdr.value_offsets[hdr.count + 1] = <int32_t>hdr.value_len
                        hdr.count += 1
                if keep_headers:
                    headers_total += hcount
            out_headers[i] = headers_total

        if unlikely(rec.pos != rec.end):
            return set_error(err, E_RECORD_SIZE, rec_start, -1, length,
                              length - (rec.end - rec.pos))
        out_offset[i] = base_offset + off_delta
        out_ts[i] = row.max_timestamp if log_append else base_ts + ts_delta

    if cur.pos != cur.end:
        return set_error(err, E_TRAILING_BYTES, cur.pos, -1, cur.end - cur.pos, 0)

    # the batch's constants, filled after the loop (fewer stores in it; an
    # empty batch may meet still unallocated (NULL) columns)
    if count > 0 and sizeof(col_timestamp_type_t) == 1:
        memset(out_tt, tt, <size_t>count)
    elif sizeof(col_timestamp_type_t) != 1:     # (compiled out while it is a byte)
        for i in range(count):
            out_tt[i] = tt
    for i in range(count):
        out_batch[i] = batch_index

    # commit
    if keep_headers:
        _headers_commit(&hdr, cols)
    columns_add_rows(cols, n, count)
    if keep_key:    # the skip loops store neither
        cols.key.data.len = key_len
        cols.key.count = cols.n
        cols.key.offsets.len += count * 4
        cols.key.null_count += key_nulls
        cols.key.validity.len = (cols.n + 7) >> 3
        if record_mode is _Views:
            cols.key.views.len += count * 16
    if keep_value:
        cols.value.data.len = val_len
        cols.value.count = cols.n
        cols.value.offsets.len += count * 4
        cols.value.null_count += val_nulls
        cols.value.validity.len = (cols.n + 7) >> 3
        if record_mode is _Views:
            cols.value.views.len += count * 16
    return 0
