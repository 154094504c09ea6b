/* y = x W^T with 4-bit or 8-bit weights in groups of 32 (GGUF Q4_0/Q4_1, Q8_0 blocks), on AVX2.
 *
 * Each group of 32 weights is w = q * scale + low, q in 0..15, two per byte (byte j holds q[j] in
 * its low nibble and q[j + 16] in its high one). The activations are rounded, 32 at a time, to
 * int16 with one scale each, so a group's dot product is one run of integer multiply-adds:
 * sum(w x) = scale * xs * sum(q qx) + low * sum(x), with sum(x) kept exactly. (llama.cpp rounds
 * them to int8, which is twice the integer throughput but 128 times the rounding step: measured
 * against the float32 model that moved the logits 3.6x as far as int16 here.)
 * Every weight row is read once per call, however many activation rows there are: decode of one
 * sequence is bound by reading the 4-bit weights, and a batch reuses each unpacked group.
 *
 * Layouts (row-major, contiguous): x [rows, cols] float32; packed [out, cols / 32, 16] uint8;
 * scale, low [out, cols / 32] float32; y [rows, out] float32; xq scratch: rows * cols int16, and
 * xs, xsum scratch: rows * cols / 32 floats each.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define GROUP 32
#define ROW_TILE 4
#define OUT_BLOCK 8

/* With AVX-512 VNNI the 4-bit path takes two groups per 512-bit step: pairs of groups laid out
 * as the packed bytes of two groups unpack (see q4_pair_tile). */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#define PAIRS 1
#else
#define PAIRS 0
#endif

/* Round each group of 32 activations to int16 with scale max|x| / 32767; keep each group's sum.
 * ``paired``: each two groups a, b are stored a[0..15] b[0..15] a[16..31] b[16..31]. */
static void quantize_rows(const float *x, int rows, int cols, int16_t *xq, float *xs,
                          float *xsum, int paired) {
    const int groups = cols / GROUP;
    for (long g = 0; g < (long)rows * groups; g++) {
        const float *v = x + g * GROUP;
        int16_t *first = xq + g * GROUP, *second = first + 16;
        if (paired) {
            first = xq + g / 2 * 2 * GROUP + g % 2 * 16;
            second = first + 32;
        }
#ifdef __AVX512F__
        /* The same rounding as below (lrintf and cvtps both round to nearest even). */
        const __m512 a = _mm512_loadu_ps(v), b = _mm512_loadu_ps(v + 16);
        const float high = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
        const float total = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
        const float inverse = high > 0.0f ? 32767.0f / high : 0.0f;
        const __m512 factor = _mm512_set1_ps(inverse);
        _mm256_storeu_si256((__m256i *)first,
                            _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(a, factor))));
        _mm256_storeu_si256((__m256i *)second,
                            _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(b, factor))));
#else
        float high = 0.0f, total = 0.0f;
        for (int i = 0; i < GROUP; i++) {
            const float a = fabsf(v[i]);
            high = a > high ? a : high;
            total += v[i];
        }
        const float inverse = high > 0.0f ? 32767.0f / high : 0.0f;
        for (int i = 0; i < 16; i++) {
            first[i] = (int16_t)lrintf(v[i] * inverse);
            second[i] = (int16_t)lrintf(v[16 + i] * inverse);
        }
#endif
        xs[g] = high / 32767.0f;
        xsum[g] = total;
    }
}

/* A group's 32 weights as int16: elements 0..15 in lo, 16..31 in hi. */
static inline void unpack(const uint8_t *bytes, __m256i *lo, __m256i *hi) {
    const __m128i packed = _mm_loadu_si128((const __m128i *)bytes);
    const __m128i mask = _mm_set1_epi8(0x0F);
    *lo = _mm256_cvtepu8_epi16(_mm_and_si128(packed, mask));
    *hi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), mask));
}

/* sum(w x) over one group, as 8 float lanes. */
static inline __m256 group_dot(__m256i lo, __m256i hi, const int16_t *x) {
    const __m256i a = _mm256_madd_epi16(lo, _mm256_loadu_si256((const __m256i *)x));
    const __m256i b = _mm256_madd_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + 16)));
    return _mm256_cvtepi32_ps(_mm256_add_epi32(a, b));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Up to ROW_TILE activation rows against one weight row. */
