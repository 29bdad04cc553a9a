"""What a read of object storage answers when the store is not a plain
tree of files, or changes under the reader, compared with the local read
of the same bytes:

- a zero-byte object at a prefix's own key (a folder placeholder that S3
  consoles and tools write) is the prefix, not an empty segment; a URL
  ending in "/" names a prefix;
- an object overwritten while one read is in flight, or between two reads
  of one ``PartitionLog``, gives the records of one version (the local read
  of those bytes) or a ``CorruptRecordError`` naming the object: never
  records of two versions, never bytes kept from a version that is gone;
- a read of whole partitions that overlaps a sync uploading the active
  segment again after appends (or a segment rewritten under its name) lists
  the partition again and answers with the partition as it is then, whole
  (the local read of those bytes, and the values encoded), warned of;
  a partition that keeps changing still raises after three reads.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import pickle
import struct
import subprocess
import sys

import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")

import fsspec  # noqa: E402
from fsspec.implementations.memory import MemoryFileSystem  # noqa: E402

import kbatch  # noqa: E402
from kbatch.errors import CorruptRecordError, FileChangedError  # noqa: E402

from .kafka_ref import build_batch  # noqa: E402
from .remote_s3 import BUCKET, S3  # noqa: E402

LOG = f"{0:020d}.log"


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


def _values(records) -> list:
    return records.value.to_pylist()


def _tags(records) -> dict:
    return dict(collections.Counter(v[:3] for v in _values(records)))


def batches(tag: bytes, n: int, pad: int = 0) -> list[bytes]:
    """``n`` one-record batches, offsets 0..n-1, values ``tag + number``:
    two tags of one ``n`` and ``pad`` give objects of the same size."""
    return [build_batch([(1_700_000_000_000 + i, b"k%04d" % i, tag + b"%04d" % i + b"x" * pad,
                          [])], base_offset=i) for i in range(n)]


def index_of(parts: list[bytes], every: int = 100) -> bytes:
    """An ``.index`` with an entry every ``every`` batches."""
    out, pos = b"", 0
    for i, b in enumerate(parts):
        if i and i % every == 0:
            out += struct.pack(">ii", i, pos)
        pos += len(b)
    return out


def write_partition(part, files: dict) -> None:
    """Files of a partition directory, each replaced whole (written aside
    and renamed over, as the log cleaner swaps a segment in)."""
    part.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (part / "swap").write_bytes(data)
        os.replace(part / "swap", part / name)


def one_version(got, versions: dict, url: str):
    """``got`` (records, or the exception a read raised) is the local read
    of one version's bytes, or a CorruptRecordError naming the object."""
    if isinstance(got, BaseException):
        assert isinstance(got, CorruptRecordError), got
        assert url in str(got) and "replaced object" in str(got), got
        return None
    matches = [name for name, want in versions.items() if _values(got) == _values(want)]
    assert matches, f"records of no single version: {_tags(got)}"
    return matches[0]


def attempt(read):
    try:
        return read()
    except CorruptRecordError as exc:
        return exc


# --- F1: folder placeholders --------------------------------------------------

@pytest.fixture(scope="module")
def placeholders(s3, tmp_path_factory):
    """A data directory uploaded with zero-byte objects at its own key and at
    a partition's key (``m/data``, ``m/data/t-0``), as consoles write them."""
    root = tmp_path_factory.mktemp("placeholders") / "data"
    for p in (0, 1):
        with kbatch.LogWriter(root / f"t-{p}", segment_bytes=700, batch_records=3) as w:
            w.append({"value": [b"value-%03d" % i for i in range(40)]})
    s3.put_dir(str(root), "m/data")
    for key in ("m/data", "m/data/t-0"):
        s3.fs.pipe_file(f"{BUCKET}/{key}", b"")
    s3.fs.invalidate_cache()
    return root


def _verified(report):
    return [(os.path.basename(str(s.path)), s.records, s.ok) for s in report.segments], report.ok


def test_a_folder_placeholder_is_its_prefix(s3, placeholders):
    opts = dict(storage_options=s3.options())
    url = f"s3://{BUCKET}/m/data"
    local = kbatch.read_table(placeholders)
    assert local.num_rows == 80
    for where in (url, url + "/"):
        assert kbatch.read_table(where, **opts).to_pydict() == local.to_pydict()
        assert _verified(kbatch.verify(where, **opts)) == _verified(kbatch.verify(placeholders))
    for where in (f"{url}/t-0", f"{url}/t-0/"):
        assert _values(kbatch.open_log(where, **opts).read()) == \
            _values(kbatch.open_log(placeholders / "t-0").read())
        assert _verified(kbatch.verify(where, **opts)) == \
            _verified(kbatch.verify(placeholders / "t-0"))
        # a partition is not a segment, here as there
        with pytest.raises(kbatch.PathError, match="is a partition"):
            kbatch.read_segment(placeholders / "t-0")
        with pytest.raises(kbatch.PathError, match="is a partition"):
            kbatch.read_segment(where, **opts)


