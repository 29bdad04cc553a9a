"""The registry wired into the rest: ``Records.to_arrow(decode=...)``,
``to_pandas``, ``open_log_dir(...).read().to_arrow(decode=...)``, schema ids
in headers, and the command line (``kbatch schemas``, ``kbatch dump
--registry``). Payloads written by fastavro, framing built here."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import kbatch
from kbatch.errors import PayloadError
from kbatch.tools.cli import main
from tests.registry_ref import avro_bytes, export, frame

ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
KEY = "string"


def write(tmp_path, bad: bool = False):
    import datetime
    import decimal
    schemas = tmp_path / "data" / "_schemas-0"
    kbatch.write_log(schemas, [
        {"key": json.dumps({"keytype": "SCHEMA", "subject": s, "version": 1, "magic": 1}).encode(),
         "value": json.dumps({"subject": s, "version": 1, "id": i, "schema": json.dumps(sch)}).encode()}
        for s, i, sch in (("orders-value", 1, ORDER), ("orders-key", 2, KEY))])
    rows = []
    for i in range(20):
        rec = {"id": i, "item": f"item-{i}", "price": decimal.Decimal(f"{i}.25"),
               "ts": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)}
        rows.append({"key": frame(2, avro_bytes(KEY, f"k{i}")), "value": frame(1, avro_bytes(ORDER, rec)),
                     "timestamp": 1_700_000_000_000 + i})
    rows.append({"key": None, "value": None, "timestamp": 1_700_000_000_100})      # a tombstone
    if bad:
        rows.append({"key": None, "value": b"\x00\x00\x00\x00\x01\x02", "timestamp": 1_700_000_000_200})
    kbatch.write_log(tmp_path / "data" / "orders-0", rows)
    return tmp_path / "data"


def test_records_to_arrow_and_pandas_decode_keys_and_values(tmp_path):
    data = write(tmp_path)
    reg = kbatch.registry(data)
    records = kbatch.open_log(data / "orders-0").read()
    table = records.to_arrow(decode={"value": reg, "key": reg})
    assert table.column("value").type.field("price").type == pa.decimal128(9, 2)
    values = table.column("value").to_pylist()
    assert values[3]["item"] == "item-3" and values[-1] is None
    assert table.column("key").to_pylist()[:2] == ["k0", "k1"]
    assert table.column("offset").to_pylist() == list(range(21))
    df = records.to_pandas(decode={"value": reg})
    assert df["value"][5]["id"] == 5
    assert kbatch.open_log_dir(data).read("orders").to_arrow(decode={"value": reg}).num_rows == 21


def test_bad_values_raise_or_become_null_rows_with_an_error_column(tmp_path):
    data = write(tmp_path, bad=True)
    reg = kbatch.registry(data)
    records = kbatch.open_log(data / "orders-0").read()
    with pytest.raises(PayloadError, match="record offset 21, schema id 1"):
        records.to_arrow(decode={"value": reg})
    table = records.to_arrow(decode={"value": reg}, on_error="null")
    assert table.column_names[table.column_names.index("value") + 1] == "value_error"
    assert table.column("value").to_pylist()[21] is None
    errors = table.column("value_error").to_pylist()
    assert errors[:21] == [None] * 21 and "truncated" in errors[21]
    with pytest.raises(ValueError, match="decode must map"):
        records.to_arrow(decode={"headers": reg})


def test_schema_ids_in_headers(tmp_path):
    import uuid
    guid = uuid.uuid4()
    reg = kbatch.registry([{"subject": "s", "version": 1, "id": 5, "schema": '"long"', "guid": str(guid)}])
    kbatch.write_segment(tmp_path / "00000000000000000000.log", [
        {"value": avro_bytes("long", 41), "headers": [("__value_schema_id", b"\x01" + guid.bytes)]},
        {"value": frame(5, avro_bytes("long", 42))}])
    records = kbatch.read_segment(tmp_path / "00000000000000000000.log")
    assert records.to_arrow(decode={"value": reg}).column("value").to_pylist() == [41, 42]


# a record whose bare datum (its schema id, 1, in a header) begins 00 00 00 00 07: read as
# framed it would be schema id 7, a string, and decode without an error
WIDE = {"type": "record", "name": "W", "fields": [{"name": n, "type": "long"} for n in "abcde"]
        + [{"name": "s", "type": "string"}]}
WIDE_VALUE = {"a": 0, "b": 0, "c": 0, "d": 0, "e": -4, "s": "hello"}


def write_header_framed(tmp_path):
    """A registry export (ids 1: WIDE, 7: a string) and one record of WIDE
    whose schema id is in its ``__value_schema_id`` header; fastavro's
    value of the datum (the truth)."""
    from tests.registry_ref import avro_read
    (tmp_path / "reg.json").write_text(json.dumps(export(("w-value", 1, 1, WIDE), ("s-value", 1, 7, "string"))))
    datum = avro_bytes(WIDE, WIDE_VALUE)
    assert datum[:5] == b"\x00\x00\x00\x00\x07"
    kbatch.write_log(tmp_path / "w-0", [{"key": b"k", "value": datum,
                                         "headers": [("__value_schema_id", b"\x00\x00\x00\x00\x01")]}])
    return kbatch.registry(str(tmp_path / "reg.json")), avro_read(datum, WIDE)


def test_header_schema_ids_in_a_projected_read(tmp_path):
    """``read(columns=[...])`` with the headers reads the header's id as the
    whole read does; without them the decode is refused (whether an id is in
    a header cannot be told), never the datum read as framed."""
    from kbatch.errors import ColumnNotReadError
    reg, truth = write_header_framed(tmp_path)
    log = kbatch.open_log(tmp_path / "w-0")
    assert log.read().to_arrow(decode={"value": reg}).column("value").to_pylist() == [truth]
    table = log.read(columns=["value", "headers"]).to_arrow(decode={"value": reg})
    assert table.column("value").to_pylist() == [truth]
    for on_error in ("raise", "null"):
        with pytest.raises(ColumnNotReadError, match="add 'headers' to columns="):
            log.read(columns=["value"]).to_arrow(decode={"value": reg}, on_error=on_error)
    with pytest.raises(ColumnNotReadError, match="__key_schema_id"):
        log.read(columns=["key"]).to_arrow(decode={"key": reg})
    # nothing to decode: nothing refused
    assert log.read(5, 6, columns=["value"]).to_arrow(decode={"value": reg}).num_rows == 0


def test_a_projected_read_of_records_without_headers_decodes(tmp_path):
    """The decoder counts the records whose headers a projection left out:
    where none had any there is no schema id header to miss, and
    ``read(columns=["value"])`` decodes (whole, ranged, chunked, joined
    across segments, and as the table view); one record with an unrelated
    header makes the whole read's decode refused, not a guess."""
    from kbatch.errors import ColumnNotReadError
    from tests.registry_ref import avro_read
    (tmp_path / "reg.json").write_text(json.dumps(export(("p-value", 1, 1, WIDE))))
    reg = kbatch.registry(str(tmp_path / "reg.json"))
    datum = avro_bytes(WIDE, WIDE_VALUE)
    truth = avro_read(datum, WIDE)
    rows = [{"key": b"k%d" % i, "value": frame(1, datum)} for i in range(6)]
    kbatch.write_log(tmp_path / "p-0", rows, batch_records=2, segment_bytes=200)
    assert len(list((tmp_path / "p-0").glob("*.log"))) > 1
    log = kbatch.open_log(tmp_path / "p-0")
    dec = {"value": reg}
    assert log.read(columns=["value"]).headers.unread_rows == 0
    for records in (log.read(columns=["key", "value"]), log.read(1, 5, columns=["key", "value"]),
                    log.read(columns=["key", "value"], view="latest")):
        assert records.to_arrow(decode=dec).column("value").to_pylist() == [truth] * len(records)
    chunks = list(log.iter(columns=["value"], chunk_records=3))
    assert len(chunks) > 1
    assert sum((c.to_arrow(decode=dec).column("value").to_pylist() for c in chunks), []) \
        == [truth] * 6
    kbatch.write_log(tmp_path / "q-0", rows[:3] + [dict(rows[3], headers=[("trace", b"1")])] + rows[4:])
    log = kbatch.open_log(tmp_path / "q-0")
    assert log.read(columns=["value"]).headers.unread_rows == 1
    with pytest.raises(ColumnNotReadError, match="some records had headers"):
        log.read(columns=["value"]).to_arrow(decode=dec)
    assert log.read(columns=["value", "headers"]).to_arrow(decode=dec).column("value").to_pylist() \
        == [truth] * 6


