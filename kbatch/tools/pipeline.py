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


def show_key(key: bytes, limit: int = 32) -> str:
    """A record key for people: printable UTF-8 text as it is; mostly
    printable bytes with the others escaped (``order\\x00\\x07``); anything
    else as hex (``0x0000002a``). Cut at ``limit`` characters with ``...``."""
    key = bytes(key)
    if not key:
        return '""'
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        shown = text
    elif key and sum(32 <= c < 127 for c in key) * 4 >= len(key) * 3:
        shown = "".join(chr(c) if 32 <= c < 127 and c != 0x5C else f"\\x{c:02x}" for c in key)
    else:
        shown = "0x" + key.hex()
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


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
        top.setdefault((row["topic"], row["partition"]), []).append(
            (show_key(row["key"]), row["count"]))
    return per, top


def format_table(per, top) -> list[str]:
    """The summary table's lines; every column as wide as its longest cell
    (long topic names keep the columns aligned)."""
    head = ["topic", "part", "records", "MB", "first time (UTC)", "last time (UTC)", "offsets"]
    right = {1, 2, 3}
    rows = [[str(r["topic"]), str(r["partition"]), str(r["records"]),
             f"{(r['bytes'] or 0) / 1e6:.1f}", _fmt_ts(r["first_time"]), _fmt_ts(r["last_time"]),
             f"{r['first_offset']}..{r['last_offset']}"] for r in per]
    total = ["total", "", str(sum(r["records"] for r in per)),
             f"{sum((r['bytes'] or 0) for r in per) / 1e6:.1f}", "", "", ""]
    widths = [max(len(row[i]) for row in [head, total, *rows]) for i in range(len(head))]

    def line(cells, keys=""):
        text = " ".join(c.rjust(w) if i in right else c.ljust(w)
                        for i, (c, w) in enumerate(zip(cells, widths)))
        return (text + " " + keys).rstrip()

    out = [line(head, "top keys")]
    out.append("-" * len(out[0]))
    for r, cells in zip(per, rows):
        out.append(line(cells, ", ".join(f"{k} ({n})" for k, n in
                                          top.get((r["topic"], r["partition"]), []))))
    out.append(line(total))
    return out


def _print_table(per, top) -> None:
    for text in format_table(per, top):
        print(text)


def summary_rows(per, top) -> list[dict]:
    """``summary.json``: one object per topic/partition; top keys shown as in
    the table (escaped or hex, see ``show_key``) with their counts."""
    return [{"topic": r["topic"], "partition": r["partition"], "records": r["records"],
             "bytes": r["bytes"], "first_offset": r["first_offset"],
             "last_offset": r["last_offset"], "first_time": _fmt_ts(r["first_time"]),
             "last_time": _fmt_ts(r["last_time"]),
             "top_keys": [{"key": k, "count": n}
                          for k, n in top.get((r["topic"], r["partition"]), [])]}
            for r in per]


def _check_counts(spark, log_dir: str, per) -> bool:
    """Spark's counts against kbatch's, computed without Spark."""
    from kbatch.lib.log import open_log_dir
    from kbatch.tools.stats import segment_stats

    spark_committed = {(r["topic"], r["partition"]): r["records"] for r in per}
    uncommitted = (spark.read.format("kbatch").option("columns", "topic,partition").load(log_dir)
                   .groupBy("topic", "partition").count().collect())
    spark_all = {(r["topic"], r["partition"]): r["count"] for r in uncommitted}
    ok = True
    for part in open_log_dir(log_dir).partitions:
        key = (part.topic, part.partition)
        stats = sum(segment_stats(s.path).records for s in part.segments)
        committed = len(part.read(isolation="read_committed"))
        agree = spark_all.get(key, 0) == stats and spark_committed.get(key, 0) == committed
        ok &= agree
        print(f"   {part.topic}-{part.partition}: kbatch stats {stats} = Spark {spark_all.get(key, 0)}"
              f"; read_committed kbatch {committed} = Spark {spark_committed.get(key, 0)}"
              + ("" if agree else "   <-- MISMATCH"))
    return ok


def require_spark() -> None:
    """Raise a one-line ``KbatchError`` naming the extra to install when
    PySpark (or the pandas/pyarrow it needs for Python data sources) is missing."""
    from kbatch.errors import KbatchError
    for module in ("pyspark", "pyarrow", "pandas"):
        try:
            __import__(module)
        except ImportError as exc:
            raise KbatchError(f"the main job needs {module} ({exc}): "
                              f"pip install 'kbatch-kafka[spark]' (and Java 17 for Spark)") from None


def preflight(log_dir: str | None, out_dir: str) -> None:
    """Everything that can be checked before anything is written or Spark
    starts: PySpark importable, LOG_DIR a broker data directory, the output
    directory writable where it is."""
    from kbatch.lib.open import expect
    from kbatch.lib.paths import PathError, PathKind
    require_spark()
    if log_dir is not None:
        expect(log_dir, PathKind.DATA_DIR, what="the main job reads a broker data directory")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PathError(f"{out}: exists and is not a directory (--out)")


def run(log_dir: str | None = None, *, out_dir: str = "out", sample_dir: str = "sample",
        sample_records: int = 1_500_000, cores: str = "*") -> int:
    preflight(log_dir, out_dir)
    stages = Stages()
    if log_dir is None:
        log_dir = sample_dir
        if not Path(sample_dir).is_dir() or not any(Path(sample_dir).iterdir()):
            with stages.stage(f"write a sample broker data directory ({sample_records} records)"):
                from kbatch.tools.sample import write_sample
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
        (spark.read.format("kbatch").option("isolation", "read_committed")
         .option("includeHeaders", "true").load(log_dir)
         .write.partitionBy("topic").parquet(parquet_dir))
    with stages.stage("summarize per topic/partition"):
        per, top = _summary(spark, parquet_dir)
    print()
    _print_table(per, top)
    print()
    with stages.stage("check counts against kbatch (no Spark)"):
        ok = _check_counts(spark, log_dir, per)
    with stages.stage("check the segments against what the directory says it held"):
        from kbatch.tools.evidence import missing_data
        missing = missing_data(log_dir)
        for m in missing:
            print(f"   MISSING: {m.describe()}")
        if not missing:
            print("   every offset the checkpoints, indexes, snapshots and commits name is here")
        ok &= not missing
    with stages.stage("internal topics: consumer lag, transactions, metadata (kbatch.internal)"):
        from kbatch.tools.internal_cli import print_internal_summary
        print_internal_summary(log_dir)
    summary_path = Path(out_dir, "summary.json")
    summary_path.write_text(json.dumps(summary_rows(per, top), indent=1, ensure_ascii=False))
    spark.stop()
    print()
    print(f"Parquet (partitioned by topic): {parquet_dir}")
    print(f"Summary: {summary_path.resolve()}")
    print("Stages: " + ", ".join(f"{name} {took:.1f} s" for name, took in stages.times))
    print("Counts agree with kbatch." if ok else
          "COUNTS DISAGREE OR DATA IS MISSING (see above).")
    return 0 if ok else 1


# public names for the other pipelines (kbatch.tools.remote_run)
summarize = _summary
print_table = _print_table
