"""The main job (``make run``): Kafka data at rest -> Parquet + a summary, on Spark.

    1. the log directory: LOG_DIR, or a sample written by ``kbatch sample``
    2. a local Spark session (all cores) with ``format("kbatch")`` registered
    3. read read_committed, write Parquet partitioned by topic
    4. a summary per topic/partition: records, bytes, time range, top keys
    5. a check: Spark's record counts against kbatch's own (``kbatch stats``
       and ``open_log(...).read(isolation="read_committed")``), without Spark

It prints where the output went and how long each stage took.
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path


class Stages:
    def __init__(self):
        self.times: list[tuple[str, float]] = []

    @contextmanager
    def stage(self, name: str):
        print(f"== {name} ...", flush=True)
        start = time.perf_counter()
        yield
        took = time.perf_counter() - start
        self.times.append((name, took))
        print(f"   {name}: {took:.1f} s", flush=True)


def _fmt_ts(value) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _summary(spark, parquet_dir: str):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(parquet_dir)
    per = (df.groupBy("topic", "partition")
             .agg(F.count("*").alias("records"),
                  F.sum(F.coalesce(F.length("key"), F.lit(0))
                        + F.coalesce(F.length("value"), F.lit(0))).alias("bytes"),
                  F.min("timestamp").alias("first_time"), F.max("timestamp").alias("last_time"),
                  F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"))
             .orderBy("topic", "partition").collect())
    keys = (df.where(F.col("key").isNotNull())
              .groupBy("topic", "partition", "key").count()
              .withColumn("rank", F.row_number().over(
                  Window.partitionBy("topic", "partition").orderBy(F.desc("count"), "key")))
              .where("rank <= 3").orderBy("topic", "partition", "rank").collect())
    top: dict = {}
    for row in keys:
        text = bytes(row["key"]).decode("utf-8", "replace")
        top.setdefault((row["topic"], row["partition"]), []).append(f"{text} ({row['count']})")
    return per, top


def _print_table(per, top) -> None:
    header = (f"{'topic':<22} {'part':>4} {'records':>9} {'MB':>7} {'first time (UTC)':<19} "
              f"{'last time (UTC)':<19} {'offsets':<17} top keys")
    print(header)
    print("-" * len(header))
    for row in per:
        offsets = f"{row['first_offset']}..{row['last_offset']}"
        print(f"{row['topic']:<22} {row['partition']:>4} {row['records']:>9} "
              f"{(row['bytes'] or 0) / 1e6:>7.1f} {_fmt_ts(row['first_time']):<19} "
              f"{_fmt_ts(row['last_time']):<19} {offsets:<17} "
              + ", ".join(top.get((row["topic"], row["partition"]), [])))
    print(f"{'total':<22} {'':>4} {sum(r['records'] for r in per):>9} "
          f"{sum((r['bytes'] or 0) for r in per) / 1e6:>7.1f}")


def _check_counts(spark, log_dir: str, per) -> bool:
    """Spark's counts against kbatch's, computed without Spark."""
    import kbatch
    from kbatch.stats import segment_stats

    spark_committed = {(r["topic"], r["partition"]): r["records"] for r in per}
    uncommitted = (spark.read.format("kbatch").load(log_dir)
                   .groupBy("topic", "partition").count().collect())
    spark_all = {(r["topic"], r["partition"]): r["count"] for r in uncommitted}
    ok = True
    for part in kbatch.open_log_dir(log_dir).partitions:
        key = (part.topic, part.partition)
        stats = sum(segment_stats(s.path).records for s in part.segments)
        committed = len(part.read(isolation="read_committed"))
        agree = spark_all.get(key, 0) == stats and spark_committed.get(key, 0) == committed
        ok &= agree
        print(f"   {part.topic}-{part.partition}: kbatch stats {stats} = Spark {spark_all.get(key, 0)}"
              f"; read_committed kbatch {committed} = Spark {spark_committed.get(key, 0)}"
              + ("" if agree else "   <-- MISMATCH"))
    return ok


def run(log_dir: str | None = None, *, out_dir: str = "out", sample_dir: str = "sample",
        sample_records: int = 1_500_000, cores: str = "*") -> int:
    stages = Stages()
    if log_dir is None:
        log_dir = sample_dir
        if not Path(sample_dir).is_dir() or not any(Path(sample_dir).iterdir()):
            with stages.stage(f"write a sample broker data directory ({sample_records} records)"):
                from kbatch.sample import write_sample
                write_sample(sample_dir, records=sample_records)
        else:
            print(f"== using the sample already in {sample_dir}/ (delete it to regenerate)")
    log_dir = str(Path(log_dir).resolve())
    parquet_dir = str(Path(out_dir, "parquet").resolve())
    with stages.stage("start Spark (local, all cores)"):
        from kbatch.spark import local_session
        spark = local_session("kbatch-main", cores=cores,
                              extra_conf={"spark.ui.showConsoleProgress": "false"})
    with stages.stage(f"read {log_dir} read_committed, write Parquet by topic"):
        if Path(parquet_dir).exists():
            shutil.rmtree(parquet_dir)
        (spark.read.format("kbatch").option("isolation", "read_committed").load(log_dir)
         .write.partitionBy("topic").parquet(parquet_dir))
    with stages.stage("summarize per topic/partition"):
        per, top = _summary(spark, parquet_dir)
    print()
    _print_table(per, top)
    print()
    with stages.stage("check counts against kbatch (no Spark)"):
        ok = _check_counts(spark, log_dir, per)
    with stages.stage("internal topics: consumer lag, transactions, metadata (kbatch.internal)"):
        from kbatch.internal.cli import print_internal_summary
        print_internal_summary(log_dir)
    summary_path = Path(out_dir, "summary.json")
    summary_path.write_text(json.dumps([
        {"topic": r["topic"], "partition": r["partition"], "records": r["records"],
         "bytes": r["bytes"], "first_offset": r["first_offset"], "last_offset": r["last_offset"],
         "first_time": _fmt_ts(r["first_time"]), "last_time": _fmt_ts(r["last_time"]),
         "top_keys": top.get((r["topic"], r["partition"]), [])} for r in per], indent=1))
    spark.stop()
    print()
    print(f"Parquet (partitioned by topic): {parquet_dir}")
    print(f"Summary: {summary_path.resolve()}")
    print("Stages: " + ", ".join(f"{name} {took:.1f} s" for name, took in stages.times))
    print("Counts agree with kbatch." if ok else "COUNTS DISAGREE (see above).")
    return 0 if ok else 1
