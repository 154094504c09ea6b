/* Every decoder layer of one short step (decode rows, a few forced tokens) in one call.
 *
 * A decode step of a small model is hundreds of tiny operations: at one row each PyTorch
 * operator costs more in dispatch than in arithmetic (about half of a step, measured on a
 * 2-core CPU). Here a layer is RMSNorm, the q|k|v projection on 4-bit groups (group_matmul.c),
 * rotary embeddings, the K/V store into the paged pool, attention over the pool
 * (paged_decode.c), the output projection and residual, RMSNorm, gate|up, SiLU times up, and
 * the down projection and residual, all on buffers carved once from one workspace.
 *
 * The projections are the 4-bit groups the PyTorch path runs (Int4Linear, in wide_matmul.c's
 * layout where the CPU has AVX-512 VNNI), or its bfloat16 weights (Bf16Linear), with their bias and
 * LoRA factors (y += (x down^T) up^T) where present; the arithmetic matches it operation for
 * operation, up to the order of float sums.
 *
 * Layouts: x [rows, hidden] float32, the embeddings in, the hidden states (before the final
 * norm) out; positions [rows] int32; slots [rows] int64 (block * block_size + offset);
 * cos, sin_signed [max_position, dim] (rotate-half: out = x cos + roll(x, dim / 2) sin_signed);
 * K/V pools [blocks, block_size, kv_heads, dim] (float32, or float16: kv_half); attention's
 * tables, starts and lengths as in paged_decode.c.
 */
#include "bf16_matmul.c"
#include "elementwise.c"
#include "paged_decode.c"
#include "wide_matmul.c"

typedef struct {
    const uint8_t *packed; /* [out, cols / 32, 16] */
    const float *scale, *low; /* [out, cols / 32] */
    /* The same groups in wide_matmul.c's layout, or NULL: [out / 16, cols / 32, 8, 16, 2], and
     * scale, low [out / 16, cols / 32, 16]. */
    const uint8_t *wide;
    const float *wide_scale, *wide_low;
    /* bfloat16 weights instead of groups (packed, scale and low NULL), in bf16_matmul.c's
     * layout [out / 16, cols / 2, 16, 2], or NULL. */
    const uint16_t *bf16;
    const float *bias; /* [out] or NULL */
    const float *down, *up; /* LoRA [rank, cols], [out, rank], or NULL */
    int out, cols, rank;
} Projection;

typedef struct {
    const float *input_norm, *post_norm; /* [hidden] */
    Projection qkv, o, gate_up, down;
    void *k_pool, *v_pool; /* float32, or float16 where the model's kv_half is set */
} Layer;

typedef struct {
    const Layer *layers;
    const float *cos, *sin_signed;
    int num_layers, hidden, heads, kv_heads, dim, intermediate, block_size, max_rank, kv_half;
    float eps, scale;
} Model;

/* One step's attention arguments (paged_decode.c's), shared by every layer. */
typedef struct {
    const int32_t *tables, *starts, *lengths;
    float *scratch; /* paged_decode_scratch(...) floats */
    int seqs, width;
} Attention;

typedef struct {
    float *residual, *normed, *qkv, *q, *attn, *proj, *gate_up, *act, *lora, *xs, *xsum;
    float *cos, *sin_signed; /* each row's rotary tables */
    int16_t *xq;
} Buffers;

static int widest(const Model *m) {
    const int a = m->hidden > m->intermediate ? m->hidden : m->intermediate;
    return a > m->heads * m->dim ? a : m->heads * m->dim;
}

static long qkv_width(const Model *m) { return (long)(m->heads + 2 * m->kv_heads) * m->dim; }

/* Bytes of workspace decode_step needs for ``rows`` rows. */
long decode_step_workspace(const Model *m, int rows) {
    const long floats = (long)rows * (m->hidden * 3L + 2L * m->dim + qkv_width(m) + 2L * m->heads * m->dim +
                                      3L * m->intermediate + m->max_rank) +
                        2L * rows * (widest(m) / GROUP) + 64;
    return floats * 4 + (long)rows * widest(m) * 2 + 256;
}

