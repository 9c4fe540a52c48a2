#!/bin/bash
# End-to-end tests of the example programs: exit codes (0 success, 2 usage, 1 runtime), the
# messages that name the cause, and results: encode against PyTorch golden outputs, flops against
# the seed's exact FLOP counts, permutation's two facts.
# usage: test_examples.sh ENCODE FLOPS PERMUTATION NPY_COMPARE GOLDEN_DIR
set -u
encode=$1 flops=$2 permutation=$3 compare=$4 golden=$5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-examples.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect STATUS NEEDLE -- COMMAND...: runs COMMAND, checks its exit status and that NEEDLE occurs
# in its output (stdout and stderr together).
expect() {
    local status=$1 needle=$2
    shift 3
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -ne "$status" ] || ! grep -qF -- "$needle" <<<"$out"; then
        echo "FAIL: $* -> exit $rc (expected $status), output must contain: $needle"
        sed 's/^/    /' <<<"$out" | head -20
        failures=$((failures + 1))
    else
        echo "ok:   $*"
    fi
}

echo "--- encode: usage errors (exit 2)"
expect 0 "usage: encode" -- "$encode" --help
expect 2 "unknown option '--bogus'" -- "$encode" --bogus
expect 2 "either --model or --config" -- "$encode" --model a --config base
expect 2 "unknown preset 'huge'" -- "$encode" --config huge
expect 2 "--batch needs a positive integer, not '0'" -- "$encode" --batch 0
expect 2 "--positional must be sinusoidal or none" -- "$encode" --positional rotary
expect 2 "needs a value" -- "$encode" --seq
expect 2 "either --input or --tokens" -- "$encode" --input a.npy --tokens b.npy
expect 2 "unexpected argument 'stray'" -- "$encode" stray

echo "--- encode: runtime errors (exit 1)"
expect 1 "/no/such/model.safetensors" -- "$encode" --model /no/such/model.safetensors
expect 1 "no OpenCL device matches device spec 'no-such-device'" -- "$encode" --device no-such-device
expect 1 "--input: " -- "$encode" --config C-N2 --input /no/such/input.npy
expect 1 "no token embedding" -- "$encode" --config C-N2 --tokens "$golden/enc_tokens/tokens.npy"
expect 1 "must be float [batch, seq, 512]" -- "$encode" --config C-N2 --input "$golden/enc_post_ln_relu/input.npy"
expect 1 "--mask: " -- "$encode" --model "$golden/enc_key_padding/model.safetensors" \
    --input "$golden/enc_key_padding/input.npy" --mask "$golden/enc_key_padding/input.npy"
printf 'not a model' >"$tmp/bad.safetensors"
expect 1 "$tmp/bad.safetensors" -- "$encode" --model "$tmp/bad.safetensors"

echo "--- encode: runs"
expect 0 "[0:0]" -- "$encode" --list-devices
expect 0 "output:        [1, 8, 512]" -- "$encode" --config C-N2 --batch 1 --seq 8
expect 0 '"forward_ms_median"' -- "$encode" --config C-d256 --batch 1 --seq 4 --repeat 2 --json
expect 0 "per-kernel time" -- "$encode" --config C-N2 --batch 1 --seq 4 --profile --causal

echo "--- encode against PyTorch (golden outputs, tolerance 1e-4)"
for case in enc_post_ln_relu enc_key_padding enc_tokens enc_causal enc_bf16_weights; do
    dir="$golden/$case"
    args=(--model "$dir/model.safetensors" --output "$tmp/$case.npy")
    [ -f "$dir/input.npy" ] && args+=(--input "$dir/input.npy")
    [ -f "$dir/tokens.npy" ] && args+=(--tokens "$dir/tokens.npy")
    [ -f "$dir/key_padding_mask.npy" ] && args+=(--mask "$dir/key_padding_mask.npy")
    grep -q '"causal": true' "$dir/meta.json" && args+=(--causal)
    expect 0 "output:" -- "$encode" "${args[@]}"
    expect 0 "max abs difference" -- "$compare" "$tmp/$case.npy" "$dir/out.npy" 1e-4
done

echo "--- flops: the seed's counts (the paper's section 3.2.2) from a batch-1 run, times 32"
out=$("$flops" --batch 1 --seq 1024 --dim 512 --heads 8 2>&1)
rc=$?
single=$(awk '/^single head without W\^O/ {print $5}' <<<"$out")
multi=$(awk '/^multi-head \(8 heads\) with W\^O/ {print $6}' <<<"$out")
multi_id=$(awk '/^multi-head \(8 heads\) without W\^O/ {print $6}' <<<"$out")
if [ "$rc" -eq 0 ] && [ "$((single * 32))" -eq 60129542144 ] &&
    [ "$((multi * 32))" -eq 68719476736 ] && [ "$((multi_id * 32))" -eq 60129542144 ]; then
    echo "ok:   flops counted $single, $multi, $multi_id at batch 1 (x32 = the seed's figures)"
else
    echo "FAIL: flops counted '$single' '$multi' '$multi_id' (exit $rc)"
    sed 's/^/    /' <<<"$out" | head -30
    failures=$((failures + 1))
fi
expect 0 "C-ff4096" -- "$flops" --table
expect 2 "--dim must be divisible by --heads" -- "$flops" --dim 10 --heads 4

echo "--- permutation: the seed's two facts (the paper's section 3.5)"
out=$("$permutation" 2>&1)
rc=$?
if [ "$rc" -eq 0 ] &&
    [ "$(grep -c 'first row identical: yes' <<<"$out")" -eq 1 ] &&
    [ "$(grep -c 'rows 2 and 3 swapped: yes' <<<"$out")" -eq 1 ] &&
    [ "$(grep -c 'first row identical: no' <<<"$out")" -eq 1 ] &&
    [ "$(grep -c 'rows 2 and 3 swapped: no' <<<"$out")" -eq 1 ]; then
    echo "ok:   permutation: equivariant without positions, not with the sinusoidal encoding"
else
    echo "FAIL: permutation (exit $rc)"
    sed 's/^/    /' <<<"$out"
    failures=$((failures + 1))
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
