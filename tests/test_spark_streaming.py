"""spark.readStream.format("kbatch") on a local[2] session: exactly once
across kills and restarts while a writer appends, rolls segments and runs
transactions; Trigger.AvailableNow; maxOffsetsPerTrigger; failOnDataLoss.

The truth is what the writer wrote (its committed values); the output is
counted with pyarrow from the files the Parquet sink committed (listed in
its ``_spark_metadata`` log), never with Spark or kbatch.
"""

import json
import random
import shutil
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from kbatch.lib.writer import LogWriter

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session
    session = local_session("kbatch-stream-tests", cores="2", tests=True,
                            extra_conf={"spark.ui.showConsoleProgress": "false",
                                        "spark.sql.streaming.minBatchesToRetain": "100",
                                        # a loaded machine starts Python workers slowly
                                        "spark.python.authenticate.socketTimeout": "120s"})
    yield session
    session.stop()


def committed_files(out):
    """The data files the file sink committed (its metadata log), not every
    file a killed batch may have left in the directory."""
    paths = set()
    for f in (out / "_spark_metadata").iterdir():
        if f.name.startswith(".") or f.name.endswith(".tmp"):
            continue
        for line in f.read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry.get("action", "add") == "add":
                paths.add(entry["path"])
    return sorted(p.removeprefix("file://") for p in paths)


def sink_values(out) -> list[bytes]:
    if not (out / "_spark_metadata").exists():
        return []
    vals = []
    for path in committed_files(out):
        vals.extend(pq.read_table(path, columns=["value"]).column("value").to_pylist())
    return vals


class Producer(threading.Thread):
    """Appends to two partitions like a broker (segments roll): plain
    records and transactions, some aborted; remembers what is committed."""

    def __init__(self, root, seed, steps=300, pause=0.2):
        super().__init__(daemon=True)
        self.steps, self.pause = steps, pause
        self.logs = [LogWriter(root / f"events-{p}", segment_bytes=16_000, batch_records=20)
                     for p in range(2)]
        self.rng = random.Random(seed)
        self.committed: list[bytes] = []
        self.halt = threading.Event()
        self.n = 0

    def _append(self, p, count, txn):
        values = [b"e%d-%d" % (p, self.n + i) for i in range(count)]
        self.n += count
        self.logs[p].append({"value": values, "timestamp": np.full(count, 1_700_000_000_000)},
                            producer_id=7 + p if txn else -1, transactional=txn)
        return values

    def step(self):
        p = self.rng.randrange(2)
        if self.rng.random() < 0.3:
            values = self._append(p, self.rng.randint(1, 20), True)
            values += self._append(p, self.rng.randint(1, 20), True)
            commit = self.rng.random() < 0.7
            self.logs[p].end_transaction(7 + p, commit=commit)
            if commit:
                self.committed.extend(values)
        else:
            self.committed.extend(self._append(p, self.rng.randint(1, 40), False))
        self.logs[p]._segment._file.flush()

    def run(self):
        for _ in range(self.steps):
            if self.halt.is_set():
                return
            self.step()
            time.sleep(self.pause)

    def finish(self):
        self.halt.set()
        if self.is_alive():
            self.join()
        for log in self.logs:
            log.close()


