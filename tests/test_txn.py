"""read_committed (SPEC.md section 3, kbatch/txn.py) against a reference model.

Scenarios (tests/txn_model.py) interleave several producers: transactional
ones (COMMIT and ABORT markers, empty transactions, producer epoch bumps by
the coordinator, transactions still open at the end), idempotent
non-transactional ones and plain ones, control batches of unknown and KRaft
types, empty batches and offset gaps. The batches are encoded with
tests/kafka_ref.py and split into 1-4 segment files of a partition directory,
markers often in a later segment than their data, with ``.txnindex`` files
for aborted transactions (and, in a variant, ABORT markers missing from the
log while their ``.txnindex`` entry remains).

Every read path is compared with ``txn_model.model``, a forward walk over the
batch descriptions that does not use kbatch.
"""

from __future__ import annotations

import random
import contextlib
import io
import json
import os
import struct
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbatch
import kbatch.tools.cli

from .kafka_ref import ABORT, COMMIT
from .txn_model import B, Scenario, Txn, model, scenarios

RC = "read_committed"


def offsets_values(records):
    return records.offset.tolist(), records.value.to_pylist()


def report_rows(report):
    return [Txn(t.producer_id, t.producer_epoch, t.first_offset, t.last_offset,
                t.marker_offset, t.status, t.records, t.batches, t.coordinator_epoch)
            for t in report.transactions]


@contextlib.contextmanager
def partition_dir(scenario: Scenario):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "orders-3")
        scenario.write(path)
        yield tmp, path


def run_cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = kbatch.tools.cli.main(argv)
    return code, out.getvalue()


# --- the partition, every read path -------------------------------------------

def check_partition(scenario: Scenario, data):
    exp = model(scenario.written, scenario.index_entries)
    with partition_dir(scenario) as (root, path):
        log = kbatch.open_log(path)

        whole = log.read(isolation=RC)
        assert offsets_values(whole) == (exp.offsets, exp.values)
        assert whole.last_stable_offset == exp.lso
        assert whole.control.offset.tolist() == [o for o, _ in exp.control if o < exp.lso]

        k = data.draw(st.integers(1, 3), label="chunk_records")
        chunks = list(log.iter(isolation=RC, chunk_records=k))
        assert all(c.last_stable_offset == exp.lso for c in chunks)
        assert offsets_values(kbatch.Records.concat(chunks)) == (exp.offsets, exp.values)

        everything = log.read()
        assert offsets_values(everything) == (exp.all_offsets, exp.all_values)
        assert everything.last_stable_offset is None
        assert list(zip(everything.control.offset.tolist(), everything.control.type.tolist())) \
            == exp.control

        first = scenario.written[0].base_offset
        bounds = st.integers(max(0, first - 2), exp.log_end_offset + 2)
        for _ in range(2):
            lo, hi = sorted((data.draw(bounds, label="lo"), data.draw(bounds, label="hi")))
            part = log.read(lo, hi, isolation=RC)
            assert offsets_values(part) == exp.committed_in(lo, hi), (lo, hi)
            assert part.last_stable_offset == exp.lso
            chunks = list(log.iter(lo, hi, isolation=RC, chunk_records=k))
            assert offsets_values(kbatch.Records.concat(chunks)) == exp.committed_in(lo, hi)

        by_dir = kbatch.open_log_dir(root).read(isolation=RC, threads=1)
        assert offsets_values(by_dir[("orders", 3)]) == (exp.offsets, exp.values)

        entries = [e for seg in scenario.txn_index for e in seg]
        aborted = log.aborted_transactions()
        assert list(zip(aborted.producer_id.tolist(), aborted.first_offset.tolist(),
                        aborted.last_offset.tolist(),
                        aborted.last_stable_offset.tolist())) == entries
        assert log.transaction_state().last_stable_offset == exp.lso

        [report] = kbatch.transactions(path)
        assert report.last_stable_offset == exp.lso
        assert report.log_end_offset == exp.log_end_offset
        assert report_rows(report) == exp.transactions

    # one segment read alone: its own markers, no .txnindex
    for seg in range(len(scenario.starts)):
        seg_exp = model(scenario.segment_batches(seg))
        buf = scenario.segment_bytes(seg)
        alone = kbatch.read_segment(buf, isolation=RC)
        assert offsets_values(alone) == (seg_exp.offsets, seg_exp.values)
        assert alone.last_stable_offset == seg_exp.lso
        chunks = list(kbatch.iter_segment(buf, isolation=RC, chunk_records=1))
        assert offsets_values(kbatch.Records.concat(chunks)) == (seg_exp.offsets, seg_exp.values)
        assert chunks[-1].last_stable_offset == seg_exp.lso
    return exp


