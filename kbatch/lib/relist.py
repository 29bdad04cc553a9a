"""A read of a partition in object storage that finds an object changed
since the partition was listed: the partition listed again and read again.

Every read of an object is pinned to the object as listed
(``kbatch.lib.objects``): one that changed since raises
``FileChangedError`` rather than give records of two versions. Most such
changes are a new state of the partition, not damage: a sync (``aws s3
sync`` of a broker's log directory) uploads the active segment again after
the broker appended to it, the cleaner's swap puts a compacted segment
under an old name. A read of whole partitions (``PartitionLog.read``, its
batch rows, ``LogDir.read``, ``read_table``, the command line) then lists
the partition again and reads that listing from the start: the answer is
the partition as it is at the later listing, whole and of one state, never
bytes of the earlier one beside bytes of the later one. At most
``ATTEMPTS`` reads in all, each new listing warned of on the
``kbatch.remote`` logger; a partition still changing at the last one raises
the ``FileChangedError`` as before.

Not read again: a local log (a file replaced under a mapping is damage of
that read), a partition not made by a listing (a lone segment), and
chunked reads (``iter``, ``iter_segment``), whose chunks were handed out
already: they raise, and a new read sees the new state.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from kbatch.errors import FileChangedError

ATTEMPTS = 3            # reads of a partition whose objects keep changing
log = logging.getLogger("kbatch.remote")


def changed_since_listing(part, exc: BaseException) -> bool:
    """Whether ``exc``, raised by a read of ``part`` (a ``PartitionLog``),
    says that an object of its listing changed since: a ``FileChangedError``
    of a partition in object storage that came from a listing."""
    return (isinstance(exc, FileChangedError) and part.location.remote
            and part.listing is not None)


def caught(part, read: Callable):
    """``read()``, or the ``FileChangedError`` it raised when an object of
    ``part``'s listing changed since (``read_listed`` reads it again); any
    other error is raised."""
    try:
        return read()
    except FileChangedError as exc:
        if not changed_since_listing(part, exc):
            raise
        return exc


def read_listed(parts: Sequence, read: Callable[[list], list]) -> list:
    """``read(parts)``: one result per partition, in order, where a
    partition whose objects changed since its listing has that
    ``FileChangedError`` for result (``caught``). Those partitions are
    listed again (``PartitionLog.relist``) and read again, together, up to
    ``ATTEMPTS`` reads in all, each time warned of; one that changed again
    at the last read raises its error. Keeps in memory the results of the
    partitions done while the others are read again."""
    parts = list(parts)
    results = list(read(parts))
    for attempt in range(2, ATTEMPTS + 1):
        changed = [i for i, got in enumerate(results) if isinstance(got, FileChangedError)]
        if not changed:
            return results
        for i in changed:
            _warn_relisting(parts[i], results[i], attempt)
            parts[i].relist()
        for i, got in zip(changed, read([parts[i] for i in changed])):
            results[i] = got
    for got in results:
        if isinstance(got, FileChangedError):
            raise got
    return results


def read_relisted(part, read: Callable):
    """``read()`` of one partition (a closure over ``part``), listed again
    and read again as ``read_listed`` says when its objects changed."""
    return read_listed([part], lambda _: [caught(part, read)])[0]


def _warn_relisting(part, exc: FileChangedError, attempt: int) -> None:
    log.warning("%s; listing %s again and reading it again (read %d of at most %d)",
                exc, part.name, attempt, ATTEMPTS)


__all__ = ["ATTEMPTS", "caught", "changed_since_listing", "read_listed", "read_relisted"]
