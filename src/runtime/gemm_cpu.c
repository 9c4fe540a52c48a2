/* SGEMM for CPU-like OpenCL devices: parameters from device facts, B packing, launch. */
#include "gemm_cpu.h"

#include "base/kernels.h"
#include "env_tuning.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

extern const clattn_embedded_source clattn__gemm_cpu_sources[];
extern const size_t clattn__gemm_cpu_sources_count;

struct clattn_gemm_cpu {
    cl_context context;
    cl_device_id device;
    cl_program program;
    cl_kernel gemm, pack, pack_a, unpack;
    cl_mem a_scratch; /* packed A (pack_a), grown on demand */
    size_t a_scratch_bytes;
    clattn_gemm_cpu_params params;
    cl_uint compute_units;
    char options[256];
    char error[1024];
};

static clattn_status failv(char *error, size_t size, clattn_status status, const char *fmt,
                           va_list ap)
{
    if (error && size)
        vsnprintf(error, size, fmt, ap);
    return status;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static clattn_status fail(clattn_gemm_cpu *g, clattn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(g->error, sizeof(g->error), status, fmt, ap);
    va_end(ap);
    return status;
}

static clattn_status status_from_cl(cl_int err)
{
    switch (err) {
    case CL_OUT_OF_HOST_MEMORY: return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES: return CLATTN_ERROR_OUT_OF_DEVICE_MEMORY;
    case CL_INVALID_BUFFER_SIZE: return CLATTN_ERROR_TOO_LARGE;
    default: return CLATTN_ERROR_OPENCL;
    }
}

/* Overrides from CLATTN_GEMM_CPU="vw=16,nv=2,mr=12,kc=256,mb=2,pa=1"; vw's powers of two and the
 * override's fields are checked after. */
static clattn_status env_override(clattn_gemm_cpu_params *p, char *error, size_t error_size)
{
    const clattn_env_tuning_key keys[] = {
        {"vw", &p->vw, 2, 16},       {"nv", &p->nv, 1, 8},        {"mr", &p->mr, 1, 32},
        {"kc", &p->kc, 0, UINT_MAX}, {"mb", &p->mb, 0, UINT_MAX}, {"pa", &p->pack_a, 0, 1},
    };
    return clattn__env_tuning_read("CLATTN_GEMM_CPU", keys, sizeof(keys) / sizeof(keys[0]), error,
                                   error_size);
}

/*
 * The parameters from device facts:
 *  - vw: CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (PoCL reports the widest SIMD register: 16 with
 *    AVX-512, 8 with AVX/AVX2, 4 with SSE/NEON), clamped to 4..16.
 *  - registers: x86-64 has 32 vector registers with AVX-512 and 16 without, AArch64 32; we assume
 *    32 when vw is 16 and 16 otherwise. The micro-tile uses mr·nv accumulators, nv B vectors and
 *    one broadcast: nv 2 and the largest mr that fits (6 of 16 registers, 12 of 32 registers
 *    measured best on the Xeon: see docs/pocl-cpu-performance.md).
 *  - kc: 0 (whole K): with K up to a few thousand a panel of nr columns (K·nr·4 bytes: 64 KiB at
 *    K 512 and nr 32) stays in L2 and measured as fast as K blocks sized for L1.
 *  - mb: per call, the largest count of micro-tiles per work-item (up to 8) that still gives every
 *    compute unit at least 4 work-items.
 */
static clattn_gemm_cpu_params derive_params(cl_device_id device, cl_uint *compute_units)
{
    cl_uint native = 0, cu = 1;
    clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof(native), &native, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL);
    clattn_gemm_cpu_params p = {0};
    p.vw = native >= 16 ? 16 : native >= 8 ? 8 : 4;
    unsigned registers = p.vw == 16 ? 32 : 16;
    p.nv = 2;
    p.mr = registers >= 32 ? 12 : 6;
    p.kc = 0;
    p.mb = 0;
    *compute_units = cu ? cu : 1;
    return p;
}

