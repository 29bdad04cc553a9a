"""Record types, versions and tagged fields new in Kafka's trunk specs
(apache/kafka d79bd502, 2026-08-22), and Kafka 4.0's share-group layouts
that trunk changed without a version bump.

The truth here does not come from the generated table: each message below
is transcribed by hand from its JSON spec (field order, types, tags,
nullability), written with the test-side encoder of tests/internal_ref.py,
put in a log with kbatch.write_log and read back through the user's API
(``group_records``, ``share_state``, ``records``, ``cluster_metadata``'s
typed records), field by field.
"""

import json
import random
import struct

import pytest

import kbatch
from kbatch.internal import group_records, records, share_state, typed_records
from kbatch.internal import protocol as wire
from kbatch.internal.decode import decode_coordinator, decode_framed
from tests.internal_ref import enc_struct, expected, rand_struct, uvarint

ALL = (0, 0x7FFF)
KAFKA_4_0 = "4ae681446f18f9a6d7a59f317013ef82379a4ba4"


def F(column, typ, fields=None, *, tag=None, nullable=False, default=None, since=0):
    """One field of a hand-transcribed spec ("0+" versions unless ``since``)."""
    rng = (since, ALL[1])
    return {"name": column, "column": column, "type": typ, "fields": fields,
            "versions": rng, "tagged": rng if tag is not None else None, "tag": tag,
            "nullable": rng if nullable else None, "default": default}


def U(n):
    return "AAAAAAAAAAAAAAAAAAAA" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[n % 26] + "A"


# --- hand transcriptions of the specs ----------------------------------------------

GROUP_KEY = [F("group_id", "string")]
MEMBER_KEY = [F("group_id", "string"), F("member_id", "string")]

# ConsumerGroupRegularExpressionKey/Value (apiKey 16)
REGEX_KEY = [F("group_id", "string"), F("regular_expression", "string")]
REGEX_VALUE = [F("topics", "[]string"), F("version", "int64"), F("timestamp", "int64")]

# StreamsGroupMetadataValue (17)
KV = [F("key", "string"), F("value", "string")]
STREAMS_META = [F("epoch", "int32"), F("metadata_hash", "int64"),
                F("validated_topology_epoch", "int32", tag=0, default=-1),
                F("last_assignment_configs", "[]struct", KV, tag=1, nullable=True, default=[]),
                F("stored_description_topology_epoch", "int32", tag=2, default=-1),
                F("failed_description_topology_epoch", "int32", tag=3, default=-1)]
# StreamsGroupMemberMetadataValue (19)
STREAMS_MEMBER = [F("instance_id", "string", nullable=True), F("rack_id", "string", nullable=True),
                  F("client_id", "string"), F("client_host", "string"),
                  F("rebalance_timeout_ms", "int32"), F("topology_epoch", "int32"),
                  F("process_id", "string"),
                  F("user_endpoint", "struct", [F("host", "string"), F("port", "uint16")],
                    nullable=True),
                  F("client_tags", "[]struct", KV)]
# StreamsGroupTargetAssignmentMetadataValue (20)
STREAMS_TA_META = [F("assignment_epoch", "int32"),
                   F("assignment_timestamp", "int64", tag=0, default=0)]
# StreamsGroupTargetAssignmentMemberValue (21)
TASKS = [F("subtopology_id", "string"), F("partitions", "[]int32")]
STREAMS_TA_MEMBER = [F("active_tasks", "[]struct", TASKS), F("standby_tasks", "[]struct", TASKS),
                     F("warmup_tasks", "[]struct", TASKS)]
# StreamsGroupCurrentMemberAssignmentValue (22): its TaskIds carry a tagged field
TASKS_EPOCHS = TASKS + [F("assignment_epochs", "[]int32", tag=0, nullable=True, default=[])]
STREAMS_CURRENT = [F("member_epoch", "int32"), F("previous_member_epoch", "int32"),
                   F("state", "int8")] + [
    F(n, "[]struct", TASKS_EPOCHS) for n in (
        "active_tasks", "standby_tasks", "warmup_tasks", "active_tasks_pending_revocation",
        "standby_tasks_pending_revocation", "warmup_tasks_pending_revocation")]
