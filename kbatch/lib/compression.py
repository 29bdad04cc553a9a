"""Decompression of a batch's records, one function per codec, one dispatch.

Every codec stops as soon as the output passes ``limit`` bytes, so a small
batch that expands to gigabytes is refused after allocating about ``limit``
bytes, never more. Failures raise ``CodecError`` (the caller adds the file and
byte position); the libraries' own exceptions never escape.

    codec 1 gzip    a gzip stream; concatenated members are read like Java's
                    GZIPInputStream, bytes after the last member are ignored
    codec 2 snappy  xerial framing (magic b"\\x82SNAPPY\\x00", two int32 version
                    fields in either byte order, then int32 length | raw block),
                    or one raw snappy block; told apart by the 8 magic bytes
    codec 3 lz4     the LZ4 frame format (one frame; trailing bytes ignored).
                    Magic-0 data from old brokers carries a wrong header
                    checksum (it also hashed the 4 magic bytes): for magic 0
                    the checksum byte is recomputed before decoding, as
                    Kafka's reader skips it
    codec 4 zstd    one or more frames, content size optional, read as a stream
"""

from __future__ import annotations

import threading
import zlib

import lz4.frame
import snappy
import zstandard

from kbatch import wire

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 << 20


class CodecError(Exception):
    """Decompression failed; ``over_limit`` when the output passed the limit."""

    def __init__(self, reason: str, over_limit: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.over_limit = over_limit


def _over(limit: int) -> CodecError:
    return CodecError(f"decompressed size exceeds max_decompressed_bytes={limit}",
                      over_limit=True)


GZIP_STEP = 1 << 16


def gunzip(data, limit: int) -> bytes:
    """Every gzip member in turn, fed in 64 KiB steps: linear in the input
    whatever the number of members (zlib copies what follows a member)."""
    view = memoryview(data)
    parts: list = []
    total = pos = members = 0
    while pos < len(view):
        stream = zlib.decompressobj(wbits=31)
        while not stream.eof:
            if pos >= len(view):
                if members:  # an incomplete member after a whole one: ignored, as Java
                    return _joined(parts)
                raise CodecError("gzip: stream is truncated")
            piece = view[pos:pos + GZIP_STEP]
            try:
                chunk = stream.decompress(piece, limit - total + 1)
            except zlib.error as exc:
                if members:  # trailing bytes that are not another member: ignored
                    return _joined(parts)
                raise CodecError(f"gzip: {exc}") from None
            total += len(chunk)
            if total > limit:
                raise _over(limit)
            parts.append(chunk)
            pos += len(piece) - len(stream.unused_data)
        members += 1
    return _joined(parts)


def _joined(parts: list) -> bytes:
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_length(block) -> int:
    """The uncompressed length a raw snappy block declares (a varint)."""
    value = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value
    raise CodecError("snappy: bad uncompressed-length header")


def _snappy_block(block, room: int, limit: int) -> bytes:
    """One snappy block of at most ``room`` bytes (what ``limit``, the
    max_decompressed_bytes in force, leaves of the batch)."""
    if _snappy_length(block) > room:
        raise _over(limit)
    try:
        return snappy.uncompress(block)
    except Exception as exc:  # python-snappy/cramjam raise their own types
        raise CodecError(f"snappy: {exc}") from None


def unsnappy(data, limit: int) -> bytes:
    view = memoryview(data)
    if len(view) < XERIAL_HEADER or view[:8] != XERIAL_MAGIC:
        return _snappy_block(view, limit, limit)
    parts = []
    total = 0
    pos = XERIAL_HEADER
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CodecError("snappy: truncated xerial block length")
        size = int.from_bytes(view[pos:pos + 4], "big", signed=True)
        pos += 4
        if size < 0 or size > end - pos:
            raise CodecError(f"snappy: xerial block of {size} bytes runs past the data")
        block = _snappy_block(view[pos:pos + size], limit - total, limit)
        pos += size
        total += len(block)
        parts.append(block)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _first_step(data, limit: int) -> int:
    """Output to ask for first: a few times the input, never the whole limit
    (the libraries allocate what they are asked for up front)."""
    return min(max(64 << 10, 4 * len(data)), limit + 1)


_P1, _P2, _P3, _P4, _P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (an LZ4 frame descriptor)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short takes fewer than 16 bytes")
    h = (seed + _P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        h = (h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        i += 4
    for b in data[i:]:
        h = (h + b * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _fix_lz4_header_checksum(data) -> bytes:
    """Rewrite the frame descriptor checksum byte the LZ4 spec expects."""
    view = bytes(data[:15])
    if len(view) < 7 or view[:4] != b"\x04\x22\x4d\x18":
        return data
    flags = view[4]
    hc_pos = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(view) <= hc_pos:
        return data
    hc = (xxh32_short(view[4:hc_pos]) >> 8) & 0xFF
    if view[hc_pos] == hc:
        return data
    fixed = bytearray(data)
    fixed[hc_pos] = hc
    return bytes(fixed)


def unlz4(data, limit: int, *, magic: int = 2) -> bytes:
    if magic == 0:
        data = _fix_lz4_header_checksum(data)
    decompressor = lz4.frame.LZ4FrameDecompressor()
    parts = []
    total = 0
    step = _first_step(data, limit)
    try:
        chunk = decompressor.decompress(data, max_length=step)
        while True:
            total += len(chunk)
            if total > limit:
                raise _over(limit)
            parts.append(chunk)
            if decompressor.eof or decompressor.needs_input:
                break
            step = min(step * 2, limit - total + 1)
            chunk = decompressor.decompress(b"", max_length=step)
    except RuntimeError as exc:  # lz4 reports every frame error as RuntimeError
        raise CodecError(f"lz4: {exc}") from None
    if not decompressor.eof:
        raise CodecError("lz4: frame is truncated")
    return parts[0] if len(parts) == 1 else b"".join(parts)


_zstd_local = threading.local()


def _zstd_context() -> zstandard.ZstdDecompressor:
    """One decompression context per thread (creating one costs ~10 us)."""
    ctx = getattr(_zstd_local, "ctx", None)
    if ctx is None:
        ctx = _zstd_local.ctx = zstandard.ZstdDecompressor()
    return ctx


def unzstd(data, limit: int) -> bytes:
    reader = _zstd_context().stream_reader(data, read_across_frames=True)
    parts = []
    total = 0
    step = _first_step(data, limit)
    try:
        while True:
            chunk = reader.read(min(step, limit - total + 1))
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise _over(limit)
            parts.append(chunk)
            step *= 2
    except zstandard.ZstdError as exc:
        raise CodecError(f"zstd: {exc}") from None
    finally:
        reader.close()
    return parts[0] if len(parts) == 1 else b"".join(parts)


_DECOMPRESSORS = {wire.Codec.GZIP: gunzip, wire.Codec.SNAPPY: unsnappy,
                  wire.Codec.LZ4: unlz4, wire.Codec.ZSTD: unzstd}


def decompress(codec: int, data, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES, *,
               magic: int = 2) -> bytes:
    """The records of a batch (or legacy wrapper value) compressed with
    ``codec``, at most ``limit`` bytes."""
    try:
        fn = _DECOMPRESSORS[codec]
    except KeyError:
        raise CodecError(f"unknown compression codec {codec}") from None
    if codec == wire.Codec.LZ4:
        return unlz4(data, limit, magic=magic)
    return fn(data, limit)


# --- compression, for the writer ---------------------------------------------

XERIAL_BLOCK = 32 * 1024


def codec_id(codec) -> int:
    """A codec number from a number or a name ("none", "gzip", ...)."""
    return int(wire.codec_id(codec))


def gzip_bytes(data: bytes) -> bytes:
    stream = zlib.compressobj(6, zlib.DEFLATED, 31)
    return stream.compress(data) + stream.flush()


def snappy_xerial_bytes(data: bytes) -> bytes:
    """Xerial framing as Java producers write it (big-endian version 1, compat 1)."""
    parts = [XERIAL_MAGIC, (1).to_bytes(4, "big"), (1).to_bytes(4, "big")]
    view = memoryview(data)
    for i in range(0, len(data), XERIAL_BLOCK):
        block = snappy.compress(bytes(view[i:i + XERIAL_BLOCK]))
        parts += [len(block).to_bytes(4, "big"), block]
    return b"".join(parts)


def lz4_bytes(data: bytes) -> bytes:
    """One LZ4 frame, independent 64 KiB blocks, no content size (as Kafka)."""
    return lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                              block_linked=False, content_checksum=False,
                              store_size=False)


def zstd_bytes(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data)


_COMPRESSORS = {wire.Codec.GZIP: gzip_bytes, wire.Codec.SNAPPY: snappy_xerial_bytes,
                wire.Codec.LZ4: lz4_bytes, wire.Codec.ZSTD: zstd_bytes}


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as a batch's records stream with ``codec`` (1-4)."""
    return _COMPRESSORS[codec](data)
