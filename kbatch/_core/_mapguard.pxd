# cython: language_level=3
"""kbatch's one SIGBUS handler, for every compiled module (see _mapguard.pyx)."""

ctypedef int (*kb_guarded_fn)(void *arg) noexcept nogil

cdef enum:
    KB_FAULTED = -1000

cdef int kb_guarded_call(kb_guarded_fn fn, void *arg) noexcept nogil
cdef int kb_guarded_copy(void *dst, const void *src, size_t n) noexcept nogil
