"""JSON Schema payloads (Confluent's ``schemaType: JSON``): the datum after
the framing is JSON text. The reader's JSON Schema gives the Arrow type;
fields are matched by name (a field the reader lacks is ignored, one the
value lacks is null), so versions of a subject decode into one type.

    object (properties)   struct (every field nullable)
    array (items)         list
    string                string; format date-time: timestamp[us, UTC]
                          (RFC 3339: seconds and a Z or +-HH:MM offset; a
                          value without them is a failed row, never read as
                          UTC); format date: date32
    integer / number      int64 / float64 (an integer is any number whose
                          value is whole, as from draft 6: 1.0 and 1e2 too)
    boolean / null        bool / null
    ["T", "null"]         T, nullable
    enum / const          the type of its values where they have one (null
                          aside; integers and numbers together: float64)
    $ref "#/definitions/X" or "#/$defs/X"   the definition; "name" or
                          "name#/definitions/X": in the schema a reference
                          of the registry's record names (``refs``)
    anything else         string: the JSON text of the value (``{}``, an
                          enum of mixed types, allOf...), ``_text``: no
                          whitespace, members in the writer's order,
                          numbers as written; a JSON null is a null

A schema that says nothing of the value's fields (``{}``, ``true``, an
object without ``properties`` or with ``"properties": {}``, a $ref to one),
or none at all (``JsonValues``: unframed JSON text), gives no type: it is
inferred from the values by pyarrow's JSON reader (objects only; values
whose types conflict across rows raise a ``SchemaError`` asking for a
schema).

A value whose text is ``null`` is a null row where the schema names null
(``["T", "null"]``...: ``accepts_null``) and a failed row otherwise. A
UTF-8 byte order mark before a value is skipped (RFC 8259 8.1: a writer
must not add one, a parser may ignore it), in every row alike.

An object of scalar fields (integer, number, boolean, string, date-time,
date) is decoded by kbatch's compiled decoder (``kbatch._core._json``),
which takes the common form of each and hands every other row back. All
other values are parsed by pyarrow's JSON reader at once (a raw newline can
only be whitespace in JSON, so each value becomes one line); when that
fails, each value is parsed alone and the ones that do not parse or do not
fit the type are converted in Python (``_python_read``: the forms the
reader does not take, such as an integer written 1.0) or become failed
rows. A type holding JSON text is read by ``_python_read`` alone.
"""

from __future__ import annotations

import json
import re

import numpy as np

