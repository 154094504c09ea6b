/* Decode attention straight over the paged KV pool: no per-step copy of any context.
 *
 * One query token per sequence attends over that sequence's cached keys and values, read in
 * place from the block pool through its block table. The query heads that share a KV head are
 * computed together, so each key and value row is read once per KV head. Long contexts are cut
 * into chunks that run in parallel, each keeping a partial softmax (its maximum, its sum and its
 * weighted values), merged at the end as flash-decoding does.
 *
 * Layouts (float32, row-major, contiguous):
 *   q, out        [seqs, heads, dim]
 *   k_pool, v_pool [blocks, block_size, kv_heads, dim]
 *   tables        [seqs, width] int32 block ids;  lengths [seqs] int32 context lengths (>= 1)
 *   scratch       floats, at least paged_decode_scratch(...) of them
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define CHUNK 256

static int chunks_of(int length) { return (length + CHUNK - 1) / CHUNK; }

long paged_decode_scratch(int seqs, const int32_t *lengths, int heads, int dim) {
    long chunks = 0;
    for (int s = 0; s < seqs; s++) chunks += chunks_of(lengths[s]);
    return chunks * (long)heads * (dim + 2);
}

/* One chunk of one (sequence, KV head): partial max, sum and unnormalized output per query row. */
static void attend_chunk(const float *q, const float *k_pool, const float *v_pool,
                         const int32_t *table, int begin, int end, int block_size, int kv_heads,
                         int dim, int rows, float scale, float *partial) {
    float scores[CHUNK * 16];
    const long token_stride = (long)kv_heads * dim;
    const long block_stride = (long)block_size * token_stride;
    const int n = end - begin;
    for (int t = 0; t < n; t++) {
        const int position = begin + t;
        const float *key = k_pool + table[position / block_size] * block_stride +
                           (position % block_size) * token_stride;
        for (int r = 0; r < rows; r++) {
            const float *query = q + (long)r * dim;
            float dot = 0.0f;
            for (int d = 0; d < dim; d++) dot += query[d] * key[d];
            scores[r * CHUNK + t] = dot * scale;
        }
    }
    for (int r = 0; r < rows; r++) {
        float *row = scores + r * CHUNK;
        float high = row[0];
        for (int t = 1; t < n; t++) high = row[t] > high ? row[t] : high;
        float total = 0.0f;
        for (int t = 0; t < n; t++) {
            row[t] = expf(row[t] - high);
            total += row[t];
        }
        float *slot = partial + (long)r * (dim + 2);
        slot[0] = high;
        slot[1] = total;
        memset(slot + 2, 0, sizeof(float) * dim);
    }
    for (int t = 0; t < n; t++) {
        const int position = begin + t;
        const float *value = v_pool + table[position / block_size] * block_stride +
                             (position % block_size) * token_stride;
        for (int r = 0; r < rows; r++) {
            const float weight = scores[r * CHUNK + t];
            float *acc = partial + (long)r * (dim + 2) + 2;
            for (int d = 0; d < dim; d++) acc[d] += weight * value[d];
        }
    }
}

/* Returns 0, or -1 when the shapes are outside what this kernel handles (the caller falls back). */
int paged_decode(const float *q, const float *k_pool, const float *v_pool, const int32_t *tables,
                 const int32_t *lengths, float *out, float *scratch, int seqs, int width,
                 int heads, int kv_heads, int dim, int block_size, float scale, int threads) {
    if (kv_heads <= 0 || heads % kv_heads != 0 || heads / kv_heads > 16 || dim <= 0) return -1;
    const int rows = heads / kv_heads;
    /* Work items: every (sequence, chunk) pair, each for every KV head. */
    long first[seqs + 1];
    first[0] = 0;
    for (int s = 0; s < seqs; s++) {
        if (lengths[s] < 1 || lengths[s] > width * block_size) return -1;
        first[s + 1] = first[s] + chunks_of(lengths[s]);
    }
    const long items = first[seqs] * kv_heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (long item = 0; item < items; item++) {
        const long flat = item / kv_heads;
        const int g = (int)(item % kv_heads);
        int s = 0;
        while (first[s + 1] <= flat) s++;
        const int c = (int)(flat - first[s]);
        const int begin = c * CHUNK;
        const int end = begin + CHUNK < lengths[s] ? begin + CHUNK : lengths[s];
        float *partial = scratch + (flat * heads + (long)g * rows) * (dim + 2);
        attend_chunk(q + ((long)s * heads + (long)g * rows) * dim, k_pool + (long)g * dim,
                     v_pool + (long)g * dim, tables + (long)s * width, begin, end, block_size,
                     kv_heads, dim, rows, scale, partial);
    }
#pragma omp parallel for num_threads(threads)
    for (long task = 0; task < (long)seqs * heads; task++) {
        const int s = (int)(task / heads), h = (int)(task % heads);
        float high = -INFINITY;
        for (long c = first[s]; c < first[s + 1]; c++) {
            const float m = scratch[(c * heads + h) * (dim + 2)];
            high = m > high ? m : high;
        }
        float *target = out + task * dim;
        memset(target, 0, sizeof(float) * dim);
        float total = 0.0f;
        for (long c = first[s]; c < first[s + 1]; c++) {
            const float *slot = scratch + (c * heads + h) * (dim + 2);
            const float factor = expf(slot[0] - high);
            total += slot[1] * factor;
            for (int d = 0; d < dim; d++) target[d] += slot[2 + d] * factor;
        }
        const float inverse = 1.0f / total;
        for (int d = 0; d < dim; d++) target[d] *= inverse;
    }
    return 0;
}
