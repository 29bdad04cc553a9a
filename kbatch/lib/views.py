"""zero_copy key/value columns: Arrow binary views over the source's own bytes.

    ViewColumn   views uint8[16 n] | validity bitmap (None: no nulls)
                 | buffers: the data buffers the views point into

    view         length int32 LE | value, zero padded             length <= 12
                 length int32 LE | prefix 4 B | buffer int32 | offset int32

The data buffers are windows of the source (a memory-mapped segment, or the
caller's bytes-like object) for plain batches, and the decompressed records
of compressed batches (``_core/_viewbufs.pxd``): no value byte is copied, and
a value of 12 bytes or less lives in its view. ``to_arrow()`` is a
``pa.binary_view()`` array over the same memory.

Lifetime: a column keeps its buffers alive, and a window keeps the mapping
(the file stays mapped until the last column pointing into it goes). The
one place a zero-copy read obtains and holds its source is ``SourceHold``;
every read of the bytes (``value_at``, ``to_pylist``) goes through
``ViewColumn._buffers_checked()``, which asks each hold whether its source
is still valid.
"""

from __future__ import annotations

import mmap
import struct
from typing import Iterator, Sequence

import numpy as np

from kbatch._core._kernels import views_from_binary, views_to_pylist
from kbatch._core._mapguard import try_guard
from kbatch._core._take import take_views
from kbatch.lib.columns import (BinaryColumn, as_contiguous_range, as_indices,
                                checked_position)

VIEW_BYTES = 16
INLINE = 12
_VIEW = struct.Struct("<iiii")


class SourceHold:
    """The source of a zero-copy read: where its windows come from.

    ``obj`` is what the bytes belong to (the ``mmap`` of a segment file, or
    the caller's buffer), ``path`` the file (None for a buffer). Windows are
    taken while the read's view of the source is open; each one keeps ``obj``
    exported, so an ``mmap`` is unmapped only when the last window goes.

    A mapped file is registered with kbatch's SIGBUS guard
    (``_core._mapguard``): if the file is truncated while a result points
    into it, touching a lost page reads zeros instead of killing the
    process, and ``check()`` raises ``MappingInvalidatedError`` from then on.
    ``guarded`` is False when the guard's table is full: the read must then
    copy (``decode_chunks`` falls back to copy mode).
    """

    __slots__ = ("obj", "path", "guard", "guarded", "__weakref__")

    def __init__(self, view: memoryview, path=None):
        self.obj = view.obj if isinstance(view, memoryview) else view
        self.path = None if path is None else str(path)
        self.guard = None
        self.guarded = True
        if isinstance(self.obj, mmap.mmap):
            self.guard = try_guard(self.obj, path=self.path)
            self.guarded = self.guard is not None

    @staticmethod
    def windows(view: memoryview, buffers: list) -> list:
        """The decoder's buffer list with every ``(start, stop)`` source
        window replaced by a view of those bytes of ``view`` (no copy)."""
        return [view[b[0]:b[1]] if isinstance(b, tuple) else b for b in buffers]

    def check(self) -> None:
        """Raise ``MappingInvalidatedError`` when the mapped file lost bytes
        under the result (a plain buffer is always valid)."""
        if self.guard is not None:
            self.guard.check()

    def revalidate(self) -> None:
        """``check()`` after a stat of the file: a file that shrank is found
        now (its lost pages zeroed up front) rather than at the next fault."""
        if self.guard is not None:
            self.guard.revalidate()
            self.guard.check()


def _bits(valid: np.ndarray) -> np.ndarray:
    return np.packbits(valid, bitorder="little")


