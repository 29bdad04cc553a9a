"""Schema Registry payloads into Arrow: kbatch's decoders against the best
Python route of each format, on 1 M framed values of one order record:
Avro (fastavro's ``schemaless_reader`` per record, then ``pyarrow.array`` of
the dicts), Protobuf (the runtime's upb parser per value, then a pyarrow
column per field) and JSON Schema (pyarrow's JSON reader; msgspec's typed
decoder, then a pyarrow column per field).

The dataset: 1 M Confluent-framed Avro values of a 10-field order record
(a long id, three strings, two ints, a long, a timestamp-millis, a nullable
string union, a boolean), written once by fastavro into
``bench/.data/registry/`` (values and offsets as numpy files). Both sides
start from the values in memory and end with a ``pyarrow`` array holding
every field. Timed in CPU seconds of the process (one thread each).
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import time

import numpy as np
import pyarrow as pa
import pytest

import kbatch
from datasets import DATA_DIR

fastavro = pytest.importorskip("fastavro")

HERE = DATA_DIR / "registry"
RECORDS = 1_000_000
ORDER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "order_id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "sku", "type": "string"}, {"name": "quantity", "type": "int"},
    {"name": "price_cents", "type": "long"}, {"name": "currency", "type": "string"},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "coupon", "type": ["null", "string"], "default": None},
    {"name": "store_id", "type": "int"}, {"name": "express", "type": "boolean"}]}


def _build():
    if (HERE / "offsets.npy").exists():
        return
    HERE.mkdir(parents=True, exist_ok=True)
    parsed = fastavro.parse_schema(ORDER)
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rng = np.random.default_rng(3)
    out, offsets = io.BytesIO(), [0]
    prefix = b"\x00" + struct.pack(">i", 1)
    for i in range(RECORDS):
        out.write(prefix)
        fastavro.schemaless_writer(out, parsed, {
            "order_id": 10_000_000 + i, "customer": f"customer-{int(rng.integers(0, 50_000)):05d}",
            "sku": f"SKU-{int(rng.integers(0, 5000))}-{'XL' if i % 7 else 'S'}", "quantity": int(rng.integers(1, 20)),
            "price_cents": int(rng.integers(100, 100_000)), "currency": ("EUR", "USD", "GBP")[i % 3],
            "created": base + datetime.timedelta(milliseconds=i * 37),
            "coupon": None if i % 4 else f"CODE{i % 100}", "store_id": int(rng.integers(0, 400)),
            "express": bool(i % 2)})
        offsets.append(out.tell())
    np.save(HERE / "values.npy", np.frombuffer(out.getvalue(), np.uint8))
    np.save(HERE / "offsets.npy", np.array(offsets, np.int64))


@pytest.fixture(scope="module")
def framed():
    _build()
    data = np.load(HERE / "values.npy")
    offsets = np.load(HERE / "offsets.npy")
    column = pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                   [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return column, data.nbytes


def _fastavro_route(column):
    parsed = fastavro.parse_schema(ORDER)
    reader = fastavro.schemaless_reader
    rows = [reader(io.BytesIO(v[5:]), parsed) for v in column.to_pylist()]
    return pa.array(rows)


@pytest.mark.benchmark(group="registry", timer=time.process_time)
def test_kbatch_registry_decode(benchmark, framed):
    column, nbytes = framed
    reg = kbatch.registry([{"subject": "orders-value", "version": 1, "id": 1, "schema": json.dumps(ORDER)}])
    out = benchmark.pedantic(reg.decode, args=(column,), rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == RECORDS and out.null_count == 0
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, route="kbatch Registry.decode (compiled)")


@pytest.mark.benchmark(group="registry", timer=time.process_time)
def test_fastavro_then_pyarrow(benchmark, framed):
    column, nbytes = framed
    out = benchmark.pedantic(_fastavro_route, args=(column,), rounds=2, iterations=1)
    assert len(out) == RECORDS
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, peer=True,
                                route="fastavro schemaless_reader per record + pyarrow.array")


# --- Protobuf: the same order as a proto3 message -------------------------------------

ORDER_PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Order {
  int64 order_id = 1; string customer = 2; string sku = 3; int32 quantity = 4;
  int64 price_cents = 5; string currency = 6; google.protobuf.Timestamp created = 7;
  optional string coupon = 8; int32 store_id = 9; bool express = 10;
}
"""