@given(scenarios(), st.data())
def test_partition_read_committed_matches_model(scenario, data):
    check_partition(scenario, data)


@given(scenarios(missing_markers=True, max_steps=26), st.data())
def test_a_consumer_view_is_stable_only_below_the_high_watermark(scenario, data):
    """With the high watermark known (``read(high_watermark=)``, a data
    directory's replication-offset-checkpoint with visibility="consumer"),
    a transaction whose marker is at or above it is still unstable: the
    LSO stops at its first offset, as the broker's does."""
    first = scenario.written[0].base_offset
    log_end = model(scenario.written, scenario.index_entries).log_end_offset
    hw = data.draw(st.integers(first, log_end), label="high_watermark")
    exp = model(scenario.written, scenario.index_entries, high_watermark=hw)
    with partition_dir(scenario) as (root, path):
        got = kbatch.open_log(path).read(isolation=RC, high_watermark=hw)
        assert offsets_values(got) == (exp.offsets, exp.values)
        assert got.last_stable_offset == exp.lso
        rows = kbatch.open_log(path).read(isolation=RC, high_watermark=hw, level="batches")
        assert sum(rows.column("records").to_pylist()) == len(exp.offsets)
        with open(os.path.join(root, "replication-offset-checkpoint"), "w") as f:
            f.write(f"0\n1\norders 3 {hw}\n")
        by_dir = kbatch.open_log_dir(root).read(isolation=RC, visibility="consumer", threads=1)
        assert offsets_values(by_dir[("orders", 3)]) == (exp.offsets, exp.values)


@given(scenarios(missing_markers=True, max_steps=26), st.data())
def test_txnindex_aborts_when_markers_are_missing(scenario, data):
    check_partition(scenario, data)


@given(scenarios(max_segments=1), st.data())
def test_single_segment_matches_model(scenario, data):
    exp = model(scenario.written, scenario.index_entries)
    buf = scenario.segment_bytes(0)
    if not scenario.index_entries:   # a lone segment has no .txnindex
        got = kbatch.read_segment(buf, isolation=RC)
        assert offsets_values(got) == (exp.offsets, exp.values)
        assert got.last_stable_offset == exp.lso
        chunks = list(kbatch.iter_segment(buf, isolation=RC, chunk_records=1))
        assert all(c.last_stable_offset == exp.lso for c in chunks)
        assert offsets_values(kbatch.Records.concat(chunks)) == (exp.offsets, exp.values)
    uncommitted = kbatch.read_segment(buf)
    assert offsets_values(uncommitted) == (exp.all_offsets, exp.all_values)
    assert offsets_values(kbatch.Records.concat(list(kbatch.iter_segment(buf, chunk_records=1)))) \
        == (exp.all_offsets, exp.all_values)
    check_partition(scenario, data)


@given(scenarios(missing_markers=True))
def test_transaction_report_and_cli(scenario):
    exp = model(scenario.written, scenario.index_entries)
    n_open = sum(t.status == "OPEN" for t in exp.transactions)
    with partition_dir(scenario) as (_, path):
        [report] = kbatch.transactions(path)
        assert report_rows(report) == exp.transactions
        assert [(t.first_offset, t.producer_id) for t in report.open] == \
            [(t.first_offset, t.producer_id) for t in exp.transactions if t.status == "OPEN"]

        code, text = run_cli(["txn", path])
        assert code == 0
        assert text.count("<-- open (hanging)") == n_open
        assert f"LSO {exp.lso}," in text
        assert ("open transaction(s)" in text) == bool(n_open)

        code, text = run_cli(["txn", "--format", "json", path])
        assert code == 0
        lines = [json.loads(line) for line in text.splitlines()]
        assert [(t["producer_id"], t["first_offset"], t["marker_offset"], t["status"])
                for t in lines[:-1]] == [(t.producer_id, t.first_offset, t.marker_offset, t.status)
                                          for t in exp.transactions]
        assert lines[-1]["last_stable_offset"] == exp.lso
        assert lines[-1]["open"] == n_open

        if len(scenario.starts) == 1 and not scenario.index_entries:
            [single] = kbatch.transactions(os.path.join(path, "%020d.log" % scenario.names[0]))
            assert report_rows(single) == exp.transactions
            assert single.last_stable_offset == exp.lso


