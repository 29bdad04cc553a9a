"""Answers that were wrong, silent or unsafe (round 3), checked from the
user's side: what the API returns, what the command line prints and exits
with, on copies of real broker directories where the case came from real
data (the corpus; a fresh clone uses tests/data's real partition).

- missing data: a copy whose .log files are gone is a problem, with the
  offsets that are missing; an empty partition is "empty"; a partition
  holding only an empty segment at B starts and ends at B;
- consumer lag: a commit beyond the log end has no lag (null, with a reason);
  groups with commits but no data here are named;
- one table for a directory (topic, partition) and projections that return
  only what was asked;
- Spark batch options naming what is not there;
- secrets never echoed; tiered manifests that claim more than they hold;
- connection failures said as such, retries shown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kbatch
from kbatch.tools.evidence import missing_data

from .conftest import CORPUS, needs_corpus

ROOT = Path(__file__).resolve().parent.parent
TEST_PARTITION = ROOT / "tests" / "data" / "corpus" / "macsakini__KafkaCluster" / "kafka" / \
    "data" / "test-0"
REAL_DATA_DIR = CORPUS / "macsakini__KafkaCluster" / "kafka" / "data"


def cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kbatch", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def without_logs(src: Path, dst: Path) -> Path:
    """A copy of ``src`` whose ``.log`` files are gone, as a repository that
    ignores ``*.log`` keeps it."""
    shutil.copytree(src, dst)
    for f in dst.rglob("*.log"):
        f.unlink()
    return dst


# --- missing data -------------------------------------------------------------

def test_a_real_partition_without_its_log_names_the_missing_offsets(tmp_path):
    """The real partition's .index, .timeindex and .snapshot say it held
    offsets up to 109: verify and stats exit 1 and say which are missing."""
    part = without_logs(TEST_PARTITION, tmp_path / "test-0")
    full = kbatch.open_log(TEST_PARTITION).read()
    end = int(full.batches.last_offset.max()) + 1
    [gap] = missing_data(part)
    assert (gap.topic, gap.partition, gap.start, gap.end) == ("test", 0, 0, end)
    assert any("snapshot" in e for e in gap.evidence)
    for command in ("verify", "stats"):
        proc = cli(command, part)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"offsets [0, {end}) are missing" in proc.stdout
        assert "None" not in proc.stdout and ": ok" not in proc.stdout


@needs_corpus
def test_a_real_data_directory_without_its_logs_is_not_ok(tmp_path):
    """A copied broker directory (real data, checkpoints and commits
    included) whose .log files are gone: every partition that held data is
    reported, with the checkpoints' and commits' evidence."""
    data = without_logs(REAL_DATA_DIR, tmp_path / "data")
    want = {(p.topic, p.partition): int(r.batches.last_offset.max()) + 1
            for p in kbatch.open_log_dir(REAL_DATA_DIR).partitions
            for r in [p.read()] if len(r.batches)}
    got = {(m.topic, m.partition): m.end for m in missing_data(data)}
    assert want and set(want) <= set(got)
    assert all(got[k] >= want[k] for k in want)
    proc = cli("verify", data)
    assert proc.returncode == 1 and "are missing" in proc.stdout
    assert cli("verify", REAL_DATA_DIR).returncode == 0      # the real copy: nothing missing


def test_a_healthy_directory_has_no_shortfall_and_holes_are_found(tmp_path):
    """A segment deleted between two others is a hole; the directory
    without it is named; the healthy one is not."""
    part = tmp_path / "d" / "t-0"
    kbatch.write_log(part, [(b"k", b"v" * 200, 1_700_000_000_000 + i, []) for i in range(600)],
                     segment_bytes=16 << 10, batch_records=10)
    (tmp_path / "d" / "replication-offset-checkpoint").write_text("0\n1\nt 0 600\n")
    assert missing_data(tmp_path / "d") == []
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 3
    middle = logs[1]
    nxt = int(logs[2].name[:20])
    middle.unlink()
    [hole] = missing_data(tmp_path / "d")
    assert (hole.start, hole.end) == (int(middle.name[:20]), nxt)


def test_empty_partitions_and_an_empty_segment_at_a_base(tmp_path):
    """An empty partition directory is "empty", not ok; a partition holding
    only an empty segment at B has log start and end B (stats, lag, txn:
    log end and last stable offset B, never 0 or None)."""
    data = tmp_path / "data"
    (data / "hollow-0").mkdir(parents=True)
    part = data / "rolled-0"
    part.mkdir()
    (part / f"{4242:020d}.log").write_bytes(b"")
    proc = cli("verify", data)
    assert "hollow-0: empty (no segment files)" in proc.stdout
    assert "None" not in proc.stdout
    stats = cli("stats", data, "--format", "json")
    rows = [json.loads(line) for line in stats.stdout.splitlines()]
    rolled = next(r for r in rows if r.get("topic") == "rolled")
    assert (rolled["log_start_offset"], rolled["log_end_offset"]) == (4242, 4242)
    text = cli("stats", data).stdout
    assert "rolled-0:" in text and "log [4242, 4242)" in text and "None" not in text
    assert "hollow-0: no segment files" in text
    txn = cli("txn", part)
    assert "log end offset 4242" in txn.stdout and "None" not in txn.stdout, txn.stdout
    txn_json = [json.loads(line) for line in cli("txn", part, "--format", "json").stdout.splitlines()]
    summary = next(r for r in txn_json if "log_end_offset" in r)
    assert (summary["log_end_offset"], summary["last_stable_offset"]) == (4242, 4242)
    log = kbatch.open_log(part)
    state = log.transaction_state()
    assert (state.last_stable_offset, state.log_end_offset) == (4242, 4242)
    one = cli("txn", part / f"{4242:020d}.log")
    assert "log end offset 4242" in one.stdout, one.stdout


# --- consumer lag ------------------------------------------------------------

@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("lag") / "sample"
    from kbatch.tools.sample import write_sample
    write_sample(root, records=20_000)
    return root


def test_the_sample_lag_is_real_and_deterministic(sample, tmp_path):
    """The sample's groups fall behind by data written with fixed
    timestamps: the same lag on every run, not 0 because of the clock."""
    lag = kbatch.consumer_lag(sample).to_pandas()
    latest = lag[lag.current]
    assert (latest.lag > 0).any()
    inventory = latest[latest.topic == "inventory.events-v2"]
    assert len(inventory) == 1 and int(inventory.lag.iloc[0]) > 0
    from kbatch.tools.sample import write_sample
    again = tmp_path / "again"
    write_sample(again, records=20_000)
    assert kbatch.consumer_lag(again).to_pandas().lag.tolist() == lag.lag.tolist()


def test_a_commit_beyond_the_log_end_has_no_lag(sample, tmp_path):
    """A truncated log (the last segment cut to its first batch) under
    commits that read further: lag null, reason committed_beyond_log_end;
    kbatch lag prints "-" and the reason, never 0 and never None."""
    copy = tmp_path / "copy"
    shutil.copytree(sample, copy)
    part = copy / "orders-1"
    last = sorted(part.glob("*.log"))[-1]
    first = kbatch.read_segment(last).batches
    keep = int(first.position[0] + first.size[0])
    with open(last, "r+b") as f:
        f.truncate(keep)
    lag = kbatch.consumer_lag(copy).to_pandas()
    rows = lag[(lag.topic == "orders") & (lag.partition == 1) & lag.current]
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row.reason == "committed_beyond_log_end" and np.isnan(row.lag)
    proc = cli("lag", copy)
    line = next(x for x in proc.stdout.splitlines() if "orders" in x and " 1 " in x)
    assert "committed_beyond_log_end" in line and "None" not in proc.stdout


def test_lag_names_groups_whose_data_is_not_here(sample, tmp_path):
    """A copy without the page-views partitions: the analytics group's
    commits are named, not silently dropped; a copy with no data topic at
    all lists nothing and exits 1."""
    copy = tmp_path / "copy"
    shutil.copytree(sample, copy)
    for d in copy.glob("page-views-*"):
        shutil.rmtree(d)
    proc = cli("lag", copy)
    assert proc.returncode == 0
    assert "group analytics committed offsets of page-views, whose data is not" in proc.stdout
    for d in copy.iterdir():
        if d.is_dir() and not d.name.startswith("__"):
            shutil.rmtree(d)
    proc = cli("lag", copy)
    assert proc.returncode == 1 and "no offset commits" in proc.stderr


# --- one table, projections --------------------------------------------------------

def test_a_directory_read_as_one_table(sample):
    """read_table / .to_arrow(): every partition's records with topic and
    partition, as the per-partition reads give them."""
    parts = kbatch.open_log_dir(sample).read(["orders", "payments"], isolation="read_committed")
    table = parts.to_arrow()
    assert table.column_names[:3] == ["topic", "partition", "offset"]
    assert table.num_rows == sum(len(r) for r in parts.values())
    for (topic, partition), rec in parts.items():
        mask = [t == topic and p == partition for t, p in
                zip(table.column("topic").to_pylist(), table.column("partition").to_pylist())]
        assert table.filter(mask).column("offset").to_pylist() == rec.offset.tolist()
    same = kbatch.read_table(sample, ["orders", "payments"], isolation="read_committed")
    assert same.equals(table)
    df = parts.to_pandas()
    assert str(df.topic.dtype) == "category" and len(df) == table.num_rows
    with pytest.raises(kbatch.ArgumentError, match="no topic 'nope'"):
        kbatch.read_table(sample, "nope")


def test_columns_return_only_what_was_asked(sample):
    """columns=["value"]: the value and the offset (a record cannot be told
    apart without it), nothing else; a whole read gives everything."""
    rec = kbatch.open_log(sample / "orders-0").read(columns=["value"])
    assert rec.to_arrow().column_names == ["offset", "value"]
    assert kbatch.read_table(sample, "orders", columns=["key"]).column_names == \
        ["topic", "partition", "offset", "key"]
    everything = kbatch.open_log(sample / "orders-0").read().to_arrow().column_names
    assert {"timestamp", "headers", "producer_id"} <= set(everything)


# --- wrong inputs --------------------------------------------------------------

def test_dump_decode_warns_once_on_another_topic(sample):
    seg = sorted((sample / "orders-0").glob("*.log"))[0]
    proc = cli("dump", "--decode", "transactions", seg)
    warnings = [x for x in proc.stderr.splitlines() if "do not look like" in x]
    assert len(warnings) == 1 and "__transaction_state" in warnings[0]


def test_examples_help_prints_usage_and_writes_nothing(tmp_path):
    for example in sorted((ROOT / "examples").glob("*.py")):
        proc = subprocess.run([sys.executable, str(example), "--help"], capture_output=True,
                              text=True, cwd=tmp_path, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert proc.returncode == 0 and "usage" in proc.stdout.lower(), proc.stderr
        assert list(tmp_path.iterdir()) == []


def test_spark_batch_subscribe_or_assign_naming_what_is_not_there():
    """Checked without Spark: the options Spark's batch reader parses."""
    pytest.importorskip("pyspark")
    from kbatch.spark.options import OptionError, parse_options
    found = [("orders", 0), ("orders", 1), ("payments", 0)]
    with pytest.raises(OptionError, match="no such topic under the path: refunds; the path "
                                          r"holds orders \(0, 1\), payments \(0\)"):
        parse_options({"path": "x", "subscribe": "orders,refunds"}).select(found)
    with pytest.raises(OptionError, match=r"no such partition under the path: orders-7"):
        parse_options({"path": "x", "assign": '{"orders": [0, 7]}'}).select(found)
    with pytest.raises(OptionError, match="no topic under the path matches"):
        parse_options({"path": "x", "subscribePattern": "ref.*"}).select(found)
    # a stream may wait for a topic to appear
    stream = parse_options({"path": "x", "subscribe": "orders,refunds"}, streaming=True)
    assert stream.select(found) == [("orders", 0), ("orders", 1)]


