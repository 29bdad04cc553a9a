"""Which uploaded segment of a tiered partition serves each offset.

Uploads overlap after leader changes: a new leader uploads its own local
segments, whose bounds need not match the old leader's (an upload may
start inside an earlier one, repeat its start, or lie wholly inside it).
Kafka (``RemoteLogMetadataCache.remoteLogSegmentMetadata(tp, epoch,
offset)``) serves offset ``o`` from the uploads of ``o``'s leader epoch
in the leader-epoch chain: each epoch maps the start offset of its range
in every upload holding it to that upload (``RemoteLogLeaderEpochState``),
the greatest start at or below ``o`` is looked up, and it serves ``o``
when its range of that epoch reaches ``o``.

The rule here, from each upload's manifest (``startOffset``,
``endOffset``, ``segmentLeaderEpochs``; a manifest without an end: the
last offset its batch headers hold):

1. The chain: epoch ``E`` covers ``[least start of E in any upload, least
   start of any higher epoch)`` (a newer leader's epochs truncate the
   older ones: records of an epoch past where a higher one starts are a
   diverged leader's, never served).
2. An upload is valid from its start up to its first offset whose epoch
   (by its ``segmentLeaderEpochs``) is not the chain's there. An upload
   without epochs is taken as valid to its end, and an overlap it takes
   part in is warned of (kbatch cannot tell by epoch which copy Kafka
   serves).
3. An upload whose valid range lies inside another's is redundant (of
   equal ranges the latest ``eventTimestampMs`` is kept, then the least
   segment id): not read. Within one epoch the copies hold the same
   records, so which one is read changes nothing, and no offset a valid
   upload holds is dropped (Kafka itself may refuse an offset a shorter
   later upload hides: kbatch reads it from the longer one).
4. The others, by start offset, each serve from their start up to the
   next one's start, or up to the end of their valid range when that
   comes first: ``Upload.limit``. Offsets between the end of one valid
   range and the next start are held by no upload: ``Resolution.gaps``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("kbatch")


@dataclass(frozen=True)
class Upload:
    """What the rule needs of one upload: its first and last offset
    (``end`` None: not known), its ``segmentLeaderEpochs`` as sorted
    ``(epoch, start offset)`` pairs (None: not known), and what orders
    equal copies."""

    start: int
    end: int | None
    epochs: tuple | None
    event_ms: int = 0
    ident: str = ""


@dataclass
class Resolution:
    """``kept``: indexes of the uploads read, by start offset, each with
    its ``limits`` entry (one past the last offset it serves; None: all it
    holds). ``dropped``: ``(index, holder)`` of the others: redundant, the
    kept upload ``holder`` holds all their offsets (None: they hold no
    record of the leader-epoch chain). ``gaps``: ``(lo,
    hi, why)`` offset ranges no upload holds between two that are read.
    ``undecided``: overlaps whose copies kbatch cannot tell apart by epoch."""

    kept: list = field(default_factory=list)
    limits: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    gaps: list = field(default_factory=list)
    undecided: list = field(default_factory=list)
    diverged: list = field(default_factory=list)   # (index, first offset not served, why)


def leader_chain(uploads: list[Upload]) -> dict[int, tuple[int, int]]:
    """``{epoch: (lo, hi)}``: the offsets each epoch covers in the chain
    (rule 1; empty ranges left out)."""
    first: dict[int, int] = {}
    for u in uploads:
        for epoch, start in u.epochs or ():
            first[epoch] = min(start, first.get(epoch, start))
    chain, above = {}, None
    for epoch in sorted(first, reverse=True):
        hi = above if above is not None else 1 << 63
        if first[epoch] < hi:
            chain[epoch] = (first[epoch], hi)
        above = first[epoch] if above is None else min(above, first[epoch])
    return chain


def _epoch_ranges(u: Upload):
    """``(epoch, lo, hi)`` (hi inclusive) of ``u``'s own epochs, in order."""
    pairs = list(u.epochs)
    for k, (epoch, start) in enumerate(pairs):
        lo = u.start if k == 0 else max(start, u.start)
        hi = u.end if k + 1 == len(pairs) else min(u.end, pairs[k + 1][1] - 1)
        if lo <= hi:
            yield epoch, lo, hi


