"""LogWriter against the broker: re-appending the raw batches of real
broker-written partitions (../shared/corpus) must reproduce the broker's own
``.index``, ``.timeindex`` and ``.txnindex`` files byte for byte.

The broker's files are parsed here with ``struct`` (not kbatch.lib.index), and the
batches are cut out of the ``.log`` files here from the batch header.

How a partition is replayed (``replay``), following LogSegment.append:

- ``index.interval.bytes``: 4096 (the default) first; when that does not
  reproduce the files, the value inferred from the first offset index entry
  (``infer_interval``), which must then reproduce every segment.
- appends: a leader appends each producer batch alone, a follower appends
  what one fetch returned (several batches) at once, with one index entry
  at most, at the first batch, naming the last offset of the whole append.
  ``appends="batch"`` replays one batch per append; ``appends="broker"``
  reads the broker's grouping off its offset index (an entry at position p
  naming offset o: the batches from p to the one ending at o were one
  append; the runs between such appends: one append each, which for single
  batches changes nothing since none of them was indexed).
- time index offsets: brokers up to 3.7 name the first record holding the
  max timestamp of an uncompressed producer batch (``"record"``), 3.8+ and
  followers the batch's last offset (``"batch"``); both are tried.
- segments roll where the broker's did (``LogWriter.roll``); the active
  segment is closed as a clean shutdown does (final time index entry,
  trimmed files). A preallocated (zero-padded) broker file is compared on
  its live entries: the zero tail is cut and the final entry, which a
  running broker has not written yet, is left out of ours.

A partition whose indexes are all empty and that is too small to have any
entry at 4096 bytes proves nothing about the interval: it is skipped.
"""

from __future__ import annotations

import pathlib
import shutil
import struct

from kbatch.lib.writer import LogWriter

INDEX_DIRS = [
    "dipendrasaini__kafka-learnning-series/tmp/kafka-logs",
    "macsakini__KafkaCluster/kafka/data",
    "ronem123__rupia-transaction-service/kafka-logs",
    "taha-hachidi__LogFile/kafka-data/data",
    "DonaldY__kafka-2.7.1/kafka-logs",
]
SUFFIXES = ((".index", 8), (".timeindex", 12), (".txnindex", 34))


