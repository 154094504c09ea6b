/* Decode attention straight over the paged KV pool: no per-step copy of any context.
 *
 * A few new query tokens per sequence (one when decoding, a few more when a grammar forced some)
 * attend over that sequence's cached keys and values, read in place from the block pool through
 * its block table; new token i of n sits at position length - n + i and sees keys up to there.
 * One work item is a chunk of one sequence's context with every KV head and every query row
 * (heads times new tokens), so each cached token's keys and values are read once, whole, and in
 * order. Chunks run in parallel, each keeping a partial softmax (its maximum, its sum and its
 * weighted values), merged at the end as flash-decoding does.
 *
 * Layouts (float32, row-major, contiguous):
 *   q, out        [tokens, heads, dim]; starts [seqs + 1] int32: sequence s owns tokens
 *                 starts[s] .. starts[s + 1] - 1
 *   k_pool, v_pool [blocks, block_size, kv_heads, dim], float32, or float16 with ``half`` (each
 *                 chunk's rows widened to float32 once, then the same arithmetic)
 *   tables        [seqs, width] int32 block ids;  lengths [seqs] int32 context lengths, each at
 *                 least the sequence's new tokens
 *   scratch       floats, at least paged_decode_scratch(...) of them
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vector_math.c"

#define CHUNK 128
#define MAX_ROWS 256
#define PV_ROWS 4 /* rows whose weighted values are summed in registers at once */
#define PROMPT_TOKENS 4 /* from this many new tokens, scores run along the keys */
/* Over a float16 pool with AVX-512, from this many: there the keys are widened as they are
 * transposed, in 16x16 tiles of registers, instead of widened into a buffer first. */
#define HALF_PROMPT_TOKENS 2
#define SCORE_KEYS 64 /* keys whose scores one row keeps in registers */
#define MAX_DIM 128
/* The cached rows this many tokens ahead are prefetched while a token is read (decoding over a
 * float32 pool: its keys to L1, its values to L2 for the weighted sum after; over a float16
 * pool, for any number of new tokens: both to L1, as both are widened at once). The hardware
 * prefetcher alone stops at each block's page: 44 ms a step against 34 with it, for 33
 * sequences of 150-650 tokens over 30 layers, bound by memory bandwidth (19-24 GB/s); over a
 * float16 pool, one sequence of 4,096 tokens, 30 layers, 2 threads: 4.2-4.3 ms a step without,
 * 2.5 with. */
#define AHEAD 8
#define MAX_KV 1024 /* kv_heads * dim of a float16 pool at most */

/* float16 -> float32, n values (F16C). */
static inline void widen(const uint16_t *h, float *f, long n) {
    long i = 0;
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
#endif
#ifdef __F16C__
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = _cvtsh_ss(h[i]);
#endif
}

/* float32 -> float16 rounded to nearest even (as PyTorch converts), n values (F16C). */
static inline void narrow(const float *f, uint16_t *h, long n) {
    long i = 0;
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#ifdef __F16C__
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = _cvtss_sh(f[i], _MM_FROUND_TO_NEAREST_INT);
#endif
}

/* Whether float16 pools are handled here (the CPU has F16C). */
int paged_decode_half(void) {
#ifdef __F16C__
    return 1;
#else
    return 0;
#endif
}

static int chunks_of(int length) { return (length + CHUNK - 1) / CHUNK; }

long paged_decode_scratch(int seqs, const int32_t *starts, const int32_t *lengths, int heads,
                          int dim) {
    long slots = 0;
    for (int s = 0; s < seqs; s++)
        slots += (long)chunks_of(lengths[s]) * (starts[s + 1] - starts[s]);
    return slots * (long)heads * (dim + 2);
}

/* max(line[0 .. n - 1]), -inf for none: in 16 lanes, so it runs in vectors. */
static inline float line_max(const float *line, int n) {
    float lanes[16];
    for (int l = 0; l < 16; l++) lanes[l] = -INFINITY;
    int t = 0;
    for (; t + 16 <= n; t += 16)
        for (int l = 0; l < 16; l++) lanes[l] = line[t + l] > lanes[l] ? line[t + l] : lanes[l];
    for (; t < n; t++) lanes[0] = line[t] > lanes[0] ? line[t] : lanes[0];
    float high = -INFINITY;
    for (int l = 0; l < 16; l++) high = lanes[l] > high ? lanes[l] : high;
    return high;
}

