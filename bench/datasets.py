"""Benchmark segments, written by aiokafka's compiled batch builder.

The data is produced by an implementation independent of kbatch, cached under
``bench/.data/`` (git-ignored), and regenerated when this file's recipe
version changes. Run ``python bench/datasets.py`` to build them all.

    small      5 M records, keys 8-16 bytes, values 100 bytes, ~16 KB batches
    headers    the same with 2 headers per record
    gzip, snappy, lz4, zstd   the small records, compressed per batch
    large      values of 10 KB (60 k records, ~600 MB)
"""

from __future__ import annotations

import os
import pathlib
import random
import struct
import sys
import time

RECIPE = 2
DATA_DIR = pathlib.Path(__file__).resolve().parent / ".data"
BATCH_BYTES = 16 * 1024
BASE_TIMESTAMP = 1_700_000_000_000

DATASETS = {
    # name: (records, value_size, headers, codec)
    "small": (5_000_000, 100, 0, 0),
    "headers": (5_000_000, 100, 2, 0),
    "gzip": (5_000_000, 100, 0, 1),
    "snappy": (5_000_000, 100, 0, 2),
    "lz4": (5_000_000, 100, 0, 3),
    "zstd": (5_000_000, 100, 0, 4),
    "large": (60_000, 10 * 1024, 0, 0),
}


def _values(rng: random.Random, size: int, count: int) -> list[bytes]:
    """JSON-like values of exactly ``size`` bytes (compress about 2-3x)."""
    words = [b"user", b"order", b"click", b"view", b"cart", b"item", b"price",
             b"eur", b"usd", b"ok", b"fail", b"mobile", b"web"]
    out = []
    for i in range(count):
        body = b'{"id":%d,"kind":"%s","amount":%d.%02d,"tags":["%s","%s"],"note":"' % (
            rng.randrange(10**9), rng.choice(words), rng.randrange(10**4),
            rng.randrange(100), rng.choice(words), rng.choice(words))
        pad = size - len(body) - 2
        filler = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789 ")
                       for _ in range(min(pad, 64)))
        body += (filler * (pad // max(len(filler), 1) + 1))[:pad] + b'"}'
        out.append(body[:size])
    return out


def build(name: str) -> pathlib.Path:
    from aiokafka.record._crecords.default_records import DefaultRecordBatchBuilder

    count, value_size, n_headers, codec = DATASETS[name]
    path = DATA_DIR / f"{name}-v{RECIPE}.log"
    if path.exists():
        return path
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    rng = random.Random(42)
    pool = _values(rng, value_size, 4096)
    keys = [b"k%0*d" % (rng.randrange(7, 15), rng.randrange(10**6)) for _ in range(4096)]
    headers = [[("trace-id", b"%016x" % rng.getrandbits(64)), ("source", b"bench")]
               for _ in range(256)] if n_headers else [[]]
    tmp = path.with_suffix(".tmp")
    offset = 0
    t0 = time.time()
    with open(tmp, "wb") as out:
        while offset < count:
            builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, BATCH_BYTES)
            delta = 0
            while offset + delta < count:
                i = offset + delta
                meta = builder.append(delta, BASE_TIMESTAMP + i // 10 + rng.randrange(-5, 5),
                                      keys[i % 4096], pool[(i * 7) % 4096],
                                      headers[i % len(headers)])
                if meta is None:
                    break
                delta += 1
            batch = bytearray(builder.build())
            struct.pack_into(">q", batch, 0, offset)
            out.write(batch)
            offset += delta
    os.replace(tmp, path)
    print(f"built {path.name}: {path.stat().st_size / 1e6:.0f} MB in {time.time() - t0:.0f} s",
          file=sys.stderr)
    return path


def dataset_path(name: str) -> pathlib.Path:
    return build(name)


def read_back_from_disk(path: pathlib.Path) -> None:
    """Drop ``path`` from the page cache and read it back once with plain
    reads (no reader under test), as a segment from a backup or snapshot
    comes in: Linux 6.x caches it in large folios then, which a mapping
    takes 2 MiB at a time. A file as its writer left it (small appends) is
    cached in small folios, and mapping it costs a page-table entry per
    4 KiB page."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


if __name__ == "__main__":
    for name in (sys.argv[1:] or DATASETS):
        build(name)