static void row_tile(const uint8_t *packed, const float *scale, const float *low, int groups,
                     const int16_t *xq, const float *xs, const float *xsum, int tile, float *y,
                     long y_stride) {
    __m256 acc[ROW_TILE];
    float offset[ROW_TILE];
    for (int r = 0; r < ROW_TILE; r++) {
        acc[r] = _mm256_setzero_ps();
        offset[r] = 0.0f;
    }
    for (int g = 0; g < groups; g++) {
        __m256i lo, hi;
        unpack(packed + (long)g * 16, &lo, &hi);
        for (int r = 0; r < tile; r++) {
            const long at = (long)r * groups + g;
            const __m256 dot = group_dot(lo, hi, xq + at * GROUP);
            acc[r] = _mm256_fmadd_ps(dot, _mm256_set1_ps(scale[g] * xs[at]), acc[r]);
            offset[r] += low[g] * xsum[at];
        }
    }
    for (int r = 0; r < tile; r++) y[r * y_stride] = hsum(acc[r]) + offset[r];
}

/* Two weight rows against up to ROW_TILE activation rows: each activation group is loaded once. */
static void pair_tile(const uint8_t *packed, const float *scale, const float *low, int groups,
                      const int16_t *xq, const float *xs, const float *xsum, int tile, float *y,
                      long y_stride) {
    const uint8_t *packed1 = packed + (long)groups * 16;
    const float *scale1 = scale + groups, *low1 = low + groups;
    __m256 acc0[ROW_TILE], acc1[ROW_TILE];
    float offset0[ROW_TILE], offset1[ROW_TILE];
    for (int r = 0; r < ROW_TILE; r++) {
        acc0[r] = acc1[r] = _mm256_setzero_ps();
        offset0[r] = offset1[r] = 0.0f;
    }
    for (int g = 0; g < groups; g++) {
        __m256i lo0, hi0, lo1, hi1;
        unpack(packed + (long)g * 16, &lo0, &hi0);
        unpack(packed1 + (long)g * 16, &lo1, &hi1);
        for (int r = 0; r < tile; r++) {
            const long at = (long)r * groups + g;
            const __m256 dot0 = group_dot(lo0, hi0, xq + at * GROUP);
            const __m256 dot1 = group_dot(lo1, hi1, xq + at * GROUP);
            acc0[r] = _mm256_fmadd_ps(dot0, _mm256_set1_ps(scale[g] * xs[at]), acc0[r]);
            acc1[r] = _mm256_fmadd_ps(dot1, _mm256_set1_ps(scale1[g] * xs[at]), acc1[r]);
            offset0[r] += low[g] * xsum[at];
            offset1[r] += low1[g] * xsum[at];
        }
    }
    for (int r = 0; r < tile; r++) {
        y[r * y_stride] = hsum(acc0[r]) + offset0[r];
        y[r * y_stride + 1] = hsum(acc1[r]) + offset1[r];
    }
}

/* One call's operands: the weights, the rounded activations and the output. */
typedef struct {
    const void *weights; /* 4-bit: packed [out, groups, 16] uint8; 8-bit: [out, cols] int8 */
    const float *scale, *low; /* [out, groups]; low is NULL for 8-bit groups */
    const int16_t *xq;
    const float *xs, *xsum;
    float *y;
    int rows, cols, groups, out;
} Job;

/* Weight rows [n, end) against activation rows [first, first + tile). */
typedef void (*Span)(const Job *job, int n, int end, int first, int tile);

#if PAIRS
/* Two groups' scales times their activation scales, as [a x 8 | b x 8]. */
static inline __m512 pair_scale(const float *scale, const float *xs, __m512i spread) {
    const __m128 a = _mm_castpd_ps(_mm_load_sd((const double *)scale));
    const __m128 b = _mm_castpd_ps(_mm_load_sd((const double *)xs));
    return _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(a, b)));
}

