# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Protobuf messages decoded straight into Arrow buffers, without the GIL.

A Confluent-framed Protobuf value (``kbatch.payloads.framing`` reads the
magic byte and the schema id; ``message_indexes`` here reads the rest of
the prefix):

    | 0x00 | schema id: int32 BE | message indexes            | message ...
                                  zig-zag varint count c, then c zig-zag
                                  varints (a path of message indexes in the
                                  .proto); c = 0 (a single 0x00) means [0]

A message is a sequence of fields, in any order, each repeatable:

    tag: varint (at most 5 bytes, < 2^32) = field number << 3 | wire type
      wire 0 VARINT   a varint of at most 10 bytes (int32/int64/uint*/sint*/bool/enum)
      wire 1 I64      8 bytes little-endian (fixed64, sfixed64, double)
      wire 2 LEN      varint length n (0 <= n <= bytes left, <= 2^31 - 1) | n bytes
                      (string, bytes, message, a packed run of scalars)
      wire 3 SGROUP   fields up to an EGROUP of the same number (skipped only)
      wire 5 I32      4 bytes little-endian (fixed32, sfixed32, float)
      wire 4, 6, 7    never a field's own tag here: the row fails

What the reader's schema says about a field number is compiled once per
message type into tables (``kbatch.payloads.protobuf_decode.Layout``): a *message*
node (its struct column, its fields sorted by number, a dense number ->
field table for small numbers) and *fields* (type, presence, the column).
Decoding one message keeps a *slot* per field on a stack: a singular scalar
keeps its last value, a string its last bytes, a message field the first
tag since it was last (re)set (several occurrences are merged by decoding
them concatenated, as protobuf merges them); repeated fields and map
entries are appended to their child columns as they come. At the end of
the message every field writes one entry in declaration-independent column
order: the value, the proto3 default (implicit presence) or a null
(explicit presence, an unset oneof member, an absent message).

Well-known types are message nodes of another *mode*: Timestamp and
Duration write seconds * 1e9 + nanos (int64) into their column, a wrapper
writes its field 1 as a nullable scalar.

A proto2 enum is closed: a number it does not declare is no value, as
protobuf keeps it in the unknown fields. A singular field (a oneof member)
keeps what it had, a list leaves it out, and a map entry holding one in its
value is left out whole (upb moves that entry into the unknown fields).

Bad input fails its row (rolled back in every column, a null row): a
truncated field, a varint past 10 bytes (a tag or length past 5), a wire
type the field's type cannot have, field number 0 or wire type 4, 6 or 7,
a packed run that is not whole elements, invalid UTF-8, a missing proto2
required field, a message nested deeper than the reader's unrolling, a
Timestamp or Duration past int64 nanoseconds.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX, INT64_MAX, INT64_MIN
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

import numpy as np

from kbatch._core._arrowcols cimport (Col, K_BINARY, K_BOOL, K_FIXED, K_LIST, K_MAP, K_NULL, K_STRUCT,
                                      col_bytes, col_null, col_offset, col_scalar, col_truncate, col_valid)
from kbatch._core._columns cimport growbuf_free, growbuf_take
from kbatch._core._cursor cimport Cursor, cursor_over, likely, unlikely


cdef extern from "_avro.h":
    bint utf8_valid "kb_utf8_valid"(const uint8_t *s, Py_ssize_t n) noexcept nogil


# Row status: the numbers of kbatch._core._avro.Status (checked by
# kbatch.payloads.protobuf_decode at import).
cdef enum:
    ST_OK = 0
    ST_SHORT = 1
    ST_VARINT = 2
    ST_UTF8 = 4
    ST_TOO_DEEP = 13
    ST_LIMIT = 14
    ST_NOMEM = 15
    ST_RANGE = 17
    ST_WIRETYPE = 18      # a wire type the field's type cannot have
    ST_TAG = 19           # field number 0, wire type 4/6/7, an unmatched end of group
    ST_REQUIRED = 20      # a proto2 required field is missing
    ST_PACKED = 21        # a packed run of fixed-width values that is not whole values
    ST_INDEXES = 35

# Field types: FieldDescriptorProto.Type's numbers; T_CUT: past the unrolling.
cpdef enum PType:
    T_DOUBLE = 1
    T_FLOAT = 2
    T_INT64 = 3
    T_UINT64 = 4
    T_INT32 = 5
    T_FIXED64 = 6
    T_FIXED32 = 7
    T_BOOL = 8
    T_STRING = 9
    T_MESSAGE = 11
    T_BYTES = 12
    T_UINT32 = 13
    T_ENUM = 14
    T_SFIXED32 = 15
    T_SFIXED64 = 16
    T_SINT32 = 17
    T_SINT64 = 18
    T_CUT = 19

cpdef enum Presence:
    P_IMPLICIT = 0        # proto3 scalar: absent is its default
    P_EXPLICIT = 1        # optional / oneof member / message: absent is null
    P_REPEATED = 2        # list or map: absent is empty
    P_REQUIRED = 3        # proto2 required: absent fails the row
    P_DEFAULT_MSG = 4     # a map entry's message value: absent is the empty message

