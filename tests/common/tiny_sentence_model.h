/* A tiny sentence-transformers folder for the tests that need a whole model but not a real one:
 * tests/golden/bert/gelu (2 layers, hidden 48, 64 positions, a vocabulary of 100, random weights)
 * with a WordPiece vocab.txt of 80 entries (letters, digits, a few words), as
 * tests/test_invariance.c and tests/tiny_corpus.sh make it. Needs GOLDEN_DIR. */
#ifndef CLATTN_TEST_TINY_SENTENCE_MODEL_H
#define CLATTN_TEST_TINY_SENTENCE_MODEL_H

#include "common/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Creates the folder in a fresh temporary directory (its path in dir); the caller removes it
 * with test_temp_dir_remove. Fails the test on error. */
static inline void tiny_sentence_model_create(char *dir, size_t size)
{
    char path[4200];
    assert_int_equal(test_temp_dir_create(dir, size, "clattn-tiny-model-"), 0);
    static const char *const files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        size_t bytes_size;
        snprintf(path, sizeof(path), "%s/bert/gelu/%s", GOLDEN_DIR, files[i]);
        unsigned char *bytes = test_read_file(path, &bytes_size);
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        test_write_file(path, bytes, bytes_size);
        free(bytes);
    }
    char vocab[2048] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (const char *c = "abcdefghijklmnopqrstuvwxyz0123456789.,"; *c; c++)
        snprintf(vocab + strlen(vocab), sizeof(vocab) - strlen(vocab), "%c\n", *c);
    for (const char *c = "abcdefghijklmnopqrstuvwxyz"; *c; c++)
        snprintf(vocab + strlen(vocab), sizeof(vocab) - strlen(vocab), "##%c\n", *c);
    strcat(vocab, "the\nof\nand\nto\nin\nis\nwas\nfor\non\nthat\nwith\n");
    snprintf(path, sizeof(path), "%s/vocab.txt", dir);
    test_write_file(path, vocab, strlen(vocab));
}

/* Text i of a fixed set: 0 to max_words words drawn from a small list (texts 0..7 have 0..7
 * words), in a malloc'd string. The same text for the same (i, max_words) in every test. */
static inline char *tiny_sentence_text(size_t i, size_t max_words)
{
    static const char *const words[] = {"the", "of", "and", "to", "in", "is", "was", "for",
                                        "on", "that", "with", "quick", "brown", "fox", "zebra",
                                        "embedding", "batch", "padding", "tokens", "device"};
    test_rng rng = {5000 + i};
    size_t count = i < 8 ? i : (size_t)(test_rng_next(&rng) % (max_words + 1));
    char *text = calloc(count * 12 + 1, 1);
    assert_non_null(text);
    for (size_t w = 0; w < count; w++) {
        if (w)
            strcat(text, " ");
        strcat(text, words[test_rng_next(&rng) % 20]);
    }
    return text;
}

#endif /* CLATTN_TEST_TINY_SENTENCE_MODEL_H */