# StreamsGroupTopologyValue (23)
TOPIC_INFO = [F("name", "string"), F("partitions", "int32"), F("replication_factor", "int16"),
              F("topic_configs", "[]struct", KV)]
STREAMS_TOPOLOGY = [F("epoch", "int32"), F("subtopologies", "[]struct", [
    F("subtopology_id", "string"), F("source_topics", "[]string"),
    F("source_topic_regex", "[]string"), F("state_changelog_topics", "[]struct", TOPIC_INFO),
    F("repartition_sink_topics", "[]string"),
    F("repartition_source_topics", "[]struct", TOPIC_INFO),
    F("copartition_groups", "[]struct", [F("source_topics", "[]int16"),
                                         F("source_topic_regex", "[]int16"),
                                         F("repartition_source_topics", "[]int16")])])]

# share groups: trunk and Kafka 4.0 (same version 0, other layouts)
PARTS_INFO = [F("topic_id", "uuid"), F("topic_name", "string"), F("partitions", "[]int32")]
TOPIC_ID_NAME = [F("topic_id", "uuid"), F("topic_name", "string")]
SHARE_META_TRUNK = [F("epoch", "int32"), F("metadata_hash", "int64")]
SHARE_META_40 = [F("epoch", "int32")]
SHARE_STATE_PM_TRUNK = [F("initializing_topics", "[]struct", PARTS_INFO),
                        F("initialized_topics", "[]struct", PARTS_INFO),
                        F("deleting_topics", "[]struct", TOPIC_ID_NAME)]
SHARE_STATE_PM_40 = SHARE_STATE_PM_TRUNK[1:]
BATCH = [F("first_offset", "int64"), F("last_offset", "int64"), F("delivery_state", "int8"),
         F("delivery_count", "int16")]
SNAPSHOT_TRUNK = [F("snapshot_epoch", "int32"), F("state_epoch", "int32"),
                  F("leader_epoch", "int32"), F("start_offset", "int64"),
                  F("delivery_complete_count", "int32", tag=0, default=-1),
                  F("create_timestamp", "int64"), F("write_timestamp", "int64"),
                  F("state_batches", "[]struct", BATCH)]
SNAPSHOT_40 = [F("snapshot_epoch", "uint16"), F("state_epoch", "int32"),
               F("leader_epoch", "int32"), F("start_offset", "int64"),
               F("state_batches", "[]struct", BATCH)]
UPDATE_TRUNK = [F("snapshot_epoch", "int32"), F("leader_epoch", "int32"),
                F("start_offset", "int64"),
                F("delivery_complete_count", "int32", tag=0, default=-1),
                F("state_batches", "[]struct", BATCH)]
UPDATE_40 = [F("snapshot_epoch", "uint16"), F("leader_epoch", "int32"),
             F("start_offset", "int64"), F("state_batches", "[]struct", BATCH)]
SHARE_STATE_KEY = [F("group_id", "string"), F("topic_id", "uuid"), F("partition", "int32")]
# ShareGroupPartitionMetadataKey/Value (9): Kafka 4.0 only, deleted on trunk
SHARE_PARTITION_META_40 = [F("topics", "[]struct", [
    F("topic_id", "uuid"), F("topic_name", "string"), F("num_partitions", "int32"),
    F("partition_metadata", "[]struct", [F("partition", "int32"), F("racks", "[]string")])])]


def coordinator(type_id, key_fields, key, value_fields, value, value_version=0, flexible=True):
    k = struct.pack(">h", type_id) + enc_struct(key_fields, key, 0, False)
    if value is None:
        return k, None
    return k, struct.pack(">h", value_version) + enc_struct(value_fields, value, value_version,
                                                            flexible)


