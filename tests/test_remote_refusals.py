"""Where URLs are not read yet, kbatch says so (instead of "no such file" for
an object that exists): verify, transactions and the command line."""

import subprocess
import sys

import pytest

import kbatch


@pytest.mark.parametrize("fn", [kbatch.verify, kbatch.transactions])
def test_library_tools_refuse_urls_clearly(fn):
    with pytest.raises(kbatch.ArgumentError, match="is a URL; .* local paths only"):
        fn("s3://bucket/orders-0")


@pytest.mark.parametrize("command", ["verify", "stats", "txn", "dump"])
def test_command_line_refuses_urls_with_a_usage_error(command):
    out = subprocess.run([sys.executable, "-m", "kbatch", command, "s3://bucket/orders-0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "a URL; the command line reads local paths only" in out.stderr


def test_local_paths_still_read(tmp_path):
    kbatch.write_log(tmp_path / "t-0", [(None, b"v", 1, [])] * 3)
    assert kbatch.verify(str(tmp_path / "t-0")).ok
