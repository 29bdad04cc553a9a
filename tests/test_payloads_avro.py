"""Avro payloads decoded by kbatch.payloads against fastavro (the oracle):
every type and logical type, nested and recursive records, schema evolution
over five versions, references, random schemas and data (Hypothesis), and
damaged payloads (a clear error or a null row, never a wrong row)."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kbatch
from kbatch.errors import KbatchError, PayloadError, SchemaError, UnknownSchemaError
from tests.registry_ref import avro_bytes, avro_read, export, fastavro_view, frame, frame_guid, normalize

UTC = datetime.timezone.utc

EVERYTHING = {
    "type": "record", "name": "Everything", "namespace": "test", "fields": [
        {"name": "n", "type": "null"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "a", "type": {"type": "array", "items": "int"}},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt2", "type": ["long", "null"]},
        {"name": "u", "type": ["int", "string", "null", "Four"]},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {"name": "decf", "type": {"type": "fixed", "name": "D8", "size": 8, "logicalType": "decimal",
                                  "precision": 18, "scale": 2}},
        {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 60, "scale": 5}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "tsn", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
        {"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}},
        {"name": "cts", "type": {"type": "long", "connect.name": "org.apache.kafka.connect.data.Timestamp"}},
        {"name": "cdate", "type": {"type": "int", "connect.name": "org.apache.kafka.connect.data.Date"}},
        {"name": "cdec", "type": {"type": "bytes", "connect.name": "org.apache.kafka.connect.data.Decimal",
                                  "connect.parameters": {"scale": "2"}}},
    ]}


def everything(i: int) -> dict:
    return {
        "n": None, "b": i % 2 == 0, "i": -(2 ** 31) + i if i % 3 == 0 else i * 1000, "l": 2 ** 62 - i,
        "f": 1.5 * i, "d": -2.25 * i, "by": bytes(range(i % 7)), "s": "ünïcødé " * (i % 4),
        "fx": bytes([i, 1, 2, 3]), "e": ["RED", "GREEN", "BLUE"][i % 3], "a": list(range(i % 5)),
        "m": {f"k{j}": "v" * j for j in range(i % 3)}, "opt": None if i % 2 else f"o{i}",
        "opt2": i if i % 2 else None, "u": [i, str(i), None, b"abcd"][i % 4],
        "dec": decimal.Decimal(f"{-i * 1234567}.125"), "decf": decimal.Decimal(f"{i * 99}.01"),
        "big": decimal.Decimal("1" * 50 + ".12345") * (-1 if i % 2 else 1),
        "uid": str(uuid.UUID(int=i * 7919)), "date": datetime.date(1970, 1, 1) + datetime.timedelta(days=i * 400),
        "tms": datetime.time(1, 2, 3, (i % 1000) * 1000), "tus": datetime.time(23, 59, 59, i),
        "tsm": datetime.datetime(2024, 5, 6, 7, 8, 9, (i % 1000) * 1000, tzinfo=UTC),
        "tsu": datetime.datetime(1969, 12, 31, 23, 59, 59, i, tzinfo=UTC), "tsn": 1_700_000_000_123_456_789 + i,
        "ltm": datetime.datetime(2001, 2, 3, 4, 5, 6, 7000), "ltu": datetime.datetime(2001, 2, 3, 4, 5, 6, i),
        "dur": (i).to_bytes(4, "little") + (i + 1).to_bytes(4, "little") + (i + 2).to_bytes(4, "little"),
        "cts": 1_600_000_000_000 + i, "cdate": 19000 + i, "cdec": (12345 * i).to_bytes(4, "big", signed=True),
    }


def make_registry(*entries):
    return kbatch.registry(export(*entries))


def test_every_type_and_logical_type_against_fastavro():
    reg = make_registry(("t-value", 1, 42, EVERYTHING))
    recs = [everything(i) for i in range(40)]
    payloads = [avro_bytes(EVERYTHING, r) for r in recs]
    arr = reg.decode([frame(42, p) for p in payloads])
    arr.validate(full=True)
    t = arr.type
    assert t.field("dec").type == pa.decimal128(12, 3) and t.field("big").type == pa.decimal256(60, 5)
    assert t.field("decf").type == pa.decimal128(18, 2) and t.field("cdec").type == pa.decimal128(38, 2)
    assert t.field("uid").type == pa.uuid() and t.field("e").type == pa.dictionary(pa.int32(), pa.string())
    assert t.field("tsm").type == pa.timestamp("ms", "UTC") and t.field("ltu").type == pa.timestamp("us")
    assert t.field("tsn").type == pa.timestamp("ns", "UTC") and t.field("date").type == pa.date32()
    assert t.field("tms").type == pa.time32("ms") and t.field("tus").type == pa.time64("us")
    assert t.field("dur").type == pa.month_day_nano_interval() and t.field("fx").type == pa.binary(4)
    assert t.field("cts").type == pa.timestamp("ms", "UTC") and t.field("cdate").type == pa.date32()
    assert t.field("u").type.mode == "dense" and t.field("m").type == pa.map_(pa.string(), pa.string())
    got = arr.to_pylist()
    tsn = arr.field("tsn").cast(pa.int64()).to_pylist()
    cts = arr.field("cts").cast(pa.int64()).to_pylist()
    cdate = arr.field("cdate").cast(pa.int32()).to_pylist()
    cdec = arr.field("cdec").to_pylist()
    for i, p in enumerate(payloads):
        want = fastavro_view(avro_read(p, EVERYTHING), EVERYTHING)
        row = normalize(got[i], EVERYTHING)
        for name in ("tsn", "cts", "cdate", "cdec"):
            row.pop(name), want.pop(name)
        assert row == want, i
        assert tsn[i] == recs[i]["tsn"] and cts[i] == recs[i]["cts"] and cdate[i] == recs[i]["cdate"]
        assert cdec[i] == decimal.Decimal(12345 * i).scaleb(-2)


NESTED = {
    "type": "record", "name": "Outer", "fields": [
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}},
        {"name": "list", "type": {"type": "array", "items": "Inner"}},
        {"name": "maybe", "type": ["null", "Inner"]},
        {"name": "mapofarrays", "type": {"type": "map", "values": {"type": "array", "items": ["null", "double"]}}},
        {"name": "choice", "type": ["Inner", "string", {"type": "array", "items": "long"}]},
    ]}


def nested(i: int) -> dict:
    inner = {"x": i, "tags": [f"t{j}" for j in range(i % 3)]}
    return {"inner": inner, "list": [inner] * (i % 4), "maybe": None if i % 3 == 0 else inner,
            "mapofarrays": {str(j): [None if k % 2 else float(k) for k in range(j)] for j in range(i % 4)},
            "choice": [inner, str(i), list(range(i % 3))][i % 3]}


def test_nested_records_arrays_maps_and_unions():
    reg = make_registry(("n-value", 1, 7, NESTED))
    payloads = [avro_bytes(NESTED, nested(i)) for i in range(30)]
    arr = reg.decode([frame(7, p) for p in payloads] + [None])
    arr.validate(full=True)
    got = arr.to_pylist()
    assert got[-1] is None
    for i, p in enumerate(payloads):
        assert normalize(got[i], NESTED) == fastavro_view(avro_read(p, NESTED), NESTED), i


LINKED = {"type": "record", "name": "Node", "fields": [
    {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
TREE = {"type": "record", "name": "Tree", "fields": [
    {"name": "label", "type": "string"}, {"name": "children", "type": {"type": "array", "items": "Tree"}}]}


def linked(depth: int) -> dict:
    node = None
    for v in range(depth):
        node = {"value": v, "next": node}
    return node


def test_recursive_records_unrolled_and_too_deep_is_an_error():
    reg = make_registry(("l-value", 1, 1, LINKED), ("t-value", 1, 2, TREE))
    payloads = [avro_bytes(LINKED, linked(d)) for d in (1, 2, 3, 4)]
    arr = reg.decode([frame(1, p) for p in payloads], max_depth=4)
    for p, got in zip(payloads, arr.to_pylist()):
        assert _prune(got) == avro_read(p, LINKED)
    deep = frame(1, avro_bytes(LINKED, linked(6)))
    with pytest.raises(PayloadError, match="deeper than max_depth") as exc:
        reg.decode([deep], offsets=[99])
    assert exc.value.offset == 99 and exc.value.schema_id == 1
    arr, errors = reg.decode([deep, frame(1, payloads[0])], on_error="null", with_errors=True)
    assert arr.to_pylist()[0] is None and "max_depth" in errors[0].as_py() and errors[1].as_py() is None
    assert _prune(reg.decode([deep], max_depth=7).to_pylist()[0]) == linked(6)
    tree = {"label": "root", "children": [{"label": "a", "children": []},
                                          {"label": "b", "children": [{"label": "c", "children": []}]}]}
    arr = reg.decode([frame(2, avro_bytes(TREE, tree))], max_depth=3)
    assert _prune(arr.to_pylist()[0]) == tree


def _prune(v):
    """Arrow's unrolled recursion gives deeper null levels: the same value."""
    if isinstance(v, dict):
        return {k: _prune(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_prune(x) for x in v]
    return v


# --- evolution: five versions of one subject ---------------------------------------------

V1 = {"type": "record", "name": "User", "namespace": "ev", "fields": [
    {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}
V2 = {"type": "record", "name": "User", "namespace": "ev", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None}]}
V3 = {"type": "record", "name": "User", "namespace": "ev", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "score", "type": "float", "default": 0.5},
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "PRO"], "default": "FREE"},
     "default": "FREE"}]}
