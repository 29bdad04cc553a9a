"""Spark: ``format("kbatch")`` against Spark reading the same records from
Parquet, in the same local session (all cores), on the same machine.

The dataset is the ``small`` segment (5 M records) as a partition directory;
its Parquet copy is written once through kbatch (and a one-row Python data
source gives the floor every Python source's query pays). Queries: count and
groupBy(partition).count, with every column and with ``columns=partition``
(the batch-header count path), ``level=batches`` with ``sum(records)``
beside Parquet's count, an aggregate over every column (headers included),
and a Parquet write.
"""

import os
import shutil

import pytest

from datasets import DATA_DIR, dataset_path

SPARK_DIR = DATA_DIR / "spark"
RECORDS = 5_000_000


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session
    session = local_session("kbatch-bench", cores="*",
                            extra_conf={"spark.ui.showConsoleProgress": "false",
                                        "spark.sql.shuffle.partitions": str(os.cpu_count())})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def sources(spark):
    part = SPARK_DIR / "bench-0"
    seg = part / "00000000000000000000.log"
    if not seg.exists():
        part.mkdir(parents=True, exist_ok=True)
        os.link(dataset_path("small"), seg) if hasattr(os, "link") else shutil.copy(
            dataset_path("small"), seg)
    parquet = SPARK_DIR / "bench.parquet"
    if not parquet.exists():
        (spark.read.format("kbatch").option("includeHeaders", "true").load(str(part))
         .write.parquet(str(parquet)))
    return {"kbatch": spark.read.format("kbatch").option("includeHeaders", "true")
            .load(str(part)),
            "kbatch columns=partition": spark.read.format("kbatch")
            .option("columns", "partition").load(str(part)),
            "kbatch level=batches": spark.read.format("kbatch")
            .option("level", "batches").load(str(part)),
            "parquet": spark.read.parquet(str(parquet))}


def _aggregate(df):
    from pyspark.sql import functions as F
    return df.agg(F.sum(F.length("key")), F.sum(F.length("value")), F.max("offset"),
                  F.min("timestamp"), F.max("timestamp"), F.sum("partition"),
                  F.approx_count_distinct("topic"), F.sum(F.size("headers")),
                  F.sum("timestampType")).collect()


def _count(df):
    return df.count()


def _sum_records(df):
    from pyspark.sql import functions as F
    total = df.agg(F.sum("records")).collect()[0][0]
    if total != RECORDS:       # not a timing: the answer must be the count
        raise AssertionError(f"sum(records) = {total}, expected {RECORDS}")
    return total


def _group_count(df):
    return df.groupBy("partition").count().collect()


def _write(df):
    out = SPARK_DIR / "out.parquet"
    df.write.mode("overwrite").parquet(str(out))


# query -> (function, the kbatch source it runs on[, Parquet's function])
QUERIES = {"count": (_count, "kbatch"),
           "level=batches: sum(records) (Parquet: count)": (_sum_records,
                                                           "kbatch level=batches", _count),
           "count, columns=partition": (_count, "kbatch columns=partition"),
           "groupBy(partition).count": (_group_count, "kbatch"),
           "groupBy(partition).count, columns=partition": (_group_count,
                                                          "kbatch columns=partition"),
           "aggregate": (_aggregate, "kbatch"),
           "parquet write": (_write, "kbatch")}


@pytest.mark.parametrize("query", list(QUERIES))
@pytest.mark.parametrize("source", ["kbatch", "parquet"])
def test_spark(benchmark, spark, sources, query, source):
    fn, kbatch_source, *parquet_fn = QUERIES[query]
    df = sources[kbatch_source if source == "kbatch" else "parquet"]
    if source == "parquet" and parquet_fn:
        fn = parquet_fn[0]
    benchmark.group = f"spark {query}"
    benchmark.extra_info.update(records=RECORDS, bytes=dataset_path("small").stat().st_size,
                                dataset=f"spark {query}")
    benchmark.pedantic(fn, args=(df,), rounds=3, iterations=1, warmup_rounds=1)


def test_batch_level_without_spark(benchmark, sources):
    """What level=batches reads, without Spark: ``read(level="batches")`` of
    the partition on one core (every batch header walked, CRCs checked):
    the part of a level=batches query that is kbatch's own."""
    import kbatch
    log = kbatch.open_log(SPARK_DIR / "bench-0")
    benchmark.group = "spark floor"
    benchmark.extra_info.update(records=RECORDS, bytes=0, dataset="spark floor",
                                label="read(level=batches), no Spark, one core")
    table = benchmark.pedantic(lambda: log.read(level="batches"), rounds=5, iterations=1,
                               warmup_rounds=1)
    if sum(table.column("records").to_pylist()) != RECORDS:
        raise AssertionError("read(level=batches) does not sum to the record count")


