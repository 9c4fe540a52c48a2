/* Shape checks and the messages that name both shapes (shape.c). */
#ifndef CLATTN_SHAPE_H
#define CLATTN_SHAPE_H

#include <stdbool.h>

#include "clattn/attention.h"
#include "base/errors.h"

/* Writes "[2, 3, 4]" into buf. */
void clattn__format_shape(char *buf, size_t size, int ndim, const size_t *shape);
/* Fails with CLATTN_ERROR_SHAPE_MISMATCH ("<function>: <name> has shape [..] but must be
 * <meaning> = [..]") unless the shape (ndim, shape) is exactly `want`. */
clattn_status clattn__expect_shape(clattn_context *ctx, const char *function, const char *name,
                                   int ndim, const size_t *shape, int want_ndim,
                                   const size_t *want, const char *meaning);
/* For host weights: fails unless t is present (CLATTN_ERROR_FORMAT "<function>: missing tensor
 * <name>" when `missing_is_format`, else an invalid argument "<name> is required by the
 * configuration") with exactly the shape `want` (CLATTN_ERROR_SHAPE_MISMATCH "<function>:
 * <what> has shape [..] but the configuration needs [..]"). */
clattn_status clattn__expect_host_shape(clattn_context *ctx, const char *function,
                                        const char *what, const char *name,
                                        const clattn_host_tensor *t, int ndim, const size_t *want,
                                        int missing_is_format);

/* The layer number of a tensor name "<prefix><n>.<rest>" ("layers." in "layers.3.norm1.weight");
 * false for any other name (no digits, a sign, or more than 9 digits). */
bool clattn__layer_number(const char *name, const char *prefix, size_t *number);
/* Whether the layer numbers found in a file's tensor names (count of them, in any order, repeats
 * allowed; sorted in place) are exactly 0 to expected - 1. Writes what they are into buf for
 * messages: "no layers", "layer 0", "layers 0-5", "layers 0-2, 4, 7-9" (cut with "..." when buf
 * is too small). */
bool clattn__layers_are(size_t *numbers, size_t count, size_t expected, char *buf, size_t size);

#endif /* CLATTN_SHAPE_H */
