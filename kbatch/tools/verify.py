"""Checking segments and their indexes, like the broker's recovery and Kafka's
dump tool, without changing any file.

Per segment: batches and records checked, CRC failures (every one, the walk
goes on past them), offsets that do not increase, offset-index entries that
point past the end, at no batch, or at a batch whose last offset differs,
time-index entries out of order or naming an offset the log lacks or a
timestamp the batch does not have, and where valid data ends (truncated tail,
zero padding, or the first corrupt batch).
"""

from __future__ import annotations

import os
from pathlib import Path


from kbatch.errors import KbatchError
from kbatch.lib.files import NotRegularFileError
from kbatch.lib.log import PartitionLog, Segment, SEGMENT_NAME, segment_base
from kbatch.lib.paths import PathKind, partition_dirs, resolve
from kbatch.lib.segment import check_options, decode_chunks, open_source
from kbatch.tools.verify_rules import (CHUNK_BYTES, CHUNK_RECORDS, SegmentReport,  # noqa: F401
                                       VerifyReport, check, verify_options, walk)


def verify_segment(segment: Segment | str | os.PathLike, *, last_segment: bool = True,
                   **options) -> SegmentReport:
    """Check one ``.log`` file and its ``.index``/``.timeindex``.

    Damaged bytes do not end the check: it resumes at the next valid batch
    (``on_corrupt="skip"``) and lists every damaged range in ``skipped``.
    ``last_segment=False``: the file is not its partition's last segment,
    so a truncated batch or zero padding at its end is damage too.
    Keeps in memory one decoded chunk and the batch table of the segment.
    """
    seg = segment if isinstance(segment, Segment) else Segment(Path(segment))
    opts = verify_options(options)
    report = SegmentReport(str(seg.path), seg.base_offset, seg.size, last_segment=last_segment)
    with open_source(seg.path) as (view, path):
        batches = walk(report, decode_chunks(view, path, opts, chunk_records=CHUNK_RECORDS,
                                              chunk_bytes=CHUNK_BYTES))
    index_problems: list[str] = []
    idx = _side_file(seg, "offset_index", seg.index_path, index_problems)
    time_problems: list[str] = []
    ti = _side_file(seg, "time_index", seg.timeindex_path, time_problems)
    check(report, batches, idx, seg.index_path.name, ti, seg.timeindex_path.name)
    report.index_problems = index_problems + report.index_problems
    report.timeindex_problems = time_problems + report.timeindex_problems
    return report


def _side_file(seg: Segment, attribute: str, path: Path, out: list[str]):
    """``seg.<attribute>`` (an index read), or None with the reason in ``out``
    when the file cannot be read as one (a directory, FIFO or device)."""
    try:
        return getattr(seg, attribute)
    except KbatchError as exc:
        out.append(f"{path.name}: is {exc.kind}, not a regular file"
                   if isinstance(exc, NotRegularFileError) else f"{path.name}: {exc}")
    except OSError as exc:
        out.append(f"{path.name}: cannot read ({exc.strerror or exc})")
    return None


def verify(path, *, on_segment=None, **options) -> VerifyReport:
    """Check a segment file, a partition directory or a broker data directory.

    Changes no file. ``on_segment(path)`` is called after each segment (for
    progress). Options: those of ``read_segment`` (limits). Keeps in memory
    one decoded chunk and one segment's batch table at a time.

    A URL (``s3://...``, any fsspec URL) or a path with ``filesystem=`` is
    checked from ranges (``kbatch.tools.remote_checks``): a segment object,
    a partition prefix or a prefix of partitions; ``layout="tiered"`` for a
    tiered-storage bucket; the keyword arguments of ``open_log`` for URLs
    (``storage_options``, ``private_key``, ...).
    """
    from kbatch.lib.remote.fs import is_url
    from kbatch.lib.remote.log import split_remote_keys

    remote, options = split_remote_keys(options)
    check_options("verify", options)
    if is_url(path) or remote:
        from kbatch.tools.remote_checks import verify_remote
        return verify_remote(path, remote, options, on_segment)
    found = resolve(path)
    if found.kind is PathKind.SEGMENT:
        report = VerifyReport([verify_segment(found.path, **options)])
        if on_segment:
            on_segment(found.path)
        return report
    if found.kind is PathKind.PARTITION:
        return _verify_partition(PartitionLog(found.path), options, on_segment)
    reports, problems = [], []
    # partition_dirs refuses two directories naming one partition (t-1, t-01)
    for data_dir in found.paths:
        for _, _, child in partition_dirs(data_dir):
            part = _verify_partition(PartitionLog(child), options, on_segment)
            reports += part.segments
            problems += part.partition_problems
    return VerifyReport(reports, problems)


def _verify_partition(log: PartitionLog, options, on_segment=None) -> VerifyReport:
    reports = []
    for seg in log.segments:
        reports.append(verify_segment(seg, last_segment=seg is log.segments[-1], **options))
        if on_segment:
            on_segment(seg.path)
    problems = [f"{log.path.name}/{p.name}: not a segment name (above the largest offset)"
                for p in sorted(log.path.iterdir())
                if SEGMENT_NAME.match(p.name) and segment_base(p.name) is None]
    for prev, cur in zip(reports, reports[1:]):
        if prev.last_offset is not None and cur.base_offset <= prev.last_offset:
            problems.append(f"{log.path.name}/{Path(cur.path).name}: base offset "
                            f"{cur.base_offset} is not above the previous segment's last "
                            f"offset {prev.last_offset}")
    return VerifyReport(reports, problems)

