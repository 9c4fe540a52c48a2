/*
 * libclattn — tokenizer.h: BERT's WordPiece tokenizer, byte-level BPE (RoBERTa, GPT-2,
 * ModernBERT) and SentencePiece's Unigram (XLM-RoBERTa), as Hugging Face's fast tokenizer runs
 * them.
 *
 * A clattn_tokenizer turns UTF-8 text into the token ids of a model: the ids of the text within
 * the post-processor's single template ([CLS] ... [SEP] for BERT, <s> ... for a BOS-only one,
 * nothing added for none: see "Templates" below); and a pair of texts (a cross-encoder's query
 * and document) into its pair template (see "Pairs" below). It reproduces Hugging Face's
 * `BertTokenizerFast` (the `tokenizers` crate: AddedVocabulary, BertNormalizer,
 * BertPreTokenizer, WordPiece, TemplateProcessing), and gives the same ids for every text
 * except where the Unicode tables differ (below). A tokenizer.json whose "model"."type" is
 * "BPE" gives a byte-level BPE tokenizer instead (see "Byte-level BPE" below). It is loaded
 * from one of:
 *   - a model folder (as sentence-transformers writes it): its tokenizer.json, else its
 *     vocab.txt; the default maximum length is sentence_bert_config.json's "max_seq_length"
 *     when that file gives one, else config.json's "max_position_embeddings" (less 2 for
 *     model_type "mpnet", "roberta" or "xlm-roberta", whose positions start at 2), else
 *     (tokenizer.json only) its "truncation"."max_length", else unlimited.
 *     sentence_bert_config.json's "do_lower_case" (sentence-transformers' own lower-casing
 *     before the tokenizer) is not applied: all-MiniLM-L6-v2 sets it false;
 *   - a tokenizer.json file: the vocabulary is "model"."vocab" ("model"."type" must be
 *     "WordPiece", or "BPE" or "Unigram": see below), with its "unk_token",
 *     "continuing_subword_prefix" and
 *     "max_input_chars_per_word"; the normaliser options come from "normalizer" (type
 *     "BertNormalizer": clean_text, handle_chinese_chars, strip_accents, lowercase; null: no
 *     normalisation); the special tokens from "added_tokens" (with their single_word, lstrip,
 *     rstrip and normalized flags); the single and pair templates from "post_processor"
 *     (TemplateProcessing, BertProcessing, RobertaProcessing: MPNet's and RoBERTa's
 *     <s> ... </s>, ByteLevel, a Sequence of them, or null: see "Templates"); the padding id
 *     from "padding"."pad_id" when given, else the token "[PAD]", else "<pad>"; the mask id
 *     of "[MASK]", else "<mask>"; the
 *     default maximum length from "truncation"."max_length" (unlimited when null);
 *   - a vocab.txt file (one token per line, the line number from 0 is the id; trailing
 *     whitespace, "\r" included, is not part of the token): the settings of
 *     BertTokenizerFast's defaults (lower-casing, accent stripping, Chinese characters, text
 *     cleaning, "##" continuations, 100 characters per word, [UNK]); the tokens [PAD], [UNK],
 *     [CLS], [SEP] and [MASK] that the vocabulary holds are the special tokens; BERT's pair
 *     template; no maximum length.
 * [UNK] must be in the vocabulary (and a vocab.txt's [CLS] and [SEP]); [PAD] is optional.
 *
 * Encoding a text, step by step (each as the tokenizers crate does it):
 *   1. Special tokens: the added tokens whose "normalized" flag is false (all of BERT's
 *      special tokens) are found in the raw text, leftmost-longest, case-sensitively, and split
 *      out: "hello [SEP] world" gives hello, 102, world; "[sep]" or "[ SEP]" are plain text.
 *      single_word keeps only matches not preceded or followed by a word character; lstrip and
 *      rstrip take the whitespace before or after the match into it.
 *   2. Normalisation of each remaining piece (BertNormalizer):
 *      a. cleaning: U+0000, U+FFFD and every control, format, private-use or surrogate
 *         character (categories Cc, Cf, Co, Cs), except tab, newline and carriage return, are
 *         removed; then every White_Space character (tab, newline, carriage return, U+0020,
 *         U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) becomes a
 *         space. U+000B, U+000C and U+0085 are Cc: they are removed, not turned into a space,
 *         and so join the words around them. Zero-width characters (U+200B..U+200D, U+2060,
 *         U+FEFF) are Cf: removed. Unassigned code points (Cn) are kept, as the crate keeps
 *         them (its comment says otherwise, its tables list none): they become [UNK];
 *      b. CJK: a space before and after every CJK ideograph in the ranges U+4E00..U+9FFF,
 *         U+3400..U+4DBF, U+20000..U+2A6DF, U+2A700..U+2B73F, U+2B740..U+2B81F,
 *         U+2B920..U+2CEAF, U+F900..U+FAFF, U+2F800..U+2FA1F (the crate's ranges exactly:
 *         U+2B820..U+2B91F and the extensions G and H are not among them). Hiragana, katakana
 *         and Hangul are not CJK ideographs;
 *      c. accents (when strip_accents, or when it is null and lowercase is true): canonical
 *         decomposition (NFD, canonical order included; Hangul syllables become jamo), then
 *         every nonspacing mark (Mn) is removed. Spacing (Mc) and enclosing (Me) marks stay;
 *      d. lower-casing: each character's full lower-case mapping, without the conditional
 *         (language or context dependent) rules: "İ" (U+0130) becomes "i̇" (U+0069 U+0307),
 *         final sigma is "σ", "ß" stays "ß" (this is not case folding).
 *   3. Pre-tokenisation: words are split at White_Space characters (removed), and every
 *      punctuation character becomes a word of its own: ASCII punctuation (!"#$%&'()*+,-./:;<=>?
 *      @[\]^_`{|}~, so also $, +, <, =, >, ^, ` , | and ~, which Unicode calls symbols) and every
 *      character of categories Pc, Pd, Ps, Pe, Pi, Pf and Po.
 *   4. WordPiece: a word of more than max_input_chars_per_word (100) characters is [UNK];
 *      otherwise it is split greedily into the longest vocabulary entries from the left, the
 *      pieces after the first looked up with the "##" prefix; a word with any part that matches
 *      nothing is a single [UNK].
 *   5. Truncation to max_length ids in all, the single template's special ids included: the
 *      text's first max_length - 2 ids are kept (BERT's two), then [CLS] is put first and
 *      [SEP] last (the single template: see "Templates").
 * The empty text (or one that normalises to nothing) gives [CLS] [SEP].
 *
 * Unicode versions. The Unicode data come from utf8proc (Unicode 15.0 in Debian 12's
 * libutf8proc 2.8): categories, canonical decompositions, combining classes, lower-case
 * mappings. Hugging Face's tokenizers crate (0.19.1) takes its categories from the
 * `unicode_categories` crate and its decompositions from `unicode-normalization-alignments`,
 * whose tables are of Unicode 8.0. For 569 code points, all assigned or changed after
 * Unicode 8.0, the two therefore disagree (tests/tokenizer_unicode_diffs.h lists them):
 *   - 383 nonspacing marks (Mn) of Unicode 9.0 to 15.0: Hugging Face keeps them (usually
 *     giving [UNK] for the word), this tokenizer strips them with the other accents;
 *   - 13 format characters (Cf) of 9.0 to 14.0 (U+0890, U+0891, U+08E2, U+110CD,
 *     U+13430..U+13438): Hugging Face keeps them, this tokenizer removes them;
 *   - 104 punctuation characters (Po, Ps, Pe, Pd) of 9.0 to 15.0 (U+2E43..U+2E4F and
 *     U+2E52..U+2E5D among them): Hugging Face keeps them inside words, this tokenizer splits
 *     them off;
 *   - 65 further characters of Unicode 15.0 of the kinds above;
 *   - U+166D (Po in 8.0, So since 12.0), U+1734 (Mn in 8.0, Mc since 14.0), U+111C9 (Po in
 *     8.0, Mn since 13.0), U+11938 (canonical decomposition since 13.0).
 * Newer letters, symbols and emoji (for example U+1F970 "🥰") are unassigned for Hugging Face
 * and kept by both: they agree. Every other code point is treated identically (checked over
 * all of Unicode against Hugging Face's own per-code-point results), and texts without the
 * 569 code points give exactly Hugging Face's ids (tests/test_tokenizer.c, on 50 hand-picked
 * and 3000 random texts). Lower-case mappings follow Unicode 15.0 on both sides (Rust's
 * standard library).
 *
 * Byte-level BPE ("model"."type" "BPE", as RoBERTa's, GPT-2's and ModernBERT's tokenizer.json;
 * tokenizers 0.19.1's models/bpe and pre_tokenizers/byte_level.rs). Steps 1 (added tokens:
 * RoBERTa's <mask> has lstrip, so "a <mask>" is a, <mask>) and 5 (truncation, <s> first and
 * </s> last) are as above; "normalizer" is null, BertNormalizer as above, or "NFC" (below);
 * then:
 *   3'. the ByteLevel pre-tokeniser ("pre_tokenizer" must be {"type": "ByteLevel"}) on each
 *      piece between added tokens: with add_prefix_space (default true; RoBERTa's and
 *      ModernBERT's files say false) a space is put before a piece that does not start with
 *      U+0020; with use_regex (default true) the piece is split by GPT-2's regex
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      into pre-tokens (the text between matches too: the regex matches everything); each byte
 *      of a pre-token's UTF-8 becomes one character of GPT-2's byte alphabet (bytes_to_unicode:
 *      the printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF stand for themselves, the 68
 *      others for U+0100.. in order: a space is "Ġ" U+0120, a newline "Ċ" U+010A);
 *   4'. BPE on each pre-token: each character's vocabulary id (continuing_subword_prefix before
 *      every one but the first, end_of_word_suffix after the last, when the file sets them; a
 *      character not in the vocabulary is unk_token's id, runs of them one id with fuse_unk, or
 *      is dropped when unk_token is null), then the pair of neighbours with the lowest rank in
 *      "merges" (its position there; "A B" strings or ["A", "B"] pairs; a pair listed twice
 *      keeps its later rank) is merged, the leftmost first among equal pairs, until no pair is
 *      a merge. With ignore_merges a pre-token that is itself a vocabulary entry is that id.
 * The regex runs on PCRE2 (PCRE2_UTF | PCRE2_UCP; Debian 12's 10.42, Unicode 14.0), Hugging
 * Face's on Oniguruma 6.9.8 (Unicode 14.0). Their \s differ: PCRE2's also matches U+180E
 * MONGOLIAN VOWEL SEPARATOR (a format character since Unicode 6.3), Oniguruma's is exactly
 * White_Space, so \s and \S are written as the White_Space class (the list in step 2a, with
 * U+000B, U+000C and U+0085). \p{L} and \p{N} agree on every code point (checked over all of
 * Unicode against Hugging Face's splits, and end to end); built against a PCRE2 of a later
 * Unicode version (10.43 and up: Unicode 15.0 and later), the letters and digits assigned
 * since Unicode 14.0 (such as U+11F04 KAWI LETTER A) would be \p{L}/\p{N} here and
 * unassigned (split like symbols) for Hugging Face. The normalizer {"type": "NFC"} (GPT-NeoX
 * style files; with either model) is Unicode's NFC of each piece between added tokens, with
 * utf8proc's Unicode 15.0 data; Hugging Face's crate has Unicode 8.0 tables, so 109 code points
 * differ (checked over all of Unicode): the combining marks assigned since 8.0 (or whose class
 * changed), which NFC reorders by class and Hugging Face leaves in place (U+07FD, U+0898..
 * U+089F, U+08CA..U+08D3, U+09FE, U+0C3C, U+0D3B, U+0D3C, U+0EBA, U+1715, U+1ABF..U+1ACE,
 * U+1DF6..U+1DFA, U+A82C, U+10D24..U+10D27, U+10EAB, U+10EAC, U+10EFD..U+10EFF,
 * U+10F46..U+10F50, U+10F82..U+10F85, U+11070, U+1133B, U+1145E, U+11839, U+1183A,
 * U+1193D, U+1193E, U+11943, U+119E0, U+11A34, U+11A47, U+11A99, U+11D42, U+11D44, U+11D45,
 * U+11D97, U+11F41, U+11F42, U+16FF0, U+16FF1, U+1E08F, U+1E130..U+1E136, U+1E2AE,
 * U+1E2EC..U+1E2EF, U+1E4EC..U+1E4EF), and U+11938 DIVES AKURU VOWEL SIGN O, whose
 * decomposition (U+11935 U+11930, since Unicode 13.0) NFC composes here
 * (tests/golden/tokenizer_bpe/nfc.json lists them with Hugging Face's results).
 * Not supported (CLATTN_ERROR_UNSUPPORTED, naming the option): "dropout" other than null
 * (random, for training), "byte_fallback" true, a pre-tokeniser other than ByteLevel
 * (Metaspace, Split, Sequence), a normaliser other than BertNormalizer, NFC or null (NFKC,
 * Sequence, ...). An unk_token that is not in the vocabulary is
 * an error when loading (Hugging Face fails only when a text needs it). Pairs are encoded with
 * the post-processor's pair template (RoBERTa's <s> A </s></s> B </s>: see "Pairs").
 *
 * Unigram (SentencePiece) tokenizers: XLM-RoBERTa, multilingual-e5, bge-m3,
 * paraphrase-multilingual-MiniLM. A tokenizer.json whose "model"."type" is "Unigram" ("vocab":
 * [[piece, score], ...], the piece of index i is id i; "unk_id", an id or null;
 * "byte_fallback") is encoded as the tokenizers crate 0.19.1 encodes it:
 *   1. Special tokens as above (XLM-R's <mask> is normalized and lstrip: found after step 2,
 *      with the spaces before it).
 *   2. Normalisation: "normalizer" null, or Precompiled, Strip, Replace, or a Sequence of them.
 *      Precompiled is SentencePiece's precompiled_charsmap (standard base64 in the JSON: a
 *      Darts double-array trie over UTF-8 bytes and its replacement strings, e.g. nmt_nfkc), as
 *      spm_precompiled 0.1.4 applies it: the text is cut into extended grapheme clusters; a
 *      cluster under 6 bytes is looked up whole, and replaced by the trie's shortest matching
 *      key's replacement when there is one (so "Ａ" + U+0301 becomes "A": the fullwidth letter's
 *      own entry wins and the accent goes); otherwise each character alone is looked up and
 *      replaced or kept. Strip removes White_Space on the sides it names; Replace replaces
 *      every match, left to right, of a {"String": ...} pattern or of the {"Regex": ...}
 *      patterns made of one character and "+" or "{m,}" (" {2,}" in transformers' converters)
 *      or of literal (escaped) characters; other regular expressions are
 *      CLATTN_ERROR_UNSUPPORTED.
 *   3. Pre-tokenisation: "pre_tokenizer" null, or Metaspace, WhitespaceSplit, or a Sequence of
 *      them. Metaspace (replacement "▁", prepend_scheme always | first | never, or the older
 *      add_prefix_space true; split true unless false) turns every U+0020 into the replacement,
 *      puts one in front of a piece that does not start with one (always; first: only when the
 *      piece's first character is, in the crate's alignments, at the start of the text: not
 *      after a special token, not when Strip or Replace removed what was there), and splits
 *      before each replacement. WhitespaceSplit splits at White_Space, removed.
 *   4. Unigram: per word, the segmentation into pieces of the best total score (Viterbi over
 *      the word's UTF-8 bytes; among equal scores the path found first, that is the one whose
 *      last piece starts earliest); a character that no one-character piece covers is an
 *      unknown piece of score (lowest score - 10); consecutive unknown pieces make one, which
 *      becomes the "<0xXX>" pieces of its bytes when byte_fallback is true and all of them
 *      exist, else unk_id. With unk_id null, a text with such a character fails with
 *      CLATTN_ERROR_FORMAT, as Hugging Face's encode fails.
 *   5. [CLS] and [SEP] are the post-processor's (XLM-R's <s> ... </s>); truncation as above.
 * The padding id is "padding"."pad_id", else <pad>; the mask id <mask>. Grapheme clusters come
 * from utf8proc (Unicode 15.0), the crate's from unicode-segmentation (Unicode 15.1): the one new
 * rule (Indic conjuncts) joins clusters of 9 bytes or more, which are looked up character by
 * character either way, so the results agree. Scores are read as the crate's serde_json reads
 * them (the decimal digits as an integer, to double, then times or divided by the power of
 * ten: about one SentencePiece score in eight lands one unit in the last place away from the
 * correctly rounded value, which decides ties between segmentations); this assumes each score
 * is written as its shortest decimal, as Python and serde_json write them.
 * tests/test_tokenizer_unigram.c checks four
 * configurations of a trained multilingual model on 3053 texts and every code point (alone and
 * after "a"), and a hand-made vocabulary, against Hugging Face: no difference.
 *
 * Token types. clattn_tokenizer_encode gives no type ids; clattn_tokenizer_encode_tokens gives
 * the single template's (0 for every id in BERT's, RoBERTa's and the usual TemplateProcessing
 * files, so a caller that passes token_type_ids to an encoder passes zeros).
 *
 * Pairs (clattn_tokenizer_encode_pair), as tokenizers 0.19.1's encode(text_a, text_b) with
 * enable_truncation(max_length, strategy="longest_first"), that is transformers'
 * tok([text_a], [text_b], truncation="longest_first", max_length=max_length) and what
 * sentence-transformers' CrossEncoder feeds its model (a single, unbatched
 * tok(text_a, "") of transformers 4.40 takes the empty text_pair for none and encodes text_a
 * alone; this function, like tokenizers and the batched call, keeps the empty text: [CLS] a
 * [SEP] [SEP]):
 *   1. Each text is encoded alone, steps 1 to 4 above (its own added tokens, normalisation,
 *      pre-tokenisation and model; a Metaspace "first" prefix goes before each text's start).
 *   2. Truncation, longest first (utils/truncation.rs): the budget is max_length less the pair
 *      template's special tokens (3 for BERT's, 4 for RoBERTa's). When the texts' n_a + n_b ids
 *      exceed it, the shorter text (n_s ids) is kept whole if n_s <= budget / 2 and the longer
 *      one keeps budget - n_s; otherwise the shorter keeps budget / 2 and the longer
 *      budget / 2 + budget % 2, text_b counting as the longer when n_a == n_b. Each keeps its
 *      first ids. A max_length of exactly the special tokens keeps nothing of either text.
 *   3. The pair template joins them, each id with its piece's type id:
 *        TemplateProcessing  its "pair": any sequence of {"Sequence": {"id": "A" or "B",
 *                            "type_id": n}} and {"SpecialToken": {"id": name, "type_id": n}}
 *                            pieces, a name's "ids" (one or more) from "special_tokens" (BERT's
 *                            "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1"; XLM-R's
 *                            "<s>:0 $A:0 </s>:0 </s>:0 $B:0 </s>:0"; an empty "pair" gives
 *                            an empty encoding, as Hugging Face's does);
 *        BertProcessing      [CLS] A [SEP] B [SEP], type ids 0 up to the first [SEP], 1 after;
 *        RobertaProcessing   <s> A </s> </s> B </s>, every type id 0 (the crate sets them all
 *                            to 0);
 *        ByteLevel, null     A then B, type ids 0 and 1 (nothing added);
 *        vocab.txt           BertProcessing's with the vocabulary's [CLS] and [SEP].
 *      A TemplateProcessing whose "pair" this library cannot apply does not stop the tokenizer
 *      from loading (single texts are encoded as before); clattn_tokenizer_encode_pair then
 *      fails, naming the cause: CLATTN_ERROR_FORMAT for a "pair" that is missing or not an
 *      array of such pieces, a special token without "ids" in "special_tokens" (Hugging Face
 *      fails to load the first and panics on the second), or an id that is not a token's;
 *      CLATTN_ERROR_UNSUPPORTED for a type_id over 2^31 - 1.
 * tests/test_tokenizer_pair.c compares 1120 random multilingual pairs, with max_length from
 * the smallest to none, on WordPiece (tokenizer.json with TemplateProcessing, BertProcessing,
 * a template of unusual pieces, an empty pair template; vocab.txt), byte-level BPE
 * (RobertaProcessing) and Unigram (XLM-R's template, RobertaProcessing, Metaspace "first")
 * tokenizers, and 120 on the real all-MiniLM-L6-v2, with Hugging Face's ids and type ids: no
 * difference.
 *
 * Invalid UTF-8 is rejected, not replaced: a text with a byte sequence that is not UTF-8
 * (a stray continuation byte, a truncated sequence, an overlong form, a surrogate U+D800..
 * U+DFFF, a value past U+10FFFF) fails with CLATTN_ERROR_INVALID_ARGUMENT and a message giving
 * the byte offset and the bytes. (Python's str cannot hold such text either, so Hugging Face has
 * no ids to agree with.) A NUL byte inside the `length` bytes is valid text and is removed by
 * the cleaning step.
 *
 * Errors follow the library's conventions (see common.h); these functions take no context, so
 * the message is read with clattn_last_error(NULL). Every message starts with the function's
 * name, then the file path (loading) or "invalid argument"; then what is wrong:
 *   CLATTN_ERROR_INVALID_ARGUMENT  a NULL pointer, invalid UTF-8 text, a max_length under
 *                                  the template's special tokens (BERT: 2 for a text, 3 for
 *                                  a pair), ids too small for the encoding (see
 *                                  clattn_tokenizer_encode), unknown flags;
 *   CLATTN_ERROR_IO                a file or folder cannot be opened or read (the system's
 *                                  reason is in the message), a folder holds neither
 *                                  tokenizer.json nor vocab.txt, or one of them (or the
 *                                  folder's config.json) is not a regular file (a FIFO, a
 *                                  device: "not a regular file (a FIFO)", never waited on);
 *   CLATTN_ERROR_FORMAT            a single template that cannot be applied (loading; see
 *                                  "Templates"), a pair template that cannot be applied (see
 *                                  "Pairs": only when a pair is encoded); invalid JSON
 *                                  (jansson's message with line and column), a duplicate
 *                                  key, a top level that is not an object; a tokenizer.json
 *                                  without "model" or "model"."vocab", a wrongly
 *                                  typed field (normaliser flags, added tokens, post-processor
 *                                  ids, truncation); a vocabulary that is empty, has an empty
 *                                  token, a token that is not UTF-8 or holds a NUL, a duplicate
 *                                  token or id, ids that are not 0..n-1; a vocab.txt with a NUL
 *                                  byte; [UNK] missing (a vocab.txt: or [CLS] or [SEP]); a
 *                                  "max_seq_length",
 *                                  "max_position_embeddings" or "truncation"."max_length" that
 *                                  is not an integer of at least 2; a BPE "merges" entry that
 *                                  is not "A B" or ["A", "B"], or whose tokens (or merged
 *                                  token) are not in the vocabulary; an unk_token not in it;
 *   CLATTN_ERROR_UNSUPPORTED       a model type other than WordPiece, BPE or Unigram, the BPE
 *                                  options named above, with Unigram a normaliser or
 *                                  pre-tokeniser that its steps 2 and 3 do not list (the
 *                                  message names its type); otherwise a normaliser other
 *                                  than BertNormalizer or NFC (or null), a pre-tokeniser
 *                                  other than BertPreTokenizer (WordPiece) or ByteLevel
 *                                  (BPE); a post-processor other than
 *                                  TemplateProcessing, BertProcessing, RobertaProcessing,
 *                                  ByteLevel or null, or a Sequence of them in which more
 *                                  than one adds tokens;
 *   CLATTN_ERROR_TOO_LARGE         a file too large to hold in memory, a vocabulary over
 *                                  2^31 - 1 entries, a pair template that repeats a text so
 *                                  often that the count would pass SIZE_MAX;
 *   CLATTN_ERROR_OUT_OF_HOST_MEMORY  malloc (or jansson) failed.
 *
 * Thread-safety: a loaded tokenizer is never modified: any number of threads may encode with
 * it at once. Loading and destroying need the usual exclusive access to the handle.
 */
