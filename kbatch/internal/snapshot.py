"""Producer-state snapshots (``<offset>.snapshot`` in a partition directory).

    +---------------+--------------+-------------+------------------------------+
    | int16 version | uint32 crc   | int32 count | count x ProducerEntry        |
    | (1)           | CRC-32C of   |             | (46 bytes: producer id int64,|
    |               | all after it |             | epoch int16, last sequence   |
    |               |              |             | int32, last offset int64,    |
    |               |              |             | offset delta int32, timestamp|
    |               |              |             | int64, coordinator epoch     |
    |               |              |             | int32, current txn first     |
    |               |              |             | offset int64)                |
    +---------------+--------------+-------------+------------------------------+

The struct after the version is the ``ProducerSnapshot`` message of the
schema table, decoded by ``wire``. The whole file is read (they are small:
one entry per live producer); a bad CRC, an unknown version or damage raise
``CorruptRecordError`` naming the file.
"""

from __future__ import annotations

import struct

import crc32c

from kbatch.errors import CorruptRecordError
from kbatch.internal import protocol as wire
from kbatch.lib.open import resolve, tree_of
from kbatch.lib.paths import PathKind, parse_partition_dir
from kbatch.lib.storage import Storage
from kbatch.lib.tree import Location

MAX_SNAPSHOT_BYTES = 1 << 30


def _read(loc: Location) -> bytes:
    size = loc.stat().size
    if size > MAX_SNAPSHOT_BYTES:
        raise CorruptRecordError(f"snapshot of {size} bytes exceeds {MAX_SNAPSHOT_BYTES}",
                                 path=str(loc))
    data = loc.tree.read_small(loc.path, MAX_SNAPSHOT_BYTES)
    if data is None:
        raise FileNotFoundError(f"{loc}: no such file")
    return data


def read_producer_snapshot(path, *, validate_crc: bool = True, **storage) -> dict:
    """``{version, crc, crc_ok, entries: [dict per producer]}`` (snake_case
    field names: producer_id, epoch, last_sequence, last_offset,
    offset_delta, timestamp, coordinator_epoch, current_txn_first_offset).
    ``path``: a file, a URL (storage keywords as ``kbatch.open_log``) or a
    door ``Location``."""
    loc = path if isinstance(path, Location) else Location(*tree_of(path, Storage.of(**storage)))
    buf = _read(loc)
    path = str(loc)
    if len(buf) < 6:
        raise CorruptRecordError(f"{len(buf)} bytes: no snapshot header", path=path, position=0)
    version = struct.unpack_from(">h", buf, 0)[0]
    if not wire.knows("ProducerSnapshot", version):
        raise CorruptRecordError(f"producer snapshot version {version} unknown", path=path,
                                 position=0)
    try:
        d = wire.decode("ProducerSnapshot", version, buf, 2)
    except CorruptRecordError as exc:
        raise CorruptRecordError(exc.reason, path=path, position=exc.position) from None
    computed = crc32c.crc32c(buf[6:])
    if validate_crc and computed != d["crc"]:
        raise CorruptRecordError(f"CRC mismatch: stored {d['crc']:#010x}, computed "
                                 f"{computed:#010x}", path=path, position=2)
    return {"version": version, "crc": d["crc"], "crc_ok": computed == d["crc"],
            "entries": d["producer_entries"]}


def producer_snapshot(path, **options):
    """A producer snapshot file, or every ``.snapshot`` of a partition
    directory or a data directory, as a ``pyarrow.Table``: one row per
    producer with ``file``, ``snapshot_offset`` (from the file name) and
    the entry's fields."""
    import pyarrow as pa
    storage, options = Storage.split(options)
    found = resolve(path, storage)
    if found.kind is PathKind.SEGMENT:
        files = [found.location]
    else:
        files = [p.location.child(e.name) for p in found.partitions()
                 for e in p.location.list() if e.name.endswith(".snapshot") and e.is_file]
    rows = []
    for f in files:
        snap = read_producer_snapshot(f, **options)
        parsed = parse_partition_dir(f.parent.name) or (None, None)
        try:
            at = int(f.name[:-len(".snapshot")] if f.name.endswith(".snapshot") else f.name)
        except ValueError:
            at = None
        for e in snap["entries"]:
            rows.append({"file": str(f), "topic": parsed[0], "partition": parsed[1],
                         "snapshot_offset": at, **e})
    ts = pa.timestamp("ms", tz="UTC")
    schema = pa.schema([("file", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                        ("snapshot_offset", pa.int64()), ("producer_id", pa.int64()),
                        ("epoch", pa.int16()), ("last_sequence", pa.int32()),
                        ("last_offset", pa.int64()), ("offset_delta", pa.int32()),
                        ("timestamp", ts), ("coordinator_epoch", pa.int32()),
                        ("current_txn_first_offset", pa.int64())])
    return pa.Table.from_pylist(rows, schema=schema)