def _order_class():
    """The runtime's class of ``ORDER_PROTO`` (protoc's descriptor set, stored
    under tests/data/protobuf by the tests' helper)."""
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from tests.protobuf_ref import Protos

    return Protos({"order.proto": ORDER_PROTO}).cls("bench.Order")


def _orders():
    """The values of the Avro dataset's records, as Python dicts (same seed)."""
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rng = np.random.default_rng(3)
    for i in range(RECORDS):
        yield i, {
            "order_id": 10_000_000 + i, "customer": f"customer-{int(rng.integers(0, 50_000)):05d}",
            "sku": f"SKU-{int(rng.integers(0, 5000))}-{'XL' if i % 7 else 'S'}", "quantity": int(rng.integers(1, 20)),
            "price_cents": int(rng.integers(100, 100_000)), "currency": ("EUR", "USD", "GBP")[i % 3],
            "created": base + datetime.timedelta(milliseconds=i * 37),
            "coupon": None if i % 4 else f"CODE{i % 100}", "store_id": int(rng.integers(0, 400)),
            "express": bool(i % 2)}


def _save(name: str, frames):
    out, offsets = io.BytesIO(), [0]
    for v in frames:
        out.write(v)
        offsets.append(out.tell())
    np.save(HERE / f"{name}-values.npy", np.frombuffer(out.getvalue(), np.uint8))
    np.save(HERE / f"{name}-offsets.npy", np.array(offsets, np.int64))


def _load(name: str):
    data = np.load(HERE / f"{name}-values.npy")
    offsets = np.load(HERE / f"{name}-offsets.npy")
    column = pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                   [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return column, data.nbytes


@pytest.fixture(scope="module")
def framed_protobuf():
    Order = _order_class()
    if not (HERE / "protobuf-offsets.npy").exists():
        HERE.mkdir(parents=True, exist_ok=True)
        prefix = b"\x00" + struct.pack(">i", 2) + b"\x00"      # id 2, message indexes [0]

        def frames():
            for _i, r in _orders():
                m = Order(**{k: v for k, v in r.items() if k not in ("created", "coupon")})
                m.created.FromDatetime(r["created"])
                if r["coupon"] is not None:
                    m.coupon = r["coupon"]
                yield prefix + m.SerializeToString()
        _save("protobuf", frames())
    return (*_load("protobuf"), Order)


def _upb_route(column, Order):
    """protobuf's upb parser per value, then one Arrow column per field."""
    parse = Order.FromString
    msgs = [parse(v[6:]) for v in column.to_pylist()]
    ts = [m.created.seconds * 1_000_000_000 + m.created.nanos for m in msgs]
    arrays = [pa.array([m.order_id for m in msgs], pa.int64()), pa.array([m.customer for m in msgs]),
              pa.array([m.sku for m in msgs]), pa.array([m.quantity for m in msgs], pa.int32()),
              pa.array([m.price_cents for m in msgs], pa.int64()), pa.array([m.currency for m in msgs]),
              pa.array(ts, pa.int64()).cast(pa.timestamp("ns", "UTC")),
              pa.array([m.coupon if m.HasField("coupon") else None for m in msgs], pa.string()),
              pa.array([m.store_id for m in msgs], pa.int32()), pa.array([m.express for m in msgs])]
    return pa.StructArray.from_arrays(arrays, [f.name for f in Order.DESCRIPTOR.fields])


@pytest.mark.benchmark(group="registry-protobuf", timer=time.process_time)
def test_kbatch_registry_decode_protobuf(benchmark, framed_protobuf):
    column, nbytes, Order = framed_protobuf
    reg = kbatch.registry([{"subject": "orders-value", "version": 1, "id": 2, "schemaType": "PROTOBUF",
                            "schema": ORDER_PROTO}])
    out = benchmark.pedantic(reg.decode, args=(column,), rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == RECORDS and out.null_count == 0
    sample = [0, 1, 4, RECORDS - 1]                       # the same rows as the runtime reads them
    assert out.take(sample).cast(_upb_route(column.take(sample), Order).type).equals(
        _upb_route(column.take(sample), Order))
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, route="kbatch Registry.decode (compiled)")


@pytest.mark.benchmark(group="registry-protobuf", timer=time.process_time)
def test_upb_then_pyarrow(benchmark, framed_protobuf):
    column, nbytes, Order = framed_protobuf
    out = benchmark.pedantic(_upb_route, args=(column, Order), rounds=2, iterations=1)
    assert len(out) == RECORDS
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, peer=True,
                                route="protobuf (upb) FromString per value + pyarrow column per field")


