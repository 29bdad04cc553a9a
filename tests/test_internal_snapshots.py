"""KRaft ``.checkpoint`` snapshots in kbatch.internal's tables: taken as
Kafka's RecordsSnapshotReader takes them (tests/internal_ref.py's
``ref_snapshot_refusal``, written from raft/'s RecordsSnapshotReader and
RecordsIterator), and whole: a batch skipped over, or a byte range, is not
the cluster's state at the snapshot's offset."""

import struct

import pytest

import kbatch
from kbatch.errors import ArgumentError, CorruptRecordError
from kbatch.internal import cluster_metadata, records
from kbatch.internal._schemas import MESSAGES
from tests.internal_ref import enc_struct, ref_snapshot_refusal, uvarint
from tests.kafka_ref import (ATTR_CONTROL, build_batch, empty_batch, encode_record,
                             legacy_message_set, raw_batch)

HEADER, FOOTER, LEADER_CHANGE, KRAFT_VERSION = 3, 4, 2, 5     # ControlRecordType
VALUES = {HEADER: struct.pack(">hq", 0, 1000) + b"\0",          # SnapshotHeaderRecord v0
          FOOTER: struct.pack(">h", 0) + b"\0",                 # SnapshotFooterRecord v0
          LEADER_CHANGE: struct.pack(">hi", 0, 1) + b"\1\1\0",  # LeaderChangeMessage v0
          KRAFT_VERSION: struct.pack(">hh", 0, 1) + b"\0"}      # KRaftVersionRecord v0
NAME = f"{5:020d}-{1:010d}.checkpoint"


def control(base_offset, *types):
    """A control batch (not transactional, as KRaft writes them) of ``types``."""
    area = b"".join(encode_record(i, 0, struct.pack(">hh", 0, t), VALUES[t])
                    for i, t in enumerate(types))
    return raw_batch(area, records_count=len(types), base_offset=base_offset,
                     attributes=ATTR_CONTROL)


def topic_record(name):
    """A TopicRecord v0 value, framed as MetadataRecordSerde writes it."""
    m = MESSAGES["TopicRecord"]
    topic_id = "AAAAAAAAAAAAAAAAAAAAA" + {"t": "Q", "u": "g", "a": "w", "b": "A"}[name]
    return uvarint(1) + uvarint(m["api_key"]) + uvarint(0) + enc_struct(
        m["fields"], {"name": name, "topic_id": topic_id}, 0, True)


def topic(base_offset, name):
    """A data batch of one TopicRecord (no key, as KRaft writes them)."""
    return build_batch([(1000, None, topic_record(name), [])], base_offset=base_offset)


def snapshot(tmp_path, batches, name=NAME):
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir(parents=True, exist_ok=True)
    path = part / name
    path.write_bytes(b"".join(batches))
    return path


