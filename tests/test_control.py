"""Control record values (kbatch.lib.control) against broker-written files and
hand-built bytes.

The encoders below follow the Kafka message definitions directly
(EndTransactionMarker.java, LeaderChangeMessage.json, SnapshotHeaderRecord.json,
SnapshotFooterRecord.json, KRaftVersionRecord.json, VotersRecord.json, written
in the "flexible" encoding: compact arrays and strings with an unsigned varint
length + 1, a tagged-field section closing every struct), independently of the
parser. Re-encoding what was decoded from a real file and getting the file's
bytes back shows every byte of the value was read, and read as Kafka wrote it.
"""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbatch
from kbatch.errors import CorruptRecordError
from kbatch.lib.columns import BinaryColumn
from kbatch.lib.control import decode_control_records, parse_control_value

from .conftest import CORPUS, NO_CORPUS, needs_corpus
from .kafka_ref import crc32c_bitwise, uvarint, varint

# --- an independent encoder ------------------------------------------------




def i16(n): return struct.pack(">h", n)
def u16(n): return struct.pack(">H", n)
def i32(n): return struct.pack(">i", n)
def i64(n): return struct.pack(">q", n)


def compact_array(elements) -> bytes:
    elements = list(elements)
    return uvarint(len(elements) + 1) + b"".join(elements)


def compact_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def tagged(fields=()) -> bytes:
    return uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


def uuid_bytes(kafka_uuid: str) -> bytes:
    raw = base64.urlsafe_b64decode(kafka_uuid + "=" * (-len(kafka_uuid) % 4))
    assert len(raw) == 16
    return raw


def control_key(type_: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, type_)


def enc_end_txn(coordinator_epoch, version=0):
    return struct.pack(">hi", version, coordinator_epoch)


def enc_leader_change(leader_id, voters, granting, version=0, elem_tags=(), msg_tags=()):
    return (i16(version) + i32(leader_id)
            + compact_array(i32(v) + tagged(elem_tags) for v in voters)
            + compact_array(i32(v) + tagged(elem_tags) for v in granting)
            + tagged(msg_tags))


def enc_snapshot_header(ts, version=0, msg_tags=()):
    return i16(version) + i64(ts) + tagged(msg_tags)


def enc_snapshot_footer(version=0, msg_tags=()):
    return i16(version) + tagged(msg_tags)


def enc_kraft_version(kraft_version, version=0, msg_tags=()):
    return i16(version) + i16(kraft_version) + tagged(msg_tags)


def enc_voters(voters, version=0, inner_tags=(), msg_tags=()):
    def endpoint(e):
        return (compact_string(e["name"]) + compact_string(e["host"]) + u16(e["port"])
                + tagged(inner_tags))

    def voter(v):
        f = v["kraft_version_feature"]
        return (i32(v["voter_id"]) + uuid_bytes(v["voter_directory_id"])
                + compact_array(endpoint(e) for e in v["endpoints"])
                + i16(f["min_supported_version"]) + i16(f["max_supported_version"])
                + tagged(inner_tags)      # KRaftVersionFeature's own section
                + tagged(inner_tags))     # the voter's

    return i16(version) + compact_array(voter(v) for v in voters) + tagged(msg_tags)


def encode(d: dict) -> bytes:
    """Re-encode a decoded dict (version 0 layout, no tagged fields)."""
    t = d["type"]
    if t in ("ABORT", "COMMIT"):
        return enc_end_txn(d["coordinator_epoch"], d["version"])
    if t == "LEADER_CHANGE":
        return enc_leader_change(d["leader_id"], d["voters"], d["granting_voters"], d["version"])
    if t == "SNAPSHOT_HEADER":
        return enc_snapshot_header(d["last_contained_log_timestamp"], d["version"])
    if t == "SNAPSHOT_FOOTER":
        return enc_snapshot_footer(d["version"])
    if t == "KRAFT_VERSION":
        return enc_kraft_version(d["kraft_version"], d["version"])
    if t == "KRAFT_VOTERS":
        return enc_voters(d["voters"], d["version"])
    raise AssertionError(t)


