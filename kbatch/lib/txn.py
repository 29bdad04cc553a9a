"""Transactions: read_committed filtering and the transaction report.

What a read_committed consumer sees (SPEC.md section 3), from the log alone:

- A transactional batch of producer P belongs to the transaction that P's
  next marker ends: the first COMMIT or ABORT control record of P at a
  higher offset. COMMIT keeps the batch, ABORT drops it. Producers are told
  apart by producer id alone: a marker written after an epoch bump (the
  coordinator fencing an old producer) still ends the transaction.
- A transactional batch with no marker after it belongs to an open
  transaction. The last stable offset (LSO) is the first offset of the
  earliest open transaction (the log end offset when none is open), and
  read_committed returns nothing at or after it, transactional or not.
  Where the high watermark is known (a consumer's view), a transaction
  whose marker is at or above it is not stable yet either (the broker's
  ProducerStateManager keeps it among the unreplicated transactions until
  the high watermark passes its marker), and the LSO is never above the
  high watermark (UnifiedLog.lastStableOffset).
- Non-transactional batches always pass; control records are never data.
  Control records other than ABORT/COMMIT (KRaft types, unknown types) end
  nothing.
- A ``.txnindex`` entry (producer, first offset, last offset) aborts the
  producer's transactional batches in that range too, so a partition whose
  markers were cleaned away still filters correctly.
- Transactions v2 (KIP-890) need nothing more: its markers carry the data
  epoch + 1 (matched by producer id, they end the transaction all the
  same), a retried marker written twice ends no data the second time, and
  a producer id moving on after epoch exhaustion is a new producer.
  ``kbatch.lib.txn_protocol`` tells the report which protocol a producer's
  markers follow and which markers are retries.

The state is computed once per log from the batch table and the control
records (``TxnState``); filtering a chunk is a few numpy operations over its
batch table, whatever the number of records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kbatch.lib.index import TxnIndex
from kbatch.lib.records import BatchTable, ControlRecords, Records
from kbatch.lib.txn_protocol import MarkerEnd, ProducerProtocol, classify
from kbatch.wire import ControlType

ABORT, COMMIT = ControlType.ABORT, ControlType.COMMIT
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def check_isolation(isolation: str) -> str:
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, not {isolation!r}")
    return isolation


@dataclass
class TxnState:
    """Markers per producer, aborted ranges from ``.txnindex``, and the LSO.

    ``markers[pid] = (offsets, types)``: that producer's ABORT/COMMIT control
    records in offset order.
    """

    markers: dict[int, tuple[np.ndarray, np.ndarray]]
    aborted_ranges: dict[int, tuple[np.ndarray, np.ndarray]]
    last_stable_offset: int
    log_end_offset: int
    # the last verdict (batch table, verdicts): build, dropped and filter
    # ask for the same table's in turn
    _verdicts: tuple | None = field(default=None, repr=False, compare=False)
    # set by ``dropped``: every kept batch of that table is magic 2 and ends
    # below the LSO, so no record of it is at or past the LSO (the record
    # loop refuses a record offset past its batch's last offset)
    _kept_below_lso: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def build(cls, batches: BatchTable, control: ControlRecords,
              txn_index: TxnIndex | None = None, *, active_base: int = 0,
              high_watermark: int | None = None) -> "TxnState":
        """From a whole log's batch table and control records.

        ``active_base``: the base offset of the log's last segment (the active
        one): the log end offset is never below it, so a log whose last
        segment holds no batch ends at that base offset, not at 0.
        ``high_watermark``: where known, a transaction whose marker is at or
        above it is unstable too, and the LSO is at most the high watermark.
        """
        is_marker = (control.type == ABORT) | (control.type == COMMIT)
        if len(control):
            is_marker &= batches.is_transactional[control.batch]
        markers = {pid: (offs, types) for pid, (offs, types) in _by_producer(
            control.producer_id[is_marker], control.offset[is_marker],
            control.type[is_marker])}
        aborted = {}
        if txn_index is not None and len(txn_index):
            for pid, (firsts, lasts) in _by_producer(
                    txn_index.producer_id, txn_index.first_offset, txn_index.last_offset):
                aborted[pid] = (firsts, lasts)
                # an index entry ends its transaction at its last offset (the
                # ABORT marker's): stands in for a marker that was cleaned away
                offsets, types = markers.get(pid, (np.empty(0, np.int64), np.empty(0, np.int16)))
                missing = ~np.isin(lasts, offsets)
                if missing.any():
                    offsets = np.concatenate([offsets, lasts[missing]])
                    types = np.concatenate([types, np.full(int(missing.sum()), ABORT, types.dtype)])
                    order = np.argsort(offsets, kind="stable")
                    markers[pid] = (offsets[order], types[order])
        log_end = max(int(batches.last_offset.max()) + 1 if len(batches) else 0, active_base)
        state = cls(markers, aborted, log_end, log_end)
        verdict = state.verdict(batches)
        unstable = verdict == OPEN
        if high_watermark is not None:
            unstable |= state.ended_at_or_above(batches, verdict, high_watermark)
            state.last_stable_offset = min(state.last_stable_offset, high_watermark)
        if unstable.any():
            state.last_stable_offset = min(state.last_stable_offset,
                                           int(batches.base_offset[unstable].min()))
        return state

    def ended_at_or_above(self, batches: BatchTable, verdict: np.ndarray,
                          offset: int) -> np.ndarray:
        """Per batch: of a transaction whose marker (or ``.txnindex`` stand-in)
        lies at or above ``offset``."""
        out = np.zeros(len(batches), bool)
        ended = np.flatnonzero((verdict == COMMITTED) | (verdict == ABORTED))
        for pid, (rows,) in _by_producer(batches.producer_id[ended], ended):
            if pid not in self.markers:
                continue        # aborted by a .txnindex range alone: its end is known below
            offsets, _ = self.markers[pid]
            nxt = np.searchsorted(offsets, batches.last_offset[rows], side="right")
            closed = nxt < len(offsets)
            out[rows[closed]] = offsets[nxt[closed]] >= offset
        return out

    def verdict(self, batches: BatchTable) -> np.ndarray:
        """Per batch: PASS (not transactional / control), COMMITTED, ABORTED or OPEN."""
        cached = self._verdicts     # one read: other threads may replace it
        if cached is not None and cached[0] is batches:
            return cached[1]
        out = self._verdict(batches)
        out.flags.writeable = False
        self._verdicts = (batches, out)
        return out

    def _verdict(self, batches: BatchTable) -> np.ndarray:
        out = np.full(len(batches), PASS, dtype=np.int8)
        txn = batches.is_transactional & ~batches.is_control
        if not txn.any():
            return out
        txn_rows = np.flatnonzero(txn)
        for pid, (rows,) in _by_producer(batches.producer_id[txn_rows], txn_rows):
            out[rows] = OPEN
            if pid in self.markers:
                offsets, types = self.markers[pid]
                nxt = np.searchsorted(offsets, batches.last_offset[rows], side="right")
                closed = nxt < len(offsets)
                ended = types[np.minimum(nxt, len(offsets) - 1)]
                out[rows[closed & (ended == COMMIT)]] = COMMITTED
                out[rows[closed & (ended == ABORT)]] = ABORTED
            if pid in self.aborted_ranges:
                firsts, lasts = self.aborted_ranges[pid]
                base = batches.base_offset[rows]
                k = np.searchsorted(firsts, base, side="right") - 1
                hit = (k >= 0) & (base <= lasts[np.maximum(k, 0)])
                out[rows[hit]] = ABORTED
        return out

    def dropped(self, batches: BatchTable) -> np.ndarray:
        """Per batch, whether a read_committed read leaves its records out:
        aborted and open transactions, and everything at or after the LSO."""
        verdict = self.verdict(batches)
        drop = ~((verdict == PASS) | (verdict == COMMITTED)) | (
            batches.base_offset >= self.last_stable_offset)
        kept = ~drop
        self._kept_below_lso = bool(not kept.any() or (
            (batches.magic[kept] >= 2).all()
            and int(batches.last_offset[kept].max()) < self.last_stable_offset))
        return drop

    def filter(self, records: Records, *, verdicts_applied: bool = False) -> Records:
        """The records a read_committed consumer sees (control records, too,
        stop at the LSO). ``verdicts_applied``: the records of aborted and
        open transactions are already left out (only the LSO cut remains;
        the records come from the batch table ``dropped`` was last given)."""
        lso = self.last_stable_offset
        if verdicts_applied and (not len(records) or self._kept_below_lso
                                 or int(records.offset.max()) < lso):
            out = records
        else:
            verdict = self.verdict(records.batches)
            keep_batch = (verdict == PASS) | (verdict == COMMITTED)
            keep = keep_batch[records.batch] & (records.offset < lso)
            out = records if keep.all() else records.take(keep)
        ctrl_keep = records.control.offset < self.last_stable_offset
        control = records.control if ctrl_keep.all() else records.control.take(ctrl_keep)
        return out.replace(control=control, last_stable_offset=self.last_stable_offset)


PASS, COMMITTED, ABORTED, OPEN = 0, 1, 2, 3


def _by_producer(pids: np.ndarray, key: np.ndarray, *others: np.ndarray):
    """``(pid, (key, *others))`` per producer id, each group ordered by ``key``:
    one sort for all producers (linear in their number, not quadratic)."""
    if not len(pids):
        return
    order = np.lexsort((key, pids))
    pids, cols = pids[order], [key[order], *(o[order] for o in others)]
    starts = np.flatnonzero(np.r_[True, pids[1:] != pids[:-1]])
    ends = np.r_[starts[1:], len(pids)]
    for a, b in zip(starts.tolist(), ends.tolist()):
        yield int(pids[a]), tuple(c[a:b] for c in cols)


def apply_isolation(records: Records, isolation: str, state: TxnState | None = None) -> Records:
    """``records`` as seen with ``isolation``; ``state`` defaults to the one
    the records themselves imply (a whole segment)."""
    if check_isolation(isolation) == "read_uncommitted":
        return records
    if state is None:
        state = TxnState.build(records.batches, records.control)
    return state.filter(records)


# --- the transaction report -------------------------------------------------

@dataclass
class Transaction:
    producer_id: int
    producer_epoch: int         # of its first data batch (the marker's when empty)
    first_offset: int
    last_offset: int            # last data offset (the marker offset when empty)
    marker_offset: int | None   # None while open
    status: str                 # COMMIT, ABORT or OPEN
    records: int
    batches: int
    coordinator_epoch: int | None
    marker_epoch: int | None = None     # None while open; -1 for a .txnindex stand-in
    retry_of: int | None = None         # a TV2 marker written again: the first one's offset


@dataclass
class TransactionReport:
    """Transactions of one partition (or segment), in first-offset order,
    and per producer id the transaction protocol its markers follow."""

    source: str
    transactions: list[Transaction] = field(default_factory=list)
    last_stable_offset: int = 0
    log_end_offset: int = 0
    producers: dict[int, ProducerProtocol] = field(default_factory=dict)
    # what says the report may be partial (``kbatch.tools.transactions``)
    damage: list[str] = field(default_factory=list)

    @property
    def open(self) -> list[Transaction]:
        return [t for t in self.transactions if t.status == "OPEN"]

    @property
    def retried(self) -> list[Transaction]:
        """Markers written again (TV2 retries): no transaction of their own."""
        return [t for t in self.transactions if t.retry_of is not None]


def transaction_report(source: str, batches: BatchTable, control: ControlRecords,
                       txn_index: TxnIndex | None = None, *,
                       active_base: int = 0) -> TransactionReport:
    """Every transaction (committed, aborted, open, empty) of a log
    (``active_base`` as ``TxnState.build``).

    One pass per producer over its batches and markers (linear in both).
    """
    state = TxnState.build(batches, control, txn_index, active_base=active_base)
    report = TransactionReport(source, [], state.last_stable_offset, state.log_end_offset)
    verdict = state.verdict(batches)
    txn_rows = np.flatnonzero(batches.is_transactional & ~batches.is_control)
    rows_of = {pid: rows for pid, (rows,) in _by_producer(batches.producer_id[txn_rows],
                                                           txn_rows)}
    marker_at = {key: i for i, key in enumerate(zip(control.producer_id.tolist(),
                                                    control.offset.tolist()))}
    none = np.empty(0, np.int64)
    for pid in sorted(set(rows_of) | set(state.markers)):
        rows = rows_of.get(pid, none)
        offsets, types = state.markers.get(pid, (none, np.empty(0, np.int16)))
        # the marker ending each batch (len(offsets): none yet, open)
        ends = np.searchsorted(offsets, batches.last_offset[rows], side="right")
        order = np.argsort(ends, kind="stable")
        rows, ends = rows[order], ends[order]
        bounds = np.searchsorted(ends, np.arange(len(offsets) + 2))
        ended: list[tuple[Transaction, MarkerEnd]] = []
        for k in range(len(offsets) + 1):
            group = rows[bounds[k]:bounds[k + 1]]
            if k < len(offsets):
                marker = int(offsets[k])
                at = marker_at.get((pid, marker))   # None: a .txnindex entry stands in
                epoch = int(control.producer_epoch[at]) if at is not None else -1
                coord = int(control.coordinator_epoch[at]) if at is not None else None
                status = "COMMIT" if types[k] == COMMIT else "ABORT"
            elif len(group):
                marker, epoch, coord, status = None, -1, None, "OPEN"
            else:
                continue
            if not len(group):   # an empty transaction: a marker, no data
                t = Transaction(pid, epoch, marker, marker, marker, status, 0, 0, coord, epoch)
                report.transactions.append(t)
                ended.append((t, MarkerEnd(status, marker, epoch, None)))
                continue
            if status != "OPEN" and (verdict[group] == ABORTED).all():
                status = "ABORT"
            t = Transaction(
                pid, int(batches.producer_epoch[group[0]]),
                int(batches.base_offset[group].min()), int(batches.last_offset[group].max()),
                marker, status, int(batches.records_count[group].sum()), len(group), coord,
                None if marker is None else epoch)
            report.transactions.append(t)
            if marker is not None:
                ended.append((t, MarkerEnd(status, marker, epoch,
                                           int(batches.producer_epoch[group].max()))))
        summary, retry_of = classify(pid, [e for _, e in ended])
        for (t, _), first in zip(ended, retry_of):
            t.retry_of = first
        report.producers[pid] = summary
    report.transactions.sort(key=lambda t: (t.first_offset, t.producer_id))
    return report
