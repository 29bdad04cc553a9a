"""The Schema Registry's state, replayed from its records: the ``_schemas``
topic (KafkaStore), a JSON export (``GET /schemas?deleted=true``) or a
folder of schema files all end up as calls of ``State.apply``.

The topic's records (confluentinc/schema-registry, SchemaRegistryKey* and
KafkaStoreMessageHandler), keys and values JSON:

    key   {"keytype": "SCHEMA", "subject": S, "version": V, "magic": 1}
    value {"subject": S, "version": V, "id": N, "schemaType": "PROTOBUF"|"JSON"
           (absent: AVRO), "schema": "...", "references": [{"name", "subject",
           "version"}], "deleted": bool, "guid": "..." (newer registries)}
          | null: the version is hard-deleted (a tombstone)
    key   {"keytype": "DELETE_SUBJECT", "subject": S} value {"subject": S, "version": V}:
          versions 1..V of S are soft-deleted
    key   {"keytype": "CLEAR_SUBJECT", "subject": S}: soft-deleted versions of S are gone
    key   {"keytype": "CONFIG" | "MODE", "subject": S or absent} value {...} | null
    key   {"keytype": "NOOP"} (value null): the reader thread's marker
    other key types (CONTEXT, ...): counted, not used

Records are applied in offset order, so the latest record of a key wins (a
compacted topic keeps only those). Deletes hide versions from lookups by
subject; a schema id stays resolvable once any record gave it, since data
written with it may remain. A second schema claiming a known id with
another text is refused, as the registry refuses it, and listed in
``conflicts`` (a value carrying that id then fails: ``Registry.decode``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class SchemaInfo:
    id: int
    schema_type: str            # AVRO, PROTOBUF, JSON
    text: str
    references: tuple = ()      # ((name, subject, version), ...)
    guid: str | None = None


@dataclass
class Version:
    subject: str
    version: int
    id: int
    deleted: bool = False


@dataclass
class State:
    schemas: dict = field(default_factory=dict)          # id -> SchemaInfo
    subjects: dict = field(default_factory=dict)         # subject -> {version: Version}
    configs: dict = field(default_factory=dict)          # subject or "" -> value
    modes: dict = field(default_factory=dict)
    key_types: Counter = field(default_factory=Counter)  # records seen per key type
    skipped: list = field(default_factory=list)          # (offset, why): records that do not parse
    conflicts: list = field(default_factory=list)        # (offset, id, subject, version)
    guids: dict = field(default_factory=dict)            # guid (lower case) -> id

    # --- the topic ---------------------------------------------------------------

    def apply_record(self, offset, key: bytes | None, value: bytes | None) -> None:
        try:
            k = json.loads(key) if key is not None else None
            v = json.loads(value) if value else None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            self.skipped.append((offset, f"not JSON: {exc}"))
            return
        if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
            self.skipped.append((offset, "a key without a keytype"))
            return
        kind = k["keytype"]
        self.key_types[kind] += 1
        if v is not None and not isinstance(v, dict):
            self.skipped.append((offset, f"a {kind} value that is not an object"))
            return
        if kind == "SCHEMA":
            subject, version = k.get("subject"), k.get("version")
            if not isinstance(subject, str) or not _is_int(version):
                self.skipped.append((offset, "a SCHEMA key without subject and version"))
                return
            if v is None:
                self.subjects.get(subject, {}).pop(version, None)
            else:
                self.apply_schema(v, offset)
        elif kind == "DELETE_SUBJECT":
            subject = (v or {}).get("subject", k.get("subject"))
            upto = (v or {}).get("version")
            if isinstance(subject, str) and _is_int(upto):
                for ver in self.subjects.get(subject, {}).values():
                    if ver.version <= upto:
                        ver.deleted = True
        elif kind == "CLEAR_SUBJECT":
            subject = (v or {}).get("subject", k.get("subject"))
            versions = self.subjects.get(subject, {})
            for num in [n for n, ver in versions.items() if ver.deleted]:
                del versions[num]
        elif kind in ("CONFIG", "MODE"):
            table = self.configs if kind == "CONFIG" else self.modes
            scope = k.get("subject") or ""
            if v is None:
                table.pop(scope, None)
            else:
                table[scope] = v

    def apply_schema(self, v: dict, offset=None) -> None:
        """One schema version (a SCHEMA record's value, or an export's entry)."""
        subject, version, sid, text = v.get("subject"), v.get("version"), v.get("id"), v.get("schema")
        if not (isinstance(subject, str) and _is_int(version) and _is_int(sid) and isinstance(text, str)):
            self.skipped.append((offset, "a schema without subject, version, id and schema"))
            return
        refs = tuple((r.get("name"), r.get("subject"), r.get("version"))
                     for r in v.get("references") or () if isinstance(r, dict))
        kind = v.get("schemaType") or "AVRO"
        known = self.schemas.get(sid)
        if known is not None and known.text != text:
            self.conflicts.append((offset, sid, subject, version))
            return
        if known is None:
            known = self.schemas[sid] = SchemaInfo(sid, kind, text, refs, v.get("guid"))
        if isinstance(v.get("guid"), str):
            known.guid = v["guid"]
            self.guids[v["guid"].lower()] = sid
        self.subjects.setdefault(subject, {})[version] = Version(subject, version, sid,
                                                                  bool(v.get("deleted")))

    # --- lookups ---------------------------------------------------------------------

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        return sorted((ver for ver in self.subjects.get(subject, {}).values() if deleted or not ver.deleted),
                      key=lambda ver: ver.version)

    def subjects_of(self, sid: int) -> list[Version]:
        """Every (subject, version) registered with an id (deleted ones too)."""
        return [ver for versions in self.subjects.values() for ver in versions.values() if ver.id == sid]


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
