"""A PySpark data source: ``spark.read.format("kbatch").load(path)``.

    import kbatch.spark
    kbatch.spark.register(spark)
    df = (spark.read.format("kbatch")
          .option("isolation", "read_committed")
          .load("/var/lib/kafka/data"))          # or a partition dir, a segment, several

Schema: exactly Spark's built-in Kafka source, in its order:

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>

(``headers`` is null for a record without headers, as there.) Topic and
partition come from the ``<topic>-<partition>`` directory name.

Every segment is a slice of work; a segment larger than ``maxPartitionBytes``
is split at batch boundaries (from a walk over its batch headers, or with
``useIndex`` from its checked ``.index`` entries), and small segments are
packed together (like Spark's file sources) into input partitions of up to
``maxPartitionBytes``, at least ``minPartitions`` of them. ``read()`` yields
``pyarrow.RecordBatch``es built from kbatch's buffers (no Python rows).

Options (case-insensitive):

    isolation            read_uncommitted (default) | read_committed
    startingOffset       an offset for every partition, or JSON
                         {"topic": {"0": 42}}; "earliest" is the default
    endingOffset         exclusive; same forms; "latest" is the default
    startingTimestamp    ms: start at the earliest offset whose timestamp >= it
    endingTimestamp      ms: stop before the earliest offset whose timestamp >= it
    validateCrc          true (default) | false
    maxDecompressedBytes refuse batches that decompress to more (bytes)
    onCorrupt            fail (default) | stop: stop at the last good batch of
                         the segment and say so in the executor log
    maxPartitionBytes    split segments larger than this, pack smaller ones up
                         to it (default 128 MiB)
    minPartitions        at least this many input partitions when the data
                         allows (default: the driver's core count)
    chunkRecords         records per Arrow batch (default 65536)
    useIndex             false (default): seeks and splits from a walk over the
                         batch headers, exact whatever the index files hold;
                         true: from the .index/.timeindex entries (checked, as
                         Kafka does; the driver reads far less of each segment)

Offset and timestamp bounds prune whole segments using file names and the
indexes, whether or not Spark's Python filter pushdown is enabled. With
``spark.sql.python.filterPushdown.enabled=true`` (set before ``register``),
filters on ``offset``, ``topic`` and ``partition`` are pushed down as well.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, GreaterThan,
                                    GreaterThanOrEqual, In, InputPartition, LessThan,
                                    LessThanOrEqual)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from kbatch.log import LogDir, PartitionLog, Segment, _batch_at, parse_partition_dir
from kbatch.records import Records
from kbatch.segment import DecodeOptions, decode_chunks, open_source, transaction_state
from kbatch.txn import TxnState, check_isolation

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int, "
          "headers array<struct<key:string,value:binary>>")
_WHOLE = 1 << 62
log = logging.getLogger("kbatch.spark")


# --- options ---------------------------------------------------------------

def _bounds(text: str | None, default):
    """An int for every partition, or {(topic, partition): int} from JSON."""
    if text is None or text in ("earliest", "latest"):
        return default
    text = text.strip()
    if text.startswith("{"):
        parsed = json.loads(text)
        return {(topic, int(p)): int(v) for topic, parts in parsed.items()
                for p, v in parts.items()}
    return int(text)


@dataclass
class Options:
    paths: list
    isolation: str = "read_uncommitted"
    starting_offset: object = 0
    ending_offset: object = _WHOLE
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    validate_crc: bool = True
    max_decompressed_bytes: int | None = None
    on_corrupt: str = "fail"
    max_partition_bytes: int = 128 << 20
    min_partitions: int = 0
    chunk_records: int = 1 << 16
    use_index: bool = False
    topics: set | None = None          # pushed-down filters
    partitions: set | None = None
    offset_lo: int = 0
    offset_hi: int = _WHOLE

    @classmethod
    def parse(cls, options) -> "Options":
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        if "paths" in opts:
            paths = json.loads(opts["paths"])
        elif "path" in opts:
            paths = [opts["path"]]
        else:
            raise ValueError("kbatch: give a path: spark.read.format('kbatch').load(path)")
        on_corrupt = opts.get("oncorrupt", "fail").lower()
        if on_corrupt not in ("fail", "stop"):
            raise ValueError(f"kbatch: onCorrupt must be 'fail' or 'stop', not {on_corrupt!r}")
        out = cls(
            paths=[str(p) for p in paths],
            isolation=check_isolation(opts.get("isolation", "read_uncommitted").lower()),
            starting_offset=_bounds(opts.get("startingoffset"), 0),
            ending_offset=_bounds(opts.get("endingoffset"), _WHOLE),
            starting_timestamp=int(opts["startingtimestamp"]) if "startingtimestamp" in opts else None,
            ending_timestamp=int(opts["endingtimestamp"]) if "endingtimestamp" in opts else None,
            validate_crc=opts.get("validatecrc", "true").lower() != "false",
            max_decompressed_bytes=(int(opts["maxdecompressedbytes"])
                                    if "maxdecompressedbytes" in opts else None),
            on_corrupt=on_corrupt,
            max_partition_bytes=int(opts.get("maxpartitionbytes", 128 << 20)),
            min_partitions=int(opts.get("minpartitions", os.cpu_count() or 1)),
            chunk_records=int(opts.get("chunkrecords", 1 << 16)),
            use_index=str(opts.get("useindex", "false")).lower() == "true")
        return out

    def decode_options(self) -> DecodeOptions:
        extra = {}
        if self.max_decompressed_bytes is not None:
            extra["max_decompressed_bytes"] = self.max_decompressed_bytes
        return DecodeOptions(validate_crc=self.validate_crc,
                             on_corrupt="stop" if self.on_corrupt == "stop" else "raise",
                             **extra)

    def offset_range(self, topic, partition) -> tuple[int, int]:
        def pick(bound, default):
            if isinstance(bound, dict):
                return bound.get((topic, partition), default)
            return bound
        lo = max(pick(self.starting_offset, 0), self.offset_lo)
        hi = min(pick(self.ending_offset, _WHOLE), self.offset_hi)
        return lo, hi


# --- planning ----------------------------------------------------------------

class SegmentSlice(InputPartition):
    """Bytes ``[start, stop)`` of one segment, records with offsets in ``[lo, hi)``,
    and (read_committed) the transaction state of its partition with the
    positions of the slice's batches whose records it leaves out."""

    def __init__(self, topic: str | None, partition: int | None, path: str, start: int,
                 stop: int | None, lo: int, hi: int, txn_state: TxnState | None = None,
                 drop_positions: np.ndarray | None = None):
        super().__init__(None)
        self.topic, self.partition, self.path = topic, partition, path
        self.start, self.stop, self.lo, self.hi = start, stop, lo, hi
        self.txn_state = txn_state
        self.drop_positions = drop_positions

    def __repr__(self) -> str:
        return (f"SegmentSlice({self.topic}-{self.partition} {Path(self.path).name} "
                f"[{self.start}, {self.stop}) offsets [{self.lo}, {self.hi}))")

    def size(self) -> int:
        end = os.path.getsize(self.path) if self.stop is None else self.stop
        return max(end - self.start, 0)


