"""Command-line pieces of kbatch.internal, hooked into ``kbatch.cli``:

    kbatch dump --decode offsets|transactions|metadata|remote-log-metadata|share-state FILE...
    kbatch dump FILE.snapshot | replication-offset-checkpoint | leader-epoch-checkpoint ...
    kbatch lag DATA_DIR [--group G] [--history]
    kbatch txn DATA_DIR     also names the transactional id of each producer

``extend_dump``/``extend_txn`` wrap the existing subcommands; everything
takes ``--format json`` (one JSON object per line). Paths and URLs go
through the door (``kbatch.lib.open.resolve``) with the command's storage
flags, as for the rest of the CLI. Timestamps are integer milliseconds in
JSON and UTC times in text (``N ms`` past what a ``datetime`` holds, year
9999: Kafka keeps them as longs).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path, PurePath

from kbatch.errors import KbatchError
from kbatch.lib.checkpoints import EPOCH_FILE, OFFSET_FILES
from kbatch.lib.log import LogDir
from kbatch.lib.open import resolve
from kbatch.lib.paths import PathKind, parse_partition_dir
from kbatch.lib.visibility import visible_ranges

FAMILY_CHOICES = ("offsets", "transactions", "metadata", "remote-log-metadata", "share-state")


def _when(ms) -> str:
    if ms is None or ms == -1:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms"


def _json_default(obj):
    if isinstance(obj, (bytes, bytearray)):
        import base64
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, datetime):
        return int(obj.timestamp() * 1000)
    return str(obj)


def _out(obj) -> None:
    print(json.dumps(obj, default=_json_default))


def _file_name(path) -> str:
    """The last name of a path or URL (``memory://m/x.snapshot``: ``x.snapshot``)."""
    return PurePath(str(path).rstrip("/")).name


def is_internal_file(path) -> bool:
    """A producer snapshot or a checkpoint file, by name (a path or a URL)."""
    name = _file_name(path)
    return name.endswith(".snapshot") or name in OFFSET_FILES or name == EPOCH_FILE


def _rows(table) -> list[dict]:
    """``table.to_pylist()`` with timestamp columns as integer milliseconds
    since the epoch: Kafka keeps times as longs, and one past year 9999 has
    no Python ``datetime`` (what ``to_pylist`` would make of it)."""
    import pyarrow as pa
    scale = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
    stamps = {}
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            stamps[field.name] = scale[field.type.unit]
            table = table.set_column(i, pa.field(field.name, pa.int64()),
                                     table.column(i).cast(pa.int64()))
    rows = table.to_pylist()
    for name, (mul, div) in stamps.items():
        if (mul, div) != (1, 1):
            for r in rows:
                if r[name] is not None:
                    r[name] = r[name] * mul // div
    return rows


def dump_decode(args, found=None) -> int:
    """``kbatch dump`` for internal data: records of an internal topic
    decoded (``--decode FAMILY``), producer snapshots, checkpoint files.
    ``found``: what the door resolved for each of ``args.files``; without
    it, each is resolved here with the command's storage (``_storage_of``)."""
    status = 0
    for i, name in enumerate(args.files):
        try:
            where = found[i] if found is not None else resolve(name, _storage_of(args))
            loc = where.location
            if loc.name.endswith(".snapshot"):
                _dump_snapshot(loc, args)
            elif loc.name in OFFSET_FILES or loc.name == EPOCH_FILE:
                _dump_checkpoint(loc, args)
            else:
                _dump_records(where, args)
        except BrokenPipeError:
            raise
        except (KbatchError, OSError) as exc:
            sys.stdout.flush()
            print(f"kbatch dump: {exc}", file=sys.stderr)
            status = 1
    return status


def _storage_of(args, names=None):
    """The command's ``Storage`` from its flags (``--storage-option``,
    ``--layout``, ``--private-key``), built by the CLI's own function, which
    ``add_subcommands`` hands to ``dump`` and ``txn`` as ``storage_of``; None
    (the default storage) where nothing wired it."""
    storage_of = getattr(args, "storage_of", None)
    if storage_of is None:
        return None
    return storage_of(args, names) if names is not None else storage_of(args)


def _dump_snapshot(path, args) -> None:
    from kbatch.internal.snapshot import read_producer_snapshot
    snap = read_producer_snapshot(path, validate_crc=not getattr(args, "no_crc", False))
    if args.format == "json":
        for e in snap["entries"]:
            _out({"file": str(path), **e})
        return
    print(f"Dumping {path}")
    print(f"producer snapshot version {snap['version']}, crc {snap['crc']:#010x} "
          f"({'ok' if snap['crc_ok'] else 'MISMATCH'}), {len(snap['entries'])} producers")
    for e in snap["entries"]:
        print(f"producerId: {e['producer_id']} producerEpoch: {e['epoch']} "
              f"coordinatorEpoch: {e['coordinator_epoch']} currentTxnFirstOffset: "
              f"{e['current_txn_first_offset']} lastSequence: {e['last_sequence']} "
              f"lastOffset: {e['last_offset']} offsetDelta: {e['offset_delta']} "
              f"lastTimestamp: {_when(e['timestamp'])}")


def _dump_checkpoint(path, args) -> None:
    from kbatch.lib.checkpoints import read_checkpoint
    kind, entries = read_checkpoint(path)
    if args.format == "json":
        for e in entries:
            _out({"file": str(path), "kind": kind,
                  **({"leader_epoch": e[0], "start_offset": e[1]} if kind == "leader_epoch"
                     else {"topic": e[0], "partition": e[1], "offset": e[2]})})
        return
    print(f"Dumping {path} ({kind}, {len(entries)} entries)")
    for e in entries:
        print(f"epoch: {e[0]} startOffset: {e[1]}" if kind == "leader_epoch"
              else f"{e[0]}-{e[1]}: {e[2]}")


def _dump_records(found, args) -> None:
    """The records of what the door resolved (a segment, a partition or a
    data directory), decoded as an internal topic's."""
    from kbatch.internal.decode import jsonable
    from kbatch.internal.registry import FAMILIES, family_of_topic
    from kbatch.internal.tables import iter_decoded
    path = found.location
    named = parse_partition_dir((path.parent if found.kind is PathKind.SEGMENT else path).name)
    family = args.decode
    if family not in FAMILIES:
        family = family_of_topic(named[0] if named else None)
    if family is None:
        raise KbatchError(f"{path}: not an internal topic; say which with --decode")
    if args.format != "json":
        print(f"Dumping {path} (decoded as {FAMILIES[family][0]})")
    seen = bad = 0
    warned = False
    for meta, d in iter_decoded(found, family, snapshots=False):
        seen += 1
        bad += bool(d["error"] or not d["known"])
        if not warned and (seen >= WARN_AFTER and 2 * bad >= seen):
            _not_that_topic(path, family, named, seen, bad)
            warned = True
        version = d.get("value_version", d.get("version"))
        row = {"offset": meta["record_offset"], "timestamp": meta["record_timestamp"],
               "type": d["type"], "type_id": d["type_id"], "version": version}
        if "key" in d:
            row["key_version"] = d["key_version"]
            row["key"] = jsonable(d["key"])
            row["tombstone"] = d["tombstone"]
        row["value"] = jsonable(d["value"])
        if not d["known"]:
            row["raw_key"] = jsonable(meta["raw_key"])
            row["raw_value"] = jsonable(meta["raw_value"])
        if d["error"]:
            row["error"] = d["error"]
        if args.format == "json":
            _out(row)
            continue
        what = d["type"] or f"unknown type {d['type_id']}"
        line = (f"offset: {row['offset']} time: {_when(row['timestamp'])} {what} "
                f"v{'-' if version is None else version}")
        if "key" in row:
            line += f" key: {json.dumps(row['key'])}"
        line += " value: " + ("<tombstone>" if row.get("tombstone") else json.dumps(row["value"]))
        if not d["known"]:
            line += f" raw: {json.dumps(row['raw_value'])}"
        if d["error"]:
            line += f" ERROR: {d['error']}"
        print(line)
    if not warned and seen and 2 * bad >= seen:
        _not_that_topic(path, family, named, seen, bad)


WARN_AFTER = 20    # records looked at before saying they are not the topic's


def _not_that_topic(path, family: str, named, seen: int, bad: int) -> None:
    """One warning (stderr) that the records do not look like the topic's
    they are decoded as: most are unknown types or fail to decode."""
    from kbatch.internal.registry import FAMILIES
    sys.stdout.flush()
    where = f" (its directory names topic {named[0]!r})" if named else ""
    print(f"kbatch dump: warning: {path}: the records do not look like "
          f"{FAMILIES[family][0]}'s{where}: {bad} of the first {seen} are of no known "
          f"type or do not decode", file=sys.stderr)


def extend_dump(parser: argparse.ArgumentParser, cmd_dump, check_path) -> None:
    """Let ``kbatch dump`` decode internal topics and read producer
    snapshots and checkpoint files (other files go to ``cmd_dump``).
    ``check_path(name)``: the CLI's check of a path given as records (a text
    file or a device is refused in one line, as plain ``dump`` refuses it)."""
    for action in parser._actions:
        if action.dest == "decode":
            action.choices = list(action.choices) + list(FAMILY_CHOICES)
            action.help = ("JSON: keys/values as UTF-8 text; or decode an internal topic's "
                           "records: " + ", ".join(FAMILY_CHOICES))

    def run(args) -> int:
        status = 0
        storage = None
        for name in args.files:
            mine = args.decode in FAMILY_CHOICES or is_internal_file(name)
            one = argparse.Namespace(**{**vars(args), "files": [name], "all_files": args.files})
            if not mine:
                status = max(status, cmd_dump(one))
                continue
            if storage is None:     # one for all the files, as cmd_dump's
                storage = _storage_of(args, args.files)
            # what it names, as for every path (a missing one: exit 2)
            found = check_path(name, check=not is_internal_file(name), storage=storage)
            status = max(status, dump_decode(one, [found]))
        return status

    parser.set_defaults(func=run)


def extend_txn(parser: argparse.ArgumentParser, cmd_txn) -> None:
    """After ``kbatch txn``'s report, name the transactional id behind each
    producer id from the directory's ``__transaction_state`` (when it holds
    one): the join that tells whose transaction is hanging. Producer ids
    that followed one another under one transactional id (an exhausted
    epoch, KIP-890) are linked (``kbatch.internal.producer_ids``)."""

    def run(args) -> int:
        status = cmd_txn(args)
        found = resolve(args.path, _storage_of(args))    # as cmd_txn found it
        if found.kind is PathKind.SEGMENT or (found.kind is PathKind.PARTITION
                                              and found.topic != "__transaction_state"):
            return status       # no __transaction_state to join with
        from kbatch.internal.producer_ids import producer_ids
        from kbatch.internal.transactions import transaction_log
        ids = producer_ids(_rows(transaction_log(found, validate_crc=not args.no_crc)))
        if not ids.states:
            return status
        if args.format == "json":
            for pid, st in sorted(ids.states.items()):
                _out({"producer_id": pid, "transactional_id": st.transactional_id,
                      "coordinator_state": st.state, "producer_epoch": st.producer_epoch,
                      "last_update_timestamp": st.last_update_timestamp,
                      "client_transaction_version": st.client_transaction_version,
                      "previous_producer_id": st.previous_producer_id,
                      "next_producer_id": st.next_producer_id,
                      "producer_id_change": st.change})
            for tid, chain in sorted(ids.chains.items()):
                if len(chain) > 1:
                    _out({"transactional_id": tid, "producer_ids": chain})
            return status
        print("transactional ids (from __transaction_state; the coordinator's last state):")
        for pid, st in sorted(ids.states.items()):
            epoch = "-" if st.producer_epoch is None else st.producer_epoch
            state = st.state or "(known only as a previous producer id)"
            line = (f"  producer {pid:>10} epoch {epoch:>5}: {st.transactional_id}  {state}"
                    f" at {_when(st.last_update_timestamp)}")
            if st.client_transaction_version is not None:
                line += f", client transaction version {st.client_transaction_version}"
            if st.next_producer_id is not None:
                line += f"  -> producer {st.next_producer_id} ({st.change or 'next'})"
            if st.previous_producer_id is not None:
                line += f"  (after producer {st.previous_producer_id})"
            print(line)
        for tid, chain in sorted(ids.chains.items()):
            if len(chain) > 1:
                print(f"  {tid}: producer ids " + " -> ".join(str(p) for p in chain))
        return status

    parser.set_defaults(func=run)


def extend_stats(parser: argparse.ArgumentParser, cmd_stats, storage_of) -> None:
    """Before ``kbatch stats`` of a data directory (text; the total stays the
    last line), what a consumer could fetch per partition beside what is on
    disk, from the log-start-offset and replication-offset (high watermark)
    checkpoints. ``storage_of(args)``: the command's ``Storage``."""

    def run(args) -> int:
        if args.format == "text":
            try:
                found = resolve(args.path, storage_of(args))
            except Exception:            # noqa: BLE001 - cmd_stats says what is wrong
                found = None
            if found is not None and found.kind is PathKind.DATA_DIR:
                _visibility_table(found)
        return cmd_stats(args)

    parser.set_defaults(func=run)


def _visibility_table(path) -> None:
    try:
        rows = [r for r in on_disk_and_visible(path)
                if r["log_start_offset"] is not None or r["high_watermark"] is not None]
    except KbatchError as exc:          # a damaged checkpoint file: stats still runs
        print(f"kbatch stats: {exc}", file=sys.stderr)
        return
    if rows:
        print("on disk vs visible to a consumer (log-start-offset and replication-offset "
              "checkpoints):")
        for r in rows:
            lo = "-" if r["log_start_offset"] is None else r["log_start_offset"]
            hi = "-" if r["high_watermark"] is None else r["high_watermark"]
            note = []
            if r["end_offset"] is not None and r["high_watermark"] is not None \
                    and r["high_watermark"] < r["end_offset"]:
                note.append(f"{r['end_offset'] - r['high_watermark']} offsets above the "
                            "high watermark")
            if r["first_offset"] is not None and r["log_start_offset"] is not None \
                    and r["log_start_offset"] > r["first_offset"]:
                note.append(f"{r['log_start_offset'] - r['first_offset']} offsets below the "
                            "log start")
            disk = ("nothing on disk" if r["first_offset"] is None
                    else f"on disk [{r['first_offset']}, {r['end_offset']})")
            print(f"  {r['topic']}-{r['partition']}: {disk}, visible [{lo}, {hi})"
                  + (f"  <-- {'; '.join(note)}" if note else ""))


def cmd_lag(args, resolve_path, storage_of) -> int:
    """``kbatch lag``: the latest lag per group/topic/partition (``--history``:
    every commit). Exit 1 when it lists nothing. Groups with commits for
    partitions whose data is not here are named after the table."""
    from kbatch.internal.lag import commits_without_data, consumer_lag, latest_lag
    found = resolve_path(args.data_dir, storage=storage_of(args, [args.data_dir]),
                         check=False)
    groups = args.group or None
    table = consumer_lag(found, groups=groups)
    if not args.history:
        table = latest_lag(table)
    rows = _rows(table)
    elsewhere = commits_without_data(found, groups=groups)
    if args.format == "json":
        for r in rows:
            _out(r)
        for group, topics in elsewhere.items():
            _out({"group": group, "topics_without_data_here": topics})
        return 0 if rows else 1
    if rows:
        print(f"{'group':<24} {'topic':<24} {'part':>4} {'committed at (UTC)':<23} "
              f"{'committed':>12} {'log end':>12} {'lag':>10}")
    for r in rows:
        end = "-" if r["log_end_offset"] is None else r["log_end_offset"]
        lag = "-" if r["lag"] is None else r["lag"]
        print(f"{r['group']:<24} {r['topic']:<24} {r['partition']:>4} "
              f"{_when(r['commit_timestamp']):<23} {r['committed_offset']:>12} "
              f"{end:>12} {lag:>10}" + (f"  <-- {r['reason']}" if r["reason"] else ""))
    for group, topics in elsewhere.items():
        print(f"group {group} committed offsets of {', '.join(topics)}, whose data is not "
              "in this directory")
    if not rows:
        print(f"kbatch lag: {found.name}: no offset commits for partitions in this directory",
              file=sys.stderr)
        return 1
    return 0


def add_subcommands(sub, resolve_path, storage_of, url_flags) -> None:
    """Register ``kbatch lag`` (paths through the CLI's door: ``resolve_path``,
    ``storage_of``; ``url_flags`` adds the storage options), and hand
    ``storage_of`` to ``dump`` and ``txn`` (their internal parts read URLs
    with the command's storage flags too)."""
    for name in ("dump", "txn"):
        if name in sub.choices:
            sub.choices[name].set_defaults(storage_of=storage_of)
    p = sub.add_parser("lag", help="consumer lag over time from __consumer_offsets",
                       description="For each consumer group, topic and partition: the "
                                   "committed offset beside the log end offset at the commit's "
                                   "time, from the data and offsets topics of a broker data "
                                   "directory. Default: the latest commit; --history: all. "
                                   "Exit 1 when there is nothing to list.")
    p.add_argument("data_dir", metavar="DATA_DIR")
    p.add_argument("--group", action="append", help="only this group (repeatable)")
    p.add_argument("--history", action="store_true", help="every commit, not just the latest")
    p.add_argument("--format", choices=["text", "json"], default="text")
    url_flags(p)
    p.set_defaults(func=lambda args: cmd_lag(args, resolve_path, storage_of))


def print_internal_summary(data_dir) -> None:
    """What ``make run`` shows of the internal topics: the latest lag per
    group and partition, the transaction coordinator's last state per
    transactional id, the topics named in the metadata log."""
    from kbatch.internal.lag import consumer_lag, latest_lag
    from kbatch.internal.metadata import cluster_metadata
    from kbatch.internal.transactions import transaction_log
    path = Path(data_dir)
    lag = _rows(latest_lag(consumer_lag(path)))
    if lag:
        print("consumer groups (latest commit; kbatch lag for more):")
        for r in lag:
            where = f"{r['topic']}-{r['partition']}"
            end = "-" if r["log_end_offset"] is None else r["log_end_offset"]
            lag = "-" if r["lag"] is None else r["lag"]
            print(f"  {r['group']:<16} {where:<24} committed "
                  f"{r['committed_offset']:>9} log end {end:>9} lag {lag:>7}"
                  + (f" ({r['reason']})" if r["reason"] else ""))
    last: dict = {}
    for r in _rows(transaction_log(path)):
        if r["transactional_id"] is not None and not r["tombstone"]:
            last[r["transactional_id"]] = r
    if last:
        print("transactional ids (__transaction_state): " + ", ".join(
            f"{t} (producer {r['producer_id']}, {r['state']})" for t, r in sorted(last.items())))
    names = cluster_metadata(path).topics.column("topic_name").to_pylist()
    if names:
        print("topics in __cluster_metadata: " + ", ".join(sorted(set(filter(None, names)))))


def on_disk_and_visible(data_dir) -> list[dict]:
    """Per partition of the directory (a path, or what the door resolved):
    offsets on disk (its log start and end: the first batch's base offset,
    the offset after the last batch; a partition holding only an empty
    segment at B starts and ends at B; None without segments) and the
    visible range, for ``kbatch stats``. Reads batch headers only."""
    found = resolve(data_dir)
    ranges = visible_ranges(found.location)
    out = []
    for part in LogDir(found).partitions:
        bounds = [b for b in (s.batch_bounds() for s in part.segments) if len(b)]
        first = end = None
        if part.segments:
            first = int(bounds[0]["base_offset"][0]) if bounds else part.segments[0].base_offset
            end = max(int(bounds[-1]["last_offset"][-1]) + 1 if bounds else 0,
                      part.segments[-1].base_offset)
        lo, hi = ranges.get((part.topic, part.partition), (None, None))
        out.append({"topic": part.topic, "partition": part.partition, "first_offset": first,
                    "end_offset": end, "log_start_offset": lo, "high_watermark": hi})
    return out
