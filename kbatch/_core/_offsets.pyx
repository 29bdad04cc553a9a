# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Offset-commit records of ``__consumer_offsets``, decoded column-wise.

    key   (versions 0 and 1, never flexible)
    +--------+-------------+-------+-------------+-------+-----------+
    | int16  | int16 glen  | group | int16 tlen  | topic | int32     |
    | 0 or 1 |             | UTF-8 |             | UTF-8 | partition |
    +--------+-------------+-------+-------------+-------+-----------+
    value (null: a tombstone)
    +-------+--------+---------------+----------+-----------+-----------------+-----------+
    | int16 | int64  | int32 leader  | metadata | int64     | int64 expire    | tagged    |
    | 0..4  | offset | epoch (v3+)   | string   | commit ts | ts (v1 only)    | (v4 only) |
    +-------+--------+---------------+----------+-----------+-----------------+-----------+
    metadata: int16 length + bytes (v0-3) | uvarint length+1 + bytes (v4)

One pass over the rows fills fixed-width columns and (start, length) pairs of
the three strings; ``gather_strings`` then copies the strings into Arrow
layout. Every read goes through the bounds-checked cursor. A row this kernel
does not handle exactly (another record type, an unknown value version, a v4
value with tagged fields, trailing bytes, any damage) gets a status that
sends it to the schema-driven Python decoder, which decodes it or reports
the error there.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from kbatch._core._cursor cimport (CUR_OK, Cursor, cursor_over, read_be16, read_be32,
                             read_be64, read_u8, skip)

# row status
DEF ROW_OK = 0        # an offset commit, decoded here
DEF ROW_OTHER = 1     # not an offset-commit key (another record type)
DEF ROW_SLOW = 2      # an offset-commit key this kernel leaves to the Python decoder


