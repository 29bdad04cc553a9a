"""Layouts for the parity battery (tests/test_parity.py): the same bytes read
from a local directory, through ``memory://`` and through a local S3 server
must give the same answer.

Everything here is test-side input building: partitions written with
``kbatch.LogWriter`` and then damaged byte by byte, index files made to lie,
odd directory names. Nothing here reads through kbatch (the truth of a
parity test is the local read of the same bytes, made in the test).

    build_all(root)    every layout below ``root`` (one directory per layout)
    Sites              where the same tree lives: local, memory://, s3://
    norm(x, site)      the one location-replacement normalisation
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import kbatch

T0 = 1_700_000_000_000          # the first record's timestamp; record i: T0 + 1000 * i
N = 240                         # records of a standard partition
ROOT = "<ROOT>"                 # what every spelling of a layout root becomes

# --- records and partitions ----------------------------------------------------------------


def rows(n: int, seed: int = 0, *, t0: int = T0) -> list[dict]:
    """Deterministic records: keys (some null), values of mixed size (some
    null), headers on every third record, timestamps T0 + 1000 * i."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        value = None if i % 41 == 7 else b"v%05d-" % i + rng.bytes(int(rng.integers(10, 90)))
        key = None if i % 13 == 3 else b"k%d" % (i % 17)
        headers = [("h", b"%d" % i), ("e", b"")] if i % 3 == 0 else []
        out.append({"key": key, "value": value, "timestamp": t0 + 1000 * i,
                    "headers": headers})
    return out


def write_partition(path: Path, n: int = N, *, seed: int = 0, codec: str = "none",
                    segment_bytes: int = 3000, batch_records: int = 5,
                    base_offset: int = 0, index_interval_bytes: int = 200,
                    preallocate: bool = False) -> list[Path]:
    """A partition of ``n`` records in several segments (small
    ``segment_bytes``), dense index entries; returns its segment files."""
    with kbatch.LogWriter(path, codec=codec, segment_bytes=segment_bytes,
                          batch_records=batch_records, base_offset=base_offset,
                          index_interval_bytes=index_interval_bytes,
                          preallocate_indexes=preallocate) as w:
        w.append(rows(n, seed))
    return segments(path)


def segments(path: Path) -> list[Path]:
    return sorted(p for p in Path(path).iterdir()
                  if p.name.endswith(".log") and len(p.name) == 24)


def batch_starts(data: bytes) -> list[int]:
    """Byte position of every batch, from the length fields."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(pos)
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if length <= 0:
            break
        pos += 12 + length
    return out


# --- damage -------------------------------------------------------------------------------

DAMAGE_KINDS = ("flip", "cut", "zeros", "length")
DAMAGE_WHERE = ("first", "inner", "last")


def damage(data: bytes, kind: str) -> bytes:
    """One kind of damage at the third batch of a segment's bytes (a batch
    that another follows), or at its end."""
    b = bytearray(data)
    starts = batch_starts(data)
    at = starts[max(0, min(2, len(starts) - 2))]     # a batch with another after it
    if kind == "flip":                      # inside the records: a CRC mismatch
        b[at + 70] ^= 0x10
    elif kind == "cut":                     # the file ends inside a batch
        del b[at + 30:]
    elif kind == "zeros":                   # zero padding after the last batch
        b += bytes(300)
    elif kind == "length":                  # a length field that runs past the file
        struct.pack_into(">i", b, at + 8, 1 << 24)
    else:
        raise ValueError(kind)
    return bytes(b)


DAMAGED_N = 165                 # records of a damaged partition: 5 segments, the last 4 batches


def damaged_partition(path: Path, kind: str, where: str, seed: int = 3) -> Path:
    segs = write_partition(path, DAMAGED_N, seed=seed)
    victim = {"first": segs[0], "inner": segs[len(segs) // 2], "last": segs[-1]}[where]
    victim.write_bytes(damage(victim.read_bytes(), kind))
    return victim


# --- lying index files -------------------------------------------------------------------

def _rewrite(path: Path, fn) -> None:
    path.write_bytes(fn(path.read_bytes()))


def _entries(raw: bytes, size: int) -> int:
    return len(raw) // size


def index_wrong(raw: bytes) -> bytes:
    """Every offset-index entry names the position of the next entry (a
    real batch start, but of a later batch: a seek there would miss
    records); the last one names the first's."""
    n = _entries(raw, 8)
    out = bytearray(raw)
    positions = [struct.unpack_from(">i", raw, 8 * i + 4)[0] for i in range(n)]
    for i in range(n):
        struct.pack_into(">i", out, 8 * i + 4, positions[(i + 1) % n])
    return bytes(out)


