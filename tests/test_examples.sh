#!/bin/bash
# End-to-end tests of the example programs: exit codes (0 success, 2 usage, 1 runtime), the
# messages that name the cause, and results: encode against PyTorch golden outputs, flops against
# the experiment's exact FLOP counts (docs/library.md), permutation's two facts.
# usage: test_examples.sh ENCODE FLOPS PERMUTATION NPY_COMPARE GOLDEN_DIR
set -u
encode=$1 flops=$2 permutation=$3 compare=$4 golden=$5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-examples.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"


# expect_once STATUS NEEDLE -- COMMAND...: as expect, and NEEDLE occurs on exactly one line (an
# error is printed once: by encode, not also by the library's log).
expect_once() {
    local status=$1 needle=$2
    shift 3
    local out rc count
    out=$("$@" 2>&1)
    rc=$?
    count=$(grep -cF -- "$needle" <<<"$out")
    if [ "$rc" -ne "$status" ] || [ "$count" -ne 1 ]; then
        echo "FAIL: $* -> exit $rc (expected $status), '$needle' on $count lines (expected 1)"
        sed 's/^/    /' <<<"$out" | head -20
        failures=$((failures + 1))
    else
        echo "ok:   $* (printed once)"
    fi
}

# check NAME PYTHON-CODE ARGS...: runs python3 -c CODE with ARGS (the code asserts), one result.
check() {
    local name=$1 code=$2
    shift 2
    local out
    if out=$(python3 -c "$code" "$@" 2>&1); then
        echo "ok:   $name"
    else
        echo "FAIL: $name"
        sed 's/^/    /' <<<"$out" | tail -20
        failures=$((failures + 1))
    fi
}

