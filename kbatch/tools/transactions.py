"""``kbatch.transactions(path)``: the transaction report of a segment file, a
partition directory or a broker data directory. The I/O entry point beside
``verify`` and ``stats``; the read_committed logic it reports on is pure and
lives in ``kbatch.lib.txn``.
"""

from __future__ import annotations

from kbatch.lib.log import LogDir, PartitionLog
from kbatch.lib.paths import PathKind, resolve
from kbatch.lib.segment import decode_options, open_source, transaction_state
from kbatch.lib.txn import TransactionReport, transaction_report

__all__ = ["transactions"]


def transactions(path, **options) -> list[TransactionReport]:
    """Transaction reports for a segment file, a partition directory or a
    broker data directory (one report per partition; per file for a file).

    Reads batch headers and control records only (data records are not
    decoded); keeps one row per batch of a partition in memory. A URL is
    read in ranges, as ``kbatch.verify`` says (``layout=``,
    ``storage_options=``, ...).
    """
    from kbatch.lib.remote.fs import is_url
    from kbatch.lib.remote.log import split_remote_keys

    remote, options = split_remote_keys(options)
    opts = decode_options("transactions", options)
    if is_url(path) or remote:
        from kbatch.tools.remote_checks import transactions_remote
        return transactions_remote(path, remote, opts)
    found = resolve(path)
    if found.kind is PathKind.SEGMENT:
        with open_source(found.path) as (view, src):
            batches, control = transaction_state(view, src, opts)
        return [transaction_report(str(found.path), batches, control)]
    if found.kind is PathKind.PARTITION:
        logs = [PartitionLog(found.path)]
    else:
        logs = [p for d in found.paths for p in LogDir(d).partitions]
    reports = []
    for log in logs:
        batches, control, txn_index = log.transaction_tables(**options)
        reports.append(transaction_report(str(log.path), batches, control, txn_index))
    return reports

