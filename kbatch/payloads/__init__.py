"""Schema Registry payloads decoded offline: ``registry(source)`` builds a
registry from the ``_schemas`` topic (or an export, or a folder of schema
files) and ``Registry.decode`` turns Confluent-framed keys and values into
typed Arrow arrays.

    store.py         the registry's state replayed from its records (deletes, configs)
    sources.py       where a registry comes from (the one door: paths and URLs)
    registry.py      Registry: lookups, the reader schema, decode()
    framing.py       magic byte + schema id / guid, for a whole column at once
    column.py        what decode() accepts, as flat buffers
    avro_schema.py   Avro schemas parsed (named types, references, recursion)
    avro_layout.py   the reader's type as Arrow columns
    avro_program.py  schema resolution compiled into the decoder's ops
    avro_default.py  field defaults encoded as datums
    avro_decode.py   the compiled decoder driven, its buffers as Arrow arrays
    json_decode.py   JSON Schema payloads through pyarrow's JSON reader; JsonValues:
                     unframed JSON, its type inferred
"""

from kbatch.payloads.json_decode import JsonValues
from kbatch.payloads.registry import Registry, registry

__all__ = ["JsonValues", "Registry", "registry"]
