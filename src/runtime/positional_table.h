/* The paper's sinusoidal table on the device (positional_table.c): computed on the host in double
 * precision, kept in the context and grown on demand. */
#ifndef CLATTN_POSITIONAL_TABLE_H
#define CLATTN_POSITIONAL_TABLE_H

#include "base/errors.h"

typedef struct clattn_positional_table {
    cl_mem mem;              /* [positions, dim] */
    size_t positions, dim;
} clattn_positional_table;

/* The device's table with at least `positions` rows of width d. */
clattn_status clattn__positional_table(clattn_context *ctx, size_t positions, size_t d,
                                       cl_mem *table);
void clattn__positional_table_release(clattn_positional_table *table);

#endif /* CLATTN_POSITIONAL_TABLE_H */
