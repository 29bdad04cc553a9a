"""The producer ids of each transactional id and how one led to the next,
from ``__transaction_state`` (the rows of ``transaction_log``).

A transactional id keeps its producer id while the epoch can grow. It moves
to a new one:

- at the end of a transaction whose epoch is exhausted (transactions v2,
  KIP-890): the PrepareCommit/PrepareAbort record, at epoch 32767, names
  ``next_producer_id``; the CompleteCommit/CompleteAbort record after it
  carries that new id at epoch 0 with ``previous_producer_id`` the old one.
  The old id's last transaction ended with that record.
- when InitProducerId hands out a new id (an exhausted epoch at
  initialisation, or a rotation): the record under the new id names the
  old one in ``previous_producer_id``.
- after the transactional id expired and was initialised again: a new id
  with nothing linking it (compaction, too, may have removed the records
  in between).

The coordinator's state of a producer id is that of its last record, except
that an old id's last transaction completes with the first record of its
successor (see above): an exhausted producer id is not left in PrepareCommit.

Keeps one entry per producer id and the order of ids per transactional id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EPOCH_EXHAUSTED = 32766         # from this epoch on, a transaction end moves the id on
_PREPARE = {"PrepareCommit": "CompleteCommit", "PrepareAbort": "CompleteAbort"}


@dataclass
class ProducerIdState:
    producer_id: int
    transactional_id: str
    state: str | None = None            # the coordinator's last state for this id
    producer_epoch: int | None = None
    last_update_timestamp: int | None = None
    client_transaction_version: int | None = None
    previous_producer_id: int | None = None     # the id this one followed
    next_producer_id: int | None = None         # the id that followed this one
    change: str | None = None           # why the id after this one came: see CHANGES

    def as_dict(self) -> dict:
        return dict(self.__dict__)


CHANGES = ("epoch exhausted", "new producer id", "re-initialised")


@dataclass
class ProducerIds:
    """``states[producer_id]`` and ``chains[transactional_id]`` (its ids in order)."""

    states: dict[int, ProducerIdState] = field(default_factory=dict)
    chains: dict[str, list[int]] = field(default_factory=dict)


def producer_ids(rows) -> ProducerIds:
    """From ``transaction_log`` rows (the table, or its rows as dicts), in
    log order."""
    if hasattr(rows, "to_pylist"):
        rows = rows.to_pylist()
    out = ProducerIds()
    for r in rows:
        tid, pid = r.get("transactional_id"), r.get("producer_id")
        if tid is None or pid is None or r.get("tombstone"):
            continue
        chain = out.chains.setdefault(tid, [])
        prev = r.get("previous_producer_id")
        linked = prev is not None and prev >= 0 and prev != pid
        if pid not in out.states:
            out.states[pid] = ProducerIdState(pid, tid)
            before = prev if linked else (chain[-1] if chain else None)
            if before is not None and before != pid:
                _link(out, before, pid, linked, r)
            chain.append(pid)
        st = out.states[pid]
        st.state, st.producer_epoch = r.get("state"), r.get("producer_epoch")
        st.last_update_timestamp = r.get("last_update_timestamp")
        st.client_transaction_version = r.get("client_transaction_version")
        nxt = r.get("next_producer_id")
        if nxt is not None and nxt >= 0 and nxt != pid:
            st.next_producer_id = nxt       # a Prepare* record at an exhausted epoch
        if linked and prev in out.states:
            old = out.states[prev]
            # the successor's first record completes the old id's last transaction
            if old.next_producer_id == pid and _PREPARE.get(old.state) == r.get("state"):
                old.state = r.get("state")
                old.last_update_timestamp = r.get("last_update_timestamp")
    return out


def _link(out: ProducerIds, old_pid: int, pid: int, linked: bool, row) -> None:
    old = out.states.get(old_pid)
    if old is None:       # known only as a previous_producer_id (compaction)
        old = out.states[old_pid] = ProducerIdState(old_pid, row["transactional_id"])
        out.chains[row["transactional_id"]].append(old_pid)
    new = out.states[pid]
    new.previous_producer_id = old_pid
    if old.next_producer_id not in (None, -1, pid):
        return            # it named another successor: leave that link
    exhausted = (old.producer_epoch is not None and old.producer_epoch >= EPOCH_EXHAUSTED)
    old.change = ("epoch exhausted" if exhausted or old.next_producer_id == pid
                  else "new producer id" if linked else "re-initialised")
    old.next_producer_id = pid
