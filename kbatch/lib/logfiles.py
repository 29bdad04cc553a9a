"""The segments of a partition, in either layout, wherever they are stored.

    plain    <base>.log  with  <base>.index  <base>.timeindex  <base>.txnindex
    tiered   <start>-<uuid>.log (chunks)  <start>-<uuid>.indexes  <start>-<uuid>.rsm-manifest

A ``Segment`` gives what every reader needs, the same for both layouts and
every store: ``base_offset``, ``size``, ``source`` (its original bytes:
``kbatch.lib.sources``), ``offset_index``/``time_index``/``txn_index``
(the live entries, by the one rule of ``kbatch.lib.index``),
``batch_bounds()`` (a cached walk over its batch headers) and
``claimed_end`` (a tiered manifest's ``endOffset``: with its start and
leader epochs it decides which of overlapping uploads serves an offset,
``kbatch.lib.uploads``, as Kafka's remote log metadata does; ``limit``:
one past the last offset it serves, None for a plain segment). Index files are read with a bound: no more
entries than the segment's size can hold batches.

``list_segments(location, storage)`` lists a partition: plain segment
files by name; tiered segments by manifest (a segment whose state in
``remote_log_metadata`` is not ``COPY_SEGMENT_FINISHED`` is left out;
uploads that overlap are resolved by ``kbatch.lib.uploads``: the ones
read, each with the ``limit`` of the offsets it serves). Transient files (``.deleted``, ``.cleaned``)
and names above the largest offset are not segments.

An interrupted segment swap (the log cleaner's, or a split's: LocalLog's
replaceSegments renames the new segment's files from ``.cleaned`` to
``.swap``, then the old segments' to ``.deleted``, then drops ``.swap``)
is read as Kafka's LogLoader completes it on start-up:

    valid swap     ``<base>.log.swap`` below every ``.cleaned`` file's offset
                   (one at or above is an interrupted split: not used)
    its span       [base, its last batch's last offset + 1)
    replaced       every plain segment whose base offset lies in
                   [least swap base, greatest swap end), or is a swap's
                   base (the swap is renamed over it): not read
    read           the swap segment, with its ``.index.swap``,
                   ``.timeindex.swap``, ``.txnindex.swap`` (the replaced
                   segment's index files are not its own)

A warning on the ``kbatch`` logger names the swap and what it replaces.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from kbatch.errors import CorruptRecordError, KbatchError
from kbatch.lib.index import OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY, OffsetIndex, TimeIndex, \
    TxnIndex
from kbatch.lib.paths import file_offset, segment_base, swap_segment_base, tiered_object
from kbatch.lib.sources import CHECK_BYTES, RemoteBytes
from kbatch.lib import tiered, uploads
from kbatch.lib.tree import Entry, Location, by_name, locate
from kbatch.wire import INT64_MIN, Codec

MIN_MESSAGE_BYTES = 26     # the smallest entry of a log: a magic 0 message
MIN_BATCH_V2_BYTES = 61    # the smallest magic 2 batch (header only)

log = logging.getLogger("kbatch")

BOUNDS_DTYPE = np.dtype([("position", np.int64), ("size", np.int64),
                         ("base_offset", np.int64), ("last_offset", np.int64),
                         ("max_timestamp", np.int64), ("magic", np.int8)])


class Segment:
    """One plain segment (``<base>.log`` and the index files beside it).
    ``location``: where it is (a ``Location``, or a path or URL with default
    storage); ``entry``: its listing entry; ``siblings``: the partition's
    listing by name (index files not in it are not looked for)."""

    claimed_end: int | None = None
    limit: int | None = None      # tiered: one past the last offset it serves (kbatch.lib.uploads)
    undescribed: Exception | None = None  # tiered: why its manifest could not be read at listing
    served_end: int | None = None
    last = True        # the last segment of its partition (a torn tail is damage elsewhere)
    # index files an interrupted swap left as <base>.index.swap (...) beside a
    # plain segment: LogLoader renames them over the plain ones (list_segments)
    swapped_sides: frozenset = frozenset()

    def __init__(self, location, entry: Entry | None = None, siblings: dict | None = None):
        location = locate(location)      # a path or URL given by hand: through the door
        self.location = location
        self.tree = location.tree
        self.name = str(location)
        self.path = location.local_path()
        swap = swap_segment_base(location.name)
        base = segment_base(location.name) if swap is None else swap
        self.base_offset = 0 if base is None else base
        self._entry = entry
        self._siblings = siblings
        self._lock = threading.Lock()
        self._bounds: tuple | None = None
        # an interrupted swap's segment: <base>.log.swap, its indexes <base>.index.swap...
        self._tail = "" if swap is None else ".swap"
        path = location.path[:-len(self._tail)] if self._tail else location.path
        stem = path[:-len(".log")] if path.endswith(".log") else path
        self._stem = stem
        side = location.tree.display if location.remote else Path
        self.index_path = side(stem + ".index" + self._tail)
        self.timeindex_path = side(stem + ".timeindex" + self._tail)
        self.txnindex_path = side(stem + ".txnindex" + self._tail)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location.name}, base_offset={self.base_offset})"

    def __getstate__(self):
        # what an executor needs to open it again: no cached bytes, sources or locks
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("source", "offset_index", "time_index", "txn_index", "_lock",
                              "_bounds", "_detransform")}
        entry = state.get("_entry")
        if entry is not None and entry.identity:
            # an executor's reads are pinned to the object as it finds it: what a
            # change since planning means is the planner's to say (Spark's
            # stream reads an object uploaded again after appends)
            state["_entry"] = dataclasses.replace(entry, identity=())
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._bounds = None

    @functools.cached_property
    def source(self):
        """The segment's bytes (``kbatch.lib.sources``)."""
        return self.tree.source(self.location.path, self._entry)

    @property
    def size(self) -> int:
        return self.source.size

    def version(self) -> tuple:
        return self.source.version()

    def _max_entries(self, smallest_batch: int) -> int | None:
        """Entries an index of this segment can hold live: one per batch at
        most (an append starts a batch), so the log's size bounds them."""
        try:
            return self.size // smallest_batch + 1
        except (OSError, CorruptRecordError):
            return None

    def _side_tail(self, suffix: str) -> str:
        return ".swap" if suffix in self.swapped_sides else self._tail

    def _side(self, suffix: str, dtype, smallest: int, zero_ends: bool):
        path = self._stem + suffix + self._side_tail(suffix)
        size = None
        if self._siblings is not None:
            entry = self._siblings.get(self.tree.name(path))
            if entry is None:
                return np.empty(0, dtype), 0
            size = entry.size
        return self.tree.read_entries(path, dtype, self._max_entries(smallest), zero_ends, size)

    # index files are read with a bound (see kbatch.lib.index): a directory, FIFO
    # or device raises NotRegularFileError, a preallocated or sparse file costs
    # its live entries
    @functools.cached_property
    def offset_index(self) -> OffsetIndex:
        return OffsetIndex.of(self._side(".index", OFFSET_ENTRY, MIN_MESSAGE_BYTES, True),
                              self.base_offset)

    @functools.cached_property
    def time_index(self) -> TimeIndex:
        return TimeIndex.of(self._side(".timeindex", TIME_ENTRY, MIN_MESSAGE_BYTES, True),
                            self.base_offset)

    @functools.cached_property
    def txn_index(self) -> TxnIndex:
        # each entry is one aborted transaction: one control batch in the log
        return TxnIndex.of(self._side(".txnindex", TXN_ENTRY, MIN_BATCH_V2_BYTES, False))

    def files(self) -> list[tuple[str, Entry]]:
        """``(name, entry)`` of its ``.log`` and the index files beside it,
        each under the name a broker gives it (an interrupted swap's
        ``.swap`` files without that suffix); index files not listed are
        left out (listed: ``siblings``, else the parent's listing)."""
        named = self._siblings if self._siblings is not None else \
            by_name(self.location.parent.list())
        stem = self.tree.name(self._stem)
        out = []
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            e = named.get(stem + suffix + self._side_tail(suffix))
            if e is not None and e.is_file:
                out.append((stem + suffix, e))
        return out

    def next_offset(self) -> int:
        """LogSegment.readNextOffset: its last batch's last offset + 1 (its
        base offset when it holds none), from the header walk."""
        bounds = self.batch_bounds()
        return int(bounds["last_offset"][-1]) + 1 if len(bounds) else self.base_offset

    def batch_bounds(self) -> np.ndarray:
        """Position, size, offsets and max timestamp of every batch, from one
        walk over the batch headers (records are not decoded). It ends where
        valid data ends, or quietly at the first batch whose header is
        corrupt (a read reports that). A legacy compressed wrapper's base
        offset is ``INT64_MIN`` (unknown: its header names its last offset
        only). Cached until the segment changes."""
        key = self.version()
        with self._lock:
            if self._bounds is not None and self._bounds[0] == key:
                return self._bounds[1]
        parts = list(self.source.header_rows(0))
        rows = np.concatenate(parts) if parts else None
        n = 0 if rows is None else len(rows)
        bounds = np.empty(n, BOUNDS_DTYPE)
        if n:
            for name in BOUNDS_DTYPE.names:
                bounds[name] = rows[name]
            # a legacy wrapper's header names its last offset only, and its
            # inner messages may carry any offsets up to it (even below the
            # batch before it): its first offset is unknown, so no seek may
            # stop before it (full and range reads then see the same records)
            wrapper = (rows["magic"] < 2) & (rows["codec"] != Codec.NONE)
            bounds["base_offset"][wrapper] = INT64_MIN
        with self._lock:
            self._bounds = (key, bounds)
        return bounds


