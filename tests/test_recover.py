"""``kbatch.recover``: against ``tests/lifecycle_ref.recover_model``
(LogSegment.recover and FileLogInputStream, written from Kafka's source)
on partitions written by tests/kafka_ref.py's encoders, healthy and
damaged (torn, bit-flipped, zero-padded, a wrong length), and on the real
corpus: the copied bytes, the rebuilt .index/.timeindex/.txnindex and
leader-epoch-checkpoint, the report of what was dropped, a clean verify,
and a read of the copy equal to kafka-python's decode of the valid prefix."""

from __future__ import annotations

import pathlib
import random
import struct

import pytest
from hypothesis import given, strategies as st

import kbatch
from kbatch.lib.checkpoints import read_checkpoint
from tests.conftest import CORPUS, needs_corpus
from tests.kafka_ref import (ABORT, COMMIT, build_batch, control_batch,
                             read_with_kafka_python)
from tests.lifecycle_ref import recover_model, write_partition

T0 = 1_700_000_000_000


def make_segments(seed: int, n_segments: int = 3, batches: int = 14):
    """Raw segments: data of a plain producer and of two transactional
    producers (one abort per segment, one transaction spanning a roll),
    leader epochs that grow, timestamps that go back and forth."""
    rng = random.Random(seed)
    segments, offset, epoch = [], 0, 0
    open_txn = {}
    for s in range(n_segments):
        batches_ = []
        for b in range(batches):
            if rng.random() < 0.1:
                epoch += 1
            kind = rng.choice(["plain", "plain", "txn", "txn", "marker"])
            if kind == "marker" and open_txn:
                pid = rng.choice(sorted(open_txn))
                ctype = ABORT if rng.random() < 0.5 else COMMIT
                batches_.append(control_batch(base_offset=offset, producer_id=pid,
                                              producer_epoch=0, control_type=ctype,
                                              timestamp=T0 + offset,
                                              partition_leader_epoch=epoch))
                del open_txn[pid]
                offset += 1
                continue
            n = rng.randint(1, 12)
            rows = [(T0 + offset * 10 + rng.randint(-3000, 3000), b"k%d" % rng.randint(0, 30),
                     rng.randbytes(rng.randint(0, 700)), []) for _ in range(n)]
            if kind == "txn":
                pid = rng.choice([7, 8])
                open_txn.setdefault(pid, offset)
                batches_.append(build_batch(rows, base_offset=offset, producer_id=pid,
                                            producer_epoch=0, base_sequence=0,
                                            transactional=True, partition_leader_epoch=epoch,
                                            codec=rng.choice([0, 0, 3])))
            else:
                batches_.append(build_batch(rows, base_offset=offset,
                                            partition_leader_epoch=epoch,
                                            codec=rng.choice([0, 1, 4])))
            offset += n
        segments.append(batches_)
    return segments


def damage(segments, kind: str, seg: int, batch: int, at: int):
    """The segments' bytes after ``kind`` of damage in ``segments[seg]``."""
    raw = [bytearray(b"".join(s)) for s in segments]
    seg = min(seg, len(raw) - 1)
    starts = [0]
    for b in segments[seg]:
        starts.append(starts[-1] + len(b))
    j = min(batch, len(segments[seg]) - 1)
    lo, hi = starts[j], starts[j + 1]
    if kind == "torn":
        raw[seg] = raw[seg][:lo + 12 + at % (hi - lo - 12)]
    elif kind == "flip":
        pos = lo + 12 + at % (hi - lo - 12)
        raw[seg][pos] ^= 1 << (at % 8)
    elif kind == "zeros":
        raw[seg] = raw[seg][:hi] + bytes(4096 + at % 5000)
    elif kind == "length":
        struct.pack_into(">i", raw[seg], lo + 8, [0, 13, 48, 1 << 30][at % 4])
    return [bytes(r) for r in raw]


