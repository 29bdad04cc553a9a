# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Checksums for the decoders (see ``_checksums.pxd``).

CRC-32C, fastest first:

1. On x86-64 CPUs with VPCLMULQDQ and AVX-512 (checked at import), spans of
   512 bytes or more are folded 256 bytes per step by carry-less
   multiplication (``_crc32c_fold.h``): about 5x the crc32 instruction on a
   16 KiB batch in cache. It is checked against the package at import and
   left off if it disagrees.
2. The hardware-accelerated ``crc32c`` package. Its Python function needs the
   GIL for every call, so at import we look up the C routine the package
   itself selected (``_crc32c_hw_adler`` on x86-64 with SSE 4.2,
   ``_crc32c_hw_arm64`` on ARMv8, its software slicing-by-8 otherwise), check
   it against the package's Python function on a known vector, and call it
   directly from the decode loop.
3. If that symbol cannot be found (another build of the package), the
   package's Python function under the GIL: slower, never wrong.

``crc32c_implementation()`` says which paths are in use.
"""

import ctypes

import crc32c as _crc32c_pkg

from libc.stdint cimport uint8_t, uint32_t, uintptr_t

cdef extern from "_crc32c_fold.h":
    uint32_t kb_crc32c_fold(uint32_t crc, const uint8_t *p, size_t n) noexcept nogil
    int kb_crc32c_fold_available() noexcept nogil

cdef enum:
    # below this the package's routine is about as fast (the fold needs 256)
    FOLD_FROM = 512

ctypedef uint32_t (*crc_fn_t)(uint32_t crc, const uint8_t *data, unsigned long n) noexcept nogil

cdef crc_fn_t _crc32c_fn = NULL
cdef bint _fold = False        # the folding routine is in use (set at import)
cdef uint32_t _crc32_table[8][256]


cdef uint32_t crc32c(const uint8_t *data, size_t n) noexcept nogil:
    cdef uint32_t out = 0
    if _fold and n >= FOLD_FROM:
        return kb_crc32c_fold(0xFFFFFFFFu, data, n) ^ 0xFFFFFFFFu
    if _crc32c_fn != NULL:
        return _crc32c_fn(0xFFFFFFFFu, data, n) ^ 0xFFFFFFFFu
    with gil:
        out = _crc32c_pkg.crc32c(<bytes>(<const char *>data)[:n])
    return out


cdef uint32_t crc32_ieee(const uint8_t *data, size_t n) noexcept nogil:
    cdef uint32_t crc = 0xFFFFFFFFu
    cdef uint32_t lo, hi
    cdef size_t i = 0
    while n - i >= 8:
        lo = crc ^ (data[i] | (<uint32_t>data[i + 1] << 8)
                    | (<uint32_t>data[i + 2] << 16) | (<uint32_t>data[i + 3] << 24))
        hi = (data[i + 4] | (<uint32_t>data[i + 5] << 8)
              | (<uint32_t>data[i + 6] << 16) | (<uint32_t>data[i + 7] << 24))
        crc = (_crc32_table[7][lo & 0xFF] ^ _crc32_table[6][(lo >> 8) & 0xFF]
               ^ _crc32_table[5][(lo >> 16) & 0xFF] ^ _crc32_table[4][lo >> 24]
               ^ _crc32_table[3][hi & 0xFF] ^ _crc32_table[2][(hi >> 8) & 0xFF]
               ^ _crc32_table[1][(hi >> 16) & 0xFF] ^ _crc32_table[0][hi >> 24])
        i += 8
    while i < n:
        crc = _crc32_table[0][(crc ^ data[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ 0xFFFFFFFFu


cdef void _build_crc32_table() noexcept:
    cdef uint32_t c
    cdef int i, k, t
    for i in range(256):
        c = <uint32_t>i
        for k in range(8):
            c = (c >> 1) ^ 0xEDB88320u if c & 1 else c >> 1
        _crc32_table[0][i] = c
    for i in range(256):
        c = _crc32_table[0][i]
        for t in range(1, 8):
            c = _crc32_table[0][c & 0xFF] ^ (c >> 8)
            _crc32_table[t][i] = c


def _resolve_crc32c():
    """Address of the crc32c package's C routine, or None."""
    names = ["_crc32c_sw_slicing_by_8"]
    if getattr(_crc32c_pkg, "hardware_based", False):
        names = ["_crc32c_hw_adler", "_crc32c_hw_arm64"]
    try:
        lib = ctypes.CDLL(_crc32c_pkg._crc32c.__file__)
    except (OSError, AttributeError):
        return None
    for name in names:
        try:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            continue
    return None


def _install_crc32c():
    global _crc32c_fn
    address = _resolve_crc32c()
    if not address:
        return
    _crc32c_fn = <crc_fn_t><uintptr_t>address
    probe = b"123456789" * 7
    if crc32c_of(probe) != _crc32c_pkg.crc32c(probe):
        _crc32c_fn = NULL


def _install_fold():
    global _fold
    _fold = False
    if not kb_crc32c_fold_available():
        return
    _fold = True
    probe = bytes(range(256)) * 40
    for n in (FOLD_FROM, FOLD_FROM + 1, 777, 4096, 10239):
        for at in (0, 3):
            if crc32c_of(probe[at:at + n]) != _crc32c_pkg.crc32c(probe[at:at + n]):
                _fold = False
                return


def _use_fold(bint on):
    """Tests: turn the folding routine on (where the CPU has it) or off;
    returns whether it was on."""
    global _fold
    was = _fold
    _fold = on and kb_crc32c_fold_available() != 0
    return was


def _fold_available():
    """Tests: whether this CPU (and OS) can run the folding routine."""
    return kb_crc32c_fold_available() != 0


def crc32c_implementation():
    """Which CRC-32C routines the decoders use: ``"vpclmulqdq fold + <package
    routine>"``, ``"crc32c package (native)"`` or ``"crc32c package (Python,
    under the GIL)"``."""
    base = ("crc32c package (native)" if _crc32c_fn != NULL
            else "crc32c package (Python, under the GIL)")
    return "vpclmulqdq fold + " + base if _fold else base


def native_crc32c():
    """True when CRC-32C runs without the GIL (the package's C routine)."""
    return _crc32c_fn != NULL


def crc32c_of(const uint8_t[::1] data):
    """CRC-32C of a bytes-like object through the decoders' path."""
    if data.shape[0] == 0:
        return 0
    return crc32c(&data[0], <size_t>data.shape[0])


def crc32_of(const uint8_t[::1] data):
    """CRC-32 (IEEE) of a bytes-like object through the legacy decoder's path."""
    if data.shape[0] == 0:
        return 0
    return crc32_ieee(&data[0], <size_t>data.shape[0])


_build_crc32_table()
_install_crc32c()
_install_fold()
