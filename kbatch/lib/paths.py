"""The names kbatch reads: what a file or directory name says it is, for
both layouts, wherever the name is stored (the door, ``kbatch.lib.open``,
applies these rules to local paths and URLs alike).

    plain layout (a broker's log.dir, or a copy of one)
        <data dir>/                           PathKind.DATA_DIR
            <topic>-<partition>/              PathKind.PARTITION
                00000000000000000000.log      PathKind.SEGMENT (+ .index, .timeindex, .txnindex)

    tiered layout (the tiered-storage plugin's bucket)
        <prefix>/                             PathKind.DATA_DIR
            <topic>-<topicId>/                PathKind.DATA_DIR (one topic)
                <partition>/                  PathKind.PARTITION
                    <20-digit offset>-<segment uuid>.log | .indexes | .rsm-manifest

A partition directory's name is ``<topic>-<partition>`` with an ASCII
decimal partition number up to int32; transient directories (``-delete``,
``-future``, ``-stray``) are skipped. A segment's name is 20 ASCII digits
up to int64. A topic id is 22 characters of URL-safe base64.
"""

from __future__ import annotations

import enum
import re

from kbatch.wire import INT64_MAX
from kbatch.errors import KbatchError

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$", re.ASCII)
SWAP_SEGMENT_NAME = re.compile(r"^(\d{20})\.log\.swap$", re.ASCII)
PARTITION_NAME = re.compile(r"^(.+)-([0-9]+)$", re.ASCII)
TIERED_TOPIC_DIR = re.compile(r"^(.+)-([A-Za-z0-9_-]{22})$", re.ASCII)
TIERED_OBJECT = re.compile(r"^(\d{20})-([A-Za-z0-9_-]{22})\.(log|indexes|rsm-manifest)$",
                           re.ASCII)
DIGITS = re.compile(r"^[0-9]+$", re.ASCII)
TRANSIENT_DIR_SUFFIXES = ("-delete", "-future", "-stray")
INT32_MAX = (1 << 31) - 1


class PathError(KbatchError, ValueError):
    """A path or URL that does not name what the caller needs (missing,
    wrong kind, nothing to read). ``ValueError`` too, for callers catching
    that."""


class PathKind(enum.Enum):
    SEGMENT = "segment"
    PARTITION = "partition"
    DATA_DIR = "data directory"
    DATA_DIRS = "data directories"


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


def swap_segment_base(name: str) -> int | None:
    """The base offset of a segment left as ``<base>.log.swap`` by an
    interrupted cleaner swap or split (``kbatch.lib.logfiles``), else None."""
    match = SWAP_SEGMENT_NAME.match(name)
    if not match or int(match.group(1)) > INT64_MAX:
        return None
    return int(match.group(1))


def file_offset(name: str) -> int | None:
    """The offset a file of a partition directory is named by, as Kafka's
    LogFileUtils.offsetFromFile reads it (the digits before the first dot),
    None when there are none."""
    head, dot, _ = name.partition(".")
    return int(head) if dot and DIGITS.match(head) and int(head) <= INT64_MAX else None


def tiered_topic_dir(name: str) -> tuple[str, str] | None:
    """``(topic, topic id)`` of a tiered bucket's ``<topic>-<topicId>`` folder."""
    match = TIERED_TOPIC_DIR.match(name)
    return (match.group(1), match.group(2)) if match else None


def tiered_partition_dir(name: str) -> int | None:
    """The partition a tiered bucket's ``<partition>`` folder names."""
    if not DIGITS.match(name):
        return None
    number = int(name)
    return number if number <= INT32_MAX else None


def tiered_object(name: str) -> tuple[int, str, str] | None:
    """``(start offset, segment uuid, kind)`` of a tiered segment's object
    name (kind: "log", "indexes" or "rsm-manifest")."""
    match = TIERED_OBJECT.match(name)
    if not match or int(match.group(1)) > INT64_MAX:
        return None
    return int(match.group(1)), match.group(2), match.group(3)


def topic_of_file(name) -> str | None:
    """The topic a segment file's path or URL names, as opening its
    partition reads it: its folder ``<topic>-<partition>``, or a tiered
    bucket's ``<topic>-<topicId>/<partition>/``; None when it names neither."""
    parts = str(name).replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 2 and (found := parse_partition_dir(parts[-2])) is not None:
        return found[0]
    if len(parts) >= 3 and tiered_partition_dir(parts[-2]) is not None:
        tiered = tiered_topic_dir(parts[-3])
        return tiered[0] if tiered else None
    return None


def uuid_text(value) -> str | None:
    """A Kafka Uuid as its object-key form (22 characters of URL-safe
    base64), from that form, a canonical 8-4-4-4-12 string or 16 bytes."""
    import base64
    import uuid
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        raw = bytes(value)
    elif isinstance(value, str) and len(value) == 36:
        try:
            raw = uuid.UUID(value).bytes
        except ValueError:
            return value
    else:
        return None if value is None else str(value)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
