"""``level="batches"``: one row per batch, from the CRC-checked batch headers,
in the Python API, the command line and Spark (``kbatch.spark.count`` too).

Expected values never come from kbatch: the corpus's EXPECTED.jsonl (records
and batches per file), kafka-python's decoding of the same segments (every
header field), and the counts the generated logs were written with (offsets
are contiguous, transactions committed or aborted by construction).
"""

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import kbatch
from kbatch.errors import CorruptRecordError
from kbatch.lib.log import read_table
from kbatch.lib.writer import LogWriter

from .conftest import CORPUS, needs_corpus
from .kafka_ref import read_with_kafka_python

PARTS, BATCH, APPENDS, PER_APPEND = 2, 100, 8, 1000
TOTAL = APPENDS * PER_APPEND                       # records per plain partition
TXNS = 9                                           # per transactional partition
TXN_RECORDS = [40 + 7 * t for t in range(TXNS)]    # records of transaction t
OPEN = TXNS - 1                                    # the last one is never ended
COMMITTED = [t for t in range(TXNS) if t % 3 != 0 and t != OPEN]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """``plain`` (none, lz4): contiguous offsets 0..TOTAL-1 in batches of
    BATCH records over several segments; ``pay``: transactions, each followed
    by one non-transactional record, committed when t % 3 != 0, the last left open."""
    root = tmp_path_factory.mktemp("batchlevel")
    for p in range(PARTS):
        with LogWriter(root / f"plain-{p}", segment_bytes=120_000, batch_records=BATCH,
                       codec="lz4" if p else "none") as log:
            for a in range(APPENDS):
                log.append({"key": [b"k%d" % i for i in range(PER_APPEND)],
                            "value": [b"v%d-%d" % (a, i) * 3 for i in range(PER_APPEND)],
                            "timestamp": 1_700_000_000_000 + a * PER_APPEND
                            + np.arange(PER_APPEND)})
    with LogWriter(root / "pay-0", segment_bytes=20_000, batch_records=30,
                   codec="zstd") as log:
        for t in range(TXNS):
            n = TXN_RECORDS[t]
            log.append({"value": [b"t%d-%d" % (t, i) for i in range(n)],
                        "timestamp": 1_700_000_000_000 + t * 1000 + np.arange(n)},
                       producer_id=70, transactional=True)
            log.append({"value": [b"plain-%d" % t], "timestamp": [1_700_000_000_500]})
            if t != OPEN:
                log.end_transaction(70, commit=t % 3 != 0)
    return root


def kafka_python_batches(partition_dir):
    """Every batch of a partition, decoded by kafka-python, in file order,
    with its segment path."""
    out = []
    for seg in sorted(pathlib.Path(partition_dir).glob("*.log")):
        read = read_with_kafka_python(seg.read_bytes(), check_crc=True)
        for b in read.batches:
            data = sum(1 for r in read.records if r["batch"] == read.batches.index(b))
            out.append({**b, "segment": str(seg), "data_records": data})
    return out


def test_rows_are_kafka_pythons_batch_headers(data_dir):
    table = kbatch.open_log(data_dir / "plain-1").read(level="batches").to_pylist()
    want = kafka_python_batches(data_dir / "plain-1")
    assert len(table) == len(want) == TOTAL // BATCH
    for got, ref in zip(table, want):
        assert got["topic"] == "plain" and got["partition"] == 1
        assert got["baseOffset"] == ref["base_offset"]
        assert got["lastOffset"] == ref["last_offset"]
        assert got["records"] == ref["records_count"] == ref["data_records"]
        assert int(got["firstTimestamp"].timestamp() * 1000) == ref["base_timestamp"]
        assert int(got["maxTimestamp"].timestamp() * 1000) == ref["max_timestamp"]
        assert (got["producerId"], got["producerEpoch"], got["baseSequence"]) == (
            ref["producer_id"], ref["producer_epoch"], ref["base_sequence"])
        assert got["isTransactional"] == ref["is_transactional"]
        assert got["isControl"] == ref["is_control"]
        assert got["compression"] == "lz4" and ref["codec"] == 3
        assert (got["sizeInBytes"], got["position"]) == (ref["size"], ref["position"])
        assert got["segment"] == ref["segment"]


