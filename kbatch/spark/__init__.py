"""A PySpark data source: ``spark.read.format("kbatch").load(path)``.

    import kbatch.spark
    kbatch.spark.register(spark)
    df = (spark.read.format("kbatch")
          .option("isolation", "read_committed")
          .load("/var/lib/kafka/data"))          # or a partition dir, a segment, several

Schema: exactly Spark's built-in Kafka source, in its order:

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int

and with ``includeHeaders=true``, as there, ``headers
array<struct<key:string,value:binary>>`` (null for a record without
headers); ``columns`` keeps only the columns named. Topic and partition come
from the ``<topic>-<partition>`` directory name.

Every segment is a slice of work; a segment larger than ``maxPartitionBytes``
is split at batch boundaries (from a walk over its batch headers, or with
``useIndex`` from its checked ``.index`` entries), and small segments are
packed together (like Spark's file sources) into input partitions of up to
``maxPartitionBytes``, at least ``minPartitions`` of them. ``read()`` yields
``pyarrow.RecordBatch``es built from kbatch's buffers (no Python rows).

Options (case-insensitive, checked by ``kbatch.spark.options``: an unknown
name or a bad value fails the query with one line): those of Spark's Kafka
source with its meaning (``startingOffsets``/``endingOffsets`` with -2/-1,
the timestamp options, ``assign``/``subscribe``/``subscribePattern``,
``includeHeaders``, ``failOnDataLoss``, ``minPartitions``; the README has the
table), and kbatch's own:

    isolation            read_uncommitted (default) | read_committed
                         (alias kafka.isolation.level)
    columns              the schema's columns to produce; topic/partition only
                         counts records from the batch headers
    validateCrc          true (default) | false
    maxDecompressedBytes refuse batches that decompress to more (bytes)
    onCorrupt            fail (default) | stop | skip. stop: the driver decodes
                         the bytes the read covers once (records included, as
                         a batch can pass its CRC and be corrupt inside) to
                         find each partition's first damage, and nothing from
                         there on is read; skip: the driver finds every damaged
                         range from a CRC pass over the batches, and the
                         executors resume at the next valid batch after each.
                         Either way the driver logs a warning (logger
                         kbatch.spark) with the partitions, files, byte ranges
                         and counts, and the result equals open_log's read with
                         the same on_corrupt however the segments are split.
                         The driver pass costs about one more read (stop) or
                         one CRC pass (skip) of the covered bytes.
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

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, GreaterThan,
                                    GreaterThanOrEqual, In, InputPartition, LessThan,
                                    LessThanOrEqual)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from kbatch.lib.decoder import batch_at
from kbatch.lib.log import (LogDir, PartitionLog, Segment, check_segment_end,
                        parse_partition_dir)
from kbatch.lib.paths import PathKind, resolve
from kbatch.lib.records import Records
from kbatch.lib.segment import DecodeOptions, decode_chunks, open_source, transaction_state
from kbatch.lib.txn import TxnState
from kbatch.spark.arrow import to_record_batch
from kbatch.spark.options import KafkaOptions, output_columns, parse_options, schema_ddl
from kbatch.spark import read as spark_read
from kbatch.spark.read import HEADER_COLUMNS, decode_options, group_by_size
from kbatch.spark.stream import batch_ranges, file_range
from kbatch.spark.timefilter import narrow, prune, segment_older_than
from kbatch.wire import UNBOUNDED
from kbatch.spark import remote as remote_paths   # URL paths (object storage)

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int, "
          "headers array<struct<key:string,value:binary>>")
log = logging.getLogger("kbatch.spark")


# --- options ---------------------------------------------------------------

@dataclass
class Options:
    paths: list
    isolation: str = "read_uncommitted"
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
    offset_hi: int = UNBOUNDED
    # pushed-down timestamp filters, widened by a day (kbatch.spark.timefilter):
    # records outside are pruned, Spark still applies the exact filters
    ts_lo: int | None = None
    ts_hi: int | None = None
    kafka: KafkaOptions | None = None  # every option, as Spark's Kafka source means it

    def prune_by_time(self, chunk: Records) -> Records:
        """``chunk`` without the records the pushed timestamp bounds rule out."""
        return prune(chunk, self.ts_lo, self.ts_hi)

    @classmethod
    def parse(cls, options) -> "Options":
        """Checked by ``kbatch.spark.options`` (an unknown option or a bad
        value raises ``OptionError``, one line)."""
        k = parse_options(options)
        return cls(paths=k.all_paths, isolation=k.isolation, validate_crc=k.validate_crc,
                   max_decompressed_bytes=k.max_decompressed_bytes, on_corrupt=k.on_corrupt,
                   max_partition_bytes=k.max_partition_bytes, min_partitions=k.partition_min(),
                   chunk_records=k.chunk_records, use_index=k.use_index, kafka=k)

    def decode_options(self) -> DecodeOptions:
        extra = {}
        if self.max_decompressed_bytes is not None:
            extra["max_decompressed_bytes"] = self.max_decompressed_bytes
        return DecodeOptions(validate_crc=self.validate_crc,
                             on_corrupt="raise" if self.on_corrupt == "fail" else self.on_corrupt,
                             **extra)

    def option_kwargs(self) -> dict:
        """``decode_options()`` as keyword arguments of the log functions."""
        opts = self.decode_options()
        return {name: getattr(opts, name) for name in DecodeOptions.__dataclass_fields__}


# --- planning ----------------------------------------------------------------

class SegmentSlice(InputPartition):
    """Bytes ``[start, stop)`` of one segment, records with offsets in ``[lo, hi)``,
    and (read_committed) the transaction state of its partition with the
    positions of the slice's batches whose records it leaves out."""

    def __init__(self, topic: str | None, partition: int | None, path: str, start: int,
                 stop: int | None, lo: int, hi: int, txn_state: TxnState | None = None,
                 drop_positions: np.ndarray | None = None, inner: bool = False,
                 next_base: int | None = None):
        super().__init__(None)
        # inner: the slice reaches the end of a segment that is not its
        # partition's last (next_base: where the next one starts)
        self.inner, self.next_base = inner, next_base
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
    groups = group_by_size([s.size() for s in slices], max_bytes, min_partitions)
    return [SlicePack([slices[i] for i in g]) for g in groups]