class SlicePack(InputPartition):
    """One input partition: slices read one after the other."""

    def __init__(self, slices: list[SegmentSlice]):
        super().__init__(None)
        self.slices = slices


def pack(slices: list[SegmentSlice], max_bytes: int, min_partitions: int) -> list[SlicePack]:
    """Group slices, in order, into packs of about ``max_bytes`` bytes, making at
    least ``min_partitions`` packs when there are enough slices."""
    if not slices:
        return []
    sizes = [s.size() for s in slices]
    target = max(1, min(max_bytes, -(-sum(sizes) // max(min_partitions, 1))))
    packs, current, current_bytes = [], [], 0
    for piece, size in zip(slices, sizes):
        if current and current_bytes + size > target:
            packs.append(SlicePack(current))
            current, current_bytes = [], 0
        current.append(piece)
        current_bytes += size
    packs.append(SlicePack(current))
    return packs


def _logs(path: str, use_index: bool = False) -> list[tuple[PartitionLog | None, Path | None]]:
    """The partition logs (or the single segment file) a path names."""
    p = Path(path)
    if p.is_file():
        return [(None, p)]
    if not p.is_dir():
        raise FileNotFoundError(f"kbatch: no such file or directory: {path}")
    if parse_partition_dir(p.name) or any(c.name.endswith(".log") for c in p.iterdir()):
        return [(PartitionLog(p, use_index=use_index), None)]
    return [(part, None) for part in LogDir(p, use_index=use_index).partitions]


def _split(seg: Segment, start: int, stop: int | None, max_bytes: int,
           use_index: bool = False) -> list[tuple]:
    """Cut ``[start, stop)`` at batch boundaries about every ``max_bytes``:
    every batch's (a header walk), or with ``use_index`` the ``.index``
    positions that hold a whole CRC-valid batch."""
    end = seg.size if stop is None else stop
    if end - start <= max_bytes:
        return [(start, stop)]
    cuts, target = [], start + max_bytes
    if use_index:
        with open_source(seg.path) as (view, _):
            for pos in np.unique(seg.offset_index.positions).tolist():
                if target <= pos < end and _batch_at(view, pos) is not None:
                    cuts.append(pos)
                    target = pos + max_bytes
    else:
        for pos in seg.batch_bounds()["position"].tolist():
            if target <= pos < end:
                cuts.append(pos)
                target = pos + max_bytes
    bounds = [start] + cuts
    return list(zip(bounds, cuts + [stop]))


def plan(options: Options) -> list[SegmentSlice]:
    """Input partitions for a read (runs on the driver)."""
    slices = []
    for path in options.paths:
        for log_, file in _logs(path, options.use_index):
            if file is not None:
                topic, part = parse_partition_dir(file.parent.name) or (None, None)
                lo, hi = options.offset_range(topic, part)
                state = None
                if options.isolation == "read_committed":
                    with open_source(file) as (view, src):
                        state = TxnState.build(*transaction_state(view, src,
                                                                  options.decode_options()))
                slices.append(SegmentSlice(topic, part, str(file), 0, None, lo, hi, state))
                continue
            if options.topics is not None and log_.topic not in options.topics:
                continue
            if options.partitions is not None and log_.partition not in options.partitions:
                continue
            lo, hi = options.offset_range(log_.topic, log_.partition)
            if options.starting_timestamp is not None:
                found = log_.offset_for_timestamp(options.starting_timestamp)
                lo = _WHOLE if found is None else max(lo, found)
            if options.ending_timestamp is not None:
                found = log_.offset_for_timestamp(options.ending_timestamp)
                hi = hi if found is None else min(hi, found)
            if lo >= hi:
                continue
            state = drops = None
            if options.isolation == "read_committed":
                state = log_.transaction_state(validate_crc=options.validate_crc)
                drops = log_.dropped_batches(state, {"validate_crc": options.validate_crc})
            for rp in log_.plan(lo, hi):
                for start, stop in _split(rp.segment, rp.start, rp.stop,
                                          options.max_partition_bytes, options.use_index):
                    drop = None
                    if drops is not None:   # only this slice's batches travel with it
                        drop = drops[rp.segment.path]
                        end = np.iinfo(np.int64).max if stop is None else stop
                        drop = drop[(drop >= start) & (drop < end)]
                    slices.append(SegmentSlice(log_.topic, log_.partition, str(rp.segment.path),
                                               start, stop, lo, hi, state, drop))
    return slices


# --- reading -----------------------------------------------------------------

def to_record_batch(records: Records, topic: str | None, partition: int | None,
                    schema: pa.Schema) -> pa.RecordBatch:
    """One Arrow batch in the Kafka source's schema; key/value buffers shared."""
    n = len(records)
    key = records.key.to_arrow()
    value = records.value.to_arrow()
    if topic is None:
        topic_arr = pa.nulls(n, pa.string())
    else:
        raw = topic.encode()
        topic_arr = pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(raw)),
                             pa.py_buffer(raw * n)])
    part_arr = (pa.nulls(n, pa.int32()) if partition is None
                else pa.array(np.full(n, partition, np.int32)))
    ts = records.timestamp
    has_ts = ts != -1
    micros = np.where(has_ts, ts, 0) * 1000
    ts_arr = pa.Array.from_buffers(
        schema.field("timestamp").type, n,
        [None if has_ts.all() else pa.py_buffer(np.packbits(has_ts, bitorder="little")),
         pa.py_buffer(micros)], null_count=int(n - has_ts.sum()))
    headers = records.headers
    list_type = schema.field("headers").type
    struct_type = list_type.value_type
    lo, hi = int(headers.offsets[0]), int(headers.offsets[-1])
    keys, values = headers.keys, headers.values
    if lo != 0 or hi != len(keys):
        entries = np.arange(lo, hi, dtype=np.int64)
        keys, values = keys.take(entries), values.take(entries)
    entries_arr = pa.StructArray.from_arrays([keys.to_arrow(), values.to_arrow()],
                                             fields=list(struct_type))
    counts = headers.counts()
    has_headers = counts > 0
    headers_arr = pa.Array.from_buffers(
        list_type, n,
        [None if has_headers.all() else pa.py_buffer(np.packbits(has_headers, bitorder="little")),
         pa.py_buffer((headers.offsets - headers.offsets[0]).astype(np.int32))],
        null_count=int(n - has_headers.sum()), children=[entries_arr])
    return pa.RecordBatch.from_arrays(
        [key, value, topic_arr, part_arr, pa.array(records.offset), ts_arr,
         pa.array(records.timestamp_type.astype(np.int32)), headers_arr], schema=schema)


