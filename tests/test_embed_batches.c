/*
 * The sentence model's batch plan (src/models/embed_batches.c): on random sorted lengths its
 * total cost equals the least cost of every partition into runs of consecutive texts, found by
 * exhaustive search here (an independent reference); its limits (texts, padded tokens) hold; the
 * plans a user would expect come out (clusters of lengths split apart, equal lengths in full
 * batches); the overhead follows the device's facts. No device is used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "models/embed_batches.h"

#include <stdbool.h>
#include <stdlib.h>

/* The modelled cost of the batch of sorted texts [first, end), as embed_batches.h states it. */
static double cost_of(const embed_batch_costs *c, const size_t *lengths, size_t first, size_t end)
{
    double texts = (double)(end - first), longest = (double)lengths[end - 1];
    double busy = texts * longest > c->overhead ? texts * longest : c->overhead;
    return c->overhead + busy * (1.0 + longest / c->attention_width);
}

static bool batch_allowed(const embed_batch_costs *c, const size_t *lengths, size_t first,
                          size_t end)
{
    size_t texts = end - first;
    return texts <= c->max_texts &&
           (texts == 1 || texts * lengths[end - 1] <= c->max_padded_tokens);
}

/* The plan's cost, checking that the ends are increasing, end at count and respect the limits. */
static double plan_cost(const embed_batch_costs *c, const size_t *lengths, size_t count,
                        const size_t *ends, size_t batches)
{
    assert_true(batches >= 1);
    assert_int_equal(ends[batches - 1], count);
    double total = 0;
    for (size_t b = 0, first = 0; b < batches; first = ends[b], b++) {
        assert_true(ends[b] > first);
        assert_true(batch_allowed(c, lengths, first, ends[b]));
        total += cost_of(c, lengths, first, ends[b]);
    }
    return total;
}

/* The least cost over all 2^(count-1) partitions (a bit set = a batch ends after that text). */
static double exhaustive_best(const embed_batch_costs *c, const size_t *lengths, size_t count)
{
    double best = -1;
    for (uint32_t cuts = 0; cuts < (1u << (count - 1)); cuts++) {
        double total = 0;
        bool ok = true;
        for (size_t first = 0, i = 0; i < count && ok; i++) {
            if (i == count - 1 || (cuts >> i & 1u)) {
                ok = batch_allowed(c, lengths, first, i + 1);
                total += cost_of(c, lengths, first, i + 1);
                first = i + 1;
            }
        }
        if (ok && (best < 0 || total < best))
            best = total;
    }
    return best;
}

static int by_value(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void test_plan_is_optimal_on_random_lengths(void **state)
{
    (void)state;
    srand(12345);
    size_t lengths[14], ends[14];
    for (int trial = 0; trial < 300; trial++) {
        size_t count = 1 + (size_t)rand() % 14;
        for (size_t i = 0; i < count; i++) /* short queries to long passages */
            lengths[i] = 3 + (size_t)rand() % (trial % 2 ? 40 : 300);
        qsort(lengths, count, sizeof(size_t), by_value);
        embed_batch_costs c = {.overhead = (double)(1 + rand() % 64),
                               .attention_width = 1152.0,
                               .max_texts = 1 + (size_t)rand() % 8,
                               .max_padded_tokens = 64 + (size_t)rand() % 1024};
        size_t batches = embed_batches_plan(lengths, count, &c, ends);
        double got = plan_cost(&c, lengths, count, ends, batches);
        double want = exhaustive_best(&c, lengths, count);
        assert_true(got <= want * (1 + 1e-12));
    }
}

/* Short and long texts (a server batch of mixed requests) go to separate batches. */
static void test_two_clusters_split_apart(void **state)
{
    (void)state;
    size_t lengths[32], ends[32];
    for (size_t i = 0; i < 32; i++)
        lengths[i] = i < 24 ? 12 + i % 3 : 250 + i;
    embed_batch_costs c = {.overhead = 8, .attention_width = 1152, .max_texts = 32,
                           .max_padded_tokens = 16384};
    size_t batches = embed_batches_plan(lengths, 32, &c, ends);
    bool boundary = false;
    for (size_t b = 0; b < batches; b++)
        boundary |= ends[b] == 24;
    assert_true(boundary);
    /* and the short ones are not cut into many: their lengths differ by at most 2 */
    assert_true(ends[0] == 24 || ends[1] == 24);
}

/* Equal lengths: as few batches as the limit on texts allows. */
static void test_equal_lengths_fill_batches(void **state)
{
    (void)state;
    size_t lengths[100], ends[100];
    for (size_t i = 0; i < 100; i++)
        lengths[i] = 20;
    embed_batch_costs c = {.overhead = 8, .attention_width = 1152, .max_texts = 32,
                           .max_padded_tokens = 16384};
    assert_int_equal(embed_batches_plan(lengths, 100, &c, ends), 4);
    c.max_padded_tokens = 100; /* 5 texts of 20 */
    assert_int_equal(embed_batches_plan(lengths, 100, &c, ends), 20);
}

/* A text longer than max_padded_tokens still gets a batch (of its own). */
static void test_text_longer_than_the_token_limit(void **state)
{
    (void)state;
    size_t lengths[3] = {10, 500, 600}, ends[3];
    embed_batch_costs c = {.overhead = 8, .attention_width = 1152, .max_texts = 32,
                           .max_padded_tokens = 256};
    size_t batches = embed_batches_plan(lengths, 3, &c, ends);
    assert_int_equal(batches, 3);
    assert_int_equal(ends[0], 1);
    assert_int_equal(ends[1], 2);
    assert_int_equal(ends[2], 3);
    assert_int_equal(embed_batches_plan(lengths, 0, &c, ends), 0);
}

static void test_overhead_from_device_facts(void **state)
{
    (void)state;
    clattn_device_info cpu = {.type = CLATTN_DEVICE_TYPE_CPU, .compute_units = 2};
    clattn_device_info gpu = {.type = CLATTN_DEVICE_TYPE_GPU, .compute_units = 132};
    assert_true(embed_batch_overhead(&cpu) == 8.0);
    assert_true(embed_batch_overhead(&gpu) == 132.0 * 64.0);
    assert_true(embed_batch_overhead(NULL) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_is_optimal_on_random_lengths),
        cmocka_unit_test(test_two_clusters_split_apart),
        cmocka_unit_test(test_equal_lengths_fill_batches),
        cmocka_unit_test(test_text_longer_than_the_token_limit),
        cmocka_unit_test(test_overhead_from_device_facts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
