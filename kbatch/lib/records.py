"""``Records``: what every kbatch read returns.

    Records (n data records, in file order)
      the fixed-width columns of kbatch/_core/coltable.py, a numpy array each:
        offset int64[n] | timestamp int64[n] (-1: none) | timestamp_type int8[n]
        | batch int32[n] (row of ``batches``)
      key, value: BinaryColumn (zero_copy: ViewColumn) | headers: HeadersColumn
      batches: BatchTable (one row per batch, data and control batches alike)
      control: ControlRecords (never mixed into the data columns)
      end: SegmentEnd (where valid data ends) | sources: file of each batch
      skipped: SkippedRange per damaged byte range an on_corrupt="skip" read passed over
      last_stable_offset: the LSO of a read_committed read (None otherwise)

Everything is numpy; ``to_arrow()`` hands the same buffers to pyarrow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from kbatch._core.coltable import FIXED_COLUMNS
from kbatch.lib import decoded as decoded_columns
from kbatch.lib.decoder import empty_chunk
from kbatch.lib.gather import JOIN_ROLE, Copies, concat_fixed
from kbatch.lib.columns import (BinaryColumn, HeadersColumn, MissingColumn, as_indices,
                                checked_position, as_contiguous_range)
from kbatch.lib.views import ViewColumn
from kbatch.errors import CorruptRecordError
from kbatch.wire import CONTROL_TYPE_NAMES

BATCH_COLUMNS = (
    "base_offset", "last_offset", "position", "size", "magic", "codec",
    "timestamp_type", "is_transactional", "is_control", "partition_leader_epoch",
    "producer_id", "producer_epoch", "base_sequence", "base_timestamp",
    "max_timestamp", "records_count", "crc", "crc_valid", "attributes",
    "has_delete_horizon", "source",
)

CONTROL_TYPES = CONTROL_TYPE_NAMES   # kept for callers of the old name


@dataclass(frozen=True)
class SegmentEnd:
    """Where the valid data of a source ends.

    ``reason``: None (it ends at a batch boundary), ``"truncated"`` (the last
    batch runs past the end), ``"zero_padding"`` (zeros follow, as in a
    preallocated segment) or ``"corrupt"`` (a corrupt batch, read with
    ``on_corrupt="stop"``; ``error`` says what was wrong).
    """

    valid_bytes: int
    trailing_bytes: int
    reason: str | None = None
    error: CorruptRecordError | None = None


class SkippedRange(NamedTuple):
    """Bytes ``[start, stop)`` of ``path`` that an ``on_corrupt="skip"`` read
    passed over: no record in them is returned.

    ``reason``: "corrupt" (a batch failed its checks; ``error`` says how),
    "truncated" (a batch length runs past the file, or, in a segment that
    is not the last of its partition, the file ends inside a batch) or
    "zero_padding" (zeros where a segment that is not the last one should
    end). ``offset_before``: the last offset read before the range (None:
    none in this file); ``offset_after``: the base offset of the first batch
    read after it in this file (None: the file ends there).
    ``pandas.DataFrame(records.skipped)`` makes the table.
    """

    path: str | None
    start: int
    stop: int
    reason: str
    offset_before: int | None
    offset_after: int | None
    error: str | None


def optional_module(module: str, extra: str, what: str):
    """Import an optional dependency; without it, an ImportError that says
    which extra brings it (``pip install 'kbatch-kafka[arrow]'``)."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{what} needs {module}, which is not installed: "
                          f"pip install 'kbatch-kafka[{extra}]' ({exc})") from exc


class Record(NamedTuple):
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list


class ControlRecord(NamedTuple):
    offset: int
    timestamp: int
    producer_id: int
    producer_epoch: int
    type: int
    type_name: str
    version: int
    coordinator_epoch: int
    key: bytes | None
    value: bytes | None


def _take_columns(columns: dict, idx: np.ndarray) -> dict:
    rng = as_contiguous_range(idx)
    if rng is not None:
        return {k: v[rng[0]:rng[1]] for k, v in columns.items()}
    return {k: v[idx] for k, v in columns.items()}


