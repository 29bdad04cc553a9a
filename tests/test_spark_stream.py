"""The streaming reader (kbatch.spark.stream) driven as Spark drives it, without
a Spark session: latestOffset -> partitions -> read (pickled, as on an
executor). Expected rows are what the test wrote, never what kbatch reads."""

import json
import logging
import pickle

import numpy as np
import pytest

from kbatch.spark.arrow import arrow_schema
from kbatch.spark.options import COLUMNS, DataLossError
from kbatch.spark.stream import KbatchStreamReader, rate_limit
from kbatch.lib.writer import LogWriter
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

SCHEMA = arrow_schema(("value", "topic", "partition", "offset"))


class Writer:
    """Partitions written like a broker; remembers every value it wrote and
    whether it is committed (the independent truth)."""

    def __init__(self, root, partitions=2, segment_bytes=1500):
        self.logs = {p: LogWriter(root / f"orders-{p}", segment_bytes=segment_bytes,
                                  batch_records=7) for p in range(partitions)}
        self.committed: list[bytes] = []
        self.pending: dict[int, list[bytes]] = {}
        self.n = 0

    def append(self, p, count, *, txn=False):
        values = [b"orders-%d:%d" % (p, self.n + i) for i in range(count)]
        self.n += count
        self.logs[p].append({"value": values, "key": [None] * count,
                             "timestamp": np.full(count, 1_700_000_000_000 + self.n)},
                            producer_id=100 + p if txn else -1, transactional=txn)
        self.flush(p)
        if txn:
            self.pending.setdefault(p, []).extend(values)
        else:
            self.committed.extend(values)
        return values

    def flush(self, p):
        """Make what was appended visible to readers (the writer buffers)."""
        self.logs[p]._segment._file.flush()

    def end_txn(self, p, commit):
        self.logs[p].end_transaction(100 + p, commit=commit)
        self.flush(p)
        done = self.pending.pop(p, [])
        if commit:
            self.committed.extend(done)

    def close(self):
        for log in self.logs.values():
            log.close()


def reader(root, **options):
    opts = {"path": str(root), "startingOffsets": "earliest"}
    opts.update({k: str(v) for k, v in options.items()})
    return KbatchStreamReader(opts, SCHEMA)


def run(rd, start, end):
    """One micro-batch: plan on the 'driver', read pickled copies on 'executors'."""
    rows = []
    remote = pickle.loads(pickle.dumps(rd))
    for part in rd.partitions(start, end):
        for batch in remote.read(pickle.loads(pickle.dumps(part))):
            rows.extend(batch.to_pylist())
    return rows


def drain(rd, start, limit=ReadAllAvailable(), batches=None):
    """Micro-batches until latestOffset stops moving; returns (rows, end)."""
    rows = []
    while True:
        end = rd.latestOffset(start, limit)
        if end == start:
            return rows, start
        got = run(rd, start, end)
        if batches is not None:
            batches.append((start, end, got))
        rows.extend(got)
        start = end


@pytest.fixture
def writer(tmp_path):
    w = Writer(tmp_path)
    yield w
    w.close()


def values(rows):
    return [r["value"] for r in rows]


def test_growing_directory_read_exactly_once(tmp_path, writer):
    rd = reader(tmp_path)
    start = rd.initialOffset()
    assert start == {"orders": {"0": 0, "1": 0}}
    seen = []
    for step in range(12):
        writer.append(step % 2, 5 + step * 3)
        if step % 3 == 0:
            writer.append(1 - step % 2, 2)
        rows, start = drain(rd, start)
        seen.extend(rows)
    assert sorted(values(seen)) == sorted(writer.committed)
    assert len(list((tmp_path / "orders-0").glob("*.log"))) > 2     # segments rolled
    # rows carry their topic, partition and offset
    for r in seen:
        assert r["topic"] == "orders" and r["value"].startswith(b"orders-%d:" % r["partition"])
    offs = sorted((r["partition"], r["offset"]) for r in seen)
    assert len(set(offs)) == len(offs)


def test_starting_offsets_latest_is_the_streaming_default(tmp_path, writer):
    writer.append(0, 10)
    writer.append(1, 4)
    rd = KbatchStreamReader({"path": str(tmp_path)}, SCHEMA)
    start = rd.initialOffset()
    assert start == {"orders": {"0": 10, "1": 4}}
    new = writer.append(0, 3)
    rows, _ = drain(rd, start)
    assert values(rows) == new