FLOORS = {"count, one row": (_count, 1),
          "count, 5 M rows": (_count, RECORDS),
          "groupBy(partition).count, 5 M rows": (_group_count, RECORDS)}


@pytest.mark.parametrize("floor", list(FLOORS))
def test_python_source_floor(benchmark, spark, sources, floor):
    """What any Python data source pays, whatever it reads: a source that
    yields prebuilt Arrow batches of one int column (``partition``, all 0),
    split over the cores as kbatch's plan is. One row: the per-query cost
    (planning in a Python worker, a task in another). 5 M rows: that plus
    Spark turning every Arrow row into a row of its own (Spark 4's Python
    data sources have no column pruning, no aggregate pushdown and no
    columnar read), the least any Python source's count of 5 M records
    costs. Parquet answers a count from its footers."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Prebuilt(DataSourceReader):
        def __init__(self, rows, parts):
            self.rows, self.parts = rows, parts

        def partitions(self):
            return [InputPartition(i) for i in range(self.parts)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa
            n = self.rows // self.parts + (partition.value < self.rows % self.parts)
            for start in range(0, n, 1 << 20):
                k = min(1 << 20, n - start)
                yield pa.RecordBatch.from_arrays(
                    [pa.Array.from_buffers(pa.int32(), k, [None, pa.py_buffer(
                        np.zeros(k, np.int32))])], names=["partition"])

    class PrebuiltSource(DataSource):
        @classmethod
        def name(cls):
            return "kbatch_bench_prebuilt"

        def schema(self):
            return "partition int"

        def reader(self, schema):
            return Prebuilt(int(self.options["rows"]), int(self.options["parts"]))

    fn, rows = FLOORS[floor]
    spark.dataSource.register(PrebuiltSource)
    df = (spark.read.format("kbatch_bench_prebuilt").option("rows", str(rows))
          .option("parts", str(min(rows, os.cpu_count() or 1))).load())
    benchmark.group = "spark floor"
    benchmark.extra_info.update(records=rows, bytes=0, dataset="spark floor", label=floor)
    benchmark.pedantic(fn, args=(df,), rounds=5, iterations=1, warmup_rounds=1)


def test_batch_rows_floor(benchmark, spark, sources):
    """The floor of ``level=batches``: a Python source that yields the very
    rows kbatch's ``level=batches`` read gives (prebuilt once, read from an
    Arrow file, in two input partitions as kbatch plans the header read),
    summed as the ``level=batches`` query is. It is what Spark charges for
    the rows themselves (a row per record batch, 16 columns); the rest of
    ``level=batches``' time is kbatch's own: the header walk with its CRC
    checks over every byte."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    import kbatch
    from kbatch.lib.batchrows import batch_schema
    rows_file = SPARK_DIR / "batch-rows.arrow"
    if not rows_file.exists():
        table = kbatch.open_log(SPARK_DIR / "bench-0").read(level="batches")
        table = table.cast(batch_schema(pa, "us"))
        with pa.OSFile(str(rows_file), "wb") as out, pa.ipc.new_file(out, table.schema) as w:
            w.write_table(table)
    ddl = sources["kbatch level=batches"].schema.simpleString()[len("struct<"):-1]
    ddl = ", ".join(f.replace(":", " ", 1) for f in ddl.split(","))

    class Rows(DataSourceReader):
        def __init__(self, path):
            self.path = path

        def partitions(self):
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition):
            import pyarrow as pa
            table = pa.ipc.open_file(self.path).read_all()
            half = table.num_rows // 2
            part = table.slice(0, half) if partition.value == 0 else table.slice(half)
            yield from part.combine_chunks().to_batches()

    class RowsSource(DataSource):
        @classmethod
        def name(cls):
            return "kbatch_bench_batch_rows"

        def schema(self):
            return ddl

        def reader(self, schema):
            return Rows(self.options["path"])

    spark.dataSource.register(RowsSource)
    df = spark.read.format("kbatch_bench_batch_rows").option("path", str(rows_file)).load()
    benchmark.group = "spark floor"
    benchmark.extra_info.update(records=RECORDS, bytes=0, dataset="spark floor",
                                label="level=batches' rows prebuilt, sum(records)")
    benchmark.pedantic(_sum_records, args=(df,), rounds=5, iterations=1, warmup_rounds=1)
