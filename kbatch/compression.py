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
    codec 3 lz4     the LZ4 frame format (one frame; trailing bytes ignored)
    codec 4 zstd    one or more frames, content size optional, read as a stream
"""

from __future__ import annotations

import threading
import zlib

import lz4.frame
import snappy
import zstandard

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
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


def gunzip(data, limit: int) -> bytes:
    parts = []
    total = 0
    pending = data
    while True:
        stream = zlib.decompressobj(wbits=31)
        try:
            chunk = stream.decompress(pending, limit - total + 1)
        except zlib.error as exc:
            if parts:  # trailing bytes that are not another member: ignored
                break
            raise CodecError(f"gzip: {exc}") from None
        total += len(chunk)
        if total > limit:
            raise _over(limit)
        parts.append(chunk)
        if not stream.eof:
            raise CodecError("gzip: stream is truncated")
        pending = stream.unused_data
        if not pending:
            break
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


def _snappy_block(block, limit: int) -> bytes:
    if _snappy_length(block) > limit:
        raise _over(limit)
    try:
        return snappy.uncompress(block)
    except Exception as exc:  # python-snappy/cramjam raise their own types
        raise CodecError(f"snappy: {exc}") from None


def unsnappy(data, limit: int) -> bytes:
    view = memoryview(data)
    if len(view) < XERIAL_HEADER or view[:8] != XERIAL_MAGIC:
        return _snappy_block(view, limit)
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
        block = _snappy_block(view[pos:pos + size], limit - total)
        pos += size
        total += len(block)
        parts.append(block)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _first_step(data, limit: int) -> int:
    """Output to ask for first: a few times the input, never the whole limit
    (the libraries allocate what they are asked for up front)."""
    return min(max(64 << 10, 4 * len(data)), limit + 1)


def unlz4(data, limit: int) -> bytes:
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


_DECOMPRESSORS = {1: gunzip, 2: unsnappy, 3: unlz4, 4: unzstd}


def decompress(codec: int, data, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """The records of a batch compressed with ``codec``, at most ``limit`` bytes."""
    try:
        fn = _DECOMPRESSORS[codec]
    except KeyError:
        raise CodecError(f"unknown compression codec {codec}") from None
    return fn(data, limit)
