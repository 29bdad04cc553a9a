"""Schema Registry payloads into Arrow: kbatch's compiled Avro decoder
against the best Python route (fastavro's ``schemaless_reader`` per record,
then ``pyarrow.array`` of the dicts), on the same 1 M framed values.

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
    benchmark.extra_info.update(records=RECORDS, bytes=nbytes,
                                route="fastavro schemaless_reader per record + pyarrow.array")
