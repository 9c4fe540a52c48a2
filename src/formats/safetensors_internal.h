/* What the library reads of safetensors files beyond the public API (safetensors.c). */
#ifndef CLATTN_SAFETENSORS_INTERNAL_H
#define CLATTN_SAFETENSORS_INTERNAL_H

#include "clattn/safetensors.h"

/* As clattn_safetensors_read_floats, converting only the tensors called names[0 .. count): the
 * whole header is parsed and checked, and only their bytes are read, so a few small tensors of
 * a large file cost what they hold (a cross-encoder's classifier head beside its encoder). The
 * others are not in the result (a name the file lacks is simply absent; one of a dtype that is
 * not read is in left_out). Messages start with `function`. */
clattn_status clattn__safetensors_read_named(const char *function, clattn_safetensors **out,
                                             const char *path, const char *const *names,
                                             size_t count);

#endif /* CLATTN_SAFETENSORS_INTERNAL_H */
