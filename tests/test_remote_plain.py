"""Partitions in a local S3 server (moto) read through s3:// URLs, compared
with local reads of the same files; request and byte counts from the
counting proxy; failures (missing, truncated, throttled, cut bodies)."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")

import kbatch  # noqa: E402
from kbatch.errors import CorruptRecordError, KbatchError  # noqa: E402
from kbatch.lib.objects import RemoteError  # noqa: E402

from .remote_s3 import BUCKET, S3  # noqa: E402
from .tiered_encoder import live_index  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


def same(remote: kbatch.Records, local: kbatch.Records, end: bool = True):
    """Equal records, batches and control records; ``end``: also where the
    data ends (whole reads; a range read stops early)."""
    assert len(remote) == len(local)
    np.testing.assert_array_equal(remote.offset, local.offset)
    np.testing.assert_array_equal(remote.timestamp, local.timestamp)
    np.testing.assert_array_equal(remote.timestamp_type, local.timestamp_type)
    assert [remote.key[i] for i in range(len(remote))] == [local.key[i] for i in range(len(local))]
    assert [remote.value[i] for i in range(len(remote))] == \
        [local.value[i] for i in range(len(local))]
    assert [remote.headers[i] for i in range(len(remote))] == \
        [local.headers[i] for i in range(len(local))]
    for col in ("base_offset", "last_offset", "position", "size", "crc", "producer_id"):
        np.testing.assert_array_equal(getattr(remote.batches, col), getattr(local.batches, col))
    np.testing.assert_array_equal(remote.control.offset, local.control.offset)
    if end:
        assert (remote.end.valid_bytes, remote.end.reason) == \
            (local.end.valid_bytes, local.end.reason)


def records(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        value = None if i % 97 == 5 else rng.bytes(int(rng.integers(0, 400)))
        out.append({"key": b"k%d" % (i % 50), "value": value, "timestamp": 1_700_000_000_000 + i,
                    "headers": [("h", b"%d" % i)] if i % 3 == 0 else []})
    return out


@pytest.fixture(scope="module")
def generated(s3, tmp_path_factory):
    """Partitions in several codecs, small segments (several per
    partition), uploaded to s3://BUCKET/gen/."""
    root = tmp_path_factory.mktemp("remote-gen")
    for p, codec in enumerate(("none", "lz4", "zstd", "gzip")):
        kbatch.write_log(root / f"orders-{p}", records(6000, p), codec=codec,
                         segment_bytes=256 << 10, batch_records=40)
    s3.put_dir(str(root), "gen")
    return root


def test_full_and_range_reads_equal_local(s3, generated):
    for p in range(4):
        local = kbatch.open_log(generated / f"orders-{p}")
        remote = kbatch.open_log(f"s3://{BUCKET}/gen/orders-{p}", storage_options=s3.options(),
                           block=1 << 16)
        assert len(remote.segments) > 2
        same(remote.read(), local.read())
        for lo, hi in ((0, 1), (1234, 1240), (2999, 4500), (5990, 10_000), (6000, 6001)):
            same(remote.read(lo, hi), local.read(lo, hi), end=False)
        chunks = list(remote.iter(100, 5000, chunk_records=333))
        assert max(len(c) for c in chunks) <= 333 + 40
        same(kbatch.Records.concat(chunks), local.read(100, 5000), end=False)


def test_read_committed_and_dir(s3, generated):
    remote_dir = kbatch.open_log_dir(f"s3://{BUCKET}/gen", storage_options=s3.options())
    assert [(p.topic, p.partition) for p in remote_dir.partitions] == \
        [("orders", i) for i in range(4)]
    part = remote_dir.partition("orders", 2)
    local = kbatch.open_log(generated / "orders-2")
    same(part.read(10, 500, isolation="read_committed"),
         local.read(10, 500, isolation="read_committed"), end=False)


def test_seek_costs_index_plus_one_range(s3, generated):
    remote = kbatch.open_log(f"s3://{BUCKET}/gen/orders-1", storage_options=s3.options())
    remote.segments            # the listing, planned before counting
    s3.proxy.reset()
    got = remote.read(4000, 4010)
    assert list(got.offset) == list(range(4000, 4010))
    # one GET of the offset index, one ranged GET from the batch on
    assert s3.proxy.gets == 2
    seg = [s for s in remote.segments if s.base_offset <= 4000][-1]
    assert s3.proxy.get_bytes < seg.source.size
    # use_index=False: the exact header walk from the segment's start (no
    # index object read), the same records
    walk = kbatch.open_log(f"s3://{BUCKET}/gen/orders-1", storage_options=s3.options(),
                           use_index=False)
    walk.segments
    s3.proxy.reset()
    same(walk.read(4000, 4010), got, end=False)
    assert not any(path.split("?")[0].endswith(".index") for _, path, _ in s3.proxy.log)
    assert s3.proxy.get_bytes >= seg.source.size * 0.5
    assert walk.offset_for_timestamp(int(got.timestamp[0])) == \
        remote.offset_for_timestamp(int(got.timestamp[0]))