def index_inside(raw: bytes) -> bytes:
    """Every offset-index entry points 61 bytes into its batch (inside a record)."""
    out = bytearray(raw)
    for i in range(_entries(raw, 8)):
        pos = struct.unpack_from(">i", raw, 8 * i + 4)[0]
        struct.pack_into(">i", out, 8 * i + 4, pos + 61)
    return bytes(out)


def index_reversed(raw: bytes) -> bytes:
    """The offset-index entries in reverse order (out of order)."""
    n = _entries(raw, 8)
    return b"".join(raw[8 * i:8 * i + 8] for i in reversed(range(n)))


def index_past_end(raw: bytes) -> bytes:
    """Entries whose positions lie past the end of the segment."""
    out = bytearray(raw)
    for i in range(_entries(raw, 8)):
        struct.pack_into(">i", out, 8 * i + 4, (1 << 30) + i)
    return bytes(out)


def timeindex_lies(raw: bytes) -> bytes:
    """Time-index entries in order but far too old (every entry claims its
    batch is older than any record: a seek trusting them starts at the last
    entry and misses records); the relative offsets stay."""
    n = _entries(raw, 12)
    out = bytearray(raw)
    for i in range(n):
        struct.pack_into(">q", out, 12 * i, T0 - 100_000 + i)
    return bytes(out)


def timeindex_backwards(raw: bytes) -> bytes:
    """Time-index entries whose timestamps go backwards and are far off."""
    n = _entries(raw, 12)
    out = bytearray(raw)
    for i in range(n):
        struct.pack_into(">q", out, 12 * i, T0 + 10_000_000 - 7_777 * i)
    return bytes(out)


def timeindex_wrong_offsets(raw: bytes) -> bytes:
    """Time-index entries naming the wrong offsets (each one's relative
    offset + 2, timestamps kept: they no longer match their batches)."""
    out = bytearray(raw)
    for i in range(_entries(raw, 12)):
        rel = struct.unpack_from(">i", raw, 12 * i + 8)[0]
        struct.pack_into(">i", out, 12 * i + 8, rel + 2)
    return bytes(out)


PREALLOC = 3 << 19      # 1.5 MiB: a zero tail longer than one 1 MiB index piece


def zero_tail(raw: bytes) -> bytes:
    """A preallocated index: its live entries, then zeros."""
    return raw + bytes(max(0, PREALLOC - len(raw)))


LYING = {
    # name: {suffix: rewrite}
    "idx.wrong": {".index": index_wrong},
    "idx.inside": {".index": index_inside},
    "idx.reversed": {".index": index_reversed},
    "idx.pastend": {".index": index_past_end},
    "tidx.lies": {".timeindex": timeindex_lies},
    "tidx.backwards": {".timeindex": timeindex_backwards},
    "tidx.offsets": {".timeindex": timeindex_wrong_offsets},
    "prealloc": {".index": zero_tail, ".timeindex": zero_tail},
}


def lying_partition(path: Path, rewrites: dict, seed: int = 5) -> None:
    segs = write_partition(path, seed=seed)
    for seg in segs:
        for suffix, fn in rewrites.items():
            if fn is zero_tail and seg != segs[-1]:
                continue        # preallocated: the active (last) segment's indexes
            side = seg.with_suffix(suffix)
            if side.exists():
                _rewrite(side, fn)


# --- transactions -------------------------------------------------------------------------

