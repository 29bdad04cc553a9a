# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""JSON objects of a flat JSON Schema decoded straight into Arrow buffers,
without the GIL (``kbatch.payloads.json_decode``'s fast path).

A value is the JSON text of one record (its framing already cut):

    ws { ws "name" ws : ws value ws , ... } ws      ws: space, tab, LF, CR

Each named field of the schema has a *kind* and one output column:

    K_INT        -?(0|[1-9][0-9]*) within int64          -> int64
    K_FLOAT      a JSON number (strtod, correctly rounded) -> float64
    K_BOOL       true | false                              -> bool
    K_STRING     "..." unescaped (\\uXXXX pairs joined), UTF-8 checked -> string
    K_TIMESTAMP  "YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|+HH:MM|-HH:MM)" -> int64 us UTC
    K_DATE       "YYYY-MM-DD"                              -> int32 days
    null         any field: a null

A field the schema lacks is skipped (its text checked as JSON, nesting at
most MAX_DEPTH deep); a field the value lacks is null.

What this decoder does not take exactly as above (another number form for
an integer, a string escape in a key, a repeated key, a value of another
type, a date-time in another form, text that is not JSON...) is never
guessed at: the row's status is FALLBACK, its columns are rolled back to
nulls, and the caller decodes that row the general way (pyarrow's reader,
which also names what is wrong). Every read is bounded by the value's end;
nothing is allocated from a count found in the text.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport strtod
from libc.string cimport memcpy

import numpy as np

cdef extern from *:
    """
    #define KB_I64_DIV10 922337203685477580ULL   /* (2**63 - 1) // 10 */
    """
    const uint64_t KB_I64_DIV10


cdef enum:
    K_INT = 0
    K_FLOAT = 1
    K_BOOL = 2
    K_STRING = 3
    K_TIMESTAMP = 4
    K_DATE = 5
    ROW_OK = 0
    ROW_NULL = 1
    ROW_FALLBACK = 2
    MAX_FIELDS = 64
    MAX_DEPTH = 64
    NUMBER_CHARS = 63


cdef struct Field:
    const uint8_t *name
    int64_t name_len
    int kind
    uint8_t *valid               # one byte per row
    int64_t *i64                 # K_INT, K_TIMESTAMP
    double *f64                  # K_FLOAT
    int32_t *i32                 # K_DATE
    uint8_t *b8                  # K_BOOL
    int64_t *offs                # K_STRING: n + 1
    uint8_t *data                # K_STRING: room for every value's text
    int64_t data_len


cdef inline bint _ws(uint8_t c) noexcept nogil:
    return c == 32 or c == 10 or c == 13 or c == 9


cdef inline int64_t _skip_ws(const uint8_t *p, int64_t i, int64_t end) noexcept nogil:
    while i < end and _ws(p[i]):
        i += 1
    return i


cdef inline bint _digit(uint8_t c) noexcept nogil:
    return 48 <= c <= 57


cdef int64_t _number_end(const uint8_t *p, int64_t i, int64_t end) noexcept nogil:
    """The end of a JSON number at ``i`` (its grammar checked), or -1."""
    if i < end and p[i] == 45:                       # -
        i += 1
    if i >= end or not _digit(p[i]):
        return -1
    if p[i] == 48:                                   # a leading 0 stands alone
        i += 1
    else:
        while i < end and _digit(p[i]):
            i += 1
    if i < end and p[i] == 46:                       # .
        i += 1
        if i >= end or not _digit(p[i]):
            return -1
        while i < end and _digit(p[i]):
            i += 1
    if i < end and (p[i] == 101 or p[i] == 69):      # e E
        i += 1
        if i < end and (p[i] == 43 or p[i] == 45):
            i += 1
        if i >= end or not _digit(p[i]):
            return -1
        while i < end and _digit(p[i]):
            i += 1
    return i


cdef inline int _hex4(const uint8_t *p, int64_t i, int64_t end) noexcept nogil:
    """The value of 4 hex digits at ``i``, or -1."""
    cdef int v = 0, k, c
    if end - i < 4:
        return -1
    for k in range(4):
        c = p[i + k]
        v <<= 4
        if 48 <= c <= 57:
            v |= c - 48
        elif 97 <= c <= 102:
            v |= c - 87
        elif 65 <= c <= 70:
            v |= c - 55
        else:
            return -1
    return v


cdef inline int _utf8_len(const uint8_t *p, int64_t i, int64_t end) noexcept nogil:
    """The length of the valid UTF-8 sequence at ``i`` (a lead byte >= 0x80), or 0."""
    cdef uint8_t c = p[i], c1, c2, c3
    if 0xC2 <= c <= 0xDF:
        if end - i < 2 or (p[i + 1] & 0xC0) != 0x80:
            return 0
        return 2
    if 0xE0 <= c <= 0xEF:
        if end - i < 3:
            return 0
        c1 = p[i + 1]
        c2 = p[i + 2]
        if (c1 & 0xC0) != 0x80 or (c2 & 0xC0) != 0x80:
            return 0
        if c == 0xE0 and c1 < 0xA0:                  # overlong
            return 0
        if c == 0xED and c1 >= 0xA0:                 # a surrogate
            return 0
        return 3
    if 0xF0 <= c <= 0xF4:
        if end - i < 4:
            return 0
        c1 = p[i + 1]
        c2 = p[i + 2]
        c3 = p[i + 3]
        if (c1 & 0xC0) != 0x80 or (c2 & 0xC0) != 0x80 or (c3 & 0xC0) != 0x80:
            return 0
        if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
            return 0
        return 4
    return 0


cdef inline int64_t _put_utf8(uint8_t *out, uint32_t cp) noexcept nogil:
    if cp < 0x80:
        out[0] = <uint8_t>cp
        return 1
    if cp < 0x800:
        out[0] = <uint8_t>(0xC0 | (cp >> 6))
        out[1] = <uint8_t>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <uint8_t>(0xE0 | (cp >> 12))
        out[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <uint8_t>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <uint8_t>(0xF0 | (cp >> 18))
    out[1] = <uint8_t>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <uint8_t>(0x80 | (cp & 0x3F))
    return 4


cdef int64_t _string(const uint8_t *p, int64_t i, int64_t end, uint8_t *out,
                     int64_t *out_len) noexcept nogil:
    """The JSON string whose opening quote is at ``i``: its end (after the
    closing quote), or -1; with ``out``, its bytes unescaped there
    (``out_len``: how many; never more than the text's)."""
    cdef int64_t n = 0
    cdef int64_t k
    cdef int hi, lo
    cdef uint8_t c
    cdef uint32_t cp
    i += 1
    while i < end:
        c = p[i]
        if c == 34:                                  # "
            out_len[0] = n
            return i + 1
        if c == 92:                                  # \
            if i + 1 >= end:
                return -1
            c = p[i + 1]
            if c == 117:                             # u
                hi = _hex4(p, i + 2, end)
                if hi < 0:
                    return -1
                i += 6
                cp = <uint32_t>hi
                if 0xD800 <= hi <= 0xDBFF:           # a pair, or nothing
                    if end - i < 6 or p[i] != 92 or p[i + 1] != 117:
                        return -1
                    lo = _hex4(p, i + 2, end)
                    if lo < 0xDC00 or lo > 0xDFFF:
                        return -1
                    cp = 0x10000 + ((<uint32_t>hi - 0xD800) << 10) + (<uint32_t>lo - 0xDC00)
                    i += 6
                elif 0xDC00 <= hi <= 0xDFFF:
                    return -1
                if out != NULL:
                    n += _put_utf8(out + n, cp)
                continue
            if c == 34 or c == 92 or c == 47:
                pass
            elif c == 98:
                c = 8
            elif c == 102:
                c = 12
            elif c == 110:
                c = 10
            elif c == 114:
                c = 13
            elif c == 116:
                c = 9
            else:
                return -1
            if out != NULL:
                out[n] = c
                n += 1
            i += 2
            continue
        if c < 32:
            return -1                                # a raw control character
        if c < 0x80:
            k = i + 1                                # a run of plain ASCII
            while k < end and 32 <= p[k] < 0x80 and p[k] != 34 and p[k] != 92:
                k += 1
            if out != NULL:
                memcpy(out + n, p + i, <size_t>(k - i))
                n += k - i
            i = k
            continue
        k = _utf8_len(p, i, end)
        if k == 0:
            return -1
        if out != NULL:
            memcpy(out + n, p + i, <size_t>k)
            n += k
        i += k
    return -1


cdef int64_t _skip_value(const uint8_t *p, int64_t i, int64_t end, int depth) noexcept nogil:
    """The end of the JSON value at ``i`` (checked as JSON), or -1."""
    cdef int64_t dummy = 0
    cdef uint8_t c
    if i >= end or depth > MAX_DEPTH:
        return -1
    c = p[i]
    if c == 34:
        return _string(p, i, end, NULL, &dummy)
    if c == 123 or c == 91:                          # { [
        i = _skip_ws(p, i + 1, end)
        if i < end and p[i] == (125 if c == 123 else 93):
            return i + 1
        while True:
            if c == 123:
                if i >= end or p[i] != 34:
                    return -1
                i = _string(p, i, end, NULL, &dummy)
                if i < 0:
                    return -1
                i = _skip_ws(p, i, end)
                if i >= end or p[i] != 58:           # :
                    return -1
                i = _skip_ws(p, i + 1, end)
            i = _skip_value(p, i, end, depth + 1)
            if i < 0:
                return -1
            i = _skip_ws(p, i, end)
            if i >= end:
                return -1
            if p[i] == 44:                           # ,
                i = _skip_ws(p, i + 1, end)
                continue
            if p[i] == (125 if c == 123 else 93):
                return i + 1
            return -1
    if c == 116:
        return i + 4 if end - i >= 4 and p[i + 1] == 114 and p[i + 2] == 117 and p[i + 3] == 101 else -1
    if c == 102:
        return (i + 5 if end - i >= 5 and p[i + 1] == 97 and p[i + 2] == 108 and p[i + 3] == 115
                and p[i + 4] == 101 else -1)
    if c == 110:
        return i + 4 if end - i >= 4 and p[i + 1] == 117 and p[i + 2] == 108 and p[i + 3] == 108 else -1
    return _number_end(p, i, end)


cdef inline int _two(const uint8_t *p) noexcept nogil:
    if not (_digit(p[0]) and _digit(p[1])):
        return -1
    return (p[0] - 48) * 10 + (p[1] - 48)


cdef inline int64_t _days_from_civil(int64_t y, int64_t m, int64_t d) noexcept nogil:
    """Days since 1970-01-01 of a proleptic Gregorian date."""
    cdef int64_t era, yoe, doy, doe
    if m <= 2:
        y -= 1
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef inline int _month_days(int64_t y, int64_t m) noexcept nogil:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m == 4 or m == 6 or m == 9 or m == 11 else 31


cdef int _date(const uint8_t *p, int64_t n, int64_t *days) noexcept nogil:
    """``YYYY-MM-DD`` (exactly ``n`` = 10 bytes): 0, or -1."""
    cdef int y1, y2, m, d
    if n != 10 or p[4] != 45 or p[7] != 45:
        return -1
    y1 = _two(p)
    y2 = _two(p + 2)
    m = _two(p + 5)
    d = _two(p + 8)
    if y1 < 0 or y2 < 0 or m < 1 or m > 12 or d < 1 or d > _month_days(y1 * 100 + y2, m):
        return -1
    days[0] = _days_from_civil(y1 * 100 + y2, m, d)
    return 0


cdef int _timestamp(const uint8_t *p, int64_t n, int64_t *micros) noexcept nogil:
    """An RFC 3339 date-time of the form in the module docstring: 0, or -1."""
    cdef int64_t days, us = 0, scale = 100000, k = 19, sign
    cdef int hh, mm, ss, oh, om
    if n < 20 or _date(p, 10, &days) != 0 or p[10] != 84 or p[13] != 58 or p[16] != 58:
        return -1
    hh = _two(p + 11)
    mm = _two(p + 14)
    ss = _two(p + 17)
    if hh < 0 or hh > 23 or mm < 0 or mm > 59 or ss < 0 or ss > 59:
        return -1
    if p[k] == 46:                                   # . and 1 to 6 digits
        k += 1
        while k < n and _digit(p[k]) and scale > 0:
            us += (p[k] - 48) * scale
            scale //= 10
            k += 1
        if k == 20 or (k < n and _digit(p[k])):
            return -1
    if k == n - 1 and p[k] == 90:                    # Z
        sign = 0
        oh = om = 0
    elif k == n - 6 and (p[k] == 43 or p[k] == 45) and p[k + 3] == 58:
        sign = 1 if p[k] == 43 else -1
        oh = _two(p + k + 1)
        om = _two(p + k + 4)
        if oh < 0 or oh > 23 or om < 0 or om > 59:
            return -1
    else:
        return -1
    micros[0] = ((days * 86400 + hh * 3600 + mm * 60 + ss - sign * (oh * 3600 + om * 60))
                 * 1000000 + us)
    return 0


cdef int64_t _field_value(Field *f, const uint8_t *p, int64_t i, int64_t end,
                          int64_t row) noexcept nogil:
    """The value of field ``f`` at ``i`` into its column: its end, or -1 (fall back)."""
    cdef int64_t j, digit, n = 0, days, micros
    cdef uint64_t mag
    cdef bint negative
    cdef double x
    cdef char number[NUMBER_CHARS + 1]
    cdef uint8_t c = p[i]
    if c == 110:                                     # null
        if end - i >= 4 and p[i + 1] == 117 and p[i + 2] == 108 and p[i + 3] == 108:
            return i + 4
        return -1
    if f.kind == K_INT:
        j = _number_end(p, i, end)
        if j < 0:
            return -1
        negative = c == 45
        mag = 0
        for n in range(i + negative, j):
            if not _digit(p[n]):
                return -1                            # a fraction or an exponent
            digit = p[n] - 48
            # at most 2**63 - 1, or 2**63 when negative
            if mag > KB_I64_DIV10 or (mag == KB_I64_DIV10 and digit > 7 + negative):
                return -1
            mag = mag * 10 + <uint64_t>digit
        f.i64[row] = <int64_t>(<uint64_t>0 - mag) if negative else <int64_t>mag
    elif f.kind == K_FLOAT:
        j = _number_end(p, i, end)
        if j < 0 or j - i > NUMBER_CHARS:
            return -1
        memcpy(number, p + i, <size_t>(j - i))
        number[j - i] = 0
        x = strtod(number, NULL)
        if x - x != 0:
            return -1                                # past the double range
        f.f64[row] = x
    elif f.kind == K_BOOL:
        if c == 116 and end - i >= 4 and p[i + 1] == 114 and p[i + 2] == 117 and p[i + 3] == 101:
            f.b8[row] = 1
            j = i + 4
        elif (c == 102 and end - i >= 5 and p[i + 1] == 97 and p[i + 2] == 108
              and p[i + 3] == 115 and p[i + 4] == 101):
            f.b8[row] = 0
            j = i + 5
        else:
            return -1
    elif c != 34:
        return -1                                    # a string type needs a string
    elif f.kind == K_STRING:
        j = _string(p, i, end, f.data + f.data_len, &n)
        if j < 0:
            return -1
        f.data_len += n
    else:                                            # date-time, date: no escapes
        j = i + 1
        while j < end and p[j] != 34 and p[j] != 92:
            j += 1
        if j >= end or p[j] != 34:
            return -1
        if f.kind == K_DATE:
            if _date(p + i + 1, j - i - 1, &days) != 0:
                return -1
            f.i32[row] = <int32_t>days
        elif _timestamp(p + i + 1, j - i - 1, &micros) != 0:
            return -1
        else:
            f.i64[row] = micros
        j += 1
    f.valid[row] = 1
    return j


cdef inline bint memcmp_(const uint8_t *a, const uint8_t *b, int64_t n) noexcept nogil:
    cdef int64_t k
    for k in range(n):
        if a[k] != b[k]:
            return False
    return True


cdef int _row(Field *fields, int nf, const uint8_t *p, int64_t i, int64_t end,
              int64_t row) noexcept nogil:
    """One value into the columns: ROW_OK, or ROW_FALLBACK (columns not rolled back)."""
    cdef uint64_t seen = 0
    cdef int hint = 0, f, k
    cdef int64_t key0, key1
    i = _skip_ws(p, i, end)
    if i >= end or p[i] != 123:
        return ROW_FALLBACK
    i = _skip_ws(p, i + 1, end)
    if i < end and p[i] == 125:
        i += 1
    else:
        while True:
            if i >= end or p[i] != 34:
                return ROW_FALLBACK
            key0 = i + 1
            key1 = key0
            while key1 < end and p[key1] != 34 and p[key1] != 92 and 32 <= p[key1] < 0x80:
                key1 += 1
            if key1 >= end or p[key1] != 34:
                return ROW_FALLBACK                  # an escape, control or non-ASCII byte in a key
            i = _skip_ws(p, key1 + 1, end)
            if i >= end or p[i] != 58:
                return ROW_FALLBACK
            i = _skip_ws(p, i + 1, end)
            if i >= end:
                return ROW_FALLBACK
            f = -1
            for k in range(nf):                      # from the field after the last one
                f = (hint + k) % nf
                if fields[f].name_len == key1 - key0 and \
                        (key1 == key0 or memcmp_(fields[f].name, p + key0, key1 - key0)):
                    break
                f = -1
            if f < 0:
                i = _skip_value(p, i, end, 1)
            else:
                if seen & (<uint64_t>1 << f):
                    return ROW_FALLBACK              # a repeated key
                seen |= <uint64_t>1 << f
                i = _field_value(&fields[f], p, i, end, row)
                hint = f + 1
            if i < 0:
                return ROW_FALLBACK
            i = _skip_ws(p, i, end)
            if i >= end:
                return ROW_FALLBACK
            if p[i] == 44:
                i = _skip_ws(p, i + 1, end)
                continue
            if p[i] != 125:
                return ROW_FALLBACK
            i += 1
            break
    i = _skip_ws(p, i, end)
    return ROW_OK if i == end else ROW_FALLBACK


def decode_flat(const uint8_t[::1] data not None, const int64_t[::1] start not None,
                const int64_t[::1] end not None, const uint8_t[::1] live not None,
                list names, list kinds):
    """``(status, columns)``: per row ROW_OK (0), ROW_NULL (1: not live) or
    ROW_FALLBACK (2: decode it the general way; its columns hold nulls), and
    per field ``(valid uint8[n], values)`` with values int64 (K_INT,
    K_TIMESTAMP), float64, uint8 (K_BOOL), int32 (K_DATE) or, for
    K_STRING, ``(offsets int64[n + 1], data uint8)``. ``names``: the
    fields' names (bytes), ``kinds`` their K_* numbers."""
    cdef int64_t n = start.shape[0], i, text = 0, k
    cdef int nf = len(names), f, st
    cdef Field fields[MAX_FIELDS]
    cdef int64_t marks[MAX_FIELDS]
    cdef uint8_t[::1] status_v
    cdef int64_t size = data.shape[0]
    if nf > MAX_FIELDS or nf != len(kinds) or end.shape[0] != n or live.shape[0] != n:
        raise ValueError("decode_flat: names, kinds and rows disagree")
    for i in range(n):
        if live[i]:
            if start[i] < 0 or end[i] < start[i] or end[i] > size:
                raise ValueError(f"row {i} lies outside the data")
            text += end[i] - start[i]
    status = np.zeros(n, np.uint8)
    status_v = status
    keep = []
    for f in range(nf):
        name = names[f]
        kind = int(kinds[f])
        valid = np.zeros(n, np.uint8)
        fields[f].name = <const uint8_t *><const char *>name
        fields[f].name_len = len(name)
        fields[f].kind = kind
        keep.append(name)
        cols = [valid]
        if kind == K_INT or kind == K_TIMESTAMP:
            values = np.zeros(n, np.int64)
        elif kind == K_FLOAT:
            values = np.zeros(n, np.float64)
        elif kind == K_DATE:
            values = np.zeros(n, np.int32)
        elif kind == K_BOOL:
            values = np.zeros(n, np.uint8)
        elif kind == K_STRING:
            values = (np.zeros(n + 1, np.int64), np.empty(max(text, 1), np.uint8))
        else:
            raise ValueError(f"decode_flat: unknown kind {kind}")
        cols.append(values)
        keep.append(cols)
        _bind(&fields[f], valid, values, kind)
    with nogil:
        for i in range(n):
            if not live[i]:
                status_v[i] = ROW_NULL
                for f in range(nf):
                    if fields[f].kind == K_STRING:
                        fields[f].offs[i + 1] = fields[f].data_len
                continue
            for f in range(nf):
                marks[f] = fields[f].data_len
            st = _row(fields, nf, &data[0], start[i], end[i], i)
            if st != ROW_OK:
                status_v[i] = ROW_FALLBACK
                for f in range(nf):                  # the row's columns back to nulls
                    fields[f].valid[i] = 0
                    fields[f].data_len = marks[f]
            for f in range(nf):
                if fields[f].kind == K_STRING:
                    fields[f].offs[i + 1] = fields[f].data_len
    out = []
    for f in range(nf):
        valid, values = keep[2 * f + 1]
        if fields[f].kind == K_STRING:
            values = (values[0], values[1][:fields[f].data_len])
        out.append((valid, values))
    return status, out


cdef void _bind(Field *f, valid, values, int kind):
    cdef uint8_t[::1] v = valid
    cdef int64_t[::1] i64
    cdef double[::1] f64
    cdef int32_t[::1] i32
    cdef uint8_t[::1] b8
    cdef uint8_t[::1] data
    f.valid = &v[0] if v.shape[0] else NULL
    f.data_len = 0
    if kind == K_INT or kind == K_TIMESTAMP:
        i64 = values
        f.i64 = &i64[0] if i64.shape[0] else NULL
    elif kind == K_FLOAT:
        f64 = values
        f.f64 = &f64[0] if f64.shape[0] else NULL
    elif kind == K_DATE:
        i32 = values
        f.i32 = &i32[0] if i32.shape[0] else NULL
    elif kind == K_BOOL:
        b8 = values
        f.b8 = &b8[0] if b8.shape[0] else NULL
    else:
        i64 = values[0]
        data = values[1]
        f.offs = &i64[0]
        f.data = &data[0]


def invalid_utf8(const uint8_t[::1] data not None, const int64_t[::1] start not None,
                 const int64_t[::1] end not None, const uint8_t[::1] live not None):
    """uint8 per row: 1 where a live row's bytes are not UTF-8 (JSON text
    must be; pyarrow's reader passes such bytes into its strings)."""
    cdef int64_t n = start.shape[0], i, j, size = data.shape[0], k
    out = np.zeros(n, np.uint8)
    cdef uint8_t[::1] bad = out
    if end.shape[0] != n or live.shape[0] != n:
        raise ValueError("invalid_utf8: rows disagree")
    for i in range(n):
        if live[i] and (start[i] < 0 or end[i] < start[i] or end[i] > size):
            raise ValueError(f"row {i} lies outside the data")
    with nogil:
        for i in range(n):
            if not live[i]:
                continue
            j = start[i]
            while j < end[i]:
                if data[j] < 0x80:
                    j += 1
                    continue
                k = _utf8_len(&data[0], j, end[i])
                if k == 0:
                    bad[i] = 1
                    break
                j += k
    return out