V4 = {"type": "record", "name": "User", "namespace": "ev", "fields": [
    {"name": "id", "type": "long"}, {"name": "full_name", "type": "string", "aliases": ["name"]},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "score", "type": "double", "default": 0.5},
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "PRO", "ENTERPRISE"],
                              "default": "FREE"}, "default": "FREE"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["new"]}]}
V5 = {"type": "record", "name": "User", "namespace": "ev", "fields": [
    {"name": "id", "type": "long"}, {"name": "full_name", "type": "string", "aliases": ["name"]},
    {"name": "score", "type": "double", "default": 0.5},
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "PRO"], "default": "FREE"},
     "default": "FREE"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["new"]},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"], "default": None}]},
     "default": {"city": "nowhere", "zip": None}},
    {"name": "raw", "type": "bytes", "default": "\u00ff\u0000"}]}
VERSIONS = [V1, V2, V3, V4, V5]


def user(v: int, i: int) -> dict:
    r = {"id": i, "name": f"user{i}", "email": None if i % 2 else f"u{i}@x", "score": i / 4,
         "tier": ["FREE", "PRO", "ENTERPRISE"][i % (3 if v == 4 else 2)], "tags": [f"t{i}"] * (i % 3),
         "address": {"city": f"c{i}", "zip": i if i % 2 else None}, "raw": bytes([i])}
    if v >= 4:
        r["full_name"] = r.pop("name")
    return r