def _typed_row(table):
    rows = table.to_pylist()
    assert len(rows) == 1
    return rows[0]


def _check(row, key_fields, key, value_fields, value, version=0):
    for f in key_fields:
        assert row["key_" + f["column"]] == key[f["column"]], f["column"]
    for col, want in expected(value_fields, value, version).items():
        assert row[col] == want, col


STREAMS_CASES = {
    # type: (type id, key spec, key, value spec, value)
    "ConsumerGroupRegularExpression": (
        16, REGEX_KEY, {"group_id": "g", "regular_expression": "or.*"},
        REGEX_VALUE, {"topics": ["orders", "ordersX"], "version": 41,
                      "timestamp": 1_750_000_000_000}),
    "StreamsGroupMetadata": (17, GROUP_KEY, {"group_id": "app"}, STREAMS_META, {
        "epoch": 7, "metadata_hash": -123456789012345, "validated_topology_epoch": 3,
        "last_assignment_configs": [{"key": "num.standby.replicas", "value": "1"}],
        "stored_description_topology_epoch": 2}),
    "StreamsGroupMemberMetadata": (19, MEMBER_KEY, {"group_id": "app", "member_id": "m-1"},
                                   STREAMS_MEMBER, {
        "instance_id": None, "rack_id": "r1", "client_id": "c", "client_host": "/10.0.0.1",
        "rebalance_timeout_ms": 30000, "topology_epoch": 2, "process_id": "p-9",
        "user_endpoint": {"host": "h", "port": 65535},
        "client_tags": [{"key": "zone", "value": "a"}]}),
    "StreamsGroupTargetAssignmentMetadata": (20, GROUP_KEY, {"group_id": "app"},
                                             STREAMS_TA_META, {"assignment_epoch": 5,
                                                               "assignment_timestamp": 99}),
    "StreamsGroupTargetAssignmentMember": (21, MEMBER_KEY, {"group_id": "app", "member_id": "m"},
                                           STREAMS_TA_MEMBER, {
        "active_tasks": [{"subtopology_id": "0", "partitions": [0, 2]}],
        "standby_tasks": [], "warmup_tasks": [{"subtopology_id": "1", "partitions": [1]}]}),
    "StreamsGroupCurrentMemberAssignment": (22, MEMBER_KEY, {"group_id": "app", "member_id": "m"},
                                            STREAMS_CURRENT, {
        "member_epoch": 9, "previous_member_epoch": 8, "state": 0,
        "active_tasks": [{"subtopology_id": "0", "partitions": [0, 1],
                          "assignment_epochs": [8, 9]}],
        "standby_tasks": [{"subtopology_id": "0", "partitions": [2]}],
        "warmup_tasks": [], "active_tasks_pending_revocation": [],
        "standby_tasks_pending_revocation": [],
        "warmup_tasks_pending_revocation": [{"subtopology_id": "1", "partitions": [3],
                                             "assignment_epochs": None}]}),
    "StreamsGroupTopology": (23, GROUP_KEY, {"group_id": "app"}, STREAMS_TOPOLOGY, {
        "epoch": 2, "subtopologies": [{
            "subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
            "state_changelog_topics": [{"name": "app-store-changelog", "partitions": -1,
                                        "replication_factor": -1, "topic_configs": [
                                            {"key": "cleanup.policy", "value": "compact"}]}],
            "repartition_sink_topics": ["app-rep"],
            "repartition_source_topics": [{"name": "app-rep", "partitions": 4,
                                           "replication_factor": 3, "topic_configs": []}],
            "copartition_groups": [{"source_topics": [0], "source_topic_regex": [],
                                    "repartition_source_topics": [0, 1]}]}]}),
}


