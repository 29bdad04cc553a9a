/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) by carry-less
 * multiplication, 256 bytes per step, for x86-64 CPUs with VPCLMULQDQ and
 * AVX-512 (Ice Lake and later; Zen 4 and later). Checked at run time
 * (kb_crc32c_fold_available); other CPUs keep the crc32c package's routine.
 *
 *   data:  | 4 x 64 B (four 512-bit accumulators) | 256 B | 256 B | ... | tail
 *
 * Each 128-bit lane of an accumulator holds 16 message bytes. Folding a lane
 * D bytes forward multiplies its first 8 bytes by x^(8D+31) mod P and its
 * second 8 bytes by x^(8D-33) mod P (both bit-reflected, 32 bits), and XORs
 * the 128-bit products into the lane D bytes later: the message keeps its
 * CRC. The accumulators are folded into one, its four lanes into one, and
 * the last 16 bytes plus the tail (under 64 bytes) go through the SSE 4.2
 * crc32 instruction. tests/test_checksums.py derives the constants from the
 * polynomial (and checks that a fold keeps a bitwise CRC), and compares this
 * routine with the crc32c package on every length to 2,200 bytes at every
 * alignment and on Hypothesis spans.
 */
#ifndef KBATCH_CRC32C_FOLD_H
#define KBATCH_CRC32C_FOLD_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 10))
#define KB_HAVE_CRC_FOLD 1
#include <immintrin.h>

#define KB_FOLD_TARGET \
    __attribute__((target("avx512f,avx512vl,avx512bw,vpclmulqdq,pclmul,sse4.2")))

/* Bytes ahead of the block being folded that the loop asks the cache for:
 * the hardware prefetcher stops at each 4 KiB page, and a mapped segment is
 * read at most once, so its lines come from memory. Measured on a 614 MB
 * segment of 10 KB values, from its mapping: one pass 0.054 -> 0.048 s, a
 * zero_copy read 0.060 -> 0.054 s (1,024 to 8,192 bytes ahead measure alike).
 * A prefetch past the end of the data never faults. */
#define KB_CRC_PREFETCH_AHEAD 2048
/* integer arithmetic: the address may lie past the end of the data */
#define KB_CRC_PREFETCH(p, ahead) \
    _mm_prefetch((const char *)((uintptr_t)(p) + (uintptr_t)(ahead)), _MM_HINT_T0)

/* (k for the first 8 bytes, k for the second 8 bytes) of a fold D bytes on */
#define KB_K(lo, hi) _mm_set_epi64x((long long)(hi), (long long)(lo))
#define KB_K512(lo, hi) _mm512_broadcast_i32x4(KB_K(lo, hi))

KB_FOLD_TARGET static inline __m512i kb_fold512(__m512i x, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), next, 0x96);
}

KB_FOLD_TARGET static inline __m128i kb_fold128(__m128i x, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)), next);
}

/* The CRC state (not inverted) after ``n`` bytes at ``p``, from ``crc``;
 * n >= 256. */
KB_FOLD_TARGET static uint32_t kb_crc32c_fold(uint32_t crc, const uint8_t *p, size_t n) {
    const __m512i k256 = KB_K512(0xdcb17aa4u, 0xb9e02b86u);
    const __m512i k64 = KB_K512(0x740eef02u, 0x9e4addf8u);
    __m512i x0 = _mm512_loadu_si512((const void *)p);
    __m512i x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128));
    __m512i x3 = _mm512_loadu_si512((const void *)(p + 192));
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    p += 256;
    n -= 256;
    while (n >= 256) {
        KB_CRC_PREFETCH(p, KB_CRC_PREFETCH_AHEAD);
        KB_CRC_PREFETCH(p, KB_CRC_PREFETCH_AHEAD + 64);
        KB_CRC_PREFETCH(p, KB_CRC_PREFETCH_AHEAD + 128);
        KB_CRC_PREFETCH(p, KB_CRC_PREFETCH_AHEAD + 192);
        x0 = kb_fold512(x0, k256, _mm512_loadu_si512((const void *)p));
        x1 = kb_fold512(x1, k256, _mm512_loadu_si512((const void *)(p + 64)));
        x2 = kb_fold512(x2, k256, _mm512_loadu_si512((const void *)(p + 128)));
        x3 = kb_fold512(x3, k256, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256;
        n -= 256;
    }
    /* four accumulators into one: x0 goes 192 bytes on, x1 128, x2 64 */
    __m512i x = kb_fold512(x0, KB_K512(0xa87ab8a8u, 0xab7aff2au), x3);
    x = _mm512_xor_si512(x, kb_fold512(x1, KB_K512(0x6992cea2u, 0x0d3b6092u),
                                       _mm512_setzero_si512()));
    x = _mm512_xor_si512(x, kb_fold512(x2, k64, _mm512_setzero_si512()));
    while (n >= 64) {
        x = kb_fold512(x, k64, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }
    /* four lanes into one: lane 0 goes 48 bytes on, lane 1 32, lane 2 16 */
    __m128i v = _mm512_extracti32x4_epi32(x, 3);
    v = kb_fold128(_mm512_extracti32x4_epi32(x, 0), KB_K(0x1c291d04u, 0xddc0152bu), v);
    v = kb_fold128(_mm512_extracti32x4_epi32(x, 1), KB_K(0x3da6d0cbu, 0xba4fc28eu), v);
    v = kb_fold128(_mm512_extracti32x4_epi32(x, 2), KB_K(0xf20c0dfeu, 0x493c7d27u), v);
    /* the message is now these 16 bytes and the tail, from a zero state */
    uint64_t s = 0;
    s = _mm_crc32_u64(s, (uint64_t)_mm_cvtsi128_si64(v));
    s = _mm_crc32_u64(s, (uint64_t)_mm_extract_epi64(v, 1));
    while (n >= 8) {
        uint64_t w;
        __builtin_memcpy(&w, p, 8);
        s = _mm_crc32_u64(s, w);
        p += 8;
        n -= 8;
    }
    uint32_t s32 = (uint32_t)s;
    while (n > 0) {
        s32 = _mm_crc32_u8(s32, *p++);
        n--;
    }
    return s32;
}

/* True when this CPU (and the OS, for the AVX-512 state) runs the above. */
static int kb_crc32c_fold_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
        && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("vpclmulqdq")
        && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
}
#else
#define KB_HAVE_CRC_FOLD 0
static uint32_t kb_crc32c_fold(uint32_t crc, const uint8_t *p, size_t n) {
    (void)p; (void)n; return crc;
}
static int kb_crc32c_fold_available(void) { return 0; }
#endif

#endif
