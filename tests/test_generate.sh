#!/bin/bash
# End-to-end tests of examples/generate on the toy encoder-decoder model (tests/golden/toy_reverse,
# tools/train_toy_seq2seq.py): usage errors (exit 2), runtime errors (exit 1) naming the cause,
# teacher-forced logits equal to PyTorch's, greedy and beam-search ids equal to the golden ones.
# usage: test_generate.sh GENERATE NPY_COMPARE GOLDEN_DIR
set -u
generate=$1 compare=$2 golden=$3
toy=$golden/toy_reverse
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-generate.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"

# mk_npy FILE DESCR SHAPE PACK_FORMAT VALUES...: a small .npy file (Python's standard library only).
mk_npy() {
    python3 - "$@" <<'PY'
import struct, sys
path, descr, shape, fmt = sys.argv[1:5]
values = [float(v) if fmt == 'f' else int(v) for v in sys.argv[5:]]
header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
header += ' ' * ((64 - (10 + len(header) + 1) % 64) % 64) + '\n'
with open(path, 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode())
    f.write(struct.pack('<%d%s' % (len(values), fmt), *values))
PY
}
mk_npy "$tmp/src.npy" '<i8' '(2, 3)' q 1 2 12 3 12 10
mk_npy "$tmp/mask.npy" '|b1' '(2, 3)' b 0 0 0 0 0 1
mk_npy "$tmp/mask_wide.npy" '|b1' '(2, 4)' b 0 0 0 0 0 0 0 1
mk_npy "$tmp/src_float.npy" '<f4' '(2, 3)' f 1 2 12 3 12 10
mk_npy "$tmp/src_big.npy" '<i8' '(1, 3)' q 1 13 12
mk_npy "$tmp/src_1d.npy" '<i8' '(3,)' q 1 2 12
mk_npy "$tmp/tgt_one.npy" '<i8' '(1, 2)' q 11 2

model=$toy/model.safetensors
echo "--- usage errors (exit 2)"
expect 0 "usage: generate" -- "$generate" --help
expect 2 "--model FILE is required" -- "$generate" --src "$tmp/src.npy"
expect 2 "--src SRC.npy is required" -- "$generate" --model "$model"
expect 2 "give --output OUT.npy" -- "$generate" --model "$model" --src "$tmp/src.npy" --tgt "$tmp/src.npy"
expect 2 "--max-new, --beam, --alpha and --half-cache are for generation" -- "$generate" --model "$model" --src "$tmp/src.npy" --tgt "$tmp/src.npy" --output "$tmp/o.npy" --beam 2
expect 2 "are for generation" -- "$generate" --model "$model" --src "$tmp/src.npy" --tgt "$tmp/src.npy" --output "$tmp/o.npy" --half-cache
expect 2 "--beam needs an integer from 1 to 256" -- "$generate" --model "$model" --src "$tmp/src.npy" --beam 0
expect 2 "--alpha needs a number from 0 to 10" -- "$generate" --model "$model" --src "$tmp/src.npy" --alpha -1
expect 2 "--alpha needs a number" -- "$generate" --model "$model" --src "$tmp/src.npy" --alpha nan
expect 2 "--max-new needs a positive integer" -- "$generate" --model "$model" --src "$tmp/src.npy" --max-new 0
expect 2 "unknown option '--nope'" -- "$generate" --nope
expect 2 "unexpected argument 'extra'" -- "$generate" --model "$model" --src "$tmp/src.npy" extra
cp "$tmp/src.npy" "$tmp/keep.npy"
expect 2 "is the same file as --src" -- "$generate" --model "$model" --src "$tmp/keep.npy" --output "$tmp/keep.npy"
if cmp -s "$tmp/src.npy" "$tmp/keep.npy"; then echo "ok:   the input is unchanged"; else
    echo "FAIL: the input changed"; failures=$((failures + 1)); fi

echo "--- runtime errors (exit 1)"
expect 1 "/no/such/model.safetensors" -- "$generate" --model /no/such/model.safetensors --src "$tmp/src.npy"
expect 1 "--model:" -- "$generate" --model "$golden/dec_padding/model.safetensors" --src "$tmp/src.npy"
expect 1 "$tmp/missing.npy: cannot open" -- "$generate" --model "$model" --src "$tmp/missing.npy"
expect 1 "--src:" -- "$generate" --model "$model" --src "$tmp/src_float.npy"
expect 1 "id 13 at [0, 1] is outside the vocabulary [0, 13)" -- "$generate" --model "$model" --src "$tmp/src_big.npy"
expect 1 "must be a non-empty [B, length] array" -- "$generate" --model "$model" --src "$tmp/src_1d.npy"
expect 1 "--src-mask must have the source's shape [2, 3]" -- "$generate" --model "$model" --src "$tmp/src.npy" --src-mask "$tmp/mask_wide.npy"
expect 1 "--tgt has 1 sentences but --src 2" -- "$generate" --model "$model" --src "$tmp/src.npy" --tgt "$tmp/tgt_one.npy" --output "$tmp/o.npy"

