"""Never a partial answer that looks whole.

- ``kbatch stats`` says what it skipped, where it stopped and what is
  missing, at either level, and exits 1 then, as ``verify`` and ``dump``
  do on damage; ``--on-corrupt stop`` ends a partition's count at the first
  damage, as the API's ``stop`` ends the read;
- reads return the records the segments hold (as Kafka's consumer would
  see them) but warn, once, on the ``kbatch`` logger, when what ``verify``
  weighs says offsets existed that no segment holds: index files without
  their ``.log``, a segment that is not the last one cut short while its
  index files name offsets past its end, a high watermark above the log end
  (``visibility="consumer"``), a partition the checkpoint files name with
  no directory.

The truth: kafka-python's decode of the bytes on disk (``kafka_ref``), the
file names and the index entries read with ``struct``.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kbatch

from .conftest import CORPUS, needs_corpus
from .kafka_ref import ABORT, build_batch, control_batch, read_with_kafka_python

ROOT = Path(__file__).resolve().parent.parent
N, PER_BATCH, SEGMENT_BYTES = 330, 10, 4300


def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kbatch", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


def write_partition(part: Path, **kw) -> list[Path]:
    """330 records in batches of 10, segments of 6 batches (0, 60, ...): its .log files."""
    kbatch.write_log(part, {"key": [b"k%d" % (i % 50) for i in range(N)],
                            "value": [b"v%05d" % i + b"x" * 40 for i in range(N)],
                            "timestamp": 1_700_000_000_000 + np.arange(N) * 1000},
                     segment_bytes=SEGMENT_BYTES, batch_records=PER_BATCH, **kw)
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 4
    return logs


def kafka_batches(logs) -> list[tuple[Path, dict, list]]:
    """``(file, batch, its records)`` of every whole batch kafka-python reads."""
    out = []
    for log in logs:
        read = read_with_kafka_python(log.read_bytes())
        for i, b in enumerate(read.batches):
            out.append((log, b, [r for r in read.records if r["batch"] == i]))
    return out


def base(log: Path) -> int:
    return int(log.name[:20])


@pytest.fixture
def damaged(tmp_path):
    """t-0 whose second segment's first batch fails its CRC (a byte of a
    record value flipped), and a healthy u-0 beside it."""
    root = tmp_path / "d"
    logs = write_partition(root / "t-0")
    seg = logs[1]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF
    seg.write_bytes(bytes(data))
    kbatch.write_log(root / "u-0", {"value": [b"x"] * 10})
    batches = kafka_batches(logs)
    bad = [(f, b) for f, b, _ in batches if not b["crc_valid"]]
    assert len(bad) == 1 and bad[0][0] == seg and bad[0][1]["position"] == 0
    return root, logs, batches, bad[0][1]


# --- kbatch stats: skips, stops, shortfalls ------------------------------------------

def test_stats_skip_lists_the_skipped_bytes_and_exits_1(damaged):
    root, logs, batches, bad = damaged
    good = sum(len(recs) for _, b, recs in batches if b["crc_valid"]) + 10
    span = f"bytes {bad['position']}-{bad['position'] + bad['size']}"
    for fmt in ("text", "json"):
        proc = cli("stats", root, "--on-corrupt", "skip", "--format", fmt)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        if fmt == "text":
            [line] = [x for x in proc.stdout.splitlines() if "skipped" in x]
            assert logs[1].name in line and span in line and "CRC" in line, line
            assert proc.stdout.splitlines()[-1].startswith(f"total: {good} records, ")
        else:
            total = json.loads(proc.stdout.splitlines()[-1])["total"]
            assert total["records"] == good
    # the batch level says the same, and its rows hold the same records
    proc = cli("stats", root, "--on-corrupt", "skip", "--level", "batches")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [line] = [x for x in proc.stdout.splitlines() if "skipped" in x]
    assert logs[1].name in line and span in line and "CRC" in line, line
    assert proc.stdout.splitlines()[-1].startswith(f"total: {good} records in ")
    proc = cli("stats", root, "--on-corrupt", "skip", "--level", "batches", "--format", "json")
    assert proc.returncode == 1
    objs = [json.loads(x) for x in proc.stdout.splitlines()]
    rows = [o for o in objs if "baseOffset" in o]
    [skip] = [o["skipped"] for o in objs if "skipped" in o]
    assert sum(r["records"] for r in rows) == good
    assert (skip["file"], skip["start"], skip["stop"]) == \
        (str(logs[1]), bad["position"], bad["position"] + bad["size"])


def test_stats_stop_ends_the_partition_at_the_first_damage_as_the_api(damaged):
    """stop: what the API's stop reads (nothing after the first damage), in
    kafka-python's count: the batches before the damaged one."""
    root, logs, batches, bad = damaged
    before = [recs for f, b, recs in batches
              if base(f) < base(logs[1]) or (f == logs[1] and b["position"] < bad["position"])]
    want = sum(map(len, before))
    api = kbatch.open_log(root / "t-0").read(on_corrupt="stop")
    assert len(api) == want and api.end.reason == "corrupt"
    proc = cli("stats", root / "t-0", "--on-corrupt", "stop")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith(f"t-0: {want} records in ")
    [stop] = [x for x in out if "stopped" in x]
    assert logs[1].name in stop and f"byte {bad['position']}" in stop
    assert f"{len(logs) - 2} later segment(s) not read" in stop
    assert not any(log.name in x for log in logs[2:] for x in out)
    objs = [json.loads(x) for x in cli("stats", root / "t-0", "--on-corrupt", "stop",
                                       "--format", "json").stdout.splitlines()]
    assert objs[0]["records"] == want
    assert objs[0]["not_read"] == [str(log) for log in logs[2:]]
    proc = cli("stats", root / "t-0", "--on-corrupt", "stop", "--level", "batches")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].startswith(f"total: {want} records in ")
    [stop] = [x for x in proc.stdout.splitlines() if "stopped" in x]
    assert logs[1].name in stop and f"byte {bad['position']}" in stop


