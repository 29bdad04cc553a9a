"""The ``kbatch`` command.

    kbatch dump FILE...     what kafka-dump-log.sh --print-data-log shows (or JSON)
    kbatch stats PATH       per partition and segment: records, offsets, times, ...
    kbatch verify PATH      CRCs, offsets, indexes, where valid data ends
    kbatch txn PATH         transactions per producer, open ones flagged
    kbatch lag DATA_DIR     consumer lag over time (kbatch.internal)
    kbatch sample DIR       write a realistic broker data directory
    kbatch main             the main job (make run): sample + Spark pipeline

Exit status: 0 ok, 1 problems found (or corrupt data), 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from kbatch.errors import KbatchError
from kbatch.internal import cli as internal_cli

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


def _existing(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"no such file or directory: {path}")
    return p


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (ValueError, OverflowError, OSError):  # beyond what datetime can show
        return f"{ms} ms"


# --- dump ---------------------------------------------------------------

def cmd_dump(args) -> int:
    from kbatch.dump import dump_file
    if args.max_bytes is not None and args.max_bytes < 0:
        raise UsageError("--max-bytes must not be negative")
    status = EXIT_OK
    for name in args.files:
        path = _existing(name)
        if path.is_dir():
            raise UsageError(f"{name} is a directory: dump takes segment or index files")
        try:
            dump_file(path, sys.stdout, fmt=args.format, decode=args.decode,
                      max_bytes=args.max_bytes, print_data=not args.no_data,
                      validate_crc=not args.no_crc)
        except KbatchError as exc:
            sys.stdout.flush()
            print(f"kbatch dump: {exc}", file=sys.stderr)
            status = EXIT_PROBLEMS
    return status


# --- stats --------------------------------------------------------------

def cmd_stats(args) -> int:
    from kbatch.progress import Progress
    from kbatch.stats import segment_files, segment_stats, summarize

    files = segment_files(_existing(args.path))
    rows = []
    status = EXIT_OK
    with Progress(len(files), "stats") as bar:
        for topic, partition, path in files:
            try:
                rows.append((topic, partition, segment_stats(path, validate_crc=not args.no_crc)))
            except KbatchError as exc:
                print(f"\nkbatch stats: {exc}", file=sys.stderr)
                status = EXIT_PROBLEMS
            bar.update(1, path.name)
    by_partition: dict = {}
    for topic, partition, st in rows:
        by_partition.setdefault((topic, partition), []).append(st)
    if args.format == "json":
        for (topic, partition), stats in by_partition.items():
            print(json.dumps({"topic": topic, "partition": partition, **summarize(stats),
                              "segments": [s.as_dict() for s in stats]}))
        print(json.dumps({"total": summarize([s for _, _, s in rows])}))
        return status
    for (topic, partition), stats in by_partition.items():
        tot = summarize(stats)
        name = f"{topic}-{partition}" if topic is not None else str(Path(stats[0].path).parent)
        print(f"{name}: {tot['records']} records in {tot['batches']} batches, "
              f"{tot['control_records']} control, offsets {tot['first_offset']}..{tot['last_offset']}, "
              f"{_when(tot['min_timestamp'])} .. {_when(tot['max_timestamp'])}, "
              f"{tot['bytes']} bytes, codecs {','.join(tot['codecs']) or '-'}, "
              f"{tot['producers']} producers")
        for s in stats:
            print(f"  {Path(s.path).name}: {s.records} records, {s.batches} batches, "
                  f"{s.control_records} control, offsets {s.first_offset}..{s.last_offset}, "
                  f"{_when(s.min_timestamp)} .. {_when(s.max_timestamp)}, {s.bytes} bytes, "
                  f"codecs {','.join(s.codecs) or '-'}, magic {','.join(map(str, s.magics)) or '-'}, "
                  f"{len(s.producers)} producers, {s.transactional_batches} transactional batches"
                  + (f", ends: {s.end_reason}" if s.end_reason else ""))
    total = summarize([s for _, _, s in rows])
    print(f"total: {total['records']} records, {total['batches']} batches, "
          f"{total['control_records']} control, {total['bytes']} bytes in "
          f"{total['segments']} segments of {len(by_partition)} partitions")
    return status


# --- verify -------------------------------------------------------------

def cmd_verify(args) -> int:
    from kbatch.progress import Progress
    from kbatch.stats import segment_files
    from kbatch.verify import verify

    path = _existing(args.path)
    with Progress(len(segment_files(path)), "verify") as bar:
        report = verify(path, on_segment=lambda seg: bar.update(1, Path(seg).name))
    if args.format == "json":
        for s in report.segments:
            print(json.dumps({**s.__dict__, "ok": s.ok, "problems": s.problems()}))
        for problem in report.partition_problems:
            print(json.dumps({"partition_problem": problem}))
    else:
        for s in report.segments:
            state = "ok" if s.ok else "PROBLEMS"
            print(f"{s.path}: {state}: {s.batches} batches, {s.records} records, "
                  f"{s.control_records} control, valid bytes {s.valid_bytes}"
                  + (f", {s.trailing_bytes} trailing bytes ({s.end_reason})"
                     if s.trailing_bytes else ""))
            for problem in s.problems():
                print(f"  - {problem}")
        for problem in report.partition_problems:
            print(f"partition: {problem}")
        print(f"{len(report.segments)} segments, {report.batches} batches, "
              f"{report.records} records: " + ("ok" if report.ok else "problems found"))
    return EXIT_OK if report.ok else EXIT_PROBLEMS


# --- txn ----------------------------------------------------------------

def cmd_txn(args) -> int:
    from kbatch.txn import transactions

    reports = transactions(_existing(args.path), validate_crc=not args.no_crc)
    hanging = 0
    for rep in reports:
        if args.format == "json":
            for t in rep.transactions:
                print(json.dumps({"source": rep.source, **t.__dict__}))
            print(json.dumps({"source": rep.source, "last_stable_offset": rep.last_stable_offset,
                              "log_end_offset": rep.log_end_offset, "open": len(rep.open)}))
        else:
            print(f"{rep.source}: {len(rep.transactions)} transactions, "
                  f"LSO {rep.last_stable_offset}, log end offset {rep.log_end_offset}")
            if rep.transactions:
                print(f"  {'producer':>10} {'epoch':>5} {'first':>12} {'last':>12} "
                      f"{'marker':>12} {'status':<7} {'records':>8} {'batches':>7}")
            for t in rep.transactions:
                flag = "  <-- open (hanging)" if t.status == "OPEN" else ""
                marker = "-" if t.marker_offset is None else t.marker_offset
                print(f"  {t.producer_id:>10} {t.producer_epoch:>5} {t.first_offset:>12} "
                      f"{t.last_offset:>12} {marker:>12} {t.status:<7} {t.records:>8} "
                      f"{t.batches:>7}{flag}")
        hanging += len(rep.open)
    if hanging and args.format == "text":
        print(f"{hanging} open transaction(s): read_committed stops at the LSO")
    return EXIT_OK


# --- sample and main ----------------------------------------------------

def cmd_sample(args) -> int:
    from kbatch.sample import write_sample

    target = Path(args.directory)
    if target.exists() and any(target.iterdir()) and not args.force:
        raise UsageError(f"{target} is not empty (use --force to write into it)")
    start = time.perf_counter()
    summary = write_sample(target, records=args.records, seed=args.seed,
                           segment_bytes=args.segment_bytes)
    for name, count in summary.records.items():
        print(f"{name}: {count} records ({summary.committed[name]} committed)")
    print(f"wrote {summary.total} records to {target} in {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def cmd_main(args) -> int:
    from kbatch.pipeline import run
    return run(args.log_dir, out_dir=args.out, sample_dir=args.sample_dir,
               sample_records=args.sample_records)


# --- parser -------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbatch", description="Read Apache Kafka log segments at rest.",
        epilog="Exit status: 0 ok, 1 problems found, 2 usage error.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("dump", help="print batches and records of segment or index files",
                       description="Print what kafka-dump-log.sh --print-data-log shows: a line "
                                   "per batch and per record; or one JSON object per line.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=".log/.records/.checkpoint segments or .index/.timeindex/.txnindex files")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--decode", choices=["utf8"], default=None,
                   help="JSON: keys/values as UTF-8 text instead of base64")
    p.add_argument("--max-bytes", type=int, default=None,
                   help="read at most this many bytes of each file")
    p.add_argument("--no-data", action="store_true", help="omit keys and payloads")
    p.add_argument("--no-crc", action="store_true", help="do not check CRCs")
    p.set_defaults(func=cmd_dump)
    internal_cli.extend_dump(p, cmd_dump)

    p = sub.add_parser("stats", help="records, offsets, times, codecs per partition/segment",
                       description="Statistics per partition and segment of a segment file, a "
                                   "partition directory or a broker data directory.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--no-crc", action="store_true", help="do not check CRCs")
    p.set_defaults(func=cmd_stats)
    internal_cli.extend_stats(p, cmd_stats)

    p = sub.add_parser("verify", help="check CRCs, offsets and indexes without changing files",
                       description="Check segments like the broker's recovery: CRCs, offsets, "
                                   "index entries, where valid data ends. Exit 1 on problems.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("txn", help="transactions per producer: committed, aborted, open",
                       description="List transactions per producer id and epoch: first offset, "
                                   "marker offset, COMMIT/ABORT/OPEN, records, and the LSO.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--no-crc", action="store_true", help="do not check CRCs")
    p.set_defaults(func=cmd_txn)
    internal_cli.extend_txn(p, cmd_txn)
    internal_cli.add_subcommands(sub)

    p = sub.add_parser("sample", help="write a realistic broker data directory",
                       description="Write a broker data directory: several topics and "
                                   "partitions, mixed codecs, headers, an idempotent producer, "
                                   "committed and aborted transactions, rolled segments.")
    p.add_argument("directory")
    p.add_argument("--records", type=int, default=1_500_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--segment-bytes", type=int, default=1 << 20)
    p.add_argument("--force", action="store_true", help="write into a non-empty directory")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("main", help="the main job: sample (or LOG_DIR) -> Spark -> Parquet",
                       description="Read a broker data directory (LOG_DIR, or a generated "
                                   "sample) with Spark read_committed, write Parquet by topic, "
                                   "print a summary and check the counts against kbatch.")
    p.add_argument("--log-dir", default=os.environ.get("LOG_DIR") or None,
                   help="a broker data directory (default: $LOG_DIR, else the sample)")
    p.add_argument("--out", default="out", help="output directory (default ./out)")
    p.add_argument("--sample-dir", default="sample", help="where the sample lives (./sample)")
    p.add_argument("--sample-records", type=int, default=1_500_000)
    p.set_defaults(func=cmd_main)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"kbatch {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except KbatchError as exc:
        print(f"kbatch {args.command}: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS


if __name__ == "__main__":
    sys.exit(main())
