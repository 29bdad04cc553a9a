"""``kbatch.transactions(path)``: the transaction report of a segment, a
partition or a data directory (local or in object storage: the door,
``kbatch.lib.open``, says which). The I/O entry point beside ``verify``
and ``stats``; the read_committed logic it reports on is pure and lives in
``kbatch.lib.txn``.
"""

from __future__ import annotations

from kbatch.lib.log import PartitionLog
from kbatch.lib.open import resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.records import Records
from kbatch.lib.segment import decode_options
from kbatch.lib.storage import Storage
from kbatch.lib.txn import TransactionReport, transaction_report

__all__ = ["transactions"]


def transactions(path, **options) -> list[TransactionReport]:
    """Transaction reports for a segment, a partition or a broker data
    directory (one report per partition; per file for a file), local or a
    URL (storage keywords as ``kbatch.open_log``: ``storage_options``,
    ``layout``, ``private_key``...).

    Reads batch headers and control records only (data records are not
    decoded); keeps one row per batch of a partition in memory. A report's
    ``damage`` names what may make it partial: a segment that is not its
    partition's last holding bytes after its last whole batch (a read
    raises there; the transaction pass walks past it).
    """
    storage, options = Storage.split(options)
    opts = decode_options("transactions", options)
    found = resolve(path, storage)
    if found.kind is PathKind.SEGMENT:
        seg = found.segment()
        whole = Records.concat(list(seg.source.chunks(opts, control_only=True)))
        return [transaction_report(seg.name, whole.batches, whole.control,
                                   active_base=seg.base_offset)]
    reports = []
    for part in found.partitions():
        log = PartitionLog.at(part, found.storage)
        batches, control, txn_index = log.transaction_tables(**options)
        last_base = log.segments[-1].base_offset if log.segments else 0
        report = transaction_report(log.name, batches, control, txn_index,
                                    active_base=last_base)
        report.damage = torn_inner_segments(log)
        reports.append(report)
    return reports


def torn_inner_segments(log: PartitionLog) -> list[str]:
    """The segments of ``log`` that are not its last and hold bytes after
    their last whole batch (a broker trims a segment when it rolls)."""
    out = []
    for seg in log.segments[:-1]:
        bounds = seg.batch_bounds()
        end = int(bounds["position"][-1] + bounds["size"][-1]) if len(bounds) else 0
        if end < seg.size:
            out.append(f"{seg.name}: {seg.size - end} byte(s) after its last whole batch, "
                       f"at byte {end}, in a segment that is not its partition's last: "
                       "damage (the report may miss transactions or markers)")
    return out
