"""Spark: ``format("kbatch")`` against Spark reading the same records from
Parquet, in the same local session (all cores), on the same machine.

The dataset is the ``small`` segment (5 M records) as a partition directory;
its Parquet copy is written once through kbatch. Queries: count and
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
