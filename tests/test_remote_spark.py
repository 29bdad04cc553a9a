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

from .kafka_ref import build_batch  # noqa: E402
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


# --- an object uploaded again between planning and reading -------------------
# The batch reader driven as Spark drives it, without a JVM: partitions() on
# the "driver", read() of pickled copies on an "executor" (the stream's are
# in tests/test_spark_stream.py). A sync uploads the active segment again
# after the broker appended to it: the executor reads the planned bytes from
# the longer object (kbatch.spark.planned), as from a local file appended
# to. A rewrite (other bytes at the planned positions) is a FileChangedError.
# Truth: the values kafka-python encoded, and the local read of those bytes.

ROLLED, ACTIVE, MORE = 30, 40, 20
ACTIVE_LOG = f"t-0/{ROLLED:020d}.log"
ROLLED_LOG = f"t-0/{0:020d}.log"


def run_of(tag: bytes, first: int, n: int) -> list[bytes]:
    """``n`` one-record batches at offsets ``first``..., values ``tag + offset``."""
    return [build_batch([(1_700_000_000_000 + i, b"k%04d" % i, tag + b"%04d" % i, [])],
                        base_offset=i) for i in range(first, first + n)]


def encoded(rolled: int = ROLLED, active: int = ACTIVE) -> list[bytes]:
    return ([b"ROL%04d" % i for i in range(rolled)]
            + [b"ACT%04d" % i for i in range(ROLLED, ROLLED + active)])


LISTED = {ROLLED_LOG: b"".join(run_of(b"ROL", 0, ROLLED)),
          ACTIVE_LOG: b"".join(run_of(b"ACT", ROLLED, ACTIVE))}
APPENDED = b"".join(run_of(b"ACT", ROLLED, ACTIVE + MORE))


@pytest.fixture(scope="module")
def stores(s3):
    """``{name: (URL of a prefix, reader options, put(key, bytes))}``:
    memory:// and the local S3 server."""
    import json

    import fsspec
    mem = fsspec.filesystem("memory")
    options = {"storage.key": "testing", "storage.secret": "testing",
               "storage.client_kwargs": json.dumps({"endpoint_url": s3.proxy.url,
                                                    "region_name": "us-east-1"})}
    return {"memory": ("memory://spark-sync", {},
                       lambda key, data: mem.pipe(f"/spark-sync/{key}", data)),
            "s3": (f"s3://{BUCKET}/spark-sync", options,
                   lambda key, data: s3.fs.pipe_file(f"{BUCKET}/spark-sync/{key}", data))}


def batch_reader(path, options: dict, **extra):
    from pyspark.sql.pandas.types import from_arrow_schema

    from kbatch.spark import KbatchReader
    from kbatch.spark.arrow import arrow_schema
    return KbatchReader({"path": str(path), **options, **extra},
                        from_arrow_schema(arrow_schema(("value", "offset"))))


def read_packs(rd, packs) -> list[bytes]:
    """The values of planned input partitions read by a pickled reader, in
    offset order."""
    import pickle
    remote = pickle.loads(pickle.dumps(rd))
    rows = [r for pack in packs for b in remote.read(pickle.loads(pickle.dumps(pack)))
            for r in b.to_pylist()]
    return [r["value"] for r in sorted(rows, key=lambda r: r["offset"])]


def upload(put, prefix: str, files: dict) -> None:
    for key, data in files.items():
        put(f"{prefix}/{key}", data)


def local_values(tmp_path, files: dict) -> list[bytes]:
    """The local read of a partition of ``files``."""
    for key, data in files.items():
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_bytes(data)
    return kbatch.open_log(tmp_path / "t-0").read().value.to_pylist()


@pytest.mark.parametrize("store", ["memory", "s3"])
@pytest.mark.parametrize("split", [None, 300])
def test_an_object_appended_to_after_planning_reads_the_planned_rows(stores, store, split,
                                                                     tmp_path, caplog):
    """Planned, then the sync uploads the active segment again, longer: the
    planned rows, whether a slice runs to the planned end of the object or
    stops at a batch inside it."""
    url, options, put = stores[store]
    prefix = f"appended-{store}-{split}"
    upload(put, prefix, LISTED)
    extra = {} if split is None else {"maxPartitionBytes": str(split)}
    rd = batch_reader(f"{url}/{prefix}", options, **extra)
    packs = rd.partitions()
    assert split is None or sum(len(p.slices) for p in packs) > 2
    put(f"{prefix}/{ACTIVE_LOG}", APPENDED)
    with caplog.at_level("WARNING"):
        assert read_packs(rd, packs) == encoded() == local_values(tmp_path, LISTED)
    assert "replaced" not in caplog.text