def write_raw(directory: pathlib.Path, segments, raw):
    bases = [struct.unpack_from(">q", s[0])[0] for s in segments]
    directory.mkdir(parents=True)
    for base, data in zip(bases, raw):
        (directory / f"{base:020d}.log").write_bytes(data)
    return bases


def check_against_model(src: pathlib.Path, dest: pathlib.Path, bases, raw, interval,
                        report):
    kept, epochs = recover_model(list(zip(bases, raw)), interval)
    got = sorted(p.name for p in dest.glob("*.log"))
    assert got == [f"{b:020d}.log" for b, *_ in kept]
    for base, valid, index, times, txn in kept:
        stem = dest / f"{base:020d}"
        assert stem.with_suffix(".log").read_bytes() == raw[bases.index(base)][:valid]
        assert stem.with_suffix(".index").read_bytes() == index
        assert stem.with_suffix(".timeindex").read_bytes() == times
        txn_path = stem.with_suffix(".txnindex")
        assert (txn_path.read_bytes() if txn_path.exists() else b"") == txn
    assert read_checkpoint(dest / "leader-epoch-checkpoint")[1] == epochs
    # what was dropped: the cut segment's tail, then every later segment whole
    (part,) = report.partitions
    cut = next((k for k, (b, valid, *_) in enumerate(kept)
                if valid < len(raw[bases.index(b)])), None)
    if cut is None:
        assert not part.dropped and report.ok
    else:
        valid = kept[cut][1]
        first = part.dropped[0]
        assert (first.file, first.start, first.bytes) == (
            f"{bases[cut]:020d}.log", valid, len(raw[cut]) - valid)
        assert [d.file for d in part.dropped[1:]] == [f"{b:020d}.log" for b in bases[cut + 1:]]
        assert all(d.start == 0 and d.bytes == len(raw[bases.index(int(d.file[:20]))])
                   for d in part.dropped[1:])
    # the copy verifies clean and reads as kafka-python reads the valid prefix
    assert kbatch.verify(dest).ok
    want = [r for base, valid, *_ in kept
            for r in read_with_kafka_python(raw[bases.index(base)][:valid]).records]
    got = kbatch.open_log(dest).read()
    assert got.offset.tolist() == [r["offset"] for r in want]
    assert got.value.to_pylist() == [r["value"] for r in want]
    # the source is unchanged
    for base, data in zip(bases, raw):
        assert (src / f"{base:020d}.log").read_bytes() == data


@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["healthy", "torn", "flip", "zeros",
                                                           "length"]),
       seg=st.integers(0, 2), batch=st.integers(0, 13), at=st.integers(0, 1 << 20),
       interval=st.sampled_from([4096, 1000, 0]))
def test_recover_matches_kafkas_recovery(tmp_path_factory, seed, kind, seg, batch, at,
                                         interval):
    tmp = tmp_path_factory.mktemp("r")
    segments = make_segments(seed)
    raw = damage(segments, kind, seg, batch, at)
    src = tmp / "t-0"
    bases = write_raw(src, segments, raw)
    report = kbatch.recover(src, tmp / "out", index_interval_bytes=interval)
    check_against_model(src, tmp / "out", bases, raw, interval, report)


def test_torn_tail_and_report(tmp_path):
    segments = make_segments(3)
    raw = damage(segments, "torn", 2, 13, 100)
    bases = write_raw(tmp_path / "t-0", segments, raw)
    report = kbatch.recover(tmp_path / "t-0", tmp_path / "out")
    (part,) = report.partitions
    assert not report.ok and len(part.dropped) == 1
    assert part.dropped[0].reason == "truncated batch"
    assert part.log_end_offset == part.dropped[0].first_offset
    check_against_model(tmp_path / "t-0", tmp_path / "out", bases, raw, 4096, report)


