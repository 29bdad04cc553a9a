"""What says a partition held offsets that no segment here holds.

A copied data directory often lacks its ``.log`` files (many repositories
ignore ``*.log``) while everything around them remains, and a copy that
stopped early or a disk that lost blocks leaves a segment shorter than its
index files. Each of these is a claim that offsets existed:

    <B>.index|.timeindex|.txnindex without <B>.log   a segment at B (its log is
                              gone): their last entry names an offset it held
    <N>.snapshot              producer state at log end offset N
    <B>.index|.timeindex of a segment that is not the last, naming an offset
                              past its last batch: it lost its tail (Kafka rolls
                              a segment and trims its indexes to what it holds;
                              the cleaner rebuilds them from what it keeps)
    replication-offset-checkpoint    the high watermark: offsets below it were replicated
    recovery-point-offset-checkpoint offsets below it were flushed to disk
    log-start-offset-checkpoint      the log held offsets from here on

(``kbatch.tools.evidence`` adds the consumer groups' offset commits.)

    weigh(...)           the shortfalls of one partition, from its claims
    cut_short(...)       the index files of a segment that lost its tail
    unnamed(...)         a partition the checkpoint files name, with no directory
    upload_gaps(...)     tiered: offsets between two uploads that no upload holds
    read_shortfalls(...) what a read of a partition had at hand, weighed

``verify`` and ``kbatch stats`` report every shortfall as a problem (exit
1). A read returns the records the segments hold, as a consumer of the
broker would see them, and warns once on the ``kbatch`` logger of the
shortfalls inside its range (``warn``), from what it has at hand: the
partition's listing, the index files of a segment read to its end short of
the next one, and, with ``visibility="consumer"``, the checkpoint files
it read for the high watermark. Keeps in memory one row per claim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from kbatch.errors import KbatchError
from kbatch.lib.checkpoints import read_checkpoint
from kbatch.lib.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from kbatch.lib.logfiles import loaded_files
from kbatch.lib.paths import segment_base
from kbatch.lib.tree import Location
from kbatch.wire import UNBOUNDED

CLAIMING = {"replication-offset-checkpoint": "high watermark",
            "recovery-point-offset-checkpoint": "recovery point",
            "log-start-offset-checkpoint": "log start offset"}
SIDE_SUFFIXES = (".index", ".timeindex", ".txnindex")
log = logging.getLogger("kbatch")


@dataclass
class Claim:
    end: int            # the log reached at least this offset (exclusive end)
    why: str            # where the claim comes from, for the message
    kind: str = "checkpoint"     # checkpoint, index, snapshot, orphan, commit


def checkpoint_claim(name: str, offset: int) -> Claim:
    """The claim of an offset checkpoint file's entry (``name``: the file)."""
    return Claim(offset, f"{name} says {CLAIMING[name]} {offset}")


def summary(claims: list[Claim]) -> list[str]:
    """The evidence in a few words: every checkpoint, and per other kind
    the strongest claim with how many more say the same kind of thing."""
    out = []
    for kind in ("checkpoint", "orphan", "index", "snapshot", "commit"):
        some = sorted((c for c in claims if c.kind == kind), key=lambda c: -c.end)
        if not some:
            continue
        if kind in ("checkpoint",):
            out += [c.why for c in some]
        elif kind == "orphan":
            out.append(f"the index files of {len(some)} segment(s) are here without their "
                       f".log ({', '.join(c.why for c in some[:3])}"
                       + (", ..." if len(some) > 3 else "") + ")")
        else:
            more = f" (and {len(some) - 1} more)" if len(some) > 1 else ""
            out.append(some[0].why + more)
    return out


@dataclass
class Shortfall:
    """Offsets ``[start, end)`` of a partition that evidence says existed
    and no segment here holds (``end`` None: unknown, "and later")."""

    topic: str | None
    partition: int | None
    start: int
    end: int | None
    evidence: list[str] = field(default_factory=list)

    def describe(self, where: str | None = None) -> str:
        """One line; ``where``: what names the partition (``topic-partition``)."""
        where = where or f"{self.topic}-{self.partition}"
        span = (f"offsets [{self.start}, {self.end})" if self.end is not None
                else f"offsets from {self.start}")
        return f"{where}: {span} are missing (no segment holds them): " \
               + "; ".join(self.evidence)


