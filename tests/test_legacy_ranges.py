"""Legacy (magic 0/1) wrappers whose inner offsets disagree with the wrapper:
a range read returns exactly what the full read filtered to the range
returns, with and without the index, whatever offsets the inner messages
carry (even below the message before the wrapper). The expected records
come from kafka-python's decode of the same bytes (tests/kafka_ref.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch

from .kafka_ref import compress_records, legacy_message, read_with_kafka_python


@st.composite
def legacy_segments(draw):
    """Plain messages and compressed wrappers (magic 0: inner offsets
    absolute; magic 1: relative) with offsets that may go backwards inside
    a wrapper, each wrapper's offset at or above its inner messages'."""
    parts, offset = [], draw(st.integers(0, 20))
    magic = draw(st.sampled_from([0, 1]))
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            parts.append(legacy_message(offset=offset, magic=magic, timestamp=offset,
                                        value=b"p%d" % offset))
            offset += draw(st.integers(1, 3))
            continue
        n = draw(st.integers(1, 4))
        inner_offsets = sorted(draw(st.lists(st.integers(0, offset + 5), min_size=n,
                                             max_size=n)))
        wrapper_offset = max(inner_offsets) + draw(st.integers(0, 3))
        if magic == 1:      # relative: the last inner message is the wrapper's offset
            inner_offsets = [o - inner_offsets[-1] + len(inner_offsets) - 1
                             for o in inner_offsets]
            wrapper_offset = max(wrapper_offset, len(inner_offsets) - 1)
        inner = b"".join(legacy_message(offset=o, magic=magic, timestamp=i, value=b"w%d" % i)
                         for i, o in enumerate(inner_offsets))
        codec = draw(st.sampled_from([1, 2]))       # gzip, snappy
        parts.append(legacy_message(offset=wrapper_offset, magic=magic, attributes=codec,
                                    timestamp=7, value=compress_records(inner, codec)))
        offset = wrapper_offset + draw(st.integers(1, 3))
    return b"".join(parts)


@settings(max_examples=60, deadline=None)
@given(legacy_segments(), st.integers(0, 40), st.integers(0, 40))
def test_range_reads_agree_with_the_full_read_filtered(tmp_path_factory, data, a, b):
    lo, hi = min(a, b), max(a, b) + 1
    part = tmp_path_factory.mktemp("legacy") / "t-0"
    part.mkdir()
    (part / f"{0:020d}.log").write_bytes(data)
    truth = read_with_kafka_python(data).column("offset")
    full = kbatch.open_log(part).read()
    assert full.offset.tolist() == truth
    want = [o for o in truth if lo <= o < hi]
    for use_index in (False, True):
        got = kbatch.open_log(part, use_index=use_index).read(lo, hi)
        assert got.offset.tolist() == want, (lo, hi, use_index)
        chunks = kbatch.open_log(part, use_index=use_index).iter(lo, hi, chunk_records=1)
        assert [o for c in chunks for o in c.offset.tolist()] == want
        # level="batches" counts what the range read returns (a wrapper's
        # first inner offset is only known once decoded: it may lie below
        # the message before it)
        rows = kbatch.open_log(part, use_index=use_index).read(lo, hi, level="batches")
        assert sum(rows.column("records").to_pylist()) == len(want), (lo, hi, use_index)