def test_full_scan_reads_each_byte_once(s3, generated):
    remote = kbatch.open_log(f"s3://{BUCKET}/gen/orders-0", storage_options=s3.options(),
                       block=1 << 16)
    logs = sum(s.source.size for s in remote.segments)
    s3.proxy.reset()
    assert len(remote.read()) == 6000
    # only segment bytes (no index), each range once: the ranges tile the objects
    ranges = sorted({(path, rng) for method, path, rng in s3.proxy.log if method == "GET"})
    assert all(path.endswith(".log") for path, _ in ranges)
    spans = [tuple(map(int, rng.split("=")[1].split("-"))) for _, rng in ranges]
    assert sum(b - a + 1 for a, b in spans) == logs
    # a range retried after a dropped connection (a loaded machine) may count twice
    assert s3.proxy.get_bytes <= 1.02 * logs


def test_index_that_lies_falls_back(s3, generated, tmp_path):
    # an .index whose entries point inside batches: the read still equals local
    src = generated / "orders-3"
    dst = tmp_path / "orders-3"
    dst.mkdir()
    for name in os.listdir(src):
        data = (src / name).read_bytes()
        if name.endswith(".index") and len(data) >= 16:
            data = bytearray(data)
            data[4:8] = (int.from_bytes(data[4:8], "big") + 3).to_bytes(4, "big")
            data[12:16] = (int.from_bytes(data[12:16], "big") + 5).to_bytes(4, "big")
            data = bytes(data)
        (dst / name).write_bytes(data)
    s3.put_dir(str(dst), "lying/orders-3")
    remote = kbatch.open_log(f"s3://{BUCKET}/lying/orders-3", storage_options=s3.options())
    local = kbatch.open_log(src)
    for lo, hi in ((300, 350), (2500, 2600)):
        same(remote.read(lo, hi), local.read(lo, hi), end=False)


PARTITION = re.compile(r".+-\d+$")


def corpus_partitions(corpus):
    out = []
    for root, dirs, files in os.walk(corpus):
        if PARTITION.match(os.path.basename(root)) and any(
                f.endswith(".log") and os.path.getsize(os.path.join(root, f)) for f in files):
            out.append(root)
    return sorted(out)


