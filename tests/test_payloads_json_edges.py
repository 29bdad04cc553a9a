"""JSON Schema payloads at the edges of the spec: a top-level object that
declares no properties, a byte order mark, fields that name no one type
(their JSON text), a top-level null, integers written with a fraction or an
exponent, allOf, date-times without seconds. The truth is the json module,
the jsonschema package (Draft 7, with its format checker) and exact
decimal arithmetic, never kbatch."""

from __future__ import annotations

import datetime
import decimal
import json
import struct

import pyarrow as pa
import pytest

import kbatch

jsonschema = pytest.importorskip("jsonschema")


def framed(sid: int, text: bytes) -> bytes:
    return b"\x00" + struct.pack(">i", sid) + text


def registry(schema, sid: int = 1, references=()):
    records = [{"subject": f"{name}-s", "version": 1, "id": 100 + k, "schemaType": "JSON",
                "schema": json.dumps(s)} for k, (name, s) in enumerate(references)]
    records.append({"subject": "e-value", "version": 1, "id": sid, "schemaType": "JSON",
                    "schema": json.dumps(schema),
                    "references": [{"name": name, "subject": f"{name}-s", "version": 1}
                                   for name, _ in references]})
    return kbatch.registry(records)


def decoded(schema, texts: list[bytes], references=()):
    """(rows, errors) of the texts framed under ``schema``."""
    arr, errors = registry(schema, references=references).decode(
        [framed(1, t) for t in texts], on_error="null", with_errors=True)
    arr.validate(full=True)
    return arr, arr.to_pylist(), errors.to_pylist()


def valid(schema, value) -> bool:
    checker = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    return checker.is_valid(value)


def same(row, truth):
    """row is json.loads's truth, with null for the fields of other rows."""
    if isinstance(truth, dict):
        assert set(truth) <= set(row), (row, truth)
        for k in row:
            if k in truth:
                same(row[k], truth[k])
            else:
                assert row[k] is None
    else:
        assert row == truth and type(row) is type(truth), (row, truth)


VALUES = [{"id": 7, "name": "x", "nested": {"k": [1, 2]}}, {"id": 8, "tags": ["a"]}]


@pytest.mark.parametrize("schema, references", [
    ({"type": "object", "properties": {}}, ()),
    ({"$ref": "#/definitions/R", "definitions": {"R": {"type": "object"}}}, ()),
    ({"$ref": "#/$defs/R", "$defs": {"R": {"type": "object", "properties": {}}}}, ()),
    ({"$ref": "free.json"}, [("free.json", {"type": "object"})]),
    ({"type": ["object", "null"]}, ()),
], ids=["empty properties", "ref to object", "ref to empty properties", "ref to a reference",
        "nullable object"])
def test_a_top_level_object_of_no_properties_is_inferred_not_emptied(schema, references):
    """The top-level form of an object that declares no properties reads as
    a bare ``{"type": "object"}`` does (inferred from the values), never as
    an empty struct that drops every member."""
    texts = [json.dumps(v).encode() for v in VALUES]
    arr, rows, errors = decoded(schema, texts, references)
    assert arr.type.num_fields > 0 and errors == [None, None]
    for text, row in zip(texts, rows):
        same(row, json.loads(text))


def test_an_object_that_allows_no_members_is_an_empty_struct_at_the_top_too():
    """``additionalProperties: false`` and no properties: only ``{}`` is a
    value (jsonschema), read as an empty struct, as when nested."""
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    arr, rows, errors = decoded(schema, [b"{}"])
    assert valid(schema, {}) and arr.type == pa.struct([]) and rows == [{}] and errors == [None]


def test_a_top_level_null_is_a_null_row_only_where_the_schema_names_null():
    """The text ``null`` is no value of a schema that does not name null
    (jsonschema says so): a failed row with a reason, for every top-level
    type; where the schema names null it is a null row, no error."""
    for schema in ({"type": "integer"}, {"type": "array", "items": {"type": "integer"}},
                   {"type": "string"}, {"type": "object", "properties": {"a": {"type": "integer"}}},
                   {"type": ["integer", "null"]}, {"type": ["array", "null"], "items": {"type": "integer"}},
                   {"anyOf": [{"type": "null"}, {"type": "string"}]},
                   {"type": ["object", "null"], "properties": {"a": {"type": "integer"}}},
                   {"$ref": "#/definitions/N", "definitions": {"N": {"type": ["number", "null"]}}}):
        arr, rows, errors = decoded(schema, [b"null", b" null \n"])
        assert rows == [None, None], schema
        if valid(schema, None):
            assert errors == [None, None], schema
        else:
            assert all("null" in e for e in errors), (schema, errors)
    with pytest.raises(kbatch.PayloadError, match="JSON null"):
        registry({"type": "integer"}).decode([framed(1, b"5"), framed(1, b"null")])
    typed = kbatch.JsonValues({"type": ["integer", "null"]})
    assert typed.decode([b"null", b"3"]).to_pylist() == [None, 3]
    with pytest.raises(kbatch.PayloadError, match="JSON null"):
        kbatch.JsonValues({"type": "integer"}).decode([b"3", b"null"])


