"""``view="latest"``: the table a compacted topic stands for, against a
dict model (tests/lifecycle_ref.latest_model) over what kafka-python
decodes, on partitions written by the independent encoders of
tests/kafka_ref.py and on the real corpus."""

from __future__ import annotations

import logging
import pathlib
import struct

import numpy as np
import pytest
from hypothesis import given, strategies as st

import kbatch
from kbatch.lib.latest import latest, latest_indices
from tests.conftest import CORPUS, needs_corpus
from tests.kafka_ref import (ABORT, COMMIT, build_batch, control_batch,
                             read_with_kafka_python)
from tests.lifecycle_ref import latest_model, write_partition


def kafka_rows(directory) -> list[dict]:
    """kafka-python's data records of every segment, with producer ids."""
    rows = []
    for seg in sorted(pathlib.Path(directory).glob("*.log")):
        got = read_with_kafka_python(seg.read_bytes())
        for r in got.records:
            b = got.batches[r["batch"]]
            rows.append({**r, "producer_id": b.get("producer_id", -1),
                         "transactional": b.get("is_transactional", False)})
    return rows


def as_rows(records) -> list[tuple]:
    return [(r.offset, r.key, r.value, [(k, v) for k, v in r.headers]) for r in records]


def model_rows(table: dict) -> list[tuple]:
    return sorted((r["offset"], r["key"], r["value"], list(r["headers"]))
                  for r in table.values())


keys = st.sampled_from([None, b"", b"a", b"b", b"k" * 12, b"k" * 13, b"x" * 17,
                        b"x" * 16 + b"y", b"\x00" * 8, b"\x00" * 9])
values = st.one_of(st.none(), st.binary(max_size=20))
batches = st.lists(st.lists(st.tuples(keys, values), min_size=1, max_size=6),
                   min_size=1, max_size=12)


def encode(tmp_path, spec, codec_of, segment_every: int) -> pathlib.Path:
    """``spec``: batches of (key, value); written with kafka-python's builder.
    Every third batch looks cleaned: a delete horizon (attribute bit 6, the
    base timestamp its horizon) and offset gaps, as the log cleaner leaves."""
    segments, current, offset = [], [], 0
    for i, recs in enumerate(spec):
        cleaned = i % 3 == 2
        step = 2 if cleaned else 1
        rows = [(1_700_000_000_000 + offset + j, k, v, [("h", b"%d" % (offset + j))])
                for j, (k, v) in enumerate(recs)]
        current.append(build_batch(rows, base_offset=offset, codec=codec_of(i),
                                   delete_horizon=cleaned,
                                   offset_deltas=[step * j for j in range(len(recs))]))
        offset += step * len(recs)
        if (i + 1) % segment_every == 0:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    return write_partition(tmp_path / "t-0", segments)


@given(spec=batches, codec=st.sampled_from([0, 1, 2, 3, 4]), every=st.integers(1, 5))
def test_latest_matches_the_model(tmp_path_factory, spec, codec, every):
    d = encode(tmp_path_factory.mktemp("l"), spec, lambda i: codec if i % 2 else 0, every)
    want = model_rows(latest_model(kafka_rows(d)))
    log = kbatch.open_log(d)
    assert as_rows(log.read(view="latest")) == want
    assert as_rows(log.read(view="latest", zero_copy=True)) == want
    # the same table from every column set that holds key and value
    part = log.read(view="latest", columns=["offset", "key", "value"])
    assert part.offset.tolist() == [w[0] for w in want]


def test_tombstones_null_keys_and_summary(tmp_path, caplog):
    spec = [[(b"a", b"1"), (b"b", b"2"), (None, b"n")], [(b"a", None), (b"c", b"3")],
            [(b"b", b"4"), (None, None), (b"a", b"5"), (b"c", None)]]
    d = encode(tmp_path, spec, lambda i: 0, 2)
    log = kbatch.open_log(d)
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        table = log.read(view="latest")
    assert [(r.key, r.value) for r in table] == [(b"b", b"4"), (b"a", b"5")]
    assert "2 record(s) without a key" in caplog.text
    _, summary = latest(log.read())
    assert (summary.records, summary.keys, summary.rows, summary.tombstones,
            summary.null_keys) == (9, 3, 2, 1, 2)


