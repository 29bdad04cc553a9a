"""Keys and values turned into data inside ``Records.to_arrow(decode=...)``:
``decode={"value": registry, "key": registry}`` replaces each named binary
column by what the decoder makes of it (a typed Arrow array, one row per
record). A decoder is any object with ``decode(column, *, offsets,
on_error, with_errors, header_ids, topic_subject)`` (``kbatch.Registry`` is
one; ``topic_subject``: ``<topic>-value`` / ``<topic>-key`` where the
records' files name their topic, else None); this layer knows nothing of
schemas. With ``on_error="null"`` a bad value is a
null row and ``<name>_error`` says why (null where the value decoded).

Schema ids carried in headers (``__value_schema_id`` / ``__key_schema_id``,
Confluent's HeaderSchemaIdSerializer) are handed over per row when any
record has such a header. A read that left the headers out (``columns=``
without "headers") still counts the records that had headers (the decoder
walks them): when none had any, there is no schema id header to miss;
otherwise ``HeadersNotRead`` is handed over, and a decoder that takes
schema ids from headers (``kbatch.Registry``) refuses it, since a
header-framed datum would otherwise be read as if its value were framed.
"""

from __future__ import annotations

from kbatch.errors import ColumnNotReadError
from kbatch.lib.columns import MissingColumn
from kbatch.lib.paths import topic_of_file

DECODABLE = ("key", "value")
HEADER_OF = {"key": b"__key_schema_id", "value": b"__value_schema_id"}


def check(decode) -> dict:
    if decode is None:
        return {}
    if not isinstance(decode, dict) or not set(decode) <= set(DECODABLE):
        raise ValueError(f"decode must map 'key' and/or 'value' to a decoder (a kbatch.Registry), "
                         f"not {decode!r}")
    for name, dec in decode.items():
        if not callable(getattr(dec, "decode", None)):
            raise TypeError(f"decode[{name!r}] has no decode() method: pass a kbatch.Registry")
    return decode


def apply(table, records, decode: dict, on_error: str):
    """``table`` with the decoded columns in place of the binary ones."""
    for name, dec in decode.items():
        if name not in table.column_names:
            continue
        at = table.column_names.index(name)
        header_ids = schema_id_headers(records, name)
        decoded, errors = dec.decode(table.column(name), offsets=records.offset, on_error=on_error,
                                     with_errors=True, header_ids=header_ids,
                                     topic_subject=topic_subject(records, name))
        table = table.set_column(at, name, decoded)
        if on_error == "null":
            table = table.add_column(at + 1, f"{name}_error", errors)
    return table


def topic_subject(records, which: str) -> str | None:
    """The TopicNameStrategy subject of the records' keys or values
    (``<topic>-key`` / ``<topic>-value``), the topic named by the folders of
    their segment files (``kbatch.lib.paths.topic_of_file``, as
    ``open_log`` names it); None unless every file names the same topic."""
    topics = {topic_of_file(s) for s in records.sources if s is not None}
    return f"{topics.pop()}-{which}" if len(topics) == 1 and None not in topics else None


class HeadersNotRead:
    """What ``schema_id_headers`` gives for records read without their
    headers when some had headers: whether a schema id is in one cannot be
    told."""

    def __init__(self, which: str, projection: tuple = ()):
        self.which = which
        self.projection = tuple(projection)

    def error(self) -> ColumnNotReadError:
        asked = ", ".join(self.projection) if self.projection else "a projection"
        return ColumnNotReadError(
            f"decoding {self.which!r}: the headers were not read (columns=[{asked}]), some "
            f"records had headers, and a schema id may be in a "
            f"{HEADER_OF[self.which].decode()} header (the value then is the bare datum): "
            "add 'headers' to columns=")


def schema_id_headers(records, which: str):
    """Per record, the bytes of its ``__key_schema_id`` / ``__value_schema_id``
    header (``which``: "key" or "value"; None without one), or None when no
    record has one (checked on the header keys' bytes first);
    ``HeadersNotRead`` when a projection left out headers that some record
    had (or whether any had is not known)."""
    header = HEADER_OF[which]
    headers = getattr(records, "headers", None)
    if isinstance(headers, MissingColumn):     # unread: none there, or not known
        return None if headers.unread_rows == 0 else HeadersNotRead(which, headers.projection)
    keys = getattr(headers, "keys", None)
    if keys is None or header not in keys.data.tobytes():
        return None
    out = []
    for row in headers.to_pylist():
        found = None
        for k, v in row or ():
            if (k.encode() if isinstance(k, str) else k) == header:
                found = v
        out.append(found)
    return out
