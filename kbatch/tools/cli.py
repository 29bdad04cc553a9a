"""The ``kbatch`` command.

    kbatch dump FILE...     what kafka-dump-log.sh --print-data-log shows (or JSON)
    kbatch stats PATH       per partition and segment: records, offsets, times, ...
    kbatch verify PATH      CRCs, offsets, indexes, where valid data ends
    kbatch txn PATH         transactions per producer, open ones flagged
    kbatch lag DATA_DIR     consumer lag over time (kbatch.internal)
    kbatch latest PATH      the table view: the latest record of every key
    kbatch sample DIR       write a realistic broker data directory
    kbatch main             the main job (make run): sample + Spark pipeline

dump, stats, verify and txn also take URLs (s3://, gs://, file://, any fsspec
URL) with --storage-option KEY=VALUE, and --layout plain|tiered and
--private-key PEM for tiered-storage buckets.

Exit status: 0 ok, 1 problems found (or corrupt data, or nothing to read: a
target holding no segment file at all; a partition holding an empty segment
is an empty partition, 0), 2 usage errors (an argument out of range, Kafka's
topic config ranges included).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from kbatch.wire import INT64_MAX
from kbatch.errors import KbatchError
from kbatch.tools import internal_cli, lifecycle_cli
from kbatch.tools import schemas as schemas_cli

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or a path of the wrong kind: exit 2."""


class NothingToRead(Exception):
    """The path exists but holds no Kafka data: exit 1."""


# --- argument types (argparse turns ArgumentTypeError into a usage error) --