def test_starting_offsets_json_and_timestamp(tmp_path, writer):
    writer.append(0, 10)
    writer.append(1, 10)
    rd = reader(tmp_path, startingOffsets='{"orders": {"0": 4, "1": -1}}')
    assert rd.initialOffset() == {"orders": {"0": 4, "1": 10}}
    with pytest.raises(ValueError, match="leaves out partitions the query reads: orders-1"):
        reader(tmp_path, startingOffsets='{"orders": {"0": 4}}').initialOffset()
    rd = reader(tmp_path, assign='{"orders": [1]}', startingOffsets='{"orders": {"1": 3}}')
    start = rd.initialOffset()
    rows, _ = drain(rd, start)
    assert values(rows) == [b"orders-1:%d" % i for i in range(13, 20)]
    # orders-0's timestamps are all 1_700_000_000_010, orders-1's ..._020
    with pytest.raises(ValueError, match="orders-0 holds no record at or after it"):
        reader(tmp_path, startingTimestamp=1_700_000_000_015).initialOffset()
    rd = reader(tmp_path, startingTimestamp=1_700_000_000_015,
                startingOffsetsByTimestampStrategy="latest")
    assert rd.initialOffset() == {"orders": {"0": 10, "1": 0}}


def test_max_offsets_per_trigger(tmp_path, writer):
    writer.append(0, 50)
    writer.append(1, 9)
    rd = reader(tmp_path, maxOffsetsPerTrigger=10)
    limit = rd.getDefaultReadLimit()
    assert limit == ReadMaxRows(10)
    batches = []
    rows, _ = drain(rd, rd.initialOffset(), limit, batches)
    assert sorted(values(rows)) == sorted(writer.committed)
    assert len(batches) == 6
    for start, end, got in batches:
        moved = sum(end["orders"][p] - start["orders"][p] for p in ("0", "1"))
        assert moved <= 10 and len(got) <= 10
    # ReadAllAvailable (Trigger.Once) ignores the option
    rd2 = reader(tmp_path, maxOffsetsPerTrigger=10)
    assert rd2.latestOffset(rd2.initialOffset(), ReadAllAvailable()) == \
        {"orders": {"0": 50, "1": 9}}


def test_rate_limit_shares_by_backlog():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 90, ("t", 1): 110, ("t", 2): 5}
    got = rate_limit(start, end, 10)
    assert got == {("t", 0): 9, ("t", 1): 101, ("t", 2): 5}
    assert rate_limit(start, end, 1000) == end
    # never more than the limit, even when every partition has a little
    many_start = {("t", i): 0 for i in range(7)}
    many_end = {("t", i): 1 for i in range(7)}
    assert sum(rate_limit(many_start, many_end, 3).values()) == 3


def test_min_offsets_per_trigger_waits_for_data_or_delay(tmp_path, writer):
    writer.append(0, 3)
    rd = reader(tmp_path, minOffsetsPerTrigger=5, maxTriggerDelay="1h")
    assert rd.getDefaultReadLimit() == ReadMinRows(5)
    start = rd.initialOffset()
    assert rd.latestOffset(start, ReadMinRows(5)) == start       # 3 < 5: wait
    writer.append(1, 2)
    assert rd.latestOffset(start, ReadMinRows(5)) == {"orders": {"0": 3, "1": 2}}
    rd = reader(tmp_path, minOffsetsPerTrigger=50, maxTriggerDelay="0ms")
    assert rd.latestOffset(start, ReadMinRows(50)) == {"orders": {"0": 3, "1": 2}}


def test_read_committed_holds_back_at_the_lso(tmp_path, writer):
    rd = reader(tmp_path, isolation="read_committed")
    start = rd.initialOffset()
    writer.append(0, 4)
    writer.append(0, 6, txn=True)          # open transaction from offset 4
    writer.append(0, 5)                    # plain records after it: held back too
    writer.append(1, 3, txn=True)
    writer.end_txn(1, commit=False)        # aborted: never emitted
    writer.append(1, 2)
    rows, start = drain(rd, start)
    assert sorted(values(rows)) == sorted(writer.committed[:4] + writer.committed[9:])
    assert start["orders"]["0"] == 4       # the LSO
    writer.end_txn(0, commit=True)
    more, start = drain(rd, start)
    assert sorted(values(rows + more)) == sorted(writer.committed)
    assert all(not v.startswith(b"orders-1:") or int(v.split(b":")[1]) >= 18
               for v in values(rows + more))


def test_trigger_available_now_stops_at_what_existed(tmp_path, writer):
    writer.append(0, 20)
    rd = reader(tmp_path, maxOffsetsPerTrigger=6)
    start = rd.initialOffset()
    rd.prepareForTriggerAvailableNow()
    first = rd.latestOffset(start, rd.getDefaultReadLimit())
    writer.append(0, 30)                   # added after the query started
    writer.append(1, 5)
    late = LogWriter(tmp_path / "orders-7", batch_records=7)      # a partition, too
    late.append({"value": [b"late"] * 4})
    late.close()
    rows = run(rd, start, first)
    more, end = drain(rd, first, rd.getDefaultReadLimit())
    assert values(rows + more) == writer.committed[:20]
    assert end == {"orders": {"0": 20, "1": 0}}