def test_read_committed_aborted_records_never_count(tmp_path):
    """An aborted transaction's update and tombstone of a key leave the
    committed value in the table; an open transaction is past the LSO."""
    t = 1_700_000_000_000
    batches = [
        build_batch([(t, b"k", b"v1", []), (t, b"j", b"j1", [])], base_offset=0),
        build_batch([(t, b"k", b"aborted", []), (t, b"j", None, [])], base_offset=2,
                    producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
        control_batch(base_offset=4, producer_id=7, producer_epoch=0, control_type=ABORT),
        build_batch([(t, b"j", b"j2", [])], base_offset=5, producer_id=8, producer_epoch=0,
                    base_sequence=0, transactional=True),
        control_batch(base_offset=6, producer_id=8, producer_epoch=0, control_type=COMMIT),
        build_batch([(t, b"k", b"open", [])], base_offset=7, producer_id=9, producer_epoch=0,
                    base_sequence=0, transactional=True),
    ]
    d = write_partition(tmp_path / "t-0", [batches[:3], batches[3:]])
    aborted = {(7, 2), (7, 3)}
    committed = latest_model([r for r in kafka_rows(d) if r["offset"] != 7], aborted)
    log = kbatch.open_log(d)
    got = log.read(view="latest", isolation="read_committed")
    assert as_rows(got) == model_rows(committed)
    assert [(r.key, r.value) for r in got] == [(b"k", b"v1"), (b"j", b"j2")]
    # read_uncommitted: every record counts
    assert [(r.key, r.value) for r in log.read(view="latest")] == [(b"j", b"j2"), (b"k", b"open")]


def test_log_dir_read_table_and_arguments(tmp_path):
    data = tmp_path / "data"
    encode(data / "a", [[(b"x", b"1"), (b"x", b"2")]], lambda i: 0, 1).rename(data / "a-0")
    encode(data / "b", [[(b"y", b"1"), (b"y", None), (b"z", b"3")]], lambda i: 0, 1) \
        .rename(data / "b-0")
    logs = kbatch.open_log_dir(data)
    got = logs.read(view="latest", threads=2)
    assert [(r.key, r.value) for r in got[("a", 0)]] == [(b"x", b"2")]
    assert [(r.key, r.value) for r in got[("b", 0)]] == [(b"z", b"3")]
    table = kbatch.read_table(data, view="latest")
    assert sorted(table.column("key").to_pylist()) == [b"x", b"z"]
    assert kbatch.read_table(data / "a-0", view="latest").num_rows == 1
    ranged = logs.read(start_offset=1, view="latest")
    assert [(r.key, r.value) for r in ranged[("b", 0)]] == [(b"z", b"3")]
    with pytest.raises(kbatch.ArgumentError, match="value"):
        logs.read(view="latest", columns=["offset", "key"])
    with pytest.raises(kbatch.ArgumentError, match="view must be one of"):
        logs.read(view="newest")
    with pytest.raises(kbatch.ArgumentError, match="use read"):
        next(iter(logs.partitions[0].iter(view="latest")))
    with pytest.raises(kbatch.ArgumentError, match="use read"):
        next(iter(logs.iter(view="latest")))


def test_kernel_refuses_keys_outside_their_buffer():
    from kbatch._core._latest import latest_rows
    offsets = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="outside"):
        latest_rows(np.array([0, 5, 9], np.int32), np.zeros(4, np.uint8), None, None, [],
                    offsets, None)
    with pytest.raises(ValueError, match="outside"):
        latest_rows(np.array([3, 1, 2], np.int64), np.zeros(4, np.uint8), None, None, [],
                    offsets, None)
    views = np.zeros(32, np.uint8)
    views[:4] = np.frombuffer(struct.pack("<i", 20), np.uint8)      # long, buffer 0 at 0
    with pytest.raises(ValueError, match="outside"):
        latest_rows(None, None, None, views, [np.zeros(8, np.uint8)], offsets, None)
    views[:4] = np.frombuffer(struct.pack("<i", -1), np.uint8)
    with pytest.raises(ValueError, match="outside"):
        latest_rows(None, None, None, views, [np.zeros(8, np.uint8)], offsets, None)
    with pytest.raises(ValueError, match="bitmap"):
        latest_rows(np.array([0, 0, 0], np.int32), np.zeros(0, np.uint8),
                    np.zeros(0, np.uint8), None, [], offsets, None)