def _logs(path: str, use_index: bool = False) -> list[tuple[PartitionLog | None, Path | None]]:
    """The partition logs (or the single segment file) a path names
    (classified by ``kbatch.lib.paths.resolve``; a wrong path raises ``PathError``)."""
    found = resolve(path)
    if found.kind is PathKind.SEGMENT:
        return [(None, found.path)]
    if found.kind is PathKind.PARTITION:
        return [(PartitionLog(found.path, use_index=use_index), None)]
    return [(part, None) for d in found.paths
            for part in LogDir(d, use_index=use_index).partitions]


def scan_damage(log_: PartitionLog, plans, opts: DecodeOptions):
    """``(stop_at, gaps)`` of the byte ranges ``plans`` of a partition will
    read, for onCorrupt stop/skip: ``stop_at`` = ``(segment index, byte,
    error)`` of the first damage (stop), ``gaps`` = every damaged
    ``SkippedRange`` (skip). Runs on the driver. For stop it decodes every
    record (a batch can pass its CRC and still be corrupt inside), so a
    split read stops exactly where one sequential read would; for skip it
    checks batch headers and CRCs only (the executors find the same gaps
    themselves; this pass is for the driver's warning). Keeps one chunk in
    memory."""
    gaps, segs = [], log_.segments
    index = {seg.path: i for i, seg in enumerate(segs)}
    full = opts.on_corrupt == "stop"
    for rp in plans:
        i = index[rp.segment.path]
        seen = None
        with open_source(rp.segment.path) as (view, path):
            for chunk in decode_chunks(view, path, opts, start=rp.start, stop=rp.stop,
                                       control_only=not full, chunk_records=1 << 16,
                                       chunk_bytes=32 << 20):
                if len(chunk.batches):
                    seen = int(chunk.batches.last_offset.max())
                gaps += chunk.skipped
                if chunk.end is None:
                    continue
                inner = rp.stop is None and i + 1 < len(segs)
                chunk, stopped = check_segment_end(
                    chunk, path, inner, segs[i + 1].base_offset if inner else None, opts, seen)
                gaps += [g for g in chunk.skipped if g not in gaps]
                if stopped:
                    return (i, chunk.end.valid_bytes, chunk.end.error), gaps
    return None, gaps