class ViewColumn:
    """Binary values (``bytes`` or ``None``) as Arrow binary views.

    Behaves as ``BinaryColumn``: ``len``, ``col[i]``, slicing, ``take``,
    ``concat``, ``to_pylist``, ``to_arrow`` (``binary_view``), ``==``.
    """

    __slots__ = ("views", "validity", "null_count", "buffers", "holds", "_value_bytes")
    utf8 = False

    def __init__(self, views: np.ndarray, validity: np.ndarray | None, null_count: int,
                 buffers: Sequence, holds: Sequence[SourceHold] = ()):
        if not isinstance(views, np.ndarray) or views.dtype != np.uint8 or views.ndim != 1:
            raise TypeError("views must be a one-dimensional uint8 numpy array")
        if len(views) % VIEW_BYTES:
            raise ValueError(f"views of {len(views)} bytes: not a multiple of {VIEW_BYTES}")
        n = len(views) // VIEW_BYTES
        if not 0 <= null_count <= n:
            raise ValueError(f"null_count {null_count} outside [0, {n}]")
        if null_count and (validity is None or len(validity) * 8 < n):
            raise ValueError("null_count without a long enough validity bitmap")
        self.views = views
        self.validity = validity if null_count else None
        self.null_count = int(null_count)
        self.buffers = list(buffers)
        self.holds = tuple(holds)
        self._value_bytes = None    # sum of the lengths, when known

    @classmethod
    def from_parts(cls, parts: dict, buffers: Sequence,
                   holds: Sequence[SourceHold] = ()) -> "ViewColumn":
        """Wrap what the decoder's ``take()`` gave for one column."""
        col = cls(parts["views"], parts["validity"], parts["null_count"], buffers, holds)
        col._value_bytes = parts.get("value_bytes")
        return col

    @classmethod
    def from_binary(cls, col: BinaryColumn) -> "ViewColumn":
        """Views over a ``BinaryColumn``'s data buffer (its bytes not copied)."""
        col._checked_offsets()
        views = np.empty(len(col) * VIEW_BYTES, np.uint8)
        views_from_binary(col.offsets, col.data, views, 0)
        return cls(views, col.validity, col.null_count, [col.data])

    # --- reading values: all through _buffers_checked ------------------

    def _buffers_checked(self) -> list:
        """The data buffers, once every source they come from is still valid
        (the one gate in front of reads of the source's bytes)."""
        for hold in self.holds:
            hold.check()
        return self.buffers

    def value_at(self, i: int) -> bytes | None:
        """Value ``i`` (already a position in ``[0, n)``)."""
        if not self._valid_at(i):
            return None
        length, _, buf, off = _VIEW.unpack_from(self.views, i * VIEW_BYTES)
        if length <= INLINE:
            start = i * VIEW_BYTES + 4
            return self.views[start:start + length].tobytes()
        data = memoryview(self._buffers_checked()[buf]).cast("B")
        if off < 0 or length > len(data) - off:
            raise ValueError(f"view {i} points outside its data buffer")
        value = bytes(data[off:off + length])
        self._check_after()
        return value

    def to_pylist(self) -> list:
        for hold in self.holds:
            hold.revalidate()
        values = views_to_pylist(self.views, self.validity, self._buffers_checked())
        self._check_after()
        return values

    def _check_after(self) -> None:
        """A read that touched a page lost while it ran got zeros: raise
        rather than return them (one atomic load per hold)."""
        for hold in self.holds:
            hold.check()

    # --- the BinaryColumn interface -----------------------------------

    def __len__(self) -> int:
        return len(self.views) // VIEW_BYTES

    def _valid_at(self, i: int) -> bool:
        return self.validity is None or bool((self.validity[i >> 3] >> (i & 7)) & 1)

    def is_valid(self) -> np.ndarray:
        n = len(self)
        if self.validity is None:
            return np.ones(n, dtype=bool)
        return np.unpackbits(self.validity, count=n, bitorder="little").view(bool)

    def is_null(self) -> np.ndarray:
        return ~self.is_valid()

    def lengths(self) -> np.ndarray:
        """Length of every value (0 for nulls)."""
        return self.views.view(np.int32)[0::4].copy()

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(np.arange(*i.indices(len(self)), dtype=np.int64))
        return self.value_at(checked_position(i, len(self)))

    def __iter__(self) -> Iterator[bytes | None]:
        return iter(self.to_pylist())

    def __eq__(self, other):
        if not isinstance(other, (ViewColumn, BinaryColumn)):
            return NotImplemented
        return (len(self) == len(other) and self.null_count == other.null_count
                and np.array_equal(self.is_valid(), other.is_valid())
                and self.to_pylist() == other.to_pylist())

    __hash__ = None

    def __repr__(self) -> str:
        head = ", ".join(repr(v) for v in self[:3].to_pylist()) if len(self) else ""
        more = ", ..." if len(self) > 3 else ""
        return (f"ViewColumn({len(self)} values, {self.null_count} null, "
                f"{len(self.buffers)} buffers: [{head}{more}])")

    @property
    def nbytes(self) -> int:
        """Bytes of its views and bitmap plus the bytes of the values it
        points to (what a copy would hold: read limits count the same)."""
        if self._value_bytes is None:
            self._value_bytes = int(self.views.view(np.int32)[0::4].sum(dtype=np.int64))
        return (self.views.nbytes + self._value_bytes
                + (self.validity.nbytes if self.validity is not None else 0))

    def _with(self, views: np.ndarray, valid: np.ndarray | None) -> "ViewColumn":
        nulls = 0 if valid is None else int(valid.size - np.count_nonzero(valid))
        return ViewColumn(views, _bits(valid) if nulls else None, nulls, self.buffers,
                          self.holds)

    def take(self, indices) -> "ViewColumn":
        """The values at ``indices`` (ints or a boolean mask): views
        gathered, the data buffers shared."""
        idx = as_indices(indices, len(self))
        rng = as_contiguous_range(idx)
        rows = self.views.view(np.int64).reshape(-1, 2)
        if rng is not None:
            picked = rows[rng[0]:rng[1]]
        else:
            picked = np.take(rows, idx, axis=0)     # a third of rows[idx]'s time
        valid = self.is_valid()[idx] if self.validity is not None else None
        return self._with(picked.reshape(-1).view(np.uint8), valid)

    @staticmethod
    def concat(columns: Sequence) -> "ViewColumn":
        """One column of ``columns`` (views or binary) in order: views copied
        with their buffer numbers shifted, data buffers shared."""
        cols = [c if isinstance(c, ViewColumn) else ViewColumn.from_binary(c) for c in columns]
        if len(cols) == 1:
            return cols[0]
        parts, buffers, holds = [], [], []
        for c in cols:
            v = c.views.copy()
            if buffers:
                v32 = v.view(np.int32).reshape(-1, 4)
                v32[v32[:, 0] > INLINE, 2] += len(buffers)
            parts.append(v)
            buffers.extend(c.buffers)
            for hold in c.holds:
                if hold not in holds:
                    holds.append(hold)
        nulls = sum(c.null_count for c in cols)
        validity = _bits(np.concatenate([c.is_valid() for c in cols])) if nulls else None
        views = np.concatenate(parts) if parts else np.empty(0, np.uint8)
        return ViewColumn(views, validity, nulls, buffers, holds)

    def to_arrow(self):
        """A ``pyarrow`` ``binary_view`` array over the same memory."""
        import pyarrow as pa

        for hold in self.holds:
            hold.revalidate()
        buffers = self._buffers_checked()
        validity = pa.py_buffer(self.validity) if self.validity is not None else None
        return pa.Array.from_buffers(
            pa.binary_view(), len(self),
            [validity, pa.py_buffer(self.views), *(self._arrow_buffer(b) for b in buffers)],
            null_count=self.null_count)

    def _arrow_buffer(self, buf):
        """``buf`` as a pyarrow buffer that also keeps this column's source
        holds (their SIGBUS guards) alive: an exported array outliving the
        Records still reads zeros, not a fatal signal, after a truncation."""
        import pyarrow as pa

        plain = pa.py_buffer(buf)
        if not self.holds:
            return plain
        return pa.foreign_buffer(plain.address, plain.size, base=(plain, self.holds))

    def to_binary(self, threads: int = 1) -> BinaryColumn:
        """The same values copied into an offsets/data ``BinaryColumn``
        (``kbatch._core._take.take_views``: every view checked to lie in its
        buffer first; ``threads``: the copy cut into that many runs)."""
        for hold in self.holds:
            hold.revalidate()
        offsets, data, validity, nulls = take_views(
            self.views, self._buffers_checked(), self.validity,
            np.arange(len(self), dtype=np.int64), threads, lambda n: np.empty(n, np.uint8))
        self._check_after()
        return BinaryColumn(offsets, data, validity if nulls else None, nulls)
