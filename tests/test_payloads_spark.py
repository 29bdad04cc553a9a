"""Spark's read of a Confluent-framed topic (``valueFormat=registry``; one
partition with the schema ids in record headers) equals the Python decode (``Registry.decode``, itself checked against fastavro);
the Arrow types Spark lacks are mapped as ``from_avro`` maps them."""

from __future__ import annotations

import datetime
import decimal
import json
import shutil
import uuid

import pyarrow as pa
import pytest

import kbatch
from kbatch.spark.options import OptionError, parse_options
from tests.registry_ref import avro_bytes, export, frame

ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "either", "type": ["null", "int", "string"]},
    {"name": "tags", "type": {"type": "map", "values": {"type": "array", "items": "string"}}}]}


def order(i: int) -> dict:
    return {"id": i, "item": f"item-{i}", "price": decimal.Decimal(f"{i}.50"),
            "ts": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=i),
            "color": ["RED", "BLUE"][i % 2], "ref": str(uuid.UUID(int=i + 1)),
            "either": [None, i, str(i)][i % 3], "tags": {"a": ["x"] * (i % 3)}}


def write(tmp_path):
    data = tmp_path / "data"
    kbatch.write_log(data / "_schemas-0", [
        {"key": json.dumps({"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}).encode(),
         "value": json.dumps({"subject": "orders-value", "version": 1, "id": 1,
                              "schema": json.dumps(ORDER)}).encode()}])
    # partition 1 carries the schema id in a __value_schema_id header (magic 0 + id), values unframed
    rows = [{"key": f"k{i}".encode(), "value": frame(1, avro_bytes(ORDER, order(i)))} if i < 30 else
            {"key": f"k{i}".encode(), "value": avro_bytes(ORDER, order(i)),
             "headers": [("__value_schema_id", b"\x00\x00\x00\x00\x01")]} for i in range(50)]
    rows.append({"key": b"tomb", "value": None})
    kbatch.write_log(data / "orders-0", rows[:30])
    kbatch.write_log(data / "orders-1", rows[30:])
    return data


def test_options_need_a_registry():
    with pytest.raises(OptionError, match="schemaRegistry"):
        parse_options({"path": "/x", "valueFormat": "registry"})
    o = parse_options({"path": "/x", "valueFormat": "registry", "schemaRegistry": "/r", "subscribe": "orders"})
    assert o.value_format == "registry" and o.key_format == "binary"
    with pytest.raises(OptionError, match="valueFormat"):
        parse_options({"path": "/x", "valueFormat": "avro"})


def test_spark_compatible_types(tmp_path):
    from kbatch.spark.payloads import field_types, spark_compatible
    data = write(tmp_path)
    reg = kbatch.registry(data)
    arr = reg.decode([frame(1, avro_bytes(ORDER, order(i))) for i in range(6)])
    out = spark_compatible(arr)
    out.validate(full=True)
    rows = out.to_pylist()
    assert rows[1]["color"] == "BLUE" and rows[1]["ref"] == str(uuid.UUID(int=2))
    # as Spark's from_avro (AvroDeserializer): the null branch taken is a null
    assert [r["either"] for r in rows[:3]] == [None, {"member0": 1, "member1": None},
                                               {"member0": None, "member1": "2"}]
    types = field_types({"value_format": "registry", "schema_registry": str(data), "subscribe": "orders"})
    assert types["value"] == out.type


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session
    session = local_session("kbatch-registry-tests", cores="2", tests=True,
                            extra_conf={"spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()


@pytest.mark.spark
def test_spark_read_of_a_framed_topic_equals_the_python_decode(tmp_path, spark):
    from kbatch.spark.payloads import spark_compatible
    data = write(tmp_path)
    df = (spark.read.format("kbatch").option("subscribe", "orders").option("valueFormat", "registry")
          .option("schemaRegistry", str(data)).load(str(data)))
    assert df.schema["value"].dataType.simpleString().startswith("struct<id:bigint,item:string,")
    got = {(r["partition"], r["offset"]): r["value"] for r in df.collect()}
    reg = kbatch.registry(data)
    want = {}
    for p in (0, 1):
        records = kbatch.open_log(data / f"orders-{p}").read()
        decoded = records.to_arrow(decode={"value": reg}).column("value").combine_chunks()   # header ids used
        values = spark_compatible(decoded).cast(pa.struct(
            [pa.field(f.name, pa.timestamp("us", "UTC") if f.name == "ts" else f.type)
             for f in spark_compatible(decoded).type])).to_pylist()
        for off, v in zip(records.offset.tolist(), values):
            want[(p, off)] = v
    assert len(got) == 51 and sum(v is not None for v in got.values()) == 50
    for k, v in want.items():
        row = got[k]
        if v is None:
            assert row is None
            continue
        row = row.asDict(recursive=True)
        assert row["id"] == v["id"] and row["item"] == v["item"] and row["price"] == v["price"]
        assert row["ts"].replace(tzinfo=None) == v["ts"].astimezone(datetime.timezone.utc).replace(tzinfo=None) \
            or row["ts"] == v["ts"]
        assert row["color"] == v["color"] and row["ref"] == v["ref"]
        assert row["either"] == v["either"] and dict(row["tags"]) == dict(v["tags"])


EVENT = """syntax = "proto3";
package ev;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
message Event {
  uint64 id = 1; uint32 small = 2; string name = 3;
  enum Kind { NONE = 0; CLICK = 1; VIEW = 2; }
  Kind kind = 4;
  google.protobuf.Timestamp at = 5; google.protobuf.Duration took = 6;
  repeated sint32 scores = 7; map<string, int64> counts = 8;
  message Where { string page = 1; optional int32 slot = 2; }
  Where where = 9;
  oneof source { string web = 10; int64 device = 11; }
}
"""


@pytest.mark.spark
def test_spark_read_of_protobuf_values(tmp_path, spark):
    """Protobuf values written by the runtime: Spark's rows equal the Python
    decode with the types Spark lacks mapped (uint64: decimal(20, 0), uint32:
    bigint, Timestamp floor / Duration toward zero to microseconds, as
    Spark's from_protobuf), and the runtime's own values."""
    from tests.protobuf_ref import Protos, frame_pb
    E = Protos({"event.proto": EVENT}).cls("ev.Event")
    data = tmp_path / "data"
    kbatch.write_log(data / "_schemas-0", [
        {"key": json.dumps({"keytype": "SCHEMA", "subject": "events-value", "version": 1, "magic": 1}).encode(),
         "value": json.dumps({"subject": "events-value", "version": 1, "id": 7, "schemaType": "PROTOBUF",
                              "schema": EVENT}).encode()}])
    msgs = []
    for i in range(20):
        m = E(id=2 ** 64 - 1 - i, small=2 ** 32 - 1 - i, name=f"e{i}", kind=i % 3, scores=[-i, i])
        m.at.seconds, m.at.nanos = -1 if i % 2 else 1_700_000_000 + i, 999_999_500
        m.took.seconds, m.took.nanos = (-3, -1500) if i % 2 else (3, 1500)
        m.counts["a"] = i
        if i % 3:
            m.where.page = "home"
            if i % 2:
                m.where.slot = i
        if i % 4 == 1:
            m.web = "w"
        elif i % 4 == 2:
            m.device = i
        msgs.append(m)
    kbatch.write_log(data / "events-0", [{"value": frame_pb(7, m.SerializeToString())} for m in msgs])
    df = (spark.read.format("kbatch").option("subscribe", "events").option("valueFormat", "registry")
          .option("schemaRegistry", str(data)).load(str(data)))
    assert df.schema["value"].dataType.simpleString().startswith(
        "struct<id:decimal(20,0),small:bigint,name:string,kind:string,at:timestamp,"
        "took:interval day to second,")
    got = [r["value"].asDict(recursive=True) for r in df.orderBy("offset").collect()]
    want = spark_compatible_rows(kbatch.registry(data), data / "events-0")
    assert len(got) == 20
    utc = datetime.timezone.utc
    for m, row, w in zip(msgs, got, want):
        at_us = (m.at.seconds * 10 ** 9 + m.at.nanos) // 1000               # floor, as from_protobuf
        assert row["id"] == decimal.Decimal(m.id) == w["id"] and row["small"] == m.small == w["small"]
        assert row["kind"] == E.Kind.Name(m.kind) == w["kind"] and row["name"] == m.name
        assert row["at"].replace(tzinfo=utc) == datetime.datetime(1970, 1, 1, tzinfo=utc) + \
            datetime.timedelta(microseconds=at_us)
        took_us = int((m.took.seconds * 10 ** 9 + m.took.nanos) / 1000)     # toward zero
        assert row["took"] == datetime.timedelta(microseconds=took_us) == w["took"]
        assert row["scores"] == list(m.scores) and dict(row["counts"]) == dict(m.counts)
        assert row["where"] == ({"page": m.where.page, "slot": m.where.slot if m.where.HasField("slot") else None}
                                if m.HasField("where") else None)
        assert row["source"] == m.WhichOneof("source") and row["web"] == (m.web if m.web else None)
        assert row["device"] == (m.device if m.HasField("device") else None)


def spark_compatible_rows(reg, partition):
    from kbatch.spark.payloads import spark_compatible
    records = kbatch.open_log(partition).read()
    return spark_compatible(reg.decode(records.value)).to_pylist()


def test_numeric_unions_widen_as_from_avro():
    """AvroDeserializer: a union of int and long (null aside) is a long, of
    float and double a double; a null is a null."""
    from kbatch.spark.payloads import spark_compatible
    schema = {"type": "record", "name": "N", "fields": [
        {"name": "il", "type": ["null", "int", "long"]},
        {"name": "fd", "type": ["float", "double"]},
        {"name": "three", "type": ["int", "long", "string"]}]}
    values = [{"il": None, "fd": ("float", 1.5), "three": ("int", 1)},
              {"il": ("int", 7), "fd": ("double", 2.25), "three": ("long", 2)},
              {"il": ("long", 1 << 40), "fd": ("float", -0.5), "three": "s"}]
    reg = kbatch.registry(export(("n-value", 1, 3, schema)))
    out = spark_compatible(reg.decode([frame(3, avro_bytes(schema, v)) for v in values]))
    assert out.type.field("il").type == pa.int64() and out.type.field("fd").type == pa.float64()
    assert [r["il"] for r in out.to_pylist()] == [None, 7, 1 << 40]
    assert [r["fd"] for r in out.to_pylist()] == [1.5, 2.25, -0.5]
    assert [r["three"] for r in out.to_pylist()] == [
        {"member0": 1, "member1": None, "member2": None},
        {"member0": None, "member1": 2, "member2": None},
        {"member0": None, "member1": None, "member2": "s"}]


# --- a model of Spark's from_avro (connector/avro: SchemaConverters.toSqlType for the
# type, AvroDeserializer for the values; GenericDatumReader has no logical-type
# conversions, so a widened union holds the numbers as written), for the types used here

def _primitive(s) -> str:
    return s if isinstance(s, str) else s["type"]


def from_avro_type(s) -> str:
    """Spark's type (simpleString) of an Avro type: a union's null branches
    dropped (then nullable); one branch left: that branch's type; two whose
    primitive types are int and long: bigint, float and double: double;
    else struct<member0, ...> (none left: struct<>)."""
    if isinstance(s, list):
        rest = [b for b in s if b != "null"]
        if len(rest) < len(s):
            return from_avro_type(rest[0]) if len(rest) == 1 else from_avro_type(rest)
        kinds = {_primitive(b) for b in s}
        if len(s) == 1:
            return from_avro_type(s[0])
        if len(s) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
            return "bigint" if "int" in kinds else "double"
        return "struct<" + ",".join(f"member{i}:{from_avro_type(b)}" for i, b in enumerate(s)) + ">"
    if isinstance(s, dict) and s["type"] == "record":
        return "struct<" + ",".join(f"{f['name']}:{from_avro_type(f['type'])}" for f in s["fields"]) + ">"
    logical = s.get("logicalType") if isinstance(s, dict) else None
    if _primitive(s) == "int":
        return "date" if logical == "date" else "int"
    if _primitive(s) == "long":
        return "timestamp" if logical in ("timestamp-millis", "timestamp-micros") else "bigint"
    return {"string": "string", "float": "float", "double": "double"}[_primitive(s)]


def from_avro_value(s, raw):
    """Spark's value of a datum read without logical-type conversions."""
    if raw is None:
        return None
    if isinstance(s, list):
        rest = [b for b in s if b != "null"]
        kinds = {_primitive(b) for b in rest}
        if len(rest) == 1:
            return from_avro_value(rest[0], raw)
        if len(rest) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
            return raw                                      # setLong / setDouble of the number read
        taken = next(i for i, b in enumerate(rest)         # the branches used here differ in Python type
                     if isinstance(raw, {"int": int, "long": int, "string": str, "record": dict}[_primitive(b)]))
        return {f"member{i}": from_avro_value(b, raw) if i == taken else None for i, b in enumerate(rest)}
    if isinstance(s, dict) and s["type"] == "record":
        return {f["name"]: from_avro_value(f["type"], raw[f["name"]]) for f in s["fields"]}
    if isinstance(s, dict) and s.get("logicalType") == "date":
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=raw)
    return raw


def _no_logical_types(s):
    if isinstance(s, list):
        return [_no_logical_types(b) for b in s]
    if isinstance(s, dict):
        return {k: _no_logical_types(v) for k, v in s.items() if k != "logicalType"}
    return s


REC = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
DATE = {"type": "int", "logicalType": "date"}
UNIONS = {"one": ["int"], "rec": [REC], "null_one": ["null", "long"],
          "date_long": [DATE, "long"], "int_ts": ["int", {"type": "long", "logicalType": "timestamp-millis"}],
          "null_time_long": ["null", {"type": "int", "logicalType": "time-millis"}, "long"],
          "float_double": ["float", "double"], "nothing": ["null"], "date_str": ["null", DATE, "string"]}
UNION_RECORD = {"type": "record", "name": "U", "fields": [{"name": k, "type": v} for k, v in UNIONS.items()]}


def union_topic(tmp_path):
    """Topic u (one partition) of UNION_RECORD values, its registry export:
    (data directory, registry file, the values as from_avro gives them)."""
    from tests.registry_ref import avro_read
    plain = _no_logical_types(UNION_RECORD)              # the same bytes, the numbers as written
    rows = [{"one": i, "rec": {"a": i}, "null_one": [None, i][i % 2],
             "date_long": [("int", 19000 + i), ("long", 1 << 40)][i % 2],
             "int_ts": [("int", -i), ("long", 1_700_000_000_123)][i % 2],
             "null_time_long": [None, ("int", 45_000_000), ("long", -(1 << 35))][i % 3],
             "float_double": [("float", 1.5), ("double", 0.1)][i % 2], "nothing": None,
             "date_str": [None, ("int", 20000), "s"][i % 3]} for i in range(6)]
    payloads = [avro_bytes(plain, r) for r in rows]
    reg_file = tmp_path / "registry.json"
    reg_file.write_text(json.dumps(export(("u-value", 1, 9, UNION_RECORD))))
    kbatch.write_log(tmp_path / "data" / "u-0", [{"value": frame(9, p)} for p in payloads])
    want = [{k: from_avro_value(UNIONS[k], raw[k]) for k in UNIONS} for raw in (avro_read(p, plain)
                                                                               for p in payloads)]
    return tmp_path / "data", reg_file, want


def test_unions_are_planned_and_decoded_as_from_avro(tmp_path):
    """Spark's from_avro decides a union on its branches' Avro primitive
    types: one branch (null aside) is that branch's type, a date or a
    timestamp-millis with a long is a long holding the numbers as written,
    only a null branch an empty struct; the executors' values have the
    planned type (the truth: the model above of SchemaConverters.toSqlType
    and AvroDeserializer, the values read by fastavro)."""
    from pyspark.sql.pandas.types import from_arrow_type

    from kbatch.spark.options import parse_options
    from kbatch.spark.payloads import decode_batch, field_types
    data, reg_file, want = union_topic(tmp_path)
    o = parse_options({"path": str(data), "valueFormat": "registry", "subscribe": "u",
                       "schemaRegistry": str(reg_file)})
    planned = field_types(o)["value"]
    for f in planned:
        assert from_arrow_type(f.type).simpleString() == from_avro_type(UNIONS[f.name]), f.name
    records = kbatch.open_log(data / "u-0").read()
    batch = pa.RecordBatch.from_arrays([records.value.to_arrow()], names=["value"])
    schema = pa.schema([pa.field("value", planned), pa.field("value_error", pa.string())])
    assert decode_batch(batch, records, o, schema).column("value").to_pylist() == want


@pytest.mark.spark
def test_spark_read_of_unions(tmp_path, spark):
    data, reg_file, want = union_topic(tmp_path)
    df = (spark.read.format("kbatch").option("subscribe", "u").option("valueFormat", "registry")
          .option("schemaRegistry", str(reg_file)).load(str(data)))
    assert df.schema["value"].dataType.simpleString() == from_avro_type(UNION_RECORD)
    got = [r["value"].asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert got == want


def test_protobuf_message_of_a_query_is_planned_and_checked(tmp_path):
    """A Protobuf value framed for the schema's second message: the driver
    plans the type of valueMessage (default: the first message), and an
    executor whose values decode to another message fails, naming the
    option, rather than cast them by field name into nulls."""
    pytest.importorskip("google.protobuf")
    from kbatch.spark.options import parse_options
    from kbatch.spark.payloads import decode_batch, field_types
    from tests.protobuf_ref import Protos, frame_pb
    proto = 'syntax = "proto3"; package m; message A { string a = 1; } ' \
            'message B { int64 b = 1; string c = 2; }'
    data = tmp_path / "data"
    kbatch.write_log(data / "_schemas-0", [
        {"key": json.dumps({"keytype": "SCHEMA", "subject": "pb-value", "version": 1,
                            "magic": 1}).encode(),
         "value": json.dumps({"subject": "pb-value", "version": 1, "id": 5,
                              "schemaType": "PROTOBUF", "schema": proto}).encode()}])
    b = Protos({"m.proto": proto}).cls("m.B")
    kbatch.write_log(data / "pb-0", [{"value": frame_pb(5, b(b=i, c=f"x{i}").SerializeToString(),
                                                        [1])} for i in range(3)])
    records = kbatch.open_log(data / "pb-0").read()
    batch = pa.RecordBatch.from_arrays([records.value.to_arrow()], names=["value"])
    for given, want in (({}, None), ({"valueMessage": "m.B"}, [0, 1, 2])):
        o = parse_options({"path": str(data), "valueFormat": "registry", "subscribe": "pb",
                           "schemaRegistry": str(data), **given})
        planned = field_types(o)["value"]
        schema = pa.schema([pa.field("value", planned), pa.field("value_error", pa.string())])
        if want is None:
            assert planned == pa.struct([pa.field("a", pa.string())])
            with pytest.raises(kbatch.KbatchError, match="valueMessage"):
                decode_batch(batch, records, o, schema)
        else:
            got = decode_batch(batch, records, o, schema).column("value").to_pylist()
            assert [r["b"] for r in got] == want and [r["c"] for r in got] == ["x0", "x1", "x2"]


def test_a_json_schema_without_fields_is_refused_at_planning(tmp_path):
    """A JSON Schema naming no fields decodes into a type inferred from the
    values: the driver cannot plan a query's schema with it and says so
    (before, every batch failed with a message about Protobuf)."""
    from kbatch.spark.options import parse_options
    from kbatch.spark.payloads import field_types
    data = tmp_path / "data"
    kbatch.write_log(data / "_schemas-0", [
        {"key": json.dumps({"keytype": "SCHEMA", "subject": "j-value", "version": 1,
                            "magic": 1}).encode(),
         "value": json.dumps({"subject": "j-value", "version": 1, "id": 4, "schemaType": "JSON",
                              "schema": json.dumps({"type": "object"})}).encode()}])
    o = parse_options({"path": str(data), "valueFormat": "registry", "subscribe": "j",
                       "schemaRegistry": str(data)})
    with pytest.raises(kbatch.KbatchError, match="names no fields"):
        field_types(o)
