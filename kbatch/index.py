"""The files beside a segment: offset index, time index, transaction index.

    .index      8-byte entries:   relativeOffset int32 | position int32
    .timeindex  12-byte entries:  timestamp int64 | relativeOffset int32
    .txnindex   34-byte entries:  version int16 | producerId int64 |
                                  firstOffset int64 | lastOffset int64 |
                                  lastStableOffset int64

All big-endian, offsets relative to the segment's file-name base offset.
Offset and time indexes are preallocated (zero-filled) while a segment is
active: entries end at the first entry after entry 0 whose relative offset is
0 (OffsetIndex.java, TimeIndex.java). A trailing partial entry is ignored.
Entries are sparse hints (about one per 4 KiB of log): an offset index entry
names a batch's last offset and the byte where that batch starts.

Index files are small (10 MB by default at most); they are read whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

OFFSET_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
TXN_ENTRY = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                      ("last_offset", ">i8"), ("last_stable_offset", ">i8")])


def _read_entries(path, dtype: np.dtype) -> np.ndarray:
    if path is None or not os.path.exists(path):
        return np.empty(0, dtype)
    raw = np.fromfile(path, dtype=np.uint8)
    usable = len(raw) - len(raw) % dtype.itemsize
    return raw[:usable].view(dtype)


def _live_length(relative: np.ndarray, other: np.ndarray) -> int:
    """Entries before the preallocated zero tail (relative offset 0 after entry 0)."""
    if len(relative) <= 1:
        return len(relative)
    tail = np.flatnonzero((relative[1:] == 0) & (other[1:] == 0))
    if len(tail) == 0:
        # a zero relative offset with a non-zero position/timestamp past entry 0
        # is not preallocation: keep reading, verify() flags it
        return len(relative)
    return int(tail[0]) + 1


@dataclass(frozen=True)
class OffsetIndex:
    """``offsets`` (absolute) and ``positions`` of a segment's ``.index``."""

    base_offset: int
    offsets: np.ndarray
    positions: np.ndarray
    file_entries: int

    @classmethod
    def read(cls, path, base_offset: int) -> "OffsetIndex":
        raw = _read_entries(path, OFFSET_ENTRY)
        rel = raw["relative_offset"].astype(np.int64)
        pos = raw["position"].astype(np.int64)
        n = _live_length(rel, pos)
        return cls(base_offset, rel[:n] + base_offset, pos[:n], len(raw))

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
    def read(cls, path, base_offset: int) -> "TimeIndex":
        raw = _read_entries(path, TIME_ENTRY)
        rel = raw["relative_offset"].astype(np.int64)
        ts = raw["timestamp"].astype(np.int64)
        n = _live_length(rel, ts)
        return cls(base_offset, ts[:n], rel[:n] + base_offset, len(raw))

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
    def read(cls, path) -> "TxnIndex":
        raw = _read_entries(path, TXN_ENTRY)
        return cls(*(raw[name].astype(np.int64) for name in
                     ("producer_id", "first_offset", "last_offset", "last_stable_offset")),
                   raw["version"].astype(np.int16))

    def __len__(self) -> int:
        return len(self.producer_id)
