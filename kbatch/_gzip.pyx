# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""gzip batches (codec 1) inflated without the GIL, by zlib.

Python's ``zlib`` module holds the GIL while it inflates. The zlib it is
linked with exports ``inflate``; at import we look up the four entry points
below through the module's own library (else the system's ``libz.so.1``),
check them on streams Python compressed, and call them from the walk. When
none is found ``gzip_native()`` is false and every gzip batch takes the
Python path of ``compression.py``.

What ``compression.gunzip`` accepts, and so what is accepted here (RFC 1952):

    member | member | ...    each: 1F 8B 08 FLG MTIME XFL OS [extra] [name]
                             [comment] [hcrc] | deflate data | CRC32 ISIZE
    the first member must be whole; after a whole one, bytes that fail to
    inflate or end early are ignored (as Java's GZIPInputStream), keeping
    what the Python path keeps: it feeds zlib 64 KiB of input at a time and
    drops the output of the step that failed, so this loop does the same

Output is capped at ``limit + 1`` bytes; failures return ``CODEC_FAILED``
and the Python path raises the error users see.
"""

import ctypes
import ctypes.util
import zlib as _zlib

from libc.stdint cimport uint8_t, uintptr_t
from libc.stdlib cimport calloc, free

from kbatch._outbuf cimport CODEC_FAILED, CODEC_OK, OutBuf, outbuf_free, outbuf_grow, outbuf_init


cdef struct ZStream:          # zlib's z_stream (a stable ABI since 1.0)
    const uint8_t *next_in
    unsigned avail_in
    unsigned long total_in
    uint8_t *next_out
    unsigned avail_out
    unsigned long total_out
    const char *msg
    void *state
    void *zalloc
    void *zfree
    void *opaque
    int data_type
    unsigned long adler
    unsigned long reserved

ctypedef int (*init_fn)(ZStream *strm, int window_bits, const char *version,
                        int stream_size) noexcept nogil
ctypedef int (*inflate_fn)(ZStream *strm, int flush) noexcept nogil
ctypedef int (*reset_fn)(ZStream *strm) noexcept nogil
ctypedef int (*end_fn)(ZStream *strm) noexcept nogil
ctypedef const char *(*version_fn)() noexcept nogil

cdef enum:
    Z_OK = 0
    Z_STREAM_END = 1
    Z_BUF_ERROR = -5
    Z_SYNC_FLUSH = 2
    GZIP_WINDOW_BITS = 31       # 15 + 16: a gzip wrapper
    GZIP_STEP = 1 << 16         # compression.GZIP_STEP
    MAX_AVAIL = 1 << 30         # avail_out is 32 bits

cdef init_fn _init = NULL
cdef inflate_fn _inflate = NULL
cdef reset_fn _reset = NULL
cdef end_fn _end = NULL
cdef const char *_version = NULL
_source = None


cdef bint gzip_native() noexcept nogil:
    return _inflate != NULL


cdef void gzip_free(void **stream) noexcept nogil:
    if stream[0] != NULL:
        _end(<ZStream *>stream[0])
        free(stream[0])
    stream[0] = NULL


cdef ZStream *_stream(void **stream) noexcept nogil:
    """The reusable inflate state, created on first use, reset otherwise."""
    cdef ZStream *z = <ZStream *>stream[0]
    if z != NULL:
        if _reset(z) == Z_OK:
            return z
        gzip_free(stream)
    z = <ZStream *>calloc(1, sizeof(ZStream))
    if z == NULL:
        return NULL
    if _init(z, GZIP_WINDOW_BITS, _version, <int>sizeof(ZStream)) != Z_OK:
        free(z)
        return NULL
    stream[0] = z
    return z


cdef int gzip_decompress(void **stream, OutBuf *out, const uint8_t *src, size_t n,
                         size_t limit) noexcept nogil:
    """Every gzip member of ``src[:n]`` into ``out.data[:out.len]``, at most
    ``limit`` bytes: CODEC_OK or CODEC_FAILED. Keeps in memory: zlib's state
    (32 KiB window) and the output buffer."""
    cdef ZStream *z
    cdef size_t pos = 0, piece, step_start, room
    cdef size_t members = 0
    cdef bint eof
    cdef int err
    if _inflate == NULL:
        return CODEC_FAILED
    out.len = 0
    while pos < n:
        z = _stream(stream)  # a fresh member (new decompressobj in Python)
        if z == NULL:
            return CODEC_FAILED
        eof = False
        while not eof:
            if pos >= n:  # input ended inside the member
                return CODEC_OK if members else CODEC_FAILED
            piece = min(<size_t>GZIP_STEP, n - pos)
            step_start = out.len
            z.next_in = src + pos
            z.avail_in = <unsigned>piece
            while True:
                if out.len == out.cap and outbuf_grow(out, n, limit) != 0:
                    return CODEC_FAILED  # over the limit (or no memory)
                room = min(out.cap - out.len, <size_t>MAX_AVAIL)
                z.next_out = out.data + out.len
                z.avail_out = <unsigned>room
                err = _inflate(z, Z_SYNC_FLUSH)
                out.len += room - z.avail_out
                if out.len > limit:
                    return CODEC_FAILED
                if err == Z_STREAM_END:
                    eof = True
                    break
                if err != Z_OK and err != Z_BUF_ERROR:
                    if members:  # not another member: ignored, this step's output dropped
                        out.len = step_start
                        return CODEC_OK
                    return CODEC_FAILED
                if z.avail_out != 0:  # the piece is used up
                    break
            pos += piece - z.avail_in
        members += 1
    return CODEC_OK


def _candidates():
    """Libraries that may export zlib: the one Python's zlib module uses,
    then the system's."""
    yield getattr(_zlib, "__file__", None)
    yield None  # the interpreter itself (a statically linked zlib)
    name = ctypes.util.find_library("z")
    for path in (name, "libz.so.1"):
        if path:
            yield path


_NAMES = ("inflateInit2_", "inflate", "inflateReset", "inflateEnd", "zlibVersion")


def _resolve():
    """``(path, addresses, version)`` of the first zlib with every entry
    point, preferring the version Python's zlib module runs; or None."""
    found = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            addresses = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                         for name in _NAMES]
        except (OSError, AttributeError, TypeError):
            continue
        if not all(addresses):
            continue
        version = (<version_fn><uintptr_t>addresses[4])()
        if version == NULL:
            continue
        found.append((path, addresses, <bytes>version))
    for entry in found:
        if entry[2].decode() == _zlib.ZLIB_RUNTIME_VERSION:
            return entry
    return found[0] if found else None


