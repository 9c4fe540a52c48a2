/*
 * SGEMM for CPU OpenCL devices that compile one work-item per invocation (PoCL; not llvmpipe,
 * which runs work-items as SIMD lanes: docs/pocl-cpu-performance.md):
 *
 *   C[M,N] = act(A[M,K] · B[N,K]ᵀ + bias[N] + beta · C[M,N])
 *
 * row-major with strides lda/ldb/ldc (in floats); B in PyTorch's [out, in] weight layout, packed
 * once by clattn_gemm_cpu_pack_b into panels of GEMM_NR = GEMM_VW · GEMM_NV columns, K-major:
 *
 *   Bp[(p · K + k) · GEMM_NR + c] = B[p · GEMM_NR + c, k]   (zero past N)
 *
 * so that one k step of a panel is GEMM_NV aligned vectors of the device's native width.
 *
 * One work-item = one work-group (reqd_work_group_size(1,1,1)): PoCL then builds no work-item loop
 * around the kernel and the kernel's own explicit vectors are the vectorisation. Each work-item
 * owns one B panel and a block of `mb` micro-tiles of GEMM_MR rows; a micro-tile keeps
 * GEMM_MR × GEMM_NV vector accumulators in registers for the whole K loop (broadcast A × vector B
 * fused multiply-adds), so C is read and written once. Optionally (GEMM_KC > 0) K is walked in
 * blocks so that the panel's block stays in L1 while the work-item's micro-tiles reuse it; the
 * partial sums then go through C between blocks (beta applied with the first block, bias and
 * activation with the last).
 *
 * Parameters (-D, chosen by src/runtime/gemm_cpu.c from device facts):
 *   GEMM_VW  vector width in floats: 16 (AVX-512), 8 (AVX/AVX2), 4 (SSE/NEON)
 *   GEMM_NV  vectors per micro-tile row (panel width GEMM_NR = GEMM_VW · GEMM_NV)
 *   GEMM_MR  rows per micro-tile
 *   GEMM_KC  K block (floats); 0 = no K blocking
 *   GEMM_PACK_A  1: A is first copied by clattn_gemm_cpu_pack_a into micro-panels of GEMM_MR
 *            rows, K-major (Ap[(t · K + k) · GEMM_MR + r] = A[min(t · GEMM_MR + r, M - 1), k]),
 *            so that the micro-kernel broadcasts from one sequential stream instead of GEMM_MR
 *            rows; 0 (default): A is read in place
 */

#ifndef GEMM_VW
#define GEMM_VW 16
#endif
#ifndef GEMM_NV
#define GEMM_NV 2
#endif
#ifndef GEMM_MR
#define GEMM_MR 6
#endif
#ifndef GEMM_KC
#define GEMM_KC 0
#endif
#ifndef GEMM_PACK_A
#define GEMM_PACK_A 0
#endif

#define GEMM_NR (GEMM_VW * GEMM_NV)

#define GEMM_ACT_NONE 0
#define GEMM_ACT_RELU 1
#define GEMM_ACT_GELU 2

#if GEMM_VW == 16
typedef float16 gemm_vec;
#define GEMM_VLOAD vload16
#define GEMM_VSTORE vstore16
#elif GEMM_VW == 8
typedef float8 gemm_vec;
#define GEMM_VLOAD vload8
#define GEMM_VSTORE vstore8
#elif GEMM_VW == 4
typedef float4 gemm_vec;
#define GEMM_VLOAD vload4
#define GEMM_VSTORE vstore4
#elif GEMM_VW == 2
typedef float2 gemm_vec;
#define GEMM_VLOAD vload2
#define GEMM_VSTORE vstore2
#else
#error "GEMM_VW must be 2, 4, 8 or 16"
#endif

/* Packs B[N,K] (row stride ldb) into panels; one work-item per (panel column c, k), global size
 * (GEMM_NR · panels, K). */
