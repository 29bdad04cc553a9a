"""The PySpark data source against kbatch's own reader, on one local[2] session.

Expected values come from ``kbatch.open_log(...).read()``, which the other
test modules check against kafka-python and the corpus; here the question is
whether Spark returns exactly those records.
"""

import datetime
import json
import shutil
import struct

import numpy as np
import pyarrow as pa
import pytest

import kbatch
from kbatch.lib.writer import LogWriter

from .conftest import CORPUS, needs_corpus
from .digest import digest
from .kafka_ref import build_batch
from .lifecycle_ref import latest_model, write_partition
from .test_latest import kafka_rows

pytestmark = pytest.mark.spark

DIPENDRA = CORPUS / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session
    session = local_session("kbatch-tests", cores="2", tests=True,
                            extra_conf={"spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()


def _ms(ts) -> int:
    if ts is None:
        return -1
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=datetime.timezone.utc)
    return (ts - EPOCH) // datetime.timedelta(milliseconds=1)


def spark_digest(rows) -> str:
    """The corpus digest over Spark rows (headers null means none)."""
    return digest((r["offset"], _ms(r["timestamp"]), r["timestampType"],
                   None if r["key"] is None else bytes(r["key"]),
                   None if r["value"] is None else bytes(r["value"]),
                   [(h["key"], None if h["value"] is None else bytes(h["value"]))
                    for h in (r["headers"] or [])])
                  for r in rows)


def kb(spark):
    """format("kbatch") with the headers column (Spark's includeHeaders)."""
    return spark.read.format("kbatch").option("includeHeaders", "true")


def by_partition(df):
    rows = df.orderBy("topic", "partition", "offset").collect()
    out = {}
    for r in rows:
        out.setdefault((r["topic"], r["partition"]), []).append(r)
    return out


@pytest.fixture(scope="module")
def txn_dir(tmp_path_factory):
    """Two partitions with committed, aborted and open transactions, rolled segments."""
    root = tmp_path_factory.mktemp("txnlog")
    rng = np.random.default_rng(3)
    for partition in range(2):
        with LogWriter(root / f"pay.v1-{partition}", segment_bytes=20_000, batch_records=40,
                       codec="zstd" if partition else "gzip") as log:
            for txn in range(12):
                n = int(rng.integers(5, 80))
                recs = {"key": [b"k%d" % (i % 7) for i in range(n)],
                        "value": [b"p%d-t%d-%d" % (partition, txn, i) for i in range(n)],
                        "timestamp": 1_700_000_000_000 + txn * 1000 + np.arange(n),
                        "headers": [[("h", b"%d" % i)] if i % 3 else [] for i in range(n)]}
                log.append(recs, producer_id=50 + txn % 2, transactional=True)
                log.append({"value": [b"plain-%d" % txn], "timestamp": [1_700_000_000_500]})
                if txn < 11 or partition == 0:
                    log.end_transaction(50 + txn % 2, commit=txn % 3 != 0)
    return root


@needs_corpus
def test_schema_is_the_kafka_source_schema(spark):
    df = kb(spark).load(str(DIPENDRA / "invoice-0"))
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,"
        "headers:array<struct<key:string,value:binary>>>")


@needs_corpus
def test_arrow_batches_match_the_declared_schema_exactly(spark):
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    from kbatch.spark import SCHEMA, to_record_batch

    expected = to_arrow_schema(_parse_datatype_string(SCHEMA), timezone="UTC")
    log = kbatch.open_log(DIPENDRA / "invoice-1")
    part = log.read(0, 5000)
    batch = to_record_batch(part, "invoice", 1, expected)
    assert batch.schema.equals(expected)
    assert batch.num_rows == len(part)
    # key/value buffers are shared with kbatch, not copied
    assert batch.column(1).buffers()[2].address == part.value.data.ctypes.data


@needs_corpus
def test_corpus_directory_equals_open_log(spark):
    df = kb(spark).load(str(DIPENDRA))
    got = by_partition(df)
    logs = kbatch.open_log_dir(DIPENDRA).partitions
    assert set(got) == {(p.topic, p.partition) for p in logs}
    for p in logs:
        want = p.read()
        rows = got[(p.topic, p.partition)]
        assert len(rows) == len(want)
        assert spark_digest(rows) == digest(want)


