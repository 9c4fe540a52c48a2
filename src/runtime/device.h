/* Finding OpenCL devices and reading their facts (device.c). */
#ifndef CLATTN_DEVICE_H
#define CLATTN_DEVICE_H

#include "base/errors.h"

/* Resolves a device spec (see clattn_context_params.device; NULL/"" = default rules). Failures
 * are recorded on ctx (which may be NULL). */
clattn_status clattn__select_device(clattn_context *ctx, const char *spec, cl_device_id *device,
                                    cl_platform_id *platform);
/* Reads the facts of `device` into *info. */
clattn_status clattn__query_device_info(clattn_context *ctx, cl_device_id device,
                                        clattn_device_info *info);

#endif /* CLATTN_DEVICE_H */
