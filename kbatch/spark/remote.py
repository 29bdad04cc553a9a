"""The Spark source's remote paths: planned on the driver from listings and
index objects only, read by the executors from their own ranges.

    driver:    RemoteLog listing (+ manifests: tiered) + offset-index objects
               -> RemoteSlice(object, [start, stop) bytes, [lo, hi) offsets)
    executor:  RangeSource / TieredSource of that object -> scan -> Arrow

No byte of a segment passes through the driver: a slice's byte range comes
from the offset index (batch starts), so large segments are split at index
entries into about ``maxPartitionBytes`` each. Tiered uploads of the same
offsets twice are resolved on the driver from the manifests' offset ranges
(each slice's ``lo`` starts after the previous segment's end offset).

Options (``.option(...)``): ``storage.<key>`` for the filesystem's
storage options (``storage.endpoint_url``, ``storage.key``,
``storage.client_kwargs`` as JSON, ...), ``layout`` (``plain`` or
``tiered``), ``privateKey`` (PEM text or a path the executors can read).
"""

from __future__ import annotations

import json

import numpy as np

from kbatch.lib.remote import tiered
from kbatch.lib.remote.fs import RangeSource, is_url, resolve
from kbatch.lib.remote.log import RemoteLog, RemoteLogDir, live_entries
from kbatch.lib.remote.scan import scan

_END = (1 << 63) - 1


def storage_options(options: dict) -> dict:
    """``storage.*`` Spark options (lower-cased keys as Spark gives them:
    ``storage.endpoint_url``) as fsspec storage options; JSON values
    (objects, numbers, booleans) are decoded."""
    out = {}
    for key, value in options.items():
        if key.lower().startswith("storage."):
            name = key.split(".", 1)[1]
            if isinstance(value, str) and value[:1] in "{[" or value in ("true", "false"):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            out[name] = value
    return out


class RemoteSlice:
    """One object's bytes ``[start, stop)`` and offsets ``[lo, hi)``:
    everything an executor needs to read it (picklable: no filesystem)."""

    def __init__(self, log_url, layout, storage, private_key, segment, start, stop, lo, hi,
                 topic, partition, object_url, object_size, manifest, committed=False):
        self.log_url, self.layout, self.storage = log_url, layout, storage
        self.private_key = private_key
        self.segment = segment        # base offset of the segment in its log
        # the object and (tiered) its manifest: the executor lists nothing
        self.object_url, self.object_size, self.manifest = object_url, object_size, manifest
        self.start, self.stop, self.lo, self.hi = start, stop, lo, hi
        self.topic, self.partition = topic, partition
        # read_committed: the whole partition [lo, hi), read by one executor
        self.committed = committed

    def __repr__(self) -> str:
        return (f"RemoteSlice({self.log_url} segment {self.segment} "
                f"[{self.start}, {self.stop}) offsets [{self.lo}, {self.hi}))")

    def size(self) -> int:
        return max(self.stop - self.start, 0)


def remote_logs(path: str, layout: str, storage: dict, private_key) -> list[RemoteLog]:
    """The partitions a URL names: a partition prefix (it holds segments)
    or a prefix of partitions."""
    log = RemoteLog(path, layout=layout, storage_options=storage, private_key=private_key)
    if log.segments:
        return [log]
    return RemoteLogDir(path, layout=layout, storage_options=storage,
                        private_key=private_key).partitions


