"""``verify`` and ``transactions`` of object storage: a segment object, a
partition prefix or a prefix of partitions (plain or tiered layout), checked
as a local file is, from ranges.

A segment is read in ranges (``kbatch.lib.remote.scan``; damage is passed
over in windows, as ``on_corrupt="skip"`` does), its ``.index`` and
``.timeindex`` objects (tiered: the indexes in ``.indexes``) are fetched
whole (one GET each) and checked against its batches with the rules of
``kbatch.tools.verify_rules``. Keeps in memory one decoded chunk, the ranges in
flight and one segment's batch table and indexes.
"""

from __future__ import annotations

from kbatch.lib.index import OffsetIndex, TimeIndex
from kbatch.lib.remote.log import RemoteLog, remote_target
from kbatch.lib.remote.scan import batches_and_control, offsets_only, scan
from kbatch.lib.txn import transaction_report
from kbatch.tools.verify_rules import (CHUNK_BYTES, CHUNK_RECORDS, SegmentReport,
                                       VerifyReport, check, verify_options, walk)


def verify_remote(url, remote: dict, options: dict, on_segment=None,
                  found=None) -> VerifyReport:
    """``kbatch.verify`` of a URL (``remote``: ``RemoteLog``'s keyword
    arguments; ``options``: decode options; ``found``: what
    ``remote_target`` already said of it, so nothing is listed twice)."""
    opts = verify_options(options)
    kind, target = found if found is not None else remote_target(url, **remote)
    if kind == "segment":
        _, seg = target
        # on its own, as a local file given alone: a torn tail is allowed
        report = _verify_segment(seg, opts, last_segment=True)
        if on_segment:
            on_segment(seg.url)
        return VerifyReport([report])
    logs = [target] if kind == "partition" else target.partitions
    reports, problems = [], []
    for log in logs:
        part = _verify_log(log, opts, on_segment)
        reports += part.segments
        problems += part.partition_problems
    return VerifyReport(reports, problems)


def _verify_log(log: RemoteLog, opts, on_segment) -> VerifyReport:
    reports = []
    for seg in log.segments:
        reports.append(_verify_segment(seg, opts, last_segment=seg is log.segments[-1]))
        if on_segment:
            on_segment(seg.url)
    problems = []
    if log.layout == "plain":
        # tiered uploads may overlap (a re-upload after a leader change): the
        # reader gives each offset once; a copied broker directory may not
        for prev, cur in zip(reports, reports[1:]):
            if prev.last_offset is not None and cur.base_offset <= prev.last_offset:
                problems.append(f"{cur.path}: base offset {cur.base_offset} is not above "
                                f"the previous segment's last offset {prev.last_offset}")
    return VerifyReport(reports, problems)


def _verify_segment(seg, opts, *, last_segment: bool) -> SegmentReport:
    src = seg.source()
    report = SegmentReport(seg.url, seg.base_offset, src.size, last_segment=last_segment)
    batches = walk(report, scan(src, opts, chunk_records=CHUNK_RECORDS,
                                 chunk_bytes=CHUNK_BYTES))
    name = seg.url.rsplit("/", 1)[-1][:-len(".log")]
    idx = OffsetIndex.from_bytes(seg.read_offset_index(), seg.base_offset)
    ti = (TimeIndex.from_bytes(seg.read_time_index(), seg.base_offset)
          if seg.read_time_index is not None else None)
    check(report, batches, idx, name + ".index", ti, name + ".timeindex")
    return report


def transactions_remote(url, remote: dict, opts) -> list:
    """``kbatch.transactions`` of a URL: per segment object, or per
    partition (with every transaction index entry)."""
    kind, target = remote_target(url, **remote)
    if kind == "segment":
        _, seg = target
        return [transaction_report(seg.url, *batches_and_control(
            scan(seg.source(), offsets_only(opts), chunk_records=CHUNK_RECORDS,
                 chunk_bytes=CHUNK_BYTES)))]
    logs = [target] if kind == "partition" else target.partitions
    return [transaction_report(log.url, *log._transaction_tables(opts, CHUNK_RECORDS,
                                                                 CHUNK_BYTES))
            for log in logs]
