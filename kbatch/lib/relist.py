"""A read of a partition in object storage that finds an object changed or
deleted since the partition was listed: the partition listed again and read
again.

Every read of an object is pinned to the object as listed
(``kbatch.lib.objects``): one that changed since raises
``FileChangedError`` rather than give records of two versions, one deleted
since raises ``MissingObjectError``. Most such changes are a new state of
the partition, not damage: a sync (``aws s3 sync`` of a broker's log
directory) uploads the active segment again after the broker appended to
it, the cleaner's swap puts a compacted segment under an old name or
deletes the segments it cleaned into another one, retention deletes the
oldest segments (the log start moved; ``aws s3 sync --delete`` deletes
them from the bucket). A read of whole partitions (``PartitionLog.read``,
its batch rows, ``LogDir.read``, ``read_table``, the command line) then
lists the partition again and reads that listing from the start: the
answer is the partition as it is at the later listing, whole and of one
state, never bytes of the earlier one beside bytes of the later one. At
most ``ATTEMPTS`` reads in all, each new listing warned of on the
``kbatch.remote`` logger; a partition still changing at the last one
raises the ``FileChangedError`` or ``MissingObjectError`` as before.

A deleted object is a new state only where Kafka deletes segments that
way: retention deletes the oldest segments (the log start moved), the log
cleaner deletes segments it cleaned into the one before them, which it
rewrote, and a tiered upload may give way to another upload of its offsets
(``unexplained_deletion``). A segment gone from the middle of the
partition while the segment before it is unchanged (a sync that deleted
the cleaned segments and has not yet uploaded the rewritten one) would
leave its offsets out of an answer that looks whole: the read raises a
``MissingObjectError`` naming them instead.

Each read works on one listing: a snapshot of the log taken when it starts
(``PartitionLog.snapshot``), which a relist of the log (by this read or by
another thread's read of the same ``PartitionLog``) does not change; a
relist puts the new listing in place in one step, and the read again takes
a new snapshot. So threads sharing a ``PartitionLog`` never see half of one
listing and half of another, and no lock is held while they read.

Not read again: a local log (a file replaced under a mapping is damage of
that read), a partition not made by a listing (a lone segment), and
chunked reads (``iter``, ``iter_segment``), whose chunks were handed out
already: they raise, and a new read sees the new state.
"""

from __future__ import annotations

import logging
from typing import Callable, NamedTuple, Sequence

from kbatch.errors import FileChangedError
from kbatch.lib.objects import MissingObjectError

ATTEMPTS = 3            # reads of a partition whose objects keep changing
CHANGES = (FileChangedError, MissingObjectError)    # what a new listing may answer
log = logging.getLogger("kbatch.remote")


def changed_since_listing(part, exc: BaseException) -> bool:
    """Whether ``exc``, raised by a read of ``part`` (a ``PartitionLog``),
    says that an object of its listing changed or was deleted since: a
    ``FileChangedError`` or ``MissingObjectError`` of a partition in object
    storage that came from a listing."""
    return (isinstance(exc, CHANGES) and part.location.remote
            and part.listing is not None)


def caught(part, read: Callable):
    """``read()``, or the ``FileChangedError`` or ``MissingObjectError`` it
    raised when an object of ``part``'s listing changed or was deleted since
    (``read_listed`` reads it again); any other error is raised."""
    try:
        return read()
    except CHANGES as exc:
        if not changed_since_listing(part, exc):
            raise
        return exc


def unexplained_deletion(old: Sequence, new: Sequence):
    """The first segment of ``old`` (a listing's segments, in offset order)
    that ``new`` (the partition listed again) lacks where nothing explains
    its going, or None. A segment is still there when ``new`` has one of
    its name or at its base offset (a cleaner's ``.swap`` beside it, a
    tiered upload of the same start). Retention deletes the oldest
    segments: a segment gone with every segment before it gone too. The
    cleaner deletes the segments it cleaned into the one before them,
    which it rewrote; a tiered partition's upload may give way to another
    upload of its offsets: a segment gone where ``new`` has a fresh segment
    (not in ``old``, or another version) starting at or before it and
    after the last segment before it that stayed as it was."""
    now = {s.name: s.version() for s in new}
    then = {s.name: s.version() for s in old}
    bases = {s.base_offset for s in new}

    def gone(seg) -> bool:
        return seg.name not in now and seg.base_offset not in bases
    unchanged = [s.base_offset for s in old if s.name in now and now[s.name] == s.version()]
    fresh = [s.base_offset for s in new if s.name not in then or then[s.name] != s.version()]
    for i, seg in enumerate(old):
        if not gone(seg) or all(gone(o) for o in old[:i]):
            continue
        floor = max((b for b in unchanged if b < seg.base_offset), default=None)
        if not any(b <= seg.base_offset and (floor is None or b >= floor) for b in fresh):
            return seg
    return None