from kbatch.errors import PayloadError, SchemaError

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
    if _is_text(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, public_type(f.type, pa)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(public_type(t.value_type, pa))
    return t


def _is_text(t) -> bool:
    return getattr(t, "extension_name", None) == "kbatch.json_text"


def _has_text(t, pa) -> bool:
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


def decode(data: np.ndarray, start: np.ndarray, end: np.ndarray, live: np.ndarray, typ, pa,
           nullable: bool = False):
    """(array of ``public_type(typ)``, ``{row: reason}`` of the rows that
    failed) for rows ``live``; other rows null. A value whose JSON text is
    ``null`` is a null row where ``nullable`` (the schema names null:
    ``accepts_null``), a failed row otherwise. A UTF-8 byte order mark
    before a value is skipped (``_after_bom``).

    A flat object type (scalar fields only: ``_flat_kinds``) goes through
    the compiled decoder (``kbatch._core._json``); the rows it leaves
    (another form than it takes) and every other type through
    ``_general``."""
    start = _after_bom(data, start, end, live)
    kinds = _flat_kinds(typ, pa)
    if kinds is not None and live.any():
        done = _flat(data, start, end, live, typ, kinds, pa, nullable)
        if done is not None:
            return done
    array, reasons = _general(data, start, end, live, typ, pa, nullable)
    return array, {i: why for i, why in enumerate(reasons) if why is not None}


# the compiled decoder's kinds (kbatch._core._json K_*), by Arrow type
def _flat_kinds(typ, pa) -> list[int] | None:
    """The K_* kind of every field of ``typ``, or None when it is not an
    object of scalar fields the compiled decoder takes."""
    if typ is None or not pa.types.is_struct(typ) or typ.num_fields == 0 or typ.num_fields > 64:
        return None
    kinds = []
    for field in typ:
        t = field.type
        kind = (0 if t == pa.int64() else 1 if t == pa.float64() else 2 if t == pa.bool_()
                else 3 if t == pa.string() else 4 if t == pa.timestamp("us", "UTC")
                else 5 if t == pa.date32() else None)
        if kind is None:
            return None
        kinds.append(kind)
    return kinds


def _flat(data, start, end, live, typ, kinds, pa, nullable):
    """The compiled decoder's columns as one struct array, its FALLBACK rows
    decoded by ``_general`` and put in their place; None when a string
    column would pass 2 GiB (``_general`` then does all)."""
    from kbatch._core._json import decode_flat

    n = len(start)
    status, cols = decode_flat(np.ascontiguousarray(data, np.uint8),
                               np.ascontiguousarray(start, np.int64),
                               np.ascontiguousarray(end, np.int64),
                               np.ascontiguousarray(live, np.uint8),
                               [f.name.encode() for f in typ], kinds)
    children = []
    for field, (valid, values) in zip(typ, cols):
        nulls = n - int(np.count_nonzero(valid))
        bits = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
        t = field.type
        if pa.types.is_string(t):
            offsets, chars = values
            if offsets[-1] > (1 << 31) - 1:
                return None
            buffers = [bits, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(chars)]
        elif pa.types.is_boolean(t):
            buffers = [bits, pa.py_buffer(np.packbits(values, bitorder="little"))]
        else:
            buffers = [bits, pa.py_buffer(values)]
        children.append(pa.Array.from_buffers(t, n, buffers, null_count=nulls))
    fast = pa.StructArray.from_arrays(children, fields=list(typ), mask=pa.array(status != 0))
    again = status == 2
    if not again.any():
        return fast, {}
    rows = np.flatnonzero(again)          # decoded apart, then put in their place
    slow, reasons = _general(data, start[rows], end[rows], np.ones(len(rows), bool), typ, pa,
                             nullable)
    index = np.arange(n, dtype=np.int64)
    index[rows] = n + np.arange(len(rows))
    return (pa.concat_arrays([fast, slow]).take(pa.array(index)),
            {int(rows[k]): why for k, why in enumerate(reasons) if why is not None})


def _general(data: np.ndarray, start: np.ndarray, end: np.ndarray, live: np.ndarray, typ, pa,
             nullable: bool = False):
    """``decode`` by pyarrow's JSON reader: the values read at once, or
    value by value to find those that fail; a value the reader refuses is
    converted by ``_python_read`` (which takes the forms the reader does not:
    an integer written ``1.0``), or fails. Values that are not UTF-8 fail
    first (the reader would pass their bytes into its strings); a type
    holding JSON text is read by ``_python_read`` alone."""
    import pyarrow.json as pj

    from kbatch._core._json import invalid_utf8

    not_utf8 = invalid_utf8(np.ascontiguousarray(data, np.uint8), np.ascontiguousarray(start, np.int64),
                            np.ascontiguousarray(end, np.int64),
                            np.ascontiguousarray(live, np.uint8)).view(bool)
    if not_utf8.any():
        live = live & ~not_utf8

    n = len(start)
    reasons: list = [None] * n
    for i in np.flatnonzero(not_utf8).tolist():
        reasons[i] = "not JSON: the text is not UTF-8"
    rows = np.flatnonzero(live)
    wrap = typ is not None and not pa.types.is_struct(typ)
    rows = _without_nulls(data, start, end, rows, reasons, None if nullable else
                          "a JSON null, which the schema does not allow" if wrap else
                          "a JSON null, not an object")
    if typ is None:
        return _inferred(data, start, end, rows, reasons, n, pj, pa)
    if pa.types.is_struct(typ):
        target = typ
    else:
        target = pa.struct([pa.field("v", typ)])
    if _has_text(target, pa):
        good, why = _python_read([bytes(data[start[i]:end[i]]) for i in rows.tolist()], target,
                                 wrap, pa)
        for k, i in enumerate(rows.tolist()):
            reasons[i] = why[k]
        rows = np.array([i for i, w in zip(rows.tolist(), why) if w is None], np.int64)
        return _in_place_of_rows(good, rows, reasons, n, wrap, pa)
    good = None
    if not wrap and len(rows):
        good = _read_in_place(data, start[rows], end[rows], rows, reasons, target, pj, pa)
    texts = [] if good is not None else [bytes(data[start[i]:end[i]]) for i in rows.tolist()]
    if good is None:                 # a raw CR/LF is replaced before reading: check those values alone
        keep = []
        for k, (i, text) in enumerate(zip(rows.tolist(), texts)):
            why = _strict_failure(text) if (b"\n" in text or b"\r" in text) else None
            if why is None:
                keep.append(k)
            else:
                reasons[i] = why
        if len(keep) < len(texts):
            rows, texts = rows[keep], [texts[k] for k in keep]
        good = _read(texts, target, wrap, pj, pa)
    if good is None:                 # one at a time: which values fail
        ok_rows, ok_texts, refused_rows, refused = [], [], [], []
        for i, text in zip(rows.tolist(), texts):
            # the reader skips a BOM at the start of its buffer only: a
            # second one (not JSON) would pass alone and fail together
            if text.startswith(b"\xef\xbb\xbf") or _read([text], target, wrap, pj, pa) is None:
                refused_rows.append(i)
                refused.append(text)
            else:
                ok_rows.append(i)
                ok_texts.append(text)
        good = _read(ok_texts, target, wrap, pj, pa) if ok_texts else pa.array([], target)
        if good is None:             # read alone but not together: all converted in Python
            refused_rows, refused = ok_rows + refused_rows, ok_texts + refused
            ok_rows, good = [], pa.array([], target)
        if refused:                  # the forms the reader does not take, or failed rows
            rescued, why = _python_read(refused, target, wrap, pa)
            for i, reason in zip(refused_rows, why):
                reasons[i] = reason
            ok_rows += [i for i, reason in zip(refused_rows, why) if reason is None]
            good = pa.concat_arrays([good, rescued])
        rows = np.array(ok_rows, np.int64)
    return _in_place_of_rows(good, rows, reasons, n, wrap, pa)


def _in_place_of_rows(good, rows, reasons, n, wrap, pa):
    """(the array of ``n`` rows whose row ``rows[k]`` is ``good[k]``, nulls
    elsewhere and where ``reasons`` names a failure, ``reasons``)."""
    values = good.field("v") if wrap else good
    index = np.full(n, -1, np.int64)
    index[rows] = np.arange(len(rows))
    failed = np.array([r is not None for r in reasons], bool)
    index[failed] = -1
    if len(values) == n and (index >= 0).all():
        return values, reasons       # every row, in order: no gather
    taken = values.take(pa.array(index, mask=index < 0))
    return taken, reasons


_JSON_SPACE = np.array([32, 9, 10, 13], np.uint8)


def _without_nulls(data, start, end, rows, reasons, why) -> np.ndarray:
    """``rows`` without the values whose JSON text is ``null``: null rows
    where ``why`` is None (the schema names null), failed rows for ``why``
    otherwise (pyarrow's JSON reader crashes the process on a line that is
    ``null``, pyarrow 26, so it must never see one). Only values whose
    first byte is ``n`` or a space are looked at whole."""
    if not len(rows):
        return rows
    if not len(data):
        return rows
    first = np.asarray(data)[np.minimum(start[rows], len(data) - 1)]   # an empty value: any byte
    suspect = ((first == ord("n")) | np.isin(first, _JSON_SPACE)) & (end[rows] > start[rows])
    if not suspect.any():
        return rows
    drop = []
    for k in np.flatnonzero(suspect).tolist():
        i = int(rows[k])
        if bytes(data[start[i]:end[i]]).strip(b" \t\r\n") == b"null":
            reasons[i] = why
            drop.append(k)
    return np.delete(rows, drop) if drop else rows


def _inferred(data, start, end, rows, reasons, n, pj, pa):
    """Rows read with the type pyarrow's JSON reader infers: values that are
    not JSON objects fail their rows; the rest are read again together."""
    good = _read_in_place(data, start[rows], end[rows], rows, reasons, None, pj, pa) if len(rows) else None
    if good is None and len(rows):
        keep = []
        for k, i in enumerate(rows.tolist()):
            text = bytes(data[start[i]:end[i]])
            try:
                ok = isinstance(json.loads(text.decode("utf-8")), dict)
                why = None if ok else "a JSON value that is not an object"
            except (ValueError, UnicodeDecodeError) as exc:
                why = f"not JSON: {exc}"
            if why is None:
                keep.append(k)
            else:
                reasons[i] = why
        rows = rows[keep]
        good = _read([bytes(data[start[i]:end[i]]) for i in rows.tolist()], None, False, pj, pa) \
            if len(rows) else pa.array([], pa.struct([]))
        if good is None:
            raise SchemaError("JSON values whose types conflict from row to row (pyarrow's inference "
                              "cannot give them one type): decode them with a JSON Schema")
    if good is None:
        good = pa.array([], pa.struct([]))
    if len(rows) and _readable(good.type, pa) != good.type:
        # the inference reads ISO-looking strings as timestamps (an offset
        # applied then dropped, a bare date as midnight): read them again as
        # the strings they are (a row equals json.loads of its value)
        target = _readable(good.type, pa)
        again = _read_in_place(data, start[rows], end[rows], rows, reasons, target, pj, pa)
        if again is None:
            again = _read([bytes(data[start[i]:end[i]]) for i in rows.tolist()], target, False,
                          pj, pa)
        if again is None:
            raise SchemaError("JSON values whose strings pyarrow's inference reads as "
                              "timestamps could not be read as strings: decode them with a "
                              "JSON Schema")
        good = again
    if _big_integral_float(good, pa) and _long_integer(data, start[rows], end[rows]):
        raise SchemaError("an inferred JSON column reads an integer of 16 digits or more as a "
                          "double (a field holding fractions too), which rounds it: decode it "
                          "with a JSON Schema that types that field")
    index = np.full(n, -1, np.int64)
    index[rows] = np.arange(len(rows))
    index[np.array([r is not None for r in reasons], bool)] = -1
    if len(good) == n and (index >= 0).all():
        return good, reasons
    return good.take(pa.array(index, mask=index < 0)), reasons


def _big_integral_float(arr, pa) -> bool:
    """Whether a double column of ``arr`` (nested ones too) holds a whole
    number of 2**53 or more: an integer literal the inference may have
    rounded."""
    import pyarrow.compute as pc
    typ = arr.type
    if pa.types.is_floating(typ):
        big = pc.and_(pc.greater_equal(pc.abs(arr), 2.0 ** 53), pc.equal(pc.floor(arr), arr))
        return bool(pc.any(big).as_py())
    if pa.types.is_struct(typ):
        return any(_big_integral_float(arr.field(i), pa) for i in range(typ.num_fields))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return _big_integral_float(arr.flatten(), pa)
    return False


_LONG_INTEGER = re.compile(rb"[:\[,\s]-?[0-9]{16,}(?![0-9.eE])")


def _long_integer(data, starts, ends) -> bool:
    """Whether a value holds an integer literal of 16 digits or more (more
    than a double keeps exactly; a digit run inside a string after a colon
    or comma counts too: the check errs on the side of refusing)."""
    if not len(starts):
        return False
    lo, hi = int(starts.min()), int(ends.max())
    return _LONG_INTEGER.search(memoryview(data[lo:hi]).cast("B")) is not None


def _read_in_place(data, starts, ends, rows, reasons, target, pj, pa):
    """The values of ``rows`` read as one newline-delimited body made from
    the data buffer itself (no copy per value), or None where the layout
    does not allow it (values out of order, touching or empty) or the reader
    fails (then the caller decides value by value).

    Each value's framing (at least one byte, as the values lie in a kbatch
    or pyarrow column) becomes ``"\\n"`` after spaces, so every value is one
    line; a raw CR or LF inside a value can only be whitespace in valid
    JSON, so it becomes a space, and such a value is checked alone by
    ``_strict_failure`` (a raw newline inside a string fails it; a failed
    one is read as ``{}`` and its reason recorded)."""
    if np.any(ends <= starts) or np.any(starts[1:] <= ends[:-1]):
        return None
    base = int(starts[0])
    size = int(ends[-1]) - base
    text = bytearray(memoryview(data[base:base + size]))    # the values (a copy) and a last "\\n"
    text.append(10)
    body = np.frombuffer(text, np.uint8)
    rel_s, rel_e = starts - base, ends - base
    failed = {}
    gap_len = rel_s[1:] - rel_e[:-1]
    if len(gap_len) and (gap_len == gap_len[0]).all():     # the framing between values: spaces
        body[(rel_e[:-1, None] + np.arange(int(gap_len[0]))).ravel()] = 32
    elif len(gap_len):
        first = np.repeat(rel_e[:-1], gap_len)
        step = np.arange(len(first)) - np.repeat(np.cumsum(gap_len) - gap_len, gap_len)
        body[first + step] = 32
    if text.find(b"\n", 0, size) >= 0 or text.find(b"\r", 0, size) >= 0:    # memchr: rare, then numpy
        raw_nl = np.flatnonzero((body[:-1] == 10) | (body[:-1] == 13))
        body[raw_nl] = 32
        owner = np.searchsorted(rel_s, raw_nl, side="right") - 1
        for k in np.unique(owner).tolist():
            why = _strict_failure(bytes(data[int(starts[k]):int(ends[k])]))
            if why is not None:
                if rel_e[k] - rel_s[k] < 2:
                    return None
                failed[int(rows[k])] = why
                body[rel_s[k]:rel_e[k]] = 32
                body[rel_s[k]:rel_s[k] + 2] = (123, 125)        # "{}" keeps the row's line
    body[rel_s[1:] - 1] = 10                                # one line per value
    readable = _readable(target, pa) if target is not None else None
    try:
        table = pj.read_json(pa.py_buffer(text), parse_options=_parse_options(readable, pj, pa),
                             read_options=pj.ReadOptions(block_size=max(len(text), 1 << 20)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != len(rows):
        return None
    for i, why in failed.items():
        reasons[i] = why
    arr = table.to_struct_array()
    arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
    try:
        return _cast(arr, target, pa)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None                   # a value the type refuses (a date that is not one):
                                      # read them apart, to name it


def _strict_failure(text: bytes):
    """Why a value holding a raw CR or LF is not JSON (None if it is):
    outside strings they are whitespace, inside they are not allowed."""
    try:
        json.loads(text.decode("utf-8"))     # str: bytes would also take UTF-16 and a BOM
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not JSON: {exc}"
    return None


def _read(texts: list, target, wrap: bool, pj, pa):
    if not texts:
        return pa.array([], target)
    body = b"\n".join((b'{"v":' + t.replace(b"\n", b" ").replace(b"\r", b" ") + b"}") if wrap
                      else t.replace(b"\n", b" ").replace(b"\r", b" ") for t in texts) + b"\n"
    readable = _readable(target, pa) if target is not None else None
    try:
        table = pj.read_json(pa.py_buffer(body), parse_options=_parse_options(readable, pj, pa),
                             read_options=pj.ReadOptions(block_size=max(len(body), 1 << 20)))
        if table.num_rows != len(texts):
            return None
        arr = table.to_struct_array()
        arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
        return _cast(arr, target, pa)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _parse_options(readable, pj, pa):
    if readable is None:                                    # inferred
        return pj.ParseOptions(newlines_in_values=False)
    return pj.ParseOptions(explicit_schema=pa.schema(list(readable)), unexpected_field_behavior="ignore",
                           newlines_in_values=False)


def _readable(t, pa):
    """``t`` as pyarrow's JSON reader can fill it: dates and date-times read
    as strings, cast after (the reader takes a date-time without a UTC
    offset as UTC; the cast refuses it, as RFC 3339 does: the row fails)."""
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _readable(f.type, pa)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_readable(t.value_type, pa))
    return t


# RFC 3339 (section 5.6) date-time: seconds and a Z or +-HH:MM offset are
# required (pyarrow's cast also takes 10:00Z, 10Z and +0200); a space for
# the T as section 5.6's note allows, upper-case T and Z only, as the
# compiled decoder
_RFC3339_DATE_TIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                      r"(Z|[+-][0-9]{2}:[0-9]{2})$")


def _cast(arr, target, pa):
    """``arr`` (read as ``_readable(target)``) cast to ``target``; raises
    ArrowInvalid for a date or date-time the type refuses, as the cast
    does, and for a date-time that is not RFC 3339's (``_check_times``)."""
    if target is None or _readable(target, pa) == target:
        return arr
    _check_times(arr, target, pa)
    return arr.cast(target)


def _check_times(arr, t, pa) -> None:
    """Raises ArrowInvalid when a string of ``arr`` read for a date-time of
    ``t`` (at any depth) is not an RFC 3339 date-time."""
    import pyarrow.compute as pc
    if pa.types.is_timestamp(t):
        if arr.null_count < len(arr):
            ok = pc.match_substring_regex(arr, _RFC3339_DATE_TIME)
            if not pc.all(ok).as_py():
                raise pa.ArrowInvalid("a date-time that is not RFC 3339's (seconds and a Z "
                                      "or +-HH:MM offset)")
    elif pa.types.is_struct(t):
        for child, field in zip(arr.flatten(), t):
            _check_times(child, field.type, pa)
    elif pa.types.is_list(t):
        _check_times(arr.flatten(), t.value_type, pa)


_BOM = (0xEF, 0xBB, 0xBF)


def _after_bom(data, start, end, live) -> np.ndarray:
    """``start`` past a UTF-8 byte order mark that begins a live value.
    RFC 8259 (8.1) lets a parser ignore one (a writer must not add it);
    Python's json.loads of bytes does, and pyarrow's reader does at the
    start of its buffer only, so every value is read without it."""
    rows = np.flatnonzero(live & (end - start >= 3))
    if not len(rows):
        return start
    at = np.asarray(data)
    s = start[rows]
    bom = (at[s] == _BOM[0]) & (at[s + 1] == _BOM[1]) & (at[s + 2] == _BOM[2])
    if not bom.any():
        return start
    start = start.copy()
    start[rows[bom]] += 3
    return start


class _Number(str):
    """A JSON number as json.loads met it: its literal text."""


class _Pairs(list):
    """A JSON object as json.loads met it: its (key, value) pairs, in order
    (a repeated key kept)."""


class _Misfit(ValueError):
    """A value that is not JSON or not of the reader's type: the reason."""


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _loads(text: bytes):
    """The JSON value of ``text`` (UTF-8) with objects as ``_Pairs`` and
    numbers as ``_Number``; ``_Misfit`` when it is not JSON (NaN and
    Infinity, which json.loads takes, included)."""
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=_Pairs, parse_int=_Number,
                          parse_float=_Number, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Misfit(f"not JSON: {exc}") from None
    except RecursionError:
        raise _Misfit("not read: a JSON value nested too deeply") from None


def _python_read(texts: list, target, wrap: bool, pa):
    """(an array of ``public_type(target)`` of the ``texts`` that are
    values of ``target``, in order; a reason per text, None for those):
    each value parsed by json.loads and converted by ``_value``, where
    pyarrow's JSON reader cannot go (JSON text fields, an integer written
    ``1.0``). Dates and date-times are cast as the reader's are."""
    public = public_type(target, pa)
    readable = _readable(public, pa)
    values, reasons = [], []
    for text in texts:
        try:
            value = _loads(text)
            if wrap:
                value = {"v": _value(value, target.field(0).type, pa, "")}
            elif not isinstance(value, _Pairs):
                raise _Misfit("a JSON value that is not an object")
            else:
                value = _value(value, target, pa, "")
        except _Misfit as exc:
            reasons.append(str(exc))
            continue
        except RecursionError:
            reasons.append("not read: a JSON value nested too deeply")
            continue
        values.append(value)
        reasons.append(None)
    try:
        return _cast(pa.array(values, readable), public, pa), reasons
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    kept, k = [], 0                   # a date or date-time the type refuses: each alone
    for j, why in enumerate(reasons):
        if why is not None:
            continue
        try:
            kept.append(_cast(pa.array([values[k]], readable), public, pa))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            reasons[j] = ("a JSON value whose types do not fit the reader's schema "
                          "(a date or date-time that is not one)")
        k += 1
    return (pa.concat_arrays(kept) if kept else pa.array([], public)), reasons


def _misfit(where: str, x, what: str) -> _Misfit:
    return _Misfit(f"a JSON value whose types do not fit the reader's schema ({where or 'the value'}: "
                   f"{_text(x)[:40]} is not {what})")


def _value(x, t, pa, where: str):
    """The Python value that JSON value ``x`` (as ``_loads`` gives it) is
    in Arrow type ``t`` (dates and date-times as their strings); raises
    ``_Misfit`` when it is not one. Null is null; a JSON text field holds
    ``_text(x)``; an integer is any number whose value is a whole number
    within int64 (JSON Schema from draft 6: ``1.0`` and ``1e2`` are
    integers); an object with a repeated key fails, as pyarrow's reader
    fails it."""
    if x is None:
        return None
    if _is_text(t):
        return _text(x)
    if pa.types.is_struct(t):
        if not isinstance(x, _Pairs):
            raise _misfit(where, x, "an object")
        members = dict(x)
        if len(members) != len(x):
            raise _misfit(where, x, "an object without a repeated key")
        return {f.name: _value(members.get(f.name), f.type, pa,
                                   f"{where}.{f.name}" if where else f.name) for f in t}
    if pa.types.is_list(t):
        if not isinstance(x, list) or isinstance(x, _Pairs):
            raise _misfit(where, x, "an array")
        return [_value(v, t.value_type, pa, f"{where}[{k}]") for k, v in enumerate(x)]
    if isinstance(x, _Number):
        if t == pa.int64():
            return _integer(x, where)
        if t == pa.float64():
            value = float(x)
            if value - value != 0:
                raise _misfit(where, x, "a number within the double range")
            return value
    elif isinstance(x, bool):
        if t == pa.bool_():
            return x
    elif isinstance(x, str):
        if pa.types.is_string(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                raise _misfit(where, x, "Unicode text (a lone surrogate escape)") from None
            return x
    raise _misfit(where, x, "a string" if pa.types.is_string(t) else
                  "a date string" if pa.types.is_date32(t) else
                  "a date-time string" if pa.types.is_timestamp(t) else
                  {"int64": "an integer", "double": "a number", "bool": "a boolean",
                   "null": "null"}.get(str(t), str(t)))


def _integer(literal: str, where: str) -> int:
    """A JSON number literal as an int64, when its value is a whole number
    in range (read exactly, as a decimal: ``1.0000000000000001`` is not)."""
    from decimal import Decimal
    value = Decimal(literal)
    if not -(1 << 63) <= value < (1 << 63):
        raise _misfit(where, _Number(literal), "an integer within int64")
    _sign, digits, exponent = value.as_tuple()
    if exponent < 0 and any(digits[exponent:]):
        raise _misfit(where, _Number(literal), "an integer")
    return int(value)


def _text(x) -> str:
    """The JSON text of a value as ``_loads`` gives it: no whitespace,
    members in the writer's order (a repeated key kept), numbers as the
    writer wrote them, strings as json.dumps writes them (UTF-8, not
    \\u escapes, unless a lone surrogate needs one)."""
    if isinstance(x, _Pairs):
        return "{" + ",".join(_string(k) + ":" + _text(v) for k, v in x) + "}"
    if isinstance(x, list):
        return "[" + ",".join(_text(v) for v in x) + "]"
    if isinstance(x, _Number):
        return str.__str__(x)
    if isinstance(x, str):
        return _string(x)
    return json.dumps(x)


def _string(s: str) -> str:
    text = json.dumps(s, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:          # a lone surrogate: its \\u escape
        text = json.dumps(s)
    return text


class JsonValues:
    """Keys or values that are plain JSON text (no Confluent framing, no
    registry): ``JsonValues().decode(column)`` gives a struct array whose
    type pyarrow's JSON reader infers from the values, or the type of
    ``schema`` (a JSON Schema, as a dict or its text). A decoder for
    ``Records.to_arrow(decode={"value": JsonValues()})``. Null or empty
    values are null rows; a value that is not a JSON object (or does not fit
    the schema) raises a ``PayloadError`` naming its offset, or with
    ``on_error="null"`` is a null row."""

    def __init__(self, schema=None):
        import pyarrow as pa

        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise SchemaError(f"a JSON Schema that is not JSON: {exc}") from None
        self.schema = schema
        self._plan = None if schema is None or says_nothing(schema) else arrow_type(schema, pa)
        self._nullable = schema is not None and accepts_null(schema)
        self.type = None if self._plan is None else public_type(self._plan, pa)

    def __repr__(self) -> str:
        return f"JsonValues({'inferred' if self.type is None else self.type})"

    def decode(self, column, *, offsets=None, on_error: str = "raise", with_errors: bool = False,
               header_ids=None, **_ignored):
        import pyarrow as pa

        from kbatch.payloads.column import error_column, rows_of

        if on_error not in ("raise", "null"):
            raise ValueError(f"on_error must be 'raise' or 'null', not {on_error!r}")
        rows = rows_of(column)
        start, end = rows.offsets[:-1], rows.offsets[1:]
        live = rows.valid & (end > start)
        array, reasons = decode(rows.data, start, end, live, self._plan, pa, self._nullable)
        if on_error == "raise" and reasons:
            i = min(reasons)
            raise PayloadError(reasons[i], offset=int(offsets[i]) if offsets is not None else None,
                               row=i)
        if not with_errors:
            return array
        return array, error_column(len(start), reasons)
