/* The kernel arguments that every attention kernel shares: head views and masks (14 of them,
 * cl/common.cl CLATTN_MASK_PARAMS), and the score modifiers' (CLATTN_MOD_PARAMS). */
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

void clattn__mod_args(clattn_kernel_args *args, const clattn_attention_problem *p)
{
    const clattn_score_mods *m = &p->mods;
    cl_ulong alibi_off = m->alibi_offset, rel_off = m->rel_offset;
    /* No distance |i - j| exceeds max(Nq + shift, Nk): a wider window is that one, and the
     * kernels' sums with it stay within 32 bits. */
    size_t reach = p->seq_q + p->causal_shift > p->seq_k ? p->seq_q + p->causal_shift : p->seq_k;
    size_t half = m->window / 2 < reach ? m->window / 2 : reach;
    cl_uint rel_buckets = (cl_uint)m->rel_buckets, window_half = (cl_uint)half;
    float rel_log_ratio = m->rel_log_ratio, softcap = m->softcap;
    clattn__arg_mem(args, m->flags & CLATTN_MOD_ALIBI ? m->alibi : NULL);
    CLATTN_ARG(args, alibi_off);
    clattn__arg_mem(args, m->flags & CLATTN_MOD_RELPOS ? m->rel : NULL);
    CLATTN_ARG(args, rel_off);
    CLATTN_ARG(args, rel_buckets);
    CLATTN_ARG(args, rel_log_ratio);
    CLATTN_ARG(args, window_half);
    CLATTN_ARG(args, softcap);
}
