"""``kbatch.compact``: one run of Kafka's log cleaner, against
``tests/lifecycle_ref.clean_model`` (LogCleaner.scala, written from
Kafka's source) on partitions written by tests/kafka_ref.py's encoders
(repeated keys, tombstones, null keys, aborted and committed
transactions, every codec), decoded back by kafka-python; view="latest"
of source and copy equal; delete horizons over repeated cleanings."""

from __future__ import annotations

import pathlib
import random
import shutil

import numpy as np
import pytest
from hypothesis import given, strategies as st

import kbatch
from kbatch.lib.compact import compact
from tests.conftest import needs_corpus
from tests.kafka_ref import ABORT, COMMIT, build_batch, control_batch, read_with_kafka_python
from tests.lifecycle_ref import clean_model, cleaned_indexes, walk, write_partition

T0 = 1_700_000_000_000
HOUR = 3_600_000


def make(seed: int, n_segments: int = 4, per_segment: int = 6):
    rng = random.Random(seed)
    segments, offset, open_txn = [], 0, {}
    epochs = {3: 0, 7: 0, 8: 0}      # a producer's epoch (bumps clear its batch state)
    keys = [None, b"a", b"b", b"c", b"d", b"e" * 20]
    for s in range(n_segments):
        batches = []
        for _ in range(per_segment):
            kind = rng.choice(["plain", "plain", "txn", "marker", "idem"])
            if kind == "marker" and open_txn:
                pid = rng.choice(sorted(open_txn))
                if rng.random() < 0.3:  # a coordinator's abort on timeout, or a KIP-890 end
                    epochs[pid] += 1
                batches.append(control_batch(base_offset=offset, producer_id=pid,
                                             producer_epoch=epochs[pid], timestamp=T0 + offset,
                                             control_type=rng.choice([ABORT, COMMIT])))
                del open_txn[pid]
                offset += 1
                continue
            n = rng.randint(1, 5)
            rows = [(T0 + offset + j, rng.choice(keys), rng.choice([None, b"v%d" % (offset + j)]),
                     [("h", b"x")] if rng.random() < 0.3 else []) for j in range(n)]
            codec = rng.choice([0, 0, 1, 2, 3, 4])
            if kind == "txn":
                pid = rng.choice([7, 8])
                open_txn.setdefault(pid, offset)
                batches.append(build_batch(rows, base_offset=offset, producer_id=pid,
                                           producer_epoch=epochs[pid], base_sequence=0,
                                           transactional=True, codec=codec))
            elif kind == "idem":
                if rng.random() < 0.2:  # the producer restarted
                    epochs[3] += 1
                batches.append(build_batch(rows, base_offset=offset, producer_id=3,
                                           producer_epoch=epochs[3], base_sequence=offset,
                                           codec=codec))
            else:
                batches.append(build_batch(rows, base_offset=offset, codec=codec))
            offset += n
        segments.append(batches)
    for pid in sorted(open_txn):            # close them in the active segment
        segments[-1].append(control_batch(base_offset=offset, producer_id=pid,
                                          producer_epoch=epochs[pid],
                                          timestamp=T0 + offset, control_type=COMMIT))
        offset += 1
    return segments


def decoded(directory: pathlib.Path) -> list[list[dict]]:
    """kafka-python's batches of every segment, with their records."""
    out = []
    for seg in sorted(directory.glob("*.log")):
        got = read_with_kafka_python(seg.read_bytes(), check_crc=True)
        batches = []
        for i, b in enumerate(got.batches):
            b = dict(b)
            b["records"] = [r for r in got.records if r["batch"] == i]
            ctl = [c for c in got.control if c["batch"] == i]
            b["control_type"] = ctl[0]["type"] if ctl else None
            b["horizon"] = b["base_timestamp"] if b["has_delete_horizon"] else None
            batches.append(b)
        out.append(batches)
    return out


def check(src: pathlib.Path, dest: pathlib.Path, now: int, retention: int, **model) -> None:
    expected, end = clean_model(decoded(src), now=now, delete_retention_ms=retention,
                                **model)
    flat = [b for seg in decoded(src) for b in seg]
    got = {b["base_offset"]: b for seg in decoded(dest) for b in seg}
    assert len(flat) == len(expected)
    for b, want in zip(flat, expected):
        if want is None:
            assert b["base_offset"] not in got, b
            continue
        kept, horizon, empty = want
        g = got[b["base_offset"]]
        assert g["last_offset"] == b["last_offset"]
        offsets = [c["base_offset"]] if (c := g)["is_control"] and g["records_count"] else \
            [r["offset"] for r in g["records"]]
        assert offsets == kept, (b["base_offset"], offsets, kept)
        assert g["horizon"] == horizon
        assert (g["records_count"] == 0) == (empty or not kept)
        # kept records are the source's, byte for byte in content
        by_off = {r["offset"]: r for r in b["records"]}
        for r in g["records"]:
            o = by_off[r["offset"]]
            assert (r["key"], r["value"], r["headers"], r["timestamp"]) == \
                (o["key"], o["value"], o["headers"], o["timestamp"])
    assert set(got) <= {b["base_offset"] for b in flat}
    check_indexes(src, dest, expected, end)


