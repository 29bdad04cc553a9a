"""CRC-32C as the decoders compute it, against the crc32c package.

The decoders use a VPCLMULQDQ folding routine on CPUs that have it (spans of
512 bytes or more) and the package's own C routine otherwise; both paths are
compared here with the package's Python function, an independent
implementation, on every length around the fold's block sizes, at every
alignment, and on Hypothesis data.
"""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch._core import _checksums

from .kafka_ref import build_batch, fix_crc

HAS_FOLD = _checksums._fold_available()
DATA = os.urandom(80_000)


@pytest.fixture(params=["fold", "package"])
def path(request):
    """Each CRC path in turn (the fold only where the CPU has it)."""
    if request.param == "fold" and not HAS_FOLD:
        pytest.skip("this CPU has no VPCLMULQDQ/AVX-512: the package routine is used")
    was = _checksums._use_fold(request.param == "fold")
    yield request.param
    _checksums._use_fold(was)


def test_the_fold_is_used_where_the_cpu_has_it():
    # the import-time check against the package turns it off if it disagrees
    assert _checksums.crc32c_implementation().startswith("vpclmulqdq") == HAS_FOLD


def test_check_value(path):
    assert _checksums.crc32c_of(b"123456789") == 0xE3069283
    assert _checksums.crc32c_of(b"123456789" * 100) == crc32c.crc32c(b"123456789" * 100)


def test_every_length_and_alignment(path):
    # lengths around every block the fold handles (256-byte steps, 64-byte
    # steps, 8-byte words, single bytes), at every alignment of a cache line
    bad = []
    for at in range(64):
        for n in range(0, 2200):
            span = DATA[at:at + n]
            if _checksums.crc32c_of(span) != crc32c.crc32c(span):
                bad.append((at, n))
    assert bad == []


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 63), st.integers(0, 70_000), st.binary(max_size=64))
def test_hypothesis_spans(at, n, head):
    data = head + DATA[at:at + n]
    for fold in (True, False):
        was = _checksums._use_fold(fold)
        try:
            assert _checksums.crc32c_of(data) == crc32c.crc32c(data)
        finally:
            _checksums._use_fold(was)


def test_every_single_bit_flip_changes_the_crc(path):
    span = bytearray(DATA[5:5 + 1500])
    good = crc32c.crc32c(bytes(span))
    for bit in range(len(span) * 8):
        span[bit >> 3] ^= 1 << (bit & 7)
        assert _checksums.crc32c_of(span) != good
        span[bit >> 3] ^= 1 << (bit & 7)


def test_decoder_refuses_a_large_batch_with_one_flipped_bit(path):
    records = [(1_700_000_000_000 + i, b"k%d" % i, DATA[i * 700:(i + 1) * 700], [])
               for i in range(40)]
    batch = bytearray(build_batch(records))
    assert len(batch) > 20_000
    assert len(kbatch.read_segment(bytes(batch))) == 40
    batch[len(batch) // 2] ^= 0x10
    with pytest.raises(kbatch.CorruptRecordError) as info:
        kbatch.read_segment(bytes(batch))
    assert "CRC" in str(info.value)
    fix_crc(batch)
    assert len(kbatch.read_segment(bytes(batch))) == 40
