"""The command line of a log's life (``kbatch.tools.cli`` registers them):

    kbatch latest PATH          the table view: one row per key (view="latest")
    kbatch recover SRC DST      the valid prefix of every partition, indexes rebuilt
    kbatch retention SRC ...    what retention.ms / retention.bytes would delete
    kbatch compact SRC DST      what Kafka's log cleaner would leave

Paths go through the CLI's door (``resolve_path``, ``storage_of``: the
functions of ``kbatch.tools.cli``), so errors and exit codes are those of
every other command.
"""

from __future__ import annotations

import argparse
import json
import sys

from kbatch.lib.compact import INT_RANGE, MAX_COMPACTION_LAG_MS_RANGE, SEGMENT_BYTES_RANGE
from kbatch.lib.paths import PathKind
from kbatch.lib.retention import RETENTION_BYTES_RANGE, RETENTION_MS_RANGE
from kbatch.wire import INT64_MAX

EXIT_OK, EXIT_PROBLEMS = 0, 1


def count(text: str) -> int:
    """A whole number in 0..2**63-1 (an argparse type)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"{value} is out of range: expected 0..{INT64_MAX}")
    return value


def _within(low: int, high: int, what: str = ""):
    """An argparse type: a whole number in ``low..high`` (``what``: whose
    range it is, e.g. Kafka's config)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range: expected {low}..{high}"
                                             + (f" ({what})" if what else ""))
        return value
    return parse


def ratio(text: str) -> float:
    """A number in [0, 1] (an argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range: expected 0..1")
    return value


def _bytes(b: bytes | None, decode: str | None):
    """A key or value for output: UTF-8 text with ``decode="utf8"`` (other
    bytes as ``{"base64": ...}``), base64 otherwise; None stays None."""
    import base64
    if b is None:
        return None
    if decode == "utf8":
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return {"base64": base64.b64encode(b).decode("ascii")} if decode == "utf8" \
        else base64.b64encode(b).decode("ascii")


def _shown(b: bytes | None) -> str:
    """Printable UTF-8 as text, anything else escaped (``b'\\x00..'``)."""
    if b is None:
        return "null"
    try:
        text = b.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    return repr(b)


def _partitions(found):
    from kbatch.lib.log import PartitionLog
    from kbatch.lib.open import Partition
    if found.kind is PathKind.PARTITION:
        return [PartitionLog.at(Partition(found.topic, found.partition, found.location),
                                found.storage)]
    return [PartitionLog.at(p, found.storage) for p in found.partitions()]


def cmd_latest(args, resolve_path, storage_of) -> int:
    """``kbatch latest``: each partition's table (view="latest"), one line
    (or JSON object) per key, then what was left out."""
    from kbatch.lib.latest import latest
    from kbatch.lib.log import select_topics
    from kbatch.lib.visibility import visible_ranges
    found = resolve_path(args.path, PathKind.PARTITION, PathKind.DATA_DIR, PathKind.DATA_DIRS,
                         what="latest reads a partition or a broker data directory",
                         storage=storage_of(args), segments=True)
    logs = _partitions(found)
    if args.topic:
        logs = select_topics(logs, args.topic, found.name)
    shown = 0
    for log in logs:
        name = f"{log.topic}-{log.partition}" if log.topic is not None else log.name
        bounds = {}
        if args.visibility == "consumer":
            # the checkpoints of the data directory holding the partition
            start, hw = visible_ranges(log.location.parent).get((log.topic, log.partition),
                                                                (None, None))
            bounds = {"log_start": start, "high_watermark": hw}
        records = log.read(isolation=args.isolation, **bounds)
        table, summary = latest(records, where=name, warn=False)
        rows = range(len(table)) if args.limit is None else range(min(args.limit, len(table)))
        for i in rows:
            offset, ts = int(table.offset[i]), int(table.timestamp[i])
            key, value = table.key[i], table.value[i]
            if args.format == "json":
                print(json.dumps({"topic": log.topic, "partition": log.partition,
                                  "offset": offset, "timestamp": ts,
                                  "key": _bytes(key, args.decode),
                                  "value": _bytes(value, args.decode)}))
            else:
                print(f"{name} offset {offset} timestamp {ts} key {_shown(key)} "
                      f"value {_shown(value)}")
        shown += len(table)
        note = {"topic": log.topic, "partition": log.partition, "records": summary.records,
                "keys": summary.keys, "rows": summary.rows, "tombstones": summary.tombstones,
                "null_keys": summary.null_keys}
        if args.format == "json":
            print(json.dumps({"summary": note}))
        else:
            print(f"{name}: {summary.rows} keys in the table from {summary.records} records; "
                  f"{summary.tombstones} keys deleted by a tombstone, {summary.null_keys} "
                  "records without a key left out", file=sys.stderr)
    return EXIT_OK if shown or logs else EXIT_PROBLEMS


def _print_notes(notes: list[str], fmt: str) -> None:
    """A copy's notes on its data directory (folders it leaves out)."""
    for note in notes:
        print(json.dumps({"note": note}) if fmt == "json" else f"note: {note}")


