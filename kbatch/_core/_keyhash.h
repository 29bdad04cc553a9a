/* The key hash and comparison of the table view's kernel (_latest.pyx).
 *
 *   kb_hash(p, len)   a 64-bit hash of a byte string
 *   kb_eq(a, b, n)    two byte strings of length n equal
 */
#ifndef KBATCH_KEYHASH_H
#define KBATCH_KEYHASH_H
#include <stdint.h>
#include <string.h>

/* a 64-bit hash of a byte string: 8-byte words folded by 128-bit
   multiplication (the construction of wyhash), our own constants */
static inline uint64_t kb_fold(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}
static inline uint64_t kb_r8(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint64_t kb_r4(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t kb_hash(const uint8_t *p, int64_t len) {
    const uint64_t k0 = 0x9e3779b97f4a7c15ull, k1 = 0xd6e8feb86659fd93ull,
                   k2 = 0xa0761d6478bd642full;
    uint64_t seed = k0 ^ kb_fold((uint64_t)len ^ k1, k2), a, b;
    if (len <= 16) {
        if (len >= 4) {
            int64_t q = (len >> 3) << 2;
            a = (kb_r4(p) << 32) | kb_r4(p + q);
            b = (kb_r4(p + len - 4) << 32) | kb_r4(p + len - 4 - q);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        int64_t i = len;
        while (i > 16) {
            seed = kb_fold(kb_r8(p) ^ k1, kb_r8(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = kb_r8(p + i - 16);
        b = kb_r8(p + i - 8);
    }
    return kb_fold(k1 ^ (uint64_t)len, kb_fold(a ^ k1, b ^ seed));
}
/* equal byte strings of length n: 8-byte words, the last one overlapping */
static inline int kb_eq(const uint8_t *a, const uint8_t *b, int64_t n) {
    if (n >= 8) {
        int64_t i = 0;
        for (; i + 8 < n; i += 8)
            if (kb_r8(a + i) != kb_r8(b + i)) return 0;
        return kb_r8(a + n - 8) == kb_r8(b + n - 8);
    }
    if (n >= 4)
        return kb_r4(a) == kb_r4(b) && kb_r4(a + n - 4) == kb_r4(b + n - 4);
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}
#define KB_PREFETCH(p) __builtin_prefetch((const void *)(p))
/* 1 where the host stores words little-endian (the table view's key heads
   are loaded as words there) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define KB_LITTLE_ENDIAN 1
#else
#define KB_LITTLE_ENDIAN 0
#endif
#endif
