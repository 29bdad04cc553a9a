"""Where internal-topic records come from: a segment file, a partition
directory or a broker data directory, read with kbatch's public API.

A data directory contributes every partition of the wanted topic; a partition
directory or a segment file (``.log``, or a KRaft ``.checkpoint`` snapshot)
contributes itself, whatever its name. Each partition is read whole (the
internal topics are small next to the data); memory held: one partition's
records at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from kbatch.lib.log import open_log
from kbatch.lib.paths import PathKind, parse_partition_dir, partition_dirs, resolve, segment_base
from kbatch.lib.segment import read_segment
from kbatch.lib.records import Records


@dataclass
class Part:
    topic: str | None
    partition: int | None
    file: str | None          # the segment or snapshot file, None for a whole partition
    records: Records


def partition_of_dir(path: Path) -> tuple[str | None, int | None]:
    parsed = parse_partition_dir(path.name)
    return parsed if parsed else (None, None)


def _snapshots(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.suffix == ".checkpoint" and p.is_file())


def iter_parts(source, topic: str, *, snapshots: bool = False, **options) -> Iterator[Part]:
    """The records of ``topic`` under ``source`` (see the module docstring).

    ``snapshots``: for directories, also yield each KRaft ``.checkpoint``
    file of the partition (as its own part, after the log).
    ``options``: passed to ``read_segment``/``PartitionLog.read``.
    """
    found = resolve(source)
    if found.kind is PathKind.SEGMENT:
        yield Part(found.topic, found.partition, str(found.path),
                   read_segment(found.path, **options))
        return
    if found.kind is PathKind.PARTITION:
        dirs = [found.path]
    else:
        dirs = [d for data_dir in found.paths for t, _, d in partition_dirs(data_dir)
                if t == topic]
    for d in dirs:
        t, p = partition_of_dir(d)
        has_log = any(segment_base(f.name) is not None for f in d.iterdir())
        if has_log:
            yield Part(t, p, None, open_log(d).read(**options))
        if snapshots:
            for snap in _snapshots(d):
                yield Part(t, p, str(snap), read_segment(snap, **options))
