# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""gzip batches (codec 1) inflated without the GIL, by zlib-ng or zlib.

Python's ``zlib`` module holds the GIL while it inflates. At import we look
up ``inflate`` and its companions in, first, the ``zlib-ng`` package's
extension (zlib-ng's native ``zng_*`` API: zlib's inflate with the same
checks, about 1.5x faster), else the zlib Python's ``zlib`` module runs (or
the system's ``libz.so.1``); check them on streams Python compressed; and
call them from the walk. When none is found ``gzip_native()`` is false and
every gzip batch takes the Python path of ``compression.py``. (libdeflate is
faster still but accepts streams zlib refuses, such as the reserved distance
codes 30 and 31, so its answers would differ from the Python path's.)

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
import importlib.util
import zlib as _zlib

from libc.stdint cimport uint8_t, uintptr_t
from libc.stdlib cimport calloc, free

from kbatch._core._outbuf cimport CODEC_FAILED, CODEC_OK, OutBuf, outbuf_free, outbuf_grow, outbuf_init


cdef struct ZStream:          # zlib's z_stream (a stable ABI since 1.0); zlib-ng's
                              # zng_stream has the same fields up to ``opaque``
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
ctypedef int (*init_ng_fn)(ZStream *strm, int window_bits) noexcept nogil
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
    STREAM_BYTES = 256          # room for either library's stream struct

cdef init_fn _init = NULL
cdef init_ng_fn _init_ng = NULL
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
    z = <ZStream *>calloc(1, STREAM_BYTES)
    if z == NULL:
        return NULL
    if (_init_ng(z, GZIP_WINDOW_BITS) if _init_ng != NULL
            else _init(z, GZIP_WINDOW_BITS, _version, <int>sizeof(ZStream))) != Z_OK:
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
                    return CODEC_FAILED  # no memory
                # never room past limit + 1 in all (Python's max_length): zlib
                # may find an error after filling it, and must find the same
                room = min(out.cap - out.len, limit + 1 - out.len, <size_t>MAX_AVAIL)
                z.next_out = out.data + out.len
                z.avail_out = <unsigned>room
                err = _inflate(z, Z_SYNC_FLUSH)
                out.len += room - z.avail_out
                if err != Z_OK and err != Z_BUF_ERROR and err != Z_STREAM_END:
                    if members:  # not another member: ignored, this step's output dropped
                        out.len = step_start
                        return CODEC_OK
                    return CODEC_FAILED
                if out.len > limit:
                    return CODEC_FAILED  # over the limit
                if err == Z_STREAM_END:
                    eof = True
                    break
                if z.avail_out != 0:  # the piece is used up
                    break
            pos += piece - z.avail_in
        members += 1
    return CODEC_OK


_ZLIB_NAMES = ("inflateInit2_", "inflate", "inflateReset", "inflateEnd", "zlibVersion")
_NG_NAMES = ("zng_inflateInit2", "zng_inflate", "zng_inflateReset", "zng_inflateEnd",
             "zlibng_version")


def _candidates():
    """``(library, names, is zlib-ng)``: the zlib-ng package's extension,
    then the zlib Python's zlib module uses, then the system's."""
    spec = importlib.util.find_spec("zlib_ng.zlib_ng")
    if spec is not None and spec.origin:
        yield spec.origin, _NG_NAMES, True
    yield getattr(_zlib, "__file__", None), _ZLIB_NAMES, False
    yield None, _ZLIB_NAMES, False  # the interpreter itself (a static zlib)
    for path in (ctypes.util.find_library("z"), "libz.so.1"):
        if path:
            yield path, _ZLIB_NAMES, False


def _resolve(kinds):
    """``(path, addresses, is zlib-ng)`` of the first library of ``kinds``
    (is zlib-ng: True, False) with every entry point (a zlib: the version
    Python's zlib module runs, if there); or None."""
    found = []
    for path, names, ng in _candidates():
        if ng not in kinds:
            continue
        try:
            lib = ctypes.CDLL(path)
            addresses = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                         for name in names]
        except (OSError, AttributeError, TypeError):
            continue
        if not all(addresses) or (<version_fn><uintptr_t>addresses[4])() == NULL:
            continue
        if ng:
            return path, addresses, True
        version = (<bytes>(<version_fn><uintptr_t>addresses[4])()).decode()
        found.append((version != _zlib.ZLIB_RUNTIME_VERSION, path, addresses))
    if not found:
        return None
    _, path, addresses = min(found, key=lambda entry: entry[0])
    return path, addresses, False


_probes = []


def _probe():
    """Data and a gzip member of it, from Python's zlib (made once)."""
    if not _probes:
        probe = bytes(range(256)) * 700 + b"kbatch" * 30000
        member = _zlib.compressobj(6, _zlib.DEFLATED, 31)
        _probes.append((probe, member.compress(probe) + member.flush()))
    return _probes[0]


def _install(kinds=(True, False)):
    global _init, _init_ng, _inflate, _reset, _end, _version, _source
    _init = NULL
    _init_ng = NULL
    _inflate = NULL
    _source = None
    found = _resolve(kinds)
    if found is None:
        return
    path, addresses, ng = found
    if ng:
        _init_ng = <init_ng_fn><uintptr_t>addresses[0]
    else:
        _version = (<version_fn><uintptr_t>addresses[4])()  # the library's own string
        _init = <init_fn><uintptr_t>addresses[0]
    _reset = <reset_fn><uintptr_t>addresses[2]
    _end = <end_fn><uintptr_t>addresses[3]
    _inflate = <inflate_fn><uintptr_t>addresses[1]
    probe, member = _probe()
    if (decompress(member, len(probe)) != probe
            or decompress(member + member + b"\0", 2 * len(probe)) != probe * 2
            or decompress(member[:len(member) - 1], len(probe)) is not None):
        _inflate = NULL
        return
    _source = ("zlib-ng " if ng else "zlib ") + (path or "in the interpreter")


def native_gzip():
    """The library gzip batches are inflated with without the GIL
    ("zlib-ng <path>" or "zlib <path>"), or None (they take the Python path)."""
    return _source if _inflate != NULL else None


def select(zlib_ng=None):
    """Pick the library again: zlib-ng only (True), zlib only (False) or the
    first found (None); returns ``native_gzip()``. For tests; no decoder may
    be running."""
    _install((True, False) if zlib_ng is None else (bool(zlib_ng),))
    return native_gzip()


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
