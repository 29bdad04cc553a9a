"""What a path names: one segment file, a partition directory, a broker data
directory, or several data directories. The one place kbatch decides it (the
Python API, the CLI and Spark all call ``resolve``).

    <data dir>/                       PathKind.DATA_DIR
        <topic>-<partition>/          PathKind.PARTITION
            00000000000000000000.log  PathKind.SEGMENT
            00000000000000000000.index
        cleaner-offset-checkpoint, meta.properties, ...

Rules, in order, for a directory:

1. it holds segment files (``<20 digits>.log``): a partition directory, even
   when its name does not parse as ``<topic>-<partition>``;
2. it holds partition directories: a data directory (data directories are
   often named like partitions, ``kafka-logs-1``, so the name alone decides
   nothing);
3. it is empty or holds only index/other files and its name parses as
   ``<topic>-<partition>``: an (empty) partition directory;
4. anything else is an error naming what was found, with a hint when a
   child directory would have been readable ("did you mean X/data?").

A partition directory's name is ``<topic>-<partition>`` with an ASCII
decimal partition number; transient directories (``-delete``, ``-future``,
``-stray``) are skipped. Two directories naming the same partition
(``t-1`` and ``t-01``) are refused, as Kafka refuses to load them.
"""

from __future__ import annotations

import enum
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kbatch.errors import KbatchError

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$", re.ASCII)
PARTITION_NAME = re.compile(r"^(.+)-([0-9]+)$", re.ASCII)
TRANSIENT_DIR_SUFFIXES = ("-delete", "-future", "-stray")
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1