def _install():
    global _init, _inflate, _reset, _end, _version, _source
    found = _resolve()
    if found is None:
        return
    path, addresses, version = found
    _version = (<version_fn><uintptr_t>addresses[4])()  # the library's own string
    _init = <init_fn><uintptr_t>addresses[0]
    _reset = <reset_fn><uintptr_t>addresses[2]
    _end = <end_fn><uintptr_t>addresses[3]
    _inflate = <inflate_fn><uintptr_t>addresses[1]
    probe = bytes(range(256)) * 700 + b"kbatch" * 30000
    member = _zlib.compressobj(6, _zlib.DEFLATED, 31)
    member = member.compress(probe) + member.flush()
    if (decompress(member, len(probe)) != probe
            or decompress(member + member + b"\0", 2 * len(probe)) != probe * 2
            or decompress(member[:len(member) - 1], len(probe)) is not None):
        _inflate = NULL
        return
    _source = path or "the interpreter"


def native_gzip():
    """The zlib gzip batches are inflated with without the GIL, or None
    (they take the Python path)."""
    return _source if _inflate != NULL else None


def decompress(const uint8_t[::1] data, Py_ssize_t limit):
    """The native path on a bytes-like object: the records, or None when it
    fails (for tests and the import check)."""
    cdef void *stream = NULL
    cdef OutBuf out
    cdef int st
    cdef size_t n = <size_t>data.shape[0]
    if limit < 0:
        raise ValueError("limit must be >= 0")
    outbuf_init(&out)
    with nogil:
        st = gzip_decompress(&stream, &out, &data[0] if n else <const uint8_t *>"", n,
                             <size_t>limit)
    try:
        if st != CODEC_OK:
            return None
        return (<const char *>out.data)[:out.len] if out.len else b""
    finally:
        outbuf_free(&out)
        gzip_free(&stream)


_install()