#ifndef CLATTN_TOKENIZER_H
#define CLATTN_TOKENIZER_H

#include "clattn/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_tokenizer clattn_tokenizer;

/* The ids of the special tokens; -1 for one the tokenizer does not have. (A pair's special
 * tokens are the pair template's: see "Pairs" at the top.) */
typedef struct clattn_tokenizer_special {
    int32_t cls;  /* [CLS] (MPNet: <s>), first in every encoding: the single template's first
                   * id when it starts with a special token, else -1 */
    int32_t sep;  /* [SEP] (MPNet: </s>), last in every encoding: the single template's last id
                   * when it ends with a special token, else -1 */
    int32_t pad;  /* [PAD] or tokenizer.json's padding.pad_id (MPNet: <pad>), for the caller's
                   * padding (never produced by encode); may be -1 */
    int32_t unk;  /* [UNK], for unknown words */
    int32_t mask; /* [MASK]; may be -1 */
} clattn_tokenizer_special;

/*
 * Loads a tokenizer from `path`: a model folder, a tokenizer.json or a vocab.txt (see the top
 * of this file; a file is a vocab.txt when its name ends in ".txt", else it is read as JSON).
 * On success *tok is a new tokenizer that the caller releases with clattn_tokenizer_destroy;
 * on any error *tok is set to NULL and nothing stays allocated.
 */
