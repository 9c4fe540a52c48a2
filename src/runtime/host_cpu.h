/* The CPU this process runs on, for the devices whose kernels run on it too (host_cpu.c): whether
 * a device is PoCL's CPU device, and the CPU's instruction-set extensions (CPUID). */
#ifndef CLATTN_HOST_CPU_H
#define CLATTN_HOST_CPU_H

#include <stdbool.h>

#include "clattn/context.h"

/* PoCL's CPU device (a CPU device on the platform named "Portable Computing Language"): its
 * kernels are compiled for, and run on, this process's CPU. */
bool clattn__is_pocl_cpu(const clattn_device_info *info);

/* Instruction-set extensions, each named as CPUID's leaf 7 names its bit. */
typedef enum clattn_cpu_feature {
    CLATTN_CPU_AVX512_VNNI, /* subleaf 0, ECX bit 11 */
    CLATTN_CPU_AVX512_BF16, /* subleaf 1, EAX bit 5 */
    CLATTN_CPU_AVX_VNNI,    /* subleaf 1, EAX bit 4 */
    CLATTN_CPU_AMX_BF16,    /* subleaf 0, EDX bit 22 */
    CLATTN_CPU_AMX_TILE,    /* subleaf 0, EDX bit 24 */
    CLATTN_CPU_AMX_INT8,    /* subleaf 0, EDX bit 25 */
} clattn_cpu_feature;

/* Whether this process's CPU has `feature` (false on CPUs other than x86's). */
bool clattn__cpu_has(clattn_cpu_feature feature);

#endif /* CLATTN_HOST_CPU_H */
