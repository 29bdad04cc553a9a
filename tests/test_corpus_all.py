"""Every file of ../shared/corpus/EXPECTED.jsonl, magic 0 and 1 included,
decodes to what the independent decoder recorded there; the kafkalite golden
texts match the decoded values of their segments.

Expected values come from EXPECTED.jsonl, the golden files, or the bytes of
the files themselves read here with ``struct``/``zlib`` (never from kbatch).
"""

import json
import re
import struct
import zlib

import numpy as np
import pytest

import kbatch

from .conftest import CORPUS, needs_corpus
from .digest import digest


def _expected():
    path = CORPUS / "EXPECTED.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


EXPECTED = _expected()
GOOD = [e for e in EXPECTED if e["crc_errors"] == 0]
BAD_CRC = [e for e in EXPECTED if e["crc_errors"] > 0]
LEGACY = [e for e in EXPECTED if min(e["magics"]) < 2]

# Without the corpus every test here skips with the one reason of conftest.NO_CORPUS
# (tests/test_data_fixtures.py still checks the small real-data set in tests/data).
pytestmark = needs_corpus

FIELDS = ("records", "batches", "control", "first_offset", "last_offset", "next_offset",
          "valid_bytes", "crc_errors", "magics", "codecs", "digest")


def summarize(records, crc_errors):
    got = {
        "records": len(records),
        "batches": len(records.batches),
        "control": len(records.control),
        "valid_bytes": records.end.valid_bytes,
        "crc_errors": crc_errors,
        "magics": sorted(set(records.batches.magic.tolist())),
        "codecs": sorted(set(records.batches.codec.tolist())),
        "digest": digest(records),
    }
    if len(records.batches):
        got["next_offset"] = int(records.batches.last_offset[-1]) + 1
    if len(records):
        got["first_offset"] = int(records.offset[0])
        got["last_offset"] = int(records.offset[-1])
    return got


def want_of(entry):
    return {k: entry[k] for k in FIELDS if k in entry}


