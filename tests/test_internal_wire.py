"""The table-driven message decoder (kbatch.internal.protocol) and encoder:
round trips for every version of every schema against a test-side encoder,
historical layouts, unknown tags, damage."""

import random
import struct

import pytest

from kbatch.errors import CorruptRecordError
from kbatch.internal import encode
from kbatch.internal import protocol as wire
from kbatch.internal._schemas import KAFKA_COMMIT, MESSAGES, VARIANTS
from kbatch.internal.decode import decode_coordinator, decode_framed
from kbatch.internal.registry import FAMILIES
from tests.internal_ref import enc_struct, expected, rand_struct, ref_frame_refusal, uvarint

ALL = [(name, v) for name, m in sorted(MESSAGES.items())
       for v in range(m["valid"][0], m["valid"][1] + 1)]


def _flex(m, v):
    return m["flexible"] is not None and m["flexible"][0] <= v <= m["flexible"][1]


def test_schema_table_is_complete():
    assert len(KAFKA_COMMIT) == 40
    # the families users meet, with the newest record types of that commit
    offsets = FAMILIES["offsets"][1]
    assert offsets[0] == offsets[1] == "OffsetCommit" and offsets[2] == "GroupMetadata"
    assert {offsets[k] for k in range(3, 9)} >= {"ConsumerGroupMetadata",
                                                 "ConsumerGroupMemberMetadata",
                                                 "ConsumerGroupCurrentMemberAssignment"}
    assert "ShareGroupStatePartitionMetadata" in offsets.values()
    assert offsets[16] == "ConsumerGroupRegularExpression"
    assert {offsets[k] for k in (17, 19, 20, 21, 22, 23)} == {
        "StreamsGroupMetadata", "StreamsGroupMemberMetadata",
        "StreamsGroupTargetAssignmentMetadata", "StreamsGroupTargetAssignmentMember",
        "StreamsGroupCurrentMemberAssignment", "StreamsGroupTopology"}
    assert offsets[9] == "ShareGroupPartitionMetadata"        # Kafka 4.0, deleted since
    assert FAMILIES["metadata"][1][28] == "ClearElrRecord"
    assert FAMILIES["metadata"][1][29] == "UnregisterControllerRecord"
    assert FAMILIES["transactions"][1] == {0: "TransactionLog"}
    assert FAMILIES["share-state"][1] == {0: "ShareSnapshot", 1: "ShareUpdate"}
    assert FAMILIES["metadata"][1][3] == "PartitionRecord"
    assert MESSAGES["OffsetCommitValue"]["valid"] == (0, 4)
    assert MESSAGES["GroupMetadataValue"]["valid"] == (0, 4)
    assert len(ALL) > 80


@pytest.mark.parametrize("name,version", ALL, ids=[f"{n}-v{v}" for n, v in ALL])
def test_round_trip(name, version):
    m = MESSAGES[name]
    rnd = random.Random(f"{name}/{version}")
    for _ in range(6):
        values = rand_struct(m["fields"], version, rnd)
        raw = enc_struct(m["fields"], values, version, _flex(m, version))
        got = wire.decode(name, version, raw)
        if name in VARIANTS:        # an older layout of the version may read it too
            got.pop("_schema_ambiguous", None)
        assert got == expected(m["fields"], values, version)
        # the library's encoder writes the same bytes
        assert encode.encode(name, version, values) == raw


def test_historical_partition_record_v1():
    old = VARIANTS["PartitionRecord"][0]
    rnd = random.Random(3)
    for _ in range(5):
        values = rand_struct(old["fields"], 1, rnd)
        values["eligible_leader_replicas"] = [1, 2]
        raw = enc_struct(old["fields"], values, 1, True)
        got = wire.decode("PartitionRecord", 1, raw)
        assert got.pop("_schema_commit") == old["commit"]
        assert got == expected(old["fields"], values, 1)


def test_historical_partition_change_record_v1():
    """PartitionChangeRecord v1 as Kafka wrote it from af747fbfed7 (the ELR
    at tags 6 and 7, now version 2's): read with that layout, which knows
    its tags; a v1 record with today's Directories tag (8) keeps today's."""
    old = VARIANTS["PartitionChangeRecord"][0]
    rnd = random.Random(5)
    for _ in range(5):
        values = rand_struct(old["fields"], 1, rnd)
        values["eligible_leader_replicas"] = [1, 2]
        raw = enc_struct(old["fields"], values, 1, True)
        got = wire.decode("PartitionChangeRecord", 1, raw)
        assert got.pop("_schema_commit") == old["commit"]
        got.pop("_schema_ambiguous", None)
        assert got == expected(old["fields"], values, 1)
    m = MESSAGES["PartitionChangeRecord"]
    values = rand_struct(m["fields"], 1, random.Random(6))
    values["directories"] = ["AAAAAAAAAAAAAAAAAAAAAQ"]
    got = wire.decode("PartitionChangeRecord", 1, enc_struct(m["fields"], values, 1, True))
    assert "_schema_commit" not in got and got["directories"] == ["AAAAAAAAAAAAAAAAAAAAAQ"]


def test_unknown_tags_are_kept():
    m = MESSAGES["TransactionLogValue"]
    values = rand_struct(m["fields"], 1, random.Random(1))
    raw = enc_struct(m["fields"], values, 1, True, extra_tags=[(40, b"xyz")])
    got = wire.decode("TransactionLogValue", 1, raw)
    assert got.pop("_unknown_tags") == {40: b"xyz"}
    assert got == expected(m["fields"], values, 1)


@pytest.mark.parametrize("name,version", [("GroupMetadataValue", 3), ("GroupMetadataValue", 4),
                                          ("RegisterBrokerRecord", 3), ("TransactionLogValue", 1),
                                          ("ConsumerGroupMemberMetadataValue", 0),
                                          ("RemoteLogSegmentMetadataRecord", 0)])
