# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Checksums for the decoders (see ``_checksums.pxd``).

CRC-32C comes from the hardware-accelerated ``crc32c`` package. Its Python
function needs the GIL for every call, so at import we look up the C routine
the package itself selected (``_crc32c_hw_adler`` on x86-64 with SSE 4.2,
``_crc32c_hw_arm64`` on ARMv8, its software slicing-by-8 otherwise), check it
against the package's Python function on a known vector, and call it directly
from the decode loop. If the symbol cannot be found (another build of the
package) the decoders fall back to the Python function under the GIL: slower,
never wrong. ``native_crc32c()`` says which path is in use.
"""

import ctypes

import crc32c as _crc32c_pkg

from libc.stdint cimport uint8_t, uint32_t, uintptr_t

ctypedef uint32_t (*crc_fn_t)(uint32_t crc, const uint8_t *data, unsigned long n) noexcept nogil

cdef crc_fn_t _crc32c_fn = NULL
cdef uint32_t _crc32_table[8][256]


cdef uint32_t crc32c(const uint8_t *data, size_t n) noexcept nogil:
    cdef uint32_t out = 0
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
