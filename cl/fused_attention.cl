/* Fused attention: scores, masked online softmax and weights·V in one kernel (flash-attention
 * style), with O(N) memory: no score matrix is ever stored.
 *
 *   out[b, h, i, :] = Σ_j softmax_j(Σ_c (q[b,h,i,c] · scale) · k[b,h,j,c] + masks) · v[b,h,j,:]
 *
 * Keys are visited in blocks; for each query the running maximum m, the running sum l of
 * exp(s - m) and the running weighted sum acc of the values are rescaled when the maximum grows.
 * A query whose keys are all masked gets a zero output (not NaN).
 * q, k, v, out: per-head views as in scores.cl (the output in the concatenated-heads layout);
 * query head h reads key/value head h / kv_group (grouped-query attention).
 *
 * Compiled only in the specialised program: CLATTN_FUSED_DK and CLATTN_FUSED_DV (the head widths)
 * are compile-time constants, as are CLATTN_FUSED_QPW (queries per work-item), CLATTN_FUSED_TK
 * (keys per block of the staged variant), CLATTN_FUSED_GTK (keys per block without staging: 1,
 * 2, 4, 8 or 16), CLATTN_FUSED_WG (work-group size) and the vector widths CLATTN_FUSED_VK and
 * CLATTN_FUSED_VV. With CLATTN_FUSED_KV_HALF the keys and values are IEEE half floats (a
 * half-precision key/value cache, read with vload_half: core OpenCL, no cl_khr_fp16 needed);
 * such programs have no staged variant. Kernels:
 *   clattn_fused_attention        each work-item reads keys and values from global memory (for
 *                                 devices whose __local memory is global memory, e.g. CPUs).
 *                                 With a third NDRange dimension of `splits` > 1 it is the
 *                                 first pass of split-key attention (flash-decoding: few queries
 *                                 against many keys, e.g. a decoding step against its cache):
 *                                 split s covers keys [s·chunk, (s + 1)·chunk) and stores its
 *                                 partial state (m, l, unnormalised acc) instead of the output;
 *                                 clattn_split_combine then merges the splits. Compiled in every
 *                                 program (split-key attention on every device).
 *   clattn_split_combine          the second pass.
 *   clattn_fused_attention_tiled  16 queries per work-item, one per vector lane, keys packed
 *                                 transposed in tiles (CPUs, float keys and values);
 *   clattn_fused_attention_tiled_rows  the same reading the keys where they are (a cache).
 *   clattn_fused_attention_local  the work-group stages each block of keys and values through
 *                                 __local memory (GPUs; compiled when CLATTN_FUSED_LOCAL is set,
 *                                 for float keys and values).
 * NDRange of clattn_fused_attention: (ceil(nq / QPW) rounded up to WG, pairs[, splits]),
 * local (WG, 1[, 1]) or any; of clattn_fused_attention_local: (nq rounded up to WG, pairs),
 * local (WG, 1); of clattn_split_combine: (nq, pairs), any local.
 *
 * Score modifiers: with CLATTN_FUSED_MODS (CLATTN_MOD_* flags) the attention kernels take the
 * modifiers' arguments last (CLATTN_MOD_PARAMS) and every score passes through
 * clattn_modified_score before the masks; with a window, each work-item (work-group for the
 * staged variant) visits only the keys some query of its own can see, so a layer costs O(N·w).
 * Without the define the kernels are exactly the unmodified ones. */
#ifdef CLATTN_FUSED_DK

#define DK CLATTN_FUSED_DK
#define DV CLATTN_FUSED_DV
#define QPW CLATTN_FUSED_QPW
#define TK CLATTN_FUSED_TK
#define GTK CLATTN_FUSED_GTK

#ifdef CLATTN_FUSED_MODS
#define CLATTN_FUSED_MOD_PARAMS , CLATTN_MOD_PARAMS
/* The score s of query row i against key j after the modifiers (before the masks). */
#define CLATTN_MODIFY(s, h, i, j)                                                          \
    clattn_modified_score((s), CLATTN_FUSED_MODS, heads, (h), (i) + causal_shift, (j),     \
                          CLATTN_MOD_ARGS)
#else
#define CLATTN_FUSED_MOD_PARAMS
#define CLATTN_MODIFY(s, h, i, j) (s)
#endif
#if defined(CLATTN_FUSED_MODS) && (CLATTN_FUSED_MODS & CLATTN_MOD_WINDOW)
#define CLATTN_FUSED_WINDOW 1
/* The keys [lo, hi) that queries first..last (rows; hi also bounded by end) can see. */
#define CLATTN_WINDOW_LO(first)                                                            \
    ((first) + causal_shift > window_half ? (first) + causal_shift - window_half : 0u)
#define CLATTN_WINDOW_HI(last, end)                                                        \
    ((uint)min((ulong)(end), (ulong)(last) + causal_shift + window_half + 1))
#endif

/* The online softmax's update for one block whose largest score is block_max (> -inf): when the
 * maximum m grows, the running sum l and the accumulator (acc, n_acc elements of type ACC_T)
 * are rescaled by exp(m_old - m_new) (0 on the first block, where m_old = -inf). Both variants
 * use it; it is a macro because the accumulators are vectors in one and scalars in the other. */
