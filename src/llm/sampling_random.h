/*
 * The random numbers of sampling: one generator per sequence, so that a sequence's tokens depend
 * only on its seed, its sequence key and its own draws, never on what other sequences run beside
 * it or in which order their draws interleave.
 *
 * The generator is SplitMix64 (the generator of Java's SplittableRandom): a 64-bit state that
 * advances by the odd constant 0x9E3779B97F4A7C15 at each draw, and an output that is the state
 * passed through a fixed bijective mix (xor-shifts and two multiplications). It is counter-based:
 * draw n of a stream is mix(start + (n + 1) · 0x9E3779B97F4A7C15), so a stream is only its
 * start and a count. A stream's start is mix(seed xor mix(sequence + 0x9E3779B97F4A7C15)): two
 * sequence keys under one seed, or two seeds, give unrelated streams. A uniform double in [0, 1)
 * is the draw's upper 53 bits times 2^-53.
 */
#ifndef CLATTN_LLM_SAMPLING_RANDOM_H
#define CLATTN_LLM_SAMPLING_RANDOM_H

#include <stdint.h>

/* One sequence's stream: where it started and how many numbers it has given. */
typedef struct clattn_sampling_random {
    uint64_t start;
    uint64_t draws;
} clattn_sampling_random;

/* The stream of (seed, sequence), at its first number. */
void clattn__sampling_random_init(clattn_sampling_random *r, uint64_t seed, uint64_t sequence);

/* The next 64 random bits. */
uint64_t clattn__sampling_random_next(clattn_sampling_random *r);

/* The next uniform double in [0, 1) (53 random bits). */
double clattn__sampling_random_uniform(clattn_sampling_random *r);

#endif /* CLATTN_LLM_SAMPLING_RANDOM_H */
