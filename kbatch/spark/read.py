"""Reading one planned slice of a segment into Arrow batches (executors), for
the batch and the streaming reader of ``format("kbatch")``.

A slice names a segment, the bytes ``[start, stop)`` to decode, the offsets
``[lo, hi)`` to keep, and for read_committed the partition's transaction
state and the positions of the batches to leave out.

When the query's columns are only ``topic`` and/or ``partition`` (a
``count()``, a ``groupBy("partition").count()`` with ``columns``), records
are not decoded: one walk over the batch headers (CRCs checked unless
``validateCrc=false``) gives each batch's record count; only the batches
that straddle ``lo`` or ``hi`` are decoded, to count exactly the records in
range. Such a count trusts a CRC-valid header's record count (a batch whose
records are malformed behind a valid CRC is not detected; a full read
raises). Magic 0/1 data and ``onCorrupt`` other than ``fail`` take the
decoding path.

Keeps in memory one chunk of records (the header path: one row per batch).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Iterator

import numpy as np
import pyarrow as pa

from kbatch.lib.batchrows import (BATCH_COLUMNS, count_batches, decoded_counts, kept_part,
                                  merge_parts, part_arrays)
from kbatch.errors import CorruptRecordError
from kbatch.lib import plan as planner
from kbatch.lib.decoder import header_rows
from kbatch.lib.log import after_chunk, check_segment_end
from kbatch.lib.records import BatchTable, Records
from kbatch.lib.segment import DecodeOptions
from kbatch.spark import payloads
from kbatch.wire import UNBOUNDED
from kbatch.spark.arrow import numeric_array, to_record_batch, topic_array
from kbatch.spark.options import KafkaOptions

log = logging.getLogger("kbatch.spark")
HEADER_COLUMNS = frozenset({"topic", "partition"})
BATCH_NAMES = tuple(name for name, _, _ in BATCH_COLUMNS)


# the record columns each Spark column needs (topic/partition need none)
_RECORD_COLUMNS = {"key": ("key",), "value": ("value",), "offset": ("offset",),
                   "timestamp": ("timestamp",), "timestampType": ("timestamp_type",),
                   "headers": ("headers",)}


def decode_options(o: KafkaOptions, schema: pa.Schema | None = None) -> DecodeOptions:
    """The decode options of a read; with ``schema`` (the columns the query
    produces), a projection: key, value and headers not in it are not stored
    (offsets are always decoded: slices are cut by offset; ``view=latest``
    needs the key and the value)."""
    extra = {}
    if o.max_decompressed_bytes is not None:
        extra["max_decompressed_bytes"] = o.max_decompressed_bytes
    if schema is not None:
        needed = ("offset", "key", "value") if o.view == "latest" else ("offset",)
        # a decoded key/value may take its schema id from a header: headers are read too
        if any(w in schema.names for w in payloads.decoded(o)):
            needed += ("headers",)
        extra["columns"] = tuple({*needed, *(c for f in schema
                                             for c in _RECORD_COLUMNS.get(f.name, ()))})
    on_corrupt = {"fail": "raise", "stop": "stop", "skip": "skip"}[o.on_corrupt]
    return DecodeOptions(validate_crc=o.validate_crc, on_corrupt=on_corrupt, **extra)


def read_slice(piece, o: KafkaOptions, schema: pa.Schema,
               keep=None) -> Iterator[pa.RecordBatch]:
    """Arrow batches (``schema``'s columns) of one slice, for the batch and
    the streaming reader. ``keep``: a last filter of each chunk (the pushed
    timestamp bounds). Raises FileNotFoundError when the segment is gone."""
    counted = header_count_batches(piece, o, schema)
    if counted is not None:     # columns topic/partition only: records not decoded
        yield from counted
        return
    yield from _decoded(piece.segment.source, piece, o, schema, keep)


def header_count_batches(piece, o: KafkaOptions, schema: pa.Schema):
    """The slice's batches from its batch headers when ``schema`` holds only
    topic/partition (and ``onCorrupt=fail``), else None: decode instead.
    The slice's bytes come from its segment's source (a file's mapping, or
    the slice's range of an object)."""
    if not set(schema.names) <= HEADER_COLUMNS or o.on_corrupt != "fail":
        return None
    source = piece.segment.source
    try:
        with source.window(piece.start, piece.stop) as view:
            counted = _count_from_headers(view, source.name, piece, o)
    except CorruptRecordError:
        return None       # the decode decides (damage outside the range is passed)
    if counted is None:
        return None
    return _constant_batches(counted, piece, schema, o.chunk_records)


def _checked_chunks(source, piece, opts: DecodeOptions, **kw):
    """The slice's chunks, its segment's end checked (a segment that is not
    its partition's last must end at a batch boundary), damage logged.
    Damage that lies wholly below the partition's range or past its end
    (the index, or its lack of an entry, placed the slice's ends; a walk
    over the batch headers would not have read there, nor Kafka's fetch)
    is passed: the slice goes on where the walk starts, or is read again
    from its last whole chunk up to where the walk stops."""
    path = source.name
    start, stop = piece.start, piece.stop
    while True:
        resume = start
        try:
            for chunk in _chunks_from(source, piece, start, stop, opts, path, **kw):
                yield chunk
                resume = after_chunk(chunk, resume)
            return
        except CorruptRecordError as exc:
            moved = _outside_the_range(piece, exc, start, stop, resume)
            if moved is None:
                raise
            if moved[1] is not None and moved[0] >= moved[1]:
                return
            start, stop = moved


def _outside_the_range(piece, exc: CorruptRecordError, start: int, stop: int | None,
                       resume: int) -> tuple[int, int | None] | None:
    """The bytes a slice that met ``exc`` reads next: from the walk's first
    batch of the range when the damaged batch lies below it, or from
    ``resume`` (after what was given out) up to the walk's stop when it
    lies at or past that stop; None (the damage is the range's: raise)
    otherwise. Walks the segment's batch headers (only when damage was met)."""
    at = exc.batch_position if exc.batch_position is not None else exc.position
    if at is None:
        return None
    seg = piece.segment
    end = seg.size if stop is None else stop
    walk_start = planner.start_position(seg, piece.lo, False)
    if start <= at < walk_start:
        return (walk_start, stop) if walk_start < end else (end, end)
    walk_stop = planner.stop_position(seg, piece.hi, False)
    if walk_stop is not None and at >= walk_stop:
        return resume, min(end, walk_stop)
    return None


def _chunks_from(source, piece, start: int, stop: int | None, opts: DecodeOptions, path: str,
                 **kw):
    for chunk in source.chunks(opts, start=start, stop=stop, **kw):
        if chunk.end is not None:
            chunk, _ = check_segment_end(chunk, path, getattr(piece, "inner", False),
                                         getattr(piece, "next_base", None), opts, None)
            if chunk.end.reason == "corrupt":
                log.warning("kbatch: stopped reading %s at byte %d (the last good batch "
                            "ends there): %s", path, chunk.end.valid_bytes, chunk.end.error)
        for gap in chunk.skipped:
            log.warning("kbatch: skipped bytes %d-%d of %s (%s)", gap.start, gap.stop,
                        path, gap.error or gap.reason)
        yield chunk


def batch_level(slices: list, o: KafkaOptions, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``level=batches``: a row per batch of the slices (``kbatch.lib.batchrows``),
    from their batch headers, CRCs checked (data records are not decoded, but
    those of a batch cut by a slice's offsets, or magic 0/1 messages). One
    Arrow batch per segment, not per slice (each costs Spark a hand-over):
    keeps in memory the rows of every batch of the slices (one row per
    record batch, about 100 bytes each)."""
    opts = decode_options(o)
    # onCorrupt skip/stop must find malformed records behind a valid CRC: decoded
    decode = o.on_corrupt != "fail"
    parts = []
    for piece in slices:
        source = piece.segment.source
        for chunk in _checked_chunks(source, piece,
                                     replace(opts, columns=("offset",)) if decode else opts,
                                     control_only=not decode,
                                     chunk_records=UNBOUNDED, chunk_bytes=1 << 30):
            if decode:
                chunk = chunk.select_offsets(piece.lo, piece.hi)
                rows, keep, counts = decoded_counts(chunk, piece.txn_state)
            else:
                rows, keep, counts = count_batches(chunk.batches, source, opts, piece.lo,
                                                   piece.hi, piece.txn_state)
            parts.append(kept_part(piece.topic, piece.partition, source.name, rows, keep,
                                   counts))
    for part in merge_parts(parts):
        arrays = dict(zip(BATCH_NAMES, part_arrays(pa, part, "us")))
        yield pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _decoded(source, piece, o: KafkaOptions, schema: pa.Schema, keep=None):
    # a projection: key, value and headers the query does not produce are not stored
    for chunk in decoded_records(source, piece, o, decode_options(o, schema), keep):
        yield spark_batch(chunk, piece.topic, piece.partition, o, schema)


def read_latest(slices: list, o: KafkaOptions, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the table view (``view=latest``) of one Kafka
    partition, from all its slices (in offset order) at once: a key's
    latest record may be in any of them. No pushed filter prunes records
    first (the table of a pruned read is not the pruned table)."""
    from kbatch.lib.latest import latest
    opts = decode_options(o, schema)
    chunks = [c for piece in slices
              for c in decoded_records(piece.segment.source, piece, o, opts)]
    if not chunks:
        return
    first = slices[0]
    table, _ = latest(Records.concat(chunks), where=f"{first.topic}-{first.partition}")
    del chunks
    for start in range(0, len(table), o.chunk_records):
        rows = np.arange(start, min(start + o.chunk_records, len(table)), dtype=np.int64)
        yield spark_batch(table.take(rows), first.topic, first.partition, o, schema)


def decoded_records(source, piece, o: KafkaOptions, opts: DecodeOptions,
                    keep=None) -> Iterator[Records]:
    """The slice's records, chunk by chunk: its offsets, read_committed
    applied, damage warned about as ``onCorrupt`` says (chunks with records only)."""
    for chunk in _checked_chunks(source, piece, opts, chunk_records=o.chunk_records,
                                 chunk_bytes=64 << 20, drop_positions=piece.drop_positions):
        chunk = chunk.select_offsets(piece.lo, piece.hi)
        if piece.txn_state is not None:
            chunk = piece.txn_state.filter(chunk)
        if keep is not None:
            chunk = keep(chunk)
        if len(chunk):
            yield chunk


def spark_batch(chunk: Records, topic: str, partition: int, o: KafkaOptions,
                schema: pa.Schema) -> pa.RecordBatch:
    """One chunk as an Arrow batch of ``schema``; keys and values decoded
    when the query asks (``valueFormat``/``keyFormat``)."""
    if payloads.decoded(o):
        return payloads.decode_batch(to_record_batch(chunk, topic, partition,
                                                     _binary_schema(schema)), chunk, o, schema)
    return to_record_batch(chunk, topic, partition, schema)


def _binary_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` as the Kafka source's: key and value binary, no error columns."""
    return pa.schema([pa.field(f.name, pa.binary()) if f.name in ("key", "value") else f
                      for f in schema if not f.name.endswith("_error")])


def _count_from_headers(view, path, piece, o: KafkaOptions) -> int | None:
    """Records of the slice in ``[lo, hi)`` (read_committed applied) from the
    batch headers, decoding only the batches that straddle the bounds; None
    (decode the slice instead) when it holds magic 0/1 data or its whole
    batches do not reach its end: a torn or padded tail is decoded, so that
    the decode path decides, as for every read, whether it is damage."""
    opts = decode_options(o)
    rows, valid_end = header_rows(view, path, opts, piece.start, piece.stop)
    if valid_end != (len(view) if piece.stop is None else piece.stop):
        return None
    if len(rows) and (rows["magic"] < 2).any():
        return None
    # per batch, the records the read keeps (read_committed and the offset
    # bounds applied; batches the bounds cut are decoded): level=batches' rule
    _, keep, counts = count_batches(BatchTable.from_rows(rows), piece.segment.source, opts,
                                    piece.lo, piece.hi, piece.txn_state)
    return int(counts[keep].sum())


def _constant_batches(n: int, piece, schema: pa.Schema, chunk: int):
    chunk = max(chunk, 1 << 20)
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        arrays = []
        for f in schema:
            if f.name == "topic":
                arrays.append(topic_array(piece.topic, rows))
            else:
                arrays.append(pa.nulls(rows, pa.int32()) if piece.partition is None else
                              numeric_array(np.full(rows, piece.partition, np.int32)))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


__all__ = ["batch_level", "decode_options", "decoded_records", "header_count_batches",
           "read_latest", "read_slice"]


def group_by_size(sizes: list[int], max_bytes: int, min_partitions: int) -> list[list[int]]:
    """Indexes of consecutive items (slices of ``sizes`` bytes) grouped, in
    order, into balanced groups: as many as it takes to keep each near
    ``max_bytes``, at least ``min_partitions``, and a multiple of it (the
    cores: no last round with one task running alone), each item in the
    group its middle byte falls in."""
    if not sizes:
        return []
    total = sum(sizes)
    k = max(min_partitions, -(-total // max(max_bytes, 1)), 1)
    if min_partitions > 1:
        k = -(-k // min_partitions) * min_partitions
    k = min(k, len(sizes))
    if total <= 0 or k == 1:
        return [list(range(len(sizes)))]
    groups: list[list[int]] = [[] for _ in range(k)]
    before = 0
    for i, size in enumerate(sizes):
        groups[min(int((2 * before + size) * k // (2 * total)), k - 1)].append(i)
        before += size
    return [g for g in groups if g]
