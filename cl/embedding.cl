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