def txn_partition(path: Path) -> None:
    """Committed, aborted and (at the end) open transactions of two
    producers across several segments, interleaved with plain records."""
    with kbatch.LogWriter(path, segment_bytes=1500, batch_records=4,
                          index_interval_bytes=200, preallocate_indexes=False) as w:
        outcomes = [True, False, True, None, False, True, True, False]
        for i, commit in enumerate(outcomes):
            pid = 7 if i % 2 == 0 else 9
            w.append([{"key": b"t%d" % i, "value": b"txn%d-%d" % (i, j),
                       "timestamp": T0 + 10 * i, "headers": []} for j in range(5)],
                     producer_id=pid, transactional=True)
            w.append([{"key": None, "value": b"plain%d" % i, "timestamp": T0 + 10 * i + 1,
                       "headers": []}])
            if commit is not None:
                w.end_transaction(pid, commit=commit, timestamp=T0 + 10 * i + 2)
        # producer 11 leaves one open at the end (a hanging transaction)
        w.append([{"key": b"open", "value": b"open%d" % j, "timestamp": T0 + 500,
                   "headers": []} for j in range(3)], producer_id=11, transactional=True)
        w.append([{"key": None, "value": b"after-open", "timestamp": T0 + 501,
                   "headers": []}])


# --- the whole tree ----------------------------------------------------------------------

CODECS = {"orders-0": "none", "orders-1": "lz4", "pay.v1-events-2": "zstd",
          "logs-0": "gzip", "snap-0": "snappy"}
BIG_NAME = "99999999999999999999.log"        # a segment name above int64
NON_ASCII_DIR = "t-\u0661"                    # ARABIC-INDIC DIGIT ONE: not a partition
EMPTY_BASE = 100


def build_all(root: Path) -> dict[str, Path]:
    """Every layout under ``root``; returns ``{layout: its directory}``.

    healthy/   a data directory: partitions in five codecs, several segments each
    damaged/   a data directory: ``<kind>.<where>-0`` per damage kind and segment
    lying/     a data directory: partitions whose index files lie
    twins/     a data directory with ``t-1`` and ``t-01`` (one partition twice)
    odd/       a topic with dots and dashes, ``t-١`` (not a partition), a
               segment-like file above int64 in ``big-0``
    empty/     ``e-0`` holding only an empty segment at base offset 100, beside ``g-0``
    txn/       ``tx-0``: committed, aborted and open transactions
    emptydir/  an empty directory
    tiersrc/   copies of the partitions the tiered buckets are made of
    """
    root = Path(root)
    out = {}
    healthy = root / "healthy"
    for i, (name, codec) in enumerate(CODECS.items()):
        write_partition(healthy / name, seed=10 + i, codec=codec)
    out["healthy"] = healthy

    damaged = root / "damaged"
    for kind in DAMAGE_KINDS:
        for where in DAMAGE_WHERE:
            damaged_partition(damaged / f"{kind}.{where}-0", kind, where)
    out["damaged"] = damaged

    lying = root / "lying"
    for name, rewrites in LYING.items():
        lying_partition(lying / f"{name}-0", rewrites)
    out["lying"] = lying

    (root / "emptydir").mkdir()
    out["emptydir"] = root / "emptydir"

    twins = root / "twins"
    write_partition(twins / "t-1", n=20, seed=1)
    write_partition(twins / "t-01", n=20, seed=2)
    write_partition(twins / "u-0", n=20, seed=3)
    out["twins"] = twins

    odd = root / "odd"
    write_partition(odd / "my.topic-with-dashes-3", n=60, seed=4)
    write_partition(odd / NON_ASCII_DIR, n=30, seed=5)
    big = odd / "big-0"
    segs = write_partition(big, n=60, seed=6)
    (big / BIG_NAME).write_bytes(segs[0].read_bytes())
    out["odd"] = odd

    empty = root / "empty"
    (empty / "e-0").mkdir(parents=True)
    (empty / "e-0" / f"{EMPTY_BASE:020d}.log").write_bytes(b"")
    write_partition(empty / "g-0", n=30, seed=7)
    out["empty"] = empty

    txn = root / "txn"
    txn_partition(txn / "tx-0")
    out["txn"] = txn
    out["tiersrc"] = tiered_source(root)
    return out


