# Sourced by the corpus-job tests: a small random BERT with a tokenizer, and a corpus for it.

# make_tiny_embedder DIR: tests/golden/bert/gelu (2 layers, hidden 48, 64 positions, random
# weights) with a WordPiece vocab.txt of 89 entries, as a sentence-transformers-less model folder.
make_tiny_embedder() {
    local dir=$1 golden=$2
    mkdir -p "$dir"
    cp "$golden/bert/gelu/config.json" "$golden/bert/gelu/model.safetensors" "$dir/"
    {
        printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'
        for c in a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9 . ,; do
            echo "$c"
        done
        for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do echo "##$c"; done
        for w in the of and to in is was for on that with as by at from it an be this are; do
            echo "$w"
        done
    } >"$dir/vocab.txt"
}

# make_corpus FILE LINES: LINES texts of 0 to 29 words (a fixed pseudo-random sequence), some
# with "\r\n" ends, some empty, some with characters outside the vocabulary; the last line has no
# line end.
make_corpus() {
    awk -v n="$2" 'BEGIN {
        srand(7)
        split("the of and to in is was for on that with as by at from it an be this are cat dog zebra quick brown café 42", w, " ")
        for (i = 0; i < n; i++) {
            k = int(rand() * 30); s = ""
            for (j = 0; j < k; j++) s = s (j ? " " : "") w[1 + int(rand() * 27)]
            end = (i % 97 == 3) ? "\r\n" : "\n"
            if (i == n - 1) end = ""
            printf "%s%s", s, end
        }
    }' >"$1"
}
