"""Binary and header columns in Arrow layout, over numpy buffers.

    BinaryColumn   offsets int32[n + 1] (int64 past 2 GiB) | data uint8[...]
                   | validity: LSB-first bitmap, bit set = not null (None when
                   the column has no nulls)
    HeadersColumn  offsets int32[n + 1] into one entry per header, whose key is
                   a UTF-8 BinaryColumn (never null) and whose value is a
                   nullable BinaryColumn

``to_arrow()`` wraps the same memory (no copy); pyarrow is imported only then.
"""

from __future__ import annotations

import operator
from typing import Iterator, Sequence

import numpy as np

from kbatch.wire import INT64_MAX
from kbatch._core._take import take_binary
from kbatch.lib.gather import empty

_INT32_LIMIT = (1 << 31) - 1
TAKE_ROLE = 200     # the memory pool's role of a take's value bytes (gather.empty)


def _pack_validity(valid: np.ndarray) -> np.ndarray:
    return np.packbits(valid, bitorder="little")


def as_indices(indices, length: int) -> np.ndarray:
    idx = np.asarray(indices)
    if idx.dtype == bool:
        if idx.shape != (length,):
            raise IndexError(f"boolean mask of length {idx.shape} for {length} rows")
        return np.flatnonzero(idx).astype(np.int64, copy=False)
    idx = idx.astype(np.int64, copy=False).ravel()
    if idx.size and (idx.min() < -length or idx.max() >= length):
        raise IndexError(f"index out of range for {length} rows")
    return np.where(idx < 0, idx + length, idx)


def checked_position(i: int, n: int) -> int:
    """``i`` as a position in ``[0, n)`` (negative counts from the end)."""
    i = int(i)
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"index {i} out of range for {n} values")
    return i


def as_contiguous_range(idx: np.ndarray) -> tuple[int, int] | None:
    """``(start, stop)`` when ``idx`` is ``start, start + 1, ..., stop - 1``."""
    if idx.size == 0:
        return 0, 0
    start = int(idx[0])
    if int(idx[-1]) - start + 1 == idx.size and (idx.size < 2 or np.all(np.diff(idx) == 1)):
        return start, start + idx.size
    return None


