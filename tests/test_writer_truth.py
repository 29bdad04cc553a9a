"""The writer against independent truth: kafka-python decodes what it wrote
to exactly the inputs (compared with the writer's inputs, never with
kbatch's reader), for every codec and every option: headers, null keys and
values, CreateTime and LogAppendTime, idempotent producers (sequences that
continue per producer), transactional batches with COMMIT/ABORT markers.
The ``.txnindex`` of a partition directory is checked against a model of
ProducerStateManager written here and parsed with ``struct``.
"""

from __future__ import annotations

import io
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.lib.writer import ABORT, COMMIT, LogWriter, SegmentWriter
from .kafka_ref import read_with_kafka_python

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

values = st.one_of(st.none(), st.binary(max_size=40),
                   st.sampled_from([b"a" * 300, b"abc" * 90]))   # compressible too
header = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8)))
row = st.tuples(values, values, st.integers(0, 1 << 45), st.lists(header, max_size=3))


def expected_rows(rows, first_offset):
    return [{"offset": first_offset + i, "key": k, "value": v, "timestamp": t,
             "headers": [(hk, hv) for hk, hv in h]}
            for i, (k, v, t, h) in enumerate(rows)]


def decoded(read, *, log_append_time=None):
    out = []
    for r in read.records:
        out.append({"offset": r["offset"], "key": r["key"], "value": r["value"],
                    "timestamp": r["timestamp"], "headers": r["headers"]})
    return out


@settings(max_examples=40)
@given(rows=st.lists(row, min_size=1, max_size=30), codec=st.sampled_from(sorted(CODECS)),
       batch_records=st.integers(1, 12), base_offset=st.integers(0, 1 << 40),
       log_append=st.booleans(), producer=st.booleans(), epoch=st.integers(0, 32767),
       leader_epoch=st.integers(-1, 1000))