/* Two groups' 64 weights as int16: [a 0..15 | b 0..15] in lo, [a 16..31 | b 16..31] in hi. */
static inline void unpack_pair(const uint8_t *bytes, __m512i *lo, __m512i *hi) {
    const __m256i packed = _mm256_loadu_si256((const __m256i *)bytes);
    const __m256i mask = _mm256_set1_epi8(0x0F);
    *lo = _mm512_cvtepu8_epi16(_mm256_and_si256(packed, mask));
    *hi = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(packed, 4), mask));
}

static inline __m512 pair_dot(__m512i lo, __m512i hi, const int16_t *x) {
    __m512i d = _mm512_dpwssd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(x));
    d = _mm512_dpwssd_epi32(d, hi, _mm512_loadu_si512(x + 32));
    return _mm512_cvtepi32_ps(d);
}

/* sum over groups of low * xsum, 16 at a time. */
static inline float offset_dot(const float *low, const float *xsum, int groups) {
    __m512 acc = _mm512_setzero_ps();
    for (int g = 0; g < groups; g += 16) {
        const __mmask16 keep = groups - g >= 16 ? 0xFFFF : (__mmask16)((1u << (groups - g)) - 1);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, low + g),
                              _mm512_maskz_loadu_ps(keep, xsum + g), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* Two weight rows (or one, with ``both`` 0) against up to ROW_TILE activation rows, two groups
 * per step; the activations are in quantize_rows' paired layout. Inlined with constant ``tile``
 * and ``both``, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void q4_pair_body(
    const uint8_t *packed, const float *scale, const float *low, int groups, const int16_t *xq,
    const float *xs, const float *xsum, const int tile, float *y, long y_stride, const int both) {
    const __m512i spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const long second = both ? (long)groups * 16 : 0;
    __m512 acc0[ROW_TILE], acc1[ROW_TILE];
    for (int r = 0; r < ROW_TILE; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int g = 0; g < groups; g += 2) {
        __m512i lo0, hi0, lo1, hi1;
        unpack_pair(packed + (long)g * 16, &lo0, &hi0);
        unpack_pair(packed + second + (long)g * 16, &lo1, &hi1);
        for (int r = 0; r < tile; r++) {
            const long at = (long)r * groups + g;
            const int16_t *x = xq + at * GROUP;
            acc0[r] = _mm512_fmadd_ps(pair_dot(lo0, hi0, x), pair_scale(scale + g, xs + at, spread),
                                      acc0[r]);
            if (both)
                acc1[r] = _mm512_fmadd_ps(pair_dot(lo1, hi1, x),
                                          pair_scale(scale + groups + g, xs + at, spread), acc1[r]);
        }
    }
    for (int r = 0; r < tile; r++) {
        const float *sums = xsum + (long)r * groups;
        y[r * y_stride] = _mm512_reduce_add_ps(acc0[r]) + offset_dot(low, sums, groups);
        if (both)
            y[r * y_stride + 1] =
                _mm512_reduce_add_ps(acc1[r]) + offset_dot(low + groups, sums, groups);
    }
}

#define Q4_PAIR_CASE(t, b)                                                                       \
    case (t) * 2 + (b):                                                                          \
        q4_pair_body(packed, scale, low, groups, xq, xs, xsum, t, y, y_stride, b);               \
        break;

static void q4_pair_tile(const uint8_t *packed, const float *scale, const float *low, int groups,
                         const int16_t *xq, const float *xs, const float *xsum, int tile,
                         float *y, long y_stride, int both) {
    switch (tile * 2 + (both != 0)) {
        Q4_PAIR_CASE(1, 0)
        Q4_PAIR_CASE(1, 1)
        Q4_PAIR_CASE(2, 0)
        Q4_PAIR_CASE(2, 1)
        Q4_PAIR_CASE(3, 0)
        Q4_PAIR_CASE(3, 1)
        Q4_PAIR_CASE(4, 0)
        Q4_PAIR_CASE(4, 1)
    }
}
#endif

static void q4_span(const Job *j, int n, int end, int first, int tile) {
    const uint8_t *packed = (const uint8_t *)j->weights;
    const long g = j->groups;
    const int16_t *xq = j->xq + (long)first * j->cols;
    const float *xs = j->xs + first * g, *xsum = j->xsum + first * g;
#if PAIRS
    if (g % 2 == 0) {
        for (; n < end; n += 2)
            q4_pair_tile(packed + n * g * 16, j->scale + n * g, j->low + n * g, j->groups, xq, xs,
                         xsum, tile, j->y + (long)first * j->out + n, j->out, n + 1 < end);
        return;
    }
#endif
    for (; n + 1 < end; n += 2)
        pair_tile(packed + n * g * 16, j->scale + n * g, j->low + n * g, j->groups, xq, xs, xsum,
                  tile, j->y + (long)first * j->out + n, j->out);
    for (; n < end; n++)
        row_tile(packed + n * g * 16, j->scale + n * g, j->low + n * g, j->groups, xq, xs, xsum,
                 tile, j->y + (long)first * j->out + n, j->out);
}

/* 8-bit weights, w = q * scale per group of 32 (GGUF Q8_0): q8 [out, cols] int8, scale
 * [out, cols / 32] float32. Same activation rounding and blocking as q4_matmul. */
static void q8_row(const int8_t *q, const float *scale, int groups, const int16_t *xq,
                   const float *xs, int tile, float *y, long y_stride) {
    __m256 acc[ROW_TILE];
    for (int r = 0; r < ROW_TILE; r++) acc[r] = _mm256_setzero_ps();
    for (int g = 0; g < groups; g++) {
        const __m256i lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + g * GROUP)));
        const __m256i hi =
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + g * GROUP + 16)));
        for (int r = 0; r < tile; r++) {
            const long at = (long)r * groups + g;
            const __m256 dot = group_dot(lo, hi, xq + at * GROUP);
            acc[r] = _mm256_fmadd_ps(dot, _mm256_set1_ps(scale[g] * xs[at]), acc[r]);
        }
    }
    for (int r = 0; r < tile; r++) y[r * y_stride] = hsum(acc[r]);
}