cpdef enum Mode:
    M_STRUCT = 0
    M_WRAPPER = 1         # google.protobuf.*Value: field 1 as a nullable scalar
    M_TIMESTAMP = 2       # google.protobuf.Timestamp -> int64 ns
    M_DURATION = 3        # google.protobuf.Duration -> int64 ns

cdef enum:
    MAX_GROUP_DEPTH = 64
    BASE_ROLE = 320
    WT_VARINT = 0
    WT_I64 = 1
    WT_LEN = 2
    WT_SGROUP = 3
    WT_EGROUP = 4
    WT_I32 = 5


cdef struct Field:
    uint32_t number
    int type
    int presence
    int col               # -1: kept in the slot only (Timestamp's seconds)
    int vcol              # the values: col itself, or the list's child
    int sub               # message node of a message field; a closed enum's number set (-1: open)
    int oneof             # -1, or the oneof's index in its message
    int oneof_pos         # the member's index in its oneof


cdef struct Msg:
    int col
    int nfield
    int field0
    int mode
    int noneof
    int oneof0            # which-columns: m.which[oneof0:oneof0 + noneof]
    int ndense
    int dense0            # m.dense[dense0:dense0 + ndense]: number -> local field (-1)


cdef struct Slot:
    int64_t v             # scalar value; a message field: its first tag's offset from p0
    const uint8_t *p      # bytes of a string / message occurrence
    const uint8_t *p0     # a message field: the enclosing message's first byte
    Py_ssize_t n
    int32_t count


cdef struct Machine:
    Col *cols
    int ncol
    int *col_kids
    Field *fields
    int nfield
    Msg *msgs
    int nmsg
    int *which
    int32_t *dense
    int32_t *enums        # closed enums' number sets: each its count, then its numbers sorted
    bint drop             # a map entry's closed enum value was a number it does not declare
    Slot *slots
    Py_ssize_t sp, cap
    const uint8_t *errp   # where the row's first failure was read (NULL: not yet)


# --- varints ----------------------------------------------------------------------

cdef inline int rd_u64(Cursor *c, uint64_t *out) noexcept nogil:
    """A varint of at most 10 bytes (bits past 64 dropped, as protobuf does)."""
    cdef uint64_t raw = 0, b
    cdef int shift = 0
    if likely(c.pos < c.end) and c.buf[c.pos] < 0x80:
        out[0] = c.buf[c.pos]
        c.pos += 1
        return ST_OK
    while True:
        if unlikely(c.pos >= c.end):
            return ST_SHORT
        b = c.buf[c.pos]
        c.pos += 1
        if shift < 64:
            raw |= (b & 0x7f) << shift
        if b < 0x80:
            break
        shift += 7
        if unlikely(shift >= 70):
            return ST_VARINT
    out[0] = raw
    return ST_OK


cdef inline int rd_u32(Cursor *c, uint32_t *out) noexcept nogil:
    """A tag or length: at most 5 bytes, below 2^32."""
    cdef uint32_t raw = 0, b
    cdef int shift = 0
    if likely(c.pos < c.end) and c.buf[c.pos] < 0x80:
        out[0] = c.buf[c.pos]
        c.pos += 1
        return ST_OK
    while True:
        if unlikely(c.pos >= c.end):
            return ST_SHORT
        b = c.buf[c.pos]
        c.pos += 1
        if unlikely(shift == 28 and b > 0x0f):
            return ST_VARINT
        raw |= (b & 0x7f) << shift
        if b < 0x80:
            break
        shift += 7
    out[0] = raw
    return ST_OK


cdef inline int rd_len(Cursor *c, Py_ssize_t *n) noexcept nogil:
    cdef uint32_t v
    cdef int st = rd_u32(c, &v)
    if st != ST_OK:
        return st
    if v > <uint32_t>INT32_MAX:
        return ST_VARINT
    if <Py_ssize_t>v > c.end - c.pos:
        return ST_SHORT
    n[0] = <Py_ssize_t>v
    return ST_OK


cdef inline int fail(Machine *m, const Cursor *c, int st) noexcept nogil:
    if m.errp == NULL:
        m.errp = c.buf + c.pos
    return st


# --- the message indexes ---------------------------------------------------------------

