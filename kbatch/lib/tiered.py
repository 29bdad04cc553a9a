"""The bucket layout of the open-source tiered-storage plugin for Kafka
(Aiven-Open/tiered-storage-for-apache-kafka, KIP-405 RemoteStorageManager).

Objects of one uploaded segment (``ObjectKeyFactory``):

    <prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segment uuid>.log
    ...                                                                  .indexes
    ...                                                                  .rsm-manifest

``.log``: the segment file cut into chunks of ``originalChunkSize`` bytes
(the last one shorter), each transformed on its own, in this order:

    chunk --zstd (frame with content size)--> --AES-256-GCM--> stored chunk
    stored encrypted chunk:  | IV (12 bytes) | ciphertext | GCM tag (16 bytes) |
                             AAD: the manifest's ``aad`` for every chunk

``.indexes``: the offset, time, producer-snapshot, leader-epoch and
(optional) transaction index files concatenated; each at the ``position``
and ``size`` the manifest gives, encrypted (never compressed) as one chunk.

``.rsm-manifest`` (JSON):

    {"chunkIndex": {"type": "fixed", "originalChunkSize": C, "originalFileSize": N,
                    "transformedChunkSize": T, "finalTransformedChunkSize": F}
                 | {"type": "variable", "originalChunkSize": C, "originalFileSize": N,
                    "transformedChunks": base64(zstd(sizes))},
     "segmentIndexes": {"offset": {"position": p, "size": s}, "timestamp": ...,
                        "producerSnapshot": ..., "leaderEpoch": ..., "transaction": ...|null},
     "compression": bool,
     "encryption": {"dataKey": "<key id>:" base64(RSA-OAEP(SHA3-512) of the
                    32-byte data key), "aad": base64} (absent when not encrypted),
     "remoteLogSegmentMetadata": {"remoteLogSegmentId": {...,"id": uuid},
                    "startOffset", "endOffset", "maxTimestampMs", "brokerId",
                    "eventTimestampMs", "segmentLeaderEpochs"}}

``sizes`` (ChunkSizesBinaryCodec), big-endian:

    count int32                                    count == 0: nothing else
    value int32                                    count == 1
    base int32 | width int8 | (count-1) x width-byte (value - base) | last int32

Everything read from a manifest is checked before use (sizes non-negative,
sums fitting the object, a bounded decoded chunk list, chunk sizes that add
up): a damaged manifest is a ``CorruptRecordError`` naming it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import io
from dataclasses import dataclass

import numpy as np

from kbatch.errors import CorruptRecordError, DecryptionError, LimitExceededError  # noqa: F401
from kbatch.lib.objects import FIRST_BLOCK, RangeSource, read_ahead

IV_SIZE = 12
TAG_SIZE = 16
MAX_SIZES_BYTES = 10 << 20          # the plugin's own cap on the encoded chunk list
MAX_MANIFEST_BYTES = 16 << 20       # a manifest is JSON of a few KiB
OBJECT_NAME = re.compile(r"^(\d{20})-([A-Za-z0-9_-]{22})\.(log|indexes|rsm-manifest)$")
INDEX_NAMES = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")


def zstd_bounded(data: bytes, limit: int, url=None, position=None, what="chunk") -> bytes:
    """``data`` zstd-decompressed, at most ``limit`` bytes: a frame that
    declares (or holds) more raises before more than ``limit + 1`` bytes are
    taken, whatever size its header claims."""
    import zstandard
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            out = reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"{what} does not decompress (zstd): {exc}", path=url,
                                 position=position) from None
    if len(out) > limit:
        raise LimitExceededError(f"{what} decompresses to more than {limit} bytes", path=url,
                                 position=position)
    return out


def _bad(url, reason, position=None):
    return CorruptRecordError(f"corrupt tiered-storage manifest: {reason}", path=url,
                              position=position)


def decode_chunk_sizes(data: bytes, url=None) -> np.ndarray:
    """The transformed chunk sizes (int64) of a variable chunk index."""
    n = len(data)
    if n < 4:
        raise _bad(url, "chunk size list shorter than its count")
    count = int.from_bytes(data[:4], "big", signed=True)
    if count < 0:
        raise _bad(url, f"negative chunk count {count}")
    if count == 0:
        return np.empty(0, np.int64)
    if count == 1:
        if n < 8:
            raise _bad(url, "chunk size list ends inside its only value")
        return np.array([int.from_bytes(data[4:8], "big", signed=True)], np.int64)
    if n < 9:
        raise _bad(url, "chunk size list ends inside its header")
    base = int.from_bytes(data[4:8], "big", signed=True)
    width = data[8]
    if not 1 <= width <= 4:
        raise _bad(url, f"chunk size width {width} (expected 1..4)")
    body = count - 1
    if body > (n - 13) // width or n - 13 < 0:   # count checked against the bytes left
        raise _bad(url, f"{count} chunk sizes do not fit in {n} bytes")
    raw = np.frombuffer(data, np.uint8, count=body * width, offset=9).reshape(body, width)
    values = np.zeros(body, np.int64)
    for col in range(width):
        values = (values << 8) | raw[:, col]
    values += base
    last = int.from_bytes(data[9 + body * width:13 + body * width], "big", signed=True)
    return np.append(values, np.int64(last))


@dataclass(frozen=True)
class ChunkIndex:
    """Where each chunk lies before (``original``) and after
    (``transformed``) the transformation: start positions, one more entry
    than chunks (the ends)."""

    chunk_size: int
    file_size: int
    original: np.ndarray
    transformed: np.ndarray

    @classmethod
    def build(cls, chunk_size: int, file_size: int, sizes: np.ndarray, url=None,
              object_size: int | None = None):
        """The index of ``sizes`` (stored bytes per chunk), checked: one size
        per chunk, none negative, and (``object_size`` known) adding up to
        the stored object."""
        if chunk_size <= 0 or file_size < 0:
            raise _bad(url, f"chunk size {chunk_size}, file size {file_size}")
        count = chunk_count(chunk_size, file_size, object_size, url)
        if len(sizes) != count:
            raise _bad(url, f"{len(sizes)} chunk sizes for a {file_size}-byte file in "
                            f"{chunk_size}-byte chunks ({count} chunks)")
        if len(sizes) and int(sizes.min()) < 0:
            raise _bad(url, "negative chunk size")
        transformed = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        if object_size is not None and int(transformed[-1]) != object_size:
            raise _bad(url, f"the chunks add up to {int(transformed[-1])} bytes, the object "
                            f"has {object_size}")
        original = np.minimum(np.arange(count + 1, dtype=np.int64) * chunk_size, file_size)
        return cls(chunk_size, file_size, original, transformed)

    def __len__(self) -> int:
        return len(self.original) - 1

    def chunks_for(self, start: int, stop: int) -> range:
        """Chunk numbers holding original bytes ``[start, stop)``."""
        if stop <= start:
            return range(0)
        return range(start // self.chunk_size, -(-stop // self.chunk_size))


MAX_CHUNKS = 1 << 22     # without the object's size: a bound on the chunk list


def chunk_count(chunk_size: int, file_size: int, object_size: int | None, url=None) -> int:
    """Chunks of a ``file_size``-byte segment cut every ``chunk_size`` bytes,
    checked against the stored object before anything is allocated: each
    chunk is stored in at least one byte, so there are no more chunks than
    the object has bytes (a tiny chunk size in a small manifest cannot
    make kbatch allocate gigabytes)."""
    count = -(-file_size // chunk_size)
    bound = MAX_CHUNKS if object_size is None else object_size
    if count > bound:
        raise _bad(url, f"{file_size} bytes in chunks of {chunk_size} make {count} chunks, "
                        f"more than the {bound} the stored object can hold")
    return count


def parse_chunk_index(obj, url=None, object_size: int | None = None) -> ChunkIndex:
    """The ``chunkIndex`` of a manifest; ``object_size``: the stored
    ``.log`` object's size (bounds and checks the chunk list)."""
    if not isinstance(obj, dict):
        raise _bad(url, "chunkIndex is not an object")
    kind = obj.get("type")
    try:
        chunk_size = _int(obj, "originalChunkSize", url)
        file_size = _int(obj, "originalFileSize", url)
        if chunk_size <= 0:
            raise _bad(url, f"originalChunkSize {chunk_size} is not positive")
        if file_size < 0:
            raise _bad(url, f"originalFileSize {file_size} is negative")
        count = chunk_count(chunk_size, file_size, object_size, url)
        if kind == "fixed":
            size = _int(obj, "transformedChunkSize", url)
            final = _int(obj, "finalTransformedChunkSize", url)
            if count and (size < 0 or final < 0):
                raise _bad(url, f"transformed chunk sizes {size}, {final}")
            total = (count - 1) * size + final if count else 0
            if object_size is not None and total != object_size:
                raise _bad(url, f"{count} chunks of {size} bytes (the last {final}) make "
                                f"{total} bytes, the object has {object_size}")
            sizes = np.full(count, size, np.int64)
            if count:
                sizes[-1] = final
        elif kind == "variable":
            text = obj.get("transformedChunks")
            if not isinstance(text, str):
                raise _bad(url, "transformedChunks is not a string")
            if len(text) > 2 * MAX_SIZES_BYTES:
                raise _bad(url, "transformedChunks is larger than any chunk list")
            packed = base64.b64decode(text, validate=True)
            raw = zstd_bounded(packed, MAX_SIZES_BYTES, url, what="transformedChunks")
            sizes = decode_chunk_sizes(raw, url)
        else:
            raise _bad(url, f"unknown chunkIndex type {kind!r} (expected fixed or variable)")
    except (binascii.Error, ValueError) as exc:
        if isinstance(exc, CorruptRecordError):
            raise
        raise _bad(url, f"chunkIndex: {exc}") from None
    return ChunkIndex.build(chunk_size, file_size, sizes, url, object_size)