static Buffers carve(const Model *m, int rows, void *workspace) {
    float *f = (float *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    Buffers b;
    b.residual = f, f += (long)rows * m->hidden;
    b.cos = f, f += (long)rows * m->dim;
    b.sin_signed = f, f += (long)rows * m->dim;
    b.normed = f, f += (long)rows * m->hidden;
    b.qkv = f, f += (long)rows * qkv_width(m);
    b.q = f, f += (long)rows * m->heads * m->dim;
    b.attn = f, f += (long)rows * m->heads * m->dim;
    b.proj = f, f += (long)rows * m->hidden;
    b.gate_up = f, f += 2L * rows * m->intermediate;
    b.act = f, f += (long)rows * m->intermediate;
    b.lora = f, f += (long)rows * m->max_rank;
    b.xs = f, f += (long)rows * (widest(m) / GROUP);
    b.xsum = f, f += (long)rows * (widest(m) / GROUP);
    b.xq = (int16_t *)f;
    return b;
}

/* y [rows, out] = x [rows, cols] W^T over the 4-bit groups, in the wide layout where built,
 * or over the bfloat16 weights (the activations rounded to bfloat16 in xq's space). */
static int group_product(const Projection *p, const float *x, int rows, float *y,
                         const Buffers *b, int threads) {
    if (p->bf16 != NULL)
        return bf16_matmul(x, p->bf16, y, (uint16_t *)b->xq, rows, p->cols, p->out, threads);
#if PAIRS
    if (p->wide != NULL)
        return wide_q4_matmul(x, p->wide, p->wide_scale, p->wide_low, y, b->xq, b->xs, b->xsum,
                              rows, p->cols, p->out, threads);
#endif
    return q4_matmul(x, p->packed, p->scale, p->low, y, b->xq, b->xs, b->xsum, rows, p->cols,
                     p->out, threads);
}

/* y [rows, out] = x [rows, cols] W^T (+ bias) (+ (x down^T) up^T). */
static int project(const Projection *p, const float *x, int rows, float *y, const Buffers *b,
                   int threads) {
    if (group_product(p, x, rows, y, b, threads) != 0) return -1;
    if (p->bias != NULL)
        for (int r = 0; r < rows; r++)
            for (int o = 0; o < p->out; o++) y[(long)r * p->out + o] += p->bias[o];
    if (p->down == NULL) return 0;
    for (int r = 0; r < rows; r++) {
        const float *v = x + (long)r * p->cols;
        float *t = b->lora + (long)r * p->rank;
        for (int k = 0; k < p->rank; k++) {
            const float *d = p->down + (long)k * p->cols;
            float dot = 0.0f;
            for (int i = 0; i < p->cols; i++) dot += v[i] * d[i];
            t[k] = dot;
        }
        float *line = y + (long)r * p->out;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int o = 0; o < p->out; o++) {
            const float *u = p->up + (long)o * p->rank;
            float dot = 0.0f;
            for (int k = 0; k < p->rank; k++) dot += t[k] * u[k];
            line[o] += dot;
        }
    }
    return 0;
}

/* Rotate q and k heads of each row in place, and copy q out contiguously for attention. */
static void rotate_and_split(const Model *m, float *qkv, int rows, const Buffers *b,
                             int threads) {
    const long width = qkv_width(m), q_size = (long)m->heads * m->dim;
    rotate_rows(qkv, width, rows, m->heads + m->kv_heads, m->dim, b->cos, b->sin_signed,
                threads);
    for (int r = 0; r < rows; r++)
        memcpy(b->q + r * q_size, qkv + r * width, sizeof(float) * q_size);
}

