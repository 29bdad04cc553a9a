r"""A broker's checkpoint text files.

    replication-offset-checkpoint       high watermark per partition
    recovery-point-offset-checkpoint    offset up to which the log was flushed
    log-start-offset-checkpoint         log start offset per partition
    cleaner-offset-checkpoint           where the log cleaner got to
    <topic>-<p>/leader-epoch-checkpoint leader epoch -> first offset

    line 1: version (0) | line 2: entry count | then one entry per line:
    "<topic> <partition> <offset>" (offset files) or "<epoch> <start offset>"

Parsed as Kafka's ``CheckpointFile`` parses them: lines end at ``\n``,
``\r`` or ``\r\n`` (``BufferedReader.readLine``); an entry's fields are
split at runs of ASCII whitespace (``\s+``; a line starting with one has an
empty first field); each number is read as ``Integer.parseInt`` (version,
count, partition, leader epoch: int32) or ``Long.parseLong`` (offsets:
int64) reads it: an optional ``+`` or ``-``, then decimal digits (Java's
``Character.digit``: any Unicode decimal digit of the BMP) and nothing else
(no spaces, no ``_``), within the type's range. A file Kafka refuses (a
wrong version, count, line or number) raises ``CorruptRecordError`` naming
the file and line. Files are read whole (they hold one line per
partition); at most ``MAX_CHECKPOINT_BYTES``. A data
directory may be local or in object storage (``storage``: see
``kbatch.lib.storage``): the door (``kbatch.lib.open``) says where.
"""

from __future__ import annotations

import re
import unicodedata

from kbatch.errors import CorruptRecordError, KbatchError
from kbatch.wire import INT64_MAX, INT64_MIN
from kbatch.lib.files import NotRegularFileError
from kbatch.lib.open import tree_of
from kbatch.lib.paths import parse_partition_dir
from kbatch.lib.storage import Storage
from kbatch.lib.tree import Location

OFFSET_FILES = {"replication-offset-checkpoint": "high_watermark",
                "recovery-point-offset-checkpoint": "recovery_point",
                "log-start-offset-checkpoint": "log_start_offset",
                "cleaner-offset-checkpoint": "cleaner_offset"}
EPOCH_FILE = "leader-epoch-checkpoint"
# a data directory's marker of a clean shutdown: a broker loading it recovers no segment
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
MAX_CHECKPOINT_BYTES = 256 << 20


def location_of(target, storage: Storage | None = None) -> Location:
    """Where ``target`` (a path, a URL or a ``Location``) is."""
    if isinstance(target, Location):
        return target
    return Location(*tree_of(target, Storage.of(storage)))


