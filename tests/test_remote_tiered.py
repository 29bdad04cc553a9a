"""Tiered-storage buckets (the open-source plugin's layout), built by the
test-side encoder (tests/tiered_encoder.py) from known segments in every
variant, read back through s3:// and compared with the source segments."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("moto")
pytest.importorskip("cryptography")

import kbatch  # noqa: E402
from kbatch.errors import CorruptRecordError, KbatchError  # noqa: E402
from kbatch.lib import tiered  # noqa: E402

from .remote_s3 import BUCKET, S3  # noqa: E402
from .test_remote_plain import records, same  # noqa: E402
from .tiered_encoder import (Encoder, encode_partition, encode_sizes, kafka_uuid,  # noqa: E402
                             rsa_pem_pair)

VARIANTS = ("plain", "compressed", "encrypted", "both")
TOPIC_ID = kafka_uuid()


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keys():
    return rsa_pem_pair()


def last_offsets(directory, last: int) -> dict[int, int]:
    bases = sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log"))
    return {b: (bases[i + 1] - 1 if i + 1 < len(bases) else last) for i, b in enumerate(bases)}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiered-src")
    kbatch.write_log(root / "orders-0", records(5000, 7), codec="snappy",
                     segment_bytes=200 << 10, batch_records=25)
    return root / "orders-0"


def upload(s3, objects: dict, prefix: str):
    for key, data in objects.items():
        s3.fs.pipe_file(f"{BUCKET}/{prefix}/{key}", data)
    s3.fs.invalidate_cache()


@pytest.fixture(scope="module")
def buckets(s3, source, keys):
    for variant in VARIANTS:
        enc = Encoder(variant, chunk_size=16 << 10, public_pem=keys[1])
        upload(s3, encode_partition(enc, str(source), topic="orders", topic_id=TOPIC_ID,
                                    partition=0, last_offsets=last_offsets(source, 4999)),
               f"tiered-{variant}")
    return source


@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_read_identically(s3, buckets, keys, variant):
    url = f"s3://{BUCKET}/tiered-{variant}/orders-{TOPIC_ID}/0"
    remote = kbatch.open_log(url, layout="tiered", storage_options=s3.options(),
                       private_key=keys[0], block=1 << 16)
    assert (remote.topic, remote.partition) == ("orders", 0)
    local = kbatch.open_log(buckets)
    # the segment bytes themselves come back byte for byte
    for seg in remote.segments:
        src = seg.source
        with open(buckets / f"{seg.base_offset:020d}.log", "rb") as fh:
            assert src.read(0, src.size) == fh.read()
    same(remote.read(), local.read())
    for lo, hi in ((0, 10), (1234, 1300), (4990, 6000)):
        same(remote.read(lo, hi), local.read(lo, hi), end=False)


def test_seek_reads_only_the_chunks_it_needs(s3, buckets, keys):
    url = f"s3://{BUCKET}/tiered-both/orders-{TOPIC_ID}/0"
    remote = kbatch.open_log(url, layout="tiered", storage_options=s3.options(),
                       private_key=keys[0])
    # opening fetched every manifest (which upload serves which offsets
    # needs their start and end offsets and leader epochs: kbatch.lib.uploads)
    s3.proxy.reset()
    got = remote.read(3000, 3005)
    assert list(got.offset) == list(range(3000, 3005))
    # the .indexes range of the offset index, then the chunks from the batch on
    assert s3.proxy.gets == 2
    seg = [s for s in remote.segments if s.base_offset <= 3000][-1]
    stored = seg.source.raw.size
    assert s3.proxy.get_bytes < stored / 2


def test_directory_of_tiered_topics(s3, buckets, keys):
    d = kbatch.open_log_dir(f"s3://{BUCKET}/tiered-encrypted", layout="tiered",
                     storage_options=s3.options(), private_key=keys[0])
    assert [(p.topic, p.partition) for p in d.partitions] == [("orders", 0)]


def test_duplicate_uploads_give_each_offset_once(s3, buckets, keys):
    enc = Encoder("compressed", chunk_size=8 << 10)
    lasts = last_offsets(buckets, 4999)
    objects = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID,
                               partition=0, last_offsets=lasts)
    # the first two segments uploaded again under new UUIDs (a leader change)
    again = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID,
                             partition=0, last_offsets=lasts)
    firsts = sorted(lasts)[:2]
    objects.update({k: v for k, v in again.items()
                    if int(k.split("/")[-1][:20]) in firsts})
    upload(s3, objects, "tiered-dup")
    names = s3.fs.ls(f"{BUCKET}/tiered-dup/orders-{TOPIC_ID}/0")
    assert sum(n.endswith(".rsm-manifest") for n in names) == len(lasts) + 2
    remote = kbatch.open_log(f"s3://{BUCKET}/tiered-dup/orders-{TOPIC_ID}/0", layout="tiered",
                       storage_options=s3.options())
    got = remote.read()
    np.testing.assert_array_equal(got.offset, np.arange(5000))
    same(got, kbatch.open_log(buckets).read())


def test_overlapping_reupload_gives_each_offset_once(s3, buckets):
    # another leader's segment starting inside an uploaded one: offsets once
    enc = Encoder("plain", chunk_size=8 << 10)
    lasts = last_offsets(buckets, 4999)
    objects = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID,
                               partition=0, last_offsets=lasts)
    tmp = buckets.parent / "overlap"
    kbatch.write_log(tmp, records(5000, 7)[1500:2600], codec="snappy", base_offset=1500,
                     segment_bytes=1 << 30, batch_records=25)
    objects.update(encode_partition(enc, str(tmp), topic="orders", topic_id=TOPIC_ID,
                                    partition=0, last_offsets={1500: 2599}))
    upload(s3, objects, "tiered-overlap")
    remote = kbatch.open_log(f"s3://{BUCKET}/tiered-overlap/orders-{TOPIC_ID}/0", layout="tiered",
                       storage_options=s3.options())
    np.testing.assert_array_equal(remote.read().offset, np.arange(5000))


# --- failures ----------------------------------------------------------------

def test_wrong_or_missing_key(s3, buckets):
    url = f"s3://{BUCKET}/tiered-encrypted/orders-{TOPIC_ID}/0"
    other = rsa_pem_pair()[0]
    with pytest.raises(tiered.DecryptionError, match="wrong key"):
        kbatch.open_log(url, layout="tiered", storage_options=s3.options(), private_key=other).read()
    with pytest.raises(tiered.DecryptionError, match="pass private_key"):
        kbatch.open_log(url, layout="tiered", storage_options=s3.options()).read()
    with pytest.raises(tiered.DecryptionError, match="not a PEM"):
        kbatch.open_log(url, layout="tiered", storage_options=s3.options(),
                  private_key=b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")


@pytest.mark.parametrize("damage", [
    lambda m: b"{not json",
    lambda m: json.dumps({**m, "chunkIndex": {**m["chunkIndex"], "type": "sliding"}}).encode(),
    lambda m: json.dumps({**m, "chunkIndex": {**m["chunkIndex"],
                                              "originalFileSize": 10 ** 9}}).encode(),
    lambda m: json.dumps({k: v for k, v in m.items() if k != "segmentIndexes"}).encode(),
    lambda m: json.dumps({**m, "chunkIndex": {**m["chunkIndex"],
                                              "transformedChunks": "!!"}}).encode(),
], ids=["json", "type", "size", "indexes", "base64"])
def test_corrupt_manifest(s3, buckets, damage):
    enc = Encoder("compressed", chunk_size=8 << 10)
    objects = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID,
                               partition=0, last_offsets=last_offsets(buckets, 4999))
    first = sorted(k for k in objects if k.endswith(".rsm-manifest"))[0]
    objects[first] = damage(json.loads(objects[first]))
    upload(s3, objects, "tiered-bad")
    try:
        with pytest.raises(CorruptRecordError, match="manifest"):
            kbatch.open_log(f"s3://{BUCKET}/tiered-bad/orders-{TOPIC_ID}/0", layout="tiered",
                      storage_options=s3.options()).read()
    finally:
        s3.fs.rm(f"{BUCKET}/tiered-bad", recursive=True)


def test_damaged_chunk_is_an_error(s3, buckets, keys):
    for variant, cls in (("both", tiered.DecryptionError), ("compressed", CorruptRecordError)):
        enc = Encoder(variant, chunk_size=8 << 10, public_pem=keys[1])
        objects = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID,
                                   partition=0, last_offsets=last_offsets(buckets, 4999))
        log = sorted(k for k in objects if k.endswith(".log"))[0]
        data = bytearray(objects[log])
        data[40] ^= 0xFF
        objects[log] = bytes(data)
        upload(s3, objects, f"tiered-flip-{variant}")
        with pytest.raises(cls):
            kbatch.open_log(f"s3://{BUCKET}/tiered-flip-{variant}/orders-{TOPIC_ID}/0",
                      layout="tiered", storage_options=s3.options(), private_key=keys[0]).read()
        assert issubclass(cls, KbatchError)


@pytest.mark.parametrize("values", [[], [5], [7, 7, 9], [100, 300, 70000, 5, 2],
                                    [1 << 30, 5, 16 << 20, 8], [16412] * 50 + [77]])
def test_chunk_size_codec(values):
    assert tiered.decode_chunk_sizes(encode_sizes(values)).tolist() == values


def test_chunk_size_codec_refuses_counts_past_the_bytes():
    with pytest.raises(CorruptRecordError, match="do not fit"):
        tiered.decode_chunk_sizes((1 << 30).to_bytes(4, "big") + bytes(4) + b"\x02" + bytes(6))


def test_remote_log_metadata_picks_finished_copies(s3, buckets):
    enc = Encoder("plain", chunk_size=8 << 10)
    lasts = last_offsets(buckets, 4999)
    objects = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID,
                               partition=0, last_offsets=lasts)
    stems = sorted({k.rsplit(".", 1)[0] for k in objects})
    ids = [s[-22:] for s in stems]         # the 22-character segment UUIDs
    # a copy of the second segment that never finished, under another UUID, with
    # damaged bytes (it must not be read at all)
    bad = encode_partition(enc, str(buckets), topic="orders", topic_id=TOPIC_ID, partition=0,
                           last_offsets=lasts)
    second = sorted(k for k in bad if k.endswith(".log"))[1]
    stem = second[:-4]
    objects.update({k: (b"\xff" * len(v) if k.endswith(".log") else v)
                    for k, v in bad.items() if k.startswith(stem)})
    upload(s3, objects, "tiered-rlmm")
    unfinished = stem[-22:]
    rows = [{"segment_id": i, "state": "COPY_SEGMENT_STARTED"} for i in ids + [unfinished]]
    rows += [{"segment_id": i, "state": "COPY_SEGMENT_FINISHED"} for i in ids]
    url = f"s3://{BUCKET}/tiered-rlmm/orders-{TOPIC_ID}/0"
    remote = kbatch.open_log(url, layout="tiered", storage_options=s3.options(),
                       remote_log_metadata=rows)
    same(remote.read(), kbatch.open_log(buckets).read())
    # a deleted segment is left out
    gone = rows + [{"segment_id": ids[0], "state": "DELETE_SEGMENT_FINISHED"}]
    remote = kbatch.open_log(url, layout="tiered", storage_options=s3.options(),
                       remote_log_metadata=gone)
    assert int(remote.read().offset[0]) == sorted(lasts)[1]


def test_timestamp_seek_and_spark_slices(s3, buckets, keys):
    url = f"s3://{BUCKET}/tiered-both/orders-{TOPIC_ID}/0"
    remote = kbatch.open_log(url, layout="tiered", storage_options=s3.options(), private_key=keys[0])
    local = kbatch.open_log(buckets)
    base = 1_700_000_000_000
    for ts in (base - 1, base + 2222, base + 4999, base + 5000):
        assert remote.offset_for_timestamp(ts) == local.offset_for_timestamp(ts)
    pytest.importorskip("pyspark")
    import pickle

    import json

    from kbatch.spark.plan import Options, plan

    from .test_remote_plain import local_rows, spark_slice_records
    options = Options.parse({
        "path": f"s3://{BUCKET}/tiered-both", "layout": "tiered",
        "privateKey": keys[0].decode(), "maxPartitionBytes": str(32 << 10),
        "startingOffsets": json.dumps({"orders": {"0": 321}}),
        "endingOffsets": json.dumps({"orders": {"0": 4500}}),
        **{f"storage.{k}": json.dumps(v) if not isinstance(v, str) else v
           for k, v in s3.options().items()}})
    slices = pickle.loads(pickle.dumps(plan(options)))       # as they travel to executors
    assert len(slices) > 1
    assert spark_slice_records(slices, options.kafka) == local_rows(local.read(321, 4500))


# --- overlapping uploads (leader changes) --------------------------------------
#
# Each bucket below is written by the test-side encoder from batches kafka-python
# builds (tests/kafka_ref.py), 5 records a batch, and read back by kbatch. The
# truth: kafka-python's decode of the uploads' bytes, and the rule Kafka serves
# an offset by, written out here per offset from RemoteLogManager.read (the
# offset's epoch in the leader-epoch chain: leaderEpochCache.epochForOffset)
# and RemoteLogMetadataCache.remoteLogSegmentMetadata(epoch, offset) (an upload
# whose segmentLeaderEpochs range of that epoch holds the offset). Copies of one
# epoch hold the same records, so any such upload gives the offset; unlike
# Kafka, an offset that a shorter later upload of the same epoch hides is not
# refused: kbatch reads it from the upload that holds it.

T0 = 1_700_000_000_000

# (first offset, last offset, {epoch: its first offset in the upload},
#  offset from which the upload holds a diverged leader's records, event ms)
OVERLAPS = {
    "contained": [(0, 99, {0: 0}, None, 1), (50, 79, {0: 50}, None, 2),
                  (100, 149, {0: 100}, None, 3)],
    "extends": [(0, 99, {0: 0}, None, 1), (50, 149, {0: 50}, None, 2),
                (150, 199, {0: 150}, None, 3)],
    "same-start": [(0, 99, {0: 0}, None, 1), (0, 59, {0: 0}, None, 2),
                   (100, 149, {0: 100}, None, 3)],
    "three-way": [(0, 99, {0: 0}, None, 1), (30, 69, {0: 30}, None, 2),
                  (60, 129, {0: 60}, None, 3), (20, 44, {0: 20}, None, 4),
                  (100, 109, {0: 100}, None, 5), (130, 149, {0: 130}, None, 6)],
    # the old leader's upload holds epoch 0 up to 99, the new leader's chain
    # starts epoch 1 at 80: A's 80..99 are diverged records, never served
    "diverged": [(0, 99, {0: 0}, 80, 1), (50, 149, {0: 50, 1: 80}, None, 2)],
    "diverged-inside": [(0, 99, {0: 0}, 80, 1), (50, 89, {0: 50, 1: 80}, None, 2),
                        (90, 149, {1: 90}, None, 3)],
}


def _epoch_at(epochs: dict, offset: int) -> int:
    return max((e for e, start in epochs.items() if start <= offset),
               default=min(epochs))


def _upload_bytes(lo: int, hi: int, epochs: dict, diverged_from) -> bytes:
    from .kafka_ref import build_batch
    out = b""
    for base in range(lo, hi + 1, 5):
        offsets = range(base, min(base + 4, hi) + 1)
        old = diverged_from is not None and base >= diverged_from
        recs = [(T0 + o + (1000 if old else 0), b"k%d" % o, b"%s%d" % (b"old" if old else b"v", o),
                 []) for o in offsets]
        out += build_batch(recs, base_offset=base, partition_leader_epoch=_epoch_at(epochs, base))
    return out


def overlap_bucket(root, case: str, variant: str = "plain"):
    """The partition prefix of the bucket of ``OVERLAPS[case]``, and the bytes
    of each upload."""
    topic_id, enc = kafka_uuid(), Encoder(variant, chunk_size=1 << 10)
    logs = []
    for lo, hi, epochs, diverged_from, event in OVERLAPS[case]:
        log = _upload_bytes(lo, hi, epochs, diverged_from)
        logs.append(log)
        objects = enc.encode_segment(log, b"", b"", None, topic="t", topic_id=topic_id,
                                     partition=0, start_offset=lo, end_offset=hi,
                                     event_ms=T0 + event, leader_epochs=epochs)
        for key, data in objects.items():
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            (root / key).write_bytes(data)
    return root / f"t-{topic_id}" / "0", logs


def kafka_serves(case: str, logs: list[bytes]) -> dict[int, tuple]:
    """``{offset: (timestamp, key, value)}`` Kafka serves (the rule above),
    decoded by kafka-python."""
    from .kafka_ref import read_with_kafka_python
    uploads = OVERLAPS[case]
    chain: dict[int, int] = {}
    for _, _, epochs, _, _ in uploads:
        for e, start in epochs.items():
            chain[e] = min(start, chain.get(e, start))
    held: dict[int, list] = {}
    for (lo, hi, epochs, _, _), log in zip(uploads, logs):
        decoded = read_with_kafka_python(log, check_crc=True)
        for r in decoded.records:
            held.setdefault(r["offset"], []).append((epochs, (r["timestamp"], r["key"],
                                                              r["value"])))
    out = {}
    for offset, copies in sorted(held.items()):
        epoch = max(e for e, start in chain.items() if start <= offset)
        served = {rec for epochs, rec in copies if _epoch_at(epochs, offset) == epoch}
        assert len(served) <= 1, "copies of one epoch differ"
        if served:
            out[offset] = served.pop()
    return out


def _rows(records) -> dict:
    return dict(zip(records.offset.tolist(), zip(records.timestamp.tolist(),
                                                 records.key.to_pylist(),
                                                 records.value.to_pylist())))


@pytest.mark.parametrize("case", sorted(OVERLAPS))
def test_overlapping_uploads_read_each_offset_once(tmp_path, case):
    part, logs = overlap_bucket(tmp_path, case, "compressed")
    truth = kafka_serves(case, logs)
    log = kbatch.open_log(str(part), layout="tiered")
    got = log.read()
    assert got.offset.tolist() == sorted(truth)          # each offset once, in order
    assert _rows(got) == truth
    assert sum(len(c) for c in log.iter(chunk_records=7)) == len(truth)
    assert sum(kbatch.open_log(str(part), layout="tiered", use_index=False).read()
               .offset.tolist()) == sum(truth)
    assert len(log.read(isolation="read_committed")) == len(truth)
    assert len(log.read(view="latest")) == len(truth)
    assert sum(log.read(level="batches").column("records").to_pylist()) == len(truth)
    assert kbatch.read_table(str(part), layout="tiered").num_rows == len(truth)
    # ranges inside the overlaps and after them
    for lo, hi in ((0, 50), (45, 85), (80, 100), (85, 86), (60, 140), (95, 160)):
        want = {o: v for o, v in truth.items() if lo <= o < hi}
        assert _rows(log.read(lo, hi)) == want, (lo, hi)
    # timestamps: the first offset Kafka serves stamped at or after each
    for ts in (T0 + 55, T0 + 85, T0 + 99, T0 + 100, T0 + 1085):
        first = min((o for o, (t, _, _) in truth.items() if t >= ts), default=None)
        assert log.offset_for_timestamp(ts) == first, ts
        assert _rows(log.read(start_timestamp=ts)) == {
            o: v for o, v in truth.items() if first is not None and o >= first}


@pytest.mark.parametrize("case", ["contained", "three-way", "diverged-inside"])
def test_overlapping_uploads_verify_and_stats_count_each_offset_once(tmp_path, capfd, case):
    from kbatch.tools.cli import main
    part, logs = overlap_bucket(tmp_path, case)
    truth = kafka_serves(case, logs)
    report = kbatch.verify(str(part), layout="tiered")
    assert report.ok, report.partition_problems
    assert report.records == len(truth)
    assert main(["stats", "--layout", "tiered", "--format", "json", str(part)]) == 0
    lines = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    assert lines[-1]["total"]["records"] == len(truth)


def test_offsets_no_upload_holds_are_reported(tmp_path, capfd, caplog):
    from kbatch.tools.cli import main
    OVERLAPS["gap"] = [(0, 99, {0: 0}, None, 1), (40, 59, {0: 40}, None, 2),
                       (120, 149, {0: 120}, None, 3)]
    try:
        part, logs = overlap_bucket(tmp_path, "gap")
        truth = kafka_serves("gap", logs)
    finally:
        del OVERLAPS["gap"]
    log = kbatch.open_log(str(part), layout="tiered")
    with caplog.at_level("WARNING", logger="kbatch"):
        assert _rows(log.read()) == truth
    assert "offsets [100, 120) are missing" in caplog.text
    report = kbatch.verify(str(part), layout="tiered")
    assert not report.ok and report.records == len(truth) == 130
    assert any("[100, 120)" in p for p in report.partition_problems)
    assert main(["stats", "--layout", "tiered", "--format", "json", str(part)]) == 1
    lines = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    assert lines[-1]["total"]["records"] == 130
    assert [(m["missing"]["start"], m["missing"]["end"]) for m in lines if "missing" in m] \
        == [(100, 120)]


def test_same_epoch_copies_that_differ_are_reported(tmp_path):
    # two copies of offsets 50..79 in one leader epoch with different bytes:
    # Kafka's rule cannot tell them apart; verify says so
    part, _ = overlap_bucket(tmp_path, "contained")
    other = _upload_bytes(50, 79, {0: 50}, 50)      # other values, same epoch 0
    name = next(p for p in part.iterdir() if p.name.startswith("00000000000000000050")
                and p.suffix == ".log")
    manifest = json.loads(name.with_suffix(".rsm-manifest").read_bytes())
    chunks = manifest["chunkIndex"]
    assert chunks["type"] == "fixed" and len(other) <= chunks["originalChunkSize"]
    name.write_bytes(other)
    chunks.update(originalFileSize=len(other), transformedChunkSize=chunks["originalChunkSize"],
                  finalTransformedChunkSize=len(other))
    name.with_suffix(".rsm-manifest").write_text(json.dumps(manifest))
    report = kbatch.verify(str(part), layout="tiered")
    assert any("same leader epoch 0" in p for p in report.partition_problems)


def test_overlapping_uploads_spark_slices(tmp_path):
    pytest.importorskip("pyspark")
    import pickle

    from kbatch.spark.plan import Options, plan

    from .test_remote_plain import spark_slice_records
    case = "contained"
    part, logs = overlap_bucket(tmp_path, case)
    truth = kafka_serves(case, logs)
    for start, want in ((None, truth), (85, {o: v for o, v in truth.items() if o >= 85})):
        opts = {"path": str(tmp_path), "layout": "tiered", "maxPartitionBytes": "256"}
        if start is not None:
            opts["startingOffsets"] = json.dumps({"t": {"0": start}})
        options = Options.parse(opts)
        slices = pickle.loads(pickle.dumps(plan(options)))
        got = spark_slice_records(slices, options.kafka)
        assert [(o, k, v) for o, k, v in got] == [(o, k, v) for o, (_, k, v) in want.items()]


def test_an_unreadable_manifest_never_lets_another_upload_hide_offsets(tmp_path):
    """A (0..99), B (10..29, its manifest not JSON), C (20..49): B's extent is
    not known, so which upload serves the offsets from 10 on cannot be
    decided. Every read that reaches 10 raises B's error (a read of 60..99
    used to give no record: A was cut where B starts, C read whole);
    a read below 10 is A's; verify reports B rather than raising."""
    OVERLAPS["unreadable"] = [(0, 99, {0: 0}, None, 1), (10, 29, {0: 10}, None, 2),
                              (20, 49, {0: 20}, None, 3)]
    try:
        part, logs = overlap_bucket(tmp_path, "unreadable")
        truth = kafka_serves("unreadable", logs)
    finally:
        del OVERLAPS["unreadable"]
    bad = next(p for p in part.iterdir()
               if p.name.startswith("00000000000000000010") and p.suffix == ".rsm-manifest")
    bad.write_bytes(b"{not json")
    log = kbatch.open_log(str(part), layout="tiered")
    for lo, hi in ((60, 100), (0, 20), (None, None), (10, 11)):
        with pytest.raises(kbatch.CorruptRecordError, match="rsm-manifest"):
            log.read(lo, hi)
    got = log.read(0, 10)
    assert [(int(o), v) for o, v in zip(got.offset, got.value.to_pylist())] \
        == [(o, truth[o][2]) for o in range(10)]
    report = kbatch.verify(str(part), layout="tiered")
    assert not report.ok
    assert any("manifest cannot be read" in p for s in report.segments for p in s.problems())


def test_manifests_without_metadata_find_each_upload_end_from_its_tail(tmp_path):
    """Manifests of older plugin versions carry no remoteLogSegmentMetadata
    (no endOffset): an upload's last offset is found from its batch headers,
    walked from its offset index's last entry, and the contained upload
    still hides no offset (by offsets alone, with a warning: no epochs)."""
    part, logs = overlap_bucket(tmp_path, "contained")
    truth = kafka_serves("contained", logs)
    for manifest in part.glob("*.rsm-manifest"):
        data = json.loads(manifest.read_bytes())
        del data["remoteLogSegmentMetadata"]
        manifest.write_text(json.dumps(data))
    log = kbatch.open_log(str(part), layout="tiered")
    for lo, hi in ((None, None), (80, 100), (60, 120)):
        got = log.read(lo, hi)
        want = [(o, v[2]) for o, v in truth.items()
                if (lo is None or o >= lo) and (hi is None or o < hi)]
        assert [(int(o), v) for o, v in zip(got.offset, got.value.to_pylist())] == want
