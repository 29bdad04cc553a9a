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
    remote.segments
    s3.proxy.reset()
    got = remote.read(3000, 3005)
    assert list(got.offset) == list(range(3000, 3005))
    # the manifest (fetched when a read first needs it), the .indexes range of
    # the offset index, then the chunks from the batch on
    assert s3.proxy.gets == 3
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
