"""What a consumer could have seen: each partition's visible offset range
from the broker's checkpoint files.

A consumer fetches offsets in ``[log start offset, high watermark)``: the log
start offset from ``log-start-offset-checkpoint`` (records below it were
deleted by retention or DeleteRecords but may still be on disk until their
segment goes), the high watermark from ``replication-offset-checkpoint``
(records above it were not yet replicated to the whole ISR when the broker
wrote the file). A partition missing from a file is not limited on that side
(``None``). The checkpoints are written periodically, so this is the view at
the last checkpoint, which is what a backup of the directory holds.
"""

from __future__ import annotations

from kbatch.lib.checkpoints import offsets_of
from kbatch.wire import INT64_MIN, UNBOUNDED

VISIBILITY = ("all", "consumer")


def check_visibility(visibility: str) -> str:
    if visibility not in VISIBILITY:
        raise ValueError(f"visibility must be one of {VISIBILITY}, not {visibility!r}")
    return visibility


def visible_ranges(data_dir, storage=None) -> dict[tuple[str, int],
                                                    tuple[int | None, int | None]]:
    """``{(topic, partition): (log_start_offset, high_watermark)}`` for
    every partition named in either checkpoint file (``data_dir``: a
    path, a URL with ``storage``, or a door ``Location``)."""
    start = offsets_of(data_dir, "log_start_offset", storage)
    hw = offsets_of(data_dir, "high_watermark", storage)
    return {key: (start.get(key), hw.get(key)) for key in sorted(start.keys() | hw.keys())}


def consumer_ranges(data_dir, log_start=None) -> dict:
    """``visible_ranges`` with ``log_start``'s offsets (``{(topic,
    partition): offset}``) in place of the checkpoint's log start offsets."""
    ranges = visible_ranges(data_dir)
    for key, start in (log_start or {}).items():
        ranges[key] = (start, ranges.get(key, (None, None))[1])
    return ranges


def visible(records, bounds: tuple[int | None, int | None]):
    """``records`` restricted to the visible range ``bounds``."""
    lo, hi = bounds
    if lo is None and hi is None:
        return records
    lo = INT64_MIN if lo is None else lo
    hi = UNBOUNDED if hi is None else hi
    return records.select_offsets(lo, hi)


def apply_visibility(data_dir, parts: dict, visibility: str, log_start=None,
                     ranges: dict | None = None) -> dict:
    """``{(topic, partition): Records}`` of a data directory read, each
    restricted to what ``visibility`` allows ("all": unchanged;
    "consumer": ``[log start offset, high watermark)`` from the checkpoints).
    ``log_start``: ``{(topic, partition): offset}`` standing in for the
    checkpoint's log start offsets (a simulated retention change,
    ``kbatch.lib.retention``). ``ranges``: what ``consumer_ranges`` gave
    for this read, when the caller read the checkpoints already (so one
    read uses one reading of them)."""
    if check_visibility(visibility) == "all":
        if log_start:
            raise ValueError("log_start= applies with visibility='consumer'")
        return parts
    if ranges is None:
        ranges = consumer_ranges(data_dir, log_start)
    return {key: visible(rec, ranges.get(key, (None, None))) for key, rec in parts.items()}