def test_bit_flip_in_an_inner_segment_drops_the_rest(tmp_path):
    segments = make_segments(4)
    raw = damage(segments, "flip", 0, 5, 12345)
    bases = write_raw(tmp_path / "t-0", segments, raw)
    report = kbatch.recover(tmp_path / "t-0", tmp_path / "out")
    (part,) = report.partitions
    assert [d.file for d in part.dropped] == [f"{b:020d}.log" for b in bases]
    assert part.dropped[0].start > 0 and part.dropped[1].reason == "after the first invalid batch"
    check_against_model(tmp_path / "t-0", tmp_path / "out", bases, raw, 4096, report)


def test_data_dir_checkpoints_and_refusals(tmp_path):
    data = tmp_path / "data"
    for name, seed, kind in (("a-0", 1, "healthy"), ("b-1", 2, "zeros")):
        segments = make_segments(seed, 2)
        write_raw(data / name, segments, damage(segments, kind, 1, 3, 7))
    (data / "replication-offset-checkpoint").write_text("0\n2\na 0 5\nb 1 999999\n")
    (data / "log-start-offset-checkpoint").write_text("0\n2\na 0 3\nb 1 0\n")
    (data / "meta.properties").write_text("version=1\n")
    report = kbatch.recover(data, tmp_path / "out")
    out = tmp_path / "out"
    ends = {(p.topic, p.partition): p.log_end_offset for p in report.partitions}
    assert sorted(read_checkpoint(out / "recovery-point-offset-checkpoint")[1]) == sorted(
        (t, p, e) for (t, p), e in ends.items())
    hw = {(t, p): o for t, p, o in read_checkpoint(out / "replication-offset-checkpoint")[1]}
    assert hw == {("a", 0): 5, ("b", 1): ends[("b", 1)]}
    starts = {(t, p): o for t, p, o in read_checkpoint(out / "log-start-offset-checkpoint")[1]}
    assert starts == {("a", 0): 3}     # Kafka writes none where it is the first base
    assert (out / "meta.properties").read_text() == "version=1\n"
    assert kbatch.verify(out).ok
    # the partition alone takes the log start of the data directory holding it
    (alone,) = kbatch.recover(data / "a-0", tmp_path / "alone").partitions
    assert alone.log_start_offset == 3 and alone.leader_epochs == \
        [p for p in report.partitions if p.topic == "a"][0].leader_epochs
    with pytest.raises(kbatch.ArgumentError, match="exists"):
        kbatch.recover(data, out)
    with pytest.raises(kbatch.ArgumentError, match="inside the source"):
        kbatch.recover(data, data / "copy")
    with pytest.raises(kbatch.ArgumentError, match="segment"):
        kbatch.recover(data / "a-0" / "00000000000000000000.log", tmp_path / "x")


def test_cli_recover(tmp_path, capfd):
    from kbatch.tools.cli import main
    segments = make_segments(9)
    write_raw(tmp_path / "t-0", segments, damage(segments, "torn", 2, 13, 5))
    assert main(["recover", str(tmp_path / "t-0"), str(tmp_path / "out")]) == 1
    out = capfd.readouterr().out
    assert "dropped 0000" in out and "(truncated batch)" in out
    assert main(["recover", str(tmp_path / "out"), str(tmp_path / "again")]) == 0
    assert "nothing dropped" in capfd.readouterr().out
    assert main(["recover", str(tmp_path / "out"), str(tmp_path / "again")]) == 1


INDEX_DIRS = [
    "dipendrasaini__kafka-learnning-series/tmp/kafka-logs",
    "macsakini__KafkaCluster/kafka/data",
    "ronem123__rupia-transaction-service/kafka-logs",
    "taha-hachidi__LogFile/kafka-data/data",
    "DonaldY__kafka-2.7.1/kafka-logs",
]


