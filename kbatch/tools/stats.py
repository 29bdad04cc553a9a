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
from kbatch.lib.log import PartitionLog
from kbatch.lib.logfiles import Segment
from kbatch.lib.open import expect, resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.segment import decode_options
from kbatch.lib.storage import Storage
from kbatch.lib.uploads import served
from kbatch.wire import UNBOUNDED


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
    end_offset: int | None = None   # one past the last batch's last offset (markers count)
    end_reason: str | None = None
    error: str | None = None      # what ended it ("corrupt": on_corrupt="stop" met damage)
    skipped: list = field(default_factory=list)   # damaged ranges passed over (dicts)

    def as_dict(self) -> dict:
        return asdict(self)


def segment_stats(segment, *, last_segment: bool | None = None, **options) -> SegmentStats:
    """Statistics of one segment (a ``Segment`` from ``segment_files``, a
    path or a URL; storage keywords as ``kbatch.open_log``); keeps one chunk
    in memory.

    A tiered upload of a partition counts only the offsets it serves
    (``Segment.limit``, ``kbatch.lib.uploads``).

    Options: those of ``iter_segment``. A segment that is not the last of
    its partition (``last_segment=False``; None: as its directory says) must
    end at a batch boundary: a
    truncated batch or zero padding there raises ``CorruptRecordError``
    (``on_corrupt="stop"``: ``end_reason`` says "corrupt"; ``"skip"``:
    listed in ``skipped``), so no damaged segment is silently counted short.
    """
    storage, options = Storage.split(options)
    seg = segment if isinstance(segment, Segment) else expect(
        segment, PathKind.SEGMENT, what="segment_stats measures one segment",
        storage=storage).segment()
    if last_segment is None:
        last_segment = seg.last
    # offsets and timestamps are all it needs: the record loop skims the rest
    options.setdefault("columns", ("offset", "timestamp"))
    opts = decode_options("stats", options)
    chunks = seg.source.chunks(opts, chunk_records=1 << 20, chunk_bytes=32 << 20)
    if seg.limit is not None:     # a tiered upload: what another one serves is counted there
        chunks = (served(chunk, seg.limit) for chunk in chunks)
    return stats_of_chunks(chunks, seg.name, seg.size, last_segment, opts.on_corrupt)


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
        if len(bt):
            last = int(bt.last_offset.max()) + 1
            st.end_offset = last if st.end_offset is None else max(st.end_offset, last)
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
            st.error = None if chunk.end.error is None else str(chunk.end.error)
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
        st.end_reason, st.error = "corrupt", str(error)
        return
    st.skipped.append({"path": str(path), "start": st.valid_bytes,
                       "stop": st.valid_bytes + trailing, "reason": st.end_reason,
                       "offset_before": st.last_offset, "offset_after": None,
                       "error": str(error)})


def segment_files(path, storage: Storage | None = None) -> list[tuple]:
    """``(topic, partition, Segment, last of its partition)`` of a segment,
    a partition, a data directory or several, local or in object storage
    (named by the door, ``kbatch.lib.open``; a wrong path raises
    ``PathError``). Lists; reads no segment."""
    found = resolve(path, storage)
    if found.kind is PathKind.SEGMENT:
        seg = found.segment()
        return [(found.topic, found.partition, seg, seg.last)]
    out = []
    for part in found.partitions():
        log = PartitionLog.at(part, found.storage)
        out += [(log.topic, log.partition, s, s is log.segments[-1]) for s in log.segments]
    return out


def partition_files(path, storage: Storage | None = None) -> list[tuple]:
    """``(topic, partition, [Segment])`` of every partition under ``path``
    (a segment: its partition, with that segment alone), partitions without
    segments included. Lists; reads no segment."""
    found = resolve(path, storage)
    if found.kind is PathKind.SEGMENT:
        return [(found.topic, found.partition, [found.segment()])]
    out = []
    for part in found.partitions():
        log = PartitionLog.at(part, found.storage)
        out.append((log.topic, log.partition, list(log.segments)))
    return out


def log_bounds(segments: list, stats: list["SegmentStats"]) -> tuple[int | None, int | None]:
    """``(log start offset, log end offset)`` of a partition's segments:
    the first segment's base offset, and one past the last offset read (or
    the last segment's base offset: a partition holding only an empty
    segment at B starts and ends at B). ``(None, None)``: no segments."""
    if not segments:
        return None, None
    ends = [st.end_offset for st in stats if st.end_offset is not None]
    end = max(ends) if ends else segments[-1].base_offset
    return segments[0].base_offset, max(end, segments[-1].base_offset)


def reached(segments: list, stats: list[SegmentStats]) -> dict[int, int]:
    """``{base offset: one past its last offset}`` of the counted segments
    (``stats`` of some of ``segments``) whose valid data ends at a batch
    boundary, undamaged (those a lost tail can be told of:
    ``kbatch.lib.missing.cut_segments``)."""
    base = {seg.name: seg.base_offset for seg in segments}
    return {base[st.path]: base[st.path] if st.end_offset is None else st.end_offset
            for st in stats if st.end_reason is None and not st.skipped}


def batch_level_ends(found, table, damage: list[dict]) -> tuple[dict, dict]:
    """``(ends, reached)`` of a batch-level read of ``found`` (its
    ``table`` and ``table_damage``) for ``kbatch.tools.evidence.shortfalls``:
    each partition's log end from a walk over its last segment's tail
    (``kbatch.lib.plan.log_end_offset``), and the segments read whole to a
    batch boundary with one past the last offset of each. The rows give a
    lower bound (read_committed leaves some out): a segment whose rows end
    short of the next one is walked (its batch headers) for its end. A
    partition the read met damage in: its log end is not weighed
    (``UNBOUNDED``) and its damaged segments are not looked at."""
    from kbatch.lib.plan import log_end_offset
    if found.kind is PathKind.SEGMENT:
        return {}, {}          # a segment alone: nothing to weigh it against
    tops = {}
    if table.num_rows:
        grouped = table.group_by("segment").aggregate([("lastOffset", "max")])
        tops = dict(zip(grouped.column("segment").to_pylist(),
                        grouped.column("lastOffset_max").to_pylist()))
    hurt = {(d["topic"], d["partition"]): {g["path"] for g in d["skipped"]}
            | {(d["stopped"] or {}).get("path")} for d in damage}
    ends, reached = {}, {}
    for topic, partition, segs in partition_files(found):
        key = (topic, partition)
        bases = {s.base_offset for s in segs}
        if not segs:
            ends[key] = (None, bases)
            continue
        end = UNBOUNDED if key in hurt else log_end_offset(segs, True)
        ends[key] = (end, bases)
        whole = {}
        for seg, after in zip(segs, segs[1:]):
            if seg.source.name in hurt.get(key, ()):
                continue
            low = tops.get(seg.source.name)
            if low is not None and low + 1 >= after.base_offset:
                whole[seg.base_offset] = low + 1
                continue
            bounds = seg.batch_bounds()
            stop = int(bounds["position"][-1] + bounds["size"][-1]) if len(bounds) else 0
            if stop == seg.size:        # its valid data ends at a batch boundary
                whole[seg.base_offset] = int(bounds["last_offset"].max()) + 1 if len(bounds) \
                    else seg.base_offset
        reached[key] = (segs, whole)
    return ends, reached


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