static void store_kv(const Model *m, const Layer *layer, const float *qkv, int rows,
                     const int64_t *slots, int threads) {
    const long kv = (long)m->kv_heads * m->dim, q_size = (long)m->heads * m->dim;
    const long width = qkv_width(m);
#pragma omp parallel for schedule(static) num_threads(threads) if (rows >= PARALLEL_ROWS)
    for (int r = 0; r < rows; r++) {
        const float *k = qkv + r * width + q_size, *v = k + kv;
        if (m->kv_half) {
            narrow(k, (uint16_t *)layer->k_pool + slots[r] * kv, kv);
            narrow(v, (uint16_t *)layer->v_pool + slots[r] * kv, kv);
        } else {
            memcpy((float *)layer->k_pool + slots[r] * kv, k, sizeof(float) * kv);
            memcpy((float *)layer->v_pool + slots[r] * kv, v, sizeof(float) * kv);
        }
    }
}

/* The last layer's kept rows: attention outputs and residuals of rows keep[0..kept-1]
 * (ascending) moved to the first kept rows, in place. */
static void keep_rows(const Model *m, const Buffers *b, const int32_t *keep, int kept) {
    const long q_size = (long)m->heads * m->dim;
    for (int j = 0; j < kept; j++) {
        if (keep[j] == j) continue;
        memcpy(b->attn + j * q_size, b->attn + keep[j] * q_size, sizeof(float) * q_size);
        memcpy(b->residual + (long)j * m->hidden, b->residual + (long)keep[j] * m->hidden,
               sizeof(float) * m->hidden);
    }
}

/* Returns 0, or -1 when a shape is outside what the kernels handle (nothing is then written to
 * x; the K/V pools may hold this step's new entries, which the fallback rewrites).
 *
 * keep: with kept >= 0, the rows whose hidden states are read (ascending): the last layer stores
 * every row's keys and values, then runs its output projection and MLP on these rows alone,
 * and x's first kept rows receive their hidden states. kept < 0: every row. */
int decode_step(const Model *m, float *x, int rows, const int32_t *positions,
                const int64_t *slots, const Attention *a, void *workspace, int threads,
                const int32_t *keep, int kept) {
    const Buffers b = carve(m, rows, workspace);
    for (int j = 0; j < kept; j++)
        if (keep[j] < j || keep[j] >= rows || (j > 0 && keep[j] <= keep[j - 1])) return -1;
    long hidden = (long)rows * m->hidden;
    float *residual = b.residual;
    memcpy(residual, x, sizeof(float) * hidden);
    for (int r = 0; r < rows; r++) {
        const long at = (long)positions[r] * m->dim;
        memcpy(b.cos + (long)r * m->dim, m->cos + at, sizeof(float) * m->dim);
        memcpy(b.sin_signed + (long)r * m->dim, m->sin_signed + at, sizeof(float) * m->dim);
    }
    for (int l = 0; l < m->num_layers; l++) {
        const Layer *layer = m->layers + l;
        rms_norm(residual, layer->input_norm, m->eps, rows, m->hidden, b.normed, threads);
        if (project(&layer->qkv, b.normed, rows, b.qkv, &b, threads) != 0) return -1;
        rotate_and_split(m, b.qkv, rows, &b, threads);
        store_kv(m, layer, b.qkv, rows, slots, threads);
        if (paged_decode(b.q, layer->k_pool, layer->v_pool, a->tables, a->starts, a->lengths,
                         b.attn, a->scratch, a->seqs, a->width, m->heads, m->kv_heads, m->dim,
                         m->block_size, m->scale, threads, m->kv_half) != 0)
            return -1;
        if (l == m->num_layers - 1 && kept >= 0) {
            keep_rows(m, &b, keep, kept);
            rows = kept;
            hidden = (long)rows * m->hidden;
        }
        if (project(&layer->o, b.attn, rows, b.proj, &b, threads) != 0) return -1;
        add_into(residual, b.proj, hidden, threads);
        rms_norm(residual, layer->post_norm, m->eps, rows, m->hidden, b.normed, threads);
        if (project(&layer->gate_up, b.normed, rows, b.gate_up, &b, threads) != 0) return -1;
        silu_times(b.gate_up, rows, m->intermediate, b.act, threads);
        if (project(&layer->down, b.act, rows, b.proj, &b, threads) != 0) return -1;
        add_into(residual, b.proj, hidden, threads);
    }
    memcpy(x, residual, sizeof(float) * hidden);
    return 0;
}