#define CLATTN_ONLINE_RESCALE(m, l, acc, n_acc, block_max)                                  \
    do {                                                                                    \
        if ((block_max) > (m)) {                                                            \
            float correction_ = exp((m) - (block_max));                                     \
            (l) *= correction_;                                                             \
            for (int c_ = 0; c_ < (n_acc); c_++)                                            \
                (acc)[c_] *= correction_;                                                   \
            (m) = (block_max);                                                              \
        }                                                                                   \
    } while (0)

/* ---- explicit vectors for the global variant ----
 * LLVM does not vectorise float reductions without fast-math, so the dot products and the
 * softmax of a block are written with OpenCL vector types: CLATTN_FUSED_VK (a width dividing
 * d_k), CLATTN_FUSED_VV (dividing d_v) and GTK (the key block, 1, 2, 4, 8 or 16) lanes. */
#define CLATTN_CAT_(a, b) a##b
#define CLATTN_CAT(a, b) CLATTN_CAT_(a, b)

float clattn_hsum1(float v) { return v; }
float clattn_hsum2(float2 v) { return v.x + v.y; }
float clattn_hsum4(float4 v) { return clattn_hsum2(v.lo + v.hi); }
float clattn_hsum8(float8 v) { return clattn_hsum4(v.lo + v.hi); }
/* The halves of a float16 from its components: the same shuffle once compiled, but oclgrind
 * 21.10 reports the .lo/.hi swizzles of 16-wide vectors as uninitialised (a false positive). */
#define CLATTN_LO8(v) ((float8)((v).s0, (v).s1, (v).s2, (v).s3, (v).s4, (v).s5, (v).s6, (v).s7))
#define CLATTN_HI8(v) ((float8)((v).s8, (v).s9, (v).sa, (v).sb, (v).sc, (v).sd, (v).se, (v).sf))
float clattn_hsum16(float16 v) { return clattn_hsum8(CLATTN_LO8(v) + CLATTN_HI8(v)); }
float clattn_hmax1(float v) { return v; }
float clattn_hmax2(float2 v) { return fmax(v.x, v.y); }
float clattn_hmax4(float4 v) { return clattn_hmax2(fmax(v.lo, v.hi)); }
float clattn_hmax8(float8 v) { return clattn_hmax4(fmax(v.lo, v.hi)); }
float clattn_hmax16(float16 v) { return clattn_hmax8(fmax(CLATTN_LO8(v), CLATTN_HI8(v))); }
#define clattn_vload1(i, p) ((p)[i])
#define clattn_vstore1(v, i, p) ((p)[i] = (v))

#define VK_T CLATTN_VEC_TYPE(CLATTN_FUSED_VK)
#define VV_T CLATTN_VEC_TYPE(CLATTN_FUSED_VV)
#define VT_T CLATTN_VEC_TYPE(GTK)
#define CLATTN_VEC_TYPE(n) CLATTN_CAT(CLATTN_VEC_TYPE_, n)
#define CLATTN_VEC_TYPE_1 float
#define CLATTN_VEC_TYPE_2 float2
#define CLATTN_VEC_TYPE_4 float4
#define CLATTN_VEC_TYPE_8 float8
#define CLATTN_VEC_TYPE_16 float16
#define CLATTN_VLOAD(n) CLATTN_CAT(CLATTN_VLOAD_, n)
#define CLATTN_VLOAD_1 clattn_vload1
#define CLATTN_VLOAD_2 vload2
#define CLATTN_VLOAD_4 vload4
#define CLATTN_VLOAD_8 vload8
#define CLATTN_VLOAD_16 vload16
#define CLATTN_VSTORE(n) CLATTN_CAT(CLATTN_VSTORE_, n)
#define CLATTN_VSTORE_1 clattn_vstore1
#define CLATTN_VSTORE_2 vstore2
#define CLATTN_VSTORE_4 vstore4
#define CLATTN_VSTORE_8 vstore8
#define CLATTN_VSTORE_16 vstore16
#define NK (DK / CLATTN_FUSED_VK)
#define NV (DV / CLATTN_FUSED_VV)

/* Keys and values: float, or half floats converted on load. */
#ifdef CLATTN_FUSED_KV_HALF
#define KV_T half
#define CLATTN_KVLOAD(n) CLATTN_CAT(CLATTN_KVLOAD_HALF_, n)
#define CLATTN_KVLOAD_HALF_1 vload_half
#define CLATTN_KVLOAD_HALF_2 vload_half2
#define CLATTN_KVLOAD_HALF_4 vload_half4
#define CLATTN_KVLOAD_HALF_8 vload_half8
#define CLATTN_KVLOAD_HALF_16 vload_half16
#else
#define KV_T float
#define CLATTN_KVLOAD(n) CLATTN_VLOAD(n)
#endif
#define CLATTN_KV_VIEW_PARAMS(x) \
    __global const KV_T *x, ulong x##_off, ulong x##_sb, ulong x##_sh, ulong x##_sn

