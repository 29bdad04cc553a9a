"""kbatch's exceptions.

Every problem with the bytes of a file is a ``CorruptRecordError``: a
``ValueError`` (so ``except ValueError`` keeps working) and a ``KbatchError``
(so callers can catch everything kbatch raises on purpose). It names the file,
the byte position and, when known, the base offset of the batch.
"""

from __future__ import annotations

import os


class KbatchError(Exception):
    """Base class of the errors kbatch raises on purpose."""


class CorruptRecordError(KbatchError, ValueError):
    """The data is not a valid Kafka log: where, and what is wrong.

    Attributes: ``path`` (file name or None for a buffer), ``position`` (byte
    offset of the problem in the file or buffer; for a CRC mismatch, which
    says only that some byte the CRC covers is wrong, where the batch or
    message starts, as verify and the skip/stop ends name it),
    ``base_offset`` (of the batch
    or message holding it, None when unknown), ``batch_position`` (byte where
    that batch starts) and ``reason`` (the bare description).
    """

    def __init__(self, reason: str, *, path: str | os.PathLike | None = None,
                 position: int | None = None, base_offset: int | None = None,
                 batch_position: int | None = None):
        self.reason = reason
        self.path = os.fspath(path) if path is not None else None
        self.position = position
        self.base_offset = base_offset
        self.batch_position = batch_position
        where = self.path if self.path is not None else "<buffer>"
        parts = [f"{where}: {reason}"]
        if position is not None:
            parts.append(f"at byte {position}")
        if base_offset is not None:
            parts.append(f"(batch base offset {base_offset})")
        super().__init__(" ".join(parts))

    def __reduce__(self):  # picklable, for Spark executors
        return (_rebuild, (self.reason, self.path, self.position,
                           self.base_offset, self.batch_position))


def _rebuild(reason, path, position, base_offset, batch_position):
    return CorruptRecordError(reason, path=path, position=position,
                              base_offset=base_offset,
                              batch_position=batch_position)


class LimitExceededError(CorruptRecordError):
    """Data beyond a configured limit (``max_read_bytes``, ``max_batch_bytes``,
    ...): refused before it is allocated, as a hostile file would need."""

    def __reduce__(self):
        return (_rebuild_as, (type(self), self.reason, self.path, self.position,
                              self.base_offset, self.batch_position))


class FileChangedError(CorruptRecordError):
    """The file was truncated or replaced while kbatch read its mapping (a
    SIGBUS caught by the guard, or a size that changed while it was opened),
    or an object in storage is no longer the one listed (``kbatch.lib.objects``;
    reads of whole partitions list again first: ``kbatch.lib.relist``)."""

    def __reduce__(self):
        return (_rebuild_as, (type(self), self.reason, self.path, self.position,
                              self.base_offset, self.batch_position))


class DamagedLengthError(CorruptRecordError):
    """A batch's length field runs past the end of the data, yet valid
    batches follow it one after another to the end: the length is damaged,
    not the tail torn (``on_corrupt="skip"`` lists it as "truncated")."""

    def __reduce__(self):
        return (_rebuild_as, (type(self), self.reason, self.path, self.position,
                              self.base_offset, self.batch_position))


class DecompressionLimitError(LimitExceededError):
    """A batch decompresses to more than ``max_decompressed_bytes``."""


def _rebuild_as(cls, reason, path, position, base_offset, batch_position):
    return cls(reason, path=path, position=position, base_offset=base_offset,
               batch_position=batch_position)


class ArgumentError(KbatchError, ValueError):
    """A call kbatch cannot make sense of: an unknown option, a timestamp it
    cannot read, a topic the directory does not hold. ``ValueError`` too."""


class ColumnNotReadError(KbatchError, LookupError):
    """A column the read left out (``columns=[...]``) was asked for."""


class MappingInvalidatedError(FileChangedError):
    """A zero-copy result's file was truncated after the read: the pages it
    lost now read as zeros (the process survives; Arrow buffers already
    handed out see the zeros), and kbatch's accessors of that result raise
    this error. Read the file again for its current content. ``path``: the
    file (None when unknown)."""

    def __init__(self, path: str | os.PathLike | None = None,
                 reason: str = "the file was truncated after a zero-copy read; "
                               "the bytes it lost read as zeros: read it again"):
        super().__init__(reason, path=path)

    def __reduce__(self):
        return (MappingInvalidatedError, (self.path, self.reason))


class MappingTableFullError(KbatchError, RuntimeError):
    """Every slot of kbatch's table of guarded mappings is taken: the read
    falls back to copying (``try_guard`` returns None instead of raising)."""


class DecryptionError(KbatchError):
    """An encrypted tiered segment cannot be decrypted: no key, a wrong key,
    a key that is not a usable RSA private key, or a chunk that fails its
    GCM authentication. Never carries key material."""


class SchemaError(KbatchError, ValueError):
    """A schema (Avro, Protobuf, JSON Schema) that does not parse, a reader
    schema a writer's cannot be resolved to, or a registry source that holds
    no registry."""


class PayloadError(KbatchError, ValueError):
    """A key or value that cannot be decoded with its schema: the record's
    ``offset`` (None when the caller gave none), its ``row`` in the column,
    the ``schema_id`` its framing names (None when unknown), the byte
    ``position`` in the value, and the bare ``reason``."""

    def __init__(self, reason: str, *, offset: int | None = None, row: int | None = None,
                 schema_id: int | str | None = None, position: int | None = None):
        self.reason = reason
        self.offset = offset
        self.row = row
        self.schema_id = schema_id
        self.position = position
        where = f"record offset {offset}" if offset is not None else f"row {row}"
        parts = [where]
        if schema_id is not None:
            parts.append(f"schema id {schema_id}")
        if position is not None:
            parts.append(f"byte {position}")
        super().__init__(f"{', '.join(parts)}: {reason}")

    def __reduce__(self):
        return (_rebuild_payload, (type(self), self.reason, self.offset, self.row,
                                   self.schema_id, self.position))


class UnknownSchemaError(PayloadError):
    """A value whose schema id (or guid) the registry does not hold."""


def _rebuild_payload(cls, reason, offset, row, schema_id, position):
    return cls(reason, offset=offset, row=row, schema_id=schema_id, position=position)
