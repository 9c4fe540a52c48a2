/* GEMMs through CLBlast (gemm.c). */
#ifndef CLATTN_GEMM_H
#define CLATTN_GEMM_H

#include "errors.h"
#include "tuning.h"

/* C[m, n] = A[m, k] · B[n, k]ᵀ + beta · C[m, n], row-major, leading dimensions and offsets in
 * floats. B is a PyTorch weight [out, in] used as it is. Counted under `op`. */
clattn_status clattn__gemm_nt(clattn_context *ctx, clattn_op op, size_t m, size_t n, size_t k,
                              cl_mem a, size_t a_offset, size_t lda, cl_mem b, size_t b_offset,
                              size_t ldb, float beta, cl_mem c, size_t c_offset, size_t ldc);
/* Hands Xgemm parameters to CLBlast for the context's device (process-wide CLBlast state).
 * Returns NULL on success, else the name of CLBlast's refusal. */
const char *clattn__gemm_apply_params(cl_device_id device, const clattn_gemm_params *gemm);
/* Releases CLBlast's compiled programs (after the last context is gone). */
void clattn__gemm_clear_cache(void);

#endif /* CLATTN_GEMM_H */