def test_log_dir_sums_and_ranges(data_dir):
    logs = kbatch.open_log_dir(data_dir)
    t = logs.read(["plain"], level="batches", threads=2)
    assert t.column_names[:5] == ["topic", "partition", "baseOffset", "lastOffset", "records"]
    assert sum(t.column("records").to_pylist()) == PARTS * TOTAL
    # ranges cut batches: the rows overlap the range, their records count inside it
    for lo, hi in [(0, 1), (150, 1234), (99, 101), (TOTAL - 1, TOTAL + 5), (500, 500)]:
        t = logs.read(["plain"], lo, hi, level="batches", threads=2)
        assert sum(t.column("records").to_pylist()) == PARTS * max(0, min(hi, TOTAL) - lo)
        assert all(r["lastOffset"] >= lo and r["baseOffset"] < hi for r in t.to_pylist())
    # read_table and a lone segment file
    assert read_table(data_dir, "plain", level="batches").num_rows == PARTS * TOTAL // BATCH
    seg = sorted((data_dir / "plain-0").glob("*.log"))[1]
    ref = read_with_kafka_python(seg.read_bytes())
    t = read_table(seg, level="batches")
    assert sum(t.column("records").to_pylist()) == len(ref.records)
    assert t.num_rows == len(ref.batches)


def test_read_committed_drops_aborted_and_open(data_dir):
    log = kbatch.open_log(data_dir / "pay-0")
    plain_records = TXNS
    every = log.read(level="batches").to_pylist()
    # read_uncommitted: every data record; control batches are rows with 0 records
    assert sum(r["records"] for r in every) == sum(TXN_RECORDS) + plain_records
    assert sum(r["isControl"] for r in every) == TXNS - 1
    assert all(r["records"] == 0 for r in every if r["isControl"])
    committed = log.read(level="batches", isolation="read_committed").to_pylist()
    # the open transaction holds the LSO back: the plain record after it is not read
    want = sum(TXN_RECORDS[t] for t in COMMITTED) + plain_records - 1
    assert sum(r["records"] for r in committed) == want
    assert not any(r["isTransactional"] and not r["isControl"]
                   and r["producerId"] == 70 and r["records"] and
                   r["baseOffset"] in aborted_offsets(every) for r in committed)


def aborted_offsets(rows):
    """Base offsets of the data batches of aborted transactions, from the
    construction order (transaction t's batches come before its marker)."""
    out, t, current = set(), 0, []
    for r in rows:
        if r["isControl"]:
            if t not in COMMITTED:
                out |= set(current)
            t, current = t + 1, []
        elif r["isTransactional"]:
            current.append(r["baseOffset"])
    return out


def damaged_copy(data_dir, tmp_path):
    """plain-0 with one byte of the 3rd batch of its 2nd segment flipped."""
    part = tmp_path / "plain-0"
    shutil.copytree(data_dir / "plain-0", part)
    seg = sorted(part.glob("*.log"))[1]
    ref = read_with_kafka_python(seg.read_bytes())
    raw = bytearray(seg.read_bytes())
    b = ref.batches[2]
    raw[b["position"] + b["size"] - 5] ^= 0xFF
    seg.write_bytes(bytes(raw))
    return part, b["records_count"], seg


def test_damage_raises_stops_and_skips(data_dir, tmp_path):
    part, lost, seg = damaged_copy(data_dir, tmp_path)
    log = kbatch.open_log(part)
    with pytest.raises(CorruptRecordError):
        log.read(level="batches")
    before = sum(len(read_with_kafka_python(s.read_bytes()).records)
                 for s in sorted(part.glob("*.log")) if s < seg) + 2 * BATCH
    stopped = log.read(level="batches", on_corrupt="stop")
    assert sum(stopped.column("records").to_pylist()) == before
    skipped = log.read(level="batches", on_corrupt="skip")
    assert sum(skipped.column("records").to_pylist()) == TOTAL - lost
    # the records level agrees (it is checked against kafka-python elsewhere)
    assert len(log.read(on_corrupt="skip")) == TOTAL - lost


def test_parts_of_one_segment_are_merged(data_dir):
    """``merge_parts`` (a Spark input partition's slices): neighbours of one
    topic, partition and segment become one part, rows in order; other
    segments and partitions stay apart; empty parts go."""
    from kbatch.lib.batchrows import BatchPart, kept_part, merge_parts
    from kbatch.lib.segment import DecodeOptions
    log = kbatch.open_log(data_dir / "plain-0")
    parts, whole = [], []
    for seg in log.segments:
        (chunk,) = seg.source.chunks(DecodeOptions(), control_only=True)
        rows = chunk.batches
        whole.append(rows)
        counts = np.asarray(rows.records_count, np.int64)
        half = len(rows) // 2
        for keep in (np.arange(len(rows)) < half, np.arange(len(rows)) >= half,
                     np.zeros(len(rows), bool)):
            parts.append(kept_part("plain", 0, seg.source.name, rows, keep, counts))
    other = BatchPart("plain", 1, parts[0].segment, parts[0].batches, parts[0].counts)
    merged = merge_parts(parts + [other])
    assert len(log.segments) > 1
    assert [m.segment for m in merged] == [s.source.name for s in log.segments] + [
        other.segment]
    for m, rows in zip(merged, whole):
        assert m.batches.base_offset.tolist() == rows.base_offset.tolist()
        assert m.counts.tolist() == np.asarray(rows.records_count).tolist()
    assert merged[-1].partition == 1 and merged[-1].counts.tolist() == other.counts.tolist()


