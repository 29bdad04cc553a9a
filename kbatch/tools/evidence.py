"""What says a partition held data, weighed against the segments present.

The claims, and how they are weighed, are ``kbatch.lib.missing``'s (reads
warn of the same shortfalls); here the consumer groups' offset commits are
added, and every partition under a target is weighed:

    __consumer_offsets        a group committed offset C: it had read the offsets below C

``shortfalls`` compares the greatest claimed log end of each partition with
the log end of its segments (one past the last offset of the last whole
batch, or the last segment's base offset), and each segment read to its end
short of the next one with its index files, and returns every shortfall,
with the offsets that are missing and the evidence for them, so that
``verify`` and ``stats`` report missing data as a problem (exit 1) instead
of "ok". Partitions a checkpoint names but whose directory is gone are
reported too. Offset commits name partitions of the whole cluster, so they
are weighed only for partitions that are here. Keeps in memory one row per
claim.
"""

from __future__ import annotations

from kbatch.errors import KbatchError
from kbatch.lib.checkpoints import OFFSET_FILES
from kbatch.lib.missing import (CLAIMING, SIDE_SUFFIXES, Claim, Shortfall, checkpoint_claims,
                                cut_segments, side_file_claims, summary, unnamed,
                                upload_gaps, weigh)
from kbatch.lib.open import Resolved
from kbatch.lib.paths import PathKind, parse_partition_dir


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


def shortfalls(found: Resolved, ends: dict[tuple, tuple[int | None, set]],
               reached: dict[tuple, tuple[list, dict]] | None = None) -> list[Shortfall]:
    """Every shortfall of the partitions under ``found`` (a partition, a
    data directory or several). ``ends``: per ``(topic, partition)`` here,
    ``(log end offset of its segments or None when it has none, their base
    offsets)``, from the caller's own pass over the segments. ``reached``:
    per partition, ``(its segments, {base offset: one past the last offset
    read from it})`` of the segments that pass read whole, ending at a
    batch boundary (``kbatch.lib.missing.cut_segments``)."""
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
        if reached and key in reached and found.storage.layout == "plain":
            out += cut_segments(key[0], key[1], *reached[key])
        elif reached and key in reached:
            out += upload_gaps(key[0], key[1], reached[key][0])
        out += weigh(key[0], key[1], end, bases, claims, orphans, starts)
    if found.kind is not PathKind.PARTITION:
        for key, claims in sorted(checkpoint.items()):
            gone = unnamed(key, claims) if key not in here else None
            if gone is not None:
                out.append(gone)
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


__all__ = ["CLAIMING", "Claim", "missing_data", "OFFSET_FILES", "SIDE_SUFFIXES", "Shortfall",
           "checkpoint_claims", "commit_claims", "shortfalls", "side_file_claims", "summary"]
