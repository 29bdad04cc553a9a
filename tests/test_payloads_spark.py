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
from tests.registry_ref import avro_bytes, frame

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
    assert [r["either"] for r in rows[:3]] == [{"member0": None, "member1": None},
                                               {"member0": 1, "member1": None},
                                               {"member0": None, "member1": "2"}]
    types = field_types({"value_format": "registry", "schema_registry": str(data), "subscribe": "orders"})
    assert types["value"] == out.type


@pytest.mark.spark
def test_spark_read_of_a_framed_topic_equals_the_python_decode(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session
    from kbatch.spark.payloads import spark_compatible
    data = write(tmp_path)
    spark = local_session("kbatch-registry-tests", cores="2", tests=True,
                          extra_conf={"spark.ui.showConsoleProgress": "false"})
    try:
        df = (spark.read.format("kbatch").option("subscribe", "orders").option("valueFormat", "registry")
              .option("schemaRegistry", str(data)).load(str(data)))
        assert df.schema["value"].dataType.simpleString().startswith("struct<id:bigint,item:string,")
        got = {(r["partition"], r["offset"]): r["value"] for r in df.collect()}
    finally:
        spark.stop()
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
