"""Consumer lag, visible ranges, checkpoint files, producer snapshots, the
sample's internal topics and the command line of kbatch.internal."""

import json
import struct

import crc32c
import pytest

import kbatch
from kbatch.tools.cli import main
from kbatch.errors import CorruptRecordError
from kbatch.internal import (checkpoints, cluster_metadata, consumer_lag, group_metadata,
                             latest_lag, offset_commits, producer_snapshot, read_checkpoint,
                             transaction_log, visible_ranges)
from kbatch.lib.visibility import visible


def _commit(group, topic, partition, offset, ts):
    g, t = group.encode(), topic.encode()
    key = (struct.pack(">hh", 1, len(g)) + g + struct.pack(">h", len(t)) + t
           + struct.pack(">i", partition))
    return key, struct.pack(">hqihq", 3, offset, 0, 0, ts) if offset is not None else None, ts


def test_consumer_lag_against_a_reference(tmp_path):
    # data: CreateTime not monotonic; one record per batch so the reference
    # is simple: LEO(T) = 1 + the last offset whose running max time <= T
    stamps = [1000, 1010, 1005, 1030, 1020, 1050, 1040, 1100, 1090, 1200]
    kbatch.write_log(tmp_path / "orders-0", [(b"k", b"v", t) for t in stamps], batch_records=1)
    kbatch.write_log(tmp_path / "orders-1", [(b"k", b"v", 5000)], batch_records=1)
    commits = [_commit("g1", "orders", 0, o, t) for o, t in
               [(0, 999), (1, 1012), (2, 1035), (3, 1045), (9, 1150), (10, 1300)]]
    commits += [_commit("g2", "orders", 0, 4, 1060), _commit("g2", "orders", 0, None, 1070),
                _commit("g2", "orders", 1, 0, 1000), _commit("g3", "gone", 0, 5, 1000)]
    kbatch.write_log(tmp_path / "__consumer_offsets-3", commits)

    def leo(t):
        best, top = 0, float("-inf")
        for i, s in enumerate(stamps):
            top = max(top, s)
            if top <= t:
                best = i + 1
        return best

    lag = consumer_lag(tmp_path).to_pylist()
    want = [("g1", 0, o, t) for o, t in [(0, 999), (1, 1012), (2, 1035), (3, 1045), (9, 1150),
                                          (10, 1300)]]
    want += [("g2", 0, 4, 1060)]
    rows = [r for r in lag if r["partition"] == 0]
    assert [(r["group"], r["partition"], r["committed_offset"],
             int(r["commit_timestamp"].timestamp() * 1000)) for r in rows] == want
    for r, (_, _, off, t) in zip(rows, want):
        assert r["log_end_offset"] == leo(t)
        assert r["lag"] == max(leo(t) - off, 0)
    # orders-1 before its only record: the log's start; "gone" has no data here
    other = [r for r in lag if r["partition"] == 1]
    assert [(r["group"], r["log_end_offset"], r["lag"]) for r in other] == [("g2", 0, 0)]
    assert {r["topic"] for r in lag} == {"orders"}
    latest = latest_lag(consumer_lag(tmp_path, groups=["g1"])).to_pylist()
    assert [(r["committed_offset"], r["lag"]) for r in latest] == [(10, 0)]
    # g2's offset of orders-0 was deleted (a tombstone): only orders-1 is live
    latest = latest_lag(consumer_lag(tmp_path, groups=["g2"])).to_pylist()
    assert [(r["partition"], r["committed_offset"]) for r in latest] == [(1, 0)]
    assert [r["current"] for r in lag if r["group"] == "g2"] == [False, True]


def _checkpoint(path, rows):
    path.write_text(f"0\n{len(rows)}\n" + "".join(" ".join(map(str, r)) + "\n" for r in rows))