@pytest.mark.parametrize("name", sorted(STREAMS_CASES))
def test_new_group_record_types(tmp_path, name):
    type_id, kf, key, vf, value = STREAMS_CASES[name]
    k, v = coordinator(type_id, kf, key, vf, value)
    tomb_k, _ = coordinator(type_id, kf, key, vf, None)
    kbatch.write_log(tmp_path / "__consumer_offsets-4", [(k, v, 1), (tomb_k, None, 2)])
    t = group_records(tmp_path, name).to_pylist()
    assert [r["tombstone"] for r in t] == [False, True]
    assert t[0]["key_version"] == type_id and t[0]["value_version"] == 0
    _check(t[0], kf, key, vf, value)
    for f in kf:
        assert t[1]["key_" + f["column"]] == key[f["column"]]
    # the generic table names the type and has every field as JSON
    rows = records(tmp_path, "offsets").to_pylist()
    assert [(r["type"], r["type_id"], r["known"]) for r in rows] == [(name, type_id, True)] * 2
    assert json.loads(rows[0]["value"]) == expected(vf, value, 0)


def test_new_group_record_types_with_absent_tags_take_the_spec_defaults():
    k, v = coordinator(17, GROUP_KEY, {"group_id": "app"}, STREAMS_META,
                       {"epoch": 1, "metadata_hash": 2})
    assert v.endswith(b"\x00")                      # no tagged fields written
    d = decode_coordinator("offsets", k, v)
    assert d["value"] == {"epoch": 1, "metadata_hash": 2, "validated_topology_epoch": -1,
                          "last_assignment_configs": [],
                          "stored_description_topology_epoch": -1,
                          "failed_description_topology_epoch": -1}


# --- new tagged fields in known record types ---------------------------------------

OFFSET_COMMIT_V4 = [F("offset", "int64"), F("leader_epoch", "int32"), F("metadata", "string"),
                    F("commit_timestamp", "int64"), F("topic_id", "uuid", tag=0,
                                                      default="AAAAAAAAAAAAAAAAAAAAAA")]
OFFSET_COMMIT_KEY = [F("group", "string"), F("topic", "string"), F("partition", "int32")]
TXN_VALUE_V1 = [F("producer_id", "int64"),
                F("previous_producer_id", "int64", tag=0, default=-1),
                F("next_producer_id", "int64", tag=1, default=-1),
                F("producer_epoch", "int16"),
                F("next_producer_epoch", "int16", tag=3, default=-1),
                F("transaction_timeout_ms", "int32"), F("transaction_status", "int8"),
                F("transaction_partitions", "[]struct",
                  [F("topic", "string"), F("partition_ids", "[]int32")], nullable=True),
                F("transaction_last_update_timestamp_ms", "int64"),
                F("transaction_start_timestamp_ms", "int64"),
                F("client_transaction_version", "int16", tag=2, default=0)]
TP_EPOCHS = [F("topic_id", "uuid"), F("partitions", "[]int32"),
             F("assignment_epochs", "[]int32", tag=0, nullable=True, default=[])]
CONSUMER_CURRENT = [F("member_epoch", "int32"), F("previous_member_epoch", "int32"),
                    F("state", "int8"), F("assigned_partitions", "[]struct", TP_EPOCHS),
                    F("partitions_pending_revocation", "[]struct", TP_EPOCHS)]
CONSUMER_META = [F("epoch", "int32"), F("metadata_hash", "int64", tag=0, default=0)]
TA_META = [F("assignment_epoch", "int32"), F("assignment_timestamp", "int64", tag=0, default=0)]