BOM = b"\xef\xbb\xbf"
FLAT = {"type": "object", "properties": {"i": {"type": "integer"}}}
NESTED = {"type": "object", "properties": {"i": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}}}


@pytest.mark.parametrize("schema", [FLAT, NESTED, {"type": "object"}], ids=["flat", "nested", "inferred"])
def test_a_byte_order_mark_is_skipped_in_every_row(schema):
    """RFC 8259 (8.1) lets a parser ignore a leading BOM; json.loads of the
    bytes does: every row starting with one reads as that value, wherever
    it stands in the column; a second BOM, or one after a space, is not
    JSON (json.loads of the bytes refuses it) and fails its row alone."""
    columns = [[BOM + b'{"i": 1}', BOM + b'{"i": 2}'],
               [b'{"i": 2, "tags": ["a"]}', BOM + b'{"i": 1}'],
               [b'{"i": 3}', BOM + b'{"i": 4, "tags": []}', b'{"i": 5}', BOM + b'{"i": 6}'],
               [BOM + b'{"i": 1}', BOM + BOM + b'{"i": 2}', b' ' + BOM + b'{"i": 3}', BOM,
                BOM + b'{"i": 4}']]
    for texts in columns:
        arr, rows, errors = decoded(schema, texts)
        for text, row, error in zip(texts, rows, errors):
            try:
                truth = json.loads(text)
            except ValueError:
                assert row is None and error and "JSON" in error, (text, error)
                continue
            assert error is None, (text, error)
            if "properties" in schema:         # the reader's fields, null where the value lacks them
                assert row == {k: truth.get(k) for k in schema["properties"]}, text
            else:
                same(row, truth)
    values = kbatch.JsonValues().decode([b'{"i": 1}', BOM + b'{"i": 2}', BOM + b'{"i": 3}'])
    assert values.to_pylist() == [{"i": 1}, {"i": 2}, {"i": 3}]


def exact(text: str):
    """json.loads with every number exact (a Decimal)."""
    return json.loads(text, parse_float=decimal.Decimal, parse_int=decimal.Decimal)


UNTYPED = {"type": "object", "properties": {
    "any": {},
    "e": {"enum": ["a", 1, None, {"k": 2}]},
    "c": {"const": {"x": [1]}},
    "o": {"allOf": [{"type": "object", "properties": {"x": {"type": "integer"}}}]},
    "l": {"type": "array", "items": {}},
    "t": True}}


def test_fields_that_name_no_one_type_hold_the_json_text_of_their_value():
    """``{}``, a mixed enum, a const of an object, allOf, ``true``, array
    items of ``{}``: every value valid for the schema (jsonschema) is a
    row; the field is a string holding the value's JSON text (json.loads of
    it is the member, numbers exactly as written), with no whitespace and
    members in the writer's order; a JSON null (or an absent member) is
    null."""
    members = ['"text"', "5", '{"k": [1, 2.50], "a": null}', "[1, 1e2]", "true", "-0.0",
               '"\\u00e9\\n\\"q\\""', "12345678901234567890123", "1.0000000000000000000001"]
    texts = [f'{{"any": {m}}}' for m in members]
    texts += ['{"e": 1}', '{"e": {"k": 2}}', '{"e": "a"}', '{"e": null}', '{"c": {"x": [1]}}',
              '{"o": {"x": 1, "y": [true]}}', '{"l": [{"b": 1}, "s", null, 2]}', '{"t": {"z": []}}',
              "{}"]
    arr, rows, errors = decoded(UNTYPED, [t.encode() for t in texts])
    assert arr.type == pa.struct([(k, pa.string()) for k in ("any", "e", "c", "o")]
                                 + [("l", pa.list_(pa.string())), ("t", pa.string())])
    assert errors == [None] * len(texts)
    for text, row in zip(texts, rows):
        value = json.loads(text)
        assert valid(UNTYPED, value), text
        truth = exact(text)
        for name, member in truth.items():
            got = row[name]
            if member is None:
                assert got is None
            elif name == "l":
                assert [None if g is None else exact(g) for g in got] == member
            else:
                assert exact(got) == member, (text, got)
                assert json.dumps(json.loads(got), separators=(",", ":"), ensure_ascii=False) == \
                    json.dumps(json.loads(text)[name], separators=(",", ":"), ensure_ascii=False) \
                    or any(c in got for c in ".eE"), (text, got)
        assert all(row[k] is None for k in row if k not in truth)
    # numbers as written, no whitespace, the writer's member order
    assert rows[2]["any"] == '{"k":[1,2.50],"a":null}' and rows[3]["any"] == "[1,1e2]"
    assert rows[5]["any"] == "-0.0" and rows[6]["any"] == '"\u00e9\\n\\"q\\""'
    bad, rows, errors = decoded(UNTYPED, [b'{"any": NaN}', b'{"any": [1,]}', b'{"any": 1}'])
    assert rows[:2] == [None, None] and all(errors[:2]) and rows[2]["any"] == "1"