def read_slice(piece: SegmentSlice, options: Options, schema: pa.Schema):
    """Arrow batches of one input partition (runs on an executor)."""
    opts = options.decode_options()
    with open_source(piece.path) as (view, path):
        for chunk in decode_chunks(view, path, opts, start=piece.start, stop=piece.stop,
                                   chunk_records=options.chunk_records, chunk_bytes=64 << 20,
                                   drop_positions=piece.drop_positions):
            if chunk.end is not None and chunk.end.reason == "corrupt":
                log.warning("kbatch: stopped reading %s at byte %d (the last good batch "
                            "ends there): %s", path, chunk.end.valid_bytes, chunk.end.error)
            chunk = chunk.select_offsets(piece.lo, piece.hi)
            if piece.txn_state is not None:
                chunk = piece.txn_state.filter(chunk)
            if len(chunk):
                yield to_record_batch(chunk, piece.topic, piece.partition, schema)


class KbatchReader(DataSourceReader):
    """Plans input partitions (driver) and decodes them (executors)."""

    def __init__(self, options, schema: StructType):
        self.options = Options.parse(options)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self):
        return pack(plan(self.options), self.options.max_partition_bytes,
                    self.options.min_partitions)

    def read(self, partition):
        if not isinstance(partition, SlicePack):   # Spark's single empty partition
            return iter(())
        return (batch for piece in partition.slices
                for batch in read_slice(piece, self.options, self.arrow_schema))