# --- tiered buckets ----------------------------------------------------------------------

TIERED_SOURCES = ("healthy/orders-1", "txn/tx-0", "damaged/flip.inner-0", "damaged/cut.last-0")
TIERED_VARIANTS = ("plain", "compressed", "encrypted")


def last_offset_of(data: bytes) -> int | None:
    """The last offset of the last whole batch, from the batch headers."""
    last, pos = None, 0
    while pos + 27 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        last = base + struct.unpack_from(">i", data, pos + 23)[0]
        pos += 12 + length
    return last


def tiered_source(root: Path) -> Path:
    """``root/tiersrc``: a data directory holding copies of TIERED_SOURCES
    (what a tiered bucket is uploaded from)."""
    src = Path(root) / "tiersrc"
    for rel in TIERED_SOURCES:
        shutil.copytree(Path(root) / rel, src / Path(rel).name)
    return src


def tiered_bucket(src: Path, variant: str, public_pem: bytes | None
                  ) -> tuple[dict[str, bytes], dict[str, str]]:
    """Every partition of ``src`` encoded as the tiered-storage plugin
    uploads it (a topic id per topic): ``({object key: bytes},
    {"tiersrc/<part>": its key prefix, "tiersrc": ""})``."""
    from .tiered_encoder import Encoder, encode_partition, kafka_uuid
    enc = Encoder(variant, chunk_size=1024, public_pem=public_pem)
    objects, mapping = {}, {"tiersrc": ""}
    for part in sorted(p for p in Path(src).iterdir() if p.is_dir()):
        topic, _, number = part.name.rpartition("-")
        topic_id = kafka_uuid()
        segs = segments(part)
        bases = [int(s.name[:20]) for s in segs]
        lasts = {b: (bases[i + 1] - 1 if i + 1 < len(bases)
                     else last_offset_of(segs[i].read_bytes()) or b)
                 for i, b in enumerate(bases)}
        objects.update(encode_partition(enc, str(part), topic=topic, topic_id=topic_id,
                                        partition=int(number), last_offsets=lasts))
        mapping[f"tiersrc/{part.name}"] = f"{topic}-{topic_id}/{number}"
    return objects, mapping


# --- where the bytes live -------------------------------------------------------------------

@dataclass
class Site:
    """One place holding a copy of a local tree.

    ``loc(rel)``: how a user names ``rel`` (a path below the tree's root)
    there; ``kw``: the keyword arguments such a name needs (storage options);
    ``spellings``: every way the root may be written in a message."""

    name: str
    base: str                                  # the root's location
    kw: dict = field(default_factory=dict)
    spellings: tuple = ()
    cli: tuple = ()                            # command-line flags for the same
    mapping: dict = field(default_factory=dict)   # rel -> its rel here (tiered buckets)

    def loc(self, rel: str = "") -> str:
        rel = str(rel).strip("/")
        rel = self.mapping.get(rel, rel)
        return f"{self.base}/{rel}" if rel else self.base


def local_site(root: Path) -> Site:
    root = Path(root)
    spell = {str(root), os.path.realpath(root)}
    return Site("local", str(root), {}, tuple(spell))


def tree_files(local: Path) -> dict[str, bytes]:
    """``{path relative to local: bytes}`` of every file below ``local``."""
    local = Path(local)
    out = {}
    for dirpath, _, files in os.walk(local):
        for name in files:
            p = Path(dirpath) / name
            out[p.relative_to(local).as_posix()] = p.read_bytes()
    return out


def empty_dirs(local: Path) -> list[str]:
    local = Path(local)
    return [Path(d).relative_to(local).as_posix() for d, dirs, files in os.walk(local)
            if not dirs and not files]


