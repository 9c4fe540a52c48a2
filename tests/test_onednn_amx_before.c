/*
 * The reduced precisions in a process whose oneDNN has already dispatched (src/runtime/
 * gemm_onednn.c, cap_isa): oneDNN fixes its instruction set on its first dispatch, so the library
 * can no longer keep it off AMX, whose bf16 results change with a batch's row count. On a CPU
 * with AMX-TILE a bf16 or int8 context is then refused, CLATTN_ERROR_UNSUPPORTED naming AMX; on
 * other CPUs the cap is not needed and the context is made (or refused for a missing instruction,
 * which is not this test's concern). Its own process: the library loads oneDNN once per process.
 * Skipped where libdnnl.so.2 cannot be loaded.
 */
#include "common/test_util.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void refused_after_amx_dispatch(void **state)
{
    (void)state;
    void *dnnl = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!dnnl) {
        printf("    skipped: libdnnl.so.2 cannot be loaded: %s\n", dlerror());
        skip();
    }
    int (*effective)(void) = NULL;
    *(void **)&effective = dlsym(dnnl, "dnnl_get_effective_cpu_isa");
    assert_non_null(effective);
    /* The first query fixes oneDNN's instruction set for the process, AMX included. */
    unsigned isa = (unsigned)effective();
    unsigned a, b, c, d;
    bool amx_tile = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24));
    const unsigned amx = 0x3e7; /* dnnl_cpu_isa_avx512_core_amx */
    printf("    oneDNN's instruction set %#x, AMX-TILE %s\n", isa, amx_tile ? "yes" : "no");
    static const int precisions[] = {CLATTN_PRECISION_BF16, CLATTN_PRECISION_INT8};
    for (size_t p = 0; p < 2; p++) {
        clattn_context_params params;
        clattn_context_params_default(&params);
        params.precision = precisions[p];
        clattn_context *ctx = NULL;
        clattn_status status = clattn_context_create(&ctx, &params);
        const char *error = clattn_last_error(NULL);
        if ((isa & amx) == amx) {
            assert_int_equal(status, CLATTN_ERROR_UNSUPPORTED);
            if (!strstr(error, "AMX"))
                fail_msg("precision %d refused without naming AMX: %s", precisions[p], error);
        } else if (status != CLATTN_OK) {
            assert_int_equal(status, CLATTN_ERROR_UNSUPPORTED);
            if (strstr(error, "AMX, whose results"))
                fail_msg("precision %d refused for AMX without AMX: %s", precisions[p], error);
        }
        clattn_context_destroy(&ctx);
    }
    dlclose(dnnl);
}

int main(void)
{
    test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_after_amx_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