__kernel __attribute__((reqd_work_group_size(GEMM_NR, 1, 1))) void
clattn_gemm_cpu_pack_b(__global const float *b, ulong b_off, ulong ldb, uint n, uint k,
                                     __global float *bp)
{
    uint col = get_global_id(0);
    uint kk = get_global_id(1);
    if (kk >= k)
        return;
    uint panel = col / GEMM_NR, c = col % GEMM_NR;
    float v = col < n ? b[b_off + (ulong)col * ldb + kk] : 0.0f;
    bp[((ulong)panel * k + kk) * GEMM_NR + c] = v;
}

/* The inverse of clattn_gemm_cpu_pack_b: B[n, k] (contiguous) from its panels; global size
 * (n, k). */
__kernel void clattn_gemm_cpu_unpack_b(__global const float *bp, uint n, uint k,
                                       __global float *b)
{
    uint col = get_global_id(0);
    uint kk = get_global_id(1);
    if (col >= n || kk >= k)
        return;
    uint panel = col / GEMM_NR, c = col % GEMM_NR;
    b[(ulong)col * k + kk] = bp[((ulong)panel * k + kk) * GEMM_NR + c];
}

/* Packs A[M,K] (row stride lda) into micro-panels (GEMM_PACK_A); global size
 * (K rounded up to GEMM_VW, tiles · GEMM_MR), local size (GEMM_VW, 1). */
__kernel __attribute__((reqd_work_group_size(GEMM_VW, 1, 1))) void
clattn_gemm_cpu_pack_a(__global const float *a, ulong a_off, ulong lda, uint m, uint k,
                       __global float *ap)
{
    uint kk = get_global_id(0);
    uint row = get_global_id(1);
    if (kk >= k)
        return;
    uint tile = row / GEMM_MR, r = row % GEMM_MR;
    ap[((ulong)tile * k + kk) * GEMM_MR + r] = a[a_off + (ulong)min(row, m - 1) * lda + kk];
}

static inline float gemm_act(float x, int act)
{
    if (act == GEMM_ACT_RELU)
        return fmax(x, 0.0f);
    if (act == GEMM_ACT_GELU)
        return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
    return x;
}

/* The epilogue of one micro-tile row: acc + bias (+ beta·C), activation, store (masked at N). */
static inline void gemm_store_row(gemm_vec acc[GEMM_NV], __global float *crow, uint col0, uint n,
                                  __global const float *bias, int has_bias, float beta, int act)
{
    if (col0 + GEMM_NR <= n) {
#pragma unroll
        for (int v = 0; v < GEMM_NV; v++) {
            gemm_vec x = acc[v];
            if (has_bias)
                x += GEMM_VLOAD(0, bias + col0 + v * GEMM_VW);
            if (beta != 0.0f)
                x = fma((gemm_vec)(beta), GEMM_VLOAD(0, crow + col0 + v * GEMM_VW), x);
            if (act == GEMM_ACT_RELU)
                x = fmax(x, (gemm_vec)(0.0f));
            else if (act == GEMM_ACT_GELU)
                x = 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
            GEMM_VSTORE(x, 0, crow + col0 + v * GEMM_VW);
        }
    } else {
        float t[GEMM_NR];
#pragma unroll
        for (int v = 0; v < GEMM_NV; v++)
            GEMM_VSTORE(acc[v], 0, t + v * GEMM_VW);
        for (uint c = 0; c < GEMM_NR && col0 + c < n; c++) {
            float x = t[c];
            if (has_bias)
                x += bias[col0 + c];
            if (beta != 0.0f)
                x = fma(beta, crow[col0 + c], x);
            crow[col0 + c] = gemm_act(x, act);
        }
    }
}

/*
 * Global size (panels, ceil(M / (GEMM_MR · mb))), local size (1, 1): each work-item computes mb
 * micro-tiles (GEMM_MR · mb rows) of one panel. bias may be any buffer when has_bias is 0; C is
 * not read when beta is 0.
 */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