# --- hand-written cases -------------------------------------------------------

P, Q = 1001, 2002


def txn_data(base, values, pid=P, epoch=0, transactional=True):
    offsets = list(range(base, base + len(values)))
    return B("data", base, offsets[-1], pid, epoch, 0, transactional, offsets, list(values))


def plain(base, values, pid=-1):
    return txn_data(base, values, pid=pid, epoch=-1 if pid == -1 else 0, transactional=False)


def marker(base, ctype, pid=P, epoch=0, coordinator_epoch=5):
    return B("marker", base, base, pid, epoch, -1, True, control_type=ctype,
             coordinator_epoch=coordinator_epoch)


def other_control(base, ctype, pid=-1, transactional=False):
    return B("ctrl", base, base, pid, 0 if pid != -1 else -1, -1, transactional,
             control_type=ctype)


def layout(batches, starts=(0,), txn_index=None):
    starts = list(starts)
    return Scenario(batches, starts, [batches[s].base_offset for s in starts],
                    txn_index or [[] for _ in starts], set())


def read_rc(scenario):
    with partition_dir(scenario) as (_, path):
        got = kbatch.open_log(path).read(isolation=RC)
        report = kbatch.transactions(path)[0]
    return got, report


def test_commit_kept_abort_dropped_and_no_control_records_as_data():
    batches = [txn_data(0, [b"a", b"b"]), plain(2, [b"p"]), marker(3, COMMIT),
               txn_data(4, [b"x"], pid=Q), marker(5, ABORT, pid=Q), plain(6, [b"q"])]
    got, report = read_rc(layout(batches))
    assert offsets_values(got) == ([0, 1, 2, 6], [b"a", b"b", b"p", b"q"])
    assert got.last_stable_offset == 7
    uncommitted = kbatch.read_segment(layout(batches).segment_bytes(0))
    assert uncommitted.offset.tolist() == [0, 1, 2, 4, 6]
    assert [(t.status, t.records) for t in report.transactions] == [("COMMIT", 2), ("ABORT", 1)]


def test_open_transaction_hides_everything_from_its_first_offset():
    batches = [plain(0, [b"p0"]), txn_data(1, [b"t1"], pid=Q), marker(2, COMMIT, pid=Q),
               txn_data(3, [b"open"]), plain(4, [b"hidden"]), txn_data(5, [b"t5"], pid=Q),
               marker(6, COMMIT, pid=Q)]
    got, report = read_rc(layout(batches, starts=(0, 4)))
    assert offsets_values(got) == ([0, 1], [b"p0", b"t1"])
    assert got.last_stable_offset == 3
    assert report.last_stable_offset == 3 and report.log_end_offset == 7
    assert [(t.producer_id, t.status, t.marker_offset) for t in report.open] == [(P, "OPEN", None)]


def test_epoch_bump_marker_still_ends_the_transaction():
    batches = [txn_data(0, [b"e0"], epoch=3), marker(1, ABORT, epoch=4),
               txn_data(2, [b"e4"], epoch=4), marker(3, COMMIT, epoch=6), plain(4, [b"p"])]
    got, report = read_rc(layout(batches, starts=(0, 1)))
    assert offsets_values(got) == ([2, 4], [b"e4", b"p"])
    assert got.last_stable_offset == 5
    assert [(t.producer_epoch, t.status) for t in report.transactions] == [(3, "ABORT"), (4, "COMMIT")]


@pytest.mark.parametrize("ctype", [2, 3, 4, 5, 6, 7, 17])
@pytest.mark.parametrize("transactional", [True, False])
def test_unknown_and_kraft_control_types_end_nothing(ctype, transactional):
    batches = [txn_data(0, [b"t"]), other_control(1, ctype, pid=P if transactional else -1,
                                                   transactional=transactional),
               plain(2, [b"after"]), marker(3, ABORT), plain(4, [b"p"])]
    got, report = read_rc(layout(batches))
    assert offsets_values(got) == ([2, 4], [b"after", b"p"])      # the ABORT decides
    open_only = layout(batches[:3])
    got, report = read_rc(open_only)
    assert got.offset.tolist() == [] and got.last_stable_offset == 0
    assert [t.status for t in report.transactions] == ["OPEN"]


