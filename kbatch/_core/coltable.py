"""The fixed-width per-record columns, listed once.

Every decoded record (data and control alike) puts one value of a C integer
type into each column below. This table is where such a column is declared;
everything else is derived from it:

- ``_coltable.pxd``, generated from this file (``setup.py`` runs
  ``write_pxd()`` before every build; ``python kbatch/_core/coltable.py``
  does it by hand; ``tests/test_coltable.py`` fails when it is stale): per
  column an index ``COL_<NAME>`` into ``RecordColumns.fixed``, its C type
  ``col_<name>_t``, width, numpy dtype and memory-pool role, and
  ``FIXED_ROW_BYTES``, the bytes a record takes in these columns;
- ``_columns.pyx`` reserves, rolls back, frees and hands over the columns
  (``BatchDecoder.take()["data"][name]``, a numpy array) in loops over it,
  and ``ROW_FIXED_BYTES`` (``_columns.pxd``: chunk sizes, read limits)
  counts them;
- ``kbatch.lib.records.RECORD_COLUMNS`` takes its fixed entries, with their
  Arrow types, from here, and so ``columns=`` (``lib/segment.PROJECTABLE``)
  accepts every one with an Arrow type.

What a table cannot say is the value: each record loop writes every column
through a typed pointer it takes once per batch, ``(<col_<name>_t *>
cols.fixed[COL_<NAME>].data) + n``. A new column is one row here, its store
in ``_records.pyx`` (magic 2) and its store in ``_legacy.pyx`` (magic 0/1).
"""

from __future__ import annotations

import pathlib
from typing import NamedTuple

# C type -> (bytes, numpy dtype)
C_TYPES = {
    "int8_t": (1, "int8"), "int16_t": (2, "int16"), "int32_t": (4, "int32"),
    "int64_t": (8, "int64"), "uint8_t": (1, "uint8"), "uint16_t": (2, "uint16"),
    "uint32_t": (4, "uint32"), "uint64_t": (8, "uint64"),
}

# Memory-pool roles the other column buffers use (``_columns.pyx``: header
# offsets 5, key/value/header key/header value builders 10-43;
# ``_viewbufs.pxd``: arenas 60; ``lib/gather.py``: joins from 100). A fixed
# column's role lies in 1..9 and is its own, so a chunk's buffers are matched
# with the same column's released ones.
FIXED_ROLES = range(1, 10)
HEADERS_ROLE = 5


class FixedColumn(NamedTuple):
    name: str            # Records attribute and key of the decoder's chunk
    ctype: str           # a key of C_TYPES
    role: int            # memory-pool role (FIXED_ROLES)
    arrow: str | None    # Arrow type in to_arrow(): the dtype's name (int64: pa.int64()),
                         # "timestamp_ms" (an int64_t; -1 is null), None: none
    doc: str

    @property
    def width(self) -> int:
        return C_TYPES[self.ctype][0]

    @property
    def dtype(self) -> str:
        return C_TYPES[self.ctype][1]


FIXED_COLUMNS = (
    FixedColumn("offset", "int64_t", 1, "int64", "baseOffset + offsetDelta"),
    FixedColumn("timestamp", "int64_t", 2, "timestamp_ms",
                "ms since the epoch (-1: none, null in Arrow)"),
    FixedColumn("timestamp_type", "int8_t", 3, "int8",
                "-1 none (magic 0), 0 CreateTime, 1 LogAppendTime"),
    FixedColumn("batch", "int32_t", 4, None, "row of the batch table"),
)


def check(columns=FIXED_COLUMNS) -> None:
    """Names unique identifiers, known C types, own roles in FIXED_ROLES,
    Arrow types to_arrow() knows."""
    names = [c.name for c in columns]
    roles = [c.role for c in columns]
    if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
        raise ValueError(f"fixed column names must be unique identifiers: {names}")
    for c in columns:
        if c.ctype not in C_TYPES:
            raise ValueError(f"{c.name}: C type {c.ctype!r} is not one of {list(C_TYPES)}")
        if c.role not in FIXED_ROLES or c.role == HEADERS_ROLE:
            raise ValueError(f"{c.name}: pool role {c.role} is not in 1..9 less {HEADERS_ROLE}")
        if c.arrow not in (None, c.dtype) and (c.arrow, c.ctype) != ("timestamp_ms", "int64_t"):
            raise ValueError(f"{c.name}: Arrow type {c.arrow!r} is not None, {c.dtype!r} "
                             f"or (for an int64_t) 'timestamp_ms'")
    if len(set(roles)) != len(roles):
        raise ValueError(f"fixed column roles must differ: {roles}")


