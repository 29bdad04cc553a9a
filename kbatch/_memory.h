/* Allocation for kbatch's column buffers.
 *
 * Small buffers come from malloc. From KB_BIG bytes on, a buffer is its own
 * anonymous mapping, 2 MiB aligned and marked MADV_HUGEPAGE before it is
 * touched, and grows with mremap (pages move, bytes are not copied). Fresh
 * 4 KiB pages cost a fault and a zeroing each; huge pages cut that cost
 * several times for the hundreds of MB one segment decodes into.
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

/* Resize a block of capacity old_cap to at least new_cap; *cap gets the new
 * capacity. The first len bytes are kept. NULL (old block intact) on failure. */
static void *kb_resize(void *p, size_t len, size_t old_cap, size_t new_cap, size_t *cap) {
    if (new_cap < KB_BIG) {
        void *q = (old_cap >= KB_BIG) ? NULL : realloc(p, new_cap ? new_cap : 1);
        if (q == NULL) return NULL;
        *cap = new_cap;
        return q;
    }
    new_cap = kb_round_huge(new_cap);
    if (old_cap >= KB_BIG) {
        void *q = mremap(p, old_cap, new_cap, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(q, new_cap, MADV_HUGEPAGE);
#endif
        *cap = new_cap;
        return q;
    }
    void *q = kb_map(new_cap);
    if (q == NULL) return NULL;
    if (len) memcpy(q, p, len);
    free(p);
    *cap = new_cap;
    return q;
}

static void kb_release(void *p, size_t cap) {
    if (p == NULL) return;
    if (cap >= KB_BIG) munmap(p, cap);
    else free(p);
}

/* Give back the capacity past len (whole pages of a mapping); returns the
 * capacity still held. */
static size_t kb_trim(void *p, size_t len, size_t cap) {
    if (cap < KB_BIG) return cap;
    size_t keep = (len + 4095) & ~(size_t)4095;
    if (keep < KB_BIG) keep = KB_BIG;   /* stays a mapping: released by munmap */
    if (keep < cap) {
        munmap((char *)p + keep, cap - keep);
        return keep;
    }
    return cap;
}

#endif