#ifdef __AVX512F__
/* Sixteen values from a float32 row, or widened from a float16 one (the same floats). */
static inline __attribute__((always_inline)) __m512 value_lanes(const void *row, long at,
                                                               const int half) {
    if (half)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + at)));
    return _mm512_loadu_ps((const float *)row + at);
}
#endif

/* Rows first .. first + count - 1 (one token's heads over KV head g): their weighted sums of
 * the chunk's values, written after each row's max and sum. Inlined with constant sizes.
 * values[t]: token t's float32 values, or with ``half`` (AVX-512 and dim a multiple of 64
 * only) its float16 ones in the pool, widened in registers as they are read. */
static inline __attribute__((always_inline)) void weigh_values(
    const float *weights, const void *const *values, int n, int g, const int dim,
    const int count, float *partial, long slot_size, int first, int heads, const int half) {
#ifdef __AVX512F__
    if (dim % 64 == 0) {
        /* 64 dimensions at a time, four registers per row (compilers spill the array form). */
        for (int d0 = 0; d0 < dim; d0 += 64) {
            __m512 acc[PV_ROWS][4];
            for (int r = 0; r < count; r++)
                for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
            for (int t = 0; t < n; t++) {
                const long at = (long)g * dim + d0;
                const __m512 v0 = value_lanes(values[t], at, half);
                const __m512 v1 = value_lanes(values[t], at + 16, half);
                const __m512 v2 = value_lanes(values[t], at + 32, half);
                const __m512 v3 = value_lanes(values[t], at + 48, half);
                for (int r = 0; r < count; r++) {
                    const __m512 w = _mm512_set1_ps(weights[(long)r * CHUNK + t]);
                    acc[r][0] = _mm512_fmadd_ps(w, v0, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(w, v1, acc[r][1]);
                    acc[r][2] = _mm512_fmadd_ps(w, v2, acc[r][2]);
                    acc[r][3] = _mm512_fmadd_ps(w, v3, acc[r][3]);
                }
            }
            for (int r = 0; r < count; r++) {
                const int row = first + r;
                float *slot = partial + (row / heads) * slot_size + (long)(row % heads) * (dim + 2);
                for (int j = 0; j < 4; j++) _mm512_storeu_ps(slot + 2 + d0 + 16 * j, acc[r][j]);
            }
        }
        return;
    }
#endif
    float acc[PV_ROWS][dim];
    for (int r = 0; r < count; r++)
        for (int d = 0; d < dim; d++) acc[r][d] = 0.0f;
    for (int t = 0; t < n; t++) {
        const float *v = (const float *)values[t] + (long)g * dim; /* never half here */
        for (int r = 0; r < count; r++) {
            const float weight = weights[(long)r * CHUNK + t];
            for (int d = 0; d < dim; d++) acc[r][d] += weight * v[d];
        }
    }
    for (int r = 0; r < count; r++) {
        const int row = first + r;
        float *slot = partial + (row / heads) * slot_size + (long)(row % heads) * (dim + 2);
        for (int d = 0; d < dim; d++) slot[2 + d] = acc[r][d];
    }
}

/* weigh_values with ``count`` (1 to PV_ROWS) made a constant, so each run size has its own
 * unrolled loop; ``half`` is passed on as the caller's constant. */
static inline __attribute__((always_inline)) void weigh_run(
    const float *weights, const void *const *values, int n, int g, const int dim, int count,
    float *partial, long slot_size, int first, int heads, const int half) {
#define WEIGH(c) weigh_values(weights, values, n, g, dim, c, partial, slot_size, first, heads, half)
    if (count == 1)
        WEIGH(1);
    else if (count == 2)
        WEIGH(2);
    else if (count == 3)
        WEIGH(3);
    else
        WEIGH(4);
#undef WEIGH
}

/* Rows first .. first + count - 1 (heads of one token sharing one KV head): their scores over
 * the chunk's keys, transposed in kt [dim][CHUNK], 64 keys at a time in registers. */
static inline __attribute__((always_inline)) void score_rows(const float *query, const float *kt,
                                                             int padded, const int dim,
                                                             const int count, float scale,
                                                             float *line) {
#ifdef __AVX512F__
    for (int tb = 0; tb < padded; tb += SCORE_KEYS) {
        __m512 acc[PV_ROWS][4];
        for (int r = 0; r < count; r++)
            for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
        for (int d = 0; d < dim; d++) {
            const float *k = kt + (long)d * CHUNK + tb;
            const __m512 k0 = _mm512_load_ps(k), k1 = _mm512_load_ps(k + 16);
            const __m512 k2 = _mm512_load_ps(k + 32), k3 = _mm512_load_ps(k + 48);
            for (int r = 0; r < count; r++) {
                const __m512 qd = _mm512_set1_ps(query[(long)r * dim + d]);
                acc[r][0] = _mm512_fmadd_ps(qd, k0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(qd, k1, acc[r][1]);
                acc[r][2] = _mm512_fmadd_ps(qd, k2, acc[r][2]);
                acc[r][3] = _mm512_fmadd_ps(qd, k3, acc[r][3]);
            }
        }
        const __m512 factor = _mm512_set1_ps(scale);
        for (int r = 0; r < count; r++)
            for (int j = 0; j < 4; j++)
                _mm512_storeu_ps(line + (long)r * CHUNK + tb + 16 * j,
                                 _mm512_mul_ps(acc[r][j], factor));
    }
#else
    for (int tb = 0; tb < padded; tb += SCORE_KEYS) {
        float acc[PV_ROWS][SCORE_KEYS];
        for (int r = 0; r < count; r++)
            for (int l = 0; l < SCORE_KEYS; l++) acc[r][l] = 0.0f;
        for (int d = 0; d < dim; d++) {
            const float *k = kt + (long)d * CHUNK + tb;
            for (int r = 0; r < count; r++) {
                const float qd = query[(long)r * dim + d];
                for (int l = 0; l < SCORE_KEYS; l++) acc[r][l] += qd * k[l];
            }
        }
        for (int r = 0; r < count; r++)
            for (int l = 0; l < SCORE_KEYS; l++) line[(long)r * CHUNK + tb + l] = acc[r][l] * scale;
    }
#endif
}

#ifdef __AVX512F__
/* r[i] lane j -> r[j] lane i: a 16x16 tile of floats transposed in registers. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}
#endif

/* kt [dim][CHUNK] = the keys' dimensions at ``at`` .. at + dim - 1, key t in column t, zero past
 * the n keys up to ``padded``: 16x16 tiles in registers where the sizes allow, a scalar copy (one
 * store per value, each on another cache line) otherwise. With ``half_keys`` (only where the
 * tiles run) the keys are read from the float16 pool and widened in registers. */
static inline void transpose_keys(const float *const *keys, const uint16_t *const *half_keys,
                                  int n, int padded, long at, int dim, float *kt) {
#ifdef __AVX512F__
    if (dim % 16 == 0) {
        for (int t0 = 0; t0 < padded; t0 += 16)
            for (int d0 = 0; d0 < dim; d0 += 16) {
                __m512 r[16];
                for (int i = 0; i < 16; i++)
                    if (t0 + i >= n)
                        r[i] = _mm512_setzero_ps();
                    else if (half_keys != NULL)
                        r[i] = _mm512_cvtph_ps(
                            _mm256_loadu_si256((const __m256i *)(half_keys[t0 + i] + at + d0)));
                    else
                        r[i] = _mm512_loadu_ps(keys[t0 + i] + at + d0);
                transpose16(r);
                for (int j = 0; j < 16; j++)
                    _mm512_store_ps(kt + (long)(d0 + j) * CHUNK + t0, r[j]);
            }
        return;
    }
#endif
    for (int t = 0; t < padded; t++) {
        const float *k = t < n ? keys[t] + at : NULL;
        for (int d = 0; d < dim; d++) kt[(long)d * CHUNK + t] = k ? k[d] : 0.0f;
    }
}

/* Scores of a run of several new tokens (a prompt's tile): each KV head's keys transposed once,
 * so every query row's dot products run along the keys, with no horizontal sums. */
static inline __attribute__((always_inline)) void prompt_scores(
    const float *q, const float *const *keys, const uint16_t *const *half_keys, int n,
    int kv_heads, int heads, const int dim, int tokens, int begin, int first_position,
    float scale, float *scores) {
    static __thread float kt[MAX_DIM * CHUNK] __attribute__((aligned(64)));
    const int group = heads / kv_heads;
    const int padded = (n + SCORE_KEYS - 1) / SCORE_KEYS * SCORE_KEYS; /* <= CHUNK */
    for (int g = 0; g < kv_heads; g++) {
        transpose_keys(keys, half_keys, n, padded, (long)g * dim, dim, kt);
        for (int i = 0; i < tokens; i++) {
            for (int h = g * group; h < (g + 1) * group;) {
                const int count = (g + 1) * group - h < PV_ROWS ? (g + 1) * group - h : PV_ROWS;
                const float *query = q + ((long)i * heads + h) * dim;
                float *line = scores + ((long)i * heads + h) * CHUNK;
#define SCORE(c) score_rows(query, kt, padded, dim, c, scale, line)
                if (count == 1)
                    SCORE(1);
                else if (count == 2)
                    SCORE(2);
                else if (count == 3)
                    SCORE(3);
                else
                    SCORE(4);
#undef SCORE
                h += count;
            }
        }
    }
    /* Keys past each token's position (later tokens of the tile) are masked out. */
    for (int i = 0; i < tokens; i++) {
        const int visible = first_position + i - begin + 1;
        for (int h = 0; h < heads; h++) {
            float *line = scores + ((long)i * heads + h) * CHUNK;
            for (int t = visible < 0 ? 0 : visible; t < n; t++) line[t] = -INFINITY;
        }
    }
}

#ifdef __AVX512F__
/* One cached token of a float16 pool against one new token's heads (``dim`` a multiple of 16,
 * at most MAX_DIM): each KV head's key is widened in registers and meets the ``group`` query
 * heads that share it there. Inlined with a constant ``dim``. */
static inline __attribute__((always_inline)) void score_half_key(const float *q,
                                                                 const uint16_t *key,
                                                                 int kv_heads, int group,
                                                                 const int dim, float scale,
                                                                 float *score) {
    const int parts = dim / 16;
    for (int g = 0; g < kv_heads; g++) {
        const uint16_t *kg = key + (long)g * dim;
        __m512 k[MAX_DIM / 16];
        for (int j = 0; j < parts; j++)
            k[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kg + 16 * j)));
        for (int h = g * group; h < (g + 1) * group; h++) {
            const float *qh = q + (long)h * dim;
            __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qh), k[0]);
            for (int j = 1; j < parts; j++)
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * j), k[j], acc);
            score[(long)h * CHUNK] = _mm512_reduce_add_ps(acc) * scale;
        }
    }
}
#endif

