"""The ``kbatch`` command: dump, stats, verify, txn.

Outputs are parsed here and compared with the decoded Records, with
EXPECTED.jsonl (the independent decoder) and with the raw bytes of the
files (batch headers and index entries read with struct).
"""

import argparse
import base64
import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import pytest

import kbatch
import kbatch.tools.cli

from .conftest import CORPUS, ROOT, needs_corpus
from .digest import digest
from .kafka_ref import ABORT, COMMIT, build_batch, control_batch

DATA_DIR = CORPUS / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs"
BAD_CRC = CORPUS / "kafka-rust__kafka-rust" / "test-data" / "carved" / \
    "fetch2.mytopic.nocompression.invalid_crc.kafka.0900.my-topic-0.records"
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _expected():
    path = CORPUS / "EXPECTED.jsonl"
    if not path.exists():
        return {}
    return {e["path"]: e for e in map(json.loads, path.read_text().splitlines())}


EXPECTED = _expected()


def run(argv, capfd):
    """``(exit status, stdout, stderr)`` of ``kbatch.tools.cli.main(argv)``."""
    capfd.readouterr()
    try:
        code = kbatch.tools.cli.main([str(a) for a in argv])
    except SystemExit as exc:        # argparse: --help, usage errors
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, err


def _subcommands():
    parser = kbatch.tools.cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


# --- usage -------------------------------------------------------------------

def test_help(capfd):
    code, out, _ = run(["--help"], capfd)
    assert code == 0
    for name in ("dump", "stats", "verify", "txn"):
        assert name in out


@pytest.mark.parametrize("command", sorted(set(_subcommands()) | {"dump", "stats", "verify", "txn"}))
def test_help_of_every_subcommand(capfd, command):
    code, out, _ = run([command, "--help"], capfd)
    assert code == 0
    assert out.startswith("usage:") and command in out.splitlines()[0]


def test_help_in_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "kbatch.tools.cli", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "dump" in proc.stdout and "verify" in proc.stdout


@pytest.mark.parametrize("argv", [
    [],
    ["frobnicate"],
    ["dump"],
    ["dump", "--bogus", str(BAD_CRC)],
    ["stats"],
    ["stats", "--format", "xml", str(DATA_DIR)],
    ["verify", str(DATA_DIR), "extra"],
    ["verify", "--format"],
    ["txn", "--no-such-option", str(DATA_DIR)],
    ["dump", "--max-bytes", "many", str(BAD_CRC)],
])
def test_usage_errors_exit_2(capfd, argv):
    code, out, err = run(argv, capfd)
    assert code == 2
    assert err


@pytest.mark.parametrize("command", ["dump", "stats", "verify", "txn"])
def test_missing_path_exits_2(capfd, tmp_path, command):
    missing = tmp_path / "nope" / "00000000000000000000.log"
    code, out, err = run([command, missing], capfd)
    assert code == 2
    assert "nope" in err


@needs_corpus
def test_dump_of_a_directory_is_a_usage_error(capfd):
    code, _, err = run(["dump", DATA_DIR / "invoice-0"], capfd)
    assert code == 2 and err


# --- dump: text ------------------------------------------------------------------

DUMP_FILES = [
    "segmentio__kafka-go/fixtures/carved/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex.test-88-0.records",
    "segmentio__kafka-go/fixtures/carved/v2bc-v1-v1c.hex.test-hardy-0.records",
    "kafka-rust__kafka-rust/test-data/carved/fetch1.mytopic.1p.gzip.kafka.0821.my-topic-0.records",
    "kafka-rust__kafka-rust/test-data/carved/fetch1.mytopic.1p.snappy.kafka.0822.my-topic-0.records",
    "seanorth__kafka-server/kafka-logs/some-topic-0/00000000000000000000.log",
    "Sotatek-MinhVu3__demo/data/kafka/get_user-0/00000000000000000000.log",
    "mscaldas2012__kafka-connect-spooldir/kafka-data/"
    "_confluent-controlcenter-5-1-2-1-monitoring-message-rekey-0/00000000000000000000.log",
    "taha-hachidi__LogFile/kafka-data/data/bootstrap.checkpoint",
    "xpxwo100__bullShit/tmp/kafka-logs/topic1-0/00000000000000000000.log",
    "asayers__kafkalite/tests/test-data/fs-data/hamlet-gzip-0/00000000000000000000.log",
]

_FIELD = re.compile(r"(\w+): (\S+)")
_RECORD = re.compile(r"^\| offset: (-?\d+) (CreateTime|LogAppendTime|NoTimestampType): (-?\d+)"
                     r" keySize: (-?\d+) valueSize: (-?\d+)(.*)$", re.S)