def side_file_claims(part: Location, segment_bases: set,
                     entries: list | None = None) -> tuple[list[Claim], list[tuple]]:
    """``(claims, orphans)`` of a partition directory's own files: claims
    from index last entries and producer snapshots, and ``(base, names)``
    of segments whose index files are here without their ``.log``.
    ``entries``: its listing, when the caller has it (else it is listed);
    only the index files of those segments are read."""
    claims, orphans = [], {}
    # the files as a broker loads them: an interrupted swap completed, the
    # files of the segments it replaced gone (kbatch.lib.logfiles)
    for name, e in loaded_files(part, entries).items():
        stem, _, suffix = name.rpartition(".")
        base = segment_base(stem + ".log") if stem else None
        if suffix == "snapshot" and base is not None and base > 0:
            claims.append(Claim(base, f"{name}: producer state at log end offset {base}",
                                "snapshot"))
            continue
        if base is None or "." + suffix not in SIDE_SUFFIXES:
            continue
        if base in segment_bases:
            continue       # its segment is here: verify checks its entries against it
        orphans.setdefault(base, []).append(name)
        if "." + suffix == ".txnindex":
            continue
        dtype = OFFSET_ENTRY if suffix == "index" else TIME_ENTRY
        try:
            read = part.tree.read_entries(e.path, dtype, None, True, e.size)
        except (KbatchError, OSError):
            continue       # verify reports an index it cannot read
        idx = (OffsetIndex if suffix == "index" else TimeIndex).of(read, base)
        if len(idx):
            last = int(idx.offsets[-1])
            claims.append(Claim(last + 1, f"{name}: its last entry names offset {last}",
                                "index"))
    return claims, sorted(orphans.items())


def checkpoint_claims(data_dir: Location) -> dict[tuple, list[Claim]]:
    """``{(topic, partition): claims}`` from the data directory's offset
    checkpoint files (a damaged file claims nothing: verify reads it)."""
    out: dict[tuple, list[Claim]] = {}
    names = {e.name for e in data_dir.list() if e.is_file}
    for name in CLAIMING:
        if name not in names:
            continue
        try:
            _, entries = read_checkpoint(data_dir.child(name))
        except (KbatchError, OSError, ValueError):
            continue
        for topic, partition, offset in entries:
            if offset > 0:
                out.setdefault((topic, partition), []).append(checkpoint_claim(name, offset))
    return out


def cut_short(seg, reach: int, next_base: int) -> list[str]:
    """What says ``seg`` lost batches at its end: a plain segment that is
    not the last of its partition (the next one starts at ``next_base``),
    read to its end at a batch boundary and holding no offset at or past
    ``reach``, whose ``.index`` or ``.timeindex`` names one there. Empty
    when nothing lies between ``reach`` and the next segment, or its index
    files name nothing past it. Reads its index files (once: a ``Segment``
    keeps them) only then."""
    if reach >= next_base:
        return []
    out = []
    stem = seg.location.name[:-len(".log")]
    for suffix, attribute in ((".index", "offset_index"), (".timeindex", "time_index")):
        try:
            idx = getattr(seg, attribute)
        except (KbatchError, OSError):
            continue       # verify reports an index it cannot read
        if len(idx) and int(idx.offsets[-1]) >= reach:
            out.append(f"{stem}{suffix} names offset {int(idx.offsets[-1])}, which "
                       f"{seg.location.name} ({seg.size} bytes) does not hold")
    return out


def weigh(topic, partition, end: int | None, bases, claims: list[Claim], orphans: list,
          starts: list[int] = ()) -> list[Shortfall]:
    """The shortfalls of one partition: a hole where a segment's index
    files are here without its ``.log`` between segments that are here
    (``bases``: their base offsets; ``orphans`` from ``side_file_claims``),
    and the offsets from the log end ``end`` of its segments (None: it has
    none; the log start offsets ``starts`` then, or the first orphan) up to
    the strongest of the ``claims`` beyond it."""
    out: list[Shortfall] = []
    claims = list(claims)
    if end is not None:
        have = end
    elif starts:
        have = max(starts)           # below the log start offset: deleted, not missing
    else:
        have = min(b for b, _ in orphans) if orphans else 0
    for base, names in orphans:
        later = [b for b in bases if b > base]
        if later:                    # a hole between segments that are here
            out.append(Shortfall(topic, partition, base, min(later),
                                 [f"{', '.join(names)} without {base:020d}.log"]))
        else:                        # at the end: weighed with the other claims
            claims.append(Claim(base, f"{base:020d}", "orphan"))
    beyond = [c for c in claims if c.end > have]
    if beyond:
        out.append(Shortfall(topic, partition, have, max(c.end for c in beyond),
                             summary(beyond)))
    return out


def unnamed(key: tuple, claims: list[Claim], start: int = 0) -> Shortfall | None:
    """The shortfall of a partition the checkpoint files name (``claims``)
    with no directory here: offsets from ``start`` up to the strongest."""
    top = max((c.end for c in claims), default=0)
    if top <= start:
        return None
    return Shortfall(key[0], key[1], start, top, ["no partition directory"] + summary(claims))