def test_checkpoints_and_visible_ranges(tmp_path):
    _checkpoint(tmp_path / "replication-offset-checkpoint", [("a", 0, 7), ("b", 1, 3)])
    _checkpoint(tmp_path / "log-start-offset-checkpoint", [("a", 0, 2)])
    _checkpoint(tmp_path / "recovery-point-offset-checkpoint", [("a", 0, 9)])
    (tmp_path / "a-0").mkdir()
    _checkpoint(tmp_path / "a-0" / "leader-epoch-checkpoint", [(0, 0), (3, 5)])
    t = checkpoints(tmp_path).to_pylist()
    kinds = sorted((r["kind"], r["topic"], r["partition"], r["leader_epoch"], r["offset"])
                   for r in t)
    assert kinds == [("high_watermark", "a", 0, None, 7), ("high_watermark", "b", 1, None, 3),
                     ("leader_epoch", "a", 0, 0, 0), ("leader_epoch", "a", 0, 3, 5),
                     ("log_start_offset", "a", 0, None, 2), ("recovery_point", "a", 0, None, 9)]
    assert visible_ranges(tmp_path) == {("a", 0): (2, 7), ("b", 1): (None, 3)}
    kbatch.write_log(tmp_path / "a-0", [(None, b"%d" % i, 1) for i in range(10)])
    rec = kbatch.open_log(tmp_path / "a-0").read()
    assert visible(rec, (2, 7)).offset.tolist() == [2, 3, 4, 5, 6]
    assert visible(rec, (None, None)).offset.tolist() == list(range(10))


@pytest.mark.parametrize("text,problem", [
    ("1\n0\n", "version"), ("0\n2\na 0 1\n", "count"), ("0\n1\na x 1\n", "not a number"),
    ("0\n1\na 0\n", "want"), ("\xff\n", "not a number")])
def test_bad_checkpoint_files(tmp_path, text, problem):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptRecordError, match=problem):
        read_checkpoint(path)
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        read_checkpoint(path)


def _snapshot(entries):
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_producer_snapshot(tmp_path):
    entries = [(1000, 2, 41, 9001, 3, 1_700_000_000_123, 5, -1),
               (1001, 0, 0, 12, 0, 1_700_000_000_456, -1, 10)]
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000042.snapshot").write_bytes(_snapshot(entries))
    t = producer_snapshot(tmp_path).to_pylist()
    got = [(r["producer_id"], r["epoch"], r["last_sequence"], r["last_offset"],
            r["offset_delta"], int(r["timestamp"].timestamp() * 1000), r["coordinator_epoch"],
            r["current_txn_first_offset"]) for r in t]
    assert got == entries and t[0]["snapshot_offset"] == 42 and t[0]["topic"] == "t"
    raw = bytearray(_snapshot(entries))
    raw[20] ^= 1
    (d / "00000000000000000042.snapshot").write_bytes(bytes(raw))
    with pytest.raises(CorruptRecordError, match="CRC"):
        producer_snapshot(d)
    for cut in range(len(raw) - 1):
        (d / "00000000000000000042.snapshot").write_bytes(_snapshot(entries)[:cut])
        with pytest.raises(CorruptRecordError):
            producer_snapshot(d)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from kbatch.tools.sample import write_sample
    root = tmp_path_factory.mktemp("sample")
    write_sample(root, records=30_000)
    return root


def test_sample_internal_topics(sample):
    commits = offset_commits(sample)
    assert commits.column("error").null_count == len(commits) > 100
    groups = set(commits.column("group").to_pylist())
    assert groups >= {"analytics", "order-service", "nightly-batch", "inventory-sync"}
    assert commits.column("tombstone").to_pylist().count(True) == 2
    lag = consumer_lag(sample)
    assert set(lag.column("group").to_pylist()) >= {"analytics", "order-service"}
    assert max(lag.column("lag").to_pylist()) > 0
    gm = group_metadata(sample).to_pylist()
    live = [g for g in gm if not g["tombstone"]]
    assert {g["group"] for g in live} == {"analytics", "order-service"}
    for g in live:
        topics = {p["topic"] for m in g["members"]
                  for p in m["assignment"]["assigned_partitions"]}
        assert topics == {"page-views" if g["group"] == "analytics" else "orders"}
    txn = transaction_log(sample)
    assert set(txn.column("state").to_pylist()) >= {"Ongoing", "PrepareCommit",
                                                    "CompleteCommit"}
    meta = cluster_metadata(sample)
    assert set(meta.topics.column("topic_name").to_pylist()) == {
        "orders", "page-views", "payments", "inventory.events-v2"}
    assert len(meta.partitions) > 10 and len(meta.brokers) == 1
    ranges = visible_ranges(sample)
    assert ("__consumer_offsets", 2) in ranges or any(k[0] == "__consumer_offsets"
                                                       for k in ranges)
    assert ranges[("inventory.events-v2", 0)][0] == 1000