def _integer(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{value} is out of range: {what}")
    return value


def non_negative_int64(text: str) -> int:
    return _integer(text, 0, INT64_MAX, f"expected 0..{INT64_MAX}")


MAX_SAMPLE_RECORDS = 200_000_000


def sample_records(text: str) -> int:
    return _integer(text, 1, MAX_SAMPLE_RECORDS, f"expected 1..{MAX_SAMPLE_RECORDS}")


def segment_bytes(text: str) -> int:
    return _integer(text, 1024, (1 << 31) - 1, "expected 1024..2147483647")


def seed_value(text: str) -> int:
    return _integer(text, 0, (1 << 32) - 1, "expected 0..4294967295")


# --- paths -----------------------------------------------------------------

def _storage(args, names=None):
    """The one ``Storage`` of a command (``--storage-option``, ``--layout``,
    ``--private-key``), built once for all its paths. The storage options
    are for URLs: given with local paths only, they are a usage error."""
    from kbatch.lib.storage import Storage
    from kbatch.lib.tree import is_remote
    names = [getattr(args, "path", None)] if names is None else names
    names = getattr(args, "all_files", names)     # dump: one call per file, one storage
    options = dict(getattr(args, "storage_option", None) or ())
    remote = [is_remote(n) for n in names if n]
    if options and not any(remote):
        raise UsageError("--storage-option is for URLs (s3://..., gs://...), not the local "
                         f"path {names[0]}")
    try:
        return Storage.of(storage_options=options, layout=getattr(args, "layout", "plain"),
                          private_key=getattr(args, "private_key", None))
    except KbatchError as exc:
        raise UsageError(str(exc)) from None


def _resolve(name: str, *kinds, what: str = "", check: bool = True, storage=None,
             segments: bool = False):
    """The door's answer for a command-line path or URL
    (``kbatch.lib.open.resolve``), its errors mapped to exit codes: a
    missing path or one of the wrong kind (a device, a FIFO, a directory
    where a file is needed) is a usage error (2); a directory with nothing
    Kafka in it, and with ``segments=True`` a partition or data directory
    holding no segment file at all, is "nothing to read" (1). (An empty
    segment is an empty partition, not nothing: it reads as 0 records.)"""
    from kbatch.lib.open import resolve, tree_of
    from kbatch.lib.paths import PathError, PathKind
    from kbatch.lib.tree import Location
    if not name:
        raise UsageError("an empty path")
    try:
        found = resolve(name, storage)
    except PathError as exc:
        try:
            here = Location(*tree_of(name, storage)).stat().kind
        except KbatchError:
            here = "missing"
        if here == "directory":
            raise NothingToRead(str(exc)) from exc
        raise UsageError(str(exc)) from exc
    if kinds and found.kind not in kinds:
        raise UsageError(f"{found.name}: is a {found.kind.value}; {what}")
    if check and found.kind is PathKind.SEGMENT:
        _not_a_side_file(found)
        _check_segment(found)
    if segments:
        _require_segments(found)
    return found


def _require_segments(found) -> None:
    """A target holding no segment file at all (partition directories
    without a ``.log``) is "nothing to read", exit 1, whichever command
    reads it (verify and stats say so in their report)."""
    from kbatch.tools.stats import segment_files
    if not segment_files(found):
        raise NothingToRead(f"{found.name}: no segment files: nothing to read (expected a "
                            "segment file, a <topic>-<partition> directory holding one or a "
                            "broker data directory)")


# files that sit beside segments and hold no batches: what they are, and which
# command reads them
SIDE_FILES = ((".index", "an offset index file"), (".timeindex", "a time index file"),
              (".txnindex", "a transaction index file"),
              (".snapshot", "a producer state snapshot"))


def _not_a_side_file(found) -> None:
    """An index file, a producer snapshot or a checkpoint file given where a
    segment is read is named as what it is (exit 2), never decoded as batches."""
    from kbatch.lib.checkpoints import EPOCH_FILE, OFFSET_FILES
    name = found.location.name
    what = next((text for suffix, text in SIDE_FILES if name.endswith(suffix)), None)
    if what is None and (name in OFFSET_FILES or name == EPOCH_FILE):
        what = "a checkpoint file"
    if what is not None:
        raise UsageError(f"{found.name}: is {what}, not a segment (kbatch dump reads it; "
                         f"stats, verify and txn take a segment, a partition or a data "
                         "directory)")


def _check_segment(found) -> None:
    """A file given as a segment must start with a whole batch (or be
    empty, or zero padding as a preallocated segment is): a text file, an
    archive or a truncated copy cut inside its first batch has nothing to read."""
    from kbatch.lib.entry import iter_segment
    try:
        size = found.segment().size
        if size == 0:
            return
        first = next(iter(iter_segment(found.location, storage=found.storage, chunk_records=1,
                                       validate_crc=False)), None)
    except KbatchError:
        return          # a damaged batch: the command itself reports it in full
    if first is not None and len(first.batches) == 0 and first.end is not None \
            and first.end.valid_bytes == 0 and first.end.reason == "truncated":
        raise NothingToRead(f"{found.name}: not a Kafka log segment (or one cut inside its "
                            f"first batch): no whole record batch in its "
                            f"{size} bytes (expected a .log/.records/.checkpoint file, a "
                            f"<topic>-<partition> directory or a broker data directory)")


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (ValueError, OverflowError, OSError):  # beyond what datetime can show
        return f"{ms} ms"


# --- storage flags (every command that reads paths) ------------------------

def storage_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` (a JSON value is decoded: numbers, true/false, objects)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError("not KEY=VALUE (the value is not shown)")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _url_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage-option", type=storage_option, action="append", metavar="KEY=VALUE",
                   help="an fsspec storage option for a URL path (repeat; JSON values are "
                        "decoded), e.g. endpoint_url=http://127.0.0.1:9000")
    p.add_argument("--layout", choices=["plain", "tiered"], default="plain",
                   help="the layout: a broker directory or a copy of one (plain) or a "
                        "tiered-storage bucket (tiered)")
    p.add_argument("--private-key", metavar="PEM",
                   help="the RSA private key (PEM file) of an encrypted tiered bucket")


# --- dump ---------------------------------------------------------------

INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def cmd_dump(args) -> int:
    from kbatch.lib.paths import PathKind
    from kbatch.tools.dump import INDEX_SUFFIXES, dump_file
    status = EXIT_OK
    storage = _storage(args, args.files)
    for name in args.files:
        try:
            index = name.rstrip("/").endswith(INDEX_SUFFIXES)
            found = _resolve(name, PathKind.SEGMENT, check=False, storage=storage,
                             what="dump takes segment or index files")
            if not index:
                _check_segment(found)
            if getattr(args, "registry", None) and not index:
                from kbatch.tools.schemas import dump_decoded
                status = max(status, dump_decoded(found.location, sys.stdout, args.registry, storage=storage,
                                                  max_bytes=args.max_bytes, validate_crc=not args.no_crc))
                continue
            dump_file(found.location, sys.stdout, fmt=args.format, decode=args.decode,
                      max_bytes=args.max_bytes, print_data=not args.no_data,
                      validate_crc=not args.no_crc, storage=storage)
        except (KbatchError, NothingToRead) as exc:
            sys.stdout.flush()
            print(f"kbatch dump: {exc}", file=sys.stderr)
            status = EXIT_PROBLEMS
    return status


# --- stats --------------------------------------------------------------

def _range(first, last) -> str:
    return "-" if first is None else f"{first}..{last}"


def _named_file(d: dict) -> dict:
    """``d`` (a segment's report, a skipped range, where a read stopped)
    with its ``path`` named ``file``, as every JSON output of the command
    line names a segment file (``dump`` first); nested skipped ranges too."""
    out = {("file" if k == "path" else k): v for k, v in d.items()}
    if "skipped" in out:
        out["skipped"] = [_named_file(g._asdict() if hasattr(g, "_asdict") else g)
                          for g in out["skipped"]]
    return out


def _stats_json(stats) -> dict:
    """A segment's statistics under the names ``dump --format json`` uses
    (``file``, codec names)."""
    return _named_file(stats.as_dict())


def cmd_stats(args) -> int:
    from kbatch.lib.paths import PathKind
    from kbatch.tools.evidence import shortfalls
    from kbatch.tools.progress import Progress
    from kbatch.tools.stats import log_bounds, partition_files, reached, segment_stats, summarize
    from kbatch.wire import UNBOUNDED

    found = _resolve(args.path, storage=_storage(args))
    if args.level == "batches":
        return _stats_batches(args, found)
    if args.isolation != "read_uncommitted":
        raise UsageError("--isolation applies to --level batches")
    parts = partition_files(found)
    status = EXIT_OK
    done: dict = {}          # (topic, partition) -> [SegmentStats]
    not_read: dict = {}      # (topic, partition) -> segments after the damage a stop ended at
    failed: set = set()      # partitions with a segment that raised
    with Progress(sum(len(segs) for _, _, segs in parts), "stats") as bar:
        for topic, partition, segs in parts:
            key = (topic, partition)
            done[key] = []
            for i, seg in enumerate(segs):
                last = seg is segs[-1] if len(segs) > 1 or found.kind is not PathKind.SEGMENT \
                    else seg.last
                try:
                    st = segment_stats(seg, last_segment=last, validate_crc=not args.no_crc,
                                       on_corrupt=args.on_corrupt)
                except KbatchError as exc:
                    bar.close()
                    print(f"kbatch stats: {exc}", file=sys.stderr)
                    status = EXIT_PROBLEMS
                    failed.add(key)
                    st = None
                bar.update(1, seg.location.name)
                if st is not None:
                    done[key].append(st)
                    if st.end_reason == "corrupt":     # stop: as a read, nothing after it
                        not_read[key] = segs[i + 1:]
                        break
    bounds = {(t, p): log_bounds(segs, done[(t, p)]) for t, p, segs in parts}
    # where a segment failed or a stop ended the count, the log end is not
    # known: what lies beyond the segments counted is not weighed
    missing = shortfalls(found, {(t, p): (UNBOUNDED if (t, p) in failed | set(not_read)
                                          else bounds[(t, p)][1], {s.base_offset for s in segs})
                                 for t, p, segs in parts},
                         {(t, p): (segs, reached(segs, done[(t, p)])) for t, p, segs in parts})
    rows = [st for stats in done.values() for st in stats]
    if missing or not_read or any(st.skipped for st in rows) \
            or not rows and not any(segs for _, _, segs in parts):
        status = EXIT_PROBLEMS      # missing or damaged data, or nothing to read
    if args.format == "json":
        for (topic, partition), stats in done.items():
            start, end = bounds[(topic, partition)]
            unread = not_read.get((topic, partition), [])
            print(json.dumps({"topic": topic, "partition": partition, **summarize(stats),
                              "log_start_offset": start,
                              "log_end_offset": None if unread else end,
                              "segments": [_stats_json(s) for s in stats],
                              "not_read": [s.name for s in unread]}))
        for m in missing:
            print(json.dumps({"missing": {"topic": m.topic, "partition": m.partition,
                                          "start": m.start, "end": m.end,
                                          "evidence": m.evidence}}))
        print(json.dumps({"total": summarize(rows)}))
        return status
    for (topic, partition), stats in done.items():
        tot = summarize(stats)
        start, end = bounds[(topic, partition)]
        unread = not_read.get((topic, partition))
        name = (f"{topic}-{partition}" if topic is not None and topic != ""
                else str(stats[0].path).rsplit("/", 1)[0] if stats else "?")
        if start is None:
            print(f"{name}: no segment files")
            continue
        print(f"{name}: {tot['records']} records in {tot['batches']} batches, "
              f"{tot['control_records']} control, offsets "
              f"{_range(tot['first_offset'], tot['last_offset'])}, "
              f"log [{start}, {'?' if unread else end}), "
              f"{_when(tot['min_timestamp'])} .. {_when(tot['max_timestamp'])}, "
              f"{tot['bytes']} bytes, codecs {','.join(tot['codecs']) or '-'}, "
              f"{tot['producers']} producers")
        for s in stats:
            file = s.path.rsplit('/', 1)[-1]
            print(f"  {file}: {s.records} records, {s.batches} batches, "
                  f"{s.control_records} control, offsets {_range(s.first_offset, s.last_offset)}, "
                  f"{_when(s.min_timestamp)} .. {_when(s.max_timestamp)}, {s.bytes} bytes, "
                  f"codecs {','.join(s.codecs) or '-'}, magic {','.join(map(str, s.magics)) or '-'}, "
                  f"{len(s.producers)} producers, {s.transactional_batches} transactional batches"
                  + (f", ends: {s.end_reason}" if s.end_reason else ""))
            _print_damage(file, s.skipped, s.valid_bytes if s is stats[-1] and unread is not None
                          else None, s.error, unread)
    for m in missing:
        print(f"missing: {m.describe()}")
    total = summarize(rows)
    print(f"total: {total['records']} records, {total['batches']} batches, "
          f"{total['control_records']} control, {total['bytes']} bytes in "
          f"{total['segments']} segments of {len(done)} partitions")
    return status


def _print_damage(file: str, skipped: list[dict], stopped_at: int | None, error: str | None,
                  not_read: list | None) -> None:
    """The lines of a segment's damage: each range ``--on-corrupt skip``
    passed over, and where ``stop`` ended the count (``stopped_at``: the
    byte; ``not_read``: the partition's segments after it, None: unknown)."""
    from kbatch.lib.records import SkippedRange
    from kbatch.tools.verify_rules import damaged_range
    for gap in skipped:
        print(f"  {file}: skipped {damaged_range(SkippedRange(**gap))}")
    if stopped_at is not None:
        later = "" if not_read is None else f" ({len(not_read)} later segment(s) not read)"
        print(f"  {file}: stopped at byte {stopped_at}: {error}{later}")


class _NotShortfalls:
    """A logging filter: the ``kbatch`` logger's missing-data warnings
    (``kbatch.lib.missing``) left to the command, which prints them itself."""

    @staticmethod
    def filter(record) -> bool:
        return not hasattr(record, "shortfall")


def _stats_batches(args, found) -> int:
    """``stats --level batches``: a line (or JSON object) per batch of the
    read (``kbatch.lib.batchrows``), what it skipped or stopped at
    (``table_damage``) and what is missing (as at the segments level),
    then the total. Exit 1 on damage or missing data."""
    import logging

    from kbatch.lib.batchrows import table_damage
    from kbatch.lib.log import read_table
    from kbatch.tools.evidence import shortfalls
    from kbatch.tools.stats import batch_level_ends
    quiet = _NotShortfalls()
    logging.getLogger("kbatch").addFilter(quiet)
    try:
        table = read_table(found, level="batches", isolation=args.isolation,
                           validate_crc=not args.no_crc, on_corrupt=args.on_corrupt)
    finally:
        logging.getLogger("kbatch").removeFilter(quiet)
    damage = table_damage(table)
    missing = shortfalls(found, *batch_level_ends(found, table, damage))
    status = EXIT_PROBLEMS if damage or missing else EXIT_OK
    if table.num_rows == 0 and not damage:
        try:
            _require_segments(found)    # as the segments level: nothing to read is exit 1
        except NothingToRead as exc:
            print(f"kbatch stats: {exc}", file=sys.stderr)
            status = EXIT_PROBLEMS
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    for name in ("firstTimestamp", "maxTimestamp"):    # milliseconds, as dump's JSON
        ts = table.column(name).cast("int64").to_pylist()
        columns[name] = ts
    rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    total = sum(r["records"] for r in rows)
    if args.format == "json":
        for r in rows:
            print(json.dumps(r))
        for d in damage:
            where = {"topic": d["topic"], "partition": d["partition"]}
            for gap in d["skipped"]:
                print(json.dumps({"skipped": {**where, **_named_file(gap)}}))
            if d["stopped"]:
                print(json.dumps({"stopped": {**where, **_named_file(d["stopped"])}}))
        for m in missing:
            print(json.dumps({"missing": {"topic": m.topic, "partition": m.partition,
                                          "start": m.start, "end": m.end,
                                          "evidence": m.evidence}}))
        return status
    for r in rows:
        flags = "".join([" transactional" if r["isTransactional"] else "",
                         " control" if r["isControl"] else ""])
        print(f"{r['topic']}-{r['partition']} {r['segment'].rsplit('/', 1)[-1]}@{r['position']}: "
              f"offsets {r['baseOffset']}..{r['lastOffset']}, {r['records']} records, "
              f"{r['sizeInBytes']} bytes, {r['compression']}, producer {r['producerId']} "
              f"epoch {r['producerEpoch']} sequence {r['baseSequence']}, "
              f"{_when(r['firstTimestamp'])} .. {_when(r['maxTimestamp'])}{flags}")
    for d in damage:
        name = f"{d['topic']}-{d['partition']}"
        for gap in d["skipped"]:
            _print_damage(f"{name} {gap['path'].rsplit('/', 1)[-1]}", [gap], None, None, None)
        if d["stopped"]:
            stop = d["stopped"]
            _print_damage(f"{name} {stop['path'].rsplit('/', 1)[-1]}", [], stop["position"],
                          stop["error"], None)
    for m in missing:
        print(f"missing: {m.describe()}")
    print(f"total: {total} records in {len(rows)} batches")
    return status


# --- verify -------------------------------------------------------------

def cmd_verify(args) -> int:
    from kbatch.tools.progress import Progress
    from kbatch.tools.stats import segment_files
    from kbatch.tools.verify import verify

    found = _resolve(args.path, storage=_storage(args))
    with Progress(len(segment_files(found)), "verify") as bar:
        report = verify(found, on_segment=lambda name: bar.update(1, name.rsplit("/", 1)[-1]))
    if args.format == "json":
        for s in report.segments:
            print(json.dumps({**_named_file(s.__dict__), "ok": s.ok, "problems": s.problems()}))
        for problem in report.partition_problems:
            print(json.dumps({"partition_problem": problem}))
        for note in report.notes:
            print(json.dumps({"partition_note": note}))
    else:
        for s in report.segments:
            state = "ok" if s.ok else "PROBLEMS"
            served = "" if s.served is None or s.served == s.records else \
                f" ({s.served} read from it, the rest from another upload)"
            print(f"{s.path}: {state}: {s.batches} batches, {s.records} records{served}, "
                  f"{s.control_records} control, valid bytes {s.valid_bytes}"
                  + (f", {s.trailing_bytes} trailing bytes ({s.end_reason})"
                     if s.trailing_bytes else ""))
            for problem in s.problems():
                print(f"  - {problem}")
        for problem in report.partition_problems:
            print(f"partition: {problem}")
        for note in report.notes:
            print(f"partition: {note}")
        state = "ok" if report.ok else "problems found"
        if report.ok and not report.segments:
            state = "nothing to read"
        print(f"{len(report.segments)} segments, {report.batches} batches, "
              f"{report.records} records: {state}")
    if report.ok and not report.segments:
        return EXIT_PROBLEMS        # nothing to read is not "ok"
    return EXIT_OK if report.ok else EXIT_PROBLEMS


# --- txn ----------------------------------------------------------------

def cmd_txn(args) -> int:
    from kbatch.tools.transactions import transactions
    from kbatch.tools.txn_output import print_json, print_text

    found = _resolve(args.path, storage=_storage(args))
    reports = transactions(found, validate_crc=not args.no_crc)
    if all(rep.log_end_offset == 0 and not rep.transactions for rep in reports):
        _require_segments(found)        # nothing to read: exit 1, as verify and stats
    hanging = 0
    for rep in reports:
        if args.format == "json":
            print_json(rep)
        else:
            print_text(rep)
        hanging += len(rep.open)
    if hanging and args.format == "text":
        print(f"{hanging} open transaction(s): read_committed stops at the LSO")
    torn = [text for rep in reports for text in rep.damage]
    for text in torn:
        print(f"kbatch txn: {text}", file=sys.stderr)
    return EXIT_PROBLEMS if torn else EXIT_OK


# --- sample and main ----------------------------------------------------

def cmd_sample(args) -> int:
    from kbatch.lib.paths import segment_base
    from kbatch.tools.sample import write_sample

    target = Path(args.directory)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target}: exists and is not a directory")
    if target.exists() and any(target.iterdir()) and not args.force:
        raise UsageError(f"{target} is not empty (use --force to write into it)")
    if target.exists():
        logs = sorted(p.name for p in target.iterdir() if p.is_dir() and any(
            segment_base(f.name) is not None for f in p.iterdir()))
        if logs:        # the writer starts new partition directories only
            raise UsageError(f"{target} already holds logs ({', '.join(logs[:3])}"
                             f"{' ...' if len(logs) > 3 else ''}): remove them or choose "
                             "another directory")
    start = time.perf_counter()
    summary = write_sample(target, records=args.records, seed=args.seed,
                           segment_bytes=args.segment_bytes)
    for name, count in summary.records.items():
        print(f"{name}: {count} records ({summary.committed[name]} committed)")
    print(f"wrote {summary.total} records to {target} in {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def cmd_main(args) -> int:
    from kbatch.lib.paths import PathKind
    from kbatch.tools.pipeline import require_spark, run
    # before anything is written or Spark starts
    if args.log_dir is not None:
        _resolve(args.log_dir, PathKind.DATA_DIR,
                 what="main reads a broker data directory (--log-dir / LOG_DIR)")
    for name, flag in ((args.out, "--out"), (args.sample_dir, "--sample-dir")):
        if Path(name).exists() and not Path(name).is_dir():
            raise UsageError(f"{name}: exists and is not a directory ({flag})")
    require_spark()
    if args.source == "s3":      # the same pipeline against a local S3 server
        from kbatch.tools.remote_run import run_s3
        log_dir = args.log_dir
        if log_dir is None:
            log_dir = args.sample_dir
            if not Path(log_dir).is_dir() or not any(Path(log_dir).iterdir()):
                from kbatch.tools.sample import write_sample
                write_sample(log_dir, records=args.sample_records)
        return run_s3(str(Path(log_dir).resolve()), args.out)
    return run(args.log_dir, out_dir=args.out, sample_dir=args.sample_dir,
               sample_records=args.sample_records)


# --- parser -------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (``kbatch dump: error: ...``,
    then where to find help) instead of the whole usage text."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    try:
        from importlib.metadata import version

        from kbatch._version import DISTRIBUTION
        return version(DISTRIBUTION)
    except Exception:               # not installed (a source checkout on PYTHONPATH)
        from kbatch._version import __version__
        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="kbatch", description="Read Apache Kafka log segments at rest.",
        epilog="Exit status: 0 ok, 1 problems found or nothing to read (no segment file at "
               "all; a partition holding an empty segment is empty: 0), 2 usage error.")
    parser.add_argument("--version", action="version", version=f"kbatch {_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("dump", help="print batches and records of segment or index files",
                       description="Print what kafka-dump-log.sh --print-data-log shows: a line "
                                   "per batch and per record; or one JSON object per line.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=".log/.records/.checkpoint segments or .index/.timeindex/.txnindex files")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--decode", choices=["utf8"], default=None,
                   help="JSON: keys/values as UTF-8 text instead of base64")
    p.add_argument("--max-bytes", type=non_negative_int64, default=None,
                   help="read at most this many bytes of each file")
    p.add_argument("--no-data", action="store_true", help="omit keys and payloads")
    p.add_argument("--no-crc", action="store_true", help="do not check CRCs")
    p.add_argument("--registry", metavar="SOURCE",
                   help="decode Schema Registry framed values with the registry in SOURCE (a data "
                        "directory with _schemas, an export .json, a folder): one JSON line per record")
    _url_flags(p)
    p.set_defaults(func=cmd_dump)
    internal_cli.extend_dump(p, cmd_dump, _resolve)

    schemas_cli.add_schemas_command(sub, _url_flags, _storage)

    p = sub.add_parser("stats", help="records, offsets, times, codecs per partition/segment",
                       description="Statistics per partition and segment of a segment file, a "
                                   "partition directory or a broker data directory.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--no-crc", action="store_true", help="do not check CRCs")
    p.add_argument("--on-corrupt", choices=["raise", "stop", "skip"], default="raise",
                   help="damaged data (exit 1 whichever): report the segment as failed and "
                        "count the others (raise), count its partition up to it, as a read "
                        "with on_corrupt=stop ends there (stop), or count past it, listing "
                        "the skipped bytes (skip)")
    p.add_argument("--level", choices=["segments", "batches"], default="segments",
                   help="segments: per partition and segment (default); batches: a row per "
                        "batch from the CRC-checked headers, records = what a read returns")
    p.add_argument("--isolation", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted",
                   help="--level batches: read_committed leaves out aborted and open "
                        "transactions' batches")
    _url_flags(p)
    p.set_defaults(func=cmd_stats)
    internal_cli.extend_stats(p, cmd_stats, _storage)

    p = sub.add_parser("verify", help="check CRCs, offsets and indexes without changing files",
                       description="Check segments like the broker's recovery: CRCs, offsets, "
                                   "index entries, where valid data ends. Exit 1 on problems.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    _url_flags(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("txn", help="transactions per producer: committed, aborted, open",
                       description="List transactions per producer id and epoch: first offset, "
                                   "marker offset, COMMIT/ABORT/OPEN, records, and the LSO.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--no-crc", action="store_true", help="do not check CRCs")
    _url_flags(p)
    p.set_defaults(func=cmd_txn)
    internal_cli.extend_txn(p, cmd_txn)
    internal_cli.add_subcommands(sub, _resolve, _storage, _url_flags)
    lifecycle_cli.add_subcommands(sub, _resolve, _storage, _url_flags)

    p = sub.add_parser("sample", help="write a realistic broker data directory",
                       description="Write a broker data directory: several topics and "
                                   "partitions, mixed codecs, headers, an idempotent producer, "
                                   "committed and aborted transactions, rolled segments.")
    p.add_argument("directory")
    p.add_argument("--records", type=sample_records, default=1_500_000,
                   help=f"how many records (1..{MAX_SAMPLE_RECORDS:,})")
    p.add_argument("--seed", type=seed_value, default=7)
    p.add_argument("--segment-bytes", type=segment_bytes, default=1 << 20,
                   help="roll segments at this size (1024..2147483647)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty directory (one without partition logs)")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("main", help="the main job: sample (or LOG_DIR) -> Spark -> Parquet",
                       description="Read a broker data directory (LOG_DIR, or a generated "
                                   "sample) with Spark read_committed, write Parquet by topic, "
                                   "print a summary and check the counts against kbatch.")
    p.add_argument("--log-dir", default=os.environ.get("LOG_DIR") or None,
                   help="a broker data directory (default: $LOG_DIR, else the sample)")
    p.add_argument("--out", default="out", help="output directory (default ./out)")
    p.add_argument("--sample-dir", default="sample", help="where the sample lives (./sample)")
    p.add_argument("--sample-records", type=sample_records, default=1_500_000)
    p.add_argument("--source", choices=("local", "s3"), default="local",
                   help="s3: upload the partitions to a local S3 server (moto) and read "
                        "them from s3:// (default: local)")
    p.set_defaults(func=cmd_main)
    return parser


def _error(args, message: str, code: int) -> int:
    command = getattr(args, "command", None)
    print(f"kbatch{' ' + command if command else ''}: {message}", file=sys.stderr)
    return code


def _show_retries(args) -> None:
    """Retries of object-store requests (logged on ``kbatch.remote``) are
    shown on stderr as they happen, one line each, so a slow or failing
    endpoint is visible before the final error."""
    import logging
    command = getattr(args, "command", None)
    logger = logging.getLogger("kbatch.remote")
    if any(getattr(h, "kbatch_cli", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.kbatch_cli = True
    handler.setFormatter(logging.Formatter(f"kbatch{' ' + command if command else ''}: "
                                           "%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def main(argv=None) -> int:
    """Every error reaches the user as one line ``kbatch COMMAND: message``
    (exit 1 for data problems or nothing to read, 2 for usage); ``--debug``
    lets the traceback through instead."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _show_retries(args)
    try:
        return args.func(args)
    except BrokenPipeError:
        try:
            sys.stdout = None           # nothing more to write; no flush error at exit
            sys.stderr.close()
        except Exception:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        if args.debug:
            raise
        return _error(args, "interrupted", 130)
    except UsageError as exc:
        if args.debug:
            raise
        return _error(args, str(exc), EXIT_USAGE)
    except (NothingToRead, KbatchError) as exc:
        if args.debug:
            raise
        return _error(args, str(exc), EXIT_PROBLEMS)
    except OSError as exc:
        if args.debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        return _error(args, f"{where}{exc.strerror or exc}", EXIT_PROBLEMS)
    except MemoryError:
        if args.debug:
            raise
        return _error(args, "out of memory", EXIT_PROBLEMS)
    except Exception as exc:            # a bug: still one line, the traceback under --debug
        if args.debug:
            raise
        text = str(exc).splitlines()[0] if str(exc) else ""
        return _error(args, f"internal error: {type(exc).__name__}: {text} "
                            f"(run with --debug for the traceback)", EXIT_PROBLEMS)


if __name__ == "__main__":
    sys.exit(main())