def test_evolution_across_five_versions_matches_fastavro_resolution():
    reg = make_registry(*[("users-value", v + 1, 100 + v, s) for v, s in enumerate(VERSIONS)])
    values, expected = [], []
    for i in range(40):
        v = i % 5
        payload = avro_bytes(VERSIONS[v], user(v + 1, i))
        values.append(frame(100 + v, payload))
        want = avro_read(payload, VERSIONS[v], V5)     # ENTERPRISE (v4) reads as v5's default FREE
        if isinstance(want["raw"], str):    # fastavro hands a bytes default back as its JSON string;
            want["raw"] = want["raw"].encode("latin-1")    # the spec: code points 0-255 are the bytes
        expected.append(want)
    arr = reg.decode(values)        # the subject's latest version is the reader
    arr.validate(full=True)
    assert arr.type.field("score").type == pa.float64() and arr.type.field("id").type == pa.int64()
    got = [normalize(x, V5) for x in arr.to_pylist()]
    assert got == expected
    assert got[0]["address"] == {"city": "nowhere", "zip": None} and got[0]["raw"] == b"\xff\x00"
    # the same with an explicit reader schema (the first version): fields dropped, name by alias
    v1_reader = {"type": "record", "name": "User", "namespace": "ev", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string", "aliases": ["full_name"]}]}
    arr = reg.decode(values, reader_schema=v1_reader)
    assert arr.to_pylist() == [{"id": i, "name": f"user{i}"} for i in range(40)]


ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "status", "type": "string", "default": "NEW"}]}


def shared_id_registry():
    """Id 1 registered under orders-value and audit-value (the same text, one
    id, as the registry does), id 2 orders-value's second version."""
    return make_registry(("orders-value", 1, 1, ORDER_V1), ("audit-value", 1, 1, ORDER_V1),
                         ("orders-value", 2, 2, ORDER_V2))


def test_without_a_subject_each_id_has_its_own_reader_whatever_its_neighbours():
    """No subject, no topic: an id read alone and beside others decodes to
    the same value (fastavro's, with that id's reader), or the column is
    refused; never one value alone and another beside id 2."""
    reg = shared_id_registry()
    a = avro_bytes(ORDER_V1, {"id": 42})
    b = avro_bytes(ORDER_V2, {"id": 43, "status": "PAID"})
    # id 1's subjects disagree on a latest version: it reads with its own schema
    assert reg.decode([frame(1, a)]).to_pylist() == [avro_read(a, ORDER_V1)]
    assert reg.decode([frame(1, a), None, frame(1, a)]).to_pylist() == [avro_read(a, ORDER_V1), None,
                                                                         avro_read(a, ORDER_V1)]
    # id 2 is in orders-value only: its latest
    assert reg.decode([frame(2, b)]).to_pylist() == [avro_read(b, ORDER_V2, ORDER_V2)]
    with pytest.raises(SchemaError, match=r"different reader schemas .*pass subject="):
        reg.decode([frame(1, a), frame(2, b)])
    got = reg.decode([frame(1, a), frame(2, b)], subject="orders-value").to_pylist()
    assert got == [avro_read(a, ORDER_V1, ORDER_V2), avro_read(b, ORDER_V2, ORDER_V2)]
    # the topic's subject, when the registry holds it, is the reader (as Spark's default)
    assert reg.decode([frame(1, a)], topic_subject="orders-value").to_pylist() == [
        avro_read(a, ORDER_V1, ORDER_V2)]
    assert reg.decode([frame(1, a)], topic_subject="nowhere-value").to_pylist() == [avro_read(a, ORDER_V1)]


@pytest.mark.parametrize("text", ["null", '"null"', ' {"type": "null"} '])
def test_a_top_level_null_schema(text):
    """The schema null, written bare (as a registry export may hold a
    primitive) or quoted: its datum is no bytes, read as fastavro reads it."""
    reg = kbatch.registry([{"subject": "n-value", "version": 1, "id": 1, "schema": text}])
    arr, errors = reg.decode([frame(1, b""), frame(1, b"x")], on_error="null", with_errors=True)
    assert arr.to_pylist() == [avro_read(b"", "null"), None]
    with pytest.raises(ValueError):
        avro_read(b"x", "null")
    assert errors[0].as_py() is None and "left over" in errors[1].as_py()


def test_a_field_without_default_fails_the_rows_of_that_writer_only():
    reader = {"type": "record", "name": "User", "namespace": "ev", "fields": [
        {"name": "id", "type": "long"}, {"name": "email", "type": "string"}]}
    reg = make_registry(("users-value", 1, 1, V1), ("users-value", 2, 2, V2))
    values = [frame(1, avro_bytes(V1, user(1, 1))), frame(2, avro_bytes(V2, user(2, 2)))]
    arr, errors = reg.decode(values, reader_schema=reader, on_error="null", with_errors=True)
    assert arr.to_pylist() == [None, {"id": 2, "email": "u2@x"}]
    assert "no default" in errors[0].as_py() and errors[1].as_py() is None
    with pytest.raises(PayloadError, match="cannot be read"):
        reg.decode(values, reader_schema=reader)


