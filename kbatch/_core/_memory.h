/* Allocation for kbatch's column buffers.
 *
 * Small buffers come from malloc. From KB_BIG bytes on, a buffer is its own
 * anonymous mapping, 2 MiB aligned and marked MADV_HUGEPAGE before it is
 * touched, and grows with mremap (pages move, bytes are not copied). Fresh
 * 4 KiB pages cost a fault and a zeroing each; huge pages cut that cost
 * several times for the hundreds of MB one segment decodes into.
 *
 * Released mappings go to a small pool (at most kb_pool_limit bytes, 1 GiB by
 * default, 0 disables it, and KB_POOL_SLOTS blocks; a block no decode takes
 * any more leaves first, then a larger block evicts smaller ones) instead
 * of back to the kernel, remembered with the
 * column ("role") they served, so the next decode of similar data writes into
 * pages that are already mapped instead of paying the kernel to zero new
 * ones. A buffer takes the smallest pooled block of its role that fits, so
 * blocks keep their sizes from one decode to the next (see kb_pool_take and
 * kb_trim). Joins of decoded pieces take their outputs from it too
 * (kbatch.lib.gather, roles from 100 on). kbatch.set_memory_pool() changes
 * the limit; 0 empties the pool.
 */
#ifndef KBATCH_MEMORY_H
#define KBATCH_MEMORY_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>

/* Counters since the process started (relaxed atomics): bytes of fresh
 * mappings (new ones and mremap extensions: pages the kernel zeroes when
 * first touched), blocks taken from the pool, bytes given back to the kernel
 * (released, evicted or trimmed). kbatch._core._columns.memory_stats(). */
static size_t kb_stat_fresh = 0, kb_stat_reused = 0, kb_stat_unmapped = 0;
#define KB_COUNT(counter, n) __atomic_fetch_add(&(counter), (size_t)(n), __ATOMIC_RELAXED)

#define KB_BIG ((size_t)1 << 20)
#define KB_HUGE ((size_t)2 << 20)

static inline size_t kb_round_huge(size_t n) {
    return (n + KB_HUGE - 1) & ~(KB_HUGE - 1);
}