def test_dump_takes_schema_ids_from_headers(tmp_path, capfd):
    reg, truth = write_header_framed(tmp_path)
    seg = tmp_path / "w-0" / "00000000000000000000.log"
    assert main(["dump", "--registry", str(tmp_path / "reg.json"), str(seg)]) == 0
    row = json.loads(capfd.readouterr().out.splitlines()[0])
    assert row["value"] == truth and "value_error" not in row


def test_every_door_reads_with_the_topic_subject_whatever_the_range(tmp_path, capfd):
    """Id 1 is in orders-value and audit-value, id 2 is orders-value v2: in
    the topic orders, every read (whole, a range, chunks of one, dump)
    decodes offset 0 with orders-value's latest, as Spark plans it."""
    from tests.registry_ref import avro_read
    from tests.test_payloads_avro import ORDER_V1, ORDER_V2
    (tmp_path / "reg.json").write_text(json.dumps(export(
        ("orders-value", 1, 1, ORDER_V1), ("audit-value", 1, 1, ORDER_V1), ("orders-value", 2, 2, ORDER_V2))))
    reg = kbatch.registry(str(tmp_path / "reg.json"))
    a = avro_bytes(ORDER_V1, {"id": 42})
    b = avro_bytes(ORDER_V2, {"id": 43, "status": "PAID"})
    truth = [avro_read(a, ORDER_V1, ORDER_V2), avro_read(b, ORDER_V2, ORDER_V2)]
    kbatch.write_log(tmp_path / "orders-0", [{"key": b"x", "value": frame(1, a)},
                                             {"key": b"y", "value": frame(2, b)}], batch_records=1)
    log = kbatch.open_log(tmp_path / "orders-0")
    dec = {"value": reg}
    assert log.read().to_arrow(decode=dec).column("value").to_pylist() == truth
    assert log.read(0, 1).to_arrow(decode=dec).column("value").to_pylist() == truth[:1]
    assert log.read(1, 2).to_arrow(decode=dec).column("value").to_pylist() == truth[1:]
    chunks = [c.to_arrow(decode=dec).column("value").to_pylist() for c in log.iter(chunk_records=1)]
    assert [v for c in chunks for v in c] == truth
    assert kbatch.open_log_dir(tmp_path).read("orders").to_arrow(decode=dec).column("value").to_pylist() == truth
    seg = tmp_path / "orders-0" / "00000000000000000000.log"
    assert main(["dump", "--registry", str(tmp_path / "reg.json"), str(seg)]) == 0
    assert [json.loads(line)["value"] for line in capfd.readouterr().out.splitlines()] == truth


