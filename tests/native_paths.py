"""Helpers shared by the native-codec differential tests
(tests/test_lz4_native.py, tests/test_native_codecs.py): the outcome of a
read on one path must equal the other's, records and errors alike."""

from .test_against_kafka_python import assert_same_records


def same_outcome(a, b):
    """``(records, error)`` pairs from two paths: the same error (type and
    message), or the same records and the same end of data."""
    (ra, ea), (rb, eb) = a, b
    assert ea == eb
    if ra is not None:
        end_a, end_b = ra.end, rb.end
        assert (end_a.valid_bytes, end_a.reason) == (end_b.valid_bytes, end_b.reason)
        assert repr(end_a.error) == repr(end_b.error)
        ra.end = rb.end = None   # compared above (errors are distinct objects)
        assert_same_records(ra, rb)


def flip_bits(buf, rng):
    """``buf`` with one to three random bits flipped."""
    out = bytearray(buf)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)
