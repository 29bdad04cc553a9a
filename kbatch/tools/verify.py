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

import numpy as np

from kbatch.errors import KbatchError
from kbatch.lib.files import NotRegularFileError
from kbatch.lib.index import OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY
from kbatch.lib.log import PartitionLog
from kbatch.lib.logfiles import Segment
from kbatch.lib.open import expect, resolve
from kbatch.lib.paths import SEGMENT_NAME, PathKind, segment_base
from kbatch.lib.records import BatchTable
from kbatch.lib.storage import Storage
from kbatch.tools.evidence import shortfalls
from kbatch.wire import ControlType
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
    if seg.undescribed is not None:     # a tiered upload whose manifest cannot be read
        report = SegmentReport(seg.name, seg.base_offset, 0, last_segment=last_segment)
        report.error = f"its manifest cannot be read: {seg.undescribed}"
        return report
    report = SegmentReport(seg.name, seg.base_offset, seg.size, last_segment=last_segment)
    chunks = seg.source.chunks(opts, chunk_records=CHUNK_RECORDS, chunk_bytes=CHUNK_BYTES)
    if seg.limit is not None:      # a tiered upload: its offsets another one serves
        report.served = 0
        chunks = _count_served(report, chunks, seg.limit)
    markers: list = []
    batches = walk(report, _markers_of(chunks, markers))
    index_problems: list[str] = []
    idx = _side_file(seg, "offset_index", _side_name(seg, ".index"), index_problems)
    time_problems: list[str] = []
    ti = _side_file(seg, "time_index", _side_name(seg, ".timeindex"), time_problems)
    check(report, batches, idx, _side_name(seg, ".index"), ti, _side_name(seg, ".timeindex"))
    report.index_problems = index_problems + report.index_problems
    report.timeindex_problems = time_problems + report.timeindex_problems
    report.index_problems += _entry_sizes(seg) + _txn_index_problems(seg, markers)
    return report


def _markers_of(chunks, out: list):
    """``chunks``, each one's ABORT/COMMIT markers kept in ``out`` as
    ``(producer id, offset) -> type``."""
    for chunk in chunks:
        ctl = chunk.control
        for pid, offset, kind in zip(ctl.producer_id.tolist(), ctl.offset.tolist(),
                                     ctl.type.tolist()):
            if kind in (ControlType.ABORT, ControlType.COMMIT):
                out.append(((pid, offset), kind))
        yield chunk


# bytes per entry of each index file: a size that is not a multiple is
# refused by Kafka's sanityCheck (OffsetIndex, TimeIndex; a broker's load
# runs TransactionIndex's and rebuilds the others of recovered segments)
ENTRY_BYTES = {".index": OFFSET_ENTRY.itemsize, ".timeindex": TIME_ENTRY.itemsize,
               ".txnindex": TXN_ENTRY.itemsize}


def _entry_sizes(seg: Segment) -> list[str]:
    """Index files whose size is not a whole number of entries."""
    out = []
    try:
        files = seg.files()
    except (KbatchError, OSError):
        return out
    for name, entry in files:
        width = next((w for s, w in ENTRY_BYTES.items() if name.endswith(s)), None)
        if width and entry.size % width:
            out.append(f"{name}: {entry.size} bytes, not a whole number of {width}-byte "
                       "entries (Kafka's index sanityCheck refuses such a file)")
    return out


def _txn_index_problems(seg: Segment, markers: list) -> list[str]:
    """The ``.txnindex`` entries Kafka's TransactionIndex refuses (a version
    other than 0, a last offset below the first), and those the segment's
    own markers contradict: a COMMIT where the entry says its producer's
    transaction was aborted, or an entry below the segment's base offset.
    (An entry whose ABORT marker is gone is not one: the cleaner removes
    markers and keeps the entries.)"""
    name = _side_name(seg, ".txnindex")
    out: list[str] = []
    txn = _side_file(seg, "txn_index", name, out)
    if txn is None or not len(txn.producer_id):
        return out
    kinds = dict(markers)
    for k, (pid, first, last, version) in enumerate(zip(
            txn.producer_id.tolist(), txn.first_offset.tolist(), txn.last_offset.tolist(),
            txn.version.tolist())):
        where = f"{name}: entry {k} (producer {pid}, offsets {first}..{last})"
        if version != 0:
            out.append(f"{where}: version {version} (Kafka writes version 0; its reader "
                       "refuses a later one)")
        elif last < first or first < 0 or pid < 0:
            out.append(f"{where}: not an aborted transaction's range")
        elif last < seg.base_offset:
            out.append(f"{where}: its marker would lie below the segment's base offset "
                       f"{seg.base_offset}")
        elif kinds.get((pid, last)) == ControlType.COMMIT:
            out.append(f"{where}: the marker at {last} is a COMMIT, not an ABORT")
    return out