@needs_corpus
def test_corpus_recovery_and_index_bytes(tmp_path, capfd):
    """Every broker data directory of the corpus with index files: nothing
    valid is dropped, the copy verifies clean and reads as the source, the
    rebuilt index files equal the model's (LogSegment.recover) byte for
    byte, and are compared with the broker's own files (counted; a
    difference comes from how that broker appended: see README)."""
    tally = {"index": [0, 0, 0], "timeindex": [0, 0, 0]}   # identical (entries), empty, differ
    rolled = {"index": [0, 0], "timeindex": [0, 0]}          # identical, of
    differing = set()             # partitions with a rolled segment whose files differ
    epochs_checked = 0
    for i, d in enumerate(INDEX_DIRS):
        src = CORPUS / d
        out = tmp_path / f"d{i}"
        report = kbatch.recover(src, out)
        assert kbatch.verify(out).ok, d
        starts = src / "log-start-offset-checkpoint"
        starts = {(t, p): o for t, p, o in read_checkpoint(starts)[1]} if starts.exists() else {}
        for part in report.partitions:
            log_src = src / pathlib.Path(part.source).name
            segs = sorted(log_src.glob("*.log"))
            raw = [(int(s.name[:20]), s.read_bytes()) for s in segs]
            if all(r[1][16:17] in (b"\x02", b"") for r in raw):
                # leader epochs as the broker's load leaves them: its own file
                # loaded, the batches' epochs assigned, truncated at both ends
                ep = log_src / "leader-epoch-checkpoint"
                kept, epochs = recover_model(
                    raw, epoch_file=read_checkpoint(ep)[1] if ep.exists() else None,
                    log_start=starts.get((part.topic, part.partition)))
                assert read_checkpoint(out / log_src.name / "leader-epoch-checkpoint")[1] \
                    == epochs == part.leader_epochs, log_src
                epochs_checked += ep.exists()
                for base, valid, index, times, _txn in kept:
                    stem = out / log_src.name / f"{base:020d}"
                    assert stem.with_suffix(".index").read_bytes() == index, stem
                    assert stem.with_suffix(".timeindex").read_bytes() == times, stem
            assert kbatch.open_log(out / log_src.name).read().offset.tolist() == \
                kbatch.open_log(log_src).read().offset.tolist()
            last = max(p.name for p in segs)
            for s in part.segments:
                for kind, same, n in (("index", s.index_identical, s.index_entries),
                                      ("timeindex", s.timeindex_identical,
                                       s.timeindex_entries)):
                    if same is None:
                        continue
                    tally[kind][0 if same and n else 1 if same else 2] += 1
                    if s.file != last:
                        rolled[kind][0] += bool(same)
                        rolled[kind][1] += 1
                        if not same:
                            differing.add(log_src)
    # Why a rolled segment's files differ: test_writer_indexes replays the
    # broker's appends and reproduces its files byte for byte only with
    # followers' multi-batch appends (one entry per fetch, naming its last
    # offset) or, for a leader of Kafka <= 3.7, time index entries naming the
    # record that holds the max timestamp; LogSegment.recover indexes batch
    # by batch and names the batch's last offset, so a broker's own recovery
    # of these segments writes the model's files, not its originals.
    from tests.test_writer_indexes import check_partition
    why = {}
    for k, log_src in enumerate(sorted(differing)):
        row = check_partition(log_src, tmp_path / f"why{k}")
        assert row["ok"] and (row["appends"] == "broker" or row["time_offsets"] == "record"), \
            log_src
        why[log_src.name] = ("follower appends" if row["appends"] == "broker"
                             else "leader <= 3.7: time index names the record")
    with capfd.disabled():
        print(f"\nrebuilt vs broker index files (identical with entries, identical empty, "
              f"different): {tally}; rolled segments (identical, of): {rolled}; "
              f"differences: {why}; leader-epoch-checkpoint files loaded: {epochs_checked}")
    assert tally["index"][0] >= 7 and tally["timeindex"][0] >= 15
    assert epochs_checked >= 20
    # the corpus's 20 rolled segments: 5 small ones (empty .index, the final
    # .timeindex entry) and 3 of a leader identical; 12 written by followers
    assert rolled == {"index": [8, 20], "timeindex": [5, 20]}


