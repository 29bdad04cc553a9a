"""JSON Schema payloads: values written by the json module with Confluent's
framing built here, decoded against what json.loads says, evolution by
field name, and bad values as clear errors or null rows."""

from __future__ import annotations

import datetime
import json
import struct

import pyarrow as pa
import pytest

import kbatch
from kbatch.errors import PayloadError

V1 = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
V2 = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": ["string", "null"]},
    "when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
    "score": {"type": "number"}, "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}}, "inner": {"$ref": "#/$defs/Inner"}},
    "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "integer"}}}}}


def frame(sid, obj, **dumps):
    return b"\x00" + struct.pack(">i", sid) + json.dumps(obj, **dumps).encode()


def registry():
    return kbatch.registry([
        {"subject": "j-value", "version": 1, "id": 1, "schemaType": "JSON", "schema": json.dumps(V1)},
        {"subject": "j-value", "version": 2, "id": 2, "schemaType": "JSON", "schema": json.dumps(V2)}])


def test_json_schema_types_and_evolution_by_name():
    reg = registry()
    objs = [(1, {"id": 1, "name": "a"}),
            (2, {"id": 2, "name": None, "when": "2024-05-06T07:08:09.5Z", "day": "2024-05-06", "score": 1.5,
                 "ok": True, "tags": ["x", "y"], "inner": {"x": 3}, "unknown": [1, 2]}),
            (2, {"id": 3})]
    arr = reg.decode([frame(sid, o, indent=2) for sid, o in objs] + [None])
    arr.validate(full=True)
    assert arr.type.field("when").type == pa.timestamp("us", "UTC") and arr.type.field("day").type == pa.date32()
    rows = arr.to_pylist()
    for (_, o), row in zip(objs, rows):
        for k, v in o.items():
            if k == "unknown":
                assert k not in row
            elif k == "when":
                assert row[k] == datetime.datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=datetime.timezone.utc)
            elif k == "day":
                assert row[k] == datetime.date(2024, 5, 6)
            else:
                assert row[k] == v
        assert all(row[k] is None for k in row if k not in o)
    assert rows[-1] is None


def test_bad_json_values():
    reg = registry()
    good = frame(1, {"id": 1, "name": "a"})
    bad = [b"\x00\x00\x00\x00\x01{nope", frame(1, {"id": "seven"}), frame(1, [1, 2]), frame(9, {})]
    arr, errors = reg.decode([good] + bad, on_error="null", with_errors=True, subject="j-value")
    assert arr.to_pylist()[0]["id"] == 1 and arr.to_pylist()[1:] == [None] * 4
    assert errors[0].as_py() is None and all(errors.to_pylist()[1:])
    with pytest.raises(PayloadError, match="record offset 11"):
        reg.decode([good, bad[0]], offsets=[10, 11], subject="j-value")


@pytest.mark.parametrize("spoiler", [False, True], ids=["one read", "value by value"])
def test_raw_newlines_are_whitespace_only_outside_strings(spoiler):
    """A raw CR or LF is JSON whitespace between tokens and invalid inside a
    string (json.loads refuses it): the first decodes, the second is a failed
    row, whether the column is read at once or (a value of the wrong type
    among them) value by value."""
    reg = registry()
    objs = [{"id": k, "name": f"n{k}"} for k in range(6)]
    values = [frame(1, objs[0]), frame(1, objs[1], indent=2),
              b"\x00\x00\x00\x00\x01" + b'{"id": 2,\r\n "name": "n2"}',
              b"\x00\x00\x00\x00\x01" + b'{"id": 3, "name": "a\nb"}',           # raw LF inside a string
              None, b"", frame(9, objs[4]),                                      # null, empty, unknown id
              b"\x00\x00\x00\x00\x01" + b'{"id": 5, "name": "c\rd"}',           # raw CR inside a string
              frame(1, objs[5])]
    if spoiler:
        values.append(frame(1, {"id": "not an integer"}))
    arr, errors = reg.decode(values, on_error="null", with_errors=True, subject="j-value")
    arr.validate(full=True)
    rows, errs = arr.to_pylist(), errors.to_pylist()
    for i in (0, 1, 2, 8):
        text = values[i][5:]
        truth = json.loads(text)
        assert {k: v for k, v in rows[i].items() if v is not None} == truth and errs[i] is None
    for i in (3, 7):
        with pytest.raises(ValueError):
            json.loads(values[i][5:])
        assert rows[i] is None and "not JSON" in errs[i]
    assert rows[4] is None and errs[4] is None and rows[5] is None and rows[6] is None and errs[6]
    if spoiler:
        assert rows[9] is None and errs[9]
    with pytest.raises(PayloadError, match="record offset 3"):
        reg.decode(values[:4], offsets=[0, 1, 2, 3], subject="j-value")


