"""What says a partition held data, weighed against the segments present.

A copied data directory often lacks its ``.log`` files (many repositories
ignore ``*.log``) while everything around them remains. Each of these is a
claim that offsets existed:

    <B>.index|.timeindex|.txnindex without <B>.log   a segment at B (its log is
                              gone): their last entry names an offset it held
    <N>.snapshot              producer state at log end offset N
    replication-offset-checkpoint    the high watermark: offsets below it were replicated
    recovery-point-offset-checkpoint offsets below it were flushed to disk
    log-start-offset-checkpoint      the log held offsets from here on
    __consumer_offsets        a group committed offset C: it had read the offsets below C

``shortfalls`` compares the greatest claimed log end of each partition with
the log end of its segments (one past the last offset of the last whole
batch, or the last segment's base offset) and returns every shortfall, with
the offsets that are missing and the evidence for them, so that ``verify``
and ``stats`` report missing data as a problem (exit 1) instead of "ok".
Partitions a checkpoint names but whose directory is gone are reported too.
Offset commits name partitions of the whole cluster, so they are weighed
only for partitions that are here. Keeps in memory one row per claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbatch.errors import KbatchError
from kbatch.lib.checkpoints import OFFSET_FILES, read_checkpoint
from kbatch.lib.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from kbatch.lib.logfiles import loaded_files
from kbatch.lib.open import Resolved
from kbatch.lib.paths import PathKind, parse_partition_dir, segment_base
from kbatch.lib.tree import Location

CLAIMING = {"replication-offset-checkpoint": "high watermark",
            "recovery-point-offset-checkpoint": "recovery point",
            "log-start-offset-checkpoint": "log start offset"}
SIDE_SUFFIXES = (".index", ".timeindex", ".txnindex")


@dataclass
class Claim:
    end: int            # the log reached at least this offset (exclusive end)
    why: str            # where the claim comes from, for the message
    kind: str = "checkpoint"     # checkpoint, index, snapshot, orphan, commit


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

    def describe(self) -> str:
        where = f"{self.topic}-{self.partition}"
        span = (f"offsets [{self.start}, {self.end})" if self.end is not None
                else f"offsets from {self.start}")
        return f"{where}: {span} are missing (no segment holds them): " \
               + "; ".join(self.evidence)


def side_file_claims(part: Location, segment_bases: set) -> tuple[list[Claim], list[tuple]]:
    """``(claims, orphans)`` of a partition directory's own files: claims
    from index last entries and producer snapshots, and ``(base, names)``
    of segments whose index files are here without their ``.log``."""
    claims, orphans = [], {}
    # the files as a broker loads them: an interrupted swap completed, the
    # files of the segments it replaced gone (kbatch.lib.logfiles)
    for name, e in loaded_files(part).items():
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
            entries = part.tree.read_entries(e.path, dtype, None, True, e.size)
        except (KbatchError, OSError):
            continue       # verify reports an index it cannot read
        idx = (OffsetIndex if suffix == "index" else TimeIndex).of(entries, base)
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
    for name, what in CLAIMING.items():
        if name not in names:
            continue
        try:
            _, entries = read_checkpoint(data_dir.child(name))
        except (KbatchError, OSError, ValueError):
            continue
        for topic, partition, offset in entries:
            if offset > 0:
                out.setdefault((topic, partition), []).append(
                    Claim(offset, f"{name} says {what} {offset}"))
    return out


def commit_claims(found: Resolved) -> dict[tuple, list[Claim]]:
    """``{(topic, partition): claims}``: the highest offset each consumer
    group committed (``__consumer_offsets`` under the target)."""
    from kbatch.internal.offsets import offset_commits
    out: dict[tuple, list[Claim]] = {}
    try:
        table = offset_commits(found, validate_crc=False)
    except (KbatchError, OSError):
        return out
    latest: dict[tuple, tuple] = {}
    for row in table.select(["group", "topic", "partition", "committed_offset",
                             "tombstone"]).to_pylist():
        if row["topic"] is None or row["committed_offset"] is None:
            continue
        key = (row["group"], row["topic"], row["partition"])
        latest[key] = None if row["tombstone"] else row["committed_offset"]
    for (group, topic, partition), offset in latest.items():
        if offset is not None and offset > 0:
            out.setdefault((topic, partition), []).append(
                Claim(offset, f"group {group!r} committed offset {offset}", "commit"))
    return out


def shortfalls(found: Resolved, ends: dict[tuple, tuple[int | None, set]]) -> list[Shortfall]:
    """Every shortfall of the partitions under ``found`` (a partition, a
    data directory or several). ``ends``: per ``(topic, partition)`` here,
    ``(log end offset of its segments or None when it has none, their base
    offsets)``, from the caller's own pass over the segments."""
    if found.kind is PathKind.SEGMENT:
        return []
    out: list[Shortfall] = []
    dirs = list(found.locations) if found.kind is not PathKind.PARTITION else []
    if found.kind is PathKind.PARTITION and parse_partition_dir(found.location.parent.name) \
            is None and found.location.parent.name:
        dirs = [found.location.parent]     # a partition inside a data directory
    checkpoint: dict[tuple, list[Claim]] = {}
    for d in dirs:
        try:
            for key, claims in checkpoint_claims(d).items():
                checkpoint.setdefault(key, []).extend(claims)
        except (KbatchError, OSError):
            pass
    commits = commit_claims(found) if found.kind is not PathKind.PARTITION else {}
    here = {(p.topic, p.partition): p.location for p in found.partitions()}
    for key, loc in here.items():
        end, bases = ends.get(key, (None, set()))
        claims, orphans = side_file_claims(loc, bases)
        claims += checkpoint.get(key, []) + commits.get(key, [])
        starts = [c.end for c in checkpoint.get(key, []) if "log start" in c.why]
        if end is not None:
            have = end
        elif starts:
            have = max(starts)           # below the log start offset: deleted, not missing
        else:
            have = min(b for b, _ in orphans) if orphans else 0
        for base, names in orphans:
            later = [b for b in bases if b > base]
            if later:                    # a hole between segments that are here
                out.append(Shortfall(key[0], key[1], base, min(later),
                                     [f"{', '.join(names)} without {base:020d}.log"]))
            else:                        # at the end: weighed with the other claims
                claims.append(Claim(base, f"{base:020d}", "orphan"))
        beyond = [c for c in claims if c.end > have]
        if beyond:
            out.append(Shortfall(key[0], key[1], have, max(c.end for c in beyond),
                                 summary(beyond)))
    if found.kind is not PathKind.PARTITION:
        for key, claims in sorted(checkpoint.items()):
            if key not in here and any(c.end > 0 for c in claims):
                out.append(Shortfall(key[0], key[1], 0, max(c.end for c in claims),
                                     ["no partition directory"] + summary(claims)))
    return out


def missing_data(target, storage=None) -> list[Shortfall]:
    """``shortfalls`` of a path or URL, with each partition's log end from
    a walk over its last segment's batch headers (no record is decoded)."""
    from kbatch.lib.log import PartitionLog
    from kbatch.lib.open import resolve
    from kbatch.lib.plan import log_end_offset
    found = resolve(target, storage)
    if found.kind is PathKind.SEGMENT:
        return []
    ends = {}
    for part in found.partitions():
        log = PartitionLog.at(part, found.storage)
        end = log_end_offset(log.segments, False) if log.segments else None
        ends[(log.topic, log.partition)] = (end, {s.base_offset for s in log.segments})
    return shortfalls(found, ends)


__all__ = ["Claim", "missing_data", "OFFSET_FILES", "Shortfall", "checkpoint_claims", "commit_claims",
           "shortfalls", "side_file_claims"]