CLATTN_API clattn_status clattn_tokenizer_load(clattn_tokenizer **tok, const char *path);

/* Frees *tok and sets it to NULL. Accepts NULL and a pointer to NULL. */
CLATTN_API void clattn_tokenizer_destroy(clattn_tokenizer **tok);

/*
 * Encodes the `length` bytes of UTF-8 at `text` (text may be NULL only when length is 0; the
 * text need not be NUL-terminated: pass strlen(text) for a C string) into the single template
 * ([CLS] ids... [SEP] for BERT; see "Templates"), truncated to `max_length` ids in all (0: the
 * tokenizer's default, clattn_tokenizer_max_length; under the template's special ids, 2 for
 * BERT, is invalid; SIZE_MAX: no truncation). clattn_tokenizer_encode_tokens (below) is the
 * same encoding into a growing output, with type ids and flags.
 *
 * *count receives the number of ids of the encoding. When capacity >= *count the ids are
 * written to ids[0..*count-1] (nothing is written past them); ids may be NULL when capacity is
 * 0, to ask for the count only (then CLATTN_OK). When capacity is not 0 but smaller than the
 * count, nothing is written to ids, *count still receives the count, and the call fails with
 * CLATTN_ERROR_INVALID_ARGUMENT ("ids has room for C ids but the encoding has N"). On any other
 * failure ids and *count are not touched.
 *
 * Time and memory are linear in the length of the text (times the longest token, at most 100
 * characters per word); the call allocates temporary memory that it frees before returning.
 */