clattn_status clattn__gemm_cpu_create(cl_context context, cl_device_id device,
                                      const clattn_gemm_cpu_params *override,
                                      clattn_gemm_cpu **out, char *error, size_t error_size)
{
    *out = NULL;
    clattn_gemm_cpu *g = calloc(1, sizeof(*g));
    if (!g) {
        if (error && error_size)
            snprintf(error, error_size, "out of host memory creating the CPU GEMM");
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    g->context = context;
    g->device = device;
    g->params = derive_params(device, &g->compute_units);
    if (override) {
        if (override->vw)
            g->params.vw = override->vw;
        if (override->nv)
            g->params.nv = override->nv;
        if (override->mr)
            g->params.mr = override->mr;
        if (override->kc)
            g->params.kc = override->kc;
        if (override->mb)
            g->params.mb = override->mb;
        if (override->pack_a)
            g->params.pack_a = override->pack_a;
    }
    clattn_gemm_cpu_params *p = &g->params;
    clattn_status status = env_override(p, g->error, sizeof(g->error));
    if (status != CLATTN_OK)
        goto out;
    if ((p->vw != 2 && p->vw != 4 && p->vw != 8 && p->vw != 16) || p->nv < 1 || p->nv > 8 ||
        p->mr < 1 || p->mr > 32 || p->pack_a > 1) {
        status = fail(g, CLATTN_ERROR_INVALID_ARGUMENT,
                      "CPU GEMM parameters out of range: vw=%u (2, 4, 8, 16) nv=%u (1..8) "
                      "mr=%u (1..32) pack_a=%u (0, 1)",
                      p->vw, p->nv, p->mr, p->pack_a);
        goto out;
    }
    snprintf(g->options, sizeof(g->options),
             "-cl-std=CL1.2 -cl-mad-enable -DGEMM_VW=%u -DGEMM_NV=%u -DGEMM_MR=%u -DGEMM_KC=%u "
             "-DGEMM_PACK_A=%u",
             p->vw, p->nv, p->mr, p->kc, p->pack_a);

    cl_int err;
    const char *source = (const char *)clattn__gemm_cpu_sources[0].data;
    size_t length = clattn__gemm_cpu_sources[0].size;
    g->program = clCreateProgramWithSource(context, 1, &source, &length, &err);
    if (err != CL_SUCCESS) {
        status = fail(g, status_from_cl(err), "clCreateProgramWithSource (gemm_cpu.cl) failed: %d",
                      (int)err);
        goto out;
    }
    err = clBuildProgram(g->program, 1, &device, g->options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[800] = "";
        clGetProgramBuildInfo(g->program, device, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log,
                              NULL);
        status = fail(g, CLATTN_ERROR_BUILD_FAILED,
                      "building gemm_cpu.cl with \"%s\" failed (%d); build log:\n%s", g->options,
                      (int)err, log);
        goto out;
    }
    g->gemm = clCreateKernel(g->program, "clattn_gemm_cpu", &err);
    if (err == CL_SUCCESS)
        g->pack = clCreateKernel(g->program, "clattn_gemm_cpu_pack_b", &err);
    if (err == CL_SUCCESS)
        g->pack_a = clCreateKernel(g->program, "clattn_gemm_cpu_pack_a", &err);
    if (err == CL_SUCCESS)
        g->unpack = clCreateKernel(g->program, "clattn_gemm_cpu_unpack_b", &err);
    if (err != CL_SUCCESS)
        status = fail(g, status_from_cl(err), "clCreateKernel (gemm_cpu.cl) failed: %d", (int)err);
out:
    if (status != CLATTN_OK) {
        if (error && error_size)
            snprintf(error, error_size, "%s", g->error);
        clattn__gemm_cpu_release(g);
        return status;
    }
    *out = g;
    return CLATTN_OK;
}

void clattn__gemm_cpu_release(clattn_gemm_cpu *g)
{
    if (!g)
        return;
    if (g->gemm)
        clReleaseKernel(g->gemm);
    if (g->pack)
        clReleaseKernel(g->pack);
    if (g->pack_a)
        clReleaseKernel(g->pack_a);
    if (g->unpack)
        clReleaseKernel(g->unpack);
    if (g->a_scratch)
        clReleaseMemObject(g->a_scratch);
    if (g->program)
        clReleaseProgram(g->program);
    free(g);
}

clattn_gemm_cpu_params clattn__gemm_cpu_params(const clattn_gemm_cpu *g) { return g->params; }
const char *clattn__gemm_cpu_options(const clattn_gemm_cpu *g) { return g->options; }
const char *clattn__gemm_cpu_error(const clattn_gemm_cpu *g) { return g->error; }

static size_t panel_width(const clattn_gemm_cpu *g) { return (size_t)g->params.vw * g->params.nv; }

size_t clattn__gemm_cpu_packed_bytes(const clattn_gemm_cpu *g, size_t n, size_t k)
{
    size_t nr = panel_width(g);
    return (n + nr - 1) / nr * nr * k * sizeof(float);
}

#define SET_ARG(kernel, index, value)                                                      \
    do {                                                                                   \
        cl_int set_err = clSetKernelArg(kernel, index, sizeof(value), &(value));           \
        if (set_err != CL_SUCCESS)                                                         \
            return fail(g, CLATTN_ERROR_OPENCL, "clSetKernelArg(%d) failed: %d", index,    \
                        (int)set_err);                                                     \
    } while (0)

clattn_status clattn__gemm_cpu_pack_b(clattn_gemm_cpu *g, cl_command_queue queue, size_t n,
                                      size_t k, cl_mem b, size_t b_offset, size_t ldb,
                                      cl_mem *packed, cl_event *event)
{
    *packed = NULL;
    if (n == 0 || k == 0 || n > UINT32_MAX || k > UINT32_MAX || ldb < k)
        return fail(g, CLATTN_ERROR_INVALID_ARGUMENT,
                    "CPU GEMM pack: n=%zu k=%zu ldb=%zu (need 0 < n, k < 2^32, ldb >= k)", n, k,
                    ldb);
    size_t nr = panel_width(g);
    cl_int err;
    cl_mem out = clCreateBuffer(g->context, CL_MEM_READ_WRITE,
                                clattn__gemm_cpu_packed_bytes(g, n, k), NULL, &err);
    if (err != CL_SUCCESS)
        return fail(g, status_from_cl(err), "allocating %zu bytes for a packed B failed: %d",
                    clattn__gemm_cpu_packed_bytes(g, n, k), (int)err);
    cl_ulong off = b_offset, ld = ldb;
    cl_uint un = (cl_uint)n, uk = (cl_uint)k;
    cl_kernel kern = g->pack;
    cl_int e = CL_SUCCESS;
    e |= clSetKernelArg(kern, 0, sizeof(cl_mem), &b);
    e |= clSetKernelArg(kern, 1, sizeof(off), &off);
    e |= clSetKernelArg(kern, 2, sizeof(ld), &ld);
    e |= clSetKernelArg(kern, 3, sizeof(un), &un);
    e |= clSetKernelArg(kern, 4, sizeof(uk), &uk);
    e |= clSetKernelArg(kern, 5, sizeof(cl_mem), &out);
    if (e != CL_SUCCESS) {
        clReleaseMemObject(out);
        return fail(g, CLATTN_ERROR_OPENCL, "clSetKernelArg (CPU GEMM pack) failed");
    }
    size_t global[2] = {(n + nr - 1) / nr * nr, k}, local[2] = {nr, 1};
    err = clEnqueueNDRangeKernel(queue, kern, 2, NULL, global, local, 0, NULL, event);
    if (err != CL_SUCCESS) {
        clReleaseMemObject(out);
        return fail(g, status_from_cl(err), "enqueueing the CPU GEMM pack (n=%zu k=%zu) failed: %d",
                    n, k, (int)err);
    }
    *packed = out;
    return CLATTN_OK;
}

clattn_status clattn__gemm_cpu_unpack_b(clattn_gemm_cpu *g, cl_command_queue queue, size_t n,
                                        size_t k, cl_mem packed, cl_mem b)
{
    if (n == 0 || k == 0 || n > UINT32_MAX || k > UINT32_MAX)
        return fail(g, CLATTN_ERROR_INVALID_ARGUMENT,
                    "CPU GEMM unpack: n=%zu k=%zu (need 0 < n, k < 2^32)", n, k);
    cl_uint un = (cl_uint)n, uk = (cl_uint)k;
    cl_kernel kern = g->unpack;
    cl_int e = CL_SUCCESS;
    e |= clSetKernelArg(kern, 0, sizeof(cl_mem), &packed);
    e |= clSetKernelArg(kern, 1, sizeof(un), &un);
    e |= clSetKernelArg(kern, 2, sizeof(uk), &uk);
    e |= clSetKernelArg(kern, 3, sizeof(cl_mem), &b);
    if (e != CL_SUCCESS)
        return fail(g, CLATTN_ERROR_OPENCL, "clSetKernelArg (CPU GEMM unpack) failed");
    size_t global[2] = {n, k};
    cl_int err = clEnqueueNDRangeKernel(queue, kern, 2, NULL, global, NULL, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return fail(g, status_from_cl(err),
                    "enqueueing the CPU GEMM unpack (n=%zu k=%zu) failed: %d", n, k, (int)err);
    return CLATTN_OK;
}

/* Copies A into g->a_scratch as K-major micro-panels of mr rows (grown on demand). */
static clattn_status pack_a(clattn_gemm_cpu *g, cl_command_queue queue, size_t m, size_t k,
                            cl_mem a, size_t a_offset, size_t lda, size_t tiles)
{
    size_t mr = g->params.mr, vw = g->params.vw;
    size_t bytes = tiles * mr * k * sizeof(float);
    if (bytes > g->a_scratch_bytes) {
        if (g->a_scratch)
            clReleaseMemObject(g->a_scratch);
        g->a_scratch = NULL;
        g->a_scratch_bytes = 0;
        cl_int err;
        g->a_scratch = clCreateBuffer(g->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
        if (err != CL_SUCCESS) {
            g->a_scratch = NULL;
            return fail(g, status_from_cl(err), "allocating %zu bytes for a packed A failed: %d",
                        bytes, (int)err);
        }
        g->a_scratch_bytes = bytes;
    }
    cl_ulong off = a_offset, ld = lda;
    cl_uint um = (cl_uint)m, uk = (cl_uint)k;
    cl_kernel kern = g->pack_a;
    SET_ARG(kern, 0, a);
    SET_ARG(kern, 1, off);
    SET_ARG(kern, 2, ld);
    SET_ARG(kern, 3, um);
    SET_ARG(kern, 4, uk);
    SET_ARG(kern, 5, g->a_scratch);
    size_t global[2] = {(k + vw - 1) / vw * vw, tiles * mr}, local[2] = {vw, 1};
    cl_int err = clEnqueueNDRangeKernel(queue, kern, 2, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return fail(g, status_from_cl(err), "enqueueing the CPU GEMM's A packing (m=%zu k=%zu) "
                    "failed: %d", m, k, (int)err);
    return CLATTN_OK;
}

clattn_status clattn__gemm_cpu_run(clattn_gemm_cpu *g, cl_command_queue queue, size_t m, size_t n,
                                   size_t k, cl_mem a, size_t a_offset, size_t lda, cl_mem packed,
                                   cl_mem bias, size_t bias_offset, float beta, cl_mem c,
                                   size_t c_offset, size_t ldc, clattn_gemm_cpu_act act,
                                   cl_event *event)
{
    if (m == 0 || n == 0)
        return CLATTN_OK;
    if (k == 0 || m > UINT32_MAX || n > UINT32_MAX || k > UINT32_MAX || lda < k || ldc < n ||
        !packed || (act != CLATTN_GEMM_CPU_ACT_NONE && act != CLATTN_GEMM_CPU_ACT_RELU &&
                    act != CLATTN_GEMM_CPU_ACT_GELU))
        return fail(g, CLATTN_ERROR_INVALID_ARGUMENT,
                    "CPU GEMM: m=%zu n=%zu k=%zu lda=%zu ldc=%zu act=%d (need k > 0, sizes < 2^32, "
                    "lda >= k, ldc >= n, a packed B, a known activation)",
                    m, n, k, lda, ldc, (int)act);
    size_t nr = panel_width(g), mr = g->params.mr;
    size_t panels = (n + nr - 1) / nr, tiles = (m + mr - 1) / mr;
    size_t mb = g->params.mb;
    if (!mb) { /* at least 4 work-items per compute unit, at most 8 micro-tiles per work-item */
        mb = 8;
        while (mb > 1 && panels * ((tiles + mb - 1) / mb) < 4 * (size_t)g->compute_units)
            mb /= 2;
    }
    cl_uint um = (cl_uint)m, un = (cl_uint)n, uk = (cl_uint)k, umb = (cl_uint)mb;
    if (g->params.pack_a) {
        clattn_status status = pack_a(g, queue, m, k, a, a_offset, lda, tiles);
        if (status != CLATTN_OK)
            return status;
        a = g->a_scratch;
        a_offset = 0;
        lda = k;
    }
    cl_ulong aoff = a_offset, ulda = lda, boff = bias_offset, coff = c_offset, uldc = ldc;
    cl_int has_bias = bias != NULL, iact = (cl_int)act;
    cl_mem bias_buf = bias ? bias : packed; /* any valid buffer: not read */
    cl_kernel kern = g->gemm;
    SET_ARG(kern, 0, um);
    SET_ARG(kern, 1, un);
    SET_ARG(kern, 2, uk);
    SET_ARG(kern, 3, a);
    SET_ARG(kern, 4, aoff);
    SET_ARG(kern, 5, ulda);
    SET_ARG(kern, 6, packed);
    SET_ARG(kern, 7, bias_buf);
    SET_ARG(kern, 8, boff);
    SET_ARG(kern, 9, has_bias);
    SET_ARG(kern, 10, beta);
    SET_ARG(kern, 11, c);
    SET_ARG(kern, 12, coff);
    SET_ARG(kern, 13, uldc);
    SET_ARG(kern, 14, iact);
    SET_ARG(kern, 15, umb);
    size_t global[2] = {panels, (tiles + mb - 1) / mb};
    size_t local[2] = {1, 1};
    cl_int err = clEnqueueNDRangeKernel(queue, kern, 2, NULL, global, local, 0, NULL, event);
    if (err != CL_SUCCESS)
        return fail(g, status_from_cl(err), "enqueueing the CPU GEMM (m=%zu n=%zu k=%zu) failed: %d",
                    m, n, k, (int)err);
    return CLATTN_OK;
}
