/* Scaled RoPE's inverse frequencies, in float32 as transformers computes them (rope_scaling.h).
 * PyTorch's float32 tensor ops with a Python number round the number to float32 first; a
 * number divided by a tensor is the tensor's reciprocal times the number. */
#include "rope_scaling.h"
#include "runtime/rotary_table.h"

#include <math.h>

size_t clattn__rope_pairs(const clattn_block_spec *spec)
{
    return (spec->rotary_dim ? spec->rotary_dim : spec->head_dim_qk) / 2;
}

/* Makes the spec's table the current frequencies (θ^(-2k / r) unless already scaled); false
 * when it has too many pairs. */
static bool start(clattn_block_spec *spec)
{
    size_t pairs = clattn__rope_pairs(spec);
    if (pairs > CLATTN_ROPE_MAX_PAIRS)
        return false;
    if (!spec->rope_scaled)
        for (size_t k = 0; k < pairs; k++)
            spec->rope_inv_freq[k] = clattn__rope_inv_freq(k, pairs, (double)spec->rope_theta);
    spec->rope_scaled = true;
    return true;
}

bool clattn__rope_scale_divide(clattn_block_spec *spec, const float *divisors)
{
    if (!start(spec))
        return false;
    for (size_t k = 0; k < clattn__rope_pairs(spec); k++)
        spec->rope_inv_freq[k] = spec->rope_inv_freq[k] / divisors[k];
    return true;
}

bool clattn__rope_scale_linear(clattn_block_spec *spec, float factor)
{
    if (!start(spec))
        return false;
    for (size_t k = 0; k < clattn__rope_pairs(spec); k++)
        spec->rope_inv_freq[k] = spec->rope_inv_freq[k] / factor;
    return true;
}

bool clattn__rope_scale_llama3(clattn_block_spec *spec, const clattn_rope_llama3 *p)
{
    if (!start(spec))
        return false;
    /* low_freq_wavelen = old_context_len / low_freq_factor etc. (Python floats). */
    double old = p->original_max_position_embeddings;
    float low_wavelen = (float)(old / p->low_freq_factor);
    float high_wavelen = (float)(old / p->high_freq_factor);
    float factor = (float)p->factor;
    for (size_t k = 0; k < clattn__rope_pairs(spec); k++) {
        float inv_freq = spec->rope_inv_freq[k];
        float wavelen = (1.0f / inv_freq) * (float)(2.0 * M_PI);    /* 2π / inv_freq */
        float scaled = wavelen > low_wavelen ? inv_freq / factor : inv_freq;
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
            /* smooth = (old / wavelen - low) / (high - low);
             * (1 - smooth) * scaled / factor + smooth * scaled */
            float ratio = (1.0f / wavelen) * (float)old;
            float smooth = (ratio - (float)p->low_freq_factor) /
                           (float)(p->high_freq_factor - p->low_freq_factor);
            float slow = (1.0f - smooth) * scaled;
            slow = slow / factor;
            float fast = smooth * scaled;
            scaled = slow + fast;
        }
        spec->rope_inv_freq[k] = scaled;
    }
    return true;
}
