"""The small real-data fixture set in tests/data (copied from the shared
corpus with its EXPECTED.jsonl lines): runs in every checkout, the shared
corpus present or not. Expected values are the independent decoder's lines,
never kbatch's output.
"""

import json
from pathlib import Path

import pytest

import kbatch

from .digest import digest
from .test_corpus_all import summarize, want_of

DATA = Path(__file__).resolve().parent / "data" / "corpus"
ENTRIES = [json.loads(line) for line in (DATA / "EXPECTED.jsonl").read_text().splitlines()
           if line.strip()]
PARTITION = DATA / "macsakini__KafkaCluster" / "kafka" / "data" / "test-0"


def test_the_set_covers_every_magic_codec_and_control_records():
    assert len(ENTRIES) >= 20
    assert {m for e in ENTRIES for m in e["magics"]} == {0, 1, 2}
    assert {c for e in ENTRIES for c in e["codecs"]} == {0, 1, 2, 3}   # the corpus has no zstd
    assert sum(e["control"] for e in ENTRIES) > 0
    assert [e["crc_errors"] for e in ENTRIES if e["crc_errors"]] == [1]
    assert {p.name for p in PARTITION.iterdir()} >= {
        "00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"}
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 4 << 20


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["path"].split("/")[-2][:40] for e in ENTRIES])
def test_fixture_matches_expected(entry):
    path = DATA / entry["path"]
    assert path.stat().st_size == entry["size"]
    if entry["crc_errors"]:
        with pytest.raises(kbatch.CorruptRecordError):
            kbatch.read_segment(path)
        records = kbatch.read_segment(path, validate_crc=False)
        crc_errors = len(kbatch.verify(path).segments[0].crc_failures)
    else:
        records = kbatch.read_segment(path)
        assert (records.batches.crc_valid == 1).all()
        crc_errors = 0
    got = summarize(records, crc_errors)
    assert {k: got.get(k) for k in want_of(entry)} == want_of(entry)
    assert records.end.trailing_bytes == entry["size"] - entry["valid_bytes"]


def test_fixture_partition_reads_and_verifies():
    [entry] = [e for e in ENTRIES if e["path"].startswith(str(PARTITION.relative_to(DATA)))]
    log = kbatch.open_log(PARTITION)
    for use_index in (False, True):
        records = log.read() if not use_index else kbatch.open_log(PARTITION, use_index=True).read(
            start_offset=entry["first_offset"])
        assert len(records) == entry["records"]
        assert digest(records) == entry["digest"]
    report = kbatch.verify(PARTITION)
    assert report.ok, [s.problems() for s in report.segments] + report.partition_problems