# --- JSON Schema: the same order as JSON text ----------------------------------------

ORDER_JSON_SCHEMA = {"type": "object", "properties": {
    "order_id": {"type": "integer"}, "customer": {"type": "string"}, "sku": {"type": "string"},
    "quantity": {"type": "integer"}, "price_cents": {"type": "integer"}, "currency": {"type": "string"},
    "created": {"type": "string", "format": "date-time"}, "coupon": {"type": ["string", "null"]},
    "store_id": {"type": "integer"}, "express": {"type": "boolean"}}}
JSON_TYPE = pa.struct([("order_id", pa.int64()), ("customer", pa.string()), ("sku", pa.string()),
                       ("quantity", pa.int64()), ("price_cents", pa.int64()), ("currency", pa.string()),
                       ("created", pa.timestamp("us", "UTC")), ("coupon", pa.string()),
                       ("store_id", pa.int64()), ("express", pa.bool_())])


@pytest.fixture(scope="module")
def framed_json():
    if not (HERE / "json-offsets.npy").exists():
        HERE.mkdir(parents=True, exist_ok=True)
        prefix = b"\x00" + struct.pack(">i", 3)

        def frames():
            for _i, r in _orders():
                r["created"] = r["created"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
                yield prefix + json.dumps(r, separators=(",", ":")).encode()
        _save("json", frames())
    return _load("json")


def _pyarrow_json_route(column):
    """pyarrow's JSON reader over the values (framing cut in Python), the schema given."""
    import pyarrow.json as pj

    body = b"\n".join(v[5:] for v in column.to_pylist()) + b"\n"
    table = pj.read_json(pa.py_buffer(body), parse_options=pj.ParseOptions(
        explicit_schema=pa.schema(list(JSON_TYPE)), unexpected_field_behavior="ignore"),
        read_options=pj.ReadOptions(block_size=1 << 24))
    return table.to_struct_array().combine_chunks()


def _msgspec_route(column):
    """msgspec's typed JSON decoder per value (a Struct), then one Arrow column per field."""
    msgspec = pytest.importorskip("msgspec")

    class Order(msgspec.Struct):
        order_id: int
        customer: str
        sku: str
        quantity: int
        price_cents: int
        currency: str
        created: datetime.datetime
        store_id: int
        express: bool
        coupon: str | None = None

    decode = msgspec.json.Decoder(Order).decode
    rows = [decode(v[5:]) for v in column.to_pylist()]
    arrays = [pa.array([getattr(r, f.name) for r in rows], f.type) for f in JSON_TYPE]
    return pa.StructArray.from_arrays(arrays, fields=list(JSON_TYPE))


@pytest.mark.benchmark(group="registry-json", timer=time.process_time)
def test_kbatch_registry_decode_json(benchmark, framed_json):
    column, nbytes = framed_json
    reg = kbatch.registry([{"subject": "orders-value", "version": 1, "id": 3, "schemaType": "JSON",
                            "schema": json.dumps(ORDER_JSON_SCHEMA)}])
    out = benchmark.pedantic(reg.decode, args=(column,), rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == RECORDS and out.null_count == 0
    sample = pa.array([0, 1, 4, RECORDS - 1])
    assert out.take(sample).equals(_msgspec_route(column.take(sample)))
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, route="kbatch Registry.decode")


@pytest.mark.benchmark(group="registry-json", timer=time.process_time)
def test_pyarrow_json_reader(benchmark, framed_json):
    column, nbytes = framed_json
    out = benchmark.pedantic(_pyarrow_json_route, args=(column,), rounds=3, iterations=1)
    assert len(out) == RECORDS
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, peer=True,
                                route="pyarrow.json.read_json of the values (framing cut per value)")


@pytest.mark.benchmark(group="registry-json", timer=time.process_time)
def test_msgspec_then_pyarrow(benchmark, framed_json):
    column, nbytes = framed_json
    out = benchmark.pedantic(_msgspec_route, args=(column,), rounds=2, iterations=1)
    assert len(out) == RECORDS
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes, peer=True,
                                route="msgspec typed decode per value + pyarrow column per field")
