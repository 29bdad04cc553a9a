"""The same bytes, the same answer: cases an attack review found where the
answer depended on where the bytes were or how a path was spelled.

- ``max_batch_bytes`` on magic 0/1 messages: refused wherever the message
  lies (a local file is one window; a remote object is read in ``block``
  windows, and only a message crossing a window's edge was refused);
- a partition or segment named by a bare relative path (``t-0`` from its
  data directory, a segment's file name from its partition) keeps its
  parent: the checkpoints of ``visibility="consumer"``, the topic and
  partition, whether it is the last segment;
- a directory whose name is not ``<topic>-<partition>``, read as a table;
- a ``.txnindex`` with a trailing hole reads as on an object store;
- a checkpoint file over its size limit: one error type everywhere.

Truth: kafka-python's decode of the same bytes, and the local read of an
absolute path where the other side is a different spelling.
"""

from __future__ import annotations

import os

import pytest

import kbatch
from kbatch.lib.writer import LogWriter

from .kafka_ref import build_batch, legacy_message_set, read_with_kafka_python

fsspec = pytest.importorskip("fsspec")


def _upload(root, prefix: str) -> str:
    mem = fsspec.filesystem("memory")
    for f in sorted(root.rglob("*")):
        if f.is_file():
            mem.pipe(f"/{prefix}/{f.relative_to(root).as_posix()}", f.read_bytes())
    return f"memory://{prefix}"


def test_max_batch_bytes_holds_for_magic_0_and_1_wherever_they_lie(tmp_path):
    part = tmp_path / "old-0"
    part.mkdir()
    big = legacy_message_set([(1_700_000_000_000 + i, b"k%d" % i, os.urandom(900))
                              for i in range(6)], magic=1, codec=1, base_offset=0)
    small = legacy_message_set([(1_700_000_000_010, b"k", b"v")], magic=1, base_offset=6)
    (part / f"{0:020d}.log").write_bytes(big + small)
    assert len(read_with_kafka_python(big + small).records) == 7
    url = _upload(tmp_path, "mb") + "/old-0"
    limit = len(big) - 13          # the wrapper's length field is len - 12
    for where, kw in ((str(part), {}), (url, {}), (url, {"block": 4096}), (url, {"block": 1000})):
        with pytest.raises(kbatch.LimitExceededError, match="max_batch_bytes"):
            kbatch.open_log(where, **kw).read(max_batch_bytes=limit)
        with pytest.raises(kbatch.LimitExceededError):
            list(kbatch.open_log(where, **kw).iter(max_batch_bytes=limit))
        report = kbatch.verify(where, max_batch_bytes=limit, **kw)
        assert not report.ok and "max_batch_bytes" in report.segments[0].error
        assert len(kbatch.open_log(where, **kw).read(max_batch_bytes=limit + 1)) == 7
        skipped = kbatch.open_log(where, **kw).read(max_batch_bytes=limit, on_corrupt="skip")
        assert skipped.offset.tolist() == [6]


