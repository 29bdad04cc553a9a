"""Legacy message sets (magic 0 and 1)."""

from kbatch.errors import CorruptRecordError


def decode_into(dec, view, path, opts):
    position = dec.position
    magic = view[position + 16] if len(view) > position + 16 else None
    raise CorruptRecordError(
        f"legacy message format (magic {magic}) is not supported by this version",
        path=path, position=position)
