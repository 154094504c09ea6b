/* y = x W^T for many activation rows at once (prompt chunks, wide decode batches), with the same
 * 4-bit or 8-bit groups of 32 as group_matmul.c and the same int16 rounding of the activations,
 * on AVX-512 VNNI.
 *
 * group_matmul.c runs one weight row's groups along the vector lanes and sums them at the end:
 * right for a few activation rows, where reading the weights is the cost. Here the lanes hold 16
 * output columns instead, each with two consecutive weights, so one vpdpwssd multiplies 16
 * columns by a broadcast pair of activations and accumulates 32 products, with no horizontal sum;
 * each unpacked weight register serves a tile of up to WIDE_TILE activation rows. Per group of
 * 32 the integer sums are scaled once: y += scale * xs * sum(q qx) + low * sum(x).
 *
 * Weight layouts, built by native/wide_matmul.py (o = out / 16 column blocks, g = cols / 32):
 *   4-bit: [o, g, 8, 16, 2] uint8; byte [b, g, p, c, j] holds q[16b + c, 32g + 2p + j] in its low
 *          nibble and q[16b + c, 32g + 2(p + 8) + j] in its high one;
 *   8-bit: [o, g, 16, 16, 2] int8; [b, g, p, c, j] = q[16b + c, 32g + 2p + j];
 *   scale, low: [o, g, 16] float32 (low NULL for 8-bit groups).
 * x [rows, cols] float32, y [rows, out] float32; xq, xs, xsum: scratch as for q4_matmul.
 */
#include <omp.h>

#include "group_matmul.c"

#define WIDE_TILE 8
#define LANES 16

#if PAIRS

/* One column block against ``tile`` activation rows (a constant where inlined): for each group,
 * each register of 16 columns' weight pairs meets every row's broadcast activation pair. */
static inline __attribute__((always_inline)) void wide_body(
    const uint8_t *w, const float *scale, const float *low, int groups, int cols,
    const int16_t *xq, const float *xs, const float *xsum, const int tile, float *y, long y_stride,
    const int four) {
    __m512 acc[WIDE_TILE];
    /* Up to 4 integer sums per row, added at the group's end: each multiply-add waits on the one
     * before it in its sum, so a tile of few rows needs more sums to keep the unit busy. */
    const int chains = tile <= 2 ? 4 : tile <= 4 ? 2 : 1;
    __m512i sum[4][WIDE_TILE];
    const __m512i mask = _mm512_set1_epi16(0x0F);
    for (int r = 0; r < tile; r++) acc[r] = _mm512_setzero_ps();
    const long group_bytes = four ? 256 : 512;
    for (int g = 0; g < groups; g++) {
        const uint8_t *wg = w + g * group_bytes;
        const int16_t *xg = xq + g * GROUP;
        for (int c = 0; c < chains; c++)
            for (int r = 0; r < tile; r++) sum[c][r] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            __m512i a, b;
            if (four) {
                const __m512i both =
                    _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(wg + 32 * p)));
                a = _mm512_and_si512(both, mask);
                b = _mm512_srli_epi16(both, 4);
            } else {
                a = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(wg + 32 * p)));
                b = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(wg + 32 * (p + 8))));
            }
            const int ca = chains == 4 ? 2 * (p & 1) : 0, cb = chains == 1 ? 0 : ca + 1;
            for (int r = 0; r < tile; r++) {
                const int32_t *x = (const int32_t *)(xg + (long)r * cols);
                sum[ca][r] = _mm512_dpwssd_epi32(sum[ca][r], a, _mm512_set1_epi32(x[p]));
                sum[cb][r] = _mm512_dpwssd_epi32(sum[cb][r], b, _mm512_set1_epi32(x[p + 8]));
            }
        }
        for (int c = 1; c < chains; c++)
            for (int r = 0; r < tile; r++) sum[0][r] = _mm512_add_epi32(sum[0][r], sum[c][r]);
        const __m512 d = _mm512_loadu_ps(scale + g * LANES);
        const __m512 m = low ? _mm512_loadu_ps(low + g * LANES) : _mm512_setzero_ps();
        for (int r = 0; r < tile; r++) {
            const long at = (long)r * groups + g;
            const __m512 ds = _mm512_mul_ps(d, _mm512_set1_ps(xs[at]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[0][r]), ds, acc[r]);
            if (low) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(xsum[at]), acc[r]);
        }
    }
    for (int r = 0; r < tile; r++) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

