"""Reads at the level of batches: one row per record batch, from the
CRC-checked batch headers (``level="batches"``).

    read(level="batches")   open_log(...).read, open_log_dir(...).read,
                            read_table, kbatch stats --level batches,
                            spark.read.format("kbatch").option("level", "batches")

A row holds the batch's header fields and ``records``: how many records of
that batch the same read at ``level="records"`` returns. So the sum of
``records`` over a read is that read's record count, for every range,
isolation and ``on_corrupt`` setting:

- a data batch inside the offset range: its header's record count (the
  CRC covers it; the records themselves are not parsed, so a batch whose
  records are malformed behind a valid CRC passes here, where a records
  read raises). With ``on_corrupt="skip"`` or ``"stop"`` every batch is
  decoded instead (keys and values not stored: ``decoded_counts``), so
  that such a batch is skipped, or ends the read, as in a records read;
- a control batch (transaction markers): 0 (control records are never
  data records); its row is kept, ``isControl`` true;
- a batch the offset range cuts, and magic 0/1 message sets (their
  wrappers hold an unknown number of inner messages, and their header
  names the last one's offset): decoded, and the records the read keeps
  counted; a wrapper's ``baseOffset`` is its first inner offset, as
  Kafka's ``baseOffset()`` of a legacy batch;
- read_committed: the batches a read_committed consumer does not see
  (aborted and open transactions, at or after the LSO) are dropped, rows
  and all.

Columns (``BATCH_COLUMNS``, the same names for the Python API, the command
line and Spark): topic, partition, baseOffset, lastOffset, records,
firstTimestamp, maxTimestamp (null when the batch has none: magic 0),
producerId, producerEpoch, baseSequence, isTransactional, isControl,
compression (none, gzip, snappy, lz4, zstd), sizeInBytes (the whole
batch, log overhead included), segment (the segment's path or URL),
position (the batch's byte in it).

What a records read says in ``Records.skipped`` and ``Records.end`` (the
damaged ranges ``on_corrupt="skip"`` passed over, where ``"stop"`` ended
the read) the table says in its schema metadata, ``kbatch.damage``: a JSON
list with one object per partition that met damage (``table_damage``).
"""

from __future__ import annotations

from typing import NamedTuple

import json

import numpy as np

from kbatch.errors import ArgumentError
from kbatch.lib.records import BatchTable, Records, optional_module
from kbatch.wire import CODEC_NAMES, INT64_MIN

LEVELS = ("records", "batches")

# (name, Arrow type name, Spark type): one schema for every front end
BATCH_COLUMNS = (
    ("topic", "string", "string"),
    ("partition", "int32", "int"),
    ("baseOffset", "int64", "long"),
    ("lastOffset", "int64", "long"),
    ("records", "int64", "long"),
    ("firstTimestamp", "timestamp", "timestamp"),
    ("maxTimestamp", "timestamp", "timestamp"),
    ("producerId", "int64", "long"),
    ("producerEpoch", "int16", "smallint"),
    ("baseSequence", "int32", "int"),
    ("isTransactional", "bool_", "boolean"),
    ("isControl", "bool_", "boolean"),
    ("compression", "string", "string"),
    ("sizeInBytes", "int32", "int"),
    ("segment", "string", "string"),
    ("position", "int64", "long"),
)
_HEADER_FIELDS = {"baseOffset": "base_offset", "lastOffset": "last_offset",
                  "firstTimestamp": "base_timestamp", "maxTimestamp": "max_timestamp",
                  "producerId": "producer_id", "producerEpoch": "producer_epoch",
                  "baseSequence": "base_sequence", "isTransactional": "is_transactional",
                  "isControl": "is_control", "sizeInBytes": "size", "position": "position"}
_CODECS = [CODEC_NAMES.get(i, f"codec{i}") for i in range(8)]


def check_level(level) -> str:
    if level not in LEVELS:
        raise ArgumentError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    return level


class Damage(NamedTuple):
    """What a batch-level read of one partition passed over or stopped at:
    its ``skipped`` ranges (``SkippedRange``s, as ``Records.skipped``) and,
    where ``on_corrupt="stop"`` ended it, the segment it stopped in and
    that segment's ``end`` (a ``SegmentEnd``, as ``Records.end``)."""

    topic: str | None
    partition: int | None
    skipped: tuple
    stopped_in: str | None = None
    end: object = None

    def as_dict(self) -> dict:
        stop = None if self.end is None else {
            "path": self.stopped_in, "position": self.end.valid_bytes,
            "error": str(self.end.error) if self.end.error is not None else self.end.reason}
        return {"topic": self.topic, "partition": self.partition,
                "skipped": [{**gap._asdict(), "path": str(gap.path)} for gap in self.skipped],
                "stopped": stop}


