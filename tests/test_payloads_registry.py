"""The offline registry's sources: the ``_schemas`` topic written as the
Schema Registry writes it (keys and values JSON, deletes, tombstones,
CONFIG/MODE/NOOP records), the shared corpus's real ``_schemas`` partition,
a JSON export file and a folder of schema files."""

from __future__ import annotations

import json

import pytest

import kbatch
from kbatch.errors import SchemaError, UnknownSchemaError
from tests.conftest import CORPUS, needs_corpus
from tests.registry_ref import avro_bytes, frame

S1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
S2 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                    {"name": "note", "type": "string", "default": ""}]}
S3 = {"type": "record", "name": "Pay", "fields": [{"name": "amount", "type": "double"}]}


def key(keytype, **kw):
    return json.dumps({"keytype": keytype, **kw, "magic": 1 if keytype == "SCHEMA" else 0},
                      separators=(",", ":")).encode()


def schema_value(subject, version, sid, schema, deleted=False, **extra):
    return json.dumps({"subject": subject, "version": version, "id": sid,
                       "schema": json.dumps(schema), "deleted": deleted, **extra}).encode()


def registry_topic(tmp_path, records):
    part = tmp_path / "data" / "_schemas-0"
    kbatch.write_log(part, [{"key": k, "value": v, "timestamp": 1_700_000_000_000 + i}
                            for i, (k, v) in enumerate(records)])
    return tmp_path / "data"


def test_the_topic_as_the_registry_writes_it(tmp_path):
    records = [
        (key("NOOP"), None),
        (key("CONFIG"), json.dumps({"compatibilityLevel": "BACKWARD"}).encode()),
        (key("SCHEMA", subject="orders-value", version=1), schema_value("orders-value", 1, 1, S1)),
        (key("SCHEMA", subject="orders-value", version=2), schema_value("orders-value", 2, 2, S2)),
        (key("SCHEMA", subject="pay-value", version=1), schema_value("pay-value", 1, 3, S3)),
        (key("CONFIG", subject="pay-value"), json.dumps({"compatibilityLevel": "NONE"}).encode()),
        (key("MODE"), json.dumps({"mode": "READWRITE"}).encode()),
        # soft delete of orders-value v2, then the subject, then a hard delete of pay-value v1
        (key("SCHEMA", subject="orders-value", version=2), schema_value("orders-value", 2, 2, S2, True)),
        (key("NOOP"), None),
        (key("DELETE_SUBJECT", subject="pay-value"), json.dumps({"subject": "pay-value", "version": 1}).encode()),
        (key("SCHEMA", subject="pay-value", version=1), None),
        (key("SCHEMA", subject="other", version=1), schema_value("other", 1, 1, S1)),     # same id, same text
        (key("SCHEMA", subject="clash", version=1), schema_value("clash", 1, 2, S3)),    # id 2, other text
        (b"not json", b"{}"),
        (key("CONTEXT"), b"{}"),
    ]
    reg = kbatch.registry(registry_topic(tmp_path, records))
    assert reg.subjects() == ["orders-value", "other"]
    assert [v.version for v in reg.versions("orders-value")] == [1]
    assert [(v.version, v.deleted) for v in reg.versions("orders-value", deleted=True)] == [(1, False), (2, True)]
    assert reg.latest("orders-value").id == 1
    with pytest.raises(SchemaError, match="not in the registry"):
        reg.latest("pay-value")                     # hard-deleted
    assert reg.ids == [1, 2, 3]                     # ids stay resolvable
    assert reg.schema(3).text == json.dumps(S3)
    assert reg.state.configs == {"": {"compatibilityLevel": "BACKWARD"}, "pay-value": {"compatibilityLevel": "NONE"}}
    assert reg.state.modes == {"": {"mode": "READWRITE"}}
    assert reg.state.key_types["NOOP"] == 2 and reg.state.key_types["CONTEXT"] == 1
    assert len(reg.state.conflicts) == 1 and reg.state.conflicts[0][1:] == (2, "clash", 1)
    assert [off for off, _ in reg.state.skipped] == [13]
    assert "clash" not in reg.subjects(deleted=True)
    text = repr(reg)
    assert "orders-value v2 id=2 AVRO (deleted)" in text and "other v1 id=1 AVRO" in text
    # a hard-deleted version's data still decodes (by id); live ids read with the
    # subject's latest version (v1)
    assert reg.decode([frame(3, avro_bytes(S3, {"amount": 2.5}))]).to_pylist() == [{"amount": 2.5}]
    values = [frame(1, avro_bytes(S1, {"id": 5})), frame(1, avro_bytes(S1, {"id": 6}))]
    assert reg.decode(values, subject="orders-value").to_pylist() == [{"id": 5}, {"id": 6}]
    assert reg.decode(values, reader_schema=S2).to_pylist() == [{"id": 5, "note": ""}, {"id": 6, "note": ""}]
    # id 2, given S2 and then (the clash) S3: its values fail naming the conflict, never
    # decoded with either schema
    values = [frame(2, avro_bytes(S2, {"id": 5, "note": "x"})), frame(1, avro_bytes(S1, {"id": 6}))]
    got, errors = reg.decode(values, subject="orders-value", on_error="null", with_errors=True)
    assert got.to_pylist() == [None, {"id": 6}]
    assert "schema id 2 was given two different schemas" in errors[0].as_py()
    # the partition, and its segment, give the same registry
    part = kbatch.registry(tmp_path / "data" / "_schemas-0")
    assert repr(part).splitlines()[1:] == text.splitlines()[1:]
    seg = kbatch.registry(tmp_path / "data" / "_schemas-0" / "00000000000000000000.log")
    assert seg.ids == reg.ids
    tbl = reg.table()
    assert tbl.column_names == ["subject", "version", "id", "type", "deleted"] and tbl.num_rows == 3


