"""``format("kbatch").option("view", "latest")``: the table view through
Spark (one local[2] session), against the dict model over kafka-python's
records; the option's checks without Spark."""

from __future__ import annotations

import shutil

import pytest

from kbatch.spark.options import OptionError, parse_options
from tests.kafka_ref import build_batch
from tests.lifecycle_ref import latest_model, write_partition
from tests.test_latest import kafka_rows

pytestmark = pytest.mark.spark


def test_view_option_checks():
    assert parse_options({"path": "x"}).view == "all"
    assert parse_options({"path": "x", "VIEW": "latest"}).view == "latest"
    with pytest.raises(OptionError, match="view='newest'"):
        parse_options({"path": "x", "view": "newest"})
    with pytest.raises(OptionError, match="batch queries only"):
        parse_options({"path": "x", "view": "latest"}, streaming=True)


def _write(data, topic: str, n_segments: int, seed: int):
    segments, offset = [], 0
    for s in range(n_segments):
        batches = []
        for b in range(40):
            rows = []
            for j in range(25):
                i = offset + j
                key = None if i % 97 == 0 else b"key-%d" % ((i * seed) % 53)
                value = None if i % 11 == 0 else b"v%d" % i
                rows.append((1_700_000_000_000 + i, key, value, []))
            batches.append(build_batch(rows, base_offset=offset, codec=(b % 3) * 2 % 5))
            offset += len(rows)
        segments.append(batches)
    return write_partition(data / f"{topic}-0", segments)


def test_spark_latest_equals_the_model(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session, register
    data = tmp_path / "data"
    parts = {("a", 0): _write(data, "a", 3, 7), ("b", 0): _write(data, "b", 2, 5)}
    want = {k: sorted((r["offset"], r["key"], r["value"])
                      for r in latest_model(kafka_rows(d)).values()) for k, d in parts.items()}
    spark = local_session("kbatch-latest-tests", cores="2", tests=True,
                          extra_conf={"spark.ui.showConsoleProgress": "false"})
    try:
        register(spark, check=False)
        df = (spark.read.format("kbatch").option("view", "latest")
              .option("maxPartitionBytes", "20000").load(str(data)))
        got = {}
        for r in df.collect():
            got.setdefault((r["topic"], r["partition"]), []).append(
                (r["offset"], bytes(r["key"]), bytes(r["value"])))
        assert {k: sorted(v) for k, v in got.items()} == want
        # a filter on offset is applied to the table, not pushed under it
        top = max(o for o, _, _ in want[("a", 0)])
        assert (df.filter("topic = 'a' and offset >= %d" % top).count()) == 1
        only = (spark.read.format("kbatch").option("view", "latest")
                .option("columns", "offset,topic,partition").load(str(data)))
        assert only.count() == sum(len(v) for v in want.values())
    finally:
        spark.stop()