def check_indexes(src: pathlib.Path, dest: pathlib.Path, expected, end: int,
                  **sizes) -> None:
    """Each cleaned segment's .index and .timeindex against
    ``lifecycle_ref.cleaned_indexes``: the cleaner's reads and appends over
    the source's batch headers and what the copy holds for each."""
    sources = sorted(src.glob("*.log"))
    heads = [walk(p.read_bytes())[0] for p in sources]
    written = {}
    for out in sorted(dest.glob("*.log")):
        buf = out.read_bytes()
        got = read_with_kafka_python(buf, check_crc=True)
        for i, h in enumerate(walk(buf)[0]):
            offs = [r["offset"] for r in got.records if r["batch"] == i] + \
                [c["offset"] for c in got.control if c["batch"] == i]
            written[h["base_offset"]] = (h["size"], max(offs, default=h["last_offset"]),
                                         h["max_timestamp"], h["last_offset"])
    flat = [h for seg in heads for h in seg]
    assert len(flat) == len(expected)
    gone = {h["base_offset"] for h, want in zip(flat, expected) if want is None}
    bases = [int(p.name[:20]) for p in sources]
    # the cleaned segments: those starting below where the run ended
    cleaned = [k for k in range(len(sources) - 1) if bases[k] < end]
    outputs = sorted(int(p.name[:20]) for p in dest.glob("*.log"))
    groups: dict[int, list[int]] = {}
    for k in cleaned:
        groups.setdefault(max(b for b in outputs if b <= bases[k]), []).append(k)
    for home, members in groups.items():
        index, times = cleaned_indexes(
            [heads[k] for k in members],
            [[None if h["base_offset"] in gone else written[h["base_offset"]]
              for h in heads[k]] for k in members], home, **sizes)
        stem = dest / f"{home:020d}"
        assert stem.with_suffix(".index").read_bytes() == index, home
        assert stem.with_suffix(".timeindex").read_bytes() == times, home


def latest_rows(d):
    t = kbatch.open_log(d).read(view="latest", isolation="read_committed")
    return list(zip(t.offset.tolist(), t.key.to_pylist(), t.value.to_pylist()))


@given(seed=st.integers(0, 100_000), retention=st.sampled_from([0, HOUR, 24 * HOUR]))
def test_compact_matches_the_cleaner(tmp_path_factory, seed, retention):
    tmp = tmp_path_factory.mktemp("c")
    src = write_partition(tmp / "t-0", make(seed))
    now = T0 + HOUR
    report = compact(src, tmp / "out", now=now, delete_retention_ms=retention)
    check(src, tmp / "out", now, retention)
    assert kbatch.verify(tmp / "out").ok
    assert latest_rows(tmp / "out") == latest_rows(src)
    # a second cleaning later: tombstones and markers past their horizon go
    later = now + retention + 1
    compact(tmp / "out", tmp / "again", now=later, delete_retention_ms=retention)
    check(tmp / "out", tmp / "again", later, retention)
    assert kbatch.verify(tmp / "again").ok
    assert latest_rows(tmp / "again") == latest_rows(src)
    assert report.partitions[0].untouched == [sorted(p.name for p in src.glob("*.log"))[-1]]


def test_rules_one_by_one(tmp_path):
    """Keys rewritten in the active segment keep their older records;
    null keys dropped; a tombstone kept with its horizon, then removed."""
    seg0 = [build_batch([(T0, b"a", b"1", []), (T0 + 1, None, b"n", []), (T0 + 2, b"b", b"2", [])],
                        base_offset=0),
            build_batch([(T0 + 3, b"a", None, []), (T0 + 4, b"c", b"3", [])], base_offset=3)]
    seg1 = [build_batch([(T0 + 5, b"b", b"active", [])], base_offset=5)]
    src = write_partition(tmp_path / "t-0", [seg0, seg1])
    report = compact(src, tmp_path / "out", now=T0 + 10, delete_retention_ms=100)
    (p,) = report.partitions
    assert p.null_keys == 1 and p.tombstones_kept == 1 and p.first_uncleanable_offset == 5
    got = [b for seg in decoded(tmp_path / "out") for b in seg]
    assert [[(r["key"], r["value"]) for r in b["records"]] for b in got] == [
        [(b"b", b"2")], [(b"a", None), (b"c", b"3")], [(b"b", b"active")]]
    assert got[0]["horizon"] is None and got[1]["horizon"] == T0 + 110
    assert got[0]["last_offset"] == 2          # the last offset stays
    # at the horizon, the tombstone goes
    compact(tmp_path / "out", tmp_path / "again", now=T0 + 110, delete_retention_ms=100)
    again = [b for seg in decoded(tmp_path / "again") for b in seg]
    assert [(r["key"], r["value"]) for b in again for r in b["records"]] == [
        (b"b", b"2"), (b"c", b"3"), (b"b", b"active")]


def test_legacy_batches_are_refused_naming_file_and_byte(tmp_path):
    """The cleaner here rewrites magic 2 only: a magic 1 message set in the
    cleanable range is refused with its file and byte."""
    from tests.kafka_ref import legacy_message_set
    seg0 = [build_batch([(T0, b"a", b"1", [])], base_offset=0),
            legacy_message_set([(T0 + 1, b"a", b"2"), (T0 + 2, b"b", b"3")], magic=1,
                               base_offset=1)]
    seg1 = [build_batch([(T0 + 5, b"b", b"active", [])], base_offset=3)]
    src = write_partition(tmp_path / "t-0", [seg0, seg1])
    at = len(seg0[0])
    with pytest.raises(kbatch.ArgumentError,
                       match=rf"00000000000000000000\.log: the batch at byte {at} has magic 1"):
        compact(src, tmp_path / "out", now=T0 + 10)
    assert not (tmp_path / "out").exists()        # a failed run leaves no half-written copy