def test_offset_overflow_splits_the_segment(tmp_path, capfd):
    """A segment holding offsets more than 2**31 - 1 past its base (an old
    broker could write one) is split as LocalLog.splitOverflowedSegment
    splits it on load: parts named by their first batch's base offset, each
    taking batches while their last offsets fit relative to it; nothing is
    dropped, and every part's indexes are those of a segment of its own."""
    far = 3_000_000_000
    bases = [0, 5, far, far + 4, 2 * far, 2 * far + 9]
    raw = [build_batch([(T0 + i, b"k%d" % i, b"v" * (300 + i), [])
                        for i in range(4)], base_offset=b, partition_leader_epoch=1)
           for b in bases]
    src = write_partition(tmp_path / "src" / "t-0", [raw], bases=[0])
    report = kbatch.recover(src, tmp_path / "dst", index_interval_bytes=300)
    part = report.partitions[0]
    assert report.ok and part.dropped == [], part.dropped
    assert [s.file for s in part.segments] == [f"{b:020d}.log" for b in (0, far, 2 * far)]
    assert {s.split_from for s in part.segments} == {"00000000000000000000.log"}
    assert part.log_end_offset == 2 * far + 9 + 4
    dst = tmp_path / "dst" / "t-0" if (tmp_path / "dst" / "t-0").exists() else tmp_path / "dst"
    for i, base in enumerate((0, far, 2 * far)):
        data = (dst / f"{base:020d}.log").read_bytes()
        assert data == b"".join(raw[2 * i:2 * i + 2])
        [(mbase, valid, index, times, txn)], _ = recover_model([(base, data)], 300)
        assert (mbase, valid) == (base, len(data))
        assert (dst / f"{base:020d}.index").read_bytes() == index
        assert (dst / f"{base:020d}.timeindex").read_bytes() == times
    want = read_with_kafka_python(b"".join(raw)).records
    got = kbatch.open_log(dst).read()
    assert got.offset.tolist() == [r["offset"] for r in want]
    assert got.value.to_pylist() == [r["value"] for r in want]
    assert kbatch.verify(dst).ok
    from kbatch.tools.cli import main
    assert main(["recover", str(src), str(tmp_path / "dst2")]) == 0
    assert "split 00000000000000000000.log" in capfd.readouterr().out


