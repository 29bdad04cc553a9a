# cython: language_level=3
"""Running one function over an array of work items, one item per thread
(pthreads), for the kernels that cut a pass into runs (``_latest``,
``_take``). Nothing here takes the GIL.

    runs    an array of ``nt`` structs, ``stride`` bytes apart
    work    void *work(void *run): called once per struct

The last run goes on the calling thread; a run whose thread cannot be
started runs there too, so every run is done once when ``on_threads``
returns.
"""

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    int pthread_create(pthread_t *thread, const void *attr, void *(*start)(void *) noexcept nogil,
                       void *arg)
    int pthread_join(pthread_t thread, void **result)

cdef enum:
    MAX_RUN_THREADS = 64        # runs (threads) of one pass, at most


cdef inline void on_threads(void *runs, size_t stride, int nt,
                            void *(*work)(void *) noexcept nogil) noexcept nogil:
    cdef pthread_t tids[MAX_RUN_THREADS]
    cdef bint started[MAX_RUN_THREADS]
    cdef char *base = <char *>runs
    cdef int t
    if nt > MAX_RUN_THREADS:
        nt = MAX_RUN_THREADS
    if nt < 1:
        return
    for t in range(nt - 1):
        started[t] = pthread_create(&tids[t], NULL, work, base + t * stride) == 0
        if not started[t]:
            work(base + t * stride)
    work(base + (nt - 1) * stride)
    for t in range(nt - 1):
        if started[t]:
            pthread_join(tids[t], NULL)