def raw_batches(buf: bytes) -> list[tuple[int, bytes]]:
    """(position, bytes) of every whole magic-2 batch, from the headers."""
    out, pos = [], 0
    while 61 <= len(buf) - pos:
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        if length < 49 or length > len(buf) - pos - 12:
            break
        assert buf[pos + 16] == 2, "only magic 2 partitions carry these indexes here"
        out.append((pos, buf[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def last_offset(batch: bytes) -> int:
    return struct.unpack_from(">q", batch)[0] + struct.unpack_from(">i", batch, 23)[0]


def live_entries(data: bytes, size: int) -> tuple[bytes, bool]:
    """Entries before a zero tail, and whether there was one (preallocated)."""
    n = len(data) // size
    end = n
    while end and data[(end - 1) * size:end * size] == bytes(size):
        end -= 1
    return data[:end * size], end != n


def offset_entries(path: pathlib.Path) -> list[tuple[int, int]]:
    data = path.read_bytes() if path.exists() else b""
    data, _ = live_entries(data, 8)
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def groups(seg: pathlib.Path, batches, appends: str, cuts=()) -> list[list[tuple[int, bytes]]]:
    """The appends that wrote ``batches`` (see the module docstring); a run
    also ends before each position in ``cuts``."""
    if appends == "batch":
        return [[pb] for pb in batches]
    base = int(seg.stem)
    entries = {pos: base + rel for rel, pos in offset_entries(seg.with_suffix(".index"))}
    out, run, i = [], [], 0
    while i < len(batches):
        pos, b = batches[i]
        if run and pos in cuts:
            out.append(run)
            run = []
        if pos in entries:
            if run:
                out.append(run)
                run = []
            chunk = [batches[i]]
            while last_offset(chunk[-1][1]) < entries[pos] and i + 1 < len(batches):
                i += 1
                chunk.append(batches[i])
            out.append(chunk)
        else:
            run.append(batches[i])
        i += 1
    if run:
        out.append(run)
    return out


def replay(part: pathlib.Path, out: pathlib.Path, interval: int, appends: str,
           time_offsets: str, restarts: frozenset = frozenset()) -> list[pathlib.Path]:
    """Re-append every batch of ``part`` into ``out``; ``restarts``: (segment
    name, batch position) before which the broker restarted cleanly."""
    segs = sorted(part.glob("*.log"))
    shutil.rmtree(out, ignore_errors=True)      # (a writer starts new directories only)
    with LogWriter(out, base_offset=int(segs[0].stem), index_interval_bytes=interval,
                   preallocate_indexes=False, time_index_offset=time_offsets) as w:
        for k, seg in enumerate(segs):
            if k:
                w.roll(int(seg.stem))
            batches = raw_batches(seg.read_bytes())
            cuts = sorted(p for name, p in restarts if name == seg.name)
            for group in groups(seg, batches, appends, cuts):
                if group[0][0] in cuts:
                    w.restart()
                w.append_batch(b"".join(b for _, b in group),
                               time_index_offset="batch" if len(group) > 1 else None)
    return segs


def time_entries(path: pathlib.Path) -> list[tuple[int, int]]:
    data = path.read_bytes() if path.exists() else b""
    data, _ = live_entries(data, 12)
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def find_restart(seg: pathlib.Path, mine: pathlib.Path) -> int | None:
    """A clean restart shows as a time index entry of the broker's that the
    replay lacks: LogSegment.close wrote (max timestamp so far, its offset)
    before any batch with a larger timestamp came. Returns the position of
    the first such batch (where to restart), or None."""
    theirs, ours = time_entries(seg.with_suffix(".timeindex")), time_entries(mine)
    extra = next((e for k, e in enumerate(theirs) if k >= len(ours) or ours[k] != e), None)
    if extra is None or extra in ours:
        return None
    for pos, b in raw_batches(seg.read_bytes()):
        if struct.unpack_from(">q", b, 35)[0] > extra[0]:
            return pos
    return None


def compare(seg: pathlib.Path, mine_dir: pathlib.Path) -> dict:
    """Per index file: 'same', 'same (live entries)', 'absent', or a mismatch."""
    out = {}
    for suffix, size in SUFFIXES:
        theirs = seg.with_suffix(suffix)
        mine = mine_dir / theirs.name
        mine_b = mine.read_bytes() if mine.exists() else b""
        if not theirs.exists():
            out[suffix] = "absent" if suffix != ".txnindex" or not mine_b else "extra"
            continue
        theirs_b, padded = live_entries(theirs.read_bytes(), size)
        if padded:
            # a running broker: no final time index entry yet
            if suffix == ".timeindex" and len(mine_b) == len(theirs_b) + size:
                mine_b = mine_b[:-size]
            out[suffix] = "same (live entries)" if mine_b == theirs_b else "DIFFERENT"
        else:
            out[suffix] = "same" if mine_b == theirs_b else "DIFFERENT"
    return out


def infer_interval(part: pathlib.Path) -> int | None:
    """index.interval.bytes from the first offset index entry of a segment
    written by one-batch appends: the entry is at the first batch whose
    bytes-before exceed the interval, so the interval lies in
    [bytes before the previous batch, bytes before the entry - 1]."""
    for seg in sorted(part.glob("*.log")):
        entries = offset_entries(seg.with_suffix(".index"))
        if not entries:
            continue
        positions = [p for p, _ in raw_batches(seg.read_bytes())]
        first = entries[0][1]
        if first in positions and positions.index(first) >= 1:
            return positions[positions.index(first) - 1]
    return None


def has_index_evidence(part: pathlib.Path) -> bool:
    """Some segment has an entry, or is big enough that 4096 would give one."""
    for seg in part.glob("*.log"):
        if offset_entries(seg.with_suffix(".index")):
            return True
        batches = raw_batches(seg.read_bytes())
        if len(batches) > 1 and batches[-1][0] > 4096:
            return True
    return False


def check_partition(part: pathlib.Path, tmp: pathlib.Path) -> dict:
    """Try the replays in order; the first that reproduces every index file
    of every segment that has them wins. Returns a summary row."""
    intervals = [4096]
    inferred = infer_interval(part)
    if inferred is not None and inferred != 4096:
        intervals.append(inferred)
    tried = []
    for interval in intervals:
        for appends in ("batch", "broker"):
            for time_offsets in ("batch", "record"):
                out = tmp / f"{part.name}-{interval}-{appends}-{time_offsets}"
                segs = replay(part, out, interval, appends, time_offsets)
                results = {seg.name: compare(seg, out) for seg in segs}
                ok = all("DIFFERENT" not in r.values() and "extra" not in r.values()
                         for r in results.values())
                restarts = frozenset()
                while not ok and appends == "broker" and len(restarts) < 20:
                    # clean broker restarts inside a segment (see find_restart)
                    found = {(seg.name, p) for seg in segs
                             if results[seg.name][".timeindex"] == "DIFFERENT"
                             and (p := find_restart(seg, out / seg.with_suffix(
                                 ".timeindex").name)) is not None}
                    if not found or found <= restarts:
                        break
                    restarts = restarts | found
                    out = out.with_name(out.name + "+")
                    replay(part, out, interval, appends, time_offsets, restarts)
                    results = {seg.name: compare(seg, out) for seg in segs}
                    ok = all("DIFFERENT" not in r.values() and "extra" not in r.values()
                             for r in results.values())
                tried.append((interval, appends, time_offsets, results))
                if ok:
                    return dict(ok=True, interval=interval, appends=appends,
                                time_offsets=time_offsets, results=results,
                                restarts=len(restarts))
    return dict(ok=False, tried=tried)


def corpus_partitions(corpus: pathlib.Path) -> list[pathlib.Path]:
    parts = []
    for d in INDEX_DIRS:
        for part in sorted((corpus / d).iterdir()):
            if part.is_dir() and any(s.stat().st_size for s in part.glob("*.log")) \
                    and any(part.glob("*.index")):
                parts.append(part)
    return parts


def test_every_corpus_partition_with_index_evidence_is_reproduced(corpus, tmp_path):
    parts = corpus_partitions(corpus)
    assert parts
    matched, skipped, failed = [], [], []
    for part in parts:
        row = check_partition(part, tmp_path)
        if not has_index_evidence(part):
            # proves nothing about the interval, but the files (an empty
            # .index, the final .timeindex entry of a closed segment) must
            # still come out the same
            skipped.append(part)
            if row["ok"]:
                continue
        (matched if row["ok"] else failed).append((part, row))
    assert not failed, [(str(p.relative_to(corpus)), [t[:3] + (
        {s: r for s, r in t[3].items() if "DIFFERENT" in r.values()},) for t in row["tried"]])
        for p, row in failed]
    # 12 partitions with index entries: 5 written by one-batch appends (a
    # leader), 7 whose entries show followers' multi-batch appends or restarts
    assert len(matched) >= 12
    assert sum(1 for _, r in matched if r["appends"] == "batch") >= 5
    compared = sum(v.startswith("same") for _, r in matched
                   for res in r["results"].values() for v in res.values())
    assert compared >= 30


def test_append_batch_unchanged_bytes_and_follower_index_entry(tmp_path):
    """One append of several batches: one entry at the first batch, naming
    the last offset of the append (what a follower's fetch writes)."""
    from kbatch.lib.writer import SegmentWriter
    import io
    src = io.BytesIO()
    with SegmentWriter(src, batch_records=10) as w:
        w.append([(None, b"x" * 100, 1000 + i) for i in range(100)])
    batches = raw_batches(src.getvalue())
    with LogWriter(tmp_path / "t-0", index_interval_bytes=0,
                   preallocate_indexes=False) as log:
        log.append_batch(b"".join(b for _, b in batches[:3]))
        log.append_batch(b"".join(b for _, b in batches[3:]))
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == src.getvalue()
    assert offset_entries(tmp_path / "t-0" / "00000000000000000000.index") == [
        (99, batches[3][0])]


def test_index_entry_only_when_bytes_since_the_last_exceed_the_interval(tmp_path):
    """LogSegment.append: ``bytesSinceLastIndexEntry > indexIntervalBytes``
    (strictly). Batches of S bytes with an interval of S: the second append
    has exactly S bytes behind it (no entry), the third 2S (entry); the
    counter restarts from the indexed batch's own size."""
    from kbatch.lib.writer import SegmentWriter
    import io
    src = io.BytesIO()
    with SegmentWriter(src, batch_records=1) as w:
        w.append([(None, b"x" * 50, 1000 + i) for i in range(7)])
    batches = raw_batches(src.getvalue())
    size = len(batches[0][1])
    assert all(len(b) == size for _, b in batches)
    with LogWriter(tmp_path / "t-0", index_interval_bytes=size,
                   preallocate_indexes=False) as log:
        for _, b in batches:
            log.append_batch(b)
    stem = tmp_path / "t-0" / "00000000000000000000"
    assert offset_entries(stem.with_suffix(".index")) == [(2, 2 * size), (4, 4 * size),
                                                          (6, 6 * size)]
    # time index: the max timestamp so far at each entry, then the final one
    assert time_entries(stem.with_suffix(".timeindex")) == [(1002, 2), (1004, 4), (1006, 6)]


def test_restart_and_running_broker_files(tmp_path):
    """A clean restart writes the final time entry and restarts the offset
    index counter; a running broker's active segment has zero-padded files
    without the final entry."""
    from kbatch.lib.writer import SegmentWriter
    import io
    src = io.BytesIO()
    with SegmentWriter(src, batch_records=1) as w:
        w.append([(None, b"x" * 50, 1000 + i) for i in range(6)])
    batches = raw_batches(src.getvalue())
    size = len(batches[0][1])
    with LogWriter(tmp_path / "a-0", index_interval_bytes=size) as log:
        for k, (_, b) in enumerate(batches):
            if k == 3:
                log.restart()
            log.append_batch(b)
    stem = tmp_path / "a-0" / "00000000000000000000"
    raw = stem.with_suffix(".timeindex").read_bytes()
    assert len(raw) == (10 * 1024 * 1024) // 12 * 12 and raw.rstrip(b"\0")
    assert offset_entries(stem.with_suffix(".index")) == [(2, 2 * size), (5, 5 * size)]
    # entry at batch 2, the restart's final entry (1002 at offset 2 is not
    # larger: skipped), then batch 5: 2 + restart -> counter 0 at batch 3
    assert time_entries(stem.with_suffix(".timeindex")) == [(1002, 2), (1005, 5)]