def message_indexes(const uint8_t[::1] data, int64_t[::1] start, const int64_t[::1] end,
                    const uint8_t[::1] live, int32_t[:, ::1] path, int32_t[::1] plen,
                    int32_t[::1] status):
    """For each live row (``live[i]``, status 0): the message-index path
    after the schema id, into ``path[i, :plen[i]]``; ``start[i]`` moves past
    it. A count or index that does not parse, is negative, or a path longer
    than ``path``'s width sets ``ST_INDEXES``."""
    cdef Py_ssize_t n = start.shape[0], i, size = data.shape[0]
    cdef int width = path.shape[1], k, st
    cdef uint32_t raw
    cdef int32_t count, index
    cdef Cursor cur
    cdef const uint8_t *base = &data[0] if size else NULL
    if not (end.shape[0] == n and live.shape[0] == n and path.shape[0] == n and plen.shape[0] == n
            and status.shape[0] == n):
        raise ValueError("row arrays of different lengths")
    for i in range(n):
        if live[i] and not 0 <= start[i] <= end[i] <= size:
            raise ValueError(f"row {i}: outside the data")
    with nogil:
        for i in range(n):
            if not live[i] or status[i] != ST_OK:
                continue
            cur = cursor_over(base, start[i], end[i])
            st = rd_u32(&cur, &raw)
            count = <int32_t>((raw >> 1) ^ (0u - (raw & 1)))
            if st != ST_OK or count < 0 or count > width:
                status[i] = ST_INDEXES
                continue
            if count == 0:
                path[i, 0] = 0
                plen[i] = 1
            else:
                for k in range(count):
                    st = rd_u32(&cur, &raw)
                    index = <int32_t>((raw >> 1) ^ (0u - (raw & 1)))
                    if st != ST_OK or index < 0:
                        status[i] = ST_INDEXES
                        break
                    path[i, k] = index
                if status[i] != ST_OK:
                    continue
                plen[i] = count
            start[i] = cur.pos


# --- the machine -------------------------------------------------------------------------

cdef inline int scalar_width(int t) noexcept nogil:
    if t == T_DOUBLE or t == T_INT64 or t == T_UINT64 or t == T_FIXED64 or t == T_SFIXED64 or t == T_SINT64:
        return 8
    if t == T_BOOL:
        return 0
    if t == T_STRING or t == T_BYTES or t == T_MESSAGE or t == T_CUT:
        return -1
    return 4


cdef inline int wire_of(int t) noexcept nogil:
    if t == T_DOUBLE or t == T_FIXED64 or t == T_SFIXED64:
        return WT_I64
    if t == T_FLOAT or t == T_FIXED32 or t == T_SFIXED32:
        return WT_I32
    if t == T_STRING or t == T_BYTES or t == T_MESSAGE or t == T_CUT:
        return WT_LEN
    return WT_VARINT


