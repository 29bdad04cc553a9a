"""Every magic-2 file of ../shared/corpus decodes to what EXPECTED.jsonl says.

EXPECTED.jsonl was computed by an independent decoder; kbatch's output is
compared field by field (counts, offsets, valid_bytes, digest).
"""

import json

import pytest

import kbatch

from .conftest import CORPUS
from .digest import digest


def _expected():
    path = CORPUS / "EXPECTED.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


EXPECTED = _expected()
MAGIC2 = [e for e in EXPECTED if e["magics"] == [2]]


def summarize(records, entry):
    got = {
        "records": len(records),
        "batches": len(records.batches),
        "control": len(records.control),
        "valid_bytes": records.end.valid_bytes,
        "digest": digest(records),
        "codecs": sorted(set(records.batches.codec.tolist())),
        "magics": sorted(set(records.batches.magic.tolist())),
        "next_offset": int(records.batches.last_offset[-1]) + 1,
        "crc_errors": int((records.batches.crc_valid == 0).sum()),
    }
    if len(records):
        got["first_offset"] = int(records.offset[0])
        got["last_offset"] = int(records.offset[-1])
    return {k: v for k, v in got.items() if k in entry}


@pytest.mark.parametrize("entry", MAGIC2, ids=[e["path"] for e in MAGIC2])
def test_magic2_file_matches_expected(corpus, entry):
    records = kbatch.read_segment(corpus / entry["path"])
    want = {k: v for k, v in entry.items() if k not in ("path", "size")}
    assert summarize(records, want) == want
    assert records.end.trailing_bytes == entry["size"] - entry["valid_bytes"]


def test_corpus_has_magic2_files(corpus):
    assert len(MAGIC2) >= 200