def test_a_url_ending_in_a_slash_names_a_prefix(s3, placeholders):
    """``.../x.log/`` names no file locally (not a directory) and no object
    remotely; a segment key that is also a prefix of other objects is read
    as a segment without the slash (tests/test_remote_plain.py)."""
    name = sorted(p.name for p in (placeholders / "t-1").glob("*.log"))[0]
    with pytest.raises(kbatch.PathError, match="no such file or directory"):
        kbatch.read_segment(str(placeholders / "t-1" / name) + "/")
    with pytest.raises(kbatch.PathError, match="no such file or directory"):
        kbatch.read_segment(f"s3://{BUCKET}/m/data/t-1/{name}/", storage_options=s3.options())
    assert _values(kbatch.read_segment(f"s3://{BUCKET}/m/data/t-1/{name}",
                                       storage_options=s3.options())) == \
        _values(kbatch.read_segment(placeholders / "t-1" / name))


def test_command_line_reads_a_prefix_with_placeholders(s3, placeholders):
    opts = s3.options(direct=True)
    flags = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
             "--storage-option", "client_kwargs=" + json.dumps(opts["client_kwargs"])]

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "kbatch", *args], capture_output=True,
                             text=True, timeout=300)
        return out.returncode, out.stdout.splitlines()[-1:]

    for command in ("verify", "stats"):
        local = run(command, str(placeholders))
        assert local[0] == 0 and "80" in local[1][0]
        assert run(command, f"s3://{BUCKET}/m/data/", *flags) == local


# --- F2: an object replaced during one read ------------------------------------

N, PAD = 3000, 1000


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """One segment in two versions of one size (and the index of the first),
    and the local reads of each from offset 1400."""
    old, new = batches(b"OLD", N, PAD), batches(b"NEW", N, PAD)
    index = index_of(old)
    out = {}
    for name, parts in (("old", old), ("new", new)):
        part = tmp_path_factory.mktemp(name) / "t-0"
        write_partition(part, {LOG: b"".join(parts), f"{0:020d}.index": index})
        out[name] = part
    assert os.path.getsize(out["old"] / LOG) == os.path.getsize(out["new"] / LOG)
    return out


def _local_reads(versions, read):
    return {name: read(kbatch.open_log(part)) for name, part in versions.items()}


READS = {
    "read": lambda log: log.read(start_offset=1400),
    "iter": lambda log: kbatch.Records.concat(list(log.iter(start_offset=1400,
                                                            chunk_records=500))),
    "whole": lambda log: log.read(),
}


BLOCK = 1 << 16      # a read of many ranges


@pytest.mark.parametrize("how", sorted(READS))
@pytest.mark.parametrize("after", [0, 1])
def test_an_object_overwritten_during_a_read_on_s3(s3, versions, how, after):
    """The overwrite lands after the read's first (or second) GET of the
    segment (an index-guided read: the check of the batch at the seek, and
    the first range of the read) and before the rest."""
    prefix = f"race-{how}-{after}/t-0"
    s3.put_dir(str(versions["old"]), prefix)
    url = f"s3://{BUCKET}/{prefix}"
    log = kbatch.open_log(url, storage_options=s3.options(), block=BLOCK)
    new = (versions["new"] / LOG).read_bytes()
    s3.proxy.after_next_get(f"{prefix}/{LOG}",
                            lambda: s3.fs.pipe_file(f"{BUCKET}/{prefix}/{LOG}", new), after)
    got = attempt(lambda: READS[how](log))
    one_version(got, _local_reads(versions, READS[how]), f"{url}/{LOG}")


class OverwrittenMemory(MemoryFileSystem):
    """memory:// whose object ``key`` becomes ``data`` right after its
    ranged read number ``after`` (from 0): a store kbatch cannot pin reads
    on."""

    protocol = "memory"
    cachable = False

    def __init__(self, key: str, data: bytes, after: int = 0):
        super().__init__()
        self.key, self.data, self.after, self.done = key, data, after, False

    def cat_file(self, path, start=None, end=None, **kwargs):
        out = super().cat_file(path, start=start, end=end, **kwargs)
        if not self.done and path.endswith(self.key):
            self.after -= 1
            if self.after < 0:
                self.done = True
                self.pipe_file(path, self.data)
        return out


def _mem_upload(part, prefix: str) -> None:
    mem = fsspec.filesystem("memory")
    for f in part.iterdir():
        mem.pipe(f"/{prefix}/t-0/{f.name}", f.read_bytes())


@pytest.mark.parametrize("how", sorted(READS))
@pytest.mark.parametrize("after", [0, 1])
def test_an_object_overwritten_during_a_read_on_any_store(versions, how, after):
    prefix = f"race-mem-{how}-{after}"
    _mem_upload(versions["old"], prefix)
    fs = OverwrittenMemory(f"/{prefix}/t-0/{LOG}", (versions["new"] / LOG).read_bytes(), after)
    log = kbatch.open_log(f"/{prefix}/t-0", filesystem=fs, block=BLOCK)
    got = attempt(lambda: READS[how](log))
    assert fs.done
    one_version(got, _local_reads(versions, READS[how]), f"memory:///{prefix}/t-0/{LOG}")


def test_read_segment_and_verify_of_an_object_overwritten_during_the_read(versions):
    prefix = "race-mem-segment"
    _mem_upload(versions["old"], prefix)
    key = f"/{prefix}/t-0/{LOG}"
    new = (versions["new"] / LOG).read_bytes()
    fs = OverwrittenMemory(key, new)
    got = attempt(lambda: kbatch.read_segment(key, filesystem=fs, stop=3 << 20))
    one_version(got, {name: kbatch.read_segment(part / LOG, stop=3 << 20)
                      for name, part in versions.items()}, f"memory://{key}")
    _mem_upload(versions["old"], prefix)
    fs = OverwrittenMemory(key, new)
    # as for an object shorter than listed: the check cannot go on, it raises
    with pytest.raises(CorruptRecordError, match="replaced object") as caught:
        kbatch.verify(key, filesystem=fs)
    assert fs.done and f"memory://{key}" in str(caught.value)


