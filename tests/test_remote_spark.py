"""The Spark source on remote paths, on a cluster-like Spark: two executor
JVMs with their own Python workers (``local-cluster[2,1,1024]``) reading
``s3://`` from a local S3 server (moto) started here. Planning reads only
listings and offset indexes (checked without Spark in
test_remote_plain.py); here the counts and per-partition offset ranges
must equal a local read."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("moto")
pyspark = pytest.importorskip("pyspark")

import kbatch  # noqa: E402

from .remote_s3 import BUCKET, S3  # noqa: E402
from .test_remote_plain import records  # noqa: E402
from .test_remote_tiered import last_offsets  # noqa: E402
from .tiered_encoder import Encoder, encode_partition, kafka_uuid, rsa_pem_pair  # noqa: E402

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def cluster():
    from pyspark.sql import SparkSession

    import kbatch.spark

    from .conftest import stop_shared_spark
    stop_shared_spark()         # getOrCreate would hand back a running local[2] session
    os.environ["SPARK_HOME"] = os.path.dirname(pyspark.__file__)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    path = os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("kbatch-remote")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.executorEnv.PYTHONPATH", path)
             .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kbatch.spark.register(spark)
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


def spark_options(s3) -> dict:
    return {"storage.key": "testing", "storage.secret": "testing",
            "storage.client_kwargs": '{"endpoint_url": "%s", "region_name": "us-east-1"}'
            % s3.proxy.url, "maxPartitionBytes": str(64 << 10), "minPartitions": "4"}


def per_partition(rows) -> dict:
    return {(r["topic"], r["partition"]): (r["n"], r["lo"], r["hi"]) for r in rows}


def test_local_cluster_reads_s3_like_local(cluster, s3, tmp_path):
    from pyspark.sql import functions as F
    for p, codec in enumerate(("lz4", "zstd", "none")):
        kbatch.write_log(tmp_path / f"orders-{p}", records(3000, p), codec=codec,
                         segment_bytes=128 << 10, batch_records=30)
    s3.put_dir(str(tmp_path), "spark-plain")
    priv, pub = rsa_pem_pair()
    topic_id = kafka_uuid()
    enc = Encoder("both", chunk_size=8 << 10, public_pem=pub)
    objects = encode_partition(enc, str(tmp_path / "orders-1"), topic="orders",
                               topic_id=topic_id, partition=1,
                               last_offsets=last_offsets(tmp_path / "orders-1", 2999))
    for key, data in objects.items():
        s3.fs.pipe_file(f"{BUCKET}/spark-tiered/{key}", data)
    s3.fs.invalidate_cache()

    reader = cluster.read.format("kbatch").options(**spark_options(s3))
    df = reader.option("startingOffset", "25").load(f"s3://{BUCKET}/spark-plain")
    assert df.rdd.getNumPartitions() >= 4
    got = per_partition(df.groupBy("topic", "partition").agg(
        F.count("*").alias("n"), F.min("offset").alias("lo"),
        F.max("offset").alias("hi")).collect())
    want = {}
    for p in range(3):
        r = kbatch.open_log(tmp_path / f"orders-{p}").read(25)
        want[("orders", p)] = (len(r), int(r.offset.min()), int(r.offset.max()))
    assert got == want

    tiered = (reader.option("layout", "tiered").option("privateKey", priv.decode())
              .load(f"s3://{BUCKET}/spark-tiered"))
    rows = tiered.select("offset", "value").collect()
    local = kbatch.open_log(tmp_path / "orders-1").read(25)    # the reader keeps startingOffset
    assert sorted(r["offset"] for r in rows) == local.offset.tolist()
    by_offset = {r["offset"]: r["value"] for r in rows}
    assert [by_offset[int(o)] for o in local.offset[:50]] == \
        [local.value[i] for i in range(50)]
    assert np.unique([r["offset"] for r in rows]).size == len(rows)


def test_local_cluster_read_committed_on_s3(cluster, s3, tmp_path):
    """isolation=read_committed over s3://: aborted and open transactions
    left out on the executors, as the local read_committed read does."""
    w = kbatch.LogWriter(tmp_path / "txn-0", segment_bytes=2000)
    for i, commit in enumerate([True, False, True, False, True, None]):
        w.append([(b"k%d" % i, b"v%d-%d" % (i, j), 10 + i, []) for j in range(20)],
                 producer_id=7, transactional=True)
        w.append([(None, b"plain%d" % i, 10 + i, [])])
        if commit is not None:
            w.end_transaction(7, commit=commit)
    w.close()
    s3.put_dir(str(tmp_path), "spark-txn")
    want = kbatch.open_log(tmp_path / "txn-0").read(isolation="read_committed")
    df = (cluster.read.format("kbatch").options(**spark_options(s3))
          .option("isolation", "read_committed").load(f"s3://{BUCKET}/spark-txn"))
    rows = sorted((r["offset"], r["value"]) for r in df.select("offset", "value").collect())
    assert rows == [(int(o), want.value[i]) for i, o in enumerate(want.offset)]
    assert b"v1-0" not in {v for _, v in rows} and len(rows) < 6 * 21