def legacy_walk(data: bytes):
    """(position, offset, size, stored crc, computed crc) of every top-level
    legacy message, walked here from the layout in SPEC.md section 5."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        if size < 14 or pos + 12 + size > len(data):
            break
        stored, = struct.unpack_from(">I", data, pos + 12)
        computed = zlib.crc32(data[pos + 16:pos + 12 + size])
        out.append((pos, offset, 12 + size, stored, computed))
        pos += 12 + size
    return out


# --- every file, every field -----------------------------------------------

@pytest.mark.parametrize("entry", GOOD, ids=[e["path"] for e in GOOD])
def test_file_matches_expected(corpus, entry):
    records = kbatch.read_segment(corpus / entry["path"])   # CRCs checked
    assert (records.batches.crc_valid == 1).all()
    got = summarize(records, int((records.batches.crc_valid == 0).sum()))
    assert {k: got.get(k) for k in want_of(entry)} == want_of(entry)
    assert records.end.trailing_bytes == entry["size"] - entry["valid_bytes"]


def test_corpus_covers_every_magic():
    assert len(EXPECTED) >= 250
    magics = {m for e in EXPECTED for m in e["magics"]}
    assert magics == {0, 1, 2}
    assert len([e for e in LEGACY if e["magics"] == [0]]) >= 10
    assert len([e for e in LEGACY if 1 in e["magics"]]) >= 12
    assert len(BAD_CRC) == 1


@pytest.mark.parametrize("entry", LEGACY, ids=[e["path"] for e in LEGACY])
def test_legacy_file_chunked_reads_match_expected(corpus, entry):
    """Chunk by chunk (seven records per chunk) the legacy files give the same
    records: wrappers are never split across chunks wrongly."""
    chunks = list(kbatch.iter_segment(corpus / entry["path"], chunk_records=7,
                                      validate_crc=entry["crc_errors"] == 0))
    records = kbatch.Records.concat(chunks)
    assert len(records) == entry["records"]
    assert digest(records) == entry["digest"]
    assert records.end.valid_bytes == entry["valid_bytes"]


@pytest.mark.parametrize("entry", LEGACY, ids=[e["path"] for e in LEGACY])
def test_legacy_file_timestamps_follow_the_magic(corpus, entry):
    """magic 0 records have no timestamp (-1) and no timestamp type (-1);
    magic 1 records have CreateTime or LogAppendTime."""
    records = kbatch.read_segment(corpus / entry["path"],
                                  validate_crc=entry["crc_errors"] == 0)
    magic_of_record = records.batches.magic[records.batch]
    v0 = magic_of_record == 0
    assert (records.timestamp[v0] == -1).all()
    assert (records.timestamp_type[v0] == -1).all()
    assert np.isin(records.timestamp_type[~v0], [0, 1]).all()
    assert len(records.headers.to_pylist()) == len(records)
    assert all(h == [] for h, m in zip(records.headers.to_pylist(), magic_of_record) if m < 2)


# --- the file with a wrong CRC (kafka-rust invalid_crc) ------------------------

@pytest.mark.parametrize("entry", BAD_CRC, ids=[e["path"] for e in BAD_CRC])
def test_bad_crc_file_without_validation_matches_digest(corpus, entry):
    records = kbatch.read_segment(corpus / entry["path"], validate_crc=False)
    crc_errors = len(kbatch.verify(corpus / entry["path"]).segments[0].crc_failures)
    got = summarize(records, crc_errors)
    assert {k: got.get(k) for k in want_of(entry)} == want_of(entry)
    assert not (records.batches.crc_valid == 1).any()   # never claimed valid


@pytest.mark.parametrize("entry", BAD_CRC, ids=[e["path"] for e in BAD_CRC])
def test_bad_crc_file_with_validation_raises(corpus, entry):
    path = corpus / entry["path"]
    data = path.read_bytes()
    assert max(entry["magics"]) < 2
    bad = [m for m in legacy_walk(data) if m[3] != m[4]]
    assert len(bad) == entry["crc_errors"]
    position, base_offset, size, _, _ = bad[0]
    with pytest.raises(kbatch.CorruptRecordError) as info:
        kbatch.read_segment(path)                       # validate_crc=True is the default
    err = info.value
    assert err.position is not None and err.base_offset is not None
    assert err.base_offset == base_offset
    assert position <= err.position < position + size
    assert err.batch_position == position
    assert err.path == str(path)
    assert isinstance(err, ValueError)
    with pytest.raises(kbatch.CorruptRecordError):
        list(kbatch.iter_segment(path, chunk_records=1))


@pytest.mark.parametrize("entry", BAD_CRC, ids=[e["path"] for e in BAD_CRC])
def test_verify_reports_the_bad_crc(corpus, entry):
    path = corpus / entry["path"]
    walk = legacy_walk(path.read_bytes())
    bad = [(pos, off) for pos, off, _, stored, computed in walk if stored != computed]
    report = kbatch.verify(path)
    assert not report.ok
    [seg] = report.segments
    assert not seg.ok
    assert sorted(seg.crc_failures) == bad
    assert seg.valid_bytes == entry["valid_bytes"]
    assert seg.trailing_bytes == entry["size"] - entry["valid_bytes"]
    assert any("CRC" in p for p in seg.problems())


def test_good_twin_of_the_bad_crc_file(corpus):
    """The same fetch without the broken CRC verifies clean; the two differ in
    the CRC field (and what it covers), not in the layout."""
    [bad] = BAD_CRC
    twin = bad["path"].replace(".invalid_crc", "")
    [good] = [e for e in EXPECTED if e["path"] == twin]
    report = kbatch.verify(corpus / twin)
    assert report.ok, [s.problems() for s in report.segments]
    walk = legacy_walk((corpus / twin).read_bytes())
    assert all(stored == computed for _, _, _, stored, computed in walk)
    assert good["crc_errors"] == 0


# --- kafkalite golden outputs ------------------------------------------------

KAFKALITE = CORPUS / "asayers__kafkalite" / "tests" / "test-data"
GOLDEN_NAMES = sorted(p.name for p in (KAFKALITE / "golden").iterdir()) \
    if (KAFKALITE / "golden").is_dir() else []

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
_LINE = re.compile(r'^(\d+): "(.*)"$', re.S)
_ESCAPE = re.compile(r'\\(u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)', re.S)


def _unescape(text: str) -> str:
    def one(m):
        e = m.group(1)
        if e.startswith("u{"):
            return chr(int(e[2:-1], 16))
        if e[0] in "xu" and len(e) > 1:
            return chr(int(e[1:], 16))
        if e in _ESCAPES:
            return _ESCAPES[e]
        raise AssertionError(f"unknown escape \\{e}")
    return _ESCAPE.sub(one, text)


def parse_golden(path) -> dict[int, str]:
    """``{offset: text}`` of a golden file: lines ``N: "text"`` with Rust /
    Python-repr style escapes inside the quotes."""
    out = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        m = _LINE.match(line.rstrip("\r"))
        assert m, f"unparsed golden line: {line!r}"
        offset = int(m.group(1))
        assert offset not in out
        out[offset] = _unescape(m.group(2))
    return out


def test_golden_parser():
    assert _unescape(r"[Within]\tLord Hamlet,--") == "[Within]\tLord Hamlet,--"
    assert _unescape(r'a \"b\" \\ c\n \u{e9} \x41') == 'a "b" \\ c\n \u00e9 A'


def test_golden_files_exist():
    assert set(GOLDEN_NAMES) >= {"hamlet-gzip-0", "numbers-0"}


def _decoded_text(path):
    records = kbatch.read_segment(path)
    return records, dict(zip(records.offset.tolist(),
                             (v.decode("utf-8") for v in records.value.to_pylist())))


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kafkalite_golden(corpus, name):
    golden = parse_golden(KAFKALITE / "golden" / name)
    records, decoded = _decoded_text(KAFKALITE / "fs-data" / name / "00000000000000000000.log")
    assert len(records) == len(golden)
    assert decoded == golden
    assert records.key.to_pylist() == [None] * len(records)
    assert (records.timestamp == -1).all() and (records.timestamp_type == -1).all()


@pytest.mark.parametrize("name", ["hamlet-none-0", "hamlet-snappy-0"])
def test_kafkalite_other_hamlet_codecs_match_the_golden(corpus, name):
    """The same play written uncompressed and with snappy (xerial) wrappers."""
    golden = parse_golden(KAFKALITE / "golden" / "hamlet-gzip-0")
    _, decoded = _decoded_text(KAFKALITE / "fs-data" / name / "00000000000000000000.log")
    assert decoded == golden