def test_a_segment_pickled_to_an_executor_reads_one_version(versions):
    """A Segment pickled to a Spark executor is read there as the object is
    when the executor first asks (what a change since planning means is the
    planner's to say: the stream reads an object uploaded again after
    appends, tests/test_spark_stream.py); an overwrite during that read
    raises as anywhere."""
    from kbatch.lib.segment import DecodeOptions

    def read(segment):
        return kbatch.Records.concat(list(segment.source.chunks(DecodeOptions())))
    prefix = "executor"
    _mem_upload(versions["old"], prefix)
    key, old, new = f"/{prefix}/t-0/{LOG}", *((versions[v] / LOG).read_bytes()
                                              for v in ("old", "new"))
    fs = OverwrittenMemory(key, b"", after=1 << 30)
    seg = kbatch.open_log(f"/{prefix}/t-0", filesystem=fs, block=BLOCK).segments[0]
    shipped = pickle.dumps(seg)
    fsspec.filesystem("memory").pipe(key, new)        # uploaded again after planning
    truth = {name: kbatch.read_segment(part / LOG) for name, part in versions.items()}
    assert _values(read(pickle.loads(shipped))) == _values(truth["new"])
    with pytest.raises(CorruptRecordError, match="replaced object"):
        read(seg)                                      # listed here before the upload
    moved = pickle.loads(shipped)
    moved.tree.fs.data, moved.tree.fs.after = old, 1
    one_version(attempt(lambda: read(moved)), truth, f"memory://{key}")
    assert moved.tree.fs.done


# --- F2b: a PartitionLog read again after its object changed -------------------

def _stores(s3):
    """(name, upload(part, prefix) -> URL, storage keywords)."""
    def to_s3(part, prefix):
        s3.put_dir(str(part), f"{prefix}/t-0")
        return f"s3://{BUCKET}/{prefix}/t-0"

    def to_memory(part, prefix):
        _mem_upload(part, prefix)
        return f"memory://{prefix}/t-0"
    return {"s3": (to_s3, dict(storage_options=s3.options())), "memory": (to_memory, {})}


@pytest.mark.parametrize("store", ["s3", "memory"])
def test_a_longer_rewrite_read_by_the_same_log(s3, tmp_path, store):
    """A new read of the same log sees the new object whole (as a new read
    of the same local log does) or raises; never the new object cut at the
    size listed when the log was opened."""
    upload, opts = _stores(s3)[store]
    part = tmp_path / "t-0"
    write_partition(part, {LOG: b"".join(batches(b"OLD", 10))})
    L, R = kbatch.open_log(part), kbatch.open_log(upload(part, f"grow-{store}"), **opts)
    assert _values(R.read()) == _values(L.read())
    write_partition(part, {LOG: b"".join(batches(b"NEW", 12))})
    url = upload(part, f"grow-{store}")
    local = L.read()
    assert len(local) == 12
    one_version(attempt(R.read), {"new": local}, f"{url}/{LOG}")
    assert _values(kbatch.open_log(url, **opts).read()) == _values(local)


@pytest.mark.parametrize("store", ["s3", "memory"])
def test_a_same_size_rewrite_read_by_the_same_log(s3, versions, store):
    """After an index-guided read keeps the batch at the seek, the object is
    rewritten (same size): a new read of the same log never serves the
    kept bytes of the old object beside fresh ones."""
    upload, opts = _stores(s3)[store]
    url = upload(versions["old"], f"same-{store}")
    R = kbatch.open_log(url, **opts)
    assert _values(R.read(start_offset=1500, end_offset=1501)) == [b"OLD1500" + b"x" * PAD]
    upload(versions["new"], f"same-{store}")
    want = _local_reads(versions, READS["read"])
    one_version(attempt(lambda: R.read(start_offset=1400)), {"new": want["new"]}, f"{url}/{LOG}")
    one_version(attempt(lambda: R.read(start_offset=1500, end_offset=1501)),
                {"new": kbatch.open_log(versions["new"]).read(1500, 1501)}, f"{url}/{LOG}")
    assert _values(kbatch.open_log(url, **opts).read(start_offset=1400)) == \
        _values(want["new"])


# --- F3: the active segment uploaded again after appends (a sync) --------------
# ``aws s3 sync`` of a broker's log directory uploads the active segment again
# once the broker appended to it: a new object (another size and ETag), the
# old bytes and more. A read of whole partitions that overlaps the upload
# lists the partition again and reads that listing (kbatch.lib.relist).

ROLLED, ACTIVE, MORE = 120, 180, 60        # one-record batches of about 1 KB
ACTIVE_LOG = f"{ROLLED:020d}.log"


def run_of(tag: bytes, first: int, n: int) -> list[bytes]:
    """``n`` one-record batches at offsets ``first``..., values ``tag +
    offset`` (kafka-python encodes them)."""
    return [build_batch([(1_700_000_000_000 + i, b"k%04d" % i, tag + b"%04d" % i + b"x" * PAD,
                          [])], base_offset=i) for i in range(first, first + n)]


