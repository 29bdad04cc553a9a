"""offset_commits (compiled kernel + checked fallback) and group_metadata on
generated records of every version, against tests/internal_ref.py."""

import random
import struct

import pytest

import kbatch
from kbatch.internal import group_metadata, offset_commits, transaction_log
from kbatch.internal._schemas import MESSAGES
from tests.internal_ref import (enc_struct, rand_struct, ref_group_metadata, ref_offset_commit,
                                uvarint)


def _key(group: bytes, topic: bytes, partition: int, kver: int = 1) -> bytes:
    return (struct.pack(">hh", kver, len(group)) + group + struct.pack(">h", len(topic)) + topic
            + struct.pack(">i", partition))


def _value(v: int, offset: int, epoch: int, meta: bytes, commit: int, expire: int,
           tags: bytes = b"\x00") -> bytes:
    out = struct.pack(">hq", v, offset)
    if v >= 3:
        out += struct.pack(">i", epoch)
    out += (uvarint(len(meta) + 1) + meta) if v >= 4 else struct.pack(">h", len(meta)) + meta
    out += struct.pack(">q", commit)
    if v == 1:
        out += struct.pack(">q", expire)
    if v >= 4:
        out += tags
    return out


def _records(seed: int, n: int = 400):
    rnd = random.Random(seed)
    out = []
    gm = MESSAGES["GroupMetadataValue"]
    for i in range(n):
        kind = rnd.random()
        group = rnd.choice([b"", b"g", "grüppe".encode(), b"x" * 300])
        if kind < 0.75:
            key = _key(group, rnd.choice([b"orders", b"t" * 40]), rnd.randint(-1, 1000),
                       rnd.choice([0, 1]))
            v = rnd.randint(0, 4)
            value = _value(v, rnd.randint(-1, 1 << 40), rnd.randint(-1, 50),
                           rnd.choice([b"", b"meta", "é".encode()]),
                           1_700_000_000_000 + i, rnd.choice([-1, 1_800_000_000_000]))
            if rnd.random() < 0.1:
                value = None                                   # tombstone
            elif v == 4 and rnd.random() < 0.2:                # an unknown tagged field
                value = value[:-1] + uvarint(1) + uvarint(7) + uvarint(2) + b"hi"
        elif kind < 0.85:
            ver = rnd.randint(0, 4)
            vals = rand_struct(gm["fields"], ver, rnd)
            key = struct.pack(">hh", 2, len(group)) + group
            value = struct.pack(">h", ver) + enc_struct(gm["fields"], vals, ver, ver >= 4)
        elif kind < 0.9:
            key, value = struct.pack(">h", 5) + b"\x00\x01a\x00\x01b", b"\x00\x00junk"
        elif kind < 0.95:                                      # damaged offset commit
            key = _key(group, b"t", 0)
            value = _value(3, 1, 1, b"m", 1, 1)[:rnd.randint(0, 20)]
        else:                                                  # an unknown value version
            key = _key(group, b"t", 0)
            value = struct.pack(">h", 9) + b"\x00" * 30
        out.append((key, value, 1_700_000_000_000 + i))
    return out


def _ms(ts):
    return None if ts is None else int(ts.timestamp() * 1000)


@pytest.mark.parametrize("seed", range(4))
def test_offset_commits_match_reference(tmp_path, seed):
    recs = _records(seed)
    path = tmp_path / "__consumer_offsets-7" / "00000000000000000000.log"
    path.parent.mkdir()
    kbatch.write_segment(path, recs, batch_records=50)
    got = offset_commits(path.parent).to_pylist()
    expect = []
    for off, (k, v, ts) in enumerate(recs):
        if struct.unpack(">h", k[:2])[0] not in (0, 1):
            continue
        try:
            ref = ref_offset_commit(k, v)
            if ref["value_version"] is not None and ref["value_version"] > 4:
                raise ValueError
            ref["error"] = None
        except (AssertionError, ValueError, struct.error, IndexError):
            ref = {"error": True}
        expect.append((off, ts, ref))
    assert len(got) == len(expect)
    for row, (off, ts, ref) in zip(got, expect):
        assert row["record_offset"] == off and _ms(row["record_timestamp"]) == ts
        assert row["offsets_topic"] == "__consumer_offsets" and row["offsets_partition"] == 7
        if ref["error"]:
            assert row["error"] and row["committed_offset"] is None
            continue
        assert row["error"] is None, row
        for f in ("group", "topic", "partition", "committed_offset", "leader_epoch",
                  "metadata", "tombstone", "value_version"):
            assert row[f] == ref[f], (f, row, ref)
        assert _ms(row["commit_timestamp"]) == ref["commit_timestamp"]
        assert _ms(row["expire_timestamp"]) == ref["expire_timestamp"]