#define WIDE_CASE(t)                                                                             \
    case t:                                                                                      \
        if (four)                                                                                \
            wide_body(w, scale, low, groups, cols, xq, xs, xsum, t, y, y_stride, 1);             \
        else                                                                                     \
            wide_body(w, scale, low, groups, cols, xq, xs, xsum, t, y, y_stride, 0);             \
        break;

static void wide_tile(const uint8_t *w, const float *scale, const float *low, int groups,
                      int cols, const int16_t *xq, const float *xs, const float *xsum, int tile,
                      float *y, long y_stride, int four) {
    switch (tile) {
        WIDE_CASE(1)
        WIDE_CASE(2)
        WIDE_CASE(3)
        WIDE_CASE(4)
        WIDE_CASE(5)
        WIDE_CASE(6)
        WIDE_CASE(7)
        WIDE_CASE(8)
    }
}

/* Round the activations (each thread a share of the rows), then split the column blocks
 * between the threads; each runs its row tiles in turn over all of its blocks, so a tile's
 * activations stay in L1 and the blocks' weights in L2. */
static int wide_run(const float *x, const uint8_t *w, const float *scale, const float *low,
                    float *y, int16_t *xq, float *xs, float *xsum, int rows, int cols, int out,
                    int threads, int four) {
    if (cols % GROUP != 0 || out % LANES != 0 || rows < 1) return -1;
    const int groups = cols / GROUP;
    const int blocks = out / LANES;
    const long block_bytes = (long)groups * (four ? 256 : 512);
    if (threads > blocks) threads = blocks;
#pragma omp parallel num_threads(threads)
    {
        const int parts = omp_get_num_threads(), part = omp_get_thread_num();
        const int low_row = (int)((long)rows * part / parts);
        const int high_row = (int)((long)rows * (part + 1) / parts);
        if (high_row > low_row)
            quantize_rows(x + (long)low_row * cols, high_row - low_row, cols,
                          xq + (long)low_row * cols, xs + (long)low_row * groups,
                          xsum + (long)low_row * groups, 0);
#pragma omp barrier
        const int start = (int)((long)blocks * part / parts);
        const int end = (int)((long)blocks * (part + 1) / parts);
        for (int first = 0; first < rows; first += WIDE_TILE) {
            const int tile = rows - first < WIDE_TILE ? rows - first : WIDE_TILE;
            for (int b = start; b < end; b++)
                wide_tile(w + b * block_bytes, scale + (long)b * groups * LANES,
                          low ? low + (long)b * groups * LANES : NULL, groups, cols,
                          xq + (long)first * cols, xs + (long)first * groups,
                          xsum + (long)first * groups, tile, y + (long)first * out + b * LANES,
                          out, four);
        }
    }
    return 0;
}

int wide_q4_matmul(const float *x, const uint8_t *w, const float *scale, const float *low,
                   float *y, int16_t *xq, float *xs, float *xsum, int rows, int cols, int out,
                   int threads) {
    return wide_run(x, w, scale, low, y, xq, xs, xsum, rows, cols, out, threads, 1);
}

int wide_q8_matmul(const float *x, const int8_t *w, const float *scale, float *y, int16_t *xq,
                   float *xs, float *xsum, int rows, int cols, int out, int threads) {
    return wide_run(x, (const uint8_t *)w, scale, NULL, y, xq, xs, xsum, rows, cols, out, threads,
                    0);
}

int wide_available(void) { return 1; }

#else
int wide_available(void) { return 0; }
#endif