static void q8_span(const Job *j, int n, int end, int first, int tile) {
    const int8_t *q = (const int8_t *)j->weights;
    for (; n < end; n++)
        q8_row(q + (long)n * j->cols, j->scale + (long)n * j->groups, j->groups,
               j->xq + (long)first * j->cols, j->xs + (long)first * j->groups, tile,
               j->y + (long)first * j->out + n, j->out);
}

/* Round the activations, then pass every tile of them over each block of weight rows, which
 * stays in L1 meanwhile; blocks run in parallel. */
static int run_blocks(const float *x, Job *job, int threads, Span span, int paired) {
    if (job->cols % GROUP != 0 || job->rows < 1) return -1;
    job->groups = job->cols / GROUP;
    quantize_rows(x, job->rows, job->cols, (int16_t *)job->xq, (float *)job->xs,
                  (float *)job->xsum, paired && job->groups % 2 == 0);
    const int tiles = (job->rows + ROW_TILE - 1) / ROW_TILE;
    const int blocks = (job->out + OUT_BLOCK - 1) / OUT_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int b = 0; b < blocks; b++) {
        const int end = (b + 1) * OUT_BLOCK < job->out ? (b + 1) * OUT_BLOCK : job->out;
        for (int t = 0; t < tiles; t++) {
            const int first = t * ROW_TILE;
            const int tile = job->rows - first < ROW_TILE ? job->rows - first : ROW_TILE;
            span(job, b * OUT_BLOCK, end, first, tile);
        }
    }
    return 0;
}

int q4_matmul(const float *x, const uint8_t *packed, const float *scale, const float *low,
              float *y, int16_t *xq, float *xs, float *xsum, int rows, int cols, int out,
              int threads) {
    Job job = {packed, scale, low, xq, xs, xsum, y, rows, cols, 0, out};
    return run_blocks(x, &job, threads, q4_span, PAIRS);
}

int q8_matmul(const float *x, const int8_t *q, const float *scale, float *y, int16_t *xq,
              float *xs, float *xsum, int rows, int cols, int out, int threads) {
    Job job = {q, scale, NULL, xq, xs, xsum, y, rows, cols, 0, out};
    return run_blocks(x, &job, threads, q8_span, 0);
}
