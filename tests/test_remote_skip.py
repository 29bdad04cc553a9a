"""``on_corrupt="skip"`` over a URL streams: the windowed decode stops at
damage, searches past it in windows and goes on, giving what the same bytes give as
a local file (records, skipped ranges, end), without holding the object.

Truth is the local read of the same bytes (the mapped path, a separate
implementation of the walk and its resync); the damage is drawn by
Hypothesis."""

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kbatch
from kbatch.lib import sources as scan_module
from kbatch.lib.objects import RangeSource
from kbatch.lib.segment import DecodeOptions
from kbatch.lib.sources import RemoteBytes

BLOCK = 1 << 16        # the smallest block a RangeSource reads


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    """One ~300 KiB segment: ~600 batches of 1-4 records, values of mixed size."""
    d = tmp_path_factory.mktemp("skip") / "t-0"
    w = kbatch.LogWriter(d, segment_bytes=1 << 30)
    for i in range(600):
        n = 1 + i % 4
        w.append([(b"k%d" % i, bytes([i % 251]) * (40 + (i * 37) % 900), 1000 + i, [])
                  for _ in range(n)])
    w.close()
    (path,) = sorted(d.glob("*.log"))
    return Segment(path.read_bytes())


class Segment(bytes):
    """The fixture's bytes, with a short repr (Hypothesis prints failing inputs)."""

    def __repr__(self):
        return f"<segment of {len(self)} bytes>"


class CountingSource(RangeSource):
    """A RangeSource that records the largest single read."""

    largest = 0

    def read(self, start, stop):
        data = super().read(start, stop)
        CountingSource.largest = max(CountingSource.largest, len(data))
        return data


def _normal(records, name):
    gaps = [(g.start, g.stop, g.reason, g.offset_before, g.offset_after,
             None if g.error is None else g.error.replace(name, "<file>"))
            for g in records.skipped]
    end = records.end
    return (records.offset.tolist(), records.value.to_pylist(), gaps,
            None if end is None else (end.valid_bytes, end.trailing_bytes, end.reason))


def _local(tmp_path, data):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return kbatch.read_segment(path, on_corrupt="skip"), str(path)


def _remote(data, window, chunk_records=1 << 62):
    fs = fsspec.filesystem("memory")
    fs.pipe("/skip/00000000000000000000.log", bytes(data))
    src = CountingSource(fs, "/skip/00000000000000000000.log", url="memory://skip/x.log",
                         block=BLOCK, concurrency=2)
    old = scan_module.RESYNC_WINDOW
    scan_module.RESYNC_WINDOW = window
    try:
        parts = list(RemoteBytes(src).chunks(DecodeOptions(on_corrupt="skip"),
                                      chunk_records=chunk_records))
    finally:
        scan_module.RESYNC_WINDOW = old
    return kbatch.Records.concat(parts), "memory://skip/x.log"


damage = st.lists(
    st.tuples(st.sampled_from(["flip", "zeros", "random"]), st.floats(0, 0.999),
              st.integers(1, 3000), st.binary(min_size=1, max_size=64)),
    min_size=1, max_size=3)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=damage, window=st.sampled_from([64, 1000, 1 << 16]),
       chunk=st.sampled_from([7, 1 << 62]))
def test_remote_skip_equals_the_local_read(tmp_path, segment, damage, window, chunk):
    data = bytearray(segment)
    for kind, where, size, noise in damage:
        at = int(where * len(data))
        stop = min(len(data), at + size)
        if kind == "flip":
            data[at] ^= noise[0] | 1
        elif kind == "zeros":
            data[at:stop] = bytes(stop - at)
        else:
            data[at:stop] = (noise * (size // len(noise) + 1))[:stop - at]
    local, lname = _local(tmp_path, data)
    remote, rname = _remote(data, window, chunk)
    assert _normal(remote, rname) == _normal(local, lname)


def test_a_damaged_object_is_not_read_whole(tmp_path, segment):
    """Garbage in the middle of the object: the records after it come back,
    and no read takes the rest of the object (before, a skip read fetched
    everything from its start in one range). Reads: blocks, search windows,
    and a false candidate's claimed batch (here about 190 KiB)."""
    local_one = kbatch.read_segment(memoryview(segment))
    data = bytearray(segment)
    mid = len(data) // 2
    data[mid:mid + 5000] = bytes(range(256)) * 19 + bytes(136)
    CountingSource.largest = 0
    remote, _ = _remote(data, 1 << 15)
    local, _ = _local(tmp_path, data)
    assert remote.offset.tolist() == local.offset.tolist()
    assert len(remote.skipped) == 1 and remote.skipped[0].start <= mid
    assert len(remote) < len(local_one) and remote.offset[-1] == local_one.offset[-1]
    assert CountingSource.largest < (len(data) - mid) * 0.6


def test_zeros_inside_an_object_are_damage_not_its_end(tmp_path, segment):
    """Zeros that stop at a block boundary but not at the object's end: a
    local file calls them corrupt (data follows); so does the remote scan,
    in every on_corrupt mode."""
    data = bytearray(segment)
    cut = BLOCK - 100
    data[cut:BLOCK] = bytes(BLOCK - cut)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fs = fsspec.filesystem("memory")
    fs.pipe("/zeros/00000000000000000000.log", bytes(data))
    for mode in ("raise", "stop", "skip"):
        src = RangeSource(fs, "/zeros/00000000000000000000.log", url="memory://z",
                          block=BLOCK, concurrency=1)
        opts = DecodeOptions(on_corrupt=mode)
        if mode == "raise":
            with pytest.raises(kbatch.CorruptRecordError):
                kbatch.read_segment(path)
            with pytest.raises(kbatch.CorruptRecordError):
                list(RemoteBytes(src).chunks(opts))
            continue
        local = kbatch.read_segment(path, on_corrupt=mode)
        remote = kbatch.Records.concat(list(RemoteBytes(src).chunks(opts)))
        assert remote.offset.tolist() == local.offset.tolist()
        assert (remote.end.valid_bytes, remote.end.reason) == (local.end.valid_bytes,
                                                               local.end.reason)
        assert [(g.start, g.stop, g.reason) for g in remote.skipped] == \
            [(g.start, g.stop, g.reason) for g in local.skipped]