def test_headers_and_nulls_survive(spark, txn_dir):
    path = txn_dir / "pay.v1-0"
    rows = by_partition(kb(spark).load(str(path)))[("pay.v1", 0)]
    want = kbatch.open_log(path).read()
    assert spark_digest(rows) == digest(want)
    # a record without headers has headers = null, as in Spark's Kafka source
    assert any(r["headers"] is None for r in rows)
    assert any(r["key"] is None for r in rows)


def test_read_committed_equals_open_log(spark, txn_dir):
    df = (kb(spark).option("isolation", "read_committed")
          .load(str(txn_dir)))
    got = by_partition(df)
    for p in kbatch.open_log_dir(txn_dir).partitions:
        want = p.read(isolation="read_committed")
        assert spark_digest(got.get((p.topic, p.partition), [])) == digest(want)
    # partition 1 ends with an open transaction: its plain record after it is hidden
    open_log = kbatch.open_log(txn_dir / "pay.v1-1")
    lso = open_log.read(isolation="read_committed").last_stable_offset
    assert lso < len(open_log.read())
    assert max(r["offset"] for r in got[("pay.v1", 1)]) < lso


@needs_corpus
@pytest.mark.parametrize("lo,hi", [(0, 10), (1000, 31000), (30620, 30621), (99000, 200000)])
def test_offset_ranges(spark, lo, hi):
    path = DIPENDRA / "invoice-1"
    df = (kb(spark).option("startingOffset", str(lo))
          .option("endingOffset", str(hi)).load(str(path)))
    rows = df.orderBy("offset").collect()
    assert spark_digest(rows) == digest(kbatch.open_log(path).read(lo, hi))


@needs_corpus
def test_per_partition_json_offsets(spark):
    df = (kb(spark).option("assign", '{"invoice": [0, 2, 3]}')
          .option("startingOffsets", json.dumps({"invoice": {"0": 100, "2": -2, "3": 90000}}))
          .option("endingOffsets", json.dumps({"invoice": {"0": 200, "2": -1, "3": -1}}))
          .load(str(DIPENDRA)))
    got = by_partition(df)
    assert set(got) == {("invoice", 0), ("invoice", 2), ("invoice", 3)}
    assert [r["offset"] for r in got[("invoice", 0)]] == list(range(100, 200))
    assert min(r["offset"] for r in got[("invoice", 3)]) == 90000
    assert len(got[("invoice", 2)]) == len(kbatch.open_log(DIPENDRA / "invoice-2").read())