def upload_fs(fs, local: Path, dest: str) -> None:
    """Every file under ``local`` to ``dest`` (a path inside ``fs``); empty
    directories too where the filesystem has directories (memory://)."""
    for rel, data in tree_files(local).items():
        fs.pipe_file(f"{dest}/{rel}", data)
    for rel in empty_dirs(local):
        fs.makedirs(f"{dest}/{rel}", exist_ok=True)


def memory_site(local: Path) -> Site:
    """A fresh ``memory://`` copy of ``local`` (remove it with ``drop_memory``)."""
    import fsspec
    fs = fsspec.filesystem("memory")
    prefix = f"parity-{uuid.uuid4().hex[:10]}"
    upload_fs(fs, local, f"/{prefix}")
    return Site("memory", f"memory://{prefix}", {},
                (f"memory:///{prefix}", f"memory://{prefix}", f"/{prefix}"))


def drop_memory(site: Site) -> None:
    import fsspec
    fs = fsspec.filesystem("memory")
    prefix = site.base[len("memory://"):]
    if fs.exists(f"/{prefix}"):
        fs.rm(f"/{prefix}", recursive=True)
    # nothing of it may stay (not even a pseudo directory)
    for key in list(fs.store):
        if key.startswith(f"/{prefix}"):
            del fs.store[key]
    fs.pseudo_dirs[:] = [d for d in fs.pseudo_dirs if not d.startswith(f"/{prefix}")]


def s3_options(s3) -> dict:
    """Storage options as a user passes them: straight to the server, the
    filesystem instance cached by fsspec as it is by default."""
    opts = s3.options(direct=True)
    opts.pop("skip_instance_cache", None)
    return opts


def put_s3(s3, files: dict[str, bytes], prefix: str) -> None:
    """``{relative key: bytes}`` under ``s3://BUCKET/prefix``, uploaded
    concurrently (through the server's own client, not the readers')."""
    import s3fs

    from .remote_s3 import BUCKET
    s3.fs.pipe({f"{BUCKET}/{prefix}/{rel}": data for rel, data in files.items()})
    s3.fs.invalidate_cache()
    # the readers' (cached) filesystem forgets its listings too: a test that
    # uploads and then reads compares the data, not a stale listing (which
    # test_new_segments_and_partitions_are_seen checks on purpose)
    s3fs.S3FileSystem(**s3_options(s3)).invalidate_cache()


def s3_site(s3, local: Path, prefix: str) -> Site:
    """A copy of ``local`` under ``s3://BUCKET/prefix`` of the test server."""
    import json

    from .remote_s3 import BUCKET
    put_s3(s3, tree_files(local), prefix)
    opts = s3_options(s3)
    cli = ("--storage-option", "key=testing", "--storage-option", "secret=testing",
           "--storage-option", "client_kwargs=" + json.dumps(opts["client_kwargs"]))
    return Site("s3", f"s3://{BUCKET}/{prefix}", {"storage_options": opts},
                (f"s3://{BUCKET}/{prefix}", f"{BUCKET}/{prefix}"), cli)


_TIERED_OBJECT = re.compile(r"(\d{20})-[A-Za-z0-9_-]{22}(?=\.)")


def norm(value, site: Site):
    """``value`` with every spelling of ``site``'s root replaced by
    ``<ROOT>`` (strings, and recursively lists, tuples, dicts). A tiered
    bucket's partition prefix becomes the local partition it was uploaded
    from, and its object names lose the upload's UUID
    (``00000000000000000000-<uuid>.log`` -> ``00000000000000000000.log``)."""
    if isinstance(value, str):
        for rel, there in sorted(site.mapping.items(), key=lambda kv: -len(kv[1])):
            for spelling in sorted(site.spellings, key=len, reverse=True):
                value = value.replace(f"{spelling}/{there}" if there else spelling,
                                      f"{ROOT}/{rel}")
        for spelling in sorted(site.spellings, key=len, reverse=True):
            value = value.replace(spelling, ROOT)
        if site.mapping:
            value = _TIERED_OBJECT.sub(r"\1", value)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(norm(v, site) for v in value)
    if isinstance(value, dict):
        return {norm(k, site): norm(v, site) for k, v in value.items()}
    return value
