"""The compiled JSON decoder (``kbatch._core._json``) for objects of scalar
fields, checked against a model built on the json module: values written
by ``json.dumps`` in every layout (spacing, indentation, escapes, field
order, unknown fields of any shape), every scalar type at its limits, and
values that must fail their row (wrong types, repeated keys, date-times
without an offset, text that is not JSON). Rows the compiled decoder does
not take go to pyarrow's reader: the answer must be the same either way."""

from __future__ import annotations

import datetime
import decimal
import json
import re
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import kbatch
from kbatch._core import _json

SCHEMA = {"type": "object", "properties": {
    "i": {"type": "integer"}, "f": {"type": "number"}, "b": {"type": "boolean"},
    "s": {"type": "string"}, "t": {"type": "string", "format": "date-time"},
    "d": {"type": "string", "format": "date"}, "n": {"type": ["integer", "null"]}}}
FIELDS = [("i", "int"), ("f", "float"), ("b", "bool"), ("s", "str"), ("t", "datetime"),
          ("d", "date"), ("n", "int")]
FAIL = object()
# the date-times taken: RFC 3339 with an upper-case T (or a space) and Z or
# an offset, at most 6 fraction digits (lower-case t and z are refused)
RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d{1,6})?(Z|[+-]\d\d:\d\d)$")
UTC = datetime.timezone.utc


def model_datetime(text: str):
    if not RFC3339.match(text):
        return FAIL
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return FAIL
    return value.astimezone(UTC)


class _Pairs(list):
    """An object's (key, value) pairs, in order (repeated keys kept)."""


def model(text: bytes):
    """The row a correct decoder gives (a dict), or FAIL."""
    try:
        pairs = json.loads(text, object_pairs_hook=_Pairs, parse_float=decimal.Decimal)
    except (ValueError, UnicodeDecodeError):
        return FAIL
    if not isinstance(pairs, _Pairs):
        return FAIL
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        return FAIL                       # a repeated key (pyarrow refuses it)
    obj = dict(pairs)
    row = {}
    for name, kind in FIELDS:
        x = obj.get(name)
        if x is None:
            row[name] = None
            continue
        if kind == "int":
            # JSON Schema (draft 6 on): an integer is a number whose value
            # is whole, 1.0 and 1e2 too (the literal's exact value)
            if type(x) is decimal.Decimal and x.is_finite() and x == int(x):
                x = int(x)
            if type(x) is not int or not -2 ** 63 <= x < 2 ** 63:
                return FAIL
        elif kind == "float":
            if type(x) not in (int, float, decimal.Decimal):
                return FAIL
            try:
                x = float(x)
            except OverflowError:
                return FAIL
            if x - x != 0:
                return FAIL               # past the double range (pyarrow refuses it)
        elif kind == "bool":
            if type(x) is not bool:
                return FAIL
        elif kind == "str":
            if type(x) is not str:
                return FAIL
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return FAIL               # a lone surrogate escape: no UTF-8 for it
        elif kind == "datetime":
            x = model_datetime(x) if type(x) is str else FAIL
            if x is FAIL:
                return FAIL
        elif kind == "date":
            if type(x) is not str or not re.fullmatch(r"\d{4}-\d\d-\d\d", x):
                return FAIL
            try:
                x = datetime.date.fromisoformat(x)
            except ValueError:
                return FAIL
        row[name] = x
    return row


def registry():
    return kbatch.registry([{"subject": "f-value", "version": 1, "id": 4, "schemaType": "JSON",
                             "schema": json.dumps(SCHEMA)}])


def framed(text: bytes) -> bytes:
    return b"\x00" + struct.pack(">i", 4) + text


def check(texts: list[bytes]):
    arr, errors = registry().decode([framed(t) for t in texts], on_error="null",
                                    with_errors=True)
    arr.validate(full=True)
    for text, row, error in zip(texts, arr.to_pylist(), errors.to_pylist()):
        want = model(text)
        if want is FAIL:
            assert row is None and error, text
        else:
            assert error is None, (text, error)
            for name, _ in FIELDS:
                got = row[name]
                if isinstance(got, datetime.datetime):
                    assert got == want[name] and got.tzinfo is not None, text
                else:
                    assert got == want[name] and type(got) is type(want[name]), (text, name)


scalars = {
    "int": st.one_of(st.integers(-2 ** 63, 2 ** 63 - 1), st.sampled_from([0, -1, 2 ** 63 - 1, -2 ** 63])),
    "float": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-10 ** 20, 10 ** 20)),
    "bool": st.booleans(),
    "str": st.text(),
    "datetime": st.builds(
        lambda dt, frac, off: (dt.strftime("%Y-%m-%dT%H:%M:%S") + frac + off),
        st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 30)),
        st.sampled_from(["", ".5", ".123", ".123456", ".1234567"]),
        st.sampled_from(["Z", "+02:00", "-05:30", "+00:00", "", "z"])),
    "date": st.dates().map(lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}"),
}
junk = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                              st.floats(allow_nan=False, allow_infinity=False)),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=8)


@st.composite
def values(draw):
    obj = {}
    for name, kind in FIELDS:
        pick = draw(st.integers(0, 9))
        if pick == 0:
            continue                                   # absent
        if pick == 1:
            obj[name] = None
        elif pick == 2:                                # a value of another type
            obj[name] = draw(st.one_of(st.text(max_size=3), st.booleans(), st.integers(),
                                       st.lists(st.integers(), max_size=2)))
        else:
            obj[name] = draw(scalars[kind])
    for key in draw(st.lists(st.text(max_size=4), max_size=3)):
        if key not in obj:
            obj[key] = draw(junk)
    items = list(obj.items())
    draw(st.randoms()).shuffle(items)
    text = json.dumps(dict(items), ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 0, 2])),
                      separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])))
    return text.encode()