def test_aborted_data_goes_marker_stays(tmp_path):
    seg0 = [build_batch([(T0, b"k", b"v", [])], base_offset=0),
            build_batch([(T0 + 1, b"k", b"aborted", [])], base_offset=1, producer_id=5,
                        producer_epoch=0, base_sequence=0, transactional=True),
            control_batch(base_offset=2, producer_id=5, producer_epoch=0, control_type=ABORT,
                          timestamp=T0 + 2),
            build_batch([(T0 + 3, b"j", b"w", [])], base_offset=3)]
    seg1 = [build_batch([(T0 + 4, b"x", b"y", [])], base_offset=4)]
    src = write_partition(tmp_path / "t-0", [seg0, seg1])
    now = T0 + 10 * 24 * HOUR          # producer 5 has expired: nothing kept for it
    compact(src, tmp_path / "out", now=now, delete_retention_ms=HOUR)
    got = [b for seg in decoded(tmp_path / "out") for b in seg]
    assert [b["base_offset"] for b in got] == [0, 2, 3, 4]      # data gone, marker kept
    assert got[1]["is_control"] and got[1]["horizon"] is None
    assert (tmp_path / "out" / "00000000000000000000.txnindex").exists()
    compact(tmp_path / "out", tmp_path / "two", now=now, delete_retention_ms=HOUR)
    two = [b for seg in decoded(tmp_path / "two") for b in seg]
    assert two[1]["is_control"] and two[1]["horizon"] == now + HOUR   # now discardable
    compact(tmp_path / "two", tmp_path / "three", now=now + HOUR, delete_retention_ms=HOUR)
    assert [b["base_offset"] for seg in decoded(tmp_path / "three") for b in seg] == [0, 3, 4]


def test_data_dir_and_cli(tmp_path, capfd):
    from kbatch.tools.cli import main
    data = tmp_path / "data"
    write_partition(data / "t-0", make(1))
    write_partition(data / "u-3", make(2))
    (data / "replication-offset-checkpoint").write_text("0\n2\nt 0 20\nu 3 20\n")
    assert main(["compact", str(data), str(tmp_path / "out"), "--now", str(T0 + HOUR)]) == 0
    out = capfd.readouterr().out
    assert "t-0:" in out and "u-3:" in out
    assert (tmp_path / "out" / "cleaner-offset-checkpoint").exists()
    assert kbatch.verify(tmp_path / "out").ok
    for name in ("t-0", "u-3"):
        assert latest_rows(tmp_path / "out" / name) == latest_rows(data / name)
    with pytest.raises(kbatch.ArgumentError, match="exists"):
        compact(data, tmp_path / "out")


@needs_corpus
def test_corpus_partitions(tmp_path):
    """Real data directories with rolled segments: the copy verifies clean,
    kafka-python reads every segment of it, and its table is the source's."""
    from kbatch.lib.checkpoints import read_checkpoint
    from tests.conftest import CORPUS
    cleaned = skipped = 0
    for i, d in enumerate(["dipendrasaini__kafka-learnning-series/tmp/kafka-logs",
                           "DonaldY__kafka-2.7.1/kafka-logs",
                           "ronem123__rupia-transaction-service/kafka-logs"]):
        src = CORPUS / d
        report = compact(src, tmp_path / f"c{i}", now=1_800_000_000_000)
        for p in report.partitions:
            assert kbatch.verify(tmp_path / f"c{i}" / f"{p.topic}-{p.partition}").ok
        # the KRaft metadata log is never cleaned: copied file for file
        for entry in report.not_compacted:
            assert entry.startswith("__cluster_metadata-0 ")
            for f in (src / "__cluster_metadata-0").iterdir():
                if f.is_file() and not f.name.endswith((".deleted", ".cleaned", ".swap")):
                    assert (tmp_path / f"c{i}" / "__cluster_metadata-0" / f.name).read_bytes() \
                        == f.read_bytes()
        marks = src / "cleaner-offset-checkpoint"
        dirty_from = {(t, p): o for t, p, o in read_checkpoint(marks)[1]} \
            if marks.exists() else {}
        for k, p in enumerate(report.partitions):
            name = f"{p.topic}-{p.partition}"
            # the broker's cleaner checkpoint: nothing dirty, nothing cleaned
            done = dirty_from.get((p.topic, p.partition), -1) >= p.first_uncleanable_offset
            assert not (done and p.cleaned), name
            skipped += done
            # the partition directory: its data directory's checkpoints apply,
            # as in the run over the whole directory
            inside = compact(src / name, tmp_path / f"p{i}-{k}", now=1_800_000_000_000)
            (q,) = inside.partitions
            assert (q.first_uncleanable_offset, q.first_dirty_offset, q.end_offset,
                    [c.file for c in q.cleaned]) == \
                (p.first_uncleanable_offset, p.first_dirty_offset, p.end_offset,
                 [c.file for c in p.cleaned]), name
            # the partition alone (no checkpoint beside it): cleaned from its log start
            shutil.copytree(src / name, tmp_path / f"bare{i}-{k}" / name)
            alone = compact(tmp_path / f"bare{i}-{k}" / name, tmp_path / f"a{i}-{k}",
                            now=1_800_000_000_000)
            for out in (tmp_path / f"c{i}" / name, tmp_path / f"a{i}-{k}"):
                for seg in out.glob("*.log"):
                    read_with_kafka_python(seg.read_bytes(), check_crc=True)
                if p.topic != "__cluster_metadata":
                    assert latest_rows(out) == latest_rows(src / name)
            assert kbatch.verify(tmp_path / f"a{i}-{k}").ok
            cleaned += len(alone.partitions[0].cleaned)
    assert cleaned >= 10 and skipped >= 1