@needs_corpus
def test_timestamp_range(spark):
    path = DIPENDRA / "invoice-2"
    full = kbatch.open_log(path).read()
    ts = np.sort(full.timestamp)
    t0, t1 = int(ts[len(ts) // 4]), int(ts[len(ts) // 2])
    df = (kb(spark).option("startingTimestamp", str(t0))
          .option("endingTimestamp", str(t1)).load(str(path)))
    # independent: the earliest offsets whose timestamp reaches t0 and t1
    lo = int(full.offset[np.flatnonzero(full.timestamp >= t0)[0]])
    hi = int(full.offset[np.flatnonzero(full.timestamp >= t1)[0]])
    rows = df.orderBy("offset").collect()
    assert [r["offset"] for r in rows] == list(full.offset[(full.offset >= lo) & (full.offset < hi)])


@needs_corpus
def test_several_paths(spark, txn_dir):
    paths = [str(DIPENDRA / "invoice-3"), str(txn_dir / "pay.v1-0")]
    got = by_partition(kb(spark).load(paths))
    assert set(got) == {("invoice", 3), ("pay.v1", 0)}
    assert len(got[("invoice", 3)]) == len(kbatch.open_log(paths[0]).read())


@needs_corpus
def test_a_single_segment_file(spark):
    seg = DIPENDRA / "invoice-4" / "00000000000000000000.log"
    rows = kb(spark).load(str(seg)).orderBy("offset").collect()
    assert spark_digest(rows) == digest(kbatch.read_segment(seg))
    assert {(r["topic"], r["partition"]) for r in rows} == {("invoice", 4)}


@needs_corpus
def test_small_partitions_split_large_segments(spark):
    path = DIPENDRA / "invoice-0"
    df = (kb(spark).option("maxPartitionBytes", "100000")
          .load(str(path)))
    assert df.rdd.getNumPartitions() > 4
    assert spark_digest(df.orderBy("offset").collect()) == digest(kbatch.open_log(path).read())


def test_use_index_without_an_index_still_splits(tmp_path):
    """A segment whose .index is missing or empty is cut from a header walk
    under useIndex too (it was one slice: one task for the whole segment)."""
    from kbatch.spark import Options, plan
    part = tmp_path / "t-0"
    kbatch.write_log(part, [(b"k", b"v" * 100, 1000 + i, []) for i in range(3000)],
                     batch_records=10)
    index = next(part.glob("*.index"))
    opts = {"path": str(part), "maxPartitionBytes": "40000"}
    walk = [(s.start, s.stop) for s in plan(Options.parse({**opts, "useIndex": "false"}))]
    assert len(walk) > 4
    indexed = plan(Options.parse({**opts, "useIndex": "true"}))
    assert len(indexed) > 4
    for emptied in (b"", None):
        if emptied is None:
            index.unlink()
        else:
            index.write_bytes(emptied)
        assert [(s.start, s.stop) for s in plan(Options.parse({**opts, "useIndex": "true"}))
                ] == walk


@needs_corpus
def test_use_index_plans_cover_the_same_bytes_cut_at_indexed_batches():
    """useIndex splits and seeks from the .index entries: per segment the
    slices cover at least the bytes of those planned from the header walk
    (an index entry is a sparse bound: the reader trims to the offsets), and
    every cut is an indexed position that is a real batch boundary."""
    from kbatch.lib.log import Segment
    from kbatch.spark import Options, plan
    for extra in ({}, {"startingOffset": "1234", "endingOffset": "30621"}):
        opts = {"path": str(DIPENDRA), "maxPartitionBytes": "100000", **extra}
        walk = plan(Options.parse(opts))
        indexed = plan(Options.parse({**opts, "useIndex": "true"}))
        assert len(walk) > 10 and len(indexed) > 10

        def per_segment(slices):
            out = {}
            for sl in slices:
                out.setdefault(sl.path, []).append((sl.start, sl.stop, sl.lo, sl.hi))
            return out

        a, b = per_segment(walk), per_segment(indexed)
        assert a.keys() == b.keys()
        for path in a:
            def end(stop):
                return float("inf") if stop is None else stop
            assert b[path][0][0] <= a[path][0][0] and end(b[path][-1][1]) >= end(a[path][-1][1])
            assert {x[2:] for x in a[path]} == {x[2:] for x in b[path]}
            cuts = [x[1] for x in b[path][:-1]]
            assert cuts == [x[0] for x in b[path][1:]]
            seg = Segment(path)
            boundaries = set(seg.batch_bounds()["position"].tolist())
            assert set(cuts) | {b[path][0][0]} | ({b[path][-1][1]} - {None}) <= boundaries
            indexed_positions = set(seg.offset_index.positions.tolist())
            if indexed_positions:
                assert set(cuts) <= indexed_positions
            else:       # no index entries: cut from the walk, as without useIndex
                assert b[path] == a[path]


@needs_corpus
def test_use_index_reads_equal_open_log(spark):
    path = DIPENDRA / "invoice-0"
    full = kbatch.open_log(path).read()
    t0 = int(np.sort(full.timestamp)[len(full) // 3])
    df = (kb(spark).option("useIndex", "true")
          .option("maxPartitionBytes", "100000").option("startingOffset", "777")
          .option("endingTimestamp", str(t0)).load(str(path)))
    want = kbatch.open_log(path, use_index=True).read(777, end_timestamp=t0)
    assert len(want) > 0
    assert spark_digest(df.orderBy("offset").collect()) == digest(
        kbatch.open_log(path).read(777, end_timestamp=t0)) == digest(want)


@needs_corpus
def test_filter_pushdown_on_and_off_give_the_same_rows(spark):
    from pyspark.sql import functions as F

    from kbatch.spark import register
    path = str(DIPENDRA)
    query = lambda: (kb(spark).load(path)  # noqa: E731
                     .where((F.col("offset") >= 500) & (F.col("offset") < 700)
                            & (F.col("partition") == 2) & (F.col("topic") == "invoice"))
                     .orderBy("offset").collect())
    off = query()
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        register(spark)
        on = query()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        register(spark)
    assert [r["offset"] for r in on] == [r["offset"] for r in off] == list(range(500, 700))
    assert spark_digest(on) == spark_digest(off)


def _corrupt_copy(tmp_path):
    part = tmp_path / "bad-0"
    part.mkdir()
    src = DIPENDRA / "invoice-0" / "00000000000000000000.log"
    data = bytearray(src.read_bytes())
    # flip a byte inside the third batch's records (covered by its CRC)
    pos = 0
    for _ in range(2):
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    data[pos + 100] ^= 0xFF
    (part / src.name).write_bytes(bytes(data))
    return part, pos


@needs_corpus
def test_corrupt_segment_names_the_file(spark, tmp_path):
    part, pos = _corrupt_copy(tmp_path)
    with pytest.raises(Exception) as info:
        kb(spark).load(str(part)).count()
    text = str(info.value)
    assert "00000000000000000000.log" in text and "CRC mismatch" in text
    assert f"at byte {pos} " in text        # the damaged batch, as verify names it


@needs_corpus
def test_on_corrupt_stop_keeps_the_good_batches(spark, tmp_path):
    part, pos = _corrupt_copy(tmp_path)
    rows = (kb(spark).option("onCorrupt", "stop").load(str(part))
            .orderBy("offset").collect())
    want = kbatch.read_segment(part / "00000000000000000000.log", on_corrupt="stop")
    assert want.end.reason == "corrupt" and want.end.valid_bytes == pos
    assert spark_digest(rows) == digest(want)


@needs_corpus
def test_bad_options_are_refused(spark):
    with pytest.raises(Exception, match="isolation"):
        kb(spark).option("isolation", "bogus").load(str(DIPENDRA)).count()
    with pytest.raises(Exception, match="onCorrupt"):
        kb(spark).option("onCorrupt", "maybe").load(str(DIPENDRA)).count()


def test_arrow_type_of_headers_is_list_of_struct():
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    from kbatch.spark import SCHEMA
    schema = to_arrow_schema(_parse_datatype_string(SCHEMA), timezone="UTC")
    assert schema.field("headers").type == pa.list_(pa.field("element", pa.struct(
        [pa.field("key", pa.string()), pa.field("value", pa.binary())])))
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")


def _damaged_partition(tmp_path):
    """Five segments of 70 records (batches of 10): a CRC mismatch in the
    second segment's fourth batch and a torn tail on the third segment."""
    part = tmp_path / "d-0"
    kbatch.write_log(part, {"value": [b"v%05d" % i + b"x" * 40 for i in range(330)],
                            "timestamp": 1_700_000_000_000 + np.arange(330)},
                     segment_bytes=4200, batch_records=10)
    segs = sorted(part.glob("*.log"))
    data = bytearray(segs[1].read_bytes())
    pos = 0
    for _ in range(3):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    data[pos + 70] ^= 0xFF
    segs[1].write_bytes(bytes(data))
    segs[2].write_bytes(segs[2].read_bytes()[:-30])
    return part


def test_on_corrupt_plans_do_not_depend_on_the_split(tmp_path, caplog):
    """Driver side only (no Spark job): a stop plan ends at the first damage
    however small the slices, and the driver logs what it found."""
    from kbatch.spark import Options, plan
    part = _damaged_partition(tmp_path)
    segs = sorted(part.glob("*.log"))
    for mode in ("stop", "skip"):
        caplog.clear()
        with caplog.at_level("WARNING", logger="kbatch.spark"):
            small = plan(Options.parse({"path": str(part), "onCorrupt": mode,
                                        "maxPartitionBytes": "500"}))
        assert len(small) >= 10
        if mode == "stop":
            assert {s.path for s in small} == {str(segs[0]), str(segs[1])}
            assert "onCorrupt=stop" in caplog.text and "3 later segment(s)" in caplog.text
        else:
            assert "onCorrupt=skip" in caplog.text and "2 damaged range(s)" in caplog.text


def test_on_corrupt_stop_and_skip_equal_open_log_however_split(spark, tmp_path):
    part = _damaged_partition(tmp_path)
    for mode in ("stop", "skip"):
        want = kbatch.open_log(part).read(on_corrupt=mode)
        for max_bytes in ("500", str(128 << 20)):
            rows = (kb(spark).option("onCorrupt", mode)
                    .option("maxPartitionBytes", max_bytes).option("minPartitions", "1")
                    .load(str(part)).orderBy("offset").collect())
            assert spark_digest(rows) == digest(want), (mode, max_bytes)


def test_split_slices_read_without_spark_equal_open_log(spark, tmp_path):
    """Every slice of a small-maxPartitionBytes plan read with read_slice (the
    executor's function, called here directly) adds up to open_log's read
    with the same onCorrupt: CRC damage, a torn non-last segment, and a batch
    whose records disagree with its header (CRC-valid, corrupt inside). The
    session only parses the schema; no Spark job runs."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    from kbatch.spark import SCHEMA, Options, plan, read_slice
    from .kafka_ref import build_batch

    schema = to_arrow_schema(_parse_datatype_string(SCHEMA), timezone="UTC")
    damaged = _damaged_partition(tmp_path)
    inside = tmp_path / "i-0"
    inside.mkdir()
    batches = [build_batch([(1000 + i, None, b"%d" % i, [])], base_offset=i) for i in range(40)]
    batches[12] = build_batch([(1012, None, b"a", []), (1013, None, b"b", [])], base_offset=12,
                              last_offset_delta=0)
    (inside / "00000000000000000000.log").write_bytes(b"".join(batches))
    for part in (damaged, inside):
        for mode in ("stop", "skip"):
            want = kbatch.open_log(part).read(on_corrupt=mode)
            for max_bytes in ("300", str(1 << 30)):
                opts = Options.parse({"path": str(part), "onCorrupt": mode,
                                      "maxPartitionBytes": max_bytes})
                got = [b for piece in plan(opts) for b in read_slice(piece, opts, schema)]
                offsets = [o for b in got for o in b.column("offset").to_pylist()]
                values = [v for b in got for v in b.column("value").to_pylist()]
                assert offsets == want.offset.tolist(), (part.name, mode, max_bytes)
                assert values == want.value.to_pylist()


def test_header_counts_never_count_a_damaged_segment_short(spark, tmp_path):
    """``columns=partition`` counts from batch headers; a non-last segment
    that ends inside a batch is damage there too (raised with onCorrupt=fail,
    the read ending there with stop), never a short count. The count must
    equal the writer's record count where the data is whole. No Spark job
    runs (read_slice is the executor's function)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    from kbatch.spark import Options, plan, read_slice

    schema = to_arrow_schema(_parse_datatype_string("partition int"), timezone="UTC")
    part = tmp_path / "c-0"
    kbatch.write_log(part, {"value": [b"v%05d" % i + b"x" * 40 for i in range(330)]},
                     segment_bytes=4200, batch_records=10)

    def count(**extra):
        opts = Options.parse({"path": str(part), "columns": "partition", **extra})
        return sum(b.num_rows for piece in plan(opts) for b in read_slice(piece, opts, schema))

    assert count() == 330
    segs = sorted(part.glob("*.log"))
    torn = segs[1].read_bytes()[:-30]
    segs[1].write_bytes(torn)
    with pytest.raises(kbatch.CorruptRecordError):
        count()
    want = len(kbatch.open_log(part).read(on_corrupt="stop"))
    assert count(onCorrupt="stop") == want < 330


# --- Spark Kafka source options (kbatch.spark.options), through Spark ----------

def _offsets(rows):
    out = {}
    for r in rows:
        out.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    return {k: sorted(v) for k, v in out.items()}


@needs_corpus
def test_kafka_options_choose_partitions_and_offsets(spark):
    logs = {(p.topic, p.partition): p for p in kbatch.open_log_dir(DIPENDRA).partitions}
    invoice = sorted(tp for tp in logs if tp[0] == "invoice")

    def want(tp, lo=0, hi=None):
        return kbatch.open_log(logs[tp].path).read(lo, hi).offset.tolist()

    # assign + Spark's JSON offsets: -2 earliest, -1 latest (the -1 used to give 0 rows)
    df = (spark.read.format("kbatch").option("assign", '{"invoice": [0, 3]}')
          .option("startingOffsets", '{"invoice": {"0": 100, "3": -2}}')
          .option("endingOffsets", '{"invoice": {"0": 200, "3": -1}}').load(str(DIPENDRA)))
    got = _offsets(df.select("topic", "partition", "offset").collect())
    assert got == {("invoice", 0): want(("invoice", 0), 100, 200),
                   ("invoice", 3): want(("invoice", 3))}
    # subscribe / subscribePattern: whole topic names
    for opt, value in (("subscribe", "invoice"), ("subscribePattern", "inv.*")):
        got = (spark.read.format("kbatch").option(opt, value).load(str(DIPENDRA))
               .groupBy("topic", "partition").count().collect())
        assert {(r["topic"], r["partition"]): r["count"] for r in got} == \
            {tp: len(want(tp)) for tp in invoice}
    # a pattern matches whole topic names, as Kafka's; matching none is an
    # error for a batch query, naming what is there
    with pytest.raises(Exception, match="no topic under the path matches it.*invoice"):
        spark.read.format("kbatch").option("subscribePattern", "inv").load(
            str(DIPENDRA)).count()


def test_kafka_options_headers_columns_and_counts(spark, txn_dir):
    df = spark.read.format("kbatch").load(str(txn_dir))
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType"]
    assert "headers" in spark.read.format("kbatch").option("includeHeaders", "true").load(
        str(txn_dir)).columns
    for isolation in ("read_uncommitted", "read_committed"):
        narrow = (spark.read.format("kbatch").option("columns", "partition")
                  .option("isolation", isolation).load(str(txn_dir)))
        assert narrow.columns == ["partition"]
        got = {r["partition"]: r["count"] for r in narrow.groupBy("partition").count().collect()}
        assert got == {p.partition: len(p.read(isolation=isolation))
                       for p in kbatch.open_log_dir(txn_dir).partitions}


def test_kafka_options_fail_on_data_loss(spark, tmp_path):
    part = tmp_path / "gone-0"
    with LogWriter(part, segment_bytes=3000, batch_records=10) as w:
        w.append({"value": [b"%d" % i for i in range(300)]})
    oldest = sorted(part.glob("*.log"))[0]
    for f in part.glob(oldest.stem + ".*"):
        f.unlink()
    first = int(sorted(part.glob("*.log"))[0].stem)
    query = spark.read.format("kbatch").option("startingOffsets", '{"gone": {"0": 0}}')
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        query.load(str(part)).count()
    rows = query.option("failOnDataLoss", "false").load(str(part)).select("offset").collect()
    assert sorted(r["offset"] for r in rows) == list(range(first, 300))


@needs_corpus
@pytest.mark.parametrize("name,value,accepted", [
    ("isolaton", "read_committed", "unknown option"),
    ("validateCrc", "nope", "expected true or false"),
    ("startingOffsets", "latest", "cannot start at latest"),
    ("maxOffsetsPerTrigger", "10", "streaming queries only"),
])
def test_bad_kafka_options_fail_with_one_line(spark, name, value, accepted):
    with pytest.raises(Exception) as info:
        spark.read.format("kbatch").option(name, value).load(str(DIPENDRA)).count()
    line = next(x for x in str(info.value).splitlines() if "kbatch: option" in x)
    assert f"option {name}={value!r} is not accepted" in line and accepted in line


# --- view="latest": the table view through Spark ---------------------------------

def _write_keyed(data, topic: str, n_segments: int, seed: int):
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


def test_spark_latest_equals_the_model(spark, tmp_path):
    """format("kbatch").option("view", "latest") against the dict model
    over kafka-python's records (tests/lifecycle_ref.latest_model)."""
    from kbatch.spark import register
    data = tmp_path / "data"
    parts = {("a", 0): _write_keyed(data, "a", 3, 7), ("b", 0): _write_keyed(data, "b", 2, 5)}
    want = {k: sorted((r["offset"], r["key"], r["value"])
                      for r in latest_model(kafka_rows(d)).values()) for k, d in parts.items()}
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


def test_an_interrupted_swap_is_read_as_a_broker_completes_it(spark, tmp_path):
    """A cleaner swap cut short (tests/test_interrupted_swap.py): Spark reads
    the swapped segment in place of those it replaces, as the Python API,
    and kbatch.spark.count agrees."""
    from kbatch.spark import count
    from tests.test_interrupted_swap import CASES, expected
    part = tmp_path / "t-0"
    part.mkdir()
    for n, data in CASES["all-deleted"].items():
        (part / n).write_bytes(data)
    want = expected(CASES["all-deleted"])
    rows = kb(spark).load(str(part)).select("offset", "value").orderBy("offset").collect()
    assert [(r.offset, bytes(r.value)) for r in rows] == want
    assert count(spark, str(part)) == len(want)
