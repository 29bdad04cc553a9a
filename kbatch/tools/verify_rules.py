"""The rules ``verify`` (``kbatch.tools.verify``) checks a segment by,
wherever the door finds its bytes (a file, an object, a tiered segment's
chunks): the reports, the walk over its decoded chunks, and the checks of
its batches and its offset and time indexes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kbatch.lib.records import BatchTable
from kbatch.lib.segment import DecodeOptions, check_options


@dataclass
class SegmentReport:
    path: str
    base_offset: int
    size: int
    batches: int = 0
    records: int = 0
    control_records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    valid_bytes: int = 0
    trailing_bytes: int = 0
    end_reason: str | None = None
    error: str | None = None
    crc_failures: list = field(default_factory=list)       # (position, base_offset)
    offset_problems: list = field(default_factory=list)    # text
    index_problems: list = field(default_factory=list)     # text
    timeindex_problems: list = field(default_factory=list)  # text
    skipped: list = field(default_factory=list)   # SkippedRange: damaged bytes passed over
    last_segment: bool = True      # False: a torn tail or zero padding is damage
    served: int | None = None      # tiered: its records the partition reads (None: all)

    @property
    def ok(self) -> bool:
        return not (self.crc_failures or self.offset_problems or self.index_problems
                    or self.timeindex_problems or self.error or self.skipped
                    or self.end_reason in ("truncated", "corrupt")
                    or (not self.last_segment and self.end_reason == "zero_padding"))

    def problems(self) -> list[str]:
        out = [f"CRC mismatch in batch at byte {pos} (base offset {base})"
               for pos, base in self.crc_failures]
        out += self.offset_problems + self.index_problems + self.timeindex_problems
        out += [damaged_range(gap) for gap in self.skipped]
        if self.error and not self.skipped:
            out.append(f"corrupt data: {self.error}")
        elif self.end_reason == "truncated":
            out.append(f"last batch truncated: {self.trailing_bytes} bytes after byte "
                       f"{self.valid_bytes}" + ("" if self.last_segment else
                                                " in a segment that is not the last one"))
        elif self.end_reason == "zero_padding" and not self.last_segment:
            out.append(f"{self.trailing_bytes} zero bytes after byte {self.valid_bytes} in a "
                       f"segment that is not the last one (Kafka trims a segment when it rolls)")
        return out


def damaged_range(gap) -> str:
    """A ``SkippedRange`` in words (what ``verify`` and ``stats`` print)."""
    after = "the end of the file" if gap.offset_after is None else f"offset {gap.offset_after}"
    before = "the start" if gap.offset_before is None else f"offset {gap.offset_before}"
    return (f"damaged bytes {gap.start}-{gap.stop} ({gap.reason}) between {before} and "
            f"{after}: {gap.error or gap.reason}")


@dataclass
class VerifyReport:
    segments: list[SegmentReport]
    partition_problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # not problems (empty partitions)

    @property
    def ok(self) -> bool:
        return not self.partition_problems and all(s.ok for s in self.segments)

    @property
    def batches(self) -> int:
        return sum(s.batches for s in self.segments)

    @property
    def records(self) -> int:
        return sum(s.records if s.served is None else s.served for s in self.segments)


CHUNK_RECORDS, CHUNK_BYTES = 1 << 18, 64 << 20


def verify_options(options: dict) -> DecodeOptions:
    """A check reads in skip mode (every damaged range listed) with CRC
    failures reported, not raised."""
    check_options("verify", options)
    options = {k: v for k, v in options.items() if k != "on_corrupt"}
    return DecodeOptions(**{"validate_crc": "report", **options, "on_corrupt": "skip"})


def walk(report: SegmentReport, chunks) -> BatchTable:
    """Fill ``report`` from a segment's decoded chunks; its batch table."""
    tables = []
    for chunk in chunks:
        tables.append(chunk.batches)
        report.skipped += chunk.skipped
        report.records += len(chunk)
        report.control_records += len(chunk.control)
        if chunk.end is not None:
            report.valid_bytes = chunk.end.valid_bytes
            report.trailing_bytes = chunk.end.trailing_bytes
            report.end_reason = chunk.end.reason
            if chunk.end.error is not None:
                report.error = str(chunk.end.error)
    if report.skipped:
        first, final = report.skipped[0], report.skipped[-1]
        report.error = first.error or first.reason
        if final.offset_after is None:   # no valid batch after the last gap
            report.valid_bytes, report.trailing_bytes = final.start, final.stop - final.start
            report.end_reason = "corrupt"
    return BatchTable.concat(tables) if tables else BatchTable.empty()


def check(report: SegmentReport, batches: BatchTable, idx, idx_name: str, ti,
           ti_name: str) -> None:
    """The batch-level checks and the index checks (``idx``/``ti``: the
    loaded offset and time index, None when they could not be read)."""
    report.batches = len(batches)
    if len(batches):
        report.first_offset = int(batches.base_offset[0])
        report.last_offset = int(batches.last_offset[-1])
    bad = np.flatnonzero(batches.crc_valid == 0)
    report.crc_failures = [(int(batches.position[i]), int(batches.base_offset[i])) for i in bad]
    report.offset_problems = _offset_problems(batches, report.base_offset)
    report.index_problems = _index_problems(idx, idx_name, batches, report.valid_bytes)
    report.timeindex_problems = _timeindex_problems(ti, ti_name, batches)