@pytest.fixture
def data_dir(tmp_path):
    data = tmp_path / "d"
    for p in (0, 1):
        with LogWriter(data / f"t-{p}", segment_bytes=700, batch_records=3) as w:
            w.append({"value": [b"value-%03d" % i for i in range(40)]})
    (data / "log-start-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    (data / "replication-offset-checkpoint").write_text("0\n2\nt 0 30\nt 1 40\n")
    return data


def test_a_bare_relative_path_keeps_its_parent(data_dir, monkeypatch):
    want = kbatch.read_table(data_dir / "t-0", visibility="consumer")
    assert want.column("offset").to_pylist() == list(range(7, 30))
    monkeypatch.chdir(data_dir)
    for name in ("t-0", "t-0/", "./t-0"):
        assert kbatch.read_table(name, visibility="consumer").equals(want), name
    segments = sorted(p.name for p in (data_dir / "t-0").glob("*.log"))
    monkeypatch.chdir(data_dir / "t-0")
    assert kbatch.read_table(".").column("topic").to_pylist()[0] == "t"
    for seg in (segments[0], "./" + segments[0]):
        rows = kbatch.read_table(seg, level="batches")
        assert (rows.column("topic")[0].as_py(), rows.column("partition")[0].as_py()) == ("t", 0)
        assert kbatch.verify(seg).segments[0].last_segment is False


def test_a_partition_directory_with_another_name_reads_as_a_table(data_dir, tmp_path):
    odd = tmp_path / "odd" / "mydata"
    odd.parent.mkdir()
    os.rename(data_dir / "t-1", odd)
    table = kbatch.read_table(odd)
    assert table.num_rows == 40
    assert table.column("topic").null_count == table.column("partition").null_count == 40


def test_a_txnindex_with_a_trailing_hole_reads_as_from_a_store(tmp_path):
    """Local and remote reads of a .txnindex whose tail is a hole agree.
    (Only a filesystem that reports holes (SEEK_HOLE) could show the old
    difference; on one that does not, both sides read the zeros anyway.)"""
    from kbatch.lib.index import TXN_ENTRY
    part = tmp_path / "t-0"
    part.mkdir()
    seg = b"".join(build_batch([(1_700_000_000_000, b"k", b"v", [])], base_offset=o)
                   for o in range(4))       # room for 4 entries (one per batch at most)
    (part / f"{0:020d}.log").write_bytes(seg)
    entry = b"\x00\x00" + (5).to_bytes(8, "big") + (0).to_bytes(8, "big") * 2 + \
        (1).to_bytes(8, "big")
    txn = part / f"{0:020d}.txnindex"
    txn.write_bytes(entry)
    os.truncate(txn, 3 * TXN_ENTRY.itemsize)        # two entries of zeros, a hole on disk
    url = _upload(tmp_path, "hole") + "/t-0"
    local = kbatch.open_log(part).segments[0].txn_index
    remote = kbatch.open_log(url).segments[0].txn_index
    assert local.producer_id.tolist() == remote.producer_id.tolist() == [5, 0, 0]


def test_a_checkpoint_over_its_limit_is_the_same_error_everywhere(tmp_path):
    from kbatch.lib.checkpoints import MAX_CHECKPOINT_BYTES, read_checkpoint
    big = tmp_path / "replication-offset-checkpoint"
    with open(big, "wb") as f:
        f.truncate(MAX_CHECKPOINT_BYTES + 1)        # sparse: no disk taken
    with pytest.raises(kbatch.CorruptRecordError, match="checkpoint file over"):
        read_checkpoint(big)


def _damaged_below_and_above(tmp_path, name: str, flip, indexed=range(1, 40)) -> tuple:
    """One .log of 400 records (batches of 10, offsets 0..399, written by
    kafka-python's builder) with a byte of one batch flipped, once beside
    its .index and .timeindex (an entry for each batch of ``indexed``) and
    once alone."""
    import struct

    batches = [build_batch([(1_700_000_000_000 + i, b"k%d" % i, b"v%03d" % i, [])
                            for i in range(b, b + 10)], base_offset=b)
               for b in range(0, 400, 10)]
    log = bytearray(b"".join(batches))
    flip(log, batches)
    index, times, at = b"", b"", 0
    for k, batch in enumerate(batches):
        if k in indexed:          # (the first batch's entry is implied: position 0)
            index += struct.pack(">ii", 10 * k + 9, at)
            times += struct.pack(">qi", 1_700_000_000_000 + 10 * k + 9, 10 * k + 9)
        at += len(batch)
    with_index, alone = tmp_path / name / "a" / "t-0", tmp_path / name / "b" / "t-0"
    for d in (with_index, alone):
        d.mkdir(parents=True)
        (d / f"{0:020d}.log").write_bytes(bytes(log))
    (with_index / f"{0:020d}.index").write_bytes(index)
    (with_index / f"{0:020d}.timeindex").write_bytes(times)
    return with_index, alone


def test_damage_outside_a_range_does_not_depend_on_the_index_files(tmp_path):
    """A batch with a wrong CRC below a range's start (or above its end):
    the range reads the same records with or without the index files,
    with use_index on or off, local or from a store, whole, in chunks or
    as batch rows, as Kafka's fetch
    passes batches below its offset by their headers: the offsets written
    in the range, nothing skipped."""
    def crc_of_first(log, batches):
        log[17] ^= 1                                   # batch 0: offsets 0..9

    def crc_of_last(log, batches):
        log[-1] ^= 1                                   # batch 39: offsets 390..399

    def crc_of_15(log, batches):                       # batch 15: offsets 150..159
        log[sum(len(b) for b in batches[:15]) + 17] ^= 1
    for name, flip, kw, want, indexed in (
            ("below", crc_of_first, {"start_offset": 200}, list(range(200, 400)), range(1, 40)),
            ("below-ts", crc_of_first, {"start_timestamp": 1_700_000_000_200},
             list(range(200, 400)), range(1, 40)),
            # one entry, far below the range: the damage is met in a later chunk
            ("below-sparse", crc_of_15, {"start_offset": 200}, list(range(200, 400)), (5,)),
            ("above", crc_of_last, {"end_offset": 100}, list(range(100)), range(1, 40))):
        with_index, alone = _damaged_below_and_above(tmp_path, name, flip, indexed)
        for part in (with_index, alone):
            url = _upload(part.parent, f"dmg-{name}-{part.parent.name}") + "/t-0"
            for where in (str(part), url):
                for use_index in (True, False):
                    log = kbatch.open_log(where, use_index=use_index)
                    got = log.read(**kw)
                    assert got.offset.tolist() == want, (name, where, use_index)
                    assert not got.skipped
                    skip = log.read(on_corrupt="skip", **kw)
                    assert skip.offset.tolist() == want and not skip.skipped
                    for size in (50, 95, 1000):    # chunks ending before, at and past the damage
                        chunks = list(log.iter(chunk_records=size, **kw))
                        assert [o for c in chunks for o in c.offset.tolist()] == want
                    rows = log.read(level="batches", **kw).column("records").to_pylist()
                    assert sum(rows) == len(want)


@pytest.mark.spark
def test_spark_passes_damage_outside_a_range_as_the_python_read_does(tmp_path):
    """The same damaged segments through Spark (local[2]): records, the
    header count path and level=batches sums equal the Python read's, with
    and without the index files."""
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    import kbatch.spark as ks

    from .conftest import shared_spark
    spark = shared_spark()
    ks.register(spark)

    def crc_of_first(log, batches):
        log[17] ^= 1

    def crc_of_last(log, batches):
        log[-1] ^= 1

    def crc_of_15(log, batches):
        log[sum(len(b) for b in batches[:15]) + 17] ^= 1
    for name, flip, options, want, indexed in (
            ("below", crc_of_first, {"startingOffsets": '{"t": {"0": 200}}'},
             list(range(200, 400)), range(1, 40)),
            ("below-sparse", crc_of_15, {"startingOffsets": '{"t": {"0": 200}}'},
             list(range(200, 400)), (5,)),
            ("above", crc_of_last, {"endingOffsets": '{"t": {"0": 100}}'}, list(range(100)),
             range(1, 40))):
        for part in _damaged_below_and_above(tmp_path, name, flip, indexed):
            reader = spark.read.format("kbatch")
            for k, v in options.items():
                reader = reader.option(k, v)
            rows = reader.load(str(part)).select("offset").collect()
            assert sorted(r["offset"] for r in rows) == want, (name, part)
            assert ks.count(spark, str(part), **options) == len(want)
            counted = spark.read.format("kbatch").option("columns", "partition")
            for k, v in options.items():
                counted = counted.option(k, v)
            assert counted.load(str(part)).count() == len(want)