def _int(obj, key, url) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 31) <= value < 1 << 31:
        raise _bad(url, f"{key} is {value!r}, not a 32-bit integer")
    return value


@dataclass(frozen=True)
class Manifest:
    chunks: ChunkIndex
    indexes: dict            # name -> (position, size) in the .indexes object
    compression: bool
    key_id: str | None       # encryption: the RSA key's id
    wrapped_key: bytes | None
    aad: bytes | None
    metadata: dict           # remoteLogSegmentMetadata (may be empty)

    @property
    def encrypted(self) -> bool:
        return self.wrapped_key is not None

    @property
    def start_offset(self) -> int | None:
        v = self.metadata.get("startOffset")
        return v if isinstance(v, int) else None

    @property
    def end_offset(self) -> int | None:
        v = self.metadata.get("endOffset")
        return v if isinstance(v, int) else None


def parse_manifest(data: bytes, url=None, object_size: int | None = None) -> Manifest:
    """A ``.rsm-manifest`` object, every field checked (``object_size``: the
    size of the segment's stored ``.log`` object, which the chunk index
    must add up to)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise _bad(url, f"{len(data)} bytes, more than any manifest ({MAX_MANIFEST_BYTES})")
    try:
        doc = json.loads(data)
    except RecursionError:
        raise _bad(url, "nested too deeply to be a manifest") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad(url, f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _bad(url, "not a JSON object")
    for key in ("chunkIndex", "segmentIndexes", "compression"):
        if key not in doc:
            raise _bad(url, f"no {key!r}")
    chunks = parse_chunk_index(doc["chunkIndex"], url, object_size)
    if not isinstance(doc["compression"], bool):
        raise _bad(url, "compression is not true/false")
    idx = doc["segmentIndexes"]
    if not isinstance(idx, dict):
        raise _bad(url, "segmentIndexes is not an object")
    indexes = {}
    for name in INDEX_NAMES:
        entry = idx.get(name)
        if entry is None:
            if name != "transaction":
                raise _bad(url, f"segmentIndexes has no {name!r}")
            continue
        if not isinstance(entry, dict):
            raise _bad(url, f"segmentIndexes.{name} is not an object")
        pos, size = _int(entry, "position", url), _int(entry, "size", url)
        if pos < 0 or size < 0:
            raise _bad(url, f"segmentIndexes.{name}: position {pos}, size {size}")
        indexes[name] = (pos, size)
    key_id = wrapped = aad = None
    enc = doc.get("encryption")
    if enc is not None:
        if not isinstance(enc, dict) or not isinstance(enc.get("dataKey"), str) \
                or not isinstance(enc.get("aad"), str):
            raise _bad(url, "encryption needs dataKey and aad strings")
        text = enc["dataKey"]
        if text.count(":") != 1 or not text.split(":")[0].strip():
            raise _bad(url, "encryption.dataKey is not '<key id>:<base64>'")
        key_id, b64 = text.split(":")
        try:
            wrapped = base64.b64decode(b64, validate=True)
            aad = base64.b64decode(enc["aad"], validate=True)
        except binascii.Error as exc:
            raise _bad(url, f"encryption: bad base64: {exc}") from None
        if not wrapped:
            raise _bad(url, "encryption.dataKey is empty")
    meta = doc.get("remoteLogSegmentMetadata") or {}
    if not isinstance(meta, dict):
        raise _bad(url, "remoteLogSegmentMetadata is not an object")
    return Manifest(chunks, indexes, doc["compression"], key_id, wrapped, aad, meta)


# --- keys and chunk transformation ------------------------------------------

def _mgf1_sha3_512(seed: bytes, length: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha3_512(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:length])


def oaep_sha3_512_decrypt(key, ciphertext: bytes) -> bytes:
    """RSAES-OAEP decryption (RFC 8017 7.1.2) with SHA3-512 as the hash and
    in MGF1, an empty label: the plugin's "RSA/NONE/OAEPWithSHA3-512AndMGF1Padding"
    (BouncyCastle). The ``cryptography`` package does not offer SHA3 in
    OAEP, so the RSA step is done here with the key's numbers (CRT). Every
    failure is one undistinguished ``ValueError``."""
    numbers = key.private_numbers()
    n = numbers.public_numbers.n
    k = (n.bit_length() + 7) // 8
    hlen = 64
    if len(ciphertext) != k or k < 2 * hlen + 2:
        raise ValueError("decryption error")
    c = int.from_bytes(ciphertext, "big")
    if c >= n:
        raise ValueError("decryption error")
    p, q = numbers.p, numbers.q
    m1, m2 = pow(c, numbers.dmp1, p), pow(c, numbers.dmq1, q)
    m = m2 + ((numbers.iqmp * (m1 - m2)) % p) * q
    em = m.to_bytes(k, "big")
    masked_seed, masked_db = em[1:1 + hlen], em[1 + hlen:]
    seed = bytes(a ^ b for a, b in zip(masked_seed, _mgf1_sha3_512(masked_db, hlen)))
    db = bytes(a ^ b for a, b in zip(masked_db, _mgf1_sha3_512(seed, k - hlen - 1)))
    rest = db[hlen:].lstrip(b"\x00")
    ok = em[0] == 0 and db[:hlen] == hashlib.sha3_512(b"").digest() and rest[:1] == b"\x01"
    if not ok:
        raise ValueError("decryption error")
    return rest[1:]


def unwrap_data_key(manifest: Manifest, keys, url=None) -> bytes:
    """The AES data key: RSA-OAEP (SHA3-512, MGF1 SHA3-512) of the wrapped
    one, with the key of ``keys`` (a ``storage.KeyRing``, or None) named by
    the manifest's key id."""
    if not keys:
        raise DecryptionError(f"{url}: the segment is encrypted (key id "
                              f"{manifest.key_id!r}): pass private_key=")
    key = keys.get(manifest.key_id)
    if key is None:
        raise DecryptionError(f"{url}: no private key with id {manifest.key_id!r} "
                              f"(have {keys.ids()})")
    try:
        data_key = oaep_sha3_512_decrypt(key, manifest.wrapped_key)
    except (ValueError, AttributeError):
        raise DecryptionError(f"{url}: the data key does not decrypt with the given "
                              "private key (wrong key?)") from None
    if len(data_key) != 32:
        raise DecryptionError(f"{url}: data key is {len(data_key)} bytes, not 32 (AES-256)")
    return data_key


