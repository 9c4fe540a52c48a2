#include "ref_rotary.h"

#include <math.h>

void ref_rope_cos_sin(size_t p, size_t k, size_t r, double theta, double *cos_a, double *sin_a)
{
    float exponent = (float)(2 * k) / (float)r;
    float inv_freq = 1.0f / powf((float)theta, exponent);
    float position = (float)p;
    float angle = position * inv_freq;
    *cos_a = cos((double)angle);
    *sin_a = sin((double)angle);
}

void ref_rope(float *x, size_t B, size_t H, size_t N, size_t d, size_t r, bool interleaved,
              double theta, size_t pos0)
{
    for (size_t row = 0; row < B * H * N; row++) {
        float *v = x + row * d;
        size_t p = pos0 + row % N;
        for (size_t k = 0; k < r / 2; k++) {
            size_t a = interleaved ? 2 * k : k, b = interleaved ? 2 * k + 1 : k + r / 2;
            double c, s, xa = v[a], xb = v[b];
            ref_rope_cos_sin(p, k, r, theta, &c, &s);
            v[a] = (float)(xa * c - xb * s);
            v[b] = (float)(xb * c + xa * s);
        }
    }
}