def cut_segments(topic, partition, segments, reached: dict) -> list[Shortfall]:
    """A shortfall per segment of ``segments`` (a plain partition's, in
    order) that ``cut_short`` finds cut short: from where it ends up to
    the next segment's base offset. ``reached``: ``{base offset: reach}``
    of the segments read to their end at a batch boundary, ``reach`` one
    past the last offset read from it (its base offset: none; where the
    read started inside it, at least that start): the others are not
    looked at."""
    out = []
    for seg, after in zip(segments, segments[1:]):
        reach = reached.get(seg.base_offset)
        evidence = [] if reach is None else cut_short(seg, reach, after.base_offset)
        if evidence:
            out.append(Shortfall(topic, partition, reach, after.base_offset, evidence))
    return out


def upload_gaps(topic, partition, segments) -> list[Shortfall]:
    """A shortfall per gap between the uploads a tiered partition reads
    (``segments``, by start offset; ``kbatch.lib.uploads``): offsets from
    one past where an upload's valid records end by its manifest up to the
    next one's start, which no upload holds."""
    out = []
    for seg, after in zip(segments, segments[1:]):
        end = getattr(seg, "served_end", None)
        if end is not None and end < after.base_offset:
            out.append(Shortfall(topic, partition, end, after.base_offset, [
                f"the manifest of {seg.location.name} ends at offset {end - 1}, the next "
                f"upload starts at {after.base_offset}"]))
    return out


def read_shortfalls(plog, reached: dict, claims: list[Claim] = (), starts: list[int] = (),
                    log_end=None) -> list[Shortfall]:
    """The shortfalls a read of ``plog`` (a ``PartitionLog``) can tell
    from what it has at hand: the listing the partition was opened with
    (``PartitionLog.listing_claims``), the index files of segments read to their end short of the next one
    (``cut_segments``), and ``claims`` (the high watermark of a consumer's
    view; ``starts``: its log start offset). ``reached``: as
    ``cut_segments`` takes it, every segment the read took to the end of
    its valid data. A claim beyond the log end counts only when the last
    segment is among them, or ``log_end`` (a function giving it, for a
    read whose bytes are decoded elsewhere) is given: it is called only
    when a claim lies past the last segment's base offset. Else the read
    stopped before the end and says nothing there."""
    segments = plog.segments
    bases = {s.base_offset for s in segments}
    found, orphans = plog.listing_claims()
    claims = list(claims) + found
    out = cut_segments(plog.topic, plog.partition, segments, reached) \
        if plog.storage.layout == "plain" else upload_gaps(plog.topic, plog.partition, segments)
    end = None
    if segments:
        last = segments[-1].base_offset
        past = log_end is not None and any(c.end > last for c in claims) \
            or any(b > last for b, _ in orphans)
        end = max(reached[last], last) if last in reached else \
            max(log_end(), last) if past and log_end is not None else UNBOUNDED
    return out + weigh(plog.topic, plog.partition, end, bases, claims, orphans, starts)


def warn_unnamed(data_dir: Location, ranges: dict, here: set, wanted) -> None:
    """Warn of each partition a consumer's view names (``ranges``:
    ``{(topic, partition): (log start, high watermark)}`` from the
    checkpoint files of ``data_dir``) with no directory among ``here``,
    that the read would take (``wanted(topic, partition)``): it cannot
    return its records."""
    for (topic, partition), (start, hw) in sorted(ranges.items()):
        if (topic, partition) in here or hw is None or not wanted(topic, partition):
            continue
        gone = unnamed((topic, partition),
                       [checkpoint_claim("replication-offset-checkpoint", hw)], start or 0)
        if gone is not None:
            warn([gone], str(data_dir.child(f"{topic}-{partition}")))


def clip(found: list[Shortfall], lo: int, hi: int) -> list[Shortfall]:
    """``found`` cut to the offsets ``[lo, hi)`` of a read (those outside left out)."""
    out = []
    for s in found:
        start, end = max(s.start, lo), min(UNBOUNDED if s.end is None else s.end, hi)
        if start < end:
            out.append(replace(s, start=start, end=None if end == UNBOUNDED else end))
    return out


def warn(found: list[Shortfall], where: str) -> None:
    """One warning per shortfall on the ``kbatch`` logger (``where``: the
    partition's directory or URL); the record carries the ``Shortfall``
    as ``record.shortfall``, for a handler that collects them."""
    for s in found:
        log.warning("%s; the read returns the records the segments hold, as a consumer "
                    "would", s.describe(where), extra={"shortfall": s})


__all__ = ["CLAIMING", "Claim", "SIDE_SUFFIXES", "Shortfall", "checkpoint_claim",
           "checkpoint_claims", "clip", "cut_segments", "cut_short", "read_shortfalls",
           "side_file_claims", "summary", "unnamed", "upload_gaps", "warn", "warn_unnamed", "weigh"]