def raw_batches(data: bytes):
    """Header fields of every top-level batch/message, read with struct."""
    out, pos = [], 0
    while pos + 17 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length <= 0 or end > len(data):
            break
        magic = data[pos + 16]
        if magic == 2:
            crc, = struct.unpack_from(">I", data, pos + 17)
            last_delta, = struct.unpack_from(">i", data, pos + 23)
            count, = struct.unpack_from(">i", data, pos + 57)
            valid = crc == crc32c.crc32c(data[pos + 21:end])
            out.append(dict(position=pos, size=end - pos, magic=2, base=base,
                            last=base + last_delta, count=count, crc=crc, valid=valid))
        else:
            crc, = struct.unpack_from(">I", data, pos + 12)
            out.append(dict(position=pos, size=end - pos, magic=magic, base=None, last=base,
                            count=None, crc=crc, valid=crc == zlib.crc32(data[pos + 16:end])))
        pos = end
    return out


CONTROL_LINE = re.compile(r" (endTxnMarker: |controlType: |LeaderChange: |SnapshotHeader |"
                          r"SnapshotFooter |KRaftVersion |KRaftVoters )")


def parse_dump_text(out: str):
    lines = out.split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    batches, records, control, other = [], [], [], []
    for line in lines[2:]:
        if line.startswith("| offset: "):
            if CONTROL_LINE.search(line):
                control.append(line)
            else:
                records.append((len(batches) - 1, line))
        elif line.startswith("baseOffset: ") or line.startswith("offset: "):
            batches.append(dict(_FIELD.findall(line.split(" payload: ")[0])))
        else:
            other.append(line)
    return lines[:2], batches, records, control, other


# binary keys/values (newlines among them): compared without the data
NO_DATA_FILES = [
    "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-17/00000000000000000001.log",
    "dipendrasaini__kafka-learnning-series/tmp/kafka-logs/invoice-3/00000000000000030636.log",
    "apache__kafka/core/data/kafka-2167572160391180112/__cluster_metadata-0/00000000000000000000.log",
    "xpxwo100__bullShit/tmp/kafka-logs/__consumer_offsets-40/00000000000000000000.log",
    "hermag__kafkademo/kafka/data/test-0/00000000000000000000.log",
    "ronem123__rupia-transaction-service/kafka-logs/__cluster_metadata-0/00000000000001725413.log",
]
TEXT_CASES = [(p, False) for p in DUMP_FILES] + [(p, True) for p in NO_DATA_FILES]


@needs_corpus
@pytest.mark.parametrize("rel,no_data", TEXT_CASES,
                         ids=[p.split("/")[-2][:40] + ("-nodata" if n else "") for p, n in TEXT_CASES])