cdef class ProtoMachine:
    """The columns of one reader message type and the tables that fill them.
    ``run`` decodes rows without the GIL; ``take`` hands the buffers over."""

    cdef Machine m
    cdef int top
    cdef Py_ssize_t nenums

    def __cinit__(self):
        memset(&self.m, 0, sizeof(Machine))

    def __init__(self, cols, col_kids, msgs, fields, which, dense, enums, int top):
        """``cols``: int64 [ncol, 4] (kind, width, nkid, kid0); ``col_kids``:
        int32; ``msgs``: int64 [nmsg, 8] (col, nfield, field0, mode, noneof,
        oneof0, ndense, dense0); ``fields``: int64 [nfield, 8] (number, type,
        presence, col, vcol, sub, oneof, oneof_pos), each message's sorted by
        number; ``which``: int32 oneof columns; ``dense``: int32; ``enums``:
        int32, the number sets of closed enums (at an enum field's ``sub``:
        the count, then the numbers, sorted); ``top``: the message node a row
        is. Every index is checked."""
        cdef const int64_t[:, ::1] cv = np.ascontiguousarray(cols, dtype=np.int64).reshape(-1, 4)
        cdef const int64_t[:, ::1] mv = np.ascontiguousarray(msgs, dtype=np.int64).reshape(-1, 8)
        cdef const int64_t[:, ::1] fv = np.ascontiguousarray(fields, dtype=np.int64).reshape(-1, 8)
        cdef const int32_t[::1] ck = np.ascontiguousarray(col_kids, dtype=np.int32)
        cdef const int32_t[::1] wv = np.ascontiguousarray(which, dtype=np.int32)
        cdef const int32_t[::1] dv = np.ascontiguousarray(dense, dtype=np.int32)
        cdef const int32_t[::1] ev = np.ascontiguousarray(enums, dtype=np.int32)
        cdef Machine *m = &self.m
        cdef int i
        m.ncol, m.nmsg, m.nfield = cv.shape[0], mv.shape[0], fv.shape[0]
        if not (m.ncol and 0 <= top < m.nmsg):
            raise ValueError("a machine needs columns and its top message")
        self.top = top
        m.cols = <Col *>calloc(m.ncol, sizeof(Col))
        m.col_kids = <int *>calloc(max(ck.shape[0], 1), sizeof(int))
        m.msgs = <Msg *>calloc(m.nmsg, sizeof(Msg))
        m.fields = <Field *>calloc(max(m.nfield, 1), sizeof(Field))
        m.which = <int *>calloc(max(wv.shape[0], 1), sizeof(int))
        m.dense = <int32_t *>calloc(max(dv.shape[0], 1), sizeof(int32_t))
        m.enums = <int32_t *>calloc(max(ev.shape[0], 1), sizeof(int32_t))
        if not (m.cols and m.col_kids and m.msgs and m.fields and m.which and m.dense and m.enums):
            raise MemoryError()
        for i in range(ck.shape[0]):
            if not 0 <= ck[i] < m.ncol:
                raise ValueError("column child out of range")
            m.col_kids[i] = ck[i]
        for i in range(m.ncol):
            c = &m.cols[i]
            if not (K_NULL <= cv[i, 0] <= K_MAP and 0 <= cv[i, 2] <= 1 << 20 and 0 <= cv[i, 3]
                    and cv[i, 3] + cv[i, 2] <= ck.shape[0]):
                raise ValueError(f"malformed column {i}")
            c.kind, c.width, c.nkid, c.kid0 = cv[i, 0], cv[i, 1], cv[i, 2], cv[i, 3]
            if (c.kind == K_FIXED) != (c.width in (1, 4, 8)) or (c.kind != K_FIXED and c.width):
                raise ValueError(f"column {i}: width {c.width}")
            if c.kind in (K_LIST, K_MAP) and c.nkid != 1:
                raise ValueError(f"list column {i} needs one child")
            c.valid.role, c.values.role, c.offs.role = BASE_ROLE, BASE_ROLE + 1, BASE_ROLE + 2
            if c.kind in (K_BINARY, K_LIST, K_MAP) and col_offset(&c.offs, 0) != ST_OK:
                raise MemoryError()
        for i in range(wv.shape[0]):
            if not (0 <= wv[i] < m.ncol and m.cols[wv[i]].kind == K_FIXED and m.cols[wv[i]].width == 1):
                raise ValueError("oneof column out of range")
            m.which[i] = wv[i]
        for i in range(dv.shape[0]):
            m.dense[i] = dv[i]
        self.nenums = ev.shape[0]
        for i in range(ev.shape[0]):
            m.enums[i] = ev[i]
        for i in range(m.nfield):
            f = &m.fields[i]
            if not (0 < fv[i, 0] < 1 << 29 and T_DOUBLE <= fv[i, 1] <= T_CUT and fv[i, 1] != 10
                    and P_IMPLICIT <= fv[i, 2] <= P_DEFAULT_MSG and -1 <= fv[i, 3] < m.ncol
                    and -1 <= fv[i, 4] < m.ncol and -1 <= fv[i, 5] < 1 << 30 and -1 <= fv[i, 6] < 1 << 20
                    and 0 <= fv[i, 7] < 128):
                raise ValueError(f"malformed field {i}")
            f.number, f.type, f.presence, f.col, f.vcol = fv[i, 0], fv[i, 1], fv[i, 2], fv[i, 3], fv[i, 4]
            f.sub, f.oneof, f.oneof_pos = fv[i, 5], fv[i, 6], fv[i, 7]
        for i in range(m.nmsg):
            g = &m.msgs[i]
            if not (0 <= mv[i, 0] < m.ncol and 0 <= mv[i, 1] and 0 <= mv[i, 2]
                    and mv[i, 2] + mv[i, 1] <= m.nfield and M_STRUCT <= mv[i, 3] <= M_DURATION
                    and 0 <= mv[i, 4] and 0 <= mv[i, 5] and mv[i, 5] + mv[i, 4] <= wv.shape[0]
                    and 0 <= mv[i, 6] <= 4096 and 0 <= mv[i, 7] and mv[i, 7] + mv[i, 6] <= dv.shape[0]):
                raise ValueError(f"malformed message {i}")
            g.col, g.nfield, g.field0, g.mode = mv[i, 0], mv[i, 1], mv[i, 2], mv[i, 3]
            g.noneof, g.oneof0, g.ndense, g.dense0 = mv[i, 4], mv[i, 5], mv[i, 6], mv[i, 7]
            self._check_msg(g)

    cdef _check_msg(self, Msg *g):
        """Each field's column holds what its type writes; sub-messages are
        in range; the dense table names the message's own fields."""
        cdef Machine *m = &self.m
        cdef int k, w
        cdef Field *f
        cdef Col *vc
        for k in range(g.ndense):
            if not -1 <= m.dense[g.dense0 + k] < g.nfield:
                raise ValueError("dense table out of range")
        for k in range(g.nfield):
            f = &m.fields[g.field0 + k]
            if k and f.number <= m.fields[g.field0 + k - 1].number:
                raise ValueError("fields not sorted by number")
            if f.oneof >= g.noneof:
                raise ValueError("oneof out of range")
            if f.col < 0:
                if not (g.mode in (M_TIMESTAMP, M_DURATION) and f.presence == P_IMPLICIT
                        and scalar_width(f.type) > 0):
                    raise ValueError("a field without a column")
                continue
            if f.vcol < 0:
                raise ValueError("a field without its value column")
            if f.presence == P_REPEATED:
                if not (m.cols[f.col].kind in (K_LIST, K_MAP) and m.col_kids[m.cols[f.col].kid0] == f.vcol):
                    raise ValueError("a repeated field without its list column")
                if m.cols[f.col].kind == K_MAP and f.type != T_MESSAGE:
                    raise ValueError("a map column of a non-message field")
            elif f.vcol != f.col:
                raise ValueError("a singular field writes its own column")
            vc = &m.cols[f.vcol]
            if f.type == T_MESSAGE:
                if not (0 <= f.sub < m.nmsg and m.msgs[f.sub].col == f.vcol):
                    raise ValueError("a message field without its message")
            elif f.type == T_CUT:
                if vc.kind != K_NULL:
                    raise ValueError("a cut field needs a null column")
            elif f.type == T_ENUM and f.sub >= 0 and not self._number_set(f.sub):
                raise ValueError(f"field {f.number}: a malformed enum number set")
            else:
                w = scalar_width(f.type)
                if not ((w == -1 and vc.kind == K_BINARY) or (w == 0 and vc.kind == K_BOOL)
                        or (w > 0 and vc.kind == K_FIXED and vc.width == w)):
                    raise ValueError(f"field {f.number}: type {f.type} writes a column of kind {vc.kind}")
        if g.mode in (M_TIMESTAMP, M_DURATION):
            if not (g.nfield == 2 and m.fields[g.field0].number == 1 and m.fields[g.field0].type == T_INT64
                    and m.fields[g.field0 + 1].number == 2 and m.fields[g.field0 + 1].type == T_INT32
                    and m.cols[g.col].kind == K_FIXED and m.cols[g.col].width == 8):
                raise ValueError("a Timestamp/Duration node of another shape")
        elif g.mode == M_WRAPPER:
            if not (g.nfield == 1 and m.fields[g.field0].number == 1 and m.fields[g.field0].col == g.col
                    and m.fields[g.field0].presence == P_IMPLICIT):
                raise ValueError("a wrapper node of another shape")
        elif m.cols[g.col].kind != K_STRUCT:
            raise ValueError("a message node writes a struct")

    cdef bint _number_set(self, Py_ssize_t at):
        """``m.enums[at]`` is a count, then as many numbers, strictly increasing."""
        cdef Py_ssize_t k, count
        if not (0 <= at < self.nenums and 0 < self.m.enums[at] <= self.nenums - at - 1):
            return False
        count = self.m.enums[at]
        for k in range(at + 2, at + 1 + count):
            if self.m.enums[k] <= self.m.enums[k - 1]:
                return False
        return True

    def __dealloc__(self):
        cdef int i
        cdef Machine *m = &self.m
        if m.cols != NULL:
            for i in range(m.ncol):
                growbuf_free(&m.cols[i].valid)
                growbuf_free(&m.cols[i].values)
                growbuf_free(&m.cols[i].offs)
        free(m.cols)
        free(m.col_kids)
        free(m.msgs)
        free(m.fields)
        free(m.which)
        free(m.dense)
        free(m.enums)
        free(m.slots)

    def run(self, const uint8_t[::1] data, const int64_t[::1] start, const int64_t[::1] end,
            const int32_t[::1] prog, int32_t[::1] status, int64_t[::1] errpos, bint stop_at_error):
        """Decode row i, ``data[start[i]:end[i])``, as message node ``prog[i]``
        (< 0: a null row, its status already set). A failed row is rolled
        back and stored as null, its status written and the byte where it
        failed (from ``start[i]``) added to ``errpos[i]``. Returns the rows
        done (all unless ``stop_at_error`` stopped at the first failure)."""
        cdef Py_ssize_t n = start.shape[0], i, size = data.shape[0], mark, done = n
        cdef int st, p
        cdef Cursor cur
        cdef const uint8_t *base = &data[0] if size else NULL
        cdef Machine *m = &self.m
        cdef int topcol = m.msgs[self.top].col
        if not (end.shape[0] == n and prog.shape[0] == n and status.shape[0] == n and errpos.shape[0] == n):
            raise ValueError("row arrays of different lengths")
        for i in range(n):
            if prog[i] >= 0 and not (0 <= start[i] <= end[i] <= size and prog[i] < m.nmsg
                                     and m.msgs[prog[i]].col == topcol):
                raise ValueError(f"row {i}: outside the data or no such message")
        with nogil:
            for i in range(n):
                p = prog[i]
                if p < 0:
                    if col_null(m.cols, m.col_kids, topcol) != ST_OK:
                        status[i] = ST_NOMEM
                    continue
                mark = m.cols[topcol].length
                cur = cursor_over(base, start[i], end[i])
                m.sp = 0
                m.errp = NULL
                st = decode_msg(m, p, &cur)
                if st != ST_OK:
                    col_truncate(m.cols, m.col_kids, topcol, mark)
                    status[i] = st
                    if m.errp != NULL and base + start[i] <= m.errp <= base + end[i]:
                        errpos[i] += m.errp - (base + start[i])
                    else:
                        errpos[i] += cur.pos - start[i]
                    if col_null(m.cols, m.col_kids, topcol) != ST_OK:
                        status[i] = ST_NOMEM
                    if stop_at_error:
                        done = i + 1
                        break
        return done

    def take(self):
        """Per column: (length, null count, validity, values, offsets) as
        numpy arrays (offsets int32, None where the layout has none)."""
        cdef int i
        cdef Col *c
        out = []
        for i in range(self.m.ncol):
            c = &self.m.cols[i]
            valid = growbuf_take(&c.valid, np.uint8)
            values = growbuf_take(&c.values, np.uint8)
            offs = growbuf_take(&c.offs, np.int32) if c.kind in (K_BINARY, K_LIST, K_MAP) else None
            out.append((c.length, c.nulls, valid, values, offs))
            c.length = c.nulls = 0
        return out