def _lines(data: bytes, where: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError("checkpoint file is not UTF-8 text", path=where,
                                 position=exc.start) from None
    lines = _LINE_END.split(text)           # BufferedReader.readLine's line ends
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_LINE_END = re.compile(r"\r\n|\r|\n")
_JAVA_SPACES = re.compile(r"[ \t\n\x0b\f\r]+")     # java.util.regex "\\s+": ASCII only
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (INT64_MIN, INT64_MAX)


def _fields(line: str) -> list[str]:
    """``Pattern.compile("\\s+").split(line)`` as Java splits: trailing
    empty strings removed, a leading one (the line starts with whitespace)
    kept; an empty line is one empty field."""
    if not line:
        return [""]
    parts = _JAVA_SPACES.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_parse(text: str, bounds: tuple[int, int]) -> int:
    """``Integer.parseInt(text)`` (``bounds`` ``INT32``) or
    ``Long.parseLong(text)`` (``INT64``). An optional ``+`` or ``-``, then
    at least one decimal digit (``Character.digit(c, 10)``: a Unicode
    decimal digit in the BMP, so also an Arabic-Indic or a fullwidth digit)
    and nothing else. Where Java throws ``NumberFormatException``: a
    ``ValueError`` saying "not a number" or "out of range"."""
    body = text[1:] if text[:1] in ("+", "-") else text
    low, high = bounds
    value, over = 0, False
    for ch in body:
        digit = unicodedata.decimal(ch, None) if ord(ch) <= 0xFFFF else None
        if digit is None:
            raise ValueError("not a number")
        if not over:
            value = value * 10 + digit
            over = value > high + 1         # past even the most negative value's size
    if not body:
        raise ValueError("not a number")
    value = -value if text[0] == "-" else value
    if over or not low <= value <= high:
        raise ValueError("out of range")
    return value


def _read(loc: Location) -> bytes | None:
    try:
        return loc.tree.read_small(loc.path, MAX_CHECKPOINT_BYTES)
    except (OSError, NotRegularFileError) as exc:   # remote: an OSError; local: not
        if "more than" in str(exc):
            raise CorruptRecordError(f"checkpoint file over {MAX_CHECKPOINT_BYTES} bytes",
                                     path=str(loc)) from None
        raise


def read_checkpoint(path, storage: Storage | None = None) -> tuple[str, list[tuple]]:
    """``(kind, entries)``: ``kind`` is "high_watermark", "recovery_point",
    "log_start_offset", "cleaner_offset" (entries ``(topic, partition,
    offset)``) or "leader_epoch" (entries ``(epoch, start_offset)``). An
    empty file (a broker that crashed while writing it) has no entries."""
    loc = location_of(path, storage)
    kind = OFFSET_FILES.get(loc.name, "leader_epoch" if loc.name == EPOCH_FILE else None)
    if kind is None:
        raise ValueError(f"not a checkpoint file name: {loc.name}")
    data = _read(loc)
    if data is None:
        raise FileNotFoundError(f"{loc}: no such file")
    return parse_checkpoint(kind, data, str(loc))


def parse_checkpoint(kind: str, data: bytes, path: str) -> tuple[str, list[tuple]]:
    """``read_checkpoint`` of a file's bytes (``path`` names it in errors)."""
    lines = _lines(data, path)
    if not lines:
        return kind, []

    def bad(i: int, why: str) -> CorruptRecordError:
        return CorruptRecordError(f"line {i + 1}: {why}", path=path)

    def number(text: str, i: int, what: str, bounds: tuple[int, int] = INT32) -> int:
        try:
            return java_parse(text, bounds)
        except ValueError as exc:
            why = ("is not a number" if str(exc) == "not a number" else
                   f"is out of range for an int{32 if bounds == INT32 else 64} "
                   f"({bounds[0]}..{bounds[1]})")
            raise bad(i, f"{what} {text!r} {why}") from None

    if number(lines[0], 0, "version") != 0:
        raise bad(0, f"version {lines[0]} (only 0 is known)")
    if len(lines) < 2:      # CheckpointReadBuffer.read: no count line, no entries
        return kind, []
    count = number(lines[1], 1, "entry count")
    if count != len(lines) - 2:
        raise bad(1, f"count {count} but {len(lines) - 2} entry lines")
    entries = []
    for i, line in enumerate(lines[2:], start=2):
        parts = _fields(line)
        if kind == "leader_epoch":
            if len(parts) != 2:
                raise bad(i, f"{line!r}: want '<epoch> <offset>'")
            entries.append((number(parts[0], i, "leader epoch"),
                            number(parts[1], i, "start offset", INT64)))
        else:
            if len(parts) != 3:
                raise bad(i, f"{line!r}: want '<topic> <partition> <offset>'")
            entries.append((parts[0], number(parts[1], i, "partition"),
                            number(parts[2], i, "offset", INT64)))
    return kind, entries


def checkpoints(data_dir, storage: Storage | None = None):
    """Every checkpoint file of a broker data directory (or one checkpoint
    file) as a ``pyarrow.Table``: ``file, kind, topic, partition,
    leader_epoch`` (leader-epoch files only) ``, offset``."""
    import pyarrow as pa
    loc = location_of(data_dir, storage)
    if loc.stat().kind == "file":
        files = [loc]
    else:
        entries = loc.list()
        files = [loc.child(e.name) for e in entries if e.name in OFFSET_FILES and e.is_file]
        for e in entries:
            if e.is_dir and parse_partition_dir(e.name) is not None:
                child = loc.child(e.name)
                if any(f.name == EPOCH_FILE and f.is_file for f in child.list()):
                    files.append(child.child(EPOCH_FILE))
    rows = []
    for f in files:
        kind, entries = read_checkpoint(f)
        if kind == "leader_epoch":
            topic, part = parse_partition_dir(f.parent.name) or (None, None)
            rows += [{"file": str(f), "kind": kind, "topic": topic, "partition": part,
                      "leader_epoch": e, "offset": o} for e, o in entries]
        else:
            rows += [{"file": str(f), "kind": kind, "topic": t, "partition": p,
                      "leader_epoch": None, "offset": o} for t, p, o in entries]
    schema = pa.schema([("file", pa.string()), ("kind", pa.string()), ("topic", pa.string()),
                        ("partition", pa.int32()), ("leader_epoch", pa.int32()),
                        ("offset", pa.int64())])
    return pa.Table.from_pylist(rows, schema=schema)


def offsets_of(data_dir, kind: str, storage: Storage | None = None) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from one offset checkpoint file of the
    data directory ({} when the file is absent)."""
    name = {v: k for k, v in OFFSET_FILES.items()}[kind]
    loc = location_of(data_dir, storage).child(name)
    data = _read(loc)
    if data is None:
        return {}
    return {(t, p): o for t, p, o in parse_checkpoint(kind, data, str(loc))[1]}


def holder_offsets(partition: Location, kind: str) -> dict[tuple[str, int], int]:
    """``offsets_of`` the folder holding the partition directory at
    ``partition`` (a broker's data directory, where its checkpoints live);
    {} with a warning on the ``kbatch`` logger when that folder's file
    cannot be read or parsed: a partition copied beside unrelated files
    still works, as if no checkpoint named it."""
    import logging
    try:
        return offsets_of(partition.parent, kind)
    except (CorruptRecordError, OSError, NotRegularFileError) as exc:
        logging.getLogger("kbatch").warning(
            "%s: the %s of the folder holding it is not used: %s", partition,
            {v: k for k, v in OFFSET_FILES.items()}[kind], exc)
        return {}


def broker_load(location: Location, partition_alone: bool, entries=None
                ) -> tuple[bool, dict[tuple[str, int], int]]:
    """``(clean shutdown, {(topic, partition): recovery point})`` of the data
    directory at ``location`` (``partition_alone``: of the one holding the
    partition directory there): what decides which segments a broker's
    load recovers. ``CLEAN_SHUTDOWN_FILE`` (looked for in ``entries``, the
    data directory's listing, when the caller has it; False when the
    directory cannot be listed) and ``recovery-point-offset-checkpoint``."""
    data_dir = location.parent if partition_alone else location
    try:
        listed = data_dir.list() if entries is None else entries
        clean = any(e.name == CLEAN_SHUTDOWN_FILE and e.is_file for e in listed)
    except (OSError, KbatchError):
        clean = False
    points = (holder_offsets(location, "recovery_point") if partition_alone
              else offsets_of(location, "recovery_point"))
    return clean, points


def offsets_text(entries: dict) -> str:
    """``{(topic, partition): offset}`` as Kafka writes an offset checkpoint
    file: version 0, the entry count, one ``topic partition offset`` line each."""
    lines = [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    return "\n".join(["0", str(len(lines)), *lines]) + "\n"


def carry_data_dir_files(source: Location, dest, rewritten: str) -> None:
    """Copy a data directory's offset checkpoint files (all but the kind
    ``rewritten``, which the caller writes) and ``meta.properties`` from
    ``source`` (local or remote) into the local folder ``dest``."""
    from pathlib import Path
    for name, kind in OFFSET_FILES.items():
        if kind == rewritten:
            continue
        loc = source.child(name)
        data = loc.tree.read_small(loc.path, MAX_CHECKPOINT_BYTES)
        if data is not None:
            (Path(dest) / name).write_bytes(data)
    meta = source.child("meta.properties")
    data = meta.tree.read_small(meta.path, 1 << 16)
    if data is not None:
        (Path(dest) / "meta.properties").write_bytes(data)