CLATTN_API clattn_status clattn_tokenizer_encode(const clattn_tokenizer *tok, const char *text,
                                                 size_t length, size_t max_length, int32_t *ids,
                                                 size_t capacity, size_t *count);

/*
 * Encodes a pair of texts, `length_a` bytes of UTF-8 at text_a and `length_b` at text_b (each
 * may be NULL only when its length is 0; neither need be NUL-terminated), into the
 * tokenizer's pair template, both texts truncated longest-first so that the encoding has at
 * most `max_length` ids in all, the special tokens included (see "Pairs" at the top of this
 * file): [CLS] a... [SEP] b... [SEP] for BERT, <s> a... </s> </s> b... </s> for RoBERTa and
 * XLM-R. max_length 0 is the tokenizer's default (clattn_tokenizer_max_length); SIZE_MAX: no
 * truncation. A max_length below the pair template's special tokens (3 for BERT, 4 for
 * RoBERTa) is CLATTN_ERROR_INVALID_ARGUMENT (Hugging Face's subtraction wraps around there and
 * it truncates nothing); exactly their number keeps nothing of either text.
 *
 * *count receives the number of ids. When capacity >= *count the ids are written to
 * ids[0..*count-1] and, when type_ids is not NULL, each id's token type to
 * type_ids[0..*count-1] (BERT's: 0 up to the first [SEP], 1 after; RoBERTa's and XLM-R's: all
 * 0), nothing past them. type_ids may be NULL; ids may be NULL when capacity is 0, to ask for
 * the count only (then CLATTN_OK). When capacity is not 0 but smaller than the count, nothing
 * is written, *count still receives the count, and the call fails with
 * CLATTN_ERROR_INVALID_ARGUMENT. Invalid UTF-8 fails with CLATTN_ERROR_INVALID_ARGUMENT, the
 * message naming the text and the byte offset ("text_b is not valid UTF-8 at byte 3 (bytes
 * C3)"); a pair template that cannot be applied with CLATTN_ERROR_FORMAT or
 * CLATTN_ERROR_UNSUPPORTED (see "Pairs"). On any failure but the capacity's, ids, type_ids and
 * *count are not touched.
 *
 * Both texts are encoded in full before truncation (as Hugging Face does: which one is longer
 * decides where an odd budget's last id goes): time and temporary memory are linear in
 * length_a + length_b.
 */