def test_an_open_transaction_mid_segment_holds_back_its_whole_segment(tmp_path):
    """The first uncleanable offset (here an open transaction's first offset)
    is rounded down to the base of its segment, as
    LogCleanerManager.calculateCleanableBytes does: a key rewritten in that
    segment does not remove its older record from the cleaned one."""
    src = tmp_path / "t-0"
    with kbatch.LogWriter(src) as w:
        for k in (b"a", b"b", b"c"):
            w.append({"key": [k], "value": [b"v1"], "timestamp": [T0]})
        w.roll()                                                        # segment 3
        w.append({"key": [b"a"], "value": [b"v2"], "timestamp": [T0]})  # offset 3
        w.append({"key": [b"x"], "value": [b"open"], "timestamp": [T0]},
                 producer_id=7, transactional=True)                     # offset 4, no marker
        w.roll()                                                        # segment 5 (active)
        w.append({"key": [b"z"], "value": [b"z"], "timestamp": [T0]})
    report = compact(src, tmp_path / "out", now=T0 + 1000)
    assert report.partitions[0].first_uncleanable_offset == 3
    got = read_with_kafka_python(b"".join(p.read_bytes() for p in
                                           sorted((tmp_path / "out").glob("*.log"))))
    assert [r["offset"] for r in got.records] == [0, 1, 2, 3, 4, 5]


def test_a_cleaned_group_spans_less_than_2_to_the_31_offsets(tmp_path):
    """groupSegmentsBySize bounds a group by its FIRST segment's base (the
    relative offsets of the cleaned segment are int32)."""
    g = 1 << 30
    src = tmp_path / "t-0"
    with kbatch.LogWriter(src) as w:
        for i, base in enumerate([0, g, 2 * g, 3 * g]):
            if i:
                w.roll(base)
            w.append({"key": [b"k%d" % i], "value": [b"v"], "timestamp": [T0], "offset": [base]},
                     keep_offsets=True)
    report = compact(src, tmp_path / "out", now=T0 + 1)
    groups = [c.sources for c in report.partitions[0].cleaned]
    assert groups == [["00000000000000000000.log", "00000000001073741824.log"],
                      ["00000000002147483648.log"]]
    for seg in sorted((tmp_path / "out").glob("*.log")):
        base = int(seg.stem)
        for r in read_with_kafka_python(seg.read_bytes()).records:
            assert 0 <= r["offset"] - base <= (1 << 31) - 1


@pytest.mark.parametrize("ctype", [ABORT, COMMIT])
def test_a_marker_that_bumps_the_epoch_leaves_no_last_data_offset(tmp_path, ctype):
    """ProducerStateEntry.maybeUpdateProducerEpoch: the marker's new epoch
    clears the producer's batch metadata, so the emptied batch before it is
    not its last data batch any more and goes (only the marker is kept for
    the producer); an abort on timeout and every KIP-890 end bump it."""
    seg0 = [build_batch([(T0, b"k", b"old", [])], base_offset=0, producer_id=9,
                        producer_epoch=0, base_sequence=0, transactional=True),
            control_batch(base_offset=1, producer_id=9, producer_epoch=1, control_type=ctype,
                          timestamp=T0 + 1),
            build_batch([(T0 + 2, b"k", b"new", [])], base_offset=2)]
    seg1 = [build_batch([(T0 + 3, b"x", b"y", [])], base_offset=3)]
    src = write_partition(tmp_path / "t-0", [seg0, seg1])
    compact(src, tmp_path / "out", now=T0 + HOUR, delete_retention_ms=HOUR)
    got = [(b["base_offset"], b["is_control"]) for seg in decoded(tmp_path / "out") for b in seg]
    assert got == [(1, True), (2, False), (3, False)]
    check(src, tmp_path / "out", T0 + HOUR, HOUR)


def test_a_batch_larger_than_the_read_buffer_grows_it_for_the_segment(tmp_path):
    """Cleaner.cleanInto: no whole batch in the read buffer makes
    growBuffersOrFail double it, and it stays grown until the end of that
    source segment (restoreBuffers), so the appends that follow are larger
    and the index entries fall elsewhere than with 256 KiB reads; the next
    source segment starts again at 256 KiB."""
    def seg(first, sizes):
        return [build_batch([(T0 + first + i, b"k%d" % (first + i), b"x" * n, [])],
                            base_offset=first + i) for i, n in enumerate(sizes)]
    sizes = [2000] * 200 + [300_000] + [2000] * 300
    seg0, seg1 = seg(0, sizes), seg(len(sizes), [2000] * 300)
    active = seg(len(sizes) + 300, [10])
    src = write_partition(tmp_path / "t-0", [seg0, seg1, active])
    compact(src, tmp_path / "out", now=T0 + HOUR, segment_bytes=1 << 30)
    check(src, tmp_path / "out", T0 + HOUR, 24 * HOUR)
    index = (tmp_path / "out" / f"{0:020d}.index").read_bytes()
    assert len(index) // 8 >= 4          # the model's entries, compared by check()
    expected, end = clean_model(decoded(src), now=T0 + HOUR, delete_retention_ms=24 * HOUR)
    with pytest.raises(AssertionError):  # reads that went back to 256 KiB index elsewhere
        check_indexes(src, tmp_path / "out", expected, end, max_message=256 * 1024 + 1)


def _keyed(first, keys, ts=T0):
    return [build_batch([(ts + first + i, k, None if v is None else v, [])],
                        base_offset=first + i) for i, (k, v) in enumerate(keys)]