def test_references_across_subjects():
    address = {"type": "record", "name": "Address", "namespace": "com.acme",
               "fields": [{"name": "street", "type": "string"}]}
    customer = {"type": "record", "name": "Customer", "namespace": "com.acme", "fields": [
        {"name": "name", "type": "string"}, {"name": "home", "type": "Address"},
        {"name": "other", "type": {"type": "array", "items": "com.acme.Address"}}]}
    reg = make_registry(("address", 1, 5, address),
                        ("customers-value", 1, 6, customer,
                         [{"name": "com.acme.Address", "subject": "address", "version": 1}]))
    full = dict(customer, fields=[customer["fields"][0], dict(customer["fields"][1], type=address),
                                  dict(customer["fields"][2], type={"type": "array", "items": "Address"})])
    rec = {"name": "ann", "home": {"street": "main"}, "other": [{"street": "a"}, {"street": "b"}]}
    arr = reg.decode([frame(6, avro_bytes(full, rec))])
    assert arr.to_pylist() == [rec]


def test_framing_errors_name_offset_and_schema_id():
    reg = make_registry(("x-value", 1, 3, "string"))
    good = frame(3, avro_bytes("string", "hi"))
    cases = [(b"\x07abcde", "magic byte"), (b"\x00\x00\x00", "framing"), (frame(9, b"\x02a"), "schema id"),
             (good + b"x", "left over"), (good[:-1], "truncated"),
             (frame(3, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), "varint"),
             (frame(3, b"\x04\xff\xfe"), "UTF-8")]
    for bad, words in cases:
        with pytest.raises(PayloadError, match=words) as exc:
            reg.decode([good, bad], offsets=[500, 501])
        assert exc.value.offset == 501 and isinstance(exc.value, KbatchError)
        assert "record offset 501" in str(exc.value)
        if words not in ("magic byte", "framing"):
            assert exc.value.schema_id in (3, 9)
    with pytest.raises(UnknownSchemaError, match="schema id 9"):
        reg.decode([frame(9, b"")+b"x"], offsets=[1])
    arr, errors = reg.decode([good] + [c for c, _ in cases], on_error="null", with_errors=True)
    assert arr.to_pylist() == ["hi"] + [None] * len(cases)
    assert errors.null_count == 1 and all(errors.to_pylist()[1:])


def test_magic_one_guid_and_header_ids():
    guid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    entries = export(("g-value", 1, 11, "long"))
    entries[0]["guid"] = str(guid)
    reg = kbatch.registry(entries)
    payload = avro_bytes("long", 77)
    assert reg.decode([frame_guid(guid.bytes, payload)]).to_pylist() == [77]
    assert reg.decode([payload, frame(11, payload)],
                      header_ids=[b"\x01" + guid.bytes, None]).to_pylist() == [77, 77]
    with pytest.raises(UnknownSchemaError):
        reg.decode([frame_guid(uuid.uuid4().bytes, payload)])
    # a header with a byte more (only Protobuf's carries message indexes) or
    # an id with a byte less is no header id of an Avro value
    arr, errors = reg.decode([payload, payload], header_ids=[b"\x01" + guid.bytes + b"\x00", b"\x00\x00\x00\x0b"],
                             on_error="null", with_errors=True)
    assert arr.to_pylist() == [None, None] and all(errors.to_pylist())


def test_inputs_kbatch_columns_pyarrow_and_lists(tmp_path):
    reg = make_registry(("x-value", 1, 3, "string"))
    values = [frame(3, avro_bytes("string", s)) for s in ("a", "bb")] + [None]
    kbatch.write_segment(tmp_path / "00000000000000000000.log", [{"value": v} for v in values])
    records = kbatch.read_segment(tmp_path / "00000000000000000000.log")
    views = kbatch.read_segment(tmp_path / "00000000000000000000.log", zero_copy=True)
    want = ["a", "bb", None]
    assert reg.decode(records.value).to_pylist() == want
    assert reg.decode(views.value).to_pylist() == want
    assert reg.decode(pa.array(values, pa.binary())).to_pylist() == want
    assert reg.decode(pa.chunked_array([pa.array(values[:1]), pa.array(values[1:])])).to_pylist() == want
    assert reg.decode(pa.array(values, pa.large_binary()).slice(1)).to_pylist() == want[1:]


def test_schema_errors_are_kbatch_errors():
    with pytest.raises(SchemaError):
        make_registry(("x", 1, 1, '{"type": "record", "name": "R"}')).decode([frame(1, b"")])
    with pytest.raises(SchemaError):
        make_registry(("x", 1, 1, "nosuchtype")).decode([frame(1, b"")])


# --- random schemas and data (Hypothesis) ---------------------------------------------------

