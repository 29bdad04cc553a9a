"""``kbatch.retention``: plans against ``tests/lifecycle_ref.retention_model``
(UnifiedLog.deleteOldSegments, written from Kafka's source) over time,
size and both, on partitions written by tests/kafka_ref.py's encoders;
the retained copy; reads of what would be lost and of what a consumer
would see after the change."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, strategies as st

import kbatch
from kbatch.lib.checkpoints import read_checkpoint
from kbatch.lib.epochs import truncate_from_start as truncate_epochs
from kbatch.lib.retention import retention
from tests.kafka_ref import build_batch
from tests.lifecycle_ref import retention_model

T0 = 1_700_000_000_000


def write(directory, spec, mtime_of=lambda k: T0):
    """``spec``: per segment a list of (records, max ts offset) batches:
    [(n records, timestamp)], written with kafka-python's builder."""
    directory.mkdir(parents=True)
    segments, offset = [], 0
    for k, batches in enumerate(spec):
        base = offset
        parts = []
        for n, ts in batches:
            rows = [(ts - (n - 1 - j) if ts >= 0 else -1, b"k", b"v" * 50, []) for j in range(n)]
            parts.append(build_batch(rows, base_offset=offset))
            offset += n
        data = b"".join(parts)
        path = directory / f"{base:020d}.log"
        path.write_bytes(data)
        os.utime(path, (mtime_of(k) / 1000, mtime_of(k) / 1000))
        segments.append((base, data, int(path.stat().st_mtime * 1000)))
    return segments


segments_st = st.lists(st.lists(st.tuples(st.integers(1, 5),
                                          st.one_of(st.just(-1), st.integers(T0, T0 + 10_000))),
                                min_size=1, max_size=4), min_size=1, max_size=6)


@given(spec=segments_st, empty_active=st.booleans(),
       ms=st.one_of(st.none(), st.integers(-1, 12_000)),
       size=st.one_of(st.none(), st.integers(-1, 3000)), start=st.integers(0, 30),
       hw_back=st.one_of(st.none(), st.integers(0, 10)), now_delta=st.integers(0, 12_000))
