"""JSON Schema -> Arrow type, for the JSON payloads (``kbatch.payloads.json_decode``):
which schemas say nothing of a value (it is inferred), which take a null,
how ``$ref`` is followed (in the schema, or in a schema its registry
references name), and the type of each keyword (see ``json_decode``'s
table). A value a schema types as no one type is held as its JSON text: the
internal extension type ``json_text_type``, a plain string in the arrays
``decode`` gives (``public_type``).
"""

from __future__ import annotations

from kbatch.errors import SchemaError

MAX_REF_DEPTH = 32


def says_nothing(schema, refs=None) -> bool:
    """A top-level JSON Schema that gives no fields: the type is inferred.
    Its $refs are followed (``refs`` as for ``arrow_type``), and
    ``"properties": {}`` says no more than no ``properties``; an object
    whose ``additionalProperties`` is false allows no members and reads as
    an empty struct, as nested."""
    schema = _followed(schema, refs)
    if schema is True or schema == {}:
        return True
    return (isinstance(schema, dict) and schema.get("type", "object") == "object"
            and not schema.get("properties") and "$ref" not in schema
            and schema.get("additionalProperties", True) is not False
            and not any(k in schema for k in ("allOf", "anyOf", "oneOf", "items", "enum", "const")))


def accepts_null(schema, refs=None, root=None, depth: int = 0) -> bool:
    """Whether a top-level ``schema`` names null among its values (its
    ``type`` lists null, an enum or const holds it, an anyOf/oneOf pairs it
    with one schema, an allOf's members all do; $refs followed): the JSON
    text ``null`` is then a null row, and otherwise a failed one."""
    root = schema if root is None else root
    if not isinstance(schema, dict) or depth > MAX_REF_DEPTH:
        return False
    if "$ref" in schema:
        try:
            target, root, refs = _resolve(schema["$ref"], root, refs)
        except SchemaError:
            return False
        return accepts_null(target, refs, root, depth + 1)
    t = schema.get("type")
    if t is not None:
        return t == "null" or (isinstance(t, list) and "null" in t)
    if "enum" in schema:
        return isinstance(schema["enum"], list) and None in schema["enum"]
    if "const" in schema:
        return schema["const"] is None
    if _nullable_pair(schema) is not None:
        return True
    alls = schema.get("allOf")
    return (isinstance(alls, list) and bool(alls)
            and all(accepts_null(a, refs, root, depth + 1) for a in alls))


def _followed(schema, refs):
    """``schema`` with its $refs followed and a nullable pair (an anyOf or
    oneOf of null and one schema) or a type of ``[T, "null"]`` read as its
    non-null schema; ``schema`` itself where a $ref names nothing (then
    ``arrow_type`` says why)."""
    root = schema
    for _ in range(MAX_REF_DEPTH):
        if not isinstance(schema, dict):
            return schema
        if "$ref" in schema:
            try:
                schema, root, refs = _resolve(schema["$ref"], root, refs)
            except SchemaError:
                return schema
            continue
        pair = _nullable_pair(schema)
        if pair is not None:
            schema = pair
            continue
        t = schema.get("type")
        if isinstance(t, list) and "null" in t and len(t) == 2:
            return dict(schema, type=[k for k in t if k != "null"][0])
        return schema
    return schema


def _nullable_pair(schema):
    """The non-null member of an ``anyOf`` or ``oneOf`` of null and one
    schema (Confluent's generator writes nullable fields so), or None."""
    if "type" in schema or "properties" in schema:
        return None
    for word in ("anyOf", "oneOf"):
        alts = schema.get(word)
        if isinstance(alts, list) and len(alts) == 2:
            real = [a for a in alts if not (isinstance(a, dict) and a.get("type") == "null")]
            if len(real) == 1:
                return real[0]
    return None


def _resolve(ref, root, refs):
    """(the schema, its root, its refs) that a ``$ref`` names: a definition
    of ``root`` (``#/definitions/X``, ``#/$defs/X``), or a schema the
    registry's references name, whole or a definition in it."""
    doc, _, fragment = ref.partition("#") if isinstance(ref, str) else ("", "", "")
    target_root, target_refs = root, refs
    if doc:                                   # another schema the registry holds
        found = (refs(doc) if callable(refs) else (refs or {}).get(doc)) if refs else None
        if found is None:
            raise SchemaError(f"JSON Schema $ref {ref!r}: no schema reference named {doc!r} "
                              "(a schema's references name the documents its $refs read)")
        target_root, target_refs = found
    if not fragment:
        if doc:
            return target_root, target_root, target_refs
    else:
        for prefix in ("/definitions/", "/$defs/"):
            if fragment.startswith(prefix) and isinstance(target_root, dict):
                target = (target_root.get(prefix[1:-1]) or {}).get(fragment[len(prefix):])
                if target is not None:
                    return target, target_root, target_refs
    raise SchemaError(f"JSON Schema $ref {ref!r}: only #/definitions or #/$defs refs, "
                      "in this schema or in one its references name, are read")


