/* The byte-level BPE model shared by tokenizer_bpe.c (encoding) and tokenizer_bpe_load.c. */
#ifndef CLATTN_TOKENIZER_BPE_INTERNAL_H
#define CLATTN_TOKENIZER_BPE_INTERNAL_H

#include "tokenizer_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* The byte_id tables: [BPE_CONTINUING | BPE_LAST] for a byte that is not the word's first
 * (continuing_subword_prefix before it) and the word's last (end_of_word_suffix after it). */
enum { BPE_CONTINUING = 1, BPE_LAST = 2 };

struct clattn__bpe {
    /* GPT-2's bytes_to_unicode: the character that stands for each byte. */
    uint32_t byte_cp[256];
    /* The vocabulary id of each byte's character, with the prefix and suffix as the index says
     * (see above); -1 when the vocabulary lacks it. */
    int32_t byte_id[4][256];
    /* The merges: an open-addressing table from the pair (left id << 32 | right id) to its rank
     * (the position in "merges"; a pair listed twice keeps its last rank, as the crate's
     * HashMap does) and the id of the merged token. */
    uint64_t *merge_keys;    /* [merge_mask + 1]; UINT64_MAX: an empty slot */
    uint32_t *merge_ranks;
    int32_t *merge_ids;
    size_t merge_mask;
    size_t merge_count;
    int32_t unk;             /* unk_token's id, or -1 (null: unknown characters are dropped) */
    bool fuse_unk;
    bool ignore_merges;      /* a pre-token that is a vocabulary entry is that entry */
    /* The ByteLevel pre-tokeniser. */
    bool add_prefix_space;
    bool use_regex;
    pcre2_code *re;          /* the GPT-2 regex (NULL when use_regex is false) */
};

/* The hash of a merge table key. */
static inline uint64_t clattn__bpe_pair_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return key;
}

/* The rank and merged id of the pair (a, b); false when the pair is not a merge. */
bool clattn__bpe_merge_find(const clattn__bpe *bpe, int32_t a, int32_t b, uint32_t *rank,
                            int32_t *merged);

#endif /* CLATTN_TOKENIZER_BPE_INTERNAL_H */
