/* What happens before the first encoder layer: token embedding and the positional table. */

/* Token embedding with a scale, plus a positional table and token-type embeddings when given:
 *
 *   x[t, c] = emb[ids[t], c] · scale (+ pe[row, c]) (+ type_emb[types[t], c])
 *
 * with row = pe_rows[t] when pe_rows is given (RoBERTa-style positions counted from the ids on
 * the host), else pe_first + t % seq.
 * ids, types: [tokens] (validated on the host); emb: [vocab, d]; pe: [positions, d] (the
 * sinusoidal table or a learned one) or NULL; type_emb: [type_vocab, d], or NULL together with
 * types; x: [tokens, d] contiguous. The sum is taken in Hugging Face's BertEmbeddings order,
 * (word + type) + position, so that float rounding matches. NDRange: (d, tokens). */
__kernel void clattn_embed(__global const int *ids, __global const float *emb, float scale,
                           __global const float *pe, ulong pe_first, uint seq, uint d, uint tokens,
                           __global const int *types, __global const float *type_emb,
                           __global const int *pe_rows, __global float *x)
{
    uint c = get_global_id(0), t = get_global_id(1);
    if (c >= d || t >= tokens)
        return;
    float v = emb[(ulong)ids[t] * d + c] * scale;
    if (type_emb)
        v += type_emb[(ulong)types[t] * d + c];
    if (pe)
        v += pe[(pe_rows ? (ulong)pe_rows[t] : pe_first + t % seq) * d + c];
    x[(ulong)t * d + c] = v;
}

/* The same embedding followed by a LayerNorm (BERT's embeddings.LayerNorm) in one launch, for CPU
 * devices as clattn_layernorm_rows (cl/layernorm.cl): one work-item per token with 16-wide
 * vectors, d a multiple of 16. The sum is formed in clattn_embed's order and stored in x, then
 * normalised in place in clattn_layernorm_rows's order: the bytes of the two launches.
 * weight, bias: [d]. NDRange: (tokens), local (1). */
__kernel void clattn_embed_layernorm_rows(__global const int *ids, __global const float *emb,
                                          float scale, __global const float *pe, ulong pe_first,
                                          uint seq, uint d, uint tokens,
                                          __global const int *types,
                                          __global const float *type_emb,
                                          __global const int *pe_rows, __global float *x,
                                          __global const float *weight,
                                          __global const float *bias, float eps)
{
    uint t = get_global_id(0), n16 = d / 16;
    if (t >= tokens)
        return;
    __global const float *er = emb + (ulong)ids[t] * d;
    __global const float *tr = type_emb ? type_emb + (ulong)types[t] * d : 0;
    __global const float *pr = 0;
    if (pe)
        pr = pe + (pe_rows ? (ulong)pe_rows[t] : pe_first + t % seq) * d;
    __global float *xr = x + (ulong)t * d;
    float16 sum = 0.0f;
    for (uint c = 0; c < n16; c++) {
        float16 v = vload16(c, er) * scale;
        if (tr)
            v += vload16(c, tr);
        if (pr)
            v += vload16(c, pr);
        vstore16(v, c, xr);
        sum += v;
    }
    float mean = clattn_ln_sum16(sum) / (float)d;
    float16 squares = 0.0f;
    for (uint c = 0; c < n16; c++) {
        float16 dev = vload16(c, xr) - mean;
        squares += dev * dev;
    }
    float rstd = 1.0f / sqrt(clattn_ln_sum16(squares) / (float)d + eps);
    for (uint c = 0; c < n16; c++)
        vstore16((vload16(c, xr) - mean) * rstd * vload16(c, weight) + vload16(c, bias), c, xr);
}

/* out[t, c] = in[t, c] + pe[pe_first + t % seq, c] for [tokens, d] contiguous tensors (out may be
 * in). NDRange: (d, tokens). */
__kernel void clattn_add_positional(__global const float *in, ulong in_off, __global const float *pe,
                                    ulong pe_first, uint seq, uint d, uint tokens,
                                    __global float *out, ulong out_off)
{
    uint c = get_global_id(0), t = get_global_id(1);
    if (c >= d || t >= tokens)
        return;
    ulong at = (ulong)t * d + c;
    out[out_off + at] = in[in_off + at] + pe[(pe_first + t % seq) * d + c];
}