def test_level_is_checked(data_dir):
    with pytest.raises(ValueError, match="level must be one of"):
        read_table(data_dir, level="rows")
    with pytest.raises(ValueError, match="timestamp_mode"):
        kbatch.open_log(data_dir / "pay-0").read(level="batches", timestamp_mode="exact",
                                                 start_timestamp=0)
    # batches have no keys: the table view is refused, not silently ignored
    with pytest.raises(ValueError, match="has none"):
        kbatch.open_log(data_dir / "plain-0").read(level="batches", view="latest")
    with pytest.raises(ValueError, match="has none"):
        kbatch.open_log_dir(data_dir).read(level="batches", view="latest")
    pytest.importorskip("pyspark")
    from kbatch.spark.options import OptionError, parse_options
    for extra in ({"view": "latest"}, {"valueFormat": "registry", "schemaRegistry": "x"},
                  {"schemaRegistry": "x"}):
        with pytest.raises(OptionError, match="level=batches"):
            parse_options({"path": "x", "level": "batches", **extra})


def test_a_simulated_log_start_cuts_batch_rows(data_dir):
    """``log_start=`` (a retention change) counts for level=batches as for records."""
    logs = kbatch.open_log_dir(data_dir)
    start = {("plain", 0): 2500}
    rows = logs.read(["plain"], level="batches", visibility="consumer", log_start=start)
    records = logs.read(["plain"], visibility="consumer", log_start=start)
    per_part = {}
    for r in rows.to_pylist():
        per_part[r["partition"]] = per_part.get(r["partition"], 0) + r["records"]
    assert per_part == {0: TOTAL - 2500, 1: TOTAL}
    assert {k[1]: len(v) for k, v in records.items()} == per_part


