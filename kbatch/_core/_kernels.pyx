# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Vectorised helpers over finished columns (gathers for take/filter/concat).

    take_binary(offsets, data, indices, out_offsets, out_data)
        out value i = data[offsets[indices[i]] : offsets[indices[i] + 1]]

Indices are checked against the column length before any copy.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

ctypedef fused offset_t:
    int32_t
    int64_t

ctypedef fused out_offset_t:
    int32_t
    int64_t


def take_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                const int64_t[::1] indices, out_offset_t[::1] out_offsets,
                uint8_t[::1] out_data):
    """Gather values; ``out_offsets`` has ``len(indices) + 1`` slots."""
    cdef Py_ssize_t n = offsets.shape[0] - 1
    cdef Py_ssize_t m = indices.shape[0]
    cdef Py_ssize_t i, k, start, length
    cdef int64_t pos = 0
    cdef int64_t cap = out_data.shape[0]
    if out_offsets.shape[0] != m + 1:
        raise ValueError("out_offsets must have len(indices) + 1 slots")
    for i in range(m):
        if indices[i] < 0 or indices[i] >= n:
            raise IndexError(f"index {indices[i]} out of range for {n} values")
    with nogil:
        out_offsets[0] = 0
        for i in range(m):
            k = indices[i]
            start = offsets[k]
            length = offsets[k + 1] - start
            if length < 0 or start < 0 or start + length > data.shape[0] or length > cap - pos:
                break
            if length:
                memcpy(&out_data[pos], &data[start], <size_t>length)
            pos += length
            out_offsets[i + 1] = <out_offset_t>pos
        else:
            i = m
    if i != m:
        raise ValueError("offsets are inconsistent with the data buffer")
    return pos