/* One chunk of one sequence: for each query row (token i, head h; row = i * heads + h), the
 * partial max, sum and unnormalized output, written to partial + i * slot_size + h * (dim + 2).
 * Inlined with a constant ``dim`` (64, 128) so the per-token dot products and the output rows
 * unroll into registers. */
static inline __attribute__((always_inline)) void attend_chunk_dim(
    const float *q, const void *k_pool, const void *v_pool, const int32_t *table, int begin,
    int end, int block_size, int kv_heads, int heads, const int dim, int tokens,
    int first_position, float scale, float *partial, long slot_size, int half) {
    static __thread float scores[CHUNK * MAX_ROWS];
    static __thread const void *values[CHUNK];
    const int group = heads / kv_heads, rows = heads * tokens, n = end - begin;
    const long token_stride = (long)kv_heads * dim;
    const long block_stride = (long)block_size * token_stride;
    int block = begin / block_size, offset = begin % block_size;
    static __thread const float *keys[CHUNK];
    static __thread const uint16_t *half_keys[CHUNK];
    static __thread float wide_keys[CHUNK * MAX_KV], wide_values[CHUNK * MAX_KV];
    /* One new token over a float16 pool: its keys scored as they are read. */
#ifdef __AVX512F__
    const int direct = half && tokens == 1 && dim % 16 == 0 && dim <= MAX_DIM;
    /* Several new tokens over a float16 pool: the keys are widened as they are transposed. */
    const int tiled =
        half && !direct && tokens >= HALF_PROMPT_TOKENS && dim % 16 == 0 && dim <= MAX_DIM;
    /* One new token over a float16 pool: the weighted sum widens each value in registers as it
     * reads it, once, instead of a copy of the chunk's values to float32 first. (Several new
     * tokens read each value once per token, so those keep the copy.) */
    const int half_values = direct && dim % 64 == 0;
#else
    const int direct = 0, tiled = 0, half_values = 0;
#endif
    for (int t = 0; t < n; t++) {
        const long at = table[block] * block_stride + offset * token_stride;
        if (half && t + AHEAD < n) {
            /* The token AHEAD rows on, found through the block table. */
            const int ahead = offset + AHEAD;
            const long next = table[block + ahead / block_size] * block_stride +
                              (ahead % block_size) * token_stride;
            const char *kp = (const char *)((const uint16_t *)k_pool + next);
            const char *vp = (const char *)((const uint16_t *)v_pool + next);
            for (long b = 0; b < token_stride * (long)sizeof(uint16_t); b += 64) {
                _mm_prefetch(kp + b, _MM_HINT_T0);
                _mm_prefetch(vp + b, _MM_HINT_T0);
            }
        }
        if (half) {
            if (tiled)
                half_keys[t] = (const uint16_t *)k_pool + at;
            else if (!direct)
                widen((const uint16_t *)k_pool + at, wide_keys + t * token_stride, token_stride);
            if (half_values)
                values[t] = (const uint16_t *)v_pool + at;
            else
                widen((const uint16_t *)v_pool + at, wide_values + t * token_stride, token_stride);
#ifdef __AVX512F__
            if (direct)
                score_half_key(q, (const uint16_t *)k_pool + at, kv_heads, group, dim, scale,
                               scores + t);
#endif
            keys[t] = wide_keys + t * token_stride;
            if (!half_values) values[t] = wide_values + t * token_stride;
        } else {
            keys[t] = (const float *)k_pool + at;
            values[t] = (const float *)v_pool + at;
        }
        if (++offset == block_size) {
            offset = 0;
            block++;
        }
    }
    if (direct) {
        /* scored above, as the keys were read */
    } else if ((tiled || tokens >= PROMPT_TOKENS) && dim <= MAX_DIM) {
        prompt_scores(q, keys, tiled ? half_keys : NULL, n, kv_heads, heads, dim, tokens, begin,
                      first_position, scale, scores);
    } else {
        for (int t = 0; t < n; t++) {
            const int position = begin + t;
            const float *key = keys[t];
            if (!half && t + AHEAD < n) { /* decode reads the pool at memory bandwidth */
                const char *kp = (const char *)keys[t + AHEAD];
                const char *vp = (const char *)values[t + AHEAD];
                for (long b = 0; b < token_stride * (long)sizeof(float); b += 64) {
                    _mm_prefetch(kp + b, _MM_HINT_T0);
                    _mm_prefetch(vp + b, _MM_HINT_T1);
                }
            }
            for (int i = 0; i < tokens; i++) {
                float *score = scores + (long)i * heads * CHUNK + t;
                if (position > first_position + i) {
                    for (int h = 0; h < heads; h++) score[h * CHUNK] = -INFINITY;
                    continue;
                }
                const float *query = q + (long)i * heads * dim;
                for (int h = 0; h < heads; h++) {
                    const float *k = key + (long)(h / group) * dim, *qh = query + (long)h * dim;
                    float dot = 0.0f;
                    for (int d = 0; d < dim; d++) dot += qh[d] * k[d];
                    score[h * CHUNK] = dot * scale;
                }
            }
        }
    }
    for (int row = 0; row < rows; row++) {
        float *line = scores + row * CHUNK;
        const float high = line_max(line, n);
        float total = 0.0f;
        if (high == -INFINITY) {
            for (int t = 0; t < n; t++) line[t] = 0.0f;
        } else {
            for (int t = 0; t < n; t++) {
                line[t] = exp_nonpositive(line[t] - high);
                total += line[t];
            }
        }
        float *slot = partial + (row / heads) * slot_size + (long)(row % heads) * (dim + 2);
        slot[0] = high;
        slot[1] = total;
    }
    /* Weighted values: runs of up to PV_ROWS rows of one token that share a KV head, their
     * sums kept in registers while the chunk's values stream past once per run. */
    for (int first = 0; first < rows;) {
        const int i = first / heads, g = (first % heads) / group;
        int count = 1;
        while (count < PV_ROWS && first + count < rows && (first + count) / heads == i &&
               ((first + count) % heads) / group == g)
            count++;
        const float *weights = scores + (long)first * CHUNK;
        if (half_values)
            weigh_run(weights, values, n, g, dim, count, partial, slot_size, first, heads, 1);
        else
            weigh_run(weights, values, n, g, dim, count, partial, slot_size, first, heads, 0);
        first += count;
    }
}

