"""Timestamp filters Spark pushes down (``spark.sql.python.filterPushdown.
enabled``): bounds that prune records, batches and (with ``useIndex``)
whole segments, while Spark still applies the exact filter.

A filter's value is a ``datetime`` whose time zone handling belongs to
Spark (a naive value is the worker's local time); kbatch does not guess it:
each bound is widened by a day (more than any UTC offset), so pruning never
drops a record the filter keeps, and the filter is handed back to Spark.
Records without a timestamp (magic 0, ``-1``) are null in the ``timestamp``
column, which no comparison keeps: they are pruned too.

    timestamp >  v, >= v, = v   ->  lo = v - 1 day        (ms, inclusive)
    timestamp <  v, <= v, = v   ->  hi = v + 1 day + 1 ms (ms, exclusive)
"""

from __future__ import annotations

import calendar
from datetime import date, datetime

import numpy as np
from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan,
                                    LessThanOrEqual)

from kbatch.lib.records import Records

DAY_MS = 86_400_000


def to_millis(value) -> int | None:
    """A filter value in ms since the epoch, read as UTC (the day of margin
    covers any other zone); None for a value that is not a date or time."""
    if isinstance(value, datetime):
        secs = calendar.timegm(value.utctimetuple() if value.tzinfo else value.timetuple())
        return secs * 1000 + value.microsecond // 1000
    if isinstance(value, date):
        return calendar.timegm(value.timetuple()) * 1000
    return None


def narrow(f, lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
    """``(lo, hi)`` narrowed by one pushed filter on ``timestamp``."""
    ms = to_millis(getattr(f, "value", None))
    if ms is None:
        return lo, hi
    if isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)):
        lo = ms - DAY_MS if lo is None else max(lo, ms - DAY_MS)
    if isinstance(f, (LessThan, LessThanOrEqual, EqualTo)):
        hi = ms + DAY_MS + 1 if hi is None else min(hi, ms + DAY_MS + 1)
    return lo, hi


def prune(chunk: Records, lo: int | None, hi: int | None) -> Records:
    """``chunk`` without the records outside ``[lo, hi)`` (or without a
    timestamp); itself when there are no bounds or nothing to prune."""
    if lo is None and hi is None or not len(chunk):
        return chunk
    ts = chunk.timestamp
    keep = ts != -1
    if lo is not None:
        keep &= ts >= lo
    if hi is not None:
        keep &= ts < hi
    if keep.all():
        return chunk
    return chunk.take(np.flatnonzero(keep))


def segment_older_than(segment, lo: int) -> bool:
    """A rolled segment whose every record is stamped before ``lo``. Its
    time index's last entry (the largest timestamp Kafka appends when it
    rolls the segment) says which segments may be; that is confirmed from
    the segment's own batch headers (the cached walk): every batch magic 2
    with a max timestamp below ``lo``, and the walk reaching the end of the
    file (damage past it is the read's to report). An index is a hint: a
    stale or damaged copy must not drop records. No usable index: False."""
    try:
        ti = segment.time_index
    except Exception:   # noqa: BLE001 - no usable index: read the segment
        return False
    if not len(ti) or ti.max_timestamp() >= lo:
        return False
    bounds = segment.batch_bounds()
    if not len(bounds) or int(bounds["position"][-1] + bounds["size"][-1]) != segment.size:
        return False
    return bool((bounds["magic"] == 2).all()) and int(bounds["max_timestamp"].max()) < lo