clattn_gemm_cpu(uint m, uint n, uint k, __global const float *a, ulong a_off, ulong lda,
                __global const gemm_vec *bp, __global const float *bias, ulong bias_off,
                int has_bias, float beta, __global float *c, ulong c_off, ulong ldc, int act, uint mb)
{
    const uint panel = get_global_id(0);
    const uint row_block = get_global_id(1) * (GEMM_MR * mb);
    const uint col0 = panel * GEMM_NR;
    __global const gemm_vec *bpanel = bp + (ulong)panel * k * GEMM_NV;
    a += a_off;
    c += c_off;
    bias += bias_off;

#if GEMM_KC > 0
    for (uint k0 = 0; k0 < k; k0 += GEMM_KC) {
        const uint k1 = min(k, k0 + GEMM_KC);
        const int first = k0 == 0, last = k1 == k;
#else
    {
        const uint k0 = 0, k1 = k;
        const int first = 1, last = 1;
#endif
        for (uint t = 0; t < mb; t++) {
            const uint i0 = row_block + t * GEMM_MR;
            if (i0 >= m)
                break;
#if GEMM_PACK_A
            /* a is the packed copy: this micro-tile's panel, K-major, GEMM_MR floats per k */
            __global const float *apanel = a + (ulong)(i0 / GEMM_MR) * k * GEMM_MR;
#else
            __global const float *ar[GEMM_MR];
#pragma unroll
            for (int r = 0; r < GEMM_MR; r++)
                ar[r] = a + (ulong)min(i0 + r, m - 1) * lda;
#endif

            gemm_vec acc[GEMM_MR][GEMM_NV];
            if (first) {
#pragma unroll
                for (int r = 0; r < GEMM_MR; r++)
#pragma unroll
                    for (int v = 0; v < GEMM_NV; v++)
                        acc[r][v] = (gemm_vec)(0.0f);
            } else {
                /* a later K block: continue from the partial sums stored in C */
#pragma unroll
                for (int r = 0; r < GEMM_MR; r++) {
                    __global const float *crow = c + (ulong)min(i0 + r, m - 1) * ldc;
#pragma unroll
                    for (int v = 0; v < GEMM_NV; v++) {
                        if (col0 + (v + 1) * GEMM_VW <= n) {
                            acc[r][v] = GEMM_VLOAD(0, crow + col0 + v * GEMM_VW);
                        } else {
                            float tmp[GEMM_VW];
                            for (int e = 0; e < GEMM_VW; e++)
                                tmp[e] = col0 + v * GEMM_VW + e < n ? crow[col0 + v * GEMM_VW + e]
                                                                   : 0.0f;
                            acc[r][v] = GEMM_VLOAD(0, tmp);
                        }
                    }
                }
            }

            __global const gemm_vec *bk = bpanel + (ulong)k0 * GEMM_NV;
            for (uint kk = k0; kk < k1; kk++) {
                gemm_vec bv[GEMM_NV];
#pragma unroll
                for (int v = 0; v < GEMM_NV; v++)
                    bv[v] = bk[v];
                bk += GEMM_NV;
#pragma unroll
                for (int r = 0; r < GEMM_MR; r++) {
#if GEMM_PACK_A
                    const gemm_vec av = (gemm_vec)(apanel[(ulong)kk * GEMM_MR + r]);
#else
                    const gemm_vec av = (gemm_vec)(ar[r][kk]);
#endif
#pragma unroll
                    for (int v = 0; v < GEMM_NV; v++)
                        acc[r][v] = fma(av, bv[v], acc[r][v]);
                }
            }

#pragma unroll
            for (int r = 0; r < GEMM_MR; r++) {
                if (i0 + r < m) {
                    __global float *crow = c + (ulong)(i0 + r) * ldc;
                    if (last) {
                        gemm_store_row(acc[r], crow, col0, n, bias, has_bias,
                                       first ? beta : 0.0f, act);
                    } else if (first) {
                        gemm_store_row(acc[r], crow, col0, n, bias, 0, beta, GEMM_ACT_NONE);
                    } else {
                        gemm_store_row(acc[r], crow, col0, n, bias, 0, 0.0f, GEMM_ACT_NONE);
                    }
                }
            }
        }
    }
}