# --- decoding ---------------------------------------------------------------------------

cdef inline int find_field(Machine *m, Msg *g, uint32_t number) noexcept nogil:
    """The local index of a field number in message g, or -1."""
    cdef int lo = 0, hi = g.nfield - 1, mid
    cdef uint32_t at
    if number < <uint32_t>g.ndense:
        return m.dense[g.dense0 + number]
    while lo <= hi:
        mid = (lo + hi) >> 1
        at = m.fields[g.field0 + mid].number
        if at == number:
            return mid
        if at < number:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


cdef int skip_field(Machine *m, Cursor *cur, int wt, uint32_t number, int depth) noexcept nogil:
    """An unknown field: read and checked, nothing kept."""
    cdef uint64_t u
    cdef uint32_t tag
    cdef Py_ssize_t n
    cdef int st
    if wt == WT_VARINT:
        return rd_u64(cur, &u)
    if wt == WT_I64 or wt == WT_I32:
        n = 8 if wt == WT_I64 else 4
        if n > cur.end - cur.pos:
            return ST_SHORT
        cur.pos += n
        return ST_OK
    if wt == WT_LEN:
        st = rd_len(cur, &n)
        if st == ST_OK:
            cur.pos += n
        return st
    if wt == WT_SGROUP:
        if depth >= MAX_GROUP_DEPTH:
            return ST_TOO_DEEP
        while True:
            st = rd_u32(cur, &tag)
            if st != ST_OK:
                return st
            if (tag & 7) == WT_EGROUP:
                return ST_OK if (tag >> 3) == number else ST_TAG
            if (tag >> 3) == 0:
                return ST_TAG
            st = skip_field(m, cur, tag & 7, tag >> 3, depth + 1)
            if st != ST_OK:
                return st
    return ST_TAG


