"""A partition's leader epoch cache (``leader-epoch-checkpoint``), kept by
the rules of Kafka's LeaderEpochFileCache, for the tools that write a log
a broker will load (recover, retention's retained copy).

    leader-epoch-checkpoint   line 1: version 0 | line 2: entry count |
                              one "<epoch> <start offset>" per line

Entries are ``(epoch, start_offset)`` pairs, epochs and start offsets both
increasing. The operations, each returning a new list:

    load(entries)               the constructor: every entry of the file
                                assigned in order
    assign(entries, e, start)   a new entry unless the latest has epoch e
                                and starts at or before ``start``; entries
                                from the tail with an epoch >= e or a start
                                >= ``start`` are removed first (they
                                contradict the new one)
    truncate_from_end(x, end)   entries starting at or after ``end`` go
                                (a log truncated to ``end``)
    truncate_from_start(x, s)   entries starting at or before ``s`` go, the
                                last of them comes back starting at ``s``
                                (a log whose start moved to ``s``)

LogLoader applies them on a broker's start: the file loaded, each recovered
batch's epoch assigned when it is larger than the latest
(LogSegment.recover), then ``truncate_from_end(log end offset)`` and
``truncate_from_start(log start offset)``.
"""

from __future__ import annotations

Entry = tuple[int, int]


def assign(entries: list[Entry], epoch: int, start: int) -> list[Entry]:
    """LeaderEpochFileCache.assign. ValueError for a negative epoch or
    start offset (Kafka refuses them)."""
    if epoch < 0 or start < 0:
        raise ValueError(f"invalid leader epoch entry ({epoch}, {start})")
    if entries and entries[-1][0] == epoch and start >= entries[-1][1]:
        return entries                  # no update needed
    kept = list(entries)
    while kept and (kept[-1][0] >= epoch or kept[-1][1] >= start):
        kept.pop()
    kept.append((epoch, start))
    return kept


def load(entries: list[Entry]) -> list[Entry]:
    """The cache a broker builds from a file's entries (each assigned)."""
    out: list[Entry] = []
    for epoch, start in entries:
        out = assign(out, epoch, start)
    return out


def truncate_from_end(entries: list[Entry], end: int) -> list[Entry]:
    """LeaderEpochFileCache.truncateFromEnd: entries starting at or after
    ``end`` are removed (from the tail)."""
    kept = list(entries)
    if end < 0:
        return kept
    while kept and kept[-1][1] >= end:
        kept.pop()
    return kept


def truncate_from_start(entries: list[Entry], start: int) -> list[Entry]:
    """LeaderEpochFileCache.truncateFromStart: entries starting at or below
    ``start`` go (from the head), the last of them comes back starting at
    ``start``."""
    i = 0
    while i < len(entries) and entries[i][1] <= start:
        i += 1
    return ([(entries[i - 1][0], start)] if i else []) + list(entries[i:])


def epoch_file_text(entries: list[Entry]) -> str:
    """The ``leader-epoch-checkpoint`` text of ``entries``."""
    return "\n".join(["0", str(len(entries)), *(f"{e} {o}" for e, o in entries)]) + "\n"


__all__ = ["assign", "epoch_file_text", "load", "truncate_from_end", "truncate_from_start"]