def _warn_damage(log_: PartitionLog, options: Options, stop_at, gaps) -> None:
    name = f"{log_.topic}-{log_.partition}"
    if stop_at is not None:
        i, position, error = stop_at
        later = len(log_.segments) - i - 1
        log.warning("kbatch: onCorrupt=stop: %s is read up to byte %d of %s only "
                    "(%d later segment(s) not read): %s", name, position,
                    log_.segments[i].path.name, later, error)
    if gaps:
        total = sum(g.stop - g.start for g in gaps)
        log.warning("kbatch: onCorrupt=skip: %s: %d damaged range(s), %d bytes skipped: %s",
                    name, len(gaps), total,
                    "; ".join(f"{Path(g.path).name} bytes {g.start}-{g.stop} ({g.reason}) "
                              f"after offset {g.offset_before}" for g in gaps[:10]))


def split_bytes(max_bytes: int) -> int:
    """Segments are cut into slices of an eighth of ``maxPartitionBytes``
    (at least 8 MiB, or all of it when smaller), which ``pack`` then groups
    into balanced input partitions."""
    return max(max_bytes // 8, min(max_bytes, 8 << 20))


def _split(seg: Segment, start: int, stop: int | None, max_bytes: int,
           use_index: bool = False) -> list[tuple]:
    """Cut ``[start, stop)`` at batch boundaries about every ``max_bytes``:
    every batch's (a header walk), or with ``use_index`` the ``.index``
    positions that hold a whole CRC-valid batch (a segment whose index is
    missing or empty is walked: it would otherwise be one slice, one task)."""
    end = seg.size if stop is None else stop
    if end - start <= max_bytes:
        return [(start, stop)]
    cuts, target = [], start + max_bytes
    indexed = np.unique(seg.offset_index.positions) if use_index else None
    if indexed is not None and len(indexed):
        with open_source(seg.path) as (view, _):
            for pos in indexed.tolist():
                if target <= pos < end and batch_at(view, pos) is not None:
                    cuts.append(pos)
                    target = pos + max_bytes
    else:
        for pos in seg.batch_bounds()["position"].tolist():
            if target <= pos < end:
                cuts.append(pos)
                target = pos + max_bytes
    bounds = [start] + cuts
    return list(zip(bounds, cuts + [stop]))


def _plan_remote(options: Options) -> list:
    """Slices of the URL paths (``kbatch.spark.remote``: listings, manifests
    and offset indexes only). Offsets: a number per partition (or all),
    earliest/latest, and the timestamp options."""
    k = options.kafka

    def offset_range(topic, partition):
        start, end = k.start_spec(topic, partition), k.end_spec(topic, partition)
        lo = start[1] if start[0] == "offset" and start[1] >= 0 else 0
        hi = end[1] if end[0] == "offset" and end[1] >= 0 else UNBOUNDED
        return max(lo, options.offset_lo), min(hi, options.offset_hi)
    slices = []
    for path in options.paths:
        if remote_paths.is_url(path):
            found = remote_paths.plan_remote(
                path, layout=k.layout, storage=k.storage, private_key=k.private_key,
                offset_range=offset_range, max_bytes=options.max_partition_bytes,
                isolation=options.isolation, topics=options.topics,
                partitions=options.partitions, starting_timestamp=k.starting_timestamp,
                ending_timestamp=k.ending_timestamp)
            slices += [s for s in found if k.wants(s.topic, s.partition)]
    return slices


def plan(options: Options) -> list[SegmentSlice]:
    """Input partitions for a read (runs on the driver)."""
    slices = _plan_remote(options)
    k = options.kafka
    entries = [entry for path in options.paths if not remote_paths.is_url(path)
               for entry in _logs(path, options.use_index)]
    found = [(log_.topic, log_.partition) for log_, _ in entries if log_ is not None]
    chosen = set(k.select(found))
    ranges = batch_ranges(k, {(log_.topic, log_.partition): log_ for log_, _ in entries
                              if log_ is not None and (log_.topic, log_.partition) in chosen},
                          options.option_kwargs())
    for log_, file in entries:
        if file is not None:
            topic, part = parse_partition_dir(file.parent.name) or (None, None)
            if options.on_corrupt != "fail":
                with open_source(file) as (view, src):
                    gaps = Records.concat(list(decode_chunks(
                        view, src, options.decode_options(), control_only=True))).skipped
                if gaps:
                    log.warning("kbatch: onCorrupt=skip: %s: %d damaged range(s), %d bytes "
                                "skipped", file, len(gaps),
                                sum(g.stop - g.start for g in gaps))
            if not k.wants(topic, part):
                continue
            lo, hi = file_range(k, topic, part)
            lo, hi = max(lo, options.offset_lo), min(hi, options.offset_hi)
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
        kwargs = options.option_kwargs()
        if (log_.topic, log_.partition) not in ranges:
            continue
        lo, hi = ranges[(log_.topic, log_.partition)]
        lo, hi = max(lo, options.offset_lo), min(hi, options.offset_hi)
        if lo >= hi:
            continue
        state = drops = None
        if options.isolation == "read_committed":
            state = log_.transaction_state(**kwargs)
            drops = log_.dropped_batches(state, kwargs)
        index = {seg.path: i for i, seg in enumerate(log_.segments)}
        plans = log_.plan(lo, hi)
        stop_at = None
        if options.on_corrupt != "fail":
            stop_at, gaps = scan_damage(log_, plans, options.decode_options())
            _warn_damage(log_, options, stop_at, gaps)
        for rp in plans:
            i = index[rp.segment.path]
            if (options.ts_lo is not None and options.use_index
                    and i + 1 < len(log_.segments)
                    and segment_older_than(rp.segment, options.ts_lo)):
                continue        # useIndex: a rolled segment's time index names its maximum
            seg_stop = rp.stop
            if stop_at is not None:
                if i > stop_at[0]:
                    break            # nothing after the first damage
                if i == stop_at[0]:
                    seg_stop = stop_at[1] if rp.stop is None else min(rp.stop, stop_at[1])
                    if seg_stop <= rp.start:
                        break
            inner = seg_stop is None and i + 1 < len(log_.segments)
            next_base = log_.segments[i + 1].base_offset if inner else None
            for start, stop in _split(rp.segment, rp.start, seg_stop,
                                      split_bytes(options.max_partition_bytes),
                                      options.use_index):
                drop = None
                if drops is not None:   # only this slice's batches travel with it
                    drop = drops[rp.segment.path]
                    end = np.iinfo(np.int64).max if stop is None else stop
                    drop = drop[(drop >= start) & (drop < end)]
                slices.append(SegmentSlice(log_.topic, log_.partition, str(rp.segment.path),
                                           start, stop, lo, hi, state, drop,
                                           inner and stop is None, next_base))
    return slices


# --- reading -----------------------------------------------------------------

def read_slice(piece: SegmentSlice, options: Options, schema: pa.Schema):
    """Arrow batches of one input partition (runs on an executor): the
    reading the streaming source shares (``kbatch.spark.read.read_slice``),
    with the pushed timestamp bounds."""
    return spark_read.read_slice(piece, options.kafka, schema, keep=options.prune_by_time)


def read_remote(piece, options: Options, schema: pa.Schema):
    """Arrow batches of one remote slice (runs on an executor): only the
    slice's own byte ranges are read (``kbatch.spark.remote``)."""
    # a projection, as for local slices: columns the query does not produce are not stored
    opts = replace(options.decode_options(),
                   columns=decode_options(options.kafka, schema).columns)
    for chunk in remote_paths.read_remote_slice(piece, opts, options.chunk_records):
        chunk = options.prune_by_time(chunk)
        if not len(chunk):
            continue
        yield to_record_batch(chunk, piece.topic, piece.partition, schema)


# how many times more bytes an input partition covers when the query's
# columns are counted from batch headers (topic/partition only)
HEADER_COUNT_PACKING = 64


class KbatchReader(DataSourceReader):
    """Plans input partitions (driver) and decodes them (executors)."""

    def __init__(self, options, schema: StructType):
        self.options = Options.parse(options)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self):
        max_bytes = self.options.max_partition_bytes
        if (set(self.arrow_schema.names) <= HEADER_COLUMNS
                and "maxPartitionBytes" not in self.options.kafka.given):
            # counted from batch headers (61 bytes read a batch): fewer, larger
            # input partitions, so Python workers start fewer tasks
            max_bytes *= HEADER_COUNT_PACKING
        return pack(plan(self.options), max_bytes, self.options.min_partitions)

    def read(self, partition):
        if not isinstance(partition, SlicePack):   # Spark's single empty partition
            return iter(())
        return (batch for piece in partition.slices
                for batch in (read_remote(piece, self.options, self.arrow_schema)
                              if isinstance(piece, remote_paths.RemoteSlice)
                              else read_slice(piece, self.options, self.arrow_schema)))


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
            if col == "timestamp":
                # pruned here by day-widened bounds, and yielded: Spark applies
                # the exact filter (its datetime's time zone is not ours to guess)
                opts.ts_lo, opts.ts_hi = narrow(f, opts.ts_lo, opts.ts_hi)
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
        return schema_ddl(output_columns(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        cls = KbatchPushdownReader if self.pushdown else KbatchReader
        return cls(self.options, schema)

    def streamReader(self, schema: StructType):
        from kbatch.spark.stream import KbatchStreamReader
        return KbatchStreamReader(self.options, schema)


WORKER_FIX = (
    "Spark's Python workers cannot import kbatch ({error}; worker Python: {python}). "
    "Install kbatch where the executors run (pip install kbatch, or a wheel with "
    "spark.sparkContext.addPyFile / spark.addArtifacts), or point them at a Python "
    "that has it (spark.pyspark.python, PYSPARK_PYTHON, spark.executorEnv.PYTHONPATH); "
    "register(spark, check=False) skips this check")


def _worker_import_error(python: str, pythonpath: str) -> str | None:
    """Whether ``python`` (a local worker's interpreter) imports kbatch.spark
    with the worker's PYTHONPATH: None, or the error it printed. Cheap: the
    interpreter only looks kbatch up (``find_spec``), imports nothing."""
    import subprocess
    env = dict(os.environ)
    env["PYTHONPATH"] = pythonpath
    code = ("import importlib.util, sys\n"
            "if importlib.util.find_spec('kbatch') is None:\n"
            "    sys.exit(\"ModuleNotFoundError: No module named 'kbatch'\")\n")
    try:
        proc = subprocess.run([python, "-c", code], env=env, cwd=os.getcwd(),
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python}: {exc}"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


def _probe_import(_):
    try:
        import kbatch.spark  # noqa: F401
        return None
    except Exception as exc:  # returned to the driver, not raised on the executor
        return f"{type(exc).__name__}: {exc}"


def check_workers(spark) -> None:
    """Make sure Spark's Python workers can import kbatch, before a query
    fails deep inside an executor with ``No module named 'kbatch.spark'``.

    Local mode (the workers run here): the worker Python looks kbatch up in
    a subprocess (a fraction of a second); when it cannot find it, the
    session is pointed at this driver's interpreter and its ``sys.path``
    entry for kbatch, which can (a local session needs nothing installed
    twice). A cluster: one tiny task over one partition imports kbatch.spark
    on an executor; a failure raises ``KbatchError`` saying how to fix it.
    Spark Connect sessions (no SparkContext here) are not checked.
    """
    import shutil
    import sys

    from kbatch.errors import KbatchError
    try:
        sc = spark.sparkContext
    except Exception:               # Spark Connect: no driver-side context to probe
        return
    here = str(Path(__file__).resolve().parents[2])   # the directory holding kbatch/
    if str(sc.master).startswith("local"):
        paths = [p for p in (sc.environment.get("PYTHONPATH", ""),
                             os.environ.get("PYTHONPATH", "")) if p]
        if shutil.which(sc.pythonExec) == sys.executable:
            # this very interpreter: it imports kbatch from ``here`` (kept on the
            # workers' path: a checkout need not be installed); nothing to try
            if here not in os.pathsep.join(paths).split(os.pathsep):
                sc.environment["PYTHONPATH"] = os.pathsep.join([here] + paths)
            return
        if _worker_import_error(sc.pythonExec, os.pathsep.join(paths)) is None:
            return
        # this interpreter imports kbatch from ``here``: the workers use both
        sc.pythonExec = sys.executable
        sc.environment["PYTHONPATH"] = os.pathsep.join([here] + paths)
        return
    [error] = sc.parallelize([0], 1).map(_probe_import).collect()
    if error is not None:
        raise KbatchError(WORKER_FIX.format(error=error, python=sc.pythonExec))


def register(spark, *, check: bool = True) -> None:
    """Make ``format("kbatch")`` available in ``spark``.

    ``check``: first make sure the Python workers can import kbatch
    (``check_workers``: a local session is set up to use this interpreter
    when they cannot; on a cluster a ``KbatchError`` says how to fix it).
    Filter pushdown is used when ``spark.sql.python.filterPushdown.enabled``
    is true at this call (Spark refuses a reader with pushdown while it is off).
    """
    if check:
        check_workers(spark)
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


__all__ = ["KbatchDataSource", "SCHEMA", "check_workers", "register", "local_session",
           "to_record_batch"]
