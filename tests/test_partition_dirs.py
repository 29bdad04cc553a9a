"""One partition, one directory: two directories naming the same partition
(``t-1`` and ``t-01``) are an error, as Kafka refuses to load them, never a
silent merge with duplicate offsets; partition numbers are ASCII digits."""

import subprocess
import sys
from pathlib import Path

import pytest

import kbatch
from kbatch.lib.paths import PathError, parse_partition_dir
from kbatch.lib.writer import write_log

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kbatch.tools.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def duplicate(tmp_path):
    write_log(tmp_path / "t-1", {"value": [b"a"] * 3})
    write_log(tmp_path / "t-01", {"value": [b"b"] * 3})
    write_log(tmp_path / "u-0", {"value": [b"c"] * 3})
    return tmp_path


def test_two_directories_naming_one_partition_are_refused(duplicate):
    with pytest.raises(PathError, match="t-01 and t-1") as info:
        kbatch.open_log_dir(duplicate)
    assert isinstance(info.value, kbatch.KbatchError)
    with pytest.raises(PathError, match="t-01 and t-1"):
        kbatch.verify(duplicate)


def test_cli_verify_reports_the_duplicate_without_a_traceback(duplicate):
    child = _cli("verify", str(duplicate))
    assert child.returncode != 0
    assert "t-01 and t-1" in child.stderr + child.stdout
    assert "Traceback" not in child.stderr


def test_each_directory_alone_is_one_partition(duplicate):
    for name, value in (("t-1", b"a"), ("t-01", b"b")):
        log = kbatch.open_log(duplicate / name)
        assert (log.topic, log.partition) == ("t", 1)
        assert log.read().value.to_pylist() == [value] * 3


def test_non_ascii_digits_are_not_a_partition_number(tmp_path):
    """'t-١' (ARABIC-INDIC DIGIT ONE) is no partition 1 of topic t: Kafka
    parses partition numbers as ASCII digits; it does not merge with t-1."""
    assert parse_partition_dir("t-\u0661") is None
    assert parse_partition_dir("t-\uff11") is None      # FULLWIDTH DIGIT ONE
    write_log(tmp_path / "t-1", {"value": [b"a"] * 3})
    write_log(tmp_path / "t-\u0661", {"value": [b"z"] * 3})
    logs = kbatch.open_log_dir(tmp_path)
    assert [(p.topic, p.partition) for p in logs.partitions] == [("t", 1)]
    assert logs.read()[("t", 1)].value.to_pylist() == [b"a"] * 3
    report = kbatch.verify(tmp_path)
    assert len(report.segments) == 1 and report.records == 3
    child = _cli("verify", str(tmp_path))
    assert child.returncode == 0, child.stderr
    assert "Traceback" not in child.stderr