def test_marker_in_a_later_segment():
    batches = [txn_data(0, [b"c"]), txn_data(1, [b"a"], pid=Q), plain(2, [b"p"]),
               marker(3, COMMIT), marker(4, ABORT, pid=Q)]
    scenario = layout(batches, starts=(0, 3, 4))
    got, _ = read_rc(scenario)
    assert offsets_values(got) == ([0, 2], [b"c", b"p"])
    # the first segment alone: both transactions look open
    alone = kbatch.read_segment(scenario.segment_bytes(0), isolation=RC)
    assert alone.offset.tolist() == [] and alone.last_stable_offset == 0


def test_txnindex_aborts_data_whose_marker_is_missing():
    # P's ABORT marker at offset 2 was cleaned away; .txnindex (in the
    # segment that held it) still lists the aborted transaction
    batches = [txn_data(0, [b"x", b"y"]), plain(3, [b"p"]), txn_data(4, [b"c"]),
               marker(5, COMMIT)]
    scenario = Scenario(batches, [0, 1], [0, 2], [[], [(P, 0, 2, 3)]], set())
    got, report = read_rc(scenario)
    assert offsets_values(got) == ([3, 4], [b"p", b"c"])
    assert got.last_stable_offset == 6
    # without the .txnindex the same bytes commit everything
    merged = b"".join(b.encode() for b in batches)
    assert kbatch.read_segment(merged, isolation=RC).offset.tolist() == [0, 1, 3, 4]


def test_empty_transactions_in_report():
    batches = [marker(0, COMMIT, epoch=2, coordinator_epoch=9), marker(1, ABORT, pid=Q),
               plain(2, [b"p"])]
    got, report = read_rc(layout(batches))
    assert offsets_values(got) == ([2], [b"p"])
    assert report_rows(report) == [Txn(P, 2, 0, 0, 0, "COMMIT", 0, 0, 9),
                                   Txn(Q, 0, 1, 1, 1, "ABORT", 0, 0, 5)]


def test_cli_marks_open_transactions():
    batches = [txn_data(0, [b"t"], pid=Q), marker(1, COMMIT, pid=Q), txn_data(2, [b"o"]),
               plain(3, [b"p"])]
    with partition_dir(layout(batches)) as (_, path):
        code, text = run_cli(["txn", path])
        assert code == 0
        [hanging] = [line for line in text.splitlines() if "open (hanging)" in line]
        assert str(P) in hanging and "OPEN" in hanging
        assert "LSO 2," in text
        code, text = run_cli(["txn", "--format", "json", path])
        assert code == 0
        rows = [json.loads(line) for line in text.splitlines()]
        assert [r["status"] for r in rows[:-1]] == ["COMMIT", "OPEN"]
        assert rows[-1]["open"] == 1 and rows[-1]["last_stable_offset"] == 2


@pytest.mark.parametrize("bad", ["READ_COMMITTED", "read-committed", "committed", "", None])
def test_invalid_isolation_raises(bad):
    batches = [txn_data(0, [b"t"]), marker(1, COMMIT)]
    scenario = layout(batches)
    buf = scenario.segment_bytes(0)
    with pytest.raises(ValueError):
        kbatch.read_segment(buf, isolation=bad)
    with pytest.raises(ValueError):
        list(kbatch.iter_segment(buf, isolation=bad))
    with partition_dir(scenario) as (root, path):
        log = kbatch.open_log(path)
        with pytest.raises(ValueError):
            log.read(isolation=bad)
        with pytest.raises(ValueError):
            list(log.iter(isolation=bad))
        with pytest.raises(ValueError):
            log.read(0, 1, isolation=bad)
        with pytest.raises(ValueError):
            kbatch.open_log_dir(root).read(isolation=bad)


