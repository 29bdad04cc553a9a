"""A partition left in the middle of a cleaner's (or a split's) segment swap
is read as Kafka's LogLoader loads it, not without the swapped segment.

Kafka's LocalLog.replaceSegments renames the cleaned segment's files from
``.cleaned`` to ``.swap``, then each old segment's to ``.deleted``, then
drops the ``.swap`` suffix. A crash (or a backup taken) in between leaves
``.swap`` files whose data is nowhere else. The model below is written from
LogLoader (``removeTempFilesAndCollectSwapFiles`` and ``load``), on file
names and bytes alone:

    1. ``*.deleted`` files are deleted; ``*.cleaned`` files give the
       smallest cleaned offset (the number before the first dot)
    2. a ``*.swap`` file whose offset is >= that smallest cleaned offset is
       invalid (an interrupted split) and deleted; ``*.cleaned`` are deleted
    3. each valid ``<base>.log.swap`` spans [base, readNextOffset): its last
       batch's last offset + 1 (its base when it is empty)
    4. every other file whose offset lies in [smallest base, largest next
       offset) of the valid log swaps is deleted (the segments it replaced)
    5. the ``.swap`` suffixes are dropped

The expected records are kafka-python's decode of the ``.log`` files the
model leaves, in base offset order; the copies ``recover``, ``retention``
and ``compact`` write hold the files the model leaves.
"""

from __future__ import annotations

import struct

import pytest

import kbatch
from tests.kafka_ref import build_batch, read_with_kafka_python
from tests.parity_cases import drop_memory, memory_site


def batches(first: int, last: int, tag: bytes, step: int = 1) -> bytes:
    """Magic-2 batches of one record each, offsets first..last by ``step``."""
    return b"".join(build_batch([(1_700_000_000_000 + o, b"k%d" % (o % 7), tag + b"%d" % o, [])],
                                base_offset=o) for o in range(first, last + 1, step))


def _offset_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _next_offset(log: bytes, base: int) -> int:
    """LogSegment.readNextOffset: the last batch's last offset + 1."""
    pos, nxt = 0, base
    while len(log) - pos >= 61:
        first, length = struct.unpack_from(">qi", log, pos)
        last_delta, = struct.unpack_from(">i", log, pos + 23)
        nxt = first + last_delta + 1
        pos += 12 + length
    return nxt


def kafka_load(files: dict[str, bytes]) -> dict[str, bytes]:
    files = {n: b for n, b in files.items() if not n.endswith(".deleted")}
    cleaned = [_offset_of(n) for n in files if n.endswith(".cleaned")]
    least = min(cleaned) if cleaned else float("inf")
    files = {n: b for n, b in files.items()
             if not n.endswith(".cleaned") and not (n.endswith(".swap") and _offset_of(n) >= least)}
    spans = [(_offset_of(n), _next_offset(b, _offset_of(n))) for n, b in files.items()
             if n.endswith(".log.swap")]
    if spans:
        lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
        files = {n: b for n, b in files.items()
                 if n.endswith(".swap") or _offset_of(n) is None or not lo <= _offset_of(n) < hi}
    loaded = {n: b for n, b in files.items() if not n.endswith(".swap")}
    # renamed over the file of that name (an empty swap's span is empty)
    loaded.update({n[:-len(".swap")]: b for n, b in files.items() if n.endswith(".swap")})
    return loaded


def expected(files: dict[str, bytes]) -> list[tuple[int, bytes]]:
    loaded = kafka_load(files)
    out = []
    for name in sorted(n for n in loaded if n.endswith(".log")):
        out += [(r["offset"], r["value"]) for r in read_with_kafka_python(loaded[name]).records]
    return out


def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


OLD0, OLD1, LIVE = batches(0, 99, b"old"), batches(100, 199, b"old"), batches(200, 299, b"live")
CLEANED = batches(0, 199, b"new", step=2)      # compacted: every other offset kept


