/* The per-sequence random generator of sampling: SplitMix64 (sampling_random.h). */
#include "sampling_random.h"

static const uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;

/* SplitMix64's output function: a bijection of 64-bit words with good avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void clattn__sampling_random_init(clattn_sampling_random *r, uint64_t seed, uint64_t sequence)
{
    r->start = mix64(seed ^ mix64(sequence + golden_gamma));
    r->draws = 0;
}

uint64_t clattn__sampling_random_next(clattn_sampling_random *r)
{
    r->draws++;
    return mix64(r->start + r->draws * golden_gamma);
}

double clattn__sampling_random_uniform(clattn_sampling_random *r)
{
    return (double)(clattn__sampling_random_next(r) >> 11) * 0x1.0p-53;
}