def cmd_recover(args, resolve_path, storage_of) -> int:
    """``kbatch recover``: the valid prefix of every partition into DST;
    exit 1 when something was dropped (the report says what)."""
    from kbatch.tools.recover import DECODE_LIMITS, recover
    found = resolve_path(args.source, PathKind.PARTITION, PathKind.DATA_DIR,
                         what="recover takes a partition or a broker data directory",
                         storage=storage_of(args, [args.source]), check=False, segments=True)
    limits = {name: getattr(args, name) for name in DECODE_LIMITS
              if getattr(args, name) is not None}
    report = recover(found, args.dest, index_interval_bytes=args.index_interval_bytes, **limits)
    for p in report.partitions:
        if args.format == "json":
            print(json.dumps({"partition": p.name, "log_start_offset": p.log_start_offset,
                              "log_end_offset": p.log_end_offset,
                              "leader_epochs": p.leader_epochs,
                              "segments": [s.__dict__ for s in p.segments],
                              "dropped": [d.__dict__ for d in p.dropped]}))
            continue
        if not p.segments and not p.dropped:
            print(f"{p.name}: no segment files, nothing copied")
            continue
        print(f"{p.name}: {len(p.segments)} segments copied, log [{p.log_start_offset}, "
              f"{p.log_end_offset})" + ("" if p.dropped else ", nothing dropped"))
        splits: dict = {}
        for s in p.segments:
            if s.split_from:
                splits.setdefault(s.split_from, []).append(s.file)
        for source, parts in splits.items():
            print(f"  split {source} (relative offsets past 2**31 - 1) into "
                  f"{', '.join(parts)}")
        for d in p.dropped:
            what = "whole segment" if d.start == 0 else f"from byte {d.start}"
            print(f"  dropped {d.file} {what}: {d.bytes} bytes from offset {d.first_offset} "
                  f"({d.reason})")
    _print_notes(report.notes, args.format)
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def cmd_retention(args, resolve_path, storage_of) -> int:
    """``kbatch retention``: the plan per partition; ``--apply DEST`` writes
    the retained copy."""
    from kbatch.lib.retention import retention
    found = resolve_path(args.source, PathKind.PARTITION, PathKind.DATA_DIR,
                         what="retention takes a partition or a broker data directory",
                         storage=storage_of(args, [args.source]), check=False, segments=True)
    plan = retention(found, retention_ms=args.retention_ms, retention_bytes=args.retention_bytes,
                     now=args.now, cleanup_policy=args.cleanup_policy)
    for p in plan.partitions:
        name = f"{p.topic}-{p.partition}" if p.topic is not None else p.log.name
        if args.format == "json":
            print(json.dumps({"topic": p.topic, "partition": p.partition,
                              "log_start_offset": p.log_start_offset,
                              "log_end_offset": p.log_end_offset,
                              "high_watermark": p.high_watermark,
                              "cleanup_policy": p.cleanup_policy,
                              "deleted": [d.__dict__ for d in p.deleted], "rolled": p.rolled,
                              "restarted": p.restarted, "notes": p.notes,
                              "new_log_start_offset": p.new_log_start_offset}))
            continue
        for d in p.deleted:
            print(f"{name}: delete {d.file} ({d.reason}): {d.bytes} bytes, offsets from "
                  f"{d.base_offset}")
        roll = (f", after rolling an empty segment at {p.roll_offset}" if p.rolled else "")
        policy = ("" if "delete" in p.cleanup_policy.split(",") else
                  f" (cleanup.policy {p.cleanup_policy}: only the log start offset deletes)")
        print(f"{name}: {len(p.deleted)} of {len(p.segments)} segments deleted{roll}; new log "
              f"start {p.new_log_start_offset} (was {p.log_start_offset}), log end "
              f"{p.log_end_offset}, high watermark {p.high_watermark}{policy}")
        for note in p.notes:
            print(f"  note: {note}")
    _print_notes(plan.notes, args.format)
    if args.apply:
        out = plan.apply(args.apply)
        print(f"wrote the retained copy to {out}", file=sys.stderr)
    return EXIT_OK if plan.partitions else EXIT_PROBLEMS