@needs_corpus
def test_corpus_files_sum_to_expected():
    checked = 0
    for line in (CORPUS / "EXPECTED.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["crc_errors"]:
            continue
        t = read_table(CORPUS / e["path"], level="batches", on_corrupt="stop")
        assert t.num_rows == e["batches"], e["path"]
        assert sum(t.column("records").to_pylist()) == e["records"], e["path"]
        checked += 1
    assert checked > 200


def test_cli_stats_level_batches(data_dir):
    out = subprocess.run([sys.executable, "-m", "kbatch", "stats", str(data_dir / "pay-0"),
                          "--level", "batches", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert sum(r["records"] for r in rows) == sum(TXN_RECORDS) + TXNS
    assert sum(r["isControl"] for r in rows) == TXNS - 1
    text = subprocess.run([sys.executable, "-m", "kbatch", "stats", str(data_dir / "pay-0"),
                           "--level", "batches", "--isolation", "read_committed"],
                          capture_output=True, text=True, check=True).stdout
    want = sum(TXN_RECORDS[t] for t in COMMITTED) + TXNS - 1
    assert text.splitlines()[-1].startswith(f"total: {want} records in ")


# --- Spark ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from .conftest import shared_spark
    return shared_spark()           # not stopped here: later test files reuse it


@pytest.mark.spark
def test_spark_batches_and_count(spark, data_dir, tmp_path):
    from pyspark.sql import functions as F

    import kbatch.spark as ks
    df = spark.read.format("kbatch").option("level", "batches").load(str(data_dir))
    assert df.schema.simpleString() == (
        "struct<topic:string,partition:int,baseOffset:bigint,lastOffset:bigint,"
        "records:bigint,firstTimestamp:timestamp,maxTimestamp:timestamp,producerId:bigint,"
        "producerEpoch:smallint,baseSequence:int,isTransactional:boolean,isControl:boolean,"
        "compression:string,sizeInBytes:int,segment:string,position:bigint>")
    sums = {r["topic"]: r["n"] for r in
            df.groupBy("topic").agg(F.sum("records").alias("n")).collect()}
    assert sums == {"plain": PARTS * TOTAL, "pay": sum(TXN_RECORDS) + TXNS}
    rows = df.where("topic = 'plain' and partition = 1").orderBy("baseOffset").collect()
    want = kafka_python_batches(data_dir / "plain-1")
    assert [(r["baseOffset"], r["records"], r["position"], r["compression"]) for r in rows] \
        == [(b["base_offset"], b["records_count"], b["position"], "lz4") for b in want]
    # segments cut into many slices per input partition: their rows joined, none lost
    cut = spark.read.format("kbatch").option("level", "batches").option(
        "maxPartitionBytes", "32768").load(str(data_dir / "plain-1"))
    assert [(r["baseOffset"], r["records"], r["position"], r["segment"])
            for r in cut.orderBy("baseOffset").collect()] == \
        [(b["base_offset"], b["records_count"], b["position"], b["segment"]) for b in want]
    # kbatch.spark.count: ranges that cut batches, read_committed, subscribe
    assert ks.count(spark, data_dir, subscribe="plain") == PARTS * TOTAL
    assert ks.count(spark, str(data_dir), subscribe="plain", startingOffsets=150,
                    endingOffsets={"plain": {"0": 1234, "1": -1}}) == (1234 - 150) + (
                        TOTAL - 150)
    assert ks.count(spark, data_dir / "pay-0", isolation="read_committed") == sum(
        TXN_RECORDS[t] for t in COMMITTED) + TXNS - 1
    # damage: fail, stop and skip as the Python API
    part, lost, seg = damaged_copy(data_dir, tmp_path)
    assert ks.count(spark, part, onCorrupt="skip") == TOTAL - lost
    with pytest.raises(Exception, match="CRC|corrupt"):
        ks.count(spark, part)
    # options that do not apply to level=batches are refused at planning
    with pytest.raises(Exception, match="level=batches"):
        spark.read.format("kbatch").option("level", "batches").option(
            "columns", "offset").load(str(data_dir)).collect()


@needs_corpus
@pytest.mark.spark
def test_spark_corpus_directory_sums_to_expected(spark):
    root = CORPUS / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs"
    want = sum(e["records"] for e in map(json.loads, (CORPUS / "EXPECTED.jsonl")
                                         .read_text().splitlines())
               if e["path"].startswith("dipendrasaini__kafka-learnning-series/tmp/kafka-logs/")
               and e["path"].endswith(".log"))
    import kbatch.spark as ks
    assert ks.count(spark, root) == want


def _legacy_partition(root: pathlib.Path) -> tuple[pathlib.Path, list[int]]:
    """gzip-compressed magic 0 and 1 wrappers of 5 messages each (a wrapper's
    header names its last inner offset), an uncompressed magic 1 message,
    then a magic 2 batch: offsets 0..24."""
    from .kafka_ref import build_batch, legacy_message_set
    parts = [legacy_message_set([(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i)
                                 for i in range(5)], magic=m, codec=1, base_offset=5 * w)
             for w, m in enumerate([0, 1, 1])]
    parts.append(legacy_message_set([(1_700_000_000_015, b"k", b"v")], magic=1,
                                    base_offset=15))
    parts.append(build_batch([(1_700_000_000_016 + i, b"k", b"v", []) for i in range(9)],
                             base_offset=16))
    part = root / "legacy-0"
    part.mkdir()
    (part / f"{0:020d}.log").write_bytes(b"".join(parts))
    return part, [r["offset"] for r in read_with_kafka_python(b"".join(parts)).records]


def test_magic_0_and_1_wrappers_cut_by_a_range(tmp_path):
    """A compressed wrapper's header carries the offset of its last inner
    message: a range ending inside it still counts the records the records
    read returns, and its row's baseOffset is its first inner offset (as
    Kafka's baseOffset() of a legacy batch); kafka-python is the truth."""
    part, offsets = _legacy_partition(tmp_path)
    assert offsets == list(range(25))
    log = kbatch.open_log(part)
    for lo in range(0, 26, 2):
        for hi in range(lo, 27, 3):
            want = sum(lo <= o < hi for o in offsets)
            table = log.read(lo, hi, level="batches")
            assert sum(table.column("records").to_pylist()) == want == len(log.read(lo, hi))
            rows = table.to_pylist()
            assert all(r["baseOffset"] < hi and r["lastOffset"] >= lo for r in rows)
    whole = log.read(level="batches").to_pylist()
    assert [(r["baseOffset"], r["lastOffset"], r["records"]) for r in whole] == \
        [(0, 4, 5), (5, 9, 5), (10, 14, 5), (15, 15, 1), (16, 24, 9)]


def test_malformed_records_behind_a_valid_crc_are_skipped_or_stop_the_read(tmp_path):
    """A batch whose header claims 3 records but holds 2 (the CRC computed
    over it, so only decoding finds it): with on_corrupt skip and stop the
    batch level decodes, and its sums are the records read's (kafka-python
    refuses the batch)."""
    from .kafka_ref import build_batch, encode_record, raw_batch
    good = [build_batch([(1_700_000_000_000 + i, b"k", b"v", []) for i in range(4)],
                        base_offset=b) for b in (0, 7)]
    area = encode_record(0, 0, b"a", b"1") + encode_record(1, 0, b"b", b"2")
    bad = raw_batch(area, records_count=3, base_offset=4, last_offset_delta=2,
                    base_timestamp=1_700_000_000_000)
    part = tmp_path / "m-0"
    part.mkdir()
    (part / f"{0:020d}.log").write_bytes(good[0] + bad + good[1])
    with pytest.raises(Exception):
        read_with_kafka_python(good[0] + bad + good[1], check_crc=True)
    log = kbatch.open_log(part)
    for how, want in (("skip", 8), ("stop", 4)):
        table = log.read(level="batches", on_corrupt=how)
        assert sum(table.column("records").to_pylist()) == want == len(log.read(on_corrupt=how))
        assert 4 not in table.column("baseOffset").to_pylist()


def test_read_table_of_a_partition_honours_consumer_visibility(tmp_path):
    """visibility="consumer" for a partition directory (or one segment file)
    takes [log start, high watermark) from the data directory holding it,
    as a data directory read does; log_start= stands in for the start."""
    data = tmp_path / "d"
    with LogWriter(data / "t-0", segment_bytes=1 << 20, batch_records=4) as w:
        w.append({"value": [b"v%d" % i for i in range(20)]})
    (data / "log-start-offset-checkpoint").write_text("0\n1\nt 0 5\n")
    (data / "replication-offset-checkpoint").write_text("0\n1\nt 0 15\n")
    seg = next((data / "t-0").glob("*.log"))
    for path in (data, data / "t-0"):
        table = read_table(path, visibility="consumer")
        assert table.column("offset").to_pylist() == list(range(5, 15))
        assert read_table(path, visibility="consumer", start_offset=8,
                          log_start={("t", 0): 2}).column("offset").to_pylist() == \
            list(range(8, 15))
    for path in (data, data / "t-0", seg):
        rows = read_table(path, visibility="consumer", level="batches")
        assert sum(rows.column("records").to_pylist()) == 10
    assert read_table(data / "t-0").num_rows == 20
    with pytest.raises(kbatch.ArgumentError, match="log_start"):
        read_table(data / "t-0", log_start={("t", 0): 2})


@pytest.mark.spark
def test_spark_count_of_wrappers_malformed_batches_and_twice_named_paths(spark, tmp_path):
    """kbatch.spark.count agrees with kafka-python on ranges that end inside
    magic 0/1 wrappers, skips a batch whose records are malformed behind a
    valid CRC (onCorrupt=skip), and refuses a partition named by its
    directory and by one of its segment files (it would count it twice)."""
    import kbatch.spark as ks
    part, offsets = _legacy_partition(tmp_path)
    for lo, hi in ((0, 3), (2, 7), (6, 8), (11, 13), (3, 25)):
        assert ks.count(spark, part, startingOffsets=lo,
                        endingOffsets={"legacy": {"0": hi}}) == \
            sum(lo <= o < hi for o in offsets)
    from .kafka_ref import build_batch, encode_record, raw_batch
    good = [build_batch([(1_700_000_000_000 + i, b"k", b"v", []) for i in range(4)],
                        base_offset=b) for b in (0, 7)]
    bad = raw_batch(encode_record(0, 0, b"a", b"1") + encode_record(1, 0, b"b", b"2"),
                    records_count=3, base_offset=4, last_offset_delta=2,
                    base_timestamp=1_700_000_000_000)
    m = tmp_path / "m-0"
    m.mkdir()
    (m / f"{0:020d}.log").write_bytes(good[0] + bad + good[1])
    assert ks.count(spark, m, onCorrupt="skip") == 8
    seg = next(part.glob("*.log"))
    with pytest.raises(Exception, match="names whole"):
        ks.count(spark, [str(part), str(seg)])
    with pytest.raises(Exception, match="named twice"):
        ks.count(spark, [str(seg), str(seg)])
