"""Issue 11, part 3 (library): wrong places and wrong arguments raise clear
errors; timestamps in every common form; an exact timestamp filter; LogDir
takes the range arguments and iterates in chunks."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest

import kbatch
from kbatch.errors import ArgumentError
from kbatch.lib.paths import PathError

T0 = 1_700_000_000_000   # 2023-11-14T22:13:20Z


@pytest.fixture
def data_dir(tmp_path):
    root = tmp_path / "data"
    for topic, n in (("orders", 40), ("users", 10)):
        kbatch.write_log(root / f"{topic}-0",
                         {"value": [b"%s-%d" % (topic.encode(), i) for i in range(n)],
                          "timestamp": T0 + np.arange(n) * 1000},
                         segment_bytes=1500, batch_records=4)
    return root


def test_open_log_on_a_data_directory_raises(data_dir):
    with pytest.raises(PathError, match="open_log needs a partition directory.*orders-0"):
        kbatch.open_log(data_dir)
    with pytest.raises(PathError, match="no such file"):
        kbatch.open_log(data_dir / "nothing-0")


def test_open_log_dir_on_a_partition_directory_raises(data_dir):
    with pytest.raises(PathError, match="open_log_dir needs a broker data directory"):
        kbatch.open_log_dir(data_dir / "orders-0")


def test_log_dir_read_takes_a_topic_name_and_refuses_unknown_topics(data_dir):
    logdir = kbatch.open_log_dir(data_dir)
    got = logdir.read("orders")
    assert list(got) == [("orders", 0)]
    assert got[("orders", 0)].value.to_pylist() == [b"orders-%d" % i for i in range(40)]
    with pytest.raises(ArgumentError, match="no topic 'order'.*orders, users"):
        logdir.read(["order"])
    with pytest.raises(ArgumentError):
        logdir.read("nope")


def test_unknown_options_name_themselves_and_list_the_valid_ones(data_dir):
    log = kbatch.open_log(data_dir / "orders-0")
    for call in (lambda: log.read(validate_crcs=False),
                 lambda: log.iter(validate_crcs=False),
                 lambda: kbatch.open_log_dir(data_dir).read(validate_crcs=False),
                 lambda: kbatch.read_segment(b"", validate_crcs=False),
                 lambda: kbatch.verify(data_dir, validate_crcs=False),
                 lambda: kbatch.transactions(data_dir, validate_crcs=False)):
        with pytest.raises(ArgumentError) as info:
            call()
        text = str(info.value)
        assert "'validate_crcs'" in text and "validate_crc" in text and "on_corrupt" in text
        assert "DecodeOptions" not in text


@pytest.mark.parametrize("value", [
    T0 + 5000, np.int64(T0 + 5000),
    dt.datetime(2023, 11, 14, 22, 13, 25),                          # naive: UTC
    dt.datetime(2023, 11, 14, 23, 13, 25, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    np.datetime64("2023-11-14T22:13:25.000"),
    pd.Timestamp("2023-11-14 22:13:25"), pd.Timestamp("2023-11-14 17:13:25", tz="US/Eastern"),
    "2023-11-14T22:13:25Z", "2023-11-14 22:13:25", str(T0 + 5000),
])
def test_timestamp_forms(data_dir, value):
    log = kbatch.open_log(data_dir / "orders-0")
    got = log.read(start_timestamp=value, end_timestamp=T0 + 9000)
    assert got.offset.tolist() == [5, 6, 7, 8]


@pytest.mark.parametrize("bad", [1.7e12, True, "yesterday", object()])
def test_bad_timestamps_raise_naming_the_argument(data_dir, bad):
    log = kbatch.open_log(data_dir / "orders-0")
    with pytest.raises(ArgumentError, match="start_timestamp"):
        log.read(start_timestamp=bad)


def test_exact_timestamp_filter(tmp_path):
    # timestamps out of order: offset 3 is stamped after the window's end,
    # offset 5 inside it although offset 4 already reached the end
    stamps = [0, 10, 20, 95, 100, 30, 40, 200]
    part = tmp_path / "t-0"
    kbatch.write_log(part, {"value": [b"%d" % i for i in range(len(stamps))],
                            "timestamp": np.array(stamps) + T0}, batch_records=2)
    log = kbatch.open_log(part)
    lo, hi = T0 + 10, T0 + 100
    exact = log.read(start_timestamp=lo, end_timestamp=hi, timestamp_mode="exact")
    want = [i for i, t in enumerate(stamps) if lo <= t + T0 < hi]
    assert exact.offset.tolist() == want == [1, 2, 3, 5, 6]
    # Kafka's offsets-for-times meaning stops before the first offset stamped >= end
    assert log.read(start_timestamp=lo, end_timestamp=hi).offset.tolist() == [1, 2, 3]
    chunks = list(log.iter(start_timestamp=lo, end_timestamp=hi, timestamp_mode="exact",
                           chunk_records=1))
    assert np.concatenate([c.offset for c in chunks]).tolist() == want
    with pytest.raises(ArgumentError, match="timestamp_mode"):
        log.read(timestamp_mode="nearest")


def test_log_dir_ranges_and_iter(data_dir):
    logdir = kbatch.open_log_dir(data_dir)
    got = logdir.read(start_offset=3, end_offset=7)
    assert {k: v.offset.tolist() for k, v in got.items()} == {
        ("orders", 0): [3, 4, 5, 6], ("users", 0): [3, 4, 5, 6]}
    got = logdir.read("orders", start_timestamp="2023-11-14T22:13:50Z")
    assert got[("orders", 0)].offset.tolist() == list(range(30, 40))
    seen = {}
    for key, chunk in logdir.iter(chunk_records=3, end_offset=8):
        assert len(chunk) <= 4   # whole batches of 4 records, trimmed to the range
        seen.setdefault(key, []).extend(chunk.offset.tolist())
    assert seen == {("orders", 0): list(range(8)), ("users", 0): list(range(8))}