def test_many_keys_and_collisions_of_the_short_path():
    """100 k rows of 30 k keys (the table grows many times), keys equal in
    their first and last 4 bytes or their first 16, and the winner decided
    by offset, not row order."""
    n = 100_000
    keys = [b"%08d" % (i % 30_000) for i in range(n)] + [b"AAAA" + bytes([i]) + b"ZZZZ"
                                                          for i in range(200)]
    # keys alike in their first 16 bytes (the heads beside the slots), and
    # 16-byte keys alike but for their last byte
    keys += [b"0123456789abcdef%03d" % (i % 300) for i in range(900)]
    keys += [b"0123456789abcde" + bytes([i % 256]) for i in range(600)]
    keys = keys * 1
    vals = [b"%d" % i for i in range(len(keys))]
    col = kbatch.BinaryColumn.from_pylist(keys)
    offsets = np.arange(len(keys), dtype=np.int64)[::-1].copy()   # later rows: lower offsets
    from kbatch._core._latest import latest_rows
    rows, nkeys, tombs, nulls = latest_rows(col.offsets, col.data, None, None, [], offsets,
                                            None)
    want = {}
    for i, k in enumerate(keys):
        if k not in want:                  # the first row has the highest offset
            want[k] = i
    assert nkeys == len(want) and tombs == 0 and nulls == 0
    assert rows.tolist() == sorted(want.values())
    del vals


def _model_latest(keys, offsets, tomb):
    """The latest row of each non-null key (highest offset, then later row),
    kept unless a tombstone: (rows, keys, tombstones, null keys)."""
    best = {}
    for i, k in enumerate(keys):
        if k is None:
            continue
        j = best.get(k)
        if j is None or offsets[i] >= offsets[j]:
            best[k] = i
    rows = sorted(i for i in best.values() if not tomb[i])
    return rows, len(best), sum(1 for i in best.values() if tomb[i]), keys.count(None)


