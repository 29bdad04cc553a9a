# cython: language_level=3
"""Running one function over an array of work items, one item per thread
(pthreads), for the kernels that cut a pass into runs (``_latest``,
``_take``), and how many runs a pass makes (``run_count``). Nothing here
takes the GIL.

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


cdef inline int run_count(int threads, long long items, long long per_run) noexcept nogil:
    """How many runs a pass of ``items`` cuts into: ``threads`` at most (and
    ``MAX_RUN_THREADS``), each with ``per_run`` items at least, one at least."""
    cdef long long nt = threads if threads < MAX_RUN_THREADS else MAX_RUN_THREADS
    if nt > items // per_run:
        nt = items // per_run
    return <int>nt if nt > 1 else 1


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