/* A 2 MiB aligned anonymous mapping of n bytes (n a multiple of 2 MiB). */
static void *kb_map(size_t n) {
    size_t span = n + KB_HUGE;
    char *raw = (char *)mmap(NULL, span, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    KB_COUNT(kb_stat_fresh, n);
    uintptr_t start = ((uintptr_t)raw + KB_HUGE - 1) & ~(uintptr_t)(KB_HUGE - 1);
    size_t head = start - (uintptr_t)raw;
    if (head) munmap(raw, head);
    size_t tail = span - head - n;
    if (tail) munmap((char *)start + n, tail);
#ifdef MADV_HUGEPAGE
    madvise((void *)start, n, MADV_HUGEPAGE);
#endif
    return (void *)start;
}

/* enough for the columns of a wave of a log directory's segments (about
 * eight mappings per segment) besides the joins they go into */
#define KB_POOL_SLOTS 256
/* ``since``: the number of takes (kb_pool_takes) when the block came back */
typedef struct { void *p; size_t cap; int role; uint64_t since; } kb_block;
static kb_block kb_pool[KB_POOL_SLOTS];
static int kb_pool_n = 0;
static uint64_t kb_pool_takes = 0;      /* calls of kb_pool_take, found or not */
static size_t kb_pool_bytes = 0;
static size_t kb_pool_limit = (size_t)1 << 30;
static pthread_mutex_t kb_pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* A pooled mapping for ``role`` of at least need bytes (a multiple of 2 MiB):
 * the smallest one of the same role that fits; else the smallest of another
 * role that fits nearly exactly (at most need + need / 4 + 2 MiB: a column
 * must not take, and then cut down, a larger column's block, which that
 * column would then map afresh); else the largest one of the same role,
 * grown with mremap (its pages are reused, only the extension is new).
 * NULL when none will do. */
static void *kb_pool_take(size_t need, int role, size_t *cap) {
    int fit = -1, other = -1, grow = -1;
    pthread_mutex_lock(&kb_pool_lock);
    kb_pool_takes++;
    for (int i = 0; i < kb_pool_n; i++) {
        size_t c = kb_pool[i].cap;
        if (kb_pool[i].role == role) {
            if (c >= need) {
                if (fit < 0 || c < kb_pool[fit].cap) fit = i;
            } else if (grow < 0 || c > kb_pool[grow].cap) {
                grow = i;
            }
        } else if (c >= need && c <= need + need / 4 + KB_HUGE
                   && (other < 0 || c < kb_pool[other].cap)) {
            other = i;
        }
    }
    int pick = fit >= 0 ? fit : other >= 0 ? other : grow;
    kb_block block = {NULL, 0, 0, 0};
    if (pick >= 0) {
        block = kb_pool[pick];
        kb_pool_bytes -= block.cap;
        kb_pool[pick] = kb_pool[--kb_pool_n];
    }
    pthread_mutex_unlock(&kb_pool_lock);
    if (block.p == NULL) return NULL;
    KB_COUNT(kb_stat_reused, 1);
    if (block.cap < need) {
        KB_COUNT(kb_stat_fresh, need - block.cap);
        void *q = mremap(block.p, block.cap, need, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) {
            munmap(block.p, block.cap);
            return NULL;
        }
#ifdef MADV_HUGEPAGE
        madvise(q, need, MADV_HUGEPAGE);
#endif
        block.p = q;
        block.cap = need;
    }
    *cap = block.cap;
    return block.p;
}

/* The block to evict so that one of ``cap`` bytes fits (kb_pool_lock held,
 * the pool not empty), -1 for none.
 *
 * First a stale block: one that more takes than twice the blocks in the
 * pool have passed over since it came back (a read that reuses the pool
 * takes about as many blocks as it holds, so no read of the current kind
 * wants it: the blocks of an earlier kind of read, say a segment decoded
 * in halves on two threads). Without this, larger stale blocks stayed for
 * good and turned the current reads' smaller ones away: every later read of
 * the segment mapped 90 MB afresh.
 *
 * Else the smallest block, if smaller than ``cap``: a larger block saves
 * more zeroing per slot; a pool full of small blocks (a log directory's
 * segment buffers) must not turn away the next large column; and when a
 * read needs more than the pool holds, its large columns stay (evicting the
 * oldest instead would evict what the same read takes next). */
static int kb_pool_victim(size_t cap) {
    int old = 0, small = 0;
    for (int i = 1; i < kb_pool_n; i++) {
        if (kb_pool[i].since < kb_pool[old].since) old = i;
        if (kb_pool[i].cap < kb_pool[small].cap) small = i;
    }
    if (kb_pool_takes - kb_pool[old].since > 2 * (uint64_t)kb_pool_n) return old;
    return kb_pool[small].cap < cap ? small : -1;
}

/* Keep a released mapping in the pool when it fits (slots and bytes),
 * evicting blocks as kb_pool_victim picks them to make room. */
static void kb_release(void *p, size_t cap, int role) {
    if (p == NULL) return;
    if (cap < KB_BIG) {
        free(p);
        return;
    }
    kb_block drop[KB_POOL_SLOTS];
    int n_drop = 0;
    pthread_mutex_lock(&kb_pool_lock);
    if (cap <= kb_pool_limit) {
        while (kb_pool_n > 0 && (kb_pool_n == KB_POOL_SLOTS
                                 || kb_pool_bytes + cap > kb_pool_limit)) {
            int victim = kb_pool_victim(cap);
            if (victim < 0) break;
            drop[n_drop++] = kb_pool[victim];
            kb_pool_bytes -= kb_pool[victim].cap;
            kb_pool[victim] = kb_pool[--kb_pool_n];
        }
    }
    if (kb_pool_n < KB_POOL_SLOTS && kb_pool_bytes + cap <= kb_pool_limit) {
        kb_pool[kb_pool_n].p = p;
        kb_pool[kb_pool_n].cap = cap;
        kb_pool[kb_pool_n].role = role;
        kb_pool[kb_pool_n].since = kb_pool_takes;
        kb_pool_n++;
        kb_pool_bytes += cap;
        p = NULL;
    }
    pthread_mutex_unlock(&kb_pool_lock);
    for (int i = 0; i < n_drop; i++) {
        KB_COUNT(kb_stat_unmapped, drop[i].cap);
        munmap(drop[i].p, drop[i].cap);
    }
    if (p) {
        KB_COUNT(kb_stat_unmapped, cap);
        munmap(p, cap);
    }
}

/* Set the pool limit; mappings beyond it go back to the kernel. */
static size_t kb_pool_set_limit(size_t limit) {
    kb_block drop[KB_POOL_SLOTS];
    int n = 0;
    pthread_mutex_lock(&kb_pool_lock);
    kb_pool_limit = limit;
    while (kb_pool_n > 0 && kb_pool_bytes > limit) {
        drop[n] = kb_pool[--kb_pool_n];
        kb_pool_bytes -= drop[n].cap;
        n++;
    }
    size_t held = kb_pool_bytes;
    pthread_mutex_unlock(&kb_pool_lock);
    for (int i = 0; i < n; i++) {
        KB_COUNT(kb_stat_unmapped, drop[i].cap);
        munmap(drop[i].p, drop[i].cap);
    }
    return held;
}

static size_t kb_pool_held(void) {
    pthread_mutex_lock(&kb_pool_lock);
    size_t held = kb_pool_bytes;
    pthread_mutex_unlock(&kb_pool_lock);
    return held;
}

/* Resize a block of capacity old_cap to at least new_cap; *cap gets the new
 * capacity. The first len bytes are kept. NULL (old block intact) on failure. */
static void *kb_resize(void *p, size_t len, size_t old_cap, size_t new_cap, size_t *cap,
                       int role) {
    if (new_cap < KB_BIG) {
        void *q = (old_cap >= KB_BIG) ? NULL : realloc(p, new_cap ? new_cap : 1);
        if (q == NULL) return NULL;
        *cap = new_cap;
        return q;
    }
    new_cap = kb_round_huge(new_cap);
    /* a mapping grows in place (mremap moves pages, copies no byte); a
     * malloc'd buffer becoming a mapping takes a pooled one if it can */
    void *q = old_cap >= KB_BIG ? NULL : kb_pool_take(new_cap, role, cap);
    if (q != NULL) {
        if (len) memcpy(q, p, len);
        kb_release(p, old_cap, role);
        return q;
    }
    if (old_cap >= KB_BIG) {
        q = mremap(p, old_cap, new_cap, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) return NULL;
        KB_COUNT(kb_stat_fresh, new_cap - old_cap);
#ifdef MADV_HUGEPAGE
        madvise(q, new_cap, MADV_HUGEPAGE);
#endif
        *cap = new_cap;
        return q;
    }
    q = kb_map(new_cap);
    if (q == NULL) return NULL;
    if (len) memcpy(q, p, len);
    free(p);
    *cap = new_cap;
    return q;
}

/* A finished buffer's capacity: the part past len (rounded up to 2 MiB, so
 * no huge page is split) goes back to the kernel only when it is more than
 * a quarter of the block and more than one huge page. Mappings grow by a
 * quarter at a time, so a buffer grown in the walk, or taken from the pool
 * for data of a similar size, stays whole and goes back to the pool as it
 * is, instead of being cut down here and grown again (on fresh pages) by
 * the next decode. A result holds at most a quarter more than its bytes. */
static size_t kb_trim(void *p, size_t len, size_t cap) {
    if (cap < KB_BIG) return cap;
    size_t keep = kb_round_huge(len);
    if (keep < KB_BIG) keep = KB_BIG;   /* stays a mapping: released by munmap */
    if (keep >= cap || cap - keep <= KB_HUGE || (cap - keep) * 4 <= cap) return cap;
    KB_COUNT(kb_stat_unmapped, cap - keep);
    munmap((char *)p + keep, cap - keep);
    return keep;
}

#endif