# --- the corpus ----------------------------------------------------------

EPOCH_MS_2020 = 1577836800000
EPOCH_MS_2035 = 2051222400000

FIRST_SEGMENT = "__cluster_metadata-0/00000000000000000000.log"
TAHA_LOG = f"taha-hachidi__LogFile/kafka-data/data/{FIRST_SEGMENT}"
APACHE_LOG = f"apache__kafka/core/data/kafka-7155829485418535035/{FIRST_SEGMENT}"
LEADER_CHANGE_LOGS = sorted(
    str(p.relative_to(CORPUS)) for p in
    [*CORPUS.glob(f"apache__kafka/core/data/*/{FIRST_SEGMENT}"), *CORPUS.glob(TAHA_LOG)])
RONEM = "ronem123__rupia-transaction-service/kafka-logs"
CHECKPOINTS = sorted(str(p.relative_to(CORPUS)) for p in
                     CORPUS.glob(f"{RONEM}/__cluster_metadata-0/*.checkpoint"))
BOOTSTRAPS = sorted(str(p.relative_to(CORPUS)) for p in
                    [*CORPUS.glob(f"{RONEM}/bootstrap.checkpoint"),
                     *CORPUS.glob("taha-hachidi__LogFile/kafka-data/data/bootstrap.checkpoint")])


def _decoded(path):
    records = kbatch.read_segment(path)
    return records, decode_control_records(records.control)


def _assert_reencodes(records, decoded):
    for i, d in enumerate(decoded):
        assert encode(d) == records.control.value[i], d


def _properties(path):
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


@needs_corpus
def test_corpus_has_the_files(corpus):
    assert len(LEADER_CHANGE_LOGS) >= 2
    assert len(CHECKPOINTS) >= 2
    assert len(BOOTSTRAPS) == 2


@needs_corpus
@pytest.mark.parametrize("rel", LEADER_CHANGE_LOGS)
def test_leader_change_records(corpus, rel):
    path = corpus / rel
    records, decoded = _decoded(path)
    for d in decoded:
        assert d["type"] == "LEADER_CHANGE"
        assert d["version"] == 0
        assert 0 <= d["leader_id"] < 100_000
        assert d["voters"] and all(0 <= v < 100_000 for v in d["voters"])
        assert d["leader_id"] in d["voters"]
        # the leader was elected by a majority of the voters, itself included
        assert set(d["granting_voters"]) <= set(d["voters"])
        assert d["leader_id"] in d["granting_voters"]
        assert len(d["granting_voters"]) * 2 > len(d["voters"])
    _assert_reencodes(records, decoded)
    assert [d["offset"] for d in decoded] == records.control.offset.tolist()

    # the broker's quorum-state names the leader of the last election
    state_file = path.parent / "quorum-state"
    if decoded and state_file.exists():
        state = json.loads(state_file.read_text())
        epochs = [int(records.batches.partition_leader_epoch[b]) for b in records.control.batch]
        assert decoded[-1]["leader_id"] == state["leaderId"]
        assert epochs == sorted(epochs) and epochs[-1] <= state["leaderEpoch"]


@needs_corpus
def test_leader_change_taha_one_record_per_epoch(corpus):
    records, decoded = _decoded(corpus / TAHA_LOG)
    assert len(decoded) == 14
    assert all(d["leader_id"] == 1 and d["voters"] == [1] and d["granting_voters"] == [1]
               for d in decoded)
    epochs = [int(records.batches.partition_leader_epoch[b]) for b in records.control.batch]
    assert epochs == list(range(1, 15))  # quorum-state: leaderEpoch 14
    assert decoded[0]["offset"] == 0