def _bits(flags) -> np.ndarray:
    return np.packbits(np.asarray(flags, bool), bitorder="little")


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("layout", ["offsets32", "offsets64", "views"])
def test_many_distinct_keys_take_the_partitioned_pass(ordered, layout):
    """Over 32 k distinct keys the kernel partitions the rows by hash (entries
    holding a key's first 16 bytes): keys of every length, keys equal in
    their first 16 bytes, null keys, tombstones, winners by offset (ties:
    the later row), on one thread and in runs on three (each pass cut into
    runs of rows or partitions: the same answer)."""
    from kbatch._core._latest import latest_rows
    rng = np.random.default_rng(7)
    n = 200_000
    pool = ([b"%d" % i for i in range(40_000)]
            + [b"0123456789abcdef" + b"%d" % i for i in range(20_000)]     # one 16-byte head
            + [b"x" * 16, b"", b"y" * 40] + [bytes(rng.integers(0, 256, 30)) for _ in range(9000)])
    keys = [pool[i] for i in rng.integers(0, len(pool), n)]
    for i in rng.choice(n, 500, replace=False):
        keys[i] = None
    tomb = (rng.random(n) < 0.1).tolist()
    offsets = (np.arange(n, dtype=np.int64) * 3 if ordered
               else rng.permutation(n).astype(np.int64) // 2)      # ties too
    col = kbatch.BinaryColumn.from_pylist(keys)
    kvalid = None if col.validity is None else col.validity
    vvalid = _bits([not t for t in tomb])
    if layout == "views":
        from kbatch._core._kernels import views_from_binary
        views = np.zeros(16 * n, np.uint8)
        views_from_binary(col.offsets, col.data, views, 0)
        args = (None, None, kvalid, views, [col.data], offsets, vvalid)
    else:
        dtype = np.int32 if layout == "offsets32" else np.int64
        args = (col.offsets.astype(dtype), col.data, kvalid, None, [], offsets, vvalid)
    want = _model_latest(keys, offsets.tolist(), tomb)
    assert want[1] > 32_768
    for threads in (1, 3):
        rows, nkeys, tombs, nulls = latest_rows(*args, threads)
        assert (rows.tolist(), nkeys, tombs, nulls) == want


def test_partitioned_pass_refuses_a_key_outside_its_buffer():
    """A bad key after the table outgrew the cache is found by the
    partitioned pass's first walk; on threads, the first bad row is named
    whichever run finds it."""
    from kbatch._core._latest import latest_rows
    n = 200_000
    col = kbatch.BinaryColumn.from_pylist([b"%06d" % i for i in range(n)])
    for bad in (50_000, 150_000):
        offs = col.offsets.astype(np.int64)
        offs[bad + 1:] += 1_000_000         # row ``bad`` and every later one end past the data
        for threads in (1, 3):
            with pytest.raises(ValueError, match=f"row {bad} lies outside"):
                latest_rows(offs, col.data, None, None, [], np.arange(n, dtype=np.int64),
                            None, threads)


# three of dipendrasaini's five invoice partitions (one producer's data, 3 MB
# each: 5 s of kafka-python's decoding under make test); invoice-0 (written
# by a follower) and invoice-2 (by the leader) stay
ALIKE = {"invoice-1", "invoice-3", "invoice-4"}


@needs_corpus
def test_corpus_partitions():
    """Every real partition kafka-python decodes (magic 2): the table view
    equals the model over kafka-python's records, zero_copy too."""
    checked = 0
    for d in sorted({p.parent for p in CORPUS.rglob("*.log")}):
        if not d.name.rpartition("-")[2].isdigit() or d.name in ALIKE:
            continue
        try:
            rows = kafka_rows(d)
            log = kbatch.open_log(d)
            records = log.read()
        except Exception:       # noqa: BLE001 - damaged or legacy copies: not this test's
            continue
        want = model_rows(latest_model(rows))
        got, _ = latest(records)
        assert as_rows(got) == want, d
        assert as_rows(log.read(view="latest", zero_copy=True)) == want, d
        rows_idx, summary = latest_indices(records)
        assert summary.rows == len(want)
        checked += 1
    assert checked >= 100


def test_cli_latest(tmp_path, capfd):
    import json
    from kbatch.tools.cli import main
    spec = [[(b"a", b"1"), (b"b", b"2"), (None, b"n")], [(b"a", None), (b"c", b"\xff")]]
    d = encode(tmp_path / "data", spec, lambda i: 0, 1)
    assert main(["latest", str(d)]) == 0
    out, err = capfd.readouterr()
    assert out.splitlines() == ["t-0 offset 1 timestamp 1700000000001 key b value 2",
                                "t-0 offset 4 timestamp 1700000000004 key c value b'\\xff'"]
    assert "2 keys in the table from 5 records; 1 keys deleted by a tombstone, 1 records" \
        in err
    assert main(["latest", str(d.parent), "--format", "json", "--decode", "utf8",
                 "--limit", "1"]) == 0
    lines = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    assert lines[0]["key"] == "b" and lines[0]["value"] == "2"
    assert lines[1]["summary"]["null_keys"] == 1
    assert main(["latest", str(d / "00000000000000000000.log")]) == 2
    with pytest.raises(SystemExit) as exit_:
        main(["latest", str(d), "--limit", "-1"])
    assert exit_.value.code == 2
    # as a consumer sees it: [log start, high watermark) of the checkpoints
    # beside the partition (offsets 1..3 here: b=2 and the tombstone of a)
    (d.parent / "log-start-offset-checkpoint").write_text("0\n1\nt 0 1\n")
    (d.parent / "replication-offset-checkpoint").write_text("0\n1\nt 0 4\n")
    assert main(["latest", str(d), "--visibility", "consumer"]) == 0
    out, err = capfd.readouterr()
    assert out.splitlines() == ["t-0 offset 1 timestamp 1700000000001 key b value 2"]
    assert "from 3 records" in err


def test_a_large_take_on_threads_equals_one_thread():
    """A large take is copied in runs on threads (the table view's take,
    ``kbatch._core._take``): the same column as on one thread, with nulls
    and empty values, whatever the order of the indices, runs of rows that
    are not a multiple of 8 included; the values are the written ones."""
    rng = np.random.default_rng(3)
    values = [None if i % 17 == 0 else bytes(rng.integers(0, 256, int(rng.integers(0, 300)),
                                                         dtype=np.uint8)) for i in range(80_000)]
    col = kbatch.BinaryColumn.from_pylist(values)
    for idx in (np.sort(rng.choice(len(values), 60_001, replace=False)),
                rng.integers(0, len(values), 90_003)):
        want = [values[i] for i in idx.tolist()]
        one = col.take(idx)
        assert one.to_pylist() == want
        assert one.null_count == sum(v is None for v in want)
        for threads in (2, 3, 8):
            many = col.take(idx, threads)
            assert many.offsets.tolist() == one.offsets.tolist()
            assert many.validity.tolist() == one.validity.tolist()
            assert many.to_pylist() == want


def test_the_take_kernel_checks_rows_and_offsets():
    """``kbatch._core._take.take_binary`` copies nothing before every row
    and every value's offsets are checked: a row outside the column is an
    IndexError, offsets outside the data (or going back) a ValueError, on
    one thread or many; int64 offsets read like int32 ones."""
    from kbatch._core._take import take_binary
    data = np.frombuffer(b"abcdefgh" * 10_000, np.uint8)
    offsets = np.arange(0, 80_001, 2, dtype=np.int32)       # 40 000 values of 2 bytes
    rows = np.arange(0, 40_000, 3, dtype=np.int64)
    calls = []

    def allocate(n):
        calls.append(n)
        return np.zeros(n, np.uint8)
    for off in (offsets, offsets.astype(np.int64)):
        out_off, out_data, validity, nulls = take_binary(off, data, None, rows, 4, allocate)
        assert validity is None and nulls == 0 and out_off.dtype == np.int32
        assert out_off.tolist() == list(range(0, 2 * len(rows) + 1, 2))
        assert bytes(out_data) == b"".join(bytes(data[2 * r:2 * r + 2]) for r in rows.tolist())
    calls.clear()
    for threads in (1, 4):
        bad = rows.copy()
        bad[-1] = 40_000
        with pytest.raises(IndexError, match="40000 out of range for 40000"):
            take_binary(offsets, data, None, bad, threads, allocate)
        bad[-1] = -1
        with pytest.raises(IndexError):
            take_binary(offsets, data, None, bad, threads, allocate)
        broken = offsets.copy()
        broken[30_001] = 1 << 30                         # past the data
        with pytest.raises(ValueError, match="row 30000"):
            take_binary(broken, data, None, np.arange(40_000, dtype=np.int64), threads,
                        allocate)
        broken = offsets.copy()
        broken[20_000] = 5                               # going back
        with pytest.raises(ValueError):
            take_binary(broken, data, None, np.arange(40_000, dtype=np.int64), threads,
                        allocate)
    assert calls == []                                   # nothing allocated, nothing copied
    with pytest.raises(ValueError, match="validity"):
        take_binary(offsets, data, np.zeros(10, np.uint8), rows, 1, allocate)


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("layout", ["offsets32", "views"])
def test_few_keys_on_threads_merge_in_row_order(ordered, layout):
    """Under 32 k distinct keys the kernel keeps one table in the cache;
    with threads, each run of rows fills a table of its own, merged in row
    order: keys seen in one run only, keys longer than 16 bytes (equal in
    their first 16), null keys, tombstones, winners by offset with ties
    (the later row): the model's answer on 1, 2 and 3 threads."""
    from kbatch._core._latest import latest_rows
    rng = np.random.default_rng(11)
    n = 300_000
    pool = ([b"%d" % i for i in range(3000)]
            + [b"0123456789abcdef" + b"%d" % i for i in range(500)] + [b"", b"z" * 40])
    keys = [pool[i] for i in rng.integers(0, len(pool), n)]
    keys[-1] = b"only in the last run"
    keys[5] = b"only in the first run"
    for i in rng.choice(n, 300, replace=False):
        keys[i] = None
    tomb = (rng.random(n) < 0.1).tolist()
    offsets = (np.arange(n, dtype=np.int64) * 2 if ordered
               else rng.permutation(n).astype(np.int64) // 3)      # ties too
    col = kbatch.BinaryColumn.from_pylist(keys)
    vvalid = _bits([not t for t in tomb])
    if layout == "views":
        from kbatch._core._kernels import views_from_binary
        views = np.zeros(16 * n, np.uint8)
        views_from_binary(col.offsets, col.data, views, 0)
        args = (None, None, col.validity, views, [col.data], offsets, vvalid)
    else:
        args = (col.offsets, col.data, col.validity, None, [], offsets, vvalid)
    want = _model_latest(keys, offsets.tolist(), tomb)
    assert want[1] < 32_768
    for threads in (1, 2, 3):
        rows, nkeys, tombs, nulls = latest_rows(*args, threads)
        assert (rows.tolist(), nkeys, tombs, nulls) == want


def test_few_keys_on_threads_name_the_first_bad_row():
    """A bad key in the second run of rows and another in the third: the
    first one is named, on any number of threads."""
    from kbatch._core._latest import latest_rows
    n = 300_000
    col = kbatch.BinaryColumn.from_pylist([b"%03d" % (i % 500) for i in range(n)])
    offs = col.offsets.astype(np.int64)
    offs[160_001] = 1 << 40         # row 160 000 ends past the data, row 160 001 starts there
    offs[250_001] = 1 << 41
    for threads in (1, 2, 3):
        with pytest.raises(ValueError, match="row 160000 lies outside"):
            latest_rows(offs, col.data, None, None, [], np.arange(n, dtype=np.int64), None,
                        threads)


@pytest.mark.parametrize("distinct", [100, 40_000])
@pytest.mark.parametrize("layout", ["offsets32", "views"])
def test_a_key_read_as_words_and_copied_is_one_key(distinct, layout):
    """A key's first 16 bytes are loaded as two words where 16 bytes of its
    buffer follow its start, masked to its length, and copied where fewer
    do (the last keys of the buffer, a view's inline value): a key of each
    length 0..20 written mid-buffer, followed by other bytes, and again as
    the buffer's last value is one key, its later row the winner, in the
    cached pass (few keys) and the partitioned pass (many)."""
    from kbatch._core._latest import latest_rows
    for length in range(21):
        key = bytes(range(65, 65 + length))
        filler = [b"%06d" % i + b"\xff" * 12 for i in range(distinct)]
        # mid-buffer, followed by bytes that differ from the zero padding
        keys = [key, b"\xee" * 20] + filler + [key[:length - 1] + b"\x00"] * (length > 0) + [key]
        col = kbatch.BinaryColumn.from_pylist(keys)
        n = len(keys)
        if layout == "views":
            from kbatch._core._kernels import views_from_binary
            views = np.zeros(16 * n, np.uint8)
            views_from_binary(col.offsets, col.data, views, 0)
            args = (None, None, None, views, [col.data])
        else:
            args = (col.offsets, col.data, None, None, [])
        offsets = np.arange(n, dtype=np.int64)
        want = _model_latest(keys, offsets.tolist(), [False] * n)
        for threads in (1, 2):
            rows, nkeys, tombs, nulls = latest_rows(*args, offsets, None, threads)
            assert (rows.tolist(), nkeys, tombs, nulls) == want, length
            assert 0 not in rows.tolist() and n - 1 in rows.tolist()


def test_the_views_take_kernel_copies_and_checks():
    """``take_views``: values of a views column (inline ones of up to 12
    bytes, others in several buffers) copied in row order, on one thread
    or many, nulls kept; a view outside its buffers is a ValueError before
    anything is allocated; ``ViewColumn.to_binary`` uses it."""
    from kbatch._core._take import take_views
    from kbatch.lib.views import ViewColumn
    rng = np.random.default_rng(5)
    values = [None if i % 13 == 0 else bytes(rng.integers(0, 256, int(rng.integers(0, 40)),
                                                         dtype=np.uint8)) for i in range(70_000)]
    half = len(values) // 2
    first = kbatch.BinaryColumn.from_pylist(values[:half])
    second = kbatch.BinaryColumn.from_pylist(values[half:])
    col = ViewColumn.concat([first, second])             # two data buffers
    assert len(col.buffers) == 2
    idx = np.sort(rng.choice(len(values), 50_001, replace=False)).astype(np.int64)
    calls = []

    def allocate(n):
        calls.append(n)
        return np.zeros(n, np.uint8)
    for threads in (1, 3):
        offs, data, validity, nulls = take_views(col.views, col.buffers, col.validity, idx,
                                                 threads, allocate)
        got = kbatch.BinaryColumn(offs, data, validity, nulls)
        assert got.to_pylist() == [values[i] for i in idx.tolist()]
    assert col.to_binary().to_pylist() == values
    # a null slot's view means nothing (Arrow): junk there is not read
    junk = col.views.copy()
    null_row = values.index(None)
    junk[16 * null_row:16 * null_row + 16] = np.frombuffer(struct.pack("<iiii", 99, 0, 7, 1 << 30),
                                                          np.uint8)
    assert ViewColumn(junk, col.validity, col.null_count, col.buffers).to_binary().to_pylist() \
        == values
    calls.clear()
    long_row = next(i for i, v in enumerate(values) if v is not None and len(v) > 12)
    for field, bad in ((8, 2), (12, 1 << 30), (0, -1)):   # buffer, offset, length
        views = col.views.copy()
        views[16 * long_row + field:16 * long_row + field + 4] = np.frombuffer(
            struct.pack("<i", bad), np.uint8)
        with pytest.raises(ValueError, match=f"row {long_row} lies outside"):
            take_views(views, col.buffers, col.validity, np.arange(len(values), dtype=np.int64),
                       2, allocate)
    assert calls == []


def test_a_table_of_a_read_past_damage_says_so(tmp_path, caplog):
    """The batch holding a's newest value fails its CRC: a read that skips
    it (or stops there) gives a table whose a is the older value, which
    the rows alone cannot tell: the view warns, naming what was passed
    over; a read without damage does not."""
    T0 = 1_700_000_000_000
    good = build_batch([(T0, b"a", b"old", [])], base_offset=0)
    bad = bytearray(build_batch([(T0, b"a", b"new", [])], base_offset=1))
    bad[-1] ^= 0xFF                                  # a record byte: the CRC fails
    tail = build_batch([(T0, b"b", b"1", [])], base_offset=2)
    src = write_partition(tmp_path / "t-0", [[good, bytes(bad), tail]])
    log = kbatch.open_log(src)
    for mode, what in (("skip", "damaged range(s) skipped"), ("stop", "stopped at damage")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kbatch"):
            table = log.read(view="latest", on_corrupt=mode)
        assert table.value[0] == b"old"
        assert [r for r in caplog.records if what in r.getMessage()], mode
    with pytest.raises(kbatch.CorruptRecordError):
        log.read(view="latest")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        kbatch.open_log(write_partition(tmp_path / "u-0", [[good, tail]])).read(view="latest")
    assert not [r for r in caplog.records if "view='latest' of a read" in r.getMessage()]