CASES = {
    # the cleaned files renamed to .swap, nothing else yet
    "swap-before-deletes": {name(0, ".log"): OLD0, name(100, ".log"): OLD1,
                            name(0, ".log.swap"): CLEANED, name(200, ".log"): LIVE},
    # the first old segment renamed to .deleted
    "one-deleted": {name(0, ".log.deleted"): OLD0, name(100, ".log"): OLD1,
                    name(0, ".log.swap"): CLEANED, name(200, ".log"): LIVE},
    # both old segments renamed to .deleted, the .swap suffix not yet dropped
    "all-deleted": {name(0, ".log.deleted"): OLD0, name(100, ".log.deleted"): OLD1,
                    name(0, ".log.swap"): CLEANED, name(200, ".log"): LIVE},
    # a .swap at or above a .cleaned file: an interrupted split, not used
    "invalid-swap": {name(0, ".log"): OLD0, name(100, ".log"): OLD1,
                     name(100, ".log.cleaned"): OLD1,
                     name(100, ".log.swap"): batches(100, 199, b"split"), name(200, ".log"): LIVE},
    # a swap below a .cleaned file is valid; the .cleaned one is not a segment
    "swap-below-cleaned": {name(0, ".log.deleted"): OLD0, name(100, ".log"): OLD1,
                           name(0, ".log.swap"): CLEANED, name(200, ".log.cleaned"): LIVE,
                           name(200, ".log"): LIVE},
    # the replaced segments' index files still there (not orphans: replaced)
    "stale-indexes": {name(0, ".log"): OLD0, name(0, ".index"): struct.pack(">ii", 90, 6930),
                      name(100, ".log"): OLD1, name(100, ".index"): struct.pack(">ii", 90, 6930),
                      name(0, ".log.swap"): CLEANED, name(200, ".log"): LIVE},
    # LogLoader's (or replaceSegments') rename pass cut short after the log:
    # the cleaned log under its name, its index still .index.swap beside the
    # replaced segment's stale .index; the swap is renamed over it
    "index-swap-left": {name(0, ".log"): CLEANED, name(0, ".index"): struct.pack(">ii", 90, 6930),
                        name(0, ".index.swap"): b"", name(0, ".timeindex.swap"): b"",
                        name(200, ".log"): LIVE},
    # a cleaned group whose records were all removed: an empty swap still
    # takes the place of the segment of its name
    "empty-swap": {name(0, ".log"): OLD0, name(100, ".log"): OLD1,
                   name(0, ".log.swap"): b"", name(200, ".log"): LIVE},
    # a swap whose data runs past the next segment's base replaces it too
    "swap-spans-two": {name(0, ".log.swap"): batches(0, 250, b"new", step=5),
                       name(100, ".log"): OLD1, name(200, ".log"): LIVE,
                       name(0, ".log.deleted"): OLD0},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_interrupted_swap_is_read_as_kafka_loads_it(tmp_path, case):
    files = CASES[case]
    part = tmp_path / "t-0"
    part.mkdir()
    for n, data in files.items():
        (part / n).write_bytes(data)
    want = expected(files)
    got = kbatch.open_log(part).read()
    assert list(zip(got.offset.tolist(), got.value.to_pylist())) == want
    assert got.end.reason is None and not got.skipped
    # ranges and the batch level agree with it
    lo, hi = 50, 260
    ranged = kbatch.open_log(part).read(lo, hi)
    assert ranged.offset.tolist() == [o for o, _ in want if lo <= o < hi]
    rows = kbatch.open_log(part).read(level="batches")
    assert sum(rows.column("records").to_pylist()) == len(want)
    # the same files through a data directory
    table = kbatch.read_table(tmp_path, columns=["offset"])
    assert table.column("offset").to_pylist() == [o for o, _ in want]
    report = kbatch.verify(part)
    assert report.ok, [s.problems() for s in report.segments]
    # the same bytes from object storage
    site = memory_site(tmp_path)
    try:
        remote = kbatch.open_log(f"{site.base}/t-0").read()
        assert list(zip(remote.offset.tolist(), remote.value.to_pylist())) == want
    finally:
        drop_memory(site)


def test_recover_writes_the_swapped_segment_under_its_name(tmp_path):
    files = CASES["all-deleted"]
    part = tmp_path / "src" / "t-0"
    part.mkdir(parents=True)
    for n, data in files.items():
        (part / n).write_bytes(data)
    kbatch.recover(part, tmp_path / "dest")
    out = tmp_path / "dest" / "t-0" if (tmp_path / "dest" / "t-0").is_dir() else tmp_path / "dest"
    assert sorted(p.name for p in out.glob("*.log")) == [name(0, ".log"), name(200, ".log")]
    got = kbatch.open_log(out).read()
    assert list(zip(got.offset.tolist(), got.value.to_pylist())) == expected(files)


def _latest(records: list[tuple[int, bytes, bytes]]) -> dict[bytes, tuple[int, bytes]]:
    table = {}
    for offset, key, value in records:
        table[key] = (offset, value)
    return table


@pytest.mark.parametrize("case", ["one-deleted", "all-deleted", "swap-spans-two"])
def test_copies_of_a_swapped_directory_complete_the_swap(tmp_path, case):
    """retention's and the cleaner's copies hold the files a broker leaves
    once it completes the swap: the swapped segment under its own name, not
    the segments it replaced, no .swap or .deleted file."""
    files = CASES[case]
    part = tmp_path / "src" / "t-0"
    part.mkdir(parents=True)
    for n, data in files.items():
        (part / n).write_bytes(data)
    loaded = kafka_load(files)
    want = expected(files)
    kept = kbatch.retention(part, retention_ms=1 << 60, now=1_700_000_000_000).apply(
        tmp_path / "kept")
    assert sorted(p.name for p in kept.iterdir() if p.name.endswith(".log")) == \
        sorted(n for n in loaded if n.endswith(".log"))
    got = kbatch.open_log(kept).read()
    assert list(zip(got.offset.tolist(), got.value.to_pylist())) == want
    kbatch.compact(part, tmp_path / "clean", now=1_700_000_000_000)
    clean = kbatch.open_log(tmp_path / "clean").read()
    assert not any(p.name.endswith((".swap", ".deleted")) for p in (tmp_path / "clean").iterdir())
    truth = []
    for n in sorted(x for x in loaded if x.endswith(".log")):
        truth += [(r["offset"], r["key"], r["value"])
                  for r in read_with_kafka_python(loaded[n]).records]
    table = {k: (o, v) for o, k, v in zip(clean.offset.tolist(), clean.key.to_pylist(),
                                          clean.value.to_pylist())}
    assert _latest(list(zip(clean.offset.tolist(), clean.key.to_pylist(),
                            clean.value.to_pylist()))) == _latest(truth)
    assert set(table) == set(_latest(truth))