def encoded(state: str) -> list[bytes]:
    """The values a state of the ``synced`` partition holds, as encoded."""
    rolled = b"CMP" if state == "rewritten" else b"ROL"
    active = ACTIVE + MORE if state == "synced" else ACTIVE
    return ([rolled + b"%04d" % i + b"x" * PAD for i in range(ROLLED)]
            + [b"ACT%04d" % i + b"x" * PAD for i in range(ROLLED, ROLLED + active)])


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """A data directory holding ``t-0`` (a rolled segment and the active
    one) in three states: as listed; as a sync uploads it after ``MORE``
    batches were appended to the active segment; with its rolled segment
    rewritten (the same size, other records: values CMP...). Beside it
    ``t-1``, the same in all three."""
    active = run_of(b"ACT", ROLLED, ACTIVE + MORE)
    rolled = b"".join(run_of(b"ROL", 0, ROLLED))
    states = {"listed": {LOG: rolled, ACTIVE_LOG: b"".join(active[:ACTIVE])},
              "synced": {LOG: rolled, ACTIVE_LOG: b"".join(active)},
              "rewritten": {LOG: b"".join(run_of(b"CMP", 0, ROLLED)),
                            ACTIVE_LOG: b"".join(active[:ACTIVE])}}
    out = {}
    for name, files in states.items():
        out[name] = tmp_path_factory.mktemp(f"sync-{name}")
        write_partition(out[name] / "t-0", files)
        write_partition(out[name] / "t-1", {LOG: b"".join(run_of(b"ONE", 0, 50))})
        assert _values(kbatch.open_log(out[name] / "t-0").read()) == encoded(name)
    return out


def _part(target):
    """The partition ``t-0`` of a data directory (a path or a URL)."""
    return f"{target}/t-0" if isinstance(target, str) else target / "t-0"


def _rows(table) -> list:
    """A batch-level table without the column naming the file (a path here, a URL there)."""
    return table.drop_columns(["segment"]).to_pylist()


SYNC_READS = {
    "log read": lambda t, **kw: _values(kbatch.open_log(_part(t), **kw).read()),
    "log read from": lambda t, **kw: _values(kbatch.open_log(_part(t), **kw).read(100)),
    "log batches": lambda t, **kw: _rows(kbatch.open_log(_part(t), **kw).read(level="batches")),
    "read_table": lambda t, **kw: kbatch.read_table(t, **kw).column("value").to_pylist(),
    "read_table committed": lambda t, **kw: kbatch.read_table(
        t, isolation="read_committed", **kw).column("value").to_pylist(),
    "read_table batches": lambda t, **kw: _rows(kbatch.read_table(t, level="batches", **kw)),
    "log dir from": lambda t, **kw: _values(kbatch.open_log_dir(t, **kw).read(start_offset=100)[("t", 0)]),
}


def _upload_after_get(s3, key: str, data: bytes, skip: int = 0) -> None:
    """``data`` uploaded at ``key`` once the next GET of it was answered."""
    s3.proxy.after_next_get(key, lambda: s3.fs.pipe_file(f"{BUCKET}/{key}", data), skip)


@pytest.mark.parametrize("how", sorted(SYNC_READS))
def test_a_read_overlapping_a_sync_answers_with_the_synced_partition(s3, synced, how, caplog):
    """The sync lands after the read's first GET of the active segment: the
    read lists again and answers with the synced partition, whole."""
    prefix = "sync-" + how.replace(" ", "-")
    s3.put_dir(str(synced["listed"]), prefix)
    _upload_after_get(s3, f"{prefix}/t-0/{ACTIVE_LOG}",
                      (synced["synced"] / "t-0" / ACTIVE_LOG).read_bytes())
    read = SYNC_READS[how]
    with caplog.at_level(logging.WARNING, logger="kbatch.remote"):
        got = read(f"s3://{BUCKET}/{prefix}", storage_options=s3.options(), block=BLOCK)
    want = {state: read(synced[state]) for state in ("listed", "synced")}
    assert got == want["synced"] != want["listed"]
    assert "object changed since it was listed" in caplog.text
    assert f"listing s3://{BUCKET}/{prefix}/t-0 again" in caplog.text


def test_a_data_directory_read_again_reads_only_the_partition_that_changed(s3, synced):
    """read_table of the data directory while ``t-0`` is synced: ``t-0`` is
    listed and read again, ``t-1`` is read once."""
    prefix = "sync-dir-once"
    s3.put_dir(str(synced["listed"]), prefix)

    def t1_gets() -> int:
        return sum(1 for m, path, _ in s3.proxy.log if m == "GET" and "/t-1/" in path)
    url, opts = f"s3://{BUCKET}/{prefix}", dict(storage_options=s3.options(), block=BLOCK)
    s3.proxy.reset()
    kbatch.read_table(url, **opts)
    once = t1_gets()
    _upload_after_get(s3, f"{prefix}/t-0/{ACTIVE_LOG}",
                      (synced["synced"] / "t-0" / ACTIVE_LOG).read_bytes())
    s3.proxy.reset()
    got = kbatch.read_table(url, **opts)
    assert t1_gets() == once > 0
    assert got.to_pydict() == kbatch.read_table(synced["synced"]).to_pydict()


