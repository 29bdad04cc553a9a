# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Avro binary datums decoded straight into Arrow buffers, without the GIL.

What one datum holds (Avro 1.12 specification, "Binary Encoding"):

    null       nothing
    boolean    1 byte: 0 or 1 (anything else is an error here)
    int        zig-zag varint, at most 5 bytes (the 5th <= 0x0f)
    long       zig-zag varint, at most 10 bytes (the 10th <= 0x01)
    float      4 bytes little-endian IEEE 754;  double: 8 bytes
    bytes      long length n (0 <= n <= bytes left) | n bytes
    string     as bytes, and valid UTF-8
    fixed      exactly `size` bytes
    enum       int: the symbol's index in the writer's symbols
    union      long: the branch index | the branch's datum
    record     each field's datum, in the writer's field order
    array/map  blocks: long count c | (c < 0: long byte size | ) |c| items,
               until a block of count 0; a map item is string key | value

The framing around it (Confluent's magic byte and schema id, or a header)
is read by ``kbatch.payloads.framing``, which hands this module each row's
datum as ``data[start[i]:end[i])`` and the program that decodes it.

A *program* is a tree of ops (``Op``), compiled once per (writer schema,
reader schema) in Python (``kbatch.payloads.avro_program``). Ops read the
writer's encoding and append to *columns* (``Col``), the Arrow layout of the
reader's type: a validity bitmap, then fixed-width values, binary offsets
and data, list offsets, or union type ids and offsets, and child columns.
An op whose column is -1 reads and checks without storing (a writer field
the reader does not have). Schema resolution lives in the program: promoted
ops (int read into int64, ...), enum symbol maps, union branch maps, and
defaults (a constant datum, encoded in the reader's schema, decoded by a
reader op from ``consts``).

A row that fails (truncated, a varint that runs on, bytes left over, an
index out of range, invalid UTF-8, ...) is rolled back in every column
(``col_truncate``) and becomes a null row; its status and byte position go
to the caller, who raises or keeps the null.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

import numpy as np

from kbatch._core._columns cimport GrowBuf, growbuf_free, growbuf_reserve, growbuf_take
from kbatch._core._cursor cimport Cursor, cursor_over, likely, unlikely


cdef extern from "_avro.h":
    bint utf8_valid "kb_utf8_valid"(const uint8_t *s, Py_ssize_t n) noexcept nogil
    bint parse_uuid "kb_parse_uuid"(const uint8_t *s, uint8_t *out) noexcept nogil
    bint magnitude_below "kb_magnitude_below"(const uint8_t *v, const uint8_t *limit, int w) noexcept nogil
    float load_f32 "kb_load_f32"(const uint8_t *p) noexcept nogil
    double load_f64 "kb_load_f64"(const uint8_t *p) noexcept nogil


# Column kinds (Arrow layouts). kbatch.payloads.avro_program names them too.
cpdef enum ColKind:
    K_NULL = 0       # length only
    K_BOOL = 1       # values: a bitmap
    K_FIXED = 2      # values: `width` bytes each (int32, int64, floats, fixed, decimals)
    K_BINARY = 3     # offs int32[n + 1] | values: the bytes
    K_STRUCT = 4     # children, one entry each per row
    K_LIST = 5       # offs int32[n + 1] into child 0
    K_MAP = 6        # offs int32[n + 1] into child 0 (entries struct: key, value)
    K_UNION = 7      # values: int8 type ids | offs: int32 offset into that child (dense)


# Ops: what to read from the writer's bytes and how to store it.
cpdef enum OpCode:
    OP_NULL = 0
    OP_BOOL = 1
    OP_INT = 2          # int -> int32
    OP_INT_LONG = 3     # int -> int64 (promotion)
    OP_INT_FLOAT = 4
    OP_INT_DOUBLE = 5
    OP_LONG = 6
    OP_LONG_FLOAT = 7
    OP_LONG_DOUBLE = 8
    OP_FLOAT = 9
    OP_FLOAT_DOUBLE = 10
    OP_DOUBLE = 11
    OP_STRING = 12      # length-prefixed, UTF-8 checked
    OP_BYTES = 13       # length-prefixed
    OP_FIXED = 14       # arg: size
    OP_UUID = 15        # string "8-4-4-4-12" -> 16 bytes
    OP_DEC_BYTES = 16   # arg: consts offset of 10^precision (column width bytes)
    OP_DEC_FIXED = 17   # arg: as OP_DEC_BYTES; arg2: fixed size
    OP_DURATION = 18    # fixed(12) months, days, millis (u32 LE) -> month_day_nano
    OP_ENUM = 19        # arg: consts offset of int32[arg2] reader indexes (-1: no symbol)
    OP_RECORD = 20      # kids: one op per writer field, then the defaults
    OP_ARRAY = 21       # kid 0: the item; arg2: least bytes an item takes
    OP_MAP = 22         # kid 0: the value; arg: key column; arg2: least bytes of a value
    OP_UNION = 23       # kids: one op per writer branch
    OP_UBRANCH = 24     # col: a dense union; arg: its type id; kid 0: the value
    OP_NULLOUT = 25     # append a null to col (reads nothing)
    OP_DEFAULT = 26     # kid 0 decodes consts[arg:arg + arg2] (a reader op)
    OP_FAIL = 27        # the data reached a branch the reader cannot take: arg is the status


# Status of a row (0 = decoded). Python words them (kbatch.payloads.errors).
cpdef enum Status:
    ST_OK = 0
    ST_SHORT = 1          # the datum ends early
    ST_VARINT = 2         # a varint runs on past 5 (int) / 10 (long) bytes
    ST_BOOL = 3           # a boolean byte other than 0 or 1
    ST_UTF8 = 4           # a string that is not UTF-8
    ST_LENGTH = 5         # a negative length
    ST_UNION_INDEX = 6    # a union branch index out of range
    ST_ENUM_INDEX = 7     # an enum index out of range
    ST_ENUM_SYMBOL = 8    # a writer's symbol the reader has not (and no default)
    ST_NO_BRANCH = 9      # a writer's union branch the reader's type cannot take
    ST_DECIMAL = 10       # a decimal beyond its precision
    ST_UUID = 11          # a uuid string that is not 8-4-4-4-12 hex
    ST_TRAILING = 12      # bytes left after the datum
    ST_TOO_DEEP = 13      # a recursive value nested deeper than the reader's unrolling
    ST_LIMIT = 14         # more items than a row may hold, or a column past 2 GiB
    ST_NOMEM = 15
    ST_BLOCK = 16         # a block's byte size disagrees with its items
    ST_RANGE = 17         # a value the Arrow type cannot hold (duration months)
    # Protobuf (kbatch._core._protobuf uses these numbers)
    ST_WIRETYPE = 18      # a wire type the field's type cannot have
    ST_TAG = 19           # field number 0, wire type 4/6/7, an unmatched end of group
    ST_REQUIRED = 20      # a proto2 required field is missing
    ST_PACKED = 21        # a packed run of fixed-width values that is not whole values
    # framing (set by the caller before the decode)
    ST_MAGIC = 32         # magic byte neither 0 nor 1
    ST_FRAME = 33         # shorter than its framing
    ST_UNKNOWN_ID = 34    # schema id (or guid) the registry does not know
    ST_INDEXES = 35       # Protobuf message indexes that do not parse or name no message
    ST_RESOLVE = 36       # the writer's schema cannot be read with the reader's (or does not parse)


cdef enum:
    MAX_EMPTY_ITEMS = 1 << 24   # items of a type that takes no bytes (null, {}) per run:
                                # every row and every nesting level of a column together
    BASE_ROLE = 300             # memory pool roles of these columns


cdef struct Col:
    int kind
    int width
    int nkid
    int kid0              # first child in col_kids
    Py_ssize_t length
    Py_ssize_t nulls
    GrowBuf valid
    GrowBuf values
    GrowBuf offs


cdef struct Op:
    int code
    int col
    int nkid
    int kid0              # first child op in op_kids
    int64_t arg
    int64_t arg2


cdef struct Machine:
    Col *cols
    int ncol
    int *col_kids
    Op *ops
    int nops
    int *op_kids
    const uint8_t *consts
    Py_ssize_t nconsts
    int64_t empty_items   # zero-byte items decoded in this run (MAX_EMPTY_ITEMS at most)


# --- strict Avro varints -------------------------------------------------------

cdef inline int rd_long(Cursor *c, int64_t *out) noexcept nogil:
    cdef uint64_t raw = 0, b
    cdef int shift = 0
    while True:
        if unlikely(c.pos >= c.end):
            return ST_SHORT
        b = c.buf[c.pos]
        c.pos += 1
        if unlikely(shift == 63 and b > 1):
            return ST_VARINT
        raw |= (b & 0x7f) << shift
        if b < 0x80:
            break
        shift += 7
        if unlikely(shift > 63):
            return ST_VARINT
    out[0] = <int64_t>((raw >> 1) ^ (0ull - (raw & 1)))
    return ST_OK


cdef inline int rd_int(Cursor *c, int32_t *out) noexcept nogil:
    cdef uint32_t raw = 0, b
    cdef int shift = 0
    if likely(c.pos < c.end) and c.buf[c.pos] < 0x80:
        b = c.buf[c.pos]
        c.pos += 1
        out[0] = <int32_t>((b >> 1) ^ (0u - (b & 1)))
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
        if unlikely(shift > 28):
            return ST_VARINT
    out[0] = <int32_t>((raw >> 1) ^ (0u - (raw & 1)))
    return ST_OK


cdef inline int rd_len(Cursor *c, Py_ssize_t *n) noexcept nogil:
    """A bytes/string length: 0 <= n <= bytes left."""
    cdef int64_t v
    cdef int st = rd_long(c, &v)
    if st != ST_OK:
        return st
    if v < 0:
        return ST_LENGTH
    if v > c.end - c.pos:
        return ST_SHORT
    n[0] = <Py_ssize_t>v
    return ST_OK


# --- columns ---------------------------------------------------------------------

cdef inline int col_bit(GrowBuf *b, Py_ssize_t i, bint v) noexcept nogil:
    """Bit i of a bitmap that holds i bits: grown by a byte at each multiple of 8."""
    cdef uint8_t *p
    if (i & 7) == 0:
        if growbuf_reserve(b, 1) != 0:
            return ST_NOMEM
        (<uint8_t *>b.data)[b.len] = 0
        b.len += 1
    p = <uint8_t *>b.data + (i >> 3)
    if v:
        p[0] |= <uint8_t>(1 << (i & 7))
    else:
        p[0] &= <uint8_t>~(1 << (i & 7))
    return ST_OK


cdef inline int col_valid(Col *c) noexcept nogil:
    """One more non-null entry (its values already written)."""
    if col_bit(&c.valid, c.length, True) != ST_OK:
        return ST_NOMEM
    c.length += 1
    return ST_OK


cdef inline int col_put(Col *c, const void *src, int n) noexcept nogil:
    """A fixed-width value of n (= width) bytes, valid."""
    if growbuf_reserve(&c.values, n) != 0:
        return ST_NOMEM
    memcpy(c.values.data + c.values.len, src, <size_t>n)
    c.values.len += n
    return col_valid(c)


cdef inline int col_offset(GrowBuf *offs, Py_ssize_t v) noexcept nogil:
    cdef int32_t o
    if v > INT32_MAX:
        return ST_LIMIT
    if growbuf_reserve(offs, 4) != 0:
        return ST_NOMEM
    o = <int32_t>v
    memcpy(offs.data + offs.len, &o, 4)
    offs.len += 4
    return ST_OK


cdef inline int col_bytes(Col *c, const uint8_t *src, Py_ssize_t n) noexcept nogil:
    if n > INT32_MAX - c.values.len:
        return ST_LIMIT
    if growbuf_reserve(&c.values, n) != 0:
        return ST_NOMEM
    if n:
        memcpy(c.values.data + c.values.len, src, <size_t>n)
        c.values.len += n
    if col_offset(&c.offs, c.values.len) != ST_OK:
        return ST_NOMEM
    return col_valid(c)


cdef class AvroMachine:
    """The columns of one reader type and the programs (one per writer
    schema) that fill them. ``run`` decodes rows without the GIL; ``take``
    hands the buffers over (numpy arrays, no copy)."""

    cdef Machine m
    cdef bytes consts_obj
    cdef int top

    def __cinit__(self):
        memset(&self.m, 0, sizeof(Machine))

    def __init__(self, cols, col_kids, ops, op_kids, bytes consts, int top):
        """``cols``: int64 [ncol, 4] (kind, width, nkid, kid0); ``col_kids``:
        int32; ``ops``: int64 [nops, 6] (code, col, nkid, kid0, arg, arg2);
        ``op_kids``: int32; ``consts``: defaults, enum maps, decimal limits;
        ``top``: the column a row is appended to. Every index is checked."""
        cdef const int64_t[:, ::1] cv = np.ascontiguousarray(cols, dtype=np.int64).reshape(-1, 4)
        cdef const int64_t[:, ::1] ov = np.ascontiguousarray(ops, dtype=np.int64).reshape(-1, 6)
        cdef const int32_t[::1] ck = np.ascontiguousarray(col_kids, dtype=np.int32)
        cdef const int32_t[::1] ok = np.ascontiguousarray(op_kids, dtype=np.int32)
        cdef int i
        cdef Col *c
        cdef Op *o
        cdef Machine *m = &self.m
        m.ncol = cv.shape[0]
        m.nops = ov.shape[0]
        if m.ncol == 0:
            raise ValueError("a program needs a column")
        if not 0 <= top < m.ncol:
            raise ValueError("top column out of range")
        self.top = top
        self.consts_obj = consts
        m.consts = <const uint8_t *>consts
        m.nconsts = len(consts)
        m.cols = <Col *>calloc(m.ncol, sizeof(Col))
        m.col_kids = <int *>calloc(max(ck.shape[0], 1), sizeof(int))
        m.ops = <Op *>calloc(max(m.nops, 1), sizeof(Op))
        m.op_kids = <int *>calloc(max(ok.shape[0], 1), sizeof(int))
        if not (m.cols and m.col_kids and m.ops and m.op_kids):
            raise MemoryError()
        for i in range(ck.shape[0]):
            if not 0 <= ck[i] < m.ncol:
                raise ValueError("column child out of range")
            m.col_kids[i] = ck[i]
        for i in range(ok.shape[0]):
            if not 0 <= ok[i] < m.nops:
                raise ValueError("op child out of range")
            m.op_kids[i] = ok[i]
        for i in range(m.ncol):
            c = &m.cols[i]
            if not (K_NULL <= cv[i, 0] <= K_UNION and 0 <= cv[i, 1] <= 32 and 0 <= cv[i, 2] <= 127
                    and 0 <= cv[i, 3] and cv[i, 3] + cv[i, 2] <= ck.shape[0]):
                raise ValueError(f"malformed column {i}")
            c.kind, c.width, c.nkid, c.kid0 = cv[i, 0], cv[i, 1], cv[i, 2], cv[i, 3]
            if c.kind in (K_LIST, K_MAP) and c.nkid != 1:
                raise ValueError(f"list column {i} needs one child")
            c.valid.role = BASE_ROLE
            c.values.role = BASE_ROLE + 1
            c.offs.role = BASE_ROLE + 2
            if c.kind in (K_BINARY, K_LIST, K_MAP):
                if col_offset(&c.offs, 0) != ST_OK:
                    raise MemoryError()
        for i in range(m.nops):
            o = &m.ops[i]
            if not (OP_NULL <= ov[i, 0] <= OP_FAIL and -1 <= ov[i, 1] < m.ncol and 0 <= ov[i, 2] < 1 << 30
                    and 0 <= ov[i, 3] and ov[i, 3] + ov[i, 2] <= ok.shape[0]):
                raise ValueError(f"malformed op {i}")
            o.code, o.col, o.nkid, o.kid0, o.arg, o.arg2 = ov[i, 0], ov[i, 1], ov[i, 2], ov[i, 3], ov[i, 4], ov[i, 5]
            self._check_op(o)

    cdef _check_op(self, Op *o):
        """What an op reads from consts and columns lies inside them."""
        cdef Machine *m = &self.m
        cdef Col *c = &m.cols[o.col] if o.col >= 0 else NULL
        if o.code in (OP_DEC_BYTES, OP_DEC_FIXED):
            if c == NULL or not (c.width in (16, 32) and 0 <= o.arg <= m.nconsts - c.width):
                raise ValueError("decimal op without its limit")
            if o.code == OP_DEC_FIXED and not 0 <= o.arg2 <= 1 << 20:
                raise ValueError("decimal fixed size out of range")
        elif o.code == OP_ENUM:
            if not (0 <= o.arg2 <= (m.nconsts - o.arg) // 4 and o.arg >= 0):
                raise ValueError("enum map out of range")
        elif o.code == OP_DEFAULT:
            if not (o.nkid == 1 and 0 <= o.arg and 0 <= o.arg2 <= m.nconsts - o.arg):
                raise ValueError("default out of range")
        elif o.code in (OP_ARRAY, OP_MAP, OP_UBRANCH) and o.nkid != 1:
            raise ValueError("op needs one child")
        elif o.code == OP_FIXED and not 0 <= o.arg <= 1 << 20:
            raise ValueError("fixed size out of range")
        if o.code == OP_MAP and o.col >= 0:
            if not (c.kind == K_MAP and 0 <= o.arg < m.ncol):
                raise ValueError("map op without its key column")
        if o.code == OP_UBRANCH and (c == NULL or c.kind != K_UNION or not 0 <= o.arg < c.nkid):
            raise ValueError("union branch out of range")
        if o.code == OP_ARRAY and o.col >= 0 and c.kind != K_LIST:
            raise ValueError("array op without a list column")
        if c != NULL:
            want = {OP_BOOL: K_BOOL, OP_STRING: K_BINARY, OP_BYTES: K_BINARY, OP_RECORD: K_STRUCT}
            if o.code in want and c.kind != want[o.code]:
                raise ValueError(f"op {o.code} writes a column of kind {c.kind}")
            widths = {OP_INT: 4, OP_INT_LONG: 8, OP_INT_FLOAT: 4, OP_INT_DOUBLE: 8, OP_LONG: 8,
                      OP_LONG_FLOAT: 4, OP_LONG_DOUBLE: 8, OP_FLOAT: 4, OP_FLOAT_DOUBLE: 8,
                      OP_DOUBLE: 8, OP_UUID: 16, OP_DURATION: 16, OP_ENUM: 4}
            if o.code in widths and (c.kind != K_FIXED or c.width != widths[o.code]):
                raise ValueError(f"op {o.code} writes a column of width {c.width}")
            if o.code == OP_FIXED and c.kind != K_BINARY and (c.kind != K_FIXED or c.width != o.arg):
                raise ValueError("fixed op of another width")

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
        free(m.ops)
        free(m.op_kids)

    # --- rows --------------------------------------------------------------------

    def run(self, const uint8_t[::1] data, const int64_t[::1] start, const int64_t[::1] end,
            const int32_t[::1] prog, int32_t[::1] status, int64_t[::1] errpos, bint stop_at_error):
        """Decode row i from ``data[start[i]:end[i])`` with the op ``prog[i]``
        (< 0: a null row, its status already set). A failed row is rolled
        back, stored as null, its status written and its byte (from
        ``start[i]``) added to ``errpos[i]``. Returns the number of rows done (all of them unless
        ``stop_at_error`` stopped at the first failure)."""
        cdef Py_ssize_t n = start.shape[0], i, size = data.shape[0]
        cdef Py_ssize_t mark, done = n
        cdef int st, p
        cdef Cursor cur
        cdef const uint8_t *base = &data[0] if size else NULL
        cdef Machine *m = &self.m
        if not (end.shape[0] == n and prog.shape[0] == n and status.shape[0] == n and errpos.shape[0] == n):
            raise ValueError("row arrays of different lengths")
        for i in range(n):       # bounds first: the loop below trusts them
            if prog[i] >= 0 and not (0 <= start[i] <= end[i] <= size and prog[i] < m.nops):
                raise ValueError(f"row {i}: datum outside the data or no such program")
        m.empty_items = 0
        with nogil:
            for i in range(n):
                p = prog[i]
                if p < 0:
                    if col_null(m.cols, m.col_kids, self.top) != ST_OK:
                        status[i] = ST_NOMEM
                    continue
                mark = m.cols[self.top].length
                cur = cursor_over(base, start[i], end[i])
                st = op_run(m, p, &cur)
                if st == ST_OK and cur.pos != cur.end:
                    st = ST_TRAILING
                if st != ST_OK:
                    col_truncate(m.cols, m.col_kids, self.top, mark)
                    status[i] = st
                    errpos[i] += cur.pos - start[i]
                    if col_null(m.cols, m.col_kids, self.top) != ST_OK:
                        status[i] = ST_NOMEM
                    if stop_at_error:
                        done = i + 1
                        break
        return done

    def take(self):
        """Per column: (length, null count, validity, values, offsets) as numpy
        uint8 arrays (offsets int32; None where the layout has none); the
        machine is empty afterwards."""
        cdef int i
        cdef Col *c
        cdef Machine *m = &self.m
        out = []
        for i in range(m.ncol):
            c = &m.cols[i]
            valid = growbuf_take(&c.valid, np.uint8)
            values = growbuf_take(&c.values, np.uint8)
            offs = growbuf_take(&c.offs, np.int32) if c.kind in (K_BINARY, K_LIST, K_MAP, K_UNION) else None
            out.append((c.length, c.nulls, valid, values, offs))
            c.length = c.nulls = 0
        return out


# --- nulls and roll-back ------------------------------------------------------------

cdef int col_null(Col *cols, const int *kids, int ci) noexcept nogil:
    """Append a null to column ci (placeholders in its children, as Arrow wants)."""
    cdef Col *c = &cols[ci]
    cdef int k, st
    cdef uint8_t zero[32]
    if c.kind == K_UNION:           # no bitmap: a null of the first branch
        if growbuf_reserve(&c.values, 1) != 0:
            return ST_NOMEM
        (<int8_t *>c.values.data)[c.values.len] = 0
        c.values.len += 1
        st = col_offset(&c.offs, cols[kids[c.kid0]].length)
        if st != ST_OK:
            return st
        c.length += 1
        return col_null(cols, kids, kids[c.kid0])
    if c.kind == K_BOOL:
        if col_bit(&c.values, c.length, False) != ST_OK:
            return ST_NOMEM
    elif c.kind == K_FIXED:
        memset(zero, 0, sizeof(zero))
        if growbuf_reserve(&c.values, c.width) != 0:
            return ST_NOMEM
        memcpy(c.values.data + c.values.len, zero, <size_t>c.width)
        c.values.len += c.width
    elif c.kind == K_BINARY:
        st = col_offset(&c.offs, c.values.len)
        if st != ST_OK:
            return st
    elif c.kind == K_STRUCT:
        for k in range(c.nkid):
            st = col_null(cols, kids, kids[c.kid0 + k])
            if st != ST_OK:
                return st
    elif c.kind == K_LIST or c.kind == K_MAP:
        st = col_offset(&c.offs, cols[kids[c.kid0]].length)
        if st != ST_OK:
            return st
    if col_bit(&c.valid, c.length, False) != ST_OK:
        return ST_NOMEM
    c.length += 1
    c.nulls += 1
    return ST_OK


cdef void col_truncate(Col *cols, const int *kids, int ci, Py_ssize_t n) noexcept nogil:
    """Back to n entries, and the children to what those entries hold."""
    cdef Col *c = &cols[ci]
    cdef Py_ssize_t i, first
    cdef int k, t
    cdef const uint8_t *bits = <const uint8_t *>c.valid.data
    cdef const int32_t *offs = <const int32_t *>c.offs.data
    cdef const int8_t *types = <const int8_t *>c.values.data
    if n > c.length:
        n = c.length
    if c.kind == K_UNION:
        for k in range(c.nkid):        # a child's length: its first entry rolled back
            for i in range(n, c.length):
                if types[i] == k:
                    col_truncate(cols, kids, kids[c.kid0 + k], offs[i])
                    break
        c.values.len = n
        c.offs.len = n * 4
        c.length = n
        return
    for i in range(n, c.length):
        if not (bits[i >> 3] >> (i & 7)) & 1:
            c.nulls -= 1
    if c.kind == K_BOOL:
        c.values.len = (n + 7) >> 3
    elif c.kind == K_FIXED:
        c.values.len = n * c.width
    elif c.kind == K_BINARY:
        c.values.len = offs[n]
        c.offs.len = (n + 1) * 4
    elif c.kind == K_STRUCT:
        for k in range(c.nkid):
            col_truncate(cols, kids, kids[c.kid0 + k], n)
    elif c.kind == K_LIST or c.kind == K_MAP:
        col_truncate(cols, kids, kids[c.kid0], offs[n])
        c.offs.len = (n + 1) * 4
    c.valid.len = (n + 7) >> 3
    c.length = n


# --- the ops -------------------------------------------------------------------------

cdef int op_run(Machine *m, int oi, Cursor *cur) noexcept nogil:
    cdef Op *o = &m.ops[oi]
    cdef Col *c = &m.cols[o.col] if o.col >= 0 else NULL
    cdef int32_t i32
    cdef int64_t i64
    cdef float f32
    cdef double f64
    cdef Py_ssize_t n
    cdef int st
    cdef uint8_t b
    cdef uint8_t tmp[32]
    cdef const uint8_t *p
    cdef int code = o.code
    cdef int t

    if code == OP_INT or code == OP_INT_LONG or code == OP_INT_FLOAT or code == OP_INT_DOUBLE:
        st = rd_int(cur, &i32)
        if st != ST_OK or c == NULL:
            return st
        if code == OP_INT:
            return col_put(c, &i32, 4)
        if code == OP_INT_LONG:
            i64 = i32
            return col_put(c, &i64, 8)
        if code == OP_INT_FLOAT:
            f32 = <float>i32
            return col_put(c, &f32, 4)
        f64 = <double>i32
        return col_put(c, &f64, 8)

    if code == OP_LONG or code == OP_LONG_FLOAT or code == OP_LONG_DOUBLE:
        st = rd_long(cur, &i64)
        if st != ST_OK or c == NULL:
            return st
        if code == OP_LONG:
            return col_put(c, &i64, 8)
        if code == OP_LONG_FLOAT:
            f32 = <float>i64
            return col_put(c, &f32, 4)
        f64 = <double>i64
        return col_put(c, &f64, 8)

    if code == OP_STRING or code == OP_BYTES:
        st = rd_len(cur, &n)
        if st != ST_OK:
            return st
        p = cur.buf + cur.pos
        if code == OP_STRING and not utf8_valid(p, n):
            return ST_UTF8
        cur.pos += n
        if c == NULL:
            return ST_OK
        return col_bytes(c, p, n)

    if code == OP_RECORD:
        for i32 in range(o.nkid):
            st = op_run(m, m.op_kids[o.kid0 + i32], cur)
            if st != ST_OK:
                return st
        if c == NULL:
            return ST_OK
        return col_valid(c)

    if code == OP_UNION:
        st = rd_long(cur, &i64)
        if st != ST_OK:
            return st
        if i64 < 0 or i64 >= o.nkid:
            return ST_UNION_INDEX
        return op_run(m, m.op_kids[o.kid0 + i64], cur)

    if code == OP_NULL:
        if c == NULL:
            return ST_OK
        c.length += 1           # a null column: its length is all it has
        c.nulls += 1
        if col_bit(&c.valid, c.length - 1, False) != ST_OK:
            return ST_NOMEM
        return ST_OK

    if code == OP_NULLOUT:
        return col_null(m.cols, m.col_kids, o.col) if c != NULL else ST_OK

    if code == OP_BOOL:
        if cur.pos >= cur.end:
            return ST_SHORT
        b = cur.buf[cur.pos]
        if b > 1:
            return ST_BOOL
        cur.pos += 1
        if c == NULL:
            return ST_OK
        if col_bit(&c.values, c.length, b == 1) != ST_OK:
            return ST_NOMEM
        return col_valid(c)

    if code == OP_FLOAT or code == OP_FLOAT_DOUBLE:
        if 4 > cur.end - cur.pos:
            return ST_SHORT
        f32 = load_f32(cur.buf + cur.pos)
        cur.pos += 4
        if c == NULL:
            return ST_OK
        if code == OP_FLOAT:
            return col_put(c, &f32, 4)
        f64 = f32
        return col_put(c, &f64, 8)

    if code == OP_DOUBLE:
        if 8 > cur.end - cur.pos:
            return ST_SHORT
        f64 = load_f64(cur.buf + cur.pos)
        cur.pos += 8
        return col_put(c, &f64, 8) if c != NULL else ST_OK

    if code == OP_FIXED:
        if o.arg > cur.end - cur.pos:
            return ST_SHORT
        p = cur.buf + cur.pos
        cur.pos += o.arg
        if c == NULL:
            return ST_OK
        if c.kind == K_BINARY:          # fixed wider than 32 bytes: a binary column
            return col_bytes(c, p, o.arg)
        if growbuf_reserve(&c.values, o.arg) != 0:
            return ST_NOMEM
        if o.arg:
            memcpy(c.values.data + c.values.len, p, <size_t>o.arg)
            c.values.len += o.arg
        return col_valid(c)

    if code == OP_ENUM:
        st = rd_int(cur, &i32)
        if st != ST_OK:
            return st
        if i32 < 0 or i32 >= o.arg2:
            return ST_ENUM_INDEX
        memcpy(&i32, m.consts + o.arg + 4 * <Py_ssize_t>i32, 4)
        if i32 < 0:
            return ST_ENUM_SYMBOL
        return col_put(c, &i32, 4) if c != NULL else ST_OK

    if code == OP_ARRAY or code == OP_MAP:
        return op_blocks(m, o, c, cur)

    if code == OP_UBRANCH:
        t = m.col_kids[c.kid0 + o.arg]
        if growbuf_reserve(&c.values, 1) != 0:
            return ST_NOMEM
        st = col_offset(&c.offs, m.cols[t].length)
        if st != ST_OK:
            return st
        (<int8_t *>c.values.data)[c.values.len] = <int8_t>o.arg
        c.values.len += 1
        c.length += 1           # before the value: a failure truncates both
        return op_run(m, m.op_kids[o.kid0], cur)

    if code == OP_DEC_BYTES or code == OP_DEC_FIXED:
        if code == OP_DEC_BYTES:
            st = rd_len(cur, &n)
            if st != ST_OK:
                return st
        else:
            n = o.arg2
            if n > cur.end - cur.pos:
                return ST_SHORT
        p = cur.buf + cur.pos
        cur.pos += n
        if c == NULL:
            return ST_OK
        st = decimal_le(p, n, tmp, c.width)
        if st != ST_OK:
            return st
        if not magnitude_below(tmp, m.consts + o.arg, c.width):
            return ST_DECIMAL
        return col_put(c, tmp, c.width)

    if code == OP_UUID:
        st = rd_len(cur, &n)
        if st != ST_OK:
            return st
        if n != 36 or not parse_uuid(cur.buf + cur.pos, tmp):
            return ST_UUID
        cur.pos += n
        return col_put(c, tmp, 16) if c != NULL else ST_OK

    if code == OP_DURATION:
        if 12 > cur.end - cur.pos:
            return ST_SHORT
        p = cur.buf + cur.pos
        cur.pos += 12
        if c == NULL:
            return ST_OK
        return duration(c, p)

    if code == OP_DEFAULT:
        return op_default(m, o)

    if code == OP_FAIL:
        return <int>o.arg
    return ST_NOMEM     # not reached: every code is checked at construction


cdef int op_default(Machine *m, Op *o) noexcept nogil:
    cdef Cursor sub = cursor_over(m.consts, o.arg, o.arg + o.arg2)
    cdef int st = op_run(m, m.op_kids[o.kid0], &sub)
    if st == ST_OK and sub.pos != sub.end:
        st = ST_TRAILING
    return st


cdef int op_blocks(Machine *m, Op *o, Col *c, Cursor *cur) noexcept nogil:
    """Array and map blocks; a map key is a string into column ``o.arg``."""
    cdef int64_t count, size, k
    cdef Py_ssize_t block_end, n
    cdef int st
    cdef int kid = m.op_kids[o.kid0]
    cdef Col *keys = &m.cols[o.arg] if (o.code == OP_MAP and c != NULL) else NULL
    cdef Col *entries = &m.cols[m.col_kids[c.kid0]] if (o.code == OP_MAP and c != NULL) else NULL
    cdef Col *child
    cdef int64_t least = o.arg2 + (1 if o.code == OP_MAP else 0)   # a key takes >= 1 byte
    while True:
        st = rd_long(cur, &count)
        if st != ST_OK:
            return st
        if count == 0:
            break
        block_end = -1
        if count < 0:
            if count < -INT32_MAX:
                return ST_LIMIT
            count = -count
            st = rd_long(cur, &size)
            if st != ST_OK:
                return st
            if size < 0:
                return ST_LENGTH
            if size > cur.end - cur.pos:
                return ST_SHORT
            block_end = cur.pos + size
        if least > 0:
            if count > (cur.end - cur.pos) // least:
                return ST_SHORT
        else:                    # items that take no bytes: bounded for the whole run
            if count > MAX_EMPTY_ITEMS - m.empty_items:
                return ST_LIMIT
            m.empty_items += count
        for k in range(count):
            if o.code == OP_MAP:
                st = rd_len(cur, &n)
                if st != ST_OK:
                    return st
                if not utf8_valid(cur.buf + cur.pos, n):
                    return ST_UTF8
                if keys != NULL:
                    st = col_bytes(keys, cur.buf + cur.pos, n)
                    if st != ST_OK:
                        return st
                cur.pos += n
            st = op_run(m, kid, cur)
            if st != ST_OK:
                return st
            if entries != NULL:
                st = col_valid(entries)
                if st != ST_OK:
                    return st
        if block_end >= 0 and cur.pos != block_end:
            return ST_BLOCK
    if c == NULL:
        return ST_OK
    child = &m.cols[m.col_kids[c.kid0]]
    st = col_offset(&c.offs, child.length)
    if st != ST_OK:
        return st
    return col_valid(c)


cdef int decimal_le(const uint8_t *p, Py_ssize_t n, uint8_t *out, int w) noexcept nogil:
    """Big-endian two's complement of n bytes -> w bytes little-endian; bytes
    beyond w must be sign extension."""
    cdef uint8_t sign = 0xFF if (n > 0 and p[0] & 0x80) else 0
    cdef Py_ssize_t i
    for i in range(n - w):
        if p[i] != sign:
            return ST_DECIMAL
    if n > w and (p[n - w] & 0x80) != (sign & 0x80):
        return ST_DECIMAL
    memset(out, sign, <size_t>w)
    for i in range(n if n < w else w):
        out[i] = p[n - 1 - i]
    return ST_OK


cdef int duration(Col *c, const uint8_t *p) noexcept nogil:
    """Avro duration (u32 months, days, millis, little-endian) -> Arrow
    month_day_nano (int32 months, int32 days, int64 nanoseconds)."""
    cdef uint32_t months, days, millis
    cdef uint8_t out[16]
    cdef int64_t nanos
    memcpy(&months, p, 4)
    memcpy(&days, p + 4, 4)
    memcpy(&millis, p + 8, 4)
    if months > INT32_MAX or days > INT32_MAX:
        return ST_RANGE
    nanos = <int64_t>millis * 1000000
    memcpy(out, &months, 4)
    memcpy(out + 4, &days, 4)
    memcpy(out + 8, &nanos, 8)
    return col_put(c, out, 16)