def test_stats_batches_reports_the_missing_offsets_as_the_default_level(tmp_path):
    """A middle segment's .log gone (its index files left): both levels name
    the missing offsets and exit 1; the rows hold what kafka-python reads."""
    root = tmp_path / "d"
    logs = write_partition(root / "t-0")
    (root / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {N}\n")
    logs[1].unlink()
    gone = f"offsets [{base(logs[1])}, {base(logs[2])}) are missing"
    want = sum(len(recs) for _, _, recs in kafka_batches([logs[0], *logs[2:]]))
    for level in ("segments", "batches"):
        proc = cli("stats", root, "--level", level)
        assert proc.returncode == 1, (level, proc.stdout + proc.stderr)
        [line] = [x for x in proc.stdout.splitlines() if x.startswith("missing: ")]
        assert gone in line and f"{base(logs[1]):020d}.index" in line, line
    rows = [json.loads(x) for x in cli("stats", root, "--level", "batches", "--format",
                                       "json").stdout.splitlines()]
    [missing] = [r["missing"] for r in rows if "missing" in r]
    assert (missing["start"], missing["end"]) == (base(logs[1]), base(logs[2]))
    assert sum(r["records"] for r in rows if "baseOffset" in r) == want


def test_stats_of_a_healthy_directory_exits_0_at_both_levels(tmp_path):
    root = tmp_path / "d"
    write_partition(root / "t-0")
    (root / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {N}\n")
    for level in ("segments", "batches"):
        for mode in ("raise", "stop", "skip"):
            proc = cli("stats", root, "--level", level, "--on-corrupt", mode)
            assert proc.returncode == 0, (level, mode, proc.stdout + proc.stderr)
            assert "missing" not in proc.stdout and "skipped" not in proc.stdout


# --- reads: evidence of missing data is warned of --------------------------------------

def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("kbatch") and r.levelno == logging.WARNING]


def offsets(records) -> list[int]:
    return records.offset.tolist()


def batch_offsets(table) -> list[int]:
    """The offsets of a batch-level read of whole batches of plain records."""
    rows = zip(table.column("baseOffset").to_pylist(), table.column("records").to_pylist())
    return [o for first, n in rows for o in range(first, first + n)]


def test_a_middle_log_gone_with_its_index_files_left_is_warned_of(tmp_path, caplog):
    root = tmp_path / "d"
    part = root / "t-0"
    logs = write_partition(part)
    (root / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {N}\n")
    logs[1].unlink()
    want = [r["offset"] for _, _, recs in kafka_batches([logs[0], *logs[2:]]) for r in recs]
    lo, hi = base(logs[1]), base(logs[2])
    reads = {
        "open_log": lambda: offsets(kbatch.open_log(part).read()),
        "use_index=False": lambda: offsets(kbatch.open_log(part, use_index=False).read()),
        "open_log_dir": lambda: offsets(kbatch.open_log_dir(root).read()[("t", 0)]),
        "consumer": lambda: offsets(kbatch.open_log_dir(root).read(
            visibility="consumer")[("t", 0)]),
        "read_table": lambda: kbatch.read_table(root).column("offset").to_pylist(),
        "iter": lambda: [o for c in kbatch.open_log(part).iter(chunk_records=25)
                         for o in offsets(c)],
        "batches": lambda: batch_offsets(kbatch.open_log(part).read(level="batches")),
    }
    for name, read in reads.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kbatch"):
            assert read() == want, name
        [message] = warnings_of(caplog)
        assert str(part) in message and f"offsets [{lo}, {hi}) are missing" in message, name
        assert f"{lo:020d}.index" in message and f"{lo:020d}.timeindex" in message, name
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        r = kbatch.open_log(part).read(start_offset=lo - 10, end_offset=lo + 30)
        assert offsets(r) == [o for o in want if lo - 10 <= o < lo + 30]
        [message] = warnings_of(caplog)
        assert f"offsets [{lo}, {lo + 30}) are missing" in message
        caplog.clear()
        assert len(kbatch.open_log(part).read(start_offset=0, end_offset=lo)) == lo
        assert len(kbatch.open_log(part).read(start_offset=hi)) == N - hi
        assert warnings_of(caplog) == []         # ranges that miss nothing


def _cut_middle(part: Path, logs, how: str) -> tuple[int, list]:
    """Cut the second segment after its third batch (or to nothing); its
    index files stay. ``(one past its last offset now, its index entries)``."""
    seg = logs[1]
    data = seg.read_bytes()
    bounds = [(b["position"], b["position"] + b["size"], b["last_offset"])
              for b in read_with_kafka_python(data).batches]
    keep = 0 if how == "zero" else 3
    seg.write_bytes(data[:bounds[keep - 1][1]] if keep else b"")
    reach = bounds[keep - 1][2] + 1 if keep else base(seg)
    raw = (part / f"{base(seg):020d}.index").read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    return reach, entries


@pytest.mark.parametrize("how", ["boundary", "zero"])
def test_a_middle_segment_cut_short_while_its_index_names_more_is_warned_of(tmp_path,
                                                                            caplog, how):
    root = tmp_path / "d"
    part = root / "t-0"
    logs = write_partition(part, index_interval_bytes=256)
    reach, entries = _cut_middle(part, logs, how)
    assert entries and base(logs[1]) + entries[-1][0] >= reach   # the index names lost offsets
    want = [r["offset"] for _, _, recs in kafka_batches(logs) for r in recs]
    gone = f"offsets [{reach}, {base(logs[2])}) are missing"
    for use_index in (True, False):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kbatch"):
            got = kbatch.open_log(part, use_index=use_index).read()
        assert offsets(got) == want and got.skipped == ()
        [message] = warnings_of(caplog)
        assert gone in message and logs[1].name in message, message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        got = kbatch.open_log(part).read(start_offset=reach, end_offset=base(logs[2]))
    assert len(got) == 0
    [message] = warnings_of(caplog)
    assert gone in message
    # verify and stats name the same offsets
    for command in ("verify", "stats"):
        proc = cli(command, part)
        assert proc.returncode == 1 and gone in proc.stdout, (command, proc.stdout)


def test_a_high_watermark_above_the_log_end_and_a_partition_without_a_directory(tmp_path,
                                                                               caplog):
    """a-0 lost its tail (the high watermark says 500, the log ends at 330);
    c-1 is named by the checkpoint files and has no directory."""
    root = tmp_path / "d"
    a = write_partition(root / "a-0")
    c = write_partition(root / "c-0")
    (root / "replication-offset-checkpoint").write_text(f"0\n3\na 0 500\nc 0 {N}\nc 1 800\n")
    (root / "log-start-offset-checkpoint").write_text("0\n3\na 0 0\nc 0 0\nc 1 0\n")
    want = {key: [r["offset"] for _, _, recs in kafka_batches(logs) for r in recs]
            for key, logs in ((("a", 0), a), (("c", 0), c))}
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        got = kbatch.open_log_dir(root).read(visibility="consumer")
        assert {k: offsets(v) for k, v in got.items()} == want
        messages = warnings_of(caplog)
        assert len(messages) == 2, messages
        [hw] = [m for m in messages if str(root / "a-0") in m]
        assert f"offsets [{N}, 500) are missing" in hw and "high watermark 500" in hw
        [gone] = [m for m in messages if str(root / "c-1") in m]
        assert "offsets [0, 800) are missing" in gone and "no partition directory" in gone
        caplog.clear()
        assert kbatch.read_table(root, visibility="consumer").num_rows == 2 * N
        assert len(warnings_of(caplog)) == 2
        caplog.clear()
        kbatch.read_table(root, "c", visibility="consumer")        # topic c only
        [gone] = warnings_of(caplog)
        assert str(root / "c-1") in gone
        caplog.clear()
        kbatch.read_table(root / "a-0", visibility="consumer")     # a partition read alone
        [hw] = warnings_of(caplog)
        assert f"offsets [{N}, 500) are missing" in hw
        caplog.clear()
        r = kbatch.open_log_dir(root).read(visibility="consumer", start_offset=100,
                                           end_offset=400)
        assert offsets(r[("a", 0)]) == list(range(100, N))
        assert any(f"offsets [{N}, 400) are missing" in m for m in warnings_of(caplog))
        caplog.clear()
        kbatch.open_log_dir(root).read()     # everything on disk: the checkpoints not read
        assert warnings_of(caplog) == []


def test_healthy_reads_warn_of_nothing(tmp_path, caplog):
    """Healthy partitions, a compacted one (segments that end before the next
    one's base) and a transactional one, whole and in ranges."""
    root = tmp_path / "d"
    write_partition(root / "t-0", index_interval_bytes=256)
    compacted = tmp_path / "compacted"
    kbatch.compact(root, compacted, now=1_800_000_000_000)
    (root / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {N}\n")
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        for where in (root, compacted):
            for vis in ("all", "consumer"):
                kbatch.open_log_dir(where).read(visibility=vis)
                kbatch.open_log_dir(where).read(visibility=vis, start_offset=50, end_offset=200)
                kbatch.read_table(where, visibility=vis, level="batches")
            for chunk in kbatch.open_log(where / "t-0").iter(chunk_records=7):
                pass
    assert warnings_of(caplog) == []


def test_transactions_at_the_log_end_warn_of_nothing(tmp_path, caplog):
    """An aborted and an open transaction end the log (read_committed leaves
    their records out): the log end is still the last batch's, not the
    last record returned."""
    root = tmp_path / "d"
    (root / "t-0").mkdir(parents=True)
    (root / "t-0" / "00000000000000000000.log").write_bytes(b"".join([
        build_batch([(1, b"a", b"1", [])], base_offset=0),
        build_batch([(2, None, b"x", [])] * 3, base_offset=1, producer_id=8, producer_epoch=1,
                    base_sequence=0, transactional=True),
        control_batch(base_offset=4, producer_id=8, producer_epoch=1, control_type=ABORT),
        build_batch([(3, None, b"open", [])] * 2, base_offset=5, producer_id=9,
                    producer_epoch=0, base_sequence=0, transactional=True)]))
    (root / "replication-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        for isolation in ("read_uncommitted", "read_committed"):
            got = kbatch.open_log_dir(root).read(isolation=isolation, visibility="consumer")
            assert len(got[("t", 0)]) == (6 if isolation == "read_uncommitted" else 1)
            kbatch.read_table(root, isolation=isolation, visibility="consumer", level="batches")
            kbatch.read_table(root / "t-0", isolation=isolation, visibility="consumer",
                              start_offset=0)
    assert warnings_of(caplog) == []


@needs_corpus
def test_real_data_directories_warn_of_nothing(caplog):
    dirs = sorted({p.parent for p in CORPUS.glob("**/replication-offset-checkpoint")})
    assert dirs
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        for d in dirs:
            try:
                healthy = kbatch.verify(d).ok
            except kbatch.KbatchError:        # not a data directory (partitions being deleted)
                continue
            if healthy:
                kbatch.open_log_dir(d).read(visibility="consumer", on_corrupt="skip")
                kbatch.open_log_dir(d).read(visibility="consumer", level="batches")
    assert warnings_of(caplog) == []


def test_spark_plans_warn_of_the_same_missing_data(tmp_path, caplog):
    """Driver side (no Spark job): a batch query's plan warns once of the
    offsets it will not find (index files without their .log, a high
    watermark past the log end), and of a subscribed partition the
    checkpoint files name with no directory."""
    pytest.importorskip("pyspark")
    from kbatch.spark import Options, plan
    root = tmp_path / "d"
    t = write_partition(root / "t-0")
    write_partition(root / "c-0")
    (root / "replication-offset-checkpoint").write_text(f"0\n3\nt 0 500\nc 0 {N}\nc 1 800\n")
    t[1].unlink()
    lo, hi = base(t[1]), base(t[2])
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        plan(Options.parse({"path": str(root)}))
        [hole] = warnings_of(caplog)
        assert str(root / "t-0") in hole and f"offsets [{lo}, {hi}) are missing" in hole
        caplog.clear()
        plan(Options.parse({"path": str(root), "visibility": "consumer"}))
        messages = warnings_of(caplog)
        assert len(messages) == 3, messages
        assert any(f"offsets [{N}, 500) are missing" in m and "high watermark 500" in m
                   for m in messages)
        assert any(str(root / "c-1") in m and "no partition directory" in m for m in messages)
        caplog.clear()
        plan(Options.parse({"path": str(root), "visibility": "consumer", "subscribe": "c"}))
        [gone] = warnings_of(caplog)
        assert str(root / "c-1") in gone and "offsets [0, 800) are missing" in gone
        caplog.clear()
        plan(Options.parse({"path": str(root), "startingOffsets": '{"t": {"0": 0}, '
                            '"c": {"0": 0}}', "endingOffsets": f'{{"t": {{"0": {lo}}}, '
                            '"c": {"0": 10}}'}))
        assert warnings_of(caplog) == []          # a range that misses nothing