# --- secrets ----------------------------------------------------------------

def test_secret_option_values_are_never_echoed(tmp_path):
    pytest.importorskip("pyspark")
    from kbatch.spark.options import OptionError, parse_options
    for name in ("kafka.sasl.jaas.config", "kafka.ssl.keystore.password", "kafka.ssl.key.password"):
        with pytest.raises(OptionError) as exc:
            parse_options({"path": "x", name: "hunter2-secret"})
        assert "hunter2" not in str(exc.value) and "***" in str(exc.value)
    storage = kbatch.Storage.of(storage_options={"key": "AKIA-ID", "secret": "hunter2",
                                                 "client_kwargs": {"endpoint_url": "x"}})
    assert "hunter2" not in repr(storage) and "AKIA-ID" not in repr(storage)
    assert "endpoint_url" in repr(storage)
    # nested secrets (fsspec's client_kwargs) and connection strings are masked too
    nested = kbatch.Storage.of(storage_options={
        "client_kwargs": {"aws_secret_access_key": "hunter2", "region_name": "eu-west-1"},
        "connection_string": "AccountName=a;AccountKey=hunter2"})
    assert "hunter2" not in repr(nested) and "eu-west-1" in repr(nested)
    # a Spark query's options: the storage options and the private key stay out of its repr
    from kbatch.spark.options import KafkaOptions
    opts = KafkaOptions(storage={"secret": "hunter2"}, private_key="hunter2-pem",
                        store=kbatch.Storage.of(storage_options={"secret": "hunter2"}))
    assert "hunter2" not in repr(opts) and "***" in repr(opts)


