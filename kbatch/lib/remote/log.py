"""Partitions in object storage: the plain layout (a copied broker
directory: ``<topic>-<partition>/<base offset>.log`` beside its ``.index``)
and the tiered-storage layout (``kbatch.lib.remote.tiered``).

``RemoteLog.read``/``iter`` plan from the listing and the index objects
only: a read from an offset fetches that segment's offset index (one GET,
checked: the batch it points at must start there and end at the entry's
offset, else the segment is read from its start), then the bytes from that
batch on; a full scan reads every segment once, in ranges. Nothing but
listings and index objects is read before decoding starts.

Tiered buckets: a segment uploaded twice (same offsets, another UUID, after
a leader change) gives each offset once: segments are read in start-offset
order and records at or below the last offset already returned are left
out. Of several uploads with the same start offset, the one whose manifest
names the latest ``eventTimestampMs`` is read.
"""

from __future__ import annotations

import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from kbatch.errors import ArgumentError, CorruptRecordError
from kbatch.lib.index import OFFSET_ENTRY, TIME_ENTRY, TxnIndex
from kbatch.lib.records import Records
from kbatch.lib.remote import tiered
from kbatch.lib.remote.fs import (DEFAULT_BLOCK, DEFAULT_CONCURRENCY, RangeSource, RemoteError,
                                  resolve)
from kbatch.lib.remote.scan import batches_and_control, offsets_only, scan
from kbatch.lib.segment import DecodeOptions, check_options
from kbatch.wire import UNBOUNDED as _WHOLE
from kbatch.lib.timestamps import to_millis
from kbatch.lib.txn import TxnState, check_isolation

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
TIERED_DIR = re.compile(r"^(.+)-([A-Za-z0-9_-]{22})$")
LAYOUTS = ("plain", "tiered")


@dataclass
class RemoteSegment:
    """One segment: where its bytes come from and how to find its index."""

    base_offset: int
    url: str
    open_source: object                  # () -> RangeSource | TieredSource
    read_offset_index: object            # () -> bytes (b"" when none)
    end_offset: int | None = None        # last offset, when known (tiered manifest)
    object_size: int | None = None       # of the stored object (from the listing)
    read_time_index: object = None       # () -> bytes of the .timeindex (b"": none)
    read_txn_index: object = None        # () -> bytes of the .txnindex (b"": none)
    manifest_raw: bytes | None = field(default=None, repr=False)   # tiered
    _source: object = field(default=None, repr=False)

    def source(self):
        if self._source is None:
            self._source = self.open_source()
        return self._source


def live_entries(raw: bytes) -> np.ndarray:
    """The live entries of an offset index (up to the first all-zero one
    after the first: preallocated space)."""
    n = len(raw) // OFFSET_ENTRY.itemsize
    entries = np.frombuffer(raw, OFFSET_ENTRY, count=n)
    zero = np.flatnonzero((entries["relative_offset"] == 0) & (entries["position"] == 0))
    zero = zero[zero > 0]
    return entries[:int(zero[0])] if len(zero) else entries


def seek_position(raw_index: bytes, base_offset: int, target: int, size: int,
                  end: int | None = None):
    """``(position, expected last offset, stop)`` from an offset index:
    the last entry at or before ``target`` (its batch starts there and ends
    at that offset), and ``stop``: a position by which every offset below
    ``end`` has been read (the start of the batch after the first entry
    at or past ``end - 1``; the object's size when none). None when the
    index has no usable entry (entries out of order or outside the object:
    read from the start)."""
    entries = live_entries(raw_index)
    if not len(entries):
        return None
    rel = entries["relative_offset"].astype(np.int64)
    pos = entries["position"].astype(np.int64)
    if (np.any(np.diff(rel) <= 0) or np.any(np.diff(pos) <= 0) or rel[0] < 0 or pos[0] < 0
            or pos[-1] >= size):
        return None       # damaged index: fall back to the walk from the start
    absolute = rel + base_offset
    i = int(np.searchsorted(absolute, target, side="right")) - 1
    if i < 0:
        return None
    stop = size
    if end is not None:
        j = int(np.searchsorted(absolute, end - 1, side="left"))
        if j + 1 < len(pos):
            stop = int(pos[j + 1])
    return int(pos[i]), int(absolute[i]), stop


def _uuid_text(value) -> str | None:
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