def _delete_oldest(part_dir):
    oldest = sorted(part_dir.glob("*.log"))[0]
    for f in part_dir.glob(oldest.stem + ".*"):
        f.unlink()
    return int(oldest.stem)


def test_retention_deleting_unread_data(tmp_path, writer, caplog):
    writer.append(0, 300)
    rd = reader(tmp_path)
    start = rd.initialOffset()
    end = rd.latestOffset(start, ReadAllAvailable())
    _delete_oldest(tmp_path / "orders-0")
    second = int(sorted((tmp_path / "orders-0").glob("*.log"))[0].stem)
    with pytest.raises(DataLossError, match=r"orders-0: offset 0 was asked for but the log "
                                            rf"starts at {second}"):
        run(rd, start, end)
    lenient = reader(tmp_path, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        rows = run(lenient, start, end)
    assert "failOnDataLoss=false" in caplog.text
    assert values(rows) == writer.committed[second:300]


def test_segment_deleted_between_planning_and_reading(tmp_path, writer, caplog):
    writer.append(0, 300)
    rd = reader(tmp_path)
    start = rd.initialOffset()
    parts = rd.partitions(start, rd.latestOffset(start, ReadAllAvailable()))
    _delete_oldest(tmp_path / "orders-0")
    second = int(sorted((tmp_path / "orders-0").glob("*.log"))[0].stem)
    with pytest.raises(DataLossError, match="was deleted before offsets"):
        for part in parts:
            list(rd.read(part))
    lenient = reader(tmp_path, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        rows = [r for part in parts for b in lenient.read(part) for r in b.to_pylist()]
    assert values(rows) == writer.committed[second:300]
    assert "was deleted before offsets" in caplog.text


def test_vanished_partition_is_data_loss(tmp_path, writer):
    writer.append(0, 5)
    writer.append(1, 5)
    rd = reader(tmp_path)
    start = rd.initialOffset()
    writer.logs[1].close()
    for f in (tmp_path / "orders-1").iterdir():
        f.unlink()
    (tmp_path / "orders-1").rmdir()
    end = rd.latestOffset(start, ReadAllAvailable())
    assert end == {"orders": {"0": 5}}
    with pytest.raises(DataLossError, match="orders-1: the partition is gone"):
        rd.partitions(start, end)
    assert values(run(reader(tmp_path, failOnDataLoss="false"), start, end)) == \
        writer.committed[:5]


def test_columns_and_headers_in_the_stream(tmp_path, writer):
    writer.append(0, 3)
    rd = KbatchStreamReader({"path": str(tmp_path), "startingOffsets": "earliest"},
                            arrow_schema(COLUMNS))
    rows, _ = drain(rd, rd.initialOffset())
    assert [r["headers"] for r in rows] == [None] * 3 and rows[0]["key"] is None


def test_batch_ranges_with_spark_meaning(tmp_path, writer):
    from kbatch.lib.log import PartitionLog
    from kbatch.spark.options import parse_options
    from kbatch.spark.stream import WHOLE, batch_ranges
    writer.append(0, 300)
    writer.append(1, 20)
    writer.close()
    logs = {("orders", p): PartitionLog(tmp_path / f"orders-{p}") for p in range(2)}

    def ranges(**kw):
        return batch_ranges(parse_options({"path": str(tmp_path), **kw}), logs)

    # "latest" ends read to the end of the segments (WHOLE: no bound)
    assert ranges() == {("orders", 0): (0, WHOLE), ("orders", 1): (0, WHOLE)}
    assert ranges(startingOffsets='{"orders": {"0": 10, "1": -2}}',
                  endingOffsets='{"orders": {"0": -1, "1": 5}}') == \
        {("orders", 0): (10, WHOLE), ("orders", 1): (0, 5)}
    # Spark-Kafka's -1 ending offset means latest (it gave 0 rows before)
    assert ranges(endingOffsets='{"orders": {"0": -1, "1": -1}}') == \
        {("orders", 0): (0, WHOLE), ("orders", 1): (0, WHOLE)}
    assert ranges(startingOffsets="15", endingOffsets="300") == \
        {("orders", 0): (15, 300), ("orders", 1): (15, 300)}
    with pytest.raises(ValueError, match="would start after its ending offset 5"):
        ranges(startingOffsets='{"orders": {"0": 10, "1": 9}}',
               endingOffsets='{"orders": {"0": -1, "1": 5}}')
    oldest = _delete_oldest(tmp_path / "orders-0")
    logs[("orders", 0)] = PartitionLog(tmp_path / "orders-0")
    second = int(sorted((tmp_path / "orders-0").glob("*.log"))[0].stem)
    assert oldest == 0 and second > 0
    with pytest.raises(DataLossError, match=f"log starts at {second}"):
        ranges(startingOffsets='{"orders": {"0": 0, "1": -2}}')
    assert ranges(startingOffsets='{"orders": {"0": 0, "1": -2}}', failOnDataLoss="false") == \
        {("orders", 0): (second, WHOLE), ("orders", 1): (0, WHOLE)}
    assert ranges()[("orders", 0)] == (second, WHOLE)   # earliest is what is on disk


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_counts_from_batch_headers(tmp_path, writer, isolation, monkeypatch):
    """columns=partition counts from batch headers: equal to the writer's
    truth, with offset bounds cutting batches in the middle."""
    import kbatch.spark.read as spark_read
    writer.append(0, 40)
    writer.append(0, 30, txn=True)
    writer.end_txn(0, commit=False)
    writer.append(0, 25, txn=True)
    writer.end_txn(0, commit=True)
    writer.append(0, 50)
    writer.append(0, 9, txn=True)          # open: held back by read_committed
    writer.append(1, 13)
    opts = {"path": str(tmp_path), "isolation": isolation,
            "startingOffsets": '{"orders": {"0": 3, "1": -2}}', "columns": "partition"}
    rd = KbatchStreamReader(opts, arrow_schema(("partition",)))
    start = rd.initialOffset()
    decoded = []
    monkeypatch.setattr(spark_read, "_decoded", lambda *a: decoded.append(a) or iter(()))
    rows, end = drain(rd, start)
    assert not decoded                      # no slice took the decoding path
    monkeypatch.undo()
    per = {p: sum(r["partition"] == p for r in rows) for p in (0, 1)}
    # the truth, from what was written: offsets 0..39 plain, 40..69 aborted,
    # 70 marker, 71..95 committed, 96 marker, 97..146 plain, 147..155 open
    if isolation == "read_committed":
        assert per == {0: (40 - 3) + 25 + 50, 1: 13}
    else:
        assert per == {0: (40 - 3) + 30 + 25 + 50 + 9, 1: 13}
    # the same through the decoder (value column), bounds in mid-batch
    for lo, hi in ((3, 100), (41, 72), (0, 156), (96, 97)):
        bounds = {"orders": {"0": lo}}
        ends = {"orders": {"0": hi}}
        count_rd = KbatchStreamReader({**opts, "assign": '{"orders": [0]}',
                                       "startingOffsets": json.dumps(bounds)},
                                      arrow_schema(("partition",)))
        full_rd = KbatchStreamReader({**opts, "assign": '{"orders": [0]}', "columns": "value",
                                      "startingOffsets": json.dumps(bounds)},
                                     arrow_schema(("value",)))
        counted = len(run(count_rd, bounds, ends))
        full = run(full_rd, bounds, ends)
        assert counted == len(full), (lo, hi)


def test_file_range_of_a_single_segment():
    from kbatch.spark.options import OptionError, parse_options
    from kbatch.spark.stream import WHOLE, file_range

    def rng(topic="t", part=0, **kw):
        return file_range(parse_options({"path": "/x/t-0/0.log", **kw}), topic, part)

    assert rng() == (0, WHOLE)
    assert rng(startingOffsets="5", endingOffsets="9") == (5, 9)
    assert rng(startingOffsets='{"t": {"0": 3}}', endingOffsets='{"t": {"0": -1}}') == (3, WHOLE)
    with pytest.raises(OptionError, match="search by time"):
        rng(startingTimestamp="5")
    with pytest.raises(OptionError, match="not inside a <topic>-<partition>"):
        rng(None, None, startingOffsets='{"t": {"0": 3}}')
    with pytest.raises(OptionError, match="names partitions the query does not read: u-0"):
        rng(startingOffsets='{"t": {"0": 3}, "u": {"0": 1}}')


@pytest.mark.parametrize("on_corrupt", ["fail", "skip"])
def test_torn_tail_of_a_segment_that_is_not_the_last(tmp_path, writer, on_corrupt, caplog):
    """Only the active segment may end inside a batch: a rolled segment whose
    end was cut is damage in the stream as in a batch read (raise by default;
    skip: the damaged bytes left out and logged, later segments read), never
    a silently shorter stream."""
    import kbatch

    for _ in range(6):
        writer.append(0, 20)
    writer.close()
    segs = sorted((tmp_path / "orders-0").glob("*.log"))
    assert len(segs) > 2
    first = segs[0]
    size = first.stat().st_size
    os_truncate = __import__("os").truncate
    os_truncate(first, size - 10)                  # the first segment's last batch torn
    whole = {r.value for s in segs for r in kbatch.read_segment(s, on_corrupt="stop")}
    rd = reader(tmp_path, onCorrupt=on_corrupt)
    start = rd.initialOffset()
    if on_corrupt == "fail":
        with pytest.raises(kbatch.CorruptRecordError, match="not the last segment"):
            drain(rd, start)
        return
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        rows, _ = drain(rd, start)
    got = values(rows)
    assert len(got) == len(set(got))
    first_values = {r.value for r in kbatch.read_segment(first, on_corrupt="stop")}
    assert first_values <= set(got)
    assert set(got) == whole              # every whole batch, the torn one left out
    assert first.name in caplog.text


def test_on_corrupt_stop_is_refused_for_a_stream(tmp_path, writer):
    from kbatch.spark.options import OptionError

    writer.append(0, 3)
    with pytest.raises(OptionError, match="onCorrupt='stop' is not accepted: a stream"):
        reader(tmp_path, onCorrupt="stop")


def test_latest_is_resolved_once_before_the_available_now_target(tmp_path, writer):
    """Spark asks initialOffset more than once (Trigger.AvailableNow:
    prepareForTriggerAvailableNow, initialOffset, latestOffset,
    initialOffset again). On a log being written meanwhile, "latest"
    resolved again moved the start past the planned end (a false
    DataLossError, or an end below the start)."""
    writer.append(0, 5)
    rd = KbatchStreamReader({"path": str(tmp_path), "failOnDataLoss": "true"}, SCHEMA)
    rd.prepareForTriggerAvailableNow()
    writer.append(0, 3)                       # a producer appends while Spark plans
    start = rd.initialOffset()
    end = rd.latestOffset(start, ReadAllAvailable())
    writer.append(0, 4)
    assert rd.initialOffset() == start == {"orders": {"0": 5, "1": 0}}
    assert run(rd, start, end) == []          # AvailableNow: what existed at the start
    # a first micro-batch re-run after a restart resolves "latest" again: its
    # planned end is below that start, and nothing is lost (the next batch
    # starts at that end)
    again = KbatchStreamReader({"path": str(tmp_path), "failOnDataLoss": "true"}, SCHEMA)
    assert run(again, again.initialOffset(), {"orders": {"0": 5, "1": 0}}) == []
    rows, _ = drain(again, {"orders": {"0": 5, "1": 0}})
    assert values(rows) == writer.committed[5:]


def test_a_segment_swapped_by_the_cleaner_between_planning_and_reading(tmp_path):
    """The slices carry byte positions of the file they were planned on; the
    cleaner's swap puts another file at that path: reported as data loss,
    never read from positions that now mean something else."""
    import os
    part = tmp_path / "t-0"
    with LogWriter(part, segment_bytes=1 << 20, batch_records=10) as w:
        w.append({"value": [b"v%d" % i for i in range(50)], "key": [b"k%d" % (i % 5)
                                                               for i in range(50)]})
        w.roll()
        w.append({"value": [b"last"], "key": [b"z"]})
    for fail, expect in (("true", DataLossError), ("false", None)):
        rd = reader(tmp_path, failOnDataLoss=fail)
        start = {"t": {"0": 20}}
        end = rd.latestOffset(start, ReadAllAvailable())
        packs = rd.partitions(start, end)
        seg = part / f"{0:020d}.log"
        data = seg.read_bytes()
        os.replace(seg, tmp_path / "old.log")  # a new file (a new inode) at the same path
        seg.write_bytes(data)
        remote = pickle.loads(pickle.dumps(rd))
        if expect is not None:
            with pytest.raises(expect, match="replaced after it was planned"):
                for pack in packs:
                    list(remote.read(pickle.loads(pickle.dumps(pack))))
        else:
            rows = [r for pack in packs for b in remote.read(pickle.loads(pickle.dumps(pack)))
                    for r in b.to_pylist()]
            assert values(rows) == [b"last"]   # the swapped segment's part reported, skipped
        os.remove(tmp_path / "old.log")


def test_a_log_gone_back_is_reported_at_once_under_a_rate_limit(tmp_path):
    """rate_limit gives a partition whose end fell below its start that end
    (Spark's rateLimit does), so the plan reports it in this micro-batch,
    not after the other partitions' backlog is read."""
    assert rate_limit({("t", 0): 0, ("t", 1): 50}, {("t", 0): 100, ("t", 1): 20}, 10) == \
        {("t", 0): 10, ("t", 1): 20}
    for p, n in ((0, 100), (1, 20)):
        with LogWriter(tmp_path / f"t-{p}", batch_records=5) as w:
            w.append({"value": [b"v"] * n})
    rd = reader(tmp_path, maxOffsetsPerTrigger=10)
    start = {"t": {"0": 0, "1": 50}}
    end = rd.latestOffset(start, ReadMaxRows(10))
    with pytest.raises(DataLossError, match="ends at 20, before offset 50"):
        rd.partitions(start, end)


def test_a_partition_added_later_that_does_not_start_at_0(tmp_path):
    """Spark's Kafka source: "Added partition ... starts from X instead of
    0" is data loss; with failOnDataLoss=false it is read from its
    earliest offset, with a warning."""
    with LogWriter(tmp_path / "t-0", batch_records=5) as w:
        w.append({"value": [b"a"] * 10})
    with LogWriter(tmp_path / "t-1", batch_records=5, base_offset=100) as w:
        w.append({"value": [b"b"] * 4})
    start = {"t": {"0": 10}}                 # t-1 came after the query started
    rd = reader(tmp_path)
    end = rd.latestOffset(start, ReadAllAvailable())
    with pytest.raises(DataLossError, match="starts from offset 100 instead of 0"):
        rd.partitions(start, end)
    lenient = reader(tmp_path, failOnDataLoss="false")
    assert [r["offset"] for r in run(lenient, start, end)] == [100, 101, 102, 103]


# --- an object store: the active segment re-uploaded after appends -----------
# A sync (aws s3 sync, rclone) uploads a partition again when its files
# change: the active segment's object then has a new size and ETag, though
# the bytes a slice was planned on are all still there. Those slices are read
# as a local appended file is; an object whose planned bytes changed (a
# rewrite of the same size, a shorter one, the cleaner's swap under the same
# name) stays replaced.

@pytest.fixture(scope="module")
def stores():
    """``(name, URL of a prefix, stream options, put(key, bytes))`` of
    memory:// and, when moto and s3fs are installed, of a local S3 server."""
    import fsspec
    mem = fsspec.filesystem("memory")
    out = [("memory", "memory://stream-objects", {},
            lambda key, data: mem.pipe(f"/stream-objects/{key}", data))]
    server = None
    try:
        import moto  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError:
        pass
    else:
        from .remote_s3 import BUCKET, S3
        server = S3()
        options = {"storage.key": "testing", "storage.secret": "testing",
                   "storage.client_kwargs": json.dumps(
                       {"endpoint_url": f"http://127.0.0.1:{server.port}",
                        "region_name": "us-east-1"})}
        out.append(("s3", f"s3://{BUCKET}/stream-objects", options,
                    lambda key, data: server.fs.pipe_file(f"{BUCKET}/stream-objects/{key}", data)))
    yield out
    if server is not None:
        server.stop()


def sync(local, put, prefix):
    """Upload every file under ``local`` to ``prefix/``, as a sync does."""
    for f in sorted(local.rglob("*")):
        if f.is_file():
            put(f"{prefix}/{f.relative_to(local).as_posix()}", f.read_bytes())


def planned(rd, start):
    end = rd.latestOffset(start, ReadAllAvailable())
    return end, rd.partitions(start, end)


def assert_replaced(rd, packs, fail: str, caplog, case: str = "") -> None:
    """Reading ``packs`` finds their object replaced: ``DataLossError``, or
    (``failOnDataLoss=false``) no rows and the warning."""
    if fail == "true":
        with pytest.raises(DataLossError, match="replaced after it was planned"):
            read_packs(rd, packs)
        return
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        assert read_packs(rd, packs) == [], case
    assert "replaced after it was planned" in caplog.text, case


def read_packs(rd, packs):
    """The rows of planned input partitions, read by a pickled reader."""
    remote = pickle.loads(pickle.dumps(rd))
    return [r for pack in packs for b in remote.read(pickle.loads(pickle.dumps(pack)))
            for r in b.to_pylist()]


@pytest.mark.parametrize("split", [None, 200])
def test_an_object_appended_to_after_planning_is_read_as_a_local_file(tmp_path, stores, split,
                                                                      caplog):
    """Planned, then the broker appends and the sync uploads the active
    segment again (a new size, a new ETag): the planned rows, exactly what
    the local read of the same bytes gives, without a warning, whether a
    slice runs to the object's planned end or stops at a batch inside it."""
    local = tmp_path / "data"
    w = Writer(local, partitions=1, segment_bytes=1 << 20)
    w.append(0, 20)
    extra = {} if split is None else {"maxPartitionBytes": split}
    for name, url, options, put in stores:
        for fail in ("true", "false"):
            prefix = f"{name}-{split}-{fail}"
            sync(local, put, prefix)
            start = {"orders": {"0": 3}}
            here = reader(local, failOnDataLoss=fail, **extra)
            there = reader(f"{url}/{prefix}", failOnDataLoss=fail, **extra, **options)
            local_end, local_packs = planned(here, start)
            end, packs = planned(there, start)
            assert end == local_end
            assert split is None or sum(len(p.slices) for p in packs) > 1
            w.append(0, 5)
            sync(local, put, prefix)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
                rows = read_packs(there, packs)
            assert rows == read_packs(here, local_packs)
            assert values(rows) == w.committed[3:end["orders"]["0"]]
            assert "failOnDataLoss" not in caplog.text
    w.close()


def test_an_object_rewritten_after_planning_stays_replaced(tmp_path, stores, caplog):
    """A new object whose planned bytes are not the planned object's: a
    rewrite of the same size, a shorter object (a truncation), a longer one
    that starts with other bytes. Data loss, as before: DataLossError, or
    with failOnDataLoss=false a warning and no rows of that segment."""
    local = tmp_path / "data"
    w = Writer(local, partitions=1, segment_bytes=1 << 20)
    w.append(0, 20)
    w.close()
    seg = f"orders-0/{0:020d}.log"
    data = (local / seg).read_bytes()
    same_size = bytearray(data)
    same_size[-3] ^= 0xFF                   # a record's byte in the last batch
    others = tmp_path / "others"
    with LogWriter(others / "t-0", segment_bytes=1 << 20, batch_records=5) as other:
        other.append({"value": [b"another log %d" % i for i in range(40)],
                      "key": [None] * 40, "timestamp": np.full(40, 1_700_000_000_000)})
    longer = (others / "t-0" / f"{0:020d}.log").read_bytes()
    assert len(longer) > len(data)
    cases = {"same size": bytes(same_size), "shorter": data[:len(data) // 2],
             "longer, other bytes": longer,
             # the planned bytes with one byte changed, then appends
             "longer, one planned byte changed": bytes(same_size) + longer}
    for name, url, options, put in stores:
        for case, new in cases.items():
            for fail in ("true", "false"):
                prefix = f"rewritten-{name}-{fail}-{case.replace(' ', '_').replace(',', '')}"
                sync(local, put, prefix)
                rd = reader(f"{url}/{prefix}", failOnDataLoss=fail, **options)
                start = {"orders": {"0": 0}}
                end, packs = planned(rd, start)
                assert end == {"orders": {"0": 20}}
                put(f"{prefix}/{seg}", new)
                assert_replaced(rd, packs, fail, caplog, case)


def test_a_segment_compacted_under_its_name_after_planning_stays_replaced(tmp_path, stores,
                                                                          caplog):
    """Planned while segment 0 was the active one; then rolled twice, and
    the cleaner's swap put segments 0 and 1 cleaned into one segment named
    0: longer than the planned object and starting with the same batch,
    but the planned bytes moved. Replaced, as before."""
    import kbatch
    local = tmp_path / "data"
    part = local / "t-0"
    w = LogWriter(part, segment_bytes=1 << 20, batch_records=5)
    w.append({"value": [b"first %d" % i for i in range(10)],
              "key": [b"a%d" % i for i in range(10)]})           # kept: unique keys
    w.append({"value": [b"dup %d" % i for i in range(10)], "key": [b"dup"] * 10})
    w._segment._file.flush()
    seg0 = f"t-0/{0:020d}.log"
    old = (part / f"{0:020d}.log").read_bytes()
    uploaded = {}
    for name, url, options, put in stores:
        for fail in ("true", "false"):
            prefix = f"compacted-{name}-{fail}"
            sync(local, put, prefix)
            rd = reader(f"{url}/{prefix}", failOnDataLoss=fail, **options)
            uploaded[prefix] = (rd, *planned(rd, {"t": {"0": 0}}))
    w.roll()
    w.append({"value": [b"second %d" % i for i in range(40)],
              "key": [b"b%d" % i for i in range(40)]})
    w.roll()
    w.append({"value": [b"active"], "key": [b"z"]})
    w.close()
    cleaned = tmp_path / "cleaned"
    kbatch.compact(local, cleaned)
    assert not (cleaned / f"t-0/{20:020d}.log").exists()
    new = (cleaned / seg0).read_bytes()
    assert len(new) > len(old) and new[:61] == old[:61] and new[:len(old)] != old
    for name, url, options, put in stores:
        for fail in ("true", "false"):
            prefix = f"compacted-{name}-{fail}"
            rd, end, packs = uploaded[prefix]
            assert end == {"t": {"0": 20}}
            put(f"{prefix}/{seg0}", new)
            assert_replaced(rd, packs, fail, caplog)


def test_an_object_uploaded_again_while_planning_is_listed_again(tmp_path, stores,
                                                                 monkeypatch):
    """A sync that uploads the active segment again between the planner's
    listing and its reads makes those reads refuse the object (it is no
    longer the one listed: FileChangedError); planning lists again and
    plans the object as it is now, as after a segment deleted meanwhile."""
    from kbatch.lib import objects
    local = tmp_path / "data"
    w = Writer(local, partitions=1, segment_bytes=1 << 20)
    w.append(0, 20)
    name, url, options, put = stores[0]          # memory://
    prefix = "replanned"
    sync(local, put, prefix)
    rd = reader(f"{url}/{prefix}", **options)
    start = {"orders": {"0": 0}}
    end = rd.latestOffset(start, ReadAllAvailable())
    confirm, calls = objects.RangeSource.confirm, []

    def upload_during_the_first(self):
        calls.append(1)
        if len(calls) == 1:             # the sync lands while the planner reads
            w.append(0, 5)
            sync(local, put, prefix)
        return confirm(self)
    monkeypatch.setattr(objects.RangeSource, "confirm", upload_during_the_first)
    packs = rd.partitions(start, end)
    monkeypatch.setattr(objects.RangeSource, "confirm", confirm)
    assert len(calls) > 1
    assert values(read_packs(rd, packs)) == w.committed[0:end["orders"]["0"]]
    w.close()


def test_a_segment_gone_from_the_middle_is_missing_data(tmp_path, writer, caplog):
    """A segment deleted between the driver's listings while the segment
    before it is unchanged (neither retention nor the cleaner: a copy in
    progress) is missing data: the stream would pass its offsets for good.
    failOnDataLoss=true fails the micro-batch, false warns and reads on."""
    writer.append(0, 300)
    part = tmp_path / "orders-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 3
    middle, after = int(logs[1].stem), int(logs[2].stem)
    rd = reader(tmp_path)
    lenient = reader(tmp_path, failOnDataLoss="false")
    start = rd.initialOffset()
    end = rd.latestOffset(start, ReadAllAvailable())
    assert lenient.latestOffset(start, ReadAllAvailable()) == end
    for f in part.glob(logs[1].stem + ".*"):
        f.unlink()
    with pytest.raises(DataLossError, match=rf"offsets {middle} to {after - 1} are missing"):
        run(rd, start, end)
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        rows = run(lenient, start, end)
    assert "failOnDataLoss=false" in caplog.text
    mine = [v for v in writer.committed if v.startswith(b"orders-0:")]
    assert values([r for r in rows if r["partition"] == 0]) == mine[:middle] + mine[after:]
    # the oldest segment deleted is retention (its own rule, the log start),
    # not a segment gone from the middle
    fresh = reader(tmp_path, failOnDataLoss="false")
    s2 = fresh.initialOffset()
    e2 = fresh.latestOffset(s2, ReadAllAvailable())
    caplog.clear()
    _delete_oldest(part)
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        assert values([r for r in run(fresh, s2, e2) if r["partition"] == 0]) == mine[after:]
    assert "log starts at" in caplog.text and "last listing" not in caplog.text


def test_a_segment_gone_between_micro_batches_is_missing_data(tmp_path, writer):
    """The middle segment goes after one micro-batch was planned and
    before the next is: the next plan compares with the previous plan's
    listing (``latestOffset`` in between does not replace it), so the
    offsets the stream would pass for good are missing data."""
    writer.append(0, 300)
    part = tmp_path / "orders-0"
    logs = sorted(part.glob("*.log"))
    middle, after = int(logs[1].stem), int(logs[2].stem)
    rd = reader(tmp_path, assign='{"orders": [0]}')
    start = rd.initialOffset()
    first_end = {"orders": {"0": 5}}
    assert values(run(rd, start, first_end))
    for f in part.glob(logs[1].stem + ".*"):
        f.unlink()
    end = rd.latestOffset(first_end, ReadAllAvailable())
    with pytest.raises(DataLossError, match=rf"offsets {middle} to {after - 1} are missing"):
        run(rd, first_end, end)


def test_retention_while_the_driver_lists_does_not_fail_latest_offset(tmp_path, writer,
                                                                      monkeypatch):
    """Retention deletes the oldest segment right after the driver listed
    the partition: remembering the listing (a stat per local segment) takes
    the deleted segment as gone instead of raising."""
    import kbatch.spark.stream as stream
    writer.append(0, 300)
    rd = reader(tmp_path)
    start = rd.initialOffset()
    taken = stream.Snapshot.__init__
    done = []

    def then_retention(self, *args, **kwargs):
        taken(self, *args, **kwargs)
        if not done:
            done.append(_delete_oldest(tmp_path / "orders-0"))
    monkeypatch.setattr(stream.Snapshot, "__init__", then_retention)
    rd._listings.clear()
    end = rd.latestOffset(start, ReadAllAvailable())
    assert done and end["orders"]["0"] == 300
