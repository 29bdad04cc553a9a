"""Bad input to the ``kbatch`` command, as a new user gives it: wrong places
(the parent of a data directory, a text file, /dev/null, a FIFO), arguments
out of range, paths of the wrong kind. Every case runs ``python -m kbatch.tools.cli``
in a subprocess and must end with the expected exit status (1: nothing to read
or bad data, 2: usage) and one line on stderr, never a traceback.

``python tests/test_cli_bad_inputs.py`` prints the cases as a markdown table
(arguments, exit status, first line of output).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import kbatch

ROOT = Path(__file__).resolve().parent.parent
BIG = str(1 << 70)

# (id, argv with {placeholders}, exit status, words the message must hold)
CASES = [
    ("no command", [], 2, "required"),
    ("unknown command", ["frobnicate"], 2, "invalid choice"),
    ("unknown option", ["--bogus", "stats", "{data}"], 2, "unrecognized"),
    ("dump without file", ["dump"], 2, "required"),
    ("stats without path", ["stats"], 2, "required"),
    ("verify two paths", ["verify", "{data}", "{data}"], 2, "unrecognized"),
    ("bad --format", ["stats", "--format", "xml", "{data}"], 2, "invalid choice"),
    ("bad --decode", ["dump", "--decode", "latin1", "{segment}"], 2, "invalid choice"),
    ("--max-bytes > int64", ["dump", "--max-bytes", BIG, "{segment}"], 2, "out of range"),
    ("--max-bytes negative", ["dump", "--max-bytes", "-1", "{segment}"], 2, "out of range"),
    ("--max-bytes not a number", ["dump", "--max-bytes", "1e3", "{segment}"], 2, "not a whole"),
    ("--max-bytes empty", ["dump", "--max-bytes", "", "{segment}"], 2, "not a whole"),
    ("sample --records negative", ["sample", "--records", "-5", "{new}"], 2, "out of range"),
    ("sample --records 0", ["sample", "--records", "0", "{new}"], 2, "out of range"),
    ("sample --records huge", ["sample", "--records", BIG, "{new}"], 2, "out of range"),
    ("sample --segment-bytes 10", ["sample", "--segment-bytes", "10", "{new}"], 2, "out of range"),
    ("sample --seed negative", ["sample", "--seed", "-1", "{new}"], 2, "out of range"),
    ("sample into a file", ["sample", "{text}"], 2, "not a directory"),
    ("sample into a non-empty dir", ["sample", "{data}"], 2, "not empty"),
    ("main --sample-records -3", ["main", "--sample-records", "-3"], 2, "out of range"),
    ("main --log-dir missing", ["main", "--log-dir", "{missing}"], 2, "no such file"),
    ("main --log-dir a file", ["main", "--log-dir", "{text}"], 2, "is a segment"),
    ("main --log-dir /dev/null", ["main", "--log-dir", "/dev/null"], 2, "character device"),
    ("main --log-dir a partition", ["main", "--log-dir", "{partition}"], 2, "is a partition"),
    ("main --log-dir parent of data", ["main", "--log-dir", "{parent}"], 1, "did you mean"),
    ("main --out a file", ["main", "--log-dir", "{data}", "--out", "{text}"], 2,
     "not a directory"),
    ("verify parent of data dir", ["verify", "{parent}"], 1, "did you mean"),
    ("stats parent of data dir", ["stats", "{parent}"], 1, "did you mean"),
    ("txn parent of data dir", ["txn", "{parent}"], 1, "did you mean"),
    ("verify a text file", ["verify", "{text}"], 1, "not a Kafka log segment"),
    ("stats a text file", ["stats", "{text}"], 1, "not a Kafka log segment"),
    ("txn a text file", ["txn", "{text}"], 1, "not a Kafka log segment"),
    ("dump a text file", ["dump", "{text}"], 1, "not a Kafka log segment"),
    ("dump --decode a text file", ["dump", "--decode", "offsets", "{text}"], 1,
     "not a Kafka log segment"),
    ("dump --decode /dev/null", ["dump", "--decode", "offsets", "/dev/null"], 2,
     "character device"),
    ("verify /dev/null", ["verify", "/dev/null"], 2, "character device"),
    ("stats /dev/null", ["stats", "/dev/null"], 2, "character device"),
    ("txn /dev/null", ["txn", "/dev/null"], 2, "character device"),
    ("dump /dev/null", ["dump", "/dev/null"], 2, "character device"),
    ("verify --format json /dev/null", ["verify", "--format", "json", "/dev/null"], 2,
     "character device"),
    ("verify a FIFO", ["verify", "{fifo}"], 2, "FIFO"),
    ("dump a FIFO", ["dump", "{fifo}"], 2, "FIFO"),
    ("verify missing path", ["verify", "{missing}"], 2, "no such file"),
    ("stats empty path", ["stats", ""], 2, "empty path"),
    ("stats empty directory", ["stats", "{empty}"], 1, "empty directory"),
    ("txn empty directory", ["txn", "{empty}"], 1, "empty directory"),
    ("dump a partition directory", ["dump", "{partition}"], 2, "is a partition"),
    ("dump a data directory", ["dump", "{data}"], 2, "is a data directory"),
    ("stats t-1 and t-01", ["stats", "{twins}"], 1, "both name"),
    ("stats a path too long", ["stats", "x" * 5000], 2, "no such file"),
    ("dump a segment with a bad CRC", ["dump", "--no-data", "{corrupt}"], 1, "CRC"),
    ("stats a segment with a bad CRC", ["stats", "{corrupt}"], 1, "CRC"),
    ("main without pyspark", ["main", "--log-dir", "{data}"], 1, "kbatch-kafka[spark]"),
    # side files given where a segment is read: named as what they are
    ("verify an .index file", ["verify", "{index}"], 2, "an offset index file"),
    ("stats a .timeindex file", ["stats", "{timeindex}"], 2, "a time index file"),
    ("txn a .txnindex file", ["txn", "{txnindex}"], 2, "a transaction index file"),
    ("verify a .snapshot file", ["verify", "{snapshot}"], 2, "a producer state snapshot"),
    ("stats a checkpoint file", ["stats", "{checkpoint}"], 2, "a checkpoint file"),
    # a mistyped path: the near miss is named
    ("verify orders-O for orders-0", ["verify", "{typo}"], 2, "did you mean"),
    ("stats a mistyped segment name", ["stats", "{typo_segment}"], 2, "did you mean"),
    # lag: one error format, exit 1 when nothing is listed
    ("lag a missing directory", ["lag", "{missing}"], 2, "no such file"),
    ("lag a typo", ["lag", "{typo}"], 2, "did you mean"),
    ("lag of a directory without commits", ["lag", "{data}"], 1, "no offset commits"),
    ("dump a missing snapshot", ["dump", "{missing_snapshot}"], 2, "no such file"),
    # missing data: the .log files of a copied directory are gone
    ("verify a copy without its .log files", ["verify", "{gutted}"], 1, ""),
    ("stats a copy without its .log files", ["stats", "{gutted}"], 1, ""),
    ("verify an empty partition directory", ["verify", "{hollow}"], 1, ""),
    # no segment file at all: nothing to read, exit 1, whichever command reads it
    ("stats an empty partition directory", ["stats", "{hollow}"], 1, ""),
    ("stats --level batches, no segment", ["stats", "--level", "batches", "{hollow}"], 1,
     "nothing to read"),
    ("txn, no segment", ["txn", "{hollow}"], 1, "nothing to read"),
    ("latest, no segment", ["latest", "{hollow}"], 1, "nothing to read"),
    ("recover, no segment", ["recover", "{hollow}", "{new}"], 1, "nothing to read"),
    ("retention, no segment", ["retention", "{hollow}", "--retention-ms", "1"], 1,
     "nothing to read"),
    ("compact, no segment", ["compact", "{hollow}", "{new}"], 1, "nothing to read"),
    # topic configs Kafka's LogConfig refuses
    ("retention --retention-ms -5", ["retention", "{data}", "--retention-ms", "-5"], 2,
     "out of range"),
    ("retention --retention-ms -2", ["retention", "{data}", "--retention-ms", "-2"], 2,
     "out of range"),
    ("retention --retention-ms > int64", ["retention", "{data}", "--retention-ms", BIG], 2,
     "out of range"),
    ("retention --retention-bytes > int64", ["retention", "{data}", "--retention-bytes", BIG],
     2, "out of range"),
    ("compact --segment-bytes 0", ["compact", "{data}", "{new}", "--segment-bytes", "0"], 2,
     "out of range"),
    ("compact --segment-bytes 13", ["compact", "{data}", "{new}", "--segment-bytes", "13"], 2,
     "out of range"),
    ("compact --segment-bytes > int32", ["compact", "{data}", "{new}", "--segment-bytes",
                                         str(1 << 31)], 2, "out of range"),
    ("compact --max-compaction-lag-ms 0", ["compact", "{data}", "{new}",
                                           "--min-cleanable-dirty-ratio", "0.5",
                                           "--max-compaction-lag-ms", "0"], 2, "out of range"),
    ("recover --index-interval-bytes > int32", ["recover", "{data}", "{new}",
                                                "--index-interval-bytes", str(1 << 31)], 2,
     "out of range"),
    # storage options are for URLs, and never echo a value
    ("--storage-option with a local path", ["verify", "{data}", "--storage-option",
                                            "secret=hunter2"], 2, "is for URLs"),
    ("--private-key without PEM armour", ["verify", "s3://bucket/x", "--layout", "tiered",
                                          "--private-key", "hunter2"], 2, "not shown"),
]
# cases whose one line is on stdout (a report) and stderr stays empty
REPORTS = {"verify a copy without its .log files", "stats a copy without its .log files",
           "verify an empty partition directory", "stats an empty partition directory"}
SECRETS = {"--storage-option with a local path": "hunter2",
           "--private-key without PEM armour": "hunter2"}

NO_PYSPARK = {"main without pyspark"}


def _places(root: Path) -> dict:
    import kbatch

    data = root / "parent" / "data"
    partition = data / "orders-0"
    kbatch.write_log(partition, [(b"k%d" % i, b"v" * 50, 1_700_000_000_000 + i)
                                 for i in range(200)], batch_records=20)
    segment = partition / "00000000000000000000.log"
    corrupt = root / "corrupt.log"
    raw = bytearray(segment.read_bytes())
    raw[70] ^= 0xFF                  # inside the first batch's records: its CRC fails
    corrupt.write_bytes(bytes(raw))
    text = root / "notes.txt"
    text.write_text("these are my notes, not a Kafka segment\n" * 20)
    fifo = root / "fifo"
    os.mkfifo(fifo)
    empty = root / "empty"
    empty.mkdir()
    twins = root / "twins"
    for name in ("t-1", "t-01"):
        kbatch.write_log(twins / name, [(b"k", b"v", 1)])
    # a pyspark that cannot be imported, first on the path (the "no extra" case)
    fake = root / "no-pyspark" / "pyspark"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'pyspark'\")\n")
    # side files beside a segment, a checkpoint file, a copy without its logs
    (partition / "00000000000000000000.txnindex").write_bytes(b"")
    (partition / "00000000000000000200.snapshot").write_bytes(b"\0" * 10)
    (data / "replication-offset-checkpoint").write_text("0\n1\norders 0 200\n")
    gutted = root / "gutted"
    shutil.copytree(data, gutted)
    for f in gutted.glob("*/*.log"):
        f.unlink()
    hollow = root / "hollow" / "events-3"
    hollow.mkdir(parents=True)
    return {"data": data, "parent": data.parent, "partition": partition, "segment": segment,
            "corrupt": corrupt, "text": text, "fifo": fifo, "empty": empty, "twins": twins,
            "missing": root / "nope" / "00000000000000000000.log", "new": root / "new-sample",
            "index": partition / "00000000000000000000.index",
            "timeindex": partition / "00000000000000000000.timeindex",
            "txnindex": partition / "00000000000000000000.txnindex",
            "snapshot": partition / "00000000000000000200.snapshot",
            "checkpoint": data / "replication-offset-checkpoint",
            "typo": data / "orders-O", "typo_segment": partition / "0000000000000000000.log",
            "missing_snapshot": partition / "00000000000000000999.snapshot",
            "gutted": gutted, "hollow": hollow.parent, "root": root}


def run_case(places: dict, case, cwd: Path) -> subprocess.CompletedProcess:
    name, argv, _, _ = case
    args = [a.format(**{k: str(v) for k, v in places.items()}) for a in argv]
    env = dict(os.environ)
    path = [str(ROOT)]
    if name in NO_PYSPARK:
        path.insert(0, str(places["root"] / "no-pyspark"))
    env["PYTHONPATH"] = os.pathsep.join(path + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("LOG_DIR", None)
    return subprocess.run([sys.executable, "-m", "kbatch.tools.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    return _places(tmp_path_factory.mktemp("bad-inputs"))


def test_at_least_thirty_cases():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_the_exit_status(places, case, tmp_path):
    name, _, code, words = case
    proc = run_case(places, case, cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    if name in SECRETS:
        assert SECRETS[name] not in proc.stderr + proc.stdout
    if name in REPORTS:     # a report on stdout: never "ok", never a Python None
        assert proc.stderr == "" and "None" not in proc.stdout, proc.stdout
        assert ": ok" not in proc.stdout.splitlines()[-1], proc.stdout
        return
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kbatch"), lines[0]
    assert words in lines[0], lines[0]
    if code == 2 and proc.stdout:
        pytest.fail(f"usage error wrote to stdout: {proc.stdout[:200]}")
    # nothing written into the working directory (main: no sample before it fails)
    assert list(tmp_path.iterdir()) == []
    assert not places["new"].exists()


def test_debug_shows_the_traceback(places, tmp_path):
    proc = run_case(places, ("debug", ["--debug", "stats", "{parent}"], 1, ""), cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "did you mean" in proc.stderr


def test_version(tmp_path):
    from kbatch import __version__
    proc = run_case({}, ("version", ["--version"], 0, ""), cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"kbatch {__version__}"


def test_a_bug_is_one_line_too(monkeypatch, capfd):
    """An unexpected exception inside a command (a bug) is one line naming
    it, with --debug for the traceback; --debug re-raises."""
    import kbatch.tools.cli

    def boom(args):
        raise RuntimeError("something unexpected\nsecond line")

    parser = kbatch.tools.cli.build_parser()
    monkeypatch.setattr(kbatch.tools.cli, "cmd_txn", boom)
    monkeypatch.setattr(kbatch.tools.cli, "build_parser", lambda: _with_func(parser, "txn", boom))
    assert kbatch.tools.cli.main(["txn", "x"]) == 1
    err = capfd.readouterr().err
    assert err == ("kbatch txn: internal error: RuntimeError: something unexpected "
                   "(run with --debug for the traceback)\n")
    with pytest.raises(RuntimeError):
        kbatch.tools.cli.main(["--debug", "txn", "x"])


def _with_func(parser, command, func):
    import argparse
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub.choices[command].set_defaults(func=func)
    return parser


def table() -> str:
    """The cases as a markdown table: arguments, exit status, first line."""
    rows = ["| # | case | arguments | exit | first line of output |", "|---|---|---|---:|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        places = _places(root / "p")
        cwd = root / "cwd"
        cwd.mkdir()
        for i, case in enumerate(CASES, 1):
            proc = run_case(places, case, cwd=cwd)
            first = (proc.stderr or proc.stdout).splitlines()[:1]
            line = first[0] if first else ""
            shown = [a if len(a) < 40 else a[:12] + "..." for a in case[1]]
            line = line.replace(str(places["root"]), "$T").replace("|", "\\|")
            line = line if len(line) <= 150 else line[:100] + " ... " + line[-40:]
            rows.append(f"| {i} | {case[0]} | `kbatch {' '.join(shown)}` | {proc.returncode} "
                        f"| {line} |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(table())


def test_txn_says_a_torn_inner_segment_and_exits_1(tmp_path, capfd):
    """A partition whose first segment (not its last) lost its last 7 bytes:
    a read raises there, stats and verify exit 1; txn printed its report and
    exited 0. A partition that is not __transaction_state is not read as
    one (it was, raising CRC errors that --no-crc did not silence)."""
    from kbatch.tools.cli import main
    from tests.kafka_ref import build_batch
    part = tmp_path / "data" / "t-0"
    part.mkdir(parents=True)
    first = b"".join(build_batch([(1000, b"k", b"v%d" % i, [])], base_offset=i) for i in range(5))
    (part / "00000000000000000000.log").write_bytes(first[:-7])
    (part / "00000000000000000005.log").write_bytes(build_batch([(1000, b"k", b"v", [])],
                                                                base_offset=5))
    [report] = kbatch.transactions(part)        # the API says so too
    assert len(report.damage) == 1 and "00000000000000000000.log" in report.damage[0]
    for target in (tmp_path / "data", part):
        assert main(["txn", str(target)]) == 1
        err = capfd.readouterr().err
        assert "00000000000000000000.log" in err and "not its partition's last" in err
    bad = tmp_path / "crc" / "t-0"
    bad.mkdir(parents=True)
    seg = bytearray(build_batch([(1000, b"k", b"v", [])], base_offset=0))
    seg[-1] ^= 0xFF
    (bad / "00000000000000000000.log").write_bytes(bytes(seg))
    assert main(["txn", "--no-crc", str(bad)]) == 0
    assert "CRC" not in capfd.readouterr().err


READERS = [["verify"], ["stats"], ["stats", "--level", "batches"], ["txn"], ["latest"],
           ["recover", "{dest}"], ["retention", "--retention-ms", "1"], ["compact", "{dest}"]]


@pytest.mark.parametrize("argv", READERS, ids=[" ".join(a[:3]) for a in READERS])
def test_one_exit_status_for_an_empty_partition_and_for_no_segment(tmp_path, argv):
    """The same directory, the same exit status from every command that
    reads it: a partition holding one empty segment (what a broker creates
    for a new partition) is an empty partition, exit 0; a partition
    directory without any segment file, alone or as all a data directory
    holds, is nothing to read, exit 1, with one line on stderr (verify and
    stats say it in their report). Before, stats --level batches, txn,
    latest and recover exited 0 there, and retention and compact exited 1
    without a word."""
    empty = tmp_path / "empty" / "t-0"
    empty.mkdir(parents=True)
    (empty / "00000000000000000000.log").write_bytes(b"")
    bare = tmp_path / "bare" / "t-0"
    bare.mkdir(parents=True)
    cases = [(empty, 0), (empty.parent, 0), (bare, 1), (bare.parent, 1)]
    for i, (target, code) in enumerate(cases):
        dest = tmp_path / f"dest{i}"
        args = [a.format(dest=dest) for a in argv]
        proc = run_case({}, ("", [args[0], str(target), *args[1:]], code, ""), cwd=tmp_path)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == code, (target, proc.returncode, proc.stdout, proc.stderr)
        assert "None" not in proc.stdout, proc.stdout
        if code == 1:
            assert not dest.exists()             # nothing written for nothing to read
            if argv[0] in ("verify", "stats") and len(argv) == 1:
                assert proc.stderr == "" and "no segment files" in proc.stdout
            else:
                [line] = proc.stderr.splitlines()
                assert line.startswith(f"kbatch {argv[0]}: ") and "nothing to read" in line