def test_json_without_a_schema_is_inferred():
    """Unframed JSON (``JsonValues``) and a registered schema that names no
    fields: the type is what pyarrow's JSON reader infers; each row equals
    json.loads of its value (fields it lacks are null)."""
    objs = [{"id": 1, "name": "a", "score": 1.5, "tags": ["x"], "inner": {"x": 1, "y": "z"}, "ok": True},
            {"id": 2, "name": None, "score": 2.0, "tags": [], "inner": {"x": 2}},
            {"id": 3, "extra": "only here"}]
    texts = [json.dumps(o, indent=1 if i == 1 else None).encode() for i, o in enumerate(objs)]
    values = texts + [None, b""]

    def same(row, truth):
        """row is truth, with null for the fields of other rows that truth lacks."""
        if isinstance(truth, dict):
            assert set(truth) <= set(row)
            for k in row:
                if k in truth:
                    same(row[k], truth[k])
                else:
                    assert row[k] is None
        else:
            assert row == truth

    arr = kbatch.JsonValues().decode(values)
    arr.validate(full=True)
    assert arr.type.field("id").type == pa.int64() and arr.type.field("tags").type.value_type in (pa.string(), pa.null())
    for text, row in zip(texts, arr.to_pylist()):
        same(row, json.loads(text))
    assert arr.to_pylist()[3:] == [None, None]

    reg = kbatch.registry([{"subject": "free-value", "version": 1, "id": 5, "schemaType": "JSON",
                            "schema": json.dumps({"type": "object"})}])
    framed = [b"\x00" + struct.pack(">i", 5) + t for t in texts]
    assert reg.decode(framed).to_pylist() == arr.to_pylist()[:3]

    bad = texts + [b"[1, 2]", b"{nope", b'{"id": 4, "name": "raw\nnewline"}']
    arr, errors = kbatch.JsonValues().decode(bad, on_error="null", with_errors=True)
    assert arr.to_pylist()[3:] == [None] * 3 and errors.to_pylist()[:3] == [None] * 3 and all(errors.to_pylist()[3:])
    for text, row in zip(texts, arr.to_pylist()):
        same(row, json.loads(text))
    with pytest.raises(PayloadError, match="record offset 103: a JSON value that is not an object"):
        kbatch.JsonValues().decode(bad, offsets=list(range(100, 106)))
    with pytest.raises(kbatch.SchemaError, match="conflict"):
        kbatch.JsonValues().decode([b'{"a": 1}', b'{"a": "one"}'])
    typed = kbatch.JsonValues(V1).decode(texts)
    assert typed.type == pa.struct([("id", pa.int64()), ("name", pa.string())])


def test_nullable_alternatives_and_unions():
    """Confluent's JSON Schema generator writes a nullable field as
    ``oneOf [null, T]``: read as a nullable T (json.loads's values). A
    union of several real types has no one Arrow type: refused naming it,
    never a string column that fails every other value."""
    from kbatch.errors import SchemaError
    for alts in ({"oneOf": [{"type": "null"}, {"type": "integer"}]},
                 {"anyOf": [{"type": "integer"}, {"type": "null"}]}):
        schema = {"type": "object", "properties": {"a": alts}}
        reg = kbatch.registry([{"subject": "u-value", "version": 1, "id": 1,
                                "schemaType": "JSON", "schema": json.dumps(schema)}])
        objs = [{"a": 9}, {"a": None}, {}]
        got = reg.decode([frame(1, o) for o in objs])
        assert got.type == pa.struct([pa.field("a", pa.int64())])
        assert got.to_pylist() == [{"a": json.loads(json.dumps(o)).get("a")} for o in objs]
        with pytest.raises(PayloadError):
            reg.decode([frame(1, {"a": "not an integer"})])
    for prop in ({"type": ["integer", "string"]},
                 {"anyOf": [{"type": "integer"}, {"type": "string"}]}):
        schema = {"type": "object", "properties": {"a": prop}}
        reg = kbatch.registry([{"subject": "u-value", "version": 1, "id": 1,
                                "schemaType": "JSON", "schema": json.dumps(schema)}])
        with pytest.raises(SchemaError, match="no one Arrow type"):
            reg.decode([frame(1, {"a": 9})])