def test_offset_commits_not_utf8_goes_to_checked_path(tmp_path):
    recs = [(_key(b"\xff\xfe", b"t", 0), _value(3, 5, 0, b"", 1, -1), 1),
            (_key(b"ok", b"t", 0), _value(3, 6, 0, b"", 1, -1), 2)]
    path = tmp_path / "00000000000000000000.log"
    kbatch.write_segment(path, recs)
    rows = offset_commits(path).to_pylist()
    assert rows[0]["error"] and "UTF-8" in rows[0]["error"]
    assert rows[1]["group"] == "ok" and rows[1]["committed_offset"] == 6


def test_group_metadata_matches_reference(tmp_path):
    recs = _records(11, 600)
    path = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    path.parent.mkdir()
    kbatch.write_segment(path, recs)
    t = group_metadata(path.parent)
    # random int64 times lie outside Python's datetime range: compare as ms
    i = t.schema.get_field_index("current_state_timestamp")
    t = t.set_column(i, "current_state_timestamp", t.column(i).cast("int64"))
    got = t.to_pylist()
    refs = [ref_group_metadata(k, v) for k, v, _ in recs if k[:2] == b"\x00\x02"]
    assert len(got) == len(refs) > 20
    for row, ref in zip(got, refs):
        assert row["group"] == ref["group"] and row["tombstone"] == ref["tombstone"]
        if ref["tombstone"]:
            assert row["members"] is None
            continue
        for f in ("protocol_type", "generation", "protocol", "leader", "value_version",
                  "current_state_timestamp"):
            assert row[f] == ref[f]
        assert len(row["members"]) == len(ref["members"])
        for gm, rm in zip(row["members"], ref["members"]):
            for f in ("member_id", "group_instance_id", "client_id", "client_host",
                      "rebalance_timeout", "session_timeout"):
                assert gm[f] == rm[f]
            assert gm["subscription_raw"] == rm["subscription"]


def test_transaction_log(tmp_path):
    from kbatch.internal.encode import coordinator_record
    recs = []
    for i, (status, ver) in enumerate([(1, 0), (4, 1), (3, 1), (6, 0)]):
        k, v = coordinator_record("TransactionLogKey", 0, {"transactional_id": f"tx-{i}"},
                                  "TransactionLogValue", ver,
                                  {"producer_id": 1000 + i, "producer_epoch": 3,
                                   "transaction_timeout_ms": 60000, "transaction_status": status,
                                   "transaction_partitions": [{"topic": "payments",
                                                               "partition_ids": [0, 1]}],
                                   "transaction_last_update_timestamp_ms": 5,
                                   "transaction_start_timestamp_ms": -1,
                                   "previous_producer_id": 77 if ver else -1})
        # the key and value the test writes by hand
        assert k == struct.pack(">hh", 0, 4) + f"tx-{i}".encode()
        recs.append((k, v, 10 + i))
    recs.append((recs[0][0], None, 20))
    path = tmp_path / "__transaction_state-3" / "00000000000000000000.log"
    path.parent.mkdir()
    kbatch.write_segment(path, recs)
    t = transaction_log(tmp_path).to_pylist()
    assert [r["state"] for r in t] == ["Ongoing", "CompleteCommit", "PrepareAbort", "Dead", None]
    assert t[1]["previous_producer_id"] == 77 and t[0]["previous_producer_id"] is None
    assert t[2]["partitions"] == [{"topic": "payments", "partition_ids": [0, 1]}]
    assert t[4]["tombstone"] and t[4]["transactional_id"] == "tx-0"
    assert t[0]["start_timestamp"] is None and t[0]["partition"] == 3