class TieredSegment(Segment):
    """One uploaded segment of a tiered bucket: its chunks, ``.indexes``
    and manifest (``kbatch.lib.tiered``). ``keys``: a ``KeyRing`` for an
    encrypted bucket."""

    def __init__(self, location: Location, entries: dict, keys=None):
        super().__init__(location, entries.get("log"))
        start, uuid, _ = tiered_object(location.name)
        self.base_offset = start
        self.segment_id = uuid
        self._entries = entries
        self._keys = keys
        self._manifest_raw: bytes | None = None
        self.notes: list[str] = []        # what the overlap rule set aside (kbatch.lib.uploads)
        self.undecided: list[str] = []
        self.shadowed: list = []          # uploads not read, whose offsets this one serves
        self.index_path = self.timeindex_path = self.txnindex_path = None

    @property
    def manifest_url(self) -> str:
        return self.tree.display(self._stem + ".rsm-manifest")

    def manifest_bytes(self) -> bytes:
        if self._manifest_raw is None:
            entry = self._entries["rsm-manifest"]
            raw = self.tree.read_small(entry.path, tiered.MAX_MANIFEST_BYTES, entry.size)
            if raw is None:
                raise CorruptRecordError("manifest listed but gone", path=self.manifest_url)
            self._manifest_raw = raw
        return self._manifest_raw

    @functools.cached_property
    def manifest(self) -> tiered.Manifest:
        log = self._entries.get("log")
        if log is None:
            raise CorruptRecordError("segment object missing (the manifest is there)",
                                     path=self.name, position=0)
        return tiered.parse_manifest(self.manifest_bytes(), self.manifest_url, log.size)

    @property
    def claimed_end(self) -> int | None:
        return self.manifest.end_offset

    @property
    def event_ms(self) -> int:
        value = self.manifest.metadata.get("eventTimestampMs", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("manifest", None)
        state["shadowed"] = []        # (the executor reads this upload alone)
        state["_manifest_raw"] = self.manifest_bytes()   # the executor fetches no manifest
        return state

    @functools.cached_property
    def _detransform(self) -> tiered.Detransform:
        manifest = self.manifest
        key = (tiered.unwrap_data_key(manifest, self._keys, self.manifest_url)
               if manifest.encrypted else None)
        return tiered.Detransform(manifest, key, self.name)

    @functools.cached_property
    def source(self):
        log = self._entries["log"] if "log" in self._entries else None
        if log is None:
            self.manifest   # raises: the segment object is missing
        raw = self.tree.raw(log.path, log.size, log.identity)
        # a batch check fetches only its chunks (each costs a decode)
        return RemoteBytes(tiered.TieredSource(raw, self.manifest, self._detransform),
                           log.version, ahead=CHECK_BYTES)

    def _index_bytes(self, name: str) -> bytes:
        entry = self._entries.get("indexes")
        if entry is None:
            return b""
        raw = self.tree.raw(entry.path, entry.size)
        return tiered.read_index(raw, self.manifest, self._detransform, name)

    @functools.cached_property
    def offset_index(self) -> OffsetIndex:
        return OffsetIndex.from_bytes(self._index_bytes("offset"), self.base_offset,
                                      self._max_entries(MIN_MESSAGE_BYTES))

    @functools.cached_property
    def time_index(self) -> TimeIndex:
        return TimeIndex.from_bytes(self._index_bytes("timestamp"), self.base_offset,
                                    self._max_entries(MIN_MESSAGE_BYTES))

    @functools.cached_property
    def txn_index(self) -> TxnIndex:
        return TxnIndex.from_bytes(self._index_bytes("transaction"),
                                   self._max_entries(MIN_BATCH_V2_BYTES))


def _mtime_ns(location) -> int | None:
    get = getattr(location.tree, "mtime_ns", None)
    return None if get is None else get(location.path)


def mtime_ms(location) -> int:
    """A file's modification time in ms (what Kafka's ``LogSegment``
    reads as ``lastModified``: a segment without timestamps is as old as
    its file), -1 when the store does not say."""
    ns = _mtime_ns(location)
    return -1 if ns is None else ns // 1_000_000


def keep_mtime(location, dest, of=None) -> None:
    """Give the local file ``dest`` the modification time of ``location``
    (``of``: a time in ms instead): a copy of a segment Kafka would not
    have rewritten stays as old as the original, since retention by time
    falls back on it. Nothing when the store does not say."""
    ns = _mtime_ns(location) if of is None else (None if of < 0 else of * 1_000_000)
    if ns is not None:
        os.utime(dest, ns=(ns, ns))


def list_segments(location: Location, storage, entries: list[Entry] | None = None
                  ) -> list[Segment]:
    """The segments of the partition at ``location``, by base offset
    (``entries``: its listing, when the caller has it)."""
    entries = location.list() if entries is None else entries
    if storage.layout == "tiered":
        return _tiered_segments(location, entries, storage)
    named = by_name(entries)
    found = [Segment(location.child(e.name), e, named) for e in entries
             if e.is_file and segment_base(e.name) is not None]
    _swapped_sides(found, entries, named)
    swapped, span = _interrupted_swaps(location, entries, named)
    if swapped:
        # the span's segments, and those a swap is renamed over (an empty
        # swap's span is empty, yet it takes its name)
        named_over = {s.base_offset for s in swapped}
        replaced = [s for s in found
                    if span[0] <= s.base_offset < span[1] or s.base_offset in named_over]
        log.warning("%s: an interrupted segment swap (the log cleaner's or a split's): %s "
                    "read in place of %s, as a broker completes it on start-up",
                    location, ", ".join(s.location.name for s in swapped),
                    ", ".join(s.location.name for s in replaced) or "no segment")
        found = [s for s in found if s not in replaced] + swapped
    return sorted(found, key=lambda s: s.base_offset)


SIDE_SUFFIXES = (".index", ".timeindex", ".txnindex")


def _least_cleaned(entries: list[Entry]) -> int | None:
    """The smallest offset of a ``.cleaned`` file (a ``.swap`` at or above
    it is an interrupted split's, which LogLoader deletes)."""
    return min((file_offset(e.name) for e in entries if e.is_file
                and e.name.endswith(".cleaned") and file_offset(e.name) is not None),
               default=None)


def _swapped_sides(found: list[Segment], entries: list[Entry], named: dict) -> None:
    """Plain segments beside which a valid ``<base>.index.swap`` (or
    ``.timeindex.swap``, ``.txnindex.swap``) was left without its
    ``.log.swap``: a crash while LogLoader (or replaceSegments) dropped the
    ``.swap`` suffixes, the log renamed first. LogLoader renames every valid
    swap file over the file of its name, so that index is the segment's:
    ``Segment.swapped_sides`` says which (the plain file, if any, is stale)."""
    least = _least_cleaned(entries)
    for seg in found:
        stem = seg.tree.name(seg._stem)
        sides = frozenset(s for s in SIDE_SUFFIXES if stem + s + ".swap" in named
                          and (least is None or seg.base_offset < least))
        if sides:
            seg.swapped_sides = sides
            side = seg.tree.display if seg.location.remote else Path
            for suffix in sides:
                setattr(seg, suffix[1:] + "_path", side(seg._stem + suffix + ".swap"))


def _interrupted_swaps(location: Location, entries: list[Entry], named: dict
                       ) -> tuple[list[Segment], tuple[int, int] | None]:
    """The ``<base>.log.swap`` segments Kafka's LogLoader would rename into
    place (those below every ``.cleaned`` file's offset: the others are an
    interrupted split's, which it deletes), and the offsets they replace:
    [least base, greatest next offset)."""
    swaps = [e for e in entries if e.is_file and swap_segment_base(e.name) is not None]
    if not swaps:
        return [], None
    least = _least_cleaned(entries)
    valid = [Segment(location.child(e.name), e, named) for e in swaps
             if least is None or swap_segment_base(e.name) < least]
    if not valid:
        return [], None
    return valid, (min(s.base_offset for s in valid), max(s.next_offset() for s in valid))


def loaded_files(location: Location, entries: list[Entry] | None = None) -> dict[str, Entry]:
    """The files of the plain partition directory at ``location`` as Kafka's
    LogLoader leaves them on start-up, by the name each then has: no
    ``.deleted`` or ``.cleaned`` files, an interrupted swap completed (its
    ``.swap`` files under their names, the files whose offset lies in the
    span it replaces gone, a split's swap files gone). What a copy of the
    directory (retention's, the cleaner's) writes. Directories are left out."""
    entries = location.list() if entries is None else entries
    files = [e for e in entries if e.is_file]
    _, span = _interrupted_swaps(location, files, by_name(files))
    least = _least_cleaned(files)
    out: dict[str, Entry] = {}
    for e in files:
        at = file_offset(e.name)
        if e.name.endswith((".deleted", ".cleaned")):
            continue
        if e.name.endswith(".swap"):
            if at is not None and (least is None or at < least):
                out[e.name[:-len(".swap")]] = e
            continue
        if span is not None and at is not None and span[0] <= at < span[1]:
            continue
        out.setdefault(e.name, e)
    return out


def _tiered_segments(location: Location, entries: list[Entry], storage) -> list[Segment]:
    states = storage.states
    objects: dict[str, dict] = {}
    for e in entries:
        parsed = tiered_object(e.name)
        if parsed is None or not e.is_file:
            continue
        stem = e.name[:-len(parsed[2]) - 1]
        objects.setdefault(stem, {})[parsed[2]] = e
    found = []
    for stem, objs in objects.items():
        if "rsm-manifest" not in objs:
            continue      # not (yet) a finished upload: the manifest is written last
        start, uuid, _ = tiered_object(stem + ".log")
        if states is not None and states.get(uuid) != "COPY_SEGMENT_FINISHED":
            continue      # not (or no longer) a finished copy: never read
        found.append(TieredSegment(location.child(stem + ".log"), objs, storage.keys))
    return served_uploads(location, found)


def _upload(seg: "TieredSegment") -> uploads.Upload:
    """What ``kbatch.lib.uploads`` needs of ``seg``, from its manifest (a
    manifest without ``endOffset``: the last offset its batch headers hold;
    one that cannot be read: nothing known, ``seg.undescribed`` is the
    error, and every read that reaches its start raises it, see
    ``served_uploads``)."""
    try:
        meta = seg.manifest.metadata
        end = seg.claimed_end
        if end is None:
            end = _last_offset(seg)
    except (KbatchError, OSError) as exc:
        seg.undescribed = exc
        return uploads.Upload(seg.base_offset, None, None, 0, seg.segment_id)
    return uploads.Upload(seg.base_offset, end, uploads.epochs_of(meta), seg.event_ms,
                          seg.segment_id)


def _last_offset(seg: "TieredSegment") -> int | None:
    """The last offset an upload's batches hold (None: none), for a manifest
    that does not say: the batch headers walked from the position of its
    offset index's last entry (the last few chunks are fetched, not the
    object), or from its start when there is no entry or the entry does not
    name the start of a batch."""
    try:
        index = seg.offset_index
        tail = int(index.positions[-1]) if len(index) else 0
    except (KbatchError, OSError):      # no index to go by: the whole walk
        tail = 0
    for start in dict.fromkeys((tail, 0)):
        rows = [r for r in seg.source.header_rows(start) if len(r)]
        if rows and (start == 0 or int(rows[0]["position"][0]) == start):
            return max(int(r["last_offset"].max()) for r in rows)
    return None


def served_uploads(location: Location, found: list["TieredSegment"]) -> list[Segment]:
    """The uploads of a tiered partition that are read, by start offset,
    each with ``limit`` (one past the last offset it serves, None: all it
    holds), ``served_end`` (one past its last valid offset by its
    manifest) and ``notes``/``undecided`` (what the rule of
    ``kbatch.lib.uploads`` set aside, and overlaps it could not decide by
    leader epoch: warned of here)."""
    found = sorted(found, key=lambda s: (s.base_offset, s.segment_id))
    if not found:
        return []
    if len(found) == 1:       # nothing to resolve: no manifest is fetched
        described = [uploads.Upload(found[0].base_offset, None, None)]
    else:                     # one manifest GET each, a few at a time
        with ThreadPoolExecutor(max_workers=min(8, len(found))) as pool:
            described = list(pool.map(_upload, found))
    res = uploads.resolve(described)
    kept = [found[i] for i in res.kept]
    for seg, limit, i in zip(kept, res.limits, res.kept):
        # an upload that could not be described may hold any offset from its
        # start on: it takes part in every read from there (and raises its
        # error, kbatch.lib.plan), so no other upload's cut hides an offset
        seg.limit = None if seg.undescribed is not None else limit
        end = described[i].end
        seg.served_end = None if end is None else end + 1 if limit is None \
            else min(end + 1, limit)
    for i, holder in res.dropped:
        name = found[i].location.name
        if holder is None:
            kept[0].notes.append(f"{name} is not read: it holds no record of the "
                                 "leader-epoch chain (a diverged leader's upload)")
            continue
        found[holder].notes.append(f"{name} is not read: {found[holder].location.name} "
                                   "holds all its offsets")
        found[holder].shadowed.append(found[i])
    for i, at, why in res.diverged:
        (found[i] if i in res.kept else kept[0]).notes.append(
            f"{found[i].location.name}: not read from offset {at}: {why}")
    for text in res.undecided:
        kept[0].undecided.append(text)
        log.warning("%s: %s", location, text)
    return kept