CLATTN_API clattn_status clattn_tokenizer_encode_pair(const clattn_tokenizer *tok,
                                                      const char *text_a, size_t length_a,
                                                      const char *text_b, size_t length_b,
                                                      size_t max_length, int32_t *ids,
                                                      int32_t *type_ids, size_t capacity,
                                                      size_t *count);

/* The special token ids (all -1 when tok is NULL). Records no error. */
CLATTN_API clattn_tokenizer_special clattn_tokenizer_special_ids(const clattn_tokenizer *tok);

/* The number of ids: the vocabulary's size, or one more than the largest added token's id when
 * that is larger (Hugging Face's vocab_size with added tokens); 0 when tok is NULL. */
CLATTN_API size_t clattn_tokenizer_vocab_size(const clattn_tokenizer *tok);

/* The default maximum length of an encoding in ids (see clattn_tokenizer_load); SIZE_MAX when
 * unlimited; 0 when tok is NULL. */
CLATTN_API size_t clattn_tokenizer_max_length(const clattn_tokenizer *tok);

/* The token string of `id` (UTF-8, NUL-terminated, owned by tok), or NULL when tok is NULL or
 * id is not a token's id. Records no error. */
CLATTN_API const char *clattn_tokenizer_token(const clattn_tokenizer *tok, int32_t id);