def start_query(spark, root, out, ck, trigger, **options):
    reader = (spark.readStream.format("kbatch").option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    df = reader.load(str(root)).select("value", "partition", "offset")
    writer = (df.writeStream.format("parquet").option("path", str(out))
              .option("checkpointLocation", str(ck)))
    return writer.trigger(**trigger).start()


def test_kill_and_restart_twenty_times_exactly_once(spark, tmp_path):
    root, out, ck = tmp_path / "logs", tmp_path / "out", tmp_path / "ck"
    producer = Producer(root, seed=11)
    for _ in range(20):
        producer.step()
    producer.start()
    rng = random.Random(5)
    batches = 0
    try:
        for _ in range(20):
            q = start_query(spark, root, out, ck, {"processingTime": "0 seconds"},
                            isolation="read_committed", maxOffsetsPerTrigger=1500)
            # stop at a random point: before the first micro-batch, inside one, between
            deadline = time.monotonic() + 30
            wanted = rng.choice([0, 1, 1, 2])
            while (len(q.recentProgress) < wanted and time.monotonic() < deadline
                   and q.isActive):
                time.sleep(0.1)
            time.sleep(rng.uniform(0, 1.0))
            batches += len(q.recentProgress)
            q.stop()
        # the writer keeps going until segments have rolled (the kills may
        # have been quicker than its appends), read by the final query
        deadline = time.monotonic() + 60
        while (len(list((root / "events-0").glob("*.log"))) <= 3 and producer.is_alive()
               and time.monotonic() < deadline):
            time.sleep(0.2)
    finally:
        producer.finish()
    assert batches >= 8, "too few micro-batches ran before the kills"
    q = start_query(spark, root, out, ck, {"availableNow": True}, isolation="read_committed",
                    maxOffsetsPerTrigger=1500)
    q.awaitTermination()
    got = sink_values(out)
    assert len(producer.committed) > 3000
    assert len(got) == len(set(got)), "duplicated records"
    assert sorted(got) == sorted(producer.committed)
    assert len(list((root / "events-0").glob("*.log"))) > 3            # segments rolled


def test_available_now_and_max_offsets_per_trigger(spark, tmp_path):
    root, out, ck = tmp_path / "logs", tmp_path / "out", tmp_path / "ck"
    producer = Producer(root, seed=3)
    for _ in range(60):
        producer.step()
    producer.finish()
    q = start_query(spark, root, out, ck, {"availableNow": True}, maxOffsetsPerTrigger=300,
                    isolation="read_committed")
    q.awaitTermination()            # processes what exists, then stops by itself
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    print("batches", len(progress), [p["durationMs"].get("triggerExecution") for p in progress])
    assert len(progress) >= 3
    assert all(p["numInputRows"] <= 300 for p in progress)
    for p in progress:
        (source,) = p["sources"]
        start = json.loads(source["startOffset"] or "null") or {"events": {}}   # null: the first
        end = json.loads(source["endOffset"])
        moved = sum(end["events"][k] - start["events"].get(k, 0) for k in end["events"])
        assert moved <= 300
    assert sorted(sink_values(out)) == sorted(producer.committed)


def _delete_oldest(part_dir, keep=1):
    logs = sorted(part_dir.glob("*.log"))
    for seg in logs[:len(logs) - keep]:
        for f in part_dir.glob(seg.stem + ".*"):
            f.unlink()
    return int(sorted(part_dir.glob("*.log"))[0].stem)


@pytest.mark.parametrize("fail", [True, False])
def test_retention_deleting_unread_data(spark, tmp_path, fail):
    root, out, ck = tmp_path / "logs", tmp_path / "out", tmp_path / "ck"
    log = LogWriter(root / "events-0", segment_bytes=4000, batch_records=10)
    first = [b"a%d" % i for i in range(100)]
    log.append({"value": first})
    log._segment._file.flush()
    q = start_query(spark, root, out, ck, {"availableNow": True}, failOnDataLoss=str(fail).lower())
    q.awaitTermination()
    assert sorted(sink_values(out)) == sorted(first)
    second = [b"b%d" % i for i in range(400)]
    log.append({"value": second})
    log.close()
    kept_from = _delete_oldest(root / "events-0")      # retention: unread offsets gone
    assert kept_from > 100
    q = start_query(spark, root, out, ck, {"availableNow": True}, failOnDataLoss=str(fail).lower())
    if fail:
        with pytest.raises(Exception, match="failOnDataLoss=false"):
            q.awaitTermination()
        assert sorted(sink_values(out)) == sorted(first)
    else:
        q.awaitTermination()
        assert sorted(sink_values(out)) == sorted(first + second[kept_from - 100:])
