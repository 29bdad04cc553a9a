"""Per-segment and per-partition statistics (``kbatch stats``).

Exact counts from a full decode, chunk by chunk (bounded memory): records,
batches, control records, offsets, time range, codecs, bytes, producers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from kbatch.wire import CODEC_NAMES
from kbatch.errors import CorruptRecordError
from kbatch.lib.log import LogDir, PartitionLog
from kbatch.lib.paths import PathKind, resolve, segment_base
from kbatch.lib.segment import iter_segment


@dataclass
class SegmentStats:
    path: str
    bytes: int
    records: int = 0
    batches: int = 0
    control_records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    codecs: list = field(default_factory=list)
    magics: list = field(default_factory=list)
    producers: list = field(default_factory=list)
    transactional_batches: int = 0
    valid_bytes: int = 0
    end_reason: str | None = None
    skipped: list = field(default_factory=list)   # damaged ranges passed over (dicts)

    def as_dict(self) -> dict:
        return asdict(self)


def _is_last_segment(path: Path) -> bool:
    """No segment file with a larger base offset beside ``path``."""
    base = segment_base(path.name)
    if base is None:
        return True
    try:
        return not any((b := segment_base(p.name)) is not None and b > base
                       for p in path.parent.iterdir())
    except OSError:
        return True


def segment_stats(path, *, last_segment: bool | None = None, **options) -> SegmentStats:
    """Statistics of one segment file (keeps one chunk in memory).

    Options: those of ``iter_segment``. A segment that is not the last of
    its directory (``last_segment``, found from the file names when None)
    must end at a batch boundary: a truncated batch or zero padding there
    raises ``CorruptRecordError`` (``on_corrupt="stop"``: ``end_reason``
    says "corrupt"; ``"skip"``: listed in ``skipped``), so no damaged
    segment is silently counted short.
    """
    path = Path(path)
    if last_segment is None:
        last_segment = _is_last_segment(path)
    # offsets and timestamps are all it needs: the record loop skims the rest
    options.setdefault("columns", ("offset", "timestamp"))
    return stats_of_chunks(iter_segment(path, **options), str(path), path.stat().st_size,
                           last_segment, options.get("on_corrupt", "raise"))


def remote_segment_stats(seg, *, last_segment: bool = True, **options) -> SegmentStats:
    """``segment_stats`` of a remote segment (``kbatch.lib.remote.log.
    RemoteSegment``), read in ranges; keeps one chunk in memory."""
    from kbatch.lib.remote.scan import scan
    from kbatch.lib.segment import DecodeOptions, check_options
    check_options("stats", options)
    options.setdefault("columns", ("offset", "timestamp"))
    src = seg.source()
    return stats_of_chunks(scan(src, DecodeOptions(**options), chunk_records=1 << 20,
                                chunk_bytes=32 << 20),
                           seg.url, src.size, last_segment, options.get("on_corrupt", "raise"))


def stats_of_chunks(chunks, path: str, size: int, last_segment: bool,
                    on_corrupt: str) -> SegmentStats:
    """The statistics of one segment's chunks (``path``: its name in them)."""
    st = SegmentStats(path, size)
    codecs, magics, producers = set(), set(), set()
    for chunk in chunks:
        bt = chunk.batches
        st.records += len(chunk)
        st.batches += len(bt)
        st.control_records += len(chunk.control)
        st.transactional_batches += int(bt.is_transactional.sum())
        codecs.update(bt.codec.tolist())
        magics.update(bt.magic.tolist())
        producers.update(np.unique(bt.producer_id[bt.producer_id >= 0]).tolist())
        if len(chunk):
            if st.first_offset is None:
                st.first_offset = int(chunk.offset[0])
            st.last_offset = int(chunk.offset[-1])
            known = chunk.timestamp[chunk.timestamp >= 0]
            if len(known):
                lo, hi = int(known.min()), int(known.max())
                st.min_timestamp = lo if st.min_timestamp is None else min(st.min_timestamp, lo)
                st.max_timestamp = hi if st.max_timestamp is None else max(st.max_timestamp, hi)
        st.skipped += [gap._asdict() for gap in chunk.skipped]
        if chunk.end is not None:
            st.valid_bytes = chunk.end.valid_bytes
            st.end_reason = chunk.end.reason
            trailing = chunk.end.trailing_bytes
            if not last_segment and st.end_reason in ("truncated", "zero_padding"):
                _inner_damage(st, path, trailing, on_corrupt)
    st.codecs = [CODEC_NAMES.get(c, str(c)) for c in sorted(codecs)]
    st.magics = sorted(magics)
    st.producers = sorted(producers)
    return st


def _inner_damage(st: SegmentStats, path: Path, trailing: int, on_corrupt: str) -> None:
    what = "truncated batch" if st.end_reason == "truncated" else "zero padding"
    error = CorruptRecordError(
        f"{what} ({trailing} bytes) at the end of a segment that is not the last of its "
        "partition (only the active segment can have a torn tail)",
        path=str(path), position=st.valid_bytes, batch_position=st.valid_bytes)
    if on_corrupt == "raise":
        raise error
    if on_corrupt == "stop":
        st.end_reason = "corrupt"
        return
    st.skipped.append({"path": str(path), "start": st.valid_bytes,
                       "stop": st.valid_bytes + trailing, "reason": st.end_reason,
                       "offset_before": st.last_offset, "offset_after": None,
                       "error": str(error)})


def segment_files(path) -> list[tuple[str | None, int | None, Path]]:
    """``(topic, partition, file)`` for a file, a partition, a data directory
    or several (classified by ``kbatch.lib.paths.resolve``; a wrong path raises
    ``PathError``)."""
    found = resolve(path)
    if found.kind is PathKind.SEGMENT:
        return [(found.topic, found.partition, found.path)]
    if found.kind is PathKind.PARTITION:
        log = PartitionLog(found.path)
        return [(log.topic, log.partition, s.path) for s in log.segments]
    return [(p.topic, p.partition, s.path) for d in found.paths
            for p in LogDir(d).partitions for s in p.segments]


def summarize(stats: list[SegmentStats]) -> dict:
    """Totals over several segments (a partition, a topic, everything)."""
    firsts = [s.first_offset for s in stats if s.first_offset is not None]
    lasts = [s.last_offset for s in stats if s.last_offset is not None]
    mins = [s.min_timestamp for s in stats if s.min_timestamp is not None]
    maxs = [s.max_timestamp for s in stats if s.max_timestamp is not None]
    return {
        "segments": len(stats),
        "records": sum(s.records for s in stats),
        "batches": sum(s.batches for s in stats),
        "control_records": sum(s.control_records for s in stats),
        "bytes": sum(s.bytes for s in stats),
        "first_offset": min(firsts) if firsts else None,
        "last_offset": max(lasts) if lasts else None,
        "min_timestamp": min(mins) if mins else None,
        "max_timestamp": max(maxs) if maxs else None,
        "codecs": sorted({c for s in stats for c in s.codecs}),
        "producers": len({p for s in stats for p in s.producers}),
    }