def test_a_partition_that_keeps_changing_raises(s3, synced, caplog):
    """Every read finds the active segment uploaded again, longer: after
    three reads (two new listings, each warned of) the error is raised."""
    prefix = "sync-forever"
    s3.put_dir(str(synced["listed"]), prefix)
    key = f"{prefix}/t-0/{ACTIVE_LOG}"
    active = run_of(b"ACT", ROLLED, ACTIVE + MORE)
    uploads = []

    def upload():       # after every GET of the active segment: one batch longer
        uploads.append(1)
        s3.fs.pipe_file(f"{BUCKET}/{key}", b"".join(active[:ACTIVE + min(len(uploads), MORE)]))
        s3.proxy.after_next_get(key, upload)
    s3.proxy.after_next_get(key, upload)
    log = kbatch.open_log(f"s3://{BUCKET}/{prefix}/t-0", storage_options=s3.options(),
                          block=BLOCK)
    try:
        with caplog.at_level(logging.WARNING, logger="kbatch.remote"):
            with pytest.raises(FileChangedError, match="object changed since it was listed"):
                log.read()
    finally:
        s3.proxy.after_next_get("(none)", lambda: None)
    assert caplog.text.count("again and reading it again") == 2
    assert "read 3 of at most 3" in caplog.text


def test_a_log_read_again_after_a_sync_reads_the_synced_partition(s3, synced):
    """A PartitionLog opened before the sync: its next read finds the
    object changed, lists again, and from then on is the new listing."""
    prefix = "sync-reused"
    s3.put_dir(str(synced["listed"]), prefix)
    log = kbatch.open_log(f"s3://{BUCKET}/{prefix}/t-0", storage_options=s3.options())
    assert _values(log.read()) == encoded("listed")
    new = (synced["synced"] / "t-0" / ACTIVE_LOG).read_bytes()
    s3.fs.pipe_file(f"{BUCKET}/{prefix}/t-0/{ACTIVE_LOG}", new)
    assert _values(log.read()) == encoded("synced")
    assert log.segments[-1].size == len(new)
    s3.proxy.reset()
    assert _values(log.read(ROLLED + ACTIVE)) == encoded("synced")[ROLLED + ACTIVE:]
    assert s3.proxy.requests.get("HEAD") == 1      # one segment read, confirmed once


@pytest.mark.parametrize("store", ["s3", "memory"])
def test_a_segment_rewritten_during_a_read_is_read_again_whole(s3, synced, store, caplog):
    """The rolled segment rewritten under its name (the same size, other
    records: a cleaner's swap) after the read's first range of it: the read
    lists again and answers with the rewritten partition, whole."""
    prefix = f"rewrite-during-{store}"
    new = (synced["rewritten"] / "t-0" / LOG).read_bytes()
    if store == "s3":
        s3.put_dir(str(synced["listed"]), prefix)
        _upload_after_get(s3, f"{prefix}/t-0/{LOG}", new)
        log = kbatch.open_log(f"s3://{BUCKET}/{prefix}/t-0", storage_options=s3.options(),
                              block=BLOCK)
    else:
        _mem_upload(synced["listed"] / "t-0", prefix)
        fs = OverwrittenMemory(f"/{prefix}/t-0/{LOG}", new)
        log = kbatch.open_log(f"/{prefix}/t-0", filesystem=fs, block=BLOCK)
    with caplog.at_level(logging.WARNING, logger="kbatch.remote"):
        got = log.read()
    assert store == "s3" or fs.done
    assert _values(got) == encoded("rewritten")
    assert _values(got) == _values(kbatch.open_log(synced["rewritten"] / "t-0").read())
    assert "object changed since it was listed" in caplog.text