def test_offset_commit_topic_id(tmp_path):
    key = {"group": "g", "topic": "orders", "partition": 3}
    value = {"offset": 42, "leader_epoch": 1, "metadata": "", "commit_timestamp": 5,
             "topic_id": U(7)}
    k, v = coordinator(1, OFFSET_COMMIT_KEY, key, OFFSET_COMMIT_V4, value, 4)
    assert v[-19:-16] == b"\x01\x00\x10"             # one tag: 0, 16 bytes
    kbatch.write_log(tmp_path / "__consumer_offsets-0", [(k, v, 1)])
    d = decode_coordinator("offsets", k, v)
    assert d["type"] == "OffsetCommit" and d["value"] == expected(OFFSET_COMMIT_V4, value, 4) | {
        "expire_timestamp": None}
    row = _typed_row(group_records(tmp_path, "OffsetCommit"))
    assert row["topic_id"] == U(7) and row["offset"] == 42
    # offset_commits reads it too (through the checked decoder)
    from kbatch.internal import offset_commits
    oc = offset_commits(tmp_path).to_pylist()
    assert (oc[0]["committed_offset"], oc[0]["value_version"], oc[0]["error"]) == (42, 4, None)


def test_transaction_log_next_producer_epoch(tmp_path):
    value = {"producer_id": 7, "previous_producer_id": 6, "next_producer_id": 8,
             "producer_epoch": 32766, "next_producer_epoch": 0, "transaction_timeout_ms": 60000,
             "transaction_status": 4, "transaction_partitions": [],
             "transaction_last_update_timestamp_ms": 10, "transaction_start_timestamp_ms": 9,
             "client_transaction_version": 2}
    k, v = coordinator(0, [F("transactional_id", "string")], {"transactional_id": "t"},
                       TXN_VALUE_V1, value, 1)
    kbatch.write_log(tmp_path / "__transaction_state-0", [(k, v, 1)])
    row = _typed_row(typed_records(tmp_path, "transactions", "TransactionLog"))
    _check(row, [F("transactional_id", "string")], {"transactional_id": "t"}, TXN_VALUE_V1,
           value, 1)
    assert row["next_producer_epoch"] == 0
    # absent, it takes the spec's default
    value.pop("next_producer_epoch")
    k, v = coordinator(0, [F("transactional_id", "string")], {"transactional_id": "t"},
                       TXN_VALUE_V1, value, 1)
    assert decode_coordinator("transactions", k, v)["value"]["next_producer_epoch"] == -1


@pytest.mark.parametrize("type_id,name,fields,value", [
    (3, "ConsumerGroupMetadata", CONSUMER_META, {"epoch": 4, "metadata_hash": -5}),
    (6, "ConsumerGroupTargetAssignmentMetadata", TA_META,
     {"assignment_epoch": 4, "assignment_timestamp": 1_760_000_000_000}),
    (12, "ShareGroupTargetAssignmentMetadata", TA_META,
     {"assignment_epoch": 4, "assignment_timestamp": 1}),
    (8, "ConsumerGroupCurrentMemberAssignment", CONSUMER_CURRENT, {
        "member_epoch": 3, "previous_member_epoch": 2, "state": 0,
        "assigned_partitions": [{"topic_id": U(1), "partitions": [0, 1],
                                 "assignment_epochs": [2, 3]},
                                {"topic_id": U(2), "partitions": [5]}],
        "partitions_pending_revocation": []}),
])
def test_new_tagged_fields_in_group_records(tmp_path, type_id, name, fields, value):
    kf = MEMBER_KEY if type_id == 8 else GROUP_KEY
    key = {"group_id": "g", "member_id": "m"} if type_id == 8 else {"group_id": "g"}
    k, v = coordinator(type_id, kf, key, fields, value)
    kbatch.write_log(tmp_path / "__consumer_offsets-0", [(k, v, 1)])
    _check(_typed_row(group_records(tmp_path, name)), kf, key, fields, value)


