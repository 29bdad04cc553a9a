"""Where internal-topic records come from: a segment file, a partition
directory or a broker data directory (local, or in object storage: storage
keywords as ``kbatch.open_log``), read with kbatch's public API through
the door (``kbatch.lib.open``).

A data directory contributes every partition of the wanted topic; a partition
directory or a segment file (``.log``, or a KRaft ``.checkpoint`` snapshot)
contributes itself, whatever its name. Each partition is read whole (the
internal topics are small next to the data); memory held: one partition's
records at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kbatch.lib.entry import read_segment
from kbatch.lib.log import PartitionLog
from kbatch.lib.open import Partition, resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.records import Records
from kbatch.lib.storage import Storage


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
        yield Part(found.topic, found.partition, found.name,
                   read_segment(found.location, storage=found.storage, **options))
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
                    yield Part(part.topic, part.partition, str(snap),
                               read_segment(snap, storage=found.storage, **options))
