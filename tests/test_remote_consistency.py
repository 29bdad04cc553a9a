"""What a read of object storage answers when the store is not a plain
tree of files, compared with the local read of the same bytes:

- a zero-byte object at a prefix's own key (a folder placeholder that S3
  consoles and tools write) is the prefix, not an empty segment; a URL
  ending in "/" names a prefix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")

import kbatch  # noqa: E402

from .remote_s3 import BUCKET, S3  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


def _values(records) -> list:
    return records.value.to_pylist()


# --- F1: folder placeholders --------------------------------------------------

@pytest.fixture(scope="module")
def placeholders(s3, tmp_path_factory):
    """A data directory uploaded with zero-byte objects at its own key and at
    a partition's key (``m/data``, ``m/data/t-0``), as consoles write them."""
    root = tmp_path_factory.mktemp("placeholders") / "data"
    for p in (0, 1):
        with kbatch.LogWriter(root / f"t-{p}", segment_bytes=700, batch_records=3) as w:
            w.append({"value": [b"value-%03d" % i for i in range(40)]})
    s3.put_dir(str(root), "m/data")
    for key in ("m/data", "m/data/t-0"):
        s3.fs.pipe_file(f"{BUCKET}/{key}", b"")
    s3.fs.invalidate_cache()
    return root


def _verified(report):
    return [(os.path.basename(str(s.path)), s.records, s.ok) for s in report.segments], report.ok


def test_a_folder_placeholder_is_its_prefix(s3, placeholders):
    opts = dict(storage_options=s3.options())
    url = f"s3://{BUCKET}/m/data"
    local = kbatch.read_table(placeholders)
    assert local.num_rows == 80
    for where in (url, url + "/"):
        assert kbatch.read_table(where, **opts).to_pydict() == local.to_pydict()
        assert _verified(kbatch.verify(where, **opts)) == _verified(kbatch.verify(placeholders))
    for where in (f"{url}/t-0", f"{url}/t-0/"):
        assert _values(kbatch.open_log(where, **opts).read()) == \
            _values(kbatch.open_log(placeholders / "t-0").read())
        assert _verified(kbatch.verify(where, **opts)) == \
            _verified(kbatch.verify(placeholders / "t-0"))
        # a partition is not a segment, here as there
        with pytest.raises(kbatch.PathError, match="is a partition"):
            kbatch.read_segment(placeholders / "t-0")
        with pytest.raises(kbatch.PathError, match="is a partition"):
            kbatch.read_segment(where, **opts)


def test_a_url_ending_in_a_slash_names_a_prefix(s3, placeholders):
    """``.../x.log/`` names no file locally (not a directory) and no object
    remotely; a segment key that is also a prefix of other objects is read
    as a segment without the slash (tests/test_remote_plain.py)."""
    name = sorted(p.name for p in (placeholders / "t-1").glob("*.log"))[0]
    with pytest.raises(kbatch.PathError, match="no such file or directory"):
        kbatch.read_segment(str(placeholders / "t-1" / name) + "/")
    with pytest.raises(kbatch.PathError, match="no such file or directory"):
        kbatch.read_segment(f"s3://{BUCKET}/m/data/t-1/{name}/", storage_options=s3.options())
    assert _values(kbatch.read_segment(f"s3://{BUCKET}/m/data/t-1/{name}",
                                       storage_options=s3.options())) == \
        _values(kbatch.read_segment(placeholders / "t-1" / name))


def test_command_line_reads_a_prefix_with_placeholders(s3, placeholders):
    opts = s3.options(direct=True)
    flags = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
             "--storage-option", "client_kwargs=" + json.dumps(opts["client_kwargs"])]

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "kbatch", *args], capture_output=True,
                             text=True, timeout=300)
        return out.returncode, out.stdout.splitlines()[-1:]

    for command in ("verify", "stats"):
        local = run(command, str(placeholders))
        assert local[0] == 0 and "80" in local[1][0]
        assert run(command, f"s3://{BUCKET}/m/data/", *flags) == local