def test_dump_text_agrees_with_the_records(capfd, rel, no_data):
    path = CORPUS / rel
    entry = EXPECTED[rel]
    records = kbatch.read_segment(path)
    keys, values = records.key.to_pylist(), records.value.to_pylist()
    headers = records.headers.to_pylist()
    if not no_data:
        assert not any(b"\n" in v for v in keys + values if v), "pick a file without newlines"
    code, out, err = run(["dump", path] + (["--no-data"] if no_data else []), capfd)
    assert code == 0, err
    head, batches, lines, control, other = parse_dump_text(out)
    stem = path.name.split(".")[0]
    start = int(stem) if len(stem) == 20 and stem.isdigit() else 0
    assert head == [f"Dumping {path}", f"Log starting offset: {start}"]
    assert other == []
    # batch lines: the headers of the file (struct) and the batch table
    raw = raw_batches(path.read_bytes())
    bt = records.batches
    assert len(batches) == len(raw) == len(bt) == entry["batches"]
    for i, (b, r) in enumerate(zip(batches, raw)):
        assert int(b["position"]) == r["position"] == int(bt.position[i])
        assert int(b["size"]) == r["size"] == int(bt.size[i])
        assert int(b["crc"]) == r["crc"] == int(bt.crc[i])
        assert int(b["magic"]) == r["magic"] == int(bt.magic[i])
        assert b["isvalid"] == "true" and r["valid"]
        assert b["compresscodec"] == CODEC_NAMES[int(bt.codec[i])]
        if r["magic"] == 2:
            assert int(b["baseOffset"]) == r["base"] == int(bt.base_offset[i])
            assert int(b["lastOffset"]) == r["last"] == int(bt.last_offset[i])
            assert int(b["count"]) == r["count"] == int(bt.records_count[i])
            assert int(b["producerId"]) == int(bt.producer_id[i])
        else:
            assert int(b["offset"]) == r["last"] == int(bt.last_offset[i])
    # record lines: one per data record, in order, under their batch
    assert len(lines) == len(records) == entry["records"]
    assert len(control) == len(records.control) == entry["control"]
    for i, (batch_index, line) in enumerate(lines):
        m = _RECORD.match(line)
        assert m, line
        offset, tname, ts, ksize, vsize, rest = m.groups()
        assert int(offset) == records.offset[i]
        assert batch_index == records.batch[i]
        assert int(ts) == records.timestamp[i]
        assert tname == {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[
            int(records.timestamp_type[i])]
        assert int(ksize) == (-1 if keys[i] is None else len(keys[i]))
        assert int(vsize) == (-1 if values[i] is None else len(values[i]))
        tail = ""
        if keys[i] is not None:
            tail += " key: " + keys[i].decode("utf-8", "replace")
        if values[i] is not None:
            tail += " payload: " + values[i].decode("utf-8", "replace")
        if no_data:
            assert " key: " not in rest and " payload: " not in rest
        else:
            assert rest.endswith(tail), (rest, tail)
        if records.batches.magic[records.batch[i]] == 2:
            assert f" headerKeys: [{','.join(k for k, _ in headers[i])}]" in rest
    if entry["records"]:
        assert int(_RECORD.match(lines[0][1]).group(1)) == entry["first_offset"]
        assert int(_RECORD.match(lines[-1][1]).group(1)) == entry["last_offset"]


@needs_corpus
def test_dump_max_bytes_stops_at_the_last_whole_batch(capfd):
    rel = DUMP_FILES[0]
    path = CORPUS / rel
    raw = raw_batches(path.read_bytes())
    ends = [r["position"] + r["size"] for r in raw]
    for limit in (0, 1, ends[0] - 1, ends[0], ends[0] + 1, ends[3] + 20, ends[-1], ends[-1] + 99):
        code, out, err = run(["dump", "--no-data", "--max-bytes", limit, path], capfd)
        assert code == 0, err
        _, batches, lines, _, other = parse_dump_text(out)
        whole = [r for r, e in zip(raw, ends) if e <= limit]
        assert [int(b["position"]) for b in batches] == [r["position"] for r in whole], limit
        assert other == []


@needs_corpus
def test_dump_negative_max_bytes_is_a_usage_error(capfd):
    code, out, _ = run(["dump", "--no-data", "--max-bytes", "-5", CORPUS / DUMP_FILES[0]], capfd)
    assert code == 2


@needs_corpus
def test_dump_several_files(capfd):
    paths = [CORPUS / DUMP_FILES[1], DATA_DIR / "invoice-2" / "00000000000000030587.index",
             CORPUS / DUMP_FILES[8]]
    code, out, _ = run(["dump", "--no-data", *paths], capfd)
    assert code == 0
    assert [x for x in out.splitlines() if x.startswith("Dumping ")] == \
        [f"Dumping {p}" for p in paths]


@needs_corpus
def test_dump_text_no_data_and_control_lines(capfd):
    rel = "taha-hachidi__LogFile/kafka-data/data/bootstrap.checkpoint"
    path = CORPUS / rel
    code, out, _ = run(["dump", "--no-data", path], capfd)
    assert code == 0
    _, batches, lines, control, _ = parse_dump_text(out)
    assert len(lines) == EXPECTED[rel]["records"]
    assert len(control) == EXPECTED[rel]["control"]
    assert all(" payload: " not in line and " key: " not in line for _, line in lines)
    # a KRaft bootstrap snapshot: a header and a footer, decoded as the dump tool does
    assert " SnapshotHeader {" in control[0] and '"last_contained_log_timestamp"' in control[0]
    assert control[-1].endswith(' SnapshotFooter {"version": 0}')


@needs_corpus
def test_dump_of_a_truncated_copy_reports_the_invalid_bytes(capfd, tmp_path):
    src = DATA_DIR / "invoice-1" / "00000000000000060492.log"
    data = src.read_bytes()
    raw = raw_batches(data)
    cut = raw[-1]["position"] + 30
    path = tmp_path / src.name
    path.write_bytes(data[:cut])
    code, out, _ = run(["dump", "--no-data", path], capfd)
    assert code == 0
    _, batches, _, _, other = parse_dump_text(out)
    assert len(batches) == len(raw) - 1
    assert other == [f"Found 30 invalid bytes at the end of {path.name}"]


@needs_corpus
def test_dump_of_the_bad_crc_file_exits_1(capfd):
    code, out, err = run(["dump", BAD_CRC], capfd)
    assert code == 1
    assert "CRC" in err or "crc" in err
    code, out, err = run(["dump", "--no-crc", BAD_CRC], capfd)
    assert code == 0
    _, batches, lines, _, _ = parse_dump_text(out)
    assert [b["isvalid"] for b in batches] in (["false"], ["true"])
    assert len(lines) == 1


# --- dump: JSON -----------------------------------------------------------------------

JSON_FILES = DUMP_FILES + [
    "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-17/00000000000000000000.log",
    "apache__kafka/core/data/kafka-2167572160391180112/__cluster_metadata-0/00000000000000000000.log",
    "macsakini__KafkaCluster/kafka/data/test-0/00000000000000000000.log",
    "dipendrasaini__kafka-learnning-series/tmp/kafka-logs/invoice-3/00000000000000030636.log",
]


def _from_json(value, decoded: bool):
    if value is None:
        return None
    if decoded:
        if isinstance(value, dict):
            assert list(value) == ["base64"]
            return base64.b64decode(value["base64"])
        return value.encode("utf-8")
    return base64.b64decode(value)


@needs_corpus
@pytest.mark.parametrize("decode", [None, "utf8"])
@pytest.mark.parametrize("rel", JSON_FILES, ids=[p.split("/")[-2][:40] for p in JSON_FILES])
def test_dump_json_round_trips(capfd, rel, decode):
    path = CORPUS / rel
    entry = EXPECTED[rel]
    records = kbatch.read_segment(path)
    argv = ["dump", "--format", "json", path] + (["--decode", decode] if decode else [])
    code, out, err = run(argv, capfd)
    assert code == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    kinds = [o["type"] for o in objs]
    assert kinds[-1] == "end" and kinds.count("end") == 1
    rows = []
    for o in objs:
        if o["type"] == "record":
            rows.append((o["offset"], o["timestamp"], o["timestamp_type"],
                         _from_json(o["key"], decode is not None),
                         _from_json(o["value"], decode is not None),
                         [(h["key"], _from_json(h["value"], decode is not None))
                          for h in o["headers"]]))
    assert len(rows) == entry["records"]
    assert digest(rows) == entry["digest"]             # the independent decoder's digest
    assert rows == [tuple(r) for r in records]
    assert kinds.count("control") == entry["control"]
    batch_objs = [o for o in objs if o["type"] == "batch"]
    assert len(batch_objs) == entry["batches"]
    raw = raw_batches(path.read_bytes())
    bt = records.batches
    for i, o in enumerate(batch_objs):
        assert o["file"] == str(path)
        for name in bt.columns:
            if name == "codec":     # by name, as stats --format json names codecs
                assert o[name] == CODEC_NAMES[bt[name][i].item()]
            elif name != "source":
                assert o[name] == bt[name][i].item(), name
        assert (o["position"], o["size"], o["crc"], o["magic"]) == \
            (raw[i]["position"], raw[i]["size"], raw[i]["crc"], raw[i]["magic"])
    # every record follows its batch
    current = None
    for o in objs:
        if o["type"] == "batch":
            current = o
        elif o["type"] in ("record", "control"):
            assert current["base_offset"] <= o["offset"] <= current["last_offset"]
    end = objs[-1]
    assert end["valid_bytes"] == entry["valid_bytes"]
    assert end["trailing_bytes"] == entry["size"] - entry["valid_bytes"]


@needs_corpus
def test_dump_json_decode_utf8_keeps_text_and_falls_back_to_base64(capfd):
    """Text where the bytes are UTF-8, ``{"base64": ...}`` where they are not."""
    rel = "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-17/00000000000000000000.log"
    records = kbatch.read_segment(CORPUS / rel)
    code, out, _ = run(["dump", "--format", "json", "--decode", "utf8", CORPUS / rel], capfd)
    assert code == 0
    recs = [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]
    seen = set()
    for o, key, value in zip(recs, records.key.to_pylist(), records.value.to_pylist()):
        for shown, raw in ((o["key"], key), (o["value"], value)):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                assert shown == {"base64": base64.b64encode(raw).decode("ascii")}
                seen.add("base64")
            else:
                assert shown == text
                seen.add("text")
    assert seen == {"base64", "text"}


# --- dump: index files ----------------------------------------------------------------

def index_entries(path, fmt, base):
    """Live entries of an index file (SPEC 4: stop at the zero tail)."""
    raw = path.read_bytes()
    size = struct.calcsize(fmt)
    out = []
    for k in range(len(raw) // size):
        a, b = struct.unpack_from(fmt, raw, k * size)
        rel, other = (a, b) if fmt == ">ii" else (b, a)
        if k > 0 and rel == 0 and other == 0:
            break
        out.append((rel + base, other))
    return out


INDEX_FILES = sorted(str(p.relative_to(CORPUS)) for p in DATA_DIR.glob("*/*index")) \
    if DATA_DIR.is_dir() else []


@needs_corpus
@pytest.mark.parametrize("rel", INDEX_FILES)
def test_dump_index_files(capfd, rel):
    path = CORPUS / rel
    base = int(path.stem)
    code, out, err = run(["dump", path], capfd)
    assert code == 0, err
    lines = out.split("\n")[:-1]
    assert lines[0] == f"Dumping {path}"
    if path.suffix == ".index":
        want = [f"offset: {o} position: {p}" for o, p in index_entries(path, ">ii", base)]
    else:
        want = [f"timestamp: {t} offset: {o}" for o, t in index_entries(path, ">qi", base)]
    assert lines[1:] == (want or [f"{path} is empty."])
    code, out, _ = run(["dump", "--format", "json", path], capfd)
    assert code == 0
    objs = [json.loads(x) for x in out.splitlines()]
    if path.suffix == ".index":
        assert [(o["offset"], o["position"]) for o in objs] == index_entries(path, ">ii", base)
    else:
        assert [(o["offset"], o["timestamp"]) for o in objs] == index_entries(path, ">qi", base)
    assert all(o["type"] == path.suffix[1:] for o in objs)


@needs_corpus
def test_dump_index_with_a_preallocated_tail(capfd, tmp_path):
    src = DATA_DIR / "invoice-2" / "00000000000000030587.index"
    path = tmp_path / src.name
    path.write_bytes(src.read_bytes() + bytes(8 * 500))
    _, plain, _ = run(["dump", src], capfd)
    code, out, _ = run(["dump", path], capfd)
    assert code == 0
    assert out.split("\n")[1:] == plain.split("\n")[1:]
    assert len(out.split("\n")) == 2 + len(index_entries(src, ">ii", 30587))


def test_dump_txnindex(capfd, tmp_path):
    entries = [(0, 1001, 5, 9, 5), (0, 1002, 12, 30, 12), (0, 1 << 40, 100, 101, 99)]
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(b"".join(struct.pack(">hqqqq", *e) for e in entries))
    code, out, _ = run(["dump", path], capfd)
    assert code == 0
    assert out.split("\n")[1:-1] == [
        f"version: {v} producerId: {p} firstOffset: {f} lastOffset: {l} lastStableOffset: {s}"
        for v, p, f, l, s in entries]


# --- stats ---------------------------------------------------------------------------

STATS_DIRS = [
    DATA_DIR,
    CORPUS / "xpxwo100__bullShit" / "tmp" / "kafka-logs",
    CORPUS / "asayers__kafkalite" / "tests" / "test-data" / "fs-data",
    CORPUS / "mscaldas2012__kafka-connect-spooldir" / "kafka-data",
]


def _expected_by_partition(root: Path):
    out = {}
    for part in sorted(p for p in root.iterdir() if p.is_dir()):
        topic, _, number = part.name.rpartition("-")
        if not number.isdigit() or part.name.endswith(("-delete", "-future", "-stray")):
            continue
        segs = sorted(p for p in part.iterdir() if re.fullmatch(r"\d{20}\.log", p.name))
        entries = [EXPECTED.get(str(s.relative_to(CORPUS))) for s in segs]
        for s, e in zip(segs, entries):
            assert e is not None or s.stat().st_size == 0, s
        entries = [e for e in entries if e]
        out[(topic, int(number))] = (segs, entries)
    return out


@needs_corpus
@pytest.mark.parametrize("root", STATS_DIRS, ids=lambda p: p.parts[-3] if len(p.parts) > 3 else str(p))
def test_stats_json_counts(capfd, root):
    want = _expected_by_partition(root)
    code, out, err = run(["stats", "--format", "json", root], capfd)
    assert code == 0, err
    objs = [json.loads(x) for x in out.splitlines()]
    total = objs[-1]["total"]
    parts = {(o["topic"], o["partition"]): o for o in objs[:-1]}
    assert set(parts) == {k for k, (segs, _) in want.items() if segs}
    for key, o in parts.items():
        segs, entries = want[key]
        assert o["records"] == sum(e["records"] for e in entries), key
        assert o["batches"] == sum(e["batches"] for e in entries), key
        assert o["control_records"] == sum(e["control"] for e in entries), key
        firsts = [e["first_offset"] for e in entries if "first_offset" in e]
        lasts = [e["last_offset"] for e in entries if "last_offset" in e]
        assert o["first_offset"] == (min(firsts) if firsts else None), key
        assert o["last_offset"] == (max(lasts) if lasts else None), key
        assert o["bytes"] == sum(s.stat().st_size for s in segs)
        assert o["codecs"] == sorted({CODEC_NAMES[c] for e in entries for c in e["codecs"]})
        assert [s["file"] for s in o["segments"]] == [str(s) for s in segs]
        by_path = {str(CORPUS / e["path"]): e for e in entries}
        for s in o["segments"]:
            e = by_path.get(s["file"])
            if e is None:
                assert s["records"] == 0 and s["batches"] == 0
                continue
            assert s["records"] == e["records"] and s["batches"] == e["batches"]
            assert s["magics"] == e["magics"]
            assert s["valid_bytes"] == e["valid_bytes"]
    all_entries = [e for _, entries in want.values() for e in entries]
    assert total["records"] == sum(e["records"] for e in all_entries)
    assert total["batches"] == sum(e["batches"] for e in all_entries)
    assert total["control_records"] == sum(e["control"] for e in all_entries)
    assert total["segments"] == sum(len(segs) for segs, _ in want.values())


_PART_LINE = re.compile(r"^(\S+): (\d+) records in (\d+) batches, (\d+) control, "
                        r"offsets (\S+?)(?:\.\.(\S+))?, ")
_TOTAL_LINE = re.compile(r"^total: (\d+) records, (\d+) batches, (\d+) control, (\d+) bytes "
                         r"in (\d+) segments of (\d+) partitions$")


@needs_corpus
@pytest.mark.parametrize("root", STATS_DIRS[:3], ids=lambda p: p.parts[-3])
def test_stats_text_counts(capfd, root):
    want = _expected_by_partition(root)
    code, out, err = run(["stats", root], capfd)
    assert code == 0, err
    lines = out.splitlines()
    parts = {}
    for line in lines:
        m = _PART_LINE.match(line)
        if m:
            parts[m.group(1)] = tuple(int(x) for x in m.groups()[1:4]) + m.groups()[4:]
    expect = {}
    for (topic, n), (segs, entries) in want.items():
        if not segs:
            continue
        firsts = [e["first_offset"] for e in entries if "first_offset" in e]
        lasts = [e["last_offset"] for e in entries if "last_offset" in e]
        expect[f"{topic}-{n}"] = (sum(e["records"] for e in entries),
                                  sum(e["batches"] for e in entries),
                                  sum(e["control"] for e in entries),
                                  str(min(firsts)) if firsts else "-",   # never None..None
                                  str(max(lasts)) if lasts else None)
    assert parts == expect
    m = _TOTAL_LINE.match(lines[-1])
    assert m, lines[-1]
    all_entries = [e for _, entries in want.values() for e in entries]
    assert int(m.group(1)) == sum(e["records"] for e in all_entries)
    assert int(m.group(2)) == sum(e["batches"] for e in all_entries)
    assert int(m.group(3)) == sum(e["control"] for e in all_entries)
    assert int(m.group(4)) == sum(s.stat().st_size for segs, _ in want.values() for s in segs)
    assert int(m.group(6)) == len(expect)


@needs_corpus
def test_stats_of_one_file(capfd):
    rel = "segmentio__kafka-go/fixtures/carved/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex.test-88-0.records"
    e = EXPECTED[rel]
    code, out, _ = run(["stats", "--format", "json", CORPUS / rel], capfd)
    assert code == 0
    objs = [json.loads(x) for x in out.splitlines()]
    [seg] = objs[0]["segments"]
    assert (seg["records"], seg["batches"], seg["first_offset"], seg["last_offset"]) == \
        (e["records"], e["batches"], e["first_offset"], e["last_offset"])
    assert seg["magics"] == e["magics"]
    assert seg["codecs"] == [CODEC_NAMES[c] for c in e["codecs"]]


def _when(ms):
    import datetime
    return (datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)) \
        .strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_stats_text_time_range(capfd, tmp_path):
    part = tmp_path / "times-0"
    part.mkdir()
    stamps = [1_600_000_000_123, 1_500_000_000_000, 1_700_000_000_999]
    (part / "00000000000000000000.log").write_bytes(
        build_batch([(t, None, b"v", []) for t in stamps], base_offset=0))
    code, out, _ = run(["stats", part], capfd)
    assert code == 0
    first = out.splitlines()[0]
    assert f"{_when(min(stamps))} .. {_when(max(stamps))}" in first


def test_stats_text_with_a_timestamp_after_year_9999(capfd, tmp_path):
    part = tmp_path / "future-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        build_batch([(1 << 50, None, b"far", [])], base_offset=0))
    code, out, _ = run(["stats", part], capfd)
    assert code == 0
    assert "1 records" in out


@needs_corpus
def test_stats_of_the_bad_crc_file(capfd):
    code, _, err = run(["stats", BAD_CRC], capfd)
    assert code == 1 and err
    code, out, _ = run(["stats", "--no-crc", "--format", "json", BAD_CRC], capfd)
    assert code == 0
    assert json.loads(out.splitlines()[-1])["total"]["records"] == 1


# --- verify ---------------------------------------------------------------------------

@needs_corpus
def test_verify_good_partition_exits_0(capfd):
    part = DATA_DIR / "invoice-1"
    code, out, err = run(["verify", part], capfd)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[-1].endswith(": ok")
    assert sum(1 for x in lines if ": ok: " in x) == 4
    code, out, _ = run(["verify", "--format", "json", part], capfd)
    assert code == 0
    objs = [json.loads(x) for x in out.splitlines()]
    assert [o["ok"] for o in objs] == [True] * 4
    for o in objs:
        e = EXPECTED[str(Path(o["file"]).relative_to(CORPUS))]
        assert o["records"] == e["records"] and o["batches"] == e["batches"]
        assert o["valid_bytes"] == e["valid_bytes"] and o["problems"] == []


@needs_corpus
def test_verify_whole_data_dir_exits_0(capfd):
    code, out, _ = run(["verify", DATA_DIR], capfd)
    assert code == 0
    assert out.splitlines()[-1].startswith("20 segments, ")


@needs_corpus
def test_verify_bad_crc_exits_1(capfd):
    code, out, _ = run(["verify", BAD_CRC], capfd)
    assert code == 1
    assert "PROBLEMS" in out and "CRC" in out
    assert out.splitlines()[-1].endswith("problems found")
    code, out, _ = run(["verify", "--format", "json", BAD_CRC], capfd)
    assert code == 1
    [o] = [json.loads(x) for x in out.splitlines()]
    assert o["ok"] is False
    raw = raw_batches(BAD_CRC.read_bytes())
    assert [tuple(c) for c in o["crc_failures"]] == [(r["position"], r["last"]) for r in raw
                                                     if not r["valid"]]


@needs_corpus
def test_verify_truncated_copy_exits_1(capfd, tmp_path):
    part = tmp_path / "invoice-4"
    part.mkdir()
    src = DATA_DIR / "invoice-4"
    segs = sorted(src.glob("*.log"))
    for s in segs:
        shutil.copyfile(s, part / s.name)
    last = part / segs[-1].name
    data = last.read_bytes()
    raw = raw_batches(data)
    cut = raw[-2]["position"] + raw[-2]["size"] // 2
    last.write_bytes(data[:cut])
    code, out, _ = run(["verify", "--format", "json", part], capfd)
    assert code == 1
    objs = [json.loads(x) for x in out.splitlines()]
    assert [o["ok"] for o in objs] == [True, True, True, False]
    bad = objs[-1]
    assert bad["end_reason"] == "truncated"
    assert bad["valid_bytes"] == raw[-2]["position"]
    assert bad["trailing_bytes"] == cut - raw[-2]["position"]
    code, out, _ = run(["verify", part], capfd)
    assert code == 1
    assert "truncated" in out


def test_verify_overlapping_segments_exits_1(capfd, tmp_path):
    part = tmp_path / "overlap-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        build_batch([(1, None, b"a", [])] * 10, base_offset=0))
    (part / "00000000000000000005.log").write_bytes(
        build_batch([(2, None, b"b", [])] * 3, base_offset=10))
    code, out, _ = run(["verify", part], capfd)
    assert code == 1
    assert any(line.startswith("partition: ") for line in out.splitlines())
    code, out, _ = run(["verify", "--format", "json", part], capfd)
    assert code == 1
    objs = [json.loads(x) for x in out.splitlines()]
    assert [o for o in objs if "partition_problem" in o]
    (part / "00000000000000000005.log").rename(part / "00000000000000000010.log")
    code, out, _ = run(["verify", part], capfd)
    assert code == 0, out


# --- txn ------------------------------------------------------------------------------

@needs_corpus
def test_txn_on_a_corpus_dir(capfd):
    code, out, err = run(["txn", DATA_DIR], capfd)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 5
    for n, line in enumerate(lines):
        part = DATA_DIR / f"invoice-{n}"
        last = sorted(part.glob("*.log"))[-1]
        end = EXPECTED[str(last.relative_to(CORPUS))]["next_offset"]
        assert line == f"{part}: 0 transactions, LSO {end}, log end offset {end}"
    code, out, _ = run(["txn", "--format", "json", DATA_DIR / "invoice-2"], capfd)
    assert code == 0
    [o] = [json.loads(x) for x in out.splitlines()]
    assert o["open"] == 0 and o["last_stable_offset"] == o["log_end_offset"]


def test_txn_on_generated_transactions(capfd, tmp_path):
    """Producer 7 commits, producer 8 aborts, producer 9 leaves one open."""
    parts = [
        build_batch([(1, b"a", b"1", []), (2, b"b", b"2", [])], base_offset=0,
                    producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
        build_batch([(3, None, b"x", [])], base_offset=2, producer_id=8, producer_epoch=1,
                    base_sequence=0, transactional=True),
        control_batch(base_offset=3, producer_id=7, producer_epoch=0, control_type=COMMIT,
                      coordinator_epoch=4),
        build_batch([(4, None, b"plain", [])], base_offset=4),
        control_batch(base_offset=5, producer_id=8, producer_epoch=1, control_type=ABORT),
        build_batch([(5, None, b"open", [])], base_offset=6, producer_id=9, producer_epoch=0,
                    base_sequence=0, transactional=True),
        build_batch([(6, None, b"after", [])], base_offset=7),
    ]
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"".join(parts))
    code, out, err = run(["txn", "--format", "json", part], capfd)
    assert code == 0, err
    objs = [json.loads(x) for x in out.splitlines()]
    txns = [o for o in objs if "status" in o]
    summary = objs[-1]
    assert [(t["producer_id"], t["status"], t["first_offset"], t["marker_offset"], t["records"])
            for t in txns] == [(7, "COMMIT", 0, 3, 2), (8, "ABORT", 2, 5, 1), (9, "OPEN", 6, None, 1)]
    assert summary["last_stable_offset"] == 6 and summary["log_end_offset"] == 8
    assert summary["open"] == 1
    code, out, _ = run(["txn", part], capfd)
    assert code == 0
    assert "open (hanging)" in out and "LSO 6" in out
    # the segment file alone gives the same transactions
    code, out, _ = run(["txn", "--format", "json", part / "00000000000000000000.log"], capfd)
    assert code == 0
    objs = [json.loads(x) for x in out.splitlines()]
    assert [(o["producer_id"], o["status"]) for o in objs if "status" in o] == \
        [(7, "COMMIT"), (8, "ABORT"), (9, "OPEN")]
    assert objs[-1]["last_stable_offset"] == 6


def test_verify_and_stats_json_name_a_skipped_range_the_same_way(tmp_path, capfd):
    """A batch with an unknown magic byte: verify passes over it (as a skip
    read does) and stats --on-corrupt skip too. Both JSON outputs give the
    range as the same object (``file``, ``start``, ``stop``, ...) and name
    the segment ``file``, as dump does; verify gave a bare array and
    ``path``."""
    parts = [build_batch([(1000, b"k", b"v%d" % i, [])], base_offset=i) for i in range(3)]
    data = bytearray(b"".join(parts))
    data[len(parts[0]) + 16] = 7                     # the second batch's magic byte
    part = tmp_path / "t-0"
    part.mkdir()
    seg = part / "00000000000000000000.log"
    seg.write_bytes(bytes(data))
    want = {"file": str(seg), "start": len(parts[0]), "stop": len(parts[0]) + len(parts[1]),
            "reason": "corrupt", "offset_before": 0, "offset_after": 2}
    code, out, _ = run(["verify", "--format", "json", part], capfd)
    [o] = [json.loads(x) for x in out.splitlines()]
    assert code == 1 and o["file"] == str(seg) and "path" not in o
    [v] = o["skipped"]
    code, out, _ = run(["stats", "--on-corrupt", "skip", "--format", "json", part], capfd)
    [s] = json.loads(out.splitlines()[0])["segments"][0]["skipped"]
    code, out, _ = run(["stats", "--on-corrupt", "skip", "--level", "batches", "--format", "json",
                        part], capfd)
    [b] = [json.loads(x)["skipped"] for x in out.splitlines() if "skipped" in x]
    for gap in (v, s, b):
        assert {k: gap[k] for k in want} == want, gap
        assert "unknown magic byte 7" in gap["error"]
    assert v == s and {k: b[k] for k in v} == v


def _crc_damaged_partition(root: Path, kind: str) -> tuple[Path, int, int]:
    """A partition of three batches (magic 2, or magic-1 messages) whose
    middle one has a value byte flipped: its CRC fails, nothing else.
    Returns the directory, the damaged batch's byte (found here with
    struct, from the length fields) and its base offset (magic 1: the
    message's offset)."""
    from .kafka_ref import legacy_message
    if kind == "v2":
        parts = [build_batch([(1000 + i, b"k%d" % i, b"value-%d" % i, [])
                              for i in range(b * 3, b * 3 + 3)], base_offset=b * 3)
                 for b in range(3)]
        base = 3
    else:
        parts = [legacy_message(offset=i, magic=1, key=b"k", value=b"value-%d" % i,
                                timestamp=1000 + i) for i in range(3)]
        base = 1
    data = bytearray(b"".join(parts))
    start = 12 + struct.unpack_from(">i", data, 8)[0]          # the second batch's byte
    end = start + 12 + struct.unpack_from(">i", data, start + 8)[0]
    assert struct.unpack_from(">q", data, start)[0] == base
    data[end - 1] ^= 0x20                                       # its last value byte
    part = root / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    return part, start, base


@pytest.mark.parametrize("kind", ["v2", "magic1"])
def test_a_crc_mismatch_is_at_the_same_byte_through_every_door(tmp_path, capfd, kind):
    """One flipped value byte fails a batch's CRC: the damage lies somewhere
    in the bytes the CRC covers, so every door names the damaged batch by
    the byte it starts at (as Kafka's recovery and DumpLogSegments name a
    batch by its position), with the file and its base offset. The error
    said the byte of the stored CRC field (17 bytes in, 12 for magic 1)
    while verify, stop and skip said the batch's start."""
    part, start, base = _crc_damaged_partition(tmp_path, kind)
    seg = part / "00000000000000000000.log"
    want = f"at byte {start} (batch base offset {base})"
    for read in (lambda: kbatch.read_segment(seg), lambda: kbatch.open_log(part).read(),
                 lambda: list(kbatch.iter_segment(seg, chunk_records=1))):
        with pytest.raises(kbatch.CorruptRecordError) as info:
            read()
        exc = info.value
        assert "CRC" in exc.reason and exc.path == str(seg)
        assert (exc.position, exc.batch_position, exc.base_offset) == (start, start, base)
        assert str(exc).endswith(want)
    stopped = kbatch.open_log(part).read(on_corrupt="stop")
    assert stopped.end.valid_bytes == start and stopped.end.error.position == start
    [gap] = kbatch.open_log(part).read(on_corrupt="skip").skipped
    assert gap.start == start
    assert kbatch.verify(part).segments[0].crc_failures == [(start, base)]
    # the command line: every subcommand, the same byte
    code, out, _ = run(["verify", part], capfd)
    assert code == 1 and f"CRC mismatch in batch at byte {start} (base offset {base})" in out
    code, out, _ = run(["verify", "--format", "json", part], capfd)
    [o] = [json.loads(x) for x in out.splitlines()]
    assert code == 1 and o["crc_failures"] == [[start, base]] and o["file"] == str(seg)
    for argv in (["stats", part], ["stats", "--level", "batches", part], ["dump", seg],
                 ["txn", part], ["latest", part]):
        code, out, err = run(argv, capfd)
        assert code == 1, (argv, out, err)
        [line] = [x for x in err.splitlines() if "CRC" in x]
        assert str(seg) in line and line.endswith(want), (argv, line)
    code, out, _ = run(["stats", "--on-corrupt", "stop", part], capfd)
    assert code == 1 and f"stopped at byte {start}: " in out and want in out
    code, out, _ = run(["stats", "--on-corrupt", "skip", part], capfd)
    assert code == 1 and f"skipped damaged bytes {start}-" in out and want in out
    code, out, _ = run(["stats", "--on-corrupt", "stop", "--level", "batches", "--format",
                        "json", part], capfd)
    [stop] = [json.loads(x)["stopped"] for x in out.splitlines() if "stopped" in x]
    assert (stop["file"], stop["position"]) == (str(seg), start) and stop["error"].endswith(want)