/* The id of the vocabulary entry or added token `token` (an exact match of the NUL-terminated
 * UTF-8 string, no normalisation), or -1 when there is none or an argument is NULL. */
CLATTN_API int32_t clattn_tokenizer_token_id(const clattn_tokenizer *tok, const char *token);

/* ---- Templates, add_special_tokens and encoding into a growing output ----
 *
 * Templates. The post-processor decides which special tokens surround a text or a pair, as
 * tokenizers 0.22's post_process does it:
 *   TemplateProcessing  its "single" and "pair" templates, pieces of any number and order:
 *                       {"Sequence": {"id": "A" (or "B" in "pair"), "type_id": n}} and
 *                       {"SpecialToken": {"id": name, "type_id": n}}, a name's one or more
 *                       "ids" from "special_tokens". So BERT's [CLS] $A [SEP], a BOS-only
 *                       template (Llama's <s> $A), an EOS-only one ($A </s>), none ($A), or
 *                       several special tokens at either end; every id gets its piece's
 *                       type_id;
 *   BertProcessing      [CLS] A [SEP] (B [SEP]); type ids 0, then 1 from B on;
 *   RobertaProcessing   <s> A </s> (</s> B </s>); every type id 0;
 *   ByteLevel, null     nothing added (GPT-2's, Qwen's): A (then B), type ids 0 (then 1);
 *   Sequence            of the above: the ByteLevel ones change no id, and at most one other
 *                       may add tokens (more is CLATTN_ERROR_UNSUPPORTED);
 *   vocab.txt           BertProcessing's template with the vocabulary's [CLS] and [SEP].
 * Without the special tokens (CLATTN_ENCODE_NO_SPECIAL_TOKENS: transformers'
 * add_special_tokens=False) the texts stay as the template places them (TemplateProcessing:
 * its Sequence pieces with their type ids; RobertaProcessing: type ids 0; the others: A type
 * 0, B type 1) and truncation reserves no room for special tokens. A "single" template that
 * cannot be applied (missing, a piece of another shape, "B" in it, a special token without
 * "ids" or with an id that is not a token's) fails the load with CLATTN_ERROR_FORMAT.
 * clattn_tokenizer_special_ids()'s cls and sep are the single template's first and last ids
 * when it begins or ends with a special token, else -1.
 *
 * The calls below append to a clattn_tokens that the library grows, so that a caller
 * tokenizes each text once whatever its length: start from {0} (or two arrays from malloc,
 * each with room for `capacity`; a count over the capacity, or a NULL array with a capacity, is
 * CLATTN_ERROR_INVALID_ARGUMENT), append as many encodings as wanted (their ids one after
 * another; remember out->count before each call to find where one starts), and release the
 * arrays with clattn_tokens_free (or free() on each: they come from malloc/realloc). */

