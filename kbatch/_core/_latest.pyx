# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The table view of a log (``view="latest"``): for every key, the row of
its record with the highest offset, found by hashing the key bytes.

    key column (what the decoder gave):
      binary   offsets int32|int64[n + 1] | data uint8[...] | validity bitmap
      views    16 bytes per value (Arrow binary views):
               length int32 | value (<= 12 bytes, zero padded)
               length int32 | prefix 4 B | buffer int32 | offset int32
    record offsets  int64[n]   (the row with the larger offset wins a key)
    value validity  LSB-first bitmap (None: no null value); a null value is
                    a tombstone: its key leaves the table

    hash table (open addressing, linear probing, doubled at half full)
      slot (32 B) = entry uint64 | length uint64 | first 16 key bytes,
                    zero padded;  entry = hash >> 32 (tag) << 32 | (row + 1),
                    0 = empty (a key of up to 16 bytes is compared in its
                    slot, one cache line, without reading the row it names)
      home slot   = (tag * 0x9E3779B97F4A7C15) >> (64 - log2(slots)): a
                    function of the tag alone, so doubling the table moves
                    entries without reading a key again

    partitioned pass (more than RADIX_FROM distinct keys)
      hashes       = uint64[n]: each row's key hash (pass 1 writes, pass 2 reads)
      entry (32 B) = hash uint64 | row uint32 | length uint32 | head 16 B
      partition    = hash >> (64 - bits), 2**bits partitions of ~2048 rows

One pass over the rows, in blocks of ``BLOCK``: the block's keys are hashed
first and their slots prefetched, then probed. On threads, the rows are cut
into runs of equal rows, each filling a table of its own, and the tables
are merged in row order (a later run's row wins a key as a later row does;
2 M records of 10 k keys on 2 threads: 16 ms, 26 ms on one). Once a table holds more
than ``RADIX_FROM`` keys (it no longer fits the cache: every probe and
every comparison would be a miss) the pass starts again partitioned: the
rows are hashed (each hash kept), counted and scattered into partitions
by the hash's top bits, in row order, and each partition is resolved with a table of its own
that the cache holds (2 M records of 1 M keys: 146 ms as one table, 62 ms
partitioned). Each of the three passes runs on threads (``_threads``): the
hash and scatter passes in runs of equal rows (each run counts its rows per
partition, then writes from its own cursors, so rows stay in row order
within a partition), the resolve pass in runs of partitions. Rows with a
null key are counted and left out (a compacted topic refuses them and
Kafka's cleaner drops them). Every key's bytes are checked to lie inside
their buffer before they are read; nothing is allocated from a count
larger than the rows given. The GIL is released for the whole pass.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np
cimport numpy as cnp

from kbatch._core._columns import pooled_empty

cnp.import_array()

cdef extern from "_keyhash.h":
    uint64_t kb_hash(const uint8_t *p, int64_t length) noexcept nogil
    bint kb_eq(const uint8_t *a, const uint8_t *b, int64_t n) noexcept nogil
    void KB_PREFETCH(const void *p) noexcept nogil
    bint KB_LITTLE_ENDIAN

from kbatch._core._binview cimport view_bytes
from kbatch._core._threads cimport MAX_RUN_THREADS, on_threads, run_count


cdef enum:
    BLOCK = 32
    MODE_OFF32 = 0
    MODE_OFF64 = 1
    MODE_VIEWS = 2
    KEY_OK = 0
    KEY_NULL = 1
    KEY_BAD = -1
    INITIAL_BITS = 10
    INITIAL_SLOTS = 1 << INITIAL_BITS
    CACHED_SLOTS = 1 << 16      # 512 KiB of slots: about what L2 holds
    RADIX_FROM = 1 << 15        # distinct keys from which the partitioned pass runs
    INLINE = 16                 # key bytes an entry of the partitioned pass holds
    PART_ROWS = 2048            # rows per partition aimed at (its table stays in L1/L2)
    MAX_PART_BITS = 9           # 512 partitions at most (write streams of the scatter)
    ENTRIES_ROLE = 97           # the memory pool's role of the partitioned pass's entries
    HASHES_ROLE = 96            # and of its row hashes
    SPREAD_ROWS = 1 << 16       # rows per thread of the hash and scatter passes, at least


cdef struct Keys:
    int mode
    const int32_t *off32
    const int64_t *off64
    const uint8_t *data
    int64_t data_len
    const uint8_t *views
    const uint8_t **bufs
    const int64_t *buf_len
    int32_t nbuf
    const uint8_t *validity      # NULL: no null key


cdef struct Table:
    Slot *slots
    uint64_t mask
    int shift                    # 64 - log2(mask + 1)
    int64_t used


cdef struct Head:                # 24 bytes
    uint64_t length
    uint8_t head[INLINE]         # the key's first bytes, zero padded


cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void **memptr, size_t alignment, size_t size)