def test_an_enum_or_const_of_one_type_is_that_type():
    """An enum whose values are all strings is a string column (the value,
    not its JSON text), of integers int64, and so on."""
    schema = {"type": "object", "properties": {
        "s": {"enum": ["a", "b", None]}, "i": {"const": 5}, "n": {"enum": [1, 2.5]},
        "b": {"enum": [True]}}}
    text = b'{"s": "b", "i": 5, "n": 2.5, "b": true}'
    arr, rows, errors = decoded(schema, [text, b'{"s": null}'])
    assert valid(schema, json.loads(text))
    assert arr.type == pa.struct([("s", pa.string()), ("i", pa.int64()), ("n", pa.float64()),
                                  ("b", pa.bool_())])
    assert rows[0] == json.loads(text) and errors == [None, None]


def whole_int64(literal: str):
    """The int a JSON number literal is when its exact value is whole and
    within int64 (JSON Schema from draft 6), else None."""
    value = decimal.Decimal(literal)
    if value != int(value) or not -2 ** 63 <= value < 2 ** 63:
        return None
    return int(value)


INTEGERS = ["1.0", "1e2", "1E+2", "-0.0", "2.50e1", "-9223372036854775808.0", "9223372036854775807e0",
            "1.5", "1e-5", "9223372036854775808.0", "1.0000000000000000000001", "12.5e-1", "7"]


@pytest.mark.parametrize("shape", ["flat", "nested", "top"])
def test_integers_written_with_a_fraction_or_an_exponent(shape):
    """A JSON Schema integer is a number whose value is whole (draft 6 on;
    jsonschema agrees where a double holds the value): 1.0 and 1e2 are the
    integers 1 and 100; a fraction, or a whole number past int64, fails the
    row. In the compiled decoder's form (flat), in a list, at the top."""
    if shape == "flat":
        schema = FLAT
        texts = [f'{{"i": {x}}}' for x in INTEGERS]
    elif shape == "nested":
        schema = {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}}}}
        texts = [f'{{"l": [3, {x}]}}' for x in INTEGERS]
    else:
        schema = {"type": "integer"}
        texts = list(INTEGERS)
    arr, rows, errors = decoded(schema, [t.encode() for t in texts + texts[:1]])
    for literal, text, row, error in zip(INTEGERS, texts, rows, errors):
        truth = whole_int64(literal)
        if truth is not None and abs(truth) < 2 ** 53:
            assert valid(schema, json.loads(text)), text
        if truth is None:
            assert row is None and error and "integer" in error, (text, row, error)
            continue
        assert error is None, (text, error)
        got = row["i"] if shape == "flat" else row["l"][1] if shape == "nested" else row
        assert got == truth and type(got) is int, (text, got)
    assert rows[-1] == rows[0] and errors[-1] is None


def test_all_of_holds_the_json_text_of_its_value():
    """allOf names no one Arrow type: the field holds the value's JSON text
    (a valid object value is never a failed row)."""
    schema = {"type": "object", "properties": {"o": {"allOf": [
        {"type": "object", "properties": {"x": {"type": "integer"}}}, {"required": ["x"]}]}}}
    texts = [b'{"o": {"x": 1}}', b'{"o": {"x": 2, "more": "y"}}']
    arr, rows, errors = decoded(schema, texts)
    assert errors == [None, None] and arr.type.field("o").type == pa.string()
    for text, row in zip(texts, rows):
        assert valid(schema, json.loads(text)) and json.loads(row["o"]) == json.loads(text)["o"]


DATE_TIMES = ["2020-01-01T10:00:00Z", "2020-01-01T10:00:00.5+02:00", "2020-01-01T10:00Z",
              "2020-01-01T10Z", "2020-01-01T10:00:00+0200", "2020-01-01T10:00+02:00",
              "2020-01-01T10:00:00-05:30", "2020-01-01", "2020-01-01T10:00:00"]


@pytest.mark.parametrize("shape", ["flat", "nested"])
def test_a_date_time_is_rfc_3339s(shape):
    """RFC 3339 date-times (jsonschema's format checker) read as the instant
    (json.loads's text through datetime.fromisoformat); a date-time without
    seconds or with an offset without its colon fails its row."""
    if shape == "flat":
        schema = {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}
        texts = [json.dumps({"t": d}).encode() for d in DATE_TIMES]
    else:
        schema = {"type": "object", "properties": {"t": {"type": "array", "items": {
            "type": "string", "format": "date-time"}}}}
        texts = [json.dumps({"t": [d]}).encode() for d in DATE_TIMES]
    arr, rows, errors = decoded(schema, texts)
    for d, text, row, error in zip(DATE_TIMES, texts, rows, errors):
        if valid(schema, json.loads(text)):
            want = datetime.datetime.fromisoformat(d).astimezone(datetime.timezone.utc)
            assert error is None, (d, error)
            assert (row["t"] if shape == "flat" else row["t"][0]) == want
        else:
            assert row is None and error, (d, row)
