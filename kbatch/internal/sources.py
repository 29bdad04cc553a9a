"""Where internal-topic records come from: a segment file, a partition
directory or a broker data directory (local, or in object storage: storage
keywords as ``kbatch.open_log``), read with kbatch's public API through
the door (``kbatch.lib.open``).

A data directory contributes every partition of the wanted topic; a partition
directory or a segment file (``.log``, or a KRaft ``.checkpoint`` snapshot)
contributes itself, whatever its name. A snapshot Kafka would not load
(its first batch not a control batch opening with the SnapshotHeader, a
message set of magic 0/1) or one cut short (no footer, a torn end, a batch
``on_corrupt="skip"`` passed over) raises (``whole_snapshot``); a range
(``start``/``stop``, or an offset or time range where a directory's
snapshots are read) is an ``ArgumentError``: a snapshot is read whole. Each
partition is read whole (the internal topics are small next to the data);
memory held: one partition's records at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kbatch.errors import ArgumentError, CorruptRecordError
from kbatch.lib.entry import read_segment
from kbatch.lib.log import PartitionLog
from kbatch.lib.open import resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.records import Records
from kbatch.lib.storage import Storage
from kbatch.wire import CONTROL_TYPE_NAMES, ControlType


@dataclass
class Part:
    topic: str | None
    partition: int | None
    file: str | None          # the segment or snapshot file, None for a whole partition
    records: Records


def iter_parts(source, topic: str, *, snapshots: bool = False, **options) -> Iterator[Part]:
    """The records of ``topic`` under ``source`` (see the module docstring).

    ``snapshots``: for directories, also yield each KRaft ``.checkpoint``
    file of the partition (as its own part, after the log).
    ``options``: storage keywords, and those of ``read_segment``/``PartitionLog.read``.
    """
    storage, options = Storage.split(options)
    found = resolve(source, storage)
    if found.kind is PathKind.SEGMENT:
        if found.name.endswith(".checkpoint"):
            records = read_snapshot(found.location, found.storage, options,
                                    "kbatch.read_segment reads any range of its bytes")
        else:
            records = read_segment(found.location, storage=found.storage, **options)
        yield Part(found.topic, found.partition, found.name, records)
        return
    parts = [p for p in found.partitions() if found.kind is PathKind.PARTITION or p.topic == topic]
    for part in parts:
        log = PartitionLog.at(part, found.storage)
        if log.segments:
            yield Part(part.topic, part.partition, None, log.read(**options))
        if snapshots:
            for entry in part.location.list():
                if entry.name.endswith(".checkpoint") and entry.is_file:
                    snap = part.location.child(entry.name)
                    records = read_snapshot(snap, found.storage, options,
                                            "snapshots=False reads a range of the log alone")
                    yield Part(part.topic, part.partition, str(snap), records)


# the range keywords (read_segment's bytes, PartitionLog.read's offsets and
# times), each with the value that reads everything
RANGES = {"start": 0, "stop": None, "start_offset": None, "end_offset": None,
          "start_timestamp": None, "end_timestamp": None}


def read_snapshot(location, storage, options: dict, hint: str) -> Records:
    """A KRaft snapshot file, read whole and checked (``whole_snapshot``):
    a part of one is not the state at its offset, so a range is an
    ``ArgumentError`` (``hint`` says what reads one)."""
    cut = [k for k, whole in RANGES.items() if options.get(k) not in (None, whole)]
    if cut:
        raise ArgumentError(f"{location}: a KRaft snapshot is read whole, not in a range "
                            f"({', '.join(cut)} given); {hint}")
    records = read_segment(location, storage=storage,
                           **{k: v for k, v in options.items() if k not in RANGES})
    whole_snapshot(records, str(location))
    return records


def whole_snapshot(records: Records, path: str) -> None:
    """A KRaft snapshot as Kafka's RecordsSnapshotReader loads it: every
    batch of magic 2 (RecordsIterator), the first a control batch whose
    first record is the SnapshotHeader. Kafka writes the SnapshotFooter
    last and renames the file when complete, so one that ends early or
    without its footer is a copy cut short, not the cluster's state at its
    offset (kbatch's check; Kafka reads no footer), as is one with a batch
    skipped over (``on_corrupt="skip"``: Kafka checks every batch's CRC and
    refuses the snapshot). ``CorruptRecordError`` naming the file otherwise."""
    end, batches, control = records.end, records.batches, records.control
    types = control.type.tolist()
    first = int(batches.position[0]) if len(batches) else 0
    legacy = batches.position[batches.magic < 2]
    why, at = None, None if end is None else end.valid_bytes
    if end is not None and end.reason is not None:
        why = f"it ends {end.reason}"
    elif records.skipped:                   # on_corrupt="skip" read past damage
        hole = records.skipped[0]
        why, at = f"bytes [{hole.start}, {hole.stop}) were skipped ({hole.reason})", hole.start
    elif not types or types[-1] != ControlType.SNAPSHOT_FOOTER:
        why = "its last record is not a SnapshotFooter"
    elif not batches.is_control[0] or control.batch[0] != 0:
        why, at = "its first batch is not a control batch with at least one record", first
    elif types[0] != ControlType.SNAPSHOT_HEADER:
        name = CONTROL_TYPE_NAMES.get(types[0], types[0])
        why, at = f"its first record is a {name}, not a SnapshotHeader", first
    elif len(legacy):
        why, at = "it holds a message set of magic 0/1 (Kafka reads magic 2 only)", int(legacy[0])
    if why:
        raise CorruptRecordError(f"KRaft snapshot cut short or damaged: {why}", path=path,
                                 position=at)
