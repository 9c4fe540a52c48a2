#!/bin/bash
# byte-baseline.sh BUILD_DIR OUT_DIR: runs the programs of one build of libclattn on fixed inputs
# and writes every output file into OUT_DIR, then OUT_DIR/SHA256SUMS over them, so that two
# builds (before and after a refactor) can be compared byte for byte:
#
#   tools/byte-baseline.sh build-old OLD && tools/byte-baseline.sh build-new NEW
#   diff OLD/SHA256SUMS NEW/SHA256SUMS          # or: diff -r OLD NEW (cmp of every file)
#
# (bench/baseline/README.md: the committed baseline and how to compare on another machine.)
#
# What it runs (fp32 unless said; every output is a file under OUT_DIR):
#   embed/     examples/embed on bench/embed_bench.py's 1000-text corpus (make_corpus(1000))
#              with all-MiniLM-L6-v2 in fp32, bf16 and int8, and all-mpnet-base-v2 on its first
#              200 texts in the three precisions; the corpus's token ids (--tokenize); MiniLM
#              with --batch-size 5, --pooling cls --no-normalize, --max-length 16 and --prompt
#              on 200 texts, stdout's JSON arrays for a few texts, tests/golden/minilm/lines.txt;
#              MPNet on tests/golden/mpnet_real/texts.txt; the small family folders of
#              tests/golden (nomic, modernbert, roberta, xlmr, jina: ids and embeddings, batch 32
#              and 1; nomic's search_query prompt; jina on a 4096-token text)
#   encode/    examples/encode --output: --config base with seeded weights and input (B2×N128:
#              plain, --causal, a key-padding mask, --causal with the mask, --positional none,
#              bf16, int8), --config C-N2 at B1×N4096, every tests/golden/enc_* model (its
#              --input or --tokens, --mask, --causal as its meta.json says, and each again with
#              --causal flipped) and every tests/golden/gated/* model with its mask
#   generate/  examples/generate on tests/golden/toy_reverse (teacher-forced logits, greedy ids,
#              beam 4 ids; --json ids and scores; --half-cache greedy and beam), the
#              decpos_s2s_rope/alibi model files (greedy, half cache, beam, logits),
#              beam_alpha (--beam 1/3 × --alpha 0/1, --json), float_transformer (decoder output
#              and logits); --json is kept without its timing, device and path fields
#   rerank/    examples/rerank --json on tests/golden/crossenc/one_label (probabilities, raw
#              scores, bf16, int8, the tab-separated text, --top-k 3) and on the pairs.json of
#              crossenc/one_label and crossenc/roberta (--raw-scores, one run per query)
#   decoder/   bench/baseline/dump_decoder.c (compiled here against BUILD_DIR's libclattn) on
#              every tests/golden/dec_* and decpos_* case except the decpos_s2s_* model files:
#              clattn_decoder_forward on the fused, unfused and automatic paths, and
#              clattn_decoder_step in the case's steps with a float and a half cache
#   cross_encoder/  bench/baseline/dump_cross_encoder.c on every tests/golden/crossenc/* model
#              and its pairs.json (modernbert's 2 labels and three_labels too, which rerank
#              refuses): the raw logits in the default batches and one pair per batch, and each
#              pair's ids and token types (the pair template)
#   INPUTS     the SHA-256 of each input: the corpus, the models' files, the files of
#              tests/golden and bench/baseline read; outputs compare only when their inputs do
# bf16 and int8 runs are skipped, with a note on stdout, when /proc/cpuinfo lacks avx512_bf16
# (or amx_bf16), resp. avx512_vnni (or avx_vnni, amx_int8).
#
# Also OUT_DIR/MACHINE (CPU model and flags, kernel, OpenCL device, the environment that can
# change results: not in SHA256SUMS) and OUT_DIR/run.log (each command, its status and seconds),
# OUT_DIR/logs/ (each command's stderr). The programs run with CLATTN_TUNING_CACHE set to a file
# that does not exist (the library's default tuning, whatever ~/.cache/clattn/tuning.json says)
# and CLATTN_TUNE and CLATTN_GEMM_CPU unset; the device is $CLATTN_DEVICE, else the programs'
# default. Models: $CLATTN_MODELS (default ~/.cache/clattn) /all-MiniLM-L6-v2 and
# /all-mpnet-base-v2. The source tree of the goldens and the corpus generator is this script's
# repository; BUILD_DIR may be a build of another checkout (a worktree of an older commit).
#
# Exit status: 0 when every command succeeded, 1 when some failed (each is named on stderr and in
# OUT_DIR/FAILED; the others' outputs are still written and summed), 2 on a usage error.
# About 2 minutes on a 2-core AVX-512 machine (1.5-2.5 at a load average of 5-9).
set -u
if [ $# -ne 2 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: tools/byte-baseline.sh BUILD_DIR OUT_DIR" >&2
    exit 2
fi
build=$(realpath -e "$1" 2>/dev/null) || { echo "byte-baseline: no build folder $1" >&2; exit 2; }
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
golden=$root/tests/golden
models=${CLATTN_MODELS:-$HOME/.cache/clattn}
minilm=$models/all-MiniLM-L6-v2 mpnet=$models/all-mpnet-base-v2
bin=$build/examples
# The build's source tree (its headers, for bench/baseline/*.c; its commit, for MACHINE).
src=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["directories"]["source"])' \
    "$build/meson-info/meson-info.json" 2>/dev/null) ||
    { echo "byte-baseline: $build is not a meson build folder" >&2; exit 2; }
