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

from .kafka_ref import build_batch, crc32c_bitwise, fix_crc

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


# --- the fold's constants, derived here from the polynomial ------------------

POLY = 0x1EDC6F41        # CRC-32C, x^32 implied, normal (not reflected) order


def _xpow_mod(e: int) -> int:
    """x^e mod P, as a 32-bit polynomial."""
    r = 1
    for _ in range(e):
        r <<= 1
        if r >> 32:
            r ^= (1 << 32) | POLY
    return r


def _reflect32(v: int) -> int:
    return int(f"{v:032b}"[::-1], 2)


def _clmul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


@pytest.mark.parametrize("distance", [16, 32, 48, 64, 128, 192, 256])
def test_fold_constants(distance):
    # folding a 16-byte lane D bytes on multiplies its first 8 bytes by
    # x^(8D+31) mod P and its second 8 by x^(8D-33) mod P (bit-reflected);
    # the message keeps its CRC, and the header uses exactly these constants
    k_first = _reflect32(_xpow_mod(8 * distance + 31))
    k_second = _reflect32(_xpow_mod(8 * distance - 33))
    lane = DATA[:16]
    first = int.from_bytes(lane[:8], "little")
    second = int.from_bytes(lane[8:], "little")
    folded = (_clmul(first, k_first) ^ _clmul(second, k_second)).to_bytes(16, "little")
    assert (crc32c_bitwise(lane + bytes(distance))
            == crc32c_bitwise(bytes(distance - 16) + folded))
    # the source tree's header (a sanitizer build's package has no headers)
    header = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "kbatch", "_core",
                               "_crc32c_fold.h")).read().lower()
    assert f"0x{k_first:08x}u, 0x{k_second:08x}u" in header