DAMAGE_KEY = b"kbatch.damage"


def table_damage(table) -> list[dict]:
    """The damage a batch-level read's table carries: ``Damage.as_dict()``
    per partition that met some ([]: none)."""
    meta = table.schema.metadata or {}
    return json.loads(meta[DAMAGE_KEY]) if DAMAGE_KEY in meta else []


class BatchPart(NamedTuple):
    """The rows of one chunk of one segment: its batch table and, per row,
    the records a read keeps (``counts``)."""

    topic: str | None
    partition: int | None
    segment: str
    batches: BatchTable
    counts: np.ndarray


def count_batches(rows: BatchTable, source, opts, lo: int, hi: int,
                  state=None) -> tuple[BatchTable, np.ndarray, np.ndarray]:
    """``(rows, keep, counts)`` for the batch rows of one chunk of
    ``source``: the rows (magic 0/1 wrappers' base offsets found), which of
    them a read of offsets ``[lo, hi)`` (``state``: read_committed's
    transactions) shows, and per row how many records it returns (see the
    module docstring). Only batches the range cuts and magic 0/1 message
    sets are decoded (runs of adjacent ones in one pass, with ``opts``)."""
    n = len(rows)
    if not n:
        return rows, np.zeros(0, bool), np.zeros(0, np.int64)
    base, last = rows.base_offset.copy(), rows.last_offset
    control = rows.is_control.astype(bool)
    legacy = rows.magic < 2
    # a magic 0/1 wrapper's header gives its last inner offset only: its
    # first is known once decoded, and may lie anywhere below (magic 0 inner
    # offsets are absolute: even below the message before the wrapper, as a
    # records read returns them), so every wrapper not below the range is
    # decoded (as a records read decodes it)
    first_possible = np.where(legacy, INT64_MIN, base)
    keep = (last >= lo) & (first_possible < hi)
    if state is not None:
        keep &= ~state.dropped(rows)
    counts = np.where(control, 0, rows.records_count).astype(np.int64)
    exact = keep & ~control & (legacy | (base < lo) | (last >= hi))
    idx = np.flatnonzero(exact)
    if len(idx):
        position, size = rows.position, rows.size
        for run in np.split(idx, np.flatnonzero(np.diff(idx) != 1) + 1):
            start = int(position[run[0]])
            stop = int(position[run[-1]]) + int(size[run[-1]])
            records = Records.concat(list(source.chunks(opts, start=start, stop=stop)))
            # a wrapper's base offset is its first inner offset (deep
            # iteration, as Kafka's AbstractLegacyRecordBatch.baseOffset())
            decoded = records.batches
            at = np.searchsorted(position[run], decoded.position)
            ok = (at < len(run)) & (position[run][np.minimum(at, len(run) - 1)]
                                    == decoded.position)
            base[run[at[ok]]] = decoded.base_offset[ok]
            records = records.select_offsets(lo, hi)
            if state is not None:
                records = state.filter(records)
            at = records.batches.position[records.batch] if len(records) else \
                np.zeros(0, np.int64)
            found, per = np.unique(at, return_counts=True)
            counts[run] = 0
            where = np.searchsorted(position[run], found)
            counts[run[where]] = per
        keep &= base < hi     # the wrappers' first offsets now known
        if legacy.any():
            rows = BatchTable({**rows._all(), "base_offset": base})
    return rows, keep, counts


def decoded_counts(chunk: Records, state=None) -> tuple[BatchTable, np.ndarray, np.ndarray]:
    """``(rows, keep, counts)`` as ``count_batches`` gives them, from a chunk
    whose records were decoded (and trimmed to the read's offsets): the way
    of ``on_corrupt="skip"``/``"stop"``, where a batch whose records are
    malformed behind a valid CRC must be found to be skipped or end the
    read as a records read does."""
    rows = chunk.batches
    keep = np.ones(len(rows), bool) if state is None else ~state.dropped(rows)
    shown = chunk if state is None else state.filter(chunk)
    counts = np.bincount(shown.batch, minlength=len(rows)).astype(np.int64)
    return rows, keep, counts


def kept_part(topic, partition, segment: str, rows: BatchTable, keep: np.ndarray,
              counts: np.ndarray) -> BatchPart:
    if not keep.all():
        rows, counts = rows.take(keep), counts[keep]
    return BatchPart(topic, partition, segment, rows, counts)