def test_every_truncation_raises_corrupt(name, version):
    m = MESSAGES[name]
    rnd = random.Random(9)
    values = rand_struct(m["fields"], version, rnd)
    raw = enc_struct(m["fields"], values, version, _flex(m, version))
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            wire.decode(name, version, raw[:cut])
    with pytest.raises(CorruptRecordError, match="trailing"):
        wire.decode(name, version, raw + b"\x00")


def test_hostile_counts_and_varints():
    # an array count far beyond the bytes left: refused before any allocation
    raw = struct.pack(">qhibi", 1, 1, 60000, 1, 0x7FFFFFFF)
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        wire.decode("TransactionLogValue", 0, raw + b"\x00" * 8)
    with pytest.raises(CorruptRecordError, match="varint"):
        wire.decode("TopicRecord", 0, b"\xff" * 6)
    with pytest.raises(CorruptRecordError, match="non-nullable"):
        wire.decode("OffsetCommitKey", 0, struct.pack(">h", -1))
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        wire.decode("OffsetCommitKey", 0, struct.pack(">h", 2) + b"\xff\xfe")


def test_unknown_types_and_versions_come_out_raw():
    # a key version no schema knows
    d = decode_coordinator("offsets", struct.pack(">h", 99) + b"abc", b"\x00\x00zz")
    assert d["type_id"] == 99 and d["type"] is None and not d["known"] and d["error"] is None
    assert d["value_version"] == 0
    # a known type at an unknown value version
    key = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    d = decode_coordinator("offsets", key, struct.pack(">h", 77) + b"\x00" * 30)
    assert d["type"] == "OffsetCommit" and d["value_version"] == 77 and not d["known"]
    assert d["key"] == {"group": "g", "topic": "t", "partition": 0}
    # a metadata api key and a version no schema knows
    d = decode_framed("metadata", uvarint(1) + uvarint(200) + uvarint(0) + b"\x00")
    assert (d["type_id"], d["type"], d["known"]) == (200, None, False)
    d = decode_framed("metadata", uvarint(1) + uvarint(2) + uvarint(9) + b"\x00")
    assert (d["type"], d["version"], d["known"]) == ("TopicRecord", 9, False)
    # damage is reported, not raised (strict raises)
    d = decode_framed("metadata", uvarint(1) + uvarint(2) + uvarint(0) + b"\x05")
    assert d["error"] and not d["known"]
    with pytest.raises(CorruptRecordError):
        decode_framed("metadata", uvarint(1) + uvarint(2) + uvarint(0) + b"\x05", strict=True)


@pytest.mark.parametrize("family", ["metadata", "remote-log-metadata"])
@pytest.mark.parametrize("frame", [0, 1, 2, 127, 255, 256, 32767, 32768, 40000])
def test_a_frame_version_kafka_refuses_is_an_error(family, frame):
    """AbstractApiMessageSerde.read (both families' serde) reads frame
    version 1 only and refuses any other before it reads the api key
    (tests/internal_ref.ref_frame_refusal): such a record is an error with
    nothing read from its header past the frame version (strict raises),
    never a row of a known type that merely was not decoded."""
    name = {"metadata": "TopicRecord", "remote-log-metadata": "RemotePartitionDeleteMetadataRecord"}
    m = MESSAGES[name[family]]
    body = enc_struct(m["fields"], rand_struct(m["fields"], 0, random.Random(frame)), 0, True)
    value = uvarint(frame) + uvarint(m["api_key"]) + uvarint(0) + body
    refusal = ref_frame_refusal(value)
    d = decode_framed(family, value)
    assert d["known"] == (refusal is None) == (frame == 1)
    if refusal is None:
        assert d["error"] is None and d["type"] == name[family]
        return
    assert f"frame version {frame}" in d["error"]
    assert d["frame_version"] == frame
    assert (d["type_id"], d["type"], d["version"], d["value"]) == (None, None, None, None)
    with pytest.raises(CorruptRecordError, match=f"frame version {frame}"):
        decode_framed(family, value, strict=True)


def test_a_tagged_nullable_struct_marker_is_an_unsigned_varint():
    """Kafka's MessageDataGenerator: a nullable struct in a tagged field is
    read as ``readUnsignedVarint() <= 0`` -> null (an int8 elsewhere), and
    written as varint 0 for null; ConsumerGroupMemberMetadataValue v0's tag 0
    (ClassicMemberMetadata) given explicitly as null, then present."""
    def cstr(s):
        return uvarint(len(s.encode()) + 1) + s.encode()
    body = (cstr("") + b"\x00" + cstr("cid") + cstr("host") + b"\x01" + b"\x00"
            + struct.pack(">i", 1000) + b"\x00")
    absent = wire.decode("ConsumerGroupMemberMetadataValue", 0, body + b"\x00")
    null = wire.decode("ConsumerGroupMemberMetadataValue", 0, body + b"\x01\x00\x01\x00")
    assert absent == null and null["classic_member_metadata"] is None
    classic = struct.pack(">i", 45000) + uvarint(1) + b"\x00"   # timeout, no protocols, no tags
    present = wire.decode("ConsumerGroupMemberMetadataValue", 0,
                          body + b"\x01\x00" + uvarint(1 + len(classic)) + b"\x01" + classic)
    assert present["classic_member_metadata"]["session_timeout_ms"] == 45000
    f = next(f for f in MESSAGES["ConsumerGroupMemberMetadataValue"]["fields"]
             if f["name"] == "ClassicMemberMetadata")
    assert encode._value(f, None, 0, True, tagged=True) == b"\x00"
