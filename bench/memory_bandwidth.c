// Memory bandwidth, STREAM style: a read sweep (sum of a float array) and the triad
// (a[i] = b[i] + s * c[i] over doubles), each timed `reps` times over arrays this code allocates
// and first touches on the threads that then read them. Compiled by bench/memory_bandwidth.py
// with the engine's flags (-O3 -march=native -ffast-math -fopenmp): the read loop vectorizes
// to the CPU's widest loads, as the engine's kernels do.
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static double now(void) { return omp_get_wtime(); }

static void *aligned(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 4096, bytes) == 0 ? p : NULL;
}

// Seconds of each of `reps` sweeps over `count` floats into seconds[]; 0 on success.
// `sink` receives the sums so the compiler keeps the reads.
int read_sweep(long count, int threads, int reps, double *seconds, double *sink) {
    float *a = aligned((size_t)count * sizeof(float));
    if (a == NULL) return 1;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < count; i++) a[i] = (float)(i & 1023) * 1e-3f;
    double total = 0.0;
    for (int r = 0; r < reps; r++) {
        double start = now();
        float sum = 0.0f;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : sum)
        for (long i = 0; i < count; i++) sum += a[i];
        seconds[r] = now() - start;
        total += sum;
    }
    *sink = total;
    free(a);
    return 0;
}

// Seconds of each of `reps` triads over `count` doubles per array into seconds[]; 0 on success.
int triad(long count, int threads, int reps, double *seconds, double *sink) {
    double *a = aligned((size_t)count * sizeof(double));
    double *b = aligned((size_t)count * sizeof(double));
    double *c = aligned((size_t)count * sizeof(double));
    if (a == NULL || b == NULL || c == NULL) {
        free(a);
        free(b);
        free(c);
        return 1;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < count; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    const double s = 3.0;
    for (int r = 0; r < reps; r++) {
        double start = now();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long i = 0; i < count; i++) a[i] = b[i] + s * c[i];
        seconds[r] = now() - start;
    }
    *sink = a[count / 2];
    free(a);
    free(b);
    free(c);
    return 0;
}
