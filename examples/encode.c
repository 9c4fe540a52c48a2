/* encode: runs a Transformer encoder on an OpenCL device (see README.md and DESIGN.md §6). */
#include <clattn/clattn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: encode [--device SPEC] [--list-devices]\n"
            "  --device SPEC     gpu, cpu, P:D or part of a device name (default: CLATTN_DEVICE,\n"
            "                    else the first GPU, else the first CPU)\n"
            "  --list-devices    print every OpenCL platform and device, then exit\n");
}

static int list_devices(void)
{
    size_t count = 0;
    if (clattn_list_devices(NULL, 0, &count) != CLATTN_OK) {
        fprintf(stderr, "encode: %s\n", clattn_last_error(NULL));
        return 1;
    }
    clattn_device_info *infos = calloc(count ? count : 1, sizeof(*infos));
    if (!infos || clattn_list_devices(infos, count, &count) != CLATTN_OK) {
        fprintf(stderr, "encode: %s\n", infos ? clattn_last_error(NULL) : "out of memory");
        free(infos);
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        const clattn_device_info *d = &infos[i];
        printf("[%u:%u] %s\n", d->platform_index, d->device_index, d->name);
        printf("    platform:          %s\n", d->platform_name);
        printf("    vendor:            %s\n", d->vendor);
        printf("    driver version:    %s\n", d->driver_version);
        printf("    OpenCL version:    %s\n", d->opencl_version);
        printf("    type:              %s\n", clattn_device_type_name(d->type));
        printf("    compute units:     %u\n", d->compute_units);
        printf("    max clock:         %u MHz\n", d->max_clock_mhz);
        printf("    global memory:     %.1f MiB\n", (double)d->global_mem_bytes / 1048576.0);
        printf("    local memory:      %.1f KiB (%s)\n", (double)d->local_mem_bytes / 1024.0,
               d->local_mem_is_global ? "emulated in global memory" : "dedicated");
        printf("    max allocation:    %.1f MiB\n", (double)d->max_alloc_bytes / 1048576.0);
        printf("    max work-group:    %zu\n", d->max_work_group_size);
        printf("    fp16:              %s\n", d->fp16 ? "yes" : "no");
        printf("    fp64:              %s\n", d->fp64 ? "yes" : "no");
    }
    if (count == 0)
        printf("no OpenCL devices found\n");
    free(infos);
    return 0;
}

int main(int argc, char **argv)
{
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list-devices") == 0)
            return list_devices();
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
            continue;
        }
        fprintf(stderr, "encode: unknown option '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = device;
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, &params) != CLATTN_OK) {
        fprintf(stderr, "encode: %s\n", clattn_last_error(NULL));
        return 1;
    }
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    printf("device: %s (%s)\n", info.name, info.platform_name);
    clattn_context_destroy(&ctx);
    return 0;
}