class BatchTable:
    """One row per batch, as named numpy columns (``table.base_offset``...).

    Columns: base_offset, last_offset, position (byte in its file), size,
    magic, codec, timestamp_type, is_transactional, is_control,
    partition_leader_epoch, producer_id, producer_epoch, base_sequence,
    base_timestamp, max_timestamp, records_count, crc, crc_valid (1 checked
    and valid, 0 wrong, -1 not checked), attributes, has_delete_horizon,
    source (index into ``Records.sources``).
    """

    __slots__ = ("_columns", "_rows", "_source")

    def __init__(self, columns: dict[str, np.ndarray]):
        self._columns = columns
        self._rows = None      # the decoder's rows, while columns are taken lazily
        self._source = 0

    @classmethod
    def from_rows(cls, rows: np.ndarray, source: "int | np.ndarray" = 0) -> "BatchTable":
        """A table over the decoder's row array: each column is copied out
        of it when first used (most reads touch a few of the 18).
        ``source``: every row's index into ``Records.sources``, or one per row."""
        table = cls({})
        table._rows = rows
        table._source = source
        return table

    def _column(self, name: str) -> np.ndarray:
        col = self._columns.get(name)
        if col is None and self._rows is not None:
            if name == "source":
                col = (self._source if isinstance(self._source, np.ndarray)
                       else np.full(len(self._rows), self._source, dtype=np.int32))
            elif name in self._rows.dtype.names:
                col = np.ascontiguousarray(self._rows[name])
            else:
                raise KeyError(name)
            self._columns[name] = col
        elif col is None:
            raise KeyError(name)
        return col

    def _all(self) -> dict[str, np.ndarray]:
        """Every column, in the table's order. (``_rows`` stays: another
        thread may be reading a column of the same table meanwhile.)"""
        if self._rows is not None:
            names = [*self._rows.dtype.names, "source"]
            if list(self._columns) != names:
                self._columns = {n: self._column(n) for n in names}
        return self._columns

    @classmethod
    def empty(cls) -> "BatchTable":
        from kbatch._core._batch import BATCH_DTYPE
        return cls.from_rows(np.empty(0, dtype=BATCH_DTYPE))

    @property
    def columns(self) -> list[str]:
        if self._rows is not None:
            return [*self._rows.dtype.names, "source"]
        return list(self._columns)

    def __len__(self) -> int:
        if self._rows is not None:
            return len(self._rows)
        return len(self._columns["base_offset"])

    def __getattr__(self, name: str) -> np.ndarray:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._column(name)
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._column(key)
        return {name: col[key].item() for name, col in self._all().items()}

    def __repr__(self) -> str:
        return f"BatchTable({len(self)} batches)"

    def take(self, indices) -> "BatchTable":
        return BatchTable(_take_columns(self._all(), as_indices(indices, len(self))))

    def with_source(self, source_map: np.ndarray) -> "BatchTable":
        cols = dict(self._all())
        cols["source"] = source_map[cols["source"]].astype(np.int32)
        return BatchTable(cols)

    @staticmethod
    def concat(tables: Sequence["BatchTable"]) -> "BatchTable":
        if len(tables) == 1:
            return tables[0]
        names = tables[0].columns
        return BatchTable({n: np.concatenate([t._column(n) for t in tables]) for n in names})

    def to_arrow(self):
        pa = optional_module("pyarrow", "arrow", "BatchTable.to_arrow()")
        return pa.table({n: pa.array(c) for n, c in self._all().items()})

    def to_pandas(self):
        pd = optional_module("pandas", "pandas", "BatchTable.to_pandas()")
        return pd.DataFrame(self._all())