__kernel void clattn_fused_attention(CLATTN_VIEW_PARAMS(q), CLATTN_KV_VIEW_PARAMS(k),
                                     CLATTN_KV_VIEW_PARAMS(v), CLATTN_OUT_VIEW_PARAMS(o), uint heads,
                                     uint kv_group, uint pairs, uint nq, uint nk, float scale,
                                     CLATTN_MASK_PARAMS, uint chunk, __global float *partial,
                                     ulong acc_off CLATTN_FUSED_MOD_PARAMS)
{
    uint first = get_global_id(0) * QPW, bh = get_global_id(1), split = get_global_id(2);
    uint splits = get_global_size(2);
    if (first >= nq || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    __global const KV_T *kb = CLATTN_VIEW_ROW(k, b, h / kv_group, 0); /* GQA: its kv head */
    __global const KV_T *vb = CLATTN_VIEW_ROW(v, b, h / kv_group, 0);

    VK_T qv[QPW][NK];   /* the queries, pre-scaled */
    VV_T acc[QPW][NV];  /* Σ exp(s - m) · v */
    float m[QPW], l[QPW];
    for (int r = 0; r < QPW; r++) {
        uint i = min(first + r, nq - 1); /* rows past the end repeat the last; not stored */
        __global const float *qi = CLATTN_VIEW_ROW(q, b, h, i);
        for (int c = 0; c < NK; c++)
            qv[r][c] = CLATTN_VLOAD(CLATTN_FUSED_VK)(c, qi) * scale;
        for (int c = 0; c < NV; c++)
            acc[r][c] = 0.0f;
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    /* This split's keys; with a causal mask no query of this work-item sees a key after its last
     * query's. */
    uint last = min(first + QPW, nq) - 1;
    uint begin = split * chunk; /* < nk + chunk: the host keeps splits · chunk < nk + chunk */
    uint end = min(causal ? min(nk, last + 1 + causal_shift) : nk, begin + chunk);
    bool masked = causal || am_kind != CLATTN_KMASK_NONE || kp_kind != CLATTN_KMASK_NONE;
#ifdef CLATTN_FUSED_MODS
    masked = true;
#endif
#ifdef CLATTN_FUSED_WINDOW
    begin = max(begin, CLATTN_WINDOW_LO(first));
    end = CLATTN_WINDOW_HI(last, end);
#endif

    for (uint j0 = begin; j0 < end; j0 += GTK) {
        float s[QPW][GTK];
        for (int t = 0; t < GTK; t++) {
            uint j = j0 + t;
            __global const KV_T *kj = kb + (ulong)min(j, nk - 1) * k_sn;
            VK_T kv[NK];
            for (int c = 0; c < NK; c++)
                kv[c] = CLATTN_KVLOAD(CLATTN_FUSED_VK)(c, kj);
            for (int r = 0; r < QPW; r++) {
                VK_T dot = qv[r][0] * kv[0];
                for (int c = 1; c < NK; c++)
                    dot += qv[r][c] * kv[c];
                float score = CLATTN_CAT(clattn_hsum, CLATTN_FUSED_VK)(dot);
                if (j >= end) /* past the keys: the masks have no element for it */
                    score = -INFINITY;
                else if (masked)
                    score = clattn_masked_score(
                        CLATTN_MODIFY(score, h, min(first + r, nq - 1), j), b, h,
                        min(first + r, nq - 1), j, CLATTN_MASK_ARGS);
                s[r][t] = score;
            }
        }
        for (int r = 0; r < QPW; r++) {
            VT_T sv = CLATTN_VLOAD(GTK)(0, s[r]);
            float block_max = CLATTN_CAT(clattn_hmax, GTK)(sv);
            if (block_max == -INFINITY) {
                CLATTN_VSTORE(GTK)((VT_T)(0.0f), 0, s[r]);
                continue;
            }
            CLATTN_ONLINE_RESCALE(m[r], l[r], acc[r], NV, block_max);
            VT_T p = exp(sv - m[r]);
            l[r] += CLATTN_CAT(clattn_hsum, GTK)(p);
            CLATTN_VSTORE(GTK)(p, 0, s[r]);
        }
        for (int t = 0; t < GTK; t++) {
            __global const KV_T *vj = vb + (ulong)min(j0 + t, nk - 1) * v_sn;
            for (int c = 0; c < NV; c++) {
                VV_T vv = CLATTN_KVLOAD(CLATTN_FUSED_VV)(c, vj);
                for (int r = 0; r < QPW; r++)
                    acc[r][c] += s[r][t] * vv;
            }
        }
    }
    for (int r = 0; r < QPW && first + r < nq; r++) {
        if (splits > 1) { /* the partial state of split `split`, merged by clattn_split_combine */
            ulong row = ((ulong)bh * nq + first + r) * splits + split;
            vstore2((float2)(m[r], l[r]), row, partial);
            __global float *out = partial + acc_off + row * DV;
            for (int c = 0; c < NV; c++)
                CLATTN_VSTORE(CLATTN_FUSED_VV)(acc[r][c], c, out);
            continue;
        }
        __global float *out = CLATTN_VIEW_ROW(o, b, h, first + r);
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        for (int c = 0; c < NV; c++)
            CLATTN_VSTORE(CLATTN_FUSED_VV)(acc[r][c] * inv, c, out);
    }
}

#if !defined(CLATTN_FUSED_LOCAL) && !defined(CLATTN_FUSED_KV_HALF)

/* ---- the micro-tiled variant (CPUs, float keys and values) ----
 * The same attention for TQ = 16 queries per work-item, one per lane of every vector: with keys
 * packed transposed in tiles of 16 (kt[pair_kv, tile, c, t], zero past nk;
 * clattn_pack_keys_tiled; passed as a head view whose rows are tiles), the scores of a tile are
 * 16 vectors s[t] (key t against the 16 queries), s[t] += q[:][c]·kt[tile][c][t] over c, outer
 * products with the key component a broadcast operand and no horizontal sums. The online softmax
 * then runs lane by lane (m, l: one lane per query; the tile's maximum and sum are element-wise
 * over the 16 score vectors, the sum in clattn_hsum16's tree order), and weights·V streams the
 * accumulators one d_v column at a time: acc[c][:] = acc[c][:]·correction + Σ_t p[t]·v[t][c]
 * (16 FMAs with the value a broadcast operand per load and store of the column), so no
 * accumulator needs to stay in a register across the tile. Every lane computes exactly what the
 * one-query-per-lane scalar recipe computes (the same FMA chains in the same order), so a row's
 * result does not depend on the other rows of its block. NDRange (ceil(nq / 16), pairs), any
 * local. */
#define TQ CLATTN_TILED_QUERIES /* 16: the lanes of the vectors below */
/* d_v columns of weights·V side by side (independent FMA chains): 8, or what divides d_v */
#if DV % 8 == 0
#define VB 8
#elif DV % 4 == 0
#define VB 4
#elif DV % 2 == 0
#define VB 2
#else
#define VB 1
#endif
#define TT CLATTN_KEY_TILE

/* Keys of a tile read in place, KR at a time: KR chains of DK FMAs side by side. */
#define KR 8

/* The body of both tiled kernels. keys_in_rows (a constant of each kernel): kt is the keys'
 * own view (row j of head h, e.g. a cache read where it is), else the keys packed transposed in
 * tiles (a head view whose "rows" are tiles, kt_sn = DK·TT floats). Either way each score is
 * the same chain s = fma(q[c], k[c], s) over c = 0 .. DK - 1 from 0, so both give the same
 * bytes: only where the key components are loaded from differs. */
void clattn_tiled_attention(CLATTN_VIEW_PARAMS(q), CLATTN_VIEW_PARAMS(kt), CLATTN_VIEW_PARAMS(v),
                            CLATTN_OUT_VIEW_PARAMS(o), uint heads, uint kv_group, uint pairs,
                            uint nq, uint nk, float scale,
                            CLATTN_MASK_PARAMS CLATTN_FUSED_MOD_PARAMS, const int keys_in_rows)
{
    uint first = get_global_id(0) * TQ, bh = get_global_id(1);
    if (first >= nq || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    __global const float *ktb = CLATTN_VIEW_ROW(kt, b, h / kv_group, 0);
    __global const float *vb = CLATTN_VIEW_ROW(v, b, h / kv_group, 0); /* GQA: its kv head */

    /* Vectors, not arrays of floats, so that each is one store and one load (vstore16 into a
     * float array may be split into narrower stores, which a wide load then waits for). */
    float16 qt[DK];  /* the queries transposed, pre-scaled: qt[c] = component c of each */
    float16 acc[DV]; /* Σ exp(s - m) · v, transposed: acc[c] = column c of each query */
#if DK % 16 == 0
    /* 16 components of the 16 queries at a time, transposed in registers */
    for (int c0 = 0; c0 < DK; c0 += 16) {
        float16 x[16];
#pragma unroll
        for (int r = 0; r < TQ; r++)
            x[r] = vload16(0, CLATTN_VIEW_ROW(q, b, h, min(first + r, nq - 1)) + c0) * scale;
        clattn_transpose16(x);
#pragma unroll
        for (int c = 0; c < 16; c++)
            qt[c0 + c] = x[c];
    }
#else
    for (int r = 0; r < TQ; r++) {
        __global const float *qi = CLATTN_VIEW_ROW(q, b, h, min(first + r, nq - 1));
        for (int c = 0; c < DK; c++)
            ((float *)&qt[c])[r] = qi[c] * scale;
    }
#endif
    for (int c = 0; c < DV; c++)
        acc[c] = 0.0f;
    float16 m = -INFINITY, l = 0.0f;
    uint last = min(first + TQ, nq) - 1;
    uint end = causal ? min(nk, last + 1 + causal_shift) : nk;
    bool masked = am_kind != CLATTN_KMASK_NONE || kp_kind != CLATTN_KMASK_NONE;
    uint j_first = 0;
#if defined(CLATTN_FUSED_MODS) && (CLATTN_FUSED_MODS & ~CLATTN_MOD_WINDOW)
    masked = true; /* scores that change: element by element */
#endif
    /* Masks that depend on the key alone (no attention mask, no causal limit, no modifier). */
    bool key_only = am_kind == CLATTN_KMASK_NONE && !causal;
#ifdef CLATTN_FUSED_MODS
    key_only = false;
#endif
#ifdef CLATTN_FUSED_WINDOW
    j_first = CLATTN_WINDOW_LO(first) / TT * TT; /* whole tiles: the keys are packed by tile */
    end = CLATTN_WINDOW_HI(last, end);
#endif

    for (uint j0 = j_first; j0 < end; j0 += TT) {
        float16 s[TT];
        if (keys_in_rows) {
            /* rows past nk (masked below) read row nk - 1 */
            for (int t0 = 0; t0 < TT; t0 += KR) {
                __global const float *krow[KR];
                float16 a[KR];
#pragma unroll
                for (int u = 0; u < KR; u++) {
                    krow[u] = ktb + (ulong)min(j0 + t0 + u, nk - 1) * kt_sn;
                    a[u] = 0.0f;
                }
                for (int c = 0; c < DK; c++) {
                    float16 qc = qt[c];
#pragma unroll
                    for (int u = 0; u < KR; u++)
                        a[u] = fma(qc, (float16)(krow[u][c]), a[u]);
                }
#pragma unroll
                for (int u = 0; u < KR; u++)
                    s[t0 + u] = a[u];
            }
        } else {
            __global const float *tile = ktb + (ulong)(j0 / TT) * DK * TT;
#pragma unroll
            for (int t = 0; t < TT; t++)
                s[t] = 0.0f;
            for (int c = 0; c < DK; c++) {
                float16 qc = qt[c];
#pragma unroll
                for (int t = 0; t < TT; t++)
                    s[t] = fma(qc, (float16)(tile[c * TT + t]), s[t]);
            }
        }
        /* Lanes past the keys, after a query's causal limit, or masked: element by element, and
         * only in the tiles that have any. */
        bool edge = j0 + TT > end || masked || (causal && j0 + TT - 1 > first + causal_shift);
#ifdef CLATTN_FUSED_WINDOW
        /* a tile partly outside some query's window */
        edge = edge || last + causal_shift > j0 + window_half ||
               j0 + TT - 1 > first + causal_shift + window_half;
#endif
        if (edge && key_only) {
            /* Only a key-padding mask and the end of the keys: one decision per key, the same
             * for all 16 queries (s + m, as clattn_masked_score adds it). */
#pragma unroll
            for (int t = 0; t < TT; t++) {
                uint j = j0 + t;
                if (j >= end) {
                    s[t] = -INFINITY;
                } else if (kp_kind != CLATTN_KMASK_NONE) {
                    float mk = kp[kp_off + b * kp_sb + j * kp_sj];
                    if (kp_kind == CLATTN_KMASK_BOOL)
                        s[t] = mk != 0.0f ? (float16)(-INFINITY) : s[t];
                    else
                        s[t] = s[t] + mk;
                }
            }
        } else if (edge) {
            float sp[TT][TQ];
#pragma unroll
            for (int t = 0; t < TT; t++) {
                vstore16(s[t], 0, sp[t]);
                uint j = j0 + t;
                for (int r = 0; r < TQ; r++) {
                    uint i = min(first + r, nq - 1);
                    sp[t][r] = j >= end || (causal && j > i + causal_shift)
                                   ? -INFINITY
                                   : (masked ? clattn_masked_score(
                                                   CLATTN_MODIFY(sp[t][r], h, i, j), b, h, i, j,
                                                   CLATTN_MASK_ARGS)
                                             : CLATTN_MODIFY(sp[t][r], h, i, j));
                }
                s[t] = vload16(0, sp[t]);
            }
        }
        /* The online softmax, lane by lane. A lane whose scores are all -inf here keeps m (its
         * correction is exactly 1 and its weights exactly 0); one with no score yet subtracts 0
         * instead of m = -inf (its weights exp(-inf) = 0, not NaN). */
        float16 tile_max = s[0];
#pragma unroll
        for (int t = 1; t < TT; t++)
            tile_max = fmax(tile_max, s[t]);
        float16 m_new = fmax(m, tile_max);
        float16 correction = select((float16)(1.0f), exp(m - m_new), m_new > m);
        float16 base = select(m_new, (float16)(0.0f), m_new == (float16)(-INFINITY));
        m = m_new;
        float16 p[TT];
#pragma unroll
        for (int t = 0; t < TT; t++)
            p[t] = exp(s[t] - base);
        /* Σ_t p[t] in clattn_hsum16's order: pairs 8 apart, then 4, 2 and 1 apart. */
        float16 sum8[8], sum4[4];
#pragma unroll
        for (int t = 0; t < 8; t++)
            sum8[t] = p[t] + p[t + 8];
#pragma unroll
        for (int t = 0; t < 4; t++)
            sum4[t] = sum8[t] + sum8[t + 4];
        float16 tile_sum = (sum4[0] + sum4[2]) + (sum4[1] + sum4[3]);
        l = l * correction;
        l = l + tile_sum;
        /* Weights·V, VB d_v columns at a time: each column is its own chain of 16 FMAs (in t's
         * order, whatever VB), and VB chains side by side keep the FMA units busy where one
         * chain would wait for each FMA's result. With contiguous value rows (packed by the
         * host when strided) and a whole tile, every value is at a constant offset from one
         * pointer; otherwise keys past nk (weight 0) read row nk - 1. */
        if (v_sn == DV && j0 + TT <= nk) {
            __global const float *vt = vb + (ulong)j0 * DV;
            for (int c = 0; c < DV; c += VB) {
                float16 a[VB];
#pragma unroll
                for (int u = 0; u < VB; u++)
                    a[u] = acc[c + u] * correction;
#pragma unroll
                for (int t = 0; t < TT; t++)
#pragma unroll
                    for (int u = 0; u < VB; u++)
                        a[u] = fma(p[t], (float16)(vt[t * DV + c + u]), a[u]);
#pragma unroll
                for (int u = 0; u < VB; u++)
                    acc[c + u] = a[u];
            }
        } else {
            __global const float *vrow[TT];
#pragma unroll
            for (int t = 0; t < TT; t++)
                vrow[t] = vb + (ulong)min(j0 + t, nk - 1) * v_sn;
            for (int c = 0; c < DV; c += VB) {
                float16 a[VB];
#pragma unroll
                for (int u = 0; u < VB; u++)
                    a[u] = acc[c + u] * correction;
#pragma unroll
                for (int t = 0; t < TT; t++)
#pragma unroll
                    for (int u = 0; u < VB; u++)
                        a[u] = fma(p[t], (float16)(vrow[t][c + u]), a[u]);
#pragma unroll
                for (int u = 0; u < VB; u++)
                    acc[c + u] = a[u];
            }
        }
    }
    float16 inv = select((float16)(0.0f), (float16)(1.0f) / l, l > (float16)(0.0f));
#if DV % 16 == 0
    /* 16 columns at a time, transposed back into 16 rows in registers */
    for (int c0 = 0; c0 < DV; c0 += 16) {
        float16 x[16];
#pragma unroll
        for (int c = 0; c < 16; c++)
            x[c] = acc[c0 + c] * inv;
        clattn_transpose16(x);
        for (int r = 0; r < TQ && first + r < nq; r++)
            vstore16(x[r], 0, CLATTN_VIEW_ROW(o, b, h, first + r) + c0);
    }
#else
    for (int c = 0; c < DV; c++)
        acc[c] = acc[c] * inv;
    for (int r = 0; r < TQ && first + r < nq; r++) {
        __global float *out = CLATTN_VIEW_ROW(o, b, h, first + r);
        for (int c = 0; c < DV; c++)
            out[c] = ((float *)&acc[c])[r];
    }
#endif
}

/* The arguments of clattn_tiled_attention, but the last. */
#define CLATTN_TILED_ARGS                                                                     \
    q, q_off, q_sb, q_sh, q_sn, kt, kt_off, kt_sb, kt_sh, kt_sn, v, v_off, v_sb, v_sh, v_sn,  \
        o, o_off, o_sb, o_sh, o_sn, heads, kv_group, pairs, nq, nk, scale, CLATTN_MASK_ARGS
#ifdef CLATTN_FUSED_MODS
#define CLATTN_TILED_MOD_ARGS , CLATTN_MOD_ARGS
#else
#define CLATTN_TILED_MOD_ARGS
#endif

/* Keys packed transposed in tiles of 16 (clattn_pack_keys_tiled). */
__kernel void clattn_fused_attention_tiled(CLATTN_VIEW_PARAMS(q), CLATTN_VIEW_PARAMS(kt),
                                           CLATTN_VIEW_PARAMS(v), CLATTN_OUT_VIEW_PARAMS(o),
                                           uint heads, uint kv_group, uint pairs, uint nq,
                                           uint nk, float scale,
                                           CLATTN_MASK_PARAMS CLATTN_FUSED_MOD_PARAMS)
{
    clattn_tiled_attention(CLATTN_TILED_ARGS CLATTN_TILED_MOD_ARGS, 0);
}

/* Keys read where they are (kt: the keys' view, any row stride): no packing, for few queries
 * against them (a decode step against its cache), with the same bytes per row. */
__kernel void clattn_fused_attention_tiled_rows(CLATTN_VIEW_PARAMS(q), CLATTN_VIEW_PARAMS(kt),
                                                CLATTN_VIEW_PARAMS(v),
                                                CLATTN_OUT_VIEW_PARAMS(o), uint heads,
                                                uint kv_group, uint pairs, uint nq, uint nk,
                                                float scale,
                                                CLATTN_MASK_PARAMS CLATTN_FUSED_MOD_PARAMS)
{
    clattn_tiled_attention(CLATTN_TILED_ARGS CLATTN_TILED_MOD_ARGS, 1);
}

#if DK % 16 == 0 && DV % 16 == 0 && !defined(CLATTN_FUSED_MODS)
/* The 16 lanes' sum in clattn_tiled_attention's order for its tile sums (pairs 8 apart, then 4,
 * 2 and 1 apart), component by component (oclgrind 21.10 misreads .lo/.hi of 16-wide vectors). */
inline float clattn_lane_sum16(float16 p)
{
    float q0 = p.s0 + p.s8, q1 = p.s1 + p.s9, q2 = p.s2 + p.sa, q3 = p.s3 + p.sb;
    float q4 = p.s4 + p.sc, q5 = p.s5 + p.sd, q6 = p.s6 + p.se, q7 = p.s7 + p.sf;
    float r0 = q0 + q4, r1 = q1 + q5, r2 = q2 + q6, r3 = q3 + q7;
    return (r0 + r2) + (r1 + r3);
}

inline float clattn_lane_max16(float16 s)
{
    float8 a = fmax(s.s01234567, s.s89abcdef);
    float4 b = fmax(a.s0123, a.s4567);
    return fmax(fmax(b.s0, b.s1), fmax(b.s2, b.s3));
}

/* One query per work-item against keys read where they are (a decode step against its cache):
 * clattn_tiled_attention's arithmetic for one of its lanes, with the vectors' 16 lanes holding
 * 16 keys (scores and weights: each key's score the same chain of fma over c, the keys' row
 * components transposed in registers 16 × 16 at a time) or 16 value columns (the weighted sums)
 * instead of 16 queries. Each query's every operation is the tiled kernels' for it, in the same
 * order and at the same vector width (exp and the division on float16 vectors), so its output
 * is the same bytes as theirs, for a sixteenth of the work. Without masks or score modifiers
 * (causal or not); the host checks. NDRange (nq, pairs), any local size. */
__kernel void clattn_fused_attention_query(CLATTN_VIEW_PARAMS(q), CLATTN_VIEW_PARAMS(kt),
                                           CLATTN_VIEW_PARAMS(v), CLATTN_OUT_VIEW_PARAMS(o),
                                           uint heads, uint kv_group, uint pairs, uint nq,
                                           uint nk, float scale, CLATTN_MASK_PARAMS)
{
    uint i = get_global_id(0), bh = get_global_id(1);
    if (i >= nq || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    __global const float *kb = CLATTN_VIEW_ROW(kt, b, h / kv_group, 0);
    __global const float *vb = CLATTN_VIEW_ROW(v, b, h / kv_group, 0); /* GQA: its kv head */
    __global const float *qi = CLATTN_VIEW_ROW(q, b, h, i);
    float qv[DK]; /* the query, pre-scaled */
    for (int c0 = 0; c0 < DK; c0 += 16)
        vstore16(vload16(0, qi + c0) * scale, 0, qv + c0);
    float16 acc[DV / 16]; /* Σ exp(s - m) · v, columns 16c .. 16c + 15 */
    for (int c = 0; c < DV / 16; c++)
        acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    uint end = causal ? min(nk, i + 1 + causal_shift) : nk;
    for (uint j0 = 0; j0 < end; j0 += TT) {
        __global const float *krow[TT];
#pragma unroll
        for (int t = 0; t < TT; t++)
            krow[t] = kb + (ulong)min(j0 + t, nk - 1) * kt_sn; /* past nk: row nk - 1, masked */
        float16 s = 0.0f;
        for (int c0 = 0; c0 < DK; c0 += 16) {
            float16 x[16];
#pragma unroll
            for (int t = 0; t < TT; t++)
                x[t] = vload16(0, krow[t] + c0);
            clattn_transpose16(x); /* x[c]: component c0 + c of the 16 keys */
#pragma unroll
            for (int c = 0; c < 16; c++)
                s = fma((float16)(qv[c0 + c]), x[c], s);
        }
        if (j0 + TT > end) { /* keys past the end or after the query's causal limit */
            float sp[TT];
            vstore16(s, 0, sp);
            for (int t = 0; t < TT; t++)
                if (j0 + t >= end)
                    sp[t] = -INFINITY;
            s = vload16(0, sp);
        }
        float m_new = fmax(m, clattn_lane_max16(s));
        /* exp on a float16 vector, as the tiled kernels take it (lane 0 used) */
        float correction = m_new > m ? exp((float16)(m - m_new)).s0 : 1.0f;
        float base = m_new == -INFINITY ? 0.0f : m_new;
        m = m_new;
        float p[TT];
        vstore16(exp(s - (float16)(base)), 0, p);
        l = l * correction;
        l = l + clattn_lane_sum16(vload16(0, p));
        for (int c = 0; c < DV / 16; c++) {
            float16 a = acc[c] * correction;
#pragma unroll
            for (int t = 0; t < TT; t++)
                a = fma((float16)(p[t]), vload16(0, vb + (ulong)min(j0 + t, nk - 1) * v_sn +
                                                        16 * c),
                        a);
            acc[c] = a;
        }
    }
    float inv = l > 0.0f ? ((float16)(1.0f) / (float16)(l)).s0 : 0.0f;
    __global float *out = CLATTN_VIEW_ROW(o, b, h, i);
    for (int c = 0; c < DV / 16; c++)
        vstore16(acc[c] * inv, 0, out + 16 * c);
}
#endif
#endif /* !CLATTN_FUSED_LOCAL && !CLATTN_FUSED_KV_HALF */

/* Merges the splits' partial states of query i of pair bh: with M the largest of their maxima,
 * out = Σ_s exp(m_s - M)·acc_s / Σ_s exp(m_s - M)·l_s (zero when every key was masked). */
__kernel void clattn_split_combine(__global const float *partial, ulong acc_off,
                                   CLATTN_OUT_VIEW_PARAMS(o), uint heads, uint pairs, uint nq,
                                   uint splits)
{
    uint i = get_global_id(0), bh = get_global_id(1);
    if (i >= nq || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    ulong row0 = ((ulong)bh * nq + i) * splits;
    float top = -INFINITY;
    for (uint s = 0; s < splits; s++)
        top = fmax(top, vload2(row0 + s, partial).x);
    VV_T acc[NV];
    for (int c = 0; c < NV; c++)
        acc[c] = 0.0f;
    float total = 0.0f;
    for (uint s = 0; top != -INFINITY && s < splits; s++) {
        float2 ml = vload2(row0 + s, partial);
        if (ml.x == -INFINITY)
            continue;
        float weight = exp(ml.x - top);
        total += weight * ml.y;
        __global const float *part = partial + acc_off + (row0 + s) * DV;
        for (int c = 0; c < NV; c++)
            acc[c] += weight * CLATTN_VLOAD(CLATTN_FUSED_VV)(c, part);
    }
    __global float *out = CLATTN_VIEW_ROW(o, b, h, i);
    float inv = total > 0.0f ? 1.0f / total : 0.0f;
    for (int c = 0; c < NV; c++)
        CLATTN_VSTORE(CLATTN_FUSED_VV)(acc[c] * inv, c, out);
}

#if defined(CLATTN_FUSED_LOCAL) && !defined(CLATTN_FUSED_KV_HALF)

/* The per-query state of the online softmax. */
typedef struct clattn_online {
    float m;       /* largest score so far */
    float l;       /* Σ exp(s - m) */
    float acc[DV]; /* Σ exp(s - m) · v */
} clattn_online;

/* Folds one block of scores s[0..TK) (already masked; -inf = ignored) into the state, turning
 * s into the unnormalised probabilities exp(s - m). Returns 0 when the block adds nothing. */
int clattn_online_block(clattn_online *st, float *s)
{
    float block_max = -INFINITY;
    for (int t = 0; t < TK; t++)
        block_max = fmax(block_max, s[t]);
    if (block_max == -INFINITY)
        return 0;
    CLATTN_ONLINE_RESCALE(st->m, st->l, st->acc, DV, block_max);
    for (int t = 0; t < TK; t++) {
        s[t] = exp(s[t] - st->m);
        st->l += s[t];
    }
    return 1;
}

void clattn_online_store(const clattn_online *st, __global float *o)
{
    float inv = st->l > 0.0f ? 1.0f / st->l : 0.0f;
    for (int c = 0; c < DV; c++)
        o[c] = st->acc[c] * inv;
}


/* The same with each block of keys and values staged through __local memory by the whole
 * work-group (one query per work-item: QPW must be 1). No work-item leaves before the last
 * barrier; those without a query compute on a clamped row and store nothing. */
__kernel __attribute__((reqd_work_group_size(CLATTN_FUSED_WG, 1, 1)))
void clattn_fused_attention_local(CLATTN_VIEW_PARAMS(q), CLATTN_VIEW_PARAMS(k),
                                  CLATTN_VIEW_PARAMS(v), CLATTN_OUT_VIEW_PARAMS(o), uint heads,
                                  uint kv_group, uint pairs, uint nq, uint nk, float scale,
                                  CLATTN_MASK_PARAMS CLATTN_FUSED_MOD_PARAMS)
{
    __local float k_tile[TK][DK];
    __local float v_tile[TK][DV];
    uint i = get_global_id(0), bh = get_group_id(1), t_local = get_local_id(0);
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    uint row = min(i, nq - 1);
    __global const float *kb = CLATTN_VIEW_ROW(k, b, h / kv_group, 0); /* GQA: its kv head */
    __global const float *vb = CLATTN_VIEW_ROW(v, b, h / kv_group, 0);
    __global const float *qi = CLATTN_VIEW_ROW(q, b, h, row);
    float qv[DK];
    for (int c = 0; c < DK; c++)
        qv[c] = qi[c] * scale;
    clattn_online st;
    st.m = -INFINITY;
    st.l = 0.0f;
    for (int c = 0; c < DV; c++)
        st.acc[c] = 0.0f;
    /* The same bound for the whole work-group: the keys its last query can see. */
    uint group_last = min((uint)(get_group_id(0) + 1) * CLATTN_FUSED_WG, nq) - 1;
    uint end = causal ? min(nk, group_last + 1 + causal_shift) : nk;
    uint j_first = 0;
#ifdef CLATTN_FUSED_WINDOW
    j_first = CLATTN_WINDOW_LO((uint)get_group_id(0) * CLATTN_FUSED_WG);
    end = CLATTN_WINDOW_HI(group_last, end);
#endif

    for (uint j0 = j_first; j0 < end; j0 += TK) {
        for (uint e = t_local; e < TK * DK; e += CLATTN_FUSED_WG) {
            uint j = min(j0 + e / DK, nk - 1);
            k_tile[e / DK][e % DK] = kb[(ulong)j * k_sn + e % DK];
        }
        for (uint e = t_local; e < TK * DV; e += CLATTN_FUSED_WG) {
            uint j = min(j0 + e / DV, nk - 1);
            v_tile[e / DV][e % DV] = vb[(ulong)j * v_sn + e % DV];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[TK];
        for (int t = 0; t < TK; t++) {
            float dot = 0.0f;
            for (int c = 0; c < DK; c++)
                dot += qv[c] * k_tile[t][c];
            uint j = j0 + t;
            s[t] = j < end && j <= (causal ? row + causal_shift : j)
                       ? clattn_masked_score(CLATTN_MODIFY(dot, h, row, j), b, h, row, j,
                                             CLATTN_MASK_ARGS)
                       : -INFINITY;
        }
        if (clattn_online_block(&st, s))
            for (int t = 0; t < TK; t++)
                for (int c = 0; c < DV; c++)
                    st.acc[c] += s[t] * v_tile[t][c];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < nq && bh < pairs)
        clattn_online_store(&st, CLATTN_VIEW_ROW(o, b, h, i));
}

#endif /* CLATTN_FUSED_LOCAL && !CLATTN_FUSED_KV_HALF */
#endif /* CLATTN_FUSED_DK */
