/* C helpers of kbatch/_core/_avro.pyx: UTF-8 validation, uuid text, decimal
   magnitude against 10^precision, unaligned float loads. */
#ifndef KB_AVRO_H
#define KB_AVRO_H
#include <stdint.h>
#include <string.h>
/* UTF-8 as the Unicode standard defines it (no surrogates, no overlong
   forms, at most U+10FFFF); 8 ASCII bytes at a time. 1 when valid. */
static int kb_utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w; memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) { i += 8; continue; }
        }
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (n - i < 2 || (s[i+1] & 0xC0) != 0x80) return 0;
            i += 2; continue;
        }
        if (c >= 0xE0 && c <= 0xEF) {
            if (n - i < 3) return 0;
            uint8_t c1 = s[i+1];
            if ((c1 & 0xC0) != 0x80 || (s[i+2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;      /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0;      /* surrogate */
            i += 3; continue;
        }
        if (c >= 0xF0 && c <= 0xF4) {
            if (n - i < 4) return 0;
            uint8_t c1 = s[i+1];
            if ((c1 & 0xC0) != 0x80 || (s[i+2] & 0xC0) != 0x80
                || (s[i+3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;      /* overlong */
            if (c == 0xF4 && c1 > 0x8F) return 0;      /* past U+10FFFF */
            i += 4; continue;
        }
        return 0;
    }
    return 1;
}
static inline int kb_hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
/* "8-4-4-4-12" hex digits -> 16 bytes; 1 when well formed. */
static int kb_parse_uuid(const uint8_t *s, uint8_t *out) {
    int j = 0;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
            continue;
        }
        int hi = kb_hexval(s[i]), lo = kb_hexval(s[i+1]);
        if (hi < 0 || lo < 0) return 0;
        out[j++] = (uint8_t)(hi * 16 + lo);
        i++;
    }
    return j == 16;
}
/* A little-endian two's complement number of w bytes: |v| < limit, the
   limit (10^precision) given as w little-endian bytes. */
static int kb_magnitude_below(const uint8_t *v, const uint8_t *limit, int w) {
    uint8_t mag[32];
    int neg = (v[w - 1] & 0x80) != 0;
    if (neg) {               /* magnitude = ~v + 1 */
        unsigned carry = 1;
        for (int i = 0; i < w; i++) {
            unsigned x = (uint8_t)~v[i] + carry;
            mag[i] = (uint8_t)x;
            carry = x >> 8;
        }
    } else {
        memcpy(mag, v, (size_t)w);
    }
    for (int i = w - 1; i >= 0; i--) {
        if (mag[i] != limit[i]) return mag[i] < limit[i];
    }
    return 0;
}
static inline float kb_load_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static inline double kb_load_f64(const uint8_t *p) { double d; memcpy(&d, p, 8); return d; }
#endif