def test_remote_log_segment_txn_index_empty():
    from tests.test_internal_tables import _framed
    tip = {"name": "orders", "id": U(1), "partition": 2}
    seg = {"topic_id_partition": tip, "id": U(2)}
    base = {"remote_log_segment_id": seg, "start_offset": 0, "end_offset": 9, "broker_id": 1,
            "max_timestamp_ms": 5, "event_timestamp_ms": 6, "segment_leader_epochs": [],
            "segment_size_in_bytes": 10, "custom_metadata": None, "remote_log_segment_state": 0}
    raw = _framed("RemoteLogSegmentMetadataRecord", 0, dict(base, txn_index_empty=True))
    # by hand: the record ends with one tag (0, 1 byte, true)
    assert raw.endswith(b"\x00" + b"\x01\x00\x01\x01")
    assert decode_framed("remote-log-metadata", raw)["value"]["txn_index_empty"] is True
    raw = _framed("RemoteLogSegmentMetadataRecord", 0, base)
    assert decode_framed("remote-log-metadata", raw)["value"]["txn_index_empty"] is False


# --- new metadata records and versions -----------------------------------------------

def _metadata(api_key, version, body):
    return uvarint(1) + uvarint(api_key) + uvarint(version) + body


def test_new_metadata_records(tmp_path):
    s = "orders".encode()
    clear_elr = _metadata(28, 0, uvarint(len(s) + 1) + s + b"\x00")
    unregister = _metadata(29, 0, struct.pack(">i", 3002) + b"\x00")
    # RegisterBrokerRecord v4: CordonedLogDirs is tag 1 (LogDirs tag 0)
    dirs = [U(1), U(2)]
    reg = [F("broker_id", "int32"), F("is_migrating_zk_broker", "bool", since=2),
           F("incarnation_id", "uuid"), F("broker_epoch", "int64"),
           F("end_points", "[]struct", [F("name", "string"), F("host", "string"),
                                        F("port", "uint16"), F("security_protocol", "int16")]),
           F("features", "[]struct", [F("name", "string"), F("min_supported_version", "int16"),
                                      F("max_supported_version", "int16")]),
           F("rack", "string", nullable=True), F("fenced", "bool"),
           F("in_controlled_shutdown", "bool", since=1),
           F("log_dirs", "[]uuid", tag=0, since=3, default=[]),
           F("cordoned_log_dirs", "[]uuid", tag=1, since=4, nullable=True, default=None)]
    reg_value = {"broker_id": 1, "is_migrating_zk_broker": False, "incarnation_id": U(3),
                 "broker_epoch": 10, "end_points": [{"name": "PLAINTEXT", "host": "h", "port": 9092,
                                                     "security_protocol": 0}],
                 "features": [], "rack": None, "fenced": True, "in_controlled_shutdown": False,
                 "log_dirs": dirs, "cordoned_log_dirs": dirs[1:]}
    register = _metadata(0, 4, enc_struct(reg, reg_value, 4, True))
    # BrokerRegistrationChangeRecord v3: CordonedLogDirs is tag 3
    chg = [F("broker_id", "int32"), F("broker_epoch", "int64"),
           F("fenced", "int8", tag=0, default=0),
           F("in_controlled_shutdown", "int8", tag=1, since=1, default=0),
           F("log_dirs", "[]uuid", tag=2, since=2, default=[]),
           F("cordoned_log_dirs", "[]uuid", tag=3, since=3, nullable=True, default=None)]
    chg_value = {"broker_id": 1, "broker_epoch": 11, "fenced": -1, "cordoned_log_dirs": []}
    change = _metadata(17, 3, enc_struct(chg, chg_value, 3, True))
    kbatch.write_log(tmp_path / "__cluster_metadata-0",
                     [(None, r, 1) for r in (clear_elr, unregister, register, change)])
    got = [decode_framed("metadata", r) for r in (clear_elr, unregister, register, change)]
    assert [(d["type"], d["version"], d["known"]) for d in got] == [
        ("ClearElrRecord", 0, True), ("UnregisterControllerRecord", 0, True),
        ("RegisterBrokerRecord", 4, True), ("BrokerRegistrationChangeRecord", 3, True)]
    assert got[0]["value"] == {"topic_name": "orders"}
    assert got[1]["value"] == {"controller_id": 3002}
    assert got[2]["value"] == expected(reg, reg_value, 4)
    assert got[3]["value"] == expected(chg, chg_value, 3)
    rows = records(tmp_path, "metadata").to_pylist()
    assert [(r["type_id"], r["type"], r["known"]) for r in rows] == [
        (28, "ClearElrRecord", True), (29, "UnregisterControllerRecord", True),
        (0, "RegisterBrokerRecord", True), (17, "BrokerRegistrationChangeRecord", True)]


