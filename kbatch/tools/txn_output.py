"""``kbatch txn``'s output: a ``TransactionReport`` as text or JSON lines.

Text, per partition: a header line (transactions, retried markers, LSO, log
end offset), one row per transaction (a retried marker is flagged, not
counted), then per producer id the transaction protocol its markers follow
(``kbatch.lib.txn_protocol``). JSON: one object per transaction (its
``marker_epoch`` and ``retry_of`` included), then one summary object per
partition whose ``producers`` lists the same per-producer summary.

Keeps nothing: prints as it goes.
"""

from __future__ import annotations

import json

from kbatch.lib.txn import TransactionReport


def print_json(rep: TransactionReport) -> None:
    for t in rep.transactions:
        print(json.dumps({"source": rep.source, **t.__dict__}))
    print(json.dumps({"source": rep.source, "last_stable_offset": rep.last_stable_offset,
                      "log_end_offset": rep.log_end_offset, "open": len(rep.open),
                      "retried_markers": len(rep.retried),
                      "producers": [p.as_dict() for _, p in sorted(rep.producers.items())]}))


def print_text(rep: TransactionReport) -> None:
    retried = len(rep.retried)
    extra = f" (+{retried} retried marker{'s' if retried > 1 else ''})" if retried else ""
    print(f"{rep.source}: {len(rep.transactions) - retried} transactions{extra}, "
          f"LSO {rep.last_stable_offset}, log end offset {rep.log_end_offset}")
    if rep.transactions:
        print(f"  {'producer':>10} {'epoch':>5} {'first':>12} {'last':>12} "
              f"{'marker':>12} {'status':<7} {'records':>8} {'batches':>7}")
    for t in rep.transactions:
        if t.status == "OPEN":
            flag = "  <-- open (hanging)"
        elif t.retry_of is not None:
            flag = f"  <-- retried marker (repeats offset {t.retry_of}), no transaction"
        else:
            flag = ""
        marker = "-" if t.marker_offset is None else t.marker_offset
        print(f"  {t.producer_id:>10} {t.producer_epoch:>5} {t.first_offset:>12} "
              f"{t.last_offset:>12} {marker:>12} {t.status:<7} {t.records:>8} "
              f"{t.batches:>7}{flag}")
    if rep.producers:
        print("  transaction protocol per producer (markers ending data at the data's "
              "epoch: TV1; at epoch + 1: TV2):")
        print(f"  {'producer':>10} {'protocol':<8} {'markers':>7} {'epoch+0':>7} "
              f"{'epoch+1':>7} {'retried':>7}")
        for pid, p in sorted(rep.producers.items()):
            note = []
            if p.other_epoch:
                note.append(f"{p.other_epoch} at another epoch")
            if p.epoch_exhausted:
                note.append("epoch exhausted: the transactional id moved to a new producer id")
            print(f"  {pid:>10} {p.protocol:<8} {p.markers:>7} {p.same_epoch:>7} "
                  f"{p.epoch_plus_one:>7} {p.retried:>7}" + (f"  ({'; '.join(note)})"
                                                            if note else ""))
