#!/usr/bin/env python3
"""One 8192-token text through examples/embed: its time and the process's peak memory, for the
long-context families (NomicBERT as nomic-embed-text-v1.5, JinaBERT as
jina-embeddings-v2-base-en), each at its real size with seeded random weights in the folder
layout, config keys and tensor names of the real checkpoint (the weights' values do not change
the time or the memory). The target (issue 22): one such text within 1 GiB.

usage: ~/.cache/clattn/venv-mpnet/bin/python bench/long_input.py --embed build/examples/embed
       [--tokenizer DIR] [--families nomic,jina] [--repeat 3] [--out FILE.md] [--work DIR]
--tokenizer: a folder with BERT's uncased tokenizer.json (all-MiniLM-L6-v2's, as
tools/fetch-model.sh fetches it; both families use bert-base-uncased's vocabulary).
Needs numpy and safetensors (the venv of tools/gen_mpnet_golden.py). Writes a Markdown table
(and the raw JSON after it) to --out, default bench/results/long_input.md.
"""
import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import time

import numpy as np
from safetensors.numpy import save_file

HIDDEN, HEADS, LAYERS, INNER, VOCAB = 768, 12, 12, 3072, 30528
MAX_TOKENS = 8192


def nomic_folder(folder, rng):
    """nomic-embed-text-v1.5's configuration (its config.json's keys, as
    tools/gen_nomic_golden.py writes them) and tensor names."""
    config = {
        "activation_function": "swiglu", "architectures": ["NomicBertModel"],
        "causal": False, "layer_norm_epsilon": 1e-12, "max_trained_positions": 2048,
        "mlp_fc1_bias": False, "mlp_fc2_bias": False, "model_type": "nomic_bert",
        "n_embd": HIDDEN, "n_head": HEADS, "n_inner": INNER, "n_layer": LAYERS,
        "n_positions": MAX_TOKENS, "pad_vocab_size_multiple": 64, "prenorm": False,
        "qkv_proj_bias": False, "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0,
        "rotary_emb_interleaved": False, "rotary_emb_scale_base": None,
        "rotary_scaling_factor": None, "type_vocab_size": 2, "use_rms_norm": False,
        "parallel_block": False, "vocab_size": VOCAB,
    }
    t = {"embeddings.word_embeddings.weight": w(rng, VOCAB, HIDDEN),
         "embeddings.token_type_embeddings.weight": w(rng, 2, HIDDEN),
         "emb_ln.weight": ones(HIDDEN), "emb_ln.bias": zeros(HIDDEN)}
    for i in range(LAYERS):
        p = f"encoder.layers.{i}."
        t[p + "attn.Wqkv.weight"] = w(rng, 3 * HIDDEN, HIDDEN)
        t[p + "attn.out_proj.weight"] = w(rng, HIDDEN, HIDDEN)
        t[p + "mlp.fc11.weight"] = w(rng, INNER, HIDDEN)
        t[p + "mlp.fc12.weight"] = w(rng, INNER, HIDDEN)
        t[p + "mlp.fc2.weight"] = w(rng, HIDDEN, INNER)
        for n in ("norm1", "norm2"):
            t[p + n + ".weight"], t[p + n + ".bias"] = ones(HIDDEN), zeros(HIDDEN)
    return config, t


def jina_folder(folder, rng):
    """jina-embeddings-v2-base-en's configuration and tensor names (JinaBERT: ALiBi, GeGLU)."""
    config = {
        "architectures": ["JinaBertForMaskedLM"], "attention_probs_dropout_prob": 0.0,
        "feed_forward_type": "geglu", "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN, "initializer_range": 0.02, "intermediate_size": INNER,
        "layer_norm_eps": 1e-12, "max_position_embeddings": MAX_TOKENS, "model_type": "bert",
        "num_attention_heads": HEADS, "num_hidden_layers": LAYERS, "pad_token_id": 0,
        "position_embedding_type": "alibi", "type_vocab_size": 2, "vocab_size": VOCAB,
    }
    t = {"embeddings.word_embeddings.weight": w(rng, VOCAB, HIDDEN),
         "embeddings.token_type_embeddings.weight": w(rng, 2, HIDDEN),
         "embeddings.LayerNorm.weight": ones(HIDDEN), "embeddings.LayerNorm.bias": zeros(HIDDEN)}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            t[p + f"attention.self.{n}.weight"] = w(rng, HIDDEN, HIDDEN)
            t[p + f"attention.self.{n}.bias"] = zeros(HIDDEN)
        t[p + "attention.output.dense.weight"] = w(rng, HIDDEN, HIDDEN)
        t[p + "attention.output.dense.bias"] = zeros(HIDDEN)
        t[p + "attention.output.LayerNorm.weight"] = ones(HIDDEN)
        t[p + "attention.output.LayerNorm.bias"] = zeros(HIDDEN)
        t[p + "mlp.gated_layers.weight"] = w(rng, 2 * INNER, HIDDEN)
        t[p + "mlp.wo.weight"] = w(rng, HIDDEN, INNER)
        t[p + "mlp.wo.bias"] = zeros(HIDDEN)
        t[p + "mlp.layernorm.weight"] = ones(HIDDEN)
        t[p + "mlp.layernorm.bias"] = zeros(HIDDEN)
    return config, t


