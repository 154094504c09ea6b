/* The elementwise parts of a decoder layer, on every thread for wide steps: SiLU times up, and
 * rotary embeddings in place. Shared by the fused step (decode_step.c) and, through ctypes, by
 * the PyTorch layers' prompt chunks on the CPU (native/elementwise.py).
 *
 * Layouts (float32, row-major): gate_up [rows, 2 * inter] (gate, then up), act [rows, inter];
 * x rows of ``stride`` floats whose first ``heads`` * dim are the heads to rotate; cos,
 * sin_signed [rows, dim] (each row's own position: out = x cos + roll(x, dim / 2) sin_signed).
 */
#ifndef CLAWLOOP_ELEMENTWISE_C
#define CLAWLOOP_ELEMENTWISE_C

#include "vector_math.c"

/* Steps of at least this many rows run their elementwise parts on every thread. */
#define PARALLEL_ROWS 16

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