@st.composite
def schemas(draw, depth=0, names=None):
    names = names if names is not None else [0]
    leaves = st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes", "string",
                              "fixed", "enum", "decimal", "date", "timestamp-micros", "uuid"])
    kinds = leaves if depth >= 3 else st.one_of(leaves, st.sampled_from(["record", "array", "map", "union",
                                                                         "nullable"]))
    kind = draw(kinds)
    names[0] += 1
    n = names[0]
    if kind == "fixed":
        return {"type": "fixed", "name": f"F{n}", "size": draw(st.integers(0, 20))}
    if kind == "enum":
        return {"type": "enum", "name": f"E{n}", "symbols": [f"S{i}" for i in range(draw(st.integers(1, 4)))]}
    if kind == "decimal":
        p = draw(st.integers(1, 40))
        return {"type": "bytes", "logicalType": "decimal", "precision": p, "scale": draw(st.integers(0, p))}
    if kind in ("date", "timestamp-micros"):
        return {"type": "int" if kind == "date" else "long", "logicalType": kind}
    if kind == "uuid":
        return {"type": "string", "logicalType": "uuid"}
    if kind == "record":
        k = draw(st.integers(0, 4))
        return {"type": "record", "name": f"R{n}",
                "fields": [{"name": f"f{i}", "type": draw(schemas(depth + 1, names))} for i in range(k)]}
    if kind == "array":
        return {"type": "array", "items": draw(schemas(depth + 1, names))}
    if kind == "map":
        return {"type": "map", "values": draw(schemas(depth + 1, names))}
    if kind == "nullable":
        inner = draw(schemas(depth + 1, names).filter(lambda s: s != "null" and not isinstance(s, list)))
        return ["null", inner] if draw(st.booleans()) else [inner, "null"]
    if kind == "union":
        branches = draw(st.lists(st.sampled_from(["null", "int", "string", "double", "boolean", "bytes"]),
                                 min_size=1, max_size=4, unique=True))
        return branches
    return kind


def values_of(schema):
    if isinstance(schema, list):
        return st.one_of(*[values_of(b) for b in schema])
    if isinstance(schema, str):
        return {"null": st.none(), "boolean": st.booleans(), "int": st.integers(-2 ** 31, 2 ** 31 - 1),
                "long": st.integers(-2 ** 63, 2 ** 63 - 1),
                "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
                "bytes": st.binary(max_size=20), "string": st.text(max_size=10)}[schema]
    t, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        p, s = schema["precision"], schema["scale"]
        return st.integers(-(10 ** p) + 1, 10 ** p - 1).map(lambda v: decimal.Decimal(v).scaleb(-s, decimal.Context(prec=100)))
    if logical == "date":
        return st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31))
    if logical == "timestamp-micros":
        return st.datetimes(datetime.datetime(1, 1, 2), datetime.datetime(9999, 12, 30)).map(
            lambda d: d.replace(tzinfo=UTC))
    if logical == "uuid":
        return st.uuids().map(str)
    if t == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if t == "enum":
        return st.sampled_from(schema["symbols"])
    if t == "record":
        return st.fixed_dictionaries({f["name"]: values_of(f["type"]) for f in schema["fields"]})
    if t == "array":
        return st.lists(values_of(schema["items"]), max_size=4)
    if t == "map":
        return st.dictionaries(st.text(max_size=4), values_of(schema["values"]), max_size=3)
    return values_of(t)


def _wrap(schema):
    return {"type": "record", "name": "Top", "fields": [{"name": "v", "type": schema}]}


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)
@given(st.data())
def test_random_schemas_and_data_round_trip_against_fastavro(data):
    schema = _wrap(data.draw(schemas()))
    recs = data.draw(st.lists(values_of(schema), min_size=1, max_size=6))
    payloads = [avro_bytes(schema, r) for r in recs]
    reg = kbatch.registry(export(("r-value", 1, 1, schema)))
    arr = reg.decode([frame(1, p) for p in payloads])
    arr.validate(full=True)
    for p, got in zip(payloads, arr.to_pylist()):
        assert normalize(got, schema) == fastavro_view(avro_read(p, schema), schema)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)
@given(st.data())
def test_damaged_payloads_give_an_error_or_the_oracles_value(data):
    """Truncated, extended, bit-flipped or overwritten payloads: each row is
    either fastavro's value of the same bytes (all of them read) or a null
    row with an error; raising mode raises a PayloadError; nothing crashes."""
    typed = _wrap(data.draw(schemas()))
    rec = data.draw(values_of(typed))
    payload = bytearray(avro_bytes(typed, rec))
    schema = _physical(typed)       # damaged dates may leave Python's range: compare the stored values
    how = data.draw(st.sampled_from(["cut", "extend", "flip", "overwrite"]))
    if how == "cut" and payload:
        del payload[data.draw(st.integers(0, len(payload) - 1)):]
    elif how == "extend":
        payload += data.draw(st.binary(min_size=1, max_size=12))
    elif how == "flip" and payload:
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] ^= 1 << data.draw(st.integers(0, 7))
    elif payload:
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i:i + 10] = data.draw(st.binary(min_size=1, max_size=10))
    reg = kbatch.registry(export(("r-value", 1, 1, schema)))
    value = frame(1, bytes(payload))
    arr, errors = reg.decode([value], on_error="null", with_errors=True)
    got = arr.to_pylist()[0]
    if errors[0].as_py() is None:
        want = avro_read(bytes(payload), schema)       # must read, all of it, to the same value
        assert _nan_safe(normalize(got, schema)) == _nan_safe(fastavro_view(want, schema))
    else:
        assert got is None
        with pytest.raises(PayloadError):
            reg.decode([value])


def _nan_safe(v):
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, dict):
        return {k: _nan_safe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nan_safe(x) for x in v]
    return v


