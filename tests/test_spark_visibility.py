"""``format("kbatch").option("visibility", "consumer")``: a Spark read sees
what a consumer could fetch, ``[log start offset, high watermark)`` from the
data directory's checkpoint files, as the Python API's
``read(visibility="consumer")`` does; "earliest" and "latest" mean those
ends, in batch and streaming queries alike.

The partitions are written by kafka-python's batch builder
(``tests/kafka_ref.py``); the expected offsets follow from what was written
and the checkpoint files the test writes, not from kbatch.
"""

import shutil

import pytest

from tests.kafka_ref import build_batch
from tests.lifecycle_ref import write_partition

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def _partition(directory, records: int, per_segment: int):
    """Offsets 0 .. records - 1, 4 records a batch, a segment every
    ``per_segment`` records; record i has value b"v<i>", key b"k<i % 3>"
    and timestamp T0 + 1000 i."""
    segments, batches = [], []
    for base in range(0, records, 4):
        rows = [(T0 + 1000 * i, b"k%d" % (i % 3), b"v%d" % i, [])
                for i in range(base, min(base + 4, records))]
        batches.append(build_batch(rows, base_offset=base))
        if (base + 4) % per_segment == 0:
            segments.append(batches)
            batches = []
    if batches:
        segments.append(batches)
    write_partition(directory, segments)


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from .conftest import shared_spark
    import kbatch.spark
    session = shared_spark()
    kbatch.spark.register(session)
    return session


@pytest.fixture
def data(tmp_path):
    """t-0: 40 records, log start 10, high watermark 30; t-1: 12 records,
    named by neither checkpoint (not limited)."""
    d = tmp_path / "data"
    _partition(d / "t-0", 40, 16)
    _partition(d / "t-1", 12, 8)
    (d / "log-start-offset-checkpoint").write_text("0\n1\nt 0 10\n")
    (d / "replication-offset-checkpoint").write_text("0\n1\nt 0 30\n")
    return d


def reader(spark, **options):
    """A fresh reader (``DataFrameReader.option`` changes the reader it is called on)."""
    r = spark.read.format("kbatch")
    for k, v in options.items():
        r = r.option(k, v)
    return r


def offsets(df) -> dict:
    got: dict = {}
    for row in df.select("partition", "offset").collect():
        got.setdefault(row["partition"], []).append(row["offset"])
    return {p: sorted(v) for p, v in got.items()}


def test_batch_reads_see_the_consumer_range(spark, data):
    import kbatch.spark as ks
    assert offsets(reader(spark).load(str(data))) == {0: list(range(40)), 1: list(range(12))}
    consumer = {"visibility": "consumer"}
    assert offsets(reader(spark, **consumer).load(str(data))) == \
        {0: list(range(10, 30)), 1: list(range(12))}
    # a partition directory and a segment file take the data directory's files
    assert offsets(reader(spark, **consumer).load(str(data / "t-0"))) == \
        {0: list(range(10, 30))}
    seg = data / "t-0" / f"{16:020d}.log"          # offsets 16 .. 31
    assert offsets(reader(spark, **consumer).load(str(seg))) == {0: list(range(16, 30))}
    # the range options inside it; the batch level and count agree
    assert offsets(reader(spark, **consumer, startingOffsets='{"t": {"0": 12, "1": 3}}',
                          endingOffsets='{"t": {"0": 35, "1": -1}}').load(str(data))) == \
        {0: list(range(12, 30)), 1: list(range(3, 12))}
    rows = reader(spark, **consumer, level="batches").load(str(data)).collect()
    assert sum(r["records"] for r in rows) == 20 + 12
    assert ks.count(spark, str(data), visibility="consumer") == 32
    assert ks.count(spark, str(data)) == 52
    # the table view of the visible range: keys k0..k2, their last visible records
    latest = reader(spark, **consumer, view="latest").load(str(data / "t-0")).collect()
    assert sorted(r["offset"] for r in latest) == [27, 28, 29]