def plan_remote(path: str, *, layout: str, storage: dict, private_key, offset_range,
                max_bytes: int, isolation: str, topics=None, partitions=None,
                starting_timestamp=None, ending_timestamp=None) -> list:
    """Slices of every partition under ``path`` (runs on the driver; reads
    listings, manifests and offset indexes only; a timestamp bound also
    reads the time indexes and the ranges ``RemoteLog.offset_for_timestamp``
    needs to find its offset)."""
    slices = []
    for log in remote_logs(path, layout, storage, private_key):
        if topics is not None and log.topic not in topics:
            continue
        if partitions is not None and log.partition not in partitions:
            continue
        lo, hi = offset_range(log.topic, log.partition)
        if starting_timestamp is not None:
            found = log.offset_for_timestamp(starting_timestamp)
            lo = hi if found is None else max(lo, found)
        if ending_timestamp is not None:
            found = log.offset_for_timestamp(ending_timestamp)
            hi = hi if found is None else min(hi, found)
        if lo >= hi:
            continue
        if isolation == "read_committed":
            # the partition's transactions come from its bytes, which the
            # driver never reads: one slice per partition, whose executor
            # resolves them (a pass storing offsets only) and then reads
            sizes = [seg.object_size or 0 for seg in log.segments]
            slices.append(RemoteSlice(log.url, layout, storage, private_key, None, 0,
                                      sum(sizes), lo, hi, log.topic, log.partition, None,
                                      None, None, committed=True))
            continue
        done = -1
        for i in log._segments_for(lo, hi):
            seg = log.segments[i]
            seg_lo = max(lo, done + 1)
            if seg.end_offset is not None:
                done = max(done, seg.end_offset)
                if seg_lo > seg.end_offset:
                    continue
            size = seg.source().size
            cuts = _cuts(seg, size, seg_lo, hi, max_bytes)
            for a, b in zip(cuts, cuts[1:]):
                slices.append(RemoteSlice(log.url, layout, storage, private_key,
                                          seg.base_offset, a, b, seg_lo, hi, log.topic,
                                          log.partition, seg.url, seg.object_size,
                                          seg.manifest_raw))
    return slices


def _cuts(seg, size: int, lo: int, hi: int, max_bytes: int) -> list[int]:
    """Byte positions splitting the segment's range for ``[lo, hi)`` at
    offset-index entries (batch starts), about ``max_bytes`` apart."""
    raw = seg.read_offset_index()
    entries = live_entries(raw)
    if not len(entries):
        return [0, size]
    rel = entries["relative_offset"].astype(np.int64) + seg.base_offset
    pos = entries["position"].astype(np.int64)
    if np.any(np.diff(rel) <= 0) or np.any(np.diff(pos) <= 0) or pos[-1] >= size:
        return [0, size]
    start, stop = 0, size
    i = int(np.searchsorted(rel, lo, side="right")) - 1
    if i >= 0:
        start = int(pos[i])
    if hi < _END:
        j = int(np.searchsorted(rel, hi - 1, side="left"))
        if j + 1 < len(pos):
            stop = int(pos[j + 1])
    cuts = [start]
    for p in pos[(pos > start) & (pos < stop)]:
        if p - cuts[-1] >= max_bytes:
            cuts.append(int(p))
    return cuts + [stop]


def slice_source(piece: RemoteSlice):
    """The object's ``RangeSource`` (plain) or ``TieredSource`` (tiered),
    from what the slice carries: no listing, no manifest request."""
    fs, path, url = resolve(piece.object_url, piece.storage)
    raw = RangeSource(fs, path, url=piece.object_url, size=piece.object_size)
    if piece.manifest is None:
        return raw
    murl = tiered.manifest_url(piece.object_url)
    manifest = tiered.parse_manifest(piece.manifest, murl)
    key = (tiered.unwrap_data_key(manifest, tiered.load_private_keys(piece.private_key), murl)
           if manifest.encrypted else None)
    return tiered.TieredSource(raw, manifest, tiered.Detransform(manifest, key, url))


def read_remote_slice(piece: RemoteSlice, opts, chunk_records: int):
    """Records of one slice (runs on an executor): only its own ranges. A
    read_committed slice is its whole partition: the executor lists it,
    resolves its transactions from a first pass (offsets only: the bytes
    are fetched twice) and reads ``[lo, hi)``, aborted and open
    transactions left out."""
    if piece.committed:
        log = RemoteLog(piece.log_url, layout=piece.layout, storage_options=piece.storage,
                        private_key=piece.private_key, topic=piece.topic,
                        partition=piece.partition)
        yield from log.chunks(piece.lo, piece.hi, opts, isolation="read_committed",
                              chunk_records=chunk_records, chunk_bytes=64 << 20)
        return
    for chunk in scan(slice_source(piece), opts, start=piece.start, stop=piece.stop,
                      chunk_records=chunk_records, chunk_bytes=64 << 20):
        chunk = chunk.select_offsets(piece.lo, piece.hi)
        if len(chunk):
            yield chunk


__all__ = ["RemoteSlice", "is_url", "plan_remote", "read_remote_slice",
           "storage_options"]