@settings(max_examples=150)
@given(st.lists(values(), min_size=1, max_size=8))
def test_flat_values_match_the_model(texts):
    check(texts)


def test_hand_written_edge_cases():
    check([
        b'{"i": -9223372036854775808, "f": -0.0, "s": "\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/\\b\\f\\r\\t"}',
        b'{"i": 9223372036854775807, "f": 1e308, "b": false}',
        b'{"i": 9223372036854775808}',                 # past int64
        b'{"i": -9223372036854775809}',
        b'{"i": 1.0}', b'{"i": 1e2}', b'{"i": -0}', b'{"i": 01}', b'{"i": +1}',
        b'{"f": 1e400}', b'{"f": .5}', b'{"f": 5.}', b'{"f": -}', b'{"f": 2.5e-3}',
        b'{"s": "\\ud800"}', b'{"s": "\\udc00x"}', b'{"s": "a\x01b"}', b'{"s": "\xff"}',
        b'{"s": "\xed\xa0\x80"}', b'{"s": "\xc3\xa9 \xf0\x9f\x98\x80"}', b'{"s": "\xc0\xaf"}',
        b'{"s": "x", "s": "y"}', b'{"\\u0073": "escaped key"}', b'{"\xc3\xa9": 1, "i": 2}',
        b'{"t": "2024-02-29T23:59:59.999999+14:00"}', b'{"t": "2023-02-29T00:00:00Z"}',
        b'{"t": "2024-01-01T24:00:00Z"}', b'{"t": "2024-01-01 10:00:00Z"}',
        b'{"t": "2024-01-01T10:00:00"}', b'{"t": "2024-01-01T10:00:00.Z"}',
        b'{"t": "2024-01-01T10:00:00.1234567Z"}', b'{"t": "0001-01-01T00:00:00Z"}',
        b'{"d": "2024-02-30"}', b'{"d": "1970-01-01"}', b'{"d": "1969-12-31"}', b'{"d": "10000-01-01"}',
        b' \r\n\t{ } \n', b'{}', b'[]', b'"x"', b'{"i": 1} x', b'{"i": 1,}', b'{"i" 1}', b'{"i": 1',
        b'{"j": [1, {"k": [true, null, "\\u1234"]}], "i": 3}', b'{"j": [1, 2}', b'{"j": nul}',
        b'{"b": true, "b2": tru}', b'{"n": null, "i": null}',
        b'{"j": ' + b'[' * 70 + b']' * 70 + b', "i": 4}',            # deep unknown value
    ])


def test_rows_the_compiled_decoder_leaves_are_reported():
    """The compiled pass says which rows it leaves to the general one (and
    leaves nothing of them in its columns)."""
    import numpy as np
    texts = [b'{"a": 1, "b": "x"}', b'{"a": 1.5}', b'{"a": 1, "a": 2}', b'{"b": "\\ud83d\\ude00"}']
    data = np.frombuffer(b"".join(texts), np.uint8)
    ends = np.cumsum([len(t) for t in texts])
    starts = ends - [len(t) for t in texts]
    status, cols = _json.decode_flat(data, starts.astype(np.int64), ends.astype(np.int64),
                                     np.ones(4, np.uint8), [b"a", b"b"], [0, 3])
    assert status.tolist() == [0, 2, 2, 0]
    (avalid, a), (bvalid, (boffs, bdata)) = cols
    assert avalid.tolist() == [1, 0, 0, 0] and a[0] == 1
    assert bvalid.tolist() == [1, 0, 0, 1]
    assert bytes(bdata).decode() == "x\U0001F600" and boffs.tolist() == [0, 1, 1, 1, 5]
    with pytest.raises(ValueError, match="outside"):
        _json.decode_flat(data, np.array([0], np.int64), np.array([10 ** 6], np.int64),
                          np.ones(1, np.uint8), [b"a"], [0])


def test_a_flat_schema_decodes_like_a_nested_one():
    """The same fields read through the compiled pass (a flat schema) and
    through pyarrow's reader (the schema with a list field added)."""
    nested = dict(SCHEMA, properties=dict(SCHEMA["properties"], l={"type": "array", "items": {"type": "integer"}}))
    reg = kbatch.registry([{"subject": "g-value", "version": 1, "id": 6, "schemaType": "JSON",
                            "schema": json.dumps(nested)}])
    texts = [b'{"i": 5, "s": "\\u00e9", "t": "2024-01-01T00:00:00.5+01:00", "d": "2024-01-02", "f": 3}',
             b'{"b": true, "n": null, "x": {"y": [1]}}', b'{"i": "no"}']
    flat, flat_errors = registry().decode([framed(t) for t in texts], on_error="null", with_errors=True)
    other, other_errors = reg.decode([b"\x00" + struct.pack(">i", 6) + t for t in texts],
                                     on_error="null", with_errors=True)
    rows = [None if r is None else {k: v for k, v in r.items() if k != "l"} for r in other.to_pylist()]
    assert flat.to_pylist() == rows
    assert rows[0] == {"i": 5, "f": 3.0, "b": None, "s": "\u00e9", "d": datetime.date(2024, 1, 2),
                       "t": datetime.datetime(2023, 12, 31, 23, 0, 0, 500000, tzinfo=UTC), "n": None}
    assert rows[1] == {"i": None, "f": None, "b": True, "s": None, "t": None, "d": None, "n": None}
    assert rows[2] is None
    assert [e is None for e in flat_errors.to_pylist()] == [e is None for e in other_errors.to_pylist()]
    assert flat.type == pa.struct([f for f in other.type if f.name != "l"])
