/* y = x W^T over bfloat16 weights, on AVX512-BF16 (vdpbf16ps), for any number of rows.
 *
 * The activations are rounded to bfloat16 (nearest even, as PyTorch converts; a denormal input
 * becomes zero, as the instruction treats it), the products of two bfloat16 values are exact in
 * float32, and the sums are float32; y is float32, not rounded back to bfloat16.
 *
 * Every output is the same chain of multiply-adds along the input, pair by pair from the first,
 * whatever the number of rows and however they are tiled or split between threads, so a row's
 * result is identical alone, in any batch and at any position. (oneDNN's bfloat16 GEMM picks
 * its kernel and blocking by the row count, and its sums then differ by row count.)
 *
 * Layout, built by native/bf16_matmul.py: w [out / 16, cols / 2, 16, 2] bfloat16, element
 * [b, p, c, j] = W[16b + c, 2p + j]: one 512-bit register holds 16 output columns' weight pairs,
 * met by a broadcast pair of activations, with no horizontal sum. x [rows, cols] float32,
 * y [rows, out] float32, xb: rows * cols bfloat16 scratch.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#define BF16_LANES 16
#define BF16_TILE 8 /* activation rows per register tile */

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)

/* float32 -> bfloat16, nearest even; denormals to zero (as vcvtne2ps2bf16 does). */
static void round_to_bf16(const float *x, long n, uint16_t *out) {
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512((void *)(out + i), (__m512i)both);
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        if ((u & 0x7F800000u) == 0) {
            out[i] = (uint16_t)((u >> 16) & 0x8000u);
        } else if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
            out[i] = (uint16_t)((u >> 16) | 0x0040u); /* NaN stays a quiet NaN */
        } else {
            out[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        }
    }
}

/* ``tile`` activation rows against one or two column blocks (constants where inlined). */
static inline __attribute__((always_inline)) void bf16_body(
    const uint16_t *w, long block_elems, int pairs, const uint16_t *x, long x_stride,
    const int tile, const int two, float *y, long y_stride) {
    __m512 acc[BF16_TILE][2];
    for (int r = 0; r < tile; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    const uint16_t *w1 = w + block_elems;
    for (int p = 0; p < pairs; p++) {
        const __m512bh a = (__m512bh)_mm512_loadu_si512((const void *)(w + 32L * p));
        const __m512bh b = two ? (__m512bh)_mm512_loadu_si512((const void *)(w1 + 32L * p)) : a;
        for (int r = 0; r < tile; r++) {
            int32_t pair;
            memcpy(&pair, x + r * x_stride + 2L * p, 4);
            const __m512bh v = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], v, a);
            if (two) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], v, b);
        }
    }
    for (int r = 0; r < tile; r++) {
        _mm512_storeu_ps(y + r * y_stride, acc[r][0]);
        if (two) _mm512_storeu_ps(y + r * y_stride + BF16_LANES, acc[r][1]);
    }
}

#define BF16_CASE(t)                                                                             \
    case t:                                                                                      \
        if (two)                                                                                 \
            bf16_body(w, block_elems, pairs, x, x_stride, t, 1, y, y_stride);                   \
        else                                                                                     \
            bf16_body(w, block_elems, pairs, x, x_stride, t, 0, y, y_stride);                   \
        break;

static void bf16_tile(const uint16_t *w, long block_elems, int pairs, const uint16_t *x,
                      long x_stride, int tile, int two, float *y, long y_stride) {
    switch (tile) {
        BF16_CASE(1)
        BF16_CASE(2)
        BF16_CASE(3)
        BF16_CASE(4)
        BF16_CASE(5)
        BF16_CASE(6)
        BF16_CASE(7)
        BF16_CASE(8)
    }
}

/* Round the activations (each thread a share of the rows), then split the units of two column
 * blocks between the threads; each runs every row tile over a unit before the next, so the
 * unit's weights stay in L1/L2 while the activations stream. Returns 0, or -1 for a shape the
 * layout cannot hold. */
int bf16_matmul(const float *x, const uint16_t *w, float *y, uint16_t *xb, int rows, int cols,
                int out, int threads) {
    if (cols % 2 != 0 || out % BF16_LANES != 0 || rows < 1) return -1;
    const int blocks = out / BF16_LANES, units = (blocks + 1) / 2, pairs = cols / 2;
    const long block_elems = (long)cols * BF16_LANES;
    if (threads > units) threads = units;
    if (threads < 1) threads = 1;
#pragma omp parallel num_threads(threads)
    {
        const int parts = omp_get_num_threads(), part = omp_get_thread_num();
        const long low_row = (long)rows * part / parts, high_row = (long)rows * (part + 1) / parts;
        round_to_bf16(x + low_row * cols, (high_row - low_row) * cols, xb + low_row * cols);
#pragma omp barrier
        const int start = (int)((long)units * part / parts);
        const int end = (int)((long)units * (part + 1) / parts);
        for (int u = start; u < end; u++) {
            const int b = 2 * u, two = b + 1 < blocks;
            for (int first = 0; first < rows; first += BF16_TILE) {
                const int tile = rows - first < BF16_TILE ? rows - first : BF16_TILE;
                bf16_tile(w + b * block_elems, block_elems, pairs, xb + (long)first * cols, cols,
                          tile, two, y + (long)first * out + b * BF16_LANES, out);
            }
        }
    }
    return 0;
}

int bf16_available(void) { return 1; }

#else
int bf16_matmul(const float *x, const uint16_t *w, float *y, uint16_t *xb, int rows, int cols,
                int out, int threads) {
    (void)x, (void)w, (void)y, (void)xb, (void)rows, (void)cols, (void)out, (void)threads;
    return -1;
}

int bf16_available(void) { return 0; }
#endif