def test_partitions_of_a_broker_directory_are_resolved_separately():
    # the same producer id in two partitions: committed in one, aborted and
    # then open in the other (whose last segment is an empty active segment
    # and whose .txnindex ends with a partial entry)
    with tempfile.TemporaryDirectory() as root:
        layout([txn_data(0, [b"a"]), marker(1, COMMIT), plain(2, [b"p"])]).write(
            os.path.join(root, "t-0"))
        other = os.path.join(root, "t-1")
        layout([txn_data(0, [b"b"]), marker(1, ABORT), txn_data(2, [b"open"]),
                plain(3, [b"q"])]).write(other)
        open(os.path.join(other, "%020d.log" % 4), "wb").close()
        with open(os.path.join(other, "%020d.txnindex" % 0), "wb") as f:
            f.write(struct.pack(">hqqqq", 0, P, 0, 1, 2) + bytes(20))
        got = kbatch.open_log_dir(root).read(isolation=RC)
        assert offsets_values(got[("t", 0)]) == ([0, 2], [b"a", b"p"])
        assert got[("t", 0)].last_stable_offset == 3
        assert offsets_values(got[("t", 1)]) == ([], [])
        assert got[("t", 1)].last_stable_offset == 2
        assert kbatch.open_log(other).aborted_transactions().first_offset.tolist() == [0]
        reports = sorted(kbatch.transactions(root), key=lambda r: r.source)
        assert [(r.last_stable_offset, r.log_end_offset) for r in reports] == [(3, 3), (2, 4)]
        assert [[t.status for t in r.transactions] for r in reports] == \
            [["COMMIT"], ["ABORT", "OPEN"]]


# --- missing markers in the report, decode options and the cached state -------

def missing_marker_layout(*after):
    """P's transaction at offset 0 was aborted; its ABORT marker (offset 1) is
    gone from the log, the .txnindex entry (P, 0, 1) remains."""
    batches = [txn_data(0, [b"aborted"]), *after]
    return Scenario(batches, [0], [0], [[(P, 0, 1, 2)]], set())


def test_report_does_not_call_a_txnindex_aborted_transaction_open():
    scenario = missing_marker_layout(plain(2, [b"p"]))
    got, report = read_rc(scenario)
    assert offsets_values(got) == ([2], [b"p"]) and got.last_stable_offset == 3  # the reader
    assert report.last_stable_offset == 3
    assert [(t.first_offset, t.status, t.marker_offset) for t in report.transactions] == \
        [(0, "ABORT", 1)]
    with partition_dir(scenario) as (_, path):
        code, text = run_cli(["txn", path])
    assert code == 0 and "open (hanging)" not in text and "open transaction(s)" not in text


def test_report_separates_a_txnindex_aborted_transaction_from_the_next_one():
    scenario = missing_marker_layout(txn_data(2, [b"committed"]), marker(3, COMMIT))
    got, report = read_rc(scenario)
    assert offsets_values(got) == ([2], [b"committed"])   # the reader is right
    assert [(t.first_offset, t.marker_offset, t.status, t.records)
            for t in report.transactions] == [(0, 1, "ABORT", 1), (2, 3, "COMMIT", 1)]


def test_read_committed_does_not_depend_on_earlier_reads_options():
    corrupt = bytearray(marker(1, COMMIT).encode())
    corrupt[40] ^= 1          # maxTimestamp: the record still decodes, the CRC is wrong
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "t-0")
        os.makedirs(path)
        with open(os.path.join(path, "%020d.log" % 0), "wb") as f:
            f.write(txn_data(0, [b"t"]).encode() + bytes(corrupt) + plain(2, [b"p"]).encode())
        # stopping at the corrupt marker: P's transaction is open from offset 0
        stopped = (([], []), 0)
        # not checking CRCs: the marker commits it
        unchecked = (([0, 2], [b"t", b"p"]), 3)

        def result(records):
            return offsets_values(records), records.last_stable_offset

        assert result(kbatch.open_log(path).read(isolation=RC, on_corrupt="stop")) == stopped
        assert result(kbatch.open_log(path).read(isolation=RC, validate_crc=False)) == unchecked
        log = kbatch.open_log(path)    # one PartitionLog, options alternating
        for _ in range(2):
            assert result(log.read(isolation=RC, validate_crc=False)) == unchecked
            assert result(log.read(isolation=RC, on_corrupt="stop")) == stopped
            assert result(kbatch.Records.concat(list(
                log.iter(isolation=RC, on_corrupt="stop", chunk_records=1)))) == stopped


# --- read_segment's one-pass read_committed against decode-then-filter ------------

def _mixed_transactional_segment(seed: int) -> bytes:
    import io
    from kbatch.lib.writer import ABORT, COMMIT, SegmentWriter
    rng = random.Random(seed)
    out = io.BytesIO()
    with SegmentWriter(out, batch_records=rng.choice([1, 3, 8]), codec=rng.choice(
            ["none", "none", "gzip", "lz4", "zstd", "snappy"])) as w:
        open_txn = set()
        for k in range(rng.randint(5, 40)):
            pid = rng.choice([-1, 1, 2, 3])
            recs = [(b"k%d" % i, None if i % 4 == 0 else b"v%d-%d" % (k, i), 1000 + k)
                    for i in range(rng.randint(1, 6))]
            if pid < 0:
                w.append(recs)
            else:
                w.append(recs, producer_id=pid, producer_epoch=0, transactional=True)
                open_txn.add(pid)
            if open_txn and rng.random() < 0.3:
                done = rng.choice(sorted(open_txn))
                w.marker(ABORT if rng.random() < 0.4 else COMMIT, producer_id=done)
                open_txn.discard(done)
    return out.getvalue()


