/* The elementwise parts of a decoder layer, on every thread for wide steps: RMSNorm (after a
 * residual add, in one pass), SiLU times up, and rotary embeddings in place. Shared by the fused step (decode_step.c) and, through ctypes, by
 * the PyTorch layers' prompt chunks on the CPU (native/elementwise.py).
 *
 * Layouts (float32, row-major): x, delta, out [rows, n] and w [n] for the norms; gate_up [rows, 2 * inter] (gate, then up), act [rows, inter];
 * x rows of ``stride`` floats whose first ``heads`` * dim are the heads to rotate; cos,
 * sin_signed [rows, dim] (each row's own position: out = x cos + roll(x, dim / 2) sin_signed).
 */
#ifndef CLAWLOOP_ELEMENTWISE_C
#define CLAWLOOP_ELEMENTWISE_C

#include "vector_math.c"

/* Steps of at least this many rows run their elementwise parts on every thread. */
#define PARALLEL_ROWS 16

/* out = x / sqrt(mean(x^2) + eps) * w, row by row, accumulated in float32 as transformers does. */
void rms_norm(const float *x, const float *w, float eps, int rows, int n, float *out,
              int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (rows >= PARALLEL_ROWS)
    for (int r = 0; r < rows; r++) {
        const float *v = x + (long)r * n;
        float total = 0.0f;
        for (int i = 0; i < n; i++) total += v[i] * v[i];
        const float inverse = 1.0f / sqrtf(total / n + eps);
        for (int i = 0; i < n; i++) out[(long)r * n + i] = v[i] * inverse * w[i];
    }
}

/* x += delta, then out = rms_norm(x): the residual add and the next norm in one pass per row. */
void add_rms_norm(float *x, const float *delta, const float *w, float eps, int rows, int n,
                  float *out, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (rows >= PARALLEL_ROWS)
    for (int r = 0; r < rows; r++) {
        float *v = x + (long)r * n;
        const float *d = delta + (long)r * n;
        float total = 0.0f;
        for (int i = 0; i < n; i++) {
            v[i] += d[i];
            total += v[i] * v[i];
        }
        const float inverse = 1.0f / sqrtf(total / n + eps);
        for (int i = 0; i < n; i++) out[(long)r * n + i] = v[i] * inverse * w[i];
    }
}

void add_into(float *x, const float *y, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= PARALLEL_ROWS * 512L)
    for (long i = 0; i < n; i++) x[i] += y[i];
}

void silu_times(const float *gate_up, int rows, int inter, float *act, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (rows >= PARALLEL_ROWS)
    for (int r = 0; r < rows; r++) {
        const float *g = gate_up + 2L * r * inter, *u = g + inter;
        float *line = act + (long)r * inter;
        for (int i = 0; i < inter; i++) line[i] = silu(g[i]) * u[i];
    }
}

void rotate_rows(float *x, long stride, int rows, int heads, int dim, const float *cos,
                 const float *sin_signed, int threads) {
    const int half = dim / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (rows >= PARALLEL_ROWS)
    for (int r = 0; r < rows; r++) {
        const float *c = cos + (long)r * dim, *s = sin_signed + (long)r * dim;
        float tmp[dim];
        for (int h = 0; h < heads; h++) {
            float *v = x + r * stride + (long)h * dim;
            for (int d = 0; d < dim; d++) tmp[d] = v[d];
            for (int d = 0; d < half; d++) v[d] = tmp[d] * c[d] + tmp[d + half] * s[d];
            for (int d = half; d < dim; d++) v[d] = tmp[d] * c[d] + tmp[d - half] * s[d];
        }
    }
}

#endif