@pytest.mark.parametrize("seed", range(3))
def test_damaged_offset_commits_never_raise(tmp_path, seed):
    """Bytes flipped and cut anywhere: each row is decoded as the reference
    decodes it, or carries an error; the read itself never fails."""
    rnd = random.Random(100 + seed)
    recs = []
    for k, v, ts in _records(seed, 300):
        if k[:2] not in (b"\x00\x00", b"\x00\x01"):
            continue
        k, v = bytearray(k), None if v is None else bytearray(v)
        for buf in (k, v):
            if buf and rnd.random() < 0.5:
                buf[rnd.randrange(len(buf))] = rnd.randrange(256)
        if v is not None and rnd.random() < 0.2:
            v = v[:rnd.randrange(len(v) + 1)]
        recs.append((bytes(k), None if v is None else bytes(v), ts))
    path = tmp_path / "00000000000000000000.log"
    kbatch.write_segment(path, recs)
    t = offset_commits(path)
    got = t.drop_columns(["commit_timestamp", "expire_timestamp"]).to_pylist()  # any int64
    kept = [r for r in recs if r[0][:2] in (b"\x00\x00", b"\x00\x01")]
    assert len(got) == len(kept)
    for row, (k, v, _) in zip(got, kept):
        try:
            ref = ref_offset_commit(k, v)
            ok = (None not in (ref["group"], ref["topic"])
                  and (v is None or (ref["metadata"] is not None
                                   and 0 <= ref["value_version"] <= 4)))
        except (AssertionError, struct.error, IndexError, UnicodeDecodeError):
            ok = False
        if not ok:
            assert row["error"] and row["committed_offset"] is None, row
            continue
        assert row["error"] is None, (row, ref)
        for f in ("group", "topic", "partition", "committed_offset", "leader_epoch", "metadata"):
            assert row[f] == ref[f]


def test_kernel_decodes_every_well_formed_version_itself(tmp_path):
    """The compiled kernel, not its fallback, handles well-formed offset
    commits of value versions 0-4 (tombstones included), field by field."""
    import numpy as np

    from kbatch._core._offsets import decode_offset_commits
    rnd = random.Random(5)
    recs = []
    for i in range(500):
        v = i % 5
        key = _key(rnd.choice([b"g", b"gr\xc3\xbcppe", b""]), b"orders", rnd.randint(0, 99),
                   rnd.choice([0, 1]))
        value = None if i % 7 == 0 else _value(v, rnd.randint(-1, 1 << 40), rnd.randint(-1, 9),
                                                rnd.choice([b"", b"m" * 200]), 10 + i, 20 + i)
        recs.append((key, value, i))
    path = tmp_path / "00000000000000000000.log"
    kbatch.write_segment(path, recs)
    rec = kbatch.read_segment(path)
    n = len(rec)
    out = [np.empty(n, dt) for dt in (np.int8, np.int16, np.int16, np.int32, np.int64, np.int32,
                                      np.int64, np.int64, np.int64, np.int32, np.int64,
                                      np.int32, np.int64, np.int32)]
    vvalid = rec.value.is_valid().astype(np.uint8)
    done = decode_offset_commits(rec.key.offsets.astype(np.int64), rec.key.data,
                                 rec.value.offsets.astype(np.int64), rec.value.data, vvalid, *out)
    status, kver, vver, part, off, epoch, commit, expire, gs, gl, ts, tl, ms, ml = out
    assert done == n and (status == 0).all()
    for i, (k, v, _) in enumerate(recs):
        ref = ref_offset_commit(k, v)
        kd = rec.key.data
        assert kd[gs[i]:gs[i] + gl[i]].tobytes().decode() == ref["group"]
        assert kd[ts[i]:ts[i] + tl[i]].tobytes().decode() == ref["topic"]
        assert part[i] == ref["partition"]
        if v is None:
            continue
        assert (vver[i], off[i], commit[i]) == (ref["value_version"], ref["committed_offset"],
                                                ref["commit_timestamp"])
        assert epoch[i] == (-1 if ref["leader_epoch"] is None else ref["leader_epoch"])
        assert expire[i] == (-1 if ref["expire_timestamp"] is None else ref["expire_timestamp"])
        assert rec.value.data[ms[i]:ms[i] + ml[i]].tobytes().decode() == ref["metadata"]