def test_the_dirty_range_starts_at_the_cleaner_checkpoint_or_the_log_start(tmp_path):
    """LogCleanerManager.cleanableOffsets: the offset map covers [cleaner
    checkpoint (else the log start), first uncleanable); a key seen only
    below it is not in the map, so all its records stay (a checkpoint past
    the log end is reset to the log start). The cleaner checkpoint written
    is where the run ended."""
    from kbatch.lib.checkpoints import read_checkpoint
    seg0 = _keyed(0, [(b"K", b"1"), (b"K", b"2"), (b"A", b"3")])
    seg1 = _keyed(3, [(b"A", b"4"), (b"B", b"5"), (b"B", b"6")])
    active = _keyed(6, [(b"Z", b"7")])
    for name, lines, want in (
            ("start", ["log-start-offset-checkpoint", "t 0 2"], [0, 1, 3, 5, 6]),
            ("mark", ["cleaner-offset-checkpoint", "t 0 4"], [0, 1, 2, 3, 5, 6]),
            ("none", None, [1, 3, 5, 6]),
            ("past", ["cleaner-offset-checkpoint", "t 0 99"], [1, 3, 5, 6])):
        data = tmp_path / name
        src = write_partition(data / "t-0", [seg0, seg1, active])
        if lines:
            (data / lines[0]).write_text(f"0\n1\n{lines[1]}\n")
        report = compact(data, tmp_path / f"{name}-out", now=T0 + HOUR)
        got = [r for seg in decoded(tmp_path / f"{name}-out" / "t-0") for b in seg
               for r in b["records"]]
        assert [r["offset"] for r in got] == want, name
        first = {"start": 2, "mark": 4}.get(name)
        expected, end = clean_model(decoded(src), now=T0 + HOUR, delete_retention_ms=HOUR,
                                    first_dirty=first if name != "past" else 99)
        assert [o for e in expected if e is not None for o in e[0]] == want
        check(src, tmp_path / f"{name}-out" / "t-0", T0 + HOUR, 24 * HOUR,
              first_dirty=first if name != "past" else 99)
        (part,) = report.partitions
        assert part.end_offset == end == 6
        marks = read_checkpoint(tmp_path / f"{name}-out" / "cleaner-offset-checkpoint")[1]
        assert marks == [("t", 0, 6)]


def test_a_full_offset_map_ends_the_run_where_it_filled(tmp_path):
    """Cleaner.buildOffsetMapForSegment: once the map holds as many keys as
    its dedupe buffer allows, the pass ends; the run cleans up to the last
    batch read whole (records past it stay, null keys and older versions
    too) and the cleaner checkpoint says so."""
    from kbatch.lib.checkpoints import read_checkpoint
    keys = [(b"k%d" % (i % 7), b"v%d" % i) for i in range(30)] + [(None, b"n")] * 3
    seg0, seg1 = _keyed(0, keys[:15]), _keyed(15, keys[15:])
    active = _keyed(33, [(b"z", b"z")])
    data = tmp_path / "d"
    src = write_partition(data / "t-0", [seg0, seg1, active])
    # 5 keys: 24 bytes a slot, 90% of the slots
    report = compact(data, tmp_path / "out", now=T0 + HOUR, dedupe_buffer_bytes=24 * 6)
    (part,) = report.partitions
    expected, end = clean_model(decoded(src), now=T0 + HOUR, delete_retention_ms=24 * HOUR,
                                map_keys=5)
    assert part.end_offset == end == 5      # the 6th key (k5 at offset 5) found it full
    check(src, tmp_path / "out" / "t-0", T0 + HOUR, 24 * HOUR, map_keys=5)
    assert read_checkpoint(tmp_path / "out" / "cleaner-offset-checkpoint")[1] == [("t", 0, 5)]
    got = [r["offset"] for seg in decoded(tmp_path / "out" / "t-0") for b in seg
           for r in b["records"]]
    assert got == list(range(34))   # k0..k4 mapped once each: nothing older to remove
    full = compact(data, tmp_path / "all", now=T0 + HOUR)
    assert full.partitions[0].end_offset == 33
    assert len([r for seg in decoded(tmp_path / "all" / "t-0") for b in seg
                for r in b["records"]]) == 7 + 1


def test_cleaned_and_copied_segments_keep_their_age(tmp_path):
    """Cleaner.cleanSegments: a cleaned segment takes the last modification
    time of its group (retention by time falls back on it); untouched
    segments are copies as old as their sources."""
    import os
    src = write_partition(tmp_path / "t-0", make(11))
    logs = sorted(src.glob("*.log"))
    for k, p in enumerate(logs):
        os.utime(p, ns=(1_600_000_000_000_000_000 + k, 1_600_000_000_000_000_000 + k))
    report = compact(src, tmp_path / "out", now=T0 + HOUR)
    for c in report.partitions[0].cleaned:
        assert (tmp_path / "out" / c.file).stat().st_mtime_ns == \
            (src / c.sources[-1]).stat().st_mtime_ns
    for name in report.partitions[0].untouched:
        assert (tmp_path / "out" / name).stat().st_mtime_ns == (src / name).stat().st_mtime_ns


@given(seed=st.integers(0, 100_000), lag_at=st.sampled_from([None, 0, 20, 40, 60, 200]),
       ratio=st.sampled_from([None, 0.0, 0.3, 0.5, 0.8, 1.0]),
       overdue_at=st.sampled_from([None, 0, 5, 50]))
