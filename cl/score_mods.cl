/* The unfused path's score modifiers, in place on a chunk of scores computed without masks:
 *
 *   s[z, i, j] = masked(modified(s[z, i, j]))     (clattn_modified_score, clattn_masked_score)
 *
 * for the pairs bh = bh0 + z, z < pairs; `mods` holds the CLATTN_MOD_* flags. The query's
 * position is i + causal_shift, as for the causal mask.
 * s: [pairs, nq, nk] contiguous from s_off. NDRange: (nk, nq, pairs). */
__kernel void clattn_score_mods(__global float *s, ulong s_off, uint heads, uint pairs, uint nq,
                                uint nk, uint bh0, int mods, CLATTN_MOD_PARAMS,
                                CLATTN_MASK_PARAMS)
{
    uint j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);
    if (j >= nk || i >= nq || z >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh0 + z, heads, b, h);
    ulong at = s_off + ((ulong)z * nq + i) * nk + j;
    float score =
        clattn_modified_score(s[at], mods, heads, h, i + causal_shift, j, CLATTN_MOD_ARGS);
    s[at] = clattn_masked_score(score, b, h, i, j, CLATTN_MASK_ARGS);
}