REWRITES = {
    "same size": b"".join(run_of(b"NEW", ROLLED, ACTIVE)),
    "shorter": LISTED[ACTIVE_LOG][:len(LISTED[ACTIVE_LOG]) // 2],
    "longer, other bytes": b"".join(run_of(b"NEW", ROLLED, ACTIVE + MORE)),
    "longer, one planned byte changed": (LISTED[ACTIVE_LOG][:-3] + b"\xff"
                                         + LISTED[ACTIVE_LOG][-2:] + APPENDED[len(
                                             LISTED[ACTIVE_LOG]):]),
}


@pytest.mark.parametrize("store", ["memory", "s3"])
@pytest.mark.parametrize("case", sorted(REWRITES) + ["rolled segment rewritten"])
def test_an_object_rewritten_after_planning_raises(stores, store, case):
    """Other bytes at the planned positions (a rewrite of the same size, a
    truncation, a longer object that is not an append, a rolled segment
    compacted under its name): FileChangedError on the executor, never rows
    of the new object read at the planned positions."""
    url, options, put = stores[store]
    prefix = f"rewritten-{store}-{case.replace(' ', '_').replace(',', '')}"
    upload(put, prefix, LISTED)
    rd = batch_reader(f"{url}/{prefix}", options)
    packs = rd.partitions()
    if case in REWRITES:
        put(f"{prefix}/{ACTIVE_LOG}", REWRITES[case])
    else:
        put(f"{prefix}/{ROLLED_LOG}", b"".join(run_of(b"CMP", 0, ROLLED)))
    with pytest.raises(kbatch.FileChangedError, match="replaced after it was planned"):
        read_packs(rd, packs)


def test_an_object_uploaded_again_while_planning_is_planned_again(s3, stores, tmp_path,
                                                                  caplog):
    """The sync lands between two of the driver's reads of the active
    segment: planning lists again (warned of) and plans the synced object."""
    url, options, put = stores["s3"]
    prefix = "replanned"
    upload(put, prefix, LISTED)
    key = f"spark-sync/{prefix}/{ACTIVE_LOG}"
    s3.proxy.after_next_get(key, lambda: put(f"{prefix}/{ACTIVE_LOG}", APPENDED))
    rd = batch_reader(f"{url}/{prefix}", options)
    with caplog.at_level("WARNING", logger="kbatch.remote"):
        packs = rd.partitions()
    assert "listing again and planning again" in caplog.text
    synced = {ROLLED_LOG: LISTED[ROLLED_LOG], ACTIVE_LOG: APPENDED}
    assert read_packs(rd, packs) == encoded(active=ACTIVE + MORE) == \
        local_values(tmp_path, synced)


def test_an_object_deleted_while_planning_is_planned_again(s3, stores, caplog):
    """Retention deletes the oldest segment between two of the driver's
    reads (read_committed: the driver reads every segment's control
    batches): planning lists again (warned of) and plans what is there
    now, as a read of the partition does (``kbatch.lib.relist``), instead
    of failing the query."""
    url, options, put = stores["s3"]
    prefix = "deleted-while-planning"
    upload(put, prefix, LISTED)
    s3.proxy.after_next_get(f"spark-sync/{prefix}/{ROLLED_LOG}",
                            lambda: s3.fs.rm(f"{BUCKET}/spark-sync/{prefix}/{ROLLED_LOG}"))
    rd = batch_reader(f"{url}/{prefix}", options, isolation="read_committed")
    with caplog.at_level("WARNING", logger="kbatch.remote"):
        packs = rd.partitions()
    assert "listing again and planning again" in caplog.text
    assert read_packs(rd, packs) == encoded(rolled=0)


def test_a_middle_segment_deleted_while_planning_fails_the_query(s3, stores):
    """A segment deleted from the middle while the driver plans, the
    segment before it unchanged (neither retention nor the cleaner): the
    plan of the new listing would lack its offsets and look whole, so the
    query fails with a MissingObjectError naming them."""
    url, options, put = stores["s3"]
    prefix = "deleted-middle-while-planning"
    middle = f"t-0/{ROLLED:020d}.log"
    files = {ROLLED_LOG: b"".join(run_of(b"ROL", 0, ROLLED)),
             middle: b"".join(run_of(b"MID", ROLLED, ROLLED)),
             f"t-0/{2 * ROLLED:020d}.log": b"".join(run_of(b"ACT", 2 * ROLLED, ACTIVE))}
    upload(put, prefix, files)
    s3.proxy.after_next_get(f"spark-sync/{prefix}/{ROLLED_LOG}",
                            lambda: s3.fs.rm(f"{BUCKET}/spark-sync/{prefix}/{middle}"))
    rd = batch_reader(f"{url}/{prefix}", options, isolation="read_committed")
    with pytest.raises(kbatch.MissingObjectError,
                       match=rf"offsets \[{ROLLED}, {2 * ROLLED}\) would be missing"):
        rd.partitions()


@pytest.mark.parametrize("store", ["memory", "s3"])
@pytest.mark.parametrize("which", ["rolled", "active"])
def test_an_object_deleted_after_planning_raises(s3, stores, store, which):
    """A segment deleted between planning and reading (retention, the
    cleaner; ``aws s3 sync --delete``): the executor raises a
    MissingObjectError saying so, never an empty slice."""
    url, options, put = stores[store]
    prefix = f"deleted-{store}-{which}"
    upload(put, prefix, LISTED)
    rd = batch_reader(f"{url}/{prefix}", options)
    packs = rd.partitions()
    key = ROLLED_LOG if which == "rolled" else ACTIVE_LOG
    if store == "memory":
        import fsspec
        fsspec.filesystem("memory").rm(f"/spark-sync/{prefix}/{key}")
    else:
        s3.fs.rm(f"{BUCKET}/spark-sync/{prefix}/{key}")
    with pytest.raises(kbatch.MissingObjectError, match="deleted after it was planned"):
        read_packs(rd, packs)
