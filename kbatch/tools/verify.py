"""Checking segments and their indexes, like the broker's recovery and Kafka's
dump tool, without changing any file, wherever they are stored (the door,
``kbatch.lib.open``, names them; the rules are in ``verify_rules``).

Per segment: batches and records checked, CRC failures (every one, the walk
goes on past them), offsets that do not increase, offset-index entries that
point past the end, at no batch, or at a batch whose last offset differs,
time-index entries out of order or naming an offset the log lacks or a
timestamp the batch does not have, and where valid data ends (truncated tail,
zero padding, or the first corrupt batch).
"""

from __future__ import annotations

from kbatch.errors import KbatchError
from kbatch.lib.files import NotRegularFileError
from kbatch.lib.log import PartitionLog
from kbatch.lib.logfiles import Segment
from kbatch.lib.open import expect, resolve
from kbatch.lib.paths import SEGMENT_NAME, PathKind, segment_base
from kbatch.lib.storage import Storage
from kbatch.tools.evidence import shortfalls
from kbatch.tools.verify_rules import (CHUNK_BYTES, CHUNK_RECORDS, SegmentReport,  # noqa: F401
                                       VerifyReport, check, verify_options, walk)


def _side_name(seg: Segment, suffix: str) -> str:
    name = seg.location.name
    return (name[:-len(".log")] if name.endswith(".log") else name) + suffix


def verify_segment(segment, *, last_segment: bool | None = None, **options) -> SegmentReport:
    """Check one segment (a ``Segment``, a path or a URL; storage keywords
    as ``kbatch.open_log``) and its ``.index``/``.timeindex``.

    Damaged bytes do not end the check: it resumes at the next valid batch
    (``on_corrupt="skip"``) and lists every damaged range in ``skipped``.
    ``last_segment=False``: the file is not its partition's last segment,
    so a truncated batch or zero padding at its end is damage too (None:
    as its directory says).
    Keeps in memory one decoded chunk and the batch table of the segment.
    """
    storage, options = Storage.split(options)
    seg = segment if isinstance(segment, Segment) else expect(
        segment, PathKind.SEGMENT, what="verify_segment checks one segment",
        storage=storage).segment()
    opts = verify_options(options)
    last_segment = seg.last if last_segment is None else last_segment
    report = SegmentReport(seg.name, seg.base_offset, seg.size, last_segment=last_segment)
    batches = walk(report, seg.source.chunks(opts, chunk_records=CHUNK_RECORDS,
                                             chunk_bytes=CHUNK_BYTES))
    index_problems: list[str] = []
    idx = _side_file(seg, "offset_index", _side_name(seg, ".index"), index_problems)
    time_problems: list[str] = []
    ti = _side_file(seg, "time_index", _side_name(seg, ".timeindex"), time_problems)
    check(report, batches, idx, _side_name(seg, ".index"), ti, _side_name(seg, ".timeindex"))
    report.index_problems = index_problems + report.index_problems
    report.timeindex_problems = time_problems + report.timeindex_problems
    return report


def _side_file(seg: Segment, attribute: str, name: str, out: list[str]):
    """``seg.<attribute>`` (an index read), or None with the reason in ``out``
    when the file cannot be read as one (a directory, FIFO or device)."""
    try:
        return getattr(seg, attribute)
    except KbatchError as exc:
        out.append(f"{name}: is {exc.kind}, not a regular file"
                   if isinstance(exc, NotRegularFileError) else f"{name}: {exc}")
    except OSError as exc:
        out.append(f"{name}: cannot read ({exc.strerror or exc})")
    return None


def verify(path, *, on_segment=None, **options) -> VerifyReport:
    """Check a segment, a partition or a broker data directory (or several),
    local or in object storage (storage keywords as ``kbatch.open_log``:
    ``storage_options``, ``layout``, ``private_key``...).

    Changes no file. ``on_segment(name)`` is called after each segment (for
    progress). Options: those of ``read_segment`` (limits). Keeps in memory
    one decoded chunk and one segment's batch table at a time.
    """
    storage, options = Storage.split(options)
    verify_options(options)
    found = resolve(path, storage)
    if found.kind is PathKind.SEGMENT:
        seg = found.segment()
        report = VerifyReport([verify_segment(seg, **options)])
        if on_segment:
            on_segment(seg.name)
        return report
    reports, problems, notes, ends, reached = [], [], [], {}, {}
    # partitions() refuses two directories naming one partition (t-1, t-01)
    for part in found.partitions():
        log = PartitionLog.at(part, found.storage)
        result = verify_partition(log, options, on_segment)
        reports += result.segments
        problems += result.partition_problems
        key = (log.topic, log.partition)
        ends[key] = (_log_end(log, result.segments), {s.base_offset for s in log.segments})
        reached[key] = (log.segments, _reached(result.segments))
    # what side files, checkpoints, snapshots and commits say was here
    missing = shortfalls(found, ends, reached)
    problems += [m.describe() for m in missing]
    short = {(m.topic, m.partition) for m in missing}
    notes += [f"{t}-{p}: empty (no segment files)" for (t, p), (end, _) in sorted(
        ends.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0))
        if end is None and (t, p) not in short]
    return VerifyReport(reports, problems, notes)


def _reached(reports: list[SegmentReport]) -> dict[int, int]:
    """``{base offset: one past its last offset}`` of the segments whose
    valid data ends at a batch boundary, undamaged (those a lost tail can
    be told of: ``kbatch.lib.missing.cut_segments``)."""
    return {r.base_offset: r.base_offset if r.last_offset is None else r.last_offset + 1
            for r in reports if r.end_reason is None and not r.skipped}


def _log_end(log: PartitionLog, reports: list[SegmentReport]) -> int | None:
    """The log end offset the verified segments give: one past the last
    offset read, or the last segment's base offset (None: no segments)."""
    if not log.segments:
        return None
    lasts = [r.last_offset for r in reports if r.last_offset is not None]
    end = max(lasts) + 1 if lasts else log.segments[-1].base_offset
    return max(end, log.segments[-1].base_offset)


def verify_partition(log: PartitionLog, options: dict, on_segment=None) -> VerifyReport:
    """The segments of one partition checked, and the partition's own
    rules: segment names above the largest offset, base offsets that do not
    follow the previous segment's last offset (a plain log; tiered uploads
    may overlap, the reader gives each offset once)."""
    reports = []
    for seg in log.segments:
        reports.append(verify_segment(seg, last_segment=seg is log.segments[-1], **options))
        if on_segment:
            on_segment(seg.name)
    problems = []
    if log.storage.layout == "plain":
        problems = [f"{log.location.name}/{e.name}: not a segment name (above the largest "
                    "offset)" for e in log.location.list()
                    if SEGMENT_NAME.match(e.name) and segment_base(e.name) is None]
        for prev, cur in zip(reports, reports[1:]):
            if prev.last_offset is not None and cur.base_offset <= prev.last_offset:
                problems.append(f"{log.location.name}/{cur.path.rsplit('/', 1)[-1]}: base "
                                f"offset {cur.base_offset} is not above the previous segment's "
                                f"last offset {prev.last_offset}")
    return VerifyReport(reports, problems)