class ControlRecords:
    """The control records (transaction markers, KRaft records) of a read.

    Columns: offset, timestamp, batch (row in ``Records.batches``),
    producer_id, producer_epoch, type (0 ABORT, 1 COMMIT, 2 LEADER_CHANGE,
    3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS,
    other values unknown, -1 unparseable key), version (of the key),
    coordinator_epoch (ABORT/COMMIT, else -1), key and value (raw bytes).
    """

    __slots__ = ("offset", "timestamp", "batch", "producer_id", "producer_epoch",
                 "type", "version", "coordinator_epoch", "key", "value")

    def __init__(self, offset, timestamp, batch, producer_id, producer_epoch,
                 type, version, coordinator_epoch, key: BinaryColumn,
                 value: BinaryColumn):
        self.offset = offset
        self.timestamp = timestamp
        self.batch = batch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.type = type
        self.version = version
        self.coordinator_epoch = coordinator_epoch
        self.key = key
        self.value = value

    _ARRAYS = ("offset", "timestamp", "batch", "producer_id", "producer_epoch",
               "type", "version", "coordinator_epoch")

    @classmethod
    def from_chunk(cls, cols: dict, rows: np.ndarray, batches: BatchTable):
        batch = cols["batch"]
        return cls(cols["offset"], cols["timestamp"], batch,
                   batches.producer_id[batch], batches.producer_epoch[batch],
                   np.ascontiguousarray(rows["type"]),
                   np.ascontiguousarray(rows["version"]),
                   np.ascontiguousarray(rows["coordinator_epoch"]),
                   BinaryColumn.from_parts(cols["key"]),
                   BinaryColumn.from_parts(cols["value"]))

    def __len__(self) -> int:
        return len(self.offset)

    def type_names(self) -> list[str]:
        return [CONTROL_TYPES.get(t, "UNKNOWN") for t in self.type.tolist()]

    def decoded(self) -> list[dict]:
        """Every control record's value decoded by its type (``kbatch.lib.control``):
        markers, leader changes, snapshot headers/footers, KRaft version and
        voters; unknown types as raw bytes. Raises ``CorruptRecordError`` for a
        malformed value."""
        from kbatch.lib.control import decode_control_records
        return decode_control_records(self)

    def __getitem__(self, i: int) -> ControlRecord:
        t = int(self.type[i])
        return ControlRecord(int(self.offset[i]), int(self.timestamp[i]),
                             int(self.producer_id[i]), int(self.producer_epoch[i]),
                             t, CONTROL_TYPES.get(t, "UNKNOWN"), int(self.version[i]),
                             int(self.coordinator_epoch[i]), self.key[i], self.value[i])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"ControlRecords({len(self)} records)"

    def take(self, indices) -> "ControlRecords":
        idx = as_indices(indices, len(self))
        arrays = {name: getattr(self, name)[idx] for name in self._ARRAYS}
        return ControlRecords(**arrays, key=self.key.take(idx), value=self.value.take(idx))

    def shifted(self, batch_shift: int) -> "ControlRecords":
        arrays = {name: getattr(self, name) for name in self._ARRAYS}
        arrays["batch"] = arrays["batch"] + np.int32(batch_shift)
        return ControlRecords(**arrays, key=self.key, value=self.value)

    @staticmethod
    def concat(parts: Sequence["ControlRecords"]) -> "ControlRecords":
        if len(parts) == 1:
            return parts[0]
        arrays = {name: np.concatenate([getattr(p, name) for p in parts])
                  for name in ControlRecords._ARRAYS}
        return ControlRecords(**arrays, key=BinaryColumn.concat([p.key for p in parts]),
                              value=BinaryColumn.concat([p.value for p in parts]))

    def to_arrow(self):
        pa = optional_module("pyarrow", "arrow", "ControlRecords.to_arrow()")
        cols = {name: pa.array(getattr(self, name)) for name in self._ARRAYS}
        cols["type_name"] = pa.array(self.type_names(), pa.string())
        cols["key"] = self.key.to_arrow()
        cols["value"] = self.value.to_arrow()
        return pa.table(cols)