for p in embed encode generate rerank; do
    [ -x "$bin/$p" ] ||
        { echo "byte-baseline: $bin/$p is missing (build the examples)" >&2; exit 2; }
done
for m in "$minilm" "$mpnet"; do
    [ -f "$m/model.safetensors" ] || { echo "byte-baseline: no model in $m" >&2; exit 2; }
done
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "byte-baseline: $out exists and is not empty; give a new folder" >&2
    exit 2
fi
mkdir -p "$out"/{embed,encode,generate,rerank,decoder,cross_encoder,logs} || exit 2
out=$(realpath "$out")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/byte-baseline.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

export CLATTN_TUNING_CACHE=$tmp/no-tuning-cache.json
unset CLATTN_TUNE CLATTN_GEMM_CPU CLATTN_LOG
export HF_HUB_OFFLINE=1

# ---- the machine --------------------------------------------------------------------------
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
precisions=(fp32)
if has avx512_bf16 || has amx_bf16; then precisions+=(bf16); else
    echo "note: the CPU has no avx512_bf16 nor amx_bf16: the bf16 runs are skipped"; fi
if has avx512_vnni || has avx_vnni || has amx_int8; then precisions+=(int8); else
    echo "note: the CPU has no avx512_vnni, avx_vnni nor amx_int8: the int8 runs are skipped"; fi
{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo -n "flags:"
    for f in avx2 fma avx512f avx512bw avx512vl avx512_bf16 avx512_vnni avx_vnni amx_tile \
        amx_bf16 amx_int8; do has "$f" && echo -n " $f"; done
    echo
    echo "cores: $(nproc)"
    echo "kernel: $(uname -srm)"
    echo "device: $("$bin/encode" --config C-N2 --batch 1 --seq 4 2>/dev/null |
        sed -n 's/^device: *//p')"
    echo "precisions run: ${precisions[*]}"
    echo "CLATTN_DEVICE=${CLATTN_DEVICE:-}"
    for v in POCL_CPU_MAX_CU_NUM POCL_MAX_PTHREAD_COUNT OMP_NUM_THREADS DNNL_MAX_CPU_ISA \
        ONEDNN_MAX_CPU_ISA; do
        [ -n "${!v:-}" ] && echo "$v=${!v}"
    done
    echo "build: $build ($(git -C "$src" describe --always --dirty 2>/dev/null ||
        echo "unknown commit"))"
} >"$out/MACHINE"

# ---- running and recording ----------------------------------------------------------------
failures=0
started=$SECONDS
# run NAME [--stdout FILE] -- COMMAND...: runs COMMAND (stderr into logs/NAME.stderr, stdout
# into OUT_DIR/FILE when given, else discarded), records its status and time in run.log.
run() {
    local name=$1 stdout=/dev/null
    shift
    if [ "$1" = --stdout ]; then stdout=$out/$2; shift 2; fi
    [ "$1" = -- ] && shift
    local t0=$SECONDS rc
    "$@" >"$stdout" 2>"$out/logs/${name//\//_}.stderr"
    rc=$?
    printf '%-44s rc %d %4d s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/run.log"
    if [ "$rc" -ne 0 ]; then
        echo "byte-baseline: FAILED (exit $rc): $name: $*" >&2
        tail -n 3 "$out/logs/${name//\//_}.stderr" | sed 's/^/    /' >&2
        echo "$name" >>"$out/FAILED"
        failures=$((failures + 1))
    fi
    return 0
}
# section NAME: a line on stdout with the time so far.
section() { echo "[$((SECONDS - started)) s] $1"; }