def test_kafka_python_decodes_exactly_the_inputs(rows, codec, batch_records, base_offset,
                                                 log_append, producer, epoch, leader_epoch):
    buf = io.BytesIO()
    pid = 4242 if producer else -1
    lat = 1_700_000_000_123
    with SegmentWriter(buf, base_offset=base_offset, codec=codec, batch_records=batch_records,
                       partition_leader_epoch=leader_epoch) as w:
        first, last = w.append(rows, producer_id=pid,
                               producer_epoch=epoch if producer else None,
                               timestamp_type="log_append" if log_append else "create",
                               log_append_time=lat)
        # a second append continues offsets and the producer's sequences
        first2, last2 = w.append(rows[:3], producer_id=pid,
                                 producer_epoch=epoch if producer else None)
    assert (first, last, first2, last2) == (
        base_offset, base_offset + len(rows) - 1, base_offset + len(rows),
        base_offset + len(rows) + min(3, len(rows)) - 1)
    read = read_with_kafka_python(buf.getvalue(), check_crc=True)
    assert read.valid_bytes == len(buf.getvalue())
    want = expected_rows(rows + rows[:3], base_offset)
    if log_append:
        for r in want[:len(rows)]:
            r["timestamp"] = lat
    assert decoded(read) == want
    n1 = -(-len(rows) // batch_records)
    sequence = 0
    for i, b in enumerate(read.batches):
        count = b["records_count"]
        first_append = i < n1
        assert b["magic"] == 2 and b["crc_valid"]
        assert b["codec"] in (0, CODECS[codec])           # stored plain when it does not pay
        assert b["timestamp_type"] == (1 if log_append and first_append else 0)
        assert b["partition_leader_epoch"] == leader_epoch
        assert b["producer_id"] == pid
        assert b["producer_epoch"] == (epoch if producer else -1)
        assert b["base_sequence"] == (sequence if producer else -1)
        assert not b["is_transactional"] and not b["is_control"]
        assert count <= batch_records and b["last_offset_delta"] == count - 1
        stamps = [r["timestamp"] for r in read.records if b["base_offset"] <= r["offset"]
                  <= b["last_offset"]]
        if not (log_append and first_append):
            assert b["max_timestamp"] == max(stamps)
        sequence += count
    assert sum(b["records_count"] for b in read.batches) == len(want)


@settings(max_examples=25)
@given(codec=st.sampled_from(sorted(CODECS)),
       txns=st.lists(st.tuples(st.integers(1, 3), st.lists(row, min_size=1, max_size=5),
                               st.sampled_from([COMMIT, ABORT, None])),
                     min_size=1, max_size=6),
       coordinator_epoch=st.integers(0, 1000))
def test_transactions_and_markers_decode_and_the_txnindex_follows_the_broker(
        tmp_path_factory, codec, txns, coordinator_epoch):
    """Interleaved transactions of up to three producers, each write either
    left open or ended by a marker; kafka-python reads every data record,
    the control records, and the .txnindex equals the broker's rule
    (ProducerStateManager.lastStableOffset: the first offset of the earliest
    other open transaction, else the marker's offset + 1)."""
    path = tmp_path_factory.mktemp("t") / "txn-0"
    want_rows, want_control, want_txn = [], [], []
    open_txns: dict[int, int] = {}
    with LogWriter(path, codec=codec, batch_records=2, preallocate_indexes=False) as log:
        for pid, rows, end in txns:
            first, last = log.append(rows, producer_id=pid, producer_epoch=pid,
                                     transactional=True)
            open_txns.setdefault(pid, first)
            want_rows += [(r, pid) for r in expected_rows(rows, first)]
            if end is not None:
                offset = log.end_transaction(pid, commit=end == COMMIT, producer_epoch=pid,
                                             coordinator_epoch=coordinator_epoch,
                                             timestamp=77)
                assert offset == last + 1
                want_control.append((offset, end, pid, coordinator_epoch))
                started = open_txns.pop(pid)
                if end == ABORT:
                    lso = min(open_txns.values()) if open_txns else offset + 1
                    want_txn.append((0, pid, started, offset, lso))
    read = read_with_kafka_python((path / "00000000000000000000.log").read_bytes(),
                                  check_crc=True)
    assert decoded(read) == [r for r, _ in want_rows]
    by_offset = {}
    for b in read.batches:
        for o in range(b["base_offset"], b["last_offset"] + 1):
            by_offset[o] = b
    for r, pid in want_rows:
        b = by_offset[r["offset"]]
        assert b["is_transactional"] and b["producer_id"] == pid and b["producer_epoch"] == pid
    assert [(c["offset"], c["type"], c["producer_id"], c["coordinator_epoch"])
            for c in read.control] == want_control
    for c in read.control:
        b = by_offset[c["offset"]]
        assert b["is_control"] and b["is_transactional"] and b["codec"] == 0
        assert c["timestamp"] == 77 and c["version"] == 0
    txn = path / "00000000000000000000.txnindex"
    data = txn.read_bytes() if txn.exists() else b""
    assert [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)] == want_txn


@given(st.sampled_from(sorted(CODECS)), st.booleans())
@settings(max_examples=10)
def test_write_segment_commit_and_abort(codec, commit):
    buf = io.BytesIO()
    kbatch.write_segment(buf, [(b"k", b"v", 5, [("h", None)])] * 4, codec=codec,
                         producer_id=9, producer_epoch=3, transactional=True, commit=commit)
    read = read_with_kafka_python(buf.getvalue(), check_crc=True)
    assert [r["offset"] for r in read.records] == [0, 1, 2, 3]
    assert [r["headers"] for r in read.records] == [[("h", None)]] * 4
    assert [(c["offset"], c["type"], c["producer_id"], c["producer_epoch"])
            for c in read.control] == [(4, COMMIT if commit else ABORT, 9, 3)]


def test_write_log_segments_decode_in_order_with_kafka_python(tmp_path):
    rows = [(b"k%d" % i, b"v" * (i % 50), 1000 + i, [("n", b"%d" % i)]) for i in range(400)]
    kbatch.write_log(tmp_path / "t-0", rows, codec="lz4", segment_bytes=3000, batch_records=7)
    segs = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(segs) > 3
    got = []
    for seg in segs:
        assert seg.stat().st_size <= 3000                   # the broker's roll rule
        read = read_with_kafka_python(seg.read_bytes(), check_crc=True)
        assert read.batches[0]["base_offset"] == int(seg.stem)
        got += decoded(read)
    assert got == expected_rows(rows, 0)