@dataclass(frozen=True)
class RecordColumn:
    """One per-record column of ``Records``: the column registry.

    ``name`` is the ``Records`` attribute and the key of the decoder's chunk
    (``BatchDecoder.take()["data"]``); ``kind`` says what holds it ("fixed":
    a numpy array, "binary": a ``BinaryColumn``, or with zero_copy a
    ``ViewColumn`` (Arrow binary views), "headers": a
    ``HeadersColumn``); ``arrow`` is its Arrow type in ``to_arrow()`` (None:
    not an Arrow column). The "fixed" entries come from the compiled core's
    column table (``_core/coltable.py``): adding one means a row there and
    its store in the two record loops (README, "Where a change lands").
    """

    name: str
    kind: str
    arrow: str | None

    def wrap(self, data: dict):
        if self.kind == "fixed":
            return data[self.name]
        if data[self.name] is None:     # left out by a projection (columns=[...])
            return MissingColumn(self.name, data["n"], data.get("projection", ()),
                                 data.get("unread_header_rows") if self.kind == "headers" else None)
        if self.kind == "binary":
            parts = data[self.name]
            if "views" in parts:    # zero_copy: views into data["buffers"]
                return ViewColumn.from_parts(parts, data["buffers"], data.get("holds", ()))
            return BinaryColumn.from_parts(parts)
        return HeadersColumn(data[self.name],      # the decoder's header_key/_value
                             BinaryColumn.from_parts(data["header_key"], utf8=True),
                             BinaryColumn.from_parts(data["header_value"]))

    def take(self, column, idx, pick, threads: int = 1):
        if self.kind == "fixed":
            return pick(column)
        # idx: as_indices' rows, checked once by Records.take
        if isinstance(column, BinaryColumn):
            return column.take_rows(idx, threads)
        return column.take_rows(idx) if isinstance(column, HeadersColumn) else column.take(idx)

    def concat(self, columns: list, copies=None):
        # joined through ``copies`` (a pooled join): the output from the memory pool
        role = None if copies is None else JOIN_ROLE + 8 * _COLUMN_NAMES.index(self.name)
        if self.kind == "fixed":
            return concat_fixed(columns, copies, role)
        missing = sum(isinstance(c, MissingColumn) for c in columns)
        if missing:
            if missing != len(columns):
                raise ValueError(f"cannot concatenate Records read with and without "
                                 f"column {self.name!r}")
            return MissingColumn.concat(columns)
        if self.kind == "binary":
            if any(isinstance(c, ViewColumn) for c in columns):
                return ViewColumn.concat(columns)
            return BinaryColumn.concat(columns, copies, role)
        return HeadersColumn.concat(columns, copies, role)

    def nbytes(self, column) -> int:
        if self.kind == "fixed":
            return column.nbytes
        if isinstance(column, (ViewColumn, MissingColumn)):
            return column.nbytes
        if self.kind == "binary":
            return _binary_nbytes(column)
        return column.offsets.nbytes + _binary_nbytes(column.keys) + _binary_nbytes(column.values)


def _binary_nbytes(col: BinaryColumn) -> int:
    return (col.offsets.nbytes + col.data.nbytes
            + (col.validity.nbytes if col.validity is not None else 0))


# the fixed-width columns as the compiled core's table lists them (those with
# an Arrow type first, in to_arrow()'s order), then key, value and headers,
# then those without one (batch: the row in ``batches``, whose fields are
# columns); a timestamp_ms column's -1 (none) becomes null
RECORD_COLUMNS = (
    *(RecordColumn(c.name, "fixed", c.arrow) for c in FIXED_COLUMNS if c.arrow is not None),
    RecordColumn("key", "binary", "binary"),
    RecordColumn("value", "binary", "binary"),
    RecordColumn("headers", "headers", "headers"),
    *(RecordColumn(c.name, "fixed", None) for c in FIXED_COLUMNS if c.arrow is None),
)
_COLUMN_NAMES = tuple(c.name for c in RECORD_COLUMNS)


