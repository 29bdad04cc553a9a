"""Transactions for the read_committed tests: batch descriptions, a reference
model, a Hypothesis strategy of scenarios and a writer of partition
directories. Nothing here imports kbatch.

A scenario is a list of ``B`` (one per batch, in offset order) as a broker
appended them, split into 1-4 segments, with ``.txnindex`` entries for
aborted transactions and, optionally, ABORT markers that are missing from the
log while their ``.txnindex`` entry remains.

The reference model (``model``) is a forward walk over the batches, the way
a reader would follow the log: every producer's transactional batches are
pending until that producer's next COMMIT/ABORT marker decides them; what is
still pending at the end is open. ``.txnindex`` entries then abort every
transactional batch of their producer whose offsets lie in
``[firstOffset, lastOffset]``. The LSO is the first offset of the earliest
open transaction (the log end offset when none is open).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from hypothesis import strategies as st

from .kafka_ref import ABORT, COMMIT, build_batch, control_batch, empty_batch

UNKNOWN_CONTROL_TYPES = (2, 3, 4, 5, 6, 7, 17)
TS0 = 1_650_000_000_000


@dataclass
class B:
    """One batch as written to the log."""

    kind: str                       # "data", "empty", "marker" (ABORT/COMMIT), "ctrl" (other type)
    base_offset: int
    last_offset: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    offsets: list = field(default_factory=list)    # data record offsets
    values: list = field(default_factory=list)     # data record values
    control_type: int | None = None
    coordinator_epoch: int = 0
    codec: int = 0

    def encode(self) -> bytes:
        if self.kind == "data":
            deltas = [o - self.base_offset for o in self.offsets]
            records = [(TS0 + o, b"k%d" % (o % 7), v, []) for o, v in zip(self.offsets, self.values)]
            return build_batch(records, codec=self.codec, base_offset=self.base_offset,
                               producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                               base_sequence=self.base_sequence, transactional=self.transactional,
                               offset_deltas=deltas,
                               last_offset_delta=self.last_offset - self.base_offset)
        if self.kind in ("marker", "ctrl"):
            return control_batch(base_offset=self.base_offset, producer_id=self.producer_id,
                                 producer_epoch=self.producer_epoch,
                                 control_type=self.control_type,
                                 coordinator_epoch=self.coordinator_epoch,
                                 timestamp=TS0 + self.base_offset,
                                 transactional=self.transactional, codec=self.codec)
        assert self.kind == "empty"
        return empty_batch(base_offset=self.base_offset,
                           last_offset_delta=self.last_offset - self.base_offset,
                           producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=self.base_sequence, base_timestamp=TS0,
                           max_timestamp=TS0,
                           attributes=0x10 if self.transactional else 0)

    @property
    def is_txn_data(self) -> bool:
        return self.transactional and self.kind in ("data", "empty")


@dataclass(frozen=True)
class Txn:
    producer_id: int
    producer_epoch: int
    first_offset: int
    last_offset: int
    marker_offset: int | None
    status: str
    records: int
    batches: int
    coordinator_epoch: int | None


@dataclass
class Expected:
    offsets: list            # read_committed data record offsets
    values: list
    all_offsets: list        # read_uncommitted
    all_values: list
    control: list            # (offset, type) of every control record
    lso: int
    log_end_offset: int
    transactions: list       # [Txn], sorted by (first_offset, producer_id)

    def committed_in(self, lo, hi):
        pairs = [(o, v) for o, v in zip(self.offsets, self.values) if lo <= o < hi]
        return [o for o, _ in pairs], [v for _, v in pairs]


def model(batches: list[B], txn_index=(), high_watermark: int | None = None) -> Expected:
    """What read_committed returns from ``batches`` (offset order) and the
    ``.txnindex`` entries ``txn_index`` [(producer_id, first, last)];
    ``high_watermark``: a consumer's, where known: a transaction whose
    marker is at or above it is not stable yet (ProducerStateManager keeps
    it among its unreplicated transactions, removeUnreplicatedTransactions),
    and the LSO is at most the high watermark (UnifiedLog.lastStableOffset).

    An entry aborts its producer's transactional batches in [first, last];
    when the log has no marker of that producer at ``last`` (it was cleaned
    away), the entry ends the transaction there as the ABORT marker would
    (marker offset ``last``, coordinator epoch unknown)."""
    status = {}                     # batch index -> "COMMIT" / "ABORT" / "OPEN"
    marker_of = {}                  # batch index -> the offset of the marker ending it
    pending: dict[int, list] = {}   # producer id -> batch indexes
    txns = []

    def close(pid, group, marker: B | None):
        if marker is None:
            st_, marker_offset, coord = "OPEN", None, None
        else:
            st_ = "COMMIT" if marker.control_type == COMMIT else "ABORT"
            marker_offset, coord = marker.base_offset, marker.coordinator_epoch
        for j in group:
            status[j] = st_
            marker_of[j] = marker_offset
        if group:
            gb = [batches[j] for j in group]
            txns.append(Txn(pid, gb[0].producer_epoch, gb[0].base_offset, gb[-1].last_offset,
                            marker_offset, st_, sum(len(b.offsets) for b in gb), len(gb), coord))
        else:   # an empty transaction: a marker without data
            txns.append(Txn(pid, marker.producer_epoch, marker_offset, marker_offset,
                            marker_offset, st_, 0, 0, coord))

    real = {(b.producer_id, b.base_offset) for b in batches
            if b.kind == "marker" and b.transactional}
    stand_ins = sorted({(last, pid) for pid, _, last in txn_index if (pid, last) not in real})
    events = [(b.base_offset, 0, i, b) for i, b in enumerate(batches)]
    events += [(last, 1, -1, B("marker", last, last, pid, -1, -1, True, control_type=ABORT,
                                coordinator_epoch=None))
               for last, pid in stand_ins]
    for _, _, i, b in sorted(events, key=lambda e: e[:3]):
        if b.is_txn_data:
            pending.setdefault(b.producer_id, []).append(i)
        elif b.kind == "marker" and b.transactional:
            close(b.producer_id, pending.pop(b.producer_id, []), b)
    for pid, group in pending.items():
        close(pid, group, None)

    for i, b in enumerate(batches):
        if b.is_txn_data and any(pid == b.producer_id and first <= b.base_offset <= last
                                 for pid, first, last in txn_index):
            status[i] = "ABORT"

    log_end = max((b.last_offset + 1 for b in batches), default=0)
    open_firsts = [batches[i].base_offset for i, s in status.items() if s == "OPEN"]
    if high_watermark is not None:
        open_firsts += [batches[i].base_offset for i, m in marker_of.items()
                        if m is not None and m >= high_watermark]
        open_firsts.append(high_watermark)
    lso = min(open_firsts, default=log_end)

    offsets, values, all_offsets, all_values, control = [], [], [], [], []
    for i, b in enumerate(batches):
        if b.kind in ("marker", "ctrl"):
            control.append((b.base_offset, b.control_type))
            continue
        all_offsets += b.offsets
        all_values += b.values
        if b.is_txn_data and status[i] != "COMMIT":
            continue
        for o, v in zip(b.offsets, b.values):
            if o < lso:
                offsets.append(o)
                values.append(v)
    txns.sort(key=lambda t: (t.first_offset, t.producer_id))
    return Expected(offsets, values, all_offsets, all_values, control, lso, log_end, txns)


# --- scenarios ------------------------------------------------------------

@dataclass
class Scenario:
    batches: list            # every batch a broker appended, offset order
    starts: list             # index in ``batches`` where each segment starts
    names: list              # base offset in each segment's file name
    txn_index: list          # per segment: [(producer_id, first, last, lso)]
    dropped: set             # indexes of (ABORT marker) batches missing from the files

    @property
    def written(self) -> list:
        return [b for i, b in enumerate(self.batches) if i not in self.dropped]

    def segment_batches(self, k: int) -> list:
        stop = self.starts[k + 1] if k + 1 < len(self.starts) else len(self.batches)
        return [self.batches[i] for i in range(self.starts[k], stop) if i not in self.dropped]

    @property
    def index_entries(self) -> list:
        return [(pid, first, last) for seg in self.txn_index for pid, first, last, _ in seg]

    def segment_bytes(self, k: int) -> bytes:
        return b"".join(b.encode() for b in self.segment_batches(k))

    def write(self, directory) -> None:
        """``directory`` (a ``<topic>-<partition>`` directory) gets
        ``%020d.log`` (and ``.txnindex``) files."""
        os.makedirs(directory, exist_ok=True)
        for k, name in enumerate(self.names):
            stem = os.path.join(directory, "%020d" % name)
            with open(stem + ".log", "wb") as f:
                f.write(self.segment_bytes(k))
            if self.txn_index[k]:
                with open(stem + ".txnindex", "wb") as f:
                    for pid, first, last, lso in self.txn_index[k]:
                        f.write(struct.pack(">hqqqq", 0, pid, first, last, lso))


@st.composite
def scenarios(draw, max_steps: int = 22, allow_drop: bool = True, max_segments: int = 4,
              missing_markers: bool = False):
    """``missing_markers``: every aborted transaction gets a ``.txnindex``
    entry and its marker is often missing."""
    n_txn = draw(st.integers(1, 3))
    n_idem = draw(st.integers(0, 2))
    pids = draw(st.lists(st.integers(0, 1 << 40), min_size=n_txn + n_idem,
                         max_size=n_txn + n_idem, unique=True))
    txn_pids, idem_pids = pids[:n_txn], pids[n_txn:]
    epoch = {pid: draw(st.integers(0, 30000)) for pid in pids}
    seq = {pid: 0 for pid in pids}
    nxt = draw(st.sampled_from([0, 0, 1, 5_000_000_000]))
    batches: list[B] = []

    def data_batch(pid, transactional):
        nonlocal nxt
        base = nxt + draw(st.sampled_from([0, 0, 0, 0, 1, 3]))
        n = draw(st.integers(1, 3))
        if draw(st.integers(0, 4)) == 0:   # compacted-looking gaps between records
            offsets, o = [], base + draw(st.integers(0, 2))
            for _ in range(n):
                offsets.append(o)
                o += draw(st.integers(1, 3))
            last = offsets[-1] + draw(st.sampled_from([0, 0, 2]))
        else:
            offsets = list(range(base, base + n))
            last = offsets[-1]
        b = B("data", base, last, pid, epoch.get(pid, -1), seq.get(pid, -1), transactional,
              offsets,
              # some null values: a dropped batch's validity bits must not leak
              [None if draw(st.integers(0, 3)) == 0 else b"v%d" % o for o in offsets],
              codec=draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4])))
        if pid in seq:
            seq[pid] += last - base + 1
        nxt = last + 1
        return b

    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(["txn", "txn", "txn", "end", "end", "plain", "idem",
                                     "ctrl", "empty"]))
        if kind == "txn":
            batches.append(data_batch(draw(st.sampled_from(txn_pids)), True))
        elif kind == "end":
            pid = draw(st.sampled_from(txn_pids))
            epoch[pid] += draw(st.sampled_from([0, 0, 0, 1, 2]))   # coordinator fencing bump
            base = nxt + draw(st.sampled_from([0, 0, 0, 2]))
            batches.append(B("marker", base, base, pid, epoch[pid], -1, True,
                             control_type=draw(st.sampled_from([ABORT, COMMIT])),
                             coordinator_epoch=draw(st.integers(0, 1000)),
                             codec=draw(st.sampled_from([0, 0, 0, 0, 0, 1, 2, 3, 4]))))
            nxt = base + 1
        elif kind == "plain" or (kind == "idem" and not idem_pids):
            batches.append(data_batch(-1, False))
        elif kind == "idem":
            batches.append(data_batch(draw(st.sampled_from(idem_pids)), False))
        elif kind == "ctrl":
            transactional = draw(st.booleans())
            pid = draw(st.sampled_from([-1, *txn_pids])) if transactional else -1
            batches.append(B("ctrl", nxt, nxt, pid, epoch.get(pid, -1), -1, transactional,
                             control_type=draw(st.sampled_from(UNKNOWN_CONTROL_TYPES)),
                             codec=draw(st.sampled_from([0, 0, 0, 1, 3]))))
            nxt += 1
        else:   # an empty batch (compaction leftover): no records, offsets kept
            owner = draw(st.sampled_from(["plain", "idem", "txn"]))
            pid = {"plain": -1, "idem": draw(st.sampled_from(idem_pids)) if idem_pids else -1,
                   "txn": draw(st.sampled_from(txn_pids))}[owner]
            last = nxt + draw(st.integers(0, 2))
            batches.append(B("empty", nxt, last, pid, epoch.get(pid, -1), seq.get(pid, -1),
                             owner == "txn" and pid != -1))
            nxt = last + 1

    # segments: cut points, often right before a marker
    n = len(batches)
    starts = [0]
    if n > 1 and max_segments > 1:
        marker_pos = [i for i in range(1, n) if batches[i].kind == "marker"]
        pos = st.integers(1, n - 1)
        if marker_pos:
            pos = st.one_of(st.sampled_from(marker_pos), pos)
        starts += sorted(draw(st.lists(pos, max_size=max_segments - 1, unique=True)))
    names = []
    for k, s in enumerate(starts):
        low = batches[starts[k - 1]].last_offset + 1 if k else 0
        low = max(low, max((b.last_offset + 1 for b in batches[:s]), default=0))
        first = batches[s].base_offset
        names.append(draw(st.sampled_from([first, first, max(low, first - 2)])))

    def segment_of(i):
        return max(k for k, s in enumerate(starts) if s <= i)

    # .txnindex entries of aborted transactions (with data), in the marker's segment
    txn_index = [[] for _ in starts]
    index_mode = "all" if missing_markers else draw(st.sampled_from(["none", "all", "all", "some"]))
    aborted = []            # (marker index, pid, first offset)
    pending: dict[int, list] = {}
    for i, b in enumerate(batches):
        if b.is_txn_data:
            pending.setdefault(b.producer_id, []).append(b.base_offset)
        elif b.kind == "marker":
            group = pending.pop(b.producer_id, [])
            if group and b.control_type == ABORT:
                aborted.append((i, b.producer_id, group[0]))
    dropped = set()
    for i, pid, first in aborted:
        if index_mode == "none" or (index_mode == "some" and not draw(st.booleans())):
            continue
        marker = batches[i]
        txn_index[segment_of(i)].append((pid, first, marker.base_offset, marker.base_offset + 1))
        # the marker itself may be missing (cleaned away): never the last batch of
        # the log, never the only batch of its segment
        k = segment_of(i)
        seg_stop = starts[k + 1] if k + 1 < len(starts) else n
        left = [j for j in range(starts[k], seg_stop) if j != i and j not in dropped]
        if allow_drop and i != n - 1 and left and draw(st.integers(0, 1 if missing_markers else 3)) == 0:
            dropped.add(i)
    return Scenario(batches, starts, names, txn_index, dropped)