def _check_array(name: str, arr, kinds: str) -> None:
    """O(1) checks of a buffer handed to a column: a 1-D numpy array of the
    right kind of dtype (TypeError when not an array, ValueError otherwise)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(arr).__name__}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, not {arr.ndim}-D")
    if arr.dtype.kind not in kinds or (kinds == "u" and arr.dtype.itemsize != 1):
        want = "uint8" if kinds == "u" else "an integer dtype"
        raise ValueError(f"{name} must have {want}, not {arr.dtype}")


def check_offsets(name: str, offsets: np.ndarray, size: int) -> None:
    """O(n): Arrow offsets start at 0 or more, never decrease and end inside
    a buffer of ``size`` values (ValueError otherwise)."""
    if len(offsets) == 0:
        raise ValueError(f"{name} needs at least one entry (n + 1 offsets)")
    if offsets.dtype.kind == "u" and offsets.dtype.itemsize == 8 and offsets.max() > INT64_MAX:
        raise ValueError(f"{name} past the int64 range")
    first, last = int(offsets[0]), int(offsets[-1])
    if first < 0:
        raise ValueError(f"{name} start at {first}, below 0")
    if len(offsets) > 1 and np.any(offsets[1:] < offsets[:-1]):
        i = int(np.flatnonzero(offsets[1:] < offsets[:-1])[0])
        raise ValueError(f"{name} decrease at {i + 1} ({int(offsets[i])} -> {int(offsets[i + 1])})")
    if last > size:
        raise ValueError(f"{name} run past the data: {last} > {size} bytes")


class BinaryColumn:
    """Variable-length binary values (``bytes`` or ``None``) in Arrow layout.

    The constructor checks the buffers' types, dtypes and shapes (O(1));
    ``validate()`` checks their contents (O(n), the writer calls it). The
    offsets are checked once (then remembered) before compiled code or
    pyarrow reads through them: ``take`` and ``to_arrow``.
    """

    __slots__ = ("offsets", "data", "validity", "null_count", "utf8", "_checked")

    def __init__(self, offsets: np.ndarray, data: np.ndarray,
                 validity: np.ndarray | None = None, null_count: int = 0,
                 utf8: bool = False):
        _check_array("offsets", offsets, "iu")
        _check_array("data", data, "u")
        if len(offsets) == 0:
            raise ValueError("offsets need at least one entry (n + 1 offsets)")
        null_count = operator.index(null_count)
        if not 0 <= null_count <= len(offsets) - 1:
            raise ValueError(f"null_count {null_count} outside [0, {len(offsets) - 1}]")
        if null_count:
            if validity is None:
                raise ValueError(f"null_count {null_count} without a validity bitmap")
            _check_array("validity", validity, "u")
            if len(validity) * 8 < len(offsets) - 1:
                raise ValueError(f"validity bitmap of {len(validity)} bytes too short "
                                 f"for {len(offsets) - 1} values")
        self.offsets = offsets
        self.data = data
        self.validity = validity if null_count else None
        self.null_count = null_count
        self.utf8 = bool(utf8)
        self._checked = False

    def _checked_offsets(self) -> "BinaryColumn":
        """The offsets checked against the data (once; ValueError)."""
        if not self._checked:
            check_offsets("offsets", self.offsets, len(self.data))
            self._checked = True
        return self

    def validate(self) -> "BinaryColumn":
        """Check the offsets against the data and the null count against the
        bitmap; ValueError naming the problem. Returns the column."""
        self._checked = False
        self._checked_offsets()
        if self.validity is not None:
            nulls = len(self) - int(np.count_nonzero(self.is_valid()))
            if nulls != self.null_count:
                raise ValueError(f"null_count {self.null_count} but the bitmap has {nulls} nulls")
        return self

    @classmethod
    def from_parts(cls, parts: dict, utf8: bool = False) -> "BinaryColumn":
        return cls(parts["offsets"], parts["data"], parts["validity"],
                   parts["null_count"], utf8)

    @classmethod
    def from_pylist(cls, values: Sequence[bytes | str | None], utf8: bool = False):
        """Build a column from Python values (tests and writers)."""
        enc = [v.encode() if isinstance(v, str) else v for v in values]
        lengths = np.array([0 if v is None else len(v) for v in enc], dtype=np.int64)
        offsets = np.zeros(len(enc) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] <= _INT32_LIMIT:
            offsets = offsets.astype(np.int32)
        data = np.frombuffer(b"".join(v for v in enc if v is not None), dtype=np.uint8)
        valid = np.array([v is not None for v in enc], dtype=bool)
        nulls = int(len(enc) - valid.sum())
        col = cls(offsets, data, _pack_validity(valid) if nulls else None, nulls, utf8)
        col._checked = True
        return col

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def is_valid(self) -> np.ndarray:
        """bool[n]: True where the value is not null."""
        n = len(self)
        if self.validity is None:
            return np.ones(n, dtype=bool)
        return np.unpackbits(self.validity, count=n, bitorder="little").view(bool)

    def is_null(self) -> np.ndarray:
        return ~self.is_valid()

    def lengths(self) -> np.ndarray:
        """Length of every value (0 for nulls)."""
        return np.diff(self.offsets)

    def _valid_at(self, i: int) -> bool:
        return self.validity is None or bool((self.validity[i >> 3] >> (i & 7)) & 1)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(np.arange(*i.indices(len(self)), dtype=np.int64))
        i = checked_position(i, len(self))
        if not self._valid_at(i):
            return None
        raw = self.data[self.offsets[i]:self.offsets[i + 1]].tobytes()
        return raw.decode("utf-8") if self.utf8 else raw

    def __iter__(self) -> Iterator[bytes | str | None]:
        return iter(self.to_pylist())

    def to_pylist(self) -> list:
        blob = self.data.tobytes()
        offs = self.offsets.tolist()
        valid = self.is_valid().tolist()
        if self.utf8:
            return [blob[offs[i]:offs[i + 1]].decode("utf-8") if valid[i] else None
                    for i in range(len(valid))]
        return [blob[offs[i]:offs[i + 1]] if valid[i] else None
                for i in range(len(valid))]

    def __eq__(self, other):
        if not isinstance(other, BinaryColumn):
            return NotImplemented
        return (len(self) == len(other) and self.null_count == other.null_count
                and np.array_equal(self.is_valid(), other.is_valid())
                and np.array_equal(self.lengths(), other.lengths())
                and np.array_equal(self._values_bytes(), other._values_bytes()))

    def _values_bytes(self) -> np.ndarray:
        return self.data[int(self.offsets[0]):int(self.offsets[-1])] if len(self) else self.data[:0]

    def __repr__(self) -> str:
        head = ", ".join(repr(v) for v in self[:3].to_pylist()) if len(self) else ""
        more = ", ..." if len(self) > 3 else ""
        return f"BinaryColumn({len(self)} values, {self.null_count} null: [{head}{more}])"

    def take(self, indices, threads: int = 1) -> "BinaryColumn":
        """The values at ``indices`` (ints or a boolean mask), in that order;
        ``threads``: a large gather is cut into that many runs copied at once
        (``kbatch._core._take``)."""
        return self.take_rows(as_indices(indices, len(self)), threads)

    def take_rows(self, rows: np.ndarray, threads: int = 1) -> "BinaryColumn":
        """``take`` of ``rows``, int64 row numbers in ``[0, len)`` (what
        ``as_indices`` gives; the kernel checks them again)."""
        rng = as_contiguous_range(rows)
        if rng is not None:
            return self._slice(*rng)
        # value bytes from kbatch's memory pool: a take (the table view's)
        # writes into pages an earlier one released instead of fresh ones
        offsets, data, validity, nulls = take_binary(
            self.offsets, self.data, self.validity if self.null_count else None,
            np.ascontiguousarray(rows, np.int64), threads,
            lambda total: empty(total, np.uint8, TAKE_ROLE))
        out = BinaryColumn(offsets, data, validity if nulls else None, nulls, self.utf8)
        out._checked = True
        return out

    def _slice(self, start: int, stop: int) -> "BinaryColumn":
        """Rows [start, stop): data shared, offsets rebased (a small copy)."""
        offs = self.offsets[start:stop + 1]
        base = int(offs[0]) if len(offs) else 0
        data = self.data[base:int(offs[-1])] if len(offs) else self.data[:0]
        offs = (offs - offs.dtype.type(base)).astype(self.offsets.dtype, copy=False)
        validity, nulls = None, 0
        if self.validity is not None and stop > start:
            lo = start >> 3
            bits = np.unpackbits(self.validity[lo:(stop + 7) >> 3], bitorder="little")
            valid = bits[start - lo * 8:stop - lo * 8].view(bool)
            nulls = int(valid.size - valid.sum())
            validity = _pack_validity(valid) if nulls else None
        out = BinaryColumn(offs, data, validity, nulls, self.utf8)
        out._checked = self._checked
        return out

    @staticmethod
    def concat(columns: Sequence["BinaryColumn"], copies=None,
               role: int | None = None) -> "BinaryColumn":
        """One column holding the values of ``columns`` in order
        (``copies``: a ``kbatch.lib.gather.Copies`` that runs the copies,
        which the caller then runs; None: copied here; ``role``: offsets and
        data from kbatch's memory pool, ``kbatch.lib.gather.empty``)."""
        if len(columns) == 1:
            return columns[0]
        utf8 = columns[0].utf8 if columns else False
        sizes = [int(c.offsets[-1] - c.offsets[0]) if len(c) else 0 for c in columns]
        total = sum(sizes)
        dtype = np.int32 if total <= _INT32_LIMIT else np.int64
        n = sum(len(c) for c in columns)
        offsets = empty(n + 1, dtype, role)
        offsets[0] = 0
        data = empty(total, np.uint8, None if role is None else role + 1)
        row = pos = 0
        for col, size in zip(columns, sizes):
            m = len(col)
            if m == 0:
                continue
            base = int(col.offsets[0])
            if copies is None:
                data[pos:pos + size] = col.data[base:base + size]
                offsets[row + 1:row + m + 1] = col.offsets[1:].astype(np.int64) - base + pos
            else:
                copies.copy(data, pos, col.data[base:base + size])
                copies.shifted(offsets, row + 1, col.offsets[1:], pos - base)
            row += m
            pos += size
        nulls = sum(c.null_count for c in columns)
        validity = None
        if nulls:
            validity = _pack_validity(np.concatenate([c.is_valid() for c in columns]))
        out = BinaryColumn(offsets, data, validity, nulls, utf8)
        out._checked = all(c._checked for c in columns)
        return out

    def to_arrow(self):
        """A ``pyarrow`` binary/string array over the same buffers."""
        import pyarrow as pa

        self._checked_offsets()     # pyarrow trusts them
        large = self.offsets.dtype == np.int64
        if self.utf8:
            typ = pa.large_string() if large else pa.string()
        else:
            typ = pa.large_binary() if large else pa.binary()
        validity = pa.py_buffer(self.validity) if self.validity is not None else None
        return pa.Array.from_buffers(
            typ, len(self),
            [validity, pa.py_buffer(self.offsets), pa.py_buffer(self.data)],
            null_count=self.null_count)


class HeadersColumn:
    """Per-record header lists: ``headers[i]`` is ``[(key, value | None), ...]``."""

    __slots__ = ("offsets", "keys", "values", "_checked")

    def __init__(self, offsets: np.ndarray, keys: BinaryColumn, values: BinaryColumn):
        _check_array("headers offsets", offsets, "iu")
        if len(offsets) == 0:
            raise ValueError("headers offsets need at least one entry (n + 1 offsets)")
        for name, col in (("keys", keys), ("values", values)):
            if not isinstance(col, BinaryColumn):
                raise TypeError(f"headers {name} must be a BinaryColumn, not {type(col).__name__}")
        self.offsets = offsets
        self.keys = keys
        self.values = values
        self._checked = False

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def validate(self) -> "HeadersColumn":
        """Check offsets, keys (UTF-8, never null) and values; ValueError
        naming the problem. Returns the column."""
        self.keys.validate()
        self.values.validate()
        check_offsets("headers offsets", self.offsets, min(len(self.keys), len(self.values)))
        lo, hi = int(self.offsets[0]), int(self.offsets[-1])
        if hi > lo:
            if self.keys.validity is not None and not self.keys.is_valid()[lo:hi].all():
                raise ValueError("a header key is null")
            koffs = self.keys.offsets[lo:hi + 1]
            blob = self.keys.data[int(koffs[0]):int(koffs[-1])]
            try:
                blob.tobytes().decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"header keys are not UTF-8: {e}") from None
            # valid as a whole: a key boundary inside a character is the only
            # way a key can still be invalid (it then starts on a continuation)
            starts = koffs[:-1].astype(np.int64) - int(koffs[0])
            inner = starts[(starts < len(blob)) & (np.diff(koffs) > 0)]
            if inner.size and np.any((blob[inner] & 0xC0) == 0x80):
                raise ValueError("a header key is not UTF-8 (it splits a character)")
        return self

    def counts(self) -> np.ndarray:
        """Number of headers of every record."""
        return np.diff(self.offsets)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(np.arange(*i.indices(len(self)), dtype=np.int64))
        i = checked_position(i, len(self))
        return [(self.keys[j], self.values[j])
                for j in range(int(self.offsets[i]), int(self.offsets[i + 1]))]

    def to_pylist(self) -> list:
        keys = self.keys.to_pylist()
        values = self.values.to_pylist()
        offs = self.offsets.tolist()
        return [list(zip(keys[offs[i]:offs[i + 1]], values[offs[i]:offs[i + 1]]))
                for i in range(len(offs) - 1)]

    def __iter__(self):
        return iter(self.to_pylist())

    def __eq__(self, other):
        if not isinstance(other, HeadersColumn):
            return NotImplemented
        return (np.array_equal(self.counts(), other.counts())
                and self._entries(self) == self._entries(other))

    @staticmethod
    def _entries(col):
        lo, hi = int(col.offsets[0]), int(col.offsets[-1])
        return col.keys[lo:hi], col.values[lo:hi]

    def __repr__(self) -> str:
        return f"HeadersColumn({len(self)} records, {int(self.offsets[-1] - self.offsets[0])} headers)"

    def take(self, indices) -> "HeadersColumn":
        return self.take_rows(as_indices(indices, len(self)))

    def take_rows(self, idx: np.ndarray) -> "HeadersColumn":
        """``take`` of ``idx``, int64 row numbers in ``[0, len)`` (as
        ``as_indices`` gives them)."""
        if len(self) and self.offsets[-1] == self.offsets[0]:    # no headers at all
            return HeadersColumn(np.zeros(idx.size + 1, np.int32), self.keys[:0],
                                 self.values[:0])
        rng = as_contiguous_range(idx)
        if rng is not None:
            start, stop = rng
            offs = self.offsets[start:stop + 1]
            lo = int(offs[0]) if len(offs) else 0
            hi = int(offs[-1]) if len(offs) else 0
            entries = np.arange(lo, hi, dtype=np.int64)
            return HeadersColumn((offs - lo).astype(np.int32), self.keys.take(entries),
                                 self.values.take(entries))
        counts = self.counts()[idx]
        offsets = np.zeros(idx.size + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        starts = self.offsets[idx].astype(np.int64)
        # entry indices of every selected record, in order
        entries = (np.repeat(starts - offsets[:-1], counts) + np.arange(int(offsets[-1]))
                   if offsets[-1] else np.empty(0, np.int64))
        return HeadersColumn(offsets.astype(np.int32), self.keys.take(entries),
                             self.values.take(entries))

    @staticmethod
    def concat(columns: Sequence["HeadersColumn"], copies=None,
               role: int | None = None) -> "HeadersColumn":
        """One column holding the header lists of ``columns`` in order
        (``copies`` and ``role`` as for ``BinaryColumn.concat``: offsets
        ``role``, keys ``role + 1``/``+ 2``, values ``role + 3``/``+ 4``)."""
        if len(columns) == 1:
            return columns[0]
        parts = [c.take(np.arange(len(c))) if len(c) and c.offsets[0] != 0 else c
                 for c in columns]
        n = sum(len(c) for c in parts)
        total = sum(int(c.offsets[-1]) for c in parts if len(c))
        if total > _INT32_LIMIT:
            raise ValueError(f"cannot join {total} headers into one column: Arrow list "
                             f"offsets hold at most {_INT32_LIMIT}")
        offsets = empty(n + 1, np.int32, role)
        offsets[0] = 0
        row = base = 0
        for c in parts:
            m = len(c)
            if m:
                if copies is None:
                    np.add(c.offsets[1:], base, out=offsets[row + 1:row + m + 1],
                           casting="unsafe")
                else:
                    copies.shifted(offsets, row + 1, c.offsets[1:], base)
                base += int(c.offsets[-1])
            row += m
        roles = (None, None) if role is None else (role + 1, role + 3)
        return HeadersColumn(offsets,
                             BinaryColumn.concat([c.keys for c in parts], copies, roles[0]),
                             BinaryColumn.concat([c.values for c in parts], copies, roles[1]))

    def to_arrow(self):
        """``list<struct<key: string, value: binary>>`` over the same buffers."""
        import pyarrow as pa

        if not self._checked:   # pyarrow trusts them
            check_offsets("headers offsets", self.offsets, min(len(self.keys), len(self.values)))
            self._checked = True
        lo, hi = int(self.offsets[0]), int(self.offsets[-1])
        keys, values = self.keys, self.values
        if lo != 0 or hi != len(keys):
            entries = np.arange(lo, hi, dtype=np.int64)
            keys, values = keys.take(entries), values.take(entries)
        offsets = self.offsets - self.offsets.dtype.type(lo)
        struct = pa.StructArray.from_arrays(
            [keys.to_arrow(), values.to_arrow()], names=["key", "value"])
        return pa.Array.from_buffers(
            pa.list_(struct.type), len(self),
            [None, pa.py_buffer(offsets.astype(np.int32, copy=False))],
            children=[struct])


class MissingColumn:
    """A per-record column a projected read (``columns=[...]``) left out.

    It has a length (so ``Records`` stays consistent) and follows ``take``,
    slicing and ``concat``; reading a value raises ``ColumnNotReadError``
    naming the column and the projection. It holds no memory.
    """

    __slots__ = ("name", "length", "projection", "unread_rows")

    def __init__(self, name: str, length: int, projection: tuple = (),
                 unread_rows: int | None = None):
        self.name = name
        self.length = int(length)
        self.projection = tuple(projection)
        # headers only: how many of these records had headers that were not
        # read (0: none had any); None: not known (a part of a read that had some)
        self.unread_rows = unread_rows

    def __len__(self) -> int:
        return self.length

    def _refuse(self):
        from kbatch.errors import ColumnNotReadError

        asked = ", ".join(self.projection) if self.projection else "a projection"
        raise ColumnNotReadError(
            f"column {self.name!r} was not read (columns=[{asked}]): "
            f"read again with {self.name!r} in columns")

    def __getitem__(self, i):
        if isinstance(i, slice):
            return MissingColumn(self.name, len(range(*i.indices(self.length))),
                                 self.projection, self._part_unread())
        self._refuse()

    def to_pylist(self):
        self._refuse()

    def to_arrow(self):
        self._refuse()

    def take(self, indices) -> "MissingColumn":
        return MissingColumn(self.name, len(as_indices(indices, self.length)), self.projection,
                             self._part_unread())

    def _part_unread(self) -> int | None:
        """``unread_rows`` of some of these records: 0 stays 0, else unknown."""
        return 0 if self.unread_rows == 0 else None

    @staticmethod
    def concat(parts) -> "MissingColumn":
        parts = list(parts)
        unread = [p.unread_rows for p in parts]
        return MissingColumn(parts[0].name, sum(len(p) for p in parts), parts[0].projection,
                             None if None in unread else sum(unread))

    @property
    def nbytes(self) -> int:
        return 0

    def __eq__(self, other):
        return (isinstance(other, MissingColumn) and other.name == self.name
                and other.length == self.length)

    def __repr__(self) -> str:
        return f"MissingColumn({self.name!r}, {self.length})"