/* Ids and token type ids, grown by the library. ids[0..count-1] and type_ids[0..count-1] hold
 * what was appended; both arrays have room for `capacity`. */
typedef struct clattn_tokens {
    int32_t *ids;
    int32_t *type_ids;
    size_t count;
    size_t capacity;
} clattn_tokens;

/* Flags of the encode calls below (0: Hugging Face's defaults). */
enum {
    /* Leave out the post-processor's special tokens (add_special_tokens=False). */
    CLATTN_ENCODE_NO_SPECIAL_TOKENS = 1u << 0,
    /* First remove the whitespace at both ends of each text that Python's str.strip() removes
     * (U+0009..U+000D, U+001C..U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
     * U+202F, U+205F, U+3000), as sentence-transformers does before tokenizing (its
     * CrossEncoder to both texts of a pair). The whole text is still checked: an invalid UTF-8
     * error's byte offset counts from the text as given. */
    CLATTN_ENCODE_STRIP = 1u << 1,
};

/* Which template clattn_tokenizer_special_count counts. */
typedef enum clattn_template_part {
    CLATTN_TEMPLATE_SINGLE = 0,         /* the single template's special ids */
    CLATTN_TEMPLATE_PAIR = 1,           /* the pair template's */
    CLATTN_TEMPLATE_SINGLE_LEADING = 2, /* the single template's before its first text piece
                                         * (all of them when it has none) */
} clattn_template_part;