def test_compaction_lag_and_dirty_ratio_match_the_cleaner_manager(tmp_path_factory, seed,
                                                                 lag_at, ratio, overdue_at):
    """min.compaction.lag.ms keeps segments with records newer than
    ``now - lag`` dirty; with min.cleanable.dirty.ratio the log is cleaned
    only when the broker would pick it (ratio above it, or
    max.compaction.lag.ms passed since a dirty segment's first batch):
    against the model of LogCleanerManager.cleanableOffsets,
    grabFilthiestCompactedLog and maxCompactionDelay. Record i of the
    generated log is stamped T0 + i; ``lag_at``/``overdue_at``: where
    ``now - lag`` falls."""
    tmp = tmp_path_factory.mktemp("lag")
    src = write_partition(tmp / "t-0", make(seed))
    now = T0 + HOUR
    kw = {"min_compaction_lag_ms": 0 if lag_at is None else now - (T0 + lag_at),
          "min_cleanable_dirty_ratio": ratio,
          "max_compaction_lag_ms": None if overdue_at is None or ratio is None
          else now - (T0 + overdue_at)}
    if kw["max_compaction_lag_ms"] is not None and \
            kw["min_compaction_lag_ms"] > kw["max_compaction_lag_ms"]:
        # LogConfig.validateValues refuses the two configs together
        with pytest.raises(kbatch.ArgumentError, match="is above max_compaction_lag_ms"):
            compact(src, tmp / "out", now=now, delete_retention_ms=HOUR, **kw)
        return
    report = compact(src, tmp / "out", now=now, delete_retention_ms=HOUR, **kw)
    check(src, tmp / "out", now, HOUR, **kw)
    (p,) = report.partitions
    assert kbatch.verify(tmp / "out").ok
    if not p.picked:
        assert p.cleaned == [] and len(p.untouched) == len(list(src.glob("*.log")))
        assert ratio is not None and p.dirty_ratio <= ratio


