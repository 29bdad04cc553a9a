"""Transactions v2 (KIP-890) logs: read_committed, ``kbatch.transactions``
and ``kbatch txn``, from the user's side.

The rules tested, from KIP-890 ("Transactions Server-Side Defense") and how
Kafka implements it (apache/kafka trunk d79bd502: TransactionMetadata
prepareAbortOrCommit/prepareComplete, ProducerAppendInfo.checkProducerEpoch
and appendEndTxnMarker, TransactionLog.valueToBytes):

1. TV2 bumps the producer epoch at every transaction end: the coordinator
   writes the COMMIT/ABORT marker with epoch = (epoch of the transaction's
   data batches) + 1, and the producer's next transaction writes its data
   with that epoch. A TV1 (transaction version 0/1) marker carries the data
   epoch, except the ABORT of a transaction the coordinator fenced (epoch +
   1; the next producer instance then starts one higher).
2. A marker ends its producer id's open transaction whatever its epoch (the
   leader accepts a TV2 marker only above the producer's current epoch): so
   for read_committed, markers are matched by producer id alone.
3. A TV2 marker may be written twice: a retry (lost acknowledgement, or a
   new coordinator resending the markers of a PrepareCommit/PrepareAbort)
   is accepted when its epoch equals the producer's current epoch and no
   transaction is open (KAFKA-19999). It ends nothing: a second COMMIT with
   no open transaction is a no-op (no data decided, no .txnindex entry, the
   LSO unchanged).
4. When the epoch is exhausted (data at Short.MAX_VALUE - 1 = 32766) the
   marker is written at 32767 under the old producer id; the coordinator
   records NextProducerId in the PrepareCommit/PrepareAbort record and moves
   the transactional id to that producer id at epoch 0 in the Complete
   record (PreviousProducerId = the old id). In the data log it is simply a
   new producer id.

What ``kbatch txn`` adds: per producer id the protocol its markers follow
(TV1: marker epoch == data epoch; TV2: data epoch + 1; "unknown" with no
marker ending data, see kbatch/lib/txn_protocol.py for "mixed" and the
fencing aborts), retried markers flagged instead of counted as (empty)
transactions, and from ``__transaction_state`` the producer ids of one
transactional id linked (the exhausted id completes, it does not hang in
PrepareCommit).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbatch
import kbatch.tools.cli
from kbatch.internal import producer_ids, transaction_log
from kbatch.internal.encode import coordinator_record

from .test_txn import check_partition, partition_dir, report_rows
from .txn_model import model
from .txn_v2_model import expected_protocol, tv2_scenarios

RC = "read_committed"
A, B = 1000, 1001
ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = 1, 2, 3, 4, 5


def tv2_partition(path, *, retry=True):
    """The minimal TV2 log: producer A commits (marker epoch + 1), its COMMIT
    retried, aborts, commits at the exhausted epoch; the transactional id
    goes on as producer B, which commits and leaves one transaction open.

        0 A data e5 | 1 COMMIT e6 | 2 COMMIT e6 (retry) | 3 A data e6 | 4 ABORT e7
        5 A data e32766 | 6 COMMIT e32767 | 7 B data e0 | 8 COMMIT e1 | 9 B data e1 (open)
    """
    with kbatch.LogWriter(path) as w:
        w.append([(b"k", b"c1", 1)], producer_id=A, producer_epoch=5, transactional=True)  # 0
        w.end_transaction(A, commit=True, producer_epoch=6, timestamp=2)                 # 1
        if retry:
            w.end_transaction(A, commit=True, producer_epoch=6, timestamp=3)             # 2
        w.append([(b"k", b"a1", 4)], producer_id=A, producer_epoch=6, transactional=True)
        w.end_transaction(A, commit=False, producer_epoch=7, timestamp=5)
        w.append([(b"k", b"x", 6)], producer_id=A, producer_epoch=32766, transactional=True)
        w.end_transaction(A, commit=True, producer_epoch=32767, timestamp=7)
        w.append([(b"k", b"y", 8)], producer_id=B, producer_epoch=0, transactional=True)
        w.end_transaction(B, commit=True, producer_epoch=1, timestamp=9)
        w.append([(b"k", b"open", 10)], producer_id=B, producer_epoch=1, transactional=True)


def txn_state_record(pid, epoch, status, prev, nxt=-1, ts=0, partitions=True):
    parts = [{"topic": "orders", "partition_ids": [0]}] if partitions else []
    return coordinator_record("TransactionLogKey", 0, {"transactional_id": "t"},
                              "TransactionLogValue", 1, {
        "producer_id": pid, "previous_producer_id": prev, "next_producer_id": nxt,
        "producer_epoch": epoch, "transaction_timeout_ms": 60000,
        "transaction_status": status, "transaction_partitions": parts,
        "transaction_last_update_timestamp_ms": ts, "transaction_start_timestamp_ms": ts,
        "client_transaction_version": 2})


def tv2_transaction_state(path):
    """What the coordinator wrote for transactional id "t" (rule 4)."""
    recs = [txn_state_record(A, 32766, ONGOING, A, ts=6),
            txn_state_record(A, 32767, PREPARE_COMMIT, A, nxt=B, ts=7),
            txn_state_record(B, 0, COMPLETE_COMMIT, A, ts=7, partitions=False),
            txn_state_record(B, 0, ONGOING, B, ts=8),
            txn_state_record(B, 1, PREPARE_COMMIT, B, ts=9),
            txn_state_record(B, 1, COMPLETE_COMMIT, B, ts=9, partitions=False),
            txn_state_record(B, 1, ONGOING, B, ts=10)]
    kbatch.write_log(path, [(k, v, i) for i, (k, v) in enumerate(recs)])


# --- read_committed -------------------------------------------------------------

def test_read_committed_on_a_tv2_log(tmp_path):
    tv2_partition(tmp_path / "orders-0")
    log = kbatch.open_log(tmp_path / "orders-0")
    got = log.read(isolation=RC)
    # rule 1/2: the epoch + 1 markers decide; rule 4: B is a producer of its own
    assert (got.offset.tolist(), got.value.to_pylist()) == ([0, 5, 7], [b"c1", b"x", b"y"])
    assert got.last_stable_offset == 9             # B's open transaction
    assert log.transaction_state().last_stable_offset == 9
    chunks = list(log.iter(isolation=RC, chunk_records=1))
    assert kbatch.Records.concat(chunks).offset.tolist() == [0, 5, 7]


def test_a_retried_marker_changes_nothing(tmp_path):
    # rule 3: the same log without the retried COMMIT reads the same (offsets shift by one)
    tv2_partition(tmp_path / "with-0")
    tv2_partition(tmp_path / "without-0", retry=False)
    with_retry = kbatch.open_log(tmp_path / "with-0").read(isolation=RC)
    without = kbatch.open_log(tmp_path / "without-0").read(isolation=RC)
    assert with_retry.value.to_pylist() == without.value.to_pylist() == [b"c1", b"x", b"y"]
    assert with_retry.last_stable_offset == without.last_stable_offset + 1
    # and no .txnindex entry for it: only A's real abort
    aborted = kbatch.open_log(tmp_path / "with-0").aborted_transactions()
    assert list(zip(aborted.producer_id.tolist(), aborted.first_offset.tolist(),
                    aborted.last_offset.tolist())) == [(A, 3, 4)]


def test_a_retried_abort_after_the_transaction_is_a_no_op(tmp_path):
    with kbatch.LogWriter(tmp_path / "p-0") as w:
        w.append([(b"k", b"a", 1)], producer_id=A, producer_epoch=3, transactional=True)
        w.end_transaction(A, commit=False, producer_epoch=4)
        w.append([(b"k", b"plain", 2)])
        w.end_transaction(A, commit=False, producer_epoch=4)      # retried
        w.append([(b"k", b"c", 3)], producer_id=A, producer_epoch=4, transactional=True)
        w.end_transaction(A, commit=True, producer_epoch=5)
    got = kbatch.open_log(tmp_path / "p-0").read(isolation=RC)
    assert got.value.to_pylist() == [b"plain", b"c"] and got.last_stable_offset == 6
    [rep] = kbatch.transactions(tmp_path / "p-0")
    assert [(t.status, t.records, t.retry_of) for t in rep.transactions] == [
        ("ABORT", 1, None), ("ABORT", 0, 1), ("COMMIT", 1, None)]
    assert rep.producers[A].protocol == "TV2" and rep.producers[A].retried == 1


@given(tv2_scenarios(), st.data())
def test_generated_tv1_and_tv2_logs_match_the_model(case, data):
    scenario, truth = case
    # every read path against the forward-walk model (markers by producer id)
    check_partition(scenario, data)
    exp = model(scenario.written)
    with partition_dir(scenario) as (_, path):
        [rep] = kbatch.transactions(path)
    assert report_rows(rep) == exp.transactions
    got_retries = {t.marker_offset: t.retry_of for t in rep.transactions
                   if t.retry_of is not None}
    # every retry of a marker that ended data is flagged, nothing else is
    assert got_retries == truth.retries
    for t in rep.transactions:
        if t.marker_offset in truth.retries_of_empty:     # conservative: an empty one
            assert t.retry_of is None and t.records == 0
    for pid, p in rep.producers.items():
        assert p.protocol == expected_protocol(pid, truth), (pid, truth)
        assert p.epoch_exhausted == (pid in truth.exhausted)
        assert p.retried == sum(1 for t in rep.transactions
                                if t.producer_id == pid and t.retry_of is not None)
        assert p.markers == len(truth.ended_data.get(pid, []))


# --- kbatch.transactions and kbatch txn -------------------------------------------

def test_report_names_the_protocol_and_the_retried_marker(tmp_path):
    tv2_partition(tmp_path / "orders-0")
    [rep] = kbatch.transactions(tmp_path / "orders-0")
    rows = [(t.producer_id, t.producer_epoch, t.marker_epoch, t.status, t.records, t.retry_of)
            for t in rep.transactions]
    assert rows == [(A, 5, 6, "COMMIT", 1, None), (A, 6, 6, "COMMIT", 0, 1),
                    (A, 6, 7, "ABORT", 1, None), (A, 32766, 32767, "COMMIT", 1, None),
                    (B, 0, 1, "COMMIT", 1, None), (B, 1, None, "OPEN", 1, None)]
    assert [t.marker_offset for t in rep.retried] == [2]
    a, b = rep.producers[A], rep.producers[B]
    assert (a.protocol, a.markers, a.epoch_plus_one, a.retried, a.epoch_exhausted) == \
        ("TV2", 3, 3, 1, True)
    assert (b.protocol, b.markers, b.epoch_exhausted) == ("TV2", 1, False)


def test_tv1_and_mixed_producers(tmp_path):
    with kbatch.LogWriter(tmp_path / "p-0") as w:
        # TV1: markers at the data epoch; a fenced transaction aborted at + 1
        w.append([(b"k", b"1", 1)], producer_id=A, producer_epoch=2, transactional=True)
        w.end_transaction(A, commit=True, producer_epoch=2)
        w.end_transaction(A, commit=True, producer_epoch=2)    # TV1: an empty transaction
        w.append([(b"k", b"2", 1)], producer_id=A, producer_epoch=2, transactional=True)
        w.end_transaction(A, commit=False, producer_epoch=3)   # fencing abort
        # B: TV1, then TV2 under the same producer id
        w.append([(b"k", b"3", 1)], producer_id=B, producer_epoch=0, transactional=True)
        w.end_transaction(B, commit=True, producer_epoch=0)
        w.append([(b"k", b"4", 1)], producer_id=B, producer_epoch=1, transactional=True)
        w.end_transaction(B, commit=True, producer_epoch=2)
        # C: only an aborted transaction at + 1: TV2 or a TV1 fencing abort
        w.append([(b"k", b"5", 1)], producer_id=7, producer_epoch=0, transactional=True)
        w.end_transaction(7, commit=False, producer_epoch=1)
        # D: no marker yet
        w.append([(b"k", b"6", 1)], producer_id=8, producer_epoch=0, transactional=True)
    [rep] = kbatch.transactions(tmp_path / "p-0")
    assert {pid: p.protocol for pid, p in rep.producers.items()} == {
        A: "TV1", B: "mixed", 7: "unknown", 8: "unknown"}
    assert not rep.retried                  # a TV1 empty transaction stays one
    assert rep.producers[A].empty == 1 and rep.producers[A].epoch_plus_one == 1
    got = kbatch.open_log(tmp_path / "p-0").read(isolation=RC)
    assert got.value.to_pylist() == [b"1", b"3", b"4"] and got.last_stable_offset == 11


def test_cli_txn_text(tmp_path, capfd):
    tv2_partition(tmp_path / "orders-0")
    tv2_transaction_state(tmp_path / "__transaction_state-0")
    code = kbatch.tools.cli.main(["txn", str(tmp_path)])
    out = capfd.readouterr().out
    assert code == 0
    assert "orders-0: 5 transactions (+1 retried marker), LSO 9, log end offset 10" in out
    assert out.count("<-- retried marker (repeats offset 1), no transaction") == 1
    assert out.count("<-- open (hanging)") == 1
    prod = [line.split() for line in out.splitlines()
            if line.strip().startswith(("1000 TV", "1001 TV"))]
    assert prod == [["1000", "TV2", "3", "0", "3", "1", "(epoch", "exhausted:", "the",
                     "transactional", "id", "moved", "to", "a", "new", "producer", "id)"],
                    ["1001", "TV2", "1", "0", "1", "0"]]
    # __transaction_state: A completed and moved on, it does not hang in PrepareCommit
    lines = {line.split()[1]: line for line in out.splitlines()
             if line.startswith("  producer ")}
    assert "CompleteCommit" in lines["1000"] and "PrepareCommit" not in lines["1000"]
    assert "-> producer 1001 (epoch exhausted)" in lines["1000"]
    assert "Ongoing" in lines["1001"] and "(after producer 1000)" in lines["1001"]
    assert "client transaction version 2" in lines["1001"]
    assert "  t: producer ids 1000 -> 1001" in out


def test_cli_txn_json(tmp_path, capfd):
    tv2_partition(tmp_path / "orders-0")
    tv2_transaction_state(tmp_path / "__transaction_state-0")
    code = kbatch.tools.cli.main(["txn", "--format", "json", str(tmp_path)])
    rows = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert code == 0
    orders = [r for r in rows if r.get("source", "").endswith("orders-0")]
    txns, summary = orders[:-1], orders[-1]
    assert [(t["marker_offset"], t["marker_epoch"], t["retry_of"]) for t in txns] == [
        (1, 6, None), (2, 6, 1), (4, 7, None), (6, 32767, None), (8, 1, None),
        (None, None, None)]
    assert summary["retried_markers"] == 1 and summary["open"] == 1
    assert [(p["producer_id"], p["protocol"], p["epoch_exhausted"])
            for p in summary["producers"]] == [(A, "TV2", True), (B, "TV2", False)]
    ids = {r["producer_id"]: r for r in rows if "coordinator_state" in r}
    assert (ids[A]["coordinator_state"], ids[A]["next_producer_id"],
            ids[A]["producer_id_change"]) == ("CompleteCommit", B, "epoch exhausted")
    assert (ids[B]["coordinator_state"], ids[B]["previous_producer_id"],
            ids[B]["client_transaction_version"]) == ("Ongoing", A, 2)
    assert [r for r in rows if "producer_ids" in r] == [
        {"transactional_id": "t", "producer_ids": [A, B]}]


def test_cli_txn_exit_codes(tmp_path, capfd):
    # an open transaction is reported, not an error; a missing path is one
    tv2_partition(tmp_path / "orders-0")
    assert kbatch.tools.cli.main(["txn", str(tmp_path / "orders-0")]) == 0
    capfd.readouterr()
    code = kbatch.tools.cli.main(["txn", str(tmp_path / "nope")])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == f"kbatch txn: {tmp_path / 'nope'}: no such file or directory"


# --- __transaction_state: producer id links ----------------------------------------

def test_producer_id_links_from_transaction_state(tmp_path):
    tv2_transaction_state(tmp_path / "__transaction_state-0")
    rows = transaction_log(tmp_path).to_pylist()
    assert [(r["producer_id"], r["producer_epoch"], r["state"], r["previous_producer_id"],
             r["next_producer_id"], r["next_producer_epoch"], r["client_transaction_version"])
            for r in rows[:3]] == [
        (A, 32766, "Ongoing", A, -1, -1, 2), (A, 32767, "PrepareCommit", A, B, -1, 2),
        (B, 0, "CompleteCommit", A, -1, -1, 2)]
    ids = producer_ids(transaction_log(tmp_path))
    assert ids.chains == {"t": [A, B]}
    a, b = ids.states[A], ids.states[B]
    assert (a.state, a.producer_epoch, a.next_producer_id, a.change) == \
        ("CompleteCommit", 32767, B, "epoch exhausted")
    assert (b.state, b.producer_epoch, b.previous_producer_id, b.next_producer_id) == \
        ("Ongoing", 1, A, None)


def test_producer_id_links_after_compaction(tmp_path):
    # only the latest record is left: PreviousProducerId still names the old id
    k, v = txn_state_record(B, 0, COMPLETE_COMMIT, A, ts=7, partitions=False)
    kbatch.write_log(tmp_path / "__transaction_state-0", [(k, v, 1)])
    ids = producer_ids(transaction_log(tmp_path))
    assert ids.chains == {"t": [A, B]}
    assert ids.states[A].state is None and ids.states[A].next_producer_id == B
    assert ids.states[A].change == "new producer id"
    assert ids.states[B].previous_producer_id == A


@pytest.mark.parametrize("exhausted", [True, False])
def test_producer_id_rotation_at_init(tmp_path, exhausted):
    # InitProducerId with an exhausted epoch: an Empty record under the new id
    epoch = 32766 if exhausted else 3
    recs = [txn_state_record(A, epoch, COMPLETE_ABORT, A, partitions=False, ts=1),
            txn_state_record(B, 0, 0, A, partitions=False, ts=2)]
    kbatch.write_log(tmp_path / "__transaction_state-0", [(k, v, i) for i, (k, v) in
                                                          enumerate(recs)])
    ids = producer_ids(transaction_log(tmp_path))
    assert ids.chains == {"t": [A, B]}
    assert ids.states[A].state == "CompleteAbort"
    assert ids.states[A].change == ("epoch exhausted" if exhausted else "new producer id")
