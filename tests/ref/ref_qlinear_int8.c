/* Plain-C reference of the linear layers with 8-bit activations (ref_qlinear_int8.h). */
#include "ref_qlinear_int8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* IEEE half bits to float (exact). */
static float half_to_float(const unsigned char *p)
{
    unsigned h = (unsigned)p[0] | (unsigned)p[1] << 8;
    int e = (int)(h >> 10 & 31);
    unsigned mant = h & 1023;
    float v;
    if (e == 0)
        v = ldexpf((float)mant, -24);
    else if (e == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexpf((float)(mant | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}

typedef struct block_values {
    int u[256];      /* the stored integers (Q8_0: signed) */
    int s[16], t[16]; /* S and T per 16 values */
    float d, o;      /* D and O */
} block_values;

static void k4_scale_min(const unsigned char *q, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* The block at b of `type` as D·S·u + O·T per value. */
static void read_block(uint32_t type, const unsigned char *b, block_values *v)
{
    memset(v, 0, sizeof(*v));
    switch (type) {
    case 2: /* Q4_0: d, qs[16]; u = nibble, w = d·(u − 8) */
    case 3: /* Q4_1: d, m, qs[16]; w = d·u + m */
    {
        const unsigned char *qs = b + (type == 2 ? 2 : 4);
        for (int i = 0; i < 16; i++) {
            v->u[i] = qs[i] & 15;
            v->u[i + 16] = qs[i] >> 4;
        }
        v->d = half_to_float(b);
        v->o = type == 2 ? v->d : half_to_float(b + 2);
        v->s[0] = v->s[1] = 1;
        v->t[0] = v->t[1] = type == 2 ? -8 : 1;
        break;
    }
    case 6: /* Q5_0: d, qh (32 bits), qs[16]; u = nibble | bit i of qh << 4, w = d·(u − 16) */
    case 7: /* Q5_1: d, m, qh, qs[16]; w = d·u + m */
    {
        const unsigned char *qhp = b + (type == 6 ? 2 : 4), *qs = qhp + 4;
        uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 |
                      (uint32_t)qhp[3] << 24;
        for (int i = 0; i < 16; i++) {
            v->u[i] = (qs[i] & 15) | (int)((qh >> i) & 1) << 4;
            v->u[i + 16] = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4;
        }
        v->d = half_to_float(b);
        v->o = type == 6 ? v->d : half_to_float(b + 2);
        v->s[0] = v->s[1] = 1;
        v->t[0] = v->t[1] = type == 6 ? -16 : 1;
        break;
    }
    case 8: /* Q8_0: d, qs[32] int8; w = d·q */
        for (int i = 0; i < 32; i++)
            v->u[i] = (int8_t)b[2 + i];
        v->d = half_to_float(b);
        v->o = 0.0f;
        v->s[0] = v->s[1] = 1;
        break;
    case 12: /* Q4_K: d, dmin, scales[12], qs[128]; w = d·sc·u − dmin·min per sub-block of 32 */
    case 13: /* Q5_K: d, dmin, scales[12], qh[32], qs[128]; u gets bit (sub-block) of qh[l] */
    {
        const unsigned char *qs = b + (type == 12 ? 16 : 48), *qh = b + 16;
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                v->u[64 * j + l] = qs[32 * j + l] & 15;
                v->u[64 * j + 32 + l] = qs[32 * j + l] >> 4;
                if (type == 13) {
                    v->u[64 * j + l] |= (qh[l] >> (2 * j) & 1) << 4;
                    v->u[64 * j + 32 + l] |= (qh[l] >> (2 * j + 1) & 1) << 4;
                }
            }
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            k4_scale_min(b + 4, j, &sc, &mn);
            v->s[2 * j] = v->s[2 * j + 1] = sc;
            v->t[2 * j] = v->t[2 * j + 1] = -mn;
        }
        v->d = half_to_float(b);
        v->o = half_to_float(b + 2);
        break;
    }
    case 14: /* Q6_K: ql[128], qh[64], scales[16] int8, d; w = d·sc·(u − 32) */
        for (int half = 0; half < 2; half++) {
            const unsigned char *ql = b + 64 * half, *qh = b + 128 + 32 * half;
            int *u = v->u + 128 * half;
            for (int l = 0; l < 32; l++) {
                u[l] = (ql[l] & 15) | (qh[l] & 3) << 4;
                u[l + 32] = (ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4;
                u[l + 64] = (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4;
                u[l + 96] = (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4;
            }
        }
        for (int h = 0; h < 16; h++) {
            v->s[h] = (int8_t)b[192 + h];
            v->t[h] = -32 * v->s[h];
        }
        v->d = v->o = half_to_float(b + 208);
        break;
    }
}

int ref_qi_type(uint32_t type, size_t *block_values_out, size_t *block_bytes)
{
    static const struct {
        uint32_t type;
        size_t values, bytes;
    } types[] = {{2, 32, 18},   {3, 32, 20},   {6, 32, 22},   {7, 32, 24},
                 {8, 32, 34},   {12, 256, 144}, {13, 256, 176}, {14, 256, 210}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (types[i].type == type) {
            if (block_values_out)
                *block_values_out = types[i].values;
            if (block_bytes)
                *block_bytes = types[i].bytes;
            return 1;
        }
    return 0;
}

void ref_qi_quantize(const float *x, size_t k, size_t qb, int8_t *q, float *d, int16_t *s)
{
    for (size_t b = 0; b < k / qb; b++) {
        float amax = 0.0f;
        for (size_t i = 0; i < qb; i++)
            amax = fmaxf(amax, fabsf(x[b * qb + i]));
        float scale = amax / 127.0f;
        float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
        for (size_t i = 0; i < qb; i++) {
            float product = x[b * qb + i] * inverse;
            q[b * qb + i] = (int8_t)roundf(product);
        }
        d[b] = scale;
    }
    for (size_t h = 0; h < k / 16; h++) {
        int sum = 0;
        for (size_t i = 0; i < 16; i++)
            sum += q[16 * h + i];
        s[h] = (int16_t)sum;
    }
}

/* A row's quantised activations and one block's values: the working memory of both entries. */
typedef struct work {
    size_t qb, bb; /* the type's block: values, bytes */
    int8_t *q;
    float *d;
    int16_t *s;
    block_values *v;
} work;

static void work_init(work *w, uint32_t type, size_t k)
{
    if (!ref_qi_type(type, &w->qb, &w->bb))
        abort();
    w->q = malloc(k);
    w->d = malloc(k / w->qb * sizeof(float));
    w->s = malloc(k / 16 * sizeof(int16_t));
    w->v = malloc(sizeof(*w->v));
    if (!w->q || !w->d || !w->s || !w->v)
        abort();
}

static void work_free(work *w)
{
    free(w->q);
    free(w->d);
    free(w->s);
    free(w->v);
}

/* The lane of value i of a block (cl/qlinear_int8.cl's order): values 4l .. 4l + 3 of each 32;
 * Q4_K's and Q5_K's: lane 4·(s mod 2) + (i mod 16) / 4 of sub-block s = i / 32, so that a
 * sub-block's two halves of 16 share their lanes and sub-blocks 2j and 2j + 1 take lanes 0-3
 * and 4-7. */
static int ref_qi_lane(uint32_t type, size_t i)
{
    if (type == 12 || type == 13)
        return (int)(4 * (i / 32 % 2) + i % 16 / 4);
    return (int)(i % 32 / 4);
}

void ref_qi_linear(uint32_t type, const unsigned char *bytes, size_t n, size_t k, const float *x,
                   size_t m, size_t ldx, float *y, size_t ldy)
{
    work w;
    work_init(&w, type, k);
    const size_t qb = w.qb, bb = w.bb;
    const int8_t *q = w.q;
    const float *d = w.d;
    const int16_t *s = w.s;
    block_values *v = w.v;
    for (size_t r = 0; r < m; r++) {
        ref_qi_quantize(x + r * ldx, k, qb, w.q, w.d, w.s);
        for (size_t j = 0; j < n; j++) {
            float acc[8] = {0}, off = 0.0f;
            for (size_t b = 0; b < k / qb; b++) {
                read_block(type, bytes + (j * (k / qb) + b) * bb, v);
                long long lane[8] = {0}, bsum = 0;
                for (size_t i = 0; i < qb; i++)
                    lane[ref_qi_lane(type, i)] +=
                        (long long)v->s[i / 16] * v->u[i] * q[b * qb + i];
                for (size_t h = 0; h < qb / 16; h++)
                    bsum += (long long)v->t[h] * s[b * (qb / 16) + h];
                float scale = v->d * d[b], offset_scale = v->o * d[b];
                for (int l = 0; l < 8; l++)
                    acc[l] = fmaf((float)lane[l], scale, acc[l]);
                off = fmaf(offset_scale, (float)bsum, off);
            }
            float q0 = acc[0] + acc[4], q1 = acc[1] + acc[5], q2 = acc[2] + acc[6];
            float q3 = acc[3] + acc[7];
            float s0 = q0 + q2, s1 = q1 + q3;
            y[r * ldy + j] = (s0 + s1) + off;
        }
    }
    work_free(&w);
}

double ref_qi_rounding_bound(uint32_t type, const unsigned char *bytes, size_t k, size_t j,
                             const float *x_row)
{
    work w;
    work_init(&w, type, k);
    ref_qi_quantize(x_row, k, w.qb, w.q, w.d, w.s);
    double bound = 0.0;
    for (size_t b = 0; b < k / w.qb; b++) {
        const block_values *v = w.v;
        read_block(type, bytes + (j * (k / w.qb) + b) * w.bb, w.v);
        for (size_t i = 0; i < w.qb; i++) {
            double value = (double)v->d * v->s[i / 16] * v->u[i] + (double)v->o * v->t[i / 16];
            bound += fabs(value) * w.d[b] / 2.0;
        }
    }
    work_free(&w);
    return bound;
}
