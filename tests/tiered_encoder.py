"""A test-side writer of the tiered-storage plugin's bucket layout, written
from the plugin's format (KafkaRemoteStorageManager, ObjectKeyFactory,
ChunkSizesBinaryCodec, Encryption/CompressionChunkEnumeration), independent
of kbatch's reader: it shares no code with kbatch.lib.tiered.

encode_segment() turns one local segment (its .log and .index/.timeindex
files) into the three objects the plugin uploads:

    <prefix><topic>-<topicId>/<partition>/<20-digit start>-<uuid>.log
                                                                .indexes
                                                                .rsm-manifest
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import time

import zstandard
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def kafka_uuid() -> str:
    """Kafka's Uuid.toString(): 16 random bytes, URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def rsa_pem_pair() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def encode_sizes(values: list[int]) -> bytes:
    """ChunkSizesBinaryCodec.encode: count; then either the one value, or
    base (the minimum of all but the last), the byte width of the largest
    difference, each difference in that many big-endian bytes, and the
    last value in full."""
    if not values:
        return struct.pack(">i", 0)
    if len(values) == 1:
        return struct.pack(">ii", 1, values[0])
    head = values[:-1]
    base = min(head)
    widest = max(v - base for v in head)
    width = 1 if widest <= 0xFF else 2 if widest <= 0xFFFF else 3 if widest <= 0xFFFFFF else 4
    out = bytearray(struct.pack(">iib", len(values), base, width))
    for v in head:
        out += struct.pack(">I", v - base)[4 - width:]
    out += struct.pack(">i", values[-1])
    return bytes(out)


def live_index(raw: bytes, entry: int) -> bytes:
    """An index file as the broker trims it before upload: up to the first
    all-zero entry after the first."""
    n = len(raw) // entry
    for i in range(1, n):
        if raw[i * entry:(i + 1) * entry] == bytes(entry):
            return raw[:i * entry]
    return raw[:n * entry]