def cmd_compact(args, resolve_path, storage_of) -> int:
    """``kbatch compact``: what one run of the log cleaner leaves, in DST."""
    from kbatch.lib.compact import compact
    found = resolve_path(args.source, PathKind.PARTITION, PathKind.DATA_DIR,
                         what="compact takes a partition or a broker data directory",
                         storage=storage_of(args, [args.source]), check=False, segments=True)
    report = compact(found, args.dest, now=args.now,
                     delete_retention_ms=args.delete_retention_ms,
                     segment_bytes=args.segment_bytes,
                     min_compaction_lag_ms=args.min_compaction_lag_ms,
                     min_cleanable_dirty_ratio=args.min_cleanable_dirty_ratio,
                     max_compaction_lag_ms=args.max_compaction_lag_ms,
                     cleanup_policy=args.cleanup_policy)
    for name in report.not_compacted:
        if args.format == "json":
            print(json.dumps({"not_compacted": name}))
        else:
            print(f"{name}: not cleaned (the log cleaner cleans compacted topics only); "
                  "copied as it is")
    for p in report.partitions:
        name = f"{p.topic}-{p.partition}" if p.topic is not None else report.dest
        if args.format == "json":
            print(json.dumps({"topic": p.topic, "partition": p.partition,
                              "first_uncleanable_offset": p.first_uncleanable_offset,
                              "first_dirty_offset": p.first_dirty_offset,
                              "end_offset": p.end_offset,
                              "dirty_ratio": p.dirty_ratio, "picked": p.picked,
                              "cleaned": [c.__dict__ for c in p.cleaned],
                              "untouched": p.untouched, "null_keys": p.null_keys,
                              "tombstones_kept": p.tombstones_kept,
                              "tombstones_removed": p.tombstones_removed,
                              "aborted_batches": p.aborted_batches}))
            continue
        if not p.picked:
            print(f"{name}: not cleaned: dirty ratio {p.dirty_ratio:.3f} is not above "
                  f"--min-cleanable-dirty-ratio {args.min_cleanable_dirty_ratio} (and "
                  f"--max-compaction-lag-ms has not passed); every segment copied")
            continue
        records_in = sum(c.records_in for c in p.cleaned)
        records_out = sum(c.records_out for c in p.cleaned)
        print(f"{name}: cleaned [{p.first_dirty_offset}, {p.end_offset}) "
              f"(first uncleanable offset {p.first_uncleanable_offset}): "
              f"{len(p.cleaned)} cleaned segment(s) from "
              f"{sum(len(c.sources) for c in p.cleaned)}, {records_out} of {records_in} "
              f"records kept; {p.tombstones_kept} tombstones kept, {p.tombstones_removed} "
              f"removed, {p.null_keys} records without a key dropped, {p.aborted_batches} "
              f"aborted batches emptied; untouched: {', '.join(p.untouched) or '-'}")
    _print_notes(report.notes, args.format)
    return EXIT_OK if report.partitions or report.not_compacted else EXIT_PROBLEMS