def test_plan_matches_the_model(tmp_path_factory, spec, empty_active, ms, size, start,
                                hw_back, now_delta):
    d = tmp_path_factory.mktemp("r") / "data"
    segs = write(d / "t-0", spec + ([[]] if empty_active else []), lambda k: T0 + 1000 * k)
    leo = retention(d / "t-0").partitions[0].log_end_offset   # no limits: nothing deleted
    hw = None if hw_back is None else max(leo - hw_back, 0)
    (d / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {start}\n")
    if hw is not None:
        (d / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {hw}\n")
    now = T0 + now_delta
    plan = retention(d, retention_ms=ms, retention_bytes=size, now=now)
    (p,) = plan.partitions
    deleted, new_start, rolled = retention_model(segs, log_start=start, hw=hw, retention_ms=ms,
                                                 retention_bytes=size, now=now)
    assert [(x.base_offset, x.reason) for x in p.deleted] == deleted
    assert (p.new_log_start_offset, p.rolled) == (new_start, rolled)
    assert p.log_end_offset == leo


def test_time_size_and_both(tmp_path):
    # four segments of 2 batches; largest timestamps T0+100, +200, +300, +400
    spec = [[(3, T0 + 100 * (k + 1) - 5), (3, T0 + 100 * (k + 1))] for k in range(4)]
    segs = write(tmp_path / "t-0", spec)
    size = len(segs[0][1])
    by_time = retention(tmp_path / "t-0", retention_ms=150, now=T0 + 400).partitions[0]
    assert [d.reason for d in by_time.deleted] == ["time", "time"]
    assert by_time.new_log_start_offset == 12 and not by_time.rolled
    by_size = retention(tmp_path / "t-0", retention_bytes=2 * size + 1).partitions[0]
    assert [d.base_offset for d in by_size.deleted] == [0]   # what stays >= the limit
    both = retention(tmp_path / "t-0", retention_bytes=3 * size, retention_ms=150,
                     now=T0 + 400).partitions[0]
    assert [(d.base_offset, d.reason) for d in both.deleted] == [(0, "size"), (6, "time")]
    # every segment expired: the active one goes too, after a roll at the log end
    everything = retention(tmp_path / "t-0", retention_ms=0, now=T0 + 10_000).partitions[0]
    assert len(everything.deleted) == 4 and everything.rolled
    assert everything.new_log_start_offset == everything.log_end_offset == 24
    assert everything.notes == []       # no producer ids: no producer state to lose


def test_a_roll_that_deletes_idempotent_producers_data_says_their_state_is_lost(tmp_path):
    """UnifiedLog.roll snapshots the producer state at the new segment; the
    copy holds none, and the plan says so when the deleted batches name
    producers (two here, one batch without a producer id)."""
    part = tmp_path / "t-0"
    part.mkdir()
    rows = [(T0, b"k", b"v", [])]
    (part / f"{0:020d}.log").write_bytes(
        build_batch(rows, base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0)
        + build_batch(rows, base_offset=1, producer_id=9, producer_epoch=2, base_sequence=0)
        + build_batch(rows, base_offset=2))
    p = retention(part, retention_ms=0, now=T0 + 10_000).partitions[0]
    assert p.rolled and p.roll_offset == 3
    assert len(p.notes) == 1
    assert "00000000000000000003.snapshot; 2 producer id(s)" in p.notes[0]
    kept = retention(part, retention_ms=None, now=T0 + 10_000).partitions[0]
    assert not kept.rolled and kept.notes == []


def test_segment_without_timestamps_uses_the_file_time(tmp_path):
    segs = write(tmp_path / "t-0", [[(2, -1)], [(2, -1)]], lambda k: T0 + 1000 * k)
    plan = retention(tmp_path / "t-0", retention_ms=500, now=T0 + 1200).partitions[0]
    assert plan.segments[0].from_mtime and plan.segments[0].largest_timestamp == segs[0][2]
    assert [d.base_offset for d in plan.deleted] == [0]


def test_apply_lost_and_consumer_view(tmp_path):
    data = tmp_path / "data"
    spec = [[(3, T0 + 100 * (k + 1))] for k in range(4)]
    write(data / "t-0", spec)
    (data / "t-0" / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n1 2\n2 7\n")
    (data / "t-0" / "00000000000000000003.snapshot").write_bytes(b"x")
    (data / "t-0" / "00000000000000000009.snapshot").write_bytes(b"y")
    (data / "t-0" / "00000000000000000007.snapshot").write_bytes(b"z")
    (data / "log-start-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    (data / "replication-offset-checkpoint").write_text("0\n1\nt 0 12\n")
    plan = retention(data, retention_ms=150, now=T0 + 400)
    assert plan.log_start_offsets == {("t", 0): 6}
    lost = plan.lost()
    assert lost[("t", 0)].offset.tolist() == list(range(6))
    seen = kbatch.open_log_dir(data).read(visibility="consumer", log_start=plan)
    assert seen[("t", 0)].offset.tolist() == list(range(6, 12))
    out = plan.apply(tmp_path / "out")
    names = sorted(os.listdir(out / "t-0"))
    assert "00000000000000000000.log" not in names and "00000000000000000006.log" in names
    # the snapshots at deleted segments' base offsets go (UnifiedLog.deleteProducerSnapshots)
    assert "00000000000000000003.snapshot" not in names
    assert "00000000000000000007.snapshot" in names and "00000000000000000009.snapshot" in names
    assert read_checkpoint(out / "log-start-offset-checkpoint")[1] == [("t", 0, 6)]
    assert read_checkpoint(out / "t-0" / "leader-epoch-checkpoint")[1] == [(1, 6), (2, 7)]
    assert kbatch.verify(out).ok
    assert kbatch.open_log(out / "t-0").read().offset.tolist() == list(range(6, 12))
    with pytest.raises(kbatch.ArgumentError, match="exists"):
        plan.apply(out)
    with pytest.raises(kbatch.ArgumentError):
        kbatch.open_log_dir(data).read(log_start=plan)
    # an epoch file a broker would refuse (a negative entry) is named, nothing is left
    (data / "t-0" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n-1 2\n")
    with pytest.raises(kbatch.CorruptRecordError, match="leader-epoch-checkpoint"):
        plan.apply(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_truncate_epochs_as_kafka():
    assert truncate_epochs([(0, 0), (1, 5), (3, 9)], 5) == [(1, 5), (3, 9)]
    assert truncate_epochs([(0, 0), (1, 5), (3, 9)], 7) == [(1, 7), (3, 9)]
    assert truncate_epochs([(0, 0), (1, 5)], 0) == [(0, 0), (1, 5)]
    assert truncate_epochs([], 4) == []


def test_cli_retention(tmp_path, capfd):
    from kbatch.tools.cli import main
    write(tmp_path / "data" / "t-0", [[(3, T0 + 100 * (k + 1))] for k in range(3)])
    assert main(["retention", str(tmp_path / "data"), "--retention-ms", "150",
                 "--now", str(T0 + 300)]) == 0
    out = capfd.readouterr().out
    assert "t-0: delete 00000000000000000000.log (time)" in out and "new log start 3" in out
    assert main(["retention", str(tmp_path / "data"), "--retention-ms", "150",
                 "--now", str(T0 + 300), "--apply", str(tmp_path / "out")]) == 0
    assert not (tmp_path / "out" / "t-0" / "00000000000000000000.log").exists()


def test_apply_keeps_file_ages_and_epochs_when_nothing_goes(tmp_path):
    """Copies are as old as their sources (the time pass of a later plan
    on the copy deletes what it deletes on the source), and with nothing
    deleted the epoch file is only truncated from the checkpoint's start
    as a broker loads it (UnifiedLog truncates from the start only when
    the log start offset moves up)."""
    segs = write(tmp_path / "t-0", [[(2, -1)], [(2, -1)], [(2, -1)]],
                 lambda k: T0 + 1000 * k)
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 3\n")
    nothing = retention(tmp_path / "t-0", retention_ms=10_000, now=T0 + 1500)
    assert not nothing.partitions[0].deleted
    out = nothing.apply(tmp_path / "out")
    assert [int((out / f"{b:020d}.log").stat().st_mtime * 1000) for b, *_ in segs] == \
        [m for *_, m in segs]
    assert read_checkpoint(out / "leader-epoch-checkpoint")[1] == [(0, 0), (1, 3)]
    again = retention(out, retention_ms=500, now=T0 + 1500).partitions[0]
    assert [d.base_offset for d in again.deleted] == [0]
    assert [d.base_offset for d in retention(tmp_path / "t-0", retention_ms=500,
                                             now=T0 + 1500).partitions[0].deleted] == [0]


def test_a_log_start_above_the_log_end_deletes_every_segment(tmp_path):
    """log-start-offset-checkpoint says 10, the segments hold 0..2: a broker
    loading the directory deletes every segment and starts an empty one at
    10 (LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd, clearing the
    leader epoch cache), as kbatch's recover does; retention plans from
    that log, and its copy is what the broker would hold."""
    dd = tmp_path / "dd"
    part = dd / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(
        build_batch([(1000, b"a", b"1", []), (1000, b"b", b"2", [])], base_offset=0))
    (part / "00000000000000000002.log").write_bytes(build_batch([(1001, b"c", b"3", [])],
                                                                base_offset=2))
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (part / "00000000000000000003.snapshot").write_bytes(b"\x00" * 30)
    (dd / "log-start-offset-checkpoint").write_text("0\n1\nt 0 10\n")
    plan = retention(str(dd), now=2000)
    [p] = plan.partitions
    assert [d.file for d in p.deleted] == ["00000000000000000000.log", "00000000000000000002.log"]
    assert p.new_log_start_offset == 10 and p.rolled
    assert [len(r) for r in plan.lost().values()] == [3]
    out = tmp_path / "out"
    plan.apply(str(out))
    names = sorted(x.name for x in (out / "t-0").iterdir())
    assert [n for n in names if n.endswith(".log")] == ["00000000000000000010.log"]
    assert not [n for n in names if n.endswith(".snapshot")]    # truncateFullyAndStartAt
    assert (out / "t-0" / "00000000000000000010.log").stat().st_size == 0
    assert (out / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 10\n"
    assert (out / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n0\n"
    assert kbatch.verify(str(out)).ok
    rec = tmp_path / "rec"
    kbatch.recover(str(dd), str(rec))
    assert sorted(x.name for x in (rec / "t-0").iterdir() if x.suffix == ".log") == \
        [n for n in names if n.endswith(".log")]


def test_limits_kafka_refuses_are_refused(tmp_path, capfd):
    """retention.ms is a LONG of at least -1 in Kafka's LogConfig (-1: no
    time limit); below it is invalid config, refused by the API
    (ArgumentError) and the command line (exit 2, one line). retention.bytes
    has no validator in LogConfig ("can be negative"): any negative value is
    no size limit, as UnifiedLog's ``retentionSize < 0`` check reads it."""
    from kbatch.tools.cli import main
    write(tmp_path / "t-0", [[(3, T0 + 100 * (k + 1))] for k in range(3)])
    for bad in (-2, -5, -(1 << 63), 1 << 63):
        with pytest.raises(kbatch.ArgumentError, match="retention_ms.*out of range"):
            retention(tmp_path / "t-0", retention_ms=bad, now=T0 + 10_000)
    with pytest.raises(kbatch.ArgumentError, match="retention_bytes.*out of range"):
        retention(tmp_path / "t-0", retention_bytes=1 << 63)
    # -1 and any negative size: nothing goes, however old the segments
    kept = retention(tmp_path / "t-0", retention_ms=-1, retention_bytes=-5,
                     now=T0 + 10_000).partitions[0]
    assert kept.deleted == [] and kept.new_log_start_offset == 0
    gone = retention(tmp_path / "t-0", retention_ms=0, now=T0 + 10_000).partitions[0]
    assert [d.base_offset for d in gone.deleted] == [0, 3, 6]
    for argv in (["--retention-ms", "-5"], ["--retention-ms", "-2"],
                 ["--retention-ms", str(1 << 63)], ["--retention-bytes", str(1 << 63)]):
        with pytest.raises(SystemExit) as info:
            main(["retention", str(tmp_path / "t-0"), *argv])
        assert info.value.code == 2
        err = capfd.readouterr().err
        assert "out of range" in err and len(err.splitlines()) == 1, err
    assert main(["retention", str(tmp_path / "t-0"), "--retention-ms", "-1",
                 "--retention-bytes", "-5", "--now", str(T0 + 10_000)]) == 0
    assert "0 of 3 segments deleted" in capfd.readouterr().out


def test_apply_copies_every_file_retention_does_not_touch(tmp_path):
    """Retention deletes segments and nothing else: the copy holds the
    KRaft metadata log's snapshots and ``quorum-state``, the data
    directory's own files, and partitions without a segment file, byte for
    byte. The metadata log's retention.ms/bytes are -1 (KafkaMetadataLog),
    so it loses nothing to the time limit. A future or stray replica's
    folder is left out and named in the plan's notes."""
    dd = tmp_path / "dd"
    write(dd / "t-0", [[(3, T0 + 100)], [(3, T0 + 200)]])
    write(dd / "__cluster_metadata-0", [[(3, T0 + 100)], [(3, T0 + 200)]])
    extra = {
        "__cluster_metadata-0/00000000000000000003-0000000001.checkpoint": b"snapshot bytes",
        "__cluster_metadata-0/quorum-state": b'{"leaderId":1}',
        "bootstrap.checkpoint": b"\x00\x01bootstrap",
        ".kafka_cleanshutdown": b"{}",
        "meta.properties": b"node.id=1\n",
        "empty-0/partition.metadata": b"version: 0\ntopic_id: x\n",
    }
    for rel, data in extra.items():
        (dd / rel).parent.mkdir(parents=True, exist_ok=True)
        (dd / rel).write_bytes(data)
    write(dd / "t-1.0123456789abcdef0123456789abcdef-future", [[(2, T0)]])
    write(dd / "t-2-stray", [[(2, T0)]])
    plan = retention(dd, retention_ms=0, now=T0 + 10_000)
    # the folders of a move in progress and a stray log: left out, named
    assert sorted(n.split(":")[0] for n in plan.notes) == [
        "t-1.0123456789abcdef0123456789abcdef-future", "t-2-stray"]
    assert all("not planned or copied" in n for n in plan.notes)
    by_topic = {p.topic: p for p in plan.partitions}
    assert [d.base_offset for d in by_topic["t"].deleted] == [0, 3]
    assert by_topic["t"].rolled
    assert by_topic["__cluster_metadata"].deleted == []
    assert by_topic["__cluster_metadata"].cleanup_policy == "metadata"
    out = plan.apply(tmp_path / "out")
    for rel, data in extra.items():
        assert (out / rel).read_bytes() == data, rel
    for name in ("00000000000000000000.log", "00000000000000000003.log"):
        assert (out / "__cluster_metadata-0" / name).read_bytes() == \
            (dd / "__cluster_metadata-0" / name).read_bytes()
    assert not (out / "t-0" / "00000000000000000000.log").exists()


def test_cleanup_policy_without_delete_deletes_by_log_start_only(tmp_path):
    """UnifiedLog.deleteOldSegments runs the size and time passes only when
    the topic's cleanup.policy holds "delete": the broker's compacted
    topics always, a user topic as ``cleanup_policy`` says."""
    dd = tmp_path / "dd"
    for topic in ("__consumer_offsets", "__transaction_state", "orders", "users"):
        write(dd / f"{topic}-0", [[(2, T0)], [(2, T0)], [(2, T0)]])
    (dd / "log-start-offset-checkpoint").write_text("0\n1\n__consumer_offsets 0 2\n")
    plan = retention(dd, retention_ms=0, retention_bytes=0, now=T0 + 10_000,
                     cleanup_policy={"users": "compact", "orders": "delete,compact"})
    got = {p.topic: [(d.base_offset, d.reason) for d in p.deleted] for p in plan.partitions}
    assert got["__consumer_offsets"] == [(0, "log_start_offset")]
    assert got["__transaction_state"] == [] and got["users"] == []
    assert [b for b, _ in got["orders"]] == [0, 2, 4]
    assert {p.topic: p.cleanup_policy for p in plan.partitions}["orders"] == "compact,delete"
    for bad in ("remove", "", {"orders": "keep"}, 3):
        with pytest.raises(kbatch.ArgumentError, match="cleanup"):
            retention(dd, retention_ms=0, cleanup_policy=bad)


def test_a_partition_directory_reads_the_checkpoints_of_its_data_directory(tmp_path):
    """The log start and high watermark of a partition live in its data
    directory's checkpoint files: a plan of the partition directory alone
    uses them as the plan of the whole directory does. A high watermark
    below the log start is raised to it (UnifiedLog.updateHighWatermark)."""
    dd = tmp_path / "dd"
    write(dd / "t-0", [[(3, T0)], [(3, T0)], [(3, T0)]])
    (dd / "log-start-offset-checkpoint").write_text("0\n1\nt 0 4\n")
    (dd / "replication-offset-checkpoint").write_text("0\n1\nt 0 6\n")
    whole = retention(dd, retention_ms=0, now=T0 + 1).partitions[0]
    alone = retention(dd / "t-0", retention_ms=0, now=T0 + 1).partitions[0]
    for p in (whole, alone):
        assert (p.log_start_offset, p.high_watermark) == (4, 6)
        assert [(d.base_offset, d.reason) for d in p.deleted] == \
            [(0, "log_start_offset"), (3, "time")]
        assert p.new_log_start_offset == 6 and not p.rolled
    (dd / "log-start-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    (dd / "replication-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    stale = retention(dd / "t-0").partitions[0]
    assert stale.high_watermark == 7
    assert [(d.base_offset, d.reason) for d in stale.deleted] == \
        [(0, "log_start_offset"), (3, "log_start_offset")]


def test_a_tiered_bucket_is_refused(tmp_path):
    """The remote log manager deletes remote segments by rules of its own
    (RemoteLogManager): a plan by the local log's rules would be wrong, and
    its --apply copy could not hold the uploaded objects."""
    from tests.tiered_encoder import Encoder, encode_partition, kafka_uuid
    segs = write(tmp_path / "src" / "t-0", [[(3, T0)], [(3, T0 + 500)]])
    objects = encode_partition(Encoder("plain", chunk_size=1024), str(tmp_path / "src" / "t-0"),
                               topic="t", topic_id=kafka_uuid(), partition=0,
                               last_offsets={segs[0][0]: 2, segs[1][0]: 5})
    bucket = tmp_path / "bucket"
    for key, data in objects.items():
        (bucket / key).parent.mkdir(parents=True, exist_ok=True)
        (bucket / key).write_bytes(data)
    (part,) = {(bucket / k).parent for k in objects}
    assert len(kbatch.open_log(part, layout="tiered").read()) == 6
    with pytest.raises(kbatch.ArgumentError, match="tiered bucket"):
        retention(part, layout="tiered", retention_ms=0, now=T0 + 10_000)


def test_an_open_transaction_beginning_in_a_deleted_segment_is_reported(tmp_path):
    """Producer 7's transaction starts at offset 0 and has no marker: the
    broker keeps it in its producer state, so after retention deletes
    segment 0 a read_committed consumer's last stable offset is the new
    log start (UnifiedLog: max(first unstable offset, log start)) and it
    sees nothing; a read of the source as that consumer agrees, and the
    plan says what the copy alone cannot show."""
    from tests.kafka_ref import build_batch as ref_batch, control_batch
    from tests.lifecycle_ref import write_partition
    dd = tmp_path / "dd"
    segs = [[ref_batch([(T0, b"k", b"open", []), (T0, b"k", b"open", [])], base_offset=0,
                       producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
             ref_batch([(T0, b"a", b"2", []), (T0, b"b", b"3", [])], base_offset=2)],
            [ref_batch([(T0 + 5000, b"c", b"4", []), (T0 + 5000, b"d", b"5", [])],
                       base_offset=4)]]
    write_partition(dd / "t-0", segs)
    plan = retention(dd, retention_ms=1000, now=T0 + 5500)
    (p,) = plan.partitions
    assert [d.base_offset for d in p.deleted] == [0] and p.new_log_start_offset == 4
    assert len(p.notes) == 1 and "producer 7's transaction from offset 0" in p.notes[0]
    seen = kbatch.open_log_dir(dd).read(visibility="consumer", log_start=plan.log_start_offsets,
                                        isolation="read_committed")
    assert len(seen[("t", 0)]) == 0
    # a committed transaction in the deleted segment: nothing to say
    segs[0].insert(1, control_batch(base_offset=2, producer_id=7, producer_epoch=0))
    segs[0][2] = ref_batch([(T0, b"a", b"2", [])], base_offset=3)
    write_partition(dd / "u-0", segs)
    (q,) = [x for x in retention(dd, retention_ms=1000, now=T0 + 5500).partitions
            if x.topic == "u"]
    assert [d.base_offset for d in q.deleted] == [0] and q.notes == []


def test_a_partition_beside_a_malformed_checkpoint_still_plans(tmp_path, caplog):
    """The folder holding a partition directory may not be a data directory:
    a checkpoint file there that cannot be parsed (or is a folder) is not
    used, with a warning, and retention and the cleaner plan as without one."""
    import logging
    from kbatch.lib.compact import compact
    root = tmp_path / "root"
    write(root / "t-0", [[(3, T0)], [(3, T0)], [(3, T0)]])
    (root / "replication-offset-checkpoint").write_text("garbage\n")
    (root / "log-start-offset-checkpoint").mkdir()
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        plan = retention(root / "t-0", retention_bytes=1)
        report = compact(root / "t-0", tmp_path / "out", now=T0 + 1000)
    assert [d.base_offset for d in plan.partitions[0].deleted] == [0, 3]
    assert report.partitions[0].first_uncleanable_offset == 6
    assert [r for r in caplog.records if "is not used" in r.getMessage()]


def test_cleanup_policy_spelling_as_kafka_takes_it():
    """LogConfig's cleanup.policy list: lower case, each value once; None is
    the default; an internal topic named in a mapping takes the policy given
    (AlterConfigs can change it), the metadata log's stays."""
    from kbatch.lib.retention import check_policies, policy_of
    for bad in ("Delete", "delete,delete", "compact,", "", 0):
        with pytest.raises(kbatch.ArgumentError):
            check_policies(bad)
    check_policies(None)
    assert policy_of("t", None) == "delete" and policy_of("t", None, "compact") == "compact"
    assert policy_of("t", "delete, compact") == "compact,delete"
    assert policy_of("__consumer_offsets", "delete") == "compact"
    assert policy_of("__consumer_offsets", {"__consumer_offsets": "delete"}) == "delete"
    assert policy_of("__cluster_metadata", {"__cluster_metadata": "compact"}) == "metadata"


def test_the_cleaner_refuses_a_tiered_bucket(tmp_path):
    from kbatch.lib.compact import compact
    from tests.tiered_encoder import Encoder, encode_partition, kafka_uuid
    segs = write(tmp_path / "src" / "t-0", [[(3, T0)], [(3, T0 + 500)]])
    objects = encode_partition(Encoder("plain", chunk_size=1024), str(tmp_path / "src" / "t-0"),
                               topic="t", topic_id=kafka_uuid(), partition=0,
                               last_offsets={segs[0][0]: 2, segs[1][0]: 5})
    for key, data in objects.items():
        (tmp_path / "bucket" / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "bucket" / key).write_bytes(data)
    (part,) = {(tmp_path / "bucket" / k).parent for k in objects}
    with pytest.raises(kbatch.ArgumentError, match="tiered bucket"):
        compact(part, tmp_path / "out", layout="tiered")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("clean, recovery_point, index, time_index, deleted", [
    (True, 0, True, None, False),      # clean load: the empty time index stays; file time
    (False, 3, True, None, False),     # below the recovery point: not recovered; file time
    (False, 3, True, b"", False),      # an empty time index is the same
    (False, 0, True, None, True),      # recovered: the time index rebuilt from the batches
    (False, 2, True, None, True),      # the segment holding the recovery point is recovered
    (True, 0, False, None, True),      # no offset index: recovered whatever the shutdown
    (True, 0, True, b"x" * 12, True),  # a time index with an entry: the batches' max
])
def test_a_segment_without_its_time_index_is_as_old_as_its_file_unless_recovered(
        tmp_path, clean, recovery_point, index, time_index, deleted):
    """LogLoader.loadSegmentFiles: a missing time index is made empty
    (LogSegment.sanityCheck) and only a segment without its offset index, or
    one recoverLog recovers (after an unclean shutdown, from the segment
    holding the recovery point on), has it rebuilt from the batches; an
    empty time index gives no largest timestamp (maxTimestampSoFar -1), so
    LogSegment.largestTimestamp is the file's modification time. Here the
    batches are 5.4 s old, the file 0.5 s: retention.ms=1000 deletes the
    first segment by the batches only."""
    data = tmp_path / "data"
    write(data / "t-0", [[(3, T0 + 100)], [(2, T0 + 5000)]],
          lambda k: T0 + 5000 if k == 0 else T0 + 5400)
    stem = data / "t-0" / f"{0:020d}"
    if index:
        stem.with_suffix(".index").write_bytes(b"")
    if time_index is not None:
        stem.with_suffix(".timeindex").write_bytes(time_index)
    if clean:
        (data / ".kafka_cleanshutdown").write_text("")
    (data / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {recovery_point}\n")
    for source in (data, data / "t-0"):      # the data directory, or the partition alone
        p = retention(source, retention_ms=1000, now=T0 + 5500).partitions[0]
        assert [d.base_offset for d in p.deleted] == ([0] if deleted else []), source
        assert p.segments[0].from_mtime is not deleted