PXD = pathlib.Path(__file__).with_name("_coltable.pxd")


def pxd_text(columns=FIXED_COLUMNS) -> str:
    """The text of ``_coltable.pxd`` for ``columns``."""
    check(columns)
    n = len(columns)
    row_bytes = sum(c.width for c in columns)

    def c_list(values) -> str:
        return "{" + ", ".join(values) + "}"

    table = "\n".join(f"    {k:<5}  {c.name:<16} {c.ctype:<9} {c.width:<5}  {c.dtype:<7} "
                      f"{c.role:<4}  {c.doc}" for k, c in enumerate(columns))
    enum = "\n".join(f"    COL_{c.name.upper()} = {k}" for k, c in enumerate(columns))
    types = "\n".join(f"ctypedef {c.ctype} col_{c.name}_t" for c in columns)
    adds = "\n".join(f"        (fixed)[{k}].len += (rows) * {c.width}; \\\\" for k, c in enumerate(columns))
    ctypes = sorted({c.ctype for c in columns}, key=lambda t: (t[0] == "u", C_TYPES[t][0]))
    return f'''\
# cython: language_level=3
# Generated from coltable.py by setup.py (or python kbatch/_core/coltable.py): do not edit.
"""The fixed-width per-record columns: ``RecordColumns.fixed[COL_<NAME>]``.

    index  column           C type    bytes  numpy   role  value
{table}

    a record takes FIXED_ROW_BYTES = {row_bytes} bytes in them

The record loops write each column through a ``col_<name>_t *`` taken once
per batch; ``_columns.pyx`` handles them all in loops over ``N_FIXED``.
"""

from libc.stdint cimport {", ".join(ctypes)}


cdef enum:
{enum}
    N_FIXED = {n}
    FIXED_ROW_BYTES = {row_bytes}


{types}


cdef extern from *:
    """
    static inline Py_ssize_t kb_fixed_width(int k) {{
        static const Py_ssize_t v[{n}] = {c_list(str(c.width) for c in columns)};
        return v[k];
    }}
    static inline int kb_fixed_role(int k) {{
        static const int v[{n}] = {c_list(str(c.role) for c in columns)};
        return v[k];
    }}
    static inline const char *kb_fixed_name(int k) {{
        static const char *const v[{n}] = {c_list(f'"{c.name}"' for c in columns)};
        return v[k];
    }}
    static inline const char *kb_fixed_ctype(int k) {{
        static const char *const v[{n}] = {c_list(f'"{c.ctype}"' for c in columns)};
        return v[k];
    }}
    static inline const char *kb_fixed_dtype(int k) {{
        static const char *const v[{n}] = {c_list(f'"{c.dtype}"' for c in columns)};
        return v[k];
    }}
    /* ``rows`` more records in the fixed columns ``fixed[N_FIXED]`` (GrowBufs):
       one add per column, written out (a loop over the widths, unrolled
       late by the compiler, made it allocate registers worse in the
       per-record legacy append) */
    #define KB_FIXED_ADD_ROWS(fixed, rows) do {{ \\\\
{adds}
    }} while (0)
    """
    Py_ssize_t fixed_width "kb_fixed_width"(int k) noexcept nogil
    int fixed_role "kb_fixed_role"(int k) noexcept nogil
    const char *fixed_name "kb_fixed_name"(int k) noexcept nogil
    const char *fixed_ctype "kb_fixed_ctype"(int k) noexcept nogil
    const char *fixed_dtype "kb_fixed_dtype"(int k) noexcept nogil
'''


def write_pxd(path: pathlib.Path = PXD) -> bool:
    """Rewrite ``_coltable.pxd`` when it differs (its time stamp otherwise
    stays, so nothing rebuilds); True when it was written."""
    text = pxd_text()
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    return True


if __name__ == "__main__":
    print(f"{PXD}: {'written' if write_pxd() else 'up to date'}")
