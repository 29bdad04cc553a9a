"""Where a registry comes from, found through kbatch's one door
(``kbatch.lib.open`` / ``kbatch.lib.tree``: paths and URLs alike):

- a broker data directory (its ``_schemas`` partition, or the topic named
  by ``topic=``), a ``_schemas-0`` partition directory or one segment of it;
- a JSON export: a ``.json`` file holding the list that
  ``GET /schemas?deleted=true`` returns (or such a list in Python);
- a folder of schema files (``.avsc``, ``.proto``, ``.json``) with an id
  map, ``ids.json``: ``{"file name": id}`` or ``{"file name": {"id": N,
  "subject": S, "version": V, "references": [...]}}`` (subject defaults to
  the file name without its extension, version to 1).
"""

from __future__ import annotations

import json

from kbatch.errors import SchemaError
from kbatch.lib.log import open_log
from kbatch.lib.open import read_side_file, resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.entry import read_segment
from kbatch.lib.storage import Storage
from kbatch.lib.tree import locate
from kbatch.payloads.store import State

SCHEMA_TOPIC = "_schemas"
SCHEMA_FILES = {".avsc": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}
ID_MAP = "ids.json"
MAX_FILE = 64 << 20


def load(source, *, topic: str = SCHEMA_TOPIC, storage: Storage | None = None) -> tuple[State, str]:
    """The state a source holds, and a description of the source."""
    if isinstance(source, (list, tuple)) and (not source or isinstance(source[0], dict)):
        return from_export(source), "a JSON export"
    storage = Storage.of(storage)
    loc = locate(source, storage)
    entry = loc.stat()
    if entry.kind == "file" and loc.name.endswith(".json"):
        raw = read_side_file(loc.parent, loc.name, MAX_FILE)
        try:
            return from_export(json.loads(raw)), str(loc)
        except (ValueError, TypeError) as exc:
            raise SchemaError(f"{loc}: not a registry export (a JSON list of schemas): {exc}") from None
    if entry.kind == "directory":
        names = {e.name for e in loc.list() if e.is_file}
        if ID_MAP in names:
            return from_folder(loc, names), str(loc)
    found = resolve(source, storage, transient_ok=True)
    return from_topic(found, topic), found.name


def from_export(entries) -> State:
    if not isinstance(entries, list):
        raise SchemaError("a registry export is a JSON list of schemas (GET /schemas?deleted=true)")
    state = State()
    for i, v in enumerate(entries):
        if not isinstance(v, dict):
            raise SchemaError(f"entry {i} of the export is not an object")
        state.apply_schema(v, offset=i)
    return state


def from_folder(loc, names: set[str]) -> State:
    raw = read_side_file(loc, ID_MAP, MAX_FILE)
    try:
        ids = json.loads(raw)
    except ValueError as exc:
        raise SchemaError(f"{loc}/{ID_MAP}: not JSON: {exc}") from None
    if not isinstance(ids, dict):
        raise SchemaError(f"{loc}/{ID_MAP}: expected an object of file name -> id")
    state = State()
    for name, meta in sorted(ids.items()):
        meta = {"id": meta} if not isinstance(meta, dict) else meta
        ext = "." + name.rpartition(".")[2] if "." in name else ""
        if name not in names or ext not in SCHEMA_FILES:
            raise SchemaError(f"{loc}/{ID_MAP} names {name!r}, which is not a schema file here "
                              f"(.avsc, .proto or .json)")
        text = read_side_file(loc, name, MAX_FILE)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise SchemaError(f"{loc}/{name}: not UTF-8 text") from None
        state.apply_schema({"subject": meta.get("subject", name.rpartition(".")[0]),
                            "version": meta.get("version", 1), "id": meta.get("id"),
                            "schemaType": meta.get("schemaType", SCHEMA_FILES[ext]), "schema": text,
                            "references": meta.get("references", [])}, offset=name)
    return state


def from_topic(found, topic: str) -> State:
    """Replay the records of the registry's topic (a data directory's
    partition of it, a partition, or a segment)."""
    if found.kind is PathKind.SEGMENT:
        parts = [read_segment(found)]
    elif found.kind is PathKind.PARTITION:
        parts = [open_log(found).read()]
    else:
        chosen = [p for p in found.partitions() if p.topic == topic]
        if not chosen:
            topics = sorted({p.topic for p in found.partitions()})
            raise SchemaError(f"{found.name}: no {topic!r} partition (topics here: "
                              f"{', '.join(topics[:12]) or 'none'}{' ...' if len(topics) > 12 else ''})")
        parts = [open_log(p.location, storage=found.storage).read() for p in chosen]
    state = State()
    for records in parts:
        for off, key, value in zip(records.offset.tolist(), records.key.to_pylist(), records.value.to_pylist()):
            state.apply_record(off, key, value)
    return state
