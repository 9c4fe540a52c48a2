#!/bin/bash
# End-to-end tests of examples/generate on the toy encoder-decoder model (tests/golden/toy_reverse,
# tools/train_toy_seq2seq.py): usage errors (exit 2), runtime errors (exit 1) naming the cause,
# teacher-forced logits equal to PyTorch's, greedy and beam-search ids equal to the golden ones;
# beam search's length penalty against a plain-Python reference (tests/golden/beam_alpha,
# tools/gen_beam_golden.py); model files with positional rope and alibi (tests/golden/decpos_s2s_*,
# tools/gen_positional_decoder_golden.py); a model of float inputs against nn.Transformer's forward
# (tests/golden/float_transformer, tools/gen_float_transformer_golden.py); SIGINT, progress and
# the key/value cache's size check on a model that never ends.
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
# edit_model SRC DST KEY=VALUE...: a copy of a safetensors file with metadata KEY set to VALUE, or
# with one F32 element of a tensor set, as NAME[INDEX]=FLOAT.
edit_model() {
    python3 - "$@" <<'PY'
import json, struct, sys
src, dst = sys.argv[1:3]
with open(src, 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    header = json.loads(f.read(n))
    data = bytearray(f.read())
for arg in sys.argv[3:]:
    key, value = arg.split('=', 1)
    if '[' in key:
        name, index = key[:-1].split('[')
        start = header[name]['data_offsets'][0] + 4 * int(index)
        data[start:start + 4] = struct.pack('<f', float(value))
    else:
        header['__metadata__'][key] = value
text = json.dumps(header).encode()
text += b' ' * (-len(text) % 8)
with open(dst, 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + data)
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
# Only a regular file or a new one is written: a FIFO, a directory, an empty path or a new file in
# a missing folder as --output (ids or logits) is refused up front (exit 2), never opened or
# replaced.
mkfifo "$tmp/fifo.npy"
mkdir "$tmp/dir.npy"
out_rule="only a regular file or a new one is written (left unchanged)"
expect 2 "--output $tmp/fifo.npy: it names a FIFO, not a regular file; $out_rule" -- \
    timeout 60 "$generate" --model "$model" --src "$tmp/src.npy" --output "$tmp/fifo.npy"
expect 2 "--output $tmp/dir.npy: it names a directory, not a regular file; $out_rule" -- \
    "$generate" --model "$model" --src "$tmp/src.npy" --tgt "$tmp/src.npy" --output "$tmp/dir.npy"
expect 2 "--output needs a file's path, not an empty string" -- \
    "$generate" --model "$model" --src "$tmp/src.npy" --output ""
expect 2 "--output $tmp/none/o.npy: its folder $tmp/none does not exist" -- \
    "$generate" --model "$model" --src "$tmp/src.npy" --output "$tmp/none/o.npy"
expect 0 "" -- test -p "$tmp/fifo.npy" -a -d "$tmp/dir.npy"

echo "--- runtime errors (exit 1)"
expect 1 "/no/such/model.safetensors" -- "$generate" --model /no/such/model.safetensors --src "$tmp/src.npy"
expect 1 "--model:" -- "$generate" --model "$golden/dec_padding/model.safetensors" --src "$tmp/src.npy"
expect 1 "$tmp/missing.npy: cannot open" -- "$generate" --model "$model" --src "$tmp/missing.npy"
expect 1 "--src:" -- "$generate" --model "$model" --src "$tmp/src_float.npy"
expect 1 "id 13 at [0, 1] is outside the vocabulary [0, 13)" -- "$generate" --model "$model" --src "$tmp/src_big.npy"
expect 1 "must be a non-empty [B, length] array" -- "$generate" --model "$model" --src "$tmp/src_1d.npy"
expect 1 "--src-mask must have the source's shape [2, 3]" -- "$generate" --model "$model" --src "$tmp/src.npy" --src-mask "$tmp/mask_wide.npy"
expect 1 "--tgt has 1 sentences but --src 2" -- "$generate" --model "$model" --src "$tmp/src.npy" --tgt "$tmp/tgt_one.npy" --output "$tmp/o.npy"
# Layer counts that disagree with the layers in the file: an error naming both, not another model.
edit_model "$model" "$tmp/dec1.safetensors" num_decoder_layers=1
expect 1 'metadata "num_decoder_layers" is 1 but the file holds 2 layers (decoder.layers.0 to decoder.layers.1)' -- "$generate" --model "$tmp/dec1.safetensors" --src "$tmp/src.npy"
edit_model "$model" "$tmp/enc1.safetensors" num_encoder_layers=1
expect 1 'metadata "num_encoder_layers" is 1 but the file holds 2 layers (encoder.layers.0 to encoder.layers.1)' -- "$generate" --model "$tmp/enc1.safetensors" --src "$tmp/src.npy"
edit_model "$model" "$tmp/dec3.safetensors" num_decoder_layers=3
expect 1 'metadata "num_decoder_layers" is 3 but the file holds 2 layers' -- "$generate" --model "$tmp/dec3.safetensors" --src "$tmp/src.npy"

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

echo "--- beam search's length penalty against a plain-Python beam search (tools/gen_beam_golden.py)"
# On this model and these sources beam search disagrees with greedy decoding and alpha decides
# the winner: every case's ids must be the reference's exactly, its scores to the tolerance.
beam_golden=$golden/beam_alpha
# check_case OUT.json BEAM ALPHA: generate's --json output against expected.json's case.
check_case() {
    python3 - "$1" "$beam_golden/expected.json" "$2" "$3" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
expected = json.load(open(sys.argv[2]))
beam, alpha = int(sys.argv[3]), float(sys.argv[4])
case = next(c for c in expected['cases'] if c['beam'] == beam and c['alpha'] == alpha)
tol, bad = expected['score_tolerance'], []
if got['ids'] != case['ids']:
    bad.append('ids %s, expected %s' % (got['ids'], case['ids']))
if len(got['scores']) != len(case['scores']) or any(
        a is None or abs(a - b) > tol for a, b in zip(got['scores'], case['scores'])):
    bad.append('scores %s, expected %s (to %g)' % (got['scores'], case['scores'], tol))
if bad:
    sys.exit('\n'.join(bad))
PY
}
max_new=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_new"])' "$beam_golden/expected.json")
for beam in 1 3; do
    for alpha in 0 1; do
        if "$generate" --model "$beam_golden/model.safetensors" --src "$beam_golden/src.npy" \
            --src-mask "$beam_golden/src_mask.npy" --max-new "$max_new" --beam "$beam" \
            --alpha "$alpha" --json >"$tmp/case.json" && check_case "$tmp/case.json" "$beam" "$alpha"; then
            echo "ok:   --beam $beam --alpha $alpha: ids and scores equal the reference's"
        else
            echo "FAIL: --beam $beam --alpha $alpha"; failures=$((failures + 1))
        fi
    done
done
# The golden must keep showing what it is for: beam (alpha 1) != greedy, != beam (alpha 0).
if python3 - "$beam_golden/expected.json" <<'PY'
import json, sys
c = {(x['beam'], x['alpha']): x['ids'] for x in json.load(open(sys.argv[1]))['cases']}
sys.exit(0 if c[(3, 1.0)] != c[(1, 1.0)] and c[(3, 1.0)] != c[(3, 0.0)] else 1)
PY
then echo "ok:   the golden's beam search differs from greedy and alpha decides its winner"
else echo "FAIL: tests/golden/beam_alpha no longer shows the length penalty"; failures=$((failures + 1)); fi

echo "--- model files with positional rope and alibi (tools/gen_positional_decoder_golden.py)"
# Random one-layer models whose self-attention places tokens by RoPE or ALiBi (no sinusoidal
# table): greedy (float and half cache) and beam ids exactly the float64 reference's, the
# teacher-forced logits to 1e-4.
for kind in rope alibi; do
    case_dir=$golden/decpos_s2s_$kind
    read -r max_new beam alpha < <(python3 -c 'import json, sys
m = json.load(open(sys.argv[1])); print(m["max_new"], m["beam"], m["alpha"])' "$case_dir/meta.json")
    run=("$generate" --model "$case_dir/model.safetensors" --src "$case_dir/src.npy"
         --src-mask "$case_dir/src_padding.npy")
    if "${run[@]}" --max-new "$max_new" --output "$tmp/$kind-greedy.npy" &&
        "$compare" "$tmp/$kind-greedy.npy" "$case_dir/greedy.npy" 0 &&
        "${run[@]}" --max-new "$max_new" --half-cache --output "$tmp/$kind-greedy-half.npy" &&
        "$compare" "$tmp/$kind-greedy-half.npy" "$case_dir/greedy.npy" 0 &&
        "${run[@]}" --max-new "$max_new" --beam "$beam" --alpha "$alpha" \
            --output "$tmp/$kind-beam.npy" &&
        "$compare" "$tmp/$kind-beam.npy" "$case_dir/beam.npy" 0 &&
        "${run[@]}" --tgt "$case_dir/tgt.npy" --output "$tmp/$kind-logits.npy" &&
        "$compare" "$tmp/$kind-logits.npy" "$case_dir/logits.npy" 1e-4; then
        echo "ok:   positional $kind: greedy and beam ids, teacher-forced logits"
    else
        echo "FAIL: positional $kind"; failures=$((failures + 1))
    fi
done
edit_model "$golden/decpos_s2s_rope/model.safetensors" "$tmp/learned.safetensors" \
    positional=learned
expect 1 'metadata "positional" is "learned", not one of none, sinusoidal, rope, alibi' -- \
    "$generate" --model "$tmp/learned.safetensors" --src "$golden/decpos_s2s_rope/src.npy"

echo "--- a model of float inputs (nn.Transformer without embeddings) against PyTorch"
float_golden=$golden/float_transformer
fmodel=$float_golden/model.safetensors
if "$generate" --model "$fmodel" --src "$float_golden/src.npy" --src-mask "$float_golden/src_mask.npy" \
    --tgt "$float_golden/tgt.npy" --output "$tmp/float_out.npy" &&
    "$compare" "$tmp/float_out.npy" "$float_golden/out.npy" 1e-4; then
    echo "ok:   float --src/--tgt: the decoder output equals nn.Transformer's to 1e-4"
else
    echo "FAIL: float model: decoder output"; failures=$((failures + 1))
fi
if "$generate" --model "$float_golden/generator.safetensors" --src "$float_golden/src.npy" \
    --src-mask "$float_golden/src_mask.npy" --tgt "$float_golden/tgt.npy" --output "$tmp/float_logits.npy" &&
    "$compare" "$tmp/float_logits.npy" "$float_golden/logits.npy" 1e-4; then
    echo "ok:   float model with a generator: the logits equal PyTorch's to 1e-4"
else
    echo "FAIL: float model with a generator: logits"; failures=$((failures + 1))
fi
expect 2 "has no embeddings: it takes float inputs and runs the teacher-forced forward only (nothing to generate from)" -- "$generate" --model "$fmodel" --src "$float_golden/src.npy"
expect 1 "must be a non-empty float array [B, length, 8]" -- "$generate" --model "$fmodel" --src "$tmp/src.npy" --tgt "$float_golden/tgt.npy" --output "$tmp/o.npy"
expect 1 "--tgt: $float_golden/src_mask.npy must be a non-empty float array" -- "$generate" --model "$fmodel" --src "$float_golden/src.npy" --tgt "$float_golden/src_mask.npy" --output "$tmp/o.npy"

echo "--- a model that never ends: SIGINT, progress on a terminal, the cache's size"
edit_model "$model" "$tmp/never.safetensors" 'generator.bias[12]=-1e30' # EOS never wins
mk_npy "$tmp/one.npy" '<i8' '(1, 3)' q 1 2 12
# SIGINT a moment into --max-new 1048576: exit 130 with a message, no output file (none left by
# the run, an existing one untouched). timeout bounds the test if SIGINT were not honoured;
# --foreground sends SIGINT to generate alone (not to a compiler the OpenCL driver may run).
for existing in no yes; do
    rm -f "$tmp/never.npy"
    [ "$existing" = yes ] && echo keep >"$tmp/never.npy"
    out=$(timeout --foreground -k 30 --preserve-status -s INT 3 "$generate" --model "$tmp/never.safetensors" \
        --src "$tmp/one.npy" --max-new 1048576 --output "$tmp/never.npy" 2>&1)
    rc=$?
    if [ "$existing" = yes ]; then kept=$(cat "$tmp/never.npy"); else
        kept=$([ -e "$tmp/never.npy" ] && echo exists || echo keep); fi
    leftovers=$(find "$tmp" -name 'never.npy?*' | wc -l)
    if [ "$rc" -eq 130 ] && grep -qF "generate: interrupted" <<<"$out" && grep -qF "no output written" <<<"$out" &&
        [ "$kept" = keep ] && [ "$leftovers" -eq 0 ]; then
        echo "ok:   SIGINT (existing output: $existing): exit 130, nothing written"
    else
        echo "FAIL: SIGINT (existing output: $existing): exit $rc, output file: $kept, leftovers: $leftovers"
        sed 's/^/    /' <<<"$out" | head -5
        failures=$((failures + 1))
    fi
done
# Progress on a terminal (script gives stderr a pseudo-terminal), none when stderr is a pipe.
out=$(timeout 120 script -qec "'$generate' --model '$tmp/never.safetensors' --src '$tmp/one.npy' --max-new 40 --output '$tmp/p.npy'" /dev/null </dev/null 2>&1)
if grep -qF "40 of 40 tokens x 1 sequences" <<<"$out"; then
    echo "ok:   a terminal shows the progress"
else
    echo "FAIL: no progress on a terminal: $out"; failures=$((failures + 1))
fi
out=$("$generate" --model "$tmp/never.safetensors" --src "$tmp/one.npy" --max-new 40 --output "$tmp/p.npy" 2>&1)
if [ -z "$out" ]; then echo "ok:   no progress when stderr is not a terminal"
else echo "FAIL: progress on a pipe: $out"; failures=$((failures + 1)); fi
# A cache larger than the device's memory is refused before generating, with both sizes.
expect 1 "needs 262144.0 MiB, more than the device's global memory" -- "$generate" --model "$model" --src "$toy/src.npy" --beam 16 --max-new 1048576

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all generate tests passed"