def segment_states(metadata) -> dict | None:
    """``{segment uuid: last state}`` from ``remote_log_metadata`` rows (a
    pyarrow table or list of dicts with ``segment_id`` and ``state``, in
    record order) or a mapping; None when not given."""
    if metadata is None:
        return None
    if isinstance(metadata, dict):
        return {_uuid_text(k): v for k, v in metadata.items()}
    rows = metadata.to_pylist() if hasattr(metadata, "to_pylist") else list(metadata)
    states = {}
    for row in rows:
        if row.get("segment_id") is not None:
            states[_uuid_text(row["segment_id"])] = row.get("state")
    return states


class RemoteLog:
    """A partition in object storage (see the module docstring).

    ``url``: the partition's prefix (``s3://bucket/data/orders-0`` or, for
    ``layout="tiered"``, ``s3://bucket/prefix/orders-<topicId>/0``).
    ``storage_options`` / ``filesystem``: see ``kbatch.lib.remote.fs.resolve``.
    ``private_key``: the RSA private key (PEM, path, or ``{key id: key}``)
    for encrypted tiered segments. ``block``/``concurrency``: range size and
    GETs in flight of a scan (memory: about ``block * concurrency``).
    ``remote_log_metadata`` (tiered): the partition's segment states, as
    ``kbatch.internal.remote.remote_log_metadata(...)`` returns them (or
    ``{segment uuid: state}``): only segments whose last state is
    ``COPY_SEGMENT_FINISHED`` are read (not started, failed or deleted ones).
    ``use_index=False``: the exact header walk: a read from an offset or a
    timestamp walks each segment from its start (no index object is read;
    it costs reading the segment up to the offset).
    """

    def __init__(self, url, *, layout: str = "plain", storage_options: dict | None = None,
                 filesystem=None, private_key=None, block: int = DEFAULT_BLOCK,
                 concurrency: int = DEFAULT_CONCURRENCY, retries: int = 5,
                 topic: str | None = None, partition: int | None = None,
                 remote_log_metadata=None, use_index: bool = True):
        if layout not in LAYOUTS:
            raise ArgumentError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        self.fs, self.path, self.url = resolve(url, storage_options, filesystem)
        self.path = self.path.rstrip("/")
        self.layout = layout
        self.block, self.concurrency, self.retries = block, concurrency, retries
        self.use_index = bool(use_index)
        self._keys = tiered.load_private_keys(private_key)
        name = posixpath.basename(self.path)
        parent = posixpath.basename(posixpath.dirname(self.path))
        if layout == "plain":
            m = PARTITION_DIR.match(name)
            self.topic = topic or (m.group(1) if m else name)
            self.partition = partition if partition is not None else (
                int(m.group(2)) if m else -1)
        else:
            m = TIERED_DIR.match(parent)
            self.topic = topic or (m.group(1) if m else parent)
            self.partition = partition if partition is not None else (
                int(name) if name.isdigit() else -1)
        self._states = segment_states(remote_log_metadata)
        self._segments = None

    def __repr__(self) -> str:
        return f"RemoteLog({self.url!r}, layout={self.layout!r})"

    def _source(self, path, size=None) -> RangeSource:
        return RangeSource(self.fs, path, url=self._url_of(path), size=size, block=self.block,
                           concurrency=self.concurrency, retries=self.retries)

    def _url_of(self, path: str) -> str:
        return self.url + path[len(self.path):] if path.startswith(self.path) else path

    def _listing(self) -> dict:
        try:
            items = self.fs.ls(self.path, detail=True)
        except FileNotFoundError:
            raise RemoteError("no such partition prefix", url=self.url) from None
        except Exception as exc:   # noqa: BLE001
            raise RemoteError(f"listing failed: {type(exc).__name__}: {exc}",
                              url=self.url) from None
        return {posixpath.basename(i["name"].rstrip("/")): i for i in items
                if i.get("type") != "directory"}

    @property
    def segments(self) -> list[RemoteSegment]:
        if self._segments is None:
            listing = self._listing()
            self._segments = (self._plain(listing) if self.layout == "plain"
                              else self._tiered(listing))
        return self._segments

    def _plain(self, listing: dict) -> list[RemoteSegment]:
        out = []
        for name, info in sorted(listing.items()):
            m = SEGMENT_NAME.match(name)
            if not m:
                continue
            path = posixpath.join(self.path, name)
            index = listing.get(name[:-4] + ".index")
            size = int(info["size"])

            def index_reader(index=index):
                return self._live_index(index, OFFSET_ENTRY.itemsize)
            tindex = listing.get(name[:-4] + ".timeindex")

            def time_reader(tindex=tindex):
                return self._live_index(tindex, TIME_ENTRY.itemsize)
            txn = listing.get(name[:-4] + ".txnindex")

            def txn_reader(txn=txn):
                if txn is None or not txn.get("size"):
                    return b""
                src = self._source(txn["name"], int(txn["size"]))
                return src.read(0, src.size)
            out.append(RemoteSegment(int(m.group(1)), self._url_of(path),
                                     lambda p=path, s=size: self._source(p, s), index_reader,
                                     object_size=size, read_time_index=time_reader,
                                     read_txn_index=txn_reader))
        return out

    INDEX_PIECE = 1 << 20

    def _live_index(self, info, item: int) -> bytes:
        """An offset or time index object up to its first all-zero entry
        after the first (an active segment's index is preallocated, 10 MiB
        by default, and copied as it is): read in 1 MiB ranges, stopping at
        the piece that holds that entry."""
        if info is None or not info.get("size"):
            return b""
        src = self._source(info["name"], int(info["size"]))
        parts, pos, step = [], 0, (self.INDEX_PIECE // item) * item
        while pos < src.size:
            piece = src.read(pos, min(src.size, pos + step))
            parts.append(piece)
            pos += len(piece)
            n = len(piece) // item
            rows = np.frombuffer(piece, np.uint8, count=n * item).reshape(n, item)
            zero = np.flatnonzero(~rows.any(axis=1))
            if len(zero) and (pos - len(piece) > 0 or zero[-1] > 0):
                break        # preallocated space from here on
        return b"".join(parts)

    def _tiered(self, listing: dict) -> list[RemoteSegment]:
        by_start: dict[int, list] = {}
        for name in listing:
            m = tiered.OBJECT_NAME.match(name)
            if m and m.group(3) == "rsm-manifest":
                if self._states is not None and \
                        self._states.get(m.group(2)) != "COPY_SEGMENT_FINISHED":
                    continue    # not (or no longer) a finished copy: never read
                by_start.setdefault(int(m.group(1)), []).append(name[:-len(".rsm-manifest")])
        out = []
        for start in sorted(by_start):
            loaded = [self._load_tiered(stem, listing) for stem in sorted(by_start[start])]
            seg = max(loaded, key=lambda s: s[1].metadata.get("eventTimestampMs", 0)
                      if isinstance(s[1].metadata.get("eventTimestampMs", 0), int) else 0)
            out.append(seg[0])
        return out

    def _load_tiered(self, stem: str, listing: dict):
        base = posixpath.join(self.path, stem)
        murl = self._url_of(base + ".rsm-manifest")
        msrc = self._source(base + ".rsm-manifest",
                            int(listing[stem + ".rsm-manifest"]["size"]))
        if msrc.size > (64 << 20):
            raise CorruptRecordError("manifest larger than 64 MiB", path=murl)
        manifest_raw = msrc.read(0, msrc.size)
        manifest = tiered.parse_manifest(manifest_raw, murl)
        if stem + ".log" not in listing:
            raise RemoteError("segment object missing (the manifest is there)",
                              url=self._url_of(base + ".log"))
        log_size = int(listing[stem + ".log"]["size"])
        idx_info = listing.get(stem + ".indexes")
        start = int(stem[:20])
        holder = {}

        def detransform():
            if "d" not in holder:
                key = (tiered.unwrap_data_key(manifest, self._keys, murl)
                       if manifest.encrypted else None)
                holder["d"] = tiered.Detransform(manifest, key, self._url_of(base + ".log"))
            return holder["d"]

        def open_source():
            raw = self._source(base + ".log", log_size)
            return tiered.TieredSource(raw, manifest, detransform())

        def index_reader():
            if idx_info is None:
                return b""
            raw = self._source(idx_info["name"], int(idx_info["size"]))
            return tiered.read_index(raw, manifest, detransform(), "offset")
        def time_reader():
            if idx_info is None:
                return b""
            raw = self._source(idx_info["name"], int(idx_info["size"]))
            return tiered.read_index(raw, manifest, detransform(), "timestamp")

        def txn_reader():
            if idx_info is None:
                return b""
            raw = self._source(idx_info["name"], int(idx_info["size"]))
            return tiered.read_index(raw, manifest, detransform(), "transaction")
        seg = RemoteSegment(start, self._url_of(base + ".log"), open_source, index_reader,
                            end_offset=manifest.end_offset, object_size=log_size,
                            manifest_raw=manifest_raw, read_time_index=time_reader,
                            read_txn_index=txn_reader)
        return seg, manifest

    # --- reads -----------------------------------------------------------

    def _segments_for(self, lo: int, hi: int) -> list[int]:
        segs = self.segments
        picked = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
            if seg.base_offset >= hi:
                break
            if nxt is not None and nxt <= lo and (seg.end_offset is None or seg.end_offset < lo):
                continue
            picked.append(i)
        return picked

    def offset_for_timestamp(self, timestamp, **options) -> int | None:
        """The earliest offset whose record timestamp is >= ``timestamp``
        (Kafka's offsets-for-times), None when no record is that recent.

        Per segment in order: its time index (one GET) names the last entry
        whose timestamp is below ``timestamp`` (every record up to that
        entry's offset is older), the scan starts at the batch the offset
        index names for it and stops at the first record that is recent
        enough."""
        timestamp = to_millis(timestamp, "timestamp")
        check_options("RemoteLog.offset_for_timestamp", options)
        opts = DecodeOptions(**options)
        for seg in self.segments:
            lo = seg.base_offset
            raw = (seg.read_time_index() if seg.read_time_index is not None and self.use_index
                   else b"")
            n = len(raw) // TIME_ENTRY.itemsize
            if n:
                entries = np.frombuffer(raw, TIME_ENTRY, count=n)
                ts = entries["timestamp"].astype(np.int64)
                rel = entries["relative_offset"].astype(np.int64)
                live = np.flatnonzero((ts == 0) & (rel == 0))
                live = live[live > 0]
                if len(live):
                    ts, rel = ts[:live[0]], rel[:live[0]]
                if len(ts) and np.all(np.diff(rel) >= 0) and rel[0] >= 0:
                    below = np.flatnonzero(ts < timestamp)
                    if len(below):
                        lo = seg.base_offset + int(rel[below[-1]])
            for chunk in self._segment_chunks(seg, lo, (1 << 63) - 1, opts, 1 << 16,
                                              32 << 20):
                hits = np.flatnonzero(chunk.timestamp >= timestamp)
                if len(hits):
                    return int(chunk.offset[hits[0]])
        return None

    def iter(self, start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None,
             chunk_records: int = 1 << 18, chunk_bytes: int = 32 << 20,
             isolation: str = "read_uncommitted", **options) -> Iterator[Records]:
        """Records with offsets in ``[start_offset, end_offset)``, chunk by
        chunk. Keeps in memory one chunk and the ranges in flight.
        ``isolation="read_committed"`` resolves transactions over the whole
        partition first: a pass over every segment that keeps one row per
        batch and the control records (offsets only decoded), then the
        chunks, each filtered as it comes."""
        check_isolation(isolation)
        check_options("RemoteLog.iter", options)
        opts = DecodeOptions(**options)
        lo = 0 if start_offset is None else int(start_offset)
        hi = (1 << 63) - 1 if end_offset is None else int(end_offset)
        if start_timestamp is not None:
            found = self.offset_for_timestamp(start_timestamp, **options)
            lo = hi if found is None else max(lo, found)
        if end_timestamp is not None:
            found = self.offset_for_timestamp(end_timestamp, **options)
            hi = hi if found is None else min(hi, found)
        if lo >= hi:
            return
        yield from self.chunks(lo, hi, opts, isolation=isolation,
                               chunk_records=chunk_records, chunk_bytes=chunk_bytes)

    def chunks(self, lo: int, hi: int, opts: DecodeOptions, *,
               isolation: str = "read_uncommitted", chunk_records: int = 1 << 18,
               chunk_bytes: int = 32 << 20) -> Iterator[Records]:
        """``iter`` over offsets ``[lo, hi)`` with options already checked
        (the Spark source's executors call it)."""
        if isolation == "read_committed":
            state = self._transaction_state(opts, chunk_records, chunk_bytes)
            for chunk in self._iter(lo, hi, opts, chunk_records, chunk_bytes):
                yield state.filter(chunk)
            return
        yield from self._iter(lo, hi, opts, chunk_records, chunk_bytes)

    def _transaction_state(self, opts, chunk_records, chunk_bytes) -> TxnState:
        return TxnState.build(*self._transaction_tables(opts, chunk_records, chunk_bytes))

    def transaction_tables(self, **options):
        """``(batches, control, txn_index)`` of the whole partition, as
        ``PartitionLog.transaction_tables`` gives them: every batch header
        and control record (a pass that decodes offsets only) and every
        ``.txnindex`` entry (plain: the ``.txnindex`` objects; tiered: the
        transaction index in ``.indexes``). Keeps one row per batch."""
        check_options("RemoteLog.transaction_tables", options)
        return self._transaction_tables(DecodeOptions(**options), 1 << 18, 32 << 20)

    def _transaction_tables(self, opts, chunk_records, chunk_bytes):
        """The partition's transactions from a first pass over every segment
        that stores only offsets (the record loop skims the rest): it keeps
        one row per batch and the control records, not the records; a
        read_committed read fetches the partition's bytes twice (this pass,
        then the read)."""
        batches, control = batches_and_control(
            self._iter(0, (1 << 63) - 1, offsets_only(opts), chunk_records, chunk_bytes))
        return batches, control, self.aborted_transactions()

    def aborted_transactions(self) -> TxnIndex:
        """Every transaction index entry of the partition, in segment order."""
        return TxnIndex.concat(TxnIndex.from_bytes(s.read_txn_index() if s.read_txn_index
                                                   else b"") for s in self.segments)

    def _iter(self, lo, hi, opts, chunk_records, chunk_bytes):
        done = -1    # the last offset returned: a re-upload's records are left out
        for i in self._segments_for(lo, hi):
            seg = self.segments[i]
            gen = self._segment_chunks(seg, lo, hi, opts, chunk_records, chunk_bytes)
            try:
                for chunk in gen:
                    part = chunk.select_offsets(max(lo, done + 1), hi)
                    if len(part.offset):
                        done = max(done, int(part.offset.max()))
                    if len(part) or len(part.control) or part.end is not None:
                        yield part
                    if len(chunk.batches) and int(chunk.batches.last_offset[-1]) >= hi - 1:
                        return      # every offset below hi is read: no further range
            finally:
                gen.close()

    def _segment_chunks(self, seg, lo, hi, opts, chunk_records, chunk_bytes):
        """The segment's chunks from the batch the offset index names for
        ``lo`` (when it checks out: that batch starts at the entry's
        position, decodes, and ends at the entry's offset), else from its
        start."""
        src = seg.source()
        found = None
        if lo > seg.base_offset and self.use_index:
            found = seek_position(seg.read_offset_index(), seg.base_offset, lo, src.size,
                                  None if hi >= (1 << 63) - 1 else hi)
        if found is not None:
            # the first range: from the batch holding lo to the one past hi
            # (one GET when the index is dense enough), then scan blocks
            start, expect, stop = found
            gen = scan(src, opts, start=start, chunk_records=chunk_records,
                       chunk_bytes=chunk_bytes, first=max(stop - start, 1 << 12))
            try:
                first = next(gen, None)
            except CorruptRecordError:
                first = None
            if (first is not None and len(first.batches)
                    and int(first.batches.position[0]) == start
                    and int(first.batches.last_offset[0]) == expect):
                yield first
                del first
                yield from gen
                return
            gen.close()    # the index entry is wrong: read the segment from its start
        yield from scan(src, opts, chunk_records=chunk_records, chunk_bytes=chunk_bytes)

    def read(self, start_offset: int | None = None, end_offset: int | None = None, *,
             start_timestamp=None, end_timestamp=None, **options) -> Records:
        """Everything ``iter`` returns, as one ``Records``."""
        parts = list(self.iter(start_offset, end_offset, start_timestamp=start_timestamp,
                               end_timestamp=end_timestamp, chunk_records=_WHOLE,
                               chunk_bytes=1 << 30, **options))
        return Records.concat(parts) if parts else Records.empty()


class RemoteLogDir:
    """A prefix holding partitions: ``<topic>-<partition>/`` (plain) or
    ``<topic>-<topicId>/<partition>/`` (tiered)."""

    def __init__(self, url, *, layout: str = "plain", **kwargs):
        if layout not in LAYOUTS:
            raise ArgumentError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        self.fs, self.path, self.url = resolve(url, kwargs.pop("storage_options", None),
                                               kwargs.pop("filesystem", None))
        self.path = self.path.rstrip("/")
        self.layout = layout
        self.kwargs = kwargs
        self._partitions = None

    def _ls_dirs(self, path):
        try:
            items = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            raise RemoteError("no such prefix", url=self.url) from None
        return sorted(posixpath.basename(i["name"].rstrip("/")) for i in items
                      if i.get("type") == "directory")

    @property
    def partitions(self) -> list[RemoteLog]:
        if self._partitions is None:
            out = []
            for name in self._ls_dirs(self.path):
                if self.layout == "plain":
                    if PARTITION_DIR.match(name):
                        out.append(self._log(name))
                elif TIERED_DIR.match(name):
                    for part in self._ls_dirs(posixpath.join(self.path, name)):
                        if part.isdigit():
                            out.append(self._log(f"{name}/{part}"))
            self._partitions = sorted(out, key=lambda p: (p.topic, p.partition))
        return self._partitions

    def _log(self, rel: str) -> RemoteLog:
        return RemoteLog(posixpath.join(self.path, rel), layout=self.layout,
                         filesystem=self.fs, **self.kwargs)

    def partition(self, topic: str, partition: int) -> RemoteLog:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise ArgumentError(f"{self.url}: no partition {topic}-{partition}")

    def select(self, topics=None) -> list[RemoteLog]:
        """The partitions of ``topics`` (a name or a list; None: all); an
        unknown topic raises ``ArgumentError`` naming the ones there are."""
        if topics is None:
            return list(self.partitions)
        wanted = [topics] if isinstance(topics, str) else list(topics)
        known = {p.topic for p in self.partitions}
        missing = [t for t in wanted if t not in known]
        if missing:
            raise ArgumentError(f"{self.url}: no topic {', '.join(map(repr, missing))} here; "
                                f"topics: {', '.join(sorted(known)) or '(none)'}")
        return [p for p in self.partitions if p.topic in set(wanted)]

    def iter(self, topics=None, start_offset: int | None = None,
             end_offset: int | None = None, **options):
        """``((topic, partition), chunk)`` for every chunk of every selected
        partition in turn (the arguments of ``RemoteLog.iter``). Keeps in
        memory one chunk and the ranges in flight."""
        for p in self.select(topics):
            for chunk in p.iter(start_offset, end_offset, **options):
                yield (p.topic, p.partition), chunk

    def read(self, topics=None, start_offset: int | None = None,
             end_offset: int | None = None, *, threads: int | None = None,
             **options) -> dict:
        """Every selected partition as ``{(topic, partition): Records}``, as
        ``open_log_dir(...).read`` gives for a local directory (the arguments
        of ``RemoteLog.read``), ``threads`` partitions at a time (default:
        one per core; each also keeps its own ranges in flight). Keeps in
        memory the decoded partitions."""
        parts = self.select(topics)

        def read_part(p):
            return p.read(start_offset, end_offset, **options)

        workers = max(1, min(threads or os.cpu_count() or 1, len(parts) or 1))
        if workers == 1:
            return {(p.topic, p.partition): read_part(p) for p in parts}
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return {(p.topic, p.partition): rec
                    for p, rec in zip(parts, pool.map(read_part, parts))}


# the keyword arguments of RemoteLog / RemoteLogDir (the rest are decode options)
REMOTE_LOG_KEYS = ("storage_options", "filesystem", "layout", "private_key", "block",
                   "concurrency", "retries", "remote_log_metadata")


def split_remote_keys(options: dict) -> tuple[dict, dict]:
    """``(RemoteLog keyword arguments, the rest)`` of ``options``."""
    remote = {k: options[k] for k in REMOTE_LOG_KEYS if k in options}
    return remote, {k: v for k, v in options.items() if k not in REMOTE_LOG_KEYS}


def remote_target(url, **remote) -> tuple[str, object]:
    """What a URL names, from listings only: ``("segment", (RemoteLog,
    RemoteSegment))`` for a ``.log`` object (read with its siblings: its
    partition's other segments are not read), ``("partition", RemoteLog)``
    for a prefix holding segments, else ``("dir", RemoteLogDir)``; a prefix
    that holds no partition raises ``RemoteError``."""
    text = str(url).rstrip("/")
    if text.endswith(".log"):
        parent, name = text.rsplit("/", 1)
        log = RemoteLog(parent, **remote)
        for seg in log.segments:
            if seg.url.rstrip("/").endswith("/" + name):
                return "segment", (log, seg)
        raise RemoteError("no such segment object (or not a segment of its prefix's "
                          f"{log.layout} layout)", url=text)
    log = RemoteLog(text, **remote)
    try:
        if log.segments:
            return "partition", log
    except RemoteError:
        pass
    logs = RemoteLogDir(text, **remote)
    if not logs.partitions:
        raise RemoteError(f"no partition ({remote.get('layout', 'plain')} layout) and no "
                          "segment under this prefix", url=text)
    return "dir", logs
