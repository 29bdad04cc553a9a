"""``format("kbatch")`` through Spark Connect: a Connect server started here
on 127.0.0.1 (PySpark's ``sbin/start-connect-server.sh``, its jar ships in
the pyspark package) and stopped at the end, against a classic local
session over the same files: batch reads with options, ``level=batches``
and ``kbatch.spark.count``, option errors, a streaming read, and
``register(spark, ship=True)`` (``addArtifacts``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kbatch.lib.writer import LogWriter

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("connect")
    for p in range(2):
        with LogWriter(root / f"orders-{p}", segment_bytes=30_000, batch_records=50,
                       codec="zstd" if p else "none") as log:
            for t in range(6):
                n = 120 + 10 * t
                log.append({"key": [b"k%d" % (i % 5) for i in range(n)],
                            "value": [b"v%d-%d" % (t, i) for i in range(n)],
                            "timestamp": 1_700_000_000_000 + t * 1000 + np.arange(n),
                            "headers": [[("h", b"%d" % i)] if i % 2 else [] for i in range(n)]},
                           producer_id=9, transactional=True)
                log.end_transaction(9, commit=t % 3 != 1)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    try:
        from pyspark.sql.connect.utils import check_dependencies
        check_dependencies()
    except ImportError as exc:
        pytest.skip(f"the Spark Connect client's dependencies are missing ({exc}): "
                    "pip install 'kbatch-kafka[connect]' (make test installs them)")
    import pyspark
    home = Path(pyspark.__file__).parent
    script = home / "sbin" / "start-connect-server.sh"
    if not script.exists() or not list((home / "jars").glob("spark-connect_*.jar")):
        pytest.skip(f"this pyspark has no Spark Connect server ({script} and "
                    f"jars/spark-connect_*.jar are needed)")
    where = tmp_path_factory.mktemp("connect-server")
    port = _free_port()
    log4j = ROOT / "kbatch" / "spark" / "log4j2-quiet.properties"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(SPARK_HOME=str(home), SPARK_NO_DAEMONIZE="1", SPARK_LOG_DIR=str(where),
               SPARK_PID_DIR=str(where), PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    out = open(where / "server.out", "wb")
    proc = subprocess.Popen(
        ["bash", str(script), "--master", "local[2]",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
         "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.sql.session.timeZone=UTC",
         "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{log4j} "
                   "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"],
        env=env, cwd=where, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    def ready() -> str:
        """Waits until the server listens (the classic session starts meanwhile:
        two JVMs starting at once on 2 cores take less wall time than one after
        the other)."""
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                tail = (where / "server.out").read_bytes().decode(errors="replace")
                last = [line for line in tail.splitlines() if line.strip()][-3:]
                pytest.skip("the Spark Connect server did not start here (exit status "
                            f"{proc.returncode}): {' | '.join(last)}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return f"sc://127.0.0.1:{port}"
            if time.monotonic() > deadline:
                raise AssertionError("the Spark Connect server did not listen in 240 s: "
                                     + (where / "server.out").read_text()[-2000:])
            time.sleep(0.5)

    try:
        yield ready
    finally:
        os.killpg(proc.pid, signal.SIGTERM)        # the server's own process group
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.close()


@pytest.fixture(scope="module")
def sessions(server):
    """(classic, connect): both registered."""
    # the Connect client's own builder: pyspark's refuses a remote session
    # beside a classic one in one process
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    import kbatch.spark as ks
    from .conftest import shared_spark
    classic = shared_spark()
    connect = RemoteSession.builder.remote(server()).getOrCreate()
    ks.register(connect)            # Connect: the import check is skipped (no SparkContext)
    yield classic, connect
    connect.stop()                  # the classic session stays for later test files


OPTION_SETS = [
    {},
    {"subscribe": "orders", "startingOffsets": '{"orders": {"0": 100, "1": -2}}',
     "endingOffsets": '{"orders": {"0": 500, "1": -1}}', "includeHeaders": "true"},
    {"kafka.isolation.level": "read_committed", "columns": "partition,offset,value"},
    {"level": "batches", "isolation": "read_committed"},
]


def _rows(spark, path, options):
    reader = spark.read.format("kbatch")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(str(path))
    order = ["topic", "partition", "baseOffset"] if options.get("level") == "batches" else \
        [c for c in ("partition", "offset") if c in df.columns]
    return df.schema.simpleString(), [tuple(r) for r in df.orderBy(*order).collect()]


@pytest.mark.parametrize("options", OPTION_SETS, ids=range(len(OPTION_SETS)))
def test_batch_reads_equal_a_classic_session(sessions, data, options):
    classic, connect = sessions
    want = _rows(classic, data, options)
    assert len(want[1]) > 0
    assert _rows(connect, data, options) == want


def test_count_and_errors_equal_a_classic_session(sessions, data):
    import kbatch.spark as ks
    classic, connect = sessions
    for opts in ({}, {"isolation": "read_committed", "startingOffsets": 77}):
        assert ks.count(connect, data, **opts) == ks.count(classic, data, **opts) > 0
    errors = []
    for spark in (classic, connect):
        with pytest.raises(Exception) as info:
            spark.read.format("kbatch").option("validateCrc", "nope").load(str(data)).count()
        errors.append(str(info.value))
    line = "kbatch: option validateCrc='nope' is not accepted: expected true or false"
    assert all(line in e for e in errors), errors


def test_streaming_read_equals_a_classic_session(sessions, data, tmp_path):
    """A Connect stream (availableNow, two micro-batches of at most 1000
    offsets) holds what the classic session's batch read of the same options
    holds (the classic stream is tests/test_spark_streaming.py's; running it
    here again cost 8 s a run)."""
    classic, connect = sessions
    stream = (connect.readStream.format("kbatch").option("startingOffsets", "earliest")
              .option("isolation", "read_committed").option("maxOffsetsPerTrigger", "1000")
              .load(str(data)))
    query = (stream.writeStream.format("memory").queryName("kb_connect")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert len(query.recentProgress) >= 2          # the limit cut the read
    got = sorted(tuple(r) for r in connect.sql(
        "select partition, offset, value from kb_connect").collect())
    want = sorted(tuple(r) for r in classic.read.format("kbatch")
                  .option("isolation", "read_committed").load(str(data))
                  .select("partition", "offset", "value").collect())
    assert got and got == want


def test_register_ship_on_connect(sessions, data):
    import kbatch.spark as ks
    classic, connect = sessions
    ks.register(connect, ship=True)          # addArtifacts(..., file=True)
    try:
        assert ks.count(connect, data) == ks.count(classic, data)
    finally:
        ks.register(connect)