class PathError(KbatchError, ValueError):
    """A path that does not name what the caller needs (missing, wrong kind,
    nothing to read). ``ValueError`` too, for callers catching that."""


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a ``<topic>-<partition>`` directory name.

    The partition is the ASCII digits after the last ``-`` (topics may
    contain ``-`` and ``.``); transient directories and partition numbers
    above int32 give None.
    """
    if name.endswith(TRANSIENT_DIR_SUFFIXES):
        return None
    match = PARTITION_NAME.match(name)
    if not match:
        return None
    number = int(match.group(2))
    if number > INT32_MAX:
        return None
    return match.group(1), number


def segment_base(name: str) -> int | None:
    """The base offset a segment file name gives, None when it is not one."""
    match = SEGMENT_NAME.match(name)
    if not match or int(match.group(1)) > INT64_MAX:
        return None
    return int(match.group(1))


class PathKind(enum.Enum):
    SEGMENT = "segment"
    PARTITION = "partition"
    DATA_DIR = "data directory"
    DATA_DIRS = "data directories"


@dataclass(frozen=True)
class Resolved:
    """What ``resolve`` found. ``paths``: the one path for SEGMENT, PARTITION
    and DATA_DIR, every data directory for DATA_DIRS. ``topic``/``partition``
    are set for a partition (and for a segment inside one)."""

    kind: PathKind
    paths: tuple[Path, ...]
    topic: str | None = None
    partition: int | None = None

    @property
    def path(self) -> Path:
        return self.paths[0]


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _kind_of_file(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError:
        return "missing"
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "file"


def _children(path: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except PermissionError as exc:
        raise PathError(f"{path}: permission denied") from exc
    except OSError as exc:
        raise PathError(f"{path}: cannot list directory ({exc.strerror})") from exc


def _has_segments(entries: list[os.DirEntry]) -> bool:
    return any(segment_base(e.name) is not None and e.is_file() for e in entries)


def partition_dirs(data_dir: Path) -> list[tuple[str, int, Path]]:
    """``(topic, partition, path)`` of every partition directory directly
    under ``data_dir``, sorted; two directories naming the same partition
    raise ``PathError``."""
    seen: dict[tuple[str, int], Path] = {}
    for entry in _children(data_dir):
        if not entry.is_dir():
            continue
        parsed = parse_partition_dir(entry.name)
        if parsed is None:
            continue
        if parsed in seen:
            raise PathError(
                f"{data_dir}: directories {seen[parsed].name} and {entry.name} both name "
                f"partition {parsed[1]} of topic {parsed[0]!r} (Kafka refuses to load "
                f"such a directory; remove or rename one)")
        seen[parsed] = Path(entry.path)
    return [(t, p, path) for (t, p), path in sorted(seen.items())]


def _resolve_dir(path: Path) -> Resolved:
    entries = _children(path)
    parsed = parse_partition_dir(path.name)
    if _has_segments(entries):
        topic, part = parsed if parsed else (None, None)
        return Resolved(PathKind.PARTITION, (path,), topic, part)
    if partition_dirs(path):
        return Resolved(PathKind.DATA_DIR, (path,))
    if parsed is not None:
        return Resolved(PathKind.PARTITION, (path,), *parsed)
    found = _find_readable(path)
    hint = f"; did you mean {found}?" if found else ""
    what = "an empty directory" if not entries else "no segment files and no partition directories"
    raise PathError(f"{path}: {what} (expected a segment file, a <topic>-<partition> "
                    f"directory or a broker data directory){hint}")


def _readable_dir(path: Path) -> bool:
    try:
        entries = _children(path)
        return _has_segments(entries) or bool(partition_dirs(path))
    except PathError:
        return False


def _find_readable(path: Path, depth: int = 4, budget: int = 200) -> Path | None:
    """The first directory below ``path`` (breadth first, at most ``depth``
    levels and ``budget`` directories looked at) that holds segments or
    partition directories: the hint of an error message."""
    level = [path]
    for _ in range(depth):
        nxt = []
        for d in level:
            try:
                subdirs = [Path(e.path) for e in _children(d) if e.is_dir(follow_symlinks=False)]
            except PathError:
                continue
            for sub in subdirs:
                budget -= 1
                if budget < 0:
                    return None
                if _readable_dir(sub):
                    return sub
                nxt.append(sub)
        level = nxt
    return None


def resolve(path: str | os.PathLike | Sequence[str | os.PathLike]) -> Resolved:
    """Classify ``path`` (or a list of data directories); raise ``PathError``
    with a one-line message saying what was found and what was expected.

    A regular file is a SEGMENT whatever its name (``.log``, carved
    ``.records``, ``.checkpoint`` snapshots all hold batches); FIFOs,
    sockets and devices are refused without being opened.
    """
    if isinstance(path, (list, tuple)):
        if not path:
            raise PathError("no path given")
        if len(path) == 1:
            return resolve(path[0])
        found = [resolve(p) for p in path]
        if any(r.kind is not PathKind.DATA_DIR for r in found):
            raise PathError("several paths must each be a broker data directory: "
                            + ", ".join(f"{r.path} is a {r.kind.value}" for r in found
                                        if r.kind is not PathKind.DATA_DIR))
        return Resolved(PathKind.DATA_DIRS, tuple(r.path for r in found))
    if not isinstance(path, (str, os.PathLike)):
        raise PathError(f"expected a path, got {type(path).__name__}")
    p = Path(path)
    kind = _kind_of_file(p)
    if kind == "missing":
        raise PathError(f"{p}: no such file or directory")
    if kind == "directory":
        return _resolve_dir(p)
    if kind != "file":
        raise PathError(f"{p}: a {kind}, not a segment file or directory")
    parsed = parse_partition_dir(p.parent.name) if p.parent.name else None
    topic, part = parsed if parsed else (None, None)
    return Resolved(PathKind.SEGMENT, (p,), topic, part)


def expect(path, *kinds: PathKind, what: str) -> Resolved:
    """``resolve(path)`` that must be one of ``kinds``; ``what`` names what
    the caller reads, for the message ("open_log needs a partition
    directory")."""
    found = resolve(path)
    if found.kind not in kinds:
        hint = ""
        if found.kind is PathKind.DATA_DIR and PathKind.PARTITION in kinds:
            parts = partition_dirs(found.path)
            if parts:
                hint = f"; for example {parts[0][2]} (or use open_log_dir)"
        elif found.kind is PathKind.PARTITION and PathKind.DATA_DIR in kinds:
            hint = f"; its data directory is {found.path.parent} (or use open_log)"
        raise PathError(f"{found.path}: is a {found.kind.value}, {what}{hint}")
    return found
