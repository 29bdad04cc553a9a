"""The table view of a log: ``view="latest"``.

A compacted topic (a changelog, a CDC stream, ``__consumer_offsets``)
stands for a table: for each key, the value of its record with the highest
offset; a key whose latest record is a tombstone (a null value) is not in
the table. ``latest(records)`` keeps exactly those rows, in offset order,
with every column of the read (offset, timestamp, headers...).

    read(view="latest")    what every partition read accepts (open_log,
                           open_log_dir, read_table, Spark's view option)

The rows are chosen by the compiled kernel ``kbatch._core._latest`` (the
key bytes hashed without the GIL, no per-row Python), then gathered by
``Records.take``. It runs on what the read returns: with
``isolation="read_committed"`` aborted and open transactions never count
(their records were left out before); with ``visibility="consumer"`` only
``[log start, high watermark)`` counts.

Records without a key: a compacted topic refuses them (the broker rejects
the produce request) and Kafka's log cleaner drops them from cleaned
segments, so they have no place in the table: they are left out, counted
in ``LatestSummary.null_keys`` and logged (a warning on the ``kbatch``
logger).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from kbatch._core._latest import latest_rows
from kbatch.errors import ArgumentError
from kbatch.lib.columns import BinaryColumn, MissingColumn
from kbatch.lib.records import Records
from kbatch.lib.views import ViewColumn

VIEWS = ("all", "latest")
log = logging.getLogger("kbatch")


@dataclass(frozen=True)
class LatestSummary:
    """What the table view of a read kept and left out."""

    records: int       # data records looked at
    keys: int          # distinct (non-null) keys among them
    rows: int          # rows of the table: keys whose latest record has a value
    tombstones: int    # keys whose latest record is a tombstone (not in the table)
    null_keys: int     # records without a key (not in the table)


def check_view(view) -> str:
    """``view`` if it is one of ``VIEWS`` (``ArgumentError`` otherwise)."""
    if view not in VIEWS:
        raise ArgumentError(f"view must be one of {', '.join(map(repr, VIEWS))}, not {view!r}")
    return view


def check_columns(columns) -> None:
    """A projection for the table view must read the key and the value
    (the value only to tell tombstones): ``ArgumentError`` otherwise."""
    if columns is None:
        return
    wanted = set(columns)
    missing = [c for c in ("key", "value") if c not in wanted]
    if missing:
        raise ArgumentError(f"view='latest' needs the {' and '.join(missing)} column(s): "
                            f"add {', '.join(map(repr, missing))} to columns=")


def _validity(col) -> np.ndarray | None:
    return None if col.validity is None or not col.null_count else \
        np.ascontiguousarray(col.validity, np.uint8)


def latest_indices(records: Records, threads: int | None = None
                   ) -> tuple[np.ndarray, LatestSummary]:
    """The rows of ``records`` that make its table (ascending), and the
    summary. Rows are compared by offset: of two records with one key, the
    one with the higher offset wins. ``threads``: how many threads the
    kernel's partitioned pass (many distinct keys) may use (None: one per
    core)."""
    threads = max(1, threads or os.cpu_count() or 1)
    key, value = records.key, records.value
    for name, col in (("key", key), ("value", value)):
        if isinstance(col, MissingColumn):
            raise ArgumentError(f"view='latest' needs the {name} column, which this read "
                                "left out (columns=)")
    vbits = _validity(value)
    offsets = np.ascontiguousarray(records.offset, np.int64)
    if isinstance(key, ViewColumn):
        for hold in key.holds:
            hold.revalidate()
        rows, keys, tombs, nulls = latest_rows(None, None, _validity(key),
                                               np.ascontiguousarray(key.views),
                                               list(key.buffers), offsets, vbits, threads)
        for hold in key.holds:
            hold.check()
    elif isinstance(key, BinaryColumn):
        koffsets = key.offsets if key.offsets.dtype in (np.int32, np.int64) \
            else key.offsets.astype(np.int64)
        rows, keys, tombs, nulls = latest_rows(np.ascontiguousarray(koffsets),
                                               np.ascontiguousarray(key.data, np.uint8),
                                               _validity(key), None, [], offsets, vbits,
                                               threads)
    else:
        raise ArgumentError(f"view='latest' cannot read a key column of type "
                            f"{type(key).__name__}")
    return rows, LatestSummary(len(records), keys, len(rows), tombs, nulls)


def latest(records: Records, *, where: str | None = None, warn: bool = True,
           threads: int | None = None) -> tuple[Records, LatestSummary]:
    """The table view of ``records`` and its summary; records without a
    key are left out, with a warning naming ``where`` (the partition)
    unless ``warn`` is False (the caller reports the summary). ``threads``:
    as ``latest_indices``."""
    threads = max(1, threads or os.cpu_count() or 1)
    rows, summary = latest_indices(records, threads)
    if summary.null_keys and warn:
        log.warning("%s: %d record(s) without a key left out of view='latest' (a compacted "
                    "topic refuses them; Kafka's cleaner drops them)",
                    where or records.path or "read", summary.null_keys)
    _warn_damage(records, where)
    return records.take_rows(rows, threads), summary


def _warn_damage(records: Records, where: str | None) -> None:
    """A table of a read that passed over damage (``on_corrupt="skip"``) or
    stopped at it (``"stop"``) may show a key's older value where its
    latest record lay in the damaged or unread bytes: said on the
    ``kbatch`` logger, whatever ``warn`` says (the rows alone look whole)."""
    end = records.end
    stopped = end is not None and end.reason == "corrupt"
    if not records.skipped and not stopped:
        return
    what = (f"{len(records.skipped)} damaged range(s) skipped" if records.skipped else
            f"the read stopped at damage ({end.trailing_bytes} bytes not read)")
    log.warning("%s: view='latest' of a read with %s: a key whose latest record lay there "
                "shows an older value, or none, in this table", where or records.path or "read",
                what)


def apply_view(records: Records, view: str, where: str | None = None,
               threads: int | None = None) -> Records:
    """``records`` as ``view`` shows them ("all": unchanged); ``threads``:
    as ``latest_indices``."""
    if check_view(view) == "all":
        return records
    return latest(records, where=where, threads=threads)[0]
