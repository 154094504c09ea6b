/* Scalar math written so that loops over it vectorize (no libm calls in the loop body). */
#ifndef CLAWLOOP_VECTOR_MATH_C
#define CLAWLOOP_VECTOR_MATH_C

#include <math.h>
#include <stdint.h>

/* exp(x) for x <= 0 (scores minus their maximum), vectorizable: x = n ln2 + r with ln2 split in
 * two (Cody and Waite), exp(r) by Cephes' expf polynomial, times 2^n; 0 below -87. */
static inline float exp_nonpositive(float x) {
    const float clamped = x < -87.0f ? -87.0f : x;
    const float n = __builtin_roundf(clamped * 1.44269504089f);
    const float r = fmaf(n, 2.12194440e-4f, fmaf(-n, 0.693359375f, clamped));
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        float f;
        int32_t i;
    } scale = {.i = ((int32_t)n + 127) << 23};
    return x < -87.0f ? 0.0f : p * scale.f;
}

/* g / (1 + exp(-g)), from exp(-|g|) so that the exponential never overflows. */
static inline float silu(float g) {
    const float e = exp_nonpositive(-fabsf(g));
    const float sigmoid = g >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    return g * sigmoid;
}

#endif
