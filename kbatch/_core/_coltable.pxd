# cython: language_level=3
# Generated from coltable.py by setup.py (or python kbatch/_core/coltable.py): do not edit.
"""The fixed-width per-record columns: ``RecordColumns.fixed[COL_<NAME>]``.

    index  column           C type    bytes  numpy   role  value
    0      offset           int64_t   8      int64   1     baseOffset + offsetDelta
    1      timestamp        int64_t   8      int64   2     ms since the epoch (-1: none, null in Arrow)
    2      timestamp_type   int8_t    1      int8    3     -1 none (magic 0), 0 CreateTime, 1 LogAppendTime
    3      batch            int32_t   4      int32   4     row of the batch table

    a record takes FIXED_ROW_BYTES = 21 bytes in them

The record loops write each column through a ``col_<name>_t *`` taken once
per batch; ``_columns.pyx`` handles them all in loops over ``N_FIXED``.
"""

from libc.stdint cimport int8_t, int32_t, int64_t


cdef enum:
    COL_OFFSET = 0
    COL_TIMESTAMP = 1
    COL_TIMESTAMP_TYPE = 2
    COL_BATCH = 3
    N_FIXED = 4
    FIXED_ROW_BYTES = 21


ctypedef int64_t col_offset_t
ctypedef int64_t col_timestamp_t
ctypedef int8_t col_timestamp_type_t
ctypedef int32_t col_batch_t


cdef extern from *:
    """
    static inline Py_ssize_t kb_fixed_width(int k) {
        static const Py_ssize_t v[4] = {8, 8, 1, 4};
        return v[k];
    }
    static inline int kb_fixed_role(int k) {
        static const int v[4] = {1, 2, 3, 4};
        return v[k];
    }
    static inline const char *kb_fixed_name(int k) {
        static const char *const v[4] = {"offset", "timestamp", "timestamp_type", "batch"};
        return v[k];
    }
    static inline const char *kb_fixed_ctype(int k) {
        static const char *const v[4] = {"int64_t", "int64_t", "int8_t", "int32_t"};
        return v[k];
    }
    static inline const char *kb_fixed_dtype(int k) {
        static const char *const v[4] = {"int64", "int64", "int8", "int32"};
        return v[k];
    }
    /* ``rows`` more records in the fixed columns ``fixed[N_FIXED]`` (GrowBufs):
       one add per column, written out (a loop over the widths, unrolled
       late by the compiler, made it allocate registers worse in the
       per-record legacy append) */
    #define KB_FIXED_ADD_ROWS(fixed, rows) do { \\
        (fixed)[0].len += (rows) * 8; \\
        (fixed)[1].len += (rows) * 8; \\
        (fixed)[2].len += (rows) * 1; \\
        (fixed)[3].len += (rows) * 4; \\
    } while (0)
    """
    Py_ssize_t fixed_width "kb_fixed_width"(int k) noexcept nogil
    int fixed_role "kb_fixed_role"(int k) noexcept nogil
    const char *fixed_name "kb_fixed_name"(int k) noexcept nogil
    const char *fixed_ctype "kb_fixed_ctype"(int k) noexcept nogil
    const char *fixed_dtype "kb_fixed_dtype"(int k) noexcept nogil