def merge_parts(parts) -> list[BatchPart]:
    """``parts`` with each run of neighbours of one topic, partition and
    segment joined into one part (the slices of a segment read one after
    the other), so that each becomes one Arrow batch, not one per slice."""
    merged: list[list[BatchPart]] = []
    for part in parts:
        if not len(part.counts):
            continue
        if merged and merged[-1][0][:3] == part[:3]:
            merged[-1].append(part)
        else:
            merged.append([part])
    return [run[0] if len(run) == 1 else
            BatchPart(*run[0][:3], BatchTable.concat([p.batches for p in run]),
                      np.concatenate([p.counts for p in run])) for run in merged]


def batch_schema(pa, unit: str = "ms"):
    """The Arrow schema of a batch-level read (timestamps in ``unit``, UTC)."""
    return pa.schema([(name, pa.timestamp(unit, tz="UTC") if kind == "timestamp"
                       else getattr(pa, kind)()) for name, kind, _ in BATCH_COLUMNS])


def spark_ddl() -> str:
    return ", ".join(f"{name} {spark}" for name, _, spark in BATCH_COLUMNS)


def _string_constant(pa, text: str | None, n: int):
    if text is None:
        return pa.nulls(n, pa.string())
    raw = text.encode()
    return pa.Array.from_buffers(pa.string(), n, [
        None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(raw)), pa.py_buffer(raw * n)])


def part_arrays(pa, part: BatchPart, unit: str = "ms") -> list:
    """The columns of ``part`` (``BATCH_COLUMNS`` order), as Arrow arrays
    over numpy buffers (no per-row Python, no pandas import)."""
    rows, n = part.batches, len(part.counts)

    def prim(values, typ, validity=None, nulls=0):
        values = np.ascontiguousarray(values)
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=nulls)

    out = []
    for name, kind, _ in BATCH_COLUMNS:
        if name == "topic":
            out.append(_string_constant(pa, part.topic, n))
        elif name == "segment":
            out.append(_string_constant(pa, part.segment, n))
        elif name == "partition":
            out.append(pa.nulls(n, pa.int32()) if part.partition is None else
                       prim(np.full(n, part.partition, np.int32), pa.int32()))
        elif name == "records":
            out.append(prim(part.counts.astype(np.int64), pa.int64()))
        elif name == "compression":
            codes = np.asarray(rows.codec, np.int8) & 7
            dictionary = pa.array(_CODECS, pa.string())
            out.append(pa.DictionaryArray.from_arrays(prim(codes, pa.int8()), dictionary)
                       .cast(pa.string()))
        elif kind == "timestamp":
            ms = np.asarray(rows[_HEADER_FIELDS[name]], np.int64)
            has = ms >= 0
            nulls = int(n - has.sum())
            valid = pa.py_buffer(np.packbits(has, bitorder="little")) if nulls else None
            scale = {"ms": 1, "us": 1000}[unit]
            out.append(prim(np.where(has, ms, 0) * scale, pa.timestamp(unit, tz="UTC"),
                            valid, nulls))
        elif kind == "bool_":
            bits = np.packbits(np.asarray(rows[_HEADER_FIELDS[name]], bool), bitorder="little")
            out.append(pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)]))
        else:
            out.append(prim(np.asarray(rows[_HEADER_FIELDS[name]], np.dtype(kind)),
                            getattr(pa, kind)()))
    return out


def batch_table(parts, unit: str = "ms", damage=()):
    """One ``pyarrow.Table`` of ``parts`` (``BatchPart``s), in their order;
    ``damage`` (``Damage``s) in its schema metadata (``table_damage``)."""
    pa = optional_module("pyarrow", "arrow", 'read(level="batches")')
    schema = batch_schema(pa, unit)
    if damage:
        schema = schema.with_metadata({DAMAGE_KEY: json.dumps([d.as_dict() for d in damage])})
    batches = [pa.RecordBatch.from_arrays(part_arrays(pa, p, unit), schema=schema)
               for p in parts if len(p.counts)]
    return pa.Table.from_batches(batches, schema=schema)


__all__ = ["BATCH_COLUMNS", "BatchPart", "DAMAGE_KEY", "Damage", "LEVELS", "batch_schema",
           "batch_table", "check_level", "count_batches", "decoded_counts", "kept_part",
           "merge_parts", "part_arrays", "spark_ddl", "table_damage"]
