"""The one door: what a path, a URL or a filesystem object names, and
where its bytes come from. Every entry point (the library, the tools and
the command line, Spark batch and streaming, the internal topics) asks
here; nothing else decides "local or remote?".

    resolve(target, storage)    Resolved: SEGMENT, PARTITION, DATA_DIR or DATA_DIRS
    Resolved.partitions()       every partition it holds: (topic, partition, Location)
    Resolved.segment()          the Segment a SEGMENT names (kbatch.lib.logfiles)
    Resolved.segments()         the segments of a PARTITION
    expect(target, *kinds)      resolve, and refuse another kind with a hint

A target is a local path (``str`` or ``os.PathLike``), a ``file://`` URL
(the local path: memory-mapped), any other fsspec URL (``s3://``,
``gs://``, ``memory://``...: an object store), a path in the filesystem
object of ``Storage.filesystem``, or a list of data directories. The
answers and errors are the same for all of them (a location is named as
the user named it):

plain layout, a directory (a prefix in an object store) is, in order:
1. holding segment files (``<20 digits>.log``): a partition, even when its
   name does not parse as ``<topic>-<partition>``;
2. holding partition directories: a data directory (data directories are
   often named like partitions, ``kafka-logs-1``, so the name alone decides
   nothing);
3. empty or holding only other files, with a ``<topic>-<partition>`` name:
   an (empty) partition;
4. otherwise an error naming what was found, with a hint when a directory
   below would have been readable ("did you mean X/data?") or the other
   layout fits.

tiered layout: a prefix holding ``<offset>-<uuid>.log|.indexes|.rsm-manifest``
objects is a partition (topic from its parent's ``<topic>-<topicId>``
name), one holding ``<topic>-<topicId>`` folders or (itself such a folder)
partition folders is a data directory.

A regular file (an object) is a SEGMENT whatever its name (``.log``,
carved ``.records``, ``.checkpoint`` snapshots all hold batches); FIFOs,
sockets and devices are refused without being opened. Two directories
naming one partition (``t-1`` and ``t-01``; one topic under two topic ids)
are refused, as Kafka refuses to load them. A missing path's error names
the nearest names that exist ("did you mean orders-0?").
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from kbatch.lib.logfiles import Segment, TieredSegment, list_segments
from kbatch.lib.paths import (TRANSIENT_DIR_SUFFIXES, PathError, PathKind, parse_partition_dir,
                              segment_base, tiered_object, tiered_partition_dir,
                              tiered_topic_dir)
from kbatch.lib.storage import LOCAL, Storage
from kbatch.lib.tree import Entry, Location, by_name, locate, tree_of

EXPECTED = {
    "plain": "a segment file, a <topic>-<partition> directory or a broker data directory",
    "tiered": "a tiered segment's .log object, a <topic>-<topicId>/<partition> prefix or a "
              "prefix of <topic>-<topicId> folders",
}
HINT_DEPTH, HINT_BUDGET, REMOTE_HINT_BUDGET = 4, 200, 20


@dataclass(frozen=True)
class Partition:
    """One partition a target holds."""

    topic: str | None
    partition: int | None
    location: Location


@dataclass(frozen=True)
class Resolved:
    """What ``resolve`` found. ``locations``: the one location for
    SEGMENT, PARTITION and DATA_DIR, every data directory for DATA_DIRS.
    ``topic``/``partition`` are set for a partition (and for a segment
    inside one). ``path``/``paths``: ``pathlib.Path`` for local locations,
    the URL text for remote ones."""

    kind: PathKind
    locations: tuple
    topic: str | None = None
    partition: int | None = None
    storage: Storage = LOCAL
    entries: tuple | None = field(default=None, compare=False, repr=False)
    listed: tuple | None = field(default=None, compare=False, repr=False)   # DATA_DIR

    @property
    def location(self) -> Location:
        return self.locations[0]

    @property
    def path(self):
        return self.location.local_path()

    @property
    def paths(self) -> tuple:
        return tuple(loc.local_path() for loc in self.locations)

    @property
    def name(self) -> str:
        return str(self.location)

    @property
    def remote(self) -> bool:
        return self.location.remote

    def partitions(self) -> list[Partition]:
        """Every partition the target holds, by (topic, partition): the one
        place a data directory is expanded. Two directories naming the same
        partition (in one data directory or across several) raise
        ``PathError``."""
        if self.kind is PathKind.SEGMENT:
            raise PathError(f"{self.name}: is a segment, not a partition or data directory")
        if self.kind is PathKind.PARTITION:
            return [Partition(self.topic, self.partition, self.location)]
        seen: dict[tuple, Location] = {}
        for loc in self.locations:
            found = (self.listed if self.listed is not None and len(self.locations) == 1
                     else partition_dirs(loc, self.storage.layout))
            for topic, part, child in found:
                key = (topic, part)
                if key in seen:
                    raise _twins(seen[key], child, topic, part)
                seen[key] = child
        return [Partition(t, p, loc) for (t, p), loc in sorted(seen.items())]

    def segments(self) -> list[Segment]:
        """The segments of a PARTITION, by base offset."""
        if self.kind is not PathKind.PARTITION:
            raise PathError(f"{self.name}: is a {self.kind.value}, not a partition")
        entries = list(self.entries) if self.entries is not None else None
        return list_segments(self.location, self.storage, entries)

    def segment(self) -> Segment:
        """The segment a SEGMENT names, with the index files beside it.
        ``Segment.last`` says whether it is the last of its directory (a
        torn tail is damage anywhere else)."""
        if self.kind is not PathKind.SEGMENT:
            raise PathError(f"{self.name}: is a {self.kind.value}, not a segment")
        loc = self.location
        try:
            siblings = by_name(loc.parent.list())
        except PathError:
            siblings = {}
        if self.storage.layout == "tiered":
            parsed = tiered_object(loc.name)
            if parsed is None or parsed[2] != "log":
                raise PathError(f"{loc}: not a tiered segment's .log object (expected "
                                "<20-digit offset>-<segment uuid>.log)")
            stem = loc.name[:-len(".log")]
            objects = {}
            for e in siblings.values():
                named = tiered_object(e.name)
                if named is not None and e.is_file and e.name.startswith(stem + "."):
                    objects[named[2]] = e
            seg = TieredSegment(loc, objects, self.storage.keys)
            later = [p[0] for p in map(tiered_object, siblings) if p and p[2] == "log"]
        else:
            entry = siblings.get(loc.name, self.entries[0] if self.entries else None)
            seg = Segment(loc, entry, siblings if loc.remote else None)
            later = [b for b in map(segment_base, siblings) if b is not None]
        seg.last = not any(b > seg.base_offset for b in later) \
            if segment_base(loc.name) is not None or self.storage.layout == "tiered" else True
        return seg


def _twins(first: Location, second: Location, topic: str, partition: int) -> PathError:
    same = str(first.parent) == str(second.parent)
    names = (f"directories {first.name} and {second.name}" if same
             else f"{first} and {second}")
    return PathError(
        f"{first.parent if same else first.parent.parent}: {names} both name partition "
        f"{partition} of topic {topic!r} (Kafka refuses to load such a directory; remove or "
        "rename one, or read them one at a time)")


def resolve(target, storage: Storage | None = None, *, transient_ok: bool = False,
            **storage_kwargs) -> Resolved:
    """Classify ``target`` (or a list of data directories); raise
    ``PathError`` with a one-line message saying what was found and what
    was expected. ``storage``: a ``Storage`` (or its keyword arguments).
    ``transient_ok``: a directory holding only partitions being deleted or
    moved (``-delete``, ``-future``, ``-stray``) is an empty data directory."""
    if isinstance(target, Resolved):
        return target          # already through the door (with its own storage)
    storage = Storage.of(storage, **storage_kwargs)
    if isinstance(target, (list, tuple)):
        if not target:
            raise PathError("no path given")
        if len(target) == 1:
            return resolve(target[0], storage, transient_ok=transient_ok)
        found = [resolve(t, storage, transient_ok=transient_ok) for t in target]
        wrong = [r for r in found if r.kind is not PathKind.DATA_DIR]
        if wrong:
            raise PathError("several paths must each be a broker data directory: "
                            + ", ".join(f"{r.name} is a {r.kind.value}" for r in wrong))
        remote = {r.remote for r in found}
        if len(remote) > 1:
            raise PathError("several paths must all be local or all be URLs, not both")
        return Resolved(PathKind.DATA_DIRS, tuple(r.location for r in found), storage=storage)
    loc = locate(target, storage)
    entry = loc.stat()
    if entry.kind == "missing":
        raise PathError(f"{loc}: no such file or directory{_near_miss(loc)}")
    if entry.kind == "directory":
        return _resolve_dir(loc, storage, transient_ok)
    if entry.kind != "file":
        raise PathError(f"{loc}: a {entry.kind}, not a segment file or directory")
    topic = part = None
    parent = loc.parent
    if storage.layout == "tiered":
        part = tiered_partition_dir(parent.name)
        named = tiered_topic_dir(parent.parent.name)
        topic = named[0] if named and part is not None else None
        part = part if topic is not None else None
    else:
        parsed = parse_partition_dir(parent.name) if parent.name else None
        topic, part = parsed if parsed else (None, None)
    return Resolved(PathKind.SEGMENT, (loc,), topic, part, storage, (entry,))


def _holds_segments(entries: list[Entry], layout: str) -> bool:
    if layout == "tiered":
        return any(e.is_file and tiered_object(e.name) is not None for e in entries)
    return any(e.is_file and segment_base(e.name) is not None for e in entries)


def _resolve_dir(loc: Location, storage: Storage, transient_ok: bool) -> Resolved:
    entries = loc.list()
    layout = storage.layout
    if layout == "tiered":
        part = tiered_partition_dir(loc.name)
        named = tiered_topic_dir(loc.parent.name)
        if _holds_segments(entries, layout):
            topic = named[0] if named and part is not None else None
            return Resolved(PathKind.PARTITION, (loc,), topic,
                            part if topic is not None else None, storage, tuple(entries))
        listed = partition_dirs(loc, layout, entries)
        if listed:
            return Resolved(PathKind.DATA_DIR, (loc,), storage=storage, listed=tuple(listed))
        if named is not None and part is not None:
            return Resolved(PathKind.PARTITION, (loc,), named[0], part, storage, tuple(entries))
    else:
        parsed = parse_partition_dir(loc.name)
        if _holds_segments(entries, layout):
            topic, part = parsed if parsed else (None, None)
            return Resolved(PathKind.PARTITION, (loc,), topic, part, storage, tuple(entries))
        listed = partition_dirs(loc, layout, entries)
        if listed:
            return Resolved(PathKind.DATA_DIR, (loc,), storage=storage, listed=tuple(listed))
        if parsed is not None:
            return Resolved(PathKind.PARTITION, (loc,), *parsed, storage, tuple(entries))
    if transient_ok and any(e.is_dir and e.name.endswith(TRANSIENT_DIR_SUFFIXES)
                            for e in entries):
        return Resolved(PathKind.DATA_DIR, (loc,), storage=storage)
    what = "an empty directory" if not entries else (
        "no segment files and no partition directories" if layout == "plain" else
        "no tiered segment objects and no <topic>-<topicId> folders")
    raise PathError(f"{loc}: {what} (expected {EXPECTED[layout]}){_hint(loc, entries, layout)}")


def partition_dirs(loc: Location, layout: str = "plain",
                   entries: list[Entry] | None = None) -> list[tuple[str, int, Location]]:
    """``(topic, partition, location)`` of every partition directly under
    ``loc`` (tiered: under its ``<topic>-<topicId>`` folders, or its own
    partition folders when it is one), sorted; two naming the same
    partition raise ``PathError``."""
    entries = loc.list() if entries is None else entries
    seen: dict[tuple[str, int], Location] = {}

    def add(topic, part, child):
        key = (topic, part)
        if key in seen:
            raise _twins(seen[key], child, topic, part)
        seen[key] = child

    if layout == "plain":
        for e in entries:
            parsed = parse_partition_dir(e.name) if e.is_dir else None
            if parsed is not None:
                add(*parsed, loc.child(e.name))
    else:
        own = tiered_topic_dir(loc.name)
        topics = [e for e in entries if e.is_dir and tiered_topic_dir(e.name)]
        if not topics and own is not None:
            for e in entries:
                part = tiered_partition_dir(e.name) if e.is_dir else None
                if part is not None:
                    add(own[0], part, loc.child(e.name))
        for t in topics:
            topic = tiered_topic_dir(t.name)[0]
            folder = loc.child(t.name)
            for e in folder.list():
                part = tiered_partition_dir(e.name) if e.is_dir else None
                if part is not None:
                    add(topic, part, folder.child(e.name))
    return [(t, p, child) for (t, p), child in sorted(seen.items())]


def _readable(loc: Location, layout: str) -> bool:
    try:
        entries = loc.list()
        return _holds_segments(entries, layout) or bool(partition_dirs(loc, layout, entries))
    except PathError:
        return False


def _hint(loc: Location, entries: list[Entry], layout: str) -> str:
    """"; did you mean X?": the first directory below ``loc`` (breadth
    first, a bounded number of listings) that holds something readable, or
    the other layout when it fits."""
    other = "tiered" if layout == "plain" else "plain"
    if _holds_segments(entries, other) or _quietly(partition_dirs, loc, other, entries):
        return f"; it holds the {other} layout: use layout={other!r} (--layout {other})"
    budget = REMOTE_HINT_BUDGET if loc.remote else HINT_BUDGET
    level = [loc]
    for _ in range(HINT_DEPTH):
        nxt = []
        for d in level:
            try:
                subdirs = [d.child(e.name) for e in d.list() if e.is_dir]
            except PathError:
                continue
            for sub in subdirs:
                budget -= 1
                if budget < 0:
                    return ""
                if _readable(sub, layout):
                    return f"; did you mean {sub}?"
                nxt.append(sub)
        level = nxt
    return ""


def _quietly(call, *args):
    try:
        return call(*args)
    except PathError:
        return None


def _near_miss(loc: Location) -> str:
    """"; did you mean ...?" naming the entries of the parent directory
    closest to a missing name (``orders-O`` for ``orders-0``)."""
    name = loc.name
    if not name:
        return ""
    try:
        names = [e.name for e in loc.parent.list()]
    except Exception:       # noqa: BLE001 - only a hint: a parent that cannot be listed
        return ""
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.75)
    if not close:
        folded = [n for n in names if n.lower() == name.lower()]
        close = folded[:2]
    return "; did you mean " + " or ".join(str(loc.parent.child(c)) for c in close) + "?" \
        if close else ""


def expect(target, *kinds: PathKind, what: str, storage: Storage | None = None,
           transient_ok: bool = False) -> Resolved:
    """``resolve(target)`` that must be one of ``kinds``; ``what`` names what
    the caller reads, for the message ("open_log needs a partition
    directory")."""
    found = resolve(target, storage, transient_ok=transient_ok)
    if found.kind not in kinds:
        hint = ""
        if found.kind is PathKind.DATA_DIR and PathKind.PARTITION in kinds:
            parts = _quietly(found.partitions)
            if parts:
                hint = f"; for example {parts[0].location} (or use open_log_dir)"
        elif found.kind is PathKind.PARTITION and PathKind.DATA_DIR in kinds:
            hint = f"; its data directory is {found.location.parent} (or use open_log)"
        raise PathError(f"{found.name}: is a {found.kind.value}, {what}{hint}")
    return found


def read_side_file(found: Resolved | Location, name: str, limit: int = 1 << 20) -> bytes | None:
    """A small file beside or inside a location (checkpoint files of a data
    directory), wherever it is stored; None when it is not there."""
    loc = found.location if isinstance(found, Resolved) else found
    child = loc.child(name)
    return child.tree.read_small(child.path, limit)


__all__ = ["Partition", "PathError", "PathKind", "Resolved", "Storage", "expect",
           "partition_dirs", "read_side_file", "resolve", "tree_of"]