def _mgf1(seed: bytes, length: int) -> bytes:
    blocks = b"".join(hashlib.sha3_512(seed + struct.pack(">I", i)).digest()
                      for i in range(-(-length // 64)))
    return blocks[:length]


def oaep_sha3_512_encrypt(public_key, message: bytes) -> bytes:
    """RSAES-OAEP encryption (RFC 8017 7.1.1), SHA3-512 hash and MGF1, empty
    label: what BouncyCastle's "RSA/NONE/OAEPWithSHA3-512AndMGF1Padding"
    writes (cryptography's OAEP has no SHA3)."""
    nums = public_key.public_numbers()
    k = (nums.n.bit_length() + 7) // 8
    ps = bytes(k - len(message) - 2 * 64 - 2)
    db = hashlib.sha3_512(b"").digest() + ps + b"\x01" + message
    seed = os.urandom(64)
    masked_db = bytes(x ^ y for x, y in zip(db, _mgf1(seed, len(db))))
    masked_seed = bytes(x ^ y for x, y in zip(seed, _mgf1(masked_db, 64)))
    em = b"\x00" + masked_seed + masked_db
    return pow(int.from_bytes(em, "big"), nums.e, nums.n).to_bytes(k, "big")


class Encoder:
    """``variant``: "plain", "compressed", "encrypted" or "both"."""

    def __init__(self, variant: str, chunk_size: int = 4096, public_pem: bytes | None = None,
                 key_id: str = "key1"):
        self.compress = variant in ("compressed", "both")
        self.encrypt = variant in ("encrypted", "both")
        self.chunk_size = chunk_size
        self.key_id = key_id
        self.public = serialization.load_pem_public_key(public_pem) if self.encrypt else None

    def _encrypt(self, data: bytes, key: bytes, aad: bytes) -> bytes:
        iv = os.urandom(12)
        return iv + AESGCM(key).encrypt(iv, data, aad)

    def encode_segment(self, log: bytes, offset_index: bytes, time_index: bytes,
                       txn_index: bytes | None, *, topic: str, topic_id: str, partition: int,
                       start_offset: int, end_offset: int, segment_id: str | None = None,
                       event_ms: int | None = None,
                       leader_epochs: dict[int, int] | None = None) -> dict[str, bytes]:
        """``{object key without prefix: bytes}`` of one segment.
        ``leader_epochs``: its ``segmentLeaderEpochs`` (epoch -> first
        offset of that epoch in the segment; default ``{0: start}``)."""
        epochs = {0: start_offset} if leader_epochs is None else leader_epochs
        segment_id = segment_id or kafka_uuid()
        key = aad = None
        if self.encrypt:
            key, aad = os.urandom(32), os.urandom(32)
        chunks = []
        for pos in range(0, len(log), self.chunk_size):
            chunk = log[pos:pos + self.chunk_size]
            if self.compress:
                chunk = zstandard.ZstdCompressor(write_content_size=True).compress(chunk)
            if self.encrypt:
                chunk = self._encrypt(chunk, key, aad)
            chunks.append(chunk)
        sizes = [len(c) for c in chunks]
        if self.compress:
            packed = zstandard.ZstdCompressor(write_content_size=True).compress(
                encode_sizes(sizes))
            chunk_index = {"type": "variable", "originalChunkSize": self.chunk_size,
                           "originalFileSize": len(log),
                           "transformedChunks": base64.b64encode(packed).decode()}
        else:
            chunk_index = {"type": "fixed", "originalChunkSize": self.chunk_size,
                           "originalFileSize": len(log),
                           "transformedChunkSize": sizes[0] if len(sizes) > 1 else (
                               self.chunk_size + (28 if self.encrypt else 0)),
                           "finalTransformedChunkSize": sizes[-1] if sizes else 0}
        files = [("offset", live_index(offset_index, 8)), ("timestamp", live_index(time_index, 12)),
                 ("producerSnapshot", b""), ("leaderEpoch", b"0\n%d\n" % len(epochs) + b"".join(
                     b"%d %d\n" % kv for kv in sorted(epochs.items())))]
        if txn_index is not None:
            files.append(("transaction", txn_index))
        indexes, blob = {}, bytearray()
        for name, data in files:
            if data and self.encrypt:
                data = self._encrypt(data, key, aad)   # indexes: encrypted, never compressed
            indexes[name] = {"position": len(blob), "size": len(data)}
            blob += data
        manifest = {"version": "1", "chunkIndex": chunk_index, "segmentIndexes": indexes,
                    "compression": self.compress}
        if self.encrypt:
            wrapped = oaep_sha3_512_encrypt(self.public, key)
            manifest["encryption"] = {
                "dataKey": f"{self.key_id}:{base64.b64encode(wrapped).decode()}",
                "aad": base64.b64encode(aad).decode()}
        manifest["remoteLogSegmentMetadata"] = {
            "remoteLogSegmentId": {"topicIdPartition": {
                "topicId": topic_id, "topicPartition": {"topic": topic, "partition": partition}},
                "id": segment_id},
            "startOffset": start_offset, "endOffset": end_offset, "maxTimestampMs": 0,
            "brokerId": 0, "eventTimestampMs": event_ms or int(time.time() * 1000),
            "segmentLeaderEpochs": {str(e): o for e, o in sorted(epochs.items())}}
        stem = f"{topic}-{topic_id}/{partition}/{start_offset:020d}-{segment_id}"
        return {stem + ".log": b"".join(chunks), stem + ".indexes": bytes(blob),
                stem + ".rsm-manifest": json.dumps(manifest).encode()}


def encode_partition(encoder: Encoder, directory: str, *, topic: str, topic_id: str,
                     partition: int, last_offsets: dict[int, int]) -> dict[str, bytes]:
    """Every segment of a local partition directory. ``last_offsets``: per
    segment base offset, its last offset (the caller knows it from the data
    it wrote: the plugin takes it from the broker's metadata)."""
    out = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".log"):
            continue
        base = int(name[:-4])
        stem = os.path.join(directory, name[:-4])

        def read(ext):
            path = stem + ext
            return open(path, "rb").read() if os.path.exists(path) else b""
        txn = read(".txnindex") if os.path.exists(stem + ".txnindex") else None
        out.update(encoder.encode_segment(read(".log"), read(".index"), read(".timeindex"), txn,
                                          topic=topic, topic_id=topic_id, partition=partition,
                                          start_offset=base, end_offset=last_offsets[base]))
    return out
