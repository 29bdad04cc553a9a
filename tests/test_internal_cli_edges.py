"""Edges of kbatch.internal's command line and checkpoint files:

- checkpoint numbers parsed exactly as Kafka's ``CheckpointFile`` parses
  them (``Integer.parseInt`` / ``Long.parseLong``, ``\\s+`` fields,
  ``readLine`` line ends), a file Kafka refuses raising
  ``CorruptRecordError``, in the API and in ``dump``/``stats``;
- times past what a Python ``datetime`` holds (year 9999; Kafka keeps
  longs) in ``lag``/``txn``, text and JSON, as the values written;
- internal files and directories given as URLs (``dump --decode``, snapshots,
  checkpoint files, ``txn``'s transactional ids) print what the same files
  print as local paths.

The truth: Java's parse rules (a table checked against OpenJDK 17, and the
JDK itself where one is installed), the values written into the files, and
the local-path output of the same files.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import uuid

import crc32c
import fsspec
import pytest

import kbatch
from kbatch.errors import CorruptRecordError
from kbatch.internal import checkpoints, read_checkpoint, visible_ranges
from kbatch.tools.cli import main
from kbatch.tools.internal_cli import print_internal_summary

BIG = 2 ** 62                      # year ~146 million: no datetime holds it
T0 = 1_700_000_000_123             # 2023-11-14 22:13:20.123 UTC


def cli(capfd, *argv):
    capfd.readouterr()
    rc = main(list(argv))
    got = capfd.readouterr()
    return rc, got.out, got.err


# --- independent encoders (from Kafka's message specs) ----------------------

def s16(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def offset_commit(group, topic, partition, offset, commit_ts):
    """OffsetCommitKey v1, OffsetCommitValue v3."""
    key = struct.pack(">h", 1) + s16(group) + s16(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqi", 3, offset, -1) + s16("") + struct.pack(">q", commit_ts)
    return key, value


def txn_record(tid, producer_id, status, last_update, start, partitions=(("t", [0]),)):
    """TransactionLogKey v0, TransactionLogValue v0 (not flexible)."""
    key = struct.pack(">h", 0) + s16(tid)
    value = struct.pack(">hqhib", 0, producer_id, 0, 60000, status)
    value += struct.pack(">i", len(partitions))
    for topic, ids in partitions:
        value += s16(topic) + struct.pack(">i", len(ids)) + b"".join(struct.pack(">i", p) for p in ids)
    value += struct.pack(">qq", last_update, start)
    return key, value


def producer_snapshot(entries) -> bytes:
    """Producer state snapshot v1: version, CRC-32C of the rest, entries."""
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


# --- 1. checkpoint numbers as Java parses them --------------------------------

# (text, Integer.parseInt(text), Long.parseLong(text)); None: NumberFormatException.
# Checked against OpenJDK 17 (and by test_checkpoint_lines_as_the_jdk_reads_them).
JAVA_NUMBERS = [
    ("0", 0, 0), ("7", 7, 7), ("+5", 5, 5), ("-5", -5, -5), ("-0", 0, 0), ("+0", 0, 0),
    ("00012", 12, 12), ("1_000", None, None), ("+", None, None), ("-", None, None),
    ("--5", None, None), ("+-5", None, None), ("0x10", None, None), ("1e3", None, None),
    ("5.0", None, None),
    ("2147483647", 2147483647, 2147483647), ("2147483648", None, 2147483648),
    ("-2147483648", -2147483648, -2147483648), ("-2147483649", None, -2147483649),
    ("9223372036854775807", None, 9223372036854775807),
    ("9223372036854775808", None, None),
    ("-9223372036854775808", None, -9223372036854775808),
    ("-9223372036854775809", None, None),
    ("99999999999999999999", None, None), ("1" * 400, None, None),
    ("0000000000000000000000000000042", 42, 42),
    ("\u0663", 3, 3),               # ARABIC-INDIC DIGIT THREE: Character.digit says 3
    ("\uff11\uff12", 12, 12),       # fullwidth digits
    ("\U0001d7ce", None, None),     # MATHEMATICAL BOLD DIGIT ZERO: a surrogate pair in Java
    ("\u00b2", None, None),         # SUPERSCRIPT TWO: not a decimal digit
]


def _write(path, text: str):
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("text,as_int,as_long", JAVA_NUMBERS)
def test_offset_checkpoint_fields_parse_as_java(tmp_path, text, as_int, as_long):
    part = _write(tmp_path / "replication-offset-checkpoint", f"0\n1\nt {text} 5\n")
    off = _write(tmp_path / "log-start-offset-checkpoint", f"0\n1\nt 0 {text}\n")
    for path, want, entry in ((part, as_int, lambda v: ("t", v, 5)),
                              (off, as_long, lambda v: ("t", 0, v))):
        if want is None:
            with pytest.raises(CorruptRecordError, match=r"line 3: .*(not a number|out of "
                                                          r"range)") as err:
                read_checkpoint(path)
            assert str(path) in str(err.value)
        else:
            assert read_checkpoint(path)[1] == [entry(want)]


@pytest.mark.parametrize("text,as_int,as_long", JAVA_NUMBERS)
def test_leader_epoch_checkpoint_fields_parse_as_java(tmp_path, text, as_int, as_long):
    (tmp_path / "t-0").mkdir()
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    _write(path, f"0\n1\n{text} 9\n")
    if as_int is None:
        with pytest.raises(CorruptRecordError, match="line 3: leader epoch"):
            read_checkpoint(path)
    else:
        assert read_checkpoint(path) == ("leader_epoch", [(as_int, 9)])
    _write(path, f"0\n1\n4 {text}\n")
    if as_long is None:
        with pytest.raises(CorruptRecordError, match="line 3: start offset"):
            read_checkpoint(path)
    else:
        assert read_checkpoint(path) == ("leader_epoch", [(4, as_long)])


@pytest.mark.parametrize("text,as_int,as_long", JAVA_NUMBERS)
def test_version_and_count_lines_parse_as_java(tmp_path, text, as_int, as_long):
    path = tmp_path / "recovery-point-offset-checkpoint"
    _write(path, f"{text}\n0\n")
    if as_int == 0:
        assert read_checkpoint(path) == ("recovery_point", [])
    else:
        with pytest.raises(CorruptRecordError, match="line 1"):
            read_checkpoint(path)
    _write(path, f"0\n{text}\n" + "t 0 1\n" * 7)
    if as_int == 7:
        assert read_checkpoint(path) == ("recovery_point", [("t", 0, 1)] * 7)
    else:
        with pytest.raises(CorruptRecordError, match="line 2"):
            read_checkpoint(path)


# (file text, entries, or None when Kafka refuses the file)
LINES = [
    ("0\n1\nt 0 5\n", [("t", 0, 5)]),
    ("0\r\n1\r\nt 0 5\r\n", [("t", 0, 5)]),          # readLine: \r\n
    ("0\r1\rt 0 5\r", [("t", 0, 5)]),                # readLine: \r alone
    ("0\n1\nt 0 5", [("t", 0, 5)]),                  # no final line end
    ("0\n1\nt\t0\x0b5\n", [("t", 0, 5)]),            # \s: tab, vertical tab
    ("0\n1\nt \f 0  5 \t\n", [("t", 0, 5)]),          # trailing whitespace: no field
    ("0\n1\n t 0 5\n", None),                        # leading whitespace: an empty field
    ("0\n1\nt\u00a00 5\n", None),                    # NBSP is no \s: two fields
    ("0\n1\nt 0 5\u2003\n", None),                   # nor EM SPACE: '5\u2003' no number
    (" 0\n1\nt 0 5\n", None),                        # parseInt does not trim
    ("0 \n1\nt 0 5\n", None),
    ("0\n1 \nt 0 5\n", None),
    ("0\n1\nt 0 5\n\n", None),                       # an empty line is a malformed entry
    ("0\n1\nt 0 1_0\n", None),
]


@pytest.mark.parametrize("text,entries", LINES)
def test_checkpoint_lines_as_kafka_reads_them(tmp_path, text, entries):
    path = _write(tmp_path / "cleaner-offset-checkpoint", text)
    if entries is None:
        with pytest.raises(CorruptRecordError, match=str(path)):
            read_checkpoint(path)
    else:
        assert read_checkpoint(path) == ("cleaner_offset", entries)


JAVA_READER = r"""
import java.util.*;
import java.util.regex.Pattern;
public class R {
  // CheckpointFile.CheckpointReadBuffer.read with OffsetCheckpointFile.Formatter
  public static void main(String[] args) throws Exception {
    Pattern ws = Pattern.compile("\\s+");
    for (String name : args) {
      String out;
      try (java.io.BufferedReader r = java.nio.file.Files.newBufferedReader(
             java.nio.file.Paths.get(name), java.nio.charset.StandardCharsets.UTF_8)) {
        StringBuilder b = new StringBuilder();
        String line = r.readLine();
        if (line != null) {
          if (Integer.parseInt(line) != 0) throw new Exception("version");
          line = r.readLine();
          if (line != null) {
            int expected = Integer.parseInt(line);
            int n = 0;
            while ((line = r.readLine()) != null) {
              String[] p = ws.split(line);
              if (p.length != 3) throw new Exception("malformed");
              b.append(p[0]).append(' ').append(Integer.parseInt(p[1])).append(' ')
               .append(Long.parseLong(p[2])).append(';');
              n++;
            }
            if (n != expected) throw new Exception("count");
          }
        }
        out = "ok " + b;
      } catch (Exception e) {
        out = "refused";
      }
      System.out.println(out);
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no JDK to compare with")
def test_checkpoint_lines_as_the_jdk_reads_them(tmp_path):
    """The cases above, read by the JDK with Kafka's reading code (a
    transcription of CheckpointFile's read and the offset formatter)."""
    texts = [t for t, _ in LINES]
    texts += [f"0\n1\nt {n} {n}\n" for n, _, _ in JAVA_NUMBERS]
    texts += [f"{n}\n0\n" for n, _, _ in JAVA_NUMBERS]
    files = []
    for i, text in enumerate(texts):
        files.append(str(_write(tmp_path / f"{i}", text)))
    (tmp_path / "R.java").write_text(JAVA_READER)
    proc = subprocess.run(["java", str(tmp_path / "R.java"), *files], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    java = proc.stdout.splitlines()
    assert len(java) == len(texts)
    for i, (text, want) in enumerate(zip(texts, java)):
        dest = tmp_path / f"case{i}"
        dest.mkdir()
        path = _write(dest / "replication-offset-checkpoint", text)
        try:
            got = "ok " + "".join(f"{t} {p} {o};" for t, p, o in read_checkpoint(path)[1])
        except CorruptRecordError:
            got = "refused"
        assert got == want, repr(text)


def test_an_out_of_range_checkpoint_is_refused_everywhere(tmp_path, capfd):
    path = _write(tmp_path / "replication-offset-checkpoint", "0\n1\nt 0 99999999999999999999\n")
    (tmp_path / "t-0").mkdir()
    kbatch.write_log(tmp_path / "t-0", [(None, b"x", T0)])
    for call in (lambda: read_checkpoint(path), lambda: checkpoints(tmp_path),
                 lambda: visible_ranges(tmp_path)):
        with pytest.raises(CorruptRecordError, match="line 3: offset '99999999999999999999' "
                                                     "is out of range"):
            call()
    for fmt in ("text", "json"):
        rc, out, err = cli(capfd, "dump", "--format", fmt, str(path))
        assert rc == 1 and "99999999999999999999" not in out
        assert err.startswith(f"kbatch dump: {path}: line 3: offset ")
    rc, out, err = cli(capfd, "stats", str(tmp_path))
    assert "99999999999999999999" not in out and "missing" not in out
    assert f"kbatch stats: {path}: line 3" in err


def test_epoch_checkpoint_with_an_int32_overflowing_epoch_is_refused(tmp_path, capfd):
    (tmp_path / "t-0").mkdir()
    path = _write(tmp_path / "t-0" / "leader-epoch-checkpoint", "0\n1\n2147483648 0\n")
    with pytest.raises(CorruptRecordError, match="line 3: leader epoch '2147483648' is out of "
                                                 "range for an int32"):
        checkpoints(tmp_path)
    rc, out, err = cli(capfd, "dump", "--format", "json", str(path))
    assert rc == 1 and out == "" and str(path) in err


# --- 2. times past year 9999 ---------------------------------------------------

def _lag_dir(root):
    kbatch.write_log(root / "__consumer_offsets-0",
                     [(*offset_commit("g", "t", 0, 1, BIG), T0),
                      (*offset_commit("g", "t", 1, 0, T0), T0)])
    kbatch.write_log(root / "t-0", [(None, b"x", T0), (None, b"y", T0)])
    kbatch.write_log(root / "t-1", [(None, b"x", T0)])
    return root


def test_lag_prints_times_past_year_9999(tmp_path, capfd):
    root = _lag_dir(tmp_path)
    rc, out, err = cli(capfd, "lag", "--format", "json", str(root))
    assert rc == 0 and err == ""
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["partition"], r["commit_timestamp"], r["committed_offset"], r["log_end_offset"],
             r["lag"]) for r in rows] == [(0, BIG, 1, 2, 1), (1, T0, 0, 1, 1)]
    rc, out, err = cli(capfd, "lag", str(root))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert f"{BIG} ms" in lines[1] and lines[1].split()[:3] == ["g", "t", "0"]
    assert "2023-11-14 22:13:20.123" in lines[2]
    rc, out, err = cli(capfd, "lag", "--history", "--format", "json", str(root))
    assert rc == 0 and [json.loads(x)["commit_timestamp"] for x in out.splitlines()] == [BIG, T0]


@pytest.mark.parametrize("when", [BIG, -BIG, 2 ** 63 - 1])
def test_txn_prints_coordinator_times_past_datetime(tmp_path, capfd, when):
    kbatch.write_log(tmp_path / "__transaction_state-0",
                     [(*txn_record("tx-1", 77, 1, when, when), T0)])
    kbatch.write_log(tmp_path / "t-0", [(None, b"x", T0)])
    rc, out, err = cli(capfd, "txn", "--format", "json", str(tmp_path))
    assert rc == 0 and err == ""
    [ids] = [json.loads(x) for x in out.splitlines() if "transactional_id" in x]
    assert (ids["producer_id"], ids["transactional_id"], ids["last_update_timestamp"]) == \
        (77, "tx-1", when)
    rc, out, err = cli(capfd, "txn", str(tmp_path))
    assert rc == 0 and err == ""
    assert f"  producer         77 epoch     0: tx-1  Ongoing at {when} ms" in out.splitlines()


def test_txn_prints_ordinary_coordinator_times_as_utc(tmp_path, capfd):
    kbatch.write_log(tmp_path / "__transaction_state-0",
                     [(*txn_record("tx-1", 77, 1, T0, T0), T0)])
    rc, out, _ = cli(capfd, "txn", "--format", "json", str(tmp_path))
    assert [json.loads(x)["last_update_timestamp"] for x in out.splitlines()
            if "transactional_id" in x] == [T0]
    rc, out, _ = cli(capfd, "txn", str(tmp_path))
    assert "tx-1  Ongoing at 2023-11-14 22:13:20.123" in out


def test_internal_summary_takes_times_past_year_9999(tmp_path, capfd):
    root = _lag_dir(tmp_path)
    kbatch.write_log(root / "__transaction_state-0", [(*txn_record("tx-1", 77, 1, BIG, BIG), T0)])
    capfd.readouterr()
    print_internal_summary(root)
    out = capfd.readouterr().out
    assert "consumer groups" in out and "tx-1 (producer 77, Ongoing)" in out


# --- 3 and 4. URLs print what local paths print ---------------------------------

@pytest.fixture
def site(tmp_path):
    """A data directory on disk and the same files under a memory:// URL."""
    root = tmp_path / "data"
    kbatch.write_log(root / "__consumer_offsets-0",
                     [(*offset_commit("g", "t", 0, 42, T0), T0),
                      (*offset_commit("g", "t", 1, 7, BIG), T0 + 1)])
    kbatch.write_log(root / "__transaction_state-0",
                     [(*txn_record("tx-1", 77, 1, T0, T0), T0),
                      (*txn_record("tx-2", 78, 4, BIG, T0), T0)])
    kbatch.write_log(root / "t-0", [(None, b"x", T0)])
    (root / "__consumer_offsets-0" / "00000000000000000002.snapshot").write_bytes(
        producer_snapshot([(1000, 2, 41, 1, 3, T0, 5, -1), (1001, 0, 0, 0, 0, BIG, -1, -1)]))
    (root / "replication-offset-checkpoint").write_text(
        "0\n2\n__consumer_offsets 0 2\nt 0 1\n")
    (root / "t-0" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 1\n")
    url = f"memory://kbatch-edges-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    for path in root.rglob("*"):
        if path.is_file():
            fs.pipe_file(url[len("memory://"):] + "/" + path.relative_to(root).as_posix(),
                         path.read_bytes())
    yield str(root), url
    fs.rm(url[len("memory://"):], recursive=True)


DUMPS = [
    ["--decode", "offsets", "{root}/__consumer_offsets-0/00000000000000000000.log"],
    ["--decode", "offsets", "{root}/__consumer_offsets-0"],
    ["--decode", "transactions", "{root}/__transaction_state-0"],
    ["{root}/__consumer_offsets-0/00000000000000000002.snapshot"],
    ["{root}/replication-offset-checkpoint"],
    ["{root}/t-0/leader-epoch-checkpoint"],
    ["{root}/replication-offset-checkpoint", "{root}/t-0/00000000000000000000.log",
     "{root}/t-0/leader-epoch-checkpoint"],
]


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("args", DUMPS, ids=lambda a: "+".join(x.rsplit("/", 1)[-1] for x in a))
def test_dump_of_internal_files_by_url_equals_local(site, capfd, args, fmt):
    root, url = site
    local = cli(capfd, "dump", "--format", fmt, *[a.format(root=root) for a in args])
    remote = cli(capfd, "dump", "--format", fmt, *[a.format(root=url) for a in args])
    assert local[0] == 0 and local[2] == "" and local[1]
    assert remote == (local[0], local[1].replace(root, url), local[2])


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_txn_of_a_url_names_the_transactional_ids_as_local(site, capfd, fmt):
    root, url = site
    local = cli(capfd, "txn", "--format", fmt, root)
    assert local[0] == 0 and local[2] == "" and "tx-1" in local[1] and "tx-2" in local[1]
    remote = cli(capfd, "txn", "--format", fmt, url)
    assert remote == (local[0], local[1].replace(root, url), local[2])


def test_a_missing_internal_url_is_a_usage_error_naming_it(site, capfd):
    _, url = site
    rc, out, err = cli(capfd, "dump", f"{url}/nope/replication-offset-checkpoint")
    assert rc == 2 and out == "" and f"{url}/nope/replication-offset-checkpoint" in err


def test_internal_files_in_s3_with_storage_options(site, capfd):
    """s3:// with --storage-option (a local S3 server): the command's
    storage flags reach the internal files as they reach segments."""
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    from .remote_s3 import BUCKET, S3
    root, _ = site
    server = S3()
    try:
        server.put_dir(root, "edges")
        opts = server.options()
        flags = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
                 "--storage-option", "client_kwargs=" + json.dumps(opts["client_kwargs"])]
        url = f"s3://{BUCKET}/edges"
        for args in (DUMPS[1], DUMPS[3], DUMPS[6]):
            local = cli(capfd, "dump", "--format", "json", *[a.format(root=root) for a in args])
            remote = cli(capfd, "dump", "--format", "json", *flags,
                         *[a.format(root=url) for a in args])
            assert remote == (local[0], local[1].replace(root, url), local[2])
        local = cli(capfd, "txn", "--format", "json", root)
        remote = cli(capfd, "txn", "--format", "json", *flags, url)
        assert remote == (local[0], local[1].replace(root, url), local[2])
        # the options are for URLs: with local files only, a usage error as elsewhere
        rc, _, err = cli(capfd, "dump", *flags, f"{root}/replication-offset-checkpoint")
        assert rc == 2 and "--storage-option is for URLs" in err
    finally:
        server.stop()
