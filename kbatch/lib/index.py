"""The files beside a segment: offset index, time index, transaction index.

    .index      8-byte entries:   relativeOffset int32 | position int32
    .timeindex  12-byte entries:  timestamp int64 | relativeOffset int32
    .txnindex   34-byte entries:  version int16 | producerId int64 |
                                  firstOffset int64 | lastOffset int64 |
                                  lastStableOffset int64

All big-endian, offsets relative to the segment's file-name base offset.
Offset and time indexes are preallocated (zero-filled, usually sparse) while
a segment is active: the live entries end at the first all-zero entry
(OffsetIndex.java, TimeIndex.java; a broker never writes an entry for the
first append of a segment, so an all-zero first entry is preallocation, not
an entry at offset 0 or timestamp 0). A trailing partial entry is ignored.
Entries are sparse hints (about one per 4 KiB of log): an offset index entry
names a batch's last offset and the byte where that batch starts.

Reading costs what the live entries hold, not the file's size: side files
must be regular files (a directory, FIFO, socket or device raises
``NotRegularFileError``, never blocks), the entries in a trailing hole are
never read, the file is read in bounded pieces that stop at the first
all-zero entry, and at most ``max_entries`` are read (a segment passes how
many batches its log can hold: more entries than that cannot be live).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


OFFSET_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
TXN_ENTRY = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                      ("last_offset", ">i8"), ("last_stable_offset", ">i8")])


CHUNK_BYTES = 1 << 19   # one pread of index entries


def _first_zero_entry(chunk: np.ndarray) -> int | None:
    """Index of the first all-zero entry of ``chunk``, None when there is none."""
    raw = chunk.view(np.uint8).reshape(len(chunk), chunk.dtype.itemsize)
    zero = np.flatnonzero(~raw.any(axis=1))
    return int(zero[0]) if len(zero) else None


def live_entries(read, size: int, data_end: int, dtype: np.dtype,
                 max_entries: int | None = None,
                 zero_ends: bool = True) -> tuple[np.ndarray, int]:
    """``(live entries, entries the file's size holds)`` of an index file of
    ``size`` bytes whose data ends at ``data_end`` (a local file's trailing
    hole; the size for an object), read by ``read(start, stop) -> bytes``.

    The one rule for every index, wherever it is stored: entries wholly in
    the trailing hole are never read, at most ``max_entries`` are read, a
    trailing partial entry is ignored, and (``zero_ends``: preallocated
    offset and time indexes) the first all-zero entry ends the live ones.
    Keeps in memory the live entries and one ``CHUNK_BYTES`` piece.
    """
    item = dtype.itemsize
    in_file = size // item
    wanted = min(in_file, -(-data_end // item))
    if max_entries is not None:
        wanted = min(wanted, max(int(max_entries), 0))
    step = max(CHUNK_BYTES // item, 1)
    parts, got = [], 0
    while got < wanted:
        raw = read(got * item, (got + min(step, wanted - got)) * item)
        n = len(raw) // item
        if n == 0:
            break   # the file shrank while being read
        chunk = np.frombuffer(raw, dtype, count=n)
        zero = _first_zero_entry(chunk) if zero_ends else None
        if zero is not None:
            parts.append(chunk[:zero])
            break
        parts.append(chunk)
        got += n
    entries = np.concatenate(parts) if parts else np.empty(0, dtype)
    return entries, in_file


def entries_of(raw: bytes, dtype: np.dtype, *, zero_ends: bool = True,
               max_entries: int | None = None) -> tuple[np.ndarray, int]:
    """``(live entries, entries the bytes hold)`` of an index already in
    memory (a tiered segment's ``.indexes``), by the rule of ``live_entries``."""
    return live_entries(lambda a, b: raw[a:b], len(raw), len(raw), dtype, max_entries,
                        zero_ends)


@dataclass(frozen=True)
class OffsetIndex:
    """``offsets`` (absolute) and ``positions`` of a segment's ``.index``."""

    base_offset: int
    offsets: np.ndarray
    positions: np.ndarray
    file_entries: int   # entries the file's size holds, live or not

    @classmethod
    def of(cls, entries: tuple[np.ndarray, int], base_offset: int) -> "OffsetIndex":
        """From ``(live entries, entries in the file)`` (``live_entries``)."""
        raw, in_file = entries
        return cls(base_offset, raw["relative_offset"].astype(np.int64) + base_offset,
                   raw["position"].astype(np.int64), in_file)

    @classmethod
    def from_bytes(cls, data: bytes, base_offset: int,
                   max_entries: int | None = None) -> "OffsetIndex":
        return cls.of(entries_of(data, OFFSET_ENTRY, max_entries=max_entries), base_offset)

    def __len__(self) -> int:
        return len(self.offsets)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or below ``offset``,
        ``(base_offset, 0)`` when there is none."""
        i = int(np.searchsorted(self.offsets, offset, side="right")) - 1
        if i < 0:
            return self.base_offset, 0
        return int(self.offsets[i]), int(self.positions[i])

    def first_at_or_above(self, offset: int) -> tuple[int, int] | None:
        """``(offset, position)`` of the first entry at or above ``offset``."""
        i = int(np.searchsorted(self.offsets, offset, side="left"))
        if i >= len(self.offsets):
            return None
        return int(self.offsets[i]), int(self.positions[i])


@dataclass(frozen=True)
class TimeIndex:
    """``timestamps`` (a running maximum) and absolute ``offsets`` of a ``.timeindex``."""

    base_offset: int
    timestamps: np.ndarray
    offsets: np.ndarray
    file_entries: int

    @classmethod
    def of(cls, entries: tuple[np.ndarray, int], base_offset: int) -> "TimeIndex":
        raw, in_file = entries
        return cls(base_offset, raw["timestamp"].astype(np.int64),
                   raw["relative_offset"].astype(np.int64) + base_offset, in_file)

    @classmethod
    def from_bytes(cls, data: bytes, base_offset: int,
                   max_entries: int | None = None) -> "TimeIndex":
        return cls.of(entries_of(data, TIME_ENTRY, max_entries=max_entries), base_offset)

    def __len__(self) -> int:
        return len(self.timestamps)

    def last_below(self, timestamp: int) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the last entry with a timestamp below ``timestamp``."""
        i = int(np.searchsorted(self.timestamps, timestamp, side="left")) - 1
        if i < 0:
            return None
        return int(self.timestamps[i]), int(self.offsets[i])

    def max_timestamp(self) -> int:
        return int(self.timestamps.max()) if len(self.timestamps) else -1


@dataclass(frozen=True)
class TxnIndex:
    """Aborted transactions recorded in a segment's ``.txnindex``."""

    producer_id: np.ndarray
    first_offset: np.ndarray
    last_offset: np.ndarray
    last_stable_offset: np.ndarray
    version: np.ndarray

    @classmethod
    def of(cls, entries: tuple[np.ndarray, int]) -> "TxnIndex":
        """The entries of a ``.txnindex`` (not preallocated: an all-zero
        entry is read as written; ``live_entries`` with ``zero_ends=False``)."""
        return cls._of(entries[0])

    @classmethod
    def from_bytes(cls, data: bytes, max_entries: int | None = None) -> "TxnIndex":
        return cls._of(entries_of(data, TXN_ENTRY, zero_ends=False, max_entries=max_entries)[0])

    @classmethod
    def concat(cls, parts) -> "TxnIndex":
        """The entries of ``parts`` (TxnIndex), in order."""
        parts = list(parts)
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     if parts else np.empty(0, np.int16 if f == "version" else np.int64)
                     for f in ("producer_id", "first_offset", "last_offset",
                               "last_stable_offset", "version")))

    @classmethod
    def _of(cls, raw: np.ndarray) -> "TxnIndex":
        return cls(*(raw[name].astype(np.int64) for name in
                     ("producer_id", "first_offset", "last_offset", "last_stable_offset")),
                   raw["version"].astype(np.int16))

    def __len__(self) -> int:
        return len(self.producer_id)