FAMILIES = {"nomic": ("nomic-embed-text-v1.5 size", nomic_folder),
            "jina": ("jina-embeddings-v2-base-en size", jina_folder)}


def w(rng, *shape):
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


def ones(n):
    return np.ones(n, np.float32)


def zeros(n):
    return np.zeros(n, np.float32)


def write_folder(folder, family, tokenizer_dir):
    config, tensors = FAMILIES[family][1](folder, np.random.default_rng(0))
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), folder)
    with open(os.path.join(folder, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": MAX_TOKENS, "do_lower_case": False}, f)
    with open(os.path.join(folder, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type":
                    "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type":
                    "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type":
                    "sentence_transformers.models.Normalize"}], f)
    with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True}, f)
    params = sum(t.size for t in tensors.values())
    return params


def long_text():
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly hex "
             "jovial boxers near an old stone bridge").split()
    rng = random.Random(1)
    return " ".join(rng.choice(words) for _ in range(MAX_TOKENS + 500))


def run_once(embed, folder, text_file):
    """Seconds (embed's own, model loaded) and the peak resident memory in MiB of one process
    (GNU time's %M)."""
    output = os.path.join(os.path.dirname(text_file), "out.npy")
    start = time.time()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", embed, "--model", folder, "--input",
                          text_file, "--output", output, "--json"],
                         check=True, capture_output=True, text=True)
    wall = time.time() - start
    peak_kib = int(out.stderr.strip().splitlines()[-1])
    result = json.loads(out.stdout)
    return {"seconds": result["seconds"], "load_s": result["load_s"], "tokens": result["tokens"],
            "wall_s": round(wall, 2), "peak_mib": round(peak_kib / 1024, 1)}


def cpu_info():
    model, flags = "unknown", "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and flags == "unknown":
                    flags = line.split(":", 1)[1].strip()
    except OSError:
        pass
    keep = [f for f in flags.split() if f.startswith(("avx", "fma", "amx"))]
    return model, " ".join(keep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embed", required=True)
    ap.add_argument("--tokenizer", default=os.path.expanduser(
        os.path.join(os.environ.get("CLATTN_MODEL_CACHE", "~/.cache/clattn"), "all-MiniLM-L6-v2")))
    ap.add_argument("--families", default="nomic,jina")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/clattn/long-input-bench"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "long_input.md"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    text_file = os.path.join(args.work, "text.txt")
    with open(text_file, "w") as f:
        f.write(long_text() + "\n")
    rows = []
    for family in args.families.split(","):
        folder = os.path.join(args.work, family)
        params = write_folder(folder, family, args.tokenizer)
        runs = [run_once(args.embed, folder, text_file) for _ in range(args.repeat)]
        row = {"family": family, "model": FAMILIES[family][0], "params": params,
               "tokens": runs[0]["tokens"],
               "seconds": statistics.median(r["seconds"] for r in runs),
               "load_s": statistics.median(r["load_s"] for r in runs),
               "peak_mib": max(r["peak_mib"] for r in runs), "runs": runs}
        rows.append(row)
        print(json.dumps(row))
    device = subprocess.run([args.embed, "--model", os.path.join(args.work, rows[0]["family"]),
                             "--json", "x"], check=True, capture_output=True,
                            text=True)
    device = json.loads(device.stdout)["device"]
    model, flags = cpu_info()
    with open(args.out, "w") as f:
        f.write("# One 8192-token text: time and peak memory (`bench/long_input.py`)\n\n")
        f.write(f"Machine: {model}, {os.cpu_count()} cores ({platform.machine()}), CPU flags: "
                f"{flags}. Device: {device}. `examples/embed` on one text truncated to 8192 "
                f"tokens, each run its own process; time: embed's own seconds (model loaded, "
                f"median of {args.repeat}); memory: the process's peak resident set (the "
                f"largest of the runs), the loading of the weights included. Random weights "
                f"at the real models' sizes (768 wide, 12 layers of 12 heads, d_ff 3072).\n\n")
        f.write("| model | parameters | weights (f32) | tokens | seconds | tokens/s | "
                "peak memory | within 1 GiB |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['model']} | {r['params'] / 1e6:.0f} M | "
                    f"{r['params'] * 4 / 2**20:.0f} MiB | {r['tokens']} | "
                    f"{r['seconds']:.1f} | {r['tokens'] / r['seconds']:.0f} | "
                    f"{r['peak_mib']:.0f} MiB | {'yes' if r['peak_mib'] <= 1024 else 'NO'} |\n")
        f.write("\n```json\n" + json.dumps(rows, indent=1) + "\n```\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