class Detransform:
    """Undoes the transformation of one stored chunk: decrypt, then
    decompress (at most ``limit`` bytes: the chunk's original size)."""

    def __init__(self, manifest: Manifest, data_key: bytes | None, url=None):
        self.manifest = manifest
        self.url = url
        self.aes = None
        if manifest.encrypted:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            self.aes = AESGCM(data_key)

    def __call__(self, chunk: bytes, limit: int, position: int) -> bytes:
        if self.aes is not None:
            if len(chunk) < IV_SIZE + TAG_SIZE:
                raise CorruptRecordError(f"encrypted chunk of {len(chunk)} bytes (less than "
                                         "IV and tag)", path=self.url, position=position)
            from cryptography.exceptions import InvalidTag
            try:
                chunk = self.aes.decrypt(chunk[:IV_SIZE], chunk[IV_SIZE:], self.manifest.aad)
            except InvalidTag:
                raise DecryptionError(f"{self.url}: chunk at byte {position} fails GCM "
                                      "authentication (wrong key or damaged object)") from None
        if self.manifest.compression:
            # at most the chunk's original size, whatever its frame declares
            chunk = zstd_bounded(chunk, limit, self.url, position)
        if len(chunk) != limit:
            raise CorruptRecordError(f"chunk holds {len(chunk)} bytes, the manifest says "
                                     f"{limit}", path=self.url, position=position)
        return chunk