def _count_served(report: SegmentReport, chunks, limit: int):
    """``chunks``, counting in ``report.served`` their records below ``limit``."""
    for chunk in chunks:
        report.served += int((chunk.offset < limit).sum())
        yield chunk


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
        notes += result.notes
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


def _batches(seg, options: dict):
    """Every batch header of ``seg`` (data records not decoded)."""
    opts = verify_options(dict(options))
    chunks = seg.source.chunks(opts, control_only=True, chunk_records=CHUNK_RECORDS,
                               chunk_bytes=CHUNK_BYTES)
    tables = [c.batches for c in chunks]
    return BatchTable.concat(tables) if tables else BatchTable.empty()


def compare_copies(a, b, options: dict) -> list[str]:
    """Where uploads ``a`` and ``b`` hold the same offsets, batches of the
    same offsets whose bytes (CRC) differ: a problem when their leader
    epochs are equal too (Kafka's rule cannot tell the copies apart), else
    decided by the leader-epoch chain (not listed). Batches that do not
    line up at all are a problem."""
    x, y = _batches(a, options), _batches(b, options)
    if not len(x) or not len(y):
        return []
    lo = max(int(x.base_offset.min()), int(y.base_offset.min()))
    hi = min(int(x.last_offset.max()), int(y.last_offset.max()))
    if lo > hi:
        return []
    theirs = {int(o): k for k, o in enumerate(y.base_offset.tolist())}
    out = []
    for k in np.flatnonzero((x.base_offset >= lo) & (x.last_offset <= hi)).tolist():
        base = int(x.base_offset[k])
        j = theirs.get(base)
        same_epoch = j is not None and x.partition_leader_epoch[k] == y.partition_leader_epoch[j]
        if j is None or int(x.last_offset[k]) != int(y.last_offset[j]):
            out.append(f"{a.location.name} and {b.location.name} both hold offset {base} in "
                       "batches that do not line up: which copy Kafka serves is not known")
        elif int(x.crc[k]) != int(y.crc[j]) and same_epoch:
            out.append(f"{a.location.name} and {b.location.name} hold different bytes for "
                       f"offsets {base}..{int(x.last_offset[k])} in the same leader epoch "
                       f"{int(x.partition_leader_epoch[k])}: which copy Kafka serves is not known")
        if len(out) >= 3:
            break
    return out


def _diverged_copies(log: PartitionLog, options: dict) -> list[str]:
    """``compare_copies`` of every two uploads of ``log`` that hold some
    of the same offsets: each one read with the uploads it makes redundant,
    and each one with the next (``kbatch.lib.uploads``)."""
    out = []
    for k, seg in enumerate(log.segments):
        if seg.undescribed is not None:
            continue        # its manifest cannot be read: its report says so
        for other in seg.shadowed:
            out += compare_copies(seg, other, options)
        nxt = log.segments[k + 1] if k + 1 < len(log.segments) else None
        if nxt is not None and nxt.undescribed is not None:
            continue
        if nxt is not None and seg.claimed_end is not None and seg.claimed_end >= nxt.base_offset:
            out += compare_copies(seg, nxt, options)
    return [f"{log.location.name}: {p}" for p in out]


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
    problems, notes = [], []
    if log.storage.layout == "tiered":     # the overlap rule's (kbatch.lib.uploads)
        for seg in log.segments:
            notes += [f"{log.location.name}: {n}" for n in seg.notes]
            problems += [f"{log.location.name}: {u}" for u in seg.undecided]
        problems += _diverged_copies(log, options)
    if log.storage.layout == "plain":
        problems = [f"{log.location.name}/{e.name}: not a segment name (above the largest "
                    "offset)" for e in log.location.list()
                    if SEGMENT_NAME.match(e.name) and segment_base(e.name) is None]
        for prev, cur in zip(reports, reports[1:]):
            if prev.last_offset is not None and cur.base_offset <= prev.last_offset:
                problems.append(f"{log.location.name}/{cur.path.rsplit('/', 1)[-1]}: base "
                                f"offset {cur.base_offset} is not above the previous segment's "
                                f"last offset {prev.last_offset}")
    return VerifyReport(reports, problems, notes)
