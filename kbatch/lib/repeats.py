"""Offsets a read meets more than once.

Kafka never writes an offset twice into a partition: each segment starts
above the last offset of the one before it, and batches go up within a
segment. A copy can break that (two generations of a segment side by side,
a restore over a newer directory, overlapping uploads copied by hand): the
files then hold some offsets twice. A broker serves each offset once, from
the segment that holds it first (``UnifiedLog.read``: the floor segment of
the fetch offset, records below it skipped), so a consumer never sees the
second copy. A read returns what the files hold, every copy, and warns once
on the ``kbatch`` logger naming the offsets it met again, where they are
and what a consumer would see instead: such an answer (and the table view
of it) is not a partition a broker could have served.

    repeated_offsets(batches)   the first offsets a batch table holds again
    warn_repeated(records, where)   for a read's records
    RepeatWatch(where).see(chunk)   for chunks read one after another (iter)
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger("kbatch")


def repeated_offsets(batches, before: int | None = None) -> tuple[int, int, int] | None:
    """``(row, first, last)``: the first batch (its row in ``batches``, in
    read order) starting at or below an offset an earlier batch holds (or
    at or below ``before``: the last offset of the batches read before
    these), and the offsets ``[first, last]`` it holds again; None when
    offsets only go up."""
    if not len(batches) or (before is None and len(batches) < 2):
        return None
    last = np.asarray(batches.last_offset, np.int64)
    base = np.asarray(batches.base_offset, np.int64)
    seen = np.maximum.accumulate(last)
    if before is not None:
        seen = np.maximum(seen, before)
        again = np.flatnonzero(base <= np.concatenate(([before], seen[:-1])))
    else:
        again = np.flatnonzero(base[1:] <= seen[:-1]) + 1
    if not len(again):
        return None
    row = int(again[0])
    prior = before if row == 0 else int(seen[row - 1])
    return row, int(base[row]), int(min(prior, int(last[row])))


def warn_repeated(records, where: str) -> None:
    """Warn once if ``records`` (a read's ``Records``) met offsets twice."""
    _warn(records.batches, records.sources, where, None)


def _warn(batches, sources, where: str, before: int | None) -> bool:
    """The warning, if ``batches`` (their files: ``sources``) hold offsets
    again (``before``: as ``repeated_offsets`` takes it). Returns whether
    it warned."""
    found = repeated_offsets(batches, before)
    if found is None:
        return False
    row, first, last = found
    source = sources[int(batches.source[row])]
    position = int(batches.position[row])
    log.warning("%s: offsets %d..%d appear again at byte %d of %s (its offsets overlap those "
                "read before it): the read returns every copy the files hold, but a broker "
                "serves each offset once, from the segment holding it first, so a consumer "
                "would not see these again (kbatch verify reports the overlap)",
                where, first, last, position, source, extra={"repeated": (first, last)})
    return True


class RepeatWatch:
    """``warn_repeated`` over chunks read one after another (``iter``, the
    batch rows of ``level="batches"``): warns once, at the first chunk
    holding an offset a chunk before it held. Keeps the highest offset seen."""

    def __init__(self, where: str):
        self.where = where
        self.top: int | None = None
        self.warned = False

    def see(self, chunk, limit: int | None = None) -> None:
        """``chunk``: a chunk as decoded, before it is trimmed to a range;
        ``limit``: a tiered upload's (``Segment.limit``): its batches from
        there on are another upload's to serve, and not counted (as
        ``read()`` leaves them out before it looks)."""
        batches = chunk.batches
        if limit is not None and len(batches):
            batches = batches.take(np.asarray(batches.base_offset, np.int64) < limit)
        if self.warned or not len(batches):
            return
        self.warned = _warn(batches, chunk.sources, self.where, self.top)
        top = int(np.asarray(batches.last_offset, np.int64).max())
        self.top = top if self.top is None else max(self.top, top)


__all__ = ["RepeatWatch", "repeated_offsets", "warn_repeated"]