_JSON_TEXT = {}


def json_text_type(pa):
    """The type ``arrow_type`` gives a value held as its JSON text (a schema
    that names no one type: ``{}``, an enum or const of mixed types,
    ``allOf``...): an extension of string, so that ``decode`` knows to write
    the text; the arrays ``decode`` gives hold it as a plain string."""
    if "type" not in _JSON_TEXT:
        class JsonText(pa.ExtensionType):
            def __init__(self):
                super().__init__(pa.string(), "kbatch.json_text")

            def __arrow_ext_serialize__(self):
                return b""

            @classmethod
            def __arrow_ext_deserialize__(cls, storage_type, serialized):
                return cls()

        _JSON_TEXT["type"] = JsonText()
    return _JSON_TEXT["type"]


def public_type(t, pa):
    """``t`` with its JSON text fields as plain strings: the type of the
    arrays ``decode`` gives for ``t``."""
    if is_text(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, public_type(f.type, pa)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(public_type(t.value_type, pa))
    return t


def is_text(t) -> bool:
    return getattr(t, "extension_name", None) == "kbatch.json_text"


def has_text(t, pa) -> bool:
    """Whether ``t`` holds a JSON text field (at any depth)."""
    return t is not None and public_type(t, pa) != t


def _kind_of_values(values) -> str | None:
    """The JSON Schema type of an enum's (or const's) values when they all
    have one (null aside; integers and numbers together are numbers), else
    None."""
    kinds = {"boolean" if isinstance(v, bool) else "integer" if isinstance(v, int)
             else "number" if isinstance(v, float) else "string" if isinstance(v, str)
             else "other" for v in values if v is not None}
    if kinds == {"integer", "number"}:
        return "number"
    if not kinds:
        return "null"
    return kinds.pop() if len(kinds) == 1 and "other" not in kinds else None


def arrow_type(schema, pa, root=None, depth: int = 0, refs=None, nested: bool = False):
    """The Arrow type of a JSON Schema. ``refs``: the schemas its registry
    references name (``{name: (schema, their refs)}``, or a function of a
    name giving that pair or None), for a ``$ref`` to ``name`` or
    ``name#/definitions/X``; local refs (``#/definitions/X``,
    ``#/$defs/X``) resolve in ``root``. A schema that names no one type is
    ``json_text_type`` (``decode`` gives its values' JSON text)."""
    root = schema if root is None else root
    if depth > MAX_REF_DEPTH:
        raise SchemaError("a JSON Schema whose $refs nest too deeply (recursive?)")
    if not isinstance(schema, dict):
        return json_text_type(pa)
    if "$ref" in schema:
        target, target_root, target_refs = _resolve(schema["$ref"], root, refs)
        return arrow_type(target, pa, target_root, depth + 1, target_refs, nested)
    pair = _nullable_pair(schema)
    if pair is not None:                      # [null, T]: a nullable T
        return arrow_type(pair, pa, root, depth + 1, refs, nested)
    for word in ("anyOf", "oneOf"):
        alts = schema.get(word)
        if isinstance(alts, list) and "type" not in schema and "properties" not in schema:
            real = [a for a in alts if not (isinstance(a, dict) and a.get("type") == "null")]
            raise SchemaError(f"a JSON Schema {word} of {len(real)} types has no one Arrow type "
                              "(kbatch reads one type per field): decode with a reader_schema "
                              "that names one")
    t = schema.get("type")
    if isinstance(t, list):
        kinds = [k for k in t if k != "null"]
        if len(kinds) > 1:
            raise SchemaError(f"a JSON Schema type {t} has no one Arrow type (kbatch reads one "
                              "type per field): decode with a reader_schema that names one")
        t = kinds[0] if kinds else "null"
    if t is None and "properties" in schema:
        t = "object"
    if t is None and isinstance(schema.get("enum"), list):
        t = _kind_of_values(schema["enum"])
    elif t is None and "const" in schema:
        t = _kind_of_values([schema["const"]])
    if t == "object":
        props = schema.get("properties") or {}
        if not props and nested and schema.get("additionalProperties", True) is not False:
            # its members would all be dropped: a row that looks whole but is not
            raise SchemaError("a JSON Schema object that declares no properties (its members "
                              "only allowed by additionalProperties) has no Arrow columns: "
                              "its contents would be dropped; decode with a reader_schema that "
                              "declares them, or without a schema (inferred)")
        return pa.struct([pa.field(k, arrow_type(v, pa, root, depth, refs, True))
                          for k, v in props.items()])
    if t == "array":
        return pa.list_(arrow_type(schema.get("items", {}), pa, root, depth, refs, True))
    if t == "string":
        fmt = schema.get("format")
        return pa.timestamp("us", "UTC") if fmt == "date-time" else pa.date32() if fmt == "date" else pa.string()
    scalar = {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(),
              "null": pa.null()}.get(t)
    return json_text_type(pa) if scalar is None else scalar