def test_dirty_ratio_and_the_lag_by_hand(tmp_path):
    """Three segments of 2 batches (the last active): no checkpoint, so all
    of the first two are dirty and the ratio is 1; a cleaner checkpoint at
    the second segment's base makes the first clean (ratio: the second's
    share of the first two); a lag covering the second segment leaves it
    dirty and uncleaned."""
    segs = []
    for s in range(3):
        segs.append([build_batch([(T0 + 10 * s + j, b"k", b"v%d%d" % (s, j), [])],
                                 base_offset=2 * s + j) for j in range(2)])
    data = tmp_path / "d"
    src = write_partition(data / "t-0", segs)
    sizes = [sum(len(b) for b in seg) for seg in segs]
    r = compact(src, tmp_path / "a", now=T0 + HOUR, min_cleanable_dirty_ratio=0.5)
    assert r.partitions[0].dirty_ratio == 1.0 and r.partitions[0].picked
    (data / "cleaner-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    r = compact(data, tmp_path / "b", now=T0 + HOUR, min_cleanable_dirty_ratio=0.5)
    (p,) = r.partitions
    assert p.dirty_ratio == pytest.approx(sizes[1] / (sizes[0] + sizes[1]))
    assert not p.picked and p.cleaned == []
    r = compact(data, tmp_path / "c", now=T0 + HOUR, min_cleanable_dirty_ratio=0.5,
                max_compaction_lag_ms=HOUR - 15)     # the second segment's first batch, T0 + 10,
    #                                              is older than now - lag = T0 + 15: overdue
    assert r.partitions[0].picked and r.partitions[0].end_offset == 4
    (data / "cleaner-offset-checkpoint").unlink()     # a partition directory reads it too
    r = compact(src, tmp_path / "e", now=T0 + HOUR, min_compaction_lag_ms=HOUR - 5)
    (p,) = r.partitions            # segment 1 (largest timestamp T0 + 11) is too recent
    assert p.first_uncleanable_offset == 2 and p.end_offset == 2
    assert [c.sources for c in p.cleaned] == [[f"{0:020d}.log"]]
    with pytest.raises(kbatch.ArgumentError, match="max_compaction_lag_ms applies"):
        compact(src, tmp_path / "f", max_compaction_lag_ms=5)
    with pytest.raises(kbatch.ArgumentError, match="in \\[0, 1\\]"):
        compact(src, tmp_path / "g", min_cleanable_dirty_ratio=1.5)


def test_a_transaction_whose_marker_is_not_below_the_high_watermark_is_not_cleaned(tmp_path):
    """Producer 5's transaction at offset 0 is aborted by a marker at 3, but
    the high watermark is 3: the broker keeps it among its unreplicated
    transactions (ProducerStateManager.removeUnreplicatedTransactions drops
    one once its marker is below the high watermark), so the LSO is 0
    (UnifiedLog.lastStableOffset) and LogCleanerManager.cleanableOffsets
    cleans nothing. Once the high watermark passes the marker, [0, 3) is
    cleaned and the aborted record goes."""
    dd = tmp_path / "dd"
    part = dd / "t-0"
    part.mkdir(parents=True)
    t = 1_000_000
    segments = {
        0: [build_batch([(t, b"a", b"aborted", [])], base_offset=0, producer_id=5,
                        producer_epoch=0, base_sequence=0, transactional=True),
            build_batch([(t, b"a", b"a1", [])], base_offset=1)],
        2: [build_batch([(t, b"b", b"b2", [])], base_offset=2)],
        3: [control_batch(base_offset=3, producer_id=5, producer_epoch=0, control_type=ABORT,
                          timestamp=t),
            build_batch([(t, b"c", b"c4", [])], base_offset=4)],
        5: [build_batch([(t, b"d", b"d5", [])], base_offset=5)]}
    for base, batches in segments.items():
        (part / f"{base:020d}.log").write_bytes(b"".join(batches))
    for hw, uncleanable, cleaned in ((3, 0, []), (4, 3, [0])):
        (dd / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {hw}\n")
        out = tmp_path / f"out{hw}"
        [p] = kbatch.compact(str(dd), str(out), now=t + 10).partitions
        assert p.first_uncleanable_offset == uncleanable
        first = sorted(out.glob("t-0/*.log"))[0]
        got = [(r["offset"], r["value"]) for r in read_with_kafka_python(first.read_bytes()).records]
        assert got == ([(0, b"aborted"), (1, b"a1")] if not cleaned else [(1, b"a1"), (2, b"b2")])
    (dd / "replication-offset-checkpoint").write_text("0\n1\nt 0 3\n")
    seen = kbatch.open_log_dir(dd).read(isolation="read_committed", visibility="consumer")
    assert seen[("t", 0)].offset.tolist() == [] and seen[("t", 0)].last_stable_offset == 0


def test_topic_configs_kafka_refuses_are_refused(tmp_path, capfd):
    """segment.bytes is an INT of at least 14 in Kafka's LogConfig
    (atLeast(LegacyRecord.RECORD_OVERHEAD_V0)), max.compaction.lag.ms a LONG
    of at least 1, delete.retention.ms and min.compaction.lag.ms LONGs of
    at least 0: values a broker refuses to set are refused here, through
    the API (ArgumentError, nothing written) and the command line (exit 2),
    and the smallest values Kafka accepts are taken."""
    from kbatch.tools.cli import main
    seg0 = [build_batch([(T0, b"a", b"1", []), (T0 + 1, b"a", b"2", [])], base_offset=0)]
    seg1 = [build_batch([(T0 + 2, b"b", b"3", [])], base_offset=2)]
    src = write_partition(tmp_path / "t-0", [seg0, seg1])
    refused = [dict(segment_bytes=0), dict(segment_bytes=13), dict(segment_bytes=-1),
               dict(segment_bytes=1 << 31), dict(delete_retention_ms=1 << 63),
               dict(min_compaction_lag_ms=1 << 63),
               dict(max_compaction_lag_ms=0, min_cleanable_dirty_ratio=0.5)]
    for i, kw in enumerate(refused):
        with pytest.raises(kbatch.ArgumentError, match=f"{next(iter(kw))}.*(range|non-neg)"):
            compact(src, tmp_path / f"out{i}", now=T0 + HOUR, **kw)
        assert not (tmp_path / f"out{i}").exists()
    for i, argv in enumerate([["--segment-bytes", "0"], ["--segment-bytes", "13"],
                              ["--segment-bytes", str(1 << 31)],
                              ["--min-cleanable-dirty-ratio", "0.5",
                               "--max-compaction-lag-ms", "0"]]):
        with pytest.raises(SystemExit) as info:
            main(["compact", str(src), str(tmp_path / f"cli{i}"), *argv])
        assert info.value.code == 2
        err = capfd.readouterr().err
        assert "out of range" in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / f"cli{i}").exists()
    # LogConfig.validateValues: min.compaction.lag.ms above max.compaction.lag.ms
    with pytest.raises(kbatch.ArgumentError, match="min_compaction_lag_ms=10 is above"):
        compact(src, tmp_path / "lags", now=T0 + HOUR, min_compaction_lag_ms=10,
                max_compaction_lag_ms=5, min_cleanable_dirty_ratio=0.5)
    assert not (tmp_path / "lags").exists()
    # max_message_bytes 0 (a cleaner buffer that never holds a batch): one message
    with pytest.raises(kbatch.ArgumentError, match="max_message_bytes must be at least 1"):
        compact(src, tmp_path / "mmb", now=T0 + HOUR, max_message_bytes=0)
    with pytest.raises(kbatch.ArgumentError, match=r"max_message_bytes=2147483648 .* 1\.\."):
        compact(src, tmp_path / "mmb", now=T0 + HOUR, max_message_bytes=1 << 31)
    # numpy integers are integers (as retention() takes them)
    report = compact(src, tmp_path / "np", now=T0 + HOUR, segment_bytes=np.int64(14),
                     delete_retention_ms=np.int32(0))
    assert [c.sources for c in report.partitions[0].cleaned] == [["00000000000000000000.log"]]
    # the smallest segment.bytes Kafka takes: every source segment its own group
    report = compact(src, tmp_path / "small", now=T0 + HOUR, segment_bytes=14)
    assert [c.sources for c in report.partitions[0].cleaned] == [["00000000000000000000.log"]]
    assert main(["compact", str(src), str(tmp_path / "small-cli"), "--now", str(T0 + HOUR),
                 "--segment-bytes", "14", "--min-cleanable-dirty-ratio", "0.5",
                 "--max-compaction-lag-ms", "1"]) == 0


def test_a_partition_directory_is_cleaned_below_its_data_directorys_high_watermark(tmp_path):
    """LogCleanerManager.cleanableOffsets bounds the cleaning by the last
    stable offset, which the high watermark bounds: the high watermark of
    ``replication-offset-checkpoint`` beside the partition applies when the
    partition directory is given alone, as when the data directory is (a
    record above it is not committed and must not remove an older one).
    The data directory's own files and partitions without segments are
    copied as they are; a future replica's folder is left out and named in
    the report's notes."""
    data = tmp_path / "data"
    write_partition(data / "t-0", [[build_batch([(T0, b"a", b"1", []), (T0, b"b", b"1", [])])],
                                   [build_batch([(T0, b"a", b"2", [])], base_offset=2)],
                                   [build_batch([(T0, b"z", b"1", [])], base_offset=3)]])
    (data / "replication-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    (data / "e-0").mkdir()
    (data / "e-0" / "partition.metadata").write_text("version: 0\n")
    (data / "bootstrap.checkpoint").write_bytes(b"\x00boot")
    (data / "t-0" / "quorum-state").write_text("{}")
    write_partition(data / "t-1.0123456789abcdef0123456789abcdef-future",
                    [[build_batch([(T0, b"a", b"1", [])])]])
    report = compact(data, tmp_path / "dd", now=T0 + HOUR)
    whole = report.partitions[0]
    assert len(report.notes) == 1 and report.notes[0].startswith(
        "t-1.0123456789abcdef0123456789abcdef-future: a future replica")
    assert not (tmp_path / "dd" / "t-1.0123456789abcdef0123456789abcdef-future").exists()
    alone = compact(data / "t-0", tmp_path / "pd", now=T0 + HOUR).partitions[0]
    for p in (whole, alone):
        assert p.first_uncleanable_offset == 2
    for out in (tmp_path / "dd" / "t-0", tmp_path / "pd"):
        got = read_with_kafka_python(b"".join(f.read_bytes() for f in sorted(out.glob("*.log"))))
        assert [(r["offset"], r["key"]) for r in got.records] == [(0, b"a"), (1, b"b"), (2, b"a"),
                                                                   (3, b"z")]
        assert (out / "quorum-state").read_text() == "{}"
    assert (tmp_path / "dd" / "e-0" / "partition.metadata").read_text() == "version: 0\n"
    assert (tmp_path / "dd" / "bootstrap.checkpoint").read_bytes() == b"\x00boot"


def test_topics_the_cleaner_does_not_clean_are_copied_as_they_are(tmp_path, capfd):
    """The log cleaner cleans logs whose cleanup.policy holds "compact": a
    topic of policy "delete" and the KRaft metadata log (never cleaned) are
    copied byte for byte, named in the report; the broker's compacted
    topics and the rest are cleaned."""
    from kbatch.tools.cli import main
    data = tmp_path / "data"
    rows = [[build_batch([(T0, b"a", b"1", []), (T0, b"a", b"2", [])])],
            [build_batch([(T0, b"z", b"1", [])], base_offset=2)]]
    for topic in ("__cluster_metadata", "__consumer_offsets", "logs", "table"):
        write_partition(data / f"{topic}-0", rows)
    report = compact(data, tmp_path / "out", now=T0 + HOUR, cleanup_policy={"logs": "delete"})
    assert sorted(report.not_compacted) == ["__cluster_metadata-0 (cleanup.policy metadata)",
                                            "logs-0 (cleanup.policy delete)"]
    assert sorted(p.topic for p in report.partitions) == ["__consumer_offsets", "table"]
    for name in ("__cluster_metadata-0", "logs-0"):
        for f in (data / name).iterdir():
            assert (tmp_path / "out" / name / f.name).read_bytes() == f.read_bytes()
    assert [r["offset"] for r in read_with_kafka_python(
        (tmp_path / "out" / "table-0" / f"{0:020d}.log").read_bytes()).records] == [1]
    alone = compact(data / "logs-0", tmp_path / "alone", cleanup_policy="delete")
    assert alone.partitions == [] and alone.not_compacted == ["logs-0 (cleanup.policy delete)"]
    assert sorted(f.name for f in (tmp_path / "alone").iterdir()) == \
        sorted(f.name for f in (data / "logs-0").iterdir())
    write_partition(data / "table-1-stray", rows)
    assert main(["compact", str(data), str(tmp_path / "cli"), "--cleanup-policy", "delete"]) == 0
    out = capfd.readouterr().out
    assert "table-0 (cleanup.policy delete): not cleaned" in out
    assert "note: table-1-stray: a stray replica" in out
    with pytest.raises(kbatch.ArgumentError, match="cleanup"):
        compact(data, tmp_path / "bad", cleanup_policy="keep")


@pytest.mark.parametrize("clean, recovered", [(True, False), (False, True)])
def test_min_compaction_lag_sees_a_segment_without_its_time_index_as_the_broker_does(
        tmp_path, clean, recovered):
    """LogCleanerManager.cleanableOffsets holds back a dirty segment whose
    largestTimestamp is within min.compaction.lag.ms. A segment with an
    ``.index`` and no ``.timeindex`` that the broker's load does not recover
    (clean shutdown) has no largest timestamp but its file's time (recent
    here); recovered (unclean, recovery point 0), its batches' (an hour old)."""
    import os
    data = tmp_path / "data"
    src = write_partition(data / "t-0", [
        [build_batch([(T0, b"a", b"1", []), (T0, b"a", b"2", [])])],
        [build_batch([(T0 + 1, b"a", b"3", [])], base_offset=2)]])
    now = T0 + HOUR
    first = src / f"{0:020d}.log"
    os.utime(first, ((now - 10_000) / 1000, (now - 10_000) / 1000))   # written 10 s ago
    (src / f"{0:020d}.index").write_bytes(b"")
    if clean:
        (data / ".kafka_cleanshutdown").write_text("")
    (p,) = compact(data, tmp_path / "out", now=now, min_compaction_lag_ms=60_000).partitions
    assert p.first_uncleanable_offset == (2 if recovered else 0)
    assert [c.records_out for c in p.cleaned] == ([1] if recovered else [])
