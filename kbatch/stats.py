"""Per-segment and per-partition statistics (``kbatch stats``).

Exact counts from a full decode, chunk by chunk (bounded memory): records,
batches, control records, offsets, time range, codecs, bytes, producers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from kbatch.compression import CODEC_NAMES
from kbatch.log import LogDir, PartitionLog, SEGMENT_NAME, parse_partition_dir
from kbatch.segment import iter_segment


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

    def as_dict(self) -> dict:
        return asdict(self)


def segment_stats(path, **options) -> SegmentStats:
    """Statistics of one segment file (keeps one chunk in memory)."""
    path = Path(path)
    st = SegmentStats(str(path), path.stat().st_size)
    codecs, magics, producers = set(), set(), set()
    for chunk in iter_segment(path, **options):
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
        if chunk.end is not None:
            st.valid_bytes = chunk.end.valid_bytes
            st.end_reason = chunk.end.reason
    st.codecs = [CODEC_NAMES.get(c, str(c)) for c in sorted(codecs)]
    st.magics = sorted(magics)
    st.producers = sorted(producers)
    return st


def segment_files(path: Path) -> list[tuple[str | None, int | None, Path]]:
    """``(topic, partition, file)`` for a file, a partition or a data directory."""
    path = Path(path)
    if path.is_file():
        parsed = parse_partition_dir(path.parent.name) or (None, None)
        return [(*parsed, path)]
    if parse_partition_dir(path.name) or any(SEGMENT_NAME.match(p.name) for p in path.iterdir()):
        log = PartitionLog(path)
        return [(log.topic, log.partition, s.path) for s in log.segments]
    return [(p.topic, p.partition, s.path) for p in LogDir(path).partitions for s in p.segments]


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