def add_subcommands(sub, resolve_path, storage_of, url_flags) -> None:
    """Register ``kbatch latest`` (and the other commands of a log's life)."""
    p = sub.add_parser("latest", help="the table view: the latest record of every key",
                       description="One row per key: the record with the highest offset, keys "
                                   "whose latest record is a tombstone left out (what a "
                                   "compacted topic stands for). Records without a key are "
                                   "left out and counted.")
    p.add_argument("path")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--isolation", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted",
                   help="read_committed: aborted and open transactions never count")
    p.add_argument("--visibility", choices=["all", "consumer"], default="all",
                   help="consumer: only [log start offset, high watermark) of the data "
                        "directory's checkpoint files count, as a consumer of the broker "
                        "sees the partition (with --isolation read_committed: the table a "
                        "read_committed consumer rebuilds)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--decode", choices=["utf8"], default=None,
                   help="JSON: keys/values as UTF-8 text instead of base64")
    p.add_argument("--limit", type=count, default=None, help="at most this many rows per partition")
    url_flags(p)
    p.set_defaults(func=lambda args: cmd_latest(args, resolve_path, storage_of))

    p = sub.add_parser("recover", help="copy the valid prefix of every partition, indexes rebuilt",
                       description="What a broker's recovery keeps, written to a new directory: "
                                   "every batch checked as verify checks it, each partition cut "
                                   "at its first invalid batch (the rest of that segment and "
                                   "every later segment dropped and reported), .index, "
                                   ".timeindex, .txnindex, leader-epoch and checkpoint files "
                                   "rebuilt. The source is never written. Exit 1 when something "
                                   "was dropped.")
    p.add_argument("source", metavar="SRC")
    p.add_argument("dest", metavar="DST", help="a new directory (must not exist)")
    p.add_argument("--index-interval-bytes", type=_within(*INT_RANGE, "index.interval.bytes"),
                   default=4096,
                   help="the topic's index.interval.bytes (default 4096)")
    for flag, what in (("--max-batch-bytes", "one batch on disk (default 1 GiB)"),
                       ("--max-decompressed-bytes", "one batch decompressed (default 256 MiB)"),
                       ("--max-records-per-batch", "records of one batch (default 16 Mi)"),
                       ("--max-headers-per-record", "headers of one record (default 65536)")):
        p.add_argument(flag, type=_within(1, 2**62, flag[2:]), default=None,
                       help=f"decode limit: {what}; a batch past it stops the recovery "
                            "(it is not damage) and says which flag to raise")
    p.add_argument("--format", choices=["text", "json"], default="text")
    url_flags(p)
    p.set_defaults(func=lambda args: cmd_recover(args, resolve_path, storage_of))

    p = sub.add_parser("retention", help="what retention.ms / retention.bytes would delete",
                       description="The segments Kafka's retention would delete per partition "
                                   "(log start offset, size, then time, each oldest first), the "
                                   "reason for each and the new log start offset; --apply "
                                   "writes the retained copy to a new directory.")
    p.add_argument("source", metavar="SRC")
    p.add_argument("--retention-ms", type=_within(*RETENTION_MS_RANGE, "retention.ms"),
                   default=None,
                   help="retention.ms (-1 or absent: no time limit; below -1 is refused, as "
                        "Kafka refuses it)")
    p.add_argument("--retention-bytes", type=_within(*RETENTION_BYTES_RANGE, "retention.bytes"),
                   default=None,
                   help="retention.bytes per partition (negative or absent: no size limit, "
                        "as in Kafka)")
    p.add_argument("--now", type=count, default=None, help="the time in ms (default: now)")
    p.add_argument("--cleanup-policy", default="delete",
                   help="the topics' cleanup.policy: delete (default), compact or compact,delete; "
                        "without delete only the log start offset deletes; fixed for "
                        "__consumer_offsets, __transaction_state and __cluster_metadata")
    p.add_argument("--apply", metavar="DEST", help="write the retained copy here (a new directory)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    url_flags(p)
    p.set_defaults(func=lambda args: cmd_retention(args, resolve_path, storage_of))

    p = sub.add_parser("compact", help="what Kafka's log cleaner would leave, in a new directory",
                       description="One run of Kafka's log cleaner on a copy: the latest record "
                                   "per key in the segments below the active one, tombstones "
                                   "kept until their delete horizon, aborted transactions "
                                   "removed, offsets preserved, indexes rebuilt.")
    p.add_argument("source", metavar="SRC")
    p.add_argument("dest", metavar="DST", help="a new directory (must not exist)")
    p.add_argument("--now", type=count, default=None, help="the time in ms (default: now)")
    p.add_argument("--delete-retention-ms", type=count, default=86_400_000,
                   help="delete.retention.ms: how long tombstones and markers stay")
    p.add_argument("--segment-bytes", type=_within(*SEGMENT_BYTES_RANGE, "segment.bytes"),
                   default=1 << 30,
                   help="segment.bytes: cleaned segments are grouped up to this size "
                        f"({SEGMENT_BYTES_RANGE[0]}..{SEGMENT_BYTES_RANGE[1]}, as Kafka's "
                        "LogConfig; Kafka 4 refuses under 1 MiB)")
    p.add_argument("--min-compaction-lag-ms", type=count, default=0,
                   help="min.compaction.lag.ms: segments with records this recent stay dirty")
    p.add_argument("--min-cleanable-dirty-ratio", type=ratio, default=None,
                   help="min.cleanable.dirty.ratio: clean only a log the broker would pick "
                        "(default: one run on every log)")
    p.add_argument("--max-compaction-lag-ms",
                   type=_within(*MAX_COMPACTION_LAG_MS_RANGE, "max.compaction.lag.ms"),
                   default=None,
                   help="max.compaction.lag.ms: with --min-cleanable-dirty-ratio, a log "
                        "whose dirty data is older than this is picked whatever its ratio")
    p.add_argument("--cleanup-policy", default="compact",
                   help="the topics' cleanup.policy: compact (default), delete or "
                        "compact,delete; a topic without compact is copied as it is (and so "
                        "is __cluster_metadata, which the log cleaner never cleans)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    url_flags(p)
    p.set_defaults(func=lambda args: cmd_compact(args, resolve_path, storage_of))