def test_an_active_segment_cut_short_during_a_read_on_any_store(synced, caplog):
    """memory:// (GETs cannot be pinned): the active segment replaced by a
    shorter one (a truncation, synced) after the read's first range of it.
    Ranges past the new end come back short, one HEAD says the object
    changed, and the read lists again: the shorter partition, whole."""
    prefix = "cut-short-mem"
    _mem_upload(synced["listed"] / "t-0", prefix)
    fs = OverwrittenMemory(f"/{prefix}/t-0/{ACTIVE_LOG}",
                           b"".join(run_of(b"ACT", ROLLED, ACTIVE // 2)))
    log = kbatch.open_log(f"/{prefix}/t-0", filesystem=fs, block=BLOCK, retries=1)
    with caplog.at_level(logging.WARNING, logger="kbatch.remote"):
        got = log.read()
    assert fs.done
    assert _values(got) == encoded("listed")[:ROLLED + ACTIVE // 2]
    assert "object shorter than its listed size" in caplog.text
    assert f"listing memory:///{prefix}/t-0 again" in caplog.text


def test_a_chunked_read_overlapping_a_sync_still_raises(s3, synced):
    """``iter`` has handed chunks out before the change shows: not read
    again, it raises (a new read sees the synced partition)."""
    prefix = "sync-iter"
    s3.put_dir(str(synced["listed"]), prefix)
    _upload_after_get(s3, f"{prefix}/t-0/{ACTIVE_LOG}",
                      (synced["synced"] / "t-0" / ACTIVE_LOG).read_bytes())
    log = kbatch.open_log(f"s3://{BUCKET}/{prefix}/t-0", storage_options=s3.options(),
                          block=BLOCK)
    with pytest.raises(FileChangedError, match="object changed since it was listed"):
        list(log.iter(chunk_records=50))
    assert _values(log.read()) == encoded("synced")


# --- costs ----------------------------------------------------------------------

def test_a_read_checks_each_segment_once(s3, versions):
    """A seek costs the index and one range (tests/test_remote_plain.py) and
    one HEAD: the object is still the one listed once its bytes are read."""
    s3.put_dir(str(versions["old"]), "cost/t-0")
    log = kbatch.open_log(f"s3://{BUCKET}/cost/t-0", storage_options=s3.options())
    log.segments
    s3.proxy.reset()
    assert _values(log.read(1500, 1502)) == [b"OLD%04d" % i + b"x" * PAD for i in (1500, 1501)]
    assert s3.proxy.requests == {"GET": 2, "HEAD": 1}


# --- F4: a PartitionLog shared by threads -----------------------------------------
# Every read works on one snapshot of its partition's listing; a relist (by
# another thread's read of the same log) puts the new listing in place in one
# step and never changes the listing of a read in flight.

T0 = 1_700_000_000_000


def _put(prefix: str, files: dict):
    """``files`` (name: bytes) as memory://``prefix``/t-0; the filesystem."""
    mem = fsspec.filesystem("memory")
    for name, data in files.items():
        mem.pipe(f"/{prefix}/t-0/{name}", data)
    return mem


def _txn_partition():
    """``(files as listed, active segment as synced, values of each state
    read_committed)``: 0..9 plain records (PLN); the active segment holds
    a transaction (TXN, offsets 10..14) still open as listed, committed
    (marker at 15) and followed by 16..19 (NEW) once synced."""
    from .kafka_ref import control_batch
    rolled = b"".join(build_batch([(T0 + i, b"k%d" % i, b"PLN%04d" % i, [])], base_offset=i)
                      for i in range(10))
    txn = build_batch([(T0 + i, b"k%d" % i, b"TXN%04d" % i, []) for i in range(10, 15)],
                      base_offset=10, producer_id=7, producer_epoch=0, base_sequence=0,
                      transactional=True)
    synced = txn + control_batch(base_offset=15, producer_id=7, producer_epoch=0) + b"".join(
        build_batch([(T0 + i, b"k%d" % i, b"NEW%04d" % i, [])], base_offset=i)
        for i in range(16, 20))
    listed = {LOG: rolled, f"{10:020d}.log": txn}
    want = {"listed": [b"PLN%04d" % i for i in range(10)]}
    want["synced"] = (want["listed"] + [b"TXN%04d" % i for i in range(10, 15)]
                      + [b"NEW%04d" % i for i in range(16, 20)])
    return listed, synced, want


def test_a_log_dir_shared_by_threads_answers_one_listing(monkeypatch):
    """Thread A's read_committed read of a data directory has decoded the
    partition as listed when thread B's read of the same ``LogDir`` finds
    the active segment synced and lists the partition again. A's answer is
    one state of the partition (its records and transactions of one
    listing), never the listed records filtered by the synced transactions
    (the transaction committed, the records after it missing)."""
    import threading

    import kbatch.lib.log as logmod
    prefix = "threads-txn"
    listed, synced, want = _txn_partition()
    mem = _put(prefix, listed)
    logs = kbatch.open_log_dir(f"memory://{prefix}")
    settled, paused, go, calls = logmod._settled, threading.Event(), threading.Event(), []

    def hold_first(part, runs, txn_options):     # A, once its runs are decoded
        calls.append(part)
        if len(calls) == 1:
            paused.set()
            go.wait(30)
        return settled(part, runs, txn_options)
    monkeypatch.setattr(logmod, "_settled", hold_first)
    got = {}
    a = threading.Thread(target=lambda: got.setdefault(
        "a", logs.read(isolation="read_committed", threads=2)))
    a.start()
    try:
        assert paused.wait(30)
        mem.pipe(f"/{prefix}/t-0/{10:020d}.log", synced)     # the sync lands
        b = logs.read(isolation="read_committed", threads=2)
    finally:
        go.set()
        a.join(30)
    assert _values(b[("t", 0)]) == want["synced"]
    assert _values(got["a"][("t", 0)]) in (want["listed"], want["synced"])


def test_a_snapshot_keeps_its_listing_when_the_log_is_listed_again():
    """A read's snapshot of a log is the listing as it was; the log itself
    is the new listing once relisted, its segments and listing together."""
    prefix = "threads-snapshot"
    listed, synced, _ = _txn_partition()
    mem = _put(prefix, listed)
    log = kbatch.open_log(f"memory://{prefix}/t-0")
    view = log.snapshot()
    mem.rm(f"/{prefix}/t-0/{LOG}")
    mem.pipe(f"/{prefix}/t-0/{10:020d}.log", synced)
    log.relist()
    assert [s.size for s in view.segments] == [len(d) for d in listed.values()]
    assert len(view.listing) == 2
    assert [s.size for s in log.segments] == [len(synced)]
    assert len(log.listing) == 1


# --- F5: an object deleted since the partition was listed ---------------------------
# Retention deletes the oldest segment (the log start moved; ``aws s3 sync
# --delete`` deletes it in the bucket), the cleaner deletes the segments it
# cleaned into another one: a read of whole partitions lists again and reads
# the partition as it is then, as for an object that changed.

STEP = 10       # one-record batches per segment: segments at 0, 10, 20


def _three_segments(prefix: str) -> dict:
    """Segments at 0 (values A...), 10 (B...) and 20 (C..., the active
    one) in memory://``prefix``/t-0, and beside it t-1 (one segment, D...)."""
    mem = fsspec.filesystem("memory")
    names = {}
    for k, tag in enumerate((b"A", b"B", b"C")):
        names[tag] = f"{k * STEP:020d}.log"
        mem.pipe(f"/{prefix}/t-0/{names[tag]}", _run(tag, k * STEP, STEP))
    mem.pipe(f"/{prefix}/t-1/{LOG}", _run(b"D", 0, STEP))
    return names


def _vals(tag: bytes, first: int, n: int, step: int = 1) -> list[tuple[int, bytes]]:
    """``(offset, value)`` of the records of ``_run(tag, first, n, step)``."""
    return [(i, tag + b"SG%04d" % i + b"x" * PAD) for i in range(first, first + n, step)]


def _run(tag: bytes, first: int, n: int, step: int = 1) -> bytes:
    """One-record batches at offsets ``first``, ``first + step``, ... below
    ``first + n`` (a compacted segment: gaps), values ``tag`` SG offset."""
    return b"".join(build_batch([(T0 + i, b"k%04d" % i, v, [])], base_offset=i)
                    for i, v in _vals(tag, first, n, step))


DELETIONS = {
    # the log start moved: the oldest segment deleted
    "oldest": ({b"A"}, {}, _vals(b"B", 10, STEP) + _vals(b"C", 20, STEP)),
    # a segment in the middle gone, later ones still there: the cleaner
    # cleaned it into the one before, which it rewrote (swapped in)
    "middle, cleaned into the one before": (
        {b"B"}, {b"A": (b"N", 0, 2 * STEP, 1)}, _vals(b"N", 0, 2 * STEP) + _vals(b"C", 20, STEP)),
    # the oldest two gone, the log start moved past both
    "oldest two": ({b"A", b"B"}, {}, _vals(b"C", 20, STEP)),
}


def _batch_offsets(table, partition: int = 0) -> list[int]:
    return [r["baseOffset"] for r in table.to_pylist() if r["partition"] == partition]


# (open the partition or data directory: listed, read it once objects were deleted)
DELETED_READS = {
    "log read": (lambda url: kbatch.open_log(f"{url}/t-0"),
                 lambda log: _values(log.read()), lambda want: [v for _, v in want]),
    "log read from": (lambda url: kbatch.open_log(f"{url}/t-0"),
                      lambda log: _values(log.read(5)),
                      lambda want: [v for o, v in want if o >= 5]),
    "log batches": (lambda url: kbatch.open_log(f"{url}/t-0"),
                    lambda log: log.read(level="batches").column("baseOffset").to_pylist(),
                    lambda want: [o for o, _ in want]),
    "log dir": (kbatch.open_log_dir, lambda d: _values(d.read()[("t", 0)]),
                lambda want: [v for _, v in want]),
    "log dir committed": (kbatch.open_log_dir,
                          lambda d: _values(d.read(isolation="read_committed")[("t", 0)]),
                          lambda want: [v for _, v in want]),
    "log dir from": (kbatch.open_log_dir, lambda d: _values(d.read(start_offset=5)[("t", 0)]),
                     lambda want: [v for o, v in want if o >= 5]),
    "log dir batches": (kbatch.open_log_dir, lambda d: _batch_offsets(d.read(level="batches")),
                        lambda want: [o for o, _ in want]),
}


@pytest.mark.parametrize("how", sorted(DELETED_READS))
@pytest.mark.parametrize("case", sorted(DELETIONS))
def test_a_segment_deleted_since_listing_is_read_again_whole(how, case, caplog):
    """Opened (listed), then a segment deleted before the read reaches it: the read lists again
    (warned of) and answers with the partition as it is now, whole; a
    chunked read of a log listed before the deletion still raises."""
    prefix = f"deleted-{case}-{how.replace(' ', '-')}"
    names = _three_segments(prefix)
    gone, rewritten, want = DELETIONS[case]
    opened, read, expect = DELETED_READS[how]
    url = f"memory://{prefix}"
    target = opened(url)
    chunked = kbatch.open_log(f"{url}/t-0")
    mem = fsspec.filesystem("memory")
    for tag in gone:
        mem.rm(f"/{prefix}/t-0/{names[tag]}")
    for tag, (new, first, n, step) in rewritten.items():
        mem.pipe(f"/{prefix}/t-0/{names[tag]}", _run(new, first, n, step))
    with caplog.at_level(logging.WARNING, logger="kbatch.remote"):
        assert read(target) == expect(want)
    if not rewritten:    # (else the rewritten segment, read first, is found changed)
        assert "no such object" in caplog.text
    assert f"listing {url}/t-0 again and reading it again (read 2 of at most 3)" in caplog.text
    with pytest.raises(kbatch.FileChangedError if rewritten else kbatch.MissingObjectError):
        list(chunked.iter())


@pytest.mark.parametrize("how", sorted(DELETED_READS))
def test_a_segment_gone_from_the_middle_with_the_one_before_unchanged_raises(how):
    """A segment gone from the middle while the segment before it is
    unchanged: not retention (which deletes the oldest), not the cleaner
    (which rewrites the segment it cleans the deleted ones into), but, say,
    a sync that deleted the cleaned segments and has not yet uploaded the
    rewritten one. Read again, the partition would lack offsets 10..19 and
    look whole: the read raises a MissingObjectError naming them."""
    prefix = f"deleted-unexplained-{how.replace(' ', '-')}"
    names = _three_segments(prefix)
    opened, read, _ = DELETED_READS[how]
    target = opened(f"memory://{prefix}")
    fsspec.filesystem("memory").rm(f"/{prefix}/t-0/{names[b'B']}")
    with pytest.raises(kbatch.MissingObjectError, match=r"offsets \[10, 20\) would be missing"):
        read(target)


def test_a_deletion_behind_a_changed_segment_is_still_found():
    """The read meets a rewritten segment first (FileChangedError), and a
    segment gone from the middle behind an unchanged one: the listing is
    compared all the same, and the range named runs to the next segment
    still there (two consecutive segments gone)."""
    prefix = "deleted-behind-changed"
    mem = fsspec.filesystem("memory")
    names = [f"{k * STEP:020d}.log" for k in range(5)]
    for k, name in enumerate(names):
        mem.pipe(f"/{prefix}/t-0/{name}", _run(b"ABCDE"[k:k + 1], k * STEP, STEP))
    log = kbatch.open_log(f"memory://{prefix}/t-0")
    mem.pipe(f"/{prefix}/t-0/{names[0]}", _run(b"N", 0, STEP - 1))     # rewritten, shorter
    mem.rm(f"/{prefix}/t-0/{names[2]}")
    mem.rm(f"/{prefix}/t-0/{names[3]}")
    with pytest.raises(kbatch.MissingObjectError, match=r"offsets \[20, 40\) would be missing"):
        log.read()


class PhantomMemory(MemoryFileSystem):
    """memory:// whose listings of ``prefix`` always name a segment at
    offset 0 that is not there (a listing that keeps naming a deleted
    object)."""

    protocol = "memory"
    cachable = False

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def ls(self, path, detail=True, **kwargs):
        out = super().ls(path, detail=detail, **kwargs)
        if path.strip("/") == self.prefix.strip("/"):
            phantom = f"/{self.prefix.strip('/')}/{LOG}"
            entry = {"name": phantom, "size": 500, "type": "file", "created": 1.0}
            out = [e for e in out if (e["name"] if detail else e) != phantom]
            out.append(entry if detail else phantom)
        return out


def test_a_partition_whose_listing_keeps_naming_a_deleted_segment_raises(caplog):
    """Every listing names a segment that is gone: after three reads (two
    new listings, each warned of) the MissingObjectError is raised."""
    prefix = "deleted-phantom"
    names = _three_segments(prefix)
    fsspec.filesystem("memory").rm(f"/{prefix}/t-0/{names[b'A']}")
    fs = PhantomMemory(f"/{prefix}/t-0")
    log = kbatch.open_log(f"/{prefix}/t-0", filesystem=fs)
    assert [s.base_offset for s in log.segments] == [0, 10, 20]
    with caplog.at_level(logging.WARNING, logger="kbatch.remote"):
        with pytest.raises(kbatch.MissingObjectError, match="no such object"):
            log.read()
    assert caplog.text.count("again and reading it again") == 2
    assert "read 3 of at most 3" in caplog.text


class _Seg:
    """A listed segment as ``unexplained_deletion`` sees it."""

    def __init__(self, name: str, base: int, version: int = 1):
        self.name, self.base_offset, self._version = name, base, version

    def version(self):
        return (self._version,)


@pytest.mark.parametrize("old, new, gone", [
    # retention: the oldest, or the oldest two
    ([("a", 0), ("b", 10), ("c", 20)], [("b", 10), ("c", 20)], None),
    ([("a", 0), ("b", 10), ("c", 20)], [("c", 20)], None),
    # the cleaner: segments cleaned into the one before them, rewritten
    ([("a", 0), ("b", 10), ("c", 20)], [("a", 0, 2), ("c", 20)], None),
    ([("a", 0), ("b", 10), ("c", 20), ("d", 30)], [("a", 0, 2), ("d", 30)], None),
    ([("a", 0), ("b", 10), ("c", 20), ("d", 30)], [("a", 0), ("b", 10, 2), ("d", 30)], None),
    # a tiered upload given way to another upload of its offsets
    ([("a", 0), ("b", 10), ("c", 20)], [("a", 0), ("b2", 10), ("c", 20)], None),
    ([("a", 0), ("b", 10), ("c", 20)], [("a", 0), ("b2", 5), ("c", 20)], None),
    # gone from the middle, the one before as it was: unexplained
    ([("a", 0), ("b", 10), ("c", 20)], [("a", 0), ("c", 20)], "b"),
    ([("a", 0), ("b", 10), ("c", 20)], [("a", 0)], "b"),
    ([("a", 0), ("b", 10), ("c", 20), ("d", 30)], [("a", 0, 2), ("b", 10), ("d", 30)], "c"),
    # a cleaner's swap beside the rewritten segment: there (its base), fresh
    ([("a", 0), ("b", 10), ("c", 20), ("d", 30)], [("a", 0), ("b.swap", 10), ("d", 30)], None),
    ([("a", 0), ("b.swap", 10), ("d", 30)], [("a", 0), ("b", 10), ("d", 30)], None),
    # a fresh segment that starts after the gone one explains nothing
    ([("a", 0), ("b", 10), ("c", 20)], [("a", 0), ("c", 20), ("e", 40)], "b"),
    # nor one before the last unchanged segment before it
    ([("a", 0), ("b", 10), ("c", 20), ("d", 30)], [("a", 0, 2), ("b", 10), ("d", 30)], "c"),
])
def test_which_deletions_retention_or_the_cleaner_explain(old, new, gone):
    from kbatch.lib.relist import unexplained_deletion
    got = unexplained_deletion([_Seg(*s) for s in old], [_Seg(*s) for s in new])
    assert (None if got is None else got.name) == gone
