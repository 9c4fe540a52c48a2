/* The CPU this process runs on: PoCL's CPU device and CPUID's leaf 7 (see host_cpu.h). */
#include "host_cpu.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

bool clattn__is_pocl_cpu(const clattn_device_info *info)
{
    return info->type == CLATTN_DEVICE_TYPE_CPU &&
           strstr(info->platform_name, "Portable Computing Language") != NULL;
}

bool clattn__cpu_has(clattn_cpu_feature feature)
{
#if defined(__x86_64__) || defined(__i386__)
    static const struct {
        unsigned subleaf, reg, bit; /* reg: 0 EAX, 2 ECX, 3 EDX */
    } where[] = {
        [CLATTN_CPU_AVX512_VNNI] = {0, 2, 11}, [CLATTN_CPU_AVX512_BF16] = {1, 0, 5},
        [CLATTN_CPU_AVX_VNNI] = {1, 0, 4},     [CLATTN_CPU_AMX_BF16] = {0, 3, 22},
        [CLATTN_CPU_AMX_TILE] = {0, 3, 24},    [CLATTN_CPU_AMX_INT8] = {0, 3, 25},
    };
    unsigned r[4];
    if (!__get_cpuid_count(7, where[feature].subleaf, &r[0], &r[1], &r[2], &r[3]))
        return false;
    return (r[where[feature].reg] >> where[feature].bit) & 1u;
#else
    (void)feature;
    return false;
#endif
}
