"""Spark: ``format("kbatch")`` against Spark reading the same records from
Parquet, in the same local session (all cores), on the same machine.

The dataset is the ``small`` segment (5 M records) as a partition directory;
its Parquet copy is written once through kbatch (and a one-row Python data
source gives the floor every Python source's query pays). Queries: count and
groupBy(partition).count, with every column and with ``columns=partition``
(the batch-header count path), an aggregate over every column (headers
included), and a Parquet write.
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
            "parquet": spark.read.parquet(str(parquet))}


def _aggregate(df):
    from pyspark.sql import functions as F
    return df.agg(F.sum(F.length("key")), F.sum(F.length("value")), F.max("offset"),
                  F.min("timestamp"), F.max("timestamp"), F.sum("partition"),
                  F.approx_count_distinct("topic"), F.sum(F.size("headers")),
                  F.sum("timestampType")).collect()


def _count(df):
    return df.count()


def _group_count(df):
    return df.groupBy("partition").count().collect()


def _write(df):
    out = SPARK_DIR / "out.parquet"
    df.write.mode("overwrite").parquet(str(out))


# query -> (function, the kbatch source it runs on)
QUERIES = {"count": (_count, "kbatch"),
           "count, columns=partition": (_count, "kbatch columns=partition"),
           "groupBy(partition).count": (_group_count, "kbatch"),
           "groupBy(partition).count, columns=partition": (_group_count,
                                                          "kbatch columns=partition"),
           "aggregate": (_aggregate, "kbatch"),
           "parquet write": (_write, "kbatch")}


@pytest.mark.parametrize("query", list(QUERIES))
@pytest.mark.parametrize("source", ["kbatch", "parquet"])
def test_spark(benchmark, spark, sources, query, source):
    fn, kbatch_source = QUERIES[query]
    df = sources[kbatch_source if source == "kbatch" else "parquet"]
    benchmark.group = f"spark {query}"
    benchmark.extra_info.update(records=RECORDS, bytes=dataset_path("small").stat().st_size,
                                dataset=f"spark {query}")
    benchmark.pedantic(fn, args=(df,), rounds=3, iterations=1, warmup_rounds=1)


def test_python_source_floor(benchmark, spark, sources):
    """count() of a Python data source that yields one row: what every
    Python data source pays per query (planning in a Python worker, a task
    in another), whatever it reads. Parquet answers a count from its
    footers, so this floor over Parquet's count bounds any Python source's
    count ratio."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class OneRow(DataSourceReader):
        def read(self, partition):
            yield (1,)

    class OneRowSource(DataSource):
        @classmethod
        def name(cls):
            return "kbatch_bench_one_row"

        def schema(self):
            return "a int"

        def reader(self, schema):
            return OneRow()

    spark.dataSource.register(OneRowSource)
    df = spark.read.format("kbatch_bench_one_row").load()
    benchmark.group = "spark floor"
    benchmark.extra_info.update(records=1, bytes=0, dataset="spark floor",
                                label="one-row Python data source, count")
    benchmark.pedantic(_count, args=(df,), rounds=5, iterations=1, warmup_rounds=1)