# --- Kafka 4.0 share-group layouts, chosen by content --------------------------------

SHARE_CASES = {
    # type: (family, type id, key spec, key, trunk layout, 4.0 layout)
    "ShareGroupMetadata": ("offsets", 11, GROUP_KEY, {"group_id": "sg"},
                           SHARE_META_TRUNK, SHARE_META_40),
    "ShareGroupStatePartitionMetadata": ("offsets", 15, GROUP_KEY, {"group_id": "sg"},
                                         SHARE_STATE_PM_TRUNK, SHARE_STATE_PM_40),
    "ShareSnapshot": ("share-state", 0, SHARE_STATE_KEY,
                      {"group_id": "sg", "topic_id": U(4), "partition": 1},
                      SNAPSHOT_TRUNK, SNAPSHOT_40),
    "ShareUpdate": ("share-state", 1, SHARE_STATE_KEY,
                    {"group_id": "sg", "topic_id": U(4), "partition": 1},
                    UPDATE_TRUNK, UPDATE_40),
}

SHARE_VALUES = {
    "ShareGroupMetadata": ({"epoch": 3, "metadata_hash": 0x0102030405060708}, {"epoch": 3}),
    "ShareGroupStatePartitionMetadata": (
        {"initializing_topics": [{"topic_id": U(1), "topic_name": "a", "partitions": [0]}],
         "initialized_topics": [{"topic_id": U(2), "topic_name": "b", "partitions": [0, 1]}],
         "deleting_topics": []},
        {"initialized_topics": [{"topic_id": U(2), "topic_name": "b", "partitions": [0, 1]}],
         "deleting_topics": [{"topic_id": U(3), "topic_name": "c"}]}),
    "ShareSnapshot": (
        {"snapshot_epoch": 70000, "state_epoch": 1, "leader_epoch": 2, "start_offset": 100,
         "delivery_complete_count": 5, "create_timestamp": 1_760_000_000_000,
         "write_timestamp": 1_760_000_000_001,
         "state_batches": [{"first_offset": 100, "last_offset": 104, "delivery_state": 2,
                            "delivery_count": 1}]},
        {"snapshot_epoch": 65535, "state_epoch": 1, "leader_epoch": 2, "start_offset": 100,
         "state_batches": [{"first_offset": 100, "last_offset": 104, "delivery_state": 2,
                            "delivery_count": 1}]}),
    "ShareUpdate": (
        {"snapshot_epoch": 70000, "leader_epoch": 2, "start_offset": 7,
         "state_batches": [{"first_offset": 7, "last_offset": 7, "delivery_state": 4,
                            "delivery_count": 2}]},
        {"snapshot_epoch": 1, "leader_epoch": 2, "start_offset": 7, "state_batches": []}),
}


def _typed(tmp_path, family, name):
    if family == "share-state":
        return share_state(tmp_path, name)
    return group_records(tmp_path, name)