def test_a_date_that_is_not_one_fails_its_row():
    """2024-02-30 in a ``format: date`` field: a PayloadError naming the row
    (or its null row), never pyarrow's own exception for the whole column."""
    schema = {"type": "object", "properties": {"i": {"type": "integer"},
                                               "d": {"type": "string", "format": "date"}}}
    reg = kbatch.registry([{"subject": "d-value", "version": 1, "id": 1,
                            "schemaType": "JSON", "schema": json.dumps(schema)}])
    rows = [frame(1, {"i": 1, "d": "2024-02-30"}), frame(1, {"i": 2, "d": "2024-02-29"})]
    with pytest.raises(PayloadError) as exc:
        reg.decode(rows)
    assert exc.value.row == 0
    got, errors = reg.decode(rows, on_error="null", with_errors=True)
    assert got.to_pylist() == [None, {"i": 2, "d": datetime.date(2024, 2, 29)}]
    assert errors[0].as_py() is not None and errors[1].as_py() is None


def test_inferred_columns_never_round_large_integers():
    """Without a schema, pyarrow infers a field holding 1.5 and
    9007199254740993 as a double, which rounds the integer: refused, naming
    the way out. Large integers in a field of integers stay exact."""
    from kbatch.errors import SchemaError
    plain = kbatch.JsonValues()
    mixed = [json.dumps(o).encode() for o in ({"x": 9007199254740993}, {"x": 1.5})]
    with pytest.raises(SchemaError, match="rounds it"):
        plain.decode(mixed)
    exact = [json.dumps(o).encode() for o in ({"id": 1234567890123456789, "p": 1.5},
                                              {"id": 5, "p": 2})]
    assert plain.decode(exact).to_pylist() == [json.loads(t) for t in exact]


def test_date_time_needs_a_utc_offset():
    """RFC 3339's date-time carries its offset; a value without one names no
    instant (pyarrow's reader would take it as UTC): the row fails, in a
    nested list too, and offsets other than Z are applied."""
    reg = kbatch.registry([{"subject": "t-value", "version": 1, "id": 5, "schemaType": "JSON",
                            "schema": json.dumps({"type": "object", "properties": {
                                "at": {"type": "string", "format": "date-time"},
                                "all": {"type": "array", "items": {"type": "string",
                                                                   "format": "date-time"}}}})}])
    values = [frame(5, {"at": "2024-05-06T07:08:09+02:00", "all": ["2024-05-06T07:08:09Z"]}),
              frame(5, {"at": "2024-05-06T07:08:09"}),
              frame(5, {"all": ["2024-05-06T07:08:09Z", "2024-05-06T07:08:09.25"]}),
              frame(5, {"at": "2024-05-06T05:08:09.000001Z"})]
    arr, errors = reg.decode(values, on_error="null", with_errors=True)
    rows = arr.to_pylist()
    utc = datetime.timezone.utc
    assert rows[0]["at"] == datetime.datetime(2024, 5, 6, 5, 8, 9, tzinfo=utc)
    assert rows[0]["all"] == [datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=utc)]
    assert rows[1] is None and rows[2] is None
    assert rows[3]["at"] == datetime.datetime(2024, 5, 6, 5, 8, 9, 1, tzinfo=utc)
    assert errors[0].as_py() is None and errors[1].as_py() and errors[2].as_py()
    with pytest.raises(PayloadError, match="offset 1"):
        reg.decode(values[:2], offsets=[0, 1])


def test_refs_to_referenced_schemas():
    """A $ref naming a schema reference (Confluent: the reference's name is
    the document a $ref reads), whole or a definition inside it, nested
    references too."""
    address = {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}}
    customer = {"type": "object", "properties": {"name": {"type": "string"},
                                                 "home": {"$ref": "address.json"}},
                "definitions": {"Level": {"type": "string", "format": "date"}}}
    order = {"type": "object", "properties": {
        "id": {"type": "integer"}, "buyer": {"$ref": "customer.json"},
        "since": {"$ref": "customer.json#/definitions/Level"}}}
    reg = kbatch.registry([
        {"subject": "address", "version": 1, "id": 20, "schemaType": "JSON", "schema": json.dumps(address)},
        {"subject": "customer", "version": 1, "id": 21, "schemaType": "JSON", "schema": json.dumps(customer),
         "references": [{"name": "address.json", "subject": "address", "version": 1}]},
        {"subject": "order-value", "version": 1, "id": 22, "schemaType": "JSON", "schema": json.dumps(order),
         "references": [{"name": "customer.json", "subject": "customer", "version": 1}]}])
    value = {"id": 7, "buyer": {"name": "Ann", "home": {"city": "Oslo", "zip": 150}}, "since": "2020-02-29"}
    arr = reg.decode([frame(22, value)])
    assert arr.type.field("buyer").type.field("home").type == pa.struct([("city", pa.string()), ("zip", pa.int64())])
    assert arr.to_pylist() == [dict(value, since=datetime.date(2020, 2, 29))]
    broken = kbatch.registry([{"subject": "o-value", "version": 1, "id": 30, "schemaType": "JSON",
                               "schema": json.dumps({"type": "object", "properties": {"x": {"$ref": "nope.json"}}})}])
    with pytest.raises(kbatch.SchemaError, match="no schema reference named 'nope.json'"):
        broken.decode([frame(30, {"x": 1})])


