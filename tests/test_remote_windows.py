"""An object read window by window gives the answer of the same bytes in a
file where a window's edge falls on something only the whole file shows:
a zero-filled tail longer than a window (a preallocated or copied active
segment), a long run of zeros followed by other bytes (damage), and bad
arguments. ``block`` is made small so every case spans many windows.
"""

from __future__ import annotations

import uuid

import pytest

import kbatch

from . import parity_cases as pc

fsspec = pytest.importorskip("fsspec")
BLOCK = 16 << 10


def upload(files: dict[str, bytes]) -> str:
    prefix = f"win-{uuid.uuid4().hex[:10]}"
    fs = fsspec.filesystem("memory")
    for rel, data in files.items():
        fs.pipe_file(f"/{prefix}/{rel}", data)
    return f"memory://{prefix}"


def outcome(call):
    """What a read gave: its records, end and skipped ranges, or its error."""
    try:
        chunks = call()
        chunks = chunks if isinstance(chunks, list) else [chunks]
    except kbatch.CorruptRecordError as exc:
        return ("error", type(exc).__name__, exc.reason, exc.position)
    end = chunks[-1].end
    return ([(int(o), v) for c in chunks for o, v in zip(c.offset, c.value.to_pylist())],
            None if end is None else (end.valid_bytes, end.trailing_bytes, end.reason),
            [(g.start, g.stop, g.reason) for c in chunks for g in c.skipped])


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    part = tmp_path_factory.mktemp("win") / "w-0"
    pc.write_partition(part, 600, segment_bytes=1 << 30, batch_records=20,
                       index_interval_bytes=4096)
    return pc.segments(part)[0].read_bytes()


@pytest.mark.parametrize("damage", ["tail", "zeros-then-bytes"])
@pytest.mark.parametrize("mode", ["raise", "stop", "skip"])
def test_long_zero_runs_read_as_in_a_file(tmp_path, healthy, damage, mode):
    zeros = bytes(5 * BLOCK + 123)
    data = healthy + zeros
    if damage == "zeros-then-bytes":
        data += b"\x01garbage" + bytes(40)
    local = tmp_path / f"{0:020d}.log"
    local.write_bytes(data)
    url = upload({"p-0/" + local.name: data}) + "/p-0/" + local.name
    for reader in (lambda t, **kw: list(kbatch.iter_segment(t, chunk_records=97, **kw)),
                   lambda t, **kw: kbatch.read_segment(t, **kw)):
        here = outcome(lambda: reader(local, on_corrupt=mode))
        there = outcome(lambda: reader(url, on_corrupt=mode, block=BLOCK))
        assert there == here
    if damage == "tail":
        assert here[1][2] == "zero_padding" and not here[2]


def test_a_preallocated_active_segment_verifies_as_in_a_file(tmp_path, healthy):
    part = tmp_path / "v-0"
    part.mkdir()
    data = healthy + bytes(7 * BLOCK)
    (part / f"{0:020d}.log").write_bytes(data)
    url = upload({f"v-0/{0:020d}.log": data}) + "/v-0"
    log_here, log_there = kbatch.open_log(part), kbatch.open_log(url, block=BLOCK)
    assert outcome(lambda: list(log_there.iter(chunk_records=50))) == \
        outcome(lambda: list(log_here.iter(chunk_records=50)))
    from kbatch.tools.verify import verify
    assert verify(url, block=BLOCK).ok and verify(part).ok


def test_a_start_outside_the_object_is_refused_as_for_a_file(tmp_path, healthy):
    local = tmp_path / f"{0:020d}.log"
    local.write_bytes(healthy)
    url = upload({"s-0/" + local.name: healthy}) + "/s-0/" + local.name
    for start in (-5, len(healthy) + 1):
        for call in (kbatch.read_segment, lambda t, **kw: list(kbatch.iter_segment(t, **kw))):
            with pytest.raises(ValueError) as here:
                call(local, start=start)
            with pytest.raises(ValueError) as there:
                call(url, start=start)
            assert type(there.value) is type(here.value)
            assert str(there.value).split(": ", 1)[-1] == str(here.value).split(": ", 1)[-1]