class TieredSource:
    """The original segment bytes of one tiered segment, served like a
    ``RangeSource`` (``size``, ``read``, ``blocks``): only the chunks a
    range needs are fetched, adjacent ones in one GET of up to ``block``
    stored bytes, ``concurrency`` GETs ahead. Keeps in memory at most
    ``concurrency`` groups of chunks (stored and decoded)."""

    def __init__(self, raw: RangeSource, manifest: Manifest, detransform: Detransform):
        self.raw = raw
        self.manifest = manifest
        self.chunks = manifest.chunks
        self.detransform = detransform
        self.url = raw.url
        self.block = raw.block
        self.concurrency = raw.concurrency
        if raw._size is not None and raw._size != int(self.chunks.transformed[-1]):
            raise _bad(manifest_url(raw.url), f"the chunks add up to "
                       f"{int(self.chunks.transformed[-1])} bytes, the object has {raw._size}")

    @property
    def size(self) -> int:
        return self.chunks.file_size

    def confirm(self) -> None:
        """The stored object is still the one listed (``RangeSource.confirm``)."""
        self.raw.confirm()

    def _groups(self, first: int, last: int, budget: int):
        """``(a, b)``: chunks ``[a, b)`` fetched by one GET, covering chunks
        ``[first, last)``; a group spans at most ``budget`` stored bytes
        (the first) or ``block`` (the rest), and at least one chunk."""
        t = self.chunks.transformed
        a = first
        while a < last:
            b = a + 1
            while b < last and t[b + 1] - t[a] <= budget:
                b += 1
            yield a, b
            a, budget = b, self.block

    def _fetch(self, a: int, b: int) -> bytes:
        """The original bytes of chunks ``[a, b)``."""
        t, o = self.chunks.transformed, self.chunks.original
        stored = self.raw.read(int(t[a]), int(t[b]))
        if len(stored) != t[b] - t[a]:
            raise CorruptRecordError("object shorter than its chunk index", path=self.url,
                                     position=int(t[a]) + len(stored))
        out = []
        for i in range(a, b):
            x, y = int(t[i] - t[a]), int(t[i + 1] - t[a])
            out.append(self.detransform(stored[x:y], int(o[i + 1] - o[i]), int(t[i])))
        return b"".join(out)

    def read(self, start: int, stop: int) -> bytes:
        stop = min(stop, self.size)
        return b"".join(data for _, data in self.blocks(start, stop))

    def blocks(self, start: int = 0, stop: int | None = None, *, first: int = FIRST_BLOCK):
        """``(position, original bytes)`` covering ``[start, stop)``, as
        ``RangeSource.blocks``: only the chunks holding those bytes are
        fetched (the first group alone, of at most ``first`` stored bytes,
        then ``concurrency`` groups ahead); the first and last chunk are cut
        to the range."""
        stop = self.size if stop is None else min(stop, self.size)
        span = self.chunks.chunks_for(start, stop)
        if not span:
            return
        o = self.chunks.original
        groups = self._groups(span.start, span.stop, max(first, 1))

        def cut(a, data):
            lo = int(o[a])
            x, y = max(start - lo, 0), min(stop - lo, len(data))
            return lo + x, data[x:y]
        head = next(groups)
        yield cut(head[0], self._fetch(*head))
        for a, data in read_ahead(groups, self._fetch, self.concurrency, "kbatch-chunks"):
            yield cut(a, data)


def manifest_url(url: str) -> str:
    return url[:-len(".log")] + ".rsm-manifest" if url.endswith(".log") else url


def read_index(raw_indexes: RangeSource, manifest: Manifest, detransform: Detransform,
               name: str) -> bytes:
    """One index file out of the ``.indexes`` object (one ranged GET),
    decrypted when the segment is encrypted (the plugin never compresses
    indexes: ``transformIndex`` only encrypts, as one chunk)."""
    entry = manifest.indexes.get(name)
    if entry is None or entry[1] == 0:
        return b""
    pos, size = entry
    stored = raw_indexes.read(pos, pos + size)
    if len(stored) != size:
        raise CorruptRecordError(f"index {name!r} runs past the end of the .indexes object",
                                 path=raw_indexes.url, position=pos)
    if not manifest.encrypted:
        return stored
    plain = stored
    if detransform.aes is not None:
        from cryptography.exceptions import InvalidTag
        try:
            plain = detransform.aes.decrypt(stored[:IV_SIZE], stored[IV_SIZE:], manifest.aad)
        except InvalidTag:
            raise DecryptionError(f"{raw_indexes.url}: index {name!r} fails GCM "
                                  "authentication (wrong key or damaged object)") from None
    return plain