def valid_end(u: Upload, chain: dict) -> int | None:
    """The last offset of ``u`` whose epoch is the chain's (rule 2):
    ``u.start - 1`` when none is; None when its end is not known."""
    if u.end is None or not u.epochs or not chain:
        return u.end
    end = u.start - 1
    for epoch, lo, hi in _epoch_ranges(u):
        span = chain.get(epoch)
        if span is None or lo < span[0] or lo >= span[1]:
            return end
        end = min(hi, span[1] - 1)
        if end < hi:
            return end
    return end


def resolve(uploads: list[Upload]) -> Resolution:
    """The rule of the module docstring over ``uploads``."""
    chain = leader_chain(uploads)
    ends = [valid_end(u, chain) for u in uploads]
    out = Resolution()
    for i, (u, end) in enumerate(zip(uploads, ends)):
        if end is not None and u.end is not None and end < u.end:
            out.diverged.append((i, end + 1, f"records from offset {end + 1} are of leader "
                                             "epochs the later leaders' chain does not hold"))
    # by start, the farthest-reaching (then latest, then least id) first
    order = sorted(range(len(uploads)), key=lambda i: (
        uploads[i].start, -(ends[i] if ends[i] is not None else 1 << 63),
        -uploads[i].event_ms, uploads[i].ident))
    reach = None       # the farthest valid offset of the uploads kept so far
    for i in order:
        u, end = uploads[i], ends[i]
        if end is not None and end < u.start:
            out.dropped.append((i, None))
            continue
        if reach is not None and end is not None and end <= reach:
            holder = next(k for k in reversed(out.kept)
                          if ends[k] is None or ends[k] >= end)
            out.dropped.append((i, holder))
            _note_undecided(out, uploads, holder, i)
            continue
        if out.kept:
            _note_undecided(out, uploads, out.kept[-1], i)
        out.kept.append(i)
        reach = None if end is None else max(end, reach if reach is not None else end)
    for k, i in enumerate(out.kept):
        nxt = uploads[out.kept[k + 1]].start if k + 1 < len(out.kept) else None
        cut = ends[i] + 1 if ends[i] is not None and uploads[i].end is not None \
            and ends[i] < uploads[i].end else None
        limit = nxt if cut is None else cut if nxt is None else min(nxt, cut)
        out.limits.append(limit)
        stop = ends[i] + 1 if ends[i] is not None else None
        if nxt is not None and stop is not None and stop < nxt:
            out.gaps.append((stop, nxt, f"the upload at {uploads[i].start} holds offsets up "
                                        f"to {stop - 1}, the next one starts at {nxt}"))
    return out


def _note_undecided(out: Resolution, uploads: list[Upload], a: int, b: int) -> None:
    """Record an overlap of uploads ``a`` and ``b`` (``a`` starts first)
    that epochs cannot decide: one of them has none."""
    first, second = uploads[a], uploads[b]
    if first.end is not None and first.end < second.start:
        return
    if first.epochs and second.epochs:
        return
    out.undecided.append(f"uploads at offsets {first.start} and {second.start} overlap and "
                         "one has no segmentLeaderEpochs: read by offsets alone")


def epochs_of(metadata: dict) -> tuple | None:
    """A manifest's ``segmentLeaderEpochs`` as sorted ``(epoch, start)``
    pairs; None when absent or not a map of int to int."""
    raw = metadata.get("segmentLeaderEpochs")
    if not isinstance(raw, dict) or not raw:
        return None
    pairs = []
    for key, value in raw.items():
        try:
            epoch = int(key)
        except (TypeError, ValueError):
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        pairs.append((epoch, value))
    return tuple(sorted(pairs))


def served(records, limit: int | None):
    """``records`` (a ``Records`` chunk of one upload) below ``limit``:
    what that upload serves (None: all of them)."""
    if limit is None:
        return records
    return records.select(records.offset < limit, records.control.offset < limit,
                          records.batches.base_offset < limit)