class Records:
    """Decoded records of a segment, a chunk of one, or a range of a log.

    ``len(records)`` data records; ``records[i]`` is a ``Record`` tuple.
    Columns are numpy arrays in Arrow layout; see the module docstring.
    """

    __slots__ = _COLUMN_NAMES + ("batches", "control", "end", "sources", "last_stable_offset",
                                 "skipped", "projection", "__weakref__")

    def __init__(self, columns: dict, batches: BatchTable, control: ControlRecords,
                 end: SegmentEnd | None = None, sources: Sequence[str | None] = (None,),
                 last_stable_offset: int | None = None,
                 skipped: Sequence[SkippedRange] = (), projection: tuple | None = None):
        """``columns``: one entry per ``RECORD_COLUMNS`` name. ``projection``:
        the columns a ``columns=[...]`` read asked for (None: all)."""
        for name in _COLUMN_NAMES:
            setattr(self, name, columns[name])
        self.batches = batches
        self.control = control
        self.end = end
        self.sources = list(sources)
        self.last_stable_offset = last_stable_offset
        self.skipped = tuple(skipped)
        self.projection = None if projection is None else tuple(projection)

    def columns(self) -> dict:
        """The per-record columns by name (``RECORD_COLUMNS`` order)."""
        return {name: getattr(self, name) for name in _COLUMN_NAMES}

    @classmethod
    def from_chunk(cls, chunk: dict, end: SegmentEnd | None, path,
                   skipped: Sequence[SkippedRange] = (), *, sources: Sequence[str] | None = None,
                   batch_source: np.ndarray | None = None) -> "Records":
        """Wrap what ``BatchDecoder.take()`` returned (no copies). A chunk
        decoded from several files (``kbatch.lib.chain``) names them in
        ``sources`` and gives each batch row's index into it in
        ``batch_source`` (int32); otherwise it is all ``path``."""
        d = chunk["data"]
        batches = BatchTable.from_rows(chunk["batches"],
                                       0 if batch_source is None else batch_source)
        control = ControlRecords.from_chunk(chunk["control"], chunk["control_rows"], batches)
        if sources is None:
            sources = [None if path is None else str(path)]
        return cls({c.name: c.wrap(d) for c in RECORD_COLUMNS}, batches, control, end,
                   sources, None, skipped, d.get("projection"))

    @classmethod
    def empty(cls, end: SegmentEnd | None = None, path=None) -> "Records":
        return cls.from_chunk(empty_chunk(), end, path)

    # --- size and access ------------------------------------------------

    def __len__(self) -> int:
        return len(self.offset)

    @property
    def nbytes(self) -> int:
        """Bytes of the record columns (data buffers, offsets, bitmaps)."""
        return sum(c.nbytes(getattr(self, c.name)) for c in RECORD_COLUMNS)

    @property
    def path(self) -> str | None:
        """The file read, when all batches come from one file."""
        return self.sources[0] if len(self.sources) == 1 else None

    def __getitem__(self, i: int) -> Record:
        i = checked_position(i, len(self))
        return Record(int(self.offset[i]), int(self.timestamp[i]),
                      int(self.timestamp_type[i]), self.key[i], self.value[i],
                      self.headers[i])

    def __iter__(self):
        keys, values, headers = self.key.to_pylist(), self.value.to_pylist(), self.headers.to_pylist()
        for row in zip(self.offset.tolist(), self.timestamp.tolist(),
                       self.timestamp_type.tolist(), keys, values, headers):
            yield Record(*row)

    def __repr__(self) -> str:
        rng = f", offsets {self.offset[0]}..{self.offset[-1]}" if len(self) else ""
        return (f"Records({len(self)} records, {len(self.batches)} batches, "
                f"{len(self.control)} control{rng})")

    # --- batch fields per record ----------------------------------------

    def batch_column(self, name: str) -> np.ndarray:
        """A batch-table column repeated for every record (e.g. producer_id)."""
        return self.batches[name][self.batch]

    @property
    def is_control(self) -> np.ndarray:
        """bool[n]: rows that are control records (only with include_control)."""
        return self.batches.is_control[self.batch]

    @property
    def sequence(self) -> np.ndarray:
        """int32[n]: producer sequence of each record (-1 without one)."""
        base_seq = self.batches.base_sequence[self.batch].astype(np.int64)
        delta = self.offset - self.batches.base_offset[self.batch]
        seq = (base_seq + delta) % (1 << 31)
        return np.where(base_seq < 0, -1, seq).astype(np.int32)

    # --- selection and concatenation ------------------------------------

    def take(self, indices, threads: int = 1) -> "Records":
        """The records at ``indices`` (ints or a boolean mask); batch and
        control tables are kept whole, so ``batch`` indices stay valid.
        ``threads``: the key and value bytes of a large take are copied on
        that many threads."""
        return self.take_rows(as_indices(indices, len(self)), threads)

    def take_rows(self, idx: np.ndarray, threads: int = 1) -> "Records":
        """``take`` of ``idx``, int64 row numbers in ``[0, len)`` (what
        ``as_indices`` gives, or the table view's kernel)."""
        rng = as_contiguous_range(idx)
        pick = (lambda a: a[rng[0]:rng[1]]) if rng is not None else (lambda a: a[idx])
        columns = {c.name: c.take(getattr(self, c.name), idx, pick, threads)
                   for c in RECORD_COLUMNS}
        return Records(columns, self.batches, self.control, self.end, self.sources,
                       self.last_stable_offset, self.skipped, self.projection)

    def replace(self, **fields) -> "Records":
        """A shallow copy with some attributes replaced (no column copies)."""
        out = Records.__new__(Records)
        for name in Records.__slots__[:-1]:
            setattr(out, name, fields.pop(name, getattr(self, name)))
        if fields:
            raise TypeError(f"unknown Records fields: {sorted(fields)}")
        return out

    def select_offsets(self, lo: int, hi: int) -> "Records":
        """Records (and control records) with offsets in ``[lo, hi)``; the
        batch table keeps the batches that overlap the range."""
        bt = self.batches
        return self.select((self.offset >= lo) & (self.offset < hi),
                           (self.control.offset >= lo) & (self.control.offset < hi),
                           (bt.last_offset >= lo) & (bt.base_offset < hi))

    def select(self, keep, control_keep, batch_keep) -> "Records":
        """The records, control records and batch rows the three masks keep
        (a kept record or control record must lie in a kept batch)."""
        if keep.all() and control_keep.all() and batch_keep.all():
            return self
        # rows of kept batches get new batch numbers; kept records lie in kept batches
        new_index = np.cumsum(batch_keep, dtype=np.int64) - 1
        part = self.take(keep)
        control = self.control.take(control_keep)
        control.batch = new_index[control.batch].astype(np.int32)
        part.control = control
        part.batch = new_index[part.batch].astype(np.int32)
        part.batches = self.batches.take(batch_keep)
        return part

    def filter(self, mask) -> "Records":
        return self.take(np.asarray(mask, dtype=bool))

    def slice(self, start: int = 0, stop: int | None = None) -> "Records":
        n = len(self)
        stop = n if stop is None else min(stop, n)
        start = min(max(start, 0), stop)
        return self.take(np.arange(start, stop, dtype=np.int64))

    @staticmethod
    def concat(parts: Sequence["Records"], *, pool=None) -> "Records":
        """One ``Records`` holding ``parts`` in order (``end`` of the last,
        the ``skipped`` ranges of all; the last stable offset of the last
        where every part was read with read_committed, else None). The record columns are copied in
        4 MiB pieces into memory from kbatch's pool (``kbatch.lib.gather``);
        ``pool`` (a ``concurrent.futures`` executor): the copies run on it."""
        parts = list(parts)
        if not parts:
            return Records.empty()
        if len(parts) == 1:
            return parts[0]
        sources: list = []
        tables, controls, batch_shifts = [], [], []
        shift = 0
        for p in parts:
            mapping = np.array([_source_index(sources, s) for s in p.sources] or [0],
                               dtype=np.int32)
            tables.append(p.batches.with_source(mapping))
            controls.append(p.control.shifted(shift))
            batch_shifts.append(shift)
            shift += len(p.batches)
        copies = Copies(pool)     # without a pool: run in order, here
        columns = {c.name: c.concat([getattr(p, c.name) for p in parts], copies)
                   for c in RECORD_COLUMNS if c.name != "batch"}
        # rows of the joined batch table
        columns["batch"] = concat_fixed(
            [p.batch for p in parts], copies, JOIN_ROLE + 8 * _COLUMN_NAMES.index("batch"),
            batch_shifts)
        copies.run()
        return Records(columns, BatchTable.concat(tables),
                       ControlRecords.concat(controls), parts[-1].end, sources or [None],
                       _joined_lso(parts),
                       tuple(r for p in parts for r in p.skipped), parts[0].projection)

    # --- Arrow and pandas -----------------------------------------------

    def to_arrow(self, *, decode: dict | None = None, on_error: str = "raise"):
        """A ``pyarrow.Table`` sharing kbatch's buffers.

        ``decode={"value": registry}`` (and/or ``"key"``): that column
        decoded into typed Arrow data by a ``kbatch.Registry`` (Schema
        Registry payloads); ``on_error="null"`` turns a bad value into a
        null row and adds ``value_error`` (see ``kbatch.lib.decoded``).

        Columns: offset int64, timestamp timestamp[ms, UTC] (null where
        none), timestamp_type int8, key binary, value binary (zero_copy:
        binary_view, over the source's bytes), headers
        list<struct<key: string, value: binary>>, partition_leader_epoch
        int32, producer_id int64, producer_epoch int16, sequence int32,
        is_transactional bool, is_control bool. A read with ``columns=[...]``
        gives the columns it asked for (in the record columns' order) and ``offset``
        (first, asked for or not: a record cannot be told apart without it).
        """
        pa = optional_module("pyarrow", "arrow", "Records.to_arrow()")
        decode = decoded_columns.check(decode)
        if decode:
            return decoded_columns.apply(self.to_arrow(), self, decode, on_error)

        n = len(self)

        def prim(arr, typ, validity=None, nulls=0):
            return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(np.ascontiguousarray(arr))],
                                         null_count=nulls)

        def flags(arr):     # (pa.array of numpy imports pandas: half a second)
            bits = np.packbits(np.asarray(arr, dtype=bool), bitorder="little")
            return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])

        bt = self.batches
        cols = {}
        for c in RECORD_COLUMNS:
            col = getattr(self, c.name)
            if c.arrow is None or isinstance(col, MissingColumn):   # not read: left out
                continue
            if c.kind != "fixed":
                cols[c.name] = col.to_arrow()
            elif c.arrow == "timestamp_ms":
                has = col != -1     # -1: none, null
                nulls = int(n - has.sum())
                valid = pa.py_buffer(np.packbits(has, bitorder="little")) if nulls else None
                cols[c.name] = prim(col, pa.timestamp("ms", tz="UTC"), valid, nulls)
            else:       # an integer type named as numpy and pyarrow name it (int64)
                cols[c.name] = prim(col, getattr(pa, c.arrow)())
        if self.projection is not None:      # what was asked for, and the offset
            return pa.table({name: cols[name] for name in
                             ["offset"] + [c for c in self.projection if c != "offset"]})
        return pa.table(cols | {
            "partition_leader_epoch": prim(bt.partition_leader_epoch[self.batch], pa.int32()),
            "producer_id": prim(bt.producer_id[self.batch], pa.int64()),
            "producer_epoch": prim(bt.producer_epoch[self.batch], pa.int16()),
            "sequence": prim(self.sequence, pa.int32()),
            "is_transactional": flags(bt.is_transactional[self.batch]),
            "is_control": flags(bt.is_control[self.batch]),
        })

    def to_pandas(self, *, binary: str = "bytes", decode: dict | None = None, on_error: str = "raise"):
        """A ``pandas.DataFrame``.

        ``binary="bytes"``: key/value/headers as Python objects (``bytes``,
        lists of tuples); ``binary="arrow"``: pyarrow-backed columns
        (``pd.ArrowDtype``) over kbatch's buffers, without per-value objects.
        """
        pd = optional_module("pandas", "pandas", "Records.to_pandas()")
        optional_module("pyarrow", "pandas", "Records.to_pandas()")

        table = self.to_arrow(decode=decode, on_error=on_error)
        if binary == "arrow":
            return table.to_pandas(types_mapper=pd.ArrowDtype)
        if binary != "bytes":
            raise ValueError(f"binary must be 'bytes' or 'arrow', not {binary!r}")
        df = table.to_pandas()
        if not isinstance(self.headers, MissingColumn):
            df["headers"] = self.headers.to_pylist()
        return df

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow C stream interface (polars, duckdb, pyarrow take it)."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)


def _joined_lso(parts: Sequence["Records"]) -> int | None:
    """The last stable offset of a join: the last part's where every part
    was read with read_committed, else None (a part read with
    read_uncommitted may hold records of open transactions, which a join
    must not pass off as a read_committed read's)."""
    holding = [p for p in parts if len(p)] or list(parts)   # an empty part holds no record
    if any(p.last_stable_offset is None for p in holding):
        return None
    return holding[-1].last_stable_offset


def _source_index(sources: list, source) -> int:
    try:
        return sources.index(source)
    except ValueError:
        sources.append(source)
        return len(sources) - 1