def test_command_line_schemas_and_dump(tmp_path, capfd):
    data = write(tmp_path, bad=True)
    assert main(["schemas", str(data)]) == 0
    out = capfd.readouterr().out
    assert "orders-value" in out and "orders-key" in out and "AVRO" in out
    assert main(["schemas", str(data), "--format", "json"]) == 0
    rows = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert {(r["subject"], r["id"]) for r in rows} == {("orders-value", 1), ("orders-key", 2)}
    seg = data / "orders-0" / "00000000000000000000.log"
    assert main(["dump", "--registry", str(data), str(seg)]) == 1      # one bad value: exit 1
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert lines[0]["value"]["item"] == "item-0" and lines[0]["value"]["price"] == "0.25"
    assert lines[20]["value"] is None and "value_error" not in lines[20]
    assert "truncated" in lines[21]["value_error"]
    assert main(["schemas", str(tmp_path / "nowhere")]) == 1
    assert "kbatch schemas:" in capfd.readouterr().err


def test_plain_json_values_through_to_arrow(tmp_path):
    """Unframed JSON values (no registry) decoded by ``kbatch.JsonValues``
    inside ``to_arrow``: rows equal json.loads; a bad value names its offset."""
    objs = [{"n": i, "s": f"v{i}"} for i in range(5)]
    rows = [{"key": None, "value": json.dumps(o).encode(), "timestamp": 1_700_000_000_000 + i}
            for i, o in enumerate(objs)]
    rows.append({"key": None, "value": b"not json", "timestamp": 1_700_000_000_009})
    kbatch.write_log(tmp_path / "plain-0", rows)
    records = kbatch.open_log(tmp_path / "plain-0").read()
    table = records.to_arrow(decode={"value": kbatch.JsonValues()}, on_error="null")
    assert table.column("value").to_pylist() == objs + [None]
    assert table.column("value_error").to_pylist()[:5] == [None] * 5 and table.column("value_error")[5].as_py()
    with pytest.raises(PayloadError, match="record offset 5: not JSON"):
        records.to_arrow(decode={"value": kbatch.JsonValues()})