def test_private_keys_as_bytes_text_paths_and_never_echoed(tmp_path):
    from tests.tiered_encoder import rsa_pem_pair
    from kbatch.lib.storage import KeyRing
    pem = rsa_pem_pair()[0]
    path = tmp_path / "key.pem"
    path.write_bytes(pem)
    rings = [KeyRing.of(pem), KeyRing.of(pem.decode()), KeyRing.of(str(path)), KeyRing.of(path)]
    assert len({r for r in rings}) == 1 and all(r.get(None) is not None for r in rings)
    body = pem.decode().split("\n")[1]
    for bad in (body, body.encode(), pem.decode().replace("-----BEGIN", "-----BOGUS")):
        with pytest.raises(kbatch.KbatchError) as exc:
            KeyRing.of(bad)
        assert body[:20] not in str(exc.value)
    assert body[:20] not in repr(rings[0])


# --- tiered manifests that claim more than they hold --------------------------------

def _manifest(chunk_index: dict) -> bytes:
    return json.dumps({"chunkIndex": chunk_index, "compression": False,
                       "segmentIndexes": {n: {"position": 0, "size": 0} for n in
                                          ("offset", "timestamp", "producerSnapshot",
                                           "leaderEpoch")}}).encode()


def test_a_tiny_manifest_cannot_make_kbatch_allocate_gigabytes():
    import tracemalloc

    from kbatch.lib import tiered
    tracemalloc.start()
    try:
        with pytest.raises(kbatch.CorruptRecordError, match="more than"):
            tiered.parse_manifest(_manifest({
                "type": "fixed", "originalChunkSize": 1, "originalFileSize": (1 << 31) - 1,
                "transformedChunkSize": 1, "finalTransformedChunkSize": 1}), "m",
                object_size=4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(kbatch.CorruptRecordError, match="nested too deeply"):
        tiered.parse_manifest(deep, "m", object_size=10)


def test_a_zstd_frame_is_decompressed_to_no_more_than_its_chunk():
    import zstandard

    from kbatch.lib import tiered
    bomb = zstandard.ZstdCompressor(write_content_size=True).compress(b"\0" * (64 << 20))
    with pytest.raises(kbatch.LimitExceededError, match="more than 4096"):
        tiered.zstd_bounded(bomb, 4096, "chunk")


# --- connections -------------------------------------------------------------------

def test_an_unreachable_endpoint_is_said_as_such_and_retries_are_shown():
    pytest.importorskip("s3fs")
    from .remote_s3 import free_port
    port = free_port()          # nothing listens there
    proc = cli("verify", "s3://bucket/data", "--storage-option", f"client_kwargs="
               + json.dumps({"endpoint_url": f"http://127.0.0.1:{port}"}),
               "--storage-option", "key=x", "--storage-option", "secret=y",
               "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}, '
               '"connect_timeout": 1}')
    assert proc.returncode in (1, 2), proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"cannot reach endpoint http://127.0.0.1:{port}" in last, proc.stderr
    assert "attempts over" in last and "internal error" not in proc.stderr
    assert "retrying (1 of" in proc.stderr