def _run(capfd, *argv):
    status = main(list(argv))
    return status, capfd.readouterr().out


def test_cli(sample, capfd, tmp_path):
    status, out = _run(capfd, "lag", str(sample), "--format", "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and {r["group"] for r in rows} >= {"analytics", "order-service"}
    status, out = _run(capfd, "lag", str(sample), "--group", "analytics")
    assert status == 0 and "analytics" in out and "order-service" not in out
    seg = next(sample.glob("__consumer_offsets-*/*.log"))
    status, out = _run(capfd, "dump", "--decode", "offsets", "--format", "json", str(seg))
    lines = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and len(lines) == len(kbatch.read_segment(seg))
    assert all(r["type"] for r in lines)
    status, out = _run(capfd, "dump", "--decode", "metadata",
                       str(next(sample.glob("__cluster_metadata-0/*.log"))))
    assert status == 0 and "TopicRecord" in out and "RegisterBrokerRecord" in out
    status, out = _run(capfd, "dump", str(sample / "replication-offset-checkpoint"))
    assert status == 0 and "page-views-0:" in out
    snap = tmp_path / "00000000000000000001.snapshot"
    snap.write_bytes(_snapshot([(7, 0, 1, 2, 0, 3, -1, -1)]))
    status, out = _run(capfd, "dump", "--format", "json", str(snap))
    assert status == 0 and json.loads(out)["producer_id"] == 7
    status, out = _run(capfd, "txn", str(sample))
    assert "payments-tx-2001" in out
    status, out = _run(capfd, "dump", str(sample / "orders-0" / "00000000000000000000.log"))
    assert status == 0 and "baseOffset" in out


def test_log_dir_read_consumer_visibility(sample, capfd):
    d = kbatch.open_log_dir(sample)
    everything = d.read(["page-views", "inventory.events-v2"], threads=1)
    seen = d.read(["page-views", "inventory.events-v2"], threads=1, visibility="consumer")
    ranges = visible_ranges(sample)
    for key, rec in everything.items():
        lo, hi = ranges[key]
        want = [o for o in rec.offset.tolist() if lo <= o < hi]
        assert seen[key].offset.tolist() == want
    assert len(seen[("page-views", 0)]) == len(everything[("page-views", 0)]) - 250
    assert seen[("inventory.events-v2", 0)].offset[0] == 1000
    with pytest.raises(ValueError, match="visibility"):
        d.read(visibility="committed")
    status, out = _run(capfd, "stats", str(sample))
    assert "250 offsets above the high watermark" in out
    assert "1000 offsets below the log start" in out


def _framed(name, version, values):
    from kbatch.internal._schemas import MESSAGES
    from tests.internal_ref import enc_struct, uvarint
    m = MESSAGES[name]
    return uvarint(1) + uvarint(m["api_key"]) + uvarint(version) + \
        enc_struct(m["fields"], values, version, True)


def test_remote_log_metadata_and_share_state(tmp_path):
    from kbatch.internal import remote_log_metadata, share_state
    tip = {"name": "orders", "id": "AAAAAAAAAAAAAAAAAAAAAQ", "partition": 2}
    seg = {"topic_id_partition": tip, "id": "AAAAAAAAAAAAAAAAAAAAAg"}
    recs = [_framed("RemoteLogSegmentMetadataRecord", 0, {
                "remote_log_segment_id": seg, "start_offset": 0, "end_offset": 99,
                "broker_id": 1, "max_timestamp_ms": 5, "event_timestamp_ms": 6,
                "segment_leader_epochs": [{"leader_epoch": 0, "offset": 0}],
                "segment_size_in_bytes": 4096, "custom_metadata": None,
                "remote_log_segment_state": 0}),
            _framed("RemoteLogSegmentMetadataUpdateRecord", 0, {
                "remote_log_segment_id": seg, "broker_id": 1, "event_timestamp_ms": 7,
                "custom_metadata": None, "remote_log_segment_state": 1}),
            _framed("RemotePartitionDeleteMetadataRecord", 0, {
                "topic_id_partition": tip, "broker_id": 1, "event_timestamp_ms": 8,
                "remote_partition_delete_state": 0})]
    kbatch.write_log(tmp_path / "__remote_log_metadata-0", [(b"k", v, 1) for v in recs])
    t = remote_log_metadata(tmp_path).to_pylist()
    assert [(r["state"], r["start_offset"], r["end_offset"], r["remote_topic"],
             r["remote_partition"]) for r in t] == [
        ("COPY_SEGMENT_STARTED", 0, 99, "orders", 2), ("COPY_SEGMENT_FINISHED", 0, 99, "orders", 2),
        ("DELETE_PARTITION_MARKED", None, None, "orders", 2)]
    assert t[1]["segment_id"] == "AAAAAAAAAAAAAAAAAAAAAg"
    from kbatch.internal._schemas import MESSAGES
    from tests.internal_ref import enc_struct
    key = struct.pack(">h", 0) + enc_struct(MESSAGES["ShareSnapshotKey"]["fields"], {
        "group_id": "sg", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partition": 3}, 0, False)
    value = struct.pack(">h", 0) + enc_struct(MESSAGES["ShareSnapshotValue"]["fields"], {
        "snapshot_epoch": 1, "state_epoch": 2, "leader_epoch": 3, "start_offset": 10,
        "create_timestamp": 20, "write_timestamp": 21,
        "state_batches": [{"first_offset": 10, "last_offset": 12, "delivery_state": 2,
                           "delivery_count": 1}]}, 0, True)
    kbatch.write_log(tmp_path / "__share_group_state-0", [(key, value, 1)])
    s = share_state(tmp_path).to_pylist()
    assert s[0]["key_group_id"] == "sg" and s[0]["start_offset"] == 10
    assert s[0]["state_batches"][0]["last_offset"] == 12
    assert (s[0]["create_timestamp"], s[0]["write_timestamp"]) == (20, 21)
    assert s[0]["schema_commit"] is None


def test_metadata_transactions_apply_as_the_loader_applies_them(tmp_path, caplog):
    """KIP-868 metadata transactions (MetadataBatchLoader): an aborted one's
    records and one still open at the log's end are not in the state
    tables (only in ``records``, marked); a committed one's are. A record no
    schema reads is in ``unread`` with a warning. A Begin inside a
    transaction, or an End without one, is damage."""
    t1, t2 = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"
    part = {"partition_id": 0, "topic_id": t1, "replicas": [1, 2], "isr": [1, 2],
            "removing_replicas": [], "adding_replicas": [], "leader": 1, "leader_epoch": 0,
            "partition_epoch": 0}
    change = {"partition_id": 0, "topic_id": t1, "leader": 2, "isr": [2]}
    isr_only = {"partition_id": 0, "topic_id": t1, "leader": -2, "isr": [1, 2]}
    recs = [_framed("TopicRecord", 0, {"name": "kept", "topic_id": t1}),
            _framed("PartitionRecord", 0, part),
            _framed("BeginTransactionRecord", 0, {"name": "aborted"}),
            _framed("PartitionChangeRecord", 0, change),
            _framed("TopicRecord", 0, {"name": "never-created", "topic_id": t2}),
            _framed("AbortTransactionRecord", 0, {"reason": "failover"}),
            _framed("PartitionChangeRecord", 0, isr_only),
            _framed("BeginTransactionRecord", 0, {"name": "committed"}),
            _framed("TopicRecord", 0, {"name": "created", "topic_id": t2}),
            _framed("EndTransactionRecord", 0, {}),
            # a PartitionChangeRecord of a version no schema knows (99)
            _framed("TopicRecord", 0, {"name": "x", "topic_id": t2})[:2] + b"\x63\x00",
            _framed("BeginTransactionRecord", 0, {"name": "open at the end"}),
            _framed("TopicRecord", 0, {"name": "still-open", "topic_id": "AAAAAAAAAAAAAAAAAAAAAw"})]
    kbatch.write_log(tmp_path / "__cluster_metadata-0", [(None, v, 1) for v in recs])
    with caplog.at_level("WARNING", logger="kbatch"):
        meta = cluster_metadata(tmp_path / "__cluster_metadata-0")
    assert meta.topics.column("topic_name").to_pylist() == ["kept", "created"]
    assert [(r["change"], r["leader"], r["isr"]) for r in
            meta.partitions.select(["change", "leader", "isr"]).to_pylist()] == [
        ("PartitionRecord", 1, [1, 2]), ("PartitionChangeRecord", 1, [1, 2])]
    assert meta.records.column("uncommitted").to_pylist() == \
        [False] * 3 + [True, True] + [False] * 6 + [False, True]
    assert meta.unread.column("record_offset").to_pylist() == [10]
    assert "1 __cluster_metadata record(s) no schema reads" in caplog.text
    for bad in ([recs[2], recs[2]], [recs[9]], [recs[5]]):
        d = tmp_path / f"bad{len(bad)}{bad[0][:4].hex()}" / "__cluster_metadata-0"
        kbatch.write_log(d, [(None, v, 1) for v in bad])
        with pytest.raises(CorruptRecordError, match="TransactionRecord"):
            cluster_metadata(d)


def test_consumer_protocol_bytes_that_do_not_parse_are_named(tmp_path):
    """A member's assignment cut short is not an empty assignment: the
    row's error names the member (Kafka's ConsumerProtocol refuses it); an
    empty one (a member between rebalances) is no error; a subscription that
    stops after an older version's fields says which version was read."""
    from kbatch.internal import group_metadata

    def s16(x):
        return struct.pack(">h", len(x)) + x.encode()

    def b32(x):
        return struct.pack(">i", len(x)) + x
    asg = struct.pack(">hi", 0, 1) + s16("t") + struct.pack(">iii", 1, 0, -1)
    sub_v3_cut = struct.pack(">hi", 3, 1) + s16("t") + struct.pack(">i", -1) + \
        struct.pack(">i", 0)           # v3 that stops after version 1's owned partitions

    def value(a, sub):
        v = struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5) + s16("range") + \
            s16("m1") + struct.pack(">q", 0) + struct.pack(">i", 1) + s16("m1") + \
            struct.pack(">h", -1) + s16("c") + s16("/h") + struct.pack(">ii", 300000, 10000)
        return v + b32(sub) + b32(a)
    key = struct.pack(">h", 2) + s16("g1")
    kbatch.write_log(tmp_path / "__consumer_offsets-0",
                     [(key, value(asg, sub_v3_cut), 1), (key, value(asg[:-3], sub_v3_cut), 2),
                      (key, value(b"", sub_v3_cut), 3)])
    rows = group_metadata(tmp_path).to_pylist()
    assert [r["error"] for r in rows] == [
        None, "member m1: an assignment (version 0) that no version's fields read", None]
    assert rows[0]["members"][0]["assignment"]["assigned_partitions"] == \
        [{"topic": "t", "partitions": [0]}]
    assert rows[1]["members"][0]["assignment"] is None
    assert rows[2]["members"][0]["assignment"] is None
    sub = rows[0]["members"][0]["subscription"]
    assert (sub["version"], sub["read_version"], sub["generation_id"]) == (3, 1, None)


def test_metadata_headers_out_of_range_are_errors_not_crashes(tmp_path):
    """A metadata record header whose api key or version varint passes
    32767 (Kafka's unsignedIntToShort refuses it): a row with its error and
    raw bytes, and the tables build."""
    from tests.internal_ref import uvarint
    from kbatch.internal import records
    good = _framed("TopicRecord", 0, {"name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"})
    for bad, what in ((uvarint(1) + uvarint(3) + uvarint(40000) + b"\0", "version 40000"),
                      (uvarint(1) + uvarint(3_000_000_000) + uvarint(0) + b"\0",
                       "api key 3000000000"),
                      (uvarint(300) + uvarint(3) + uvarint(0) + b"\0", "frame version 300")):
        d = tmp_path / what.replace(" ", "_") / "__cluster_metadata-0"
        kbatch.write_log(d, [(None, good, 1), (None, bad, 2)])
        rows = records(d, "metadata").to_pylist()
        assert rows[0]["known"] and not rows[1]["known"]
        assert what in rows[1]["error"] and rows[1]["raw_value"] == bad
        assert cluster_metadata(d).topics.column("topic_name").to_pylist() == ["t"]


def test_a_metadata_record_of_another_frame_version_is_unread_with_its_error(tmp_path, caplog):
    """MetadataRecordSerde (AbstractApiMessageSerde.read) reads frame
    version 1 only: a record framed 0 (KRaft's 2.8 preview) or 2 is one
    Kafka refuses (tests/internal_ref.ref_frame_refusal), so it is in
    ``unread`` and ``records`` with its error and no type, and the state
    tables lack it; the warning counts it."""
    from tests.internal_ref import ref_frame_refusal
    from kbatch.internal import records
    good = _framed("TopicRecord", 0, {"name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"})
    other = _framed("TopicRecord", 0, {"name": "u", "topic_id": "AAAAAAAAAAAAAAAAAAAAAg"})
    bad = [bytes([frame]) + other[1:] for frame in (0, 2)]
    assert ref_frame_refusal(good) is None and all(ref_frame_refusal(b) for b in bad)
    d = tmp_path / "__cluster_metadata-0"
    kbatch.write_log(d, [(None, v, 1) for v in [good] + bad])
    with caplog.at_level("WARNING", logger="kbatch"):
        meta = cluster_metadata(d)
    assert meta.topics.column("topic_name").to_pylist() == ["t"]
    assert meta.unread.column("record_offset").to_pylist() == [1, 2]
    assert "2 __cluster_metadata record(s) no schema reads" in caplog.text
    for rows in (meta.unread.to_pylist(), records(d, "metadata").to_pylist()[1:]):
        assert [(r["known"], r["type"], r["type_id"], r["value_version"]) for r in rows] == \
            [(False, None, None, None)] * 2
        assert ["frame version 0" in rows[0]["error"], "frame version 2" in rows[1]["error"]] == \
            [True, True]
        assert [r["raw_value"] for r in rows] == bad


def test_a_metadata_log_may_begin_inside_a_transaction(tmp_path):
    """KRaft keeps the segment holding its snapshot's offset, so a log whose
    older segments were deleted may begin inside a transaction: records
    before a first End are that transaction's (applied), before a first
    Abort they are not; only where the replay starts clean (offset 0) is an
    End without a Begin damage."""
    t1, t2, t3 = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"
    for end, want in (("EndTransactionRecord", ["b", "c"]), ("AbortTransactionRecord", ["c"])):
        recs = [_framed("BeginTransactionRecord", 0, {"name": "big create"}),
                _framed("TopicRecord", 0, {"name": "a", "topic_id": t1}),
                _framed("TopicRecord", 0, {"name": "b", "topic_id": t2}),
                _framed(end, 0, {} if end.startswith("End") else {"reason": "r"}),
                _framed("TopicRecord", 0, {"name": "c", "topic_id": t3})]
        d = tmp_path / end / "__cluster_metadata-0"
        kbatch.write_log(d, [(None, v, 1) for v in recs], batch_records=1, segment_bytes=150)
        whole = ["a", "b", "c"] if end.startswith("End") else ["c"]
        assert cluster_metadata(d).topics.column("topic_name").to_pylist() == whole
        for f in sorted(d.glob("00000000000000000000.*")) + sorted(d.glob("00000000000000000001.*")):
            f.unlink()                        # deleted after a snapshot at offset 2
        assert cluster_metadata(d).topics.column("topic_name").to_pylist() == want
        assert cluster_metadata(d / f"{3:020d}.log").topics.num_rows == 0


def test_a_checkpoint_of_a_version_line_alone_has_no_entries(tmp_path):
    """CheckpointReadBuffer.read returns no entries when the count line is
    missing (a file cut after its version line)."""
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n")
    assert read_checkpoint(path) == ("high_watermark", [])


def _coordinator_replay(events) -> dict:
    """The group coordinator's offsets after replaying ``events`` (written
    from OffsetMetadataManager.replay and replayEndTransactionMarker):
    ("commit", pid, key, offset) with pid -1 for an ordinary commit,
    ("tomb", key), ("marker", pid, committed). Returns key -> committed
    offset of the live commits."""
    live, pending, open_by_group = {}, {}, {}
    for at, ev in enumerate(events):
        if ev[0] == "commit":
            _, pid, key, value = ev
            if pid == -1:
                live[key] = (at, value)
            else:
                pending.setdefault(pid, {})[key] = (at, value)
                open_by_group.setdefault(key[0], set()).add(pid)
        elif ev[0] == "tomb":
            key = ev[1]
            live.pop(key, None)
            for pid in open_by_group.get(key[0], ()):
                pending.get(pid, {}).pop(key, None)
        else:
            _, pid, committed = ev
            offsets = pending.pop(pid, None)
            if offsets is None:
                continue
            for key in offsets:
                open_by_group.get(key[0], set()).discard(pid)
            if committed:
                for key, (at_, value) in offsets.items():
                    if key not in live or at_ > live[key][0]:
                        live[key] = (at_, value)
    return {k: v for k, (_, v) in live.items()}


@pytest.mark.parametrize("seed", range(6))
def test_transactional_offset_commits_count_as_the_coordinator_replays_them(tmp_path, seed):
    """TxnOffsetCommit records wait for their producer's marker: an aborted
    or still open one is never the group's live offset (it was, as the last
    record of its key), a committed one is, unless an ordinary commit with a
    later record offset came first; a tombstone drops the commits waiting."""
    import random

    from tests.kafka_ref import ABORT, COMMIT, build_batch, control_batch
    rnd = random.Random(seed)
    T0 = 1_700_000_000_000
    keys = [(g, "t", p) for g in ("g1", "g2") for p in (0, 1)]
    events, log, open_pids = [], b"", set()
    for offset in range(60):
        roll = rnd.random()
        if roll < 0.3 and open_pids:
            pid = rnd.choice(sorted(open_pids))
            open_pids.discard(pid)
            committed = rnd.random() < 0.5
            events.append(("marker", pid, committed))
            log += control_batch(base_offset=offset, producer_id=pid, producer_epoch=0,
                                 control_type=COMMIT if committed else ABORT, timestamp=T0 + offset)
            continue
        key = rnd.choice(keys)
        if roll < 0.38:
            events.append(("tomb", key))
            k, _, _ = _commit(*key, None, T0)
            log += build_batch([(T0 + offset, k, None, ())], base_offset=offset)
            continue
        value = rnd.randrange(0, 400)
        pid = rnd.choice([-1, -1, 7, 8, 9])
        k, v, _ = _commit(*key, value, T0 + offset)
        events.append(("commit", pid, key, value))
        if pid == -1:
            log += build_batch([(T0 + offset, k, v, ())], base_offset=offset)
        else:
            open_pids.add(pid)
            log += build_batch([(T0 + offset, k, v, ())], base_offset=offset, producer_id=pid,
                               producer_epoch=0, transactional=True)
    (tmp_path / "__consumer_offsets-0").mkdir()
    (tmp_path / "__consumer_offsets-0" / "00000000000000000000.log").write_bytes(log)
    for p in (0, 1):
        kbatch.write_log(tmp_path / f"t-{p}", [{"value": b"x", "timestamp": T0}] * 500)
    want = _coordinator_replay(events)
    got = {(r["group"], r["topic"], r["partition"]): r["committed_offset"]
           for r in latest_lag(consumer_lag(tmp_path)).to_pylist()}
    assert got == want
    # each transactional commit says how its transaction ended
    rows = offset_commits(tmp_path).to_pylist()
    written = [at for at, e in enumerate(events) if e[0] != "marker"]
    assert len(rows) == len(written)
    for row, at in zip(rows, written):
        ev = events[at]
        if ev[0] == "tomb" or ev[1] == -1:
            assert row["transaction"] is None
            continue
        later = [e for e in events[at:] if e[0] == "marker" and e[1] == ev[1]]
        outcome = "open" if not later else ("committed" if later[0][2] else "aborted")
        assert (row["producer_id"], row["transaction"]) == (ev[1], outcome)
