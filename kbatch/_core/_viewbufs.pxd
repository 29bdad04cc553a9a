# cython: language_level=3
"""The data buffers that zero_copy binary views point into (one table per chunk).

A view (``_columns.pxd``) names a buffer by its index in this table:

    BufDesc  kind int32 | index int32 | start int64 | stop int64

    BUF_SOURCE  bytes [start, stop) of the decoder's source (the mapped
                segment): plain batches, uncompressed legacy messages.
                A window never spans 2 GiB (view offsets are int32): a
                batch that would make it do opens the next window
    BUF_ARENA   arena ``index``: records the walk decompressed itself, each
                batch appended where the codec wrote it (no copy)
    BUF_FED     fed object ``index``: records Python decompressed (feed())

Arenas: growable buffers (``GrowBuf``, grown by mremap, never copied);
before a batch is decompressed the current one gets room for the largest
batch allowed, so codecs write into it directly; one is closed when that room
would take it past 2 GiB. Everything here is handed over by ``take()`` and
the table starts empty for the next chunk.
"""

from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t

from kbatch._core._columns cimport GrowBuf, RecordColumns, growbuf_free, growbuf_reserve


cdef enum:
    BUF_SOURCE = 0
    BUF_ARENA = 1
    BUF_FED = 2
    ARENA_ROLE = 60


cdef struct BufDesc:
    int32_t kind
    int32_t index
    int64_t start
    int64_t stop


cdef struct ViewBuffers:
    GrowBuf desc          # BufDesc[]
    GrowBuf arenas        # GrowBuf[] (the last one is being filled)
    Py_ssize_t window     # desc index of the open source window, -1: none
    Py_ssize_t arena      # desc index of the arena being filled, -1: none
    Py_ssize_t fed        # fed objects registered


cdef inline void viewbufs_init(ViewBuffers *v) noexcept nogil:
    v.desc.len = 0
    v.arenas.len = 0
    v.window = -1
    v.arena = -1
    v.fed = 0


cdef inline void viewbufs_free(ViewBuffers *v) noexcept nogil:
    cdef GrowBuf *a = <GrowBuf *>v.arenas.data
    cdef Py_ssize_t i
    for i in range(v.arenas.len // <Py_ssize_t>sizeof(GrowBuf)):
        growbuf_free(&a[i])
    growbuf_free(&v.arenas)
    growbuf_free(&v.desc)
    viewbufs_init(v)


cdef inline BufDesc *viewbufs_at(ViewBuffers *v, Py_ssize_t i) noexcept nogil:
    return <BufDesc *>v.desc.data + i


cdef inline Py_ssize_t _viewbufs_add(ViewBuffers *v, int32_t kind, int32_t index,
                                     int64_t start, int64_t stop) noexcept nogil:
    cdef BufDesc *d
    if v.desc.len // <Py_ssize_t>sizeof(BufDesc) >= INT32_MAX:
        return -1
    if growbuf_reserve(&v.desc, sizeof(BufDesc)) != 0:
        return -1
    d = <BufDesc *>(v.desc.data + v.desc.len)
    d.kind = kind
    d.index = index
    d.start = start
    d.stop = stop
    v.desc.len += sizeof(BufDesc)
    return v.desc.len // <Py_ssize_t>sizeof(BufDesc) - 1


cdef inline int viewbufs_use(RecordColumns *c, Py_ssize_t desc,
                             const uint8_t *base) noexcept nogil:
    """The key and value views that follow point into buffer ``desc``, whose
    first byte is ``base``: 0, or -1 when ``desc`` is -1 (out of memory)."""
    if desc < 0:
        return -1
    c.key.view_buffer = c.value.view_buffer = <int32_t>desc
    c.key.view_base = c.value.view_base = base
    return 0


cdef inline Py_ssize_t viewbufs_window(ViewBuffers *v, Py_ssize_t start,
                                       Py_ssize_t stop) noexcept nogil:
    """The source window holding bytes [start, stop) (positions only grow in
    a walk): the open one, stretched, unless it would pass 2 GiB."""
    cdef BufDesc *d
    if v.window >= 0:
        d = viewbufs_at(v, v.window)
        if stop - d.start <= INT32_MAX and start >= d.start:
            if stop > d.stop:
                d.stop = stop
            return v.window
    v.window = _viewbufs_add(v, BUF_SOURCE, 0, start, stop)
    return v.window


cdef inline GrowBuf *viewbufs_arena(ViewBuffers *v, size_t room) noexcept nogil:
    """The arena to decompress a batch into, with ``room`` free bytes at its
    end (``v.arena`` names it), or NULL when out of memory."""
    cdef GrowBuf *a
    cdef Py_ssize_t n = v.arenas.len // <Py_ssize_t>sizeof(GrowBuf)
    if room > <size_t>INT32_MAX:
        return NULL
    if v.arena >= 0:
        a = <GrowBuf *>v.arenas.data + (n - 1)
        if a.len + <Py_ssize_t>room <= INT32_MAX:
            if growbuf_reserve(a, <Py_ssize_t>room) != 0:
                return NULL
            return a
    if growbuf_reserve(&v.arenas, sizeof(GrowBuf)) != 0:
        return NULL
    a = <GrowBuf *>(v.arenas.data + v.arenas.len)
    a.data = NULL
    a.len = 0
    a.cap = 0
    a.zero_fill = False
    a.role = ARENA_ROLE
    v.arenas.len += sizeof(GrowBuf)
    v.arena = _viewbufs_add(v, BUF_ARENA, <int32_t>n, 0, 0)
    if v.arena < 0 or growbuf_reserve(a, <Py_ssize_t>room) != 0:
        return NULL
    return a


cdef inline Py_ssize_t viewbufs_fed(ViewBuffers *v) noexcept nogil:
    """A buffer for the next fed object (the caller keeps the object)."""
    cdef Py_ssize_t d = _viewbufs_add(v, BUF_FED, <int32_t>v.fed, 0, 0)
    if d >= 0:
        v.fed += 1
    return d