def test_log_start_past_the_recovered_end_deletes_every_segment(tmp_path):
    """LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: a checkpoint
    past the end of what survives recovery (here a cut) leaves one empty
    segment at the checkpoint and no leader epochs; nothing of the old log
    is served again under offsets below the start consumers saw."""
    segments = make_segments(6, 2)
    raw = damage(segments, "flip", 0, 3, 999)
    data = tmp_path / "data"
    bases = write_raw(data / "t-0", segments, raw)
    (data / "t-0" / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    valid_end = recover_model(list(zip(bases, raw)))[0]
    start = bases[1] + 3                          # past the cut: the second segment is gone
    (data / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {start}\n")
    report = kbatch.recover(data, tmp_path / "out")
    (part,) = report.partitions
    kept, epochs = recover_model(list(zip(bases, raw)), log_start=start, epoch_file=[(0, 0)])
    assert kept == [(start, 0, b"", b"", b"")] and epochs == [] and valid_end != kept
    out = tmp_path / "out" / "t-0"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{start:020d}{s}" for s in (".log", ".index", ".timeindex")) + ["leader-epoch-checkpoint"]
    assert (out / f"{start:020d}.log").read_bytes() == b""
    assert read_checkpoint(out / "leader-epoch-checkpoint")[1] == [] == part.leader_epochs
    assert part.log_start_offset == part.log_end_offset == start
    assert [d.file for d in part.dropped] == [f"{b:020d}.log" for b in bases] + \
        [f"{bases[0]:020d}.log"]               # the cut tail, the next segment, the kept head
    assert "past the recovered log end offset" in part.dropped[-1].reason
    assert any("every segment deleted" in n for n in report.notes)
    assert read_checkpoint(tmp_path / "out" / "log-start-offset-checkpoint")[1] == []
    assert kbatch.verify(tmp_path / "out").ok
    assert len(kbatch.open_log(out).read()) == 0


def test_an_intact_segment_keeps_its_age(tmp_path):
    """LogSegment.recover does not rewrite an intact file, and retention
    by time falls back on a segment's modification time: a whole copy is as
    old as its source, a cut one is new."""
    import os
    segments = make_segments(8, 3)
    raw = damage(segments, "torn", 2, 13, 50)
    bases = write_raw(tmp_path / "t-0", segments, raw)
    old = 1_500_000_000_123_456_789
    for b in bases:
        os.utime(tmp_path / "t-0" / f"{b:020d}.log", ns=(old, old))
    kbatch.recover(tmp_path / "t-0", tmp_path / "out")
    ages = [(tmp_path / "out" / f"{b:020d}.log").stat().st_mtime_ns for b in bases]
    assert ages[:2] == [old, old] and ages[2] > old


def _rows(n, start=0, value=b"v" * 10):
    return [(T0 + start + i, b"k", value, []) for i in range(n)]


def test_a_batch_past_a_decode_limit_stops_recovery_instead_of_cutting(tmp_path, capfd):
    """A broker's recovery checks a batch's size and CRC, never its
    decompressed size: a valid batch past one of kbatch's decode limits is
    not damage. Recovering stops with a LimitExceededError that names the
    option (cutting there would drop it and every later segment); with the
    limit raised the partition is copied whole."""
    from kbatch.tools.cli import main
    big = build_batch([(T0 + i, b"k", bytes(64 << 10), []) for i in range(32)], base_offset=2,
                      codec=1)                       # 2 MiB of records, gzip: a few KiB
    write_partition(tmp_path / "t-0", [[build_batch(_rows(2)), big,
                                        build_batch(_rows(2, 34), base_offset=34)],
                                       [build_batch(_rows(2, 36), base_offset=36)]])
    with pytest.raises(kbatch.LimitExceededError, match="max_decompressed_bytes"):
        kbatch.recover(tmp_path / "t-0", tmp_path / "low", max_decompressed_bytes=1 << 20)
    assert not (tmp_path / "low").exists()
    assert main(["recover", str(tmp_path / "t-0"), str(tmp_path / "cli-low"),
                 "--max-decompressed-bytes", str(1 << 20)]) != 0
    assert "--max-decompressed-bytes" in capfd.readouterr().err
    report = kbatch.recover(tmp_path / "t-0", tmp_path / "whole",
                            max_decompressed_bytes=4 << 20)
    assert report.ok and report.partitions[0].log_end_offset == 38
    assert main(["recover", str(tmp_path / "t-0"), str(tmp_path / "cli-whole"),
                 "--max-decompressed-bytes", str(4 << 20)]) == 0


def test_a_first_batch_below_the_segment_base_is_kept_as_kafka_keeps_it(tmp_path):
    """LogSegment.recover checks each batch's last offset against the
    segment's base (ensureOffsetInRange), not its first: a segment named 100
    whose first batch holds 95..104 is kept whole; a batch whose last offset
    lies below the base is where the log is cut."""
    write_partition(tmp_path / "t-0", [[build_batch(_rows(10), base_offset=95),
                                        build_batch(_rows(5), base_offset=105)]], bases=[100])
    report = kbatch.recover(tmp_path / "t-0", tmp_path / "out")
    (p,) = report.partitions
    assert report.ok and p.log_end_offset == 110 and not p.dropped
    write_partition(tmp_path / "u-0", [[build_batch(_rows(3), base_offset=100),
                                        build_batch(_rows(3), base_offset=90)]], bases=[100])
    (q,) = kbatch.recover(tmp_path / "u-0", tmp_path / "out-u").partitions
    assert q.log_end_offset == 103
    assert [(d.start, d.reason) for d in q.dropped] == \
        [(len(build_batch(_rows(3), base_offset=100)), "last offset below the segment's base "
                                                       "offset")]


def test_data_dir_files_and_high_watermarks_as_the_source_has_them(tmp_path):
    """The copy's replication-offset-checkpoint holds the source's entries
    only (a partition without one loads with 0; none is made up from its
    log end); the data directory's own files and KRaft's quorum-state are
    copied, the clean-shutdown marker is not (the broker must recover the
    copy); a future replica's folder is named in the notes, not dropped
    without a word."""
    data = tmp_path / "data"
    write_partition(data / "t-0", [[build_batch(_rows(5))]])
    write_partition(data / "t-1", [[build_batch(_rows(7))]])
    write_partition(data / "u-1.0123456789abcdef0123456789abcdef-future", [[build_batch(_rows(2))]])
    write_partition(data / "__cluster_metadata-0", [[build_batch(_rows(3))]])
    (data / "__cluster_metadata-0" / "quorum-state").write_text('{"leaderId":1}')
    (data / "replication-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    (data / "bootstrap.checkpoint").write_bytes(b"\x00bootstrap")
    (data / ".kafka_cleanshutdown").write_text("{}")
    report = kbatch.recover(data, tmp_path / "out")
    out = tmp_path / "out"
    assert read_checkpoint(out / "replication-offset-checkpoint")[1] == [("t", 0, 2)]
    assert (out / "__cluster_metadata-0" / "quorum-state").read_text() == '{"leaderId":1}'
    assert (out / "bootstrap.checkpoint").read_bytes() == b"\x00bootstrap"
    assert not (out / ".kafka_cleanshutdown").exists()
    assert any("-future" in n and "not recovered" in n for n in report.notes)
    assert kbatch.verify(out).ok


def test_offsets_going_back_across_segments_are_cut_and_the_copy_verifies(tmp_path):
    """Segment 12's first batch holds 8..13, offsets segment 0 holds too: a
    broker would keep both copies (each batch's last offset is in range),
    but the copy would hold offsets 8 and 9 twice; recovery cuts there, as
    for offsets going back within a segment, and the copy verifies clean.
    A first batch below the segment's base that repeats nothing is kept,
    and its copy verifies clean too."""
    write_partition(tmp_path / "t-0", [[build_batch(_rows(10))],
                                       [build_batch(_rows(6), base_offset=8),
                                        build_batch(_rows(2), base_offset=14)]], bases=[0, 12])
    report = kbatch.recover(tmp_path / "t-0", tmp_path / "out")
    (p,) = report.partitions
    assert p.log_end_offset == 12 and not report.ok     # segment 12 kept, empty
    assert [(d.file, d.start) for d in p.dropped] == [(f"{12:020d}.log", 0)]
    assert "offsets do not increase" in p.dropped[0].reason
    assert kbatch.verify(tmp_path / "out").ok
    assert kbatch.open_log(tmp_path / "out").read().offset.tolist() == list(range(10))
    write_partition(tmp_path / "u-0", [[build_batch(_rows(10))],
                                       [build_batch(_rows(6), base_offset=10)]], bases=[0, 12])
    report = kbatch.recover(tmp_path / "u-0", tmp_path / "out-u")
    assert report.ok and report.partitions[0].log_end_offset == 16
    assert kbatch.verify(tmp_path / "out-u").ok


def test_a_path_naming_a_limit_is_not_taken_for_one(tmp_path):
    """Only an error that names a limit's value (``max_x=N``) stops the
    recovery; a torn batch in a folder whose name mentions a limit is
    damage, cut as any other."""
    part = tmp_path / "max_records_per_batch=5-experiments" / "t-0"
    good = build_batch(_rows(3))
    bad = bytearray(build_batch(_rows(2), base_offset=3))
    bad[8:12] = (-16).to_bytes(4, "big", signed=True)
    write_partition(part, [[good + bytes(bad)], [build_batch(_rows(1), base_offset=5)]])
    report = kbatch.recover(part, tmp_path / "out")
    (p,) = report.partitions
    assert p.log_end_offset == 3 and p.dropped and not report.ok
