"""Kafka data in object storage: any fsspec URL, and tiered-storage buckets.

    fs.py       URL / filesystem resolution, RangeSource (bounded range reads)
    scan.py     decoding a remote segment from whole-batch-aligned ranges
    tiered.py   the tiered-storage plugin's layout (manifest, chunks, keys)
    log.py      partitions and directories of both layouts: RemoteLog
"""

from kbatch.lib.remote.fs import RangeSource, RemoteError, is_url, resolve

__all__ = ["RangeSource", "RemoteError", "is_url", "resolve"]
