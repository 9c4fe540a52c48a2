/* The kernel arguments that every attention kernel shares: head views and masks (14 of them,
 * cl/common.cl CLATTN_MASK_PARAMS). */
#include "attention_problem.h"

void clattn__head_view_args(clattn_kernel_args *args, const clattn_head_view *v)
{
    cl_ulong off = v->offset, sb = v->sb, sh = v->sh, sn = v->sn;
    CLATTN_ARG(args, v->mem);
    CLATTN_ARG(args, off);
    CLATTN_ARG(args, sb);
    CLATTN_ARG(args, sh);
    CLATTN_ARG(args, sn);
}

void clattn__mask_args(clattn_kernel_args *args, const clattn_attention_problem *p)
{
    const clattn_mask_view *am = &p->attn_mask, *kp = &p->key_padding_mask;
    cl_ulong am_off = am->offset, am_sb = am->sb, am_sh = am->sh, am_si = am->si, am_sj = am->sj;
    cl_ulong kp_off = kp->offset, kp_sb = kp->sb, kp_sj = kp->sj;
    cl_int am_kind = am->kind, kp_kind = kp->kind, causal = p->causal != 0;
    cl_uint causal_shift = (cl_uint)p->causal_shift;
    clattn__arg_mem(args, am->kind ? am->mem : NULL);
    CLATTN_ARG(args, am_off);
    CLATTN_ARG(args, am_sb);
    CLATTN_ARG(args, am_sh);
    CLATTN_ARG(args, am_si);
    CLATTN_ARG(args, am_sj);
    CLATTN_ARG(args, am_kind);
    clattn__arg_mem(args, kp->kind ? kp->mem : NULL);
    CLATTN_ARG(args, kp_off);
    CLATTN_ARG(args, kp_sb);
    CLATTN_ARG(args, kp_sj);
    CLATTN_ARG(args, kp_kind);
    CLATTN_ARG(args, causal);
    CLATTN_ARG(args, causal_shift);
}