/*
 * Encodes `length` bytes of UTF-8 at `text` (NULL only when length is 0) as
 * clattn_tokenizer_encode does, with the single template (and its type ids) or, with
 * CLATTN_ENCODE_NO_SPECIAL_TOKENS, without special tokens; truncated to `max_length` ids in
 * all, the special tokens included (0: the tokenizer's default; SIZE_MAX: no truncation; under
 * the template's special ids: CLATTN_ERROR_INVALID_ARGUMENT). The text's first ids are kept.
 * Appends the encoding's ids and type ids to *out, growing its arrays as needed. On any
 * failure out->count is unchanged and nothing before it is touched (the arrays may have
 * moved); unknown flags are CLATTN_ERROR_INVALID_ARGUMENT. The text is tokenized once, and
 * tokenizing stops at the truncation point.
 */
CLATTN_API clattn_status clattn_tokenizer_encode_tokens(const clattn_tokenizer *tok,
                                                        const char *text, size_t length,
                                                        size_t max_length, unsigned flags,
                                                        clattn_tokens *out);

/*
 * Encodes a pair as clattn_tokenizer_encode_pair does (longest-first truncation, the pair
 * template), or without special tokens (flags as above: then the budget is max_length
 * itself), and appends ids and type ids to *out as clattn_tokenizer_encode_tokens does.
 */
CLATTN_API clattn_status clattn_tokenizer_encode_pair_tokens(const clattn_tokenizer *tok,
                                                             const char *text_a,
                                                             size_t length_a,
                                                             const char *text_b,
                                                             size_t length_b,
                                                             size_t max_length, unsigned flags,
                                                             clattn_tokens *out);

/*
 * The single template applied to `count` ids already tokenized (ids may be NULL when count is
 * 0), each in 0 .. clattn_tokenizer_vocab_size - 1 (else CLATTN_ERROR_INVALID_ARGUMENT naming
 * the first bad one): their first ids kept so that at most max_length remain with the special
 * tokens (0: the tokenizer's default; SIZE_MAX: all), then the template's special tokens and
 * type ids put around them; appended to *out. Flags: CLATTN_ENCODE_NO_SPECIAL_TOKENS only.
 */
CLATTN_API clattn_status clattn_tokenizer_post_process(const clattn_tokenizer *tok,
                                                       const int32_t *ids, size_t count,
                                                       size_t max_length, unsigned flags,
                                                       clattn_tokens *out);

/* The number of special ids that `part` of the templates adds (BERT: 2 for a single text, 3
 * for a pair; RoBERTa: 2 and 4; a BOS-only template 1; none 0): what a caller reserves when it
 * truncates or checks lengths itself. 0 when tok is NULL, `part` is not one of the above, or
 * (CLATTN_TEMPLATE_PAIR) the pair template cannot be used (clattn_tokenizer_encode_pair says
 * why). Records no error. */
CLATTN_API size_t clattn_tokenizer_special_count(const clattn_tokenizer *tok,
                                                 clattn_template_part part);

/* Frees tokens->ids and tokens->type_ids and sets *tokens to {0}. Accepts NULL. */
CLATTN_API void clattn_tokens_free(clattn_tokens *tokens);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_TOKENIZER_H */