def _column(f) -> str | None:
    attr = getattr(f, "attribute", None)
    return attr[0] if attr and len(attr) == 1 else None


class KbatchPushdownReader(KbatchReader):
    """The reader used when Spark's Python filter pushdown is enabled."""

    def pushFilters(self, filters):
        opts = self.options
        for f in filters:
            col = _column(f)
            v = getattr(f, "value", None)
            if col == "offset" and isinstance(v, int) and not isinstance(v, bool):
                if isinstance(f, GreaterThan):
                    opts.offset_lo = max(opts.offset_lo, v + 1)
                elif isinstance(f, GreaterThanOrEqual):
                    opts.offset_lo = max(opts.offset_lo, v)
                elif isinstance(f, LessThan):
                    opts.offset_hi = min(opts.offset_hi, v)
                elif isinstance(f, LessThanOrEqual):
                    opts.offset_hi = min(opts.offset_hi, v + 1)
                elif isinstance(f, EqualTo):
                    opts.offset_lo = max(opts.offset_lo, v)
                    opts.offset_hi = min(opts.offset_hi, v + 1)
                else:
                    yield f
                continue
            if col in ("topic", "partition") and isinstance(f, (EqualTo, In)):
                values = set(v) if isinstance(f, In) else {v}
                attr = "topics" if col == "topic" else "partitions"
                current = getattr(opts, attr)
                setattr(opts, attr, values if current is None else current & values)
                continue
            yield f


class KbatchDataSource(DataSource):
    """``format("kbatch")``: Kafka segments, partition and broker directories."""

    pushdown = False

    @classmethod
    def name(cls) -> str:
        return "kbatch"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        cls = KbatchPushdownReader if self.pushdown else KbatchReader
        return cls(self.options, schema)

    def streamReader(self, schema: StructType):
        from kbatch.spark_stream import KbatchStreamReader
        return KbatchStreamReader(self.options, schema)


def register(spark) -> None:
    """Make ``format("kbatch")`` available in ``spark``.

    Filter pushdown is used when ``spark.sql.python.filterPushdown.enabled``
    is true at this call (Spark refuses a reader with pushdown while it is off).
    """
    enabled = str(spark.conf.get("spark.sql.python.filterPushdown.enabled", "false")).lower()
    source = type("KbatchDataSource", (KbatchDataSource,), {"pushdown": enabled == "true"})
    spark.dataSource.register(source)


def local_session(app: str = "kbatch", *, cores: str = "*", tests: bool = False,
                  extra_conf: dict | None = None):
    """A quiet local SparkSession whose Python workers can import kbatch.

    UI off, bound to 127.0.0.1, 2 shuffle partitions, UTC session time zone,
    log level error. ``tests=True`` adds JVM flags for a fast start
    (C1 only, serial GC) and turns whole-stage codegen off.
    """
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = Path(__file__).with_name("log4j2-quiet.properties")
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    if tests:
        java_opts += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", java_opts)
               .config("spark.executor.extraJavaOptions", java_opts)
               .config("spark.python.worker.reuse", "true"))
    if tests:
        builder = builder.config("spark.sql.codegen.wholeStage", "false")
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


__all__ = ["KbatchDataSource", "SCHEMA", "register", "local_session", "to_record_batch"]
