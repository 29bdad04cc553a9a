"""What a slice planned on the driver carries so that an executor can tell
the object it was planned on from another one at the same name: for the
batch reader (``kbatch.spark.plan``) and the streaming one
(``kbatch.spark.stream``).

On object storage a segment may be uploaded again between planning and
reading: by a sync after the broker appended to the active segment (a new
object, longer, that still holds every planned byte at its position), or
by a rewrite (the cleaner's swap under the same name, a truncation: other
bytes at the planned positions). A slice carries its segment's identity as
planned and, for its partition's last segment (the only one appended to),
a few of the planned bytes (``planned_samples``: the batch headers where
the slice starts and stops, or the object's last bytes; the plan's checks
fetched most of them, the rest cost about two small ranged reads per
partition). An executor that finds another identity reads the slice as a
local file that was appended to when the object grew and still holds those
bytes at their positions (``holds_planned_bytes``); otherwise the segment
was replaced after planning (``replaced_since_planning``), which the
reader reports (the stream: data loss; a batch read: ``FileChangedError``).
Local files are checked by inode (the stream) or not at all (a batch
read), tiered uploads not at all (never appended to: a new upload is a new
object).

Keeps in memory per slice its samples (two batch headers, 122 bytes).
"""

from __future__ import annotations

import os

from kbatch.errors import CorruptRecordError
from kbatch.lib.logfiles import MIN_BATCH_V2_BYTES, TieredSegment

SAMPLE_BYTES = MIN_BATCH_V2_BYTES     # a batch header: base offset, length, epoch, CRC, ...


def _object(segment) -> bool:
    """A plain segment in object storage (what may be uploaded again after appends)."""
    return segment.location.remote and not isinstance(segment, TieredSegment)


def file_identity(segment) -> tuple:
    """What tells a segment file from another one at the same path: a local
    file's inode (appends keep it; the cleaner's swap and a rewrite do not;
    not the device, which differs between the hosts of a shared
    filesystem), an object's version ``(size, ETag or modification time)``
    (any upload changes it, the one of a sync after appends too:
    ``holds_planned_bytes`` tells those apart). One stat (an object: a
    request). Raises FileNotFoundError when it is gone."""
    path = segment.location.local_path()
    if not segment.location.remote:
        return (os.stat(path).st_ino,)
    entry = segment.location.stat()
    if entry.kind == "missing":
        raise FileNotFoundError(str(segment.location))
    return tuple(entry.version)


def pinned_identity(segment) -> tuple | None:
    """The identity ``(size, kind, tag)`` a plain object segment's reads are
    pinned to (``objects.RangeSource.pin``): on the driver the object as
    listed (no request), on an executor the object as it first finds it
    (the HEAD its first read makes anyway). None for a local file or a
    tiered upload."""
    return segment.source.raw.pin() if _object(segment) else None


def planned_samples(segment, start: int, stop: int | None) -> tuple | None:
    """``((position, bytes), ...)``: a few of the bytes a slice of an object
    (its partition's last segment) was planned on, the batch header at
    ``start`` and the one at ``stop`` (the checks of the plan fetched both,
    mostly), or the object's last bytes when the slice runs to its end.
    None for a local file (an append keeps its inode) and a tiered upload
    (never appended to: a new upload is a new object)."""
    if not _object(segment):
        return None
    size = segment.size
    end = max(size - SAMPLE_BYTES, 0) if stop is None else stop
    spans = ((start, min(start + SAMPLE_BYTES, size)), (end, min(end + SAMPLE_BYTES, size)))
    return tuple((a, segment.source.read(a, b)) for a, b in dict(spans).items() if a < b)


def holds_planned_bytes(piece, identity: tuple) -> bool:
    """Whether the object of ``piece`` (a slice with ``segment``,
    ``identity`` and ``samples``), whose identity is now ``identity`` (not
    the planned one), was appended to: it grew, and still holds the planned
    samples at their positions. The same size or shorter is a rewrite (a
    compacted or truncated segment), as are other bytes there (the
    cleaner's swap of segments cleaned into one under this name)."""
    if piece.samples is None or identity[0] <= piece.identity[0]:
        return False
    raw = piece.segment.source.raw      # the object as it is now, not ranges kept
    try:
        return all(raw.read(a, a + len(data)) == data for a, data in piece.samples)
    except CorruptRecordError:          # shorter than its samples: not the planned bytes
        return False


def replaced_since_planning(piece, identity: tuple) -> bool:
    """Whether the segment of ``piece``, whose identity is now ``identity``,
    no longer holds the bytes it was planned on at their positions: another
    identity, and not an object that was only appended to."""
    return identity != piece.identity and not holds_planned_bytes(piece, identity)


__all__ = ["SAMPLE_BYTES", "file_identity", "holds_planned_bytes", "pinned_identity",
           "planned_samples", "replaced_since_planning"]