# mknpy PATH DESCR SHAPE VALUE: writes a .npy of the given dtype ('<f4', '<i8') and shape (a
# Python tuple), every element VALUE (a Python expression: 0.5, float('nan'), 3).
mknpy() {
    python3 - "$@" <<'PY'
import struct, sys
path, descr, shape, value = sys.argv[1], sys.argv[2], eval(sys.argv[3]), eval(sys.argv[4])
n = 1
for d in shape:
    n *= d
header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
header += ' ' * ((64 - (10 + len(header) + 1) % 64) % 64) + '\n'
data = struct.pack('<%d%s' % (n, 'f' if descr == '<f4' else 'q'), *([value] * n))
open(path, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + data)
PY
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
expect 2 "--seed needs a non-negative integer, not ' -1'" -- "$encode" --seed " -1"
expect 2 "--seed needs a non-negative integer, not '+1'" -- "$encode" --seed +1
expect 2 "--seed needs a non-negative integer, not '18446744073709551616'" -- "$encode" \
    --seed 18446744073709551616
# --output naming a file that is read: refused before anything runs, the file unchanged.
cp "$golden/enc_post_ln_relu/model.safetensors" "$tmp/model.safetensors"
cp "$golden/enc_post_ln_relu/input.npy" "$tmp/input.npy"
ln "$tmp/input.npy" "$tmp/input-hardlink.npy"
cp "$golden/enc_key_padding/key_padding_mask.npy" "$tmp/mask.npy"
cp "$golden/enc_tokens/tokens.npy" "$tmp/tokens.npy"
ln -s mask.npy "$tmp/mask-link.npy"
sums=$(cksum "$tmp/model.safetensors" "$tmp/input.npy" "$tmp/mask.npy" "$tmp/tokens.npy")
expect 2 "--output $tmp/model.safetensors is the same file as --model" -- "$encode" \
    --model "$tmp/model.safetensors" --input "$tmp/input.npy" --output "$tmp/model.safetensors"
expect 2 "is the same file as --input $tmp/input.npy" -- "$encode" \
    --model "$tmp/model.safetensors" --input "$tmp/input.npy" --output "$tmp/input-hardlink.npy"
expect 2 "is the same file as --mask $tmp/mask.npy" -- "$encode" --model "$tmp/model.safetensors" \
    --input "$tmp/input.npy" --mask "$tmp/mask.npy" --output "$tmp/mask-link.npy"
expect 2 "is the same file as --tokens" -- "$encode" --model "$golden/enc_tokens/model.safetensors" \
    --tokens "$tmp/tokens.npy" --output "$tmp/tokens.npy"
if [ "$(cksum "$tmp/model.safetensors" "$tmp/input.npy" "$tmp/mask.npy" "$tmp/tokens.npy")" = "$sums" ]; then
    echo "ok:   the model, input, mask and tokens are unchanged"
else
    echo "FAIL: an --output named like an input changed it"
    failures=$((failures + 1))
fi

echo "--- encode: runtime errors (exit 1)"
# A model file whose metadata num_layers (3) is changed to 1 in place: another model, refused.
python3 - "$golden/enc_stack_final_norm/model.safetensors" "$tmp/fewer-layers.safetensors" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
old, new = b'"num_layers":"3"', b'"num_layers":"1"'
assert data.count(old) == 1
open(sys.argv[2], 'wb').write(data.replace(old, new))
PY
expect_once 1 "metadata num_layers is 1 but the file holds layers 0-2" -- "$encode" \
    --model "$tmp/fewer-layers.safetensors" --input "$golden/enc_stack_final_norm/input.npy"
expect_once 1 "/no/such/model.safetensors" -- "$encode" --model /no/such/model.safetensors
expect_once 1 "no OpenCL device matches" -- "$encode" --device no-such-device
expect 1 "no OpenCL device matches device spec 'no-such-device'" -- "$encode" --device no-such-device
expect 1 "--input: " -- "$encode" --config C-N2 --input /no/such/input.npy
expect 1 "no token embedding" -- "$encode" --config C-N2 --tokens "$golden/enc_tokens/tokens.npy"
expect 1 "has shape (2, 6, 32): its last dimension is 32, but this model's d_model is 512" -- \
    "$encode" --config C-N2 --input "$golden/enc_post_ln_relu/input.npy"
mknpy "$tmp/seq0.npy" '<f4' '(2, 0, 32)' 0
mknpy "$tmp/batch0.npy" '<f4' '(0, 6, 32)' 0
mknpy "$tmp/vector.npy" '<f4' '(32,)' 0
mknpy "$tmp/no-tokens.npy" '<i8' '(0,)' 0
mknpy "$tmp/no-batch-tokens.npy" '<i8' '(0, 5)' 0
model="$golden/enc_post_ln_relu/model.safetensors"
expect 1 "has shape (2, 0, 32): seq is 0; it needs at least one position" -- \
    "$encode" --model "$model" --input "$tmp/seq0.npy"
expect 1 "has shape (0, 6, 32): the batch is 0; it needs at least one sequence" -- \
    "$encode" --model "$model" --input "$tmp/batch0.npy"
expect 1 "must be float [batch, seq, 32] or [seq, 32] for this model (d_model 32); it has 1 dimensions, shape (32,)" -- \
    "$encode" --model "$model" --input "$tmp/vector.npy"
expect 1 "no-tokens.npy holds no token ids (shape (0,)): seq is 0" -- \
    "$encode" --model "$golden/enc_tokens/model.safetensors" --tokens "$tmp/no-tokens.npy"
expect 1 "holds no token ids (shape (0, 5)): the batch is 0" -- \
    "$encode" --model "$golden/enc_tokens/model.safetensors" --tokens "$tmp/no-batch-tokens.npy"
# Sizes are checked before anything is allocated: batch x seq x d_model x 4 wraps size_t to 0
# here (it crashed), and a batch too large for the device is refused at once (it took 33 s and
# 4.5 GB to fill the host buffer first).
expect 1 "a batch of [1073741824, 8388608] is too large: the byte size of its activations" -- \
    timeout 30 "$encode" --batch 1073741824 --seq 8388608
expect 1 "is too large for the device: the input needs 204800000000 bytes, more than its largest allocation" -- \
    timeout 30 "$encode" --batch 1 --seq 100000000
expect 1 "a batch of [1, 1100000] is too large for the device" -- \
    timeout 10 "$encode" --batch 1 --seq 1100000
expect 1 "a batch of [1, 2000000] is too large for the device" -- \
    timeout 10 "$encode" --config C-N2 --batch 1 --seq 2000000 --json
expect 1 "--mask: " -- "$encode" --model "$golden/enc_key_padding/model.safetensors" \
    --input "$golden/enc_key_padding/input.npy" --mask "$golden/enc_key_padding/input.npy"
printf 'not a model' >"$tmp/bad.safetensors"
expect 1 "$tmp/bad.safetensors" -- "$encode" --model "$tmp/bad.safetensors"

echo "--- encode: runs"
out=$("$encode" --list-devices 2>&1)
check "--list-devices: every device listed with its facts" '
import re, sys
out = sys.argv[1]
heads = re.findall(r"^\[(\d+):(\d+)\] \S", out, re.M)
assert heads and heads[0] == ("0", "0"), out
for fact in ("platform:", "type:", "compute units:", "global memory:", "max allocation:"):
    assert out.count(fact) == len(heads), (fact, out)
' "$out"
out=$("$encode" --config C-N2 --batch 1 --seq 8 --output "$tmp/c-n2.npy" 2>&1)
check "--config C-N2: the printed shape and checksum are those of the --output file" '
import re, struct, sys
out, path = sys.argv[1], sys.argv[2]
assert "configuration: C-N2: 2 layers, d_model 512, 8 heads (d_k 64, d_v 64), d_ff 2048" in out, out
assert "output:        [1, 8, 512]\n" in out, out
m = re.search(r"checksum:      sum (\S+), mean \|y\| (\S+)\n", out)
raw = open(path, "rb").read()
hlen = struct.unpack("<H", raw[8:10])[0]
assert "(1, 8, 512)" in raw[10:10 + hlen].decode(), raw[:80]
y = struct.unpack("<%df" % (8 * 512), raw[10 + hlen:])
total, mean_abs = sum(y), sum(abs(v) for v in y) / len(y)
assert abs(float(m.group(1)) - total) < 1e-5 + 1e-6 * sum(abs(v) for v in y), (m.group(1), total)
assert abs(float(m.group(2)) - mean_abs) < 1e-6, (m.group(2), mean_abs)
# post-LN with unit LayerNorm weights: each row has mean 0 and variance 1
assert abs(total) < 1e-2 and 0.7 < mean_abs < 0.9, (total, mean_abs)
' "$out" "$tmp/c-n2.npy"
text=$("$encode" --config C-d256 --batch 1 --seq 4 2>&1)
json=$("$encode" --config C-d256 --batch 1 --seq 4 --repeat 2 --json 2>&1)
check "--json: every key, the exact FLOPs, the same checksum as the text run" '
import json, re, sys
j, text = json.loads(sys.argv[1]), sys.argv[2]
keys = ["device", "configuration", "shape", "forward_ms_median", "timed_passes", "flops",
        "flops_by_operation", "gflops_per_s", "checksum", "mean_abs", "non_finite", "setup_ms"]
assert list(j) == keys, list(j)
assert j["shape"] == [1, 4, 256] and j["timed_passes"] == 2 and j["non_finite"] == 0, j
c = j["configuration"]
assert (c["name"], c["num_layers"], c["d_model"], c["nhead"], c["dim_feedforward"]) == ("C-d256", 6, 256, 8, 2048), c
L, T, N, d, ff = 6, 4, 4, 256, 2048
want = {"in_projection": L * T * 3 * d * d, "scores": L * N * N * d, "weights_v": L * N * N * d,
        "out_projection": L * T * d * d, "feed_forward": L * T * 2 * d * ff, "other": 0}
assert j["flops_by_operation"] == want and j["flops"] == sum(want.values()), j["flops_by_operation"]
assert "executed:      %d FLOPs" % j["flops"] in text, text
m = re.search(r"checksum:      sum (\S+), mean \|y\| (\S+)\n", text)
assert abs(float(m.group(1)) - j["checksum"]) < 1e-5, (m.group(1), j["checksum"])
assert abs(float(m.group(2)) - j["mean_abs"]) < 1e-5, (m.group(2), j["mean_abs"])
assert j["forward_ms_median"] > 0 and j["gflops_per_s"] > 0
' "$json" "$text"
out=$("$encode" --config C-N2 --batch 1 --seq 4 --profile --causal 2>&1)
check "--profile: a kernel table whose times add up to its total" '
import re, sys
out = sys.argv[1]
assert "causal" in out.splitlines()[1], out
table = out[out.index("per-kernel time over 1 forward pass:"):].splitlines()[2:]
rows = [r.split() for r in table if r.strip()]
assert rows[-1][0] == "total", rows
kernels = {r[0]: (int(r[1]), float(r[2])) for r in rows[:-1]}
for k in ("gemm:in_projection", "gemm:out_projection", "gemm:feed_forward", "layernorm"):
    assert k in kernels and kernels[k][0] > 0, (k, kernels)
assert kernels["gemm:in_projection"][0] == 2 and kernels["layernorm"][0] == 4, kernels
assert abs(sum(t for _, t in kernels.values()) - float(rows[-1][1])) < 0.01 * len(kernels), rows
' "$out"
# A non-finite output keeps every --json key: checksum and mean_abs null, with the count.
mknpy "$tmp/nan.npy" '<f4' '(1, 2, 32)' "float('nan')"
json=$("$encode" --model "$model" --input "$tmp/nan.npy" --json 2>/dev/null)
check "--json on a NaN output: checksum and mean_abs null, non_finite 64" '
import json, sys
j = json.loads(sys.argv[1])
assert j["checksum"] is None and j["mean_abs"] is None and j["non_finite"] == 64, j
assert j["shape"] == [1, 2, 32], j
' "$json"
expect 0 "(64 non-finite values)" -- "$encode" --model "$model" --input "$tmp/nan.npy"

echo "--- encode against PyTorch (golden outputs, tolerance 1e-4)"
for case in enc_post_ln_relu enc_key_padding enc_tokens enc_causal enc_bf16_weights; do
    dir="$golden/$case"
    args=(--model "$dir/model.safetensors" --output "$tmp/$case.npy")
    [ -f "$dir/input.npy" ] && args+=(--input "$dir/input.npy")
    [ -f "$dir/tokens.npy" ] && args+=(--tokens "$dir/tokens.npy")
    [ -f "$dir/key_padding_mask.npy" ] && args+=(--mask "$dir/key_padding_mask.npy")
    grep -q '"causal": true' "$dir/meta.json" && args+=(--causal)
    shape=$(python3 -c 'import ast, struct, sys
raw = open(sys.argv[1], "rb").read()
print(list(ast.literal_eval(raw[10:10 + struct.unpack("<H", raw[8:10])[0]].decode())["shape"]))' \
        "$dir/out.npy")
    expect 0 "output:        $shape" -- "$encode" "${args[@]}"
    expect 0 "max abs difference" -- "$compare" "$tmp/$case.npy" "$dir/out.npy" 1e-4
done

echo "--- npy_compare compares shapes, not only element counts"
mknpy "$tmp/a23.npy" '<f4' '(2, 3)' 1
mknpy "$tmp/a32.npy" '<f4' '(3, 2)' 1
mknpy "$tmp/a6.npy" '<f4' '(6,)' 1
expect 1 "shapes differ: $tmp/a23.npy is (2, 3), $tmp/a32.npy is (3, 2)" -- \
    "$compare" "$tmp/a23.npy" "$tmp/a32.npy" 0
expect 1 "is (2, 3), $tmp/a6.npy is (6,)" -- "$compare" "$tmp/a23.npy" "$tmp/a6.npy" 0
expect 0 "max abs difference 0 over 6 elements" -- "$compare" "$tmp/a23.npy" "$tmp/a23.npy" 0

echo "--- flops: the experiment's counts (the paper's section 3.2.2) from a batch-1 run, times 32"
out=$("$flops" --batch 1 --seq 1024 --dim 512 --heads 8 2>&1)
rc=$?
single=$(awk '/^single head without W\^O/ {print $5}' <<<"$out")
multi=$(awk '/^multi-head \(8 heads\) with W\^O/ {print $6}' <<<"$out")
multi_id=$(awk '/^multi-head \(8 heads\) without W\^O/ {print $6}' <<<"$out")
if [ "$rc" -eq 0 ] && [ "$((single * 32))" -eq 60129542144 ] &&
    [ "$((multi * 32))" -eq 68719476736 ] && [ "$((multi_id * 32))" -eq 60129542144 ]; then
    echo "ok:   flops counted $single, $multi, $multi_id at batch 1 (x32 = the expected figures)"
else
    echo "FAIL: flops counted '$single' '$multi' '$multi_id' (exit $rc)"
    sed 's/^/    /' <<<"$out" | head -30
    failures=$((failures + 1))
fi
expect 0 "C-ff4096" -- "$flops" --table
expect 0 "214.2M   213M" -- "$flops" --table   # the whole big model beside the paper's count
expect 2 "--dim must be divisible by --heads" -- "$flops" --dim 10 --heads 4
expect 1 "the input [1073741824, 1073741824, 1024] is too large for the device" -- \
    timeout 60 "$flops" --batch 1073741824 --seq 1073741824 --dim 1024 --heads 8

echo "--- permutation: the experiment's two facts (the paper's section 3.5)"
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