static void attend_chunk(const float *q, const void *k_pool, const void *v_pool,
                         const int32_t *table, int begin, int end, int block_size, int kv_heads,
                         int heads, int dim, int tokens, int first_position, float scale,
                         float *partial, long slot_size, int half) {
#define ATTEND(d) attend_chunk_dim(q, k_pool, v_pool, table, begin, end, block_size, kv_heads, \
                                   heads, d, tokens, first_position, scale, partial, slot_size, \
                                   half)
    if (dim == 64)
        ATTEND(64);
    else if (dim == 128)
        ATTEND(128);
    else
        ATTEND(dim);
#undef ATTEND
}

/* Returns 0, or -1 when the shapes are outside what this kernel handles (the caller falls back). */
int paged_decode(const float *q, const void *k_pool, const void *v_pool, const int32_t *tables,
                 const int32_t *starts, const int32_t *lengths, float *out, float *scratch,
                 int seqs, int width, int heads, int kv_heads, int dim, int block_size,
                 float scale, int threads, int half) {
    if (kv_heads <= 0 || heads % kv_heads != 0 || dim <= 0) return -1;
    if (half && (!paged_decode_half() || (long)kv_heads * dim > MAX_KV)) return -1;
    /* first[s]: the sequence's first chunk; slot[s]: its first (chunk, token) slot. */
    long first[seqs + 1], slot[seqs + 1];
    first[0] = slot[0] = 0;
    for (int s = 0; s < seqs; s++) {
        const int tokens = starts[s + 1] - starts[s];
        if (tokens < 1 || tokens * heads > MAX_ROWS || lengths[s] < tokens ||
            lengths[s] > width * block_size)
            return -1;
        first[s + 1] = first[s] + chunks_of(lengths[s]);
        slot[s + 1] = slot[s] + (long)chunks_of(lengths[s]) * tokens;
    }
    const long slot_size = (long)heads * (dim + 2);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (long item = 0; item < first[seqs]; item++) {
        int s = 0;
        while (first[s + 1] <= item) s++;
        const int c = (int)(item - first[s]);
        const int tokens = starts[s + 1] - starts[s];
        const int begin = c * CHUNK;
        const int end = begin + CHUNK < lengths[s] ? begin + CHUNK : lengths[s];
        attend_chunk(q + (long)starts[s] * heads * dim, k_pool, v_pool, tables + (long)s * width,
                     begin, end, block_size, kv_heads, heads, dim, tokens, lengths[s] - tokens,
                     scale, scratch + (slot[s] + (long)c * tokens) * slot_size, slot_size, half);
    }
#pragma omp parallel for num_threads(threads)
    for (long task = 0; task < (long)starts[seqs] * heads; task++) {
        const long token = task / heads;
        const int h = (int)(task % heads);
        int s = 0;
        while (starts[s + 1] <= token) s++;
        const int tokens = starts[s + 1] - starts[s], i = (int)(token - starts[s]);
        const int chunks = (int)(first[s + 1] - first[s]);
        float high = -INFINITY;
        for (int c = 0; c < chunks; c++) {
            const float m = scratch[(slot[s] + (long)c * tokens + i) * slot_size + (long)h * (dim + 2)];
            high = m > high ? m : high;
        }
        float *target = out + task * dim;
        memset(target, 0, sizeof(float) * dim);
        float total = 0.0f;
        for (int c = 0; c < chunks; c++) {
            const float *part = scratch + (slot[s] + (long)c * tokens + i) * slot_size + (long)h * (dim + 2);
            if (part[0] == -INFINITY) continue;
            const float factor = expf(part[0] - high);
            total += part[1] * factor;
            for (int d = 0; d < dim; d++) target[d] += part[2 + d] * factor;
        }
        const float inverse = 1.0f / total;
        for (int d = 0; d < dim; d++) target[d] *= inverse;
    }
    return 0;
}