cdef int rd_scalar(Cursor *cur, int t, int64_t *v) noexcept nogil:
    """One value of a scalar type, as the type's bits in an int64."""
    cdef uint64_t u
    cdef uint32_t u32
    cdef int st
    if t == T_DOUBLE or t == T_FIXED64 or t == T_SFIXED64:
        if 8 > cur.end - cur.pos:
            return ST_SHORT
        memcpy(&u, cur.buf + cur.pos, 8)
        cur.pos += 8
        v[0] = <int64_t>u
        return ST_OK
    if t == T_FLOAT or t == T_FIXED32 or t == T_SFIXED32:
        if 4 > cur.end - cur.pos:
            return ST_SHORT
        memcpy(&u32, cur.buf + cur.pos, 4)
        cur.pos += 4
        v[0] = <int64_t><int32_t>u32
        return ST_OK
    st = rd_u64(cur, &u)
    if st != ST_OK:
        return st
    if t == T_INT32 or t == T_ENUM or t == T_UINT32:
        v[0] = <int64_t><int32_t><uint32_t>u          # the low 32 bits
    elif t == T_SINT32:
        u32 = <uint32_t>u
        v[0] = <int64_t><int32_t>((u32 >> 1) ^ (0u - (u32 & 1)))
    elif t == T_SINT64:
        v[0] = <int64_t>((u >> 1) ^ (0ull - (u & 1)))
    elif t == T_BOOL:
        v[0] = u != 0
    else:
        v[0] = <int64_t>u
    return ST_OK


cdef inline bint undeclared(Machine *m, Field *f, int64_t v) noexcept nogil:
    """A number a closed enum field's enum does not declare."""
    cdef const int32_t *numbers
    cdef int lo = 0, hi, mid
    if f.type != T_ENUM or f.sub < 0:
        return False
    numbers = m.enums + f.sub + 1
    hi = m.enums[f.sub] - 1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if numbers[mid] == v:
            return False
        if numbers[mid] < v:
            lo = mid + 1
        else:
            hi = mid - 1
    return True