@needs_corpus
def test_leader_change_apache_bytes(corpus):
    records, decoded = _decoded(corpus / APACHE_LOG)
    assert records.control.value[0] == bytes.fromhex("0000" "000003e8" "02" "000003e8" "00"
                                                     "02" "000003e8" "00" "00")
    assert decoded == [
        {"offset": 0, "type": "LEADER_CHANGE", "version": 0, "leader_id": 1000,
         "voters": [1000], "granting_voters": [1000]},
        {"offset": 25, "type": "LEADER_CHANGE", "version": 0, "leader_id": 1000,
         "voters": [1000], "granting_voters": [1000]},
    ]


@needs_corpus
def test_snapshot_checkpoints(corpus):
    meta = _properties(corpus / RONEM / "meta.properties")
    log = kbatch.read_segment(corpus / RONEM / "__cluster_metadata-0/00000000000001725413.log")
    log_offsets = log.offset
    previous_ts = -1
    matched_log = 0
    for rel in CHECKPOINTS:
        path = corpus / rel
        end_offset = int(path.name.split("-")[0])
        records, decoded = _decoded(path)
        _assert_reencodes(records, decoded)
        types = [d["type"] for d in decoded]
        assert types == ["SNAPSHOT_HEADER", "KRAFT_VERSION", "KRAFT_VOTERS", "SNAPSHOT_FOOTER"]
        header, kv, voters, footer = decoded
        # the header is the first record of the snapshot, the footer the last
        assert header["offset"] == 0
        assert footer["offset"] == int(records.batches.last_offset[-1])
        assert all(d["version"] == 0 for d in decoded)

        ts = header["last_contained_log_timestamp"]
        assert EPOCH_MS_2020 < ts < EPOCH_MS_2035
        assert ts <= int(records.batches.base_timestamp[0])  # written after that record
        assert ts > previous_ts  # later snapshots contain later records
        previous_ts = ts
        # when the log still holds the snapshot's last record, its timestamp is the one
        i = int(np.searchsorted(log_offsets, end_offset - 1))
        if i < len(log_offsets) and log_offsets[i] == end_offset - 1:
            assert ts == int(log.timestamp[i])
            matched_log += 1

        assert kv["kraft_version"] == 1
        [voter] = voters["voters"]
        assert voter["voter_id"] == int(meta["node.id"])
        assert voter["voter_directory_id"] == meta["directory.id"]
        assert voter["endpoints"] == [{"name": "CONTROLLER", "host": "localhost", "port": 9093}]
        feature = voter["kraft_version_feature"]
        assert (feature["min_supported_version"] <= kv["kraft_version"]
                <= feature["max_supported_version"])
    assert matched_log == 2


@needs_corpus
@pytest.mark.parametrize("rel", BOOTSTRAPS)
def test_bootstrap_checkpoint(corpus, rel):
    records, decoded = _decoded(corpus / rel)
    _assert_reencodes(records, decoded)
    assert decoded[0] == {"offset": 0, "type": "SNAPSHOT_HEADER", "version": 0,
                          "last_contained_log_timestamp": 0}
    assert decoded[-1]["type"] == "SNAPSHOT_FOOTER"
    assert decoded[-1]["offset"] == int(records.batches.last_offset[-1])
    assert records.control.value[0] == bytes(11)


# --- hand-built values ---------------------------------------------------

