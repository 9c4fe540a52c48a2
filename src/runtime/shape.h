/* Shape checks and the messages that name both shapes (shape.c). */
#ifndef CLATTN_SHAPE_H
#define CLATTN_SHAPE_H

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

#endif /* CLATTN_SHAPE_H */
