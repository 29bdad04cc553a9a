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
    warn_repeated(records, where)
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger("kbatch")


def repeated_offsets(batches) -> tuple[int, int, int] | None:
    """``(row, first, last)``: the first batch (its row in ``batches``, in
    read order) starting at or below an offset an earlier batch holds, and
    the offsets ``[first, last]`` it holds again; None when offsets only go
    up."""
    if len(batches) < 2:
        return None
    seen = np.maximum.accumulate(np.asarray(batches.last_offset, np.int64))
    base = np.asarray(batches.base_offset, np.int64)
    again = np.flatnonzero(base[1:] <= seen[:-1]) + 1
    if not len(again):
        return None
    row = int(again[0])
    return row, int(base[row]), int(min(seen[row - 1], int(batches.last_offset[row])))


def warn_repeated(records, where: str) -> None:
    """Warn once if ``records`` (a read's ``Records``) met offsets twice."""
    found = repeated_offsets(records.batches)
    if found is None:
        return
    row, first, last = found
    source = records.sources[int(records.batches.source[row])]
    position = int(records.batches.position[row])
    log.warning("%s: offsets %d..%d appear again at byte %d of %s (its offsets overlap those "
                "read before it): the read returns every copy the files hold, but a broker "
                "serves each offset once, from the segment holding it first, so a consumer "
                "would not see these again (kbatch verify reports the overlap)",
                where, first, last, position, source, extra={"repeated": (first, last)})


__all__ = ["repeated_offsets", "warn_repeated"]
