"""Which transaction protocol a producer's markers follow, and which markers
are retries (KIP-890, "transactions v2"), from a data partition alone.

    TV1 (transaction version 0/1): the coordinator writes a transaction's
        COMMIT/ABORT marker with the producer epoch of its data batches.
        A coordinator that fences a timed-out producer bumps the epoch and
        aborts: that ABORT carries the data epoch + 1.
    TV2: the coordinator bumps the epoch at every transaction end, so every
        marker carries the data epoch + 1, and the next transaction's data
        is written with that epoch. A marker the coordinator retries (it was
        written, its acknowledgement lost, or a new coordinator resends the
        markers of a PrepareCommit/PrepareAbort) may be written twice: the
        second one repeats the first (same type, same epoch), ends no data,
        and changes nothing. When the epoch is exhausted (data at 32766,
        marker at 32767) the coordinator moves the transactional id to a new
        producer id (NextProducerId in ``__transaction_state``).

A producer's protocol, from the markers that end data (``delta``: marker
epoch - data epoch): "TV2" when a COMMIT has delta 1 and no marker delta 0;
"TV1" when a marker has delta 0 and no COMMIT delta 1 (its delta-1 ABORTs
are fencing aborts); "mixed" when both occur (the client changed protocol
under one producer id); "unknown" when no marker ends data, or only
delta-1 ABORTs (a TV2 abort and a TV1 fencing abort look alike), or other
deltas. Nothing here changes what read_committed returns: a marker ends its
producer's open transaction whatever its epoch (``kbatch.lib.txn``).

A marker ending no data repeats the previous marker of its producer (a
retry, ``retry_of``) when both have the same type and epoch and the previous
one is known to follow TV2 (it ended data at its epoch - 1, or is itself a
retry): under TV2 a new transaction always has a higher epoch. Under TV1 a
new empty transaction and a retried marker look alike, so such markers stay
empty transactions.

Pure: works on the transactions of one producer, in marker order; keeps
nothing beyond the summary it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

EPOCH_MAX = 32767               # Short.MAX_VALUE: a TV2 marker at it exhausts the producer id
PROTOCOLS = ("TV1", "TV2", "mixed", "unknown")


@dataclass
class MarkerEnd:
    """One marker of a producer as the report sees it."""

    status: str                 # "COMMIT" or "ABORT"
    marker_offset: int
    marker_epoch: int           # -1: a .txnindex entry standing in for a cleaned marker
    data_epoch: int | None      # the highest epoch of the data it ends; None: no data


@dataclass
class ProducerProtocol:
    """The markers of one producer id, summed up."""

    producer_id: int
    protocol: str               # one of PROTOCOLS
    markers: int = 0            # markers ending data
    same_epoch: int = 0         # ... at the data's epoch (TV1)
    epoch_plus_one: int = 0     # ... at the data's epoch + 1 (TV2, or a TV1 fencing abort)
    other_epoch: int = 0        # ... at any other epoch
    empty: int = 0              # markers ending no data that repeat nothing (empty transactions)
    retried: int = 0            # markers repeating the one before (TV2 retries)
    epoch_exhausted: bool = False   # a marker at epoch 32767: the id can go no further

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def classify(producer_id: int, ends: list[MarkerEnd]) -> tuple[ProducerProtocol, list[int | None]]:
    """The producer's protocol and, per marker (same order), the offset of
    the marker it retries (None: not a retry)."""
    out = ProducerProtocol(producer_id, "unknown")
    retry_of: list[int | None] = []
    tv1 = tv2_commit = False
    prev: MarkerEnd | None = None
    prev_is_tv2 = False
    for end in ends:
        real = end.marker_epoch >= 0
        out.epoch_exhausted |= end.marker_epoch == EPOCH_MAX
        if end.data_epoch is not None and real:
            delta = end.marker_epoch - end.data_epoch
            out.markers += 1
            if delta == 0:
                out.same_epoch += 1
                tv1 = True
            elif delta == 1:
                out.epoch_plus_one += 1
                tv2_commit |= end.status == "COMMIT"
            else:
                out.other_epoch += 1
            retry_of.append(None)
            is_tv2 = delta == 1
        elif (end.data_epoch is None and real and prev is not None and prev_is_tv2
              and prev.status == end.status and prev.marker_epoch == end.marker_epoch):
            out.retried += 1
            # a retry of a retry names the first marker
            retry_of.append(retry_of[-1] if retry_of[-1] is not None else prev.marker_offset)
            is_tv2 = True
        else:
            if end.data_epoch is None:
                out.empty += 1
            retry_of.append(None)
            is_tv2 = False
        prev, prev_is_tv2 = end, is_tv2
    if tv1 and tv2_commit:
        out.protocol = "mixed"
    elif tv2_commit:
        out.protocol = "TV2"
    elif tv1:
        out.protocol = "TV1"
    return out, retry_of
