# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Zstandard batches (codec 4) decompressed without the GIL.

The ``zstandard`` package's Python API holds the GIL around every call. Its
cffi backend (``zstandard/_cffi*.so``) carries the same libzstd as the C
backend the Python path uses, with ``ZSTD_*`` exported; at import we look up
the six entry points below there (else in the system's ``libzstd.so.1``),
check them on frames the package compressed, and call them from the walk.
When none is found ``zstd_native()`` is false and every zstd batch takes the
Python path of ``compression.py``.

What ``compression.unzstd`` (a ``stream_reader`` reading across frames)
accepts, and so what is accepted here:

    frame | frame | ...      zstd or skippable frames, content size optional
    a truncated last frame    what its whole blocks hold (the reader stops
                              at the end of the input without an error)
    anything else after a frame: an error (unknown frame descriptor)

Decoding goes through ``ZSTD_decompressStream`` until libzstd reports an
error, or the input is used up and libzstd has nothing more to give. Output
is capped at ``limit + 1`` bytes; failures return ``CODEC_FAILED`` and the
Python path raises the error users see.
"""

import ctypes
import ctypes.util
import importlib.util

import zstandard as _zstandard

from libc.stdint cimport uint8_t, uintptr_t

from kbatch._core._outbuf cimport CODEC_FAILED, CODEC_OK, OutBuf, outbuf_free, outbuf_grow, outbuf_init


cdef struct InBuffer:
    const void *src
    size_t size
    size_t pos

cdef struct OutBuffer:
    void *dst
    size_t size
    size_t pos

ctypedef void *(*create_fn)() noexcept nogil
ctypedef size_t (*free_fn)(void *dctx) noexcept nogil
ctypedef size_t (*reset_fn)(void *dctx, int directive) noexcept nogil
ctypedef unsigned (*is_error_fn)(size_t code) noexcept nogil
ctypedef size_t (*stream_fn)(void *dctx, OutBuffer *out, InBuffer *inp) noexcept nogil
ctypedef unsigned (*version_fn)() noexcept nogil

cdef enum:
    ZSTD_RESET_SESSION_ONLY = 1

cdef create_fn _create = NULL
cdef free_fn _free = NULL
cdef reset_fn _reset = NULL
cdef is_error_fn _is_error = NULL
cdef stream_fn _stream = NULL
_source = None


cdef bint zstd_native() noexcept nogil:
    return _stream != NULL


cdef void zstd_free(void **dctx) noexcept nogil:
    if dctx[0] != NULL and _free != NULL:
        _free(dctx[0])
    dctx[0] = NULL


cdef int zstd_decompress(void **dctx, OutBuf *out, const uint8_t *src, size_t n,
                         size_t limit) noexcept nogil:
    """Every frame of ``src[:n]`` into ``out.data[:out.len]``, at most
    ``limit`` bytes: CODEC_OK or CODEC_FAILED. ``dctx`` is created on first
    use and reused. Keeps in memory: the context (libzstd's window) and the
    output buffer. On failure the output buffer is freed (a refused bomb
    leaves nothing allocated behind)."""
    cdef InBuffer inp
    cdef OutBuffer o
    cdef size_t ret
    if _stream == NULL:
        return CODEC_FAILED
    if dctx[0] == NULL:
        dctx[0] = _create()
        if dctx[0] == NULL:
            return CODEC_FAILED
    else:
        _reset(dctx[0], ZSTD_RESET_SESSION_ONLY)  # forget a frame left half read
    out.len = 0
    inp.src = src
    inp.size = n
    inp.pos = 0
    while True:
        if out.len == out.cap and outbuf_grow(out, n, limit) != 0:
            outbuf_free(out)
            return CODEC_FAILED
        o.dst = out.data
        o.size = out.cap
        o.pos = out.len
        ret = _stream(dctx[0], &o, &inp)
        if _is_error(ret):
            outbuf_free(out)
            return CODEC_FAILED
        out.len = o.pos
        if out.len > limit:
            outbuf_free(out)
            return CODEC_FAILED
        if inp.pos == inp.size and out.len < out.cap:
            # input used up and room left: libzstd has nothing more to give
            # (all frames done, or the last one truncated: what the reader returns)
            return CODEC_OK


def _candidates():
    """Libraries that may export libzstd: the zstandard package's cffi
    backend (the same libzstd as its C backend), then the system's."""
    spec = importlib.util.find_spec("zstandard._cffi")
    if spec is not None and spec.origin:
        yield spec.origin
    name = ctypes.util.find_library("zstd")
    for path in (name, "libzstd.so.1"):
        if path:
            yield path


_NAMES = ("ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_DCtx_reset", "ZSTD_isError",
          "ZSTD_decompressStream", "ZSTD_versionNumber")


def _resolve():
    """``(path, addresses)`` of the first library with every entry point and
    the zstandard package's libzstd version, or None."""
    want = _zstandard.ZSTD_VERSION
    want = want[0] * 10000 + want[1] * 100 + want[2]
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            addresses = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                         for name in _NAMES]
        except (OSError, AttributeError):
            continue
        if all(addresses) and (<version_fn><uintptr_t>addresses[5])() == want:
            return path, addresses
    return None


def _install():
    global _create, _free, _reset, _is_error, _stream, _source
    found = _resolve()
    if found is None:
        return
    path, addresses = found
    _create = <create_fn><uintptr_t>addresses[0]
    _free = <free_fn><uintptr_t>addresses[1]
    _reset = <reset_fn><uintptr_t>addresses[2]
    _is_error = <is_error_fn><uintptr_t>addresses[3]
    _stream = <stream_fn><uintptr_t>addresses[4]
    probe = bytes(range(256)) * 700 + b"kbatch" * 30000
    frames = [_zstandard.ZstdCompressor(level=level, write_content_size=size,
                                        write_checksum=size).compress(probe)
              for level, size in ((1, False), (3, True), (19, False))]
    if (any(decompress(f, len(probe)) != probe for f in frames)
            or decompress(frames[0] + frames[1], 2 * len(probe)) != probe * 2):
        _stream = NULL
        return
    _source = path


def native_zstd():
    """The library zstd batches are decompressed with without the GIL, or
    None (they take the Python path)."""
    return _source if _stream != NULL else None


def decompress(const uint8_t[::1] data, Py_ssize_t limit):
    """The native path on a bytes-like object: the records, or None when it
    fails (for tests and the import check)."""
    cdef void *dctx = NULL
    cdef OutBuf out
    cdef int st
    cdef size_t n = <size_t>data.shape[0]
    if limit < 0:
        raise ValueError("limit must be >= 0")
    outbuf_init(&out)
    with nogil:
        st = zstd_decompress(&dctx, &out, &data[0] if n else <const uint8_t *>"", n,
                             <size_t>limit)
    try:
        if st != CODEC_OK:
            return None
        return (<const char *>out.data)[:out.len] if out.len else b""
    finally:
        outbuf_free(&out)
        zstd_free(&dctx)


_install()