def _outcome(fn):
    try:
        rec = fn()
    except kbatch.CorruptRecordError as exc:
        return "error", str(exc)
    return "ok", (rec.offset.tolist(), rec.key.to_pylist(), rec.value.to_pylist(),
                  rec.batch.tolist(), len(rec.batches), rec.control.offset.tolist(),
                  rec.last_stable_offset, None if rec.end is None else
                  (rec.end.valid_bytes, rec.end.reason))


@pytest.mark.parametrize("seed", range(40))
def test_one_pass_read_committed_equals_decode_then_filter(seed):
    """read_segment leaves aborted records out while decoding (after a cheap
    pass over headers and markers); on clean and damaged bytes alike it must
    equal decoding everything and filtering afterwards."""
    from kbatch.lib.txn import apply_isolation
    buf = bytearray(_mixed_transactional_segment(seed))
    rng = random.Random(f"damage-{seed}")
    variants = [bytes(buf)]
    for _ in range(3):
        damaged = bytearray(buf)
        damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        variants.append(bytes(damaged))
    variants.append(bytes(buf[:rng.randrange(len(buf))]))
    for data in variants:
        for opts in ({}, {"on_corrupt": "stop"}, {"validate_crc": False},
                     {"validate_crc": "report"}, {"include_control": True, "strict": True}):
            fast = _outcome(lambda: kbatch.read_segment(data, isolation="read_committed", **opts))
            slow = _outcome(lambda: apply_isolation(kbatch.read_segment(data, **opts),
                                                    "read_committed"))
            assert fast == slow, (seed, opts)


@pytest.mark.parametrize("damage", ["record length", "key length", "header count"])
def test_damage_inside_an_aborted_batch_is_found_as_in_read_uncommitted(damage):
    """read_committed leaves an aborted batch's records out but still walks
    and checks each of them: a record broken inside it (its CRC made
    right again) fails both isolations alike."""
    from kbatch.lib.writer import ABORT as W_ABORT, COMMIT as W_COMMIT, SegmentWriter

    from .kafka_ref import HEADER_V2, fix_crc
    out = io.BytesIO()
    with SegmentWriter(out, batch_records=4) as w:
        w.append([(b"a%d" % i, b"aborted", 1000 + i) for i in range(4)],
                 producer_id=7, producer_epoch=0, transactional=True)
        w.marker(W_ABORT, producer_id=7)
        w.append([(b"c%d" % i, b"committed", 2000 + i) for i in range(4)],
                 producer_id=8, producer_epoch=0, transactional=True)
        w.marker(W_COMMIT, producer_id=8)
    buf = bytearray(out.getvalue())
    first_batch_end = 12 + struct.unpack_from(">i", buf, 8)[0]
    clean = kbatch.read_segment(bytes(buf), isolation="read_committed")
    assert clean.key.to_pylist() == [b"c0", b"c1", b"c2", b"c3"]
    # the first record of the aborted batch: length varint, attributes,
    # timestamp delta, offset delta, key length, key, value length, value,
    # header count (all one-byte varints here)
    rec = HEADER_V2
    field = {"record length": rec, "key length": rec + 4, "header count": rec + 15}[damage]
    buf[field] = 0x7E           # a large positive zig-zag varint: past the record
    fixed = bytearray(buf[:first_batch_end])
    fix_crc(fixed)
    buf[:first_batch_end] = fixed
    for opts in ({}, {"validate_crc": False}):
        with pytest.raises(kbatch.CorruptRecordError) as uncommitted:
            kbatch.read_segment(bytes(buf), **opts)
        with pytest.raises(kbatch.CorruptRecordError) as committed:
            kbatch.read_segment(bytes(buf), isolation="read_committed", **opts)
        assert str(committed.value) == str(uncommitted.value)
        with pytest.raises(kbatch.CorruptRecordError):
            list(kbatch.iter_segment(bytes(buf), isolation="read_committed", **opts))
