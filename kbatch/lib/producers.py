"""A partition's producers as ProducerStateManager tracks them for the
``.txnindex``: each producer's open transaction, and the entry an ABORT
marker of a non-empty transaction makes (ProducerAppendInfo.append,
appendEndTxnMarker, ProducerStateManager.lastStableOffset). Used by
recovery (``kbatch.tools.recover``) and the cleaner (``kbatch.lib.compact``).

    .txnindex entry   version int16 (0) | producerId int64 | firstOffset int64
                      | lastOffset int64 (the marker) | lastStableOffset int64
"""

from __future__ import annotations

import struct

from kbatch.wire import ControlType

TXN_ENTRY = struct.Struct(">hqqqq")


class ProducerState:
    """What LogSegment.recover's updateProducerState keeps to write the
    ``.txnindex``: each producer's open transaction (ProducerAppendInfo,
    ProducerStateManager.ongoingTxns)."""

    def __init__(self):
        self.ongoing: dict[int, int] = {}     # producer id -> first offset

    def batch(self, base: int, producer_id: int, transactional: bool, control: bool,
              marker: int | None) -> bytes | None:
        """One batch; the ``.txnindex`` entry it completes, if any."""
        if producer_id < 0:
            return None
        if not control:
            if transactional and producer_id not in self.ongoing:
                self.ongoing[producer_id] = base
            return None
        if marker not in (ControlType.ABORT, ControlType.COMMIT):
            return None
        first = self.ongoing.get(producer_id)
        if first is None:
            return None          # an empty transaction: no entry
        others = [f for p, f in self.ongoing.items() if p != producer_id]
        lso = min(others) if others else base + 1
        del self.ongoing[producer_id]
        if marker == ControlType.ABORT:
            return TXN_ENTRY.pack(0, producer_id, first, base, lso)
        return None

    def aborted(self, base: int, producer_id: int, transactional: bool, control: bool,
                marker: int | None) -> tuple[int, int, int, int] | None:
        """``batch``'s entry as ``(producer id, first, last, lso)``, if any."""
        entry = self.batch(base, producer_id, transactional, control, marker)
        return None if entry is None else TXN_ENTRY.unpack(entry)[1:]
