/* The batch plan of embed_batches.h: a shortest path over the sorted texts. */
#include "embed_batches.h"

#include <stdbool.h>
#include <stdlib.h>

double embed_batch_overhead(const clattn_device_info *device)
{
    double units = device && device->compute_units ? (double)device->compute_units : 1.0;
    bool cpu = device && device->type == CLATTN_DEVICE_TYPE_CPU;
    return units * (cpu ? 4.0 : 64.0);
}

static double batch_cost(const embed_batch_costs *costs, size_t texts, size_t longest)
{
    double padded = (double)texts * (double)longest;
    double busy = padded > costs->overhead ? padded : costs->overhead;
    double width = costs->attention_width > 0 ? costs->attention_width : 1.0;
    return costs->overhead + busy * (1.0 + (double)longest / width);
}

/*
 * best[j]: the least cost of the first j sorted texts in whole batches; the last batch of that
 * plan starts at start[j]. A batch ending at text j - 1 has its longest there (the lengths are
 * sorted), so best[j] = min over its size c of best[j - c] + cost(c, lengths[j - 1]): O(count ·
 * max_texts). Among equal costs the larger batch wins (fewer launches for the same work).
 */
size_t embed_batches_plan(const size_t *sorted_lengths, size_t count,
                          const embed_batch_costs *costs, size_t *ends)
{
    if (count == 0)
        return 0;
    size_t max_texts = costs->max_texts ? costs->max_texts : 1;
    double *best = malloc((count + 1) * sizeof(double));
    size_t *start = malloc((count + 1) * sizeof(size_t));
    if (!best || !start) {
        free(best), free(start);
        return (size_t)-1;
    }
    best[0] = 0.0, start[0] = 0;
    for (size_t j = 1; j <= count; j++) {
        size_t longest = sorted_lengths[j - 1];
        best[j] = -1.0, start[j] = j - 1;
        for (size_t c = 1; c <= j && c <= max_texts; c++) {
            if (c > 1 && c * longest > costs->max_padded_tokens)
                break;
            double cost = best[j - c] + batch_cost(costs, c, longest);
            if (best[j] < 0 || cost <= best[j])
                best[j] = cost, start[j] = j - c;
        }
    }
    /* Walk back from the end, then reverse the ends into order. */
    size_t batches = 0;
    for (size_t j = count; j > 0; j = start[j])
        ends[batches++] = j;
    for (size_t i = 0; i < batches / 2; i++) {
        size_t swap = ends[i];
        ends[i] = ends[batches - 1 - i], ends[batches - 1 - i] = swap;
    }
    free(best), free(start);
    return batches;
}