VOTERS = [
    {"voter_id": 1, "voter_directory_id": "yYuMrFRVQVSX0VVQPcMSrA",
     "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
     "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}},
    {"voter_id": 2, "voter_directory_id": "AAAAAAAAAAAAAAAAAAAAAA",
     "endpoints": [],
     "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 0}},
    {"voter_id": 3000, "voter_directory_id": "_____________________w",
     "endpoints": [{"name": "CONTROLLER", "host": "ctrl-3.example", "port": 65535},
                   {"name": "SSL", "host": "h\u00f4te-\u00e9t\u00e9", "port": 1}],
     "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}},
]

# (type, value bytes, expected dict): all version 0, all valid
VALID = [
    (0, enc_end_txn(7), {"type": "ABORT", "version": 0, "coordinator_epoch": 7}),
    (1, enc_end_txn(2**31 - 1), {"type": "COMMIT", "version": 0, "coordinator_epoch": 2**31 - 1}),
    (1, enc_end_txn(-1), {"type": "COMMIT", "version": 0, "coordinator_epoch": -1}),
    (2, enc_leader_change(3, [1, 2, 3], [3, 1]),
     {"type": "LEADER_CHANGE", "version": 0, "leader_id": 3, "voters": [1, 2, 3],
      "granting_voters": [3, 1]}),
    (2, enc_leader_change(5, list(range(200)), []),  # two-byte array length
     {"type": "LEADER_CHANGE", "version": 0, "leader_id": 5, "voters": list(range(200)),
      "granting_voters": []}),
    (2, enc_leader_change(1, [1], [1], elem_tags=[(0, b"x"), (9, bytes(300))],
                          msg_tags=[(1000, b"abc")]),
     {"type": "LEADER_CHANGE", "version": 0, "leader_id": 1, "voters": [1],
      "granting_voters": [1]}),
    (3, enc_snapshot_header(1767084411992),
     {"type": "SNAPSHOT_HEADER", "version": 0, "last_contained_log_timestamp": 1767084411992}),
    (3, enc_snapshot_header(-1, msg_tags=[(0, b"\x01\x02")]),
     {"type": "SNAPSHOT_HEADER", "version": 0, "last_contained_log_timestamp": -1}),
    (4, enc_snapshot_footer(), {"type": "SNAPSHOT_FOOTER", "version": 0}),
    (4, enc_snapshot_footer(msg_tags=[(3, b""), (4, b"zz")]),
     {"type": "SNAPSHOT_FOOTER", "version": 0}),
    (5, enc_kraft_version(1), {"type": "KRAFT_VERSION", "version": 0, "kraft_version": 1}),
    (5, enc_kraft_version(0, msg_tags=[(2, b"?")]),
     {"type": "KRAFT_VERSION", "version": 0, "kraft_version": 0}),
    (6, enc_voters(VOTERS), {"type": "KRAFT_VOTERS", "version": 0, "voters": VOTERS}),
    (6, enc_voters(VOTERS, inner_tags=[(0, b"t"), (127, bytes(130))], msg_tags=[(5, b"")]),
     {"type": "KRAFT_VOTERS", "version": 0, "voters": VOTERS}),
    (6, enc_voters([]), {"type": "KRAFT_VOTERS", "version": 0, "voters": []}),
]


@pytest.mark.parametrize("type_,value,want", VALID)
def test_hand_built_values(type_, value, want):
    assert parse_control_value(type_, control_key(type_), value) == want
    assert parse_control_value(type_, None, value) == want
    assert parse_control_value(type_, None, memoryview(bytearray(value))) == want


def test_known_bytes():
    # laid out by hand, byte by byte
    assert parse_control_value(6, None, bytes.fromhex(
        "0000" "02" "00000001" "c98b8cac545541" "5497d155503dc312ac"
        "02" "0b" + b"CONTROLLER".hex() + "0a" + b"localhost".hex() + "2385" "00"
        "0000" "0001" "00" "00" "00")) == {
        "type": "KRAFT_VOTERS", "version": 0, "voters": [VOTERS[0]]}
    assert parse_control_value(0, None, b"\x00\x00\x00\x00\x01\x00") == {
        "type": "ABORT", "version": 0, "coordinator_epoch": 256}
    assert parse_control_value(3, None, bytes.fromhex("0000" "0000019b4aa9cb5d" "00")) == {
        "type": "SNAPSHOT_HEADER", "version": 0,
        "last_contained_log_timestamp": 0x19B4AA9CB5D}


def test_newer_versions_read_with_the_version_0_layout():
    # Kafka reads every value as version 0 and ignores what follows
    assert parse_control_value(1, None, enc_end_txn(4, version=1) + b"more") == {
        "type": "COMMIT", "version": 1, "coordinator_epoch": 4}
    value = enc_leader_change(1, [1], [1], version=2) + b"\x00\x07"
    assert parse_control_value(2, None, value) == {
        "type": "LEADER_CHANGE", "version": 2, "leader_id": 1, "voters": [1],
        "granting_voters": [1]}
    assert parse_control_value(4, None, enc_snapshot_footer(version=1) + b"x") == {
        "type": "SNAPSHOT_FOOTER", "version": 1}


def test_unknown_types_are_returned_raw():
    key = control_key(7)
    assert parse_control_value(7, key, b"\x01\x02") == {
        "type": "UNKNOWN", "raw_key": key, "raw_value": b"\x01\x02"}
    assert parse_control_value(-1, b"\xff", None) == {
        "type": "UNKNOWN", "raw_key": b"\xff", "raw_value": None}
    assert parse_control_value(np.int16(300), None, b"") == {
        "type": "UNKNOWN", "raw_key": None, "raw_value": b""}


def test_key_is_checked():
    value = enc_snapshot_footer()
    assert parse_control_value(4, control_key(4, version=1), value)["type"] == "SNAPSHOT_FOOTER"
    assert parse_control_value(4, control_key(4) + b"extra", value)["type"] == "SNAPSHOT_FOOTER"
    for bad in (b"", b"\x00\x00\x00", control_key(3), control_key(4, version=-1)):
        with pytest.raises(CorruptRecordError):
            parse_control_value(4, bad, value)


# --- malformed values ----------------------------------------------------

@pytest.mark.parametrize("type_,value,want", VALID)
def test_every_truncation_is_corrupt(type_, value, want):
    for n in range(len(value)):
        with pytest.raises(CorruptRecordError):
            parse_control_value(type_, None, value[:n])


@pytest.mark.parametrize("type_,value,want", VALID)
def test_trailing_bytes_after_version_0_are_corrupt(type_, value, want):
    with pytest.raises(CorruptRecordError, match="after the end"):
        parse_control_value(type_, None, value + b"\x00")


MALFORMED = [
    (0, None, "null"),
    (5, None, "null"),
    (0, enc_end_txn(1, version=-1), "negative version"),
    (3, enc_snapshot_header(5, version=-2), "negative version"),
    # null (length 0) arrays and strings in non-nullable fields
    (2, i16(0) + i32(1) + b"\x00" + compact_array([]) + tagged(), "null array"),
    (6, i16(0) + b"\x00" + tagged(), "null array"),
    (6, i16(0) + compact_array([i32(1) + bytes(16) + compact_array([
        b"\x00" + compact_string("h") + u16(1) + tagged()])
        + i16(0) + i16(0) + tagged() + tagged()]) + tagged(), "null string"),
    # a string longer than Kafka allows
    (6, i16(0) + compact_array([i32(1) + bytes(16) + compact_array([
        uvarint(0x8000 + 1) + b"a" * 0x8000 + compact_string("h") + u16(1) + tagged()])
        + i16(0) + i16(0) + tagged() + tagged()]) + tagged(), "over 32767"),
    # invalid UTF-8
    (6, i16(0) + compact_array([i32(1) + bytes(16) + compact_array([
        compact_string("n") + uvarint(3) + b"\xff\xfe" + u16(1) + tagged()])
        + i16(0) + i16(0) + tagged() + tagged()]) + tagged(), "UTF-8"),
    # more elements than bytes left
    (2, i16(0) + i32(1) + uvarint(1_000_001) + i32(1), "cannot fit"),
    (2, i16(0) + i32(1) + uvarint(2**32 - 1) + i32(1), "cannot fit"),
    # a varint that never ends, or is too long
    (4, i16(0) + b"\x80\x80", "varint runs past"),
    (4, i16(0) + b"\x80\x80\x80\x80\x80\x01", "longer than 5"),
    # a tagged field running past the end, a huge tagged field count
    (4, i16(0) + tagged([(1, b"abcd")])[:-1], "needs 4 bytes"),
    (4, i16(0) + uvarint(2**32 - 1) + uvarint(0) + uvarint(0), "runs past"),
    (5, i16(0) + i16(1) + uvarint(1) + uvarint(0) + uvarint(2**34), "needs"),
]


@pytest.mark.parametrize("type_,value,message", MALFORMED)
def test_malformed_values(type_, value, message):
    with pytest.raises(CorruptRecordError, match=message) as info:
        parse_control_value(type_, None, value)
    assert isinstance(info.value, ValueError)


KNOWN_TYPES = st.integers(0, 6)


@given(KNOWN_TYPES, st.binary(max_size=64))
def test_random_bytes_never_crash(type_, value):
    try:
        parse_control_value(type_, None, value)
    except CorruptRecordError:
        pass


@given(st.sampled_from(VALID), st.data())
def test_mutated_values_never_crash(sample, data):
    type_, value, _ = sample
    buf = bytearray(value)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    try:
        out = parse_control_value(type_, None, bytes(buf))
    except CorruptRecordError:
        return
    assert out["type"] == sample[2]["type"]


# --- over ControlRecords -------------------------------------------------

def _control(types, keys, values, offsets):
    n = len(types)
    return kbatch.ControlRecords(
        np.array(offsets, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int32),
        np.full(n, -1, np.int64), np.full(n, -1, np.int16), np.array(types, np.int16),
        np.zeros(n, np.int16), np.full(n, -1, np.int32),
        BinaryColumn.from_pylist(keys), BinaryColumn.from_pylist(values))


def test_decode_control_records_adds_offsets():
    control = _control([3, 9, 4], [control_key(3), control_key(9), control_key(4)],
                       [enc_snapshot_header(10), b"?", enc_snapshot_footer()], [100, 101, 102])
    assert decode_control_records(control) == [
        {"offset": 100, "type": "SNAPSHOT_HEADER", "version": 0,
         "last_contained_log_timestamp": 10},
        {"offset": 101, "type": "UNKNOWN", "raw_key": control_key(9), "raw_value": b"?"},
        {"offset": 102, "type": "SNAPSHOT_FOOTER", "version": 0},
    ]
    assert decode_control_records(_control([], [], [], [])) == []


def test_decode_control_records_names_the_bad_offset():
    control = _control([0, 1], [control_key(0), control_key(1)],
                       [enc_end_txn(1), enc_end_txn(1)[:5]], [7, 42])
    with pytest.raises(CorruptRecordError, match="offset 42"):
        decode_control_records(control)


# --- through a real batch: transaction markers -----------------------------

def _crc32c(data: bytes) -> int:
    return crc32c_bitwise(data, 0xFFFFFFFF) ^ 0xFFFFFFFF




def _control_batch(base_offset, producer_id, key, value, timestamp=1_700_000_000_000):
    body = b"\x00" + varint(0) + varint(0)  # attributes, timestamp delta, offset delta
    body += varint(len(key)) + key + varint(len(value)) + value + varint(0)
    record = varint(len(body)) + body
    after_crc = (struct.pack(">hiqqqhii", 0x30, 0, timestamp, timestamp, producer_id, 0, -1, 1)
                 + record)  # attributes: transactional | control
    head = struct.pack(">iB", 0, 2) + struct.pack(">I", _crc32c(after_crc))
    batch = head + after_crc
    return struct.pack(">qi", base_offset, len(batch)) + batch


def test_transaction_markers_in_a_segment():
    segment = (_control_batch(5, 1000, control_key(1), enc_end_txn(3))
               + _control_batch(6, 1001, control_key(0), enc_end_txn(4)))
    records = kbatch.read_segment(segment)
    assert len(records) == 0 and len(records.control) == 2
    assert decode_control_records(records.control) == [
        {"offset": 5, "type": "COMMIT", "version": 0, "coordinator_epoch": 3},
        {"offset": 6, "type": "ABORT", "version": 0, "coordinator_epoch": 4},
    ]
    assert records.control.coordinator_epoch.tolist() == [3, 4]