cdef Slot *_slots(uint64_t n) noexcept nogil:
    """``n`` empty slots, cache-line aligned (a slot never straddles two
    lines), or NULL."""
    cdef void *p = NULL
    if posix_memalign(&p, 64, n * sizeof(Slot)) != 0:
        return NULL
    memset(p, 0, n * sizeof(Slot))
    return <Slot *>p


cdef struct Slot:                # 32 bytes: two to a cache line
    uint64_t entry               # tag << 32 | (row + 1); 0 = empty
    Head key


cdef struct Entry:               # a row of the partitioned pass (32 bytes)
    uint64_t hash
    uint32_t row
    uint32_t length
    uint8_t head[INLINE]         # the key's first bytes, zero padded


cdef inline uint64_t _home(const Table *t, uint64_t tag) noexcept nogil:
    """The slot a tag's probe starts at (Fibonacci hashing of the tag)."""
    return (tag * <uint64_t>0x9E3779B97F4A7C15u) >> t.shift


cdef inline bint _bit(const uint8_t *bits, int64_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


cdef inline int _key_room(const Keys *k, int64_t i, const uint8_t **p, int64_t *n,
                          int64_t *room) noexcept nogil:
    """Key ``i``'s bytes, checked to lie inside their buffer, and how many
    bytes of the buffer lie from its start on (``room``)."""
    cdef int64_t start, stop
    if k.validity != NULL and not _bit(k.validity, i):
        return KEY_NULL
    if k.mode == MODE_VIEWS:
        return KEY_OK if view_bytes(k.views + i * 16, k.bufs, k.buf_len, k.nbuf, p, n,
                                    room) else KEY_BAD
    if k.mode == MODE_OFF32:
        start = k.off32[i]
        stop = k.off32[i + 1]
    else:
        start = k.off64[i]
        stop = k.off64[i + 1]
    if start < 0 or stop < start or stop > k.data_len:
        return KEY_BAD
    p[0] = k.data + start
    n[0] = stop - start
    room[0] = k.data_len - start
    return KEY_OK


cdef inline int _key(const Keys *k, int64_t i, const uint8_t **p, int64_t *n) noexcept nogil:
    """Key ``i``'s bytes, checked to lie inside their buffer."""
    cdef int64_t room
    return _key_room(k, i, p, n, &room)


cdef int _grow(Table *t) noexcept nogil:
    """Double the table, every entry placed again from its tag (no key
    is read: its head moves with it)."""
    cdef uint64_t cap = (t.mask + 1) * 2
    cdef Slot *fresh = _slots(cap)
    cdef uint64_t i, e, j
    if fresh == NULL:
        return -1
    t.shift -= 1
    for i in range(t.mask + 1):
        e = t.slots[i].entry
        if e == 0:
            continue
        j = _home(t, e >> 32)
        while fresh[j].entry != 0:
            j = (j + 1) & (cap - 1)
        fresh[j] = t.slots[i]
    free(t.slots)
    t.slots = fresh
    t.mask = cap - 1
    return 0


cdef inline uint64_t _first_bytes(uint64_t word, int64_t n) noexcept nogil:
    """The first ``n`` bytes of a little-endian word, the rest zero."""
    if n >= 8:
        return word
    if n <= 0:
        return 0
    return word & ((<uint64_t>1 << (8 * n)) - 1)


cdef inline void _head_bytes(uint8_t *head, const uint8_t *p, int64_t n,
                             int64_t room) noexcept nogil:
    """``head`` (INLINE bytes): the first bytes of a key of ``n`` bytes at
    ``p``, zero padded; ``room`` bytes are readable from ``p``. With INLINE
    of them, two word loads masked to the key's bytes (the bytes past the
    key are read, never kept), else a copy."""
    cdef uint64_t w[2]
    if KB_LITTLE_ENDIAN and room >= INLINE:
        memcpy(w, p, INLINE)
        w[0] = _first_bytes(w[0], n)
        w[1] = _first_bytes(w[1], n - 8)
        memcpy(head, w, INLINE)
        return
    memset(head, 0, INLINE)
    if n > 0:                    # an empty key may have no bytes to point at
        memcpy(head, p, <size_t>(n if n < INLINE else INLINE))


cdef inline void _head_of(Head *h, const uint8_t *p, int64_t n, int64_t room) noexcept nogil:
    h.length = <uint64_t>n
    _head_bytes(h.head, p, n, room)


cdef inline bint _heads_equal(const Head *a, const Head *b) noexcept nogil:
    return (a.length == b.length and memcmp(a.head, b.head, INLINE) == 0)


cdef inline int _upsert(const Keys *k, Table *t, uint64_t tag, const Head *head, int64_t row,
                 const uint8_t *p, int64_t length, const int64_t *offsets,
                 bint ordered) noexcept nogil:
    """``row`` (its key: ``tag``, ``head``, ``p``/``length``) into ``t``:
    a new key is added, a key already there keeps the later row (``ordered``:
    ``row`` is the later one; else the larger offset, ``row`` on a tie).
    Returns 0, 1 when a key was added, or -1 when memory runs out."""
    cdef uint64_t idx = _home(t, tag), e
    cdef int64_t other_n = -1, old
    cdef const uint8_t *other = NULL
    while True:
        e = t.slots[idx].entry
        if e == 0:
            t.slots[idx].entry = (tag << 32) | <uint64_t>(row + 1)
            t.slots[idx].key = head[0]
            t.used += 1
            if t.used * 2 > <int64_t>(t.mask + 1):
                if _grow(t) != 0:
                    return -1
            return 1
        if (e >> 32) == tag and _heads_equal(&t.slots[idx].key, head):
            old = <int64_t>(e & 0xFFFFFFFFu) - 1
            if length > INLINE:
                _key(k, old, &other, &other_n)
            if length <= INLINE or kb_eq(other, p, other_n):
                if ordered or offsets[row] >= offsets[old]:
                    t.slots[idx].entry = (tag << 32) | <uint64_t>(row + 1)
                return 0
        idx = (idx + 1) & t.mask


cdef int64_t _latest(const Keys *k, const int64_t *offsets, bint ordered, int64_t lo,
                     int64_t hi, int64_t n, Table *t, int64_t *nulls) noexcept nogil:
    """Fill ``t`` with the latest row of each key of rows ``[lo, hi)`` of
    ``n`` (``ordered``: offsets increase with the rows, so a later row
    always wins). Returns 0, the row of a key outside its buffer + 1 as a
    negative number, ``-(n + 2)`` when memory runs out, or ``-(n + 3)``
    once more than ``RADIX_FROM`` keys were seen: the table no longer fits
    the cache, and ``_partitioned`` does the whole pass instead."""
    cdef uint64_t hashes[BLOCK]
    cdef Head heads[BLOCK]
    cdef const uint8_t *ptrs[BLOCK]
    cdef int64_t lens[BLOCK]
    cdef int64_t room
    cdef int status[BLOCK]
    cdef int64_t base, m, j
    cdef int added
    base = lo
    while base < hi:
        m = hi - base if hi - base < BLOCK else BLOCK
        # 1: hash the block's keys, prefetch their slots
        for j in range(m):
            status[j] = _key_room(k, base + j, &ptrs[j], &lens[j], &room)
            if status[j] == KEY_OK:
                hashes[j] = kb_hash(ptrs[j], lens[j])
                _head_of(&heads[j], ptrs[j], lens[j], room)
                KB_PREFETCH(&t.slots[_home(t, hashes[j] >> 32)])
            elif status[j] == KEY_BAD:
                return -(base + j + 1)
        # 2: probe and insert
        for j in range(m):
            if status[j] == KEY_NULL:
                nulls[0] += 1
                continue
            added = _upsert(k, t, hashes[j] >> 32, &heads[j], base + j, ptrs[j], lens[j],
                            offsets, ordered)
            if added < 0:
                return -(n + 2)
            if added and t.used > RADIX_FROM:
                return -(n + 3)      # many keys: the partitioned pass is faster
        base += m
    return 0


cdef struct Scan:                # one run of rows of the cached pass (few keys)
    const Keys *k
    const int64_t *offsets
    bint ordered
    int64_t lo, hi, n            # rows [lo, hi) of n
    Table t
    int64_t nulls
    int64_t status               # as ``_latest`` returns


cdef void *_scan(void *arg) noexcept nogil:
    cdef Scan *r = <Scan *>arg
    r.status = _latest(r.k, r.offsets, r.ordered, r.lo, r.hi, r.n, &r.t, &r.nulls)
    return NULL


cdef int _merge(const Keys *k, Table *into, const Table *t, const int64_t *offsets,
                bint ordered) noexcept nogil:
    """The keys of ``t`` (a later run of rows) into ``into``, the later row
    winning as in ``_upsert``. Returns 0, or -1 when memory runs out."""
    cdef uint64_t s, e
    cdef int64_t row, length = 0
    cdef const uint8_t *p = NULL
    for s in range(t.mask + 1):
        e = t.slots[s].entry
        if e == 0:
            continue
        row = <int64_t>(e & 0xFFFFFFFFu) - 1
        length = <int64_t>t.slots[s].key.length
        if length > INLINE:
            _key(k, row, &p, &length)
        if _upsert(k, into, e >> 32, &t.slots[s].key, row, p, length, offsets, ordered) < 0:
            return -1
    return 0


cdef int _new_table(Table *t) noexcept nogil:
    """An empty table of ``INITIAL_SLOTS`` (0, or -1: out of memory; free
    its two arrays either way)."""
    t.slots = _slots(INITIAL_SLOTS)
    t.mask = INITIAL_SLOTS - 1
    t.shift = 64 - INITIAL_BITS
    t.used = 0
    return 0 if t.slots != NULL else -1


cdef int64_t _cached(const Keys *k, const int64_t *offsets, bint ordered, int64_t n,
                     Table *t, int64_t *nulls, int threads) noexcept nogil:
    """The pass with one table in the cache (few keys), its rows cut into
    runs of equal rows on ``threads`` threads, each with a table of its
    own, merged in row order into ``t`` (the first run's). Returns as
    ``_latest`` does: 0, the first bad row, out of memory, or too many keys."""
    cdef Scan runs[MAX_RUN_THREADS]
    cdef int nt = run_count(threads, n, SPREAD_ROWS), r
    cdef int64_t status = 0
    for r in range(nt):
        runs[r].k = k
        runs[r].offsets = offsets
        runs[r].ordered = ordered
        runs[r].lo = n * r // nt
        runs[r].hi = n * (r + 1) // nt
        runs[r].n = n
        runs[r].nulls = 0
        runs[r].status = 0
        if r == 0:
            runs[r].t = t[0]
        elif _new_table(&runs[r].t) != 0:
            status = -(n + 2)
    if status == 0:
        on_threads(runs, sizeof(Scan), nt, _scan)
    for r in range(nt):          # the first failure in row order decides
        if status == 0 and runs[r].status != 0:
            status = runs[r].status
        nulls[0] += runs[r].nulls
    t[0] = runs[0].t             # the first run's table, grown
    for r in range(1, nt):
        if status == 0 and _merge(k, t, &runs[r].t, offsets, ordered) != 0:
            status = -(n + 2)
        free(runs[r].t.slots)
    return status


cdef inline int _part(uint64_t h, int bits) noexcept nogil:
    return <int>(h >> (64 - bits)) if bits else 0


cdef bint _same_key(const Keys *k, const Entry *a, const Entry *b) noexcept nogil:
    """Entries of equal hash: the same key bytes (the head, then the rest)."""
    cdef const uint8_t *pa = NULL
    cdef const uint8_t *pb = NULL
    cdef int64_t na = 0, nb = 0
    if a.length != b.length or memcmp(a.head, b.head, INLINE) != 0:
        return False
    if a.length <= INLINE:
        return True
    _key(k, a.row, &pa, &na)
    _key(k, b.row, &pb, &nb)
    return kb_eq(pa, pb, na)


cdef struct Spread:              # one run of rows of the hash and scatter passes
    const Keys *k
    int64_t lo, hi               # rows [lo, hi)
    int bits
    int64_t *counts              # per partition: the run's rows, then its cursor
    int64_t nulls
    int64_t bad                  # -1, or the run's first row whose key is bad
    uint64_t *hashes             # per row: its key's hash (pass 1 writes, pass 2 reads)
    Entry *entries


cdef void *_count(void *arg) noexcept nogil:
    """Pass 1 of a run: every key checked and hashed (the hash kept for
    pass 2), its partition counted."""
    cdef Spread *r = <Spread *>arg
    cdef const uint8_t *p
    cdef int64_t i, length
    cdef uint64_t h
    cdef int st
    for i in range(r.lo, r.hi):
        st = _key(r.k, i, &p, &length)
        if st == KEY_BAD:
            r.bad = i
            return NULL
        if st == KEY_NULL:
            r.nulls += 1
            continue
        h = kb_hash(p, length)
        r.hashes[i] = h
        r.counts[_part(h, r.bits)] += 1
    return NULL


cdef void *_spread(void *arg) noexcept nogil:
    """Pass 2 of a run: each row's entry written at its partition's cursor."""
    cdef Spread *r = <Spread *>arg
    cdef const uint8_t *p
    cdef int64_t i, length, room
    cdef uint64_t h
    cdef int part
    cdef Entry *e
    for i in range(r.lo, r.hi):
        if _key_room(r.k, i, &p, &length, &room) != KEY_OK:
            continue
        h = r.hashes[i]
        part = _part(h, r.bits)
        e = &r.entries[r.counts[part]]
        r.counts[part] += 1
        e.hash = h
        e.row = <uint32_t>i
        e.length = <uint32_t>length
        _head_bytes(e.head, p, length, room)
    return NULL


cdef int64_t _partitioned(const Keys *k, const int64_t *offsets, bint ordered, int64_t n,
                          const uint8_t *vvalid, uint64_t *hashes, Entry *entries,
                          uint8_t *keep,
                          int64_t *nulls, int64_t *keys, int64_t *tombs,
                          int threads) noexcept nogil:
    """The latest row of every key, for many distinct keys: the rows are
    hashed, scattered into ``2**bits`` partitions by the hash's top bits
    (``entries``: room for ``n``, 32 bytes each, holding the hash, the row
    and the key's first 16 bytes), and each partition is resolved with a
    table of its own that stays in the cache; a key's bytes past its first
    16 are read again only to compare two keys of equal hash and length.
    ``keep[row] = 1`` for every key's latest row unless it is a tombstone.
    Returns as ``_latest`` does (0, a bad row, or out of memory)."""
    cdef int bits = 0, part, t, nt
    cdef int64_t nparts, c, most = 0, at
    cdef int64_t *start = NULL
    cdef int64_t *counts = NULL
    cdef Spread runs[MAX_RUN_THREADS]
    while bits < MAX_PART_BITS and (n >> bits) > PART_ROWS:
        bits += 1
    nparts = 1 << bits
    nt = run_count(threads, n, SPREAD_ROWS)
    start = <int64_t *>calloc(nparts + 1, sizeof(int64_t))
    counts = <int64_t *>calloc(nt * nparts, sizeof(int64_t))
    if start == NULL or counts == NULL:
        free(start)
        free(counts)
        return -(n + 2)
    for t in range(nt):          # runs of equal rows, in row order
        runs[t].k = k
        runs[t].lo = n * t // nt
        runs[t].hi = n * (t + 1) // nt
        runs[t].bits = bits
        runs[t].counts = counts + t * nparts
        runs[t].nulls = 0
        runs[t].bad = -1
        runs[t].entries = entries
        runs[t].hashes = hashes
    # 1: every key checked and hashed, partitions counted per run
    on_threads(runs, sizeof(Spread), nt, _count)
    nulls[0] = 0
    for t in range(nt):
        if runs[t].bad >= 0:     # the first bad row: runs are in row order
            free(start)
            free(counts)
            return -(runs[t].bad + 1)
        nulls[0] += runs[t].nulls
    # each run's cursor in each partition: after the partition's rows of the
    # runs before it (rows stay in row order within a partition)
    at = 0
    for part in range(nparts):
        start[part] = at
        c = 0
        for t in range(nt):
            c += counts[t * nparts + part]
            counts[t * nparts + part] = at + c - counts[t * nparts + part]
        at += c
        if c > most:
            most = c
    start[nparts] = at
    # 2: scattered, each run from its cursors
    on_threads(runs, sizeof(Spread), nt, _spread)
    free(counts)
    # 3: each partition's keys, a table in the cache; partitions on threads
    if _resolve_partitions(k, offsets, ordered, vvalid, entries, start, nparts, most,
                           keep, keys, tombs, threads) != 0:
        free(start)
        return -(n + 2)
    free(start)
    return 0


cdef struct Resolve:             # one thread's share of the partitions
    const Keys *k
    const int64_t *offsets
    bint ordered
    const uint8_t *vvalid
    const Entry *entries
    const int64_t *start
    int lo, hi                   # partitions [lo, hi)
    int64_t most                 # rows of its largest partition
    uint8_t *keep
    int64_t keys, tombs
    int status                   # 0, or -1: out of memory


cdef inline void _won(Resolve *r, int64_t row) noexcept nogil:
    """A key's latest row: counted, and kept unless its value is a tombstone."""
    r.keys += 1
    if r.vvalid != NULL and not _bit(r.vvalid, row):
        r.tombs += 1
    else:
        r.keep[row] = 1              # rows of different keys: distinct bytes


cdef inline uint32_t *_probe(const Resolve *r, int64_t base, uint32_t *slots,
                             uint32_t mask, const Entry *e) noexcept nogil:
    """The slot of a partition's table that holds ``e``'s key (the entry
    number + 1 of an earlier sighting), or the empty slot where it goes."""
    cdef uint32_t idx = <uint32_t>e.hash & mask
    cdef const Entry *o
    while slots[idx] != 0:
        o = &r.entries[base + slots[idx] - 1]
        if o.hash == e.hash and _same_key(r.k, o, e):
            break
        idx = (idx + 1) & mask
    return &slots[idx]


cdef void _resolve_ordered(Resolve *r, int64_t base, int64_t c, uint32_t *slots,
                           uint32_t mask) noexcept nogil:
    """One partition whose offsets grow with the rows: its entries (in row
    order) walked from the last, so a key's first sighting is its latest
    row, decided at once (a later sighting is an older row); no pass over
    the table afterwards."""
    cdef int64_t j = c - 1
    cdef uint32_t *slot
    while j >= 0:
        slot = _probe(r, base, slots, mask, &r.entries[base + j])
        if slot[0] == 0:
            slot[0] = <uint32_t>(j + 1)
            _won(r, r.entries[base + j].row)
        j -= 1


cdef void *_resolve(void *arg) noexcept nogil:
    """``Resolve``'s partitions: the latest row of each key marked in ``keep``."""
    cdef Resolve *r = <Resolve *>arg
    cdef int part
    cdef int64_t base, c, j
    cdef uint32_t mask, idx, slot, cap = 16
    cdef uint32_t *slots
    cdef uint32_t *at
    cdef const Entry *e
    while cap < 2 * r.most:
        cap <<= 1
    slots = <uint32_t *>malloc(cap * sizeof(uint32_t))
    if slots == NULL:
        r.status = -1
        return NULL
    for part in range(r.lo, r.hi):
        base = r.start[part]
        c = r.start[part + 1] - base
        if c == 0:
            continue
        mask = 15
        while mask + 1 < 2 * c:
            mask = (mask << 1) | 1
        memset(slots, 0, (mask + 1) * sizeof(uint32_t))
        if r.ordered:
            _resolve_ordered(r, base, c, slots, mask)
            continue
        for j in range(c):           # offsets in any order: the larger one wins
            e = &r.entries[base + j]
            at = _probe(r, base, slots, mask, e)
            if at[0] == 0 or r.offsets[e.row] >= r.offsets[r.entries[base + at[0] - 1].row]:
                at[0] = <uint32_t>(j + 1)
        for idx in range(mask + 1):
            slot = slots[idx]
            if slot == 0:
                continue
            _won(r, r.entries[base + slot - 1].row)
    free(slots)
    r.status = 0
    return NULL


cdef int64_t _resolve_partitions(const Keys *k, const int64_t *offsets, bint ordered,
                                 const uint8_t *vvalid, const Entry *entries,
                                 const int64_t *start, int64_t nparts, int64_t most,
                                 uint8_t *keep, int64_t *keys, int64_t *tombs,
                                 int threads) noexcept nogil:
    """The partitions cut into ``threads`` runs of about equal rows, each
    resolved on a thread of its own (the last on this one; a thread that
    cannot be started runs here too). Returns 0 or out of memory."""
    cdef Resolve runs[MAX_RUN_THREADS]
    cdef int t, nt, part = 0
    cdef int64_t total = start[nparts], goal, status = 0
    nt = run_count(threads, nparts, 1)
    for t in range(nt):
        runs[t].k = k
        runs[t].offsets = offsets
        runs[t].ordered = ordered
        runs[t].vvalid = vvalid
        runs[t].entries = entries
        runs[t].start = start
        runs[t].most = most
        runs[t].keep = keep
        runs[t].keys = 0
        runs[t].tombs = 0
        runs[t].status = 0
        runs[t].lo = part
        goal = total * (t + 1) // nt     # rows up to the end of this run
        while part < nparts and (start[part + 1] <= goal or t == nt - 1):
            part += 1
        runs[t].hi = part
    on_threads(runs, sizeof(Resolve), nt, _resolve)
    for t in range(nt):
        keys[0] += runs[t].keys
        tombs[0] += runs[t].tombs
        if runs[t].status != 0:
            status = -1
    return status


cdef inline void memset_keys(Keys *k) noexcept:
    k.mode = MODE_OFF32
    k.off32 = NULL
    k.off64 = NULL
    k.data = NULL
    k.data_len = 0
    k.views = NULL
    k.bufs = NULL
    k.buf_len = NULL
    k.nbuf = 0
    k.validity = NULL


def latest_rows(object key_offsets, object key_data, object key_validity,
                object key_views, list key_buffers, const int64_t[::1] offsets,
                object value_validity, int threads=1):
    """``(rows, keys, tombstones, null_keys)``: the rows (int64, ascending)
    holding the latest record of each key whose latest value is not null;
    how many distinct keys there were, how many of them end in a tombstone,
    and how many rows had a null key (left out).

    The key column is either ``key_offsets``/``key_data`` (binary layout)
    or ``key_views``/``key_buffers`` (binary views); ``key_validity`` and
    ``value_validity`` are LSB-first bitmaps or None (no nulls). A key
    outside its buffer raises ValueError. ``threads``: how many threads
    resolve the partitions of the partitioned pass (many keys)."""
    if threads < 1:
        raise ValueError("threads must be at least 1")
    cdef int64_t n = offsets.shape[0], i, status, nulls = 0, keys = 0, tombs = 0, kept = 0
    cdef Keys k
    cdef Table t
    cdef const int32_t[::1] o32
    cdef const int64_t[::1] o64
    cdef const uint8_t[::1] data, views, kbits, vbits
    cdef const uint8_t *vvalid = NULL
    cdef uint8_t *keep = NULL
    cdef uint64_t s, e
    cdef int64_t *out_ptr
    cdef const uint8_t[::1] mv
    cdef bint ordered = True, partitioned = False
    cdef uint8_t[::1] entries
    cdef uint8_t[::1] hashes
    held = []
    if n >= 0xFFFFFFFF:
        raise ValueError(f"{n} rows: the table view takes at most 2**32 - 2 rows at once")
    memset_keys(&k)
    if key_validity is not None:
        kbits = key_validity
        if kbits.shape[0] * 8 < n:
            raise ValueError("key validity bitmap too short")
        if n:
            k.validity = &kbits[0]
    if value_validity is not None:
        vbits = value_validity
        if vbits.shape[0] * 8 < n:
            raise ValueError("value validity bitmap too short")
        if n:
            vvalid = &vbits[0]
    if key_views is not None:
        views = key_views
        if views.shape[0] != n * 16:
            raise ValueError("key views must hold 16 bytes per row")
        k.mode = MODE_VIEWS
        k.views = &views[0] if n else NULL
        k.nbuf = <int32_t>len(key_buffers)
        k.bufs = <const uint8_t **>malloc(sizeof(void *) * (k.nbuf + 1))
        k.buf_len = <const int64_t *>malloc(sizeof(int64_t) * (k.nbuf + 1))
        if k.bufs == NULL or k.buf_len == NULL:
            free(<void *>k.bufs)
            free(<void *>k.buf_len)
            raise MemoryError()
        for i in range(k.nbuf):
            mv = memoryview(key_buffers[i]).cast("B")
            held.append(mv)
            (<int64_t *>k.buf_len)[i] = mv.shape[0]
            k.bufs[i] = &mv[0] if mv.shape[0] else NULL
    else:
        data = key_data
        k.data = &data[0] if data.shape[0] else NULL
        k.data_len = data.shape[0]
        if key_offsets.dtype == np.int32:
            o32 = key_offsets
            if o32.shape[0] != n + 1:
                raise ValueError("key offsets must have one entry per row and one more")
            k.mode = MODE_OFF32
            k.off32 = &o32[0]
        else:
            o64 = key_offsets
            if o64.shape[0] != n + 1:
                raise ValueError("key offsets must have one entry per row and one more")
            k.mode = MODE_OFF64
            k.off64 = &o64[0]
    with nogil:
        for i in range(1, n):
            if offsets[i] <= offsets[i - 1]:
                ordered = False
                break
    if _new_table(&t) != 0:
        free(t.slots)
        free(<void *>k.bufs)
        free(<void *>k.buf_len)
        raise MemoryError()
    try:
        keep = <uint8_t *>calloc(n + 1, 1)
        if keep == NULL:
            raise MemoryError()
        with nogil:
            status = _cached(&k, &offsets[0] if n else NULL, ordered, n, &t, &nulls, threads)
        if status == -(n + 3):
            partitioned = True
            # entries from kbatch's memory pool: pages an earlier view used
            pooled = pooled_empty(n * sizeof(Entry), ENTRIES_ROLE)
            entries = memoryview(pooled)
            pooled_hashes = pooled_empty(n * sizeof(uint64_t), HASHES_ROLE)
            hashes = memoryview(pooled_hashes)
            with nogil:
                status = _partitioned(&k, &offsets[0] if n else NULL, ordered, n, vvalid,
                                      <uint64_t *>&hashes[0], <Entry *>&entries[0], keep,
                                      &nulls, &keys, &tombs, threads)
        with nogil:
            if status == 0 and not partitioned:
                for s in range(t.mask + 1):
                    e = t.slots[s].entry
                    if e == 0:
                        continue
                    keys += 1
                    i = <int64_t>(e & 0xFFFFFFFFu) - 1
                    if vvalid != NULL and not _bit(vvalid, i):
                        tombs += 1
                    else:
                        keep[i] = 1
        if status == -(n + 2):
            raise MemoryError()
        if status < 0:
            raise ValueError(f"key of row {-status - 1} lies outside its data buffer")
        kept = keys - tombs
        # one slot more: each row is written, the count moves only when kept
        # (no branch to mispredict); the last write may land in that slot
        rows = np.empty(kept + 1, dtype=np.int64)
        out_ptr = <int64_t *>cnp.PyArray_DATA(rows)
        with nogil:
            kept = 0
            for i in range(n):
                out_ptr[kept] = i
                kept += keep[i]
        return rows[:kept], keys, tombs, nulls
    finally:
        free(t.slots)
        free(keep)
        free(<void *>k.bufs)
        free(<void *>k.buf_len)