def _physical(schema):
    """The schema without logical types (what the bytes hold)."""
    if isinstance(schema, list):
        return [_physical(b) for b in schema]
    if isinstance(schema, dict):
        out = {k: _physical(v) for k, v in schema.items() if k != "logicalType"}
        if "fields" in schema:
            out["fields"] = [dict(f, type=_physical(f["type"])) for f in schema["fields"]]
        return out
    return schema


def test_hostile_counts_do_not_allocate():
    schema = _wrap({"type": "array", "items": "null"})
    reg = kbatch.registry(export(("r-value", 1, 1, schema)))
    huge = frame(1, b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f")      # 2**62 nulls, no bytes
    with pytest.raises(PayloadError, match="more items"):
        reg.decode([huge])
    schema = _wrap({"type": "array", "items": "long"})
    reg = kbatch.registry(export(("r-value", 1, 1, schema)))
    with pytest.raises(PayloadError, match="truncated"):
        reg.decode([frame(1, b"\xfe\xff\xff\xff\x0f")])


@pytest.mark.parametrize("writer, reader", [
    ({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
     {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 3}),
    ({"type": "long", "logicalType": "timestamp-millis"},
     {"type": "long", "logicalType": "timestamp-micros"}),
    ({"type": "long", "logicalType": "timestamp-micros"},
     {"type": "long", "logicalType": "timestamp-millis"}),
    ({"type": "int", "logicalType": "date"}, {"type": "int", "logicalType": "time-millis"}),
    ({"type": "int", "logicalType": "time-millis"}, {"type": "long", "logicalType": "time-micros"}),
])
def test_logical_types_that_disagree_are_refused_not_misread(writer, reader):
    """Two versions whose logical types give the same bytes another meaning
    (another decimal scale, millis against micros): the row fails naming
    both, never a value off by a factor of 10 or 1000 (fastavro keeps the
    writer's value; kbatch cannot put it in the reader's column unchanged)."""
    record = lambda t: {"type": "record", "name": "R", "fields": [{"name": "v", "type": t}]}
    value = {"v": decimal.Decimal("1.23")} if writer.get("logicalType") == "decimal" else \
        {"v": avro_read(avro_bytes(record(writer["type"]), {"v": 1_700_000}), record(writer["type"]))["v"]}
    payload = frame(1, avro_bytes(record(writer), value))
    reg = kbatch.registry(export(("r-value", 1, 1, record(writer)), ("r-value", 2, 2, record(reader))))
    with pytest.raises(PayloadError, match="cannot be read as the reader's"):
        reg.decode([payload])
    nulls, errors = reg.decode([payload], on_error="null", with_errors=True)
    assert nulls.to_pylist() == [None] and "the same bytes mean another value" in errors[0].as_py()
    # the writer's own version still reads it, equal to fastavro
    got = reg.decode([payload], reader_schema=record(writer)).to_pylist()[0]["v"]
    want = avro_read(payload[5:], record(writer))["v"]
    assert got == want


def test_an_id_given_two_schemas_fails_its_rows():
    """Import mode can give one id two schemas (the first hard-deleted, then
    the id registered again): which one wrote a value cannot be known, so
    its rows fail naming the conflict, never decode with either."""
    from kbatch.payloads.registry import Registry
    from kbatch.payloads.store import State
    a = {"type": "record", "name": "R", "fields": [{"name": "cents", "type": "long"}]}
    b = {"type": "record", "name": "R", "fields": [{"name": "dollars", "type": "int"}]}
    key = json.dumps({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}).encode()
    state = State()
    state.apply_record(0, key, json.dumps({"subject": "s", "version": 1, "id": 1,
                                           "schema": json.dumps(a)}).encode())
    state.apply_record(1, key, None)
    state.apply_record(2, key, json.dumps({"subject": "s", "version": 1, "id": 1,
                                           "schema": json.dumps(b)}).encode())
    reg = Registry(state, "test")
    payload = frame(1, avro_bytes(b, {"dollars": 7}))
    with pytest.raises(PayloadError, match="two different schemas") as exc:
        reg.decode([payload], reader_schema=b)
    assert exc.value.schema_id == 1
    values, errors = reg.decode([payload], reader_schema=b, on_error="null", with_errors=True)
    assert values.to_pylist() == [None] and "two different schemas" in errors[0].as_py()


def _zigzag(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while True:
        if z < 0x80:
            return bytes(out + bytes([z]))
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def test_items_that_take_no_bytes_are_bounded_for_the_whole_decode():
    """Nulls in arrays cost no input bytes: a few hostile bytes could ask
    for billions of items. The bound (16 Mi) holds across nested arrays of
    a row and across rows, so a value fails instead of using gigabytes."""
    nested = {"type": "array", "items": {"type": "array", "items": "null"}}
    reg = kbatch.registry(export(("n-value", 1, 1, nested)))
    # one row: 2 inner arrays of 10 M nulls each (under the bound alone, not together)
    inner = _zigzag(10_000_000) + _zigzag(0)
    row = frame(1, _zigzag(2) + inner + inner + _zigzag(0))
    with pytest.raises(PayloadError, match="16 Mi"):
        reg.decode([row])
    # rows of 6 M nulls each: the third one crosses the bound and fails alone
    flat = kbatch.registry(export(("f-value", 1, 1, {"type": "array", "items": "null"})))
    rows = [frame(1, _zigzag(6_000_000) + _zigzag(0))] * 3
    got, errors = flat.decode(rows, on_error="null", with_errors=True)
    assert [e is None for e in errors.to_pylist()] == [True, True, False]
    assert len(got[0].as_py()) == 6_000_000 and got[2].as_py() is None
    # fastavro reads the same bytes as the same items (the encoding is plain Avro)
    assert len(avro_read(rows[0][5:], {"type": "array", "items": "null"})) == 6_000_000


def test_a_reader_field_takes_its_first_alias_the_writer_has():
    """A reader field whose aliases name two writer fields takes the first
    alias in the reader's order (Java's rule), whatever the writer's order."""
    for writer_order in (["a", "b"], ["b", "a"]):
        writer = {"type": "record", "name": "R",
                  "fields": [{"name": n, "type": "int"} for n in writer_order]}
        payload = frame(1, avro_bytes(writer, {"a": 1, "b": 2}))
        for aliases, want in ((["b", "a"], 2), (["a", "b"], 1)):
            reader = {"type": "record", "name": "R",
                      "fields": [{"name": "c", "type": "int", "aliases": aliases}]}
            reg = kbatch.registry(export(("r-value", 1, 1, writer)))
            assert reg.decode([payload], reader_schema=reader).to_pylist() == [{"c": want}]


def test_times_of_day_outside_one_day_fail_their_rows():
    """time-millis/time-micros hold the time after midnight: a writer's int
    outside [0, one day) has no Arrow time value (it would read as a wrapped
    clock time, in an array pyarrow's validation rejects): its row fails
    ("a value the Arrow type cannot hold"), wherever the time is nested."""
    def rec(name, t):
        return {"type": "record", "name": name, "fields": [
            {"name": "t", "type": t("int", "time-millis")},
            {"name": "ts", "type": {"type": "array", "items": t("long", "time-micros")}},
            {"name": "m", "type": {"type": "map", "values": t("int", "time-millis")}},
            {"name": "u", "type": ["null", t("int", "time-millis")]}]}
    logical = rec("R", lambda base, lt: {"type": base, "logicalType": lt})
    plain = rec("R", lambda base, lt: base)                 # the same bytes, no logical type
    reg = kbatch.registry(export(("t-value", 1, 1, logical)))
    day_ms, day_us = 86_400_000, 86_400_000_000
    good = {"t": 1, "ts": [0, day_us - 1], "m": {"a": day_ms - 1}, "u": 5}
    bad = [dict(good, t=-1), dict(good, ts=[1, day_us]), dict(good, m={"a": 1, "b": day_ms}),
           dict(good, u=2 ** 31 - 1)]
    arr, errors = reg.decode([frame(1, avro_bytes(plain, r)) for r in [good] + bad + [good]],
                             on_error="null", with_errors=True)
    arr.validate(full=True)
    rows = arr.to_pylist()
    assert rows[0] == rows[5] and rows[0]["t"] == datetime.time(0, 0, 0, 1000)
    assert rows[1:5] == [None] * 4
    assert errors.to_pylist() == [None] + ["a value the Arrow type cannot hold"] * 4 + [None]
    with pytest.raises(PayloadError, match="cannot hold"):
        reg.decode([frame(1, avro_bytes(plain, bad[0]))])


def test_union_branches_of_one_short_name_in_two_namespaces():
    """A union of a.X and b.X (records, then enums): a value takes the branch
    of its full name, as fastavro's writer chose it, with that branch's fields
    (the short name matches only where no full name does)."""
    import io

    import fastavro
    records = [{"type": "record", "name": "X", "namespace": "a",
                "fields": [{"name": "v", "type": "long"}]},
               {"type": "record", "name": "X", "namespace": "b",
                "fields": [{"name": "w", "type": "string"}]}]
    enums = [{"type": "enum", "name": "E", "namespace": "a", "symbols": ["P", "Q"]},
             {"type": "enum", "name": "E", "namespace": "b", "symbols": ["Q", "R"]}]
    top = {"type": "record", "name": "Top", "fields": [
        {"name": "u", "type": records}, {"name": "e", "type": enums}]}
    values = [{"u": ("a.X", {"v": 1}), "e": ("b.E", "R")},
              {"u": ("b.X", {"w": "hi"}), "e": ("a.E", "Q")},
              {"u": ("a.X", {"v": -5}), "e": ("b.E", "Q")}]
    payloads = [avro_bytes(top, v) for v in values]
    reg = make_registry(("t-value", 1, 9, top))
    arr, errors = reg.decode([frame(9, p) for p in payloads], on_error="null", with_errors=True)
    assert errors.to_pylist() == [None] * 3
    branch = {"a.X": 0, "b.X": 1, "a.E": 0, "b.E": 1}
    for field in ("u", "e"):
        # the branch the writer encoded: fastavro's union index, the first varint
        want = [branch[v[field][0]] for v in values]
        if field == "u":
            assert want == [branch[fastavro.schemaless_reader(
                io.BytesIO(p), fastavro.parse_schema(top, named_schemas={}),
                return_record_name=True)["u"][0]] for p in payloads]
        assert arr.field(field).type_codes.to_pylist() == want, field
    got = arr.to_pylist()
    assert [g["u"] for g in got] == [{"v": 1}, {"w": "hi"}, {"v": -5}]
    assert [g["e"] for g in got] == ["R", "Q", "Q"]


def test_a_map_that_repeats_a_key_holds_its_last_entry():
    """Avro map blocks may repeat a key (a hand-written encoder, a merge of
    two maps): fastavro's dict, as Java's HashMap, keeps the last value. The
    bytes are written here by hand: a block of 3 entries a=1, b=2, a=3, then
    a block of 1 entry b=4, then the end block; and a map in an array."""
    def s(text):                       # Avro string: zigzag length, bytes
        return bytes([len(text) * 2]) + text.encode()
    schema = {"type": "record", "name": "M", "fields": [
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "ms", "type": {"type": "array", "items": {"type": "map", "values": "int"}}}]}
    one_map = (bytes([3 * 2]) + s("a") + b"\x02" + s("b") + b"\x04" + s("a") + b"\x06"
               + bytes([1 * 2]) + s("b") + b"\x08" + b"\x00")
    plain = bytes([1 * 2]) + s("z") + b"\x0a" + b"\x00"
    payload = one_map + bytes([2 * 2]) + one_map + plain + b"\x00"
    want = avro_read(payload, schema)
    assert want == {"m": {"a": 3, "b": 4}, "ms": [{"a": 3, "b": 4}, {"z": 5}]}
    reg = make_registry(("t-value", 1, 11, schema))
    arr = reg.decode([frame(11, payload)] * 2)
    arr.validate(full=True)
    for got in arr.to_pylist():
        assert {k: v for k, v in got["m"]} == want["m"]
        assert [dict(m) for m in got["ms"]] == want["ms"]
        assert len(got["m"]) == 2 and [len(m) for m in got["ms"]] == [2, 1]


def test_header_framing_empty_datum_and_bytes_after_the_id():
    """With the schema id in a header the value is the datum alone: an empty
    value is a datum of zero bytes (a record without fields is a row, as
    fastavro reads it), a null value a null row; a header with bytes after
    the id (only Protobuf's carries message indexes) fails its row, named."""
    guid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    empty = {"type": "record", "name": "Empty", "fields": [{"name": "n", "type": "null"}]}
    entries = export(("e-value", 1, 12, empty))
    entries[0]["guid"] = str(guid)
    reg = kbatch.registry(entries)
    datum = avro_bytes(empty, {"n": None})
    assert datum == b"" and avro_read(datum, empty) == {"n": None}
    by_id, by_guid = b"\x00" + (12).to_bytes(4, "big"), b"\x01" + guid.bytes
    arr, errors = reg.decode([b"", b"", None, frame(12, b""), b""],
                             header_ids=[by_id, by_guid, by_id, None, by_id + b"\x00"],
                             on_error="null", with_errors=True)
    assert arr.to_pylist() == [{"n": None}, {"n": None}, None, {"n": None}, None]
    assert errors.to_pylist()[:4] == [None] * 4
    assert "after the schema id in its header" in errors[4].as_py()
    assert "AVRO" in errors[4].as_py()
    # a header too short for its framing, or of another magic byte
    arr, errors = reg.decode([b"", b""], header_ids=[b"\x00\x00\x00", b"\x07"],
                             on_error="null", with_errors=True)
    assert arr.to_pylist() == [None, None]
    assert "shorter" in errors[0].as_py() and "magic byte" in errors[1].as_py()


@pytest.mark.parametrize("ftype,default,want", [
    (["float", "string"], "1.5", "1.5"),          # a JSON string: the string branch
    (["int", "double"], 2.0, 2.0),                # a JSON double is no int default
    ("double", "NaN", "nan"), ("double", "-Infinity", float("-inf")),
    ("float", 3, 3.0),
    ("double", "1_000", None), ("double", " 7 ", None), ("double", "inf", None),
    ("int", 2.0, None), ("long", 1e2, None),
    ({"type": "string", "logicalType": "uuid"}, "not-a-uuid", None),
    ({"type": "string", "logicalType": "uuid"}, "12345678-1234-5678-1234-567812345678",
     "12345678-1234-5678-1234-567812345678"),
])
def test_reader_defaults_as_java_validates_them(ftype, default, want):
    """A reader field's default fills rows whose writer lacks the field: a
    number default is a JSON number (floats: or "NaN"/"Infinity"/"-Infinity",
    JacksonUtils' texts; ints: integral), a uuid default is a uuid. Values
    Java's Schema.isValidDefault refuses are a SchemaError naming the field,
    never a row error pointing into the datum; the accepted ones are the
    value fastavro fills."""
    import math
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "f", "type": ftype, "default": default}]}
    reg = make_registry(("s-value", 1, 1, writer))
    payload = frame(1, avro_bytes(writer, {"a": 1}))
    if want is None:
        with pytest.raises(KbatchError, match="field R.f: default"):
            reg.decode([payload], reader_schema=json.dumps(reader))
        return
    got = reg.decode([payload], reader_schema=json.dumps(reader)).to_pylist()[0]["f"]
    if isinstance(got, uuid.UUID):
        got = str(got)
    if want == "nan":
        assert math.isnan(got)
    else:
        assert got == want
        if not isinstance(ftype, dict) and default not in ("NaN", "Infinity", "-Infinity"):
            # (fastavro fills the text itself where Java reads the number)
            assert avro_read(avro_bytes(writer, {"a": 1}), writer, reader)["f"] == want