def test_dump_writes_valid_json_for_nan_and_infinities(tmp_path, capfd):
    """A double holding NaN or an infinity: JSON has no literal for them;
    ``dump --registry`` writes Protobuf's JSON strings, each line strict JSON."""
    schema = {"type": "record", "name": "F", "fields": [{"name": "x", "type": "double"},
                                                       {"name": "xs", "type": {"type": "array",
                                                                               "items": "double"}}]}
    (tmp_path / "reg.json").write_text(json.dumps(export(("f-value", 1, 1, schema))))
    seg = tmp_path / "f-0" / "00000000000000000000.log"
    seg.parent.mkdir()
    values = [{"x": float("nan"), "xs": [float("inf"), -float("inf"), 1.5]}]
    kbatch.write_segment(seg, [{"value": frame(1, avro_bytes(schema, v))} for v in values])
    assert main(["dump", "--registry", str(tmp_path / "reg.json"), str(seg)]) == 0
    line = capfd.readouterr().out.splitlines()[0]
    row = json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON literal {c}"))
    assert row["value"] == {"x": "NaN", "xs": ["Infinity", "-Infinity", 1.5]}


@pytest.mark.parametrize("name, topic", [
    ("/data/orders.v2-3/00000000000000000000.log", "orders.v2"),
    ("s3://bucket/data/my-topic-0/00000000000000000042.log", "my-topic"),
    ("s3://bucket/orders-AbCdEfGhIjKlMnOpQrStUv/7/00000000000000000000-AbCdEfGhIjKlMnOpQrStUv.log", "orders"),
    ("/copied/00000000000000000000.log", None),
    ("/data/orders-0.abc-delete/00000000000000000000.log", None),
    ("00000000000000000000.log", None)])
def test_the_topic_a_segment_file_names(name, topic):
    from kbatch.lib.paths import topic_of_file
    assert topic_of_file(name) == topic