# json_keep IN OUT: generate's --json object without what changes from run to run (times,
# rates, the device, paths), one key per line with the numbers as printed.
json_keep() {
    python3 - "$1" "$2" <<'PY'
import json, sys
obj = json.loads(open(sys.argv[1]).read(), parse_float=str)
drop = {"model", "device", "output", "seconds", "tokens_per_s", "texts_per_s", "load_s", "time"}
with open(sys.argv[2], "w") as f:
    for key, value in obj.items():
        if key not in drop:
            f.write("%s: %s\n" % (key, json.dumps(value)))
PY
}

# ---- inputs -------------------------------------------------------------------------------
write_inputs() {
    python3 - "$root/bench" "$tmp" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from embed_bench import make_corpus  # the benchmark's corpus, as embed_bench.py writes it
texts = make_corpus(1000)
for name, part in (("corpus1000.txt", texts), ("corpus200.txt", texts[:200])):
    with open("%s/%s" % (sys.argv[2], name), "w", encoding="utf-8", newline="") as f:
        f.write("".join(t + "\n" for t in part))
# A key-padding mask [2, 128] for encode --config base: row 0 pads a stretch in the middle,
# row 1 its last 37 positions (numpy's .npy bool layout, written by hand).
import struct
header = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 128), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
mask = [1 if 40 <= j < 52 else 0 for j in range(128)] + [1 if j >= 91 else 0 for j in range(128)]
with open(sys.argv[2] + "/mask_2x128.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(mask))
PY
}
write_inputs || { echo "byte-baseline: cannot write the corpus" >&2; exit 1; }
corpus=$tmp/corpus1000.txt corpus200=$tmp/corpus200.txt
# The inputs' SHA-256, one line each: the generated ones, the two models' files (but *.md and
# desktop.ini) and the files of tests/golden and bench/baseline that the runs below read.
{
    (cd "$tmp" && sha256sum corpus1000.txt corpus200.txt mask_2x128.npy)
    (cd "$models" && find all-MiniLM-L6-v2 all-mpnet-base-v2 -type f ! -name '*.md' \
        ! -name desktop.ini -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    (cd "$root" && find tests/golden/enc_* tests/golden/gated tests/golden/nomic/basic \
        tests/golden/modernbert/basic tests/golden/roberta/roberta tests/golden/roberta/xlmr \
        tests/golden/unigram/tokenizer.json.gz tests/golden/jina/basic tests/golden/jina/embed \
        tests/golden/minilm/lines.txt tests/golden/mpnet_real/texts.txt \
        tests/golden/toy_reverse tests/golden/decpos_* tests/golden/dec_* \
        tests/golden/beam_alpha tests/golden/float_transformer tests/golden/crossenc \
        bench/baseline/dump_decoder.c bench/baseline/dump_cross_encoder.c \
        -type f ! -name '*.md' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
} >"$out/INPUTS"

# ---- embed: the benchmark corpus ----------------------------------------------------------
section "embed: all-MiniLM-L6-v2 on 1000 texts, all-mpnet-base-v2 on 200 (${precisions[*]})"
e=$out/embed
run embed/minilm-1000-tokenize --stdout embed/minilm-1000-ids.txt -- \
    "$bin/embed" --model "$minilm" --tokenize --input "$corpus"
for p in "${precisions[@]}"; do
    run "embed/minilm-1000-$p" -- "$bin/embed" --model "$minilm" --precision "$p" \
        --input "$corpus" --output "$e/minilm-1000-$p.npy"
done
run embed/mpnet-200-tokenize --stdout embed/mpnet-200-ids.txt -- \
    "$bin/embed" --model "$mpnet" --tokenize --input "$corpus200"
for p in "${precisions[@]}"; do
    run "embed/mpnet-200-$p" -- "$bin/embed" --model "$mpnet" --precision "$p" \
        --input "$corpus200" --output "$e/mpnet-200-$p.npy"
done

section "embed: options and the small model folders of tests/golden"
run embed/minilm-200-batch5 -- "$bin/embed" --model "$minilm" --batch-size 5 \
    --input "$corpus200" --output "$e/minilm-200-batch5.npy"
run embed/minilm-200-cls-raw -- "$bin/embed" --model "$minilm" --pooling cls --no-normalize \
    --input "$corpus200" --output "$e/minilm-200-cls-raw.npy"
run embed/minilm-200-maxlen16 -- "$bin/embed" --model "$minilm" --max-length 16 \
    --input "$corpus200" --output "$e/minilm-200-maxlen16.npy"
run embed/minilm-200-prompt -- "$bin/embed" --model "$minilm" --prompt "query: " \
    --input "$corpus200" --output "$e/minilm-200-prompt.npy"
run embed/minilm-stdout --stdout embed/minilm-stdout.txt -- "$bin/embed" --model "$minilm" \
    "A man is eating food." "" "Ünïcödé, numbers 3.14 and punctuation!?" "the"
run embed/minilm-golden-lines -- "$bin/embed" --model "$minilm" \
    --input "$golden/minilm/lines.txt" --output "$e/minilm-golden-lines.npy"
run embed/mpnet-golden-texts -- "$bin/embed" --model "$mpnet" \
    --input "$golden/mpnet_real/texts.txt" --output "$e/mpnet-golden-texts.npy"

# The family folders, as tests/test_*_embed.sh assemble them.
mkdir -p "$tmp/jina" "$tmp/xlmr"
cp "$golden/jina/basic/config.json" "$golden/jina/basic/model.safetensors" "$tmp/jina/"
cp -r "$golden/jina/embed/tokenizer.json" "$golden/jina/embed/modules.json" \
    "$golden/jina/embed/1_Pooling" "$tmp/jina/"
cp -r "$golden/roberta/xlmr/." "$tmp/xlmr/"
[ -e "$tmp/xlmr/tokenizer.json" ] ||
    gzip -dc "$golden/unigram/tokenizer.json.gz" >"$tmp/xlmr/tokenizer.json"
for spec in "nomic:$golden/nomic/basic:$golden/nomic/basic/texts.txt" \
    "modernbert:$golden/modernbert/basic:$golden/modernbert/basic/texts.txt" \
    "roberta:$golden/roberta/roberta:$golden/roberta/roberta/texts.txt" \
    "xlmr:$tmp/xlmr:$golden/roberta/xlmr/texts.txt" \
    "jina:$tmp/jina:$golden/jina/embed/texts.txt"; do
    IFS=: read -r name folder texts <<<"$spec"
    run "embed/$name-ids" --stdout "embed/$name-ids.txt" -- \
        "$bin/embed" --model "$folder" --tokenize --input "$texts"
    for batch in 32 1; do
        run "embed/$name-b$batch" -- "$bin/embed" --model "$folder" --batch-size "$batch" \
            --input "$texts" --output "$e/$name-b$batch.npy"
    done
done
run embed/nomic-search-query -- "$bin/embed" --model "$golden/nomic/basic" \
    --prompt-name search_query --input "$golden/nomic/basic/texts.txt" \
    --output "$e/nomic-search-query.npy"
for _ in $(seq 700); do printf 'the cat sat on the mat '; done >"$tmp/long.txt"
run embed/jina-long-4096 -- "$bin/embed" --model "$tmp/jina" --max-length 4096 \
    --input "$tmp/long.txt" --output "$e/jina-long-4096.npy"

# ---- encode -------------------------------------------------------------------------------
section "encode: seeded presets and the encoder goldens"
c=$out/encode
base=("$bin/encode" --config base --seed 7 --batch 2 --seq 128)
run encode/base -- "${base[@]}" --output "$c/base.npy"
run encode/base-causal -- "${base[@]}" --causal --output "$c/base-causal.npy"
run encode/base-mask -- "${base[@]}" --mask "$tmp/mask_2x128.npy" --output "$c/base-mask.npy"
run encode/base-causal-mask -- "${base[@]}" --causal --mask "$tmp/mask_2x128.npy" \
    --output "$c/base-causal-mask.npy"
run encode/base-positional-none -- "${base[@]}" --positional none \
    --output "$c/base-positional-none.npy"
for p in "${precisions[@]}"; do
    [ "$p" = fp32 ] && continue
    run "encode/base-$p" -- "${base[@]}" --precision "$p" --output "$c/base-$p.npy"
done
run encode/C-N2-b1-n4096 -- "$bin/encode" --config C-N2 --seed 3 --batch 1 --seq 4096 \
    --output "$c/C-N2-b1-n4096.npy"
for dir in "$golden"/enc_* "$golden"/gated/*; do
    [ -f "$dir/model.safetensors" ] || continue
    name=${dir#"$golden"/}
    name=${name//\//-}
    args=(--model "$dir/model.safetensors")
    [ -f "$dir/input.npy" ] && args+=(--input "$dir/input.npy")
    [ -f "$dir/tokens.npy" ] && args+=(--tokens "$dir/tokens.npy")
    [ -f "$dir/key_padding_mask.npy" ] && args+=(--mask "$dir/key_padding_mask.npy")
    if grep -q '"causal": true' "$dir/meta.json"; then
        run "encode/$name" -- "$bin/encode" "${args[@]}" --causal --output "$c/$name.npy"
        run "encode/$name-bidirectional" -- "$bin/encode" "${args[@]}" \
            --output "$c/$name-bidirectional.npy"
    else
        run "encode/$name" -- "$bin/encode" "${args[@]}" --output "$c/$name.npy"
        run "encode/$name-causal" -- "$bin/encode" "${args[@]}" --causal \
            --output "$c/$name-causal.npy"
    fi
done

# ---- generate -----------------------------------------------------------------------------
section "generate: toy_reverse, decpos_s2s_*, beam_alpha, float_transformer"
g=$out/generate
toy=$golden/toy_reverse
tr=("$bin/generate" --model "$toy/model.safetensors" --src "$toy/src.npy"
    --src-mask "$toy/src_mask.npy")
run generate/toy-logits -- "${tr[@]}" --tgt "$toy/tgt_in.npy" --output "$g/toy-logits.npy"
run generate/toy-greedy -- "${tr[@]}" --output "$g/toy-greedy.npy"
run generate/toy-beam4 -- "${tr[@]}" --beam 4 --output "$g/toy-beam4.npy"
for variant in greedy:1: beam4:4: greedy-half:1:--half-cache beam4-half:4:--half-cache; do
    IFS=: read -r name beam extra <<<"$variant"
    run "generate/toy-$name-json" --stdout "generate/toy-$name.raw" -- \
        "${tr[@]}" --beam "$beam" ${extra:+"$extra"} --json
done
run generate/toy-nomask-json --stdout generate/toy-nomask.raw -- \
    "$bin/generate" --model "$toy/model.safetensors" --src "$toy/src.npy" --json
for kind in rope alibi; do
    dir=$golden/decpos_s2s_$kind
    read -r max_new beam alpha < <(python3 -c 'import json, sys
m = json.load(open(sys.argv[1])); print(m["max_new"], m["beam"], m["alpha"])' "$dir/meta.json")
    s2s=("$bin/generate" --model "$dir/model.safetensors" --src "$dir/src.npy"
         --src-mask "$dir/src_padding.npy")
    run "generate/s2s-$kind-logits" -- "${s2s[@]}" --tgt "$dir/tgt.npy" \
        --output "$g/s2s-$kind-logits.npy"
    run "generate/s2s-$kind-greedy-json" --stdout "generate/s2s-$kind-greedy.raw" -- \
        "${s2s[@]}" --max-new "$max_new" --json
    run "generate/s2s-$kind-greedy-half-json" --stdout "generate/s2s-$kind-greedy-half.raw" -- \
        "${s2s[@]}" --max-new "$max_new" --half-cache --json
    run "generate/s2s-$kind-beam-json" --stdout "generate/s2s-$kind-beam.raw" -- \
        "${s2s[@]}" --max-new "$max_new" --beam "$beam" --alpha "$alpha" --json
done
ba=$golden/beam_alpha
max_new=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_new"])' \
    "$ba/expected.json")
for beam in 1 3; do
    for alpha in 0 1; do
        run "generate/beam_alpha-b$beam-a$alpha-json" \
            --stdout "generate/beam_alpha-b$beam-a$alpha.raw" -- \
            "$bin/generate" --model "$ba/model.safetensors" --src "$ba/src.npy" \
            --src-mask "$ba/src_mask.npy" --max-new "$max_new" --beam "$beam" --alpha "$alpha" \
            --json
    done
done
ft=$golden/float_transformer
for m in model generator; do
    run "generate/float-$m" -- "$bin/generate" --model "$ft/$m.safetensors" --src "$ft/src.npy" \
        --src-mask "$ft/src_mask.npy" --tgt "$ft/tgt.npy" --output "$g/float-$m.npy"
done
for raw in "$g"/*.raw; do
    [ -s "$raw" ] && json_keep "$raw" "${raw%.raw}.json"
    rm -f "$raw"
done

# ---- rerank -------------------------------------------------------------------------------
section "rerank: the cross-encoder goldens"
r=$out/rerank
one=$golden/crossenc/one_label
rr=("$bin/rerank" --model "$one" --query "$(cat "$one/rerank_query.txt")"
    --input "$one/rerank_documents.txt")
run rerank/one_label --stdout rerank/one_label.json -- "${rr[@]}" --json
run rerank/one_label-raw --stdout rerank/one_label-raw.json -- "${rr[@]}" --raw-scores --json
run rerank/one_label-tsv --stdout rerank/one_label.tsv -- "${rr[@]}"
run rerank/one_label-top3 --stdout rerank/one_label-top3.tsv -- "${rr[@]}" --top-k 3
for p in "${precisions[@]}"; do
    [ "$p" = fp32 ] && continue
    run "rerank/one_label-$p" --stdout "rerank/one_label-$p.json" -- "${rr[@]}" \
        --precision "$p" --raw-scores --json
done
for name in one_label roberta; do  # crossenc/modernbert has 2 labels: rerank refuses it
    # pairs.json's pairs grouped by query: NUL-separated "query, documents..." groups.
    python3 - "$golden/crossenc/$name/pairs.json" "$tmp/pairs-$name" <<'PY'
import json, sys
groups = {}
for query, doc in json.load(open(sys.argv[1]))["pairs"]:
    groups.setdefault(query, []).append(doc)
for i, (query, docs) in enumerate(groups.items()):
    with open("%s.%d" % (sys.argv[2], i), "wb") as f:
        f.write(b"".join(s.encode() + b"\0" for s in [query] + docs))
PY
    for group in "$tmp/pairs-$name".*; do
        mapfile -d '' -t texts <"$group"
        i=${group##*.}
        run "rerank/$name-pairs-$i" --stdout "rerank/$name-pairs-$i.json" -- \
            "$bin/rerank" --model "$golden/crossenc/$name" --query "${texts[0]}" --raw-scores \
            --json "${texts[@]:1}"
    done
done

# ---- decoder and cross-encoder goldens through the public calls ----------------------------
section "decoder, cross-encoder: bench/baseline/dump_decoder.c, dump_cross_encoder.c"
# compile NAME: bench/baseline/NAME.c against BUILD_DIR's headers and libclattn, into $tmp/NAME.
compile() {
    if cc -O2 -I"$src/include" -I"$build/include" "$root/bench/baseline/$1.c" -L"$build/src" \
        -lclattn -ljansson -Wl,-rpath,"$build/src" -o "$tmp/$1" 2>"$out/logs/$1-cc.stderr"; then
        return 0
    fi
    echo "byte-baseline: FAILED: cannot compile bench/baseline/$1.c" >&2
    tail -n 5 "$out/logs/$1-cc.stderr" | sed 's/^/    /' >&2
    echo "compile/$1" >>"$out/FAILED"
    failures=$((failures + 1))
    return 1
}
if compile dump_decoder; then
    for dir in "$golden"/dec_* "$golden"/decpos_*; do
        case ${dir##*/} in decpos_s2s_*) continue ;; esac
        run "decoder/${dir##*/}" -- "$tmp/dump_decoder" "$dir" "$out/decoder/${dir##*/}"
    done
fi
if compile dump_cross_encoder; then
    for dir in "$golden"/crossenc/*/; do
        dir=${dir%/}
        run "cross_encoder/${dir##*/}" -- "$tmp/dump_cross_encoder" "$dir" "$dir/pairs.json" \
            "$out/cross_encoder/${dir##*/}"
    done
fi

# ---- the checksums --------------------------------------------------------------------------
(cd "$out" && find INPUTS embed encode generate rerank decoder cross_encoder -type f -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum >SHA256SUMS)
section "done: $(wc -l <"$out/SHA256SUMS") files in $out/SHA256SUMS, $failures failed command(s)"
[ "$failures" -eq 0 ]