echo "--- the toy model against PyTorch"
# Teacher-forced logits: PyTorch's (float64 model, no target padding mask) to 1e-4.
if "$generate" --model "$model" --src "$toy/src.npy" --src-mask "$toy/src_mask.npy" \
    --tgt "$toy/tgt_in.npy" --output "$tmp/logits.npy" &&
    "$compare" "$tmp/logits.npy" "$toy/logits_no_tgt_mask.npy" 1e-4; then
    echo "ok:   --tgt logits equal PyTorch's to 1e-4"
else
    echo "FAIL: --tgt logits"; failures=$((failures + 1))
fi
# Greedy ids [B, L], padded with pad_id: exactly greedy.npy.
if "$generate" --model "$model" --src "$toy/src.npy" --src-mask "$toy/src_mask.npy" \
    --output "$tmp/greedy.npy" && "$compare" "$tmp/greedy.npy" "$toy/greedy.npy" 0; then
    echo "ok:   greedy ids equal PyTorch's"
else
    echo "FAIL: greedy ids"; failures=$((failures + 1))
fi
# Beam search, k = 4, alpha 0.6: exactly the reference's beam.npy; --json reports the rate.
if "$generate" --model "$model" --src "$toy/src.npy" --src-mask "$toy/src_mask.npy" --beam 4 \
    --alpha 0.6 --output "$tmp/beam.npy" --json >"$tmp/beam.json" &&
    "$compare" "$tmp/beam.npy" "$toy/beam.npy" 0 && grep -q '"tokens_per_s": [0-9]' "$tmp/beam.json"; then
    echo "ok:   beam-search ids equal the reference's; --json reports tokens/s"
else
    echo "FAIL: beam-search ids or --json"; cat "$tmp/beam.json"; failures=$((failures + 1))
fi
# The half-precision cache decodes the same ids (greedy and beam) on this trained model.
if "$generate" --model "$model" --src "$toy/src.npy" --src-mask "$toy/src_mask.npy" --half-cache \
    --output "$tmp/greedy_half.npy" && "$compare" "$tmp/greedy_half.npy" "$toy/greedy.npy" 0 &&
    "$generate" --model "$model" --src "$toy/src.npy" --src-mask "$toy/src_mask.npy" --beam 4 \
    --half-cache --output "$tmp/beam_half.npy" --json >"$tmp/beam_half.json" &&
    "$compare" "$tmp/beam_half.npy" "$toy/beam.npy" 0 &&
    grep -qF '"half_cache": true' "$tmp/beam_half.json"; then
    echo "ok:   --half-cache: greedy and beam-search ids equal the float cache's"
else
    echo "FAIL: --half-cache"; failures=$((failures + 1))
fi
# Without --output: one JSON array per sentence; "3 1 EOS" reversed is "1 3 EOS" etc.
mk_npy "$tmp/two.npy" '<i8' '(2, 4)' q 3 1 4 12 5 9 12 10
mk_npy "$tmp/two_mask.npy" '|b1' '(2, 4)' b 0 0 0 0 0 0 0 1
out=$("$generate" --model "$model" --src "$tmp/two.npy" --src-mask "$tmp/two_mask.npy")
if [ "$out" = $'[4, 1, 3, 12]\n[9, 5, 12]' ]; then
    echo "ok:   stdout gives the reversed digits"
else
    echo "FAIL: expected [4, 1, 3, 12] and [9, 5, 12], got: $out"; failures=$((failures + 1))
fi
out=$("$generate" --model "$model" --src "$tmp/two.npy" --src-mask "$tmp/two_mask.npy" --max-new 2 --json)
if grep -qF '"ids": [[4, 1], [9, 5]]' <<<"$out" && grep -qF '"generated_tokens": 4' <<<"$out"; then
    echo "ok:   --max-new 2 cuts the output; --json holds the ids"
else
    echo "FAIL: --max-new 2 --json: $out"; failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all generate tests passed"