class Listed(NamedTuple):
    """A listed segment as ``unexplained_deletion`` compares it, without its
    source (small and picklable: a stream's driver keeps these between
    micro-batches)."""

    name: str
    base_offset: int
    identity: tuple

    def version(self) -> tuple:
        return self.identity


def listed(segments: Sequence) -> list[Listed]:
    """``segments`` as ``Listed``; a local segment deleted since its
    listing (its identity is a stat) is left out, as gone."""
    out = []
    for seg in segments:
        try:
            out.append(Listed(seg.name, seg.base_offset, seg.version()))
        except FileNotFoundError:
            continue
    return out


def gone_until(gone, after: Sequence) -> int | None:
    """One past the offsets of ``gone`` (``unexplained_deletion``): the
    base of the next segment ``after`` still lists (None: the log end)."""
    later = [s.base_offset for s in after if s.base_offset > gone.base_offset]
    return min(later) if later else None


def refuse_unexplained(before: Sequence, after: Sequence, exc: BaseException) -> None:
    """``MissingObjectError`` when the partition listed again (``after``)
    lacks a segment of ``before`` that neither retention nor the cleaner
    deleted (``unexplained_deletion``): its offsets would be missing."""
    gone = unexplained_deletion(before, after)
    if gone is None:
        return
    until = gone_until(gone, after)
    upto = "the log end)" if until is None else f"{until})"
    raise MissingObjectError(
        f"deleted since the partition was listed, and the segment before it was not "
        f"rewritten (retention deletes the oldest segments, the log cleaner rewrites the one "
        f"it cleans deleted segments into): offsets [{gone.base_offset}, {upto} would be "
        f"missing from the answer (a copy in progress, or data deleted)",
        url=gone.name) from exc


def read_listed(parts: Sequence, read: Callable[[list], list]) -> tuple[list, list]:
    """``(results, logs)``: ``read(logs)`` of snapshots of ``parts``
    (``PartitionLog.snapshot``, one listing each), one result per
    partition, in order, where a partition whose objects changed or were
    deleted since its listing has that error for result (``caught``). Those
    partitions are listed again (``PartitionLog.relist``) and read again
    from new snapshots, together, up to ``ATTEMPTS`` reads in all, each
    time warned of; one that changed again at the last read raises its
    error; a deletion neither retention nor the cleaner explains raises a
    ``MissingObjectError`` (``unexplained_deletion``). ``logs``: the
    snapshot each result was read from. Keeps in memory the results of the
    partitions done while the others are read again."""
    parts = list(parts)
    logs = [p.snapshot() for p in parts]
    results = list(read(logs))
    for attempt in range(2, ATTEMPTS + 1):
        changed = [i for i, got in enumerate(results) if isinstance(got, CHANGES)]
        if not changed:
            return results, logs
        for i in changed:
            before = logs[i].segments
            parts[i].relist()
            logs[i] = parts[i].snapshot()
            # whatever the read met first (a changed object, or the deleted one)
            refuse_unexplained(before, logs[i].segments, results[i])
            _warn_relisting(parts[i], results[i], attempt)
        for i, got in zip(changed, read([logs[i] for i in changed])):
            results[i] = got
    for got in results:
        if isinstance(got, CHANGES):
            raise got
    return results, logs


def read_relisted(part, read: Callable):
    """``read(log)`` of one partition, ``log`` a snapshot of ``part``,
    listed again and read again as ``read_listed`` says when its objects
    changed or were deleted."""
    results, _ = read_listed([part], lambda logs: [caught(logs[0], lambda: read(logs[0]))])
    return results[0]


def _warn_relisting(part, exc: BaseException, attempt: int) -> None:
    log.warning("%s; listing %s again and reading it again (read %d of at most %d)",
                exc, part.name, attempt, ATTEMPTS)


__all__ = ["ATTEMPTS", "CHANGES", "Listed", "caught", "changed_since_listing", "listed",
           "gone_until", "read_listed", "read_relisted", "refuse_unexplained",
           "unexplained_deletion"]