cdef int read_field(Machine *m, Msg *g, int k, Py_ssize_t base, int wt, Cursor *cur,
                    const uint8_t *tagp, const uint8_t *msg0) noexcept nogil:
    """Field k of message g (its slot: ``m.slots[base + k]``) from ``cur``."""
    cdef Field *f = &m.fields[g.field0 + k]
    cdef Slot *s = &m.slots[base + k]
    cdef Slot *which
    cdef int64_t v
    cdef Py_ssize_t n, mark
    cdef int st, t = f.type, want = wire_of(f.type), w
    cdef Cursor sub
    cdef Col *vc
    if t == T_CUT:
        return fail(m, cur, ST_TOO_DEEP)
    if f.presence == P_REPEATED:
        vc = &m.cols[f.vcol]
        if wt == WT_LEN and want != WT_LEN:        # packed
            st = rd_len(cur, &n)
            if st != ST_OK:
                return fail(m, cur, st)
            w = 8 if want == WT_I64 else 4 if want == WT_I32 else 0
            if w and n % w:
                return fail(m, cur, ST_PACKED)
            sub = cursor_over(cur.buf, cur.pos, cur.pos + n)
            while sub.pos < sub.end:
                st = rd_scalar(&sub, t, &v)
                if st != ST_OK:
                    return fail(m, &sub, st)
                if undeclared(m, f, v):
                    continue
                st = col_scalar(vc, v)
                if st != ST_OK:
                    return st
            cur.pos += n
            return ST_OK
        if wt != want:
            return fail(m, cur, ST_WIRETYPE)
        if want != WT_LEN:
            st = rd_scalar(cur, t, &v)
            if st != ST_OK:
                return fail(m, cur, st)
            if undeclared(m, f, v):
                return ST_OK
            return col_scalar(vc, v)
        st = rd_len(cur, &n)
        if st != ST_OK:
            return fail(m, cur, st)
        if t == T_MESSAGE:
            sub = cursor_over(cur.buf, cur.pos, cur.pos + n)
            mark = vc.length
            m.drop = False
            st = decode_msg(m, f.sub, &sub)
            if st != ST_OK:
                return fail(m, &sub, st)
            if m.drop:                  # a map entry whose enum value is undeclared: left out
                col_truncate(m.cols, m.col_kids, f.vcol, mark)
                m.drop = False
        else:
            if t == T_STRING and not utf8_valid(cur.buf + cur.pos, n):
                return fail(m, cur, ST_UTF8)
            st = col_bytes(vc, cur.buf + cur.pos, n)
            if st != ST_OK:
                return st
        cur.pos += n
        return ST_OK
    if wt != want:
        return fail(m, cur, ST_WIRETYPE)
    if want != WT_LEN:
        st = rd_scalar(cur, t, &v)
        if st != ST_OK:
            return fail(m, cur, st)
        if undeclared(m, f, v):         # the field (and its oneof) keeps what it had
            if f.presence == P_IMPLICIT:
                m.drop = True           # only a map entry's value is an implicit closed enum
            return ST_OK
    if f.oneof >= 0:
        which = &m.slots[base + g.nfield + f.oneof]
        if which.v != k:
            which.v = k
            s.count = 0                 # a member set anew: what came before is cleared
    if want != WT_LEN:
        s.v = v
    else:
        st = rd_len(cur, &n)
        if st != ST_OK:
            return fail(m, cur, st)
        if t == T_STRING and not utf8_valid(cur.buf + cur.pos, n):
            return fail(m, cur, ST_UTF8)
        if t == T_MESSAGE and s.count == 0:
            s.v = tagp - msg0           # merged occurrences are gathered from here
            s.p0 = msg0
        s.p = cur.buf + cur.pos
        s.n = n
        cur.pos += n
    s.count += 1
    return ST_OK


cdef int decode_msg(Machine *m, int mi, Cursor *cur) noexcept nogil:
    """One message of node mi from ``cur`` (to its end), appended to its column."""
    cdef Msg *g = &m.msgs[mi]
    cdef Py_ssize_t base = m.sp, need = g.nfield + g.noneof, k
    cdef Slot *grown
    cdef uint32_t tag
    cdef int st, fi
    cdef const uint8_t *tagp
    cdef const uint8_t *msg0 = cur.buf + cur.pos
    if need > m.cap - m.sp:
        grown = <Slot *>realloc(m.slots, <size_t>(m.sp + need + 64) * sizeof(Slot))
        if grown == NULL:
            return ST_NOMEM
        m.slots = grown
        m.cap = m.sp + need + 64
    memset(m.slots + base, 0, <size_t>need * sizeof(Slot))
    for k in range(g.noneof):
        m.slots[base + g.nfield + k].v = -1
    m.sp += need
    while cur.pos < cur.end:
        tagp = cur.buf + cur.pos
        st = rd_u32(cur, &tag)
        if st != ST_OK:
            return fail(m, cur, st)
        if (tag >> 3) == 0 or (tag & 7) == WT_EGROUP or (tag & 7) > WT_I32:
            cur.pos = tagp - cur.buf
            return fail(m, cur, ST_TAG)
        fi = find_field(m, g, tag >> 3)
        if fi < 0:
            st = skip_field(m, cur, tag & 7, tag >> 3, 0)
            if st != ST_OK:
                return fail(m, cur, st)
            continue
        st = read_field(m, g, fi, base, tag & 7, cur, tagp, msg0)
        if st != ST_OK:
            return st
    st = finish_msg(m, g, base)
    m.sp = base
    if st != ST_OK:
        return fail(m, cur, st)
    return ST_OK