def test_dump_prints_dates_and_times_beyond_pythons_years(tmp_path, capfd):
    """Avro timestamps and dates of years 10000, 0 and -1 (valid Avro and
    Arrow; Python's datetime holds years 1-9999): every row printed, such a
    value as ISO 8601 text with an expanded year, the others as before."""
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "days", "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}}},
        {"name": "us", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]}]}
    (tmp_path / "reg.json").write_text(json.dumps(export(("t-value", 1, 1, schema))))
    day_ms = 86_400_000
    year_10000 = 2_932_897 * day_ms       # days from 1970-01-01 to 10000-01-01
    year_0 = -719_528                     # days from 1970-01-01 back to 0000-01-01
    rows = [{"ms": year_10000 + 1, "days": [year_0, year_0 - 1, 0], "us": year_0 * day_ms * 1000 - 1},
            {"ms": 1_700_000_000_000, "days": [19_000], "us": None}]
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    seg.parent.mkdir()
    # written as integers: fastavro's writer takes them as the datum's ints
    plain = {"type": "record", "name": "T", "fields": [
        {"name": "ms", "type": "long"}, {"name": "days", "type": {"type": "array", "items": "int"}},
        {"name": "us", "type": ["null", "long"]}]}
    kbatch.write_segment(seg, [{"value": frame(1, avro_bytes(plain, r))} for r in rows])
    assert main(["dump", "--registry", str(tmp_path / "reg.json"), str(seg)]) == 0
    out = [json.loads(line)["value"] for line in capfd.readouterr().out.splitlines()]
    assert out[0] == {"ms": "+10000-01-01T00:00:00.001000+00:00",
                      "days": ["0000-01-01", "-0001-12-31", "1970-01-01"],
                      "us": "-0001-12-31T23:59:59.999999"}
    import datetime
    utc = datetime.timezone.utc
    assert out[1] == {"ms": datetime.datetime.fromtimestamp(1_700_000_000, utc).isoformat(),
                      "days": [(datetime.date(1970, 1, 1) + datetime.timedelta(19_000)).isoformat()],
                      "us": None}


def test_dump_prints_json_schema_dates_of_year_zero(tmp_path, capfd):
    schema = {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"},
                                               "d": {"type": "string", "format": "date"}}}
    entries = export(("j-value", 1, 1, schema))
    entries[0]["schemaType"] = "JSON"
    (tmp_path / "reg.json").write_text(json.dumps(entries))
    texts = ['{"t": "0000-01-01T00:00:00Z", "d": "0000-02-29"}', '{"t": "2024-05-06T07:08:09.5Z"}']
    kbatch.write_log(tmp_path / "j-0", [{"value": frame(1, t.encode())} for t in texts])
    seg = tmp_path / "j-0" / "00000000000000000000.log"
    assert main(["dump", "--registry", str(tmp_path / "reg.json"), str(seg)]) == 0
    out = [json.loads(line)["value"] for line in capfd.readouterr().out.splitlines()]
    assert out == [{"t": "0000-01-01T00:00:00+00:00", "d": "0000-02-29"},
                   {"t": "2024-05-06T07:08:09.500000+00:00", "d": None}]


def test_the_expanded_iso_text_agrees_with_isoformat_inside_pythons_years():
    """``_iso_instant`` (used only where datetime cannot go) lays values out
    as ``isoformat`` does wherever both can: checked on days across the
    whole range, leap days and fractions."""
    import datetime
    import random
    from kbatch.tools.schemas import _iso_day, _iso_instant
    utc = datetime.timezone.utc
    rng = random.Random(7)
    lo, hi = datetime.datetime(1, 1, 1, tzinfo=utc), datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=utc)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=utc)
    for _ in range(2000):
        us = rng.randrange(int((lo - epoch).total_seconds()) * 10**6, int((hi - epoch).total_seconds()) * 10**6)
        us -= us % rng.choice([1, 1000, 10**6])
        when = epoch + datetime.timedelta(microseconds=us)
        assert _iso_instant(us, "us", True) == when.isoformat()
        assert _iso_instant(us // 1000, "ms", False) == when.replace(
            tzinfo=None, microsecond=when.microsecond // 1000 * 1000).isoformat()
        assert _iso_day(us // 86_400_000_000) == when.date().isoformat()