@pytest.mark.parametrize("name", sorted(SHARE_CASES))
def test_share_group_layouts_of_trunk_and_kafka_4_0(tmp_path, name):
    family, type_id, kf, key, trunk, k40 = SHARE_CASES[name]
    trunk_value, value_40 = SHARE_VALUES[name]
    topic = "__share_group_state-0" if family == "share-state" else "__consumer_offsets-0"
    recs = [coordinator(type_id, kf, key, trunk, trunk_value),
            coordinator(type_id, kf, key, k40, value_40)]
    kbatch.write_log(tmp_path / topic, [(k, v, i) for i, (k, v) in enumerate(recs)])
    rows = _typed(tmp_path, family, name).to_pylist()
    assert len(rows) == 2
    # the trunk record: the current layout
    _check(rows[0], kf, key, trunk, trunk_value)
    assert rows[0]["schema_commit"] is None and rows[0]["schema_ambiguous"] is None
    # the 4.0 record: the 4.0 layout, named; fields 4.0 did not have are null
    _check(rows[1], kf, key, k40, value_40)
    assert rows[1]["schema_commit"] == KAFKA_4_0 and rows[1]["schema_ambiguous"] is None
    for f in trunk:
        if f["column"] not in {g["column"] for g in k40} and f["tagged"] is None:
            assert rows[1][f["column"]] is None, f["column"]
    # straight from the decoder as well
    d = decode_coordinator(family, *recs[1])
    assert d["known"] and d["value"].pop("_schema_commit") == KAFKA_4_0
    assert d["value"] == expected(k40, value_40, 0)
    # damage fitting neither layout is reported with the current layout's error
    with pytest.raises(Exception, match=name + "Value"):
        wire.decode(name + "Value", 0, recs[1][1][:-1], 2)


@pytest.mark.parametrize("name", sorted(SHARE_CASES))
def test_share_layouts_are_told_apart_on_random_records(name):
    family, type_id, kf, key, trunk, k40 = SHARE_CASES[name]
    rnd = random.Random(name)
    ambiguous = 0
    for i in range(300):
        layout = trunk if i % 2 else k40
        values = rand_struct(layout, 0, rnd)
        raw = enc_struct(layout, values, 0, True)
        got = wire.decode(name + "Value", 0, raw)
        if "_schema_ambiguous" in got:        # both fit: said so, never silently
            ambiguous += 1
            continue
        assert got.pop("_schema_commit", None) == (None if layout is trunk else KAFKA_4_0)
        assert got == expected(layout, values, 0)
    assert ambiguous <= 3


def test_share_group_partition_metadata_of_kafka_4_0(tmp_path):
    value = {"topics": [{"topic_id": U(5), "topic_name": "orders", "num_partitions": 2,
                         "partition_metadata": [{"partition": 0, "racks": ["r1", "r2"]},
                                                {"partition": 1, "racks": []}]}]}
    k, v = coordinator(9, GROUP_KEY, {"group_id": "sg"}, SHARE_PARTITION_META_40, value)
    kbatch.write_log(tmp_path / "__consumer_offsets-0", [(k, v, 1)])
    _check(_typed_row(group_records(tmp_path, "ShareGroupPartitionMetadata")), GROUP_KEY,
           {"group_id": "sg"}, SHARE_PARTITION_META_40, value)


def test_type_id_0_is_read_like_type_id_1():
    # Kafka 4 names type 0 LegacyOffsetCommit: byte for byte OffsetCommitKey and
    # OffsetCommitValue v0, which is why kbatch reads both ids as OffsetCommit
    from kbatch.internal._schemas import MESSAGES

    def layout(name, v):
        return [(f["name"].lower(), f["type"]) for f in MESSAGES[name]["fields"]
                if wire.in_range(f["versions"], v) and f["tagged"] is None]
    assert layout("LegacyOffsetCommitKey", 0) == layout("OffsetCommitKey", 0)
    assert layout("LegacyOffsetCommitValue", 0) == layout("OffsetCommitValue", 0)
    key = {"group": "g", "topic": "t", "partition": 0}
    v0 = [F("offset", "int64"), F("metadata", "string"), F("commit_timestamp", "int64")]
    k, v = coordinator(0, OFFSET_COMMIT_KEY, key, v0, {"offset": 1, "metadata": "m",
                                                       "commit_timestamp": 2}, 0, False)
    d = decode_coordinator("offsets", k, v)
    assert (d["type"], d["known"], d["key"]) == ("OffsetCommit", True, key)
    assert d["value"]["offset"] == 1 and d["value"]["metadata"] == "m"