cdef int finish_msg(Machine *m, Msg *g, Py_ssize_t base) noexcept nogil:
    """One entry per field column (value, default or null), the oneof
    columns, then the message's own entry."""
    cdef int k, st, cur_member
    cdef int64_t secs, nanos, total
    for k in range(g.nfield):
        st = emit_field(m, g, k, base)
        if st != ST_OK:
            return st
    for k in range(g.noneof):
        cur_member = <int>m.slots[base + g.nfield + k].v
        if cur_member < 0:
            st = col_null(m.cols, m.col_kids, m.which[g.oneof0 + k])
        else:
            st = col_scalar(&m.cols[m.which[g.oneof0 + k]], m.fields[g.field0 + cur_member].oneof_pos)
        if st != ST_OK:
            return st
    if g.mode == M_STRUCT:
        return col_valid(&m.cols[g.col])
    if g.mode == M_WRAPPER:
        return ST_OK
    secs = m.slots[base].v
    nanos = m.slots[base + 1].v                 # an int32
    if secs > 9223372036LL or secs < -9223372036LL:
        return ST_RANGE
    total = secs * 1000000000
    if (nanos > 0 and total > INT64_MAX - nanos) or (nanos < 0 and total < INT64_MIN - nanos):
        return ST_RANGE
    return col_scalar(&m.cols[g.col], total + nanos)


cdef int emit_field(Machine *m, Msg *g, int k, Py_ssize_t base) noexcept nogil:
    cdef Field *f = &m.fields[g.field0 + k]
    cdef Slot *s = &m.slots[base + k]
    cdef Col *c
    cdef int st
    cdef Cursor sub
    cdef uint8_t *merged
    cdef Py_ssize_t n
    if f.col < 0:
        return ST_OK
    c = &m.cols[f.col]
    if f.presence == P_REPEATED:
        st = col_offset(&c.offs, m.cols[f.vcol].length)
        if st != ST_OK:
            return st
        return col_valid(c)
    if f.oneof >= 0 and m.slots[base + g.nfield + f.oneof].v != k:
        return col_null(m.cols, m.col_kids, f.col)
    if s.count == 0:
        if f.presence == P_REQUIRED:
            return ST_REQUIRED
        if f.presence == P_DEFAULT_MSG:
            sub = cursor_over(s.p, 0, 0)
            return decode_msg(m, f.sub, &sub)
        if f.presence == P_IMPLICIT and f.oneof < 0:
            if c.kind == K_BINARY:
                return col_bytes(c, NULL, 0)
            return col_scalar(c, 0)
        return col_null(m.cols, m.col_kids, f.col)
    if f.type == T_MESSAGE:
        if s.count == 1:
            sub = cursor_over(s.p, 0, s.n)
            return decode_msg(m, f.sub, &sub)
        st = gather(s, f.number, &merged, &n)
        if st != ST_OK:
            return st
        sub = cursor_over(merged, 0, n)
        st = decode_msg(m, f.sub, &sub)
        free(merged)
        return st
    if c.kind == K_BINARY:
        return col_bytes(c, s.p, s.n)
    return col_scalar(c, s.v)


cdef int gather(Slot *s, uint32_t number, uint8_t **out, Py_ssize_t *total) noexcept nogil:
    """The occurrences of a message field from its first (since set), concatenated:
    protobuf merges them as it would parse their concatenation."""
    cdef Cursor cur
    cdef uint32_t tag
    cdef Py_ssize_t n, size = 0, at = 0
    cdef int st, round_
    cdef uint8_t *buf = NULL
    cdef Machine scratch
    memset(&scratch, 0, sizeof(Machine))
    for round_ in range(2):
        cur = cursor_over(s.p0, s.v, (s.p + s.n) - s.p0)
        while cur.pos < cur.end:
            st = rd_u32(&cur, &tag)
            if st != ST_OK:
                free(buf)
                return st
            if (tag >> 3) == number and (tag & 7) == WT_LEN:
                st = rd_len(&cur, &n)
                if st != ST_OK:
                    free(buf)
                    return st
                if round_ == 0:
                    size += n
                else:
                    memcpy(buf + at, cur.buf + cur.pos, <size_t>n)
                    at += n
                cur.pos += n
            else:
                st = skip_field(&scratch, &cur, tag & 7, tag >> 3, 0)
                if st != ST_OK:
                    free(buf)
                    return st
        if round_ == 0:
            buf = <uint8_t *>malloc(<size_t>size + 1)
            if buf == NULL:
                return ST_NOMEM
    out[0] = buf
    total[0] = size
    return ST_OK