def test_offsets_and_timestamps_below_the_log_start(spark, data):
    consumer = {"visibility": "consumer"}
    below = {**consumer, "startingOffsets": '{"t": {"0": 4, "1": 0}}'}
    with pytest.raises(Exception, match="offset 4 was asked for but the log starts at 10"):
        reader(spark, **below).load(str(data)).collect()
    assert offsets(reader(spark, **below, failOnDataLoss="false").load(str(data)))[0] == \
        list(range(10, 30))
    # a time before the log start: the log start; one past the high watermark
    # has no offset (Kafka answers none there): an error, or latest on request
    early = reader(spark, **consumer, startingTimestamp=str(T0 + 2_000))
    assert offsets(early.load(str(data / "t-0"))) == {0: list(range(10, 30))}
    late = {**consumer, "startingTimestamp": str(T0 + 33_000)}
    with pytest.raises(Exception, match="holds no record at or after it"):
        reader(spark, **late).load(str(data / "t-0")).collect()
    assert reader(spark, **late, startingOffsetsByTimestampStrategy="latest") \
        .load(str(data / "t-0")).count() == 0
    ends = reader(spark, **consumer, endingTimestamp=str(T0 + 25_000)).load(str(data / "t-0"))
    assert offsets(ends) == {0: list(range(10, 25))}


def test_a_stream_starts_at_the_log_start_and_follows_the_high_watermark(spark, data, tmp_path):
    def run():
        got = []
        q = (spark.readStream.format("kbatch").option("visibility", "consumer")
             .option("startingOffsets", "earliest").load(str(data))
             .select("partition", "offset").writeStream
             .foreachBatch(lambda df, _: got.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
        found: dict = {}
        for row in got:
            found.setdefault(row["partition"], []).append(row["offset"])
        return {p: sorted(v) for p, v in found.items()}
    assert run() == {0: list(range(10, 30)), 1: list(range(12))}
    # the broker checkpointed a higher watermark: the next run reads up to it
    (data / "replication-offset-checkpoint").write_text("0\n1\nt 0 37\n")
    assert run() == {0: list(range(30, 37))}


def test_timestamps_are_searched_from_the_log_start(spark, tmp_path):
    """Kafka's offsets-for-times with a log start (FileRecords.searchForTimestamp
    from the log start offset): the first record at or after it stamped late
    enough, not the log-wide answer moved up to the log start. Timestamps out
    of order (CreateTime) around the log start: 5000 1000 1000 1000 6000 7000,
    log start 2, high watermark 6, a start at 4000: offset 4. The same from
    Spark (batch ranges, a load), a data directory read, a partition read and
    the batch level."""
    import kbatch
    from kbatch.spark.options import parse_options
    from kbatch.spark.stream import batch_ranges

    stamps = [5000, 1000, 1000, 1000, 6000, 7000]
    d = tmp_path / "data"
    write_partition(d / "t-0", [[build_batch([(t, b"k", b"v%d" % i, [])], base_offset=i)
                                 for i, t in enumerate(stamps)]])
    (d / "log-start-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    (d / "replication-offset-checkpoint").write_text("0\n1\nt 0 6\n")
    want = [4, 5]
    o = parse_options({"path": str(d), "visibility": "consumer", "startingTimestamp": "4000"})
    assert batch_ranges(o, {("t", 0): kbatch.open_log(d / "t-0")}) == {("t", 0): (4, 6)}
    got = reader(spark, visibility="consumer", startingTimestamp="4000").load(str(d))
    assert offsets(got) == {0: want}
    logs = kbatch.open_log_dir(d)
    assert logs.read(visibility="consumer", start_timestamp=4000)[("t", 0)].offset.tolist() \
        == want
    for path in (d, d / "t-0"):
        assert kbatch.read_table(path, visibility="consumer", start_timestamp=4000) \
            .column("offset").to_pylist() == want
        rows = kbatch.read_table(path, visibility="consumer", start_timestamp=4000,
                                 level="batches")
        assert rows.column("baseOffset").to_pylist() == want
    # without a log start the log-wide answer: offset 0 (stamped 5000)
    assert kbatch.open_log(d / "t-0").read(start_timestamp=4000).offset.tolist() == \
        list(range(6))
    assert kbatch.open_log(d / "t-0").read(start_timestamp=4000, log_start=2) \
        .offset.tolist() == want
