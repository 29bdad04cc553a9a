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
    useIndex             true (default): seeks and splits from the
                         .index/.timeindex entries, each checked against the
                         batch it names (the driver reads far less of each
                         segment; damage after a seek is found by a walk);
                         false: from a walk over the batch headers, whatever
                         the index files hold

Offset and timestamp bounds prune whole segments using file names and the
indexes, whether or not Spark's Python filter pushdown is enabled. With
``spark.sql.python.filterPushdown.enabled=true`` (set before ``register``),
filters on ``offset``, ``topic`` and ``partition`` are pushed down as well.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, GreaterThan,
                                    GreaterThanOrEqual, In, LessThan, LessThanOrEqual)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from kbatch.spark import payloads
from kbatch.spark import read as spark_read
from kbatch.spark.arrow import ARROW_TYPES, to_record_batch
from kbatch.lib.batchrows import spark_ddl
from kbatch.spark.options import output_columns, output_level, schema_ddl
from kbatch.spark.plan import (Options, SegmentSlice, SlicePack, by_partition, confirm_planned,
                               pack, plan)
from kbatch.spark.read import HEADER_COLUMNS
from kbatch.spark.timefilter import narrow

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int, "
          "headers array<struct<key:string,value:binary>>")
log = logging.getLogger("kbatch.spark")


# --- reading -----------------------------------------------------------------

def read_slice(piece: SegmentSlice, options: Options, schema: pa.Schema):
    """Arrow batches of one input partition (runs on an executor): the
    reading the streaming source shares (``kbatch.spark.read.read_slice``),
    with the pushed timestamp bounds."""
    return spark_read.read_slice(piece, options.kafka, schema, keep=options.prune_by_time)


# how many times more bytes an input partition covers when the query's
# columns are counted from batch headers (topic/partition only)
HEADER_COUNT_PACKING = 64


class KbatchReader(DataSourceReader):
    """Plans input partitions (driver) and decodes them (executors)."""

    def __init__(self, options, schema: StructType):
        self.options = Options.parse(options)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self):
        if self.options.kafka.view == "latest":
            # the table of a Kafka partition needs all of it in one place
            return by_partition(plan(self.options))
        max_bytes = self.options.max_partition_bytes
        headers = (self.options.kafka.level == "batches"
                   or set(self.arrow_schema.names) <= HEADER_COLUMNS)
        if headers and "maxPartitionBytes" not in self.options.kafka.given:
            # counted from batch headers (61 bytes read a batch): fewer, larger
            # input partitions, so Python workers start fewer tasks
            max_bytes *= HEADER_COUNT_PACKING
        return pack(plan(self.options), max_bytes, self.options.min_partitions)

    def read(self, partition):
        if not isinstance(partition, SlicePack):   # Spark's single empty partition
            return iter(())
        for piece in partition.slices:     # an object uploaded again since planning
            confirm_planned(piece)
        if self.options.kafka.view == "latest":
            return spark_read.read_latest(partition.slices, self.options.kafka,
                                          self.arrow_schema)
        if self.options.kafka.level == "batches":
            return spark_read.batch_level(partition.slices, self.options.kafka,
                                          self.arrow_schema)
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
            if opts.kafka.view == "latest" and col not in ("topic", "partition"):
                yield f          # the table of a pruned read is not the pruned table
                continue
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

    def schema(self):
        if output_level(self.options) == "batches":
            return spark_ddl()
        columns = output_columns(self.options)
        raw = payloads.raw_options(self.options)
        if not payloads.decoded(raw):
            return schema_ddl(columns)
        # valueFormat/keyFormat=registry: the decoded columns' types, from the registry
        types = payloads.field_types(raw, payloads.raw_storage(self.options))
        fields = [pa.field(c, types.get(c, ARROW_TYPES[c])) for c in columns]
        if raw.get("payload_errors") == "null":
            fields += [pa.field(f"{c}_error", pa.string()) for c in columns if c in types]
        return from_arrow_schema(pa.schema(fields))

    def reader(self, schema: StructType) -> DataSourceReader:
        cls = KbatchPushdownReader if self.pushdown else KbatchReader
        return cls(self.options, schema)

    def streamReader(self, schema: StructType):
        from kbatch.spark.stream import KbatchStreamReader
        return KbatchStreamReader(self.options, schema)


WORKER_FIX = (
    "Spark's Python workers cannot import kbatch ({error}; worker Python: {python}). "
    "Install kbatch where the executors run (pip install kbatch-kafka, or its wheel), "
    "or send it with the job: kbatch.spark.register(spark, ship=True) (a wheel given "
    "to addPyFile cannot load kbatch's compiled core from the zip), or point them at a Python "
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


def register(spark, *, check: bool = True, ship=False) -> None:
    """Make ``format("kbatch")`` available in ``spark``.

    ``check``: first make sure the Python workers can import kbatch
    (``check_workers``: a local session is set up to use this interpreter
    when they cannot; on a cluster a ``KbatchError`` says how to fix it).
    ``ship``: True (or the path of a kbatch wheel) sends kbatch with the
    session's jobs (``addFile``; ``addArtifacts`` on Spark Connect) and
    registers a source whose workers unpack it where they cannot import
    kbatch (``kbatch.spark.ship``); no check is needed then.
    Filter pushdown is used when ``spark.sql.python.filterPushdown.enabled``
    is true at this call (Spark refuses a reader with pushdown while it is off).
    """
    enabled = str(spark.conf.get("spark.sql.python.filterPushdown.enabled", "false")).lower()
    if ship:
        from kbatch.spark.ship import add_to_session, package_file, shipped_source
        name = add_to_session(spark, package_file(ship))
        spark.dataSource.register(shipped_source(
            name, enabled == "true", f"{__name__}:KbatchDataSource",
            (f"{__name__}:KbatchReader", f"{__name__}:KbatchPushdownReader",
             "kbatch.spark.stream:KbatchStreamReader")))
        return
    if check:
        check_workers(spark)
    source = type("KbatchDataSource", (KbatchDataSource,), {"pushdown": enabled == "true"})
    spark.dataSource.register(source)


def _option_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        import json
        return json.dumps(value)
    return str(value)


def count(spark, path, **options) -> int:
    """The exact number of records ``spark.read.format("kbatch")`` with
    ``options`` (Spark option names: ``startingOffsets``, ``endingTimestamp``,
    ``isolation``, ``subscribe``, ...; values as strings, or bools, numbers
    and dicts, turned into the strings Spark takes) returns for ``path`` (one
    path or a list), without shipping a row per record: the sum of the
    ``records`` column of the same read at ``level=batches``, which the
    executors compute from the CRC-checked batch headers. ``register(spark)``
    must have been called (a classic or a Spark Connect session)."""
    reader = spark.read.format("kbatch").option("level", "batches")
    for key, value in options.items():
        if str(key).lower() == "level":
            raise ValueError("kbatch.spark.count: level is always batches here")
        reader = reader.option(key, _option_text(value))
    single = isinstance(path, (str, os.PathLike))
    df = reader.load(os.fspath(path) if single else [os.fspath(p) for p in path])
    # an expression string, not pyspark.sql.functions: those build the Column
    # of whichever kind of session the process started with
    total = df.agg({"records": "sum"}).collect()[0][0]
    return int(total or 0)


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


__all__ = ["KbatchDataSource", "SCHEMA", "check_workers", "count", "register", "local_session",
           "to_record_batch"]