CASES = {
    "header, data, footer": [control(0, HEADER), topic(1, "t"), control(2, FOOTER)],
    "header and KRaft records first": [control(0, HEADER, KRAFT_VERSION), topic(2, "t"),
                                       control(3, FOOTER)],
    "data after the footer": [control(0, HEADER), topic(1, "t"), control(2, FOOTER),
                              topic(3, "u")],
    "a data batch first": [topic(0, "t"), control(1, HEADER), topic(2, "u"),
                           control(3, FOOTER)],
    "an empty control batch first": [empty_batch(base_offset=0, attributes=ATTR_CONTROL),
                                     control(1, HEADER), topic(2, "t"), control(3, FOOTER)],
    "a leader change before the header": [control(0, LEADER_CHANGE, HEADER), topic(2, "t"),
                                          control(3, FOOTER)],
    "a leader change batch first": [control(0, LEADER_CHANGE), control(1, HEADER),
                                    topic(2, "t"), control(3, FOOTER)],
    "a magic-1 message set inside": [control(0, HEADER), legacy_message_set(
        [(1000, None, b"x")], magic=1, base_offset=1), control(2, FOOTER)],
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_snapshot_is_read_as_kafka_reads_it(tmp_path, case):
    """Where the snapshot ends with its footer, kbatch refuses it exactly
    where Kafka's RecordsSnapshotReader does (the first batch a control
    batch whose first record is the SnapshotHeader; magic 2 throughout),
    naming the file, in every table and from the partition directory."""
    batches = CASES[case]
    path = snapshot(tmp_path, batches)
    refusal = ref_snapshot_refusal(path.read_bytes())
    for target in (path, path.parent):
        if refusal is None:
            assert "t" in cluster_metadata(target).topics.column("topic_name").to_pylist()
            assert len(records(target, "metadata", snapshots=True)) >= 1
        else:
            for call in (lambda: cluster_metadata(target),
                         lambda: records(target, "metadata", snapshots=True)):
                with pytest.raises(CorruptRecordError, match=NAME):
                    call()
    assert (refusal is None) == (case in ("header, data, footer", "header and KRaft records first",
                                          "data after the footer")), refusal


@pytest.mark.parametrize("on_corrupt", ["raise", "stop", "skip"])
def test_a_snapshot_with_a_damaged_batch_is_refused(tmp_path, on_corrupt):
    """Kafka loads a snapshot with CRC validation (KafkaRaftClient's
    latestSnapshot: RecordsSnapshotReader.of(..., true)), so a damaged batch
    refuses the whole snapshot. ``on_corrupt="skip"`` passes over it in a
    log, but a snapshot with a hole is not the state at its offset: it
    raises as a snapshot cut short does, naming the file and the bytes."""
    batches = [control(0, HEADER), topic(1, "a"), topic(2, "b"), control(3, FOOTER)]
    buf = bytearray(b"".join(batches))
    at = len(batches[0]) + len(batches[1]) + len(batches[2]) - 3      # inside b's value
    buf[at] ^= 0xFF
    path = snapshot(tmp_path, [bytes(buf)])
    assert ref_snapshot_refusal(bytes(buf)) is None                   # the order is fine
    for target in (path, path.parent):
        with pytest.raises(CorruptRecordError, match=NAME):
            cluster_metadata(target, on_corrupt=on_corrupt)
        with pytest.raises(CorruptRecordError, match=NAME):
            records(target, "metadata", snapshots=True, on_corrupt=on_corrupt)
    if on_corrupt == "skip":
        hole = rf"\[{len(batches[0]) + len(batches[1])}, .*skipped"
        with pytest.raises(CorruptRecordError, match=hole):
            cluster_metadata(path, on_corrupt=on_corrupt)


def test_a_snapshot_is_read_whole_not_in_ranges(tmp_path):
    """A byte range of a snapshot, or an offset or time range over a
    partition directory whose snapshots are read, is an ``ArgumentError``
    (a part of a snapshot is not the state at its offset); the whole file
    (``start=0``, no ``stop``) reads, and a range of the log alone
    (``snapshots=False``) too."""
    batches = [control(0, HEADER), topic(1, "t"), control(2, FOOTER)]
    kbatch.write_log(tmp_path / "__cluster_metadata-0", [(None, topic_record("u"), 1)])
    path = snapshot(tmp_path, batches)
    second = len(batches[0])
    for kw in ({"start": second}, {"stop": second + len(batches[1])}):
        for call in (lambda: cluster_metadata(path, **kw),
                     lambda: records(path, "metadata", **kw)):
            with pytest.raises(ArgumentError, match="read whole"):
                call()
    assert cluster_metadata(path, start=0).topics.column("topic_name").to_pylist() == ["t"]
    for kw in ({"start_offset": 1}, {"end_offset": 1}, {"start_timestamp": 0}):
        with pytest.raises(ArgumentError, match="snapshots=False"):
            cluster_metadata(path.parent, **kw)
        assert cluster_metadata(path.parent, snapshots=False, **kw).records.num_rows <= 1