def test_a_data_directory_without_the_topic(tmp_path):
    kbatch.write_log(tmp_path / "d" / "orders-0", [{"value": b"x"}])
    with pytest.raises(SchemaError, match="no '_schemas' partition"):
        kbatch.registry(tmp_path / "d")
    with pytest.raises(kbatch.PathError):
        kbatch.registry(tmp_path / "nowhere")


def test_clear_subject_forgets_soft_deleted_versions(tmp_path):
    records = [
        (key("SCHEMA", subject="a", version=1), schema_value("a", 1, 1, S1)),
        (key("SCHEMA", subject="a", version=2), schema_value("a", 2, 2, S2)),
        (key("DELETE_SUBJECT", subject="a"), json.dumps({"subject": "a", "version": 1}).encode()),
        (key("CLEAR_SUBJECT", subject="a"), json.dumps({"subject": "a"}).encode()),
    ]
    reg = kbatch.registry(registry_topic(tmp_path, records))
    assert [v.version for v in reg.versions("a", deleted=True)] == [2]
    assert reg.ids == [1, 2]


@needs_corpus
def test_the_corpus_schemas_partition():
    """The real _schemas partition: the registry holds what its records say
    (read here with json alone)."""
    part = CORPUS / "mscaldas2012__kafka-connect-spooldir" / "kafka-data" / "_schemas-0"
    records = kbatch.open_log(part).read()
    said_subjects, said_ids, kinds = set(), set(), {}
    for k, v in zip(records.key.to_pylist(), records.value.to_pylist()):
        kj = json.loads(k)
        kinds[kj["keytype"]] = kinds.get(kj["keytype"], 0) + 1
        if kj["keytype"] == "SCHEMA" and v is not None:
            vj = json.loads(v)
            said_subjects.add(vj["subject"])
            said_ids.add(vj["id"])
    reg = kbatch.registry(part)
    assert set(reg.subjects(deleted=True)) == said_subjects
    assert set(reg.ids) == said_ids
    assert dict(reg.state.key_types) == kinds and sum(kinds.values()) == len(records)
    assert reg.state.skipped == []
    whole = kbatch.registry(part.parent)          # the data directory: its _schemas partition
    assert whole.ids == reg.ids and dict(whole.state.key_types) == kinds


def test_a_json_export_file_and_a_folder(tmp_path):
    export = [{"subject": "orders-value", "version": 1, "id": 10, "schema": json.dumps(S1)},
              {"subject": "orders-value", "version": 2, "id": 11, "schema": json.dumps(S2), "deleted": True}]
    (tmp_path / "export.json").write_text(json.dumps(export))
    reg = kbatch.registry(tmp_path / "export.json")
    assert reg.ids == [10, 11] and reg.latest("orders-value").version == 1
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "order.avsc").write_text(json.dumps(S2))
    (folder / "pay.avsc").write_text(json.dumps(S3))
    (folder / "ids.json").write_text(json.dumps({"order.avsc": {"id": 7, "subject": "orders-value"},
                                                 "pay.avsc": 8}))
    reg = kbatch.registry(folder)
    assert reg.subjects() == ["orders-value", "pay"] and reg.ids == [7, 8]
    assert reg.decode([frame(8, avro_bytes(S3, {"amount": 2.5}))]).to_pylist() == [{"amount": 2.5}]
    with pytest.raises(UnknownSchemaError, match="schema id 9"):
        reg.decode([frame(9, b"")])
    (folder / "ids.json").write_text(json.dumps({"missing.avsc": 1}))
    with pytest.raises(SchemaError, match="missing.avsc"):
        kbatch.registry(folder)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SchemaError, match="not a registry export"):
        kbatch.registry(tmp_path / "bad.json")


def test_a_remote_topic_through_the_door(tmp_path):
    """The same topic under a memory:// URL (fsspec): the door reads it."""
    fsspec = pytest.importorskip("fsspec")
    records = [(key("SCHEMA", subject="orders-value", version=1), schema_value("orders-value", 1, 1, S1))]
    data = registry_topic(tmp_path, records)
    fs = fsspec.filesystem("memory")
    for f in (data / "_schemas-0").iterdir():
        fs.pipe(f"/regtest/data/_schemas-0/{f.name}", f.read_bytes())
    reg = kbatch.registry("memory://regtest/data")
    assert reg.ids == [1] and reg.subjects() == ["orders-value"]


@pytest.mark.parametrize("kind", ["AVRO", "PROTOBUF", "JSON"])
def test_a_reference_the_registry_does_not_hold(kind):
    """A schema whose reference names a subject version the registry lacks:
    a SchemaError naming both, for every schema type (one lookup)."""
    text = {"AVRO": json.dumps({"type": "record", "name": "O", "fields": [
                {"name": "c", "type": "Customer"}]}),
            "PROTOBUF": 'syntax = "proto3";\nimport "customer.proto";\n'
                        'message O { Customer c = 1; }\n',
            "JSON": json.dumps({"type": "object", "properties": {"c": {"$ref": "customer.json"}}})}[kind]
    name = {"AVRO": "Customer", "PROTOBUF": "customer.proto", "JSON": "customer.json"}[kind]
    reg = kbatch.registry([{"subject": "o-value", "version": 1, "id": 40, "schemaType": kind,
                            "schema": text,
                            "references": [{"name": name, "subject": "customer", "version": 3}]}])
    value = b"\x00\x00\x00\x00\x28" + (b"\x00" if kind == "PROTOBUF" else b"") + \
        (b'{"c": {}}' if kind == "JSON" else b"\x00")
    with pytest.raises(SchemaError, match="references 'customer' version 3, which the registry "
                                          "does not hold"):
        reg.decode([value])
