#!/usr/bin/env python3
"""Writes tests/golden/prompts/: sentence-transformers' embeddings of texts with prompts, on the
real all-MiniLM-L6-v2 given prompts as config_sentence_transformers.json would give them.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_prompt_golden.py [MODEL_DIR]
           [--out DIR]

MODEL_DIR is tools/fetch-model.sh's folder (default ${CLATTN_MODEL_CACHE:-~/.cache/clattn}/
all-MiniLM-L6-v2). Needs sentence-transformers and numpy: the venv every generator runs from,
made by tools/make-golden-venv.sh (tests/golden/README.md); no network (HF_HUB_OFFLINE). The
committed files were made with sentence-transformers 2.7.0 over torch 1.13: the venv's versions
give the same embeddings within 3e-7 (float32 rounding). The model folder itself has no prompts: the test copies
DIR/config_sentence_transformers.json into a folder of links to the model's files, and the
model here is given the same prompts through SentenceTransformer(prompts=...,
default_prompt_name=...), which is what sentence-transformers does with that file's keys.

DIR (default tests/golden/prompts) receives:
  config_sentence_transformers.json  the prompts: query, passage, empty (""); default "query"
  texts.txt          the texts, one per line (one long enough to be truncated at 256 tokens,
                     so that the prompt's tokens count toward the length)
  default.npy        float32 [n, 384]: encode(texts) (the default prompt, "query: ")
  passage.npy        encode(texts, prompt_name="passage")
  custom.npy         encode(texts, prompt="Represent this sentence for retrieval: ")
  none.npy           encode(texts, prompt="") (no prompt)
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

PROMPTS = {"query": "query: ", "passage": "passage: ", "empty": ""}
DEFAULT = "query"
CUSTOM = "Represent this sentence for retrieval: "
TEXTS = [
    "A man is eating food.",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "",
    "The quick brown fox jumps over the lazy dog.",
    " ".join(["embedding"] + ["word%d" % i for i in range(300)]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?",
                    default=os.path.join(os.environ.get("CLATTN_MODEL_CACHE",
                                                        os.path.expanduser("~/.cache/clattn")),
                                         "all-MiniLM-L6-v2"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "golden", "prompts"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    model = SentenceTransformer(args.model, device="cpu", prompts=PROMPTS,
                                default_prompt_name=DEFAULT)
    with open(os.path.join(args.out, "config_sentence_transformers.json"), "w") as f:
        json.dump({"__version__": {"sentence_transformers": sentence_transformers.__version__},
                   "prompts": PROMPTS, "default_prompt_name": DEFAULT}, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "texts.txt"), "w") as f:
        f.write("\n".join(TEXTS) + "\n")
    runs = {"default": {}, "passage": {"prompt_name": "passage"}, "custom": {"prompt": CUSTOM},
            "none": {"prompt": ""}}
    for name, kwargs in runs.items():
        rows = model.encode(TEXTS, convert_to_numpy=True, batch_size=len(TEXTS), **kwargs)
        np.save(os.path.join(args.out, name + ".npy"), rows.astype(np.float32))
    print("wrote", args.out, "sentence-transformers", sentence_transformers.__version__)


if __name__ == "__main__":
    main()
