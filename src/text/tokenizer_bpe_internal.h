/* The byte-level BPE model shared by tokenizer_bpe.c (encoding), tokenizer_bpe_build.c (building
 * it from plain arrays) and tokenizer_bpe_load.c (reading tokenizer.json into those arrays). */
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
    pcre2_code *re;          /* the split's regex (GPT-2's); NULL: the text is one pre-token */
};

/* The hash of a merge table key. */
static inline uint64_t clattn__bpe_pair_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return key;
}

/* One merge given by its two tokens' bytes (not NUL-terminated). */
typedef struct clattn__bpe_merge {
    const char *left;
    size_t left_length;
    const char *right;
    size_t right_length;
} clattn__bpe_merge;

/* What a byte-level BPE model is built from, whatever its source (tokenizer.json, a GGUF
 * file's metadata): plain arrays and options, nothing of a file format. */
typedef struct clattn__bpe_spec {
    /* The merges in order of rank (the first is applied first), given either by their tokens'
     * bytes (`merges`) or by their tokens' ids (`merge_ids`: [left, right]); merge_count of
     * them, the other array NULL (both NULL when there are none). A pair listed again keeps
     * its last rank. The merged token (left, then right without the continuing subword
     * prefix) must be in the vocabulary. */
    const clattn__bpe_merge *merges;
    const int32_t (*merge_ids)[2];
    size_t merge_count;
    const char *merges_name;               /* what errors call them ("\"model\".\"merges\"") */
    const char *continuing_subword_prefix; /* NULL: none */
    const char *end_of_word_suffix;        /* NULL: none */
    int32_t unk;          /* the unknown token's id, or -1 (unknown characters are dropped) */
    bool fuse_unk;        /* consecutive unknown characters give one unk */
    bool ignore_merges;   /* a pre-token that is a vocabulary entry is that entry */
    bool byte_level;      /* tokens spell bytes as GPT-2's characters; false (SentencePiece's
                           * BPE of characters) is refused for now */
    bool add_prefix_space;
    /* The split of the text before BPE, by name: "gpt2" (GPT-2's regex, as the crate's
     * ByteLevel with use_regex); NULL: none, the whole text is one pre-token. */
    const char *pre_tokenizer;
} clattn__bpe_spec;

/* Builds the BPE model of `spec` over `vocab` (which must outlive it) into a new *out
 * (tokenizer_bpe_build.c; freed with clattn__bpe_free). Errors name `function` and `where`,
 * and the merge by its index in spec's array. *out is NULL on failure. */
clattn_status clattn__bpe_build(clattn__bpe **out, const clattn__vocab *vocab,
                                const clattn__bpe_spec *spec, const char *function,
                                const char *where);

/* The rank and merged id of the pair (a, b); false when the pair is not a merge. */
bool clattn__bpe_merge_find(const clattn__bpe *bpe, int32_t a, int32_t b, uint32_t *rank,
                            int32_t *merged);

#endif /* CLATTN_TOKENIZER_BPE_INTERNAL_H */