def test_a_json_null_fails_its_row_and_never_reaches_the_reader():
    """A payload whose JSON text is ``null`` is a JSON value that is not an
    object: its row fails (pyarrow's JSON reader crashes the process on a
    ``null`` line, so it must never see one), with a schema, inferred, and
    through JsonValues; a null inside a field is an ordinary null."""
    reg = registry()
    nulls = [b"\x00\x00\x00\x00\x01null", b"\x00\x00\x00\x00\x01  null\n"]
    arr, errors = reg.decode([frame(1, {"id": 1, "name": "a"})] + nulls + [frame(1, {"id": None})],
                             on_error="null", with_errors=True)
    rows = arr.to_pylist()
    assert rows[1:3] == [None, None] and rows[3]["id"] is None and rows[0]["id"] == 1
    assert errors.to_pylist()[1:3] == ["a JSON null, not an object"] * 2
    assert errors.to_pylist()[3] is None
    with pytest.raises(PayloadError, match="JSON null"):
        reg.decode(nulls)
    free = kbatch.registry([{"subject": "f-value", "version": 1, "id": 5, "schemaType": "JSON",
                             "schema": "{}"}])
    arr, errors = free.decode([b"\x00\x00\x00\x00\x05null", b'\x00\x00\x00\x00\x05{"a": 1}'],
                              on_error="null", with_errors=True)
    assert arr.to_pylist() == [None, {"a": 1}] and errors.to_pylist()[0] is not None
    values = kbatch.JsonValues(V1).decode([b'{"id": 1}', b"null"], on_error="null")
    assert values.to_pylist() == [{"id": 1, "name": None}, None]


def test_an_object_of_undeclared_members_is_refused_not_emptied():
    """A nested object whose members are only allowed by additionalProperties
    (or a bare {"type": "object"}) would be an empty struct: every member
    the writer put there dropped from a row that looks whole. It is refused
    with a SchemaError; an object that allows no members reads as one."""
    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "attrs": {"type": "object",
                                             "additionalProperties": {"type": "integer"}}}}
    reg = kbatch.registry([{"subject": "a-value", "version": 1, "id": 3, "schemaType": "JSON",
                            "schema": json.dumps(schema)}])
    with pytest.raises(kbatch.SchemaError, match="declares no properties"):
        reg.decode([frame(3, {"id": 1, "attrs": {"a": 9}})])
    with pytest.raises(kbatch.SchemaError, match="declares no properties"):
        kbatch.JsonValues({"type": "object", "properties": {"free": {"type": "object"}}})
    closed = kbatch.JsonValues({"type": "object", "properties": {
        "none": {"type": "object", "additionalProperties": False}}})
    assert closed.decode([b'{"none": {}}']).to_pylist() == [{"none": {}}]


def test_inferred_strings_that_look_like_times_stay_strings():
    """Without a schema each row equals json.loads of its value: pyarrow's
    inference would read ISO-looking strings as timestamps (an offset applied
    then dropped, a bare date as midnight, a column's type changing with
    its rows); they stay strings, nested ones too."""
    free = kbatch.registry([{"subject": "f-value", "version": 1, "id": 5, "schemaType": "JSON",
                             "schema": "{}"}])
    objs = [{"t": "2020-01-01T00:00:00+05:00", "s": "2020-01-01", "in": {"w": ["2021-02-03"]}},
            {"t": "2020-01-01 10:00:00", "s": "plain", "in": {"w": []}}]
    arr = free.decode([b"\x00\x00\x00\x00\x05" + json.dumps(o).encode() for o in objs])
    assert arr.to_pylist() == objs
    assert arr.type.field("t").type == pa.string()
    one = free.decode([b"\x00\x00\x00\x00\x05" + json.dumps({"s": "2020-01-01"}).encode()])
    assert one.to_pylist() == [{"s": "2020-01-01"}] and one.type.field("s").type == pa.string()
