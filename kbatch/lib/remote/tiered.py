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
from concurrent.futures import ThreadPoolExecutor
from collections import deque
from dataclasses import dataclass

import numpy as np

from kbatch.errors import CorruptRecordError, KbatchError
from kbatch.lib.remote.fs import DEFAULT_BLOCK, FIRST_BLOCK, RangeSource

IV_SIZE = 12
TAG_SIZE = 16
MAX_SIZES_BYTES = 10 << 20          # the plugin's own cap on the encoded chunk list
OBJECT_NAME = re.compile(r"^(\d{20})-([A-Za-z0-9_-]{22})\.(log|indexes|rsm-manifest)$")
INDEX_NAMES = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")


class DecryptionError(KbatchError):
    """A tiered segment cannot be decrypted: no key, a wrong key, or a
    chunk that fails its GCM authentication."""


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
    def build(cls, chunk_size: int, file_size: int, sizes: np.ndarray, url=None):
        if chunk_size <= 0 or file_size < 0:
            raise _bad(url, f"chunk size {chunk_size}, file size {file_size}")
        count = -(-file_size // chunk_size)
        if len(sizes) != count:
            raise _bad(url, f"{len(sizes)} chunk sizes for a {file_size}-byte file in "
                            f"{chunk_size}-byte chunks ({count} chunks)")
        if len(sizes) and int(sizes.min()) < 0:
            raise _bad(url, "negative chunk size")
        original = np.minimum(np.arange(count + 1, dtype=np.int64) * chunk_size, file_size)
        transformed = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        return cls(chunk_size, file_size, original, transformed)

    def __len__(self) -> int:
        return len(self.original) - 1

    def chunks_for(self, start: int, stop: int) -> range:
        """Chunk numbers holding original bytes ``[start, stop)``."""
        if stop <= start:
            return range(0)
        return range(start // self.chunk_size, -(-stop // self.chunk_size))


def parse_chunk_index(obj, url=None) -> ChunkIndex:
    if not isinstance(obj, dict):
        raise _bad(url, "chunkIndex is not an object")
    kind = obj.get("type")
    try:
        chunk_size = _int(obj, "originalChunkSize", url)
        file_size = _int(obj, "originalFileSize", url)
        if chunk_size <= 0:
            raise _bad(url, f"originalChunkSize {chunk_size} is not positive")
        count = -(-file_size // chunk_size)
        if kind == "fixed":
            size = _int(obj, "transformedChunkSize", url)
            final = _int(obj, "finalTransformedChunkSize", url)
            sizes = np.full(count, size, np.int64)
            if count:
                sizes[-1] = final
        elif kind == "variable":
            text = obj.get("transformedChunks")
            if not isinstance(text, str):
                raise _bad(url, "transformedChunks is not a string")
            packed = base64.b64decode(text, validate=True)
            import zstandard
            try:
                raw = zstandard.ZstdDecompressor().decompress(
                    packed, max_output_size=MAX_SIZES_BYTES)
            except zstandard.ZstdError as exc:
                raise _bad(url, f"transformedChunks does not decompress: {exc}") from None
            sizes = decode_chunk_sizes(raw, url)
        else:
            raise _bad(url, f"unknown chunkIndex type {kind!r} (expected fixed or variable)")
    except (binascii.Error, ValueError) as exc:
        if isinstance(exc, CorruptRecordError):
            raise
        raise _bad(url, f"chunkIndex: {exc}") from None
    return ChunkIndex.build(chunk_size, file_size, sizes, url)


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


def parse_manifest(data: bytes, url=None) -> Manifest:
    """A ``.rsm-manifest`` object, every field checked."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad(url, f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _bad(url, "not a JSON object")
    for key in ("chunkIndex", "segmentIndexes", "compression"):
        if key not in doc:
            raise _bad(url, f"no {key!r}")
    chunks = parse_chunk_index(doc["chunkIndex"], url)
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

def load_private_keys(private_key) -> dict | list:
    """``private_key``: PEM bytes/str, a path to a PEM file, a loaded
    ``cryptography`` private key, or a dict ``{key id: any of those}`` (the
    plugin's keyring). Returns ``{id or None: key}``."""
    if private_key is None:
        return {}
    if isinstance(private_key, dict):
        return {k: _load_one(v) for k, v in private_key.items()}
    return {None: _load_one(private_key)}


def _load_one(key):
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise KbatchError("decrypting tiered storage needs cryptography, which is not "
                          "installed: pip install 'kbatch[remote]'") from None
    if hasattr(key, "decrypt"):
        return key
    if isinstance(key, str) and "-----BEGIN" not in key:
        with open(key, "rb") as fh:
            key = fh.read()
    if isinstance(key, str):
        key = key.encode()
    try:
        return serialization.load_pem_private_key(bytes(key), password=None)
    except (ValueError, TypeError) as exc:
        raise DecryptionError(f"private key is not a PEM RSA private key: {exc}") from None


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


def unwrap_data_key(manifest: Manifest, keys: dict, url=None) -> bytes:
    """The AES data key: RSA-OAEP (SHA3-512, MGF1 SHA3-512) of the wrapped one."""
    if not keys:
        raise DecryptionError(f"{url}: the segment is encrypted (key id "
                              f"{manifest.key_id!r}): pass private_key=")
    key = keys.get(manifest.key_id, keys.get(None))
    if key is None:
        raise DecryptionError(f"{url}: no private key with id {manifest.key_id!r} "
                              f"(have {sorted(map(str, keys))})")
    try:
        data_key = oaep_sha3_512_decrypt(key, manifest.wrapped_key)
    except (ValueError, AttributeError) as exc:
        raise DecryptionError(f"{url}: the data key does not decrypt with the given "
                              f"private key (wrong key?): {exc}") from None
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
            import zstandard
            try:
                chunk = zstandard.ZstdDecompressor().decompress(chunk, max_output_size=limit)
            except zstandard.ZstdError as exc:
                raise CorruptRecordError(f"chunk does not decompress (zstd): {exc}",
                                         path=self.url, position=position) from None
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

    def _groups(self, first: int, last: int, budget: int) -> list[range]:
        groups, a = [], first
        t = self.chunks.transformed
        while a < last:
            b = a + 1
            while b < last and t[b + 1] - t[a] <= budget:
                b += 1
            groups.append(range(a, b))
            a = b
            budget = self.block
        return groups

    def _fetch(self, group: range) -> bytes:
        t, o = self.chunks.transformed, self.chunks.original
        stored = self.raw.read(int(t[group.start]), int(t[group.stop]))
        if len(stored) != t[group.stop] - t[group.start]:
            raise CorruptRecordError("object shorter than its chunk index", path=self.url,
                                     position=int(t[group.start]) + len(stored))
        out = []
        for i in group:
            a, b = int(t[i] - t[group.start]), int(t[i + 1] - t[group.start])
            out.append(self.detransform(stored[a:b], int(o[i + 1] - o[i]), int(t[i])))
        return b"".join(out)

    def read(self, start: int, stop: int) -> bytes:
        stop = min(stop, self.size)
        parts = [data for _, data in self.blocks(start, stop)]
        return b"".join(parts)

    def blocks(self, start: int = 0, stop: int | None = None, *, first: int = FIRST_BLOCK):
        """``(position, original bytes)`` covering ``[start, stop)``, as
        ``RangeSource.blocks`` (whole chunks are fetched; the first and last
        are cut to the range)."""
        stop = self.size if stop is None else min(stop, self.size)
        span = self.chunks.chunks_for(start, stop)
        if not span:
            return
        groups = self._groups(span.start, span.stop, max(first, 1))
        o = self.chunks.original

        def cut(group, data):
            lo = int(o[group.start])
            a, b = max(start - lo, 0), min(stop - lo, len(data))
            return lo + a, data[a:b]
        yield cut(groups[0], self._fetch(groups[0]))
        rest = groups[1:]
        if not rest:
            return
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="kbatch-chunks")
        pending: deque = deque()
        try:
            it = iter(rest)
            for g in it:
                pending.append((g, pool.submit(self._fetch, g)))
                if len(pending) >= self.concurrency:
                    break
            while pending:
                g, fut = pending.popleft()
                data = fut.result()
                nxt = next(it, None)
                if nxt is not None:
                    pending.append((nxt, pool.submit(self._fetch, nxt)))
                yield cut(g, data)
                del data
        finally:
            for _, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


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