def offset_violations(batches: BatchTable, base_offset: int) -> tuple[bool, np.ndarray,
                                                                         np.ndarray]:
    """The offset rules of a segment's batches: ``(below, back, inverted)``:
    the rows of batches whose last offset lies below the segment's base
    offset (LogSegment.recover's ensureOffsetInRange refuses them; a first
    batch starting below the base, as a legacy wrapper named by its last
    offset does, is in range), the rows of batches that do not start above
    the previous batch's last offset, and the rows whose last offset is
    below their base offset."""
    below = np.flatnonzero(batches.last_offset < base_offset)
    back = np.flatnonzero(batches.base_offset[1:] <= batches.last_offset[:-1]) + 1
    inverted = np.flatnonzero(batches.last_offset < batches.base_offset)
    return below, back, inverted


def first_damage(report: SegmentReport, batches: BatchTable) -> tuple[int, str] | None:
    """Where a segment's valid prefix ends by the rules ``check`` reports
    (``report`` and ``batches`` from ``walk`` and ``check``): ``(byte,
    reason)`` of the first batch that fails its CRC or the offset rules,
    the first damaged range, or a truncated, zero-padded or corrupt end;
    None when every byte of the segment is valid. Recovery (``kbatch.
    tools.recover``) truncates there, as Kafka's LogSegment.recover does."""
    cuts = []
    bad = np.flatnonzero(batches.crc_valid == 0)
    if len(bad):
        cuts.append((int(batches.position[bad[0]]), "crc mismatch"))
    below, back, inverted = offset_violations(batches, report.base_offset)
    if len(below):
        cuts.append((int(batches.position[below[0]]),
                     "last offset below the segment's base offset"))
    for rows, why in ((back, "offsets do not increase"),
                      (inverted, "last offset below the base offset")):
        if len(rows):
            cuts.append((int(batches.position[rows[0]]), why))
    if report.skipped:
        gap = report.skipped[0]
        cuts.append((gap.start, gap.error or gap.reason))
    if report.end_reason in ("truncated", "zero_padding", "corrupt"):
        reason = {"truncated": "truncated batch", "zero_padding": "zero padding"}.get(
            report.end_reason, report.error or "corrupt batch")
        cuts.append((report.valid_bytes, reason))
    return min(cuts, key=lambda c: c[0]) if cuts else None


def _offset_problems(batches: BatchTable, base_offset: int) -> list[str]:
    out = []
    below, back, inverted = offset_violations(batches, base_offset)
    for i in below[:100]:
        out.append(f"batch at byte {int(batches.position[i])} ends at offset "
                   f"{int(batches.last_offset[i])}, below the segment's base offset "
                   f"{base_offset}")
    for i in back[:100]:
        out.append(f"non-monotonic offsets: batch at byte {int(batches.position[i])} starts at "
                   f"{int(batches.base_offset[i])} after offset {int(batches.last_offset[i - 1])}")
    for i in inverted[:100]:
        out.append(f"batch at byte {int(batches.position[i])} ends at offset "
                   f"{int(batches.last_offset[i])} before its base offset {int(batches.base_offset[i])}")
    return out


def _index_problems(idx, name: str, batches: BatchTable, valid_bytes: int) -> list[str]:
    out: list[str] = []
    if idx is None or len(idx) == 0:
        return out
    if np.any(np.diff(idx.offsets) <= 0) or np.any(np.diff(idx.positions) <= 0):
        out.append(f"{name}: entries do not increase")
    rows = np.searchsorted(batches.position, idx.positions)
    append_ends = set(batches.last_offset.tolist())
    for k, (offset, position) in enumerate(zip(idx.offsets.tolist(), idx.positions.tolist())):
        if position >= valid_bytes and not (position == 0 and k == 0):
            out.append(f"{name}: entry {k} (offset {offset}) points to byte "
                       f"{position}, past the valid data ({valid_bytes} bytes)")
            continue
        r = int(rows[k])
        if r >= len(batches) or int(batches.position[r]) != position:
            if len(batches):
                out.append(f"{name}: entry {k} (offset {offset}) points to byte "
                           f"{position}, which is not the start of a batch")
            continue
        # an entry names the last offset of an append that starts at its
        # position (several batches when a follower or the cleaner appended)
        if int(batches.base_offset[r]) > offset or offset not in append_ends:
            out.append(f"{name}: index offset {offset}, log offset "
                       f"{int(batches.last_offset[r])} at byte {position}")
    return out[:100]


def _timeindex_problems(ti, name: str, batches: BatchTable) -> list[str]:
    out: list[str] = []
    if ti is None or len(ti) == 0:
        return out
    back = np.flatnonzero(np.diff(ti.timestamps) < 0)
    for k in back[:20]:
        out.append(f"{name}: out of order timestamp {int(ti.timestamps[k + 1])} after "
                   f"{int(ti.timestamps[k])}")
    if not len(batches):
        return out + [f"{name}: {len(ti)} entries but the log has no batches"]
    # the batch holding each entry's offset must exist and carry its timestamp,
    # and no batch up to it may be newer (the index holds a running maximum)
    rows = np.searchsorted(batches.last_offset, ti.offsets, side="left")
    running_max = np.maximum.accumulate(batches.max_timestamp) if len(batches) else None
    for k, (ts, offset) in enumerate(zip(ti.timestamps.tolist(), ti.offsets.tolist())):
        r = int(rows[k])
        if r >= len(batches) or int(batches.base_offset[r]) > offset:
            out.append(f"{name}: indexed offset {offset} is not found in the log")
        elif int(batches.max_timestamp[r]) != ts and int(batches.magic[r]) >= 1:
            out.append(f"{name}: index timestamp {ts}, log timestamp "
                       f"{int(batches.max_timestamp[r])} (offset {offset})")
        elif int(running_max[r]) > ts:
            out.append(f"{name}: index timestamp {ts} at offset {offset} is below the "
                       f"largest timestamp before it ({int(running_max[r])})")
    return out[:100]