cdef inline int read_uvarint32(Cursor *c, uint32_t *out) noexcept nogil:
    cdef uint32_t value = 0
    cdef uint8_t b
    cdef int shift = 0, i
    for i in range(5):
        if read_u8(c, &b) != CUR_OK:
            return 1
        value |= (<uint32_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = value
            return CUR_OK
        shift += 7
    return 1


cdef inline int read_string16(Cursor *c, int64_t *start, int32_t *length) noexcept nogil:
    cdef int16_t n
    if read_be16(c, &n) != CUR_OK or n < 0:
        return 1
    start[0] = c.pos
    length[0] = n
    return skip(c, n)


cdef int8_t _key(Cursor *c, int16_t *kver, int64_t *gs, int32_t *gl, int64_t *ts,
                 int32_t *tl, int32_t *part) noexcept nogil:
    if read_be16(c, kver) != CUR_OK:
        return ROW_OTHER
    if kver[0] != 0 and kver[0] != 1:
        return ROW_OTHER
    if read_string16(c, gs, gl) or read_string16(c, ts, tl) or read_be32(c, part) != CUR_OK:
        return ROW_SLOW
    if c.pos != c.end:
        return ROW_SLOW
    return ROW_OK


cdef int8_t _value(Cursor *c, int16_t *vver, int64_t *off, int32_t *epoch, int64_t *ms,
                   int32_t *ml, int64_t *commit, int64_t *expire) noexcept nogil:
    cdef uint32_t n
    if read_be16(c, vver) != CUR_OK or vver[0] < 0 or vver[0] > 4:
        return ROW_SLOW
    if read_be64(c, off) != CUR_OK:
        return ROW_SLOW
    if vver[0] >= 3:
        if read_be32(c, epoch) != CUR_OK:
            return ROW_SLOW
    if vver[0] == 4:
        if read_uvarint32(c, &n) or n == 0:
            return ROW_SLOW
        ms[0] = c.pos
        ml[0] = <int32_t>(n - 1) if n - 1 <= 0x7FFFFFFF else -1
        if ml[0] < 0 or skip(c, ml[0]) != CUR_OK:
            return ROW_SLOW
    elif read_string16(c, ms, ml):
        return ROW_SLOW
    if read_be64(c, commit) != CUR_OK:
        return ROW_SLOW
    if vver[0] == 1 and read_be64(c, expire) != CUR_OK:
        return ROW_SLOW
    if vver[0] == 4:
        if read_uvarint32(c, &n) or n != 0:
            return ROW_SLOW
    if c.pos != c.end:
        return ROW_SLOW
    return ROW_OK


def decode_offset_commits(const int64_t[::1] koff, const uint8_t[::1] kdata,
                          const int64_t[::1] voff, const uint8_t[::1] vdata,
                          const uint8_t[::1] vvalid,
                          int8_t[::1] status, int16_t[::1] kver, int16_t[::1] vver,
                          int32_t[::1] partition, int64_t[::1] offset, int32_t[::1] epoch,
                          int64_t[::1] commit, int64_t[::1] expire,
                          int64_t[::1] gs, int32_t[::1] gl, int64_t[::1] ts, int32_t[::1] tl,
                          int64_t[::1] ms, int32_t[::1] ml):
    """Fill the output columns (n rows each) from keys and values in Arrow
    layout (int64 offsets, ``vvalid``: 1 where the value is not null).
    Returns the number of ROW_OK rows."""
    cdef Py_ssize_t n = koff.shape[0] - 1
    cdef Py_ssize_t i, done = 0
    cdef Cursor c
    cdef int8_t s
    if n < 0 or voff.shape[0] != n + 1 or vvalid.shape[0] != n:
        raise ValueError("key and value columns differ in length")
    for size in (status.shape[0], kver.shape[0], vver.shape[0], partition.shape[0],
                 offset.shape[0], epoch.shape[0], commit.shape[0], expire.shape[0],
                 gs.shape[0], gl.shape[0], ts.shape[0], tl.shape[0], ms.shape[0], ml.shape[0]):
        if size != n:
            raise ValueError("output columns must have one slot per row")
    if n and (koff[0] < 0 or koff[n] > kdata.shape[0] or voff[0] < 0 or voff[n] > vdata.shape[0]):
        raise ValueError("offsets point outside the data")
    with nogil:
        for i in range(n):
            epoch[i] = -1
            expire[i] = -1
            ms[i] = 0
            ml[i] = 0
            vver[i] = -1
            if koff[i] > koff[i + 1] or voff[i] > voff[i + 1]:
                status[i] = ROW_SLOW
                continue
            c = cursor_over(&kdata[0] if kdata.shape[0] else NULL, koff[i], koff[i + 1])
            s = _key(&c, &kver[i], &gs[i], &gl[i], &ts[i], &tl[i], &partition[i])
            if s == ROW_OK and vvalid[i]:
                c = cursor_over(&vdata[0] if vdata.shape[0] else NULL, voff[i], voff[i + 1])
                s = _value(&c, &vver[i], &offset[i], &epoch[i], &ms[i], &ml[i],
                           &commit[i], &expire[i])
            status[i] = s
            if s == ROW_OK:
                done += 1
    return done


def gather_strings(const uint8_t[::1] data, const int64_t[::1] start,
                   const int32_t[::1] length, const int64_t[::1] rows,
                   int32_t[::1] out_offsets, uint8_t[::1] out_data):
    """out value j = data[start[rows[j]] : start[rows[j]] + length[rows[j]]];
    every slice is checked against ``data`` and ``out_data`` first.
    Returns ``(bytes written, True when every byte is ASCII)``."""
    cdef Py_ssize_t m = rows.shape[0], j, k
    cdef int64_t r, pos = 0, total = 0
    cdef uint8_t high = 0
    if out_offsets.shape[0] != m + 1:
        raise ValueError("out_offsets must have len(rows) + 1 slots")
    for j in range(m):
        r = rows[j]
        if r < 0 or r >= start.shape[0] or r >= length.shape[0] or length[r] < 0 \
                or start[r] < 0 or length[r] > data.shape[0] - start[r]:
            raise ValueError(f"row {r}: string slice outside the data")
        total += length[r]
        if total > out_data.shape[0] or total > 0x7FFFFFFF:
            raise ValueError("strings do not fit the output buffer")
    with nogil:
        out_offsets[0] = 0
        for j in range(m):
            r = rows[j]
            for k in range(length[r]):
                high |= data[start[r] + k]
            if length[r]:
                memcpy(&out_data[pos], &data[start[r]], length[r])
            pos += length[r]
            out_offsets[j + 1] = <int32_t>pos
    return pos, high < 0x80


def string_bytes(const int32_t[::1] length, const int64_t[::1] rows):
    """Total length of the selected strings (rows checked)."""
    cdef Py_ssize_t j
    cdef int64_t total = 0, r
    for j in range(rows.shape[0]):
        r = rows[j]
        if r < 0 or r >= length.shape[0] or length[r] < 0:
            raise ValueError(f"row {r} out of range")
        total += length[r]
    return total