def test_corpus_partitions_read_identically(s3, corpus):
    parts = corpus_partitions(corpus)
    assert len(parts) > 20

    def upload(i_path):
        # the segments and their offset indexes (live entries: a broker's
        # preallocated 10 MiB of zeros would only slow the upload)
        i, path = i_path
        for name in os.listdir(path):
            if name.endswith((".log", ".index")):
                data = open(os.path.join(path, name), "rb").read()
                if name.endswith(".index"):
                    data = live_index(data, 8)
                s3.fs.pipe_file(f"{BUCKET}/corpus/{i}/{os.path.basename(path)}/{name}", data)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(upload, enumerate(parts)))
    s3.fs.invalidate_cache()
    import s3fs
    fs = s3fs.S3FileSystem(**s3.options())     # one client for all (a filesystem object)
    compared = 0
    for i, path in enumerate(parts):
        url = f"{BUCKET}/corpus/{i}/{os.path.basename(path)}"
        remote = kbatch.open_log(url, filesystem=fs, block=1 << 20)
        try:
            local = kbatch.open_log(path).read(include_control=True)
        except KbatchError as exc:
            with pytest.raises(type(exc)):
                remote.read(include_control=True)
            continue
        same(remote.read(include_control=True), local)
        compared += 1
        if len(local) > 10:
            mid = int(local.offset[len(local) // 2])
            same(remote.read(mid, mid + 7), kbatch.open_log(path).read(mid, mid + 7), end=False)
    assert compared > 20


# --- failures ----------------------------------------------------------------

def test_missing_prefix_and_object(s3, generated):
    with pytest.raises(kbatch.PathError, match="no such file or directory"):
        kbatch.open_log(f"s3://{BUCKET}/nothing/here-0", storage_options=s3.options())
    s3.put_dir(str(generated / "orders-0"), "vanishing/orders-0")
    remote = kbatch.open_log(f"s3://{BUCKET}/vanishing/orders-0", storage_options=s3.options())
    remote.segments
    s3.fs.rm(f"{BUCKET}/vanishing/orders-0/00000000000000000000.log")
    # a chunked read raises; a whole read lists again (kbatch.lib.relist):
    # the log starts at the next segment
    with pytest.raises(RemoteError, match="no such object"):
        list(remote.iter())
    second = sorted(n for n in os.listdir(generated / "orders-0") if n.endswith(".log"))[1]
    got = remote.read()
    assert len(got) and min(got.to_arrow().column("offset").to_pylist()) == \
        int(second[:-len(".log")])


def test_truncated_object_reads_like_a_truncated_file(s3, generated, tmp_path):
    src = generated / "orders-1"
    dst = tmp_path / "orders-1"
    dst.mkdir()
    names = sorted(n for n in os.listdir(src) if n.endswith(".log"))
    for name in os.listdir(src):
        data = (src / name).read_bytes()
        if name == names[-1]:
            data = data[:len(data) - 100]       # a torn last batch
        (dst / name).write_bytes(data)
    s3.put_dir(str(dst), "torn/orders-1")
    remote = kbatch.open_log(f"s3://{BUCKET}/torn/orders-1", storage_options=s3.options(),
                       block=1 << 16)
    got, want = remote.read(), kbatch.open_log(dst).read()
    assert want.end.reason == "truncated"
    same(got, want)


def test_object_shorter_than_listed(s3, generated, caplog):
    """The read finds the object shorter than listed (warned of), lists the
    partition again (kbatch.lib.relist) and reads it as it is now: a
    segment that is not the last one cut short, which raises."""
    s3.put_dir(str(generated / "orders-2"), "shrunk/orders-2")
    remote = kbatch.open_log(f"s3://{BUCKET}/shrunk/orders-2", storage_options=s3.options())
    remote.segments
    key = f"{BUCKET}/shrunk/orders-2/00000000000000000000.log"
    s3.fs.pipe_file(key, s3.fs.cat_file(key)[:1000])
    with caplog.at_level("WARNING", logger="kbatch.remote"):
        with pytest.raises(CorruptRecordError, match="runs past the end of the file .* not the "
                                                     "last segment"):
            remote.read()
    assert "shorter than its listed size" in caplog.text


def test_throttling_is_retried(s3, generated):
    remote = kbatch.open_log(f"s3://{BUCKET}/gen/orders-0", storage_options=s3.options(retries=1),
                       block=1 << 16)
    remote.segments
    s3.proxy.fail_next(3, 503)
    same(remote.read(), kbatch.open_log(generated / "orders-0").read())
    s3.proxy.truncate_next(2)      # bodies cut short: retried
    same(remote.read(10, 3000), kbatch.open_log(generated / "orders-0").read(10, 3000),
         end=False)


def test_persistent_5xx_is_a_bounded_error(s3, generated):
    remote = kbatch.open_log(f"s3://{BUCKET}/gen/orders-0", storage_options=s3.options(retries=1),
                       retries=1)
    remote.segments
    s3.proxy.fail_next(1000, 503)
    try:
        with pytest.raises(RemoteError, match="failed .after 2 attempts"):
            remote.read()
    finally:
        s3.proxy.fail_next(0)


# --- the public entry points --------------------------------------------------

def test_entry_points_take_urls(s3, generated):
    import s3fs
    local_dir = generated / "orders-2"
    name = sorted(n for n in os.listdir(local_dir) if n.endswith(".log"))[1]
    url = f"s3://{BUCKET}/gen/orders-2/{name}"
    opts = s3.options()
    same(kbatch.read_segment(url, storage_options=opts), kbatch.read_segment(local_dir / name))
    chunks = list(kbatch.iter_segment(url, storage_options=opts, chunk_records=100))
    assert max(len(c) for c in chunks) <= 140
    same(kbatch.Records.concat(chunks), kbatch.read_segment(local_dir / name))
    same(kbatch.read_segment(url, storage_options=opts, isolation="read_committed"),
         kbatch.read_segment(local_dir / name, isolation="read_committed"))
    fs = s3fs.S3FileSystem(**opts)
    same(kbatch.read_segment(f"{BUCKET}/gen/orders-2/{name}", filesystem=fs),
         kbatch.read_segment(local_dir / name))
    log = kbatch.open_log(f"s3://{BUCKET}/gen/orders-2", storage_options=opts)
    same(log.read(77, 2000), kbatch.open_log(local_dir).read(77, 2000), end=False)
    d = kbatch.open_log_dir(f"s3://{BUCKET}/gen", storage_options=opts)
    assert len(d.partitions) == 4
    with pytest.raises(kbatch.ArgumentError, match="unknown option"):
        kbatch.read_segment(url, storage_options=opts, validate=False)
    # local paths are untouched (memory-mapped as before)
    same(kbatch.read_segment(str(local_dir / name)), kbatch.read_segment(local_dir / name))


def test_command_line_reads_urls(s3, generated):
    """kbatch dump / stats / verify / txn of s3:// objects and prefixes, with
    --storage-option, print what they print for the same local files."""
    import json
    import subprocess
    import sys

    opts = s3.options(direct=True)
    flags = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
             "--storage-option", "client_kwargs=" + json.dumps(opts["client_kwargs"])]

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "kbatch", *args], capture_output=True,
                             text=True, timeout=300)
        return out.returncode, out.stdout, out.stderr

    url = f"s3://{BUCKET}/gen"
    code, remote, err = run("stats", url, "--format", "json", *flags)
    assert code == 0, err
    _, local, _ = run("stats", str(generated), "--format", "json")
    assert json.loads(remote.splitlines()[-1]) == json.loads(local.splitlines()[-1])
    assert len(remote.splitlines()) == len(local.splitlines()) == 5
    code, remote, err = run("verify", url, *flags)
    _, local, _ = run("verify", str(generated))
    assert code == 0, err
    assert remote.splitlines()[-1] == local.splitlines()[-1]
    assert remote.splitlines()[-1].endswith("records: ok")
    code, remote, err = run("txn", f"{url}/orders-1", "--format", "json", *flags)
    _, local, _ = run("txn", str(generated / "orders-1"), "--format", "json")
    assert code == 0, err
    strip = [{k: v for k, v in json.loads(line).items() if k != "source"}
             for line in remote.splitlines()]
    assert strip == [{k: v for k, v in json.loads(line).items() if k != "source"}
                     for line in local.splitlines()]
    for name in ("00000000000000000000.log", "00000000000000000000.index"):
        code, remote, err = run("dump", f"{url}/orders-1/{name}", *flags)
        _, local, _ = run("dump", str(generated / "orders-1" / name))
        assert code == 0, err
        assert remote.splitlines()[1:] == local.splitlines()[1:]
        assert len(remote.splitlines()) > 10
    # one storage for every file of the command; each file is dumped on its own
    code, both, err = run("dump", f"{url}/orders-1/00000000000000000000.log",
                          str(generated / "orders-1" / "00000000000000000000.log"), *flags)
    assert code == 0, err
    half = both.splitlines()
    assert half[1:len(half) // 2] == half[len(half) // 2 + 1:]
    code, _, err = run("verify", str(generated / "orders-1"), "--storage-option", "key=x")
    assert code == 2 and "is for URLs" in err and "key=x" not in err
    # a layout applies wherever the files are: the wrong one is named, not read as empty
    code, _, err = run("verify", str(generated), "--layout", "tiered")
    assert code == 1 and "layout='plain'" in err, err


def spark_slice_records(slices, k):
    """The records each slice gives on an executor (``kbatch.spark.read``),
    read one slice at a time, as (offset, key, value) lists."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    from kbatch.spark.read import read_slice
    schema = to_arrow_schema(StructType([StructField("key", BinaryType()),
                                         StructField("value", BinaryType()),
                                         StructField("offset", LongType())]))
    rows = []
    for piece in slices:
        for batch in read_slice(piece, k, schema):
            rows += zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                        batch.column("value").to_pylist())
    return rows


def local_rows(records):
    return list(zip(records.offset.tolist(), records.key.to_pylist(), records.value.to_pylist()))


def test_spark_planning_reads_listings_indexes_and_checked_batches_only(s3, generated):
    """What the Spark driver does for a remote path: listings, index objects
    and, to check each index entry it plans with, the batch it names (a
    ranged GET of at most 64 KiB): no whole segment. Each slice read alone,
    as on an executor, gives the local read."""
    import json
    pytest.importorskip("pyspark")
    import pickle

    from kbatch.spark.plan import Options, plan
    offsets = {"orders": {str(p): 100 for p in range(4)}}
    ends = {"orders": {str(p): 5000 for p in range(4)}}
    given = {"path": f"s3://{BUCKET}/gen", "startingOffsets": json.dumps(offsets),
             "endingOffsets": json.dumps(ends), "maxPartitionBytes": str(64 << 10),
             **{f"storage.{k}": json.dumps(v) if not isinstance(v, str) else v
                for k, v in s3.options().items()}}

    def planned(isolation):
        s3.proxy.reset()
        options = Options.parse({**given, "isolation": isolation})
        slices = pickle.loads(pickle.dumps(plan(options)))    # as they travel
        return options, slices

    options, slices = planned("read_uncommitted")
    log_gets = [rng for m, path, rng in s3.proxy.log
                if m == "GET" and path.split("?")[0].endswith(".log")]
    assert all(rng is not None for rng in log_gets)          # never a whole object
    sizes = [int(r.split("-")[1]) - int(r.split("=")[1].split("-")[0]) + 1 for r in log_gets]
    assert max(sizes, default=0) <= 64 << 10
    assert len(slices) > 8
    for p in range(4):
        got = spark_slice_records([s for s in slices if s.partition == p], options.kafka)
        assert got == local_rows(kbatch.open_log(generated / f"orders-{p}").read(100, 5000))
    # read_committed: the driver resolves each partition's transactions (a pass
    # over batch headers and control records), the executors read their slices
    options, committed = planned("read_committed")
    for p in range(4):
        got = spark_slice_records([s for s in committed if s.partition == p], options.kafka)
        assert got == local_rows(kbatch.open_log(generated / f"orders-{p}").read(
            100, 5000, isolation="read_committed"))


def test_timestamp_seeks_equal_local(s3, generated):
    remote = kbatch.open_log(f"s3://{BUCKET}/gen/orders-3", storage_options=s3.options())
    local = kbatch.open_log(generated / "orders-3")
    base = 1_700_000_000_000
    for ts in (base - 5, base, base + 1, base + 2500, base + 5999, base + 6000):
        assert remote.offset_for_timestamp(ts) == local.offset_for_timestamp(ts)
    same(remote.read(start_timestamp=base + 1234, end_timestamp=base + 1300),
         local.read(start_timestamp=base + 1234, end_timestamp=base + 1300), end=False)
    remote.segments
    s3.proxy.reset()
    assert remote.offset_for_timestamp(base + 4321) == 4321
    # per segment up to the one holding it: its time index, its offset index and
    # one range from the batch of the last time index entry older than ts on
    segs = [s for s in remote.segments if s.base_offset <= 4321]
    assert s3.proxy.gets <= 3 * len(segs)
    assert s3.proxy.get_bytes < sum(s.source.size for s in segs) / 4


def test_a_segment_key_that_is_also_a_prefix_is_still_read(s3, tmp_path):
    """S3 lets a key be an object and a prefix at once (a copy tool's
    ``.../00000000000000000008.log/manifest.json``): the segment object is
    still a segment, so a partition and a data directory read every record
    as the local copy does, never a quiet gap where that segment was."""
    local = tmp_path / "data"
    with kbatch.LogWriter(local / "t-0", segment_bytes=400, batch_records=2) as w:
        w.append({"value": [b"v%02d" % i for i in range(30)]})
    segs = sorted(p.name for p in (local / "t-0").glob("*.log"))
    assert len(segs) >= 3
    s3.put_dir(str(local), "twin")
    s3.fs.pipe_file(f"{BUCKET}/twin/t-0/{segs[1]}/copy-manifest.json", b"{}")
    s3.fs.pipe_file(f"{BUCKET}/twin/t-0/", b"")            # a console's folder marker
    s3.fs.invalidate_cache()
    want = kbatch.open_log(local / "t-0").read()
    assert want.offset.tolist() == list(range(30))
    remote = kbatch.open_log(f"s3://{BUCKET}/twin/t-0", storage_options=s3.options())
    assert [s.location.name for s in remote.segments] == segs
    same(remote.read(), want)
    table = kbatch.read_table(f"s3://{BUCKET}/twin", storage_options=s3.options())
    assert table.column("offset").to_pylist() == list(range(30))
    assert kbatch.verify(f"s3://{BUCKET}/twin/t-0", storage_options=s3.options()).ok
    seg = kbatch.read_segment(f"s3://{BUCKET}/twin/t-0/{segs[1]}", storage_options=s3.options())
    assert seg.offset.tolist() == want.select_offsets(int(segs[1][:20]),
                                                      int(segs[2][:20])).offset.tolist()
